"""Row-wise softmax, log-softmax and a layer norm of exp (float32 and float64, rows of 10 to 1000)
in this process: NumPy, numtrace, and numtrace with its generated kernels built without the tiles of
short rows for reductions (codegen.has_row_tiles off: such passes then run on the interpreter, as
before those tiles), whose results must be the same bits; then the float32 exp and tanh loops of the
AVX2 and AVX-512 builds (nt_simd.h's eight- and sixteen-lane forms) where this CPU runs both.
Minimum seconds per call over repeats: single-thread CPU time at 1 thread (other load on a shared
machine does not inflate it), wall time at 2.

    python benchmarks/softmax_rows.py [--quick] [--threads 1] [--only softmax,log_softmax,ln_exp]

--quick: softmax on the two smallest shapes, few repeats (the smoke run of `nox -s bench -- --quick`).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import numpy as np

os.environ.setdefault("NUMTRACE_CODEGEN", "sync")
import numtrace as nt
from numtrace_cpu import codegen, isa, runtime, set_num_threads

SHAPES = [(64 * 16, 64), (128, 128), (20000, 10), (1000, 1000)]


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_softmax(x):
    d = x - x.max(axis=1, keepdims=True)
    return d - np.log(np.exp(d).sum(axis=1, keepdims=True))


def ln_exp(x):
    e = np.exp(x * 0.5)
    return (e - e.mean(axis=1, keepdims=True)) / np.sqrt(e.var(axis=1, keepdims=True) + 1e-5)


PROGRAMS = {"softmax": softmax, "log_softmax": log_softmax, "ln_exp": ln_exp}


def _seconds(fn, clock, repeat: int = 15) -> float:
    fn()
    start = time.perf_counter()
    fn()
    calls = max(1, int(0.01 / max(time.perf_counter() - start, 1e-7)))
    best = float("inf")
    for _ in range(repeat):
        t = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - t) / calls)
    return best


def _apply(op, a):
    return op(a)


def _without_row_tiles(fn, x):
    real = codegen.has_row_tiles
    codegen.has_row_tiles = lambda program: False
    try:
        return nt.trace(fn, (x,))
    finally:
        codegen.has_row_tiles = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default=",".join(PROGRAMS))
    parser.add_argument("--quick", action="store_true", help="softmax, two small shapes, few repeats")
    args = parser.parse_args()
    only, shapes, repeat = ("softmax", SHAPES[:2], 3) if args.quick else (args.only, SHAPES, 15)
    set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    print(f"{'program':12s} {'shape':12s} {'dtype':8s} {'numpy':>10s} {'no tiles':>10s} {'numtrace':>10s}"
          "  no-tiles/numtrace  numpy/numtrace")
    for name in only.split(","):
        fn = PROGRAMS[name]
        for shape in shapes:
            for dtype in (np.float32, np.float64):
                x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
                before, traced = _without_row_tiles(fn, x), nt.trace(fn, (x,))
                assert before(x).tobytes() == traced(x).tobytes(), (name, shape, dtype)
                calls = [functools.partial(fn, x), functools.partial(before, x), functools.partial(traced, x)]
                t_np, t_before, t_nt = (min(_seconds(c, clock, repeat) for _ in range(3)) for c in calls)
                print(f"{name:12s} {str(shape):12s} {np.dtype(dtype).name:8s} {t_np * 1e6:8.1f}us "
                      f"{t_before * 1e6:8.1f}us {t_nt * 1e6:8.1f}us  {t_before / t_nt:16.2f}x  "
                      f"{t_np / t_nt:13.2f}x", flush=True)
    runs = runtime.cpu_features()
    builds = [b for b in ("avx2", "avx512") if b in isa.built() and isa.BUILDS[b][1] <= runs]
    if len(builds) < 2:
        return
    x = np.random.default_rng(0).standard_normal((16, 4, 64, 64)).astype(np.float32)
    for op in (np.exp, np.tanh):
        times = {}
        for build in builds:   # kernels compiled while a build is in use run its loops
            runtime.use_blocks(isa.load(build))
            try:
                traced = nt.trace(functools.partial(_apply, op), (x,))
                times[build] = min(_seconds(functools.partial(traced, x), clock, repeat) for _ in range(3))
            finally:
                runtime.use_blocks(isa.blocks)
        print(f"float32 {op.__name__} of {x.size} elements: "
              + ", ".join(f"{b} {t * 1e6:.1f}us" for b, t in times.items())
              + f" (avx2/avx512 {times['avx2'] / times['avx512']:.2f}x)")

if __name__ == "__main__":
    main()
