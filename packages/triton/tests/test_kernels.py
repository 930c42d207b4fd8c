"""Generated kernels beyond single ops: looped (multi-pass) reductions, fusion structure, strided and
broadcast index math, int64 addressing, readable source, and compile-time errors naming the node."""

import dataclasses
import re

import numpy as np
import pytest
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import Backend, TritonExecutable, backend, generate, select_allocator
from numtrace_triton.emit_body import needs_int64
from numtrace_triton.kernel_plan import View
from numtrace_triton.source_writer import flat_address

RNG = np.random.default_rng(7)
# Tiny reduction tiles: every reduction below takes the looped, multi-pass path.
# The target's own code (libdevice math on a GPU), with small blocks that make reductions loop.
LOOPED = dataclasses.replace(backend._tuning(), max_persistent=8, loop_block=8, tile_elems=64, autotune=False)


def _const(g, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


def _softmax_layernorm_graph(shape):
    g = Graph()
    x = g.add_input("x", TensorType("float32", shape))
    m = g.create_node("np.max", [x], attrs={"axis": -1, "keepdims": True}).output
    e = g.create_node("np.exp", [g.create_node("np.subtract", [x, m]).output]).output
    s = g.create_node("np.sum", [e], attrs={"axis": -1, "keepdims": True}).output
    softmax = g.create_node("np.divide", [e, s]).output
    mean = g.create_node("np.mean", [x], attrs={"axis": -1, "keepdims": True}).output
    c = g.create_node("np.subtract", [x, mean]).output
    var = g.create_node(
        "np.mean", [g.create_node("np.multiply", [c, c]).output], attrs={"axis": -1, "keepdims": True}
    ).output
    std = g.create_node("np.sqrt", [g.create_node("np.add", [var, _const(g, 1e-5)]).output]).output
    layernorm = g.create_node("np.divide", [c, std]).output
    g.set_outputs([softmax, layernorm])
    return g


def _reference_softmax_layernorm(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    c = x - x.mean(-1, keepdims=True)
    return e / e.sum(-1, keepdims=True), c / np.sqrt((c * c).mean(-1, keepdims=True) + np.float32(1e-5))


def _run(graph, inputs, tuning=None):
    types = [TensorType(a.dtype, a.shape) for a in inputs]
    plan = generate(graph, types, tuning)
    return TritonExecutable(plan, select_allocator()), plan


@pytest.mark.parametrize("tuning", [None, LOOPED], ids=["persistent", "looped"])
def test_softmax_and_layernorm_of_one_input_are_one_kernel(tuning):
    x = RNG.standard_normal((5, 37)).astype(np.float32)
    exe, plan = _run(_softmax_layernorm_graph(x.shape), [x], tuning)
    # Both read the same rows: one kernel (max, sum, mean and variance, in passes when looped).
    assert [k.name.split("_")[0] for k in plan.kernels] == ["reduction"]
    mode = "looped" if tuning else "persistent"
    assert all(f"({mode})" in k.source for k in plan.kernels)
    got = exe(x)
    for a, b in zip(got, _reference_softmax_layernorm(x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["np.sum", "np.prod", "np.max", "np.min", "np.var", "np.std", "np.mean"])
@pytest.mark.parametrize("axis", [0, 1, (0, 2), None])
def test_looped_reductions_over_any_axes(op, axis):
    x = RNG.uniform(0.5, 1.5, (3, 11, 4)).astype(np.float64)
    x[1, 2, 3] = np.nan if op in ("np.max", "np.min") else x[1, 2, 3]  # NaN propagates like NumPy
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    g.set_outputs([g.create_node(op, [xv], attrs={"axis": axis}).output])
    exe, _ = _run(g, [x], LOOPED)
    (got,) = exe(x)
    expected = getattr(np, op[3:])(x, axis=axis)
    np.testing.assert_allclose(got, expected, rtol=1e-10, equal_nan=True)


@pytest.mark.parametrize("tuning", [None, LOOPED], ids=["persistent", "looped"])
def test_float16_mean_sums_in_float32_like_numpy(tuning):
    x = np.full((2, 300), 600, np.float16)  # the row sum, 180000, overflows float16
    g = Graph()
    xv = g.add_input("x", TensorType("float16", x.shape))
    g.set_outputs([g.create_node("np.mean", [xv], attrs={"axis": 1}).output])
    exe, _ = _run(g, [x], tuning)
    (got,) = exe(x)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x.mean(axis=1))


@pytest.mark.parametrize("tuning", [None, LOOPED], ids=["persistent", "looped"])
@pytest.mark.parametrize("op", ["np.argmax", "np.argmin"])
def test_arg_reductions_return_the_first_best_or_first_nan(op, tuning):
    x = np.round(RNG.standard_normal((5, 23)), 1)  # rounding makes ties
    x[1, 7] = x[1, 15] = np.nan
    x[2] = -np.inf
    x[3, :] = 0.25
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    outs = [g.create_node(op, [xv], attrs={"axis": axis}).output for axis in (1, 0, None)]
    g.set_outputs(outs)
    exe, _ = _run(g, [x], tuning)
    for got, axis in zip(exe(x), (1, 0, None)):
        np.testing.assert_array_equal(got, getattr(np, op[3:])(x, axis=axis))


@pytest.mark.parametrize("tuning", [None, LOOPED], ids=["persistent", "looped"])
def test_scans_then_normalise_in_one_kernel(tuning):
    x = RNG.uniform(0.5, 1.5, (4, 29))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    c = g.create_node("np.cumsum", [xv], attrs={"axis": 1}).output
    total = g.create_node("np.sum", [xv], attrs={"axis": 1, "keepdims": True}).output
    frac = g.create_node("np.divide", [c, total]).output
    prod = g.create_node("np.cumprod", [xv], attrs={"axis": 0}).output
    flat = g.create_node("np.cumsum", [xv], attrs={"axis": None}).output
    g.set_outputs([frac, prod, flat])
    exe, plan = _run(g, [x], tuning)
    got = exe(x)
    np.testing.assert_allclose(got[0], np.cumsum(x, 1) / x.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(got[1], np.cumprod(x, 0), rtol=1e-12)
    np.testing.assert_allclose(got[2], np.cumsum(x), rtol=1e-12)
    assert sum(k.name.startswith("reduction") for k in plan.kernels) == 3


def test_looped_any_all_on_a_comparison():
    x = RNG.standard_normal((6, 19))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    b = g.create_node("np.greater", [xv, _const(g, 1.0)]).output
    g.set_outputs([g.create_node(op, [b], attrs={"axis": 1}).output for op in ("np.any", "np.all")])
    exe, plan = _run(g, [x], LOOPED)
    assert len(plan.kernels) == 1  # the comparison is the prologue of both reductions
    any_, all_ = exe(x)
    np.testing.assert_array_equal(any_, (x > 1).any(1))
    np.testing.assert_array_equal(all_, (x > 1).all(1))


def test_elementwise_chain_with_broadcasting_is_one_kernel():
    a, b = RNG.standard_normal((4, 1, 6)), RNG.standard_normal((5, 1)).astype(np.float32)
    g = Graph()
    av, bv = (
        g.add_input("a", TensorType("float64", a.shape)),
        g.add_input("b", TensorType("float32", b.shape)),
    )
    y = g.create_node("np.multiply", [av, bv]).output
    y = g.create_node("np.tanh", [g.create_node("np.add", [y, _const(g, 0.5)]).output]).output
    g.set_outputs([g.create_node("np.log1p", [g.create_node("np.absolute", [y]).output]).output])
    exe, plan = _run(g, [a, b])
    assert len(plan.kernels) == 1 and plan.kernels[0].name.startswith("pointwise")
    np.testing.assert_allclose(exe(a, b)[0], np.log1p(np.abs(np.tanh(a * b + 0.5))), rtol=1e-12)


def test_transposed_and_sliced_inputs_are_read_in_place():
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    g = Graph()
    xv = g.add_input("x", TensorType("float32", x.shape))
    t = g.create_node("np.transpose", [xv], attrs={"axes": None}).output
    s = g.create_node("np.getitem", [t], attrs={"index": (slice(1, None, 2), slice(None, None, -1))}).output
    g.set_outputs([g.create_node("np.exp", [s]).output])
    exe, plan = _run(g, [x])
    assert len(plan.kernels) == 1  # the view costs no copy kernel
    np.testing.assert_allclose(exe(x)[0], np.exp(x.T[1::2, ::-1]), rtol=1e-6)


def test_batched_matmul_with_broadcast_batch_and_fused_residual():
    a = RNG.standard_normal((2, 1, 5, 7)).astype(np.float32)
    b = RNG.standard_normal((3, 7, 20)).astype(np.float32)
    r = RNG.standard_normal((20,)).astype(np.float32)
    g = Graph()
    av, bv, rv = (g.add_input(n, TensorType("float32", v.shape)) for n, v in (("a", a), ("b", b), ("r", r)))
    y = g.create_node("np.matmul", [av, bv]).output
    g.set_outputs(
        [g.create_node("np.maximum", [g.create_node("np.add", [y, rv]).output, _const(g, 0.0)]).output]
    )
    exe, plan = _run(g, [a, b, r])
    assert [k.name for k in plan.kernels] == ["matmul_0_add_maximum"]
    np.testing.assert_allclose(exe(a, b, r)[0], np.maximum(a @ b + r, 0), rtol=1e-5, atol=1e-5)


def test_integer_matmul_is_exact():
    a = RNG.integers(-50, 50, (9, 33)).astype(np.int64)
    b = RNG.integers(-50, 50, (33, 4)).astype(np.int32)
    g = Graph()
    av, bv = g.add_input("a", TensorType("int64", a.shape)), g.add_input("b", TensorType("int32", b.shape))
    g.set_outputs([g.create_node("np.matmul", [av, bv]).output])
    exe, _ = _run(g, [a, b])
    np.testing.assert_array_equal(exe(a, b)[0], a @ b)


def test_out_argument_and_fresh_outputs():
    x = RNG.standard_normal((3, 4))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    g.set_outputs([g.create_node("np.negative", [xv]).output, xv])
    exe, _ = _run(g, [x])
    y, same = exe(x)
    assert same is not x and np.shares_memory(same, x) is False
    np.testing.assert_array_equal(same, x)
    out = (np.empty((3, 4)), np.empty((4, 3)).T)  # the second is not C-contiguous
    res = exe(x, out=out)
    assert res[0] is out[0] and res[1] is out[1]
    np.testing.assert_array_equal(out[0], -x)
    np.testing.assert_array_equal(out[1], x)
    with pytest.raises(ValueError, match="expected float64"):
        exe(x, out=(np.empty((3, 4), np.float32), np.empty((3, 4))))


def test_unlowered_op_runs_on_the_host_and_explain_names_the_node_and_its_location():
    g = Graph()
    x = g.add_input("x", TensorType("int64", (4,)))
    y = g.create_node("np.negative", [x]).output
    g.set_outputs([g.create_node("np.gcd", [x, y], loc="model.py:12").output])
    exe = Backend().compile(g, [TensorType("int64", (4,))])
    # Unnamed values are named as the text IR prints them: %2 is the third value.
    assert re.search(r"host step: np\.gcd \(node %2 traced at model\.py:12\).*Euclid", exe.explain())
    a = np.array([12, -18, 0, 7])
    np.testing.assert_array_equal(exe(a)[0], np.gcd(a, -a))
    assert exe.stats()["host_steps"] == ["np.gcd"]


def test_an_unlowered_op_of_values_known_when_planned_is_folded():
    # A causal mask np.tril(np.ones((T, T), bool)) with T = x.shape[0]: known once shapes are.
    x = RNG.standard_normal((3, 3))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    n = g.create_node("prim.dim", [xv], attrs={"axis": 0}).output
    ones = g.create_node(
        "prim.full", [n, n], attrs={"shape": ("n0", "n0"), "fill_value": 1, "dtype": np.dtype(bool)}
    ).output
    mask = g.create_node("np.tril", [ones], attrs={"k": 0}).output
    g.set_outputs([g.create_node("np.where", [mask, xv, _const(g, 0.0)]).output])
    exe, plan = _run(g, [x])
    assert len(plan.kernels) == 1
    np.testing.assert_array_equal(exe(x)[0], np.tril(x))


def test_generated_source_is_inspectable():
    x = RNG.standard_normal((5, 37)).astype(np.float32)
    exe, _ = _run(_softmax_layernorm_graph(x.shape), [x])
    for info in exe.kernels:
        assert info.source.startswith('"""numtrace generated kernel') and "@triton.jit" in info.source
        with open(info.path) as f:  # real files, so Triton can read the source
            assert f.read() == info.source
        assert info.grid and all(isinstance(n, int) for n in info.grid)
    stats = exe.stats()
    assert stats["kernels"] == len(exe.kernels) and stats["fallbacks"] == 0


@pytest.mark.parametrize("seed", range(20))
def test_flat_address_matches_numpy_strides(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 5, rng.integers(1, 5)))
    base = np.arange(np.prod([2 * n for n in shape])).reshape([2 * n for n in shape])
    view = base[tuple(slice(None, None, int(rng.choice([1, 2]))) for _ in shape)]
    view = view[tuple(slice(0, n) for n in shape)]
    view = (
        np.broadcast_to(view[(slice(None),) * (len(shape) - 1) + (slice(0, 1),)], shape)
        if rng.random() < 0.3
        else view
    )
    strides = tuple(s // base.itemsize for s in view.strides)
    offs = np.arange(view.size)  # noqa: F841 - read by the generated expression
    got = eval(flat_address("offs", view.shape, strides))  # plain //, %, +, * on integers
    offset0 = (view.ctypes.data - base.ctypes.data) // base.itemsize
    np.testing.assert_array_equal(
        base.reshape(-1)[offset0 + np.broadcast_to(got, (view.size,))], view.reshape(-1)
    )


def test_int64_index_math_is_chosen_only_when_needed():
    small = View(0, np.dtype(np.float32), 0, (1024, 1024), (1024, 1))
    huge = View(0, np.dtype(np.float32), 0, (50000, 50000), (50000, 1))
    assert not needs_int64([small], 1024 * 1024)
    assert needs_int64([huge], 1024) and needs_int64([small], 2**31)
    g = Graph()
    x = g.add_input("x", TensorType("float32", (50000, 50000)))
    g.set_outputs([g.create_node("np.exp", [x]).output])
    (k,) = generate(g, [TensorType("float32", (50000, 50000))]).kernels  # planned, never run
    assert "tl.program_id(0).to(tl.int64)" in k.source


def test_independent_chains_merge_into_one_kernel():
    """W1: (a*b + c) * exp(-d) / (1 + |a|) has three independent chains; one kernel computes all."""
    ins = [RNG.standard_normal(1000).astype(np.float32) for _ in range(4)]
    g = Graph()
    a, b, c, d = (g.add_input(n, TensorType("float32", (1000,))) for n in "abcd")
    left = g.create_node("np.add", [g.create_node("np.multiply", [a, b]).output, c]).output
    mid = g.create_node("np.exp", [g.create_node("np.negative", [d]).output]).output
    right = g.create_node("np.add", [_const(g, 1), g.create_node("np.absolute", [a]).output]).output
    out = g.create_node("np.divide", [g.create_node("np.multiply", [left, mid]).output, right]).output
    g.set_outputs([out])
    exe, plan = _run(g, ins)
    assert len(plan.kernels) == 1
    x, y, z, w = ins
    np.testing.assert_allclose(exe(*ins)[0], (x * y + z) * np.exp(-w) / (1 + np.abs(x)), rtol=1e-6)


def test_concatenate_stack_and_pad_write_into_slices():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    y = RNG.standard_normal((2, 3)).astype(np.float32)
    g = Graph()
    xv, yv = (
        g.add_input("x", TensorType("float32", x.shape)),
        g.add_input("y", TensorType("float32", y.shape)),
    )
    ex = g.create_node("np.exp", [xv]).output  # in flight: its kernel stores straight into the slice
    cat = g.create_node("np.concatenate", [ex, yv], attrs={"axis": 1}).output
    st = g.create_node("np.stack", [xv, ex], attrs={"axis": 2}).output
    pad = g.create_node("np.pad", [ex], attrs={"pad_width": ((1, 0), (2, 1)), "constant_values": 7.0}).output
    g.set_outputs([cat, st, pad])
    exe, _ = _run(g, [x, y])
    got = exe(x, y)
    np.testing.assert_allclose(got[0], np.concatenate([np.exp(x), y], axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.stack([x, np.exp(x)], axis=2), rtol=1e-6)
    np.testing.assert_allclose(got[2], np.pad(np.exp(x), ((1, 0), (2, 1)), constant_values=7.0), rtol=1e-6)


def test_concatenate_of_an_input_and_a_folded_constant():
    # The copy kernel made for the input is asked whether it may read the constant too: a folded
    # value has no writer and no group in flight, and the question must be answered from that.
    x = RNG.standard_normal(4).astype(np.float32)
    g = Graph()
    xv = g.add_input("x", TensorType("float32", x.shape))
    ones = _const(g, np.ones(4, np.float32))
    g.set_outputs([g.create_node("np.concatenate", [xv, ones], attrs={"axis": 0}).output])
    exe, _ = _run(g, [x])
    np.testing.assert_array_equal(exe(x)[0], np.concatenate([x, np.ones(4, np.float32)]))


def test_inputs_that_do_not_match_the_signature_are_rejected_before_any_kernel():
    x = RNG.standard_normal((3, 4))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    g.set_outputs([g.create_node("np.exp", [xv]).output])
    exe, _ = _run(g, [x])
    with pytest.raises(TypeError, match=r"compiled for f64\[3, 4\]"):
        exe(np.zeros((2, 4)))  # smaller: kernels would read past its end
    with pytest.raises(TypeError, match="compiled for"):
        exe(x.astype(np.float32))
    with pytest.raises(TypeError, match="expected 1 inputs"):
        exe(x, x)


def test_setitem_writes_after_the_copy_in_a_separate_kernel():
    x = RNG.standard_normal((4, 6))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    y = g.create_node("np.exp", [xv]).output
    row = g.create_node("np.getitem", [y], attrs={"index": (1,)}).output
    y2 = g.create_node("np.setitem", [y, row], attrs={"index": (0,)}).output  # y[0] = y[1]
    neg = g.create_node("np.negative", [y2]).output  # reads the updated copy
    y3 = g.create_node("np.setitem", [neg, neg], attrs={"index": (slice(None),)}).output  # value in flight
    y4 = g.create_node(
        "np.setitem", [y3, _const(g, 7.0)], attrs={"index": (slice(None), slice(1, 5, 2))}
    ).output
    g.set_outputs([y4])
    exe, _ = _run(g, [x])
    expected = np.exp(x)
    expected[0] = expected[1]
    expected = -expected
    expected[:, 1:5:2] = 7.0
    np.testing.assert_allclose(exe(x)[0], expected, rtol=1e-12)


def test_a_value_written_twice_after_a_copy_does_not_make_a_kernel_cycle():
    # a[1:3] += 1 is traced as two setitems of one in-flight value; concatenate([t, x, t]) writes
    # t twice around another writer. Storing t again from its own kernel would order it both
    # before and after the copy: it goes through a copy kernel instead.
    x = RNG.standard_normal((4, 3))
    g = Graph()
    xv = g.add_input("x", TensorType("float64", x.shape))
    index = {"index": (slice(1, 3),)}
    t = g.create_node("np.exp", [g.create_node("np.getitem", [xv], attrs=index).output]).output
    y = g.create_node("np.setitem", [xv, t], attrs=index).output
    y = g.create_node("np.setitem", [y, t], attrs=index).output
    cat = g.create_node("np.concatenate", [t, y, t], attrs={"axis": 0}).output
    g.set_outputs([y, cat])
    exe, _ = _run(g, [x])
    expected = x.copy()
    expected[1:3] = np.exp(x[1:3])
    got = exe(x)
    np.testing.assert_allclose(got[0], expected, rtol=1e-12)
    np.testing.assert_allclose(got[1], np.concatenate([expected[1:3], expected, expected[1:3]]), rtol=1e-12)


def test_an_index_computed_from_traced_dims_is_a_view_not_a_gather():
    # x[x.shape[0] - 1] and y[x.shape[0] - 1, 1:] = 9: the index is a graph input, known when planned.
    for rows in (3, 5):
        x = RNG.standard_normal((rows, 4))
        g = Graph()
        xv = g.add_input("x", TensorType("float64", x.shape))
        dim = g.create_node("prim.dim", [xv], attrs={"axis": 0}).output
        last = g.create_node("prim.sub", [dim, _const(g, 1)]).output
        row = g.create_node("np.getitem", [xv, last], attrs={"index": ("input",)}).output
        index = {"index": ("input", slice(1, None))}
        g.set_outputs([row, g.create_node("np.setitem", [xv, last, _const(g, 9.0)], attrs=index).output])
        exe, _ = _run(g, [x])
        expected = x.copy()
        expected[-1, 1:] = 9.0
        got = exe(x)
        np.testing.assert_array_equal(got[0], x[-1])
        np.testing.assert_array_equal(got[1], expected)


def test_transposed_values_are_stored_in_the_layout_a_reshape_needs():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    g = Graph()
    xv = g.add_input("x", TensorType("float32", x.shape))
    y = g.create_node("np.exp", [xv]).output
    z = g.create_node("np.transpose", [y], attrs={"axes": (0, 2, 1)}).output
    w = g.create_node("np.reshape", [z], attrs={"shape": (2, 12)}).output
    sq = g.create_node("np.square", [w]).output
    g.set_outputs([sq, y])
    exe, plan = _run(g, [x])
    assert len(plan.kernels) == 2  # exp (stored transposed) and square: no copy for the reshape
    got_sq, got_y = exe(x)
    np.testing.assert_allclose(got_sq, np.square(np.exp(x).transpose(0, 2, 1).reshape(2, 12)), rtol=1e-6)
    np.testing.assert_allclose(got_y, np.exp(x), rtol=1e-6)


def test_an_index_by_a_constant_int_array_is_a_gather():
    """An array index folded at compile time is still a gather (NumPy copies), as a runtime array
    index is."""
    g = Graph()
    x = g.add_input("x", TensorType("float32", (5, 3)))
    rows = _const(g, np.array([0, 2, 4]))
    out = g.create_node("np.getitem", [x, rows], attrs={"index": ("input",)}).output
    g.set_outputs([out])
    exe = Backend().compile(g, [TensorType("float32", (5, 3))])
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(exe(a)[0], a[[0, 2, 4]])
