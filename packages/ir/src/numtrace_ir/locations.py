"""Source locations for people: ``"/home/me/proj/model.py:12"`` shown as ``model.py:12``.

Nodes keep the location the tracer recorded (an absolute ``file:line``): saved files, the checker and
error messages use it as is. Only the human-facing text (`str(graph)`, ``traced.code``, drawings)
shortens it, with `display_location`: a file of an installed package as ``package/module.py`` (the
part after ``site-packages/``), a file under the current working directory relative to it, else a
file under a ``sys.path`` folder (an editable install's source folder) relative to that folder.
"""

from __future__ import annotations

import os
import sys

__all__ = ["display_location"]

_INSTALL_DIRS = ("site-packages", "dist-packages")


def display_location(loc: str | None, cwd: str | None = None) -> str | None:
    """`loc` (``"file:line"``) with its file shortened for reading; other strings unchanged."""
    if not loc:
        return loc
    path, sep, line = loc.rpartition(":")
    if not sep or not line.isdigit() or not os.path.isabs(path):
        return loc
    parts = path.replace(os.sep, "/").split("/")
    for k in range(len(parts) - 1, -1, -1):
        if parts[k] in _INSTALL_DIRS and k + 1 < len(parts):
            return "/".join(parts[k + 1:]) + ":" + line
    try:
        base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    except OSError:  # the working directory was removed
        return loc
    if os.path.dirname(base) != base and path.startswith(base.rstrip(os.sep) + os.sep):  # not from "/"
        return os.path.relpath(path, base) + ":" + line
    roots = [p for p in sys.path if p and os.path.isabs(p) and path.startswith(p.rstrip(os.sep) + os.sep)]
    if roots:
        return os.path.relpath(path, max(roots, key=len)) + ":" + line
    return loc
