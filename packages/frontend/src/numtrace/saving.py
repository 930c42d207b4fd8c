"""Saving and loading traces: ``numtrace_ir.serialize`` graphs + JSON meta + state arrays.

The meta records, per traced method, the argument names, the input and output
container structures and the names of the state inputs; for a module also its
type, training flag, submodule tree and which state names are tied to which.
Loading needs no user code and never unpickles; anything malformed raises
``numtrace_ir.FormatError`` naming what is wrong.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import IO

import numpy as np
from numtrace_ir import FormatError, serialize

from .backends import get_backend
from .containers import Sequence_, check_leaves, spec_from_json
from .traced import TracedFunction
from .traced_module import TracedModule, _tree_of

FORMAT = "numtrace.trace"
VERSION = 1


def _method_meta(fn: TracedFunction) -> dict:
    return {"arg_names": list(fn.arg_names), "in_spec": fn.in_spec.to_json(),
            "out_spec": fn.out_spec.to_json(),
            "state_names": list(fn.state_names), "mutated": list(fn.mutated),
            "returned": [list(r) for r in fn.returned]}


def save_traced(obj: TracedFunction | TracedModule, path: str | os.PathLike | IO[bytes]) -> None:
    """Write ``obj`` to ``path`` or a binary file object (a zip; see numtrace_ir.serialize)."""
    data = dumps_traced(obj)
    if hasattr(path, "write"):
        path.write(data)
        return
    with open(path, "wb") as f:
        f.write(data)


def reduce_traced(obj: TracedFunction | TracedModule) -> tuple:
    """``__reduce__`` of traces: pickled (and deep-copied) as their saved form, so no lock or compiled
    code is pickled and a module's methods still share their state afterwards."""
    return (loads_traced, (dumps_traced(obj), obj.backend))


def dumps_traced(obj: TracedFunction | TracedModule) -> bytes:
    """The saved form of ``obj`` as bytes (also how traces pickle)."""
    if isinstance(obj, TracedModule):
        methods = obj.methods
        state = obj.state_dict()
        canonical: dict[int, str] = {}
        for name, array in state.items():
            canonical.setdefault(id(array), name)
        arrays = {name: np.asarray(a) for name, a in state.items() if canonical[id(a)] == name}
        module = {"type": obj._type, "training": obj.training, "tree": _tree_of(obj),
                  "state": {name: canonical[id(a)] for name, a in state.items()}}
        backend = next(iter(methods.values())).backend
    else:
        # A traced module's method carries the state it reads; saved with it, it loads on its own.
        methods, module, backend = {"forward": obj}, None, obj.backend
        arrays = {name: np.asarray(a) for name, a in zip(obj.state_names, obj._state)}
    meta = {"format": FORMAT, "version": VERSION, "kind": "module" if module else "function",
            "name": next(iter(methods.values())).__name__ if module is None else obj._type,
            "backend": backend, "methods": {name: _method_meta(fn) for name, fn in methods.items()},
            "module": module}
    return serialize.dumps({name: fn.graph for name, fn in methods.items()}, meta, arrays)


def load(path: str | os.PathLike | IO[bytes], backend: str | None = None) -> TracedFunction | TracedModule:
    """Read a trace written by ``.save`` from a path or a binary file object; ``backend`` defaults to the
    one it was saved with.

    Loading needs no user code and never unpickles or runs code from the file. A loaded trace
    cannot trace itself again: a call whose shapes break one of its guards raises ``GuardError``.

    Args:
        path: a file path or a binary file object open for reading.
        backend: the backend to run on, instead of the one it was saved with.

    Returns:
        A ``TracedFunction`` for a saved function, a ``TracedModule`` for a saved module.

    Raises:
        numtrace_ir.FormatError: the file is not a saved trace, or a part of it is malformed (the
            message says which).
        ValueError: the backend is not installed or not available here.

    Examples:
        ```python
        import os
        import tempfile

        import numpy as np
        import numtrace as nt

        def f(x):
            return np.sqrt(x) + 1

        path = os.path.join(tempfile.mkdtemp(), "f.nt")
        nt.trace(f, (np.ones(3),)).save(path)
        loaded = nt.load(path, backend="reference")
        assert loaded.backend == "reference" and np.allclose(loaded(np.full(3, 4.0)), 3.0)
        ```
    """
    if hasattr(path, "read"):
        return loads_traced(path.read(), backend, where=repr(getattr(path, "name", "<file object>")))
    with open(path, "rb") as f:
        return loads_traced(f.read(), backend, where=repr(os.fspath(path)))


def loads_traced(data: bytes, backend: str | None = None, where: str = "<bytes>"
                 ) -> TracedFunction | TracedModule:
    """Rebuild a trace from ``dumps_traced`` bytes."""
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
    try:
        return _rebuild(graphs, meta, arrays, backend)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as exc:
        raise FormatError(f"saved trace {where} is malformed: "
                          f"{type(exc).__name__}: {exc}") from None


def _rebuild(graphs: dict, meta: dict, arrays: dict, backend: str) -> TracedFunction | TracedModule:
    module = meta.get("module")
    state: OrderedDict[str, np.ndarray] = OrderedDict()
    if module is not None:
        for name, canonical in module["state"].items():
            state[name] = arrays[canonical]
    else:
        state.update(arrays)
    methods = {}
    for name, info in meta["methods"].items():
        graph = graphs[name]
        in_spec = spec_from_json(info["in_spec"])
        if not isinstance(in_spec, Sequence_):
            raise FormatError("saved input structure must be the tuple of arguments")
        state_names = [str(n) for n in info["state_names"]]
        arg_names = [str(n) for n in info["arg_names"]]
        out_spec = spec_from_json(info["out_spec"])
        mutated = info.get("mutated", [])
        if not isinstance(mutated, list) or any(type(i) is not int or not 0 <= i < len(graph.inputs)
                                                for i in mutated) or len(mutated) > len(graph.outputs):
            raise FormatError(f"saved method {name!r}: 'mutated' must list graph input indices")
        returned = info.get("returned", [])
        n_outputs = len(graph.outputs) - len(mutated)
        if not isinstance(returned, list) or any(
                not isinstance(r, list) or len(r) != 2 or any(type(v) is not int for v in r)
                or not 0 <= r[0] <= n_outputs + len(returned) or r[1] not in mutated for r in returned):
            raise FormatError(f"saved method {name!r}: 'returned' must list [output position, written input]")
        check_leaves(in_spec, len(graph.inputs) - len(state_names), f"saved method {name!r} inputs")
        check_leaves(out_spec, n_outputs + len(returned), f"saved method {name!r} outputs")
        if len(arg_names) != len(in_spec.children):
            raise FormatError(f"saved method {name!r}: {len(arg_names)} argument names for "
                              f"{len(in_spec.children)} arguments")
        methods[name] = TracedFunction(graph, name=name if module is not None else meta["name"],
                                       arg_names=arg_names, in_spec=in_spec,
                                       out_spec=out_spec, backend=backend,
                                       state=[state[n] for n in state_names], state_names=state_names,
                                       mutated=mutated, returned=[tuple(r) for r in returned])
    if module is None:
        return methods["forward"]
    return TracedModule(module["type"], methods, state, module["tree"], bool(module["training"]))


def read_graphs(path: str | os.PathLike) -> tuple[dict, dict]:
    """The graphs and meta of a saved trace, without building callables (for ``numtrace show``)."""
    with open(path, "rb") as f:
        graphs, meta, _ = serialize.loads(f.read())
    return graphs, meta
