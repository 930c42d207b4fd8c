"""`Executable.exact_caller`: the frontend's fast call. It runs only on exact native ndarrays of the
compiled dtypes and shapes whose written arguments' memory bounds are disjoint from the others', and
otherwise returns NotImplemented having run (and written) nothing."""

import threading

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

F64 = np.dtype(np.float64)


def _axpy_exe(shape=(6,), dtype=F64):
    """x * y + 1.0, compiled for two inputs of `shape`."""
    g = Graph()
    x, y = (g.add_input(n, TensorType(dtype, shape)) for n in "xy")
    one = g.create_node("prim.Constant", [], attrs={"value": 1.0}).output
    g.set_outputs([g.create_node("np.add", [g.create_node("np.multiply", [x, y]).output, one]).output])
    return compile_graph(g, [TensorType(dtype, shape)] * 2)


def _arrays(seed, shape=(6,), dtype=F64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)


def test_single_tuple_and_built_results():
    exe = _axpy_exe()
    x, y = _arrays(0)
    want = x * y + 1.0
    np.testing.assert_array_equal(exe.exact_caller(2, (), [], [], [0], True, None).run((x, y)), want)
    got = exe.exact_caller(2, (), [], [], [0], False, None).run((x, y))
    assert type(got) is tuple and len(got) == 1
    np.testing.assert_array_equal(got[0], want)
    got = exe.exact_caller(2, (), [], [], [0], False, lambda outs: {"out": outs[0]}).run((x, y))
    np.testing.assert_array_equal(got["out"], want)
    assert exe.exact_caller(2, (), [], [], [], False, None).run((x, y)) == ()
    got = exe.exact_caller(2, (), [], [], [-1, 0, -2], False, None).run((x, y))   # arguments returned
    assert got[0] is x and got[2] is y
    np.testing.assert_array_equal(got[1], want)
    assert exe.exact_caller(2, (), [], [], [-2], True, None).run((x, y)) is y


@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed", "fortran"])
def test_layouts_run_and_extra_inputs_follow_the_arguments(layout):
    exe = _axpy_exe((4, 5))
    base_x, base_y = _arrays(1, (8, 10))
    x, y = {"contiguous": (base_x[:4, :5].copy(), base_y[:4, :5].copy()),
            "strided": (base_x[::2, ::2], base_y[1::2, 1::2]),
            "reversed": (base_x[:4, ::-2], base_y[3:7, 9::-2]),
            "fortran": (np.asfortranarray(base_x[:4, :5]), np.asfortranarray(base_y[:4, :5]))}[layout]
    np.testing.assert_array_equal(exe.exact_caller(2, (), [], [], [0], True, None).run((x, y)), x * y + 1.0)
    np.testing.assert_array_equal(exe.exact_caller(1, (y,), [], [], [0], True, None).run((x,)), x * y + 1.0)


def test_inexact_arguments_are_declined_and_nothing_runs():
    exe = _axpy_exe()
    x, y = _arrays(2)
    x_before = x.copy()
    fast = exe.exact_caller(2, (), [(0, 1)], [(0, 0)], [], False, None).run

    class Sub(np.ndarray):
        pass

    declined = [(x,), (x, y, y), (x.view(Sub), y), (x.astype(np.float32), y), (x.astype(">f8"), y),
                (x[:5], y), (x.reshape(2, 3), y), (x, [1.0] * 6), (x, x), (x, x[::-1]), (x[:], x)]
    for args in declined:
        assert fast(args) is NotImplemented
        np.testing.assert_array_equal(x, x_before)
    stateful = exe.exact_caller(1, (y.astype(np.float32),), [], [], [0], True, None).run
    assert stateful((x,)) is NotImplemented


def test_disjoint_bounds_and_empty_arrays_are_not_aliases():
    exe = _axpy_exe((0,))
    fast = exe.exact_caller(2, (), [(0, 1)], [], [0], True, None).run
    empty = np.empty(0)
    assert fast((empty, empty)).shape == (0,)   # no element, so nothing is shared
    exe = _axpy_exe((3,))
    buf = np.arange(12.0)
    fast = exe.exact_caller(2, (), [(0, 1)], [], [0], True, None).run
    np.testing.assert_array_equal(fast((buf[:3], buf[3:6])), buf[:3] * buf[3:6] + 1.0)
    assert fast((buf[0:6:2], buf[1:7:2])) is NotImplemented   # bounds overlap: the caller decides
    assert fast((buf[2::-1], buf[2:5])) is NotImplemented       # reversed view ending where the other starts


def test_write_back_copies_an_output_into_its_argument():
    exe = _axpy_exe()
    x, y = _arrays(3)
    want = x * y + 1.0
    got = exe.exact_caller(2, (), [], [(0, 0)], [], False, None).run((x, y))
    assert got == ()
    np.testing.assert_array_equal(x, want)
    ro = np.ones(6)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        exe.exact_caller(2, (), [], [(0, 0)], [], False, None).run((ro, y))


def test_bad_plans_are_refused():
    exe = _axpy_exe()
    with pytest.raises(ValueError, match="takes 2 inputs"):
        exe.exact_caller(3, (), [], [], [0], True, None)
    with pytest.raises(ValueError, match="alias pair"):
        exe.exact_caller(2, (), [(0, 2)], [], [0], True, None)
    with pytest.raises(ValueError, match="write-back"):
        exe.exact_caller(2, (), [], [(1, 0)], [0], True, None)
    with pytest.raises(ValueError, match="result 1 out of range"):
        exe.exact_caller(2, (), [], [], [1], False, None)
    with pytest.raises(ValueError, match="result -3 out of range"):
        exe.exact_caller(2, (), [], [], [-3], False, None)
    with pytest.raises(ValueError, match="single result"):
        exe.exact_caller(2, (), [], [], [0, 0], True, None)


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_fast_calls(threads):
    n = 300_000 if threads == 2 else 777
    exe = _axpy_exe((n,))
    fast = exe.exact_caller(2, (), [], [], [0], True, None).run
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
        workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        numtrace_cpu.set_num_threads(before)
    assert not errors, errors
