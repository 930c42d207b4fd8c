"""The registry ops the Triton backend does not lower natively, each with the reason. One place: the
planner runs such an op as a host step (NumPy between kernels) and ``explain()`` gives this reason; the
coverage test fails for any registry op that is neither lowered nor listed here."""

from __future__ import annotations

from numtrace_ir import registry
from numtrace_ir.ops.reductions import MASKED
from numtrace_ir.registry import REDUCTION_KINDS, OpDef

from .elementwise import LOWERINGS
from .gathers import GATHER_OPS
from .movement import SAME_VALUE
from .rewrites import REWRITES

__all__ = [
    "CONTRACTIONS",
    "HOST_OPS",
    "LOWERED",
    "MASK_READS",
    "NO_LOWERING",
    "PARTIAL",
    "REDUCTIONS",
    "UNLOWERED",
    "UNLOWERED_KINDS",
    "VIEW_OPS",
    "handling",
    "is_lowered",
    "outer_base",
    "unlowered_reason",
]

_COPIES = "copies or rearranges data (not a view); only view-producing movement ops are lowered"
_GATHER = "reads data-dependent addresses (gather/scatter); not lowered"
_ORDER_STATS = "order statistics need a sort or partition along the axis; sorting is not lowered"
_LAPACK = "dense factorizations (LU with pivoting, as LAPACK's getrf/gesv) are not lowered"
_DECOMPOSITIONS = ("matrix decompositions (LAPACK's eigen, SVD, QR, Cholesky, LU and least-squares drivers) "
                   "are not lowered")
_JOIN = "joins that first reshape each input are not lowered (np.concatenate and np.stack are)"
_PER_INPUT = "one output per input; only single-input view ops are lowered (np.reshape, np.broadcast_to)"
_RANDOM = "random draws: NumPy's generators cannot be reproduced inside GPU kernels; use the cpu backend"
_SEARCH = "binary search in a sorted array (data-dependent addresses); not lowered"
_COUNT = ("its output length depends on the data (unique values, nonzero elements, the largest count, the "
          "sum of repeat counts)")

UNLOWERED: dict[str, str] = {
    "np.frexp": "needs exponent bit manipulation for every float format; not lowered",
    "scipy.special.logsumexp": "SciPy's own function, called on the host",
    "np.ufunc": "a ufunc without a registry op of its own (NumPy's np.ldexp, or another library's, as "
    "scipy.special's) has no Triton lowering",
    "np.spacing": "needs ulp bit manipulation for every float format; not lowered",
    "np.nextafter": "needs ulp bit manipulation for every float format; not lowered",
    "np.gcd": "needs a data-dependent loop (Euclid); not lowered",
    "np.lcm": "needs a data-dependent loop (Euclid); not lowered",
    "np.argsort": "sorting is not lowered",
    "np.sort": "sorting is not lowered",
    "np.searchsorted": _SEARCH,
    "np.digitize": _SEARCH,
    "np.isin": "a membership test sorts or tables the test elements; not lowered",
    "np.argwhere": _COUNT,
    "np.unique": _COUNT,
    "np.bincount": _COUNT,
    "np.repeat_counts": _COUNT,
    "np.histogram": "counting into bins scatters into data-dependent addresses; not lowered",
    "np.isclose": "a composite test (abs, compare, isfinite, isnan per element) with no kernel of its own; "
    "not lowered",
    "np.real": "complex parts: Triton has no complex type (a real array's real part, a copy, is not "
    "special-cased); not lowered",
    "np.imag": "complex parts: Triton has no complex type (a real array's imaginary part, zeros, is not "
    "special-cased); not lowered",
    "np.median": _ORDER_STATS,
    "np.percentile": _ORDER_STATS,
    "np.quantile": _ORDER_STATS,
    "np.linalg.norm": "vector and matrix norms (ord=±2 and 'nuc' take an SVD) are not lowered",
    "np.linalg.inv": _LAPACK,
    "np.linalg.det": _LAPACK,
    "np.linalg.solve": _LAPACK,
    **{f"np.linalg.{f}": _DECOMPOSITIONS for f in ("eigh", "eigvalsh", "eig", "eigvals", "svd", "svdvals",
                                                   "qr", "cholesky", "slogdet", "lstsq", "pinv",
                                                   "matrix_rank", "cond")},
    "np.broadcast_arrays": _PER_INPUT,
    "np.diag": "a 1-d input builds a new square matrix (a copy, not a view); not lowered",
    "np.put": "assignment through flat indices with wrap/clip modes; not lowered",
    "np.put_along_axis": "assignment along an axis through an index array; not lowered",
    **dict.fromkeys(MASKED.values(), "a reduction with where= runs NumPy's masked reduction (its summation "
                    "order) on the host"),
}

# Whole kinds the backend does not lower (ops of these kinds need no entry above).
UNLOWERED_KINDS: dict[str, str] = {"random": _RANDOM}

# Lowered ops with variants that are not (run as host steps): ``explain()`` says this for those.
PARTIAL: dict[str, str] = {
    "np.dot": "np.dot of arrays with more than 2 dims is not lowered",
    "np.einsum": "np.einsum with '...', more than two operands, a size-1 label broadcast against another "
    "size, a sum within one bool or float16 operand, or a float16 contraction (NumPy rounds each partial "
    "sum to float16) is not lowered",
    "np.getitem": "indexing with integer arrays beside ints or partial slices is not lowered",
    "np.take": "np.take with mode='wrap' or 'clip', or a Python int index, is not lowered",
    "np.take_along_axis": "np.take_along_axis with axis=None is not lowered",
    "np.getitem_mask": "a mask key with slices or integer arrays beside the mask, or a 0-d mask, runs "
    "NumPy's indexing on the host (in its stage)",
    "np.setitem": "writing through array indices other than one integer array among full slices is not "
    "lowered",
    "np.ufunc.at": "ufunc.at is lowered by atomics for add and subtract, and maximum and minimum of "
    "integers, with one integer array index among full slices and operands of the array's dtype; "
    "other forms are not",
    "np.ravel": "copies data here (not a view)",  # order="F"
    "np.repeat": "per-element repeat counts (a gather) are not lowered",
    "np.triu": "np.triu of a 1-d input (it builds a matrix) is not lowered",
    "np.tril": "np.tril of a 1-d input (it builds a matrix) is not lowered",
    "np.diff": "np.diff with prepend= or append= is not lowered",
    "np.pad": "np.pad with per-axis constant values, or a mode other than 'constant' or 'empty', is not "
    "lowered",
    # Kept whole by passes.decompose: whether NumPy drops, clamps by or rejects the bound depends on it.
    "np.clip": "np.clip of an integer array with a runtime Python int bound (not a constant) is not lowered",
    **{name: f"{name} with initial= is not lowered" for name in ("np.sum", "np.prod", "np.max", "np.min")},
    # NumPy's var and std of an integer dtype= truncate the mean to it and square the deviations there.
    **{name: f"{name} with an integer or bool dtype= is not lowered" for name in ("np.var", "np.std")},
}

# Reductions (`OpDef.reduction`) the reduction kernels compute (mean, var, std are built from sums).
REDUCTIONS = frozenset(REDUCTION_KINDS)
CONTRACTIONS = frozenset({"np.matmul", "np.dot"})
# Boolean-mask reads: a prefix-sum compaction between kernel plans (`staged`, `compaction`).
MASK_READS = frozenset({"np.getitem_mask"})
# Ops run on the host between kernels (`host_steps`): host calls, guards on array data, and checks of
# dead code that shapes alone do not decide.
HOST_OPS = frozenset({"prim.host_call", "prim.guard", "prim.check"})  # np.dot: up to 2-D operands
# Ops evaluated at compile time: shape arithmetic, constants, and *_like/full creation.
FOLDED_KINDS = frozenset({"prim", "scalar", "creation"})

# Movement ops lowered as views of their input (or as the input itself), or as writes into slices.
VIEW_OPS = (frozenset(op.name for op in registry.all_ops() if op.as_view is not None) | SAME_VALUE
            | {"np.concatenate", "np.stack", "np.pad", "np.setitem", "np.ufunc.at"})


def outer_base(op: OpDef) -> OpDef | None:
    """The ufunc op whose lowering an ``np.<ufunc>.outer`` op uses (on A's dims, then B's), else None."""
    return registry.get(op.name[: -len(".outer")]) if op.name.endswith(".outer") else None


# The reason given for an op listed nowhere (a registry op newer than this backend): a host step.
NO_LOWERING = "the Triton backend has no lowering for it"


def _listed_reason(op) -> str | None:
    return UNLOWERED.get(op.name) or UNLOWERED_KINDS.get(op.kind)


def unlowered_reason(op) -> str | None:
    """Why registry op ``op`` (an ``OpDef``) runs as a host step, or None when the backend lowers it."""
    return _listed_reason(op) or (None if is_lowered(op) else NO_LOWERING)


def is_lowered(op) -> bool:
    """Whether the backend runs registry op ``op`` (an ``OpDef``): itself, or decomposed into ops it
    lowers by `numtrace_ir.passes.decompose` (see `LOWERED`)."""
    return _lowers_itself(op) or (op.decompose is not None and _listed_reason(op) is None)


def handling(op) -> str:
    """``"native"`` (kernels, folding, or a decomposition into lowered ops) or ``"host"`` (a host step):
    how the backend runs registry op ``op``. No op is refused."""
    return "native" if is_lowered(op) and op.name not in HOST_OPS else "host"


def _lowers_itself(op) -> bool:
    if _listed_reason(op) is not None:
        return False
    if op.name in REWRITES or op.name in GATHER_OPS or op.name in MASK_READS:
        return True  # rewritten before planning (`rewrites`); gathers; mask reads (`staged`)
    if op.kind == "elementwise":
        base = outer_base(op) or op
        return base in LOWERINGS or (base, 0) in LOWERINGS
    if op.kind == "reduction":
        return op.reduction in REDUCTIONS
    if op.kind == "contraction":
        return op.name in CONTRACTIONS
    if op.kind in ("movement", "index"):
        return op.name in VIEW_OPS
    if op.name in HOST_OPS:
        return True
    return op.kind in FOLDED_KINDS


# The ops the backend lowers itself; `passes.decompose` rewrites the others that have a decomposition.
LOWERED = frozenset(op for op in registry.all_ops() if _lowers_itself(op))
# Every op named in the tables above is a registry op: a misspelt name fails here, at import.
for _name in (*UNLOWERED, *PARTIAL, *CONTRACTIONS, *VIEW_OPS, *MASK_READS):
    registry.get(_name)
