"""The warning and error types the tracer reports to users."""

from __future__ import annotations


class TracerWarning(Warning):
    """Something the tracer recorded may not generalize to other inputs.

    Raised for conversions that leave the graph (``bool(x)``, ``x.item()``, ...),
    NumPy functions recorded as constants, list outputs, and checker mismatches.
    """


class TracingCheckError(Exception):
    """The checker found that re-tracing or re-running gave a different result.

    ``graph_diff`` and ``constant_diff`` hold the two diagnostic sections (or None);
    the message carries both, plus ``extra`` when a run raised.
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
