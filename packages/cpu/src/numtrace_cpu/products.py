"""Which matrix products run on numtrace's own matrix-vector kernels, and the epilogues fused in.

A product with one vector side, ``(1, K) @ (K, N)``, ``(K,) @ (K, N)`` or ``(M, K) @ (K,)`` in
float32/float64, is memory-bound work on the weights: the kernels in nt_gemv.h split its outputs
over the interpreter's thread team by a fixed rule, so each core keeps its share of the weights in
its cache between calls, where BLAS would re-partition per call and run its own threads beside
ours. A bias add that follows (``h + b`` with ``b`` a graph input or constant of shape (N,)) and a
ReLU after it (``np.maximum(h, 0)``) are applied by the same kernel while the outputs are in cache.
Everything else stays with NumPy's matmul (BLAS).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import ScalarType, TensorType

__all__ = ["Epilogue", "epilogues", "gemv_form"]

_MATMUL, _DOT, _ADD, _MAXIMUM = map(registry.get, ("np.matmul", "np.dot", "np.add", "np.maximum"))


def _tensor(v) -> TensorType | None:
    t = v.type
    return t if isinstance(t, TensorType) and t.is_concrete else None


def gemv_form(node) -> tuple[int, int] | None:
    """(position of the vector operand, summed axis of the matrix) when `node` is a product the
    GEMV kernels take; None otherwise."""
    try:
        op = registry.get(node.op)
    except Exception:   # an op the registry does not know is no product
        return None
    if (op is not _MATMUL and op is not _DOT) or len(node.inputs) != 2 or len(node.outputs) != 1:
        return None
    a, b, out = _tensor(node.inputs[0]), _tensor(node.inputs[1]), _tensor(node.outputs[0])
    if a is None or b is None or out is None or not (a.is_concrete and b.is_concrete and out.is_concrete):
        return None   # data-dependent sizes: NumPy's matmul step (which the epilogue then does not join)
    if not (a.dtype == b.dtype == out.dtype and out.dtype in (np.float32, np.float64)):
        return None
    if b.ndim == 2 and (a.ndim == 1 or (a.ndim == 2 and a.shape[0] == 1)):
        return 0, 0   # x @ W: the vector is a, W sums over its rows
    if a.ndim == 2 and b.ndim == 1 and op is _MATMUL:
        return 1, 1   # A @ x: the vector is b, A sums over its columns
    return None


@dataclass
class Epilogue:
    """What a GEMV step applies after the product: `bias` (a value) added, then `activation`
    ("relu": maximum(h, 0), "relu_zero_first": maximum(0, h), or None); `nodes` are the graph nodes
    it stands for and `result` the value it produces in their place."""

    bias: object
    activation: str | None
    nodes: list
    result: object


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


def epilogues(nodes: list, outputs: list) -> dict:
    """id(product node) -> its Epilogue, for each GEMV product followed by a bias add. The bias is
    a graph input or a constant, so it exists wherever the fused step runs."""
    outs = set(outputs)
    found: dict = {}
    for node in nodes:
        if gemv_form(node) is None:
            continue
        h = node.outputs[0]
        add = _only_use(h, outs)
        if add is None or add.op != _ADD.name or len(add.inputs) != 2:
            continue
        bias = add.inputs[1] if add.inputs[0] is h else add.inputs[0]
        bt = _tensor(bias)
        if (bias is h or bt is None or bt.dtype != h.type.dtype or tuple(bt.shape) != (h.type.shape[-1],)
                or add.outputs[0].type != h.type
                or not (bias.node is None or bias.node.op == "prim.Constant")):
            continue
        chain, result, activation = [add], add.outputs[0], None
        relu = _only_use(result, outs)
        if (relu is not None and relu.op == _MAXIMUM.name and len(relu.inputs) == 2
                and relu.outputs[0].type == h.type):
            first, second = relu.inputs
            if first is result and _zero_constant(second):
                activation = "relu"
            elif second is result and _zero_constant(first):
                activation = "relu_zero_first"
            if activation is not None:
                chain.append(relu)
                result = relu.outputs[0]
        found[id(node)] = Epilogue(bias, activation, chain, result)
    return found
