"""Ordinary NumPy programs, NumPy eager beside numtrace on the cpu backend, at three sizes.

Each program is plain NumPy code as people write it (no numtrace-specific style), traced once per
size with ``numtrace.trace(f, inputs)``; its traced result is checked against NumPy's before timing.
Sizes are about 1e3, 1e5 and 1e7 elements of input. A program that cannot be traced (or compiled,
or gives another result) is reported in the table, and the run goes on.

Columns: median time per call of NumPy eager and of numtrace, speedup = NumPy / numtrace (>1:
numtrace is faster), and the ops the cpu backend ran as NumPy fallbacks. The summary line gives the
geometric mean of the speedups and the worst program and size.

    python benchmarks/realistic.py [--quick] [--cpu-time] [--only NAME[,NAME...]]

--quick skips the large size and repeats less (a smoke run). --cpu-time times CPU seconds of the
process instead of wall time: steadier on a machine shared with other work, but it adds up every
thread's time, so run it with NUMTRACE_NUM_THREADS=1 for a like-for-like comparison.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numtrace as nt
from _timing import fmt_seconds, sweep_args, time_pair

# -- programs -------------------------------------------------------------------------------------


def softmax_regression(x, w, b):
    z = x @ w + b
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def mlp_layernorm_gelu(x, w1, b1, g, beta, w2, b2):
    h = x @ w1 + b1
    mu = h.mean(axis=-1, keepdims=True)
    var = h.var(axis=-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * g + beta
    h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    return h @ w2 + b2


def causal_attention(q, k, v):
    t, d = q.shape
    scores = q @ k.T / np.sqrt(d)
    mask = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = np.where(mask, -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v


def kmeans_assign(x, centers):
    d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=-1)
    return np.argmin(d2, axis=1), d2.min(axis=1).sum()


def cross_entropy(logits, labels):
    m = logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(axis=1)) + m[:, 0]
    picked = np.take_along_axis(logits, labels[:, None], axis=1)[:, 0]
    return np.mean(lse - picked)


def stencil_1d(u):
    lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
    out = u.copy()
    out[1:-1] = u[1:-1] + 0.1 * lap
    return out


def stencil_2d(u):
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def euler_step(y, v):
    dt, k = 0.01, 4.0
    return y + dt * v, v - dt * k * y


def _rhs(y):
    return -0.5 * y + np.sin(y)


def rk4_step(y):
    h = 0.05
    k1 = _rhs(y)
    k2 = _rhs(y + 0.5 * h * k1)
    k3 = _rhs(y + 0.5 * h * k2)
    k4 = _rhs(y + h * k3)
    return y + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def nbody_forces(pos, mass):
    diff = pos[None, :, :] - pos[:, None, :]
    r2 = (diff ** 2).sum(axis=-1) + 1e-3
    inv = 1.0 / (r2 * np.sqrt(r2))
    return (diff * (mass[None, :, None] * inv[:, :, None])).sum(axis=1)


def _norm_cdf(x):
    return 0.5 * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def black_scholes(s, k, t):
    r, sigma = 0.02, 0.3
    d1 = (np.log(s / k) + (r + 0.5 * sigma ** 2) * t) / (sigma * np.sqrt(t))
    d2 = d1 - sigma * np.sqrt(t)
    return s * _norm_cdf(d1) - k * np.exp(-r * t) * _norm_cdf(d2)


def haversine(lat1, lon1, lat2, lon2):
    lat1, lon1, lat2, lon2 = (np.radians(a) for a in (lat1, lon1, lat2, lon2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * np.arcsin(np.sqrt(a))


def cumsum_returns(prices):
    r = np.log(prices[1:] / prices[:-1])
    return np.cumsum(r)


def standardize(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def covariance(x):
    xc = x - x.mean(axis=0)
    return xc.T @ xc / (x.shape[0] - 1)


def correlation(x):
    xc = x - x.mean(axis=0)
    cov = xc.T @ xc / (x.shape[0] - 1)
    sd = np.sqrt(np.diag(cov))
    return cov / np.outer(sd, sd)


def row_normalize(x):
    return x / np.sqrt((x * x).sum(axis=1, keepdims=True))


def clip_where_fill(x):
    y = np.clip(x, -1.0, 1.0)
    y = np.where(np.abs(x) > 2.5, 0.0, y)
    y[np.isnan(x)] = 0.0
    return y


def one_hot(labels):
    return (labels[:, None] == np.arange(10)).astype(np.float32)


def pairwise_distances(a, b):
    d2 = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2.0 * a @ b.T
    return np.sqrt(np.maximum(d2, 0.0))


def cosine_similarity(a, b):
    an = a / np.sqrt((a ** 2).sum(axis=1, keepdims=True))
    bn = b / np.sqrt((b ** 2).sum(axis=1, keepdims=True))
    return an @ bn.T


def sgd_momentum_inplace(w, g, m):
    m *= 0.9
    m += g
    w -= 0.01 * m
    return w, m


def adam_inplace(w, g, m, v):
    m *= 0.9
    m += 0.1 * g
    v *= 0.999
    v += 0.001 * g ** 2
    w -= 1e-3 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)
    return w


def image_normalize(img, mean, std):
    return (img.astype(np.float32) / 255.0 - mean) / std


def bias_relu(x, b):
    return np.maximum(x + b, 0.0)


def logsumexp_rows(x):
    m = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]


def horner_poly(x):
    return 1.0 + x * (0.5 + x * (0.25 + x * 0.125)) + 0.01 * x ** 4


def logistic_loss(z, y):
    return np.mean(np.log1p(np.exp(-y * z)))


def moving_average(x):
    c = np.cumsum(x)
    return (c[8:] - c[:-8]) / 8.0


def grayscale(img):
    return img @ np.array([0.299, 0.587, 0.114], dtype=img.dtype)


def polar_to_cartesian(r, theta):
    return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=-1)


# -- inputs at a size ---------------------------------------------------------------------------------

def _f64(rng, *shape):
    return rng.standard_normal(shape)


def _f32(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _bodies(n, rng):
    return _f64(rng, n, 3), np.abs(_f64(rng, n))


def _rows(n, width):
    return max(2, n // width)


@dataclass
class Program:
    name: str
    fn: Callable
    make: Callable   # (elements, rng) -> tuple of inputs
    inplace: bool = False


PROGRAMS = [
    Program("softmax_regression", softmax_regression,
            lambda n, r: (_f64(r, _rows(n, 20), 20), _f64(r, 20, 10), _f64(r, 10))),
    Program("mlp_layernorm_gelu", mlp_layernorm_gelu,
            lambda n, r: (_f32(r, _rows(n, 64), 64), _f32(r, 64, 128) * 0.1, _f32(r, 128), _f32(r, 128),
                          _f32(r, 128), _f32(r, 128, 16) * 0.1, _f32(r, 16))),
    Program("causal_attention", causal_attention,
            lambda n, r: tuple(_f32(r, max(2, int(math.sqrt(n))), 32) for _ in range(3))),
    Program("kmeans_assign", kmeans_assign,   # its (n, 8, 4) temporaries are 8x the input
            lambda n, r: (_f64(r, _rows(n, 16), 4), _f64(r, 8, 4))),
    Program("cross_entropy", cross_entropy,
            lambda n, r: (_f64(r, _rows(n, 10), 10), r.integers(0, 10, _rows(n, 10)))),
    Program("stencil_1d", stencil_1d, lambda n, r: (_f64(r, n),)),
    Program("stencil_2d", stencil_2d, lambda n, r: (_f64(r, int(math.sqrt(n)), int(math.sqrt(n))),)),
    Program("euler_step", euler_step, lambda n, r: (_f64(r, n // 2), _f64(r, n // 2))),
    Program("rk4_step", rk4_step, lambda n, r: (_f64(r, n),)),
    Program("nbody_forces", nbody_forces, lambda n, r: _bodies(max(2, int(math.sqrt(n / 3))), r)),
    Program("black_scholes", black_scholes,
            lambda n, r: (r.uniform(50, 150, n // 3), r.uniform(50, 150, n // 3), r.uniform(0.1, 2, n // 3))),
    Program("haversine", haversine,
            lambda n, r: tuple(r.uniform(-80, 80, n // 4) for _ in range(4))),
    Program("cumsum_returns", cumsum_returns, lambda n, r: (r.uniform(90, 110, n),)),
    Program("standardize", standardize, lambda n, r: (_f64(r, _rows(n, 16), 16),)),
    Program("covariance", covariance, lambda n, r: (_f64(r, _rows(n, 16), 16),)),
    Program("correlation", correlation, lambda n, r: (_f64(r, _rows(n, 16), 16),)),
    Program("row_normalize", row_normalize, lambda n, r: (_f64(r, _rows(n, 32), 32),)),
    Program("clip_where_fill", clip_where_fill, lambda n, r: (_f64(r, n),)),
    Program("one_hot", one_hot, lambda n, r: (r.integers(0, 10, max(2, n // 10)),)),
    Program("pairwise_distances", pairwise_distances,
            lambda n, r: (_f64(r, _rows(n, 64), 8), _f64(r, 64, 8))),
    Program("cosine_similarity", cosine_similarity,
            lambda n, r: (_f32(r, _rows(n, 64), 16), _f32(r, 64, 16))),
    Program("sgd_momentum_inplace", sgd_momentum_inplace,
            lambda n, r: (_f32(r, n // 3), _f32(r, n // 3), _f32(r, n // 3)), inplace=True),
    Program("adam_inplace", adam_inplace,
            lambda n, r: (*(_f32(r, n // 4) for _ in range(3)), np.abs(_f32(r, n // 4))), inplace=True),
    Program("image_normalize_u8", image_normalize,
            lambda n, r: (r.integers(0, 256, (_rows(n, 3 * 64), 64, 3), dtype=np.uint8),
                          np.array([0.485, 0.456, 0.406], np.float32),
                          np.array([0.229, 0.224, 0.225], np.float32))),
    Program("bias_relu_10", bias_relu, lambda n, r: (_f32(r, _rows(n, 10), 10), _f32(r, 10))),
    Program("logsumexp_rows", logsumexp_rows, lambda n, r: (_f64(r, _rows(n, 10), 10),)),
    Program("horner_poly", horner_poly, lambda n, r: (_f64(r, n),)),
    Program("logistic_loss", logistic_loss, lambda n, r: (_f64(r, n // 2), np.sign(_f64(r, n // 2)))),
    Program("moving_average", moving_average, lambda n, r: (_f64(r, n),)),
    Program("grayscale", grayscale, lambda n, r: (_f32(r, _rows(n, 3 * 64), 64, 3),)),
    Program("polar_to_cartesian", polar_to_cartesian, lambda n, r: (_f64(r, n // 2), _f64(r, n // 2))),
]

SIZES = {"small": 1_000, "medium": 100_000, "large": 10_000_000}


# -- running ------------------------------------------------------------------------------------------

def _flat(result) -> list:
    return [np.asarray(r) for r in result] if isinstance(result, tuple) else [np.asarray(result)]


def _same(got, expected) -> bool:
    g, e = _flat(got), _flat(expected)
    return len(g) == len(e) and all(
        a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True) for a, b in zip(g, e))


def _copies(inputs: tuple) -> tuple:
    return tuple(x.copy() for x in inputs)


def _fallbacks(traced) -> str:
    ops = sorted({op for st in traced.stats()["signatures"].values() for op in st.get("fallback_ops", [])})
    return ",".join(o.removeprefix("np.") for o in ops)


def run_one(prog: Program, size: str, quick: bool, clock: Callable[[], float] = time.perf_counter) -> dict:
    """One row of the table: times and speedup, or the error that stopped the program."""
    row = {"program": prog.name, "size": size}
    inputs = prog.make(SIZES[size], np.random.default_rng(0))
    row["elements"] = sum(x.size for x in inputs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = nt.trace(prog.fn, _copies(inputs), backend="cpu")
            if not _same(traced(*_copies(inputs)), prog.fn(*_copies(inputs))):
                raise AssertionError("traced result differs from NumPy's")
    except Exception as exc:   # any failure is a row of the table, not the end of the run
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:70] if str(exc) else ''}"
        return row
    # In-place programs update their inputs on every call, in both runs alike.
    numpy_args, traced_args = _copies(inputs), _copies(inputs)
    row["numpy"], row["numtrace"] = time_pair(lambda: prog.fn(*numpy_args), lambda: traced(*traced_args),
                                               quick, clock)
    row["fallbacks"] = _fallbacks(traced)
    return row


def print_table(rows: list[dict]) -> None:
    print(f"{'program':<22} {'size':<7} {'elements':>9} {'numpy':>12} {'numtrace':>12} {'speedup':>8}  "
          "fallbacks")
    for r in rows:
        head = f"{r['program']:<22} {r['size']:<7} {r['elements']:>9}"
        if "error" in r:
            print(f"{head} ERROR {r['error']}")
        else:
            print(f"{head} {fmt_seconds(r['numpy'])} {fmt_seconds(r['numtrace'])} {_speedup(r):7.2f}x  "
                  f"{r['fallbacks'] or '-'}")


def summary(rows: list[dict]) -> str:
    ok = [r for r in rows if "error" not in r]
    errors = len(rows) - len(ok)
    if not ok:
        return f"summary: no program ran ({errors} errors)"
    speedups = [_speedup(r) for r in ok]
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    worst, best = min(ok, key=_speedup), max(ok, key=_speedup)
    return (f"summary: geometric mean speedup {geo:.2f}x over {len(ok)} runs; worst {worst['program']} "
            f"({worst['size']}) {_speedup(worst):.2f}x; best {best['program']} ({best['size']}) "
            f"{_speedup(best):.2f}x; {errors} errors")


def _speedup(row: dict) -> float:
    return row["numpy"] / row["numtrace"]


def main() -> None:
    args, only, clock = sweep_args(__doc__.splitlines()[0], "skip the large size, repeat less (smoke run)",
                                   "comma-separated program names")
    sizes = ["small", "medium"] if args.quick else list(SIZES)
    rows = []
    for prog in PROGRAMS:
        if only and prog.name not in only:
            continue
        for size in sizes:
            rows.append(run_one(prog, size, args.quick, clock))
    print_table(rows)
    print(summary(rows))


if __name__ == "__main__":
    main()
