"""The error kinds a traced function sets in its own ``np.errstate`` blocks, for `Node.errstate`.

NumPy's error state is one object per state: it says each kind's mode, not which kinds a block set.
A block that sets a kind to the mode the caller had at trace time (``np.errstate(all="ignore")``
keeps ``under="ignore"``) still holds that mode whatever the caller's state at a later call, so the
trace must record it. ``np.errstate``'s enter, exit and decorator are wrapped (once, when numtrace
is imported) to tell the tracer of the current thread which kinds each block names; outside a trace
they only check that no tracer runs. A block entered before numtrace was imported (a function
decorated earlier) is seen only through the modes it changed. ``np.seterr`` is wrapped too: the kinds
it names hold from the call until a later ``np.seterr`` gives back what it returned (``old =
np.seterr(...)`` ... ``np.seterr(**old)``: the modes it returns are marked, `_Returned`); a trace that
ends with one not restored is refused, as a call of the trace cannot change the caller's error state
as NumPy's would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numtrace_ir import fp_errors

__all__ = ["ErrstateWatch", "install"]

_KINDS = ("divide", "over", "under", "invalid")


def _named(block: Any) -> tuple[str, ...]:
    """The kinds an ``np.errstate`` object sets (``all=`` names every kind not named on its own)."""
    if getattr(block, "_all", None) is not None:
        return _KINDS
    return tuple(kind for kind in _KINDS if getattr(block, f"_{kind}", None) is not None)


def _named_kinds(named: dict[str, Any]) -> tuple[str, ...]:
    """The kinds an ``np.seterr`` call's arguments set."""
    if named.get("all") is not None:
        return _KINDS
    return tuple(kind for kind in _KINDS if named.get(kind) is not None)


class _SeterrCall:
    """One ``np.seterr`` call of the traced function (its entry in `ErrstateWatch`'s blocks)."""

    __slots__ = ()


class _Returned(str):
    """A mode ``np.seterr`` returned inside a trace (a str), with the call that returned it and its
    kind: giving it back to ``np.seterr`` is what restores that call."""

    call: _SeterrCall
    kind: str

    def __new__(cls, mode: str, call: _SeterrCall, kind: str) -> _Returned:
        self = super().__new__(cls, mode)
        self.call, self.kind = call, kind
        return self


class ErrstateWatch(fp_errors.ErrstateWatch):
    """`numtrace_ir.fp_errors.ErrstateWatch` that also records the kinds the function's blocks name
    whose mode is the one the caller had at trace time."""

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        super().__init__()
        self._blocks: list[tuple[Any, tuple[str, ...]]] = []

    def entered(self, block: Any) -> None:
        self._blocks.append((block, _named(block)))

    def seterr(self, named: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
        """``np.seterr(**named)`` returned `old`; gives back `old` with each mode marked as returned by
        this call (`_Returned`). A call passing back, for every kind the latest call not yet restored
        set, that call's marked mode of the same kind (and nothing else) restores it: its kinds stop
        holding. Any other call holds the kinds it sets from now: modes read elsewhere (a dict saved at
        import) set them whatever the caller's state, and only the call's own result undoes it."""
        given = {kind: named[kind] if named.get(kind) is not None else named.get("all") for kind in _KINDS}
        given = {kind: mode for kind, mode in given.items() if mode is not None}
        for k in range(len(self._blocks) - 1, -1, -1):
            token, kinds = self._blocks[k]
            if isinstance(token, _SeterrCall):
                if set(kinds) <= set(given) and all(
                        isinstance(mode, _Returned) and mode.call is token and mode.kind == kind
                        for kind, mode in given.items()):
                    del self._blocks[k]
                    return old
                break
        call = _SeterrCall()
        self._blocks.append((call, _named_kinds(named)))
        return {kind: _Returned(mode, call, kind) for kind, mode in old.items()}

    def unrestored(self) -> bool:
        """Whether an ``np.seterr`` of the traced function was not restored."""
        return any(isinstance(token, _SeterrCall) for token, _ in self._blocks)

    def exited(self, block: Any) -> None:
        """The block's exit restores NumPy's whole state: an ``np.seterr`` inside it holds no more."""
        for k in range(len(self._blocks) - 1, -1, -1):
            if self._blocks[k][0] is block:
                self._blocks[k:] = [b for b in self._blocks[k + 1:] if not isinstance(b[0], _SeterrCall)]
                return

    def since(self) -> str | None:
        if not self._blocks:
            return super().since()
        named = {kind for _, kinds in self._blocks for kind in kinds}
        changed = dict(item.split("=") for item in (super().since() or "").split(",") if item)
        now: dict[str, Any] = dict(np.geterr())
        text = [f"{kind}={now[kind]}" for kind in _KINDS if kind in named or kind in changed]
        return ",".join(text) or None


def install(_tracer: Callable[[], Any]) -> None:
    """Wrap ``np.errstate``'s ``__enter__``, ``__exit__`` and ``__call__`` (once) to tell the tracer
    `_tracer()` returns (None while the thread traces nothing) of each block."""
    cls: Any = np.errstate
    if getattr(cls, "_numtrace_watched", False):
        return
    enter, exit_, call = cls.__enter__, cls.__exit__, cls.__call__

    def __enter__(self: Any) -> Any:
        result = enter(self)
        tracer = _tracer()
        if tracer is not None:
            tracer.errstate.entered(self)
        return result

    def __exit__(self: Any, *exc_info: Any) -> Any:
        tracer = _tracer()
        if tracer is not None:
            tracer.errstate.exited(self)
        return exit_(self, *exc_info)

    def __call__(self: Any, func: Any) -> Any:
        inner = call(self, func)

        @functools.wraps(func)
        def watched(*args: Any, **kwargs: Any) -> Any:
            tracer = _tracer()
            if tracer is None:
                return inner(*args, **kwargs)
            tracer.errstate.entered(self)
            try:
                return inner(*args, **kwargs)
            finally:
                tracer.errstate.exited(self)

        return watched

    methods: dict[str, Any] = {"__enter__": __enter__, "__exit__": __exit__, "__call__": __call__}
    for name, method in methods.items():
        method.__wrapped__ = getattr(cls, name)
        setattr(cls, name, method)
    cls._numtrace_watched = True
    np.seterr = _watched_seterr(np.seterr, _tracer)


def _watched_seterr(seterr: Callable[..., Any], _tracer: Callable[[], Any]) -> Callable[..., Any]:
    """``np.seterr`` telling the tracer `_tracer()` returns which kinds each call sets."""

    @functools.wraps(seterr)
    def watched(*args: Any, **kwargs: Any) -> Any:
        old = seterr(*args, **kwargs)
        tracer = _tracer()
        if tracer is not None:
            named = dict(zip(("all", *_KINDS), args))
            named.update(kwargs)
            return tracer.errstate.seterr(named, old)
        return old

    return watched
