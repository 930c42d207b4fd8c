"""Nested tuples/lists/dicts of arrays: flattening into leaves and rebuilding.

A ``Spec`` describes one nested structure. At trace time the example inputs are
flattened into a spec and leaves; at call time ``Spec.extract`` walks the *call's*
arguments along the same spec, and ``Spec.build`` turns flat graph outputs back into the traced
function's output structure. Specs round-trip through JSON for saved traces.

A dict argument is read by key, so a call may reorder its keys or add extra ones, unless the traced
function read the dict's structure (iterated it, took its length, looked up a key it lacks): the
function then sees a `TrackedDict`, its spec becomes ``exact`` and a call must pass the same keys in
the same order. A traced function may not change its list and dict arguments (assign or add an
item): the trace could not replay that change into the caller's containers, so it is refused at
trace time (`changed_item`).
"""

from __future__ import annotations

import importlib
import re
import struct
from collections.abc import Callable
from typing import Any, TypeGuard

import numpy as np

_SCALARS = (bool, int, float, complex)


class Spec:
    """One node of a nested structure; subclasses say which container it is."""

    __slots__ = ()

    def extract(self, obj: Any, out: list, where: str) -> None:
        raise NotImplementedError

    def build(self, leaves) -> Any:
        raise NotImplementedError

    def to_json(self) -> Any:
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError


class Leaf(Spec):
    """An array position; ``index`` is its place among the flat leaves."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def extract(self, obj, out, where):
        out.append(obj)

    def build(self, leaves):
        return leaves[self.index]

    def to_json(self):
        return {"kind": "leaf", "index": self.index}

    def count(self):
        return 1


class ScalarLeaf(Leaf):
    """A result NumPy gives as a scalar (``x[0]``, ``x.sum()``, ``np.unstack`` of a 1-D array): the call
    returns the NumPy scalar of its 0-d array (``np.float64``), as NumPy does, not the array. As an
    argument, a NumPy scalar traced as one (a call must pass a NumPy scalar there, see `scalar_leaves`)."""

    __slots__ = ()

    def build(self, leaves):
        leaf = leaves[self.index]
        return leaf[()] if type(leaf) is np.ndarray else leaf   # (a traced array when inlined)

    def to_json(self):
        return {"kind": "scalar", "index": self.index}


class Const(Spec):
    """A Python scalar (or None) frozen into the trace as a constant."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def extract(self, obj, out, where):
        if not same_scalar(obj, self.value):
            raise ValueError(
                f"{where} was frozen into the trace as the constant {self.value!r}; got {obj!r}. "
                "Python scalars are constants of a trace: trace again to use another value"
            )

    def build(self, leaves):
        return self.value

    def to_json(self):
        value = self.value
        if isinstance(value, complex):
            return {"kind": "const", "type": "complex", "value": [value.real, value.imag]}
        return {"kind": "const", "type": type(value).__name__, "value": value}

    def count(self):
        return 0


def same_scalar(a: Any, b: Any) -> bool:
    """Whether Python scalars ``a`` and ``b`` make the same constant: the same type (1, 1.0 and True
    differ) and the same bits (0.0 and -0.0 differ, as do NaNs of another sign or payload)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    if type(a) is complex:
        return struct.pack("<dd", a.real, a.imag) == struct.pack("<dd", b.real, b.imag)
    return bool(a == b)


class SequenceSpec(Spec):
    """A tuple or list of sub-structures; ``container`` may be one of NumPy's namedtuples (an output
    such as ``np.linalg.eigh``'s ``EighResult``), rebuilt as that type."""

    __slots__ = ("container", "children")

    def __init__(self, container: type, children: list[Spec]):
        self.container = container
        self.children = children

    def extract(self, obj, out, where):
        if is_frozen_list(self):
            # Python numbers are not inputs: a call must pass the very values the trace froze.
            if not _same_data(self, obj):
                raise ValueError(_frozen_list_error(where, self, obj))
            return
        if not isinstance(obj, (tuple, list)):
            raise TypeError(f"{where}: expected a {self.container.__name__} of {len(self.children)} "
                            f"items as at trace time, got {type(obj).__name__}")
        if len(obj) != len(self.children):
            raise TypeError(f"{where}: expected {len(self.children)} items as at trace time, got {len(obj)}")
        for i, (child, item) in enumerate(zip(self.children, obj)):
            child.extract(item, out, f"{where}[{i}]")

    def build(self, leaves):
        items = (child.build(leaves) for child in self.children)
        return self.container(*items) if hasattr(self.container, "_fields") else self.container(items)

    def to_json(self):
        children = [c.to_json() for c in self.children]
        if hasattr(self.container, "_fields"):
            name = f"{self.container.__module__}:{self.container.__qualname__}"
            return {"kind": "namedtuple", "type": name, "children": children}
        return {"kind": self.container.__name__, "children": children}

    def count(self):
        return sum(c.count() for c in self.children)


class DictSpec(Spec):
    """A dict read by key: extra keys in a later call are ignored, unless ``exact`` (the traced function
    read the dict's structure), where the keys must be those traced, in the traced order."""

    __slots__ = ("keys", "children", "exact")

    def __init__(self, keys: list, children: list[Spec], exact: bool = False):
        self.keys = keys
        self.children = children
        self.exact = exact

    def extract(self, obj, out, where):
        if not isinstance(obj, dict):
            raise TypeError(f"{where}: expected a dict as at trace time, got {type(obj).__name__}")
        if self.exact and list(obj) != self.keys:
            raise ValueError(
                f"{where}: the traced function reads this dict's structure (it iterates it, takes its "
                f"length or looks up a key it lacks), so the trace holds only for the keys {self.keys} in "
                f"this order; got {list(obj)}. Trace again for another structure")
        for key, child in zip(self.keys, self.children):
            if key not in obj:
                raise KeyError(f"{where}: key {key!r} was present at trace time and is missing now")
            child.extract(obj[key], out, f"{where}[{key!r}]")

    def build(self, leaves):
        return {key: child.build(leaves) for key, child in zip(self.keys, self.children)}

    def to_json(self):
        data = {"kind": "dict", "keys": list(self.keys), "children": [c.to_json() for c in self.children]}
        return {**data, "exact": True} if self.exact else data

    def count(self):
        return sum(c.count() for c in self.children)


def numpy_namedtuple(name: str, size: int) -> type:
    """NumPy's namedtuple type saved as ``module:qualname`` (only NumPy's: loading imports no other
    module), checked to have ``size`` fields."""
    module, _, qualname = name.partition(":")
    if module != "numpy" and not module.startswith("numpy."):
        raise ValueError(f"{name!r} is not one of NumPy's namedtuples")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    fields = getattr(found, "_fields", ())
    if not (isinstance(found, type) and issubclass(found, tuple) and len(fields) == size):
        raise ValueError(f"{name!r} is not a namedtuple of {size} fields")
    return found


def scalar_leaves(spec: Spec) -> tuple[bool, ...]:
    """Per flat leaf of argument structure `spec`, whether it was a NumPy scalar (`ScalarLeaf`)."""
    found: dict[int, bool] = {}

    def walk(node: Spec) -> None:
        if isinstance(node, Leaf):
            found[node.index] = isinstance(node, ScalarLeaf)
        for child in getattr(node, "children", ()):
            walk(child)

    walk(spec)
    return tuple(found[i] for i in range(len(found)))


def spec_from_json(data: Any) -> Spec:
    """Rebuild a spec saved by ``Spec.to_json``; malformed data raises ``ValueError``."""
    try:
        kind = data["kind"]
        if kind == "leaf":
            return Leaf(int(data["index"]))
        if kind == "scalar":
            return ScalarLeaf(int(data["index"]))
        if kind == "const":
            kinds: dict[str, Callable[[Any], Any]] = {"bool": bool, "int": int, "float": float,
                                                     "NoneType": lambda v: None}
            if data["type"] == "complex":
                return Const(complex(*data["value"]))
            return Const(kinds[data["type"]](data["value"]))
        if kind in ("tuple", "list"):
            children = [spec_from_json(c) for c in data["children"]]
            return SequenceSpec(tuple if kind == "tuple" else list, children)
        if kind == "namedtuple":
            children = [spec_from_json(c) for c in data["children"]]
            return SequenceSpec(numpy_namedtuple(data["type"], len(children)), children)
        if kind == "dict":
            keys = data["keys"]
            if not all(isinstance(k, str) for k in keys) or len(keys) != len(data["children"]):
                raise ValueError("dict keys must be strings, one per child")
            exact = data.get("exact", False)
            if type(exact) is not bool:
                raise ValueError("a dict's exact flag must be a bool")
            return DictSpec(list(keys), [spec_from_json(c) for c in data["children"]], exact)
    except (KeyError, TypeError, ValueError, ImportError, AttributeError) as exc:
        raise ValueError(f"malformed container structure in saved trace: {data!r:.200}") from exc
    raise ValueError(f"malformed container structure in saved trace: unknown kind {kind!r}")


class TrackedDict(dict):
    """A dict argument as the traced function sees it: any read of its structure (iteration, length,
    membership of a missing key, comparison, copying) makes its spec ``exact``."""

    __slots__ = ("_spec",)

    def __init__(self, spec: DictSpec, items: Any):
        super().__init__(items)
        self._spec: DictSpec | None = spec

    def _structure_read(self) -> None:
        if self._spec is not None:  # None once the trace is recorded: later reads change nothing
            self._spec.exact = True

    def __contains__(self, key: Any) -> bool:
        found = dict.__contains__(self, key)
        if not found:
            self._structure_read()
        return found

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default


def _reading_structure(name: str) -> Callable:
    method = getattr(dict, name)

    def read(self: TrackedDict, *args: Any, **kwargs: Any) -> Any:
        self._structure_read()
        return method(self, *args, **kwargs)

    read.__name__ = name
    return read


for _name in ("__iter__", "__len__", "__reversed__", "__eq__", "__ne__", "__repr__", "__or__", "__ror__",
              "keys", "values", "items", "copy", "__reduce_ex__"):
    setattr(TrackedDict, _name, _reading_structure(_name))
TrackedDict.__hash__ = None


def build_tracked(spec: Spec, leaves: list) -> Any:
    """``spec.build(leaves)`` for the traced function's arguments: dicts are `TrackedDict` objects."""
    if isinstance(spec, DictSpec):
        return TrackedDict(spec, ((k, build_tracked(c, leaves)) for k, c in zip(spec.keys, spec.children)))
    if isinstance(spec, SequenceSpec):
        return spec.container(build_tracked(c, leaves) for c in spec.children)
    return spec.build(leaves)


def snapshot(spec: Spec, obj: Any) -> tuple:
    """``(obj, its items' snapshots)``: what `changed_item` compares an argument with after the call."""
    if isinstance(spec, DictSpec):
        return obj, [snapshot(c, dict.__getitem__(obj, k)) for k, c in zip(spec.keys, spec.children)]
    if isinstance(spec, SequenceSpec):
        return obj, [snapshot(c, item) for c, item in zip(spec.children, obj)]
    return obj, []


def release(snap: tuple) -> None:
    """Detach the `TrackedDict` objects of an argument's `snapshot` from their specs (the trace is
    recorded: a function that kept the dict and reads it later does not change the trace)."""
    obj, children = snap
    if isinstance(obj, TrackedDict):
        obj._spec = None
    for child in children:
        release(child)


def changed_item(spec: Spec, snap: tuple, where: str) -> str | None:
    """Where the traced function changed an argument (taken as `snapshot` ``snap`` before the call) in
    place: the first list or dict whose items are no longer those it was called with; None if none."""
    obj, children = snap
    if isinstance(spec, DictSpec):
        if list(dict.keys(obj)) != spec.keys:
            return where
        items = [(dict.__getitem__(obj, k), f"{where}[{k!r}]") for k in spec.keys]
    elif isinstance(spec, SequenceSpec):
        if len(obj) != len(spec.children):
            return where
        items = [(item, f"{where}[{i}]") for i, item in enumerate(obj)]
    else:
        return None
    for child, (item, at), before in zip(spec.children, items, children):
        if item is not before[0] and not (isinstance(child, Const) and same_scalar(item, child.value)):
            return at
        found = changed_item(child, before, at)
        if found is not None:
            return found
    return None


def leaf_names(spec: Spec, where: str, out: list) -> list:
    """The names ``flatten`` gives the leaves of ``spec`` flattened at ``where``, appended to ``out``."""
    if isinstance(spec, Leaf):
        out.append(_identifier(where))
    elif isinstance(spec, SequenceSpec):
        for i, child in enumerate(spec.children):
            leaf_names(child, f"{where}[{i}]", out)
    elif isinstance(spec, DictSpec):
        for key, child in zip(spec.keys, spec.children):
            leaf_names(child, f"{where}[{key!r}]", out)
    return out


def check_leaves(spec: Spec, count: int, what: str, repeats: bool = False) -> None:
    """``ValueError`` unless the leaves of ``spec`` are exactly positions ``0 .. count-1``, in order;
    with `repeats` (an output structure holding one array twice), their first occurrences are."""

    def indices(s: Spec) -> list[int]:
        if isinstance(s, Leaf):
            return [s.index]
        if isinstance(s, (SequenceSpec, DictSpec)):
            return [i for c in s.children for i in indices(c)]
        return []

    found = indices(spec)
    if repeats:
        found = list(dict.fromkeys(found))
    if found != list(range(count)):
        raise ValueError(f"{what}: the structure's array positions {found} do not match {count} graph values")


def flatten(obj: Any, is_leaf: Callable[[Any], bool], where: str, leaves: list,
            names: list | None = None, allow_scalars: bool = True) -> Spec:
    """Flatten ``obj`` into ``leaves`` (appending) and return its spec.

    ``names`` receives one identifier-like name per leaf, derived from ``where``.
    Anything that is neither a leaf, a container, nor (when allowed) a Python
    scalar raises ``TypeError`` naming its position.
    """
    if is_leaf(obj):
        leaves.append(obj)
        if names is not None:
            names.append(_identifier(where))
        # A NumPy scalar stays one: its operators run NumPy's scalar math, not a 0-d array's ufuncs.
        return (ScalarLeaf if isinstance(obj, np.generic) else Leaf)(len(leaves) - 1)
    if isinstance(obj, (tuple, list)):
        container = tuple if isinstance(obj, tuple) else list
        return SequenceSpec(container, [flatten(item, is_leaf, f"{where}[{i}]", leaves, names, allow_scalars)
                                     for i, item in enumerate(obj)])
    if isinstance(obj, dict):
        keys = list(obj)
        for key in keys:
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be strings, got {key!r}")
        return DictSpec(keys, [flatten(obj[k], is_leaf, f"{where}[{k!r}]", leaves, names, allow_scalars)
                            for k in keys])
    if allow_scalars and (obj is None or isinstance(obj, _SCALARS)):
        return Const(obj)
    raise TypeError(f"{where}: expected an array or a (nested) tuple/list/dict of arrays, "
                    f"got {type(obj).__name__}")


def is_frozen_list(spec: Spec) -> TypeGuard[SequenceSpec]:
    """Whether ``spec`` is a non-empty list of Python numbers (nested lists and tuples of them): data that
    a trace records as constants, unlike a list of arrays, which is a structure of inputs."""
    return isinstance(spec, SequenceSpec) and spec.container is list and _numbers_only(spec)


def _numbers_only(spec: Spec) -> bool:
    if isinstance(spec, Const):
        return spec.value is not None
    return isinstance(spec, SequenceSpec) and bool(spec.children) and all(map(_numbers_only, spec.children))


def frozen_lists(spec: Spec, where: str) -> list[tuple[str, SequenceSpec]]:
    """``(position, spec)`` of each list of Python numbers in ``spec``, outermost first."""
    if is_frozen_list(spec):
        return [(where, spec)]
    if isinstance(spec, SequenceSpec):
        return [p for i, c in enumerate(spec.children) for p in frozen_lists(c, f"{where}[{i}]")]
    if isinstance(spec, DictSpec):
        return [p for k, c in zip(spec.keys, spec.children) for p in frozen_lists(c, f"{where}[{k!r}]")]
    return []


def frozen_list_warning(where: str, spec: SequenceSpec) -> str:
    """The trace-time warning for the list of Python numbers ``spec`` passed as ``where``."""
    return (f"{where} is a list of Python numbers, {_shown(spec)}: the trace holds its values as "
            "constants, so a call with other values or another length is refused. Trace with the data as "
            "a NumPy array (or a tuple of arrays) for the trace to take it as an input; pass a tuple to "
            "make it a constant on purpose.")


def _frozen_list_error(where: str, spec: SequenceSpec, obj: Any) -> str:
    return (f"{where}: the list {_shown(spec)} is a constant of the trace, frozen at trace time; this call "
            f"passes {_preview(obj)}. Trace with the data as a NumPy array (or a tuple of arrays), so that "
            "the trace takes it as an input")


def _shown(spec: SequenceSpec) -> str:
    """The frozen list as the message shows it: whole when short, else its start and length."""
    text = repr(spec.build(()))
    return text if len(text) <= 60 else f"{text[:40]}... ({len(spec.children)} items)"


def _preview(obj: Any) -> str:
    """What a call passes instead of the frozen list: ``repr(obj)`` when short, else what it is."""
    if issubclass(type(obj), np.ndarray):
        return f"an array of shape {obj.shape}"
    text = repr(obj)
    if len(text) <= 60:
        return text
    size = f" of {len(obj)} items" if isinstance(obj, (list, tuple)) else ""
    return f"a {type(obj).__name__}{size} {text[:40]}..."


def _same_data(spec: Spec, obj: Any) -> bool:
    """Whether ``obj`` is the frozen list ``spec``: the same containers, lengths and number values."""
    if isinstance(spec, SequenceSpec):
        return (isinstance(obj, (list, tuple)) and len(obj) == len(spec.children)
                and all(_same_data(c, x) for c, x in zip(spec.children, obj)))
    out: list = []
    try:
        spec.extract(obj, out, "")
    except ValueError:
        return False
    return True


def _identifier(where: str) -> str:
    name = re.sub(r"\W+", "_", where).strip("_")
    return name if name and not name[0].isdigit() else f"v_{name}"


def is_array(obj: Any) -> bool:
    return issubclass(type(obj), (np.ndarray, np.generic))
