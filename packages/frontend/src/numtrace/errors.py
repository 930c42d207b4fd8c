"""The warning and error types the tracer reports to users."""

from __future__ import annotations


class TracerWarning(Warning):
    """Something the tracer recorded may not generalize to other inputs.

    Issued at the user's source line for conversions that leave the graph (``bool(x)``,
    ``x.item()``, ...), NumPy functions recorded as constants, list outputs, re-traces for new
    shapes, writes through untracked views, and checker mismatches. It is a ``Warning``, so the
    ``warnings`` module filters it or makes it an error.

    Examples:
        ```python
        import warnings

        import numpy as np
        import numtrace as nt

        def f(x):
            return x * float(x.max())       # the maximum is frozen into the trace

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            nt.trace(f, (np.ones(3),))
        assert any(issubclass(w.category, nt.TracerWarning) for w in caught)
        ```
    """


class TracingCheckError(Exception):
    """The checker found that re-tracing or re-running gave a different result.

    ``graph_diff`` and ``constant_diff`` hold the two diagnostic sections (or None);
    the message carries both, plus ``extra`` when a run raised. Raised by ``trace`` and
    ``trace_module`` while checking (``check_trace=True``).

    Attributes:
        graph_diff (str | None): the line diff of the two graphs, the first diverging node and both
            source locations.
        constant_diff (str | None): the array constants that differ in value between the two traces.
    """

    def __init__(self, graph_diff: str | None, constant_diff: str | None, extra: str | None = None):
        self.graph_diff = graph_diff
        self.constant_diff = constant_diff
        parts = ["Tracing failed sanity checks!"]
        if extra is not None:
            parts.append(extra)
        if graph_diff is not None:
            parts.append("ERROR: Graphs differed across invocations!")
            parts.append(indent(graph_diff))
        if constant_diff is not None:
            parts.append(
                "ERROR: Constant nodes differed in value across invocations. This often indicates "
                "that the tracer has encountered untraceable code."
            )
            parts.append(indent(constant_diff))
        super().__init__("\n".join(parts))


def indent(text: str, prefix: str = "\t") -> str:
    return "".join(prefix + line for line in text.splitlines(True))
