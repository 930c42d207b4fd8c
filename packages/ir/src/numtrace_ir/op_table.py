"""The op table of `docs/ops.md`, generated from the registry (the docs test checks it is current)."""

from __future__ import annotations

from numtrace_ir.registry import REQUIRED, Attr, Input, Inputs, all_ops
from numtrace_ir.testing import sampled_dtypes

__all__ = ["markdown_table"]


def markdown_table() -> str:
    """The table of ops in `docs/ops.md`: name, kind, inputs, attrs, dtypes sampled, flags."""
    rows = ["| op | kind | inputs | attributes | dtypes tested | notes |", "|---|---|---|---|---|---|"]
    for op in all_ops():
        ins = ", ".join(
            (f"*{p.name}" if isinstance(p, Inputs) else p.name + ("?" if p.optional else ""))
            for p in op.params
            if isinstance(p, (Input, Inputs))
        )
        attrs = ", ".join(
            f"{p.name}" if p.default is REQUIRED else f"{p.name}={p.default!r}"
            for p in op.params
            if isinstance(p, Attr)
        )
        notes = ", ".join(
            n
            for n, on in (
                ("nondeterministic", op.nondeterministic),
                ("data-dependent shape", op.data_dependent_shape),
                ("guard", op.effect),
                (f"{op.view} view", op.view is not None),
                (f"{op.reduction} reduction", op.reduction is not None),
                ("decomposes", op.decompose is not None),
            )
            if on
        )
        dts = " ".join(sampled_dtypes(op))
        rows.append(f"| `{op.name}` | {op.kind} | {ins} | {attrs.replace('|', '&#124;')} | {dts} | {notes} |")
    return "\n".join(rows) + "\n"
