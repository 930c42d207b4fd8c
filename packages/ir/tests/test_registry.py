"""The registry's API: lookup, NumPy dispatch, `bind` on good and bad calls, memoized `infer`, coverage,
the one-op graphs the backends' op tests build, and docs/ops.md staying in sync."""

import operator
from pathlib import Path

import numpy as np
import pytest
from numtrace_ir import op_table, registry
from numtrace_ir.ops.indexing import INPUT, index_op
from numtrace_ir.registry import ShapeError, UnknownOpError
from numtrace_ir.testing import (
    assert_outputs_close,
    build_graph,
    iter_cases,
    noncontiguous,
    reference_outputs,
    type_of,
)
from numtrace_ir.types import ScalarType, TensorType

pytestmark = pytest.mark.filterwarnings("error")

F32 = np.dtype(np.float32)


def T(dtype, *shape):
    return TensorType(dtype, shape)


def test_coverage_at_least_120_ops_across_kinds():
    ops = registry.all_ops()
    assert len(ops) >= 120
    # Every kind has ops ("other": np.diff and the np.linalg solvers, which fit no family).
    assert {op.kind for op in ops} == set(registry.KINDS)
    assert [op.name for op in ops] == sorted(op.name for op in ops)


def test_required_ops_are_registered():
    required = """np.add np.subtract np.multiply np.divide np.floor_divide np.remainder np.power
    np.float_power
    np.fmod np.maximum np.minimum np.fmax np.fmin np.arctan2 np.hypot np.logaddexp np.logaddexp2 np.copysign
    np.heaviside np.equal np.not_equal np.less np.less_equal np.greater np.greater_equal np.logical_and
    np.logical_or np.logical_xor np.logical_not np.bitwise_and np.bitwise_or np.bitwise_xor np.invert
    np.left_shift np.right_shift np.negative np.positive np.absolute np.fabs np.sign np.sqrt np.cbrt np.square
    np.reciprocal np.exp np.exp2 np.expm1 np.log np.log2 np.log10 np.log1p np.sin np.cos np.tan np.arcsin
    np.arccos np.arctan np.sinh np.cosh np.tanh np.arcsinh np.arccosh np.arctanh np.floor np.ceil np.trunc
    np.rint np.isnan np.isinf np.isfinite np.signbit np.deg2rad np.rad2deg np.where np.clip np.astype np.round
    np.nan_to_num np.sum np.prod np.mean np.max np.min np.argmax np.argmin np.var np.std np.all np.any
    np.cumsum np.cumprod np.multiply.outer np.matmul np.dot np.einsum np.tensordot np.outer np.inner
    np.reshape np.transpose np.swapaxes np.moveaxis np.expand_dims np.squeeze np.broadcast_to np.concatenate
    np.stack np.split np.array_split np.flip np.roll np.tile np.repeat np.pad np.copy np.ascontiguousarray
    np.triu np.tril np.diagonal np.sort np.argsort np.take np.take_along_axis np.zeros_like np.ones_like
    np.full_like np.getitem np.getitem_mask np.setitem np.random.rand np.random.randn np.random.random
    np.random.uniform np.random.normal prim.Constant prim.dim prim.add prim.sub prim.mul prim.floordiv
    prim.truediv prim.mod prim.neg prim.reshape prim.broadcast_to prim.full""".split()
    missing = [n for n in required if n not in {op.name for op in registry.all_ops()}]
    assert missing == []


def test_get_unknown_op():
    with pytest.raises(UnknownOpError, match="np.nope"):
        registry.get("np.nope")
    assert isinstance(UnknownOpError("x"), KeyError)


@pytest.mark.parametrize(
    "func,method,name,defaults",
    [
        (np.add, "__call__", "np.add", {}),
        (np.degrees, "__call__", "np.rad2deg", {}),
        (np.amax, "__call__", "np.max", {}),
        (np.ndarray.sum, "__call__", "np.sum", {}),
        (np.add, "reduce", "np.sum", {"axis": 0}),
        (np.maximum, "reduce", "np.max", {"axis": 0}),
        (np.add, "accumulate", "np.cumsum", {"axis": 0}),
        (np.multiply, "outer", "np.multiply.outer", {}),
        (operator.getitem, "__call__", "np.getitem", {}),
        (np.random.rand, "__call__", "np.random.rand", {}),
    ],
)
def test_for_numpy(func, method, name, defaults):
    op = registry.for_numpy(func, method)
    assert op is not None and op.name == name
    for k, v in defaults.items():
        assert op.bind([np.ones((2, 3))], {})[1][k] == v


def test_generator_methods_bind_without_the_generator():
    rng = np.random.default_rng(0)
    op = registry.for_numpy(np.random.Generator.normal)
    assert op.name == "np.random.Generator.normal" and op.nondeterministic
    assert op.bind([rng, 1.0], {"size": [2, 3]}) == (
        [], {"loc": 1.0, "scale": 1.0, "size": (2, 3), "omitted": ("state",)})
    with pytest.raises(TypeError, match="expected a numpy.random.Generator"):
        op.bind([1.0], {})
    out = op.reference(**op.bind([rng], {"size": 4})[1])
    assert out.shape == (4,) and out.dtype == np.float64


def test_for_numpy_unknown_is_none():
    assert registry.for_numpy(np.linalg.tensorinv) is None
    assert registry.for_numpy(np.add, "reduceat") is None
    assert registry.for_numpy(np.add, "at").name == "np.ufunc.at"   # a scatter


def test_every_numpy_target_is_callable():
    for op in registry.all_ops():
        for func, method in op.numpy_targets:
            assert callable(getattr(func, method) if method != "__call__" else func), (op.name, func)


# -- bind -----------------------------------------------------------------------------------------------


def test_bind_positional_and_keyword_in_numpy_order():
    x = np.ones((2, 3))
    inputs, attrs = registry.get("np.sum").bind([x, 1], {"keepdims": True})
    assert inputs == [x] and attrs == {"axis": 1, "dtype": None, "keepdims": True, "initial": None}
    assert list(attrs) == ["axis", "dtype", "keepdims", "initial"]  # schema order
    _, attrs = registry.get("np.sum").bind([x], {"axis": [0, 1], "dtype": "float32"})
    assert attrs["axis"] == (0, 1) and attrs["dtype"] is F32


def test_bind_variadic_and_optional_inputs():
    a, b = np.ones(2), np.zeros(2)
    assert registry.get("np.concatenate").bind([(a, b)], {"axis": 0}) == (
        [a, b], {"axis": 0, "dtype": None, "casting": "same_kind"})
    assert registry.get("np.einsum").bind(["i,i->", a, b], {}) == (
        [a, b], {"subscripts": "i,i->", "dtype": None, "casting": "safe", "optimize": False})
    assert registry.get("np.clip").bind([a, None, 1.0], {}) == ([a, 1.0], {"omitted": ("a_min",)})
    inputs, attrs = registry.get("np.clip").bind([a], {"a_min": 0, "a_max": 2})
    assert inputs == [a, 0, 2] and attrs == {"omitted": ()}


def test_einsum_sublist_form_binds_to_numpys_letters():
    """``einsum(a, [0, 1], b, [1, 2], [0, 2])`` is ``einsum("AB,BC->AC", a, b)``: NumPy reads subscript s
    as the s-th of A..Za..z, which also orders an implicit output (26 sorts after 0)."""
    a, b = np.ones((2, 3)), np.ones((3, 4))
    einsum = registry.get("np.einsum")
    assert einsum.bind([a, [0, 1], b, [1, 2], [0, 2]], {}) == einsum.bind(["AB,BC->AC", a, b], {})
    _, attrs = einsum.bind([a, [Ellipsis, 51], b, [51, np.int64(26)]], {"optimize": True})
    assert attrs["subscripts"] == "...z,za"
    assert einsum.bind([a, [0, 1], [1, 0]], {})[1]["subscripts"] == "AB->BA"
    with pytest.raises(ValueError, match=r"valid range \[0, 52\)"):
        einsum.bind([a, [0, 52]], {})
    with pytest.raises(TypeError, match="integer or an ellipsis"):
        einsum.bind([a, [0, "i"]], {})


def test_bind_index_keys():
    x, i = np.ones((4, 5)), np.array([0, 2])
    inputs, attrs = registry.get("np.getitem").bind([x, (slice(1, None), i, None, Ellipsis)], {})
    assert inputs == [x, i] and attrs == {"index": (slice(1, None), INPUT, None, Ellipsis)}
    assert registry.get("np.getitem").bind([x, np.int64(3)], {})[1] == {"index": (3,)}
    inputs, _ = registry.get("np.setitem").bind([x, i, 7.0], {})
    assert inputs == [x, i, 7.0]
    assert index_op((slice(None), x > 0)) == "np.getitem_mask" and index_op((0, i)) == "np.getitem"


def test_bind_dynamic_shapes():
    x, n = np.ones((4, 6)), object()  # n stands for a traced int
    assert registry.get("prim.reshape").bind([x, (n, -1)], {}) == ([x, n], {"shape": ("dyn0", -1)})
    assert registry.get("prim.full").bind([(2, n)], {"names": ["B"], "dtype": "f4"})[1] == {
        "shape": (2, "B"),
        "fill_value": 0,
        "dtype": F32,
    }
    assert registry.get("np.random.rand").bind([2, 3], {})[1] == {"size": (2, 3)}


@pytest.mark.parametrize(
    "name,args,kwargs,match",
    [
        ("np.sum", [], {}, "missing required argument 'a'"),
        ("np.sum", [1, 2], {"axis": 0}, "multiple values for argument 'axis'"),
        ("np.sum", [1], {"axes": 0}, "unexpected keyword argument.*'axes'"),
        ("np.sum", [1], {"out": np.ones(1)}, "'out' is not supported"),
        ("np.sum", [1], {"keepdims": 1}, "bad value for 'keepdims'"),
        ("np.sum", [1], {"axis": 1.5}, "bad value for 'axis'"),
        ("np.add", [1, 2, None, 4], {}, "at most"),
        ("np.add", [1, 2], {"where": True}, "unexpected keyword"),
        ("np.concatenate", [np.ones(2)], {}, "must be a list or tuple"),
        ("np.concatenate", [[]], {}, "expected 1 or more inputs"),
        ("np.reshape", [np.ones(2), "ab"], {}, "bad value for 'shape'"),
        ("np.astype", [np.ones(2), "float128"], {}, "bad value for 'dtype'"),
        ("np.getitem", [np.ones(2), slice(0, 1.5)], {}, "slice bounds must be ints"),
        ("np.random.rand", [2], {"size": 3}, "unexpected keyword"),
    ],
)
def test_bind_bad_calls(name, args, kwargs, match):
    with pytest.raises(TypeError, match=match) as info:
        registry.get(name).bind(args, kwargs)
    assert name in str(info.value) or name == "np.getitem"


def test_bind_pad_mode_not_implemented():
    with pytest.raises(NotImplementedError, match="function as mode"):
        registry.get("np.pad").bind([np.ones(2), 1, lambda vector, width, axis, kwargs: None], {})
    assert registry.get("np.pad").bind([np.ones(2), 1, "reflect"], {})[1]["mode"] == "reflect"


# -- infer ------------------------------------------------------------------------------------------------


def test_infer_weak_scalars_follow_nep50():
    add = registry.get("np.add")
    assert add.infer([T("f4", 3), ScalarType("float")]) == (T("f4", 3),)
    assert add.infer([T("i4", 3), ScalarType("float")]) == (T("f8", 3),)
    assert add.infer([T("u8", 3), ScalarType("int")]) == (T("u8", 3),)
    assert add.infer([ScalarType("int"), ScalarType("int")]) == (T("i64"),)
    assert registry.get("np.divide").infer([T("i4", 3), T("i4", 3)]) == (T("f64", 3),)
    assert registry.get("np.less").infer([T("f4", 3), ScalarType("int")]) == (T("bool", 3),)


def test_infer_symbolic_dims():
    add = registry.get("np.add")
    assert add.infer([T("f4", "B", 4), T("f4", "B", 1)]) == (T("f4", "B", 4),)
    assert add.infer([T("f4", "B", 1), T("f4", 1, 4)]) == (T("f4", "B", 4),)
    assert add.infer([T("f4", "B"), T("f4", 4)]) == (T("f4", 4),)
    assert add.infer([T("f4", "A"), T("f4", "B")]) == (T("f4", "bcast(A,B)"),)
    assert registry.get("np.sum").infer([T("f4", "B", "T", 4)], {"axis": -1}) == (T("f4", "B", "T"),)
    assert registry.get("np.reshape").infer([T("f4", "B", 4, 8)], {"shape": (-1, 32)}) == (T("f4", "B", 32),)
    assert registry.get("np.reshape").infer([T("f4", "B", 4, 8)], {"shape": (2, -1)}) == (T("f4", 2, "16*B"),)
    assert registry.get("np.matmul").infer([T("f4", "B", "T", 8), T("f4", 8, 16)]) == (T("f4", "B", "T", 16),)
    assert registry.get("np.concatenate").infer([T("f4", "B", 2), T("f4", "B", 3)], {"axis": 1}) == (
        T("f4", "B", 5),
    )
    assert registry.get("np.concatenate").infer([T("f4", "B", 2), T("f4", "C", 2)], {"axis": 0}) == (
        T("f4", "B+C", 2),
    )
    assert registry.get("np.getitem").infer([T("f4", "B", 4)], {"index": (slice(1, None),)}) == (
        T("f4", "max(0,B-1)", 4),
    )
    assert registry.get("np.getitem").infer([T("f4", "B", 4)], {"index": (slice(None, None, -1),)}) == (
        T("f4", "B", 4),
    )
    assert registry.get("np.split").infer([T("f4", "B", 4)], {"indices_or_sections": 2}) == (
        T("f4", "B//2", 4),
        T("f4", "B//2", 4),
    )
    assert registry.get("np.array_split").infer([T("f4", "N")], {"indices_or_sections": 2}) == (
        T("f4", "(N+1)//2"),
        T("f4", "N//2"),
    )
    assert registry.get("prim.dim").infer([T("f4", "B", 4)], {"axis": 0}) == (ScalarType("int"),)


def test_infer_data_dependent_symbols():
    mask = registry.get("np.getitem_mask")
    assert mask.data_dependent_shape and not registry.get("np.getitem").data_dependent_shape
    out = mask.infer([T("f4", 3, 4), T("bool", 3, 4)], {"index": (INPUT,), "size": "n7"})
    assert out == (T("f4", "n7"),)
    assert registry.get("prim.reshape").infer([T("f4", 4, 6), ScalarType("int")], {"shape": ("n", -1)}) == (
        T("f4", "n", "24//n"),
    )
    # Named by the input dim it was read from, the shape stays exact.
    reshape = registry.get("prim.reshape")
    assert reshape.infer([T("f4", "B", 4, 8), ScalarType("int")], {"shape": ("B", -1)}) == (T("f4", "B", 32),)
    assert reshape.infer([T("f4", "B", 4, 8), ScalarType("int")], {"shape": ("B*2", 4, -1)}) == (
        T("f4", "2*B", 4, 4),
    )
    with pytest.raises(ValueError, match="must be symbolic"):
        reshape.infer([T("f4", 6), ScalarType("int")], {"shape": ("2*3",)})


@pytest.mark.parametrize(
    "name,types,attrs,match",
    [
        ("np.add", [T("f4", 3), T("f4", 4)], {}, "do not broadcast"),
        ("np.add", [T("f4", 2, 3), T("f4", 4, 1, 2)], {}, "do not broadcast"),
        ("np.sum", [T("f4", 2, 3)], {"axis": 2}, "axis 2 is out of bounds"),
        ("np.sum", [T("f4", 2, 3)], {"axis": (0, -2)}, "repeated axis"),
        ("np.max", [T("f4", 0, 3)], {"axis": 0}, "zero-size reduction"),
        ("np.reshape", [T("f4", 2, 3)], {"shape": (4, 2)}, "cannot reshape"),
        ("np.reshape", [T("f4", 2, 3)], {"shape": (-1, -1)}, "only one -1"),
        ("np.reshape", [T("f4", 2, 3)], {"shape": (4, -1)}, "cannot reshape"),
        ("np.matmul", [T("f4", 2, 3), T("f4", 4, 2)], {}, "contracted dims"),
        ("np.matmul", [T("f4"), T("f4", 4, 2)], {}, "at least 1-d"),
        ("np.transpose", [T("f4", 2, 3)], {"axes": (0, 0)}, "not a permutation"),
        ("np.squeeze", [T("f4", 2, 3)], {"axis": 0}, "not 1"),
        ("np.squeeze", [T("f4", "B", 3)], {}, "symbolic"),
        ("np.broadcast_to", [T("f4", 2, 3)], {"shape": (4, 3)}, "cannot broadcast"),
        ("np.concatenate", [T("f4", 2, 3), T("f4", 2, 4)], {"axis": 0}, "differ off axis"),
        ("np.stack", [T("f4", 2, 3), T("f4", 3, 2)], {}, "same shape"),
        ("np.split", [T("f4", 5, 2)], {"indices_or_sections": 2}, "equal division"),
        ("np.getitem", [T("f4", 2, 3)], {"index": (0, 0, 0)}, "too many indices"),
        ("np.getitem", [T("f4", 2, 3)], {"index": (5,)}, "out of bounds"),
        ("np.setitem", [T("f4", 2, 3), T("f4", 4)], {"index": ()}, "cannot be broadcast"),
        ("np.einsum", [T("f4", 2, 3), T("f4", 4, 2)], {"subscripts": "ij,jk->ik"}, "label 'j'"),
        ("np.tensordot", [T("f4", 2, 3), T("f4", 4, 2)], {"axes": 1}, "axis 1"),
        ("np.diagonal", [T("f4", 3)], {}, "at least 2 dims"),
    ],
)
def test_infer_shape_errors(name, types, attrs, match):
    with pytest.raises(ShapeError, match=match) as info:
        registry.get(name).infer(types, attrs)
    assert isinstance(info.value, ValueError) and name in str(info.value)


@pytest.mark.parametrize(
    "name,types,attrs,match",
    [
        ("np.invert", [T("f4", 3)], {}, "no loop"),
        ("np.add", [T("f4", 3)], {}, "expected 2 inputs"),
        ("np.sum", [ScalarType("int")], {}, "must be a TensorType"),
        ("np.sum", [T("f4", 3)], {"bogus": 1}, "unknown attribute"),
        ("np.reshape", [T("f4", 3)], {}, "missing required attribute 'shape'"),
        ("np.take", [T("f4", 3), T("f4", 2)], {}, "indices must be integers"),
        ("np.getitem", [T("f4", 3), T("bool", 3)], {"index": (INPUT,)}, "use np.getitem_mask"),
        ("prim.add", [ScalarType("int"), T("f4")], {}, "must be a ScalarType"),
        ("prim.floordiv", [ScalarType("complex"), ScalarType("int")], {}, "unsupported operand"),
        ("prim.reshape", [T("f4", 6)], {"shape": ("n", 2)}, "1 dynamic dims but 0 int inputs"),
    ],
)
def test_infer_type_errors(name, types, attrs, match):
    with pytest.raises(TypeError, match=match):
        registry.get(name).infer(types, attrs)


def test_infer_is_memoized_and_fills_defaults():
    op = registry.get("np.sum")
    types = [T("f4", "B", 7, 3)]
    first = op.infer(types, {"axis": 1})
    assert op.infer(types, {"axis": 1}) is first
    assert op.infer(types, {"axis": 1, "dtype": None, "keepdims": False}) == first
    sl = registry.get("np.getitem")
    attrs = {"index": (slice(1, None, 2),)}
    assert sl.infer([T("f4", 9)], attrs) is sl.infer([T("f4", 9)], dict(attrs))  # slices memoized too
    const = registry.get("prim.Constant")
    assert const.infer([], {"value": np.zeros((2, 3), "f4")}) == (T("f4", 2, 3),)


def test_variant_shares_rule_and_name():
    reduce_add = registry.for_numpy(np.add, "reduce")
    assert reduce_add.name == "np.sum" and reduce_add is not registry.get("np.sum")
    assert reduce_add.bind([np.ones((2, 3))], {})[1]["axis"] == 0
    assert registry.get("np.sum").bind([np.ones((2, 3))], {})[1]["axis"] is None


# -- reference and graph helpers ---------------------------------------------------------------------


def test_reference_regroups_inputs():
    a, b = np.arange(3.0), np.arange(3.0, 6.0)
    np.testing.assert_array_equal(
        registry.get("np.concatenate").reference(a, b, axis=0), np.concatenate([a, b])
    )
    np.testing.assert_array_equal(
        registry.get("np.clip").reference(a, 1.0, omitted=("a_max",)), np.clip(a, 1, None)
    )
    x = np.arange(12.0).reshape(3, 4)
    out = registry.get("np.setitem").reference(x, np.array([0, 2]), -1.0, index=(INPUT,))
    assert out is not x and (out[[0, 2]] == -1).all() and (x >= 0).all()
    parts = registry.get("np.split").reference(x, indices_or_sections=(1,), axis=1)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(3, 1), (3, 3)]


def test_build_graph_for_every_op():
    from numtrace_ir import graphs_equal, parse

    seen = set()
    for op, sample in iter_cases(seed=3):
        if op.name in seen:
            continue
        seen.add(op.name)
        g = build_graph(op, sample)
        g.lint()
        (node,) = g.nodes
        assert node.op == op.name and list(node.attrs) == list(op.attr_names)
        assert tuple(v.type for v in node.outputs) == op.infer(
            [type_of(v) for v in sample.inputs], sample.attrs
        )
        assert graphs_equal(parse(str(g)), g), str(g)
    assert len(seen) == len(registry.all_ops())


def test_build_graph_with_symbolic_input_types():
    op = registry.get("np.add")
    sample = next(s for s in op.samples(np.random.default_rng(0)) if type_of(s.inputs[0]).ndim == 2)
    g = build_graph(op, sample, inputs=[T("f8", "B", 4), T("f8", 4)])
    assert g.nodes[0].output.type == T("f8", "B", 4)


def test_noncontiguous_copies_keep_values():
    x = np.arange(12.0).reshape(3, 4)
    y = noncontiguous(x)
    assert not y.flags.c_contiguous and y.base is not None
    np.testing.assert_array_equal(x, y)
    assert noncontiguous(2.5) == 2.5
    z = noncontiguous(np.float32(1.0) * np.ones(()))
    assert z.shape == ()


def test_assert_outputs_close():
    assert_outputs_close(np.float32([1.0, np.nan]), np.float32([1.00001, np.nan]))
    with pytest.raises(AssertionError, match="float64"):
        assert_outputs_close(np.ones(2), np.ones(2, "f4"))
    with pytest.raises(AssertionError, match="outputs"):
        assert_outputs_close((np.ones(2),), (np.ones(2), np.ones(2)))
    with pytest.raises(AssertionError):
        assert_outputs_close(np.int32([1, 2]), np.int32([1, 3]))
    with pytest.raises(AssertionError):
        assert_outputs_close(1, 1.0)


def test_docs_table_is_current():
    doc = Path(__file__).resolve().parents[3] / "docs" / "ops.md"
    if not doc.exists():
        pytest.skip("docs/ops.md is not part of an installed package")
    assert op_table.markdown_table() in doc.read_text(), "regenerate docs/ops.md (see its header)"


def test_constant_memo_tells_equal_values_of_other_types_apart():
    const = registry.get("prim.Constant")
    assert const.infer([], {"value": 1}) == (ScalarType("int"),)
    assert const.infer([], {"value": True}) == (ScalarType("bool"),)
    assert const.infer([], {"value": 1.0}) == (ScalarType("float"),)
    assert const.infer([], {"value": np.float32(1.0)}) == (T("f4"),)
    assert const.infer([], {"value": np.ones(3, "i4")}) == (T("i4", 3),)
    assert const.infer([], {"value": np.ones(3, "f8")}) == (T("f8", 3),)


def test_infer_and_reference_reject_malformed_calls():
    add = registry.get("np.add")
    with pytest.raises(TypeError, match="attrs must be a dict"):
        add.infer([T("f4", 3), T("f4", 3)], [("a", 1)])
    with pytest.raises(TypeError, match="must be a TensorType or ScalarType"):
        add.infer([[3], T("f4", 3)], {})
    with pytest.raises(TypeError, match="expected 2 inputs"):
        add.reference(np.ones(2))
    with pytest.raises(TypeError, match="expected 1 or more inputs"):
        registry.get("np.einsum").infer([], {"subscripts": "i"})


@pytest.mark.parametrize(
    "method,args,kwargs,attrs",
    [
        (np.ndarray.reshape, (2, 3), {}, {"shape": (2, 3), "order": "C"}),
        (np.ndarray.reshape, ((3, -1),), {"order": "F"}, {"shape": (3, -1), "order": "F"}),
        (np.ndarray.reshape, ([6],), {}, {"shape": (6,), "order": "C"}),
        (np.ndarray.transpose, (), {}, {"axes": None}),
        (np.ndarray.transpose, (1, 0), {}, {"axes": (1, 0)}),
        (np.ndarray.transpose, ([1, 0],), {}, {"axes": (1, 0)}),
    ],
)
def test_method_calling_conventions(method, args, kwargs, attrs):
    x = np.ones((2, 3))
    op = registry.for_numpy(method)
    inputs, got = op.bind([x, *args], kwargs)
    assert inputs == [x] and got == attrs
    expected = method(x, *args, **kwargs)
    assert op.infer([type_of(x)], got) == (type_of(expected),)


def test_method_calling_convention_errors():
    op = registry.for_numpy(np.ndarray.reshape)
    with pytest.raises(TypeError, match="np.reshape: bad value for 'shape'"):
        op.bind([np.ones(2)], {})
    with pytest.raises(TypeError, match="both positionally and as a keyword"):
        op.bind([np.ones(2), 2], {"shape": 2})


@pytest.mark.parametrize(
    "func,args,kwargs,n_inputs,omitted",
    [
        (np.clip, (0.0, 1.0), {}, 3, ()),
        (np.ndarray.clip, (0.0,), {}, 2, ("a_max",)),
        (np.clip, (), {"min": 0.0}, 2, ("a_max",)),
        (np.clip, (None, 1.0), {}, 2, ("a_min",)),
        (np.ndarray.clip, (), {"max": 1.0}, 2, ("a_min",)),
        (np.ndarray.clip, (0.0, 1.0), {}, 3, ()),
    ],
)
def test_clip_bounds_spellings(func, args, kwargs, n_inputs, omitted):
    x = np.linspace(-2, 2, 7)
    op = registry.for_numpy(func)
    inputs, attrs = op.bind([x, *args], kwargs)
    assert len(inputs) == n_inputs and attrs == {"omitted": omitted}
    np.testing.assert_array_equal(op.reference(*inputs, **attrs), func(x, *args, **kwargs))


def test_clip_bad_bounds():
    with pytest.raises(TypeError, match="a_min or min, not both"):
        registry.get("np.clip").bind([np.ones(2)], {"a_min": 0, "min": 0})
    with pytest.raises(TypeError, match="missing a_min or a_max"):
        registry.get("np.clip").bind([np.ones(2), 0], {})


def test_index_placeholders_must_match_inputs():
    op = registry.get("np.getitem")
    with pytest.raises(TypeError, match="1 'input' placeholders but 0 index inputs"):
        op.infer([T("f4", 3)], {"index": (INPUT,)})
    with pytest.raises(TypeError, match="0 'input' placeholders but 1 index inputs"):
        op.reference(np.ones(3), np.array([0]), index=(0,))


VIEW_OPS = [op for op in registry.all_ops() if op.as_view is not None]


@pytest.mark.parametrize("op", VIEW_OPS, ids=lambda op: op.name)
def test_as_view_gives_the_reference_values_as_a_view_of_the_first_input(op):
    """`OpDef.as_view` (what the backends keep as a view instead of a copy) computes the reference's
    values, and is a view of the input: sharing its memory in at least one sample (NumPy copies for
    some layouts, `ravel(order="F")`...); None only for an index with arrays (a gather)."""
    shared = 0
    for _, sample in iter_cases([op]):
        expected = reference_outputs(op, sample)
        a = np.asarray(sample.inputs[0])
        attrs = op.normalize_attrs(sample.attrs)
        got = op.as_view(a, np.shape(expected[0]), attrs, list(sample.inputs[1:]))
        if got is None:
            assert INPUT in attrs["index"], sample
            continue
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and g.shape == e.shape, sample
            np.testing.assert_array_equal(g, e)
            shared += np.shares_memory(g, a)
    assert shared, f"{op.name}: as_view never returned a view of its input"


def test_view_facts_are_consistent():
    """An op with a write-through `view` fact has `as_view` (its constructor checks it)."""
    assert {op.name for op in registry.all_ops() if op.view is not None} <= {op.name for op in VIEW_OPS}
    with pytest.raises(ValueError, match="as_view"):
        registry.OpDef("t.view", "movement", [], lambda types, attrs: (), lambda: None, view="reshape")
