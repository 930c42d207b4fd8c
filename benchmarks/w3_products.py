"""The W3 transformer block's matrix products one at a time (benchmarks/cpu_workloads.py's encoder:
d_model 256, seq 128, 4 heads) in this process: time per call and GFLOP/s of numtrace's packed kernels
at 1 and 2 threads, with the weight a run-time argument (packed per call, as W3 passes it) and a trace
constant (packed once), beside NumPy's matmul; then the whole block at 1 and 2 threads. Each product
is followed by a row sum, so that its output is an intermediate in the executable's arena, as in the
block, rather than a fresh array per call. Minima over blocks of calls are what the machine can do;
medians are what a loaded machine gave.

    NUMTRACE_TEAM_SPIN_US=0 python benchmarks/w3_products.py   # the workers sleep after each product
    python benchmarks/w3_products.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("NUMTRACE_CODEGEN", "sync")
import cpu_workloads as cw
import numtrace as nt
from numtrace_cpu import get_num_threads, set_num_threads

F32 = np.float32


def _products() -> dict:
    """name -> (M, K, N, stack, transposed right operand) of each product of the block."""
    s, d, h = cw.SEQ, cw.D_MODEL, cw.HEADS
    return {"x @ Wqkv + b": (s, d, 3 * d, 0, False), "q @ k (per head)": (s, d // h, s, h, True),
            "p @ v (per head)": (s, s, d // h, h, False), "o @ Wo + b": (s, d, d, 0, False),
            "h @ W1 + b": (s, d, 4 * d, 0, False), "u @ W2 + b": (s, 4 * d, d, 0, False)}


def _times(fn, blocks: int, calls: int) -> tuple[float, float]:
    """(minimum, median) seconds per call over `blocks` blocks of `calls` back-to-back calls."""
    fn()
    ts = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        ts.append((time.perf_counter() - start) / calls)
    ts.sort()
    return ts[0], ts[len(ts) // 2]


def _product(a, w, b):
    return np.sum(a @ w + b, axis=-1)


def _row(name: str, shape: tuple, rng, blocks: int, calls: int, total: dict) -> None:
    """One product's line: its time and rate on each configuration, added into `total`."""
    m, k, n, stack, transposed = shape
    lead = (stack,) if stack else ()
    a = rng.standard_normal((*lead, m, k)).astype(F32)
    w = (np.swapaxes(rng.standard_normal((*lead, n, k)).astype(F32), -1, -2) if transposed
         else rng.standard_normal((*lead, k, n)).astype(F32))
    b = np.zeros(n, F32)
    flops = 2.0 * max(stack, 1) * m * k * n
    runtime = nt.trace(_product, (a, w, b), backend="cpu", check_trace=False)
    constant = nt.trace(lambda a: _product(a, w, b), (a,), backend="cpu", check_trace=False)
    np.testing.assert_allclose(runtime(a, w, b), _product(a, w, b), rtol=1e-3, atol=1e-2)
    old = get_num_threads()
    cells = []
    for key, threads, call in (("1", 1, lambda: runtime(a, w, b)), ("2", 2, lambda: runtime(a, w, b)),
                               ("c2", 2, lambda: constant(a)), ("np", old, lambda: _product(a, w, b))):
        set_num_threads(threads)
        best, med = _times(call, blocks, calls)
        total[key] = total.get(key, 0.0) + med
        cells.append(f"{med * 1e6:7.1f}us {flops / best / 1e9:5.0f}GF/s")
    set_num_threads(old)
    print(f"{name:18s} {flops / 1e6:6.1f} " + " ".join(f"{c:>20s}" for c in cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 blocks of 3 calls")
    args = parser.parse_args()
    blocks, calls = (3, 3) if args.quick else (25, 20)
    rng = np.random.default_rng(0)
    old = get_num_threads()
    total: dict = {}
    print(f"{'product':18s} {'MFLOP':>6s} " + " ".join(f"{c:>20s}" for c in
          ("run-time W 1 thread", "run-time W 2 threads", "constant W 2 threads", "NumPy")))
    for name, shape in _products().items():
        _row(name, shape, rng, blocks, calls, total)
    print("sum of medians (us): " + ", ".join(f"{k}: {v * 1e6:.0f}" for k, v in total.items()))
    enc = [rng.standard_normal((cw.SEQ, cw.D_MODEL)).astype(F32)] + [
        (rng.standard_normal(s) / np.sqrt(s[0])).astype(F32) for s in
        [(cw.D_MODEL,)] * 2 + [(cw.D_MODEL, 3 * cw.D_MODEL), (3 * cw.D_MODEL,), (cw.D_MODEL, cw.D_MODEL),
                              (cw.D_MODEL,)] + [(cw.D_MODEL,)] * 2 +
        [(cw.D_MODEL, 4 * cw.D_MODEL), (4 * cw.D_MODEL,), (4 * cw.D_MODEL, cw.D_MODEL), (cw.D_MODEL,)]]
    block = nt.trace(cw.encoder, tuple(enc), backend="cpu", check_trace=False)
    for threads in (1, 2):
        set_num_threads(threads)
        best, med = _times(lambda: block(*enc), blocks, calls)
        print(f"W3 block, {threads} thread(s): median {med * 1e6:.0f} us, minimum {best * 1e6:.0f} us")
    set_num_threads(old)


main()
