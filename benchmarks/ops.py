"""Per-op sweep: every elementwise ufunc and reduction of the registry, one op per trace, on the CPU
backend beside NumPy eager, at 1e3 and 1e6 elements.

    python benchmarks/ops.py [--quick] [--cpu-time] [--only NAME[,NAME...]]

One op alone is the hardest case for a tracer (nothing to fuse, the call cost is all overhead at
1e3), so this table says where the CPU runtime itself is slower than NumPy's loop for the same op.
Each row says how the op ran (`fused`, `numpy-into`: NumPy's function writing into a planned
buffer, `fallback`); the rows below 1.0x are listed after the table and in docs/cpu.md with their
reason. --quick runs 1e3 only (a smoke run).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import numtrace as nt
from _timing import fmt_seconds, sweep_args, time_pair
from numtrace_ir import registry

SIZES = {"1e3": (10, 100), "1e6": (1000, 1000)}


def _how(traced) -> str:
    """How the CPU backend ran the op: fused pass, scan kernel, NumPy into a planned buffer, or fallback."""
    stats = next(iter(traced.stats()["signatures"].values()))
    if stats.get("fallbacks"):
        return "fallback"
    if stats.get("numpy_into"):
        return "numpy-into"
    if stats.get("scans"):
        return "scan"
    return "fused" if stats.get("fused_nodes") else "other"


def _inputs(ufunc: np.ufunc, shape: tuple[int, int], rng: np.random.Generator) -> tuple | None:
    """Arguments in the op's domain: floats in (0.1, 0.9), else (1.1, 1.9) where that gives NaN
    (arccosh), else small positive integers for integer-only ufuncs; None when none fits."""
    for make in (lambda: rng.uniform(0.1, 0.9, shape), lambda: rng.uniform(1.1, 1.9, shape),
                 lambda: rng.integers(1, 64, shape)):
        args = tuple(make() for _ in range(ufunc.nin))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                out = ufunc(*args)
        except (TypeError, RuntimeWarning, FloatingPointError):
            continue
        outs = out if isinstance(out, tuple) else (out,)
        if all(not (o.dtype.kind in "fc" and np.isnan(o).any()) for o in outs):
            return args
    return None


def cases(shape: tuple[int, int]) -> list[tuple[str, Callable, tuple]]:
    """(name, NumPy function, arguments) for every registry ufunc and reduction."""
    rng = np.random.default_rng(0)
    out = []
    seen = set()
    for op in registry.all_ops():
        ufunc = op.ufunc
        if ufunc is not None and ufunc not in seen and ufunc.nout >= 1:
            seen.add(ufunc)
            args = _inputs(ufunc, shape, rng)
            if args is not None:
                out.append((ufunc.__name__, ufunc, args))
    x = rng.uniform(0.1, 0.9, shape)
    for name in ("sum", "mean", "std", "var", "max", "min", "prod", "argmax", "argmin", "cumsum",
                 "cumprod", "any", "all"):
        fn = getattr(np, name)
        arg = x > 0.5 if name in ("any", "all") else x
        out.append((f"{name}(axis=None)", fn, (arg,)))
        out.append((f"{name}(axis=-1)", lambda a, fn=fn: fn(a, axis=-1), (arg,)))
        out.append((f"{name}(axis=0)", lambda a, fn=fn: fn(a, axis=0), (arg,)))
    return out


def run_one(name: str, fn: Callable, args: tuple, size: str, quick: bool, clock) -> dict:
    row = {"op": name, "size": size}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = nt.trace(lambda *a: fn(*a), args, backend="cpu", check_trace=False)
            got, want = traced(*args), fn(*args)
        as_tuple = (lambda v: v if isinstance(v, tuple) else (v,))
        for g, w in zip(as_tuple(got), as_tuple(want)):
            np.testing.assert_allclose(g, w, rtol=1e-6, equal_nan=True)
    except Exception as exc:   # a failure is a row, not the end of the sweep
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:70] if str(exc) else ''}"
        return row
    row["numpy"], row["numtrace"] = time_pair(lambda: fn(*args), lambda: traced(*args), quick, clock)
    row["how"] = _how(traced)
    return row


def main() -> None:
    args, only, clock = sweep_args(__doc__.splitlines()[0], "1e3 only, repeat less (smoke run)",
                                   "comma-separated op names (as printed)")
    rows = []
    for size in (["1e3"] if args.quick else list(SIZES)):
        for name, fn, fn_args in cases(SIZES[size]):
            if not only or name in only:
                rows.append(run_one(name, fn, fn_args, size, args.quick, clock))
    print(f"{'op':<22} {'size':<5} {'numpy':>12} {'numtrace':>12} {'speedup':>8}  how")
    for r in rows:
        head = f"{r['op']:<22} {r['size']:<5}"
        if "error" in r:
            print(f"{head} ERROR {r['error']}")
        else:
            speedup = r["numpy"] / r["numtrace"]
            times = f"{fmt_seconds(r['numpy'])} {fmt_seconds(r['numtrace'])}"
            print(f"{head} {times} {speedup:7.2f}x  {r['how']}")
    ok = [r for r in rows if "error" not in r]
    slow = [r for r in ok if r["numpy"] < r["numtrace"]]
    geo = math.exp(sum(math.log(r["numpy"] / r["numtrace"]) for r in ok) / max(len(ok), 1))
    print(f"summary: {len(ok)} op runs, geometric mean speedup {geo:.2f}x, {len(slow)} below 1.0x, "
          f"{len(rows) - len(ok)} errors")
    if slow:
        print("below 1.0x: " + ", ".join(f"{r['op']} ({r['size']}, {r['how']}) "
                                         f"{r['numpy'] / r['numtrace']:.2f}x" for r in slow))


if __name__ == "__main__":
    main()
