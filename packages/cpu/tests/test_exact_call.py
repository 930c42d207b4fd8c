"""`Executable.exact_caller`: the frontend's fast call, driven by a `numtrace_ir.CallSpec`. It runs only
on exact native ndarrays of the compiled dtypes and shapes whose written arguments' memory bounds are
disjoint from the others', and otherwise returns NotImplemented having run (and written) nothing."""


import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import CallSpec, Graph, run_call
from numtrace_ir.types import TensorType
from threaded import run_threads

F64 = np.dtype(np.float64)


def _axpy_exe(shape=(6,), dtype=F64):
    """x * y + 1.0, compiled for two inputs of `shape`."""
    g = Graph()
    x, y = (g.add_input(n, TensorType(dtype, shape)) for n in "xy")
    one = g.create_node("prim.Constant", [], attrs={"value": 1.0}).output
    g.set_outputs([g.create_node("np.add", [g.create_node("np.multiply", [x, y]).output, one]).output])
    return compile_graph(g, [TensorType(dtype, shape)] * 2)


def _step_exe(shape=(6,)):
    """x * y + 1.0 and y's new contents y * 2, compiled for two inputs of `shape`."""
    g = Graph()
    x, y = (g.add_input(n, TensorType(F64, shape)) for n in "xy")
    one = g.create_node("prim.Constant", [], attrs={"value": 1.0}).output
    two = g.create_node("prim.Constant", [], attrs={"value": 2.0}).output
    g.set_outputs([g.create_node("np.add", [g.create_node("np.multiply", [x, y]).output, one]).output,
                   g.create_node("np.multiply", [y, two]).output])
    return compile_graph(g, [TensorType(F64, shape)] * 2)


SINGLE = CallSpec(num_args=2, num_results=1, single=True)
TUPLE = CallSpec(num_args=2, num_results=1)
WRITES_X = CallSpec(num_args=2, num_results=0, written=(0,))
RETURNS_X = CallSpec(num_args=2, num_results=0, written=(0,), returned=((0, 0),), single=True)


def _arrays(seed, shape=(6,), dtype=F64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


def test_single_tuple_and_built_results():
    exe = _axpy_exe()
    x, y = _arrays(0)
    want = x * y + 1.0
    np.testing.assert_array_equal(exe.exact_caller(SINGLE).run((x, y)), want)
    got = exe.exact_caller(TUPLE).run((x, y))
    assert type(got) is tuple and len(got) == 1
    np.testing.assert_array_equal(got[0], want)
    got = exe.exact_caller(TUPLE, (), lambda outs: {"out": outs[0]}).run((x, y))
    np.testing.assert_array_equal(got["out"], want)


def test_returned_argument_is_the_callers_array_after_its_write_back():
    exe = _step_exe()
    x, y = _arrays(5)
    want_y, want = y * 2, x * y + 1.0
    spec = CallSpec(num_args=2, num_results=1, written=(1,), returned=((0, 1),))
    got = exe.exact_caller(spec).run((x, y))
    assert type(got) is tuple and len(got) == 2 and got[0] is y
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(got[1], want)
    x, y = _arrays(6)
    assert exe.exact_caller(CallSpec(num_args=2, num_results=1, written=(1,), returned=((1, 1),))
                            ).run((x, y))[1] is y


@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed", "fortran"])
def test_layouts_run_and_state_follows_the_arguments(layout):
    exe = _axpy_exe((4, 5))
    base_x, base_y = _arrays(1, (8, 10))
    x, y = {"contiguous": (base_x[:4, :5].copy(), base_y[:4, :5].copy()),
            "strided": (base_x[::2, ::2], base_y[1::2, 1::2]),
            "reversed": (base_x[:4, ::-2], base_y[3:7, 9::-2]),
            "fortran": (np.asfortranarray(base_x[:4, :5]), np.asfortranarray(base_y[:4, :5]))}[layout]
    np.testing.assert_array_equal(exe.exact_caller(SINGLE).run((x, y)), x * y + 1.0)
    stateful = CallSpec(num_args=1, num_state=1, num_results=1, single=True)
    np.testing.assert_array_equal(exe.exact_caller(stateful, (y,)).run((x,)), x * y + 1.0)


def test_inexact_arguments_are_declined_and_nothing_runs():
    exe = _axpy_exe()
    x, y = _arrays(2)
    x_before = x.copy()
    fast = exe.exact_caller(WRITES_X).run

    class Sub(np.ndarray):
        pass

    declined = [(x,), (x, y, y), (x.view(Sub), y), (x.astype(np.float32), y), (x.astype(">f8"), y),
                (x[:5], y), (x.reshape(2, 3), y), (x, [1.0] * 6), (x, x), (x, x[::-1]), (x[:], x)]
    for args in declined:
        assert fast(args) is NotImplemented
        np.testing.assert_array_equal(x, x_before)
    stateful = CallSpec(num_args=1, num_state=1, num_results=1, single=True)
    assert exe.exact_caller(stateful, (y.astype(np.float32),)).run((x,)) is NotImplemented


def test_an_argument_sharing_written_module_state_is_declined_then_refused():
    """Module state is an input too: an argument that overlaps state the function writes into (y, the
    state, gets y * 2) is declined by the fast path and refused by `run_call`, naming both."""
    exe = _step_exe()
    spec = CallSpec(num_args=1, num_state=1, num_results=1, written=(1,), name="step",
                    input_names=("x", "w"))
    assert spec.alias_pairs == ((1, 0),)
    x, w = _arrays(7)
    w_before = w.copy()
    assert exe.exact_caller(spec, (w,)).run((w[::-1],)) is NotImplemented
    np.testing.assert_array_equal(w, w_before)
    with pytest.raises(ValueError, match="module state 'w' is written into .* with argument 'x'"):
        run_call(exe, spec, (w,), (w,))
    np.testing.assert_array_equal(w, w_before)
    got = exe.exact_caller(spec, (w,)).run((x,))
    np.testing.assert_array_equal(got[0], x * w_before + 1.0)
    np.testing.assert_array_equal(w, w_before * 2)


def test_disjoint_bounds_and_empty_arrays_are_not_aliases():
    exe = _axpy_exe((0,))
    fast = exe.exact_caller(RETURNS_X).run
    empty = np.empty(0)
    assert fast((empty, empty)).shape == (0,)   # no element, so nothing is shared
    exe = _axpy_exe((3,))
    buf = np.arange(12.0)
    fast = exe.exact_caller(RETURNS_X).run
    want = buf[:3] * buf[3:6] + 1.0
    assert fast((buf[:3], buf[3:6])).base is buf
    np.testing.assert_array_equal(buf[:3], want)
    before = buf.copy()
    assert fast((buf[0:6:2], buf[1:7:2])) is NotImplemented   # bounds overlap: the caller decides
    assert fast((buf[2::-1], buf[2:5])) is NotImplemented       # reversed view ending where the other starts
    np.testing.assert_array_equal(buf, before)


def test_write_back_copies_an_output_into_its_argument():
    exe = _axpy_exe()
    x, y = _arrays(3)
    want = x * y + 1.0
    got = exe.exact_caller(WRITES_X).run((x, y))
    assert got == ()
    np.testing.assert_array_equal(x, want)
    ro = np.ones(6)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        exe.exact_caller(WRITES_X).run((ro, y))


def test_specs_that_do_not_fit_the_executable_are_refused():
    exe = _axpy_exe()
    with pytest.raises(ValueError, match="takes 2 inputs"):
        exe.exact_caller(CallSpec(num_args=3, num_results=1))
    with pytest.raises(ValueError, match="has 1 outputs"):
        exe.exact_caller(CallSpec(num_args=2, num_results=2))
    with pytest.raises(ValueError, match="1 state inputs, got 0"):
        exe.exact_caller(CallSpec(num_args=1, num_state=1, num_results=1))
    with pytest.raises(ValueError, match="must name arguments"):
        CallSpec(num_args=2, num_results=1, returned=((0, 2),))
    with pytest.raises(ValueError, match="single result"):
        CallSpec(num_args=2, num_results=2, single=True)


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_fast_calls(threads):
    n = 300_000 if threads == 2 else 777
    exe = _axpy_exe((n,))
    fast = exe.exact_caller(SINGLE).run
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    errors = []

    def work(k):
        try:
            for i in range(20):
                x, y = _arrays(100 * k + i, (n,))
                np.testing.assert_array_equal(fast((x, y)), x * y + 1.0)
        except BaseException as exc:   # reported below
            errors.append(exc)

    try:
        run_threads(work, range(4))
    finally:
        numtrace_cpu.set_num_threads(before)
    assert not errors, errors
