"""W2 (MLP 784-512-512-10, float32) at batch 1 in this process, on one tool: the median, 10th and 90th
percentile of the time per call over blocks of back-to-back calls, and for numtrace what its GEMV
thread team did (team_counts). Made for A/B runs of thread settings, one process per run, alternated:

    for i in 1 2 3; do
      python benchmarks/mlp_batch1.py onnxruntime
      NUMTRACE_TEAM_SPIN_US=0 python benchmarks/mlp_batch1.py numtrace
      python benchmarks/mlp_batch1.py numtrace
    done

`onnxruntime` needs the `nox -s peers` environment (the session's model, weights as constants).
`--constant-weights` closes numtrace's trace over the weights (trace constants, as ONNX Runtime gets
them); `--thread-time` runs numtrace on one thread and times the calling thread's CPU time, which a
loaded machine's other processes barely change (for A/B runs of the kernels, not of the team)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_workloads as cw


def mlp_args(batch: int = 1) -> tuple:
    """The peers benchmark's W2 arguments (benchmarks/peers.py)."""
    rng = np.random.default_rng(1)
    dims, params = [784, 512, 512, 10], []
    for i, o in zip(dims, dims[1:]):
        params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32)]
    return (rng.standard_normal((batch, 784)).astype(np.float32), *params)


def _callable(tool: str, a: tuple, constant_weights: bool = False):
    """W2 at batch 1 on `tool`, and numtrace's team counters (None for the others)."""
    if tool == "numpy":
        return (lambda: cw.mlp(*a)), None
    if tool == "onnxruntime":
        import _peers_onnx
        session = _peers_onnx._mlp(SimpleNamespace(make=lambda: a))
        return (lambda: session(*a)), None
    os.environ.setdefault("NUMTRACE_CODEGEN", "sync")
    import numtrace as nt
    from numtrace_cpu.isa import blocks
    if constant_weights:
        x, *weights = a
        closed = nt.trace(lambda v: cw.mlp(v, *weights), (x,))
        return (lambda: closed(x)), getattr(blocks, "team_counts", None)
    traced = nt.trace(cw.mlp, a)
    return (lambda: traced(*a)), getattr(blocks, "team_counts", None)   # older builds lack it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tool", nargs="?", choices=["numpy", "numtrace", "onnxruntime"],
                        help="one tool per process for A/B runs; without it, NumPy then numtrace here")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 blocks of 20 calls")
    parser.add_argument("--constant-weights", action="store_true", help="numtrace: weights as constants")
    parser.add_argument("--thread-time", action="store_true",
                        help="numtrace on one thread, timed in the calling thread's CPU time")
    args = parser.parse_args()
    clock = time.thread_time if args.thread_time else time.perf_counter
    if args.thread_time:
        import numtrace_cpu
        numtrace_cpu.set_num_threads(1)
    blocks, calls = (5, 20) if args.quick else (args.blocks, args.calls)
    a = mlp_args()
    for tool in [args.tool] if args.tool else ["numpy", "numtrace"]:
        fn, counts = _callable(tool, a, args.constant_weights)
        np.testing.assert_allclose(fn(), cw.mlp(*a), rtol=1e-4, atol=1e-6)
        for _ in range(200):
            fn()
        times = []
        for _ in range(blocks):
            start = clock()
            for _ in range(calls):
                fn()
            times.append((clock() - start) / calls * 1e6)
        times.sort()
        spin = os.environ.get("NUMTRACE_TEAM_SPIN_US", "default")
        label = f"{tool} (NUMTRACE_TEAM_SPIN_US={spin})" if tool == "numtrace" else tool
        label += " constant weights" if args.constant_weights and tool == "numtrace" else ""
        label += " thread time" if args.thread_time else ""
        print(f"{label:40s} median {statistics.median(times):7.2f} us  p10 {times[len(times) // 10]:7.2f}  "
              f"p90 {times[-1 - len(times) // 10]:7.2f}  {counts() if counts else ''}", flush=True)


main()
