"""The saved form of traces: ``numtrace_ir.serialize`` graphs + JSON meta + state arrays.

The meta records, per traced method, the argument names, the input and output
container structures and the names of the state inputs; for a module also its
type, training flag, submodule tree and which state names are tied to which.
Loading needs no user code and never unpickles; anything malformed raises
``numtrace_ir.FormatError`` naming what is wrong.

The traced classes turn themselves into this form and back (``to_bytes``/``from_bytes``);
``saving`` moves the bytes to and from files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np
from numtrace_ir import FormatError, serialize

from .backends import get_backend
from .containers import SequenceSpec, check_leaves, leaf_names, spec_from_json

FORMAT = "numtrace.trace"
VERSION = 1


class Saved(NamedTuple):
    """A decoded saved trace: its graphs, meta and arrays, and the backend it loads on."""

    graphs: dict
    meta: dict
    arrays: dict
    backend: str


def _method_meta(fn: Any) -> dict:
    return {"arg_names": list(fn.arg_names), "in_spec": fn.in_spec.to_json(),
            "out_spec": fn.out_spec.to_json(),
            "state_names": list(fn.state_names), "mutated": list(fn.mutated),
            "returned": [list(r) for r in fn.returned], "views": list(fn.views),
            "layouts": None if fn.layouts is None else [_layout_json(v) for v in fn.layouts]}


def _layout_json(layout: Any) -> Any:
    return layout if isinstance(layout, str) else [list(layout[0]), list(layout[1])]


def _layouts(name: str, info: dict, n_args: int) -> list | None:
    """The saved `layouts` (see TracedFunction), checked: per argument "C", "F" or [shape, strides]."""
    saved = info.get("layouts")
    if saved is None:
        return None
    if not isinstance(saved, list) or len(saved) != n_args:
        raise FormatError(f"saved method {name!r}: 'layouts' must list one layout per argument")
    layouts: list = []
    for v in saved:
        if v in ("C", "F"):
            layouts.append(v)
        elif (isinstance(v, list) and len(v) == 2 and all(isinstance(p, list) and len(p) == len(v[0])
                                                          and all(type(d) is int for d in p) for p in v)):
            layouts.append((tuple(v[0]), tuple(v[1])))
        else:
            raise FormatError(f"saved method {name!r}: bad layout {v!r}")
    return layouts


def dumps(methods: Mapping[str, Any], arrays: Mapping[str, np.ndarray], *, name: str, backend: str,
          module: dict | None) -> bytes:
    """The saved form of traced ``methods`` (traced functions) with their state ``arrays``; ``module``
    is the module part of the meta (None for a traced function)."""
    meta = {"format": FORMAT, "version": VERSION, "kind": "module" if module else "function",
            "name": name, "backend": backend,
            "methods": {method: _method_meta(fn) for method, fn in methods.items()}, "module": module}
    return serialize.dumps({method: fn.graph for method, fn in methods.items()}, meta, dict(arrays))


def loads(data: bytes, backend: str | None, where: str) -> Saved:
    """Decode ``dumps`` bytes and check their format and version; ``backend`` defaults to the saved one."""
    graphs, meta, arrays = serialize.loads(data)
    if meta.get("format") != FORMAT:
        raise FormatError(f"{where} is a numtrace-ir file but not a saved numtrace trace")
    if meta.get("version") != VERSION:
        raise FormatError(f"saved trace version {meta.get('version')!r} is not supported "
                          f"(expected {VERSION})")
    backend = backend if backend is not None else meta.get("backend")
    if not isinstance(backend, str):
        raise FormatError("saved trace does not name a backend")
    get_backend(backend)  # an unavailable backend is its own error, not a malformed file
    return Saved(graphs, meta, arrays, backend)


@contextmanager
def malformed_as_format_error(where: str) -> Iterator[None]:
    """Rebuilding from a saved trace: a missing or mistyped field is a malformed file, said so."""
    try:
        yield
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise FormatError(f"saved trace {where} is malformed: "
                          f"{type(exc).__name__}: {exc}") from None


def method_fields(name: str, info: dict, graph: Any) -> dict:
    """The checked call structure of saved method ``name`` (``info`` from its meta), as the keyword
    arguments of ``TracedFunction`` other than its name, backend and state arrays."""
    in_spec = spec_from_json(info["in_spec"])
    if not isinstance(in_spec, SequenceSpec):
        raise FormatError("saved input structure must be the tuple of arguments")
    state_names = [str(n) for n in info["state_names"]]
    arg_names = [str(n) for n in info["arg_names"]]
    out_spec = spec_from_json(info["out_spec"])
    mutated = info.get("mutated", [])
    if not isinstance(mutated, list) or any(type(i) is not int or not 0 <= i < len(graph.inputs)
                                            for i in mutated) or len(mutated) > len(graph.outputs):
        raise FormatError(f"saved method {name!r}: 'mutated' must list graph input indices")
    returned = info.get("returned", [])
    n_args = len(graph.inputs) - len(state_names)
    n_outputs = len(graph.outputs) - len(mutated)
    if not isinstance(returned, list) or any(
            not isinstance(r, list) or len(r) != 2 or any(type(v) is not int for v in r)
            or not 0 <= r[0] <= n_outputs + len(returned) or not 0 <= r[1] < n_args for r in returned):
        raise FormatError(f"saved method {name!r}: 'returned' must list [output position, argument]")
    check_leaves(in_spec, len(graph.inputs) - len(state_names), f"saved method {name!r} inputs")
    check_leaves(out_spec, n_outputs + len(returned), f"saved method {name!r} outputs", repeats=True)
    views = info.get("views", [])
    if not isinstance(views, list) or any(type(v) is not int or not 0 <= v < n_outputs + len(returned)
                                          for v in views):
        raise FormatError(f"saved method {name!r}: 'views' must list result positions")
    if len(arg_names) != len(in_spec.children):
        raise FormatError(f"saved method {name!r}: {len(arg_names)} argument names for "
                          f"{len(in_spec.children)} arguments")
    _check_input_names(name, graph, arg_names, in_spec, state_names)
    return {"arg_names": arg_names, "in_spec": in_spec, "out_spec": out_spec, "state_names": state_names,
            "mutated": mutated, "returned": [tuple(r) for r in returned], "views": views,
            "layouts": _layouts(name, info, len(graph.inputs) - len(state_names))}


def _check_input_names(name: str, graph: Any, arg_names: list[str], in_spec: SequenceSpec,
                       state_names: list[str]) -> None:
    """The meta's argument and state names must be those of the graph's inputs, in order: a call by
    keyword binds arrays to graph inputs through these names, so names that contradict the graph
    would silently run it on the wrong arrays."""
    expected: list[str] = []
    for arg, spec in zip(arg_names, in_spec.children):
        leaf_names(spec, arg, expected)
    expected += state_names
    found = [v.name for v in graph.inputs]
    if found != expected:
        raise FormatError(f"saved method {name!r}: its argument and state names (meta.json) name the graph "
                          f"inputs {expected}, but the graph's inputs are {found}; the file is corrupt")
