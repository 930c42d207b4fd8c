"""Hunt in var/std taking a sum's block sums, and in transposed run-time B packed through register
transposes: the cases the change's own tests leave out. Sharing: a sum (not a mean) beside the var,
several var/std with different ddof (ddof > n included) reading one sum, a var folded before the mean
(which shares nothing), rows of 1 and 2 elements and long rows (threaded), NaN, inf and -0.0 in one
block only. Transposed B: every N and K about the 16-row blocks and 32-column panels, and the
strided and reversed views of it, bit for bit the contiguous B's."""

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir.types import TensorType
from test_fast_paths import _compile, _op
from test_packed import _graph
from test_reductions import _check, _threads

pytestmark = [pytest.mark.usefixtures("numpy_quiet"),   # NaN and inf on purpose
              pytest.mark.filterwarnings("ignore:.*Degrees of freedom")]   # ddof past the row, as NumPy

_STATS = [("np.sum", {}), ("np.var", {}), ("np.std", {"ddof": 1}), ("np.var", {"ddof": 7}),
          ("np.std", {"ddof": 10**6})]


def _stats(t, ops):
    """The reductions `ops` (name, attrs) of one input over its last axis, in one pass."""
    return _compile([t], lambda g, x: [_op(g, name, x, axis=-1, **attrs) for name, attrs in ops])


def _numpy(name, x, attrs):
    return getattr(np, name[3:])(x, axis=-1, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (3, 2), (1, 70001), (2, 131075)], ids=str)
@pytest.mark.parametrize("special", ["none", "nan", "inf", "zeros"])
@pytest.mark.parametrize("threads", [1, 2])
def test_vars_of_every_ddof_beside_a_sum(dtype, shape, special, threads):
    """A sum and four var/std (ddof 0, 1, 7 and more than the row) of one input in one pass give each
    var/std's bits without the sum beside it, and NumPy's values; the specials sit in the last block."""
    dtype = np.dtype(dtype)
    x = (np.random.default_rng(shape[-1]).standard_normal(shape) * 3 + 50).astype(dtype)
    if special == "nan":
        x[..., -1] = np.nan
    elif special == "inf":
        x[0, -1] = np.inf
    elif special == "zeros":
        x[...] = -0.0
    t = TensorType(dtype, shape)
    with _threads(threads):
        together = _stats(t, _STATS)
        got = together(x)
        for (name, attrs), value in zip(_STATS, got):
            if name != "np.sum":
                (alone,) = _stats(t, [(name, attrs)])(x)
                assert value.tobytes() == alone.tobytes(), (name, attrs)
            _check(value, np.asarray(_numpy(name, x, attrs)), x, shape[-1])
    if shape[-1] > 1000:
        assert together.stats()["shared_sum_runs"] > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_var_folded_before_its_mean(dtype):
    """A var listed before the mean of the same input has no sum to take (it folds first): it sums
    itself, and both are NumPy's."""
    dtype = np.dtype(dtype)
    x = (np.random.default_rng(2).standard_normal((2, 50001)) + 10).astype(dtype)
    ops = [("np.var", {"ddof": 1}), ("np.mean", {})]
    exe = _stats(TensorType(dtype, x.shape), ops)
    for (name, attrs), value in zip(ops, exe(x)):
        _check(value, np.asarray(_numpy(name, x, attrs)), x, x.shape[-1])
    assert exe.stats()["shared_sum_runs"] == 0


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_var_beside_a_sum_shares_nothing(dtype):
    """An integer input's sum stays exact and its var (taken in float64) NumPy's."""
    x = np.random.default_rng(3).integers(-2**40 if dtype == np.int64 else -2**20, 2**20, (2, 40001))
    x = x.astype(dtype)
    ops = [("np.sum", {}), ("np.var", {})]
    g = _stats(TensorType(np.dtype(dtype), x.shape), ops)
    total, var = g(x)
    np.testing.assert_array_equal(total, x.sum(-1))
    _check(var, x.var(-1), x, x.shape[-1])


def _transposed_product(m, bt):
    """x @ bt.T on the packed kernels (a run-time B), and the same with B passed contiguous."""
    rng = np.random.default_rng(bt.size)
    x = rng.standard_normal((m, bt.shape[1])).astype(bt.dtype)
    g = _graph(x.shape, bt.T, bt.dtype, constant=False)
    exe = compile_graph(g, [v.type for v in g.inputs])
    (got,) = exe(x, bt.T)
    (want,) = exe(x, np.ascontiguousarray(bt.T))
    return exe, x, got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 15, 16, 17, 31, 33])
def test_transposed_b_every_width_about_the_panels(dtype, k):
    """N = 1..40 for K about the 16-row blocks: bits of the contiguous B, values NumPy's; -0.0, inf
    and NaN in B."""
    for n in range(1, 41):
        bt = np.random.default_rng(n * 100 + k).standard_normal((n, k)).astype(dtype)
        bt.flat[::5] = -0.0
        if n > 3:
            bt[n // 2, k // 2] = np.inf
            bt[n - 1, 0] = np.nan
        exe, x, got, want = _transposed_product(40, bt)
        assert k < 9 or exe.stats()["packed_runtime"] == 1   # K < 9 may be a small-K product
        assert got.tobytes() == want.tobytes(), (n, k)
        ref = x @ bt.T
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        ok = np.isfinite(ref)
        np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-4, atol=1e-4 * k)


@pytest.mark.parametrize("view", ["columns_strided", "rows_reversed", "rows_strided", "rows_broadcast"])
@pytest.mark.parametrize("nk", [(33, 17), (40, 48), (7, 64)], ids=str)
def test_transposed_b_of_a_view(view, nk):
    """B = v.T where v is itself a view (k[:, ::2], k[::-1], k[::3], a broadcast row): its k stride 1
    or not, its column stride any; bits of the contiguous B."""
    n, k = nk
    base = np.random.default_rng(n + k).standard_normal((3 * n, 2 * k)).astype(np.float32)
    v = {"columns_strided": base[:n, ::2], "rows_reversed": base[:n, :k][::-1],
         "rows_strided": base[::3, :k], "rows_broadcast": np.broadcast_to(base[0, :k], (n, k))}[view]
    _, x, got, want = _transposed_product(33, v)
    assert got.tobytes() == want.tobytes()
    np.testing.assert_allclose(got, x @ v.T, rtol=1e-4, atol=1e-4 * k)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kn", [(257, 33), (1000, 47), (1031, 64)], ids=str)
def test_transposed_b_deep_and_constant(kn, threads):
    """K past the product's K blocks (a block may start off a 16-row boundary), run-time and constant
    B = w.T, one and two threads: bits of the contiguous B, values NumPy's."""
    k, n = kn
    rng = np.random.default_rng(k)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    with _threads(threads):
        _, x, got, want = _transposed_product(67, bt)
        assert got.tobytes() == want.tobytes()
        np.testing.assert_allclose(got, x @ bt.T, rtol=1e-4, atol=1e-4 * k)
        t = [TensorType(x.dtype, x.shape)]
        (const_t,) = compile_graph(_graph(x.shape, bt.T, np.float32, constant=True), t)(x)
        contiguous = np.ascontiguousarray(bt.T)
        (const_c,) = compile_graph(_graph(x.shape, contiguous, np.float32, constant=True), t)(x)
    assert const_t.tobytes() == const_c.tobytes()
    np.testing.assert_allclose(const_t, x @ bt.T, rtol=1e-4, atol=1e-4 * k)
