"""np.clip cases whose answer NumPy's clip loop decides bit for bit: -0.0/0.0 ties between x and a
bound, NaNs (both signs, with payloads) in x and in either bound, a_min > a_max, and every kind of
bound (Python scalar, 0-d, one-element and full arrays, one bound left out), for float and integer
dtypes. Each backend's tests run them all (`cases`) and compare the bits (`same_bits`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of


def _nan(dtype: Any, negative: bool, payload: int) -> Any:
    d = np.dtype(dtype)
    bits = {2: (0x7E00, 15), 4: (0x7FC00000, 31), 8: (0x7FF8000000000000, 63)}[d.itemsize]
    u = np.dtype(f"u{d.itemsize}")
    word = bits[0] | (payload & 0xFF) | (int(negative) << bits[1])
    return np.array([word], u).view(d)[0]


def _specials(dtype: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """Signed zeros, NaNs of both signs, infinities and normals; integers for an integer dtype."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-4, 5, n).astype(dtype)
    pool = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 0.5], dtype)
    x = rng.choice(pool, n)
    for i in np.flatnonzero(rng.random(n) < 0.2):
        x[i] = _nan(dtype, bool(rng.integers(2)), int(rng.integers(1, 200)))
    return x


def cases(seed: int = 0) -> Iterator[tuple[str, tuple, dict]]:
    """(what, inputs, attrs) for `np.clip`: inputs are x and the bounds not named in ``omitted``."""
    rng = np.random.default_rng(seed)
    for dtype in ("float64", "float32", "float16", "int32", "int64"):
        floating = np.dtype(dtype).kind == "f"
        for n in (1, 5, 37):
            x = _specials(dtype, n, rng)
            lows, highs = _specials(dtype, n, rng), _specials(dtype, n, rng)
            scalars = [-0.0, 0.0, float(_nan(dtype, True, 7)), float(_nan(dtype, False, 9))] if floating \
                else [0, 2]
            kinds = {
                "array": (lows, highs),
                "sorted arrays": (np.minimum(lows, highs), np.maximum(lows, highs)),
                "one-element": (lows[:1].copy(), highs[:1].copy()),
                "0-d": (lows[:1].reshape(()), highs[:1].reshape(())),
            }
            for what, (lo, hi) in kinds.items():
                yield f"{dtype} n={n} {what}", (x, lo, hi), {}
                yield f"{dtype} n={n} {what} low", (x, lo), {"omitted": ("a_max",)}
                yield f"{dtype} n={n} {what} high", (x, hi), {"omitted": ("a_min",)}
                yield f"{dtype} n={n} {what} and scalar", (x, lo, scalars[0]), {}
                yield f"{dtype} n={n} scalar and {what}", (x, scalars[-1], hi), {}
            for a in scalars:
                for b in scalars:
                    yield f"{dtype} n={n} scalars {a!r} {b!r}", (x, a, b), {}
                    yield f"{dtype} n={n} 0-d {a!r} and scalar {b!r}", (x, np.array(a, dtype), b), {}
                yield f"{dtype} n={n} scalar {a!r} low", (x, a), {"omitted": ("a_max",)}
        x = _specials(dtype, 24, rng).reshape(4, 6)
        yield f"{dtype} 2-d, row bounds", (x, _specials(dtype, 6, rng), _specials(dtype, 6, rng)), {}
        yield f"{dtype} 2-d, mixed bounds", (x, _specials(dtype, 6, rng), np.array(1, dtype)), {}


def same_bits(actual: Any, expected: Any) -> np.ndarray:
    """Elementwise: the same bits (a float's sign of zero and NaN payload included), dtypes and shapes
    equal."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert (a.dtype, a.shape) == (e.dtype, e.shape), f"{a.dtype}{a.shape} != {e.dtype}{e.shape}"
    if e.dtype.kind == "f":
        a, e = a.view(f"u{e.dtype.itemsize}"), e.view(f"u{e.dtype.itemsize}")
    return np.asarray(a == e)


def graph(inputs: tuple, attrs: dict) -> tuple[Graph, list]:
    """A graph of one np.clip node as a trace records it (a Python scalar bound is a constant), and
    the arrays it takes."""
    g = Graph()
    values: list[Any] = []
    arrays: list[np.ndarray] = []
    for v in inputs:
        if isinstance(v, np.ndarray):
            values.append(g.add_input(f"x{len(arrays)}", type_of(v)))
            arrays.append(v)
        else:
            constant = g.create_node("prim.Constant", [], attrs={"value": v}, out_types=[type_of(v)])
            values.append(constant.output)
    op = registry.get("np.clip")
    g.set_outputs(g.create_node(op.name, values, attrs=op.normalize_attrs(attrs)).outputs)
    return g, arrays
