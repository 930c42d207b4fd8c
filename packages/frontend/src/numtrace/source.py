"""Finding the user's source line: for node locations and for warnings.

A frame is *internal* when its file lies in numtrace's own machinery, in NumPy or in `copy`;
``numtrace.nn`` and ``numtrace.module`` count as user code, so layers' nodes point
at the layer's line just as a user's own module would.
"""

from __future__ import annotations

import copy
import os
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_USER_VISIBLE = {os.path.join(_PACKAGE_DIR, name) for name in ("nn.py", "module.py")}
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
# copy.copy / copy.deepcopy call TracedArray.__copy__ / __deepcopy__: the user's line is the caller's.
_COPY_FILE = os.path.abspath(copy.__file__)


def _is_internal(filename: str) -> bool:
    if filename.startswith(_PACKAGE_DIR):
        return filename not in _USER_VISIBLE
    return filename.startswith(_NUMPY_DIR) or filename == _COPY_FILE


def user_frame() -> FrameType | None:
    """The innermost frame that is not numtrace machinery or NumPy."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


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

    ``np.errstate`` is context-local, so this is safe while other threads trace (``catch_warnings`` is not).
    """
    settings = np.geterr()
    modes = set(settings.values())
    if "warn" not in modes or modes & {"call", "log"}:  # those use the user's own errcall: leave it
        return func(*args, **kwargs)

    def report(error: str, flag: int) -> None:
        warn_at_user_line(f"{error} encountered in {name}", RuntimeWarning)

    calls: dict[str, Any] = {kind: "call" for kind, how in settings.items() if how == "warn"}
    with np.errstate(call=report, **calls):
        return func(*args, **kwargs)
