"""Calling a traced function while another function is traced: its graph's nodes are recorded into
that trace (run on their NumPy references, so the outer trace gets concrete values too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numtrace_ir import registry, results_of
from numtrace_ir.fp_errors import node_errstate

from . import tracer as _tracing
from .containers import scalar_leaves
from .traced_int import plain
from .traced_value import is_traced_array

if TYPE_CHECKING:
    from .traced import TracedFunction

__all__ = ["inline"]


def inline(fn: TracedFunction, leaves: Sequence[Any]) -> Any:
    """Record ``fn``'s graph, on the flat arguments ``leaves``, into the trace being recorded."""
    tracer = _tracing.current_tracer()
    assert tracer is not None  # a traced function inlines only while a trace is being recorded
    if fn.mutated or fn.views:
        what = "writes into its arguments" if fn.mutated else "returns views of its arguments or results"
        raise NotImplementedError(f"{fn.__name__} {what}; calling it from a function being traced is "
                                  "not supported")
    env: dict[Any, Any] = dict(zip(fn.graph.inputs, [*leaves, *fn._state]))
    for node in fn.graph.nodes:
        inputs = [env[v] for v in node.inputs]
        attrs = dict(node.attrs)
        # The inlined function's own np.errstate around the node holds in the new trace too.
        with np.errstate(**(node_errstate(node) or {})):
            if node.op == "prim.Constant":
                concrete = attrs["value"]
            else:
                concrete = registry.get(node.op).reference(*[_concrete(x) for x in inputs], **attrs)
            result = tracer.record(node.op, inputs, attrs, concrete)
        env.update(zip(node.outputs, result if len(node.outputs) > 1 else (result,)))
    outs = results_of(fn.call_spec, leaves, tuple(env[v] for v in fn.graph.outputs))
    # A result NumPy gives as a scalar (x[0]: its op's reference gave a 0-d array above) is traced as one:
    # its type is np.int8, and its operators are NumPy's scalar math (int overflow warned), as in a call.
    for out, scalar in zip(outs, scalar_leaves(fn.out_spec)):
        if scalar and is_traced_array(out):
            out._scalar = True
    return outs[0] if fn.call_spec.single else fn.out_spec.build(outs)


def _concrete(value: Any) -> Any:
    """The NumPy value behind a traced value (or the value itself), for running a reference."""
    concrete = getattr(value, "_concrete", None)
    if issubclass(type(concrete), np.ndarray):
        return concrete
    return plain(value)
