"""Which matrix products run on numtrace's own kernels, and the epilogues fused in.

A product with one vector side, ``(1, K) @ (K, N)``, ``(K,) @ (K, N)`` or ``(M, K) @ (K,)`` in
float32/float64, is memory-bound work on the weights: the kernels in nt_gemv.h split its outputs
over the interpreter's thread team by a fixed rule, so each core keeps its share of the weights in
its cache between calls, where BLAS would re-partition per call and run its own threads beside
ours. A bias add that follows (``h + b`` with ``b`` a graph input or constant of shape (N,)) and a
ReLU after it (``np.maximum(h, 0)``) are applied by the same kernel while the outputs are in cache.

A float32/float64 product ``(..., M, K) @ (K, N)`` (or a stack ``(..., M, K) @ (..., K, N)`` with
the same leading dims, or ``(M, K) @ (..., K, N)``: a convolution's weight over its patches) runs on
the packed kernels of nt_gemm.h (see packed.pxi): the right operand in the micro-kernel's layout,
packed once when it is a trace constant, and per call, inside the product, when it is module state
(which the user may change between calls) or any other run-time value (a weight passed as an
argument, attention's keys and values) with enough rows of A to repay the packing
(RUNTIME_MIN_ROWS). Its epilogue is the chain of bias adds, residual adds and ReLUs that follows in
the graph. These kernels run on numtrace's own thread team, whose caller takes over the work of a
preempted worker, where NumPy's OpenBLAS splits a product statically over threads of its own. Other
products stay with NumPy's matmul (BLAS on one OpenBLAS thread, see numtrace_cpu.blas_threads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import ScalarType, TensorType

__all__ = ["RUNTIME_MIN_ROWS", "Epilogue", "epilogues", "gathered_operand", "gemv_form", "packed_form",
           "weight_source", "widen_mixed_products"]

_MATMUL, _DOT, _ADD, _MAXIMUM, _STACK, _RESHAPE = map(
    registry.get, ("np.matmul", "np.dot", "np.add", "np.maximum", "np.stack", "np.reshape"))
GEMV_MAX_M = 8
"""The most rows of x a GEMV step takes (NT_GEMV_MAX_M in nt_gemv.h)."""
_VIEW_OPS = frozenset(op.name for op in registry.all_ops() if op.as_view is not None)


def _tensor(v) -> TensorType | None:
    t = v.type
    return t if isinstance(t, TensorType) and t.is_concrete else None


def _float_product(node) -> tuple[Any, TensorType, TensorType, TensorType] | None:
    """(op, a, b, out) when `node` is np.matmul/np.dot of two operands with concrete shapes and one
    float32/float64 dtype throughout: what numtrace's own product kernels take; None otherwise
    (data-dependent sizes and other dtypes stay with NumPy's matmul step)."""
    try:
        op = registry.get(node.op)
    except Exception:   # an op the registry does not know is no product
        return None
    if (op is not _MATMUL and op is not _DOT) or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    a, b, out = _tensor(node.inputs[0]), _tensor(node.inputs[1]), _tensor(node.outputs[0])
    if a is None or b is None or out is None:
        return None
    if not (a.dtype == b.dtype == out.dtype and out.dtype in (np.float32, np.float64)):
        return None
    return op, a, b, out


def widen_mixed_products(g) -> int:
    """Give each float64 product of a float32 and a float64 operand (attention's ``p @ v`` once its
    softmax ran in float64) an ``np.astype(float64)`` of the float32 side, so that it is a float64
    product the GEMV and packed kernels take. NumPy's matmul and dot cast that operand the same way
    (exactly) before their float64 loop. Returns how many products were rewritten."""
    count = 0
    for node in list(g.nodes):
        try:
            op = registry.get(node.op)
        except Exception:   # an op the registry does not know is no product
            continue
        if (op is not _MATMUL and op is not _DOT) or len(node.inputs) != 2 or len(node.outputs) != 1:
            continue
        a, b, out = (_tensor(v) for v in (*node.inputs, node.outputs[0]))
        if a is None or b is None or out is None or out.dtype != np.float64:
            continue
        if sorted((a.dtype.name, b.dtype.name)) != ["float32", "float64"]:
            continue
        cast = registry.get("np.astype").normalize_attrs({"dtype": np.dtype(np.float64)})
        with g.inserting_before(node):
            ins = [v if v.type.dtype == np.float64 else
                   g.create_node("np.astype", [v], cast, loc=node.loc).outputs[0] for v in node.inputs]
            new = g.create_node(node.op, ins, dict(node.attrs), loc=node.loc, out_types=[out])
        new.outputs[0].name = node.outputs[0].name
        node.outputs[0].replace_all_uses_with(new.outputs[0])
        g.erase_node(node)
        count += 1
    return count


def gemv_form(node, state: frozenset = frozenset()) -> tuple[int, int] | None:
    """(position of the vector operand, summed axis of the matrix) when `node` is a product the
    GEMV kernels take; None otherwise. A few rows of x (2 to GEMV_MAX_M) @ W go there too when W is
    a run-time value (see weight_source; `state`: the module-state graph inputs): one pass over W
    for all of them, where BLAS would pack W first; constant and module weights keep the packed
    kernels."""
    found = _float_product(node)
    if found is None:
        return None
    op, a, b, _ = found
    if b.ndim == 2 and (a.ndim == 1 or (a.ndim == 2 and a.shape[0] == 1)):
        return 0, 0   # x @ W: the vector is a, W sums over its rows
    if (b.ndim == 2 and a.ndim == 2 and 2 <= a.shape[0] <= GEMV_MAX_M
            and weight_source(node.inputs[1], state) == "runtime"):
        return 0, 0   # a few rows of x @ W
    if a.ndim == 2 and b.ndim == 1 and op is _MATMUL:
        return 1, 1   # A @ x: the vector is b, A sums over its columns
    return None


def weight_source(v, state: frozenset) -> str:
    """"constant" when `v` is a trace constant or a view of one, "state" when it is module state (a
    graph input numbered in `state`) or a view of it, else "runtime". Only views of one input count:
    a view with a run-time index could pick other data on every call."""
    while v.node is not None and v.node.op in _VIEW_OPS and len(v.node.inputs) == 1:
        v = v.node.inputs[0]
    n = v.node
    if n is None:
        return "state" if v in state else "runtime"
    return "constant" if n.op == "prim.Constant" and isinstance(v.type, TensorType) else "runtime"


RUNTIME_MIN_ROWS = 8
"""Rows of A from which a product of two run-time values runs on the packed kernels, its right operand
packed inside the product (a 2-D A of up to GEMV_MAX_M rows runs on the GEMV kernels). Measured on 2
cores under load, (M, 512) @ (512, 512) and (M, 256) @ (256, 1024) against BLAS on one OpenBLAS
thread (how numtrace calls it): the packed kernels ahead by 1.2-1.3x (float32) and 2-2.6x (float64)
at M = 8, by 1.3-1.7x and 2-4x from 16 rows; below 8 rows the ratio is noise-sized while the packing
costs more per row."""


def packed_form(node, state: frozenset) -> str | None:
    """How the right operand of a product the packed-weight kernels run is packed: "constant" once,
    "state" (module state) or "runtime" (any other value, when A has RUNTIME_MIN_ROWS rows or more)
    on every call (see weight_source); None when the GEMV kernels or BLAS run it (vector sides, few
    rows of run-time operands, complex dtypes, broadcast stacks)."""
    found = _float_product(node)
    if found is None or gemv_form(node, state) is not None:
        return None
    op, a, b, _ = found
    if a.ndim < 2 or b.ndim < 2 or (op is _DOT and (a.ndim != 2 or b.ndim != 2)):
        return None
    if b.ndim > 2 and a.ndim > 2 and (a.ndim != b.ndim or tuple(a.shape[:-2]) != tuple(b.shape[:-2])):
        return None   # a broadcast stack of products: BLAS through NumPy (a 2-D `a` the kernels share)
    source = weight_source(node.inputs[1], state)
    if source == "runtime" and _rows(a, b) < RUNTIME_MIN_ROWS:
        return None
    return source


def gathered_operand(node, state: frozenset, outputs: set) -> tuple | None:
    """(stack node, reshape node) when `node` is a packed product whose right operand is a C-order
    reshape of an ``np.stack`` of views of one value (an im2col's shifted windows, ``nn.Conv2d``),
    each read only by the next: the product then reads B straight from the windows
    (packed.pxi's ``_gathered``) and the stacked copy is never made. Whether the windows' layout
    allows it is checked per call (else the stack is made by NumPy)."""
    if packed_form(node, state) is None or node.op != _MATMUL.name:
        return None
    r = node.inputs[1]
    reshape = r.node
    if (reshape is None or r is node.inputs[0] or _only_use(r, outputs) is not node
            or reshape.op not in (_RESHAPE.name, "prim.reshape")
            or (reshape.op == _RESHAPE.name and reshape.attrs.get("order", "C") != "C")):
        return None
    s = reshape.inputs[0]
    stack = s.node
    if stack is None or stack.op != _STACK.name or _only_use(s, outputs) is not reshape:
        return None
    t = _tensor(s)
    if t is None or t.dtype != r.type.dtype or stack.attrs.get("dtype") not in (None, t.dtype):
        return None
    windows = stack.inputs
    if not windows or _tensor(windows[0]) is None or windows[0].type.dtype != t.dtype:
        return None   # a stack that casts (its dtype=): the kernels read the windows as they are
    first = windows[0].node
    base = first.inputs[0] if first is not None and first.inputs else None
    for w in windows:
        n = w.node
        if (n is None or n.op not in _VIEW_OPS or not n.inputs or n.inputs[0] is not base
                or _tensor(w) is None or w.type != windows[0].type):
            return None
    return stack, reshape


def _rows(a: TensorType, b: TensorType) -> int:
    """Rows of each product: M of (..., M, K) @ (K, N) counts every leading dim, a stack's only its own."""
    return int(a.shape[-2]) if b.ndim > 2 else int(np.prod(a.shape[:-1], dtype=np.int64))


@dataclass
class Epilogue:
    """What a product step applies after the product, in order: `ops`, each (name, value): "bias"
    adds `value` of shape (N,), "residual" adds `value` of the product's own shape, "relu" and
    "relu_zero_first" are np.maximum(h, 0) and np.maximum(0, h) (value None). `nodes` are the graph
    nodes it stands for and `result` the value it produces in their place."""

    ops: list
    nodes: list
    result: object

    @property
    def bias(self):
        """The GEMV kernels' form: the bias value (their first op)."""
        return self.ops[0][1]

    @property
    def activation(self) -> str | None:
        """The GEMV kernels' form: the activation after the bias, or None."""
        return self.ops[1][0] if len(self.ops) > 1 else None

    def operands(self) -> list:
        """The values the ops read besides the product."""
        return [v for _, v in self.ops if v is not None]


def _only_use(v, outputs: set):
    """The node that is the one use of `v` (read once, not a graph output), else None."""
    if v in outputs:
        return None
    uses = v.uses
    return uses[0][0] if len(uses) == 1 else None


def _zero_constant(v) -> bool:
    """`v` is a +0 Python scalar constant (maximum with -0.0 would keep other zeros' signs)."""
    n = v.node
    if n is None or n.op != "prim.Constant" or not isinstance(v.type, ScalarType):
        return False
    value = n.attrs.get("value")
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0
            and not np.signbit(value))


def _next_op(result, h_type, outs: set):
    """(node, op) when the one use of `result` is an epilogue op of a product of type `h_type`."""
    node = _only_use(result, outs)
    if node is None or len(node.inputs) != 2 or node.outputs[0].type != h_type:
        return None
    first, second = node.inputs
    if node.op == _ADD.name:
        other = second if first is result else first
        t = _tensor(other)
        if other is result or t is None or t.dtype != h_type.dtype:
            return None
        if tuple(t.shape) == (h_type.shape[-1],):
            return node, ("bias", other)
        if tuple(t.shape) == tuple(h_type.shape):
            return node, ("residual", other)
    elif node.op == _MAXIMUM.name:
        if first is result and _zero_constant(second):
            return node, ("relu", None)
        if second is result and _zero_constant(first):
            return node, ("relu_zero_first", None)
    return None


def _gemv_epilogue(node, outs: set) -> Epilogue | None:
    """A bias add (of a graph input or constant, which exist wherever the step runs), then
    optionally a ReLU: what the GEMV kernels take."""
    h = node.outputs[0]
    step = _next_op(h, h.type, outs)
    if step is None or step[1][0] != "bias" or not (step[1][1].node is None
                                                     or step[1][1].node.op == "prim.Constant"):
        return None
    epi = Epilogue([step[1]], [step[0]], step[0].outputs[0])
    step = _next_op(epi.result, h.type, outs)
    if step is not None and step[1][0] in ("relu", "relu_zero_first"):
        epi.ops.append(step[1])
        epi.nodes.append(step[0])
        epi.result = step[0].outputs[0]
    return epi


def _packed_epilogue(node, outs: set) -> Epilogue | None:
    """The chain of bias adds, residual adds and ReLUs after a packed product (one bias and one
    residual at most, four ops at most). Whether its operands exist before the product runs is
    the lowering's to check (`lowering.lower`)."""
    h = node.outputs[0]
    epi = Epilogue([], [], h)
    while len(epi.ops) < 4:
        step = _next_op(epi.result, h.type, outs)
        if step is None or (step[1][0] in ("bias", "residual") and step[1][0] in (n for n, _ in epi.ops)):
            break
        epi.ops.append(step[1])
        epi.nodes.append(step[0])
        epi.result = step[0].outputs[0]
    return epi if epi.ops else None


def epilogues(nodes: list, outputs: list, state: frozenset = frozenset()) -> dict:
    """id(product node) -> its Epilogue, for each GEMV product followed by a bias add and each
    packed product (see packed_form; `state`: the module-state graph inputs) followed by an
    epilogue op."""
    outs = set(outputs)
    found: dict = {}
    for node in nodes:
        if gemv_form(node, state) is not None:
            epi = _gemv_epilogue(node, outs)
        elif packed_form(node, state) is not None:
            epi = _packed_epilogue(node, outs)
        else:
            continue
        if epi is not None:
            found[id(node)] = epi
    return found
