"""Products on the packed kernels (two run-time values from RUNTIME_MIN_ROWS rows of A, or module
state) against eager NumPy where the product's fused epilogue (bias, residual) reads a value the
program updated in place, which the plan writes into the caller's own array."""

import numpy as np
import numtrace as nt
import pytest


def _close(got, want, k):
    """Equal to NumPy within float rounding of a k-term sum (NaN where NumPy has NaN)."""
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        ok = ~np.isnan(w)
        eps = np.finfo(w.dtype).eps
        assert np.all(np.abs(g[ok] - w[ok]) <= 4 * (k + 2) * eps * (np.abs(w[ok]) + k))


def _update_then_residual(x, w):
    x += 1
    return x @ w + x


def _update_then_bias_relu(x, w, b):
    b *= 2
    x -= 0.5
    return np.maximum(x @ w + b + x, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [_update_then_residual, _update_then_bias_relu])
def test_epilogue_reads_an_input_updated_in_place(fn, dtype, backend):
    """The updated input is written in place (the program writes it back) and the product's fused
    epilogue reads it: the epilogue must read the updated memory, not a value the plan dropped."""
    rng = np.random.default_rng(0)

    def args(rows):
        out = [rng.standard_normal((rows, 30)).astype(dtype), rng.standard_normal((30, 30)).astype(dtype)]
        return out + [rng.standard_normal(30).astype(dtype)] * (fn.__code__.co_argcount - 2)
    traced = nt.trace(fn, tuple(a.copy() for a in args(16)), check_trace=False, backend=backend)
    for rows in (16, 8, 9, 40, 257, 3):
        given = args(rows)
        mine, theirs = [a.copy() for a in given], [a.copy() for a in given]
        _close(traced(*mine), fn(*theirs), 30)
        for m, t in zip(mine, theirs):
            _close(m, t, 30)


def test_module_updates_its_bias_in_place_before_the_product(backend):
    """A parameter the forward updates in place (written back to the module) is the fused bias."""
    rng = np.random.default_rng(1)

    class Drift(nt.Module):
        def __init__(self):
            super().__init__()
            self.w = nt.Parameter(rng.standard_normal((30, 20)).astype(np.float32))
            self.b = nt.Parameter(rng.standard_normal(20).astype(np.float32))

        def forward(self, x):
            self.b += 0.25
            return np.maximum(x @ self.w + self.b, 0)

    mine, theirs = Drift(), Drift()
    theirs.load_state_dict(mine.state_dict())
    traced = nt.trace_module(mine, {"forward": (rng.standard_normal((16, 30)).astype(np.float32),)},
                             check_trace=False, backend=backend)
    theirs.load_state_dict(mine.state_dict())
    for rows in (16, 9, 40):
        x = rng.standard_normal((rows, 30)).astype(np.float32)
        _close(traced(x), theirs(x), 30)
        _close(mine.b, theirs.b, 30)


@pytest.mark.parametrize("op", ["bias", "residual"])
def test_packed_step_without_its_epilogue_value_takes_the_fallback(op):
    """An epilogue value missing from the environment (None) goes to the NumPy fallback, which raises;
    the kernel never applies the op to a null pointer."""
    blocks = pytest.importorskip("numtrace_cpu.isa").blocks
    called = []
    step = blocks.PackedMatmul(0, 1, 2, np.float32, [(op, 3)], fallback=lambda env, n: called.append(n))
    x, w = np.ones((16, 40), np.float32), np.ones((40, 40), np.float32)
    step([x, w, np.empty((16, 40), np.float32), None], 1)
    assert called == [1]
