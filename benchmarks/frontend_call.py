"""Frontend benchmark: what a traced call costs beyond its kernels, and what tracing costs.

Workloads (medians of repeated timings, numtrace beside NumPy eager):
  * W4: 200 elementwise ops on 64 float32 values (the per-call overhead workload);
  * MLP 784-512-512-10 at batch 1 (dispatch-bound) and batch 256 (BLAS-bound);
  * the frontend alone: a traced call whose executable returns at once, against an
    empty Python call with the same arguments (signature key, cache lookup, unflatten);
  * tracing + checking the MLP, and tracing W4 alone (the cost per recorded op);
  * on the CPU backend, the per-call overhead of small programs: `x * y + 1.0` (two arguments, one
    output) and an in-place SGD step (three arguments, two written back and returned), at 8 and
    1000 elements: the traced call, its executable alone and the fused pass alone (the kernel run
    on bound arrays, which includes a Python call of `run`, so overhead = traced - pass is a lower
    bound; at 8 elements the traced call itself bounds it from above). Targets: overhead
    <= 0.7 us (`x * y + 1.0`) and <= 1.2 us (the SGD step).

    python benchmarks/frontend_call.py [--quick] [--backend cpu] [--cpu-time]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import numtrace as nt
from _timing import median_seconds
from numtrace import nn
from realistic import sgd_momentum_inplace


def w4(x, y):
    for _ in range(100):
        x = x * 1.0001 + y
    return x


class _Instant:
    """An executable that returns its first input: isolates the frontend's share of a call."""

    def __call__(self, *inputs, out=None):
        return (inputs[0],)


def axpy(x, y):
    return x * y + 1.0


def _pass_only(executable, args: tuple):
    """A call of just the executable's fused passes on bound arrays (what the call costs at least), or
    None when it runs other steps too."""
    from numtrace_cpu.steps import ConstantStep, FusedStep

    if not all(isinstance(s, (ConstantStep, FusedStep)) for s in executable._steps):
        return None
    env = dict(enumerate(args))
    runs = []
    for step in executable._steps:
        if isinstance(step, FusedStep):
            for v in step.outputs:
                t = executable._types[v]
                env.setdefault(v, np.empty(t.shape, t.dtype))
            runs.append((step.kernel.run, [env[v] for v in step.inputs + step.outputs]))

    def run():
        for kernel_run, operands in runs:
            kernel_run(operands)
    return run


def _overheads(number: int, repeat: int, clock) -> None:
    """The per-call overhead rows (CPU backend only): traced call, executable alone, pass alone."""
    print(f"{'per-call overhead (cpu)':<34} {'numpy':>10} {'traced':>10} {'exe':>10} {'pass':>10} "
          f"{'overhead':>10}  (us; overhead = traced - pass)")
    programs = (("x * y + 1.0", axpy, np.float64, 2), ("sgd in place", sgd_momentum_inplace, np.float32, 3))
    for n in (8, 1000):
        for name, fn, dtype, nargs in programs:
            rng = np.random.default_rng(n)
            args = tuple(rng.standard_normal(n).astype(dtype) for _ in range(nargs))
            traced = nt.trace(fn, tuple(a.copy() for a in args), backend="cpu")
            traced(*args)
            _, exe = next(iter(traced._cache.values()))
            only_pass = _pass_only(exe, args)
            times = [median_seconds(lambda f=f, a=args: f(*a), number, repeat, clock)
                     for f in (fn, traced, exe)]
            t_pass = median_seconds(only_pass, number, repeat, clock) if only_pass else float("nan")
            print(f"{f'{name} ({n} {np.dtype(dtype).name})':<34} "
                  + " ".join(f"{t * 1e6:10.2f}" for t in (*times, t_pass, times[1] - t_pass)))


def _row(name: str, ours: float, base: float, base_name: str) -> None:
    print(f"{name:<34} numtrace {ours * 1e6:10.2f} us   {base_name} {base * 1e6:10.2f} us   "
          f"ratio {base / ours:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke run)")
    parser.add_argument("--backend", default="cpu" if "cpu" in nt.available_backends() else "reference")
    parser.add_argument("--cpu-time", action="store_true", help="time CPU seconds, not wall time")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
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
    recording = median_seconds(lambda: nt.trace(w4, (x, y), backend=args.backend, check_trace=False),
                               3 if args.quick else 30, repeat, clock)
    print(f"{'trace W4 (no check)':<34} numtrace {recording * 1e3:10.2f} ms = "
          f"{recording / 200 * 1e6:.1f} us per recorded op (target <= 20 us)")
    if args.backend == "cpu":
        _overheads(number * 5, repeat, clock)


if __name__ == "__main__":
    main()
