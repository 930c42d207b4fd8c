"""Ops the cpu backend runs with NumPy's own functions into planned buffers (scans, argmin/argmax,
stack/concatenate, mixed-dtype matmul, setitem) and masked fills fused as a select: each equals the
registry reference exactly, over shapes, dtypes and non-contiguous inputs."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numtrace_cpu import compile_graph
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType

DTYPES = [np.dtype(d) for d in ("bool", "int32", "int64", "float32", "float64")]
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _const(g, value):
    return _op(g, "prim.Constant", value=value)


def _reference(g, inputs):
    return tuple(np.asarray(v) for v in testing.run_reference(g, inputs))


def _values(rng, shape, dtype):
    x = np.asarray(rng.standard_normal(shape) * 3)
    if dtype.kind == "f":
        x[rng.random(shape) < 0.1] = np.nan
    return x.astype(dtype) if dtype.kind != "b" else x > 0


def _check(g, inputs, *, strided=False):
    """Run g on the cpu backend (twice: the arena is reused) and compare with the reference exactly."""
    if strided:
        inputs = [testing.noncontiguous(x) for x in inputs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = _reference(g, inputs)
        exe = compile_graph(g, [v.type for v in g.inputs])
        for got in (exe(*inputs), exe(*inputs)):
            assert len(got) == len(expected)
            for a, b in zip(got, expected):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b, strict=True)
    return exe


shapes = st.lists(st.sampled_from([1, 2, 3, 7, 64, 513]), min_size=1, max_size=3).map(tuple).filter(
    lambda s: np.prod(s) <= 40_000)


# -- masked fills: ``y[mask] = c`` as where(mask, c, y) inside the pass -------------------------------

@SETTINGS
@given(shapes, st.sampled_from(DTYPES), st.sampled_from([0.0, -1, 2.5, True, -0.0, 7]), st.booleans())
def test_masked_fill_fuses_and_equals_numpy(shape, dtype, value, strided):
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    y = _op(g, "np.multiply", x, _const(g, 2)) if dtype.kind != "b" else _op(g, "np.logical_not", x)
    mask = _op(g, "np.greater", x, _const(g, 0)) if dtype.kind != "b" else x
    out = _op(g, "np.setitem", y, mask, _const(g, value), index=("input",))
    g.set_outputs([out])
    exe = _check(g, [_values(np.random.default_rng(len(shape)), shape, dtype)], strided=strided)
    stats = exe.stats()
    assert stats["fallbacks"] == 0 and stats["fused_groups"] == 1


def test_masked_fill_of_nan_into_ints_raises_like_numpy():
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.int64), (5,)))
    mask = _op(g, "np.greater", x, _const(g, 0))
    g.set_outputs([_op(g, "np.setitem", x, mask, _const(g, float("nan")), index=("input",))])
    exe = compile_graph(g, [v.type for v in g.inputs])
    with pytest.raises((RuntimeError, ValueError)):
        exe(np.arange(5) - 2)


def test_masked_fill_of_isnan_in_a_float_pass():
    def f(x):
        y = np.clip(x, -1.0, 1.0)
        y = np.where(np.abs(x) > 2.5, 0.0, y)
        y[np.isnan(x)] = 0.0
        return y
    nt = pytest.importorskip("numtrace")  # the frontend (not a dependency of numtrace-cpu)
    x = _values(np.random.default_rng(0), (1000,), np.dtype(np.float64))
    traced = nt.trace(f, (x,))
    np.testing.assert_array_equal(traced(x), f(x))
    (stats,) = traced.stats()["signatures"].values()
    assert stats["fused_groups"] == 1 and stats["fallbacks"] == 0


# -- setitem with any key: copy + NumPy's assignment into the planned buffer -----------------------

@SETTINGS
@given(shapes, st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.integers(0, 4), st.booleans())
def test_setitem_step_equals_numpy(shape, dtype, vdtype, kind, strided):
    rng = np.random.default_rng(sum(shape))
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    n0 = shape[0]
    if kind == 0:     # a static slice, value broadcast from the last dim
        index, key_ins = (slice(1, max(1, n0 - 1)),), []
        vshape = shape[1:]
    elif kind == 1:   # a strided slice with a scalar
        index, key_ins, vshape = (slice(None, None, 2), Ellipsis), [], ()
    elif kind == 2:   # an int index
        index, key_ins, vshape = (n0 - 1,), [], shape[1:]
    elif kind == 3:   # an integer array index (a graph input)
        index, vshape = ("input",), (1,) + shape[1:]
        key_ins = [g.add_input("i", TensorType(np.dtype(np.int64), (2,)))]
    else:             # a full boolean mask with an array value of one element
        index, vshape = ("input",), (1,)
        key_ins = [_op(g, "np.greater", x, _const(g, 0)) if dtype.kind != "b" else x]
    v = g.add_input("v", TensorType(vdtype, vshape))
    try:
        out = _op(g, "np.setitem", x, *key_ins, v, index=index)
    except TypeError:  # e.g. complex into real: not our case, but the rule may refuse a cast
        return
    g.set_outputs([out, x])
    inputs = [_values(rng, shape, dtype)]
    if kind == 3:
        inputs.append(rng.integers(-n0, n0, 2))
    inputs.append(_values(rng, vshape, vdtype))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            _reference(g, inputs)
        except (ValueError, TypeError, OverflowError):
            return   # NumPy refuses the assignment (NaN into int...): covered elsewhere
    exe = _check(g, inputs, strided=strided)
    assert exe.stats()["fallbacks"] == 0


# -- scans, argmin/argmax, joins, mixed matmul --------------------------------------------------------

@SETTINGS
@given(shapes, st.sampled_from(DTYPES), st.sampled_from(["np.cumsum", "np.cumprod"]), st.data(),
       st.booleans())
def test_scans_equal_numpy(shape, dtype, op, data, strided):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    g.set_outputs([_op(g, op, _op(g, "np.multiply", x, x) if dtype.kind != "b" else x, axis=axis)])
    exe = _check(g, [_values(np.random.default_rng(1), shape, dtype)], strided=strided)
    assert exe.stats()["fallbacks"] == 0


@SETTINGS
@given(shapes, st.sampled_from(DTYPES), st.sampled_from(["np.argmin", "np.argmax"]), st.data(), st.booleans())
def test_argmin_argmax_equal_numpy(shape, dtype, op, data, strided):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    keepdims = data.draw(st.booleans())
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    g.set_outputs([_op(g, op, x, axis=axis, keepdims=keepdims)])
    _check(g, [_values(np.random.default_rng(2), shape, dtype)], strided=strided)


# Row values where ties, signed zeros, infinities and NaNs are common: NumPy's argmin/argmax answer the
# first extreme (-0.0 == 0.0) or the first NaN.
_TIES = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(5, 1), (9, 8), (3, 4, 7), (40_000, 8), (1, 300_001)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("op", ["np.argmin", "np.argmax"])
def test_argmin_argmax_along_rows_take_the_row_loop(op, dtype, shape, threads):
    """argmin/argmax over the last axis of a contiguous float array run numtrace's row loop
    (stats()["row_arg_runs"]), split over the thread team when large, with NumPy's indices; a
    strided input runs NumPy's loop."""
    import numtrace_cpu

    rng = np.random.default_rng(4)
    x = _TIES[rng.integers(0, len(_TIES), shape)].astype(dtype)
    rows = x.reshape(-1, shape[-1])
    rows[0] = np.nan   # a row all NaN
    if len(rows) > 2:
        rows[-1] = 1.0   # a row with no NaN, all tied
    for keepdims in (False, True):
        g = Graph()
        v = g.add_input("x", TensorType(np.dtype(dtype), shape))
        g.set_outputs([_op(g, op, v, axis=-1, keepdims=keepdims)])
        old = numtrace_cpu.get_num_threads()
        numtrace_cpu.set_num_threads(threads)
        try:
            exe = _check(g, [x])
            assert exe.stats()["row_arg_runs"] == 2
            assert "row loop" in exe.explain()
            assert _check(g, [x], strided=True).stats()["row_arg_runs"] == 0
        finally:
            numtrace_cpu.set_num_threads(old)


def test_row_arg_extreme_refuses_what_it_does_not_take():
    """The row loop writes nothing and answers False for operands it does not take (the caller then
    runs NumPy): other dtypes, non-contiguous or swapped inputs, outputs of another size or dtype."""
    from numtrace_cpu.isa import blocks

    x = np.arange(12.0).reshape(3, 4)
    out = np.full(3, -7, np.intp)
    for a, o in ((x.astype(np.int64), out), (x[:, ::2], out), (x.astype(">f8"), out), (x, out[:2]),
                 (x, out.astype(np.int32)), (np.zeros((3, 0)), out), (np.float64(1.0), out),
                 (x, np.full(6, -7, np.intp)[::2])):
        assert blocks.row_arg_extreme(a, o, False, 1) is False
    assert (out == -7).all()
    assert blocks.row_arg_extreme(x, out, True, 1) is True
    assert (out == 3).all()


@SETTINGS
@given(shapes, st.sampled_from(DTYPES), st.sampled_from(DTYPES),
       st.sampled_from(["np.stack", "np.concatenate"]), st.data(), st.booleans())
def test_joins_equal_numpy(shape, d1, d2, op, data, strided):
    nd = len(shape) + (op == "np.stack")
    axis = data.draw(st.integers(-nd, nd - 1))
    g = Graph()
    a = g.add_input("a", TensorType(d1, shape))
    b = g.add_input("b", TensorType(d2, shape))
    s = _op(g, "np.negative", a) if d1.kind in "if" else a   # an exact op fused before the join
    try:
        g.set_outputs([_op(g, op, s, b, axis=axis)])
    except TypeError:
        return
    rng = np.random.default_rng(3)
    exe = _check(g, [_values(rng, shape, d1), _values(rng, shape, d2)], strided=strided)
    assert exe.stats()["fallbacks"] == 0


def _mixed_matmul(da, db, m):
    rng = np.random.default_rng(4)
    g = Graph()
    a = g.add_input("a", TensorType(np.dtype(da), (m, 3)))
    b = g.add_input("b", TensorType(np.dtype(db), (3, 4)))
    g.set_outputs([_op(g, "np.matmul", a, b)])
    return g, [(rng.standard_normal((m, 3)) * 4).astype(da), (rng.standard_normal((3, 4)) * 4).astype(db)]


@pytest.mark.parametrize("da,db", [("i8", "f8"), ("i4", "i8")])
def test_mixed_dtype_matmul_equals_numpy(da, db):
    g, inputs = _mixed_matmul(da, db, 5)
    exe = _check(g, inputs)
    _check(g, inputs, strided=True)
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["numpy_into"] == ["np.matmul"]


@pytest.mark.parametrize("m", [1, 5, 40])
@pytest.mark.parametrize("da,db", [("f4", "f8"), ("f8", "f4")])
def test_float32_with_float64_matmul_is_a_float64_product(da, db, m):
    """NumPy casts the float32 operand to float64: so does the executable, then the product runs on
    numtrace's float64 kernels, within a product's rounding of NumPy's."""
    g, inputs = _mixed_matmul(da, db, m)
    exe = compile_graph(g, [v.type for v in g.inputs])
    assert exe.stats()["products_widened"] == 1 and exe.stats()["numpy_into"] == [], exe.explain()
    for args in (inputs, [testing.noncontiguous(x) for x in inputs]):
        (got,) = exe(*args)
        testing.assert_outputs_close((got,), (np.matmul(*args),), what=f"{da} @ {db}")


@pytest.mark.parametrize("case", ["output", "temp", "read_after", "input"])
def test_setitem_in_place_keeps_numpy_semantics(case):
    """A setitem on an array nothing else reads updates that array's buffer in place; arrays read
    again later, inputs and views are copied first."""
    nt = pytest.importorskip("numtrace")  # the frontend (not a dependency of numtrace-cpu)

    def f(u):
        y = u.copy() if case != "input" else u
        lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
        z = y * 1.0 if case == "read_after" else None
        y[1:-1] = u[1:-1] + 0.1 * lap
        if case == "temp":
            return y * 2.0 + 1.0
        if case == "read_after":
            return y, z
        return y

    u = np.random.default_rng(5).standard_normal(1000)
    keep = u.copy()
    traced = nt.trace(f, (u.copy(),))
    for x in (u, testing.noncontiguous(u)):
        x0 = x.copy()
        got, expected = traced(x), f(x0.copy())
        for a, b in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple)
                        else (expected,)):
            np.testing.assert_array_equal(a, b)
        if case != "input":
            np.testing.assert_array_equal(x, x0)   # the caller's array is untouched
    np.testing.assert_array_equal(u, keep) if case != "input" else None


@pytest.mark.parametrize(("dtype", "lo"), [("u1", -1), ("u1", 0), ("u1", 2), ("u1", 255), ("u1", 300),
                                         ("i4", -2**31 - 1), ("i4", -2)])
def test_clip_of_an_integer_array_by_a_python_int_bound_is_numpys(dtype, lo):
    """NumPy drops a Python int bound beyond an integer array's range on its open side and rejects one
    beyond the other: a constant bound is decomposed that way into maximum/minimum (fused where the
    kernels take the dtype), a runtime one runs NumPy's clip."""
    from numtrace_ir.types import ScalarType

    a = np.array([0, 5, 100, 127], dtype)
    for runtime in (False, True):
        g = Graph()
        x = g.add_input("x", TensorType(a.dtype, a.shape))
        bound = g.add_input("lo", ScalarType("int")) if runtime else _const(g, lo)
        g.set_outputs([_op(g, "np.clip", x, bound, _const(g, 3))])
        exe = compile_graph(g, [v.type for v in g.inputs])
        args = (a, lo) if runtime else (a,)
        if lo > np.iinfo(a.dtype).max:
            with pytest.raises(RuntimeError, match="While executing node np.clip.*OverflowError"):
                exe(*args)
            continue
        if dtype == "i4":
            assert (exe.stats()["fallbacks"] == 0) != runtime, exe.explain()
        np.testing.assert_array_equal(exe(*args)[0], np.clip(a, lo, 3))


# -- triu/tril, diag, outer, prim.full into planned buffers --------------------------------------------

@SETTINGS
@given(shapes.filter(lambda s: len(s) >= 2), st.sampled_from(DTYPES), st.sampled_from(["np.triu", "np.tril"]),
       st.integers(-3, 3), st.booleans())
def test_triangles_equal_numpy(shape, dtype, op, k, strided):
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    g.set_outputs([_op(g, op, x, k=k)])
    exe = _check(g, [_values(np.random.default_rng(5), shape, dtype)], strided=strided)
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["numpy_into"] == [op]


@SETTINGS
@given(st.sampled_from([(1,), (5,), (3, 4), (4, 3), (6, 6)]), st.sampled_from(DTYPES), st.integers(-3, 3),
       st.booleans())
def test_diag_equals_numpy(shape, dtype, k, strided):
    g = Graph()
    x = g.add_input("x", TensorType(dtype, shape))
    g.set_outputs([_op(g, "np.diag", x, k=k)])
    exe = _check(g, [_values(np.random.default_rng(6), shape, dtype)], strided=strided)
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["numpy_into"] == ["np.diag"]


@SETTINGS
@given(st.sampled_from([(), (1,), (5,), (2, 3)]), st.sampled_from([(4,), (1,), (3, 2)]),
       st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.booleans())
def test_outer_equals_numpy(sa, sb, da, db, strided):
    g = Graph()
    a = g.add_input("a", TensorType(da, sa))
    b = g.add_input("b", TensorType(db, sb))
    g.set_outputs([_op(g, "np.outer", a, b)])
    rng = np.random.default_rng(7)
    exe = _check(g, [_values(rng, sa, da), _values(rng, sb, db)], strided=strided and bool(sa))
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["numpy_into"] == ["np.outer"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_full_into_a_strided_out_equals_numpy(dtype):
    """prim.full fills the planned buffer, and the triangle and diagonal forms write any out= layout."""
    g = Graph()
    x = g.add_input("x", TensorType(dtype, (4, 4)))
    full = _op(g, "prim.full", shape=(4, 4), fill_value=2.5, dtype=dtype)
    g.set_outputs([_op(g, "np.add", _op(g, "np.triu", x, k=1), full) if dtype.kind != "b" else full,
                   _op(g, "np.diag", _op(g, "np.diag", x, k=-1), k=1)])
    inputs = [_values(np.random.default_rng(8), (4, 4), dtype)]
    exe = _check(g, inputs)
    expected = _reference(g, inputs)
    out = [np.zeros((8, 8), dtype)[::2, ::2], np.zeros((4, 8), dtype)[:, ::2]]
    exe(*inputs, out=out)
    for a, b in zip(out, expected):
        np.testing.assert_array_equal(a, b, strict=True)
    assert exe.stats()["fallbacks"] == 0
