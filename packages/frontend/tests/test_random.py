"""Random draws while tracing: nodes that draw at run time (never frozen constants), sized by traced
shapes, equal to the eager function's draws for the same seed; and no traced value ever reaching
NumPy's compiled random code (it once crashed the interpreter)."""

import subprocess
import sys
import textwrap

import numpy as np
import numtrace as nt
import pytest

X, X2 = np.ones((3, 4)), np.ones((5, 4))


def _ops(traced):
    return [n.op for n in traced.graph.nodes]


def test_generator_draw_sized_by_traced_shape_does_not_crash(backend):
    # A segfault would kill the test process, so the program runs in a child process.
    code = f"backend = {backend!r}\n" + textwrap.dedent("""
        import numpy as np, numtrace as nt
        def f(x):
            g = np.random.default_rng()
            return x + g.normal(size=x.shape)
        class Holder:
            rng = np.random.default_rng(0)
        def g(x):  # a generator the tracer does not intercept: traced dims reach NumPy's compiled code
            return x + Holder.rng.normal(size=x.shape) + np.random.RandomState(0).normal(size=x.shape)
        x = np.ones((3, 4))
        assert nt.trace(f, (x,), check_trace=False, backend=backend)(np.ones((5, 4))).shape == (5, 4)
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            nt.trace(g, (x,), check_trace=False, backend=backend)
        assert any("does not intercept" in str(w.message) for w in caught), caught
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])


def test_unintercepted_draw_warns_that_it_becomes_a_constant(backend):
    class Holder:
        rng = np.random.default_rng(0)

    with pytest.warns(nt.TracerWarning, match="does not intercept"):
        traced = nt.trace(lambda x: x + Holder.rng.normal(size=x.shape), (X,), check_trace=False,
                          backend=backend)
    assert "prim.Constant" in _ops(traced)


def test_legacy_draws_follow_shapes_and_the_global_seed(backend):
    def f(x):
        return (x * np.random.random(x.shape) + np.random.randn(*x.shape)
                + np.random.normal(1.0, 2.0, size=(x.shape[0], 1)) + np.random.randint(0, 3, size=x.shape[1]))

    traced = nt.trace(f, (X,), backend=backend, check_trace=False)
    drawn = {"np.random.random", "np.random.randn", "np.random.normal", "np.random.randint"}
    assert drawn <= set(_ops(traced))
    for x in (X, X2):
        np.random.seed(7)
        got = traced(x)
        np.random.seed(7)
        np.testing.assert_array_equal(got, f(x))
    assert not np.array_equal(traced(X), traced(X))


def test_seeded_generator_made_inside_draws_like_the_eager_function(backend):
    def f(x):
        g = np.random.default_rng(42)
        a = g.normal(size=x.shape) + g.random(x.shape, dtype=np.float32)
        return x + a + g.integers(0, 5, size=x.shape[1]) + g.uniform(-1.0, 1.0, size=(x.shape[0], 1)), \
            x[:1, :1] + g.standard_normal()

    traced = nt.trace(f, (X,), backend=backend)  # the checker passes: the trace is deterministic
    assert "prim.Constant" in _ops(traced) and "np.random.Generator.normal" in _ops(traced)
    for x in (X, X2, X):  # every call starts from the seed, as a call of f does
        for got, want in zip(traced(x), f(x)):
            np.testing.assert_array_equal(got, want)


def test_unseeded_generator_made_inside_draws_fresh_values_and_the_checker_warns():
    def f(x):
        return x + np.random.default_rng().normal(size=x.shape)

    with pytest.warns(nt.TracerWarning) as record:
        traced = nt.trace(f, (X,), backend="reference")
    messages = [str(w.message) for w in record]
    assert any("nondeterministic nodes" in m and "np.random.default_rng" in m
               and "np.random.Generator.normal" in m for m in messages), messages
    assert not np.array_equal(traced(X), traced(X))
    assert traced(X2).shape == (5, 4)


_GLOBAL_RNG = np.random.default_rng(3)


def test_closed_over_and_global_generators_are_recorded(backend):
    rng = np.random.default_rng(5)

    def f(x):
        return x + rng.standard_normal(x.shape) + _GLOBAL_RNG.uniform(size=(x.shape[0], 1))

    state = rng.bit_generator.state
    traced = nt.trace(f, (X,), backend=backend, check_trace=False)
    assert {"np.random.Generator.standard_normal", "np.random.Generator.uniform"} <= set(_ops(traced))
    assert rng.bit_generator.state != state  # tracing drew from the user's generator, as a call would
    assert type(rng) is np.random.Generator and type(_GLOBAL_RNG) is np.random.Generator  # restored
    assert traced(X2).shape == (5, 4) and not np.array_equal(traced(X), traced(X))


_RNG_TUPLE = (np.random.default_rng(6),)
_RNG_STATE = {"rngs": [np.random.default_rng(7)], "pair": (None, np.random.default_rng(8))}


class _HoldsGenerators:
    def __init__(self):
        self.rngs = (np.random.default_rng(9),)
        self._rng = np.random.default_rng(10)

    def rng(self):
        return self._rng


_HOLDER = _HoldsGenerators()


@pytest.mark.parametrize("f", [
    lambda x: x + _RNG_TUPLE[0].random(),
    lambda x: x + _RNG_STATE["rngs"][0].normal(),
    lambda x: x + _RNG_STATE["pair"][1].integers(0, 1 << 30),
    lambda x: x + _HOLDER.rngs[0].random(),
    lambda x: x + _HOLDER.rng().integers(0, 1 << 30),
    lambda x: x + _RNG_TUPLE[0].random(x.shape),
], ids=["tuple", "list-in-dict", "tuple-in-dict", "tuple-attribute", "method-return", "array-from-tuple"])
def test_single_draws_from_generators_reached_through_containers_and_methods_are_recorded(backend, f):
    holders = (_RNG_TUPLE, _RNG_STATE["rngs"], _RNG_STATE["pair"], _HOLDER.rngs)
    traced = nt.trace(f, (X,), backend=backend, check_trace=False)
    assert any(op.startswith("np.random.Generator.") for op in _ops(traced))
    assert not np.array_equal(traced(X), traced(X))   # a draw per call, never a frozen constant
    assert (_RNG_TUPLE, _RNG_STATE["rngs"], _RNG_STATE["pair"], _HOLDER.rngs) == holders   # restored
    assert all(type(g) is np.random.Generator for g in (*_RNG_TUPLE, *_RNG_STATE["rngs"], _HOLDER._rng))


def test_generator_methods_numtrace_cannot_record_are_refused():
    with pytest.raises(NotImplementedError, match="Generator.choice cannot be traced"):
        nt.trace(lambda x: x + np.random.default_rng(0).choice(4, size=x.shape), (X,))


def test_random_nodes_save_and_load(tmp_path):
    def f(x):
        g = np.random.default_rng(1)
        return x + g.normal(size=x.shape)

    traced = nt.trace(f, (X,), backend="reference")
    path = tmp_path / "f.nt"
    traced.save(str(path))
    loaded = nt.load(str(path), backend="reference")
    np.testing.assert_array_equal(loaded(X2), f(X2))


@pytest.mark.skipif("triton" not in nt.available_backends(), reason="triton is not installed")
def test_triton_draws_on_numpys_generator_as_a_host_step():
    traced = nt.trace(lambda x: x + np.random.random(x.shape), (X,), backend="reference", check_trace=False)
    on_triton = traced.to("triton")
    np.random.seed(3)
    expected = X + np.random.random(X.shape)
    np.random.seed(3)
    np.testing.assert_array_equal(on_triton(X), expected)
    assert "host step: np.random.random" in on_triton.explain()
