"""What a traced function shows about itself: its guards, its graph as Python source (``code``,
``constants``), what the backend's executables do (``explain``) and their statistics (``stats``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .call_arguments import signature
from .specializations import Specializations

__all__ = ["Inspection"]


class Inspection(Specializations):
    """The inspection part of `numtrace.TracedFunction` (a mixin; ``explain`` compiles what it
    describes through the compile cache of `Specializations`)."""

    backend: str
    state_names: tuple[str, ...]
    cse_merged: int
    _num_leaves: int
    _flat_args: bool

    if TYPE_CHECKING:
        @property
        def returned(self) -> tuple[tuple[int, int], ...]: ...

    @property
    def guards(self) -> list[str]:
        """The guards of the graph: what the trace was specialized on, one line each
        (``x.shape[0] == 5  # model.py:12``).

        A guard is recorded where a size left the graph as a plain Python value (``range(n)``,
        ``len(x)``, a branch on a shape). Empty when the graph follows every size.

        Examples:
            ```python
            import math

            import numpy as np
            import numtrace as nt

            def scaled(x):
                return x.sum(axis=0) / math.sqrt(x.shape[0])    # math.sqrt takes a plain float

            traced = nt.trace(scaled, (np.ones((5, 3)),))
            assert traced.guards[0].startswith("x.shape[0] == 5")
            ```
        """
        from numtrace_ir.guards import guard_text

        return [f"{guard_text(n)} == {n.attrs['expected']!r}" + (f"  # {n.loc}" if n.loc else "")
                for n in self.graph.nodes if n.op == "prim.guard"]

    @property
    def code(self) -> str:
        """Python source of the graph that computes the same (flat) outputs with NumPy.

        Run it with ``np``, ``op`` (``numtrace.codegen.op``) and ``CONSTANTS`` (``.constants``) in scope.
        It shows what was recorded in the language it was written in, with the source line of every
        statement.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt
            from numtrace import codegen

            def f(x):
                return np.exp(x) / np.exp(x).sum()

            traced = nt.trace(f, (np.ones(4),))
            print(traced.code)
            namespace = {"np": np, "op": codegen.op, "CONSTANTS": traced.constants}
            exec(traced.code, namespace)
            assert np.allclose(namespace["f"](np.ones(4)), 0.25)
            ```
        """
        from .codegen import graph_to_python

        return graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names,
                               returned=self.returned)

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """The array constants too large to inline in ``.code``, by the name the code uses.

        These are the arrays ``str(graph)`` abbreviates (more than 16 elements).
        """
        from .codegen import graph_to_python

        constants: dict[str, np.ndarray] = {}
        graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names, constants,
                        self.returned)
        return constants

    def arg_names_flat(self) -> list[str]:
        """The graph's input names of the argument arrays, in flattening order (``.code``'s parameters)."""
        return [v.name or f"arg{i}" for i, v in enumerate(self.graph.inputs[: self._num_leaves])]

    def explain(self, *args: Any, **kwargs: Any) -> str:
        """What the backend's executable does, as text: for the signature of ``args`` when given (it is
        compiled if needed, nothing runs), else for every signature called so far (the traced one
        when none was). The CPU backend lists its steps (fused passes and their nodes, BLAS calls,
        fallbacks and why, buffers), Triton its kernels with their source, the reference its nodes.

        Args:
            *args: arguments of a call, as for calling the trace (only their dtypes and shapes matter).
            **kwargs: arguments by name.

        Returns:
            The description, one section per signature.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt

            def f(x, w):
                return np.maximum(x @ w, 0.0).sum(axis=1)

            traced = nt.trace(f, (np.ones((4, 64)), np.ones((64, 32))))
            report = traced.explain(np.ones((1000, 64)), np.ones((64, 32)))
            assert "BLAS matmul" in report and "fused pass" in report
            print(report)
            ```
        """
        if args or kwargs:
            leaves = self._gather(args, kwargs) if kwargs or not self._flat_args else list(args)
            if len(leaves) != self._num_leaves:
                raise TypeError(f"{self.__name__}() takes {self._num_leaves} array argument(s) "
                                f"({', '.join(self.arg_names)}) as traced, got {len(leaves)}")
            leaves = self._converted(leaves)
            key = tuple(map(signature, leaves))
            entries = [self._cache.get(key) or self._compile(leaves, key)]
        elif self._cache:
            entries = list(dict.fromkeys(self._cache.values()))
        else:
            types = [v.type for v in self.graph.inputs[: self._num_leaves]]
            entries = [(self, self._executable(types))]
        parts = [f"# {self.__name__} on backend {self.backend!r}"]
        for _, executable in entries:
            describe = getattr(executable, "explain", None)
            if describe is None:
                text = (f"backend {self.backend!r} does not describe its executables; its stats: "
                        f"{executable.stats()}\n")
            else:
                text = describe()
            parts.append(text.rstrip("\n"))
        return "\n".join(parts) + "\n"

    def stats(self) -> dict:
        """``retraces``: how many times the function was traced again for shapes that broke a guard;
        ``cse_merged``: how many nodes of the recorded graph were merged into an equal earlier node
        (an expression the code computes twice runs once; `numtrace_ir.passes.cse`);
        ``signatures``: per compiled input signature, the backend's statistics.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt

            traced = nt.trace(np.cumsum, (np.ones(4),))
            traced(np.ones(9))
            assert traced.stats()["retraces"] == 0 and len(traced.stats()["signatures"]) == 2
            ```
        """
        return {"retraces": self.retraces, "cse_merged": self.cse_merged,
                "signatures": {repr(k): exe.stats() for k, (_, exe) in list(self._cache.items())}}
