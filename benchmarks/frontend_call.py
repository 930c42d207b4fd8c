"""Frontend benchmark: what a traced call costs beyond its kernels, and what tracing costs.

Workloads (medians of repeated timings, numtrace beside NumPy eager):
  * W4: 200 elementwise ops on 64 float32 values (the per-call overhead workload);
  * MLP 784-512-512-10 at batch 1 (dispatch-bound) and batch 256 (BLAS-bound);
  * the frontend alone: a traced call whose executable returns at once, against an
    empty Python call with the same arguments (signature key, cache lookup, unflatten);
  * tracing + checking the MLP.

    python benchmarks/frontend_call.py [--quick] [--backend cpu]
"""

from __future__ import annotations

import argparse

import numpy as np
import numtrace as nt
from _timing import median_seconds
from numtrace import nn


def w4(x, y):
    for _ in range(100):
        x = x * 1.0001 + y
    return x


class _Instant:
    """An executable that returns its first input: isolates the frontend's share of a call."""

    def __call__(self, *inputs, out=None):
        return (inputs[0],)


def _row(name: str, ours: float, base: float, base_name: str) -> None:
    print(f"{name:<34} numtrace {ours * 1e6:10.2f} us   {base_name} {base * 1e6:10.2f} us   "
          f"ratio {base / ours:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke run)")
    parser.add_argument("--backend", default="cpu" if "cpu" in nt.available_backends() else "reference")
    args = parser.parse_args()
    number, repeat = (20, 3) if args.quick else (2000, 9)
    rng = np.random.default_rng(0)
    print(f"backend {args.backend!r}; medians of {repeat} runs; ratio = baseline time / numtrace time")

    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    traced = nt.trace(w4, (x, y), backend=args.backend)
    _row("W4 200 ops x 64 f32", median_seconds(lambda: traced(x, y), number, repeat),
         median_seconds(lambda: w4(x, y), max(number // 10, 2), repeat), "numpy")

    frontend = nt.trace(w4, (x, y), backend="reference", check_trace=False)
    frontend(x, y)
    frontend._cache = {key: (graph, _Instant()) for key, (graph, _) in frontend._cache.items()}

    def empty(a, b):
        return a

    _row("frontend only (2 args, 1 output)", median_seconds(lambda: frontend(x, y), number * 10, repeat),
         median_seconds(lambda: empty(x, y), number * 10, repeat), "empty call")

    model = nn.Sequential(nn.Linear(784, 512, seed=0), nn.ReLU(), nn.Linear(512, 512, seed=1), nn.ReLU(),
                          nn.Linear(512, 10, seed=2))
    for batch, n in ((1, number), (256, max(number // 50, 3))):
        a = rng.standard_normal((batch, 784)).astype(np.float32)
        mlp = nt.trace(model, a, backend=args.backend)
        _row(f"MLP 784-512-512-10 batch {batch}", median_seconds(lambda m=mlp, a=a: m(a), n, repeat),
             median_seconds(lambda a=a: model(a), n, repeat), "numpy")

    a = rng.standard_normal((8, 784)).astype(np.float32)
    tracing = median_seconds(lambda: nt.trace(model, a, backend=args.backend), 1, 3 if args.quick else 7)
    print(f"{'trace + check the MLP':<34} numtrace {tracing * 1e3:10.2f} ms")


if __name__ == "__main__":
    main()
