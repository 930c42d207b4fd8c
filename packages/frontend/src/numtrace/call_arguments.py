"""Argument binding of a traced call: the flat argument arrays read from a call's arguments along the
traced structure (`in_spec`), and the checks that explain a call the trace cannot take (count, type,
dtype, rank), run on a signature miss only."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir import CallSpec, Graph, TensorType

from .containers import SequenceSpec, Spec
from .module import Parameter

__all__ = ["CallArguments", "is_plain_array", "signature"]

# An argument's part of the signature key, (dtype, shape): a C-level getter, the key being per call.
signature = operator.attrgetter("dtype", "shape")

# ndarray subclasses whose operations are ndarray's, so that the graph computes what NumPy would on them;
# and what a subclass may define without changing them. Others (np.matrix's ``*``, masked arrays'
# masks, a user's overridden operators) are refused.
_PLAIN_SUBCLASSES = (np.memmap, Parameter)
_INERT = frozenset({"__new__", "__init__", "__array_finalize__", "__doc__", "__module__", "__dict__",
                    "__weakref__", "__slots__", "__annotations__", "__init_subclass__", "__class_getitem__",
                    "__reduce__", "__reduce_ex__", "__setstate__", "__repr__", "__str__"})


_PLAIN: dict[type, bool] = {}


def _plain_subclass(cls: type) -> bool:
    """Whether ndarray subclass `cls` keeps every ndarray operation (defines none of ndarray's names)."""
    plain = _PLAIN.get(cls)
    if plain is None:
        ours = set(dir(np.ndarray)) - _INERT
        plain = _PLAIN[cls] = issubclass(cls, _PLAIN_SUBCLASSES) or not any(
            ours.intersection(vars(k)) for k in cls.__mro__[:cls.__mro__.index(np.ndarray)])
    return plain


def is_plain_array(a: Any) -> bool:
    """Whether a call may take `a` as it is: exactly an ndarray (the check every general call makes)."""
    return type(a) is np.ndarray


class CallArguments:
    """The argument part of `numtrace.TracedFunction` (a mixin): binding and validating arguments."""

    __name__: str
    graph: Graph
    arg_names: tuple[str, ...]
    in_spec: Spec
    call_spec: CallSpec

    def _converted(self, leaves: Sequence[Any]) -> list[Any]:
        """Arguments that are not exactly arrays: ndarray subclasses whose operations are ndarray's as
        they are, NumPy scalars as 0-d arrays (unless written into: NumPy cannot write into one, the
        write-back refuses it), anything else an error."""
        converted: list[Any] = []
        written = self.call_spec.written
        for i, a in enumerate(leaves):
            if isinstance(a, np.ndarray):
                if type(a) is not np.ndarray and not _plain_subclass(type(a)):
                    raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} is a "
                                    f"{type(a).__name__}, an ndarray subclass whose operations may differ "
                                    "from the traced NumPy ones; pass np.asarray() of it")
                converted.append(a)
            elif isinstance(a, np.generic):
                converted.append(a if i in written else np.asarray(a))
            else:
                raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} must be a NumPy array "
                                f"(as at trace time), got {type(a).__name__}")
        return converted

    def _gather(self, args: tuple, kwargs: dict) -> list:
        """The flat argument arrays of a call with keywords or containers, read along ``in_spec``."""
        names = self.arg_names
        if len(args) > len(names):
            raise TypeError(f"{self.__name__}() takes {len(names)} argument(s) ({', '.join(names)}) "
                            "as traced, "
                            f"got {len(args)}")
        # Unexpected and repeated keywords first: they explain a "missing" argument (a misspelled name).
        extra = set(kwargs) - set(names[len(args):])
        if extra:
            raise TypeError(f"{self.__name__}() got unexpected or repeated keyword argument(s) "
                            f"{', '.join(sorted(map(repr, extra)))}; traced with {', '.join(names)}")
        bound = list(args)
        for name in names[len(args):]:
            if name not in kwargs:
                raise TypeError(f"{self.__name__}() missing argument {name!r} "
                                f"(traced with {', '.join(names)})")
            bound.append(kwargs[name])
        leaves: list = []
        assert isinstance(self.in_spec, SequenceSpec)  # the arguments' structure is always their tuple
        for name, spec, value in zip(names, self.in_spec.children, bound):
            spec.extract(value, leaves, f"argument {name!r}")
        return leaves

    def _leaf_name(self, i: int) -> str:
        name = self.graph.inputs[i].name
        return repr(name) if name else f"#{i}"

    def _check_leaf(self, i: int, a: np.ndarray, declared: Any) -> TensorType:
        what = f"{self.__name__}(): argument {self._leaf_name(i)}"
        if not a.dtype.isnative:
            raise TypeError(f"{what} has non-native byte order ({a.dtype.str}); convert it with "
                            "a.astype(a.dtype.newbyteorder('='))")
        if a.dtype != declared.dtype:
            raise TypeError(f"{what} has dtype {a.dtype}, but the function was traced with {declared.dtype}; "
                            "trace again for another dtype")
        if a.ndim != declared.ndim:
            raise ValueError(f"{what} has {a.ndim} dimension(s) (shape {a.shape}), but the function was "
                             "traced "
                             f"with {declared.ndim} ({declared}); trace again for another rank")
        return TensorType(a.dtype, a.shape)

