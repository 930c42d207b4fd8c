"""The wording every backend uses to name the node an error comes from and where the user wrote it, so
that a failure reads the same on every backend: ``While executing node np.log (traced at model.py:12):
ValueError: ...``.

A run-time error keeps NumPy's class: it is raised as a subclass of both ``RuntimeError`` and the class
of the error the node's NumPy call raised (``except ValueError`` or ``except np.linalg.LinAlgError`` in
the user's code catches it as it catches NumPy's), with the node named in its message."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["ExecutionIndexError", "execution_error", "location", "traced_at", "while_executing"]


class ExecutionIndexError(RuntimeError, IndexError):
    """An index out of range met while running a node: NumPy's ``IndexError`` (``except IndexError``
    catches it as it catches NumPy's), with the node named as every run-time error is."""


def location(node: Any) -> str:
    """``traced at file:line``, or ``at an unknown location`` for a node without one."""
    return f"traced at {node.loc}" if node.loc else "at an unknown location"


def traced_at(node: Any) -> str:
    """`` (traced at file:line)`` for a node with a source location, else the empty string."""
    return f" ({location(node)})" if node.loc else ""


def while_executing(node: Any) -> str:
    """``While executing node <op> (traced at file:line)``: the prefix of a run-time error."""
    return f"While executing node {node.op}{traced_at(node)}"


# The class raised for each class of error a node raised: a subclass of both (see `_kind_of`).
_KINDS: dict[type, type] = {IndexError: ExecutionIndexError, RuntimeError: RuntimeError}
_KINDS_LOCK = threading.Lock()


def _kind_of(exc_class: type) -> type:
    """A class that is both a RuntimeError and the first of `exc_class`'s classes that is Python's or
    NumPy's public one (``ExecutionValueError``; ``MemoryError`` for NumPy's private ``_ArrayMemoryError``,
    whose constructor takes no message; numtrace's own errors are not re-made), made once per class;
    RuntimeError itself for a class no subclass can join it with (an instance layout conflict)."""
    cls = next(c for c in exc_class.__mro__ if not c.__qualname__.startswith("_") and
               (c.__module__ == "builtins" or c.__module__.split(".")[0] == "numpy"))
    kind = _KINDS.get(cls)
    if kind is None:
        if issubclass(cls, RuntimeError):
            kind = cls
        else:
            doc = (f"NumPy's ``{cls.__name__}`` met while running a node (``except {cls.__name__}`` "
                   "catches it), with the node named as every run-time error is.")
            try:
                kind = type(f"Execution{cls.__name__}", (cls, RuntimeError),
                            {"__module__": __name__, "__doc__": doc})
            except TypeError:
                kind = RuntimeError
        with _KINDS_LOCK:
            kind = _KINDS.setdefault(cls, kind)
    return kind


def execution_error(node: Any, exc: BaseException) -> Exception:
    """The error to raise (``from exc``) when running `node` raised `exc`: a RuntimeError naming the
    node that is also of `exc`'s class (NumPy's ``ValueError``, ``LinAlgError``, ``IndexError``...)."""
    message = f"{while_executing(node)}: {type(exc).__name__}: {exc}"
    kind = _kind_of(type(exc)) if isinstance(exc, Exception) else RuntimeError
    try:
        error = kind(message)
        str(error)
        return error
    except Exception:   # a class whose constructor takes other arguments than a message
        return RuntimeError(message)
