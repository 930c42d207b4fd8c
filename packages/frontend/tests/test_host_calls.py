"""Functions the registry lacks: traced through NumPy's own code, or host calls guarded on their input
shapes; never a constant. Each is traced at one input and called at other values and shapes."""

import io
import warnings
import zipfile

import numpy as np
import numtrace as nt
import pytest

HOST_CALL = "is not in numtrace's op registry: it runs as a host call"


def _trace(f, args, backend):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", f".*{HOST_CALL}", nt.TracerWarning)
        return nt.trace(f, args, backend=backend)


def _calls(traced, f, inputs):
    """Call ``traced`` on each input tuple: every result equals eager NumPy's (re-traces allowed)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "numtrace: re-tracing", nt.TracerWarning)
        for args in inputs:
            got, expected = traced(*[a.copy() for a in args]), f(*[a.copy() for a in args])
            for g, e in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
                np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def _vectors(rng, *shapes):
    return tuple(rng.standard_normal(s) for s in shapes)


CASES = {  # name: (function, the shapes of its arguments for a length n)
    "partition": (lambda x: np.partition(x, 2) * 2.0, lambda n: [(n,)]),
    "append": (lambda x, y: np.append(x, y) + 1.0, lambda n: [(n,), (3,)]),
    "cross": (lambda a, b: np.cross(a, b) * 2.0, lambda n: [(n, 3), (n, 3)]),
    "interp": (lambda x, xp: np.interp(x, np.sort(xp), np.sort(xp) ** 2), lambda n: [(n,), (5,)]),
    "convolve": (lambda x, y: np.convolve(x, y), lambda n: [(n,), (3,)]),
    "trapezoid": (lambda x: np.trapezoid(x) + x, lambda n: [(n,)]),
    "gradient": (lambda x: np.gradient(x, 0.5), lambda n: [(n,)]),
    "nonzero": (lambda x: np.nonzero(x > 0)[0] * 2, lambda n: [(n,)]),
    "nanmean": (lambda x: np.nanmean(np.where(x > 1.0, np.nan, x), axis=0), lambda n: [(n, 2)]),
    "pad-edge": (lambda x: np.pad(x, 2, mode="edge"), lambda n: [(n,)]),
    "add.at": (lambda x, y: _add_at(x, y), lambda n: [(n,), (3,)]),
    "sinc": (lambda x: np.sinc(x), lambda n: [(n,)]),
}


def _add_at(x, y):
    np.add.at(x, [0, 2, 0], y)
    return x * 2.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_without_an_op_follows_new_values_and_shapes(name, backend, rng):
    f, shapes = CASES[name]
    traced = _trace(f, _vectors(rng, *shapes(8)), backend)
    assert not any(n.op == "prim.Constant" and getattr(n.outputs[0].type, "ndim", 0) > 0
                   and n.outputs[0].type.shape[:1] == (8,) for n in traced.graph.nodes), traced.graph
    _calls(traced, f, [_vectors(rng, *shapes(n)) for n in (8, 8, 11, 8)])


def test_host_call_is_a_node_guarded_on_its_input_shapes(rng):
    with pytest.warns(nt.TracerWarning, match=f"np.partition {HOST_CALL}.*the trace stays correct"):
        traced = nt.trace(lambda x: np.partition(x, 2), (rng.standard_normal(8),), backend="reference")
    [node] = [n for n in traced.graph.nodes if n.op == "prim.host_call"]
    assert node.attrs["func"] == "numpy.partition"
    assert traced.guards[0].startswith("x.shape[0] == 8")
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        np.testing.assert_allclose(traced(np.arange(5.0)), np.partition(np.arange(5.0), 2))
    assert traced.stats()["retraces"] == 1


def test_data_dependent_result_shape_of_a_host_call_is_traced_again(rng):
    def f(x):
        return np.compress(np.round(x) > 0, x) * 2.0

    traced = _trace(f, (np.array([0.0, 1.0, 1.0, 2.0]),), "reference")
    _calls(traced, f, [(np.array([0.0, 0.0, 0.0, 0.0]),), (np.array([3.0, 1.0, 2.0, 4.0]),)])
    assert traced.stats()["retraces"] == 2


def test_compress_takes_the_condition_first(backend):
    """``x.compress(c)`` is ``np.compress(c, x)``; NumPy's ``np.compress`` calls the method, so both
    forms must reach the function with the condition first (not ``np.compress(x, c)``)."""
    def f(x):
        return np.compress(x > 0.5, x) * 2.0, x.compress(x > 0.5), np.compress([True, False, True], x)

    x = np.array([0.0, 1.0, 0.25, 2.0])
    traced = _trace(f, (x,), backend)
    _calls(traced, f, [(x,), (np.array([3.0, 0.0, 1.0, 4.0]),)])


def test_saved_host_call_loads_and_runs(rng, backend):
    traced = _trace(lambda x: np.partition(x, 2)[:5] + np.interp(x, [0.0, 1.0], [1.0, 3.0])[:5],
                    (np.ones(8),), backend)
    buffer = io.BytesIO()
    traced.save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()), backend=backend)
    x = rng.standard_normal(8)
    np.testing.assert_allclose(loaded(x), np.partition(x, 2)[:5] + np.interp(x, [0.0, 1.0], [1.0, 3.0])[:5])
    with pytest.raises(nt.GuardError, match=r"x.shape\[0\] == 8"):
        loaded(np.ones(6))


def _with_function_renamed(data, old, new):
    source, target = io.BytesIO(data), io.BytesIO()
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for item in zin.infolist():
            content = zin.read(item.filename)
            if item.filename.endswith(".ir"):
                content = content.replace(old.encode(), new.encode())
            zout.writestr(item, content)
    return target.getvalue()


@pytest.mark.parametrize("name", ["os.system", "numpy.save", "numpy.testing.assert_equal", "numpy._core.x"])
def test_loading_refuses_a_host_call_outside_the_allowed_modules(name):
    traced = _trace(lambda x: np.partition(x, 2), (np.ones(8),), "reference")
    data = _with_function_renamed(traced.to_bytes(), "'numpy.partition'", repr(name))
    with pytest.raises(ValueError, match="host call|not allowed"):
        nt.load(io.BytesIO(data))


def test_function_outside_the_allowed_modules_is_refused_when_traced():
    with pytest.raises(NotImplementedError, match="not a function of a module a trace may call"):
        nt.trace(lambda x: np.lib.stride_tricks.sliding_window_view(x, 3).sum(axis=-1), (np.ones(8),),
                 backend="reference")


def test_argument_that_cannot_be_recorded_is_refused():
    with pytest.raises(NotImplementedError, match="cannot be recorded for a call at run time"):
        nt.trace(lambda x: np.apply_along_axis(np.sum, 0, x), (np.ones((3, 2)),), backend="reference")


@pytest.mark.parametrize("write", [lambda x: np.putmask(x, x > 0, [7.0, 8.0]),
                                   lambda x: np.place(x, x > 0, [5.0])])
def test_writes_of_host_calls_reach_the_caller(write, backend, rng):
    def f(x):
        write(x)
        return x.sum()

    traced = _trace(f, (rng.standard_normal(6),), backend)
    for _ in range(3):
        x = rng.standard_normal(6)
        got, expected = x.copy(), x.copy()
        np.testing.assert_allclose(traced(got), f(expected))
        np.testing.assert_array_equal(got, expected)


def test_host_calls_run_on_triton(rng):
    if "triton" not in nt.available_backends():
        pytest.skip("triton is not installed")
    traced = _trace(lambda x: np.partition(x * 2.0, 2), (np.ones(8),), "triton")
    x = rng.standard_normal(8)
    np.testing.assert_allclose(traced(x), np.partition(x * 2.0, 2), rtol=1e-12, atol=1e-12)


def test_cpu_explain_and_stats_list_host_calls():
    if "cpu" not in nt.available_backends():
        pytest.skip("the cpu backend is not installed")
    traced = _trace(lambda x: np.partition(x, 2) + 1.0, (np.ones(8),), "cpu")
    assert "host call: numpy.partition called on the arrays at run time" in traced.explain()
    traced(np.ones(8))
    [stats] = traced.stats()["signatures"].values()
    assert stats["host_calls"] == ["numpy.partition"]
