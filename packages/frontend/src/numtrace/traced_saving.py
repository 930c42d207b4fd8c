"""Persistence of a traced function: ``save``/``to_bytes`` write the graph, the call structure, the
state and the backend name (numtrace.trace_format); ``from_bytes`` and pickling read them back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numtrace_ir import FormatError

from . import saving, trace_format

if TYPE_CHECKING:
    from .traced import TracedFunction

__all__ = ["Persistence"]


class Persistence:
    """The saving part of `numtrace.TracedFunction` (a mixin)."""

    __name__: str
    backend: str
    state_names: tuple[str, ...]
    _state: Sequence[np.ndarray]

    def save(self, path: Any) -> None:
        """Write the trace (graph, call structure, state, backend name) to ``path`` or a binary file
        object; see ``numtrace.load``.

        Args:
            path: a file path or a binary file object open for writing.

        Examples:
            ```python
            import io

            import numpy as np
            import numtrace as nt

            def f(x):
                return x * 2

            buffer = io.BytesIO()
            nt.trace(f, (np.ones(3),)).save(buffer)
            assert np.allclose(nt.load(io.BytesIO(buffer.getvalue()))(np.ones(3)), 2.0)
            ```
        """
        saving.write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The saved form of this trace (what ``save`` writes; also how it pickles). A traced module's
        method carries the state it reads; saved with it, it loads on its own."""
        arrays = {name: np.asarray(a) for name, a in zip(self.state_names, self._state)}
        return trace_format.dumps({"forward": self}, arrays, name=self.__name__, backend=self.backend,
                                  module=None)

    @classmethod
    def from_bytes(cls, data: bytes, backend: str | None = None, where: str = "<bytes>") -> TracedFunction:
        """The traced function saved as ``data`` (``to_bytes``); ``backend`` defaults to the saved one."""
        return cls._from_saved(trace_format.loads(data, backend, where), where)

    @classmethod
    def _from_saved(cls, saved: trace_format.Saved, where: str) -> TracedFunction:
        if saved.meta.get("module") is not None:
            raise FormatError(f"{where} holds a traced module, not a function; load it with numtrace.load")
        with trace_format.malformed_as_format_error(where):
            methods = {name: cls._saved_method(name, saved.meta["name"], info, saved, saved.arrays)
                       for name, info in saved.meta["methods"].items()}
            return methods["forward"]

    @classmethod
    def _saved_method(cls, method: str, name: str, info: dict, saved: trace_format.Saved,
                      state: Any) -> TracedFunction:
        """Saved method ``method`` named ``name``, its state arrays looked up by name in ``state``."""
        graph = saved.graphs[method]
        fields = trace_format.method_fields(method, info, graph)
        make: Any = cls   # TracedFunction, which this class is a part of
        return make(graph, name=name, backend=saved.backend,
                    state=[state[n] for n in fields["state_names"]], **fields)

    def __reduce__(self) -> tuple:
        # Pickled (and deep-copied) as the saved form: no lock or compiled code is pickled.
        return (type(self).from_bytes, (self.to_bytes(), self.backend))
