"""Finding backends: the built-in ``reference`` backend plus entry points in group ``numtrace.backends``.

Each backend class is instantiated once per process and must implement `numtrace_ir.Backend` (its
conformance suite is `numtrace_ir.conformance`). The frontend never imports a
backend package by name; an unknown or unavailable name is an error that lists
what is installed and why the others are unavailable.
"""

from __future__ import annotations

import threading
from importlib import metadata
from typing import Any

from numtrace_ir import Backend

ENTRY_POINT_GROUP = "numtrace.backends"

# The backends numtrace's own distributions provide, by the distribution that installs each: named (not
# imported) so that a missing one can be listed with the command that installs it.
KNOWN_BACKENDS = {"cpu": "numtrace-cpu", "triton": "numtrace-triton"}

_lock = threading.Lock()
_instances: dict[str, Any] = {}


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _load(name: str) -> Any:
    """The backend instance called ``name``; ``LookupError`` when not installed."""
    with _lock:
        if name in _instances:
            return _instances[name]
        if name == "reference":
            from .reference_backend import ReferenceBackend

            backend: Any = ReferenceBackend()
        else:
            entry_points = _entry_points()
            if name not in entry_points:
                raise LookupError(name)
            backend = entry_points[name].load()()
            if not isinstance(backend, Backend):
                raise TypeError(f"entry point {name!r} of {ENTRY_POINT_GROUP!r} made a "
                                f"{type(backend).__name__}, which does not implement numtrace_ir.Backend "
                                "(name, is_available(), compile(graph, input_types))")
        _instances[name] = backend
        return backend


def _probe(name: str) -> tuple[bool, str]:
    try:
        ok, why = _load(name).is_available()
    except Exception as exc:  # a broken plugin must not hide the others
        return False, f"failed to load: {type(exc).__name__}: {exc}"
    return bool(ok), str(why)


def installed_backends() -> dict[str, tuple[bool, str]]:
    """Every installed backend name -> ``(available, why not)``; ``reference`` is always there.

    Examples:
        ```python
        import numtrace as nt

        ok, why = nt.installed_backends()["reference"]
        assert ok and why == ""
        ```
    """
    names = ["reference", *sorted(n for n in _entry_points() if n != "reference")]
    return {name: _probe(name) for name in names}


def backend_report() -> dict[str, tuple[str, str]]:
    """Every known or installed backend name -> ``(state, detail)``: ``"available"`` with the backend's
    ``description``, ``"unavailable"`` with why, or ``"not installed"`` with the command that installs it."""
    report: dict[str, tuple[str, str]] = {}
    for name, (ok, why) in installed_backends().items():
        report[name] = (("available", str(getattr(_load(name), "description", "") or "")) if ok
                        else ("unavailable", why))
    for name, dist in KNOWN_BACKENDS.items():
        report.setdefault(name, ("not installed", f"pip install {dist}"))
    return report


def available_backends() -> list[str]:
    """Names of the backends that load and report themselves available (usable as ``backend=``)."""
    return [name for name, (ok, _) in installed_backends().items() if ok]


def get_backend(name: str) -> Any:
    """The backend instance called ``name``, or a ``ValueError`` listing the installed ones."""
    if not isinstance(name, str):
        raise TypeError(f"backend must be a name (str), got {type(name).__name__}")
    try:
        backend = _load(name)
        ok, why = backend.is_available()
    except LookupError:
        dist = KNOWN_BACKENDS.get(name)
        ok, why, backend = False, f"not installed: pip install {dist}" if dist else "not installed", None
    except Exception as exc:
        ok, why, backend = False, f"failed to load: {type(exc).__name__}: {exc}", None
    if ok:
        return backend
    listing = "; ".join(f"{n} ({'available' if a else 'unavailable: ' + w})"
                        for n, (a, w) in installed_backends().items())
    raise ValueError(f"backend {name!r} cannot be used ({why}). Installed backends: {listing}")
