"""Finding the user's source line: for node locations and for warnings.

A frame is *internal* when its file lies in numtrace's own machinery (this package or the IR's op
rules, which read traced sizes through their protocols), in NumPy or in `copy`;
``numtrace.nn`` and ``numtrace.module`` count as user code, so layers' nodes point
at the layer's line just as a user's own module would.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np
import numtrace_ir

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_USER_VISIBLE = {os.path.join(_PACKAGE_DIR, name) for name in ("nn.py", "module.py")}
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_IR_DIR = os.path.dirname(os.path.abspath(numtrace_ir.__file__)) + os.sep
# copy.copy / copy.deepcopy call TracedArray.__copy__ / __deepcopy__: the user's line is the caller's.
_COPY_FILE = os.path.abspath(copy.__file__)


def _is_internal(filename: str) -> bool:
    if filename.startswith(_PACKAGE_DIR):
        return filename not in _USER_VISIBLE
    return filename.startswith((_NUMPY_DIR, _IR_DIR)) or filename == _COPY_FILE


class _InternalFiles(dict):
    """filename -> `_is_internal(filename)`, remembered: every recorded node walks the stack."""

    def __missing__(self, filename: str) -> bool:
        internal = self[filename] = _is_internal(filename)
        return internal


_INTERNAL = _InternalFiles()


def user_frame() -> FrameType | None:
    """The innermost frame that is not numtrace machinery or NumPy."""
    internal = _INTERNAL
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and internal[frame.f_code.co_filename]:
        frame = frame.f_back
    return frame


def numtrace_called(depth: int = 2) -> bool:
    """Whether the innermost caller outside NumPy (from ``depth`` frames up) is numtrace's machinery
    (an op's eager run, a shape rule) rather than user code: the NumPy functions it runs on plain
    values while tracing must give plain values."""
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("numpy"):
            return name.startswith("numtrace") and name not in _USER_MODULES
        frame = frame.f_back
    return False


_USER_MODULES = {"numtrace.nn", "numtrace.module"}


def user_location() -> str | None:
    """``"file:line"`` of the user's code that triggered the current operation."""
    frame = user_frame()
    if frame is None:
        return None
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def warn_at_user_line(message: str, category: type[Warning]) -> None:
    """Issue ``message`` attributed to the user's source line, not to numtrace."""
    frame = user_frame()
    if frame is None:
        warnings.warn(message, category, stacklevel=2)
        return
    module_globals = frame.f_globals
    registry = module_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        message, category, frame.f_code.co_filename, frame.f_lineno,
        module=module_globals.get("__name__", "<unknown>"), registry=registry,
    )


def run_at_user_line(name: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, the eager run of a traced op, with NumPy's floating-point warnings
    ("divide by zero encountered in log") issued at the user's source line, as untraced NumPy issues them.

    Each error kind NumPy would warn about is switched to a call of `_report` for the run. NumPy keeps its
    error state in a context variable (so this is safe while other threads trace; ``catch_warnings`` is
    not); the switched state is made once per distinct caller state and then only swapped in and out,
    because building it costs more than the op itself on small arrays.
    """
    if _EXTOBJ is None:  # a NumPy without the context variable: build the state each time
        return _run_in_switched_state(name, func, args, kwargs)
    current = _EXTOBJ.get()
    switched = _SWITCHED.get(current)
    if switched is None:
        switched = _SWITCHED[current] = _switched_state()
        if len(_SWITCHED) > 64:   # states made in a loop (``with np.errstate(...)`` per step)
            _SWITCHED.clear()
            _SWITCHED[current] = switched
    if switched is _UNCHANGED:
        return func(*args, **kwargs)
    previous = getattr(_running, "name", None)
    _running.name = name
    token = _EXTOBJ.set(switched)
    try:
        return func(*args, **kwargs)
    finally:
        _EXTOBJ.reset(token)
        _running.name = previous


def _report(error: str, flag: int) -> None:
    warn_at_user_line(f"{error} encountered in {getattr(_running, 'name', None) or 'a traced op'}",
                      RuntimeWarning)


def _warn_kinds() -> dict[str, Any] | None:
    """The error kinds to switch to `_report`, or None to leave the state alone (nothing warns, or the
    caller routes errors to its own ``errcall``)."""
    settings = np.geterr()
    modes = set(settings.values())
    if "warn" not in modes or modes & {"call", "log"}:
        return None
    return {kind: "call" for kind, how in settings.items() if how == "warn"}


def _switched_state() -> Any:
    kinds = _warn_kinds()
    if kinds is None:
        return _UNCHANGED
    assert _EXTOBJ is not None
    with np.errstate(call=_report, **kinds):
        return _EXTOBJ.get()


def _run_in_switched_state(name: str, func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    kinds = _warn_kinds()
    if kinds is None:
        return func(*args, **kwargs)
    previous = getattr(_running, "name", None)
    _running.name = name
    try:
        with np.errstate(call=_report, **kinds):
            return func(*args, **kwargs)
    finally:
        _running.name = previous


# NumPy's error state (NumPy 2: a context variable holding an opaque object; private, so optional).
_EXTOBJ: Any = getattr(getattr(getattr(np, "_core", None), "_ufunc_config", None), "_extobj_contextvar", None)
_SWITCHED: dict[Any, Any] = {}      # the caller's state -> the same state with warnings switched to calls
_UNCHANGED = object()
_running = threading.local()        # the name of the op being run, for `_report`
