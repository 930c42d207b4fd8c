"""Saved traces as files: the bytes of ``to_bytes`` written to, and read from, a path or a binary file
object. What the bytes hold is ``trace_format``'s (and the traced classes') business."""

from __future__ import annotations

import os
from typing import IO


def write_bytes(target: str | os.PathLike | IO[bytes], data: bytes) -> None:
    """Write ``data`` to the path or binary file object ``target``."""
    if hasattr(target, "write"):
        target.write(data)
        return
    with open(target, "wb") as f:
        f.write(data)


def read_bytes(source: str | os.PathLike | IO[bytes]) -> tuple[bytes, str]:
    """The content of the path or binary file object ``source``, and how messages name it."""
    if hasattr(source, "read"):
        return source.read(), repr(getattr(source, "name", "<file object>"))
    with open(source, "rb") as f:
        return f.read(), repr(os.fspath(source))
