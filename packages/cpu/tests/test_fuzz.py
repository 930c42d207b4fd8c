"""Differential fuzzing of the fuser and planner: random graphs of elementwise, reduction and
movement ops over random shapes and dtypes must give what the registry references give."""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph, ShapeError, testing
from numtrace_ir.types import TensorType

DTYPES = [np.dtype(d) for d in ("bool", "int32", "int64", "float32", "float64")]
BINARY = ["np.add", "np.subtract", "np.multiply", "np.divide", "np.maximum", "np.minimum", "np.less",
          "np.greater_equal", "np.equal", "np.logical_and", "np.power", "np.arctan2"]
UNARY = ["np.negative", "np.absolute", "np.exp", "np.tanh", "np.sqrt", "np.square", "np.sign", "np.floor",
         "np.logical_not", "np.isnan", "np.log1p", "np.sin"]
REDUCE = ["np.sum", "np.mean", "np.max", "np.min", "np.var", "np.std", "np.any", "np.all"]
MOVE = ["np.transpose", "np.expand_dims", "np.reshape", "np.getitem"]
CONSTANTS = st.sampled_from([2, 0.5, -1.25, True, -0.0, float("nan"), float("inf")])


def _values(rng, t: TensorType) -> np.ndarray:
    # Quarter-integers: sums and products are exact in every float dtype, so reductions compare
    # tightly whatever order they add in.
    x = rng.integers(-8, 9, size=t.shape) / 4
    return x.astype(t.dtype)


@st.composite
def programs(draw):
    ndim = draw(st.integers(0, 3))
    base = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 7, 64, 1100]), min_size=ndim, max_size=ndim)))
    if np.prod(base, dtype=np.int64) > 40_000:
        base = tuple(min(d, 7) for d in base)
    g = Graph()
    values = []
    for i in range(draw(st.integers(1, 3))):
        shape = tuple(d if draw(st.booleans()) else 1 for d in base)
        shape = shape[draw(st.integers(0, len(shape))):]
        values.append(g.add_input(f"x{i}", TensorType(draw(st.sampled_from(DTYPES)), shape)))
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["binary", "binary", "unary", "unary", "reduce", "move", "const", "where",
                                     "cast", "scalar_pow"]))
        a = draw(st.sampled_from(values))
        try:
            if kind == "binary":
                node = g.create_node(draw(st.sampled_from(BINARY)), [a, draw(st.sampled_from(values))])
            elif kind == "unary":
                node = g.create_node(draw(st.sampled_from(UNARY)), [a])
            elif kind == "const":   # a constant in either operand slot
                c = g.create_node("prim.Constant", [], attrs={"value": draw(CONSTANTS)}).output
                pair = [a, c] if draw(st.booleans()) else [c, a]
                node = g.create_node(draw(st.sampled_from(BINARY)), pair)
            elif kind == "where":   # constants in any of its three slots too
                slots = [draw(st.sampled_from(values)), a, draw(st.sampled_from(values))]
                k = draw(st.integers(-1, 2))
                if k >= 0:
                    slots[k] = g.create_node("prim.Constant", [], attrs={"value": draw(CONSTANTS)}).output
                node = g.create_node("np.where", slots)
            elif kind == "scalar_pow":   # ``s ** p`` of NumPy scalars: a 0-d value, another or a constant
                s = a if a.type.ndim == 0 else g.create_node("np.max", [a], attrs={"axis": None}).output
                scalars = [v for v in values if v.type.ndim == 0 and v is not s]
                p = (draw(st.sampled_from(scalars)) if scalars and draw(st.booleans())
                     else g.create_node("prim.Constant", [], attrs={"value": draw(CONSTANTS)}).output)
                node = g.create_node("np.scalar_power", [s, p] if draw(st.booleans()) else [p, s])
            elif kind == "cast":
                node = g.create_node("np.astype", [a], attrs={"dtype": draw(st.sampled_from(DTYPES))})
            elif kind == "reduce":
                nd = a.type.ndim
                axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1))) if nd else None
                node = g.create_node(draw(st.sampled_from(REDUCE)), [a],
                                     attrs={"axis": axis, "keepdims": draw(st.booleans())})
            else:
                op = draw(st.sampled_from(MOVE))
                if op == "np.transpose":
                    node = g.create_node(op, [a])
                elif op == "np.getitem":  # a strided or reversed slice of dim 0, one index, a new last dim
                    key = draw(st.sampled_from([(slice(None, None, 2),), (slice(None, None, -1),), (0,),
                                                (Ellipsis, slice(1, None)), (Ellipsis, None)]))
                    node = g.create_node(op, [a], attrs={"index": key})
                elif op == "np.expand_dims":
                    node = g.create_node(op, [a], attrs={"axis": 0})
                else:
                    node = g.create_node(op, [a], attrs={"shape": (-1,)})
        except (ShapeError, TypeError, ValueError):
            continue
        values.extend(node.outputs)
    outs = [values[-1]] + draw(st.lists(st.sampled_from(values), max_size=2))
    g.set_outputs(outs)
    return g


_reference = testing.run_reference



def _builders(g: Graph):
    """(const, node) adding to g: const(value) a constant's value, node(op, *args, **attrs) an op's
    output, as the example graphs below are written."""
    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    return const, node

def _constant_column_sums():
    """``np.sum(2.0 * x + 0 * y, axis=0)`` and the mean over the middle axis of ``where(x > 0, inf, x *
    -0.0) * 3``: generated column-mode passes whose kernels hold several constants (float, int, 0,
    -0.0, inf) in registers c<r>."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float64), (64, 5)))
    y = g.add_input("x1", TensorType(np.dtype(np.int32), (64, 5)))
    z = g.add_input("x2", TensorType(np.dtype(np.float32), (7, 64, 3)))

    const, node = _builders(g)

    e = node("np.add", node("np.multiply", const(2.0), x), node("np.multiply", const(0), y))
    w = node("np.where", node("np.greater", z, const(0.0)), const(float("inf")),
             node("np.multiply", z, const(-0.0)))
    g.set_outputs([node("np.sum", e, axis=0, keepdims=False),
                   node("np.mean", node("np.multiply", w, const(3)), axis=1, keepdims=True)])
    return g


def _short_row_extremes():
    """max/min over the last axis of short rows (float64, float32 with NaN lanes from a comparison,
    int32, bool): the interpreter folds each block of rows in one loop (stats' extreme_rows_runs)."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float64), (64, 7)))
    y = g.add_input("x1", TensorType(np.dtype(np.float32), (33, 3)))
    z = g.add_input("x2", TensorType(np.dtype(np.int32), (64, 5)))

    const, node = _builders(g)

    nan = const(float("nan"))
    y_nan = node("np.where", node("np.greater", y, node("np.negative", y)), nan, y)
    g.set_outputs([node("np.max", x, axis=-1, keepdims=False), node("np.min", y_nan, axis=1, keepdims=True),
                   node("np.max", z, axis=-1, keepdims=False),
                   node("np.min", node("np.less", x, node("np.negative", x)), axis=-1, keepdims=False)])
    return g


def _narrow_column_wheres():
    """Sums and means over the middle axis of np.where's picks over 4 and 8 columns (a broadcast row
    compared, an elementwise output of the same pass): generated column blocks of few columns, their
    values computed in one loop over the block, each column added packed (nt_gen.h's nt_gen_colsum)."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float64), (90, 4)))
    y = g.add_input("x1", TensorType(np.dtype(np.float64), (4,)))
    z = g.add_input("x2", TensorType(np.dtype(np.float32), (40, 3, 8)))

    const, node = _builders(g)

    picked = node("np.where", node("np.greater", x, y), node("np.multiply", x, const(2.0)),
                  node("np.sqrt", x))
    signed = node("np.where", node("np.less", z, const(0.5)), node("np.negative", z), const(float("nan")))
    g.set_outputs([node("np.sum", picked, axis=0, keepdims=False), node("np.multiply", x, y),
                   node("np.mean", signed, axis=1, keepdims=False)])
    return g


def _row_tile_softmax():
    """A softmax and a log-softmax over short rows (64 in float32, 7 in float64, an inf among the
    constants) and a row max of tanh: generated passes that reduce their innermost dim in tiles of
    whole rows, exp and tanh through the loop table (stats' generated_row_tile_runs)."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float32), (33, 64)))
    y = g.add_input("x1", TensorType(np.dtype(np.float64), (5, 20, 7)))

    const, node = _builders(g)

    e = node("np.exp", node("np.subtract", x, node("np.max", x, axis=-1, keepdims=True)))
    d = node("np.subtract", y, node("np.max", y, axis=-1, keepdims=True))
    masked = node("np.where", node("np.greater", d, const(-0.5)), d, const(float("-inf")))
    total = node("np.sum", node("np.exp", masked), axis=-1, keepdims=True)
    g.set_outputs([node("np.divide", e, node("np.sum", e, axis=-1, keepdims=True)),
                   node("np.subtract", masked, node("np.log", total)),
                   node("np.max", node("np.tanh", x), axis=1, keepdims=False)])
    return g


def _per_row_outer():
    """One-hot encoding ``(x[:, None] == classes).astype(float32)`` (int64, rows of 10), an outer
    difference ``y[:, None] - z`` (float32, rows of 16) and the row sums of its exp (float64, rows of
    3): x[:, None] and y[:, None] are read once per row in the generated tiles of rows (stats'
    generated_row_scalar_runs), elementwise and reduced."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.int64), (300,)))
    y = g.add_input("x1", TensorType(np.dtype(np.float32), (70,)))
    z = g.add_input("x2", TensorType(np.dtype(np.float32), (16,)))
    w = g.add_input("x3", TensorType(np.dtype(np.float64), (3,)))

    const, node = _builders(g)

    col = node("np.getitem", x, index=(slice(None), None))
    one_hot = node("np.astype", node("np.equal", col, const(np.arange(-4, 6))), dtype=np.dtype(np.float32))
    ycol = node("np.getitem", y, index=(slice(None), None))
    diff = node("np.subtract", ycol, z)
    wide = node("np.astype", ycol, dtype=np.dtype(np.float64))
    rows = node("np.sum", node("np.exp", node("np.subtract", wide, w)), axis=-1, keepdims=False)
    g.set_outputs([one_hot, diff, rows])
    return g


def _scalar_powers():
    """``x * max(x) ** 0.5``, ``2.0 ** sum(y)``, ``sum(y) ** max(x)`` (float64 ** float32) and
    ``max(x) ** 3`` (float32): np.scalar_power in passes of their own, as C pow / powf (stats'
    scalar_powers), the first feeding a pass over x."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float32), (64,)))
    y = g.add_input("x1", TensorType(np.dtype(np.float64), (7, 3)))

    const, node = _builders(g)

    s, t = node("np.max", x, axis=None), node("np.sum", y, axis=None)
    g.set_outputs([node("np.multiply", x, node("np.scalar_power", s, const(0.5))),
                   node("np.scalar_power", const(2.0), t), node("np.scalar_power", t, s),
                   node("np.scalar_power", s, const(3))])
    return g


def _broadcast_powers():
    """``minimum(x, -inf) ** (sum(y) * 0 + 0.5)`` (float64) and ``(x * -0.0) ** e`` (float32, e a 0-d input):
    np.power of a pass and a run-time scalar exponent, on NumPy's branch by its value (stats'
    broadcast_powers; at 0.5: NaN and -0.0, where C pow gives +inf and +0.0)."""
    g = Graph()
    x = g.add_input("x0", TensorType(np.dtype(np.float64), (5, 9)))
    y = g.add_input("x1", TensorType(np.dtype(np.float64), (4,)))
    z = g.add_input("x2", TensorType(np.dtype(np.float32), (33,)))
    e = g.add_input("x3", TensorType(np.dtype(np.float32), ()))

    const, node = _builders(g)

    half = node("np.add", node("np.multiply", node("np.sum", y, axis=None), const(0.0)), const(0.5))
    g.set_outputs([node("np.power", node("np.minimum", x, const(-np.inf)), half),
                   node("np.power", node("np.multiply", z, const(-0.0)), node("np.rint", e))])
    return g


# Every GENERATED_EVERY-th program, and the examples, compile their passes to C before the first call
# (numtrace_cpu.compiler's sync mode): the generated kernels are fuzzed too.
GENERATED_EVERY = 15
_PROGRAMS = itertools.count(1)
_COLUMN_SUMS = _constant_column_sums()
_ROW_EXTREMES = _short_row_extremes()
_NARROW_WHERES = _narrow_column_wheres()
_ROW_TILES = _row_tile_softmax()
_PER_ROW = _per_row_outer()
_SCALAR_POWERS = _scalar_powers()
_BROADCAST_POWERS = _broadcast_powers()


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.mktemp("kernels")))
        yield


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), st.booleans(), st.booleans())
@example(_COLUMN_SUMS, False, False)
@example(_COLUMN_SUMS, True, False)
@example(_ROW_EXTREMES, False, False)
@example(_ROW_EXTREMES, True, False)
@example(_NARROW_WHERES, False, False)
@example(_NARROW_WHERES, True, False)
@example(_ROW_TILES, False, False)
@example(_ROW_TILES, True, False)
@example(_PER_ROW, False, False)
@example(_PER_ROW, True, False)
@example(_SCALAR_POWERS, False, False)
@example(_SCALAR_POWERS, True, False)
@example(_BROADCAST_POWERS, False, False)
@example(_BROADCAST_POWERS, True, False)
def test_cpu_equals_reference(g, strided, in_place):
    """`in_place`: the first output is written over an input of its type where there is one (as a
    traced ``x += ...`` is), so a pass may read and write the same memory."""
    rng = np.random.default_rng(len(g.nodes))
    inputs = [_values(rng, v.type) for v in g.inputs]
    if strided:
        inputs = [testing.noncontiguous(x) for x in inputs]
    updates = None
    if in_place:
        same = [i for i, v in enumerate(g.inputs) if v.type == g.outputs[0].type and v is not g.outputs[0]]
        updates = {0: same[0]} if same else None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # "Mean of empty slice" and the like
        try:
            expected = _reference(g, inputs)
        except ValueError:   # e.g. max of an empty axis: the cpu backend must raise too
            expected = None
        examples = (_COLUMN_SUMS, _NARROW_WHERES, _ROW_TILES, _PER_ROW, _SCALAR_POWERS, _BROADCAST_POWERS)
        generated = next(_PROGRAMS) % GENERATED_EVERY == 0 or any(g is h for h in examples)
        old = compiler.set_mode("sync" if generated else compiler.mode())
        try:
            exe = compile_graph(g, [v.type for v in g.inputs], updates=updates)
        finally:
            compiler.set_mode(old)
        if expected is None:
            try:
                exe(*inputs)
            except (RuntimeError, ValueError):
                return
            raise AssertionError("the reference raised but the cpu backend did not")
        fresh = testing.noncontiguous if strided else np.copy   # the call may write into one
        got = exe(*[fresh(x) if updates else x for x in inputs])
        got_again = exe(*[fresh(x) if updates else x for x in inputs])   # a second call reuses the arena
    f32 = np.dtype(np.float32)
    lowest = f32 if any(v.type.dtype == f32 for v in [*g.inputs, *(o for n in g.nodes for o in n.outputs)]
                        if isinstance(v.type, TensorType)) else None
    testing.assert_outputs_close(got, expected, what=str(g), computed_in=lowest)
    testing.assert_outputs_close(got_again, expected, what="second call", computed_in=lowest)
    if g is _ROW_EXTREMES:
        assert exe.stats()["extreme_rows_runs"] > 0, "the short rows' max/min were not folded in blocks"
    if g is _NARROW_WHERES:
        assert exe.stats()["generated_column_runs"] >= 4, "the narrow column sums did not run generated"
    if g is _ROW_TILES:
        assert exe.stats()["generated_row_tile_runs"] >= 4, "the softmax rows did not run in generated tiles"
    if g is _PER_ROW:
        assert exe.stats()["generated_row_scalar_runs"] >= 4, "x[:, None] was not read once per row"
    if g is _SCALAR_POWERS:
        assert exe.stats()["scalar_powers"] == 4, "a float scalar power ran as NumPy's operator"
    if g is _BROADCAST_POWERS:
        assert exe.stats()["broadcast_powers"] == 2, "a run-time scalar exponent's power was not branched"
