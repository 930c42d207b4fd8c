"""Lowering a specialized graph into steps: fused interpreter groups, BLAS contractions, fallbacks.

Fusion is greedy in program order. An elementwise node joins the open groups that produce its
inputs when they iterate over the same shape; a reduction joins the group of its producer (or starts
one), and later elementwise nodes of the same shape may still join that pass. A group stays open
only while no node outside it has read one of its values, which is what makes moving the group
to its last node's position (and so merging several groups) always legal. Everything the
interpreter has no kernel for becomes a BLAS step (matmul/dot) or runs its NumPy reference.

The result is plain data (`Step` objects over value numbers); `numtrace_cpu.planner` assigns
buffers and `numtrace_cpu.executable` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numtrace_ir import registry
from numtrace_ir.errors import traced_at
from numtrace_ir.interpreter import reference_call
from numtrace_ir.registry import REDUCTION_KINDS, OpDef, UnknownOpError
from numtrace_ir.types import ScalarType, TensorType

from numtrace_cpu.isa import DTYPES, OPS, REDUCTIONS, REG_KINDS, ROLES, FusedKernel
from numtrace_cpu.products import epilogues, gemv_form

__all__ = ["LOWERED", "SMALL_K", "ConstantStep", "FallbackStep", "FusedStep", "IntoStep", "MatmulStep",
           "PartViewStep", "ScanStep", "SetitemStep", "SmallMatmulStep", "Step", "ViewStep",
           "constant_exponent", "lower"]

# Interpreter limits (see runtime.pyx); bigger groups are split.
MAX_OPERANDS = 64
MAX_REGISTERS = 256
MAX_REDUCTIONS = 16
# Largest contracted dim (and column count) a SmallMatmulStep takes, and its dtypes; larger or
# other products go to BLAS.
SMALL_K = 8
_SMALL_MATMUL_DTYPES = frozenset(map(np.dtype, (np.float64, np.float32)))
# Dtypes of the scan kernel (input and output alike), and the inputs it widens to an int64 output
# (NumPy's accumulator for them); others call NumPy's cumsum into the buffer.
_SCAN_DTYPES = frozenset(map(np.dtype, (np.float64, np.float32, np.int64, np.int32)))
_SCAN_WIDENED = frozenset(map(np.dtype, (np.bool_, np.int8, np.int16, np.int32)))

# The ops this module reads by identity (a misspelt name fails at import).
(_WHERE, _ASTYPE, _COPY, _POWER, _MATMUL, _DOT, _STACK, _CONCATENATE, _GETITEM, _SETITEM, _DIVMOD) = map(
    registry.get, ("np.where", "np.astype", "np.copy", "np.power", "np.matmul", "np.dot", "np.stack",
                   "np.concatenate", "np.getitem", "np.setitem", "np.divmod"))
(_TRIU, _TRIL, _DIAG, _OUTER, _FULL) = map(registry.get, ("np.triu", "np.tril", "np.diag", "np.outer",
                                                         "prim.full"))
# What the backend lowers itself; `passes.decompose` rewrites the rest (np.clip becomes maximum and
# minimum, which fuse). np.divmod stays whole: one NumPy call computes both outputs, and its parts
# have no fused kernel either.
LOWERED = frozenset(op for op in registry.all_ops() if op.decompose is None) | {_DIVMOD}
# Ufuncs that are a multiplication by a constant: ufunc -> (numerator, denominator). NumPy's loop
# computes ``x * (num / den)`` with the quotient rounded in the loop's dtype, and so does the kernel.
_UFUNC_SCALINGS = {np.deg2rad: (np.pi, 180.0), np.rad2deg: (180.0, np.pi)}
# Ufuncs whose interpreter op has another name.
_UFUNC_ALIASES = {np.fabs: "absolute", np.positive: "copy", np.conjugate: "copy"}
# Reductions the interpreter folds: `OpDef.reduction` -> (interpreter reduction, whether the input is
# first made bool). The reduced register takes the node's output dtype, which gives NumPy's accumulator
# dtype (int sums in int64, int means in float64, ...).
_REDUCTIONS = {"sum": ("sum", False), "mean": ("mean", False), "var": ("var", False), "std": ("std", False),
               "max": ("max", False), "min": ("min", False), "any": ("max", True), "all": ("min", True)}
if not set(_REDUCTIONS) <= set(REDUCTION_KINDS):
    raise ImportError(f"reduction kinds unknown to the registry: {set(_REDUCTIONS) - set(REDUCTION_KINDS)}")
_WEAK = {"int": int, "float": float, "bool": bool, "complex": complex}
# Movement ops for which NumPy returns a view of their first input where it can (`OpDef.as_view`): their
# result is kept as that array (no buffer, no copy), and the input's buffer lives as long as the view.
_VIEW_OPS = frozenset(op for op in registry.all_ops() if op.as_view is not None)
_OPDEFS: dict[str, OpDef | None] = {}


def _opdef(node) -> OpDef | None:
    """The registry entry of `node`'s op, or None for an op the registry does not know."""
    try:
        return _OPDEFS[node.op]
    except KeyError:
        try:
            op = registry.get(node.op)
        except UnknownOpError:
            op = None
        _OPDEFS[node.op] = op
        return op


def _folded_reduction(node) -> tuple | None:
    """(interpreter reduction, cast-to-bool first) of a reduction the interpreter folds, else None."""
    op = _opdef(node)
    return _REDUCTIONS.get(op.reduction) if op is not None and op.reduction is not None else None


# -------------------------------------------------------------------------------------------------
# Steps

@dataclass
class Step:
    """One unit of work: reads `inputs` and writes `outputs` (value numbers)."""

    inputs: list[int]
    outputs: list[int]
    nodes: list[Any]
    view: ClassVar[bool] = False   # outputs may alias inputs[0] (see planner)
    # inputs[0] is first needed here, before the step that fills it (see PartViewStep): the planner
    # gives it its buffer at this step.
    opens_input: ClassVar[bool] = False


@dataclass
class FusedStep(Step):
    """A fused group: `kernel` runs over operands `inputs + outputs` (the kernel's operand order).
    `scalar_inputs[i]` is the dtype a runtime Python scalar input is converted to, or None.
    `overwritable` holds the (input, output) value pairs where the kernel may write that output over
    that input's memory: same type, no reduction, and no instruction reads the input after the one
    that writes the output (registers point straight into operand memory within a block)."""

    kernel: Any = None
    scalar_inputs: list = field(default_factory=list)
    overwritable: frozenset = frozenset()


@dataclass
class MatmulStep(Step):
    """``np.matmul`` into a planned or output buffer (NumPy dispatches to BLAS), or, when `gemv` is
    set (vector operand position, summed matrix axis; see numtrace_cpu.products), the GEMV kernels
    with the bias add (`inputs[2]` when `bias`) and `activation` that follow in the graph fused in."""

    gemv: tuple | None = None
    bias: bool = False
    activation: str | None = None


@dataclass
class SmallMatmulStep(Step):
    """``a @ b`` whose contracted dim K and columns m are at most `SMALL_K` (``img @ [0.299, 0.587,
    0.114]``): one pass over `a` summing its K products per output in order, which beats BLAS's
    per-call and per-row setup; the sums equal BLAS's within float rounding (BLAS may pair or fuse
    the products differently)."""


@dataclass
class ScanStep(Step):
    """``np.cumsum``/``np.cumprod`` along `axis` by the scan kernel: strictly left to right, so it
    equals NumPy bit for bit. Its input is often the output itself: the pass that computes the
    scanned values (``np.log(p[1:] / p[:-1])``) writes them into the result, scanned there in place."""

    axis: int = 0
    op: int = 0            # 0 cumsum, 1 cumprod
    flatten: bool = False  # axis=None on an n-d input: the scan of its C-order ravel


@dataclass
class FallbackStep(Step):
    """An op without a kernel: its NumPy reference, result copied into the planned buffer."""

    fn: Any = None
    attrs: dict = field(default_factory=dict)


@dataclass
class ViewStep(FallbackStep):
    """A movement op whose result is stored as NumPy returns it: usually a view of its input."""

    view: ClassVar[bool] = True


@dataclass
class PartViewStep(ViewStep):
    """The view of a join's result (`np.stack`, `np.concatenate`, ...) where one of its parts goes:
    placed before the fused pass computing that part, which then writes it straight into the joined
    array (its value number is the view's) instead of into a buffer that the join copies."""

    opens_input: ClassVar[bool] = True


@dataclass
class IntoStep(Step):
    """An op whose NumPy function writes its result into the planned buffer: ``fn(*inputs, out=o)``
    (scans, argmin/argmax, stack/concatenate, mixed-dtype matmul). The same NumPy loop as the
    reference, without its fresh temporary and the copy out of it."""

    fn: Any = None


@dataclass
class SetitemStep(Step):
    """Functional ``a[key] = value`` (`np.setitem`): `a` copied into the planned buffer, then NumPy's
    own assignment into it. `index` is the node's key, its ``"input"`` placeholders filled from
    `inputs[1:-1]` per call (masks, integer arrays)."""

    index: tuple = ()


@dataclass
class ConstantStep(Step):
    """A prim.Constant: its value lives in the executable's environment, no work per call."""


# -------------------------------------------------------------------------------------------------
# Classifying nodes

def _tensor(v) -> TensorType | None:
    return v.type if isinstance(v.type, TensorType) else None


def _supported_dtype(t) -> bool:
    return isinstance(t, TensorType) and t.is_concrete and t.dtype in DTYPES


def _operand_dtype(v):
    """What NumPy's loop resolution sees for an input: a dtype, or the Python type of a weak scalar."""
    if isinstance(v.type, ScalarType):
        return _WEAK[v.type.kind]
    return v.type.dtype


def _elementwise_plan(node):
    """How the interpreter computes an elementwise node: (interpreter op, loop input dtypes, compute
    dtype) or None when it has no kernel for it. Memoized on what the answer depends on."""
    out = node.outputs
    if len(out) != 1 or not _supported_dtype(out[0].type):
        return None
    op = _opdef(node)
    if op is _SETITEM:
        return _masked_fill_plan(node)
    ins = node.inputs
    key = (op, out[0].type.dtype, tuple(_operand_key(v) for v in ins), constant_exponent(node))
    try:
        plan = _PLAN_CACHE[key]
    except KeyError:
        plan = None if op is None or any(d is _NO_KERNEL for d in key[2]) else _plan_for(op, *key[1:])
        if len(_PLAN_CACHE) > 4096:
            _PLAN_CACHE.clear()
        _PLAN_CACHE[key] = plan
    return plan if plan is None or _weak_ints_fit(ins, plan[2]) else None


def _weak_ints_fit(ins, compute: np.dtype) -> bool:
    """Whether every constant Python int among `ins` is a value of the integer dtype `compute`. NumPy
    compares an int outside the range exactly (``x < 2**31`` is all True for int32 x) and refuses one
    in arithmetic (OverflowError), where a constant register would hold it wrapped: such nodes run
    NumPy's own call instead."""
    if compute.kind not in "iu":
        return True
    info = np.iinfo(compute)
    for v in ins:
        src = v.node
        if isinstance(v.type, ScalarType) and src is not None and src.op == "prim.Constant":
            value = src.attrs["value"]
            if isinstance(value, int) and not info.min <= value <= info.max:
                return False
    return True


_PLAN_CACHE: dict = {}
# Marks an operand the interpreter cannot read. Not None: ``np.dtype("float64") == None`` is True
# (None means the default dtype), so `None in key` once sent every float64 op to the fallback path,
# and a cache key holding None could compare equal to one holding float64.
_NO_KERNEL = object()


def _operand_key(v):
    """An input's part of the plan key: what loop resolution sees, or _NO_KERNEL."""
    return _operand_dtype(v) if _supported_dtype(v.type) or isinstance(v.type, ScalarType) else _NO_KERNEL


def _plan_for(opdef: OpDef, out_dt: np.dtype, in_dts: tuple, exponent):
    """The plan of `_elementwise_plan`, checked against the dtypes each interpreter op computes in
    (some register dtypes, e.g. uint8, are only ever read by a cast)."""
    if any(d is complex for d in in_dts):
        return None
    plan = _plan_unchecked(opdef, out_dt, in_dts, exponent)
    if plan is None:
        return None
    code = DTYPES[plan[2]]
    return plan if all(code in OPS[op][2] for op in _interpreter_ops(plan[0], exponent)) else None


def _interpreter_ops(op: str, exponent) -> list[str]:
    """The interpreter ops that the plan op `op` emits."""
    if op == "power_const":
        return [step[0] for step in _POWER_EXPANSIONS[exponent]]
    return {"scale": ["multiply"], "masked_fill": ["where"]}.get(op, [op])


def _plan_unchecked(opdef: OpDef, out_dt: np.dtype, in_dts: tuple, exponent):
    n = len(in_dts)
    if opdef is _WHERE:
        return ("where", (np.dtype(bool), out_dt, out_dt), out_dt) if n == 3 else None
    if opdef is _ASTYPE or opdef is _COPY:   # a copy is a cast to its own dtype
        return ("cast", (out_dt,), out_dt) if n == 1 else None
    if exponent is not None:
        return _power_plan(out_dt, in_dts, exponent)
    ufunc = opdef.ufunc
    if ufunc is None or ufunc.nout != 1 or ufunc.nin != n:
        return None
    op = "scale" if ufunc in _UFUNC_SCALINGS else _UFUNC_ALIASES.get(ufunc, ufunc.__name__)
    if op not in OPS and op != "scale":
        return None
    try:
        loop = ufunc.resolve_dtypes(in_dts + (None,))
    except (TypeError, ValueError, np.exceptions.DTypePromotionError):
        return None
    compute = loop[0]
    if loop[-1] != out_dt or any(d not in DTYPES for d in loop):
        return None
    if any(d != compute for d in loop[:-1]):
        return None
    return op, loop[:-1], compute


# np.power(x, c) for a constant scalar c, as instructions instead of a pow() call per element. Each
# step is (op, operands) with operands "x" (the base), "t" (the previous step's result) or "1".
# For -1, 0, 0.5, 1 and 2 NumPy's own float power loop takes exactly these shortcuts when the
# exponent is a scalar (so -0.0 ** 0.5 is -0.0, as sqrt gives), which makes them bit-exact; integer
# bases get the same wrapping products as NumPy's repeated squaring. Reciprocal and sqrt have no
# integer kernel, so an integer base with a negative exponent still reaches NumPy (which raises).
# Every step's intermediate overflows or underflows only where pow's result does (checked over the
# whole float range, subnormals, ±0, ±inf and nan, by test_fast_paths).
_POWER_EXPANSIONS = {
    -1.0: (("reciprocal", "x"),),
    0.0: (("copy", "1"),),
    0.5: (("sqrt", "x"),),
    1.0: (("copy", "x"),),
    2.0: (("square", "x"),),
    3.0: (("square", "x"), ("multiply", "t", "x")),
    4.0: (("square", "x"), ("square", "t")),
    -2.0: (("reciprocal", "x"), ("square", "t")),   # not 1 / x**2: x**2 overflows first for |x| > 1.3e154
}
# Exponents for which NumPy calls pow(): a float32 base is raised in float64 and rounded once (the
# correctly rounded result but for rare double roundings; NumPy's powf is itself sometimes an ulp
# off), while float64 products may differ from pow by an ulp or two.
_POWER_WIDENED = frozenset({3.0, 4.0, -2.0})


def constant_exponent(node) -> float | None:
    """c of ``np.power(x, c)`` when c is a scalar constant that `_POWER_EXPANSIONS` covers."""
    if _opdef(node) is not _POWER or len(node.inputs) != 2:
        return None
    src = node.inputs[1].node
    if src is None or src.op != "prim.Constant":
        return None
    value = src.attrs["value"]
    if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "iuf":
        return None
    e = float(value)
    return e if e in _POWER_EXPANSIONS else None


def _power_plan(out_dt: np.dtype, in_dts: tuple, exponent: float):
    """np.power with a constant exponent: NumPy's loop dtype, which must be one dtype throughout."""
    try:
        loop = np.power.resolve_dtypes(in_dts + (None,))
    except (TypeError, ValueError, np.exceptions.DTypePromotionError):
        return None
    compute = loop[0]
    if loop[-1] != out_dt or any(d != compute for d in loop) or compute not in DTYPES:
        return None
    return "power_const", (compute,), compute


_MASK_INDEX = ("input",)


def _masked_fill_plan(node):
    """``a[mask] = c`` with a boolean mask of a's own shape and a constant scalar c is the elementwise
    ``where(mask, c', a)``, c' being c as NumPy stores it into a's dtype (computed here by NumPy's own
    scalar assignment; a value NumPy refuses leaves the node to the reference, which raises)."""
    if tuple(node.attrs.get("index", ())) != _MASK_INDEX or len(node.inputs) != 3:
        return None
    a, mask, value = node.inputs
    out_t = node.outputs[0].type
    if not (_supported_dtype(a.type) and isinstance(mask.type, TensorType) and mask.type.dtype == bool
            and mask.type.is_concrete and tuple(mask.type.shape) == tuple(a.type.shape)):
        return None
    stored = _constant_stored(value, out_t.dtype)
    if stored is None:
        return None
    plan = ("masked_fill", (np.dtype(bool), out_t.dtype), out_t.dtype)
    code = DTYPES[out_t.dtype]
    return plan if code in OPS["where"][2] else None


def _constant_stored(v, dtype: np.dtype):
    """The 0-d array NumPy's ``x[...] = value`` stores for a constant scalar `v` into `dtype`, or None."""
    src = v.node
    if src is None or src.op != "prim.Constant":
        return None
    value = src.attrs["value"]
    if np.ndim(value) != 0 or np.asarray(value).dtype.kind not in "biuf":
        return None
    tmp = np.zeros((), dtype)
    try:
        with np.errstate(all="raise"):
            tmp[()] = value
    except Exception:
        return None
    return tmp


def _reduction_plan(node):
    """(interpreter reduction, reduced axes, cast-to-bool first) or None."""
    folded = _folded_reduction(node)
    if folded is None or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    if node.attrs.get("initial") is not None:  # not in the kernels: the reference runs it
        return None
    src, out = node.inputs[0].type, node.outputs[0].type
    if not (_supported_dtype(src) and _supported_dtype(out)):
        return None
    red, to_bool = folded
    if DTYPES[out.dtype] not in REDUCTIONS[red][1]:
        return None
    axis = node.attrs.get("axis")
    ndim = len(src.shape)
    items = range(ndim) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    axes = tuple(sorted(a % ndim if ndim else a for a in items))
    if ndim == 0 and axes:
        return None
    return red, axes, to_bool


def _is_matmul(node) -> bool:
    op = _opdef(node)
    if (op is not _MATMUL and op is not _DOT) or len(node.inputs) != 2:
        return False
    a, b = (_tensor(v) for v in node.inputs)
    out = _tensor(node.outputs[0])
    if a is None or b is None or out is None or not (a.is_concrete and b.is_concrete and out.is_concrete):
        return False
    if op is _DOT and not (a.ndim == 2 and b.ndim == 2):
        return False
    return a.dtype == b.dtype == out.dtype and out.dtype.kind in "fc" and a.ndim >= 1 and b.ndim >= 1


def _is_small_matmul(node) -> bool:
    """A float32/float64 product (..., n, K) @ (K,) or (K, m) with K, m <= SMALL_K (see
    SmallMatmulStep)."""
    if not _is_matmul(node) or node.outputs[0].type.dtype not in _SMALL_MATMUL_DTYPES:
        return False
    a, b = (v.type for v in node.inputs)
    return (a.ndim >= 2 and b.ndim in (1, 2) and 1 <= a.shape[-1] <= SMALL_K
            and (b.ndim == 1 or 1 <= b.shape[1] <= SMALL_K))


def _scan_plan(node) -> tuple[int, int, bool] | None:
    """(axis, op, flatten) of a cumsum/cumprod the scan kernel computes: input and output of one
    kernel dtype (or a narrow int/bool input into int64) and one shape, or axis=None (the C-order
    ravel scanned along axis 0); None otherwise."""
    op = _opdef(node)
    kind = op.reduction if op is not None else None
    if kind not in ("cumsum", "cumprod") or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    a, out = _tensor(node.inputs[0]), _tensor(node.outputs[0])
    if a is None or out is None or not (a.is_concrete and out.is_concrete) or a.ndim < 1:
        return None
    same = a.dtype == out.dtype and a.dtype in _SCAN_DTYPES
    widened = out.dtype == np.int64 and a.dtype in _SCAN_WIDENED
    axis = node.attrs.get("axis")
    flatten = axis is None and a.ndim != 1
    if not (same or widened) or (tuple(a.shape) != tuple(out.shape) and not flatten):
        return None
    return (0 if axis is None else axis % a.ndim), (0 if kind == "cumsum" else 1), flatten


def _prologues_into_scans(steps: list[Step], outputs: set, types: dict) -> None:
    """A scan whose input a fused pass computes for it alone, in the result's dtype: that pass writes
    the values into the scan's result instead (its output renamed), and the scan runs there in place."""
    producer = {v: step for step in steps for v in step.outputs}
    readers: dict = {}
    for step in steps:
        for v in set(step.inputs):
            readers[v] = readers.get(v, 0) + 1
    for step in steps:
        if not isinstance(step, ScanStep):
            continue
        (v,), (out,) = step.inputs, step.outputs
        p = producer.get(v)
        if (not isinstance(p, FusedStep) or readers.get(v) != 1 or v in outputs or types[v] != types[out]
                or step.flatten):
            continue
        p.outputs[:] = [out if w == v else w for w in p.outputs]
        p.overwritable = frozenset(pair for pair in p.overwritable if v not in pair)
        step.inputs[:] = [out]


def _into_call(node):
    """``fn(*inputs, out=o)`` computing the node with NumPy's own function into a given array, for
    ops whose NumPy function takes ``out=`` with the same loop as the reference; None otherwise."""
    outs = node.outputs
    if len(outs) != 1 or not isinstance(outs[0].type, TensorType) or not outs[0].type.is_concrete:
        return None
    op = _opdef(node)
    if op is _FULL:   # the shape is known: its dims inputs are not read
        return _fill_into(node.attrs["fill_value"])
    ins = [_tensor(v) for v in node.inputs]
    if not ins or any(t is None or not t.is_concrete for t in ins):
        return None
    out_dt = outs[0].type.dtype
    attrs = node.attrs
    layout = _layout_into(op, ins, out_dt, attrs)
    if layout is not None:
        return layout
    kind = op.reduction if op is not None else None
    if kind in ("cumsum", "cumprod") and ins[0].ndim >= 1 and out_dt.kind in "biuf":
        fn = np.cumsum if kind == "cumsum" else np.cumprod
        axis = attrs.get("axis")

        def scan(a, out):
            fn(a, axis=axis, dtype=out_dt, out=out)
        return scan
    if kind in ("argmin", "argmax") and 0 not in tuple(ins[0].shape) and out_dt == np.dtype(np.intp):
        fn = np.argmin if kind == "argmin" else np.argmax
        axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))

        def arg(a, out):
            fn(a, axis=axis, out=out, keepdims=keepdims)
        return arg
    if (op is _STACK or op is _CONCATENATE) and out_dt.kind in "biufc" and all(t.ndim >= 1 or op is _STACK
                                                                               for t in ins):
        fn = np.stack if op is _STACK else np.concatenate
        axis = attrs.get("axis", 0)
        casting = "same_kind" if attrs.get("dtype") is None else "unsafe"

        def join(*arrays, out):
            fn(arrays, axis=axis, out=out, casting=casting)
        return join
    if op is _MATMUL and len(ins) == 2 and min(t.ndim for t in ins) >= 1 and out_dt.kind in "biufc":
        return _out_call(np.matmul)
    return None


def _out_call(fn):
    """``fn(*inputs, out=out)``: a NumPy function that takes ``out=`` with the reference's own loop."""
    def call(*arrays, out):
        fn(*arrays, out=out)
    return call


def _fill_into(value):
    """``np.full``'s own assignment (``copyto`` with unsafe casting) into the planned buffer."""
    copyto = np.copyto

    def fill(*dims, out):
        copyto(out, value, casting="unsafe")
    return fill


def _layout_into(op: OpDef | None, ins: list, out_dt: np.dtype, attrs: dict):
    """Into-buffer forms of triu/tril (a mask fixed by the shape), diag and outer; None for others.
    Each gives the reference's values: triu/tril are ``where(mask, a, 0)``, diag's 2-d form a copy of
    the diagonal and its 1-d form zeros with `a` on it, outer ``multiply`` of the raveled inputs."""
    copyto = np.copyto
    if (op is _TRIU or op is _TRIL) and ins[0].dtype == out_dt and ins[0].ndim >= 2:
        k = int(attrs.get("k", 0))
        rows, cols = ins[0].shape[-2:]
        tri_mask = np.tri(rows, cols, k if op is _TRIL else k - 1, dtype=bool)
        keep = tri_mask if op is _TRIL else ~tri_mask

        def tri(a, out):
            out.fill(0)
            copyto(out, a, where=keep)
        return tri
    if op is _DIAG and ins[0].dtype == out_dt and ins[0].ndim in (1, 2):
        k = int(attrs.get("k", 0))
        if ins[0].ndim == 2:
            def diagonal(a, out):
                copyto(out, np.diagonal(a, k))
            return diagonal
        n = ins[0].shape[0]
        rows, cols = np.arange(n) + max(-k, 0), np.arange(n) + max(k, 0)

        def diag(a, out):
            out.fill(0)
            out[rows, cols] = a
        return diag
    if op is _OUTER and len(ins) == 2 and out_dt.kind in "biufc":
        return _out_call(np.outer)
    return None


def _basic_index_view(node):
    """``x[key]`` for a static key (ints, slices, None, Ellipsis) as NumPy's own view: the reference
    copies (its results are values), which would turn a free slice into a pass over the data."""
    if _opdef(node) is not _GETITEM or len(node.inputs) != 1:
        return None
    key = tuple(node.attrs["index"])
    if Ellipsis not in key:
        key += (Ellipsis,)   # keeps an all-int key a 0-d array, not a NumPy scalar
    return lambda a: a[key]


def fallback_reason(node) -> str:
    """Why `node` runs as its NumPy reference rather than in a fused pass or a BLAS call (for explain)."""
    if node.op == "prim.host_call":
        return f"host call: {node.attrs['func']} called on the arrays at run time, with the GIL"
    if _is_view(node):
        return "movement op: NumPy's own result, usually a view (no pass over the data)"
    outs = node.outputs
    if any(isinstance(v.type, TensorType) and not v.type.is_concrete for v in outs):
        return "its output's shape depends on the data"
    if any(isinstance(v.type, TensorType) and not _supported_dtype(v.type) for v in [*node.inputs, *outs]):
        kinds = sorted({str(v.type.dtype) for v in [*node.inputs, *outs]
                        if isinstance(v.type, TensorType) and not _supported_dtype(v.type)})
        return f"dtype {', '.join(kinds)} has no kernel"
    op = _opdef(node)
    if op is _MATMUL or op is _DOT:
        return "not a same-dtype float/complex product of concrete shapes (BLAS takes those)"
    if _folded_reduction(node) is not None:
        if node.attrs.get("initial") is not None:
            return "initial= is not in the reduction kernels"
        return "no reduction kernel for these dtypes or axes"
    if op is not None and (op.ufunc is not None or op in (_WHERE, _ASTYPE, _COPY)):
        ins = ", ".join(str(v.type) for v in node.inputs)
        return f"no fused kernel for {node.op} on ({ins})"
    return "no kernel for this op"


def _is_setitem(node) -> bool:
    """A setitem the SetitemStep runs: a concrete array result (any key; NumPy assigns)."""
    out = node.outputs
    return (_opdef(node) is _SETITEM and len(out) == 1 and isinstance(out[0].type, TensorType)
            and out[0].type.is_concrete and isinstance(node.inputs[0].type, TensorType)
            and sum(e == "input" for e in node.attrs["index"]) == len(node.inputs) - 2)


def _setitem_in_place(nodes: list, outputs: list, group_of: dict, index: dict) -> None:
    """Give a SetitemStep's result the value number (so the buffer) of the array it updates when
    nothing else reads that array: the step then assigns in place instead of copying it first, and
    when the result is a graph output the array's producer writes straight into the caller's array.
    The array must own planned memory: computed by a step (not an input, a constant or a view)."""
    uses: dict = {}
    for node in nodes:
        for v in node.inputs:
            uses[v] = uses.get(v, 0) + 1
    for v in outputs:
        uses[v] = uses.get(v, 0) + 1
    for node in nodes:
        if id(node) in group_of or not _is_setitem(node):
            continue
        a = node.inputs[0]
        src = a.node
        if (src is None or src.op == "prim.Constant" or _is_view(src) or uses.get(a) != 1
                or not a.type.is_concrete or a.type != node.outputs[0].type):
            continue
        index[node.outputs[0]] = index[a]


def _is_view(node) -> bool:
    out = node.outputs
    return (_opdef(node) in _VIEW_OPS and len(out) == 1 and isinstance(out[0].type, TensorType)
            and out[0].type.is_concrete)


# -------------------------------------------------------------------------------------------------
# Grouping

class _Group:
    """A fusion group: nodes in program order over one iteration shape (plus optional reductions)."""

    __slots__ = ("shape", "nodes", "reduce_axes", "closed", "values")

    def __init__(self, shape: tuple):
        self.shape = shape
        self.nodes: list = []
        self.reduce_axes: tuple | None = None
        self.closed = False
        self.values: set = set()   # elementwise values computed inside


def _group_nodes(nodes: list, position: dict) -> list:
    """The nodes as an ordered list of units: `_Group`s and single nodes. A group runs where its last
    node was; moving it there is legal because nothing placed after it reads from it while open.
    A node joins the open groups (same iteration shape, same reduced axes) that compute one of its
    inputs or already read one of them, so e.g. the mean and the variance of one input share a pass."""
    producer: dict = {}         # value -> group computing it (elementwise values)
    reader: dict = {}           # value from outside a group -> the last group that read it
    reduced_by: dict = {}       # reduction output -> its group
    units: dict = {}            # id -> unit, in execution order (re-inserting moves to the end)

    def move_to_end(unit):
        units.pop(id(unit), None)
        units[id(unit)] = unit

    for node in nodes:
        for v in node.inputs:   # a reduced value is only complete once its whole pass has run
            if v in reduced_by:
                reduced_by[v].closed = True
        if node.op == "prim.Constant":
            move_to_end(node)
            continue
        plan = _elementwise_plan(node)
        red = _reduction_plan(node) if plan is None else None
        if plan is None and red is None:
            for v in node.inputs:
                g = producer.get(v)
                if g is not None:
                    g.closed = True
            move_to_end(node)
            continue
        shape = node.outputs[0].type.shape if plan is not None else node.inputs[0].type.shape
        axes = red[1] if red is not None else None
        cands: list = []
        for v in node.inputs:
            g = producer.get(v)
            for c in (g, reader.get(v)):
                if c is None:
                    continue
                if (id(c) in units and not c.closed and c.shape == shape and c not in cands
                        and (c.reduce_axes is None or axes is None or c.reduce_axes == axes)):
                    cands.append(c)
                    axes = axes if c.reduce_axes is None else c.reduce_axes
        for v in node.inputs:   # groups it reads but cannot join are now read from outside
            g = producer.get(v)
            if g is not None and g not in cands:
                g.closed = True
        target = cands[0] if cands else _Group(shape)
        for other in cands[1:]:
            _merge(target, other, producer, reduced_by, units, position)
        if red is not None:
            if sum(_folded_reduction(n) is not None for n in target.nodes) >= MAX_REDUCTIONS:
                target.closed = True
                target = _Group(shape)
            target.reduce_axes = axes
            reduced_by[node.outputs[0]] = target
        else:
            target.values.add(node.outputs[0])
            producer[node.outputs[0]] = target
        for v in node.inputs:
            if producer.get(v) is not target:
                reader[v] = target
        target.nodes.append(node)
        move_to_end(target)
    return list(units.values())


def _merge(target: _Group, other: _Group, producer: dict, reduced_by: dict, units: dict,
           position: dict) -> None:
    """Fold open group `other` into open group `target` of the same shape, keeping program order."""
    target.nodes = sorted(target.nodes + other.nodes, key=lambda n: position[id(n)])
    target.values |= other.values
    if other.reduce_axes is not None:
        target.reduce_axes = other.reduce_axes
    for v in other.values:
        producer[v] = target
    for v, g in reduced_by.items():
        if g is other:
            reduced_by[v] = target
    units.pop(id(other), None)


# -------------------------------------------------------------------------------------------------
# Building a group's program

_CODE_DTYPE = {code: dt for dt, code in DTYPES.items()}
_SCALAR_DTYPES = {"bool": np.dtype(bool), "int": np.dtype(np.int64), "float": np.dtype(np.float64)}


class _Program:
    """Accumulates one FusedKernel's registers, constants, instructions and operands. Registers are
    virtual (one per value and dtype) until `allocate()` folds dead temps together."""

    def __init__(self, group: _Group, consts: dict, needed: set):
        self.group = group
        self.consts = consts
        self.needed = needed                   # values some other step (or the caller) reads
        self.regs: list[list] = []             # [dtype code, kind, arg]
        self.const_values: list = []
        self.instrs: list[list] = []           # [opcode, dtype code, dst, a, b, c]
        self.reductions: list[list] = []       # [code, src register, reduced output position, ddof]
        self.in_values: list = []              # operand order: inputs, outputs, reduced outputs
        self.in_scalars: list = []
        self.out_values: list = []
        self.red_values: list = []
        self.reg_of: dict = {}                 # (value, dtype or None for its own) -> register

    def reg(self, dtype: np.dtype, kind: str, arg: int = 0) -> int:
        self.regs.append([DTYPES[dtype], REG_KINDS[kind], arg])
        return len(self.regs) - 1

    def emit(self, op: str, dtype: np.dtype, dst: int, a: int, b: int = -1, c: int = -1) -> None:
        self.instrs.append([OPS[op][0], DTYPES[dtype], dst, a, b, c])

    def natural(self, v) -> int:
        """The register holding v in its own dtype: computed here, or a new input operand."""
        if (v, None) not in self.reg_of:
            if isinstance(v.type, ScalarType):
                dt = _SCALAR_DTYPES[v.type.kind]
                self.in_scalars.append(dt)
            else:
                dt = v.type.dtype
                self.in_scalars.append(None)
            self.in_values.append(v)
            self.reg_of[(v, None)] = self.reg(dt, "input", len(self.in_values) - 1)
        return self.reg_of[(v, None)]

    def read(self, v, dtype: np.dtype) -> int:
        """A register holding v as `dtype`: a constant, or v's register cast once and cached."""
        key = (v, dtype)
        if key not in self.reg_of:
            if v in self.consts and np.ndim(self.consts[v]) == 0:
                self.const_values.append(np.asarray(self.consts[v]).astype(dtype).item())
                self.reg_of[key] = self.reg(dtype, "const", len(self.const_values) - 1)
            else:
                src = self.natural(v)
                if _CODE_DTYPE[self.regs[src][0]] == dtype:
                    self.reg_of[key] = src
                else:
                    self.reg_of[key] = self.reg(dtype, "temp")
                    self.emit("cast", dtype, self.reg_of[key], src)
        return self.reg_of[key]

    def define(self, v, dst: int) -> None:
        """v was just computed into dst; values read elsewhere become output operands."""
        self.reg_of[(v, None)] = self.reg_of[(v, v.type.dtype)] = dst
        if v in self.needed:
            self.out_values.append(v)
            self.regs[dst][1:] = [REG_KINDS["output"], -len(self.out_values)]  # index fixed in finish()

    def elementwise(self, node) -> None:
        op, loop_in, compute = _elementwise_plan(node)
        out_v = node.outputs[0]
        out_dt = out_v.type.dtype
        dst = self.reg(out_dt, "temp")
        if op == "cast":
            src = self.natural(node.inputs[0])
            self.emit("copy" if self.regs[src][0] == DTYPES[out_dt] else "cast", out_dt, dst, src)
        elif op == "power_const":
            self.power(node, compute, dst)
        elif op == "masked_fill":
            a, mask, value = node.inputs
            stored = _constant_stored(value, out_dt)
            self.emit("where", out_dt, dst, self.literal(stored, out_dt), self.read(a, out_dt),
                      self.read(mask, np.dtype(bool)))
        else:
            regs = [self.read(v, dt) for v, dt in zip(node.inputs, loop_in)]
            if op == "where":
                self.emit("where", out_dt, dst, regs[1], regs[2], regs[0])
            elif op == "scale":
                opdef = _opdef(node)
                assert opdef is not None  # "scale" is chosen from the op's ufunc fact
                num, den = _UFUNC_SCALINGS[opdef.ufunc]
                factor = compute.type(num) / compute.type(den)
                self.emit("multiply", compute, dst, regs[0], self.literal(factor, compute))
            else:
                self.emit(op, compute, dst, regs[0], regs[1] if len(regs) > 1 else -1)
        self.define(out_v, dst)

    def power(self, node, compute: np.dtype, dst: int) -> None:
        """``x ** c`` into dst by the steps `_POWER_EXPANSIONS` gives for the constant c."""
        exponent = constant_exponent(node)
        assert exponent is not None  # the lowering chose this path because the exponent expands
        wide = np.dtype(np.float64) if compute == np.float32 and exponent in _POWER_WIDENED else compute
        x = self.read(node.inputs[0], wide)
        steps = _POWER_EXPANSIONS[exponent]
        cur = x
        for i, (op, *operands) in enumerate(steps):
            out = dst if i == len(steps) - 1 and wide == compute else self.reg(wide, "temp")
            regs = [x if a == "x" else cur if a == "t" else self.literal(1, wide) for a in operands]
            self.emit(op, wide, out, *regs)
            cur = out
        if wide != compute:
            self.emit("cast", compute, dst, cur)

    def literal(self, value, dtype: np.dtype) -> int:
        """A constant register holding `value` as `dtype`."""
        self.const_values.append(np.asarray(value).astype(dtype).item())
        return self.reg(dtype, "const", len(self.const_values) - 1)

    def reduction(self, node) -> None:
        red, _, to_bool = _reduction_plan(node)
        out_v = node.outputs[0]
        src = self.read(node.inputs[0], np.dtype(bool)) if to_bool else None
        if src is None or out_v.type.dtype != np.dtype(bool):
            src = self.read(node.inputs[0], out_v.type.dtype)
        self.red_values.append(out_v)
        ddof = float(node.attrs.get("ddof", 0) or 0)
        self.reductions.append([REDUCTIONS[red][0], src, len(self.red_values) - 1, ddof])

    def allocate(self) -> list[list]:
        """Registers with dead temps reused (per dtype). A destination may take the register of a
        source that dies at the same instruction: every kernel reads element i before writing it."""
        temp = REG_KINDS["temp"]
        last_use: dict[int, int] = {}
        for i, ins in enumerate(self.instrs):
            for r in ins[3:6]:
                if r >= 0:
                    last_use[r] = i
        for red in self.reductions:
            last_use[red[1]] = len(self.instrs)   # read after the block's last instruction
        mapping: dict[int, int] = {}
        regs: list[list] = []
        for r, reg in enumerate(self.regs):
            if reg[1] != temp:
                mapping[r] = len(regs)
                regs.append(list(reg))
        free: dict[int, list[int]] = {}
        for i, ins in enumerate(self.instrs):
            for r in set(ins[3:6]):
                if r >= 0 and self.regs[r][1] == temp and last_use[r] == i:
                    free.setdefault(self.regs[r][0], []).append(mapping[r])
            d = ins[2]
            if d not in mapping:
                pool = free.get(self.regs[d][0])
                if pool:
                    mapping[d] = pool.pop()
                else:
                    mapping[d] = len(regs)
                    regs.append([self.regs[d][0], temp, 0])
            ins[2:6] = [mapping[d]] + [mapping[r] if r >= 0 else -1 for r in ins[3:6]]
        for red in self.reductions:
            red[1] = mapping[red[1]]
        return regs

    def n_operands(self) -> int:
        return len(self.in_values) + len(self.out_values) + len(self.red_values)

    def finish(self, regs: list[list], index: dict) -> FusedStep:
        n_in, n_out = len(self.in_values), len(self.out_values)
        for reg in regs:
            if reg[1] == REG_KINDS["output"]:
                reg[2] = n_in - reg[2] - 1
        operands = ([(DTYPES[_natural_dtype(v)], ROLES["input"]) for v in self.in_values]
                    + [(DTYPES[v.type.dtype], ROLES["output"]) for v in self.out_values]
                    + [(DTYPES[v.type.dtype], ROLES["reduced"]) for v in self.red_values])
        reductions = [(code, src, n_in + n_out + pos, ddof) for code, src, pos, ddof in self.reductions]
        kernel = FusedKernel(tuple(self.group.shape), tuple(self.group.reduce_axes or ()),
                             [tuple(r) for r in regs] or [(DTYPES[np.dtype(bool)], REG_KINDS["temp"], 0)],
                             self.const_values, [tuple(i) for i in self.instrs], reductions, operands)
        return FusedStep(inputs=[index[v] for v in self.in_values],
                         outputs=[index[v] for v in self.out_values + self.red_values],
                         nodes=self.group.nodes, kernel=kernel, scalar_inputs=self.in_scalars,
                         overwritable=frozenset((index[a], index[b]) for a, b in self.overwritable(regs)))

    def overwritable(self, regs: list[list]) -> list[tuple]:
        """(input value, output value) pairs whose output may be written over the input (see FusedStep)."""
        if self.reductions:
            return []
        last_read: dict[int, int] = {}    # input operand -> last instruction reading it
        first_write: dict[int, int] = {}  # output operand -> first instruction writing it
        n_in = len(self.in_values)
        for i, ins in enumerate(self.instrs):
            for r in ins[3:6]:
                if r >= 0 and regs[r][1] == REG_KINDS["input"]:
                    last_read[regs[r][2]] = i
            if regs[ins[2]][1] == REG_KINDS["output"]:
                first_write.setdefault(regs[ins[2]][2] - n_in, i)
        return [(a, b) for k, a in enumerate(self.in_values) for m, b in enumerate(self.out_values)
                if self.in_scalars[k] is None and a.type == b.type and m in first_write
                and last_read.get(k, -1) <= first_write[m]]


def _natural_dtype(v) -> np.dtype:
    return _SCALAR_DTYPES[v.type.kind] if isinstance(v.type, ScalarType) else v.type.dtype


def _build_group(group: _Group, consts: dict, index: dict, needed: set) -> list[FusedStep]:
    """The FusedStep(s) of a group; a group over the interpreter's limits is split in two."""
    p = _Program(group, consts, needed)
    for node in group.nodes:
        if _folded_reduction(node) is not None:
            p.reduction(node)
        else:
            p.elementwise(node)
    regs = p.allocate()
    if len(group.nodes) > 1 and (p.n_operands() > MAX_OPERANDS or len(regs) > MAX_REGISTERS):
        return _split(group, consts, index, needed)
    return [p.finish(regs, index)]


def _split(group: _Group, consts: dict, index: dict, needed: set) -> list[FusedStep]:
    half = len(group.nodes) // 2
    parts = []
    for nodes in (group.nodes[:half], group.nodes[half:]):
        part = _Group(group.shape)
        part.nodes = nodes
        part.values = {n.outputs[0] for n in nodes if _folded_reduction(n) is None}
        if any(_folded_reduction(n) is not None for n in nodes):
            part.reduce_axes = group.reduce_axes
        parts.append(part)
    crossing = {v for n in parts[1].nodes for v in n.inputs if v in parts[0].values}
    return (_build_group(parts[0], consts, index, needed | crossing)
            + _build_group(parts[1], consts, index, needed))


# -------------------------------------------------------------------------------------------------

def lower(graph) -> tuple[list[Step], dict, dict]:
    """Steps for a specialized graph, its value numbering (graph inputs first), and its constants."""
    index: dict = {}
    for v in graph.inputs:
        index[v] = len(index)
    nodes = graph.nodes
    position: dict = {}
    consts: dict = {}
    for i, node in enumerate(nodes):
        position[id(node)] = i
        for v in node.outputs:
            index[v] = len(index)
        if node.op == "prim.Constant":
            consts[node.outputs[0]] = node.attrs["value"]
    fused_after = epilogues(nodes, graph.outputs)   # bias/ReLU nodes the GEMV steps apply
    absorbed = {id(n) for e in fused_after.values() for n in e.nodes}
    units = _group_nodes([n for n in nodes if id(n) not in absorbed], position)
    group_of: dict = {}
    for u in units:
        if isinstance(u, _Group):
            for n in u.nodes:
                group_of[id(n)] = u
    _setitem_in_place(nodes, graph.outputs, group_of, index)
    needed = set(graph.outputs)
    for node in nodes:
        g = group_of.get(id(node))
        for v in node.inputs:
            if v.node is None or g is None or group_of.get(id(v.node)) is not g:
                needed.add(v)
    steps: list[Step] = []
    for u in units:
        if isinstance(u, _Group):
            steps.extend(_build_group(u, consts, index, needed))
        elif u.op == "prim.Constant":
            steps.append(ConstantStep(inputs=[], outputs=[index[u.outputs[0]]], nodes=[u]))
        elif _is_small_matmul(u) and id(u) not in fused_after:   # a fused epilogue needs the GEMV step
            steps.append(SmallMatmulStep(inputs=[index[v] for v in u.inputs], outputs=[index[u.outputs[0]]],
                                         nodes=[u]))
        elif (scan := _scan_plan(u)) is not None:
            axis, op, flatten = scan
            steps.append(ScanStep(inputs=[index[u.inputs[0]]], outputs=[index[u.outputs[0]]], nodes=[u],
                                  axis=axis, op=op, flatten=flatten))
        elif _is_matmul(u):
            epi = fused_after.get(id(u))
            ins = [index[v] for v in u.inputs] + ([index[epi.bias]] if epi else [])
            steps.append(MatmulStep(inputs=ins, outputs=[index[(epi.result if epi else u.outputs[0])]],
                                    nodes=[u, *(epi.nodes if epi else ())], gemv=gemv_form(u),
                                    bias=epi is not None, activation=epi.activation if epi else None))
        elif _into_call(u) is not None:
            steps.append(IntoStep(inputs=[index[v] for v in u.inputs], outputs=[index[u.outputs[0]]],
                                  nodes=[u], fn=_into_call(u)))
        elif _is_setitem(u):
            steps.append(SetitemStep(inputs=[index[v] for v in u.inputs], outputs=[index[u.outputs[0]]],
                                     nodes=[u], index=tuple(u.attrs["index"])))
        else:
            kind = ViewStep if _is_view(u) else FallbackStep
            fn = _basic_index_view(u)
            attrs: dict[str, Any] = {}
            if fn is None:
                try:
                    fn, attrs = reference_call(u)
                except UnknownOpError:
                    raise NotImplementedError(f"cpu backend: node {u.op}{traced_at(u)} has no kernel and the "
                                              f"registry has no reference for it") from None
            steps.append(kind(inputs=[index[v] for v in u.inputs], outputs=[index[v] for v in u.outputs],
                              nodes=[u], fn=fn, attrs=attrs))
    _prologues_into_scans(steps, {index[v] for v in graph.outputs}, {n: v.type for v, n in index.items()})
    return steps, index, consts
