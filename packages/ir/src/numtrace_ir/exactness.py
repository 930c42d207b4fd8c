"""Where a backend must give NumPy's own bits: which ops NumPy computes one way on every machine, and
which nodes of a graph feed a guard on array data.

A guard on data (``prim.guard`` of a traced value: ``float(x)``, ``bool(x)``, ``.item()``, a branch)
compares the value of each run with the one eager NumPy gave while tracing, bit for bit. A backend's
kernels equal NumPy bit for bit only where NumPy's result is the same on every machine and does not
depend on an order of accumulation; math-library ufuncs, products and float sums are only within
ulps, and a guard they feed would refuse the very inputs the trace was made from. `guard_reference_nodes`
names the nodes a backend runs with the op's NumPy reference so that every guard sees NumPy's value;
everything else stays on the backend's kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.ops.elementwise import MATH_LIBRARY_COMPLEX_UFUNCS, MATH_LIBRARY_UFUNCS
from numtrace_ir.registry import OpDef, UnknownOpError
from numtrace_ir.types import ScalarType, TensorType

__all__ = ["data_guard_cone", "guard_reference_nodes", "math_library", "numpy_exact"]

# Reductions whose float result depends on the order the elements are combined in: NumPy's pairwise
# sum (and its accumulate) is one order, a backend's blocked or parallel loop another.
_ORDER_DEPENDENT = frozenset({"sum", "prod", "mean", "var", "std", "cumsum", "cumprod"})


def _ufunc_loop_kind(ufunc: np.ufunc, inputs: Sequence[Any]) -> str:
    """The kind (``"f"``, ``"c"``, ``"i"``, ...) of the loop NumPy runs `ufunc` with for `inputs`
    (arrays, NumPy scalars, Python scalars, or IR types)."""
    def dtype(v: Any) -> Any:
        if isinstance(v, TensorType):
            return v.dtype
        if isinstance(v, ScalarType):
            return {"bool": bool, "int": int, "float": float, "complex": complex}[v.kind]
        return v.dtype if isinstance(v, (np.ndarray, np.generic)) else type(v)

    return ufunc.resolve_dtypes(tuple(dtype(v) for v in inputs) + (None,) * ufunc.nout)[0].kind


def math_library(op: OpDef, inputs: Sequence[Any]) -> bool:
    """Whether NumPy computes `op` on `inputs` with a math-library function (its SIMD loops or libm)."""
    u = op.ufunc
    if u not in MATH_LIBRARY_UFUNCS and u not in MATH_LIBRARY_COMPLEX_UFUNCS:
        return False
    kind = _ufunc_loop_kind(u, inputs)
    return kind in "fc" if u in MATH_LIBRARY_UFUNCS else kind == "c"


def numpy_exact(op: OpDef | str, inputs: Sequence[Any]) -> bool:
    """Whether NumPy's result of `op` on `inputs` (values or IR types) is the same on every machine, so
    that a test may require a backend to equal it bit for bit. False for math-library ufuncs on float
    and complex loops (`numtrace_ir.ops.elementwise.MATH_LIBRARY_UFUNCS`: NumPy's AVX2 and AVX-512
    loops differ by ulps), for foreign ufuncs (their library's math), and for products and
    linear algebra (the BLAS picks its kernels, and so its summation order, by CPU)."""
    op = registry.get(op) if isinstance(op, str) else op
    if op.kind == "contraction" or op.name.startswith("np.linalg.") or op.name == "np.ufunc":
        return False
    return not math_library(op, inputs)


def data_guard_cone(graph: Any) -> set:
    """The nodes (by id) whose results a guard on array data reads, directly or through other nodes."""
    wanted: set = set()
    cone: set = set()
    for node in reversed(graph.nodes):
        if node.op == "prim.guard" and isinstance(node.inputs[0].type, TensorType):
            wanted.update(node.inputs)
        elif any(v in wanted for v in node.outputs):
            cone.add(id(node))
            wanted.update(node.inputs)
    return cone


def _kernel_inexact(node: Any) -> bool:
    """Whether a correct kernel of `node` may give other bits than NumPy: NumPy's result differs between
    machines, or accumulates floats in an order a kernel may choose. A host call runs the real
    function, and an op the registry lacks has no reference to run instead: neither counts."""
    try:
        op = registry.get(node.op)
    except UnknownOpError:
        return False
    if node.op == "prim.host_call":
        return False
    try:
        if not numpy_exact(op, [v.type for v in node.inputs]):
            return True
    except TypeError:   # inputs no ufunc loop takes: the reference says what NumPy does
        return True
    inexact_out = any(isinstance(v.type, TensorType) and v.type.dtype.kind in "fc" for v in node.outputs)
    return op.reduction in _ORDER_DEPENDENT and inexact_out


def guard_reference_nodes(graph: Any) -> set:
    """The nodes (by id) a backend runs with their NumPy reference: those feeding a guard on array data
    (`data_guard_cone`) whose result a kernel may give with other bits (`_kernel_inexact`)."""
    cone = data_guard_cone(graph)
    return {id(n) for n in graph.nodes if id(n) in cone and _kernel_inexact(n)}
