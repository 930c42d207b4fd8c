"""Trace real library functions once and compare the trace with the library at other sizes.

A `Case` names one library function, wrapped so that every argument the trace
takes is an array (Python options are bound in the wrapper), and a `make(n, rng)`
that builds the arguments for batch size `n`. `classify(case, backend)` traces it
at `case.trace_size`, then calls the trace and the function eagerly on copies of
fresh arguments at `case.sizes` and compares the outputs and the arguments
(functions that write into their arguments must write the same values through
the trace). The verdict:

- ``reproduced``: equal within tolerance at every size;
- ``loud``: tracing or a call raised (a refusal is allowed);
- ``silent``: a result or an argument differs, whether or not a
  `numtrace.TracerWarning` came first: a warning is not a refusal.
"""

from __future__ import annotations

import copy
import dataclasses
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numtrace as nt

BACKENDS = ("reference", "cpu")
DEFAULT_SIZES = (1, 7, 1000)
RESULTS: list[Result] = []  # every verdict of this process, for the summary hook in conftest.py



@dataclasses.dataclass
class Case:
    library: str
    name: str
    func: Callable[..., Any]
    make: Callable[[int, np.random.Generator], tuple]
    trace_size: int = 5
    sizes: Sequence[int] = DEFAULT_SIZES
    rtol: float = 1e-7
    atol: float = 1e-9  # relative to the largest magnitude of the expected output
    xfail: str = ""  # the known cause of a silent wrong answer on both backends: xfail(strict=True)

    @property
    def id(self) -> str:
        return f"{self.library}.{self.name}"


@dataclasses.dataclass
class Result:
    case: str
    backend: str
    verdict: str  # "reproduced" | "loud" | "silent"
    detail: str = ""
    warnings: list[str] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        text = f"{self.verdict:10s} {self.backend:9s} {self.case}: {self.detail}"
        if self.warnings and self.verdict != "reproduced":
            text += "\n             warnings: " + " | ".join(w[:160] for w in self.warnings[:3])
        return text


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


def _mismatch(expected: Any, got: Any, rtol: float, atol: float, what: str) -> str | None:
    """Why `got` is not `expected` (structure, shape, dtype or values), or None when they agree."""
    e_leaves, g_leaves = _leaves(expected), _leaves(got)
    if len(e_leaves) != len(g_leaves):
        return f"{what}: {len(g_leaves)} values, expected {len(e_leaves)}"
    for i, (e, g) in enumerate(zip(e_leaves, g_leaves)):
        e, g = np.asarray(e), np.asarray(g)
        where = f"{what}[{i}]" if len(e_leaves) > 1 else what
        if e.shape != g.shape:
            return f"{where}: shape {g.shape}, expected {e.shape}"
        if e.dtype != g.dtype:
            return f"{where}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            finite = np.isfinite(e)
            scale = float(np.max(np.abs(e[finite]))) if finite.any() else 1.0
            ok = np.isclose(g, e, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True)
        else:
            ok = g == e
        if not np.all(ok):
            bad = np.argwhere(~np.asarray(ok))
            idx = tuple(bad[0]) if bad.size else ()
            return (f"{where}: {int(np.size(ok) - np.count_nonzero(ok))} of {np.size(ok)} differ, "
                    f"first at {idx}: got {g[idx]!r}, expected {e[idx]!r}")
    return None


def _tracer_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, nt.TracerWarning)]


def _explains(messages: list[str]) -> list[str]:
    """The TracerWarnings that announce a constant or untraceable code (not the guard's re-tracing notice)."""
    return [m for m in messages if not m.startswith("numtrace: re-tracing")]


def _exc(error: BaseException) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}{at}"


def classify(case: Case, backend: str, seed: int = 0) -> Result:
    rng = np.random.default_rng(seed)
    seen: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with np.errstate(all="ignore"):
                traced = nt.trace(case.func, case.make(case.trace_size, rng), backend=backend)
        except Exception as error:
            return Result(case.id, backend, "loud", f"trace raised {_exc(error)}",
                          _tracer_warnings(caught))
        seen += _tracer_warnings(caught)
    for n in (case.trace_size, *case.sizes):
        args = case.make(n, rng)
        eager_args, traced_args = copy.deepcopy(args), copy.deepcopy(args)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = case.func(*eager_args)
            except Exception as error:
                raise AssertionError(f"{case.id}: the library itself failed at size {n}: "
                                     f"{_exc(error)}") from error
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with np.errstate(all="ignore"):
                    got = traced(*traced_args)
            except Exception as error:
                seen += _tracer_warnings(caught)
                return Result(case.id, backend, "loud", f"call at size {n} raised {_exc(error)}", seen)
            seen += _tracer_warnings(caught)
        why = (_mismatch(expected, got, case.rtol, case.atol, "output")
               or _mismatch(eager_args, traced_args, case.rtol, case.atol, "argument after the call"))
        if why:
            return Result(case.id, backend, "silent", f"size {n}: {why}", seen)
    retraced = sum(m.startswith("numtrace: re-tracing") for m in seen)
    detail = f"re-traced {retraced}x" if retraced else ""
    if _explains(seen):
        detail = (detail + "; " if detail else "") + f"{len(_explains(seen))} TracerWarning(s), results equal"
    return Result(case.id, backend, "reproduced", detail, seen)


def check(case: Case, backend: str) -> Result:
    """The test body: classify, remember the verdict, fail on a silent wrong answer."""
    result = classify(case, backend)
    RESULTS.append(result)
    assert result.verdict != "silent", f"SILENT wrong result: {result}"
    return result


def params(cases: Sequence[Case]) -> list:
    import pytest

    def marks(case: Case) -> list:
        return [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []

    return [pytest.param(c, b, id=f"{c.name}-{b}", marks=marks(c)) for c in cases for b in BACKENDS]
