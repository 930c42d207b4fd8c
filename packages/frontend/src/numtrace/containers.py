"""Nested tuples/lists/dicts of arrays: flattening into leaves and rebuilding.

A ``Spec`` describes one nested structure. At trace time the example inputs are
flattened into a spec and leaves; at call time ``Spec.extract`` walks the *call's*
arguments along the same spec (dicts are read by key, so a call may reorder keys or
add extra ones), and ``Spec.build`` turns flat graph outputs back into the traced
function's output structure. Specs round-trip through JSON for saved traces.
"""

from __future__ import annotations

import re
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


class Const(Spec):
    """A Python scalar (or None) frozen into the trace as a constant."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def extract(self, obj, out, where):
        same_nan = obj != obj and self.value != self.value
        if not (type(obj) is type(self.value) and (obj == self.value or same_nan)):
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


class SequenceSpec(Spec):
    """A tuple or list of sub-structures."""

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
        return self.container(child.build(leaves) for child in self.children)

    def to_json(self):
        return {"kind": self.container.__name__, "children": [c.to_json() for c in self.children]}

    def count(self):
        return sum(c.count() for c in self.children)


class DictSpec(Spec):
    """A dict read by key: extra keys in a later call are ignored."""

    __slots__ = ("keys", "children")

    def __init__(self, keys: list, children: list[Spec]):
        self.keys = keys
        self.children = children

    def extract(self, obj, out, where):
        if not isinstance(obj, dict):
            raise TypeError(f"{where}: expected a dict as at trace time, got {type(obj).__name__}")
        for key, child in zip(self.keys, self.children):
            if key not in obj:
                raise KeyError(f"{where}: key {key!r} was present at trace time and is missing now")
            child.extract(obj[key], out, f"{where}[{key!r}]")

    def build(self, leaves):
        return {key: child.build(leaves) for key, child in zip(self.keys, self.children)}

    def to_json(self):
        return {"kind": "dict", "keys": list(self.keys), "children": [c.to_json() for c in self.children]}

    def count(self):
        return sum(c.count() for c in self.children)


def spec_from_json(data: Any) -> Spec:
    """Rebuild a spec saved by ``Spec.to_json``; malformed data raises ``ValueError``."""
    try:
        kind = data["kind"]
        if kind == "leaf":
            return Leaf(int(data["index"]))
        if kind == "const":
            kinds: dict[str, Callable[[Any], Any]] = {"bool": bool, "int": int, "float": float,
                                                     "NoneType": lambda v: None}
            if data["type"] == "complex":
                return Const(complex(*data["value"]))
            return Const(kinds[data["type"]](data["value"]))
        if kind in ("tuple", "list"):
            children = [spec_from_json(c) for c in data["children"]]
            return SequenceSpec(tuple if kind == "tuple" else list, children)
        if kind == "dict":
            keys = data["keys"]
            if not all(isinstance(k, str) for k in keys) or len(keys) != len(data["children"]):
                raise ValueError("dict keys must be strings, one per child")
            return DictSpec(list(keys), [spec_from_json(c) for c in data["children"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed container structure in saved trace: {data!r:.200}") from exc
    raise ValueError(f"malformed container structure in saved trace: unknown kind {kind!r}")


def check_leaves(spec: Spec, count: int, what: str) -> None:
    """``ValueError`` unless the leaves of ``spec`` are exactly positions ``0 .. count-1``, in order."""

    def indices(s: Spec) -> list[int]:
        if isinstance(s, Leaf):
            return [s.index]
        if isinstance(s, (SequenceSpec, DictSpec)):
            return [i for c in s.children for i in indices(c)]
        return []

    found = indices(spec)
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
        return Leaf(len(leaves) - 1)
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
    if isinstance(obj, np.ndarray):
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
    return isinstance(obj, (np.ndarray, np.generic))
