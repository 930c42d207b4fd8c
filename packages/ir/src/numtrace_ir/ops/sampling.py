"""Sample-input generators shared by the op families: random arrays in an op's domain (so samples
never warn), the dtypes an op supports, and the standard shape sets (broadcasting, 0-d, empty)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from numtrace_ir.registry import Sample

# Dtypes every sample set draws from (others the IR knows are exercised by specific ops only).
DTYPES = tuple(np.dtype(d) for d in ("bool", "int32", "int64", "float32", "float64"))
FLOATS = tuple(d for d in DTYPES if d.kind == "f")
NUMERIC = tuple(d for d in DTYPES if d.kind != "b")

UNARY_SHAPES = ((3, 4), (), (0,), (2, 3, 4), (5,))
BINARY_SHAPES = (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (3,)))


def array(rng: np.random.Generator, shape: tuple, dtype: Any, domain: tuple = (-3.0, 3.0)) -> np.ndarray:
    """Random values of `dtype` in [lo, hi) (ints: the integers in that range)."""
    dtype = np.dtype(dtype)
    lo, hi = domain
    if dtype.kind == "b":  # constant when the domain excludes False (0) or True (1)
        return np.full(shape, lo > 0) if lo > 0 or hi <= 1 else rng.random(shape) < 0.5
    if dtype.kind in "iu":
        ilo, ihi = math.ceil(lo), math.floor(hi)
        if dtype.kind == "u":
            ilo = max(ilo, 0)
        return rng.integers(ilo, max(ihi, ilo + 1), size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def scalar(rng: np.random.Generator, kind: str, domain: tuple = (-3.0, 3.0)) -> Any:
    """A Python scalar of `kind` in the domain (a weak operand)."""
    lo, hi = domain
    if kind == "bool":
        return bool(rng.random() < 0.5)
    if kind == "int":
        return int(rng.integers(math.ceil(lo), max(math.floor(hi), math.ceil(lo) + 1)))
    return float(round(rng.uniform(lo, hi), 3))


def supported(fn: Callable[[np.dtype], Any], candidates: Iterable = DTYPES) -> tuple[np.dtype, ...]:
    """The candidate dtypes on which `fn(dtype)` runs without error or warning."""
    out = []
    for dt in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                fn(np.dtype(dt))
        except (TypeError, ValueError, ArithmeticError, RuntimeWarning, DeprecationWarning):
            continue
        out.append(np.dtype(dt))
    return tuple(out)


def ones(dtype: np.dtype, n: int = 2) -> np.ndarray:
    return np.ones((n,), dtype)


def sweep(cases: list, dtypes: tuple = DTYPES, domain: tuple = (-3.0, 3.0)) -> Callable:
    """Samples from ``(shapes, attrs)`` cases: the first case in every dtype, the others in the last
    dtype."""

    def samples(rng):
        runs = [(cases[0], dt) for dt in dtypes] + [(c, dtypes[-1]) for c in cases[1:]]
        for (shapes, attrs), dt in runs:
            yield Sample(tuple(array(rng, s, dt, domain) for s in shapes), dict(attrs))

    return samples
