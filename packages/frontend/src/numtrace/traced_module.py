"""``TracedModule``: the traced methods of a ``Module``, its submodule tree and its state.

Parameters and buffers are inputs of every method graph that reads them, bound at
call time to the arrays held here (the module's own arrays, shared as in the
reference tracer), so ``load_state_dict`` changes the outputs without re-tracing.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import numpy as np
from numtrace_ir import FormatError

from . import saving, trace_format
from .errors import TracerWarning
from .module import check_state_keys, checked_state_value
from .source import warn_at_user_line
from .traced import TracedFunction


class TracedSubmodule:
    """A node of the traced module tree: exposes state and children, but runs nothing by itself.

    ``parameters`` names the local state entries that are parameters (the rest are buffers);
    ``traced_training`` is the mode the methods were traced in, which ``training`` starts at."""

    def __init__(self, path: str, module_type: str, state: Mapping[str, np.ndarray],
                 children: Mapping[str, TracedSubmodule], training: bool,
                 parameters: Iterable[str] | None = None, traced_training: bool | None = None):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_type", module_type)
        object.__setattr__(self, "_local_state", dict(state))
        object.__setattr__(self, "_parameter_names",
                           tuple(n for n in (state if parameters is None else parameters) if n in state))
        object.__setattr__(self, "_children", dict(children))
        object.__setattr__(self, "training", bool(training))
        object.__setattr__(self, "_traced_training", bool(training if traced_training is None
                                                          else traced_training))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private state is in __dict__; never recurse looking for it
            raise AttributeError(name)
        if name in self._local_state:
            return self._local_state[name]
        if name in self._children:
            return self._children[name]
        raise AttributeError(f"traced module {self._path or type(self).__name__!r} ({self._type}) has no "
                             f"attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"traced modules are read-only: use load_state_dict to change {name!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"submodule {self._path!r} ({self._type}) of a traced module is not callable on its "
                        "own: only the traced methods of the top-level module run")

    def named_children(self) -> Iterator[tuple[str, TracedSubmodule]]:
        return iter(self._children.items())

    def named_modules(self) -> Iterator[tuple[str, TracedSubmodule]]:
        """This module and every submodule below it, depth first, by dotted path from here."""
        yield "", self
        for name, child in self._children.items():
            for path, node in child.named_modules():
                yield (f"{name}.{path}" if path else name), node

    def _named_state(self, buffers: bool, remove_duplicate: bool) -> Iterator[tuple[str, np.ndarray]]:
        seen: set[int] = set()
        for path, node in self.named_modules():
            params = node._parameter_names
            for name, array in node._local_state.items():
                if (name in params) == buffers or (remove_duplicate and id(array) in seen):
                    continue
                seen.add(id(array))
                yield (f"{path}.{name}" if path else name), array

    def named_parameters(self, remove_duplicate: bool = True) -> Iterator[tuple[str, np.ndarray]]:
        """``(dotted name, parameter)``, as ``Module.named_parameters``: a parameter tied to several
        names (one graph input) is listed once, under its first name, unless ``remove_duplicate`` is
        False; ``state_dict()`` keeps every name."""
        return self._named_state(False, remove_duplicate)

    def parameters(self) -> Iterator[np.ndarray]:
        """Every parameter of this module and its submodules, tied ones once."""
        return (p for _, p in self.named_parameters())

    def named_buffers(self, remove_duplicate: bool = True) -> Iterator[tuple[str, np.ndarray]]:
        """``(dotted name, buffer)``; a shared buffer is listed once unless ``remove_duplicate`` is False."""
        return self._named_state(True, remove_duplicate)

    def train(self, mode: bool = True) -> TracedSubmodule:
        """Set ``training`` on this module and its submodules; returns self. The traced methods keep
        the behaviour of the mode they were traced in (dropout stays as traced), as in the reference
        tracer, so a call that leaves the tree in another mode than it was traced in says so with a
        TracerWarning (one per call)."""
        mode = bool(mode)
        nodes = [node for _, node in self.named_modules()]
        flipped = [node for node in nodes if node.training != mode and node._traced_training != mode]
        for node in nodes:
            object.__setattr__(node, "training", mode)
        if flipped:
            traced = "training" if flipped[0]._traced_training else "eval"
            name = flipped[0]._path or self._type
            warn_at_user_line(
                f"numtrace: {'train()' if mode else 'eval()'} on traced module {name!r} ({self._type}) sets "
                f"`training` to {mode}, but its traced methods keep the behaviour of the {traced} mode they "
                f"were traced in (dropout, batch statistics); trace the module again in this mode to "
                f"change it", TracerWarning)
        return self

    def eval(self) -> TracedSubmodule:
        """``train(False)``."""
        return self.train(False)

    def __repr__(self) -> str:
        return f"<traced {self._type} at {self._path!r}>"


class TracedModule(TracedSubmodule):
    """The result of ``trace_module``: every traced method as an attribute, state, submodules.

    Each traced method is a ``TracedFunction`` (``traced.forward``, ``traced.methods``); calling
    the traced module calls ``forward``. Submodules are read-only views of the tree
    (``traced.fc1.weight``) and run nothing on their own. The state arrays are the module's own, so
    ``load_state_dict`` (here or on the module) changes the outputs without tracing again.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt
        from numtrace import nn

        model = nn.Sequential(nn.Linear(3, 2, seed=0), nn.ReLU()).eval()
        traced = nt.trace(model, np.ones((4, 3), np.float32))
        print(traced)                     # <numtrace.TracedModule Sequential (eval mode) methods: forward>
        assert list(traced.methods) == ["forward"] and not traced.training
        traced.load_state_dict({"0.weight": np.zeros((2, 3), np.float32), "0.bias": np.ones(2, np.float32)})
        assert np.allclose(traced(np.ones((4, 3), np.float32)), 1.0)
        ```
    """

    def __init__(self, module_type: str, methods: Mapping[str, TracedFunction], state: OrderedDict,
                 tree: Mapping[str, Any], training: bool):
        local, children = _build_tree("", tree, state)
        super().__init__("", module_type, local, children, training, tree.get("parameters"),
                         tree.get("traced_training", training))
        object.__setattr__(self, "_methods", dict(methods))
        object.__setattr__(self, "_state", state)

    def __getattr__(self, name: str) -> Any:
        methods = self.__dict__.get("_methods", {})
        if name in methods:
            return methods[name]
        return super().__getattr__(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "forward" not in self._methods:
            raise TypeError(f"this traced {self._type} has no traced forward "
                            f"(traced: {', '.join(self._methods)})")
        return self._methods["forward"](*args, **kwargs)

    @property
    def backend(self) -> str:
        """The name of the backend the methods run on."""
        return next(iter(self._methods.values())).backend

    @property
    def methods(self) -> dict[str, TracedFunction]:
        """Every traced method by name."""
        return dict(self._methods)

    @property
    def graph(self) -> Any:
        """The graph of ``forward`` (None when ``forward`` was not traced)."""
        return self._methods["forward"].graph if "forward" in self._methods else None

    @property
    def code(self) -> str:
        """Every traced method's graph as NumPy source (see ``TracedFunction.code``)."""
        return "\n\n".join(m.code for m in self._methods.values())

    def explain(self, *args: Any, **kwargs: Any) -> str:
        """``forward.explain(...)`` with arguments; without, every traced method's (see
        ``TracedFunction.explain``)."""
        if args or kwargs:
            return self.__getattr__("forward").explain(*args, **kwargs)
        return "".join(m.explain() for m in self._methods.values())

    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Parameters and buffers by dotted name (the arrays themselves, as ``Module.state_dict``)."""
        return OrderedDict(self._state)

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Copy new values into the traced state in place (validated like ``Module.load_state_dict``)."""
        check_state_keys(self._state, state, strict)
        checked = {k: checked_state_value(k, self._state[k], v) for k, v in state.items() if k in self._state}
        for key, value in checked.items():
            np.copyto(self._state[key], value, casting="same_kind")

    def to(self, backend: str) -> TracedModule:
        """The same methods on another backend, sharing this module's state."""
        methods = {name: fn.to(backend) for name, fn in self._methods.items()}
        return TracedModule(self._type, methods, self._state, _tree_of(self), self.training)

    def save(self, path: Any) -> None:
        """Write every method, the state and the tree to ``path`` or a binary file (``numtrace.load``)."""
        saving.write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The saved form of this module (what ``save`` writes; also how it pickles): its methods, its
        state once per array (tied names share it) and its submodule tree."""
        state = self.state_dict()
        canonical: dict[int, str] = {}
        for name, array in state.items():
            canonical.setdefault(id(array), name)
        arrays = {name: np.asarray(a) for name, a in state.items() if canonical[id(a)] == name}
        module = {"type": self._type, "training": self.training, "tree": _tree_of(self),
                  "state": {name: canonical[id(a)] for name, a in state.items()}}
        return trace_format.dumps(self._methods, arrays, name=self._type, backend=self.backend, module=module)

    @classmethod
    def from_bytes(cls, data: bytes, backend: str | None = None, where: str = "<bytes>") -> TracedModule:
        """The traced module saved as ``data`` (``to_bytes``); ``backend`` defaults to the saved one."""
        return cls._from_saved(trace_format.loads(data, backend, where), where)

    @classmethod
    def _from_saved(cls, saved: trace_format.Saved, where: str) -> TracedModule:
        module = saved.meta.get("module")
        if module is None:
            raise FormatError(f"{where} holds a traced function, not a module; load it with numtrace.load")
        with trace_format.malformed_as_format_error(where):
            state: OrderedDict[str, np.ndarray] = OrderedDict()
            for name, canonical in module["state"].items():
                state[name] = saved.arrays[canonical]
            methods = {name: TracedFunction._saved_method(name, name, info, saved, state)
                       for name, info in saved.meta["methods"].items()}
            return cls(module["type"], methods, state, module["tree"], bool(module["training"]))

    def __reduce__(self) -> tuple:
        # Pickled (and deep-copied) as the saved form: no lock or compiled code is pickled, and the
        # methods still share their state afterwards.
        return (type(self).from_bytes, (self.to_bytes(), self.backend))

    def __repr__(self) -> str:
        mode = "training" if self.training else "eval"
        return f"<numtrace.TracedModule {self._type} ({mode} mode) methods: {', '.join(self._methods)}>"


def _build_tree(path: str, tree: Mapping[str, Any], state: Mapping[str, np.ndarray]
                ) -> tuple[dict[str, np.ndarray], dict[str, TracedSubmodule]]:
    """``tree`` is ``{"type": str, "state": [local names], "children": {name: tree}}``."""
    prefix = f"{path}." if path else ""
    local = {name: state[prefix + name] for name in tree["state"] if prefix + name in state}
    children = {}
    for name, sub in tree["children"].items():
        sub_local, sub_children = _build_tree(prefix + name, sub, state)
        children[name] = TracedSubmodule(prefix + name, sub["type"], sub_local, sub_children, sub["training"],
                                         sub.get("parameters"), sub.get("traced_training", sub["training"]))
    return local, children


def _tree_of(node: TracedSubmodule) -> dict:
    return {"type": node._type, "training": node.training, "traced_training": node._traced_training,
            "state": list(node._local_state), "parameters": list(node._parameter_names),
            "children": {name: _tree_of(child) for name, child in node._children.items()}}


def module_tree(module: Any) -> dict:
    """The submodule tree of a ``Module`` as plain data (``None`` submodules dropped)."""
    params, buffers, modules = module._state_dicts()
    return {"type": type(module).__name__, "training": bool(module.training),
            "state": [n for n, v in list(params.items()) + list(buffers.items()) if v is not None],
            "parameters": [n for n, v in params.items() if v is not None],
            "children": {name: module_tree(child) for name, child in modules.items() if child is not None}}


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
    data, where = saving.read_bytes(path)
    saved = trace_format.loads(data, backend, where)
    cls = TracedFunction if saved.meta.get("module") is None else TracedModule
    return cls._from_saved(saved, where)
