"""Hunt in the full float sum/mean whose one row the thread team shares in rows of a block
(FusedKernel._run_split_row): the same bits at any thread count, NaN signs included."""

import numpy as np
import pytest
from numtrace_ir.types import TensorType
from test_fast_paths import _compile, _const, _op
from test_reductions import _threads

N = 400_003   # one instruction and one reduction: 3 * N element-instructions, above the team's minimum


def _compiled(dtype, op, mode, tmp_path, monkeypatch):
    from numtrace_cpu import compiler
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path))
    old = compiler.set_mode(mode)
    try:
        return _compile([TensorType(np.dtype(dtype), (N,))],
                        lambda g, a: [_op(g, op, _op(g, "np.multiply", a, _const(g, 2.0)))])
    finally:
        compiler.set_mode(old)


@pytest.mark.usefixtures("numpy_quiet")   # NaN on purpose
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["np.sum", "np.mean"])
@pytest.mark.parametrize("mode", ["sync", "off"])
def test_nan_signs_in_two_blocks_give_one_threads_bits(dtype, op, mode, tmp_path, monkeypatch):
    """A +NaN and a -NaN in different blocks of the row: the block sums were added as
    `acc.s += bs` on one thread (the compiler took the later block's NaN) but in order from the
    calling thread's total on a team (the earlier one's), so 1 and 2 threads gave NaNs of opposite
    signs. Both now keep the first NaN (nt_gen_add), as the column sums do."""
    exe = _compiled(dtype, op, mode, tmp_path, monkeypatch)
    x = np.linspace(0.1, 1.0, N).astype(dtype)
    for first, second in [(10, 5000), (5000, 10), (600, 1100), (10, N - 3), (N - 3, 10)]:
        v = x.copy()
        v[first], v[second] = np.nan, -np.nan
        got = {}
        for threads in (1, 2, 3):
            with _threads(threads):
                (got[threads],) = exe(v)
        assert all(g.tobytes() == got[1].tobytes() for g in got.values()), (first, second, got)
        assert np.isnan(got[1]) and bool(np.signbit(got[1])) == (first > second)
    assert exe.stats()["split_row_runs"] == 10


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [131_072, 131_073, 512 * 300 - 1])
def test_split_row_with_an_output_a_reversed_and_a_broadcast_operand(dtype, n):
    """A pass that also writes an elementwise result, reads its row backwards (negative stride) and a
    one-element operand (stride 0), from the team's threshold on: one thread's bits, NumPy's values."""
    dtype = np.dtype(dtype)

    def body(g, a, c):
        e = _op(g, "np.multiply", a, c)
        for _ in range(3):   # enough element-instructions for the team at 131,072 elements
            e = _op(g, "np.add", _op(g, "np.multiply", e, _const(g, 0.5)), a)
        return [e, _op(g, "np.sum", e), _op(g, "np.mean", _op(g, "np.subtract", e, a))]

    exe = _compile([TensorType(dtype, (n,)), TensorType(dtype, (1,))], body)
    x = np.random.default_rng(3).standard_normal(n + 5).astype(dtype)[::-1][2:n + 2]
    c = np.array([1.25], dtype)
    with _threads(1):
        want = exe(x, c)
    with _threads(2):
        got = exe(x, c)
    assert exe.stats()["split_row_runs"] == 1
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    e = x * c
    for _ in range(3):
        e = e * dtype.type(0.5) + x
    np.testing.assert_array_equal(got[0], e)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got[1], np.sum(e), rtol=rtol)
    np.testing.assert_allclose(got[2], np.mean(e - x), rtol=rtol)
