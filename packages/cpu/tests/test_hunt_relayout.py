"""Copying reshapes of transposed products and fused-pass results computed in place
(numtrace_cpu.relayout), differential against the registry reference: producers (batched and
broadcast-batch products, elementwise passes with broadcast operands, reductions), transposes,
reshape targets, dtypes, strided inputs, size-1 dims, 1 and 2 threads, and the consumers that read
the reshaped array afterwards (several passes, a returned view, a join, an assignment into it).
Each case checks in `stats()` that the rewrite ran, so a silent fallback to the copy fails it."""

import tracemalloc
import warnings

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _const(g, value):
    return _op(g, "prim.Constant", value=value)


def _values(rng, shape, dtype):
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if x.size > 4:
        x.reshape(-1)[rng.integers(0, x.size, 3)] = [np.nan, -0.0, np.inf]
    return x


# producer: (x shape, w shape, exact: whether the cpu backend matches NumPy bit for bit)
PRODUCERS = {
    "product": ((3, 17, 8), (3, 8, 5), False),
    "broadcast_batch_product": ((4, 9, 16), (1, 16, 6), False),
    "multiply_rows": ((3, 33, 7), (3, 33, 1), True),    # a (rows, 1) operand broadcast along the rows
    "maximum_outer": ((3, 33, 7), (1, 33, 7), True),
    "sum_last": ((3, 20, 6, 5), (1, 1, 1, 5), True),   # a reduction pass over (x * w)'s last dim
}


def _producer(g, name, x, w):
    if "product" in name:
        return _op(g, "np.matmul", x, w)
    if name == "multiply_rows":
        return _op(g, "np.multiply", x, w)
    if name == "maximum_outer":
        return _op(g, "np.maximum", x, w)
    return _op(g, "np.sum", _op(g, "np.multiply", x, w), axis=-1)


def _consume(g, name, r):
    """The graph's outputs read from the reshaped array r."""
    if name == "pass":
        return [_op(g, "np.subtract", r, _const(g, 1))]
    if name == "two_passes":
        return [_op(g, "np.multiply", r, _const(g, 2)), _op(g, "np.add", r, r)]
    if name == "returned_view":   # the caller gets a copy of a view of the in-place result
        return [_op(g, "np.getitem", r, index=(slice(None, None, -1),))]
    if name == "join":
        return [_op(g, "np.concatenate", r, _op(g, "np.negative", r), axis=0)]
    # an assignment into the reshaped array, then a pass reading it
    s = _op(g, "np.setitem", r, _const(g, 7), index=(0,))
    return [_op(g, "np.add", s, _const(g, 1)), _op(g, "np.sum", r)]


def _run(g, inputs, threads):
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = [np.asarray(v) for v in testing.run_reference(g, inputs)]
            exe = compile_graph(g, [v.type for v in g.inputs])
            exe(*inputs)
            got = exe(*inputs)
    finally:
        numtrace_cpu.set_num_threads(before)
    return exe, got, expected


def _check(got, expected, exact):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
        if exact or b.dtype.kind not in "fc":
            np.testing.assert_array_equal(a, b, strict=True)
        else:
            np.testing.assert_allclose(a, b, rtol=2e-5 if b.dtype.itemsize <= 4 else 1e-12, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("consumer", ["pass", "two_passes", "returned_view", "join", "setitem"])
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_reshape_of_a_transposed_result_equals_numpy(producer, consumer, strided, threads):
    """``np.reshape(np.transpose(h, (1, 0, 2)), (n, -1))``: h written in the reshape's layout."""
    xs, ws, exact = PRODUCERS[producer]
    dtype = np.dtype(np.float32 if "product" in producer and threads == 2 else np.float64)
    rng = np.random.default_rng(len(producer) * 10 + len(consumer))
    x, w = _values(rng, xs, dtype), _values(rng, ws, dtype)
    if strided:
        x, w = testing.noncontiguous(x), testing.noncontiguous(w)

    def body(g, a, b):
        h = _producer(g, producer, a, b)
        axes = (1, 0, 2) if len(h.type.shape) == 3 else (1, 0, 2, 3)
        t = _op(g, "np.transpose", h, axes=axes)
        r = _op(g, "np.reshape", t, shape=(t.type.shape[0], -1), order="C")
        return _consume(g, consumer, r)

    g = Graph()
    ins = [g.add_input(f"x{i}", testing.type_of(v)) for i, v in enumerate((x, w))]
    g.set_outputs(body(g, *ins))
    exe, got, expected = _run(g, [x, w], threads)
    _check(got, expected, exact)
    assert exe.stats()["reshapes_in_place"] == 1, exe.explain()


# The dtypes whose subtraction is a fused pass (the others are NumPy's own, with no pass to redirect).
FUSED_DTYPES = ["bool", "int32", "int64", "float32", "float64"]


@pytest.mark.parametrize("dtype", FUSED_DTYPES + ["int8", "uint16", "uint64", "float16", "complex64",
                                                  "complex128"])
@pytest.mark.parametrize("axes,target", [((1, 0, 2), (5, 12)), ((2, 1, 0), (60,)), ((0, 2, 1), (3, 20)),
                                         ((1, 2, 0), (5, 12)), (None, (2, 2, 15))])
def test_every_dtype_and_reshape_target(dtype, axes, target):
    """An elementwise pass over every item size, transposed any way and reshaped to any target
    (merging dims, splitting them, the full ravel) that copies."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(3)
    x, y = _values(rng, (3, 5, 4), dt), _values(rng, (3, 5, 1), dt)
    op = "np.logical_xor" if dt.kind == "b" else "np.subtract"

    def body(g, a, b):
        t = _op(g, "np.transpose", _op(g, op, a, b), **({} if axes is None else {"axes": axes}))
        r = _op(g, "np.reshape", t, shape=target, order="C")
        return _op(g, "np.add", r, _const(g, True if dt.kind == "b" else 1))

    g = Graph()
    ins = [g.add_input(f"x{i}", TensorType(dt, v.shape)) for i, v in enumerate((x, y))]
    g.set_outputs([body(g, *ins)])
    exe, got, expected = _run(g, [x, y], 1)
    _check(got, expected, True)
    assert exe.stats()["reshapes_in_place"] == (dtype in FUSED_DTYPES), exe.explain()


def test_size_one_dims_and_view_reshapes_are_left_alone():
    """A transpose that moves only size-1 dims reshapes as a view: nothing to rewrite, same values."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 6, 1, 4))

    def body(g, a):
        t = _op(g, "np.transpose", _op(g, "np.sin", a), axes=(2, 1, 0, 3))
        return _op(g, "np.multiply", _op(g, "np.reshape", t, shape=(6, 4), order="C"), _const(g, 2.0))

    g = Graph()
    g.set_outputs([body(g, g.add_input("x", testing.type_of(x)))])
    exe, got, expected = _run(g, [x], 2)
    testing.assert_matches_numpy(got[0] / 2, expected[0] / 2, "np.sin", [x])
    assert exe.stats()["reshapes_in_place"] == 0


@pytest.mark.parametrize("order", ["F", "A"])
@pytest.mark.parametrize("producer", ["product", "multiply_rows"])
def test_reshape_in_another_order_keeps_its_copy(producer, order):
    """A Fortran-order (or 'A') reshape of the transposed result reads it in another element order:
    it is not rewritten, and equals NumPy's."""
    xs, ws, exact = PRODUCERS[producer]
    rng = np.random.default_rng(5)
    x, w = _values(rng, xs, np.dtype(np.float64)), _values(rng, ws, np.dtype(np.float64))

    def body(g, a, b):
        t = _op(g, "np.transpose", _producer(g, producer, a, b), axes=(1, 0, 2))
        r = _op(g, "np.reshape", t, shape=(t.type.shape[0], -1), order=order)
        return _op(g, "np.add", r, _const(g, 1.0))

    g = Graph()
    ins = [g.add_input(f"x{i}", testing.type_of(v)) for i, v in enumerate((x, w))]
    g.set_outputs([body(g, *ins)])
    exe, got, expected = _run(g, [x, w], 1)
    _check(got, expected, exact)
    assert exe.stats()["reshapes_in_place"] == 0


def test_deciding_the_rewrite_allocates_nothing_of_the_values_size():
    """Whether the reshape copies is found from shapes and strides alone: the compile neither copies a
    (64, 64, 64, 64) intermediate nor allocates one (64 MiB each); its memory is the one buffer the
    executable keeps for the reshaped array."""
    t = TensorType(np.dtype(np.float32), (64, 64, 64, 64))

    def body(g, a):
        h = _op(g, "np.transpose", _op(g, "np.negative", a), axes=(3, 1, 2, 0))
        return _op(g, "np.add", _op(g, "np.reshape", h, shape=(64 * 64, 64 * 64), order="C"), _const(g, 1.0))

    g = Graph()
    g.set_outputs([body(g, g.add_input("x", t))])
    tracemalloc.start()
    try:
        exe = compile_graph(g, [t])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exe.stats()["reshapes_in_place"] == 1
    assert peak < 80 << 20, peak


@pytest.mark.parametrize("consumer", ["pass", "two_passes", "returned_view", "join", "setitem"])
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_prim_reshape_of_a_transposed_result_is_written_in_place(producer, consumer):
    """``t.reshape(n, -1)`` with sizes read from a shape records prim.reshape (attention's merge of
    its heads in a module): once its sizes are known it is rewritten as np.reshape's copy is."""
    xs, ws, exact = PRODUCERS[producer]
    rng = np.random.default_rng(len(producer) * 7 + len(consumer))
    x, w = _values(rng, xs, np.dtype(np.float64)), _values(rng, ws, np.dtype(np.float64))

    g = Graph()
    a, b = (g.add_input(f"x{i}", testing.type_of(v)) for i, v in enumerate((x, w)))
    h = _producer(g, producer, a, b)
    t = _op(g, "np.transpose", h, axes=(1, 0, 2) if len(h.type.shape) == 3 else (1, 0, 2, 3))
    r = _op(g, "prim.reshape", t, shape=(t.type.shape[0], -1))
    g.set_outputs(_consume(g, consumer, r))
    exe, got, expected = _run(g, [x, w], 1)
    _check(got, expected, exact)
    assert exe.stats()["reshapes_in_place"] == 1, exe.explain()
