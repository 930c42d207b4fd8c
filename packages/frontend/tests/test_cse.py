"""Common subexpressions: an expression the code computes twice is one node of the recorded graph (so
every backend runs it once, and `stats()` counts it), and the traced call still returns what NumPy
returns, including where merging would be wrong (draws, host calls, writes, results that must stay
separate arrays)."""

import numpy as np
import numtrace as nt
import pytest


def layer_norm(x):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def returned_twice(x):
    return x + 1.0, x + 1.0   # NumPy gives two arrays: writing into one leaves the other


def returned_and_viewed(x):
    return (x * 2.0).reshape(-1), x * 2.0


def copies_written(x):
    a, b = x.copy(), x.copy()
    a[0] = 5.0
    b[..., 1] = -1.0
    return a + b, a, b


def argument_written(x):
    t = x * 2.0   # the same expression as the argument's new contents, read after the write
    x[...] = x * 2.0
    return t + x


def argument_written_partly(x, y):
    t = x + y
    x += y
    x[0] = 0.0
    return t, (x + y) * 1.0


def signed_constants(x):
    return x * -0.0 + x * 0.0, np.where(x > 0.5, np.float64(-0.0), 0.0)


def two_draws(x):
    rng = np.random.default_rng(7)
    return x + rng.normal(size=x.shape), x + rng.normal(size=x.shape)


def views_then_writes(x):
    v, w = x.T, x.T
    v[0] = 3.0
    return w * 1.0, v + 0.0


def axes_and_dtypes(x):
    a = x.sum(axis=0, keepdims=True) - x.sum(axis=0, keepdims=True) * 2.0
    b = x.sum(axis=1, keepdims=True)
    c = (x.astype(np.float32) + 1) * (x.astype(np.float32) + 1)
    return a + b, c, x.astype(np.float64) + 1 + c


PROGRAMS = [layer_norm, returned_twice, returned_and_viewed, copies_written, argument_written,
            argument_written_partly, signed_constants, two_draws, views_then_writes, axes_and_dtypes]


def _args(fn, n, seed):
    r = np.random.default_rng(seed)
    count = fn.__code__.co_argcount
    return [r.standard_normal((n, 4)) for _ in range(count)]


def _call(fn, args):
    out = fn(*args)
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.triton
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_merged_programs_match_numpy(fn, backend):
    traced = nt.trace(fn, tuple(_args(fn, 3, 0)), backend=backend, check_trace=False)
    for n, seed in ((3, 1), (5, 2), (1, 3)):
        want_args, got_args = _args(fn, n, seed), _args(fn, n, seed)
        want = _call(fn, want_args)
        if backend == "triton" and fn is two_draws:   # Triton refuses random draws, clearly
            with pytest.raises(NotImplementedError, match="random draws"):
                traced(*got_args)
            return
        got = _call(traced, got_args)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert w.dtype == g.dtype and w.shape == g.shape
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
        for w, g in zip(want_args, got_args):
            np.testing.assert_array_equal(g, w)
        # The results are as independent as NumPy's: those NumPy returns as separate arrays share no
        # memory, so writing into one changes no other.
        for i, a in enumerate(got):
            for j, b in enumerate(got[:i]):
                if not np.shares_memory(want[i], want[j]):
                    assert not np.shares_memory(a, b), f"results {j} and {i} share memory"


def test_layer_norm_computes_x_minus_mu_once(backend):
    x = np.random.default_rng(0).standard_normal((4, 8))
    traced = nt.trace(layer_norm, (x,), backend=backend)
    assert [n.op for n in traced.graph].count("np.subtract") == 1
    assert traced.stats()["cse_merged"] >= 1
    np.testing.assert_allclose(traced(x), layer_norm(x), rtol=1e-12)


def test_nothing_to_merge_counts_zero(backend):
    traced = nt.trace(lambda x: np.exp(x) + 1.0, (np.ones(3),), backend=backend)
    assert traced.stats()["cse_merged"] == 0


def test_merged_counts_and_what_stays_apart(backend):
    x = np.random.default_rng(0).standard_normal((3, 4))
    ops = {fn.__name__: [n.op for n in nt.trace(fn, (x,), backend=backend, check_trace=False).graph]
           for fn in (returned_twice, two_draws, axes_and_dtypes, signed_constants)}
    assert ops["returned_twice"].count("np.add") == 2   # both returned: two arrays
    assert ops["two_draws"].count("np.random.Generator.normal") == 2
    assert ops["axes_and_dtypes"].count("np.sum") == 2   # axis 0 twice is one, axis 1 another
    assert ops["axes_and_dtypes"].count("np.astype") == 2   # to float32 once, to float64
    assert ops["axes_and_dtypes"].count("np.add") == 4   # 5 written, the float32 one twice
    traced = nt.trace(axes_and_dtypes, (x,), backend=backend)
    assert traced.stats()["cse_merged"] == 3   # sum(axis=0), astype(float32) and its + 1


def test_host_calls_and_guards_are_never_merged(backend):
    def fn(x):
        spectrum = np.abs(np.fft.rfft(x)) + np.abs(np.fft.rfft(x))   # a host call each
        return spectrum * float(x.sum()) * float(x.sum())            # a guard each

    x = np.arange(8.0)
    with pytest.warns(nt.TracerWarning):
        traced = nt.trace(fn, (x,), backend=backend, check_trace=False)
    ops = [n.op for n in traced.graph]
    # A guard on each host call's input shape and on each float(): none merged.
    assert ops.count("prim.host_call") == 2 and ops.count("prim.guard") == 4
    assert ops.count("np.absolute") == 2   # the host calls' results differ as far as the graph knows
    np.testing.assert_allclose(traced(x), fn(x), rtol=1e-12)


def test_traced_module_method_counts_merges(backend):
    class Norm(nt.Module):
        def forward(self, x):
            return layer_norm(x)

    x = np.random.default_rng(0).standard_normal((2, 6))
    traced = nt.trace_module(Norm(), {"forward": x}, backend=backend)
    assert traced.forward.stats()["cse_merged"] >= 1
    np.testing.assert_allclose(traced(x), layer_norm(x), rtol=1e-12)
