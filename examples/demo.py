"""numtrace in one page: trace a small model, look at its graph and code, check it, run it.

Builds a numtrace.nn MLP, traces it with check inputs at other batch sizes, prints
the recorded graph and the generated NumPy code, then runs the trace on fresh inputs
and compares with the untraced model. Exits with status 1 if any result differs.

    python examples/demo.py [--backend cpu|reference|triton]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import numtrace as nt
from numtrace import nn


class MLP(nt.Module):
    """784 -> 128 -> 10 with LayerNorm and GELU; dropout is a no-op in eval mode."""

    def __init__(self, seed: int = 0):
        super().__init__()
        self.fc1 = nn.Linear(784, 128, seed=seed)
        self.norm = nn.LayerNorm(128)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(128, 10, seed=seed + 1)

    def forward(self, x):
        h = self.drop(self.act(self.norm(self.fc1(x))))
        logits = self.fc2(h)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def main() -> int:
    default = "cpu" if "cpu" in nt.available_backends() else "reference"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=default, help=f"backend to run on (default: {default})")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    model = MLP().eval()
    example = rng.standard_normal((32, 784)).astype(np.float32)
    checks = [(rng.standard_normal((n, 784)).astype(np.float32),) for n in (1, 7)]

    start = time.perf_counter()
    traced = nt.trace(model, example, check_inputs=checks, backend=args.backend)
    print(f"traced and checked against {len(checks)} check inputs in {time.perf_counter() - start:.2f} s "
          f"(backend {traced.methods['forward'].backend!r}, {traced!r})")

    print("\n== graph ==")
    print(traced.graph)
    print("== code ==")
    print(traced.code)

    worst = 0.0
    for batch in (1, 32, 100):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        got, want = traced(x), model(x)
        error = float(np.max(np.abs(got - want)))
        worst = max(worst, error)
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
        print(f"batch {batch:3d}: max |traced - numpy| = {error:.2e}  {'OK' if ok else 'MISMATCH'}")
        if not ok:
            return 1

    # Weights are graph inputs: loading new ones changes the outputs without re-tracing.
    new_state = {k: v * 0.5 for k, v in model.state_dict().items()}
    traced.load_state_dict(new_state)
    model.load_state_dict(new_state)
    x = rng.standard_normal((4, 784)).astype(np.float32)
    if not np.allclose(traced(x), model(x), rtol=1e-4, atol=1e-5):
        print("after load_state_dict: MISMATCH")
        return 1
    print(f"after load_state_dict: OK; all results match NumPy (worst difference {worst:.2e})")
    for batch in (1, 256):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        ours = _median_seconds(lambda x=x: traced(x))
        theirs = _median_seconds(lambda x=x: model(x))
        print(f"batch {batch:3d}: numtrace ({args.backend}) {ours * 1e6:8.1f} us, "
              f"NumPy {theirs * 1e6:8.1f} us: {_speed(theirs / ours)} (median of 7 runs)")
    return 0


def _speed(ratio: float) -> str:
    """``2.50x faster`` for a ratio of NumPy's time to ours above 1, ``1.14x slower`` below."""
    return f"{ratio:.2f}x faster" if ratio >= 1.0 else f"{1.0 / ratio:.2f}x slower"


def _median_seconds(fn, repeat: int = 7) -> float:
    """Median time of one call, from `repeat` runs of as many calls as fit in about 20 ms."""
    fn()
    calls = max(1, int(0.02 / max(_time(fn, 1), 1e-7)))
    return sorted(_time(fn, calls) / calls for _ in range(repeat))[repeat // 2]


def _time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
