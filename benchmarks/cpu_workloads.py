"""CPU backend benchmark: W1-W4 and planning, numtrace-cpu beside NumPy eager (and numexpr for W1).

  * W1: (a*b + c) * exp(-d) / (1 + |a|) on four 10M float32 arrays, with a fresh output and with
    out=; also as a fraction of the memory-bandwidth limit (200 MB moved at the speed of a large
    np.copyto measured in the same run);
  * W2: MLP 784-512-512-10 with ReLU and softmax, float32, batch 1 and 256; traced with the weights
    as arguments (BLAS), as constants and as module parameters (the packed-weight kernels), all timed
    in alternation with NumPy eager, with GFLOP/s;
  * W3: pre-LN transformer encoder block (d_model 256, 4 heads, seq 128, batch 1, GELU-tanh MLP x4),
    weights as arguments and as constants;
  * W4: 200 elementwise ops on 64-element float32 arrays (per-call overhead);
  * planning: compiling a 10k-node graph;
  * codegen: W1 (fresh and out=), W4 and a row norm on the block interpreter beside the same passes as
    generated C kernels (numtrace_cpu.compiler), timed in alternation, and the first-call latency: a
    first call while the kernel compiles in the background, the compile itself, and a second process
    that loads the kernel from the disk cache.

Every number is the median of repeated timings; ratio = baseline time / numtrace time (>1: numtrace
is faster). OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from this process's environment
before NumPy loads, so that NumPy's BLAS runs with its own tuning.

    python benchmarks/cpu_workloads.py [--quick] [--only w2,w3]
"""

from __future__ import annotations

import os

_UNSET = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if os.environ.pop(k, None) is not None]

import argparse  # noqa: E402  (after the environment is cleaned for NumPy's BLAS)
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import numtrace as nt  # noqa: E402
import numtrace_cpu  # noqa: E402
from _timing import fmt_seconds, median_seconds, time_pair  # noqa: E402
from numtrace_ir import Graph  # noqa: E402
from numtrace_ir.types import TensorType  # noqa: E402

try:
    import numexpr
except ImportError:  # numexpr is a baseline only
    numexpr = None


def report(name: str, ours: float, baselines: dict[str, float]) -> None:
    parts = [f"{name:<28} numtrace {fmt_seconds(ours)}"]
    for base_name, base in baselines.items():
        parts.append(f"{base_name} {fmt_seconds(base)} ({base / ours:5.2f}x)")
    print("   ".join(parts))


# -- workloads ----------------------------------------------------------------------------------------

def w1(a, b, c, d):
    return (a * b + c) * np.exp(-d) / (1 + np.abs(a))


def mlp(x, w1_, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1_ + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    z = h @ w3 + b3
    e = np.exp(z - np.max(z, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _layernorm(x, g, b):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


SEQ, D_MODEL, HEADS = 128, 256, 4


def encoder(x, g1, b1, wqkv, bqkv, wo, bo, g2, b2, wf1, bf1, wf2, bf2):
    seq, dm, heads = SEQ, D_MODEL, HEADS   # static sizes: the trace is for this shape only
    dh = dm // heads
    h = _layernorm(x, g1, b1)
    qkv = h @ wqkv + bqkv
    q = np.transpose(np.reshape(qkv[:, :dm], (seq, heads, dh)), (1, 0, 2))
    k = np.transpose(np.reshape(qkv[:, dm:2 * dm], (seq, heads, dh)), (1, 2, 0))
    v = np.transpose(np.reshape(qkv[:, 2 * dm:], (seq, heads, dh)), (1, 0, 2))
    s = (q @ k) * (1.0 / math.sqrt(dh))
    p = np.exp(s - np.max(s, axis=-1, keepdims=True))
    p = p / np.sum(p, axis=-1, keepdims=True)
    o = np.reshape(np.transpose(p @ v, (1, 0, 2)), (seq, dm))
    x = x + (o @ wo + bo)
    h = _layernorm(x, g2, b2)
    u = h @ wf1 + bf1
    u = 0.5 * u * (1 + np.tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))
    return x + (u @ wf2 + bf2)


def w4(x, y):
    for _ in range(100):
        x = x * 1.0001 + y
    return x


def _traced(fn, args):
    traced = nt.trace(fn, tuple(args), backend="cpu", check_trace=False)
    out = traced(*args)
    np.testing.assert_allclose(out, fn(*args), rtol=2e-3, atol=1e-4)
    return traced


def bench_w1(n: int, number: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(n, dtype=np.float32) for _ in range(4)]
    traced = _traced(w1, args)
    exe = numtrace_cpu.compile_graph(traced.graph, [TensorType(np.float32, (n,))] * 4)
    out = np.empty(n, np.float32)
    t_np = median_seconds(lambda: w1(*args), number, repeat)
    base = {"numpy": t_np}
    if numexpr is not None:
        expr = "(a*b + c) * exp(-d) / (1 + abs(a))"
        local = dict(zip("abcd", args))
        base["numexpr"] = median_seconds(lambda: numexpr.evaluate(expr, local_dict=local), number, repeat)
    report(f"W1 fresh output (n={n})", median_seconds(lambda: traced(*args), number, repeat), base)
    t_out = median_seconds(lambda: exe(*args, out=(out,)), number, repeat)
    report(f"W1 out= (n={n})", t_out, base)
    t_copy = median_seconds(lambda: np.copyto(out, args[0]), number, repeat)
    bandwidth = 2 * out.nbytes / t_copy
    limit = 5 * out.nbytes / bandwidth
    print(f"{'':<28} np.copyto {out.nbytes / 1e6:.0f} MB: {fmt_seconds(t_copy)} = "
          f"{bandwidth / 1e9:.1f} GB/s; "
          f"W1 moves {5 * out.nbytes / 1e6:.0f} MB: limit {fmt_seconds(limit)}, "
          f"out= reaches {limit / t_out:.0%} of it")


def _side_by_side(name: str, fns: dict, number: int, repeat: int, flops: float = 0.0) -> None:
    """Every variant timed in alternation (`repeat` rounds, one timing of each per round) so that all see
    the same drift of a shared machine; medians reported, ratios to NumPy eager."""
    times: dict = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for k, fn in fns.items():
            times[k].append(median_seconds(fn, number, 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["numpy"]
    parts = [f"{k} {fmt_seconds(t)} ({base / t:4.2f}x)" for k, t in med.items()]
    print(f"{name:<28} " + "   ".join(parts))
    if flops:
        print(f"{'':<28} GFLOP/s: " + ", ".join(f"{k} {flops / t / 1e9:.0f}" for k, t in med.items()))


class _Linear(nt.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w, self.b = nt.Parameter(w), nt.Parameter(b)


class _MLP(nt.Module):
    """mlp() with its weights as module parameters."""

    def __init__(self, params):
        super().__init__()
        self.l1, self.l2, self.l3 = (_Linear(params[i], params[i + 1]) for i in (0, 2, 4))

    def forward(self, x):
        return mlp(x, self.l1.w, self.l1.b, self.l2.w, self.l2.b, self.l3.w, self.l3.b)


def _constant_weights(fn, args, n_inputs: int):
    """`fn` traced with every argument after the first `n_inputs` as a constant (a closure over the
    weights: what the packed-weight kernels take)."""
    weights = args[n_inputs:]

    def closed(*xs):
        return fn(*xs, *weights)
    closed.__name__ = fn.__name__ + "_constant_weights"
    return _traced(closed, args[:n_inputs])


def bench_w2(batch: int, number: int, repeat: int) -> None:
    rng = np.random.default_rng(1)
    dims = [784, 512, 512, 10]
    params = []
    for i, o in zip(dims, dims[1:]):
        params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32)]
    args = [rng.standard_normal((batch, 784)).astype(np.float32), *params]
    traced = _traced(mlp, args)
    const = _constant_weights(mlp, args, 1)
    module = nt.trace(_MLP(params), args[0], check_trace=False)
    np.testing.assert_allclose(module(args[0]), mlp(*args), rtol=2e-3, atol=1e-4)
    x = args[0]
    flops = 2.0 * batch * sum(i * o for i, o in zip(dims, dims[1:]))
    _side_by_side(f"W2 MLP batch {batch}", {
        "numpy": lambda: mlp(*args), "numtrace weights as args": lambda: traced(*args),
        "constants": lambda: const(x), "module params": lambda: module(x)}, number, repeat, flops)


def bench_w3(number: int, repeat: int) -> None:
    rng = np.random.default_rng(2)
    dm, seq = D_MODEL, SEQ

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    def z(n, v=0.0):
        return np.full(n, v, np.float32)

    args = [rng.standard_normal((seq, dm)).astype(np.float32), z(dm, 1), z(dm), w(dm, 3 * dm), z(3 * dm),
            w(dm, dm), z(dm), z(dm, 1), z(dm), w(dm, 4 * dm), z(4 * dm), w(4 * dm, dm), z(dm)]
    traced = _traced(encoder, args)
    const = _constant_weights(encoder, args, 1)
    x = args[0]
    flops = 2.0 * seq * dm * dm * (3 + 1 + 4 + 4) + 2 * 2.0 * seq * seq * dm
    _side_by_side("W3 transformer block", {
        "numpy": lambda: encoder(*args), "numtrace weights as args": lambda: traced(*args),
        "constants": lambda: const(x)}, number, repeat, flops)


def bench_w4(number: int, repeat: int) -> None:
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(64, dtype=np.float32) for _ in range(2)]
    traced = _traced(w4, args)
    report("W4 200 ops on 64 floats", median_seconds(lambda: traced(*args), number, repeat),
           {"numpy": median_seconds(lambda: w4(*args), number, repeat)})


def bench_planning(n_nodes: int, repeat: int) -> None:
    g = Graph()
    x = g.add_input("x", TensorType(np.float32, (64, 32)))
    y = g.add_input("y", TensorType(np.float32, (32,)))
    v = x
    for i in range(n_nodes):
        if i % 50 == 49:
            s = g.create_node("np.sum", [v], attrs={"axis": -1, "keepdims": True}).output
            v = g.create_node("np.subtract", [v, s]).output
        else:
            v = g.create_node(("np.add", "np.multiply", "np.tanh")[i % 3], [v, y][: 1 + (i % 3 != 2)]).output
    g.set_outputs([v])
    types = [TensorType(np.float32, (64, 32)), TensorType(np.float32, (32,))]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe = numtrace_cpu.compile_graph(g, types)
        times.append(time.perf_counter() - start)
    st = exe.stats()
    print(f"{'planning ' + str(len(g)) + '-node graph':<28} numtrace {fmt_seconds(statistics.median(times))}"
          f"   ({st['fused_groups']} fused groups, {st['steps']} steps, target <= 500 ms for 10k nodes)")


def _exes(graph, types):
    """The graph's executable on the interpreter and with generated kernels (compiled now)."""
    from numtrace_cpu import compiler

    old = compiler.set_mode("off")
    try:
        interp = numtrace_cpu.compile_graph(graph, types)
        compiler.set_mode("sync")
        gen = numtrace_cpu.compile_graph(graph, types)
    finally:
        compiler.set_mode(old)
    assert gen.stats()["generated_kernels"] == gen.stats()["fused_groups"]
    return interp, gen


def bench_codegen(n: int, quick: bool) -> None:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(n, dtype=np.float32) for _ in range(4)]
    graph = _traced(w1, args).graph
    interp, gen = _exes(graph, [TensorType(np.float32, (n,))] * 4)
    np.testing.assert_array_equal(gen(*args)[0], interp(*args)[0])
    outs = [np.empty(n, np.float32) for _ in range(2)]
    t_i, t_g = time_pair(lambda: interp(*args), lambda: gen(*args), quick, time.perf_counter)
    report(f"W1 fresh, generated (n={n})", t_g, {"interpreter": t_i})
    t_i, t_g = time_pair(lambda: interp(*args, out=(outs[0],)), lambda: gen(*args, out=(outs[1],)), quick,
                         time.perf_counter)
    report(f"W1 out=, generated (n={n})", t_g, {"interpreter": t_i})
    small = [rng.standard_normal(64, dtype=np.float32) for _ in range(2)]
    interp, gen = _exes(_traced(w4, small).graph, [TensorType(np.float32, (64,))] * 2)
    t_i, t_g = time_pair(lambda: interp(*small), lambda: gen(*small), quick, time.perf_counter)
    report("W4, generated", t_g, {"interpreter": t_i})
    x = rng.standard_normal((2048, 2048) if not quick else (256, 256), dtype=np.float32)
    interp, gen = _exes(_traced(_row_norm, [x]).graph, [TensorType(np.float32, x.shape)])
    t_i, t_g = time_pair(lambda: interp(x), lambda: gen(x), quick, time.perf_counter)
    report(f"row L2 norm {x.shape}, generated", t_g, {"interpreter": t_i})
    _first_call_latency(n)


def _row_norm(x):
    return np.sqrt((x * x).sum(axis=1, keepdims=True)) * 0.5 + x


_LATENCY = """
import sys, time
import numpy as np
import numtrace_cpu
from numtrace_cpu import compiler
from numtrace_ir.types import TensorType
sys.path.insert(0, {bench!r})
from cpu_workloads import _traced, w1
args = [np.random.default_rng(0).standard_normal({n}, dtype=np.float32) for _ in range(4)]
compiler.set_mode("off")
graph = _traced(w1, args).graph
compiler.set_mode({mode!r})
t0 = time.perf_counter()
exe = numtrace_cpu.compile_graph(graph, [TensorType(np.float32, ({n},))] * 4)
t1 = time.perf_counter()
exe(*args)
t2 = time.perf_counter()
compiler.flush()
t3 = time.perf_counter()
exe(*args)
t4 = time.perf_counter()
s = exe.stats()
print(" ".join(f"{{t * 1e3:.1f}}" for t in (t1 - t0, t2 - t1, t3 - t0, t4 - t3)),
      s["generated_runs"], s["interpreted_runs"])
"""


def _first_call_latency(n: int) -> None:
    """First calls in fresh processes sharing one empty disk cache: the executable's build (with the
    kernel's compile when synchronous), its first call, when the kernel is loaded, the next call."""
    import os
    import subprocess
    import sys
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMTRACE_CACHE_DIR=cache)

        def run(mode: str, label: str) -> None:
            code = _LATENCY.format(bench=here, n=n, mode=mode)
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True)
            build, first, ready, second, gen, interp = done.stdout.split()
            print(f"{label:<44} build {build:>7} ms, first call {first:>6} ms, kernel loaded at {ready:>7} "
                  f"ms, next call {second:>6} ms ({interp} interpreted, {gen} generated runs)")

        run("off", "interpreter only:")
        run("background", "background compile, empty cache:")
        with tempfile.TemporaryDirectory() as cold:
            env["NUMTRACE_CACHE_DIR"] = cold
            run("sync", "synchronous compile, empty cache:")
        env["NUMTRACE_CACHE_DIR"] = cache
        run("sync", "second process, kernel in the disk cache:")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions (smoke run)")
    parser.add_argument("--only", default="w1,w2,w3,w4,planning,codegen",
                        help="comma-separated workloads to run (w1, w2, w3, w4, planning, codegen); "
                             "default all")
    args = parser.parse_args()
    only = set(args.only.split(","))
    unknown = only - {"w1", "w2", "w3", "w4", "planning", "codegen"}
    if unknown:
        parser.error(f"--only: unknown workloads {', '.join(sorted(unknown))}")
    print(f"numtrace-cpu {numtrace_cpu.ISA} build, {numtrace_cpu.get_num_threads()} threads; "
          f"unset for this process: {', '.join(_UNSET) or 'nothing'}; ratio = baseline / numtrace")
    quick = args.quick
    if "w1" in only:
        bench_w1(100_000, 3, 3) if quick else bench_w1(10_000_000, 3, 7)
    if "w2" in only:
        bench_w2(1, 20, 3) if quick else bench_w2(1, 300, 11)
        bench_w2(16, 5, 3) if quick else bench_w2(256, 10, 11)
    if "w3" in only and not quick:
        bench_w3(20, 11)
    if "w4" in only:
        bench_w4(100, 3) if quick else bench_w4(3000, 9)
    if "planning" in only:
        bench_planning(500, 1) if quick else bench_planning(10_000, 3)
    if "codegen" in only:
        bench_codegen(100_000, True) if quick else bench_codegen(10_000_000, False)


if __name__ == "__main__":
    main()
