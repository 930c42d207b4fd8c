"""Argument binding of a traced call: the flat argument arrays read from a call's arguments along the
traced structure (`in_spec`), and the checks that explain a call the trace cannot take (count, type,
dtype, rank), run on a signature miss only, and the layout check of a trace that wrote through a
reshape, run per call."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir import Graph, TensorType

from .containers import SequenceSpec, Spec
from .views import layout_of, layout_text

__all__ = ["CallArguments", "signature"]

# An argument's part of the signature key, (dtype, shape): a C-level getter, the key being per call.
signature = operator.attrgetter("dtype", "shape")


class CallArguments:
    """The argument part of `numtrace.TracedFunction` (a mixin): binding and validating arguments."""

    __name__: str
    graph: Graph
    arg_names: tuple[str, ...]
    in_spec: Spec
    layouts: tuple[Any, ...] | None
    _scalar_args: tuple[bool, ...]

    def _converted(self, leaves: Sequence[Any]) -> list[np.ndarray]:
        """Arguments that are not arrays: NumPy scalars become 0-d arrays, anything else is an error."""
        converted = []
        for i, a in enumerate(leaves):
            if not issubclass(type(a), (np.ndarray, np.generic)):
                raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} must be a NumPy array "
                                f"(as at trace time), got {type(a).__name__}")
            converted.append(np.asarray(a))
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

    def _check_layouts(self, leaves: Sequence[Any]) -> None:
        """Refuse a call whose arguments are laid out otherwise than the traced ones (see `layouts`)."""
        for i, (a, want) in enumerate(zip(leaves, self.layouts or ())):
            got = layout_of(np.asarray(a))
            if got != want:
                raise ValueError(
                    f"{self.__name__}(): argument {self._leaf_name(i)} is {layout_text(got)}, but the "
                    f"function was traced with it {layout_text(want)}; the function writes through a reshape "
                    "(or ravel), which NumPy makes a view or a copy depending on the layout, or reads "
                    "elements in memory order (ravel('K'), order='A'), so the trace "
                    "holds for the traced layouts only: pass an array laid out as traced, or trace again")

    def _check_scalars(self, leaves: Sequence[Any]) -> None:
        """Refuse a NumPy scalar where the trace took a 0-d array, or the reverse: NumPy's operators
        differ on them (``np.float64(-inf) ** 0.5`` is C pow's inf, a 0-d array's np.power gives nan; an
        int scalar's ``+`` warns of overflow; ``s += 1`` writes into an array), and the graph holds the
        traced kind's."""
        for i, (a, scalar) in enumerate(zip(leaves, self._scalar_args)):
            if isinstance(a, np.generic) != scalar:
                kind = a.__class__.__name__   # (a traced array's is the ndarray or scalar type it stands for)
                got = f"the NumPy scalar {kind}" if not scalar else f"a {kind}"
                traced = "a NumPy scalar" if scalar else "an array"
                raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} is {got}, but the "
                                f"function was traced with {traced} there; NumPy's operators differ on "
                                "scalars and 0-d arrays (np.float64(-inf) ** 0.5 is inf, np.array(-inf) ** "
                                "0.5 nan), so pass the kind traced (np.asarray(s) or s[()]), or trace again")

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

