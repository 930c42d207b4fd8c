"""Registry shape/dtype inference as the tracer calls it: memoized `OpDef.infer` per common op.

Compared, per call: numtrace's memoized `infer`; the same rule without the memo (`OpDef._infer`: attr
normalisation + rule, what every first sighting of a signature costs); a hand-written NumPy baseline
doing only the core work (`np.broadcast_shapes` + `np.result_type`, no validation); and the eager
NumPy op on 64 float32 elements that the tracer runs for every recorded node anyway.

    python benchmarks/ir_infer.py [--calls 100000] [--repeat 7]

Target: about 1 us per memoized infer, i.e. <= 0.1 s of inference in a 100k-node trace.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import median_seconds
from numtrace_ir import registry
from numtrace_ir.types import ScalarType, TensorType

X = TensorType("f32", ("B", 64))
W = TensorType("f32", (64,))
CASES = [  # (op, input types, attrs, eager NumPy call on real 64-element data)
    ("np.add", (X, W), {}, lambda a, w: np.add(a, w)),
    ("np.multiply", (X, ScalarType("float")), {}, lambda a, w: np.multiply(a, 0.5)),
    ("np.exp", (X,), {}, lambda a, w: np.exp(a)),
    ("np.sum", (X,), {"axis": (1,), "keepdims": True}, lambda a, w: np.sum(a, axis=1, keepdims=True)),
    ("np.reshape", (X,), {"shape": (-1, 8, 8)}, lambda a, w: np.reshape(a, (-1, 8, 8))),
    ("np.transpose", (X,), {"axes": None}, lambda a, w: np.transpose(a)),
    ("np.matmul", (X, TensorType("f32", (64, 64))), {}, None),
    ("np.getitem", (X,), {"index": (slice(1, None), 0)}, lambda a, w: a[1:, 0]),
]


def baseline(types):
    shapes = [t.shape if isinstance(t, TensorType) else () for t in types]
    concrete = [tuple(d if isinstance(d, int) else 1 for d in s) for s in shapes]
    return np.broadcast_shapes(*concrete), np.result_type(
        *(t.dtype if isinstance(t, TensorType) else 1.0 for t in types)
    )


def measure(name, types, attrs, eager, data, n: int, repeat: int) -> tuple[float, ...]:
    """Seconds per call: memoized infer, unmemoized rule, NumPy baseline rule, eager op (nan: n/a)."""
    op = registry.get(name)
    op.infer(types, attrs)
    few = max(n // 10, 1)
    memo = median_seconds(lambda: op.infer(types, attrs), n, repeat)
    cold = median_seconds(lambda: op._infer(types, attrs), few, repeat)
    elementwise = op.kind == "elementwise"
    base = median_seconds(lambda: baseline(types), few, repeat) if elementwise else float("nan")
    eag = median_seconds(lambda: eager(*data), few, repeat) if eager else float("nan")
    return memo, cold, base, eag


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="10k calls, 2 repeats (smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.calls, args.repeat = 10_000, 2
    n = max(args.calls // len(CASES), 1)
    a, w = np.ones((4, 64), np.float32), np.ones(64, np.float32)
    print(f"median of {args.repeat} runs of {n} calls per op, microseconds per call")
    print(
        f"{'op':<14}{'memo infer':>12}{'no memo':>10}{'np baseline':>13}{'eager op':>10}"
        f"{'no memo/memo':>14}{'eager/memo':>12}"
    )
    total = 0.0
    for name, types, attrs, eager in CASES:
        memo, cold, base, eag = measure(name, types, attrs, eager, (a, w), n, args.repeat)
        total += memo * n
        print(
            f"{name:<14}{memo * 1e6:>12.3f}{cold * 1e6:>10.2f}{base * 1e6:>13.2f}{eag * 1e6:>10.2f}"
            f"{cold / memo:>13.1f}x{eag / memo:>11.1f}x"
        )
    print(
        f"{n * len(CASES)} memoized infers in {total:.4f} s "
        f"({total / (n * len(CASES)) * 1e6:.3f} us/call; target ~1 us/call, <= 0.1 s per 100k)"
    )


if __name__ == "__main__":
    main()
