"""``Module`` and ``Parameter``: stateful NumPy models whose state the tracer turns into graph inputs.

A module keeps parameters, buffers and submodules in three ordered dicts (not in
the instance ``__dict__``), so that attribute reads go through ``__getattr__`` and
the tracer can substitute traced arrays for the state while it runs a method.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from .traced_value import is_traced_array
from .tracer import current_tracer


class Parameter(np.ndarray):
    """A learnable array of a ``Module``: an ndarray that the module registers as a parameter.

    Arithmetic on a parameter yields plain ndarrays; only assignment to a module
    attribute makes an array a parameter.
    """

    __numtrace_plain_array__ = True  # its operations are ndarray's: a trace takes it as an argument

    def __new__(cls, data: Any, dtype: Any = None) -> Parameter:
        return np.array(data, dtype=dtype, copy=True).view(cls)

    def __array_wrap__(self, array: np.ndarray, context: Any = None, return_scalar: bool = False) -> Any:
        array = array.view(np.ndarray)
        return array[()] if return_scalar else array

    def __repr__(self) -> str:
        return f"Parameter({np.asarray(self)!r})"


def _updated_in_place(param: Any, value: Any) -> bool:
    """Whether ``value`` is what an in-place operator gave back for ``param`` (``self.w -= lr * g`` assigns
    the parameter's own memory as a plain ndarray view, its ufunc's ``__array_wrap__`` being ndarray's)."""
    return (isinstance(param, Parameter) and type(value) is np.ndarray and value.dtype == param.dtype
            and value.shape == param.shape and value.strides == param.strides
            and value.__array_interface__["data"] == param.__array_interface__["data"])


class Module:
    """Base class of numtrace models: subclass it, assign state in ``__init__``, define ``forward``.

    Assigning a ``Parameter`` registers a parameter, assigning a ``Module`` a submodule, and
    ``register_buffer`` adds other state. Tracing a module makes all of these graph inputs, so the
    trace follows new weights without tracing again.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt

        class Affine(nt.Module):
            def __init__(self, n):
                super().__init__()
                self.scale = nt.Parameter(np.ones(n, np.float32))
                self.register_buffer("shift", np.zeros(n, np.float32))

            def forward(self, x):
                return x * self.scale + self.shift

        model = Affine(3)
        assert list(model.state_dict()) == ["scale", "shift"]
        traced = nt.trace(model.eval(), np.ones((2, 3), np.float32))
        model.load_state_dict({"scale": np.full(3, 2.0, np.float32), "shift": np.ones(3, np.float32)})
        assert np.allclose(traced(np.ones((2, 3), np.float32)), 3.0)
        ```
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # -- attribute routing ---------------------------------------------------------------------
    def _state_dicts(self) -> tuple[dict, dict, dict]:
        try:
            return self.__dict__["_parameters"], self.__dict__["_buffers"], self.__dict__["_modules"]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__}.__init__ did not call super().__init__(); Module state is missing"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        params, buffers, modules = self._state_dicts()
        if name in buffers and not isinstance(value, (Parameter, Module)):
            self._assign_state(buffers, name, value)
            return
        if name in params and params[name] is not None and is_traced_array(value):
            self._assign_state(params, name, value)  # self.w -= ... while traced: w stays the parameter
            return
        if name in params and _updated_in_place(params[name], value):
            return  # self.w -= ... run eagerly: the parameter's own memory, which stays the parameter
        for table in (params, buffers, modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module) or (value is None and name in modules):
            modules[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def _assign_state(self, table: dict, name: str, value: Any) -> None:
        """An array assigned to a buffer's name is the buffer's new value (``self.n += 1``, a running mean):
        the name stays a buffer, so it is still saved and traced. While tracing, the buffer (or a
        parameter, ``self.w -= lr * g``) is a graph input and the assignment a write into it, which each
        call of the trace copies back into the module's array (so the new value must fit its shape and
        dtype, as ``np.copyto`` casts).
        """
        tracer = current_tracer()
        old = table[name]
        if tracer is not None and old is not None and value is tracer.state_proxy(old):
            return  # self.n += 1 on the traced state: the write is already in the graph
        if is_traced_array(value):
            if old is None or tracer is None:
                raise RuntimeError(f"{type(self).__name__}.{name} is a buffer without a value, so a trace "
                                   "cannot write a traced array into it; register it with an array first")
            try:
                tracer.state(old)._assign(value, f"{type(self).__name__}.{name} = ...")
            except ValueError as exc:
                raise ValueError(f"{type(self).__name__}.{name} = ...: a traced method writes the new value "
                                 f"into the module's array, which must keep its shape {old.shape} and dtype "
                                 f"{old.dtype}: {exc}") from None
            return
        table[name] = None if value is None else np.asarray(value)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: state lives in the three tables.
        if name.startswith("__") or name in ("_parameters", "_buffers", "_modules"):
            raise AttributeError(name)
        params, buffers, modules = self._state_dicts()
        for table in (params, buffers):
            if name in table:
                value = table[name]
                tracer = current_tracer()
                # While a method of this module is traced, state reads become graph inputs.
                return value if tracer is None or value is None else tracer.state(value)
        if name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in self._state_dicts():
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, array: Any) -> None:
        """Add non-learnable state (running statistics, masks) that is saved and traced like a parameter."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"buffer name must be an identifier, got {name!r}")
        params, buffers, modules = self._state_dicts()
        if name in params or name in modules:
            raise KeyError(f"attribute {name!r} already exists as a parameter or submodule")
        self.__dict__.pop(name, None)
        buffers[name] = None if array is None else np.asarray(array)

    # -- calling -------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses define it, and calling the module calls it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def train(self, mode: bool = True) -> Module:
        """Set training mode on this module and every submodule; returns self."""
        object.__setattr__(self, "training", bool(mode))
        for child in self.children():
            child.train(mode)
        return self

    def eval(self) -> Module:
        """``train(False)``: evaluation mode (dropout off), the usual mode to trace in; returns self."""
        return self.train(False)

    # -- traversal -----------------------------------------------------------------------------
    def children(self) -> Iterator[Module]:
        """The direct submodules, in assignment order."""
        yield from (m for m in self._state_dicts()[2].values() if m is not None)

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and all submodules, depth first; a module reachable twice is listed once."""
        seen: set[int] = set()

        def walk(module: Module, path: str) -> Iterator[tuple[str, Module]]:
            if id(module) in seen:
                return
            seen.add(id(module))
            yield path, module
            for name, child in module._state_dicts()[2].items():
                if child is not None:
                    yield from walk(child, f"{path}.{name}" if path else name)

        yield from walk(self, prefix)

    def _named_state(self, table: int, remove_duplicate: bool) -> Iterator[tuple[str, np.ndarray]]:
        seen: set[int] = set()
        for path, module in self.named_modules():
            for name, array in module._state_dicts()[table].items():
                if array is None or (remove_duplicate and id(array) in seen):
                    continue
                seen.add(id(array))
                yield (f"{path}.{name}" if path else name), array

    def named_parameters(self, remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)``; a tied parameter is listed once, under its first name."""
        # Table 0 holds only what ``__setattr__`` registered as a Parameter.
        return ((name, cast(Parameter, p)) for name, p in self._named_state(0, remove_duplicate))

    def parameters(self) -> Iterator[Parameter]:
        """Every parameter of this module and its submodules (tied ones once)."""
        return (p for _, p in self.named_parameters())

    def named_buffers(self, remove_duplicate: bool = True) -> Iterator[tuple[str, np.ndarray]]:
        """``(dotted name, buffer)``; a shared buffer is listed once unless ``remove_duplicate`` is False."""
        return self._named_state(1, remove_duplicate)

    def state_dict(self) -> OrderedDict[str, np.ndarray]:
        """Every parameter and buffer by dotted name (tied state under each of its names)."""
        out: OrderedDict[str, np.ndarray] = OrderedDict()
        out.update(self._named_state(0, remove_duplicate=False))
        out.update(self._named_state(1, remove_duplicate=False))
        return out

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Copy arrays into the existing state in place (tied state stays tied); shapes must match.

        With ``strict`` a missing or unexpected key is a ``KeyError`` listing them.
        """
        owners = {}
        for path, module in self.named_modules():
            params, buffers, _ = module._state_dicts()
            for table in (params, buffers):
                for name in table:
                    owners[f"{path}.{name}" if path else name] = (table, name)
        check_state_keys(owners, state, strict)
        for key, value in state.items():
            if key not in owners:
                continue
            table, name = owners[key]
            current = table[name]
            if current is None:
                table[name] = np.array(value, copy=True)
            else:
                np.copyto(current, checked_state_value(key, current, value))

    def extra_repr(self) -> str:
        """The arguments shown inside ``repr(module)``'s parentheses; layers override it."""
        return ""

    def __repr__(self) -> str:
        children = [(n, c) for n, c in self._state_dicts()[2].items() if c is not None]
        if not children:
            return f"{type(self).__name__}({self.extra_repr()})"
        body = "\n".join(f"  ({name}): " + repr(child).replace("\n", "\n  ") for name, child in children)
        return f"{type(self).__name__}({self.extra_repr()}\n{body}\n)"


@contextmanager
def state_kept(mod: Module) -> Iterator[None]:
    """Run a block, then put ``mod`` and its submodules back as they were: which arrays are their
    parameters, buffers, submodules and attributes (``self.mean = ...`` rebinds a buffer), and those
    arrays' contents (in place: traces hold these arrays)."""
    modules = [m for _, m in mod.named_modules()]
    attributes = [(m.__dict__, dict(m.__dict__)) for m in modules]
    tables = [(table, dict(table)) for m in modules for table in m._state_dicts()]
    values = [(a, np.array(a, copy=True)) for a in mod.state_dict().values()
              if issubclass(type(a), np.ndarray)]
    try:
        yield
    finally:
        for table, saved in [*attributes, *tables]:
            table.clear()
            table.update(saved)
        for array, value in values:
            np.copyto(array, value)


def check_state_keys(expected: Mapping[str, Any], state: Mapping[str, Any], strict: bool) -> None:
    """Raise ``KeyError`` listing missing/unexpected keys of a state dict (only with ``strict``)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"load_state_dict expects a mapping of name -> array, got {type(state).__name__}")
    if not strict:
        return
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        raise KeyError(f"state dict does not match: missing keys {missing}, unexpected keys {unexpected}")


def checked_state_value(key: str, current: np.ndarray, value: Any) -> np.ndarray:
    """``value`` as an array fit to replace state entry ``key``: same shape, dtype castable."""
    array = np.asarray(value)
    if array.shape != current.shape:
        raise ValueError(f"state {key!r}: expected shape {current.shape}, got {array.shape}")
    if not np.can_cast(array.dtype, current.dtype, casting="same_kind"):
        raise TypeError(f"state {key!r}: cannot cast {array.dtype} to {current.dtype}")
    return array
