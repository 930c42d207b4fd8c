"""numtrace beside the tools a user would pick instead, side by side on one machine in one run.

Rows: W1-W4 of cpu_workloads.py, the examples' models (examples/), and realistic.py's programs. Columns:
NumPy eager, numtrace (cpu backend), torch.compile on the NumPy code itself ("torch(np)"), torch.compile
on the workload rewritten in torch ("torch"), ONNX Runtime ("ORT": the models, built with onnx.helper),
numexpr and numba (W1, W4), and a hand-written C loop compiled at run time with the system C compiler
(two threads) as the limit row for W1. Each tool runs in its own process, one after the other: the
OpenMP threads of one tool spin on after its last call and would slow the next.

Each cell is the median time per call (after a warm-up call that compiles: numtrace's generated kernels
too, with ``NUMTRACE_CODEGEN=sync`` unless it is set); every tool's result is
checked against NumPy's first, and a wrong one is reported instead of timed. A tool that is not
installed is skipped with a line saying so. The ratios: ``xNumPy`` = NumPy / numtrace, ``vs best`` =
best peer / numtrace (>1: numtrace is ahead of every peer on that row), ``vs limit`` = the row's limit
/ numtrace and ``peer/lim`` = limit / best peer. The limit is the C loop's time (W1), or for the rows
of matrix products (W2, W3, the MLP example) what the machine allows, measured in the same run by
machine_limits.c: the products' FLOPs at the all-core float32 FMA peak ("FMA peak"), or at batch 1
the weights' bytes at the rate the cores read them from their caches ("weights read").

    python benchmarks/peers.py [--quick] [--only w,examples,realistic] [--rows name,...] [--tools numpy,...]
                               [--rounds N]

--rows: only the rows whose name contains one of the words (``--rows nbody_forces`` its three sizes).

--quick: smaller W1, the examples' quick sizes, realistic.py's programs at the medium size only and a
subset of them, fewer repeats (a few minutes, most of it torch.compile compiling). ``nox -s peers``
installs the optional tools and runs this.

--rounds N (default 1): run the tools N times, interleaved: each round runs every tool once, each in its
own process, in an order rotated by one tool per round (no tool always runs first or always last). A
host's memory bandwidth can drift by 1.5x between minutes, which flips memory-bound rows between ahead
and behind from one run to the next; two tools timed in the same round (seconds apart with --rows) see
much the same drift, so their ratio is what to read. Each cell is then the median over rounds of the
per-round medians, each ratio the median of the per-round ratios followed by their min-max, and the
rows whose ratios cross 1.00 or move by more than 10% between rounds get a line per round under the
table. Each round checks every result again; a wrong one in any round is reported instead of the time,
and blanks the row's ratios. For rows that swing, use ``--rounds 5`` (with ``--rows NAME``: five rounds
of every row take five runs' time).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "examples")]

from _timing import calls_per_timing, fmt_seconds, median_seconds  # noqa: E402

TOOLS = {
    "numpy": "NumPy eager",
    "numtrace": "numtrace, cpu backend",
    "torch.compile": "torch.compile on the NumPy code",
    "torch.compile/torch": "torch.compile on the workload rewritten in torch",
    "onnxruntime": "ONNX Runtime on the models (built with onnx.helper)",
    "numexpr": "numexpr",
    "numba": "numba, @njit(parallel=True) loops",
    "C loop": "hand-written C loop, 2 OpenMP threads, expf vectorized (the limit row for W1)",
}
COLUMNS = {"numpy": "NumPy", "numtrace": "numtrace", "torch.compile": "torch(np)",
           "torch.compile/torch": "torch", "onnxruntime": "ORT", "numexpr": "numexpr", "numba": "numba",
           "C loop": "C loop"}
NEEDS = {"numtrace": ["numtrace", "numtrace_cpu"], "torch.compile": ["torch"],
         "torch.compile/torch": ["torch"], "onnxruntime": ["onnxruntime", "onnx"], "numexpr": ["numexpr"],
         "numba": ["numba"]}
PEERS = ["torch.compile", "torch.compile/torch", "onnxruntime", "numexpr", "numba"]


@dataclass
class Row:
    """One workload: its NumPy program (or model), how to make its inputs, and what the tools call."""

    name: str
    group: str
    numpy_fn: Callable
    make: Callable[[], tuple]
    kind: str = "function"   # "function", "module" (a numtrace.Module), "inplace" (writes its inputs)
    tag: str = ""            # the key of the torch/ONNX/numexpr/numba/C versions (w1, w1_out, mlp, ...)
    flops: float = 0.0       # the matrix products' floating-point operations per call (an FMA is 2)
    weight_bytes: int = 0    # the weights a call reads, for the batch-1 rows' "weights read" limit


# -- workloads ------------------------------------------------------------------------------------------

def _w_rows(quick: bool) -> list[Row]:
    import cpu_workloads as cw

    n = 2_000_000 if quick else 10_000_000

    def w1_args():
        rng = np.random.default_rng(0)
        return tuple(rng.standard_normal(n, dtype=np.float32) for _ in range(4))

    def mlp_args(batch):
        rng = np.random.default_rng(1)
        dims, params = [784, 512, 512, 10], []
        for i, o in zip(dims, dims[1:]):
            params += [(rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32)]
        return (rng.standard_normal((batch, 784)).astype(np.float32), *params)

    def encoder_args():
        rng = np.random.default_rng(2)
        dm, seq = cw.D_MODEL, cw.SEQ

        def w(*shape):
            return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

        def z(k, v=0.0):
            return np.full(k, v, np.float32)

        return (rng.standard_normal((seq, dm)).astype(np.float32), z(dm, 1), z(dm), w(dm, 3 * dm), z(3 * dm),
                w(dm, dm), z(dm), z(dm, 1), z(dm), w(dm, 4 * dm), z(4 * dm), w(4 * dm, dm), z(dm))

    def encoder_closed():
        """The encoder with its weights closed over: trace constants to numtrace (packed once), as
        ONNX Runtime's initializers are, where the W3 row passes them as arguments on every call."""
        weights = encoder_args()[1:]

        def encoder_constant_weights(x):
            return cw.encoder(x, *weights)
        encoder_constant_weights.weights = weights
        return encoder_constant_weights

    def mlp_closed(batch):
        """W2 with its weights closed over (trace constants to numtrace, packed once), as ONNX Runtime
        gets them as initializers; the "W2 MLP batch" rows pass them as arguments on every call."""
        x, *weights = mlp_args(batch)

        def mlp_constant_weights(x):
            return cw.mlp(x, *weights)
        mlp_constant_weights.weights = weights
        return mlp_constant_weights, lambda: (x.copy(),)

    def w4_args():
        rng = np.random.default_rng(3)
        return tuple(rng.standard_normal(64, dtype=np.float32) for _ in range(2))

    mlp_macs = 784 * 512 + 512 * 512 + 512 * 10
    dm, seq, heads = cw.D_MODEL, cw.SEQ, cw.HEADS
    encoder_macs = seq * dm * (3 * dm + dm + 8 * dm) + 2 * heads * seq * seq * (dm // heads)
    mlp1, mlp256 = mlp_closed(1), mlp_closed(256)
    return [
        Row(f"W1 fresh output (n={n:.0e})", "w", cw.w1, w1_args, tag="w1"),
        Row(f"W1 into out= (n={n:.0e})", "w", cw.w1, w1_args, kind="out", tag="w1"),
        Row("W2 MLP batch 1", "w", cw.mlp, lambda: mlp_args(1), tag="mlp", flops=2.0 * mlp_macs,
            weight_bytes=4 * mlp_macs),
        Row("W2 MLP batch 256", "w", cw.mlp, lambda: mlp_args(256), tag="mlp", flops=2.0 * 256 * mlp_macs),
        Row("W2 batch 1, constant weights", "w", mlp1[0], mlp1[1], tag="mlp_constants",
            flops=2.0 * mlp_macs, weight_bytes=4 * mlp_macs),
        Row("W2 batch 256, constant weights", "w", mlp256[0], mlp256[1], tag="mlp_constants",
            flops=2.0 * 256 * mlp_macs),
        Row("W3 transformer block", "w", cw.encoder, encoder_args, tag="encoder", flops=2.0 * encoder_macs),
        Row("W3 block, constant weights", "w", encoder_closed(), lambda: encoder_args()[:1],
            tag="encoder_constants", flops=2.0 * encoder_macs),
        Row("W4 200 ops on 64 floats", "w", cw.w4, w4_args, tag="w4"),
    ]


def _example_rows(quick: bool) -> list[Row]:
    import cnn
    import heat_equation
    import mlp_classifier
    import transformer_block

    def f32(*shape, seed=0, uniform=False):
        rng = np.random.default_rng(seed)
        return (rng.random(shape) if uniform else rng.standard_normal(shape)).astype(np.float32)

    mlp_batch, cnn_batch = (64, 16) if quick else (512, 64)
    tokens = (4, 24) if quick else (16, 64)
    plates = (4, 64) if quick else (16, 256)
    classifier = mlp_classifier.Classifier().eval()
    layers = (classifier.fc1, classifier.fc2, classifier.head)
    classifier_macs = sum(np.asarray(fc.weight).size for fc in layers)
    return [
        Row(f"example mlp_classifier (batch {mlp_batch})", "examples", classifier,
            lambda: (f32(mlp_batch, 784, uniform=True),), kind="module", tag="classifier",
            flops=2.0 * mlp_batch * classifier_macs),
        Row(f"example transformer_block {tokens}", "examples", transformer_block.EncoderBlock().eval(),
            lambda: (f32(*tokens, 64),), kind="module"),
        Row(f"example cnn (batch {cnn_batch})", "examples", cnn.SmallCNN().eval(),
            lambda: (f32(cnn_batch, 1, 28, 28, uniform=True),), kind="module", tag="cnn"),
        Row(f"example heat_equation {plates[0]}x{plates[1]}^2", "examples", heat_equation.diffuse,
            lambda: tuple(np.random.default_rng(s).random((plates[0], *plates[1:] * 2)) for s in (0, 1))),
    ]


# A quick run takes these (one per kind of program: matmul chains, reductions, stencils, scans,
# gathers, in-place updates, transcendental chains), at the medium size.
QUICK_REALISTIC = [
    "softmax_regression", "mlp_layernorm_gelu", "stencil_2d", "black_scholes", "cumsum_returns",
    "row_normalize",
    "one_hot", "adam_inplace", "logsumexp_rows", "haversine",
]


def _realistic_rows(quick: bool) -> list[Row]:
    import realistic

    sizes = ["medium"] if quick else list(realistic.SIZES)
    rows = []
    for prog in realistic.PROGRAMS:
        if quick and prog.name not in QUICK_REALISTIC:
            continue
        for size in sizes:
            def make(prog=prog, size=size):
                return prog.make(realistic.SIZES[size], np.random.default_rng(0))
            rows.append(Row(f"{prog.name} ({size})", "realistic", prog.fn, make,
                            kind="inplace" if prog.inplace else "function"))
    return rows


GROUPS = {"w": _w_rows, "examples": _example_rows, "realistic": _realistic_rows}


# -- the tools ------------------------------------------------------------------------------------------
# Each returns, for a row, a callable of the row's inputs (the timed call) or None when it does not run
# that row. Compilation happens at the first call, which the timing's warm-up makes.

def _numpy_call(row: Row) -> Callable | None:
    if row.kind == "out":
        out = np.empty_like(row.make()[0])
        return lambda a, b, c, d: np.divide((a * b + c) * np.exp(-d), 1 + np.abs(a), out=out)
    return row.numpy_fn


def _numtrace_call(row: Row) -> Callable | None:
    import numtrace as nt

    example = row.make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = nt.trace(row.numpy_fn, tuple(a.copy() for a in example), backend="cpu", check_trace=False)
    if row.kind == "out":
        import numtrace_cpu
        from numtrace_ir.types import TensorType

        exe = numtrace_cpu.compile_graph(traced.graph, [TensorType(a.dtype, a.shape) for a in example])
        out = np.empty_like(example[0])
        return lambda *args: exe(*args, out=(out,))[0]
    return traced


def _torch_numpy_call(row: Row) -> Callable | None:
    import torch

    if row.kind == "module":
        # torch.compile's NumPy support cannot run Parameter.__array_wrap__ (a view as np.ndarray):
        # the same model with its parameters as plain arrays computes the same. Copies: a plain view of
        # a parameter's own memory assigned back is what `self.w -= ...` gives, so it stays a Parameter.
        for _, module in row.numpy_fn.named_modules():
            for name, value in list(module._state_dicts()[0].items()):
                if value is not None:
                    setattr(module, name, np.array(value))
    return torch.compile(row.numpy_fn)


def _torch_call(row: Row) -> Callable | None:
    import _peers_torch
    import torch

    fn = _peers_torch.FUNCTIONS.get(row.tag if row.kind != "out" else "w1_out")
    if fn is None:
        return None
    compiled = torch.compile(fn)
    out = [torch.from_numpy(np.empty_like(row.make()[0]))] if row.kind == "out" else []

    def call(*args):
        with torch.inference_mode():
            result = compiled(*(torch.from_numpy(a) for a in args), *out)
        return (out[0] if out else result).numpy()
    return call


def _onnx_call(row: Row) -> Callable | None:
    import _peers_onnx

    return _peers_onnx.session_for(row)


def _numexpr_call(row: Row) -> Callable | None:
    import numexpr

    if row.tag != "w1":
        return None
    expr = "(a*b + c) * exp(-d) / (1 + abs(a))"
    if row.kind == "out":
        out = np.empty_like(row.make()[0])
        return lambda a, b, c, d: numexpr.evaluate(expr, local_dict={"a": a, "b": b, "c": c, "d": d}, out=out)
    return lambda a, b, c, d: numexpr.evaluate(expr, local_dict={"a": a, "b": b, "c": c, "d": d})


def _numba_call(row: Row) -> Callable | None:
    import _peers_numba as numba_workloads

    if row.tag == "w1":
        if row.kind == "out":
            out = np.empty_like(row.make()[0])
            return lambda a, b, c, d: numba_workloads.w1_into(a, b, c, d, out)
        return numba_workloads.w1
    if row.tag == "w4":
        return numba_workloads.w4
    return None


# The limit row: `omp parallel for simd` with -ffast-math lets GCC call glibc's vector expf (libmvec),
# so the loop is bound by memory, not by a scalar libm call per element. Its results differ from NumPy's
# in the last bits (within the check's tolerance): it is the machine's limit, not a bit-exact peer.
C_W1 = r"""
#include <math.h>
#include <stddef.h>
void w1(const float *a, const float *b, const float *c, const float *d, float *out, ptrdiff_t n) {
    #pragma omp parallel for simd num_threads(2) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++)
        out[i] = (a[i] * b[i] + c[i]) * expf(-d[i]) / (1.0f + fabsf(a[i]));
}
"""


def _c_call(row: Row) -> Callable | None:
    import ctypes

    if row.tag != "w1":
        return None
    source = Path(tempfile.mkdtemp(prefix="numtrace-peers-")) / "w1.c"
    source.write_text(C_W1)
    fn = _compile_c(source, ["-O3", "-ffast-math"]).w1
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_ssize_t]
    fixed = np.empty_like(row.make()[0]) if row.kind == "out" else None

    def call(a, b, c, d):
        out = np.empty_like(a) if fixed is None else fixed
        fn(a.ctypes.data, b.ctypes.data, c.ctypes.data, d.ctypes.data, out.ctypes.data, a.size)
        return out
    return call


# -- the machine's limits ------------------------------------------------------------------------------
# For the rows whose work is matrix products (W2, W3, the MLP example), the limit is what the machine's
# FMA units or caches allow, measured in the same run by machine_limits.c (its own process, after the
# tools): "FMA peak" is the row's product FLOPs at the all-core float32 FMA peak (its other ops are
# not counted, so the limit is below reach by their share); "weights read" is the weights' bytes at
# the rate at which all cores read their shares of that many bytes from their caches (batch 1: the
# products are a pass over the weights). The larger of the two is the row's limit.
LIMIT_TIMINGS = 60


def _compile_c(source: Path, flags: list[str]) -> Any:
    import ctypes

    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    folder = tempfile.mkdtemp(prefix="numtrace-peers-")
    library = os.path.join(folder, source.stem + ".so")
    subprocess.run([*compiler, *flags, "-march=native", "-fopenmp", "-shared", "-fPIC", str(source), "-o",
                    library, "-lm"], check=True, capture_output=True)
    return ctypes.CDLL(library)


def measure_limits(rows: list[Row]) -> dict[str, Any]:
    """The FMA peak of all this process's CPUs and of one (FLOP/s), and per weight size of the rows the
    rate (bytes/s) at which all CPUs read it from their caches: each the best of LIMIT_TIMINGS."""
    import ctypes

    lib = _compile_c(HERE / "machine_limits.c", ["-O2"])
    lib.fma_flops.restype = ctypes.c_double
    lib.fma_flops.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_int]
    lib.read_bytes_per_s.restype = ctypes.c_double
    lib.read_bytes_per_s.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    sizes = sorted({row.weight_bytes for row in rows if row.weight_bytes})
    return {"threads": threads, "lanes": lib.vector_lanes(),
            "fma_flops": lib.fma_flops(threads, 100_000, LIMIT_TIMINGS),
            "fma_flops_1": lib.fma_flops(1, 100_000, LIMIT_TIMINGS),
            "read": {str(b): lib.read_bytes_per_s(threads, b, max(4, (1 << 27) // b), LIMIT_TIMINGS)
                     for b in sizes}}


def row_limit(row: Row, cells: dict[str, Any], limits: dict[str, Any] | None) -> tuple[float, str] | None:
    """(seconds, what bounds it) of the row's limit: the C loop's time where it ran, else the FMA peak or
    weights-read bound of a row of products; None without one."""
    if isinstance(cells.get("C loop"), float):
        return cells["C loop"], "C loop"
    if not limits or not row.flops or limits["fma_flops"] <= 0:   # 0: OpenMP ran fewer threads than asked
        return None
    fma = row.flops / limits["fma_flops"]
    rate = limits["read"].get(str(row.weight_bytes), 0.0) if row.weight_bytes else 0.0
    read = row.weight_bytes / rate if rate > 0 else 0.0
    return (read, "weights read") if read > fma else (fma, "FMA peak")


CALLS = {"numpy": _numpy_call, "numtrace": _numtrace_call, "torch.compile": _torch_numpy_call,
         "torch.compile/torch": _torch_call, "onnxruntime": _onnx_call, "numexpr": _numexpr_call,
         "numba": _numba_call, "C loop": _c_call}


# -- one tool in its own process --------------------------------------------------------------------------

def _flat(result: Any) -> list[np.ndarray]:
    return [np.asarray(r) for r in result] if isinstance(result, (tuple, list)) else [np.asarray(result)]


def _matches(got: Any, want: Any) -> bool:
    g, w = _flat(got), _flat(want)
    return len(g) == len(w) and all(
        a.shape == b.shape and np.allclose(a, b, rtol=2e-3, atol=1e-4, equal_nan=True) for a, b in zip(g, w))


def _measure_row(tool: str, row: Row, quick: bool) -> dict[str, Any]:
    """The row's seconds per call and first call (compiling included), "wrong result", or nothing."""
    call = CALLS[tool](row)
    if call is None:
        return {}
    inputs = row.make()
    want = _numpy_call(row)(*[a.copy() for a in inputs])
    start = time.perf_counter()
    got = call(*[a.copy() for a in inputs])
    first = time.perf_counter() - start
    if not _matches(got, want):
        return {row.name: "wrong result"}
    # In-place programs update their inputs on every call (as realistic.py times them).
    args = [a.copy() for a in inputs]
    # The reference above ran NumPy, whose OpenBLAS threads spin for about 0.1 s after a product
    # before they sleep; timed inside that window, a tool's own threads would share the cores with
    # them (a numtrace MLP at batch 256 ran at its one-thread speed for its first ~100 calls).
    time.sleep(BLAS_QUIET_S)
    number = calls_per_timing(lambda: call(*args), quick)
    return {row.name: median_seconds(lambda: call(*args), number, 3 if quick else 7),
            row.name + FIRST: first}


FIRST = " /first call"
BLAS_QUIET_S = 0.5


def measure(tool: str, rows: list[Row], quick: bool) -> dict[str, Any]:
    """Per row name: seconds per call, or a short text saying why there is no time."""
    results: dict[str, Any] = {}
    for row in rows:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                results.update(_measure_row(tool, row, quick))
        except Exception as exc:   # a row a tool cannot run is a cell of the table
            results[row.name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:60] if str(exc) else ''}"
    return results


def _missing(tool: str) -> str | None:
    for module in NEEDS.get(tool, []):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"{module} is not installed"
    if tool == "C loop":
        compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")[0]
        if shutil.which(compiler) is None:
            return f"no C compiler ({compiler})"
    return None


def select_rows(groups: list[str], quick: bool, words: list[str]) -> list[Row]:
    """The groups' rows, only those whose name contains one of `words` when there are any."""
    rows = [row for group in groups for row in GROUPS[group](quick)]
    return [row for row in rows if not words or any(w in row.name for w in words)]


def worker(tool: str, groups: list[str], quick: bool, words: list[str]) -> None:
    if tool == "limits":
        print(json.dumps({"limits": measure_limits(select_rows(groups, quick, words))}))
        return
    missing = _missing(tool)
    if missing is not None:
        print(json.dumps({"skipped": missing}))
        return
    rows = select_rows(groups, quick, words)
    print(json.dumps({"results": measure(tool, rows, quick)}))


# -- the driver ------------------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    if value is None:
        return f"{'-':>10}"
    if isinstance(value, str):
        return f"{'(' + value.split(':')[0][:8] + ')':>10}"
    return fmt_seconds(value).replace(" ", "")[:10].rjust(10)


Rounds = list[dict[str, dict]]   # per round: per tool, what its worker answered
RATIOS = ("xNumPy", "vs best", "vs limit", "peer/lim")
SPREAD = 1.10   # a row whose ratio moves by more than this between rounds gets a line per round


def _median(values: list[Any]) -> Any:
    texts = [v for v in values if isinstance(v, str)]
    return texts[0] if texts else statistics.median(values)


def aggregate(rounds: Rounds) -> dict[str, dict]:
    """Per tool and key, the median over the rounds that ran the tool; a text (a wrong result, an
    error) in any round stands instead of the times."""
    merged: dict[str, dict[str, list]] = {}
    for results in rounds:
        for tool, cells in results.items():
            for key, value in cells.items():
                merged.setdefault(tool, {}).setdefault(key, []).append(value)
    return {tool: {key: _median(values) for key, values in cells.items()} for tool, cells in merged.items()}


def _div(num: Any, den: Any) -> float | None:
    return num / den if isinstance(num, float) and isinstance(den, float) and den > 0 else None


def row_ratios(row: Row, cells: dict[str, Any], limits: dict[str, Any] | None
               ) -> tuple[dict[str, float | None], str | None, tuple[float, str] | None]:
    """The row's ratios (RATIOS) from one set of cells, its best peer and its limit."""
    ours, base = cells.get("numtrace"), cells.get("numpy")
    peers = {t: v for t, v in cells.items() if t in PEERS and isinstance(v, float)}
    best = min(peers, key=peers.__getitem__) if peers else None
    limit = row_limit(row, cells, limits)
    bound, peer = limit and limit[0], peers.get(best)
    return ({"xNumPy": _div(base, ours), "vs best": _div(peer, ours), "vs limit": _div(bound, ours),
             "peer/lim": _div(bound, peer)}, best, limit)


def _ratio(values: list[float | None], width: int) -> str:
    """The median of the rounds' ratios; after it their min-max where there are several rounds."""
    known = [v for v in values if v is not None]
    if not known:
        return f"{'-':>{width}}"
    text = f"{statistics.median(known):7.2f}x"
    if len(values) > 1:
        text += f" {min(known):.2f}-{max(known):.2f}"
    return f"{text:>{width}}"


def contested(ratios: dict[str, list[float | None]]) -> bool:
    """Whether a ratio crosses 1.00 between rounds (ahead in one, behind in another) or moves by more
    than SPREAD."""
    for values in ratios.values():
        known = [v for v in values if v is not None]
        if len(known) > 1 and (min(known) < 1 <= max(known) or max(known) > SPREAD * min(known)):
            return True
    return False


def print_table(rows: list[Row], rounds: Rounds, tools: list[str],
                limits: dict[str, Any] | None = None) -> None:
    """The table of the rounds' median cells and ratios (one round: that round's), the rows that swing
    between rounds with a line per round, and what was not timed."""
    results = aggregate(rounds)
    shown = [t for t in tools if t in results]
    width = max(len(r.name) for r in rows) + 1
    rw = 8 if len(rounds) == 1 else 19
    print(f"{'workload':<{width}}" + "".join(f"{COLUMNS[t]:>10} " for t in shown)
          + f"{'xNumPy':>{rw}} {'vs best':>{rw}} {'best peer':<20} {'vs limit':>{rw}} {'peer/lim':>{rw}}"
          + "  limit")
    geo: list[float] = []
    problems: list[str] = []
    swings: list[str] = []
    for row in rows:
        cells = {t: results[t].get(row.name) for t in shown}
        per_round = [{t: r.get(t, {}).get(row.name) for t in shown} for r in rounds]
        # A wrong result in one round stands for the tool in every round: no ratio from the others.
        measured = [row_ratios(row, {t: cells[t] if isinstance(cells[t], str) else v for t, v in c.items()},
                               limits) for c in per_round]
        ratios = {k: [m[0][k] for m in measured] for k in RATIOS}
        _, best, limit = row_ratios(row, cells, limits)
        line = f"{row.name:<{width}}" + "".join(f"{_cell(cells[t])} " for t in shown)
        line += f"{_ratio(ratios['xNumPy'], rw)} {_ratio(ratios['vs best'], rw)} {best or '-':<20} "
        line += f"{_ratio(ratios['vs limit'], rw)} {_ratio(ratios['peer/lim'], rw)}  "
        line += f"{limit[1]} {fmt_seconds(limit[0]).strip()}" if limit else "-"
        print(line)
        same_round = [v for v in ratios["xNumPy"] if v is not None]
        if isinstance(cells.get("numpy"), float) and isinstance(cells.get("numtrace"), float) and same_round:
            geo.append(statistics.median(same_round))
        for t in shown:
            texts: dict[str, list[int]] = {}
            for i, c in enumerate(per_round, 1):
                if isinstance(c[t], str):
                    texts.setdefault(c[t], []).append(i)
            suffix = {v: "" if len(rounds) == 1 else f" (round {', '.join(map(str, ids))})"
                      for v, ids in texts.items()}
            problems += [f"{row.name}: {t}: {v}{suffix[v]}" for v in texts]
        if len(rounds) > 1 and contested(ratios):
            swings += [f"  {row.name}, round {i}: " + " ".join(
                f"{COLUMNS[t]} {_cell(v).strip()}" for t, v in c.items() if v is not None) + " |"
                + "".join(f" {k} {v:.2f}x" for k, v in m[0].items() if v is not None)
                for i, (c, m) in enumerate(zip(per_round, measured), 1)]
    if geo:
        mean = math.exp(sum(map(math.log, geo)) / len(geo))
        print(f"geometric mean over {len(geo)} rows: numtrace {mean:.2f}x NumPy")
    if swings:
        print(f"rows whose ratios cross 1.00 or move by more than {SPREAD - 1:.0%} between the "
              f"{len(rounds)} rounds:")
        print("\n".join(swings))
    for p in problems:
        print(f"  not timed: {p}")
    if limits:
        print_limits(rows, results, limits)


def print_limits(rows: list[Row], results: dict[str, dict], limits: dict[str, Any]) -> None:
    """What the limit column stands on, and where 1.1x ONNX Runtime would need the FMA units nearly
    full (above 95% of the measured peak: out of reach)."""
    peak = limits["fma_flops"]
    if peak <= 0:
        print("limits: the FMA peak was not measured (OpenMP ran fewer threads than this process's CPUs)")
        return
    reads = ", ".join(f"{int(b) / 1e6:.2f} MB at {v / 1e9:.0f} GB/s" for b, v in limits["read"].items())
    print(f"limits, measured in this run (machine_limits.c, best of {LIMIT_TIMINGS} timings, threads "
          "pinned): "
          f"float32 FMA peak {peak / 1e9:.0f} GFLOP/s on {limits['threads']} threads "
          f"({limits['fma_flops_1'] / 1e9:.0f} on one, {limits['lanes']}-lane FMAs)"
          + (f"; weights read from the cores' caches: {reads}" if reads else ""))
    print("  'FMA peak': the row's matrix-product FLOPs at that peak (its other ops not counted); "
          "'weights read': its weights' bytes at that rate; 'peer/lim': limit / best peer")
    for row in rows:
        ort = results.get("onnxruntime", {}).get(row.name)
        if not row.flops or not isinstance(ort, float):
            continue
        need = row.flops / (ort / 1.1)
        if need / peak > 0.8:
            print(f"  {row.name}: 1.1x ONNX Runtime ({fmt_seconds(ort).strip()}) is "
                  f"{fmt_seconds(ort / 1.1).strip()}, {need / 1e9:.0f} GFLOP/s in the products alone: "
                  f"{need / peak:.0%} of the measured peak"
                  + (" (out of reach)" if need / peak > 0.95 else ""))


def round_order(tools: list[str], i: int) -> list[str]:
    """Round i's order of the tools: rotated by one per round, so that each takes every place in turn
    (none is always first, on a machine just idle, or always last, after all the others)."""
    shift = i % len(tools) if tools else 0
    return tools[shift:] + tools[:shift]


def _run_worker(tool: str, groups: list[str], args: argparse.Namespace) -> dict[str, Any] | None:
    """Run one tool's worker in its own process, print its summary line and return its answer (None
    when its process failed)."""
    start = time.perf_counter()
    command = [sys.executable, __file__, "--worker", tool, "--only", ",".join(groups), "--rows", args.rows]
    # numtrace compiles its generated kernels at the warm-up call, as torch.compile does (by default
    # they compile in the background while the interpreter runs the first calls).
    env = {**os.environ, "NUMTRACE_CODEGEN": os.environ.get("NUMTRACE_CODEGEN", "sync")}
    done = subprocess.run(command + (["--quick"] if args.quick else []), capture_output=True, text=True,
                          env=env)
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"{tool}: its process failed (exit {done.returncode}): {tail}")
        return None
    if "results" in answer:
        timed = sum(isinstance(v, float) for k, v in answer["results"].items() if not k.endswith(FIRST))
        print(f"{tool}: {TOOLS[tool]}; {timed} rows in {time.perf_counter() - start:.0f} s")
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer programs and repeats")
    parser.add_argument("--only", default=",".join(GROUPS), help=f"row groups: {', '.join(GROUPS)}")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"tools: {', '.join(TOOLS)}")
    parser.add_argument("--rows", default="", help="only rows whose name contains one of these words")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the tools this many times, interleaved; report medians and the ratios' "
                             "min-max (for rows that swing with the host: 5)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    groups = [g for g in args.only.split(",") if g]
    tools = [t for t in args.tools.split(",") if t]
    words = [w for w in args.rows.split(",") if w]
    for name, known in (("--only", GROUPS), ("--tools", TOOLS)):
        unknown = set(groups if name == "--only" else tools) - set(known)
        if unknown:
            parser.error(f"{name}: unknown {', '.join(sorted(unknown))}")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    if args.worker:
        worker(args.worker, groups, args.quick, words)
        return
    unmatched = [w for w in words if not select_rows(groups, args.quick, [w])]
    if unmatched:
        names = sorted({row.name.split(" (")[0] for row in select_rows(groups, args.quick, [])})
        parser.error(f"--rows: no row name contains {', '.join(unmatched)} (names are case-sensitive): "
                     f"{', '.join(names)}")
    print(f"# {platform.node()}: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"Python {platform.python_version()}, NumPy {np.__version__}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# python benchmarks/peers.py {' '.join(sys.argv[1:])}")
    rounds: Rounds = []
    running = list(tools)
    for i in range(args.rounds):
        order = round_order(running, i)
        if args.rounds > 1:
            print(f"round {i + 1} of {args.rounds}: {', '.join(order)}")
        results: dict[str, dict] = {}
        for tool in order:
            answer = _run_worker(tool, groups, args)
            if answer is None:
                continue
            if "skipped" in answer:
                print(f"{tool}: skipped ({answer['skipped']})")
                running.remove(tool)   # not installed: no later round asks again
                continue
            results[tool] = answer["results"]
        rounds.append(results)
    rows = select_rows(groups, args.quick, words)
    limits = None
    if any(row.flops for row in rows):
        done = subprocess.run([sys.executable, __file__, "--worker", "limits", "--only", ",".join(groups),
                               "--rows", args.rows] + (["--quick"] if args.quick else []),
                              capture_output=True, text=True)
        try:
            limits = json.loads(done.stdout.strip().splitlines()[-1])["limits"]
        except (IndexError, json.JSONDecodeError, KeyError):
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"limits: not measured (exit {done.returncode}): {tail}")
    print()
    print_table(rows, rounds, tools, limits)
    results = aggregate(rounds)
    firsts = {t: r.get(rows[0].name + FIRST) for t, r in results.items()} if rows else {}
    if any(isinstance(v, float) for v in firsts.values()):
        print(f"first call of {rows[0].name!r} (compiling included): "
              + ", ".join(f"{t} {fmt_seconds(v).strip()}" for t, v in firsts.items() if isinstance(v, float)))


if __name__ == "__main__":
    main()
