"""Classifying nodes: which step a node of a specialized graph becomes, and the interpreter's plan
for the nodes a fused pass computes (elementwise ops, folded reductions, constant powers, masked
fills), or why a node runs as its NumPy reference (`fallback_reason`, for explain).
"""

from __future__ import annotations

import math

import numpy as np
from numtrace_ir import registry
from numtrace_ir.ops.scatter import SCATTER_OPS
from numtrace_ir.registry import REDUCTION_KINDS, OpDef, UnknownOpError
from numtrace_ir.types import ScalarType, TensorType

from numtrace_cpu.isa import DTYPES, OPS, REDUCTIONS

__all__ = ["LOWERED", "SMALL_K", "broadcast_exponent", "constant_exponent", "fallback_reason"]

# Largest contracted dim (and column count) a SmallMatmulStep takes, and its dtypes; larger or
# other products go to BLAS.
SMALL_K = 8
_SMALL_MATMUL_DTYPES = frozenset(map(np.dtype, (np.float64, np.float32)))
# Dtypes of the scan kernel (input and output alike), and the inputs it widens to an int64 output
# (NumPy's accumulator for them); others call NumPy's cumsum into the buffer.
_SCAN_DTYPES = frozenset(map(np.dtype, (np.float64, np.float32, np.int64, np.int32)))
_SCAN_WIDENED = frozenset(map(np.dtype, (np.bool_, np.int8, np.int16, np.int32)))

# The ops this module reads by identity (a misspelt name fails at import).
(_WHERE, _ASTYPE, _COPY, _POWER, _MATMUL, _DOT, _SETITEM, _DIVMOD, _SCALAR_POWER) = map(
    registry.get, ("np.where", "np.astype", "np.copy", "np.power", "np.matmul", "np.dot", "np.setitem",
                   "np.divmod", "np.scalar_power"))
# The scatter ops, which write into a copy of their first input as setitem does.
_SCATTERS = frozenset(map(registry.get, SCATTER_OPS))
# What the backend lowers itself; `passes.decompose` rewrites the rest (np.clip becomes maximum and
# minimum, which fuse). np.divmod stays whole: one NumPy call computes both outputs, and its parts
# have no fused kernel either.
LOWERED = frozenset(op for op in registry.all_ops() if op.decompose is None) | {_DIVMOD}
# Ufuncs that are a multiplication by a constant: ufunc -> (numerator, denominator). NumPy's loop
# computes ``x * (num / den)`` with the quotient rounded in the loop's dtype, and so does the kernel.
UFUNC_SCALINGS = {np.deg2rad: (np.pi, 180.0), np.rad2deg: (180.0, np.pi)}
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


def opdef_of(node) -> OpDef | None:
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


def folded_reduction(node) -> tuple | None:
    """(interpreter reduction, cast-to-bool first) of a reduction the interpreter folds, else None."""
    op = opdef_of(node)
    return _REDUCTIONS.get(op.reduction) if op is not None and op.reduction is not None else None


def tensor_type(v) -> TensorType | None:
    return v.type if isinstance(v.type, TensorType) else None


def _supported_dtype(t) -> bool:
    return isinstance(t, TensorType) and t.is_concrete and t.dtype in DTYPES


def _operand_dtype(v):
    """What NumPy's loop resolution sees for an input: a dtype, or the Python type of a weak scalar."""
    if isinstance(v.type, ScalarType):
        return _WEAK[v.type.kind]
    return v.type.dtype


def elementwise_plan(node):
    """How the interpreter computes an elementwise node: (interpreter op, loop input dtypes, compute
    dtype) or None when it has no kernel for it. Memoized on what the answer depends on."""
    out = node.outputs
    if len(out) != 1 or not _supported_dtype(out[0].type):
        return None
    op = opdef_of(node)
    if op is _SETITEM:
        return _masked_fill_plan(node)
    ins = node.inputs
    key = (op, out[0].type.dtype, tuple(_operand_key(v) for v in ins), constant_exponent(node),
           broadcast_exponent(node))
    try:
        plan = _PLAN_CACHE[key]
    except KeyError:
        plan = None if op is None or any(d is _NO_KERNEL for d in key[2]) else _plan_for(op, *key[1:])
        if len(_PLAN_CACHE) > 4096:
            _PLAN_CACHE.clear()
        _PLAN_CACHE[key] = plan
    if plan is None or not _weak_ints_fit(ins, plan[2]) or exponent_read_by_layout(node):
        return None
    return plan if op is not _SCALAR_POWER or _scalar_math_operands(ins, plan[2]) else None


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


def _plan_for(opdef: OpDef, out_dt: np.dtype, in_dts: tuple, exponent, broadcast: bool):
    """The plan of `elementwise_plan`, checked against the dtypes each interpreter op computes in
    (some register dtypes, e.g. uint8, are only ever read by a cast)."""
    if any(d is complex for d in in_dts):
        return None
    plan = _plan_unchecked(opdef, out_dt, in_dts, exponent)
    if plan is None:
        return None
    if broadcast and plan[0] == "power":
        plan = ("power_broadcast", *plan[1:])
    code = DTYPES[plan[2]]
    return plan if all(code in OPS[op][2] for op in _interpreter_ops(plan[0], exponent)) else None


def _interpreter_ops(op: str, exponent) -> list[str]:
    """The interpreter ops that the plan op `op` emits."""
    if op == "power_const":
        return [step[0] for step in POWER_EXPANSIONS[exponent]]
    return {"scale": ["multiply"], "masked_fill": ["where"]}.get(op, [op])


def _plan_unchecked(opdef: OpDef, out_dt: np.dtype, in_dts: tuple, exponent):
    n = len(in_dts)
    if opdef is _WHERE:
        return ("where", (np.dtype(bool), out_dt, out_dt), out_dt) if n == 3 else None
    if opdef is _ASTYPE or opdef is _COPY:   # a copy is a cast to its own dtype
        return ("cast", (out_dt,), out_dt) if n == 1 else None
    if exponent is not None:
        return _power_plan(out_dt, in_dts, exponent)
    if opdef is _SCALAR_POWER:
        return _scalar_power_plan(out_dt, in_dts)
    ufunc = opdef.ufunc
    if ufunc is None or ufunc.nout != 1 or ufunc.nin != n:
        return None
    op = "scale" if ufunc in UFUNC_SCALINGS else _UFUNC_ALIASES.get(ufunc, ufunc.__name__)
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
POWER_EXPANSIONS = {
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
POWER_WIDENED = frozenset({3.0, 4.0, -2.0})


def constant_exponent(node) -> float | None:
    """c of ``np.power(x, c)`` when c is a scalar constant that `POWER_EXPANSIONS` covers."""
    if opdef_of(node) is not _POWER or len(node.inputs) != 2:
        return None
    src = node.inputs[1].node
    if src is None or src.op != "prim.Constant":
        return None
    value = src.attrs["value"]
    if np.ndim(value) != 0:
        return None
    e = _loop_value(node, value)
    return e if e in POWER_EXPANSIONS else None


# The exponents NumPy's float32 / float64 power loop branches on when it reads one with stride 0.
_BRANCHED_EXPONENTS = frozenset({-1.0, 0.0, 0.5, 1.0, 2.0})


def _loop_values(node, value) -> np.ndarray | None:
    """A constant exponent as NumPy's loop reads it: cast to the result's float dtype (a Python float
    with a float32 base, ``x ** 0.50000001``, is 0.5f there: the loop's sqrt), or None where it holds
    no real numbers."""
    a = np.asarray(value)
    if a.dtype.kind not in "iuf":
        return None
    out = node.outputs[0].type
    if isinstance(out, TensorType) and out.dtype.kind == "f":
        with np.errstate(all="ignore"):
            a = a.astype(out.dtype)
    return a


def _loop_value(node, value) -> float | None:
    """A one-element constant exponent as NumPy's loop reads it (`_loop_values`), or None."""
    a = _loop_values(node, value)
    return None if a is None or a.size != 1 else float(a.ravel()[0])


def broadcast_exponent(node) -> bool:
    """Whether ``np.power(x, e)`` hands NumPy's float loop e with stride 0 in every call, a run-time e
    (`constant_exponent` expands the constant ones): a Python number, or an array of one element that is
    0-d, has fewer dims than the result, is broadcast to a result of more than one element, or has more
    dims than a base that is not 0-d (``x(1,) ** e(1, 1)``: NumPy's iterator). NumPy's float32 and float64
    loops then branch on e's value (nt_opcodes.h's NT_NPPOW: -inf ** 0.5 is NaN, not C pow's +inf); an e
    of a one-element result's shape with a base of that shape or 0-d (``x[:1] ** y[:1]``) takes NumPy's
    trivial loop, which reads it with its own stride: pow (``np.power(np.array([-inf]),
    np.array([0.5]))`` is +inf)."""
    if opdef_of(node) is not _POWER or len(node.inputs) != 2 or constant_exponent(node) is not None:
        return False
    e = node.inputs[1]
    if e.node is not None and e.node.op == "prim.Constant" and (
            _loop_value(node, e.node.attrs["value"]) not in _BRANCHED_EXPONENTS):
        return False   # pow, as NumPy's loop (a one-element constant array of 0.5 branches)
    if isinstance(e.type, ScalarType):
        return True
    out = node.outputs[0].type
    if not (isinstance(e.type, TensorType) and e.type.is_concrete and isinstance(out, TensorType)
            and out.is_concrete and all(d == 1 for d in e.type.shape)):
        return False
    if e.type.ndim == 0 or e.type.ndim < out.ndim or math.prod(out.shape) > 1:
        return True
    x = node.inputs[0].type
    return isinstance(x, TensorType) and 0 < x.ndim < e.type.ndim


def exponent_read_by_layout(node) -> bool:
    """Whether NumPy's float power loop may read ``np.power(x, e)``'s exponent with stride 0 or with its
    own stride depending on run-time state the trace does not see: an exponent of more than one element
    broadcast along an axis of the result (``x(m, n) ** e(m, 1)``, ``x(m, n) ** e(n,)``), which NumPy's
    iterator makes the inner loop's stride-0 operand or not by the operands' memory order, their casts
    and the buffer size (``np.setbufsize``; C-order ``x(m, n) ** e(m, 1)`` branches only from n = 4097).
    Where the loop branches, ``-inf ** 0.5`` is sqrt's NaN, not pow's +inf, so such a node runs NumPy's
    own np.power (a NumPy step), unless e is a constant without 0.5 in the loop's dtype (pow and the
    branches agree, within pow's ulp bound, at -1, 0, 1 and 2)."""
    if opdef_of(node) is not _POWER or len(node.inputs) != 2:
        return False
    out = node.outputs[0].type
    e = node.inputs[1]
    if not (isinstance(out, TensorType) and out.is_concrete and out.dtype in _FLOAT_LOOPS
            and isinstance(e.type, TensorType) and e.type.is_concrete and math.prod(e.type.shape) > 1):
        return False
    shape = out.shape
    e_shape = (1,) * (len(shape) - e.type.ndim) + tuple(e.type.shape)
    if not any(n > 1 and d == 1 for n, d in zip(shape, e_shape)):
        return False
    if e.node is not None and e.node.op == "prim.Constant":
        values = _loop_values(node, e.node.attrs["value"])
        return values is None or bool(np.any(values == 0.5))
    return True


_FLOAT_LOOPS = (np.dtype(np.float32), np.dtype(np.float64))


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


# The dtypes np.scalar_power computes in itself: NumPy's scalar math calls powf / pow for them
# (nt_opcodes.h's NT_CPOW), so the op's bits and flags are the C library's, as NumPy's are.
_SCALAR_MATH_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64)))


def _scalar_power_plan(out_dt: np.dtype, in_dts: tuple):
    """np.scalar_power where NumPy runs its scalar math in the result's dtype T (float32 or float64):
    a NumPy scalar operand of dtype T, the other of T, of a dtype that casts safely to T (converted
    exactly), or a Python float or int (weak). Otherwise (``np.float32(x) ** np.int32(2)`` promotes to
    float64: np.power's loop; int and half scalars; a bool base, ``np.False_ ** np.float32(y)``: np.bool_
    has no scalar math, so its ``**`` is np.power's loop, whose flags differ from C pow's at ``0 ** -inf``)
    the node runs NumPy's own operator."""
    typed = [d for d in in_dts if isinstance(d, np.dtype)]
    if (out_dt not in _SCALAR_MATH_DTYPES or out_dt not in typed or len(in_dts) != 2
            or not all(np.can_cast(d, out_dt, "safe") for d in typed)
            or any(not isinstance(d, np.dtype) and d not in (int, float) for d in in_dts)
            or (isinstance(in_dts[0], np.dtype) and in_dts[0].kind == "b")):
        return None
    return "scalar_power", (out_dt, out_dt), out_dt


def _scalar_math_operands(ins, compute: np.dtype) -> bool:
    """Whether the Python numbers among np.scalar_power's operands reach the kernel as NumPy's scalar
    math converts them: a run-time float only into float64 (no cast), a constant int only where it is
    exactly a value of `compute` (NumPy rounds an int to double, then to float32; the constant rounds
    once), a constant float only where float32 holds it without overflow (NumPy's conversion warns
    'overflow encountered in cast' there; the constant's cast at compile time says nothing)."""
    for v in ins:
        if not isinstance(v.type, ScalarType):
            continue
        src = v.node
        if src is None or src.op != "prim.Constant":
            if v.type.kind != "float" or compute != np.float64:
                return False
            continue
        value = src.attrs["value"]
        if isinstance(value, int) and not (abs(value) <= 2 ** 53 and int(compute.type(value)) == value):
            return False
        if isinstance(value, float) and math.isfinite(value) and not math.isfinite(_rounded(value, compute)):
            return False
    return True


def _rounded(value: float, dtype: np.dtype) -> float:
    with np.errstate(all="ignore"):
        return float(dtype.type(value))


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
    stored = constant_stored(value, out_t.dtype)
    if stored is None:
        return None
    plan = ("masked_fill", (np.dtype(bool), out_t.dtype), out_t.dtype)
    code = DTYPES[out_t.dtype]
    return plan if code in OPS["where"][2] else None


def constant_stored(v, dtype: np.dtype):
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


def reduction_plan(node):
    """(interpreter reduction, reduced axes, cast-to-bool first) or None."""
    folded = folded_reduction(node)
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


def is_matmul(node) -> bool:
    op = opdef_of(node)
    if (op is not _MATMUL and op is not _DOT) or len(node.inputs) != 2:
        return False
    a, b = (tensor_type(v) for v in node.inputs)
    out = tensor_type(node.outputs[0])
    if a is None or b is None or out is None or not (a.is_concrete and b.is_concrete and out.is_concrete):
        return False
    if op is _DOT and not (a.ndim == 2 and b.ndim == 2):
        return False
    return a.dtype == b.dtype == out.dtype and out.dtype.kind in "fc" and a.ndim >= 1 and b.ndim >= 1


def is_small_matmul(node) -> bool:
    """A float32/float64 product (..., n, K) @ (K,) or (K, m) with K, m <= SMALL_K (see
    SmallMatmulStep)."""
    if not is_matmul(node) or node.outputs[0].type.dtype not in _SMALL_MATMUL_DTYPES:
        return False
    a, b = (v.type for v in node.inputs)
    return (a.ndim >= 2 and b.ndim in (1, 2) and 1 <= a.shape[-1] <= SMALL_K
            and (b.ndim == 1 or 1 <= b.shape[1] <= SMALL_K))


def scan_plan(node) -> tuple[int, int, bool] | None:
    """(axis, op, flatten) of a cumsum/cumprod the scan kernel computes: input and output of one
    kernel dtype (or a narrow int/bool input into int64) and one shape, or axis=None (the C-order
    ravel scanned along axis 0); None otherwise."""
    op = opdef_of(node)
    kind = op.reduction if op is not None else None
    if kind not in ("cumsum", "cumprod") or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    a, out = tensor_type(node.inputs[0]), tensor_type(node.outputs[0])
    if a is None or out is None or not (a.is_concrete and out.is_concrete) or a.ndim < 1:
        return None
    same = a.dtype == out.dtype and a.dtype in _SCAN_DTYPES
    widened = out.dtype == np.int64 and a.dtype in _SCAN_WIDENED
    axis = node.attrs.get("axis")
    flatten = axis is None and a.ndim != 1
    if not (same or widened) or (tuple(a.shape) != tuple(out.shape) and not flatten):
        return None
    return (0 if axis is None else axis % a.ndim), (0 if kind == "cumsum" else 1), flatten


def fallback_reason(node) -> str:
    """Why `node` runs as its NumPy reference rather than in a fused pass or a BLAS call (for explain)."""
    if node.op == "prim.host_call":
        return f"host call: {node.attrs['func']} called on the arrays at run time, with the GIL"
    if is_view(node):
        return "movement op: NumPy's own result, usually a view (no pass over the data)"
    outs = node.outputs
    if any(isinstance(v.type, TensorType) and not v.type.is_concrete for v in outs):
        return "its output's shape depends on the data"
    if any(isinstance(v.type, TensorType) and not _supported_dtype(v.type) for v in [*node.inputs, *outs]):
        kinds = sorted({str(v.type.dtype) for v in [*node.inputs, *outs]
                        if isinstance(v.type, TensorType) and not _supported_dtype(v.type)})
        return f"dtype {', '.join(kinds)} has no kernel"
    op = opdef_of(node)
    if op is _MATMUL or op is _DOT:
        return "not a same-dtype float/complex product of concrete shapes (BLAS takes those)"
    if folded_reduction(node) is not None:
        if node.attrs.get("initial") is not None:
            return "initial= is not in the reduction kernels"
        return "no reduction kernel for these dtypes or axes"
    if exponent_read_by_layout(node):
        return ("an exponent broadcast along an axis: NumPy's loop takes sqrt at 0.5 or pow by the operands' "
                "layout and its buffer size, so NumPy's own np.power runs it")
    if op is _SCALAR_POWER:
        return ("NumPy's own ** on the scalars: not its float32/float64 scalar math (int or half operands, a "
                "bool base, a pair promoted to another dtype, a Python number the pass would convert "
                "otherwise)")
    if op is not None and (op.ufunc is not None or op in (_WHERE, _ASTYPE, _COPY)):
        ins = ", ".join(str(v.type) for v in node.inputs)
        return f"no fused kernel for {node.op} on ({ins})"
    return "no kernel for this op"


def is_setitem(node) -> bool:
    """An update the SetitemStep runs: a concrete array result of a setitem (any key; NumPy assigns)
    or a scatter (`_SCATTERS`: NumPy's own function writes)."""
    out = node.outputs
    op = opdef_of(node)
    if op is not _SETITEM and op not in _SCATTERS:
        return False
    keyed = op is not _SETITEM or sum(e == "input" for e in node.attrs["index"]) == len(node.inputs) - 2
    return (keyed and len(out) == 1 and isinstance(out[0].type, TensorType)
            and out[0].type.is_concrete and isinstance(node.inputs[0].type, TensorType))


def is_view(node) -> bool:
    out = node.outputs
    return (opdef_of(node) in _VIEW_OPS and len(out) == 1 and isinstance(out[0].type, TensorType)
            and out[0].type.is_concrete)


def sections_view(node):
    """``fn(a)`` giving NumPy's views of the sections a node splits its one input into (``np.split``,
    ``np.array_split`` with two or more outputs, each of a known shape), else None. The node's reference
    copies each section; these views share the input's memory, as NumPy's own results do."""
    op, out = opdef_of(node), node.outputs
    if (op not in _VIEW_OPS or len(out) < 2 or len(node.inputs) != 1
            or not all(isinstance(v.type, TensorType) and v.type.is_concrete for v in out)):
        return None
    as_view, attrs = op.as_view, op.normalize_attrs(dict(node.attrs))

    def sections(a):
        return as_view(a, None, attrs, [])
    return sections
