"""``scipy.fft`` on traced arrays: a uarray backend that records each call as a host call.

SciPy's FFT functions do not reach ``__array_function__``: they dispatch through their own backend
mechanism (uarray), whose default backend reads ndarray internals (``.flags``) a traced array lacks.
While a function is traced on a thread, this backend is set for that thread ahead of SciPy's: a call
with a traced array among its arguments becomes a ``prim.host_call`` of the same ``scipy.fft``
function (SciPy's own result at run time, guarded on the input shapes, like any function the
registry lacks); any other call is left to SciPy's backends.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from .traced_value import TracedValue


def _holds_traced(value: Any) -> bool:
    if isinstance(value, TracedValue):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_traced(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_traced(v) for v in value.values())
    return False


class _TracedFFT:
    """The uarray backend (SciPy's domain for ``scipy.fft``)."""

    __ua_domain__ = "numpy.scipy.fft"

    @staticmethod
    def __ua_function__(method: Any, args: tuple, kwargs: dict) -> Any:
        if not (_holds_traced(args) or _holds_traced(kwargs)):
            return NotImplemented
        from .hostcall import host_call
        from .tracer import active_tracer, current_tracer

        what = f"scipy.fft.{getattr(method, '__name__', 'function')}"
        tracer = current_tracer() or active_tracer(what)
        return host_call(tracer, method, "__call__", args, dict(kwargs), what)


@contextmanager
def scipy_fft_traced() -> Iterator[None]:
    """Set the backend on this thread while a trace runs (only where ``scipy.fft`` is imported: a
    program that never imported it cannot call it)."""
    with ExitStack() as stack:
        fft = sys.modules.get("scipy.fft")
        set_backend = getattr(fft, "set_backend", None)
        if set_backend is not None:
            stack.enter_context(set_backend(_TracedFFT))
        yield
