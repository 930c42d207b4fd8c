"""Host calls: what a NumPy function the registry lacks costs when a trace calls it at run time.

A ``prim.host_call`` node calls the real function on the real arrays; its cost is the function's own
time plus the trace's share (the traced call, the argument assembly, the check of the result's type,
the copy into the planned buffer). Each workload is a traced function that is one host call on small
inputs (the size where the overhead shows), timed beside the same function called eagerly, in
alternation; one traced elementwise op on the same input gives the traced call's floor without a
host call.

Columns: median time per call of NumPy eager and of the trace, the overhead (trace - eager) and the
ratio (trace / eager), per backend.

    python benchmarks/host_calls.py [--quick] [--cpu-time] [--only NAME[,NAME...]] [--backend B,...]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import numtrace as nt
from _timing import fmt_seconds, time_pair

_rng = np.random.default_rng(0)
_x = _rng.normal(size=64)
_q = _rng.uniform(0.0, 1.0, size=16)
_k = _rng.integers(0, 4, size=16).astype(np.float64)

# name -> (function, inputs, whether the trace holds a host call); the NumPy functions here are ones the
# registry lacks, so each runs as a host call (checked below: a function that becomes an op would
# silently stop measuring the host-call path).
WORKLOADS = {
    "lexsort(2 keys of 16)": (lambda q, k: np.lexsort((q, k)), (_q, _k), True),
    "histogram(16, 'auto')": (lambda q: np.histogram(q, bins="auto")[0], (_q,), True),
    "partition(64, 8)": (lambda x: np.partition(x, 8), (_x,), True),
    "x * 1.5 (no host call)": (lambda x: x * 1.5, (_x,), False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="repeat less (a smoke run)")
    parser.add_argument("--only", default="", help="workload names, comma-separated (default: all)")
    parser.add_argument("--cpu-time", action="store_true", help="time CPU seconds, not wall time")
    parser.add_argument("--backend", default="reference,cpu", help="backends, comma-separated")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    only = set(filter(None, args.only.split(",")))
    backends = [b for b in args.backend.split(",") if b in nt.available_backends()]
    print(f"{'workload':<24} {'backend':<10} {'numpy':>12} {'numtrace':>12} {'overhead':>12} {'ratio':>7}")
    for name, (fn, inputs, host) in WORKLOADS.items():
        if only and name not in only:
            continue
        for backend in backends:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", nt.TracerWarning)   # the note that it runs as a host call
                traced = nt.trace(fn, inputs, backend=backend)
            np.testing.assert_array_equal(traced(*inputs), fn(*inputs))
            calls = [n.attrs["func"] for n in traced.graph.nodes if n.op == "prim.host_call"]
            if bool(calls) != host:
                want = "a host call" if host else "no host call"
                raise SystemExit(f"{name}: expected {want} in the trace, got {calls}")
            t_np, t_nt = time_pair(lambda f=fn, a=inputs: f(*a), lambda t=traced, a=inputs: t(*a),
                                   args.quick, clock)
            print(f"{name:<24} {backend:<10} {fmt_seconds(t_np)} {fmt_seconds(t_nt)} "
                  f"{fmt_seconds(t_nt - t_np)} {t_nt / t_np:6.2f}x")


if __name__ == "__main__":
    main()
