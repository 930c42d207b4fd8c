"""The backend contract as code: what a backend (found through the ``numtrace.backends`` entry points)
and the executables it compiles promise the frontend. docs/design/contract.md says it in prose;
`numtrace_ir.conformance` checks it on a backend; `numtrace_ir.call_spec` holds the call convention
a backend receives with each graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from numtrace_ir.call_spec import CallSpec
from numtrace_ir.graph import Graph
from numtrace_ir.types import Type

__all__ = ["Backend", "Executable", "plain_array"]


@runtime_checkable
class Executable(Protocol):
    """One graph compiled for one input signature.

    Called as ``exe(*inputs, out=None)`` with one array per graph input, it returns the graph's outputs
    as a tuple of fresh arrays (never views of its inputs, its constants or each other), or writes them
    into the arrays of ``out`` and returns those. The one exception: an output the call spec's
    `CallSpec.in_place_updates` allows to be computed into an input's memory may be that input array
    itself. It never reads or writes out of bounds, may be called from several threads at once, and
    names the node and the user's source line in its errors.

    Optional: ``explain() -> str`` (what a call does, for people), and ``exact_caller(call_spec,
    state, build)``, the whole call of the traced function in one object whose ``run(args)`` does
    what `numtrace_ir.call_spec.run_call` does (plus ``build``: None for the flat results, or item 0
    when ``call_spec.single``; else a callable applied to them) when every argument is exactly the
    array it was compiled for, and otherwise returns ``NotImplemented`` having run nothing.
    """

    def __call__(self, *inputs: np.ndarray, out: Sequence[np.ndarray] | None = None) -> tuple: ...

    def stats(self) -> dict[str, Any]: ...


@runtime_checkable
class Backend(Protocol):
    """A compiler from graphs to executables.

    ``compile`` gets the traced graph, the call's concrete input types (same dtypes and ranks as the
    graph's inputs, possibly other sizes) and the call convention (`CallSpec`; None: every input an
    argument, every output a result). It calls ``numtrace_ir.specialize(graph, input_types,
    check_shapes=False)`` first, once: that checks the graph's guards (raising `numtrace_ir.GuardError`),
    re-derives every type for the call's sizes and turns shape arithmetic, ``prim.dynamic`` and
    dynamic-shape ops into constants and plain ops. An op it cannot run is a ``NotImplementedError``
    naming the op, the node and its source line, raised here, before any call.
    """

    name: str

    def is_available(self) -> tuple[bool, str]: ...

    def compile(self, graph: Graph, input_types: Sequence[Type],
                call_spec: CallSpec | None = None) -> Executable: ...


def plain_array(x: Any, what: str) -> Any:
    """`x` as a graph takes it: itself, unless its type is an ndarray subclass.

    A graph has ndarray semantics: a subclass that changes what operations mean (a masked array's
    mask, np.matrix's ``*``) would be computed as its bare data, a silent wrong answer, so it is
    refused with a TypeError naming the argument `what`. np.memmap only changes where the data lives,
    and a class that sets ``__numtrace_plain_array__ = True`` (numtrace.Parameter: arithmetic on it is
    ndarray's) declares that it changes no operation; both are taken as the arrays they are.
    """
    if type(x) is np.ndarray or not isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.memmap) or getattr(type(x), "__numtrace_plain_array__", False):
        return x.view(np.ndarray)
    raise TypeError(f"{what} is a {type(x).__module__}.{type(x).__qualname__}, an ndarray subclass; a trace "
                    "computes with plain ndarray semantics, which would ignore what the subclass changes "
                    "(a mask, matrix products): pass np.asarray(...) of the data you mean, or an ndarray")

