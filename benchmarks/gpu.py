"""GPU benchmark of numtrace-triton beside CuPy (and PyTorch, where present) running the same code eagerly.

  * W1: (a*b + c) * exp(-d) / (1 + |a|) on four 100M float32 arrays: achieved bandwidth (5 x 400 MB
    moved) as a fraction of a device-to-device copy measured in the same run (target >= 85%);
  * row softmax of a 4096 x 4096 float32 matrix; layernorm of 4096 x 4096 (both: one kernel each);
  * MLP 784-512-512-10 (ReLU), batch 4096: matmuls with bias and activation fused into the store,
    against cuBLAS (CuPy's matmul) plus separate elementwise kernels (target >= 90%);
  * data movement: a gather ``x[idx]`` (10M of 10M float32), a scatter ``x[idx] = v`` with repeated
    indices (1M values into 1000 rows of 10M), a boolean-mask read ``x[x > 0] * 2`` (10M, about half
    kept: the count comes back to the host once per call), and ``einsum`` (a batched matmul
    ``bij,bjk->bik`` of 64 x 256 x 256 and a trace-like ``bii->b``).

Moved values are checked bit for bit against NumPy (the scatter: the value NumPy's sequential
assignment leaves), computed ones within a relative error of 1e-3.

GPU times come from CUDA events around repeated calls (medians); ratio = baseline / numtrace
(>1: numtrace is faster). numtrace's executables are called with CuPy arrays, so no host copies are
timed. Under ``TRITON_INTERPRET=1`` the same workloads run at tiny sizes in Triton's interpreter
against NumPy: results are checked, and the times say nothing about GPU speed (``--quick`` is the smoke
run the tests make). Without a GPU and without the interpreter it says so and exits 0.

    python benchmarks/gpu.py [--quick] [--only scatter,mlp]

For autotuned kernels (matmuls) it also prints the config triton.autotune chose and each config's time.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np
import numtrace as nt
import numtrace_triton
from _timing import median_seconds
from numtrace_ir.types import TensorType
from numtrace_triton.device_memory import interpreter_enabled

try:
    import cupy
except ImportError:  # the GPU baseline and device arrays; absent under the interpreter
    cupy = None
try:
    import torch
except ImportError:  # an optional second baseline
    torch = None


# -- workloads (plain NumPy: traced by numtrace, run eagerly by CuPy through NumPy's dispatch) ---------


def w1(a, b, c, d):
    return (a * b + c) * np.exp(-d) / (1 + np.abs(a))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    c = x - mean
    var = (c * c).mean(axis=-1, keepdims=True)
    return c / np.sqrt(var + 1e-5) * g + b


def mlp(x, w1_, b1, w2, b2, w3, b3):
    h = np.maximum(x @ w1_ + b1, 0)
    h = np.maximum(h @ w2 + b2, 0)
    return h @ w3 + b3


def gather(x, idx):
    return x[idx]


def scatter(x, idx, v):
    y = x.copy()
    y[idx] = v  # repeated indices: NumPy's sequential assignment leaves the last value
    return y


def mask_read(x):
    return x[x > 0] * 2.0


def einsum_bmm(a, b):
    return np.einsum("bij,bjk->bik", a, b)


def einsum_trace(a):
    return np.einsum("bii->b", a)


def torch_version(name):
    """The same workload written for PyTorch (a second eager baseline), or None."""
    return {
        "w1": lambda a, b, c, d: (a * b + c) * torch.exp(-d) / (1 + torch.abs(a)),
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "layernorm": lambda x, g, b: torch.nn.functional.layer_norm(x, x.shape[-1:], g, b, 1e-5),
        "mlp": lambda x, w1_, b1, w2, b2, w3, b3: torch.relu(torch.relu(x @ w1_ + b1) @ w2 + b2) @ w3 + b3,
        "gather": lambda x, idx: x[idx],
        "mask_read": lambda x: x[x > 0] * 2.0,
        "einsum_bmm": lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        "einsum_trace": lambda a: torch.einsum("bii->b", a),
    }.get(name)


def make_inputs(name: str, gpu: bool, quick: bool, rng: np.random.Generator) -> list[np.ndarray]:
    big = gpu and not quick

    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    if name == "w1":
        n = 100_000_000 if big else (10_000_000 if gpu else 4096)
        return [f32(n) for _ in range(4)]
    n = 10_000_000 if gpu else 4096
    if name in ("gather", "mask_read"):
        x = f32(n)
        return [x, rng.integers(-n, n, n)] if name == "gather" else [x]
    if name == "scatter":
        k = n // 10
        return [f32(n), rng.integers(0, min(1000, n), k), f32(k)]
    if name.startswith("einsum"):
        b, m = (64, 256) if gpu else (4, 16)
        return [f32(b, m, m), f32(b, m, m)] if name == "einsum_bmm" else [f32(b, m, m)]
    if name in ("softmax", "layernorm"):
        rows, cols = (4096, 4096) if gpu else (64, 256)
        extra = [f32(cols), f32(cols)] if name == "layernorm" else []
        return [f32(rows, cols)] + extra
    batch = 4096 if gpu else 16
    return [
        f32(batch, 784),
        f32(784, 512, scale=0.05),
        f32(512),
        f32(512, 512, scale=0.05),
        f32(512),
        f32(512, 10, scale=0.05),
        f32(10),
    ]


WORKLOADS = {"w1": w1, "softmax": softmax, "layernorm": layernorm, "mlp": mlp, "gather": gather,
             "scatter": scatter, "mask_read": mask_read, "einsum_bmm": einsum_bmm,
             "einsum_trace": einsum_trace}
# Workloads that move values (the mask read's doubling is exact): checked bit for bit.
EXACT = {"gather", "scatter", "mask_read"}


# -- timing ---------------------------------------------------------------------------------------------


def gpu_median_ms(fn, repeat: int, number: int) -> float:
    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(number):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / number)
    return statistics.median(times)


def copy_bandwidth_gbs(nbytes: int, repeat: int) -> float:
    """Device-to-device copy speed (read + write) measured now, the ceiling for W1."""
    src = cupy.empty(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    ms = gpu_median_ms(lambda: dst.__setitem__(Ellipsis, src), repeat, 5)
    return 2 * nbytes / (ms * 1e-3) / 1e9


# -- one workload ---------------------------------------------------------------------------------------


def compile_triton(fn, inputs: list[np.ndarray]):
    """numtrace's executable for ``fn`` at these inputs (traced once; the triton backend compiles it)."""
    traced = nt.trace(fn, tuple(inputs), backend="reference", check_trace=False)
    types = [TensorType(a.dtype, a.shape) for a in inputs]
    return numtrace_triton.Backend().compile(traced.graph, types)


def run(
    name: str, gpu: bool, quick: bool, repeat: int, rng: np.random.Generator, copy_gbs: float | None
) -> None:
    fn = WORKLOADS[name]
    host_inputs = make_inputs(name, gpu, quick, rng)
    exe = compile_triton(fn, host_inputs)
    expected = fn(*host_inputs)
    if gpu:
        dev = [cupy.asarray(a) for a in host_inputs]
        got = cupy.asnumpy(exe(*dev)[0])
        ours = gpu_median_ms(lambda: exe(*dev), repeat, 3)
        baselines = {"cupy": gpu_median_ms(lambda: fn(*dev), repeat, 3)}
        torch_fn = torch_version(name) if torch is not None else None
        if torch_fn is not None:
            tdev = [torch.as_tensor(a, device="cuda") for a in dev]
            baselines["torch"] = gpu_median_ms(lambda: torch_fn(*tdev), repeat, 3)
    else:
        got = exe(*host_inputs)[0]
        ours = 1e3 * median_seconds(lambda: exe(*host_inputs), 1, repeat)
        baselines = {"numpy": 1e3 * median_seconds(lambda: fn(*host_inputs), 1, repeat)}
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise SystemExit(f"{name}: numtrace-triton returned {got.dtype}{got.shape}, NumPy "
                         f"{expected.dtype}{expected.shape}")
    if name in EXACT and got.tobytes() != expected.tobytes():
        raise SystemExit(f"{name}: numtrace-triton result is not NumPy's bit for bit")
    err = float(np.max(np.abs(got - expected) / (1 + np.abs(expected)), initial=0.0))
    line = f"{name:<12} numtrace-triton {ours:9.3f} ms"
    for base, ms in baselines.items():
        line += f"   {base} {ms:9.3f} ms ({ms / ours:5.2f}x)"
    host = exe.stats().get("host_steps", [])
    line += f"   kernels {len(exe.kernels)}   max rel err {err:.1e}"
    line += f"   host steps {host}" if host else ""
    if name == "w1" and gpu and copy_gbs:
        moved = 5 * host_inputs[0].nbytes
        achieved = moved / (ours * 1e-3) / 1e9
        line += f"   {achieved:6.0f} GB/s = {achieved / copy_gbs:5.1%} of copy ({copy_gbs:.0f} GB/s)"
    print(line, flush=True)
    for kernel, tuned in exe.stats().get("tuned", {}).items():  # triton.autotune's choice and trials
        timings = sorted(tuned["timings_ms"].items(), key=lambda item: item[1])
        trials = ", ".join(f"{c} {ms:.3f}" for c, ms in timings)
        print(f"    {kernel}: {tuned['chosen']}  (ms: {trials})", flush=True)
    if err > 1e-3:
        raise SystemExit(f"{name}: numtrace-triton result differs from NumPy (max rel err {err:.1e})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads (default all)")
    args = parser.parse_args()
    names = args.only.split(",")
    if not set(names) <= set(WORKLOADS):
        unknown = sorted(set(names) - set(WORKLOADS))
        parser.error(f"--only: unknown workloads {unknown}; known: {list(WORKLOADS)}")
    gpu = not interpreter_enabled() and cupy is not None
    ok, why = numtrace_triton.Backend().is_available()
    if not ok:  # no GPU here: nothing to measure, and not a failure
        print(f"no GPU benchmark: the triton backend is unavailable here ({why})")
        return
    if not gpu:
        print(
            "no GPU run (TRITON_INTERPRET=1 or CuPy missing): tiny sizes in Triton's interpreter against "
            "NumPy; times are not GPU performance"
        )
    repeat = 3 if args.quick or not gpu else 10
    copy_gbs = None
    if gpu and "w1" in names:
        copy_gbs = copy_bandwidth_gbs(400_000_000 if not args.quick else 40_000_000, repeat)
    if copy_gbs:
        print(f"device-to-device copy: {copy_gbs:.0f} GB/s")
    rng = np.random.default_rng(0)
    for name in names:
        run(name, gpu, args.quick, repeat, rng, copy_gbs)


if __name__ == "__main__":
    main()
