"""Where a model's time goes, step by step, in numtrace and in ONNX Runtime (peers.py's rows with an
ONNX model: W3 by default, its weights as arguments and as constants; `--rows mlp_classifier`...):
numtrace's steps (each step of the executable timed around its call) and ORT's nodes (its own
profiler, `enable_profiling`, which adds a little to ORT's whole call), on one thread (CPU time of
the calling thread for numtrace, ORT's node durations) and two threads (wall time), minimum over the
calls; then the products side by side, numtrace's i-th beside ORT's i-th, each against the machine's
one- and two-thread float32 FMA peak (machine_limits.c, measured in this run). Each tool runs in its
own process.

    python benchmarks/w3_steps.py [--rows W3] [--calls 300] [--pin]

with the python of the peers venv (`python3 -m nox -s peers` installs it: .nox/peers), which has ONNX
Runtime; `nox -s bench` leaves this script out.

--pin puts the calling thread on the first CPU and every other thread of the process (the thread
team's workers, ORT's pool) on the second. On a machine that other programs share, run it under
`chrt -f 1` as well: the two threads then have their CPUs to themselves for the run, as on an idle
machine, where an unpinned, normal-priority run shows how they fare against the other programs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers

CPUS = sorted(os.sched_getaffinity(0))


def _pin(on: bool = True) -> None:
    """The calling thread on the first CPU, every other thread of the process on the second (`on`), or
    every thread on all (before a tool starts threads: they start where their creator may run)."""
    if len(CPUS) < 2:
        return
    me = threading.get_native_id()
    for tid in map(int, os.listdir("/proc/self/task")):
        os.sched_setaffinity(tid, CPUS if not on else {CPUS[0]} if tid == me else {CPUS[1]})


def _timed_numtrace(row, calls: int, pin: bool) -> dict:
    """{threads: {"call": (min, median), "steps": [(name, min seconds)]}} of numtrace on `row`."""
    import numtrace as nt
    import numtrace_cpu.executable as ex
    from numtrace_cpu import set_num_threads

    times: dict = defaultdict(list)
    names: list = []
    plain = ex._runner

    def runner(step, types):   # each step's runner, timed (its FusedCall run through the kernel's run())
        run = plain(step, types)
        what = type(step).__name__
        if isinstance(step, ex.MatmulStep):
            a, b = (tuple(types[v].shape) for v in step.inputs[:2])
            flops = 2 * math.prod(types[step.outputs[0]].shape) * a[-1]
            what = f"product {a} @ {b} [{flops / 1e6:.1f} MFLOP]"
        elif isinstance(step, ex.FusedStep):
            what = "pass " + ",".join(n.op.split(".")[-1] for n in step.nodes)
        name = f"{len(names):02d} {what}"[:64]
        names.append(name)
        if isinstance(run, ex.FusedCall):
            kernel, ids = step.kernel, step.inputs + step.outputs
            scalars = [(k, dt) for k, dt in enumerate(step.scalar_inputs) if dt is not None]

            def call(env, nthreads):
                operands = [env[i] for i in ids]
                for k, dt in scalars:
                    operands[k] = np.asarray(operands[k], dt)
                kernel.run(operands, nthreads)
        else:
            call = run
        clock = time.thread_time

        def timed(env, nthreads):
            t0, w0 = clock(), time.perf_counter()
            call(env, nthreads)
            times[name].append((clock() - t0, time.perf_counter() - w0))
        return timed

    ex._runner = runner
    try:
        inputs = row.make()
        fn = nt.trace(row.numpy_fn, inputs, backend="cpu", check_trace=False)
        fn(*inputs)   # the executable is made at the first call
    finally:
        ex._runner = plain
    out = {}
    for threads in (1, 2):
        set_num_threads(threads)
        _pin(False)
        for _ in range(20):
            fn(*inputs)
        if pin:
            _pin(True)
        times.clear()
        calls_s = []
        for _ in range(calls):
            start = time.perf_counter()
            fn(*inputs)
            calls_s.append(time.perf_counter() - start)
        k = 0 if threads == 1 else 1   # one thread: its CPU time; two: wall time
        out[threads] = {"call": (min(calls_s), float(np.median(calls_s))),
                        "steps": [(n, min(t[k] for t in times[n])) for n in names if n in times]}
    return out


def _timed_onnxruntime(row, calls: int, pin: bool) -> dict:
    import _peers_onnx
    import onnxruntime as ort

    out = {}
    inputs = row.make()
    for threads in (1, 2):
        def options(threads=threads):
            o = ort.SessionOptions()
            o.intra_op_num_threads = threads
            o.enable_profiling = True
            return o
        _peers_onnx.new_options = options
        _pin(False)
        fn = _peers_onnx.session_for(row)
        for _ in range(20):
            fn(*inputs)
        if pin:
            _pin(True)
        calls_s = []
        for _ in range(calls):
            start = time.perf_counter()
            fn(*inputs)
            calls_s.append(time.perf_counter() - start)
        path = fn.session.end_profiling()
        with open(path) as f:
            events = json.load(f)
        os.remove(path)
        durations: dict = defaultdict(list)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                node = (e["name"][:-len("_kernel_time")], e["args"].get("op_name", ""))
                durations[node].append(e["dur"] * 1e-6)
        out[threads] = {"call": (min(calls_s), float(np.median(calls_s))),
                        "steps": [(f"{i:02d} {op} {name}"[:64], min(d))
                                  for i, ((name, op), d) in enumerate(durations.items())]}
    return out


def _is_product(name: str) -> bool:
    """Whether a step ("NN kind ...": numtrace's "product", an ORT op type) is a matrix product."""
    return name.split()[1] in ("product", "Gemm", "FusedGemm", "MatMul", "FusedMatMul")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="W3", help="peers.py rows whose name contains one of these words")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--pin", action="store_true", help="the caller on one CPU, the rest on another")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rows = peers.select_rows(["w", "examples"], False, args.rows.split(","))
    if args.worker:
        tool, index = args.worker.split(":")
        timed = _timed_numtrace if tool == "numtrace" else _timed_onnxruntime
        print(json.dumps(timed(rows[int(index)], args.calls, args.pin)))
        return
    from _peers_onnx import MODELS

    env = {**os.environ, "NUMTRACE_CODEGEN": os.environ.get("NUMTRACE_CODEGEN", "sync")}
    measured: dict = defaultdict(dict)
    for index, row in enumerate(rows):
        if row.tag not in MODELS:
            continue
        for tool in ("numtrace", "onnxruntime"):
            command = [sys.executable, __file__, "--worker", f"{tool}:{index}", "--rows", args.rows,
                       "--calls", str(args.calls)]
            command += ["--pin"] if args.pin else []
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            if done.returncode:
                print(f"{tool} ({row.name}): failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
                continue
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            measured[row.name][tool] = {int(k): v for k, v in answer.items()}
    # after the tools: machine_limits.c pins this process's threads, and a child would start on one CPU
    limits = peers.measure_limits(rows)
    peak = {1: limits["fma_flops_1"], 2: limits["fma_flops"]}
    print(f"float32 FMA peak (machine_limits.c): {peak[1] / 1e9:.0f} GFLOP/s on one thread, "
          f"{peak[2] / 1e9:.0f} on two")
    for name, results in measured.items():
        _print_row(name, results, peak)


def _print_row(name: str, results: dict, peak: dict) -> None:
    """Each tool's steps, then the products side by side (the i-th of numtrace beside ORT's i-th)."""
    for tool, per in results.items():
        print(f"\n{tool}, {name}: call min / median: 1 thread {per[1]['call'][0] * 1e6:.0f} / "
              f"{per[1]['call'][1] * 1e6:.0f} us, 2 threads {per[2]['call'][0] * 1e6:.0f} / "
              f"{per[2]['call'][1] * 1e6:.0f} us; steps (min; 1 thread | 2 threads):")
        two = dict(per[2]["steps"])
        for step, t1 in per[1]["steps"]:
            print(f"  {step:64s} {t1 * 1e6:7.1f} | {two.get(step, float('nan')) * 1e6:7.1f} us")
    products = {tool: [(n, t1, dict(per[2]["steps"]).get(n)) for n, t1 in per[1]["steps"] if _is_product(n)]
                for tool, per in results.items()}
    ours = products.get("numtrace", [])
    print(f"\n{name}: the products, min us (share of the FMA peak), 1 thread | 2 threads:")
    for i, (step, _, _) in enumerate(ours):
        flops = float(step.rsplit("[", 1)[1].split()[0]) * 1e6
        cells = []
        for tool, ps in products.items():
            if i < len(ps) and ps[i][2] is not None:
                _, t1, t2 = ps[i]
                cells.append(f"{tool} {t1 * 1e6:6.1f} ({flops / t1 / peak[1]:4.0%}) | "
                             f"{t2 * 1e6:6.1f} ({flops / t2 / peak[2]:4.0%})")
        print(f"  {flops / 1e6:6.1f} MFLOP  " + "   ".join(cells))


if __name__ == "__main__":
    main()
