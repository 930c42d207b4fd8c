"""Guards (`prim.guard`) and numbers supplied at run time (`prim.dynamic`): printed, parsed, kept by DCE,
checked and folded by `specialize`."""

import numpy as np
import pytest
from numtrace_ir import Graph, GuardError, ScalarType, TensorType, parse, passes, specialize

F32 = np.dtype(np.float32)


def _guarded_graph():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (5, 3)))
    n = g.create_node("prim.dim", [x], {"axis": 0}, "model.py:3").output
    half = g.create_node("prim.Constant", [], {"value": 2}, "model.py:4").output
    k = g.create_node("prim.floordiv", [n, half], {}, "model.py:4").output
    g.create_node("prim.guard", [k], {"expected": 2}, "model.py:4")
    y = g.create_node("np.negative", [x], {}, "model.py:5").output
    g.set_outputs([y])
    return g


def test_a_guard_is_printed_in_the_header_parsed_back_and_kept_by_dce():
    g = _guarded_graph()
    text = str(g)
    assert text.splitlines()[1] == "  # guard: x.shape[0] // 2 == 2"
    assert str(parse(text)) == text
    assert passes.dce(g) == 0


def test_specialize_checks_guards_once_per_signature():
    g = _guarded_graph()
    kept = specialize(g, [TensorType(F32, (4, 3))], check_shapes=False)  # 4 // 2 == 2 still
    assert not any(n.op == "prim.guard" for n in kept.nodes)
    with pytest.raises(GuardError, match=r"guard x.shape\[0\] // 2 == 2 \(recorded at model.py:4\)") as info:
        specialize(g, [TensorType(F32, (7, 3))], check_shapes=False)
    assert (info.value.traced, info.value.now, info.value.loc) == (2, 3, "model.py:4")


def test_dynamic_ops_become_their_target_once_the_numbers_are_known():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (5, 3)))
    n = g.create_node("prim.dim", [x], {"axis": 0}).output
    one = g.create_node("prim.Constant", [], {"value": 1}).output
    m = g.create_node("prim.sub", [n, one], {}).output
    head = g.create_node("prim.dynamic", [x, m], {
        "op": "np.getitem", "attrs": (("index", (slice(None, "$0", None),)),), "scalars": 1,
        "shape": ("v1_0", 3), "dtype": F32}, out_types=(TensorType(F32, (4, 3)),)).output
    rows = g.create_node("prim.dynamic", [m], {
        "op": "np.arange", "attrs": (("start", "$0"), ("stop", None), ("step", 1), ("dtype", None)),
        "scalars": 1, "shape": ("v2_0",), "dtype": np.dtype(np.int64)},
        out_types=(TensorType(np.dtype(np.int64), (4,)),)).output
    g.set_outputs([head, rows])
    assert str(parse(str(g))) == str(g)
    s = specialize(g, [TensorType(F32, (9, 3))], check_shapes=False)
    ops = [n.op for n in s.nodes]
    assert "prim.dynamic" not in ops and "np.getitem" in ops and "np.arange" in ops
    assert [v.type for v in s.outputs] == [TensorType(F32, (8, 3)), TensorType(np.dtype(np.int64), (8,))]


def test_a_guard_on_a_value_the_types_do_not_decide_is_a_run_time_check():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (3,)))
    c = g.create_node("prim.Constant", [], {"value": 3}).output
    g.create_node("prim.guard", [c], {"expected": 3})
    g.set_outputs([x])
    assert g.nodes[-1].outputs[0].type == ScalarType("bool")


def test_a_guard_on_data_takes_any_nan_for_a_nan_but_keeps_the_sign_of_zero():
    """A NaN's sign and payload depend on the loop that made it (NumPy's and a backend's differ): a
    guard that compared them would refuse the very inputs it was traced from, on every call."""
    from numtrace_ir import registry

    guard = registry.get("prim.guard").reference
    nan = np.float64("nan")
    negative_nan = np.copysign(nan, -1.0)
    assert guard(np.array([1.0, negative_nan]), expected=np.array([1.0, nan]))
    assert guard(np.array([negative_nan], np.float32), expected=np.array([nan], np.float32))
    assert guard(float(negative_nan), expected=float(nan))
    with pytest.raises(GuardError):
        guard(np.array([-0.0, nan]), expected=np.array([0.0, nan]))   # the sign of zero still counts
    with pytest.raises(GuardError):
        guard(np.array([1.0, 2.0]), expected=np.array([1.0, nan]))    # a number is not a NaN
    with pytest.raises(GuardError):
        guard(2.0, expected=float(nan))
