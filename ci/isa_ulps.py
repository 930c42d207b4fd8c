"""How far NumPy's results move between its SIMD builds, and how far the CPU backend is from NumPy.

For every ufunc of the op registry's tables (`numtrace_ir.ops.elementwise`) with a float16, float32,
float64 or complex128 loop, and for the float reductions, a sweep of inputs is evaluated by NumPy in
two child processes: one as this machine runs it, one with
``NPY_DISABLE_CPU_FEATURES="AVX512_ICL X86_V4"`` (NumPy's AVX2 loops, as on a machine without
AVX-512). It prints the largest distance in ulps between the two, and between the CPU backend's
result and each (``NumPy`` where the backend runs NumPy's own loop for that dtype). docs/cpu.md,
"Exact and ulp-bounded results", holds the table; `numtrace_ir.testing.numpy_exact` is the rule the
tests take from it.

It lives in ci/ beside the docs checker because it backs a claim of the docs and measures no time
(the bench session runs every benchmarks/ script for timings). It needs a CPU with AVX-512 (elsewhere
both children run the same loops, and it says so) and the packages installed, e.g. after
``nox -s tests``:

    .nox/tests/bin/python ci/isa_ulps.py [--n 100000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from numtrace_ir import registry, testing
from numtrace_ir.ops.elementwise import BINARY_UFUNCS, UNARY_UFUNCS
from numtrace_ir.registry import Sample
from numtrace_ir.testing import math_sweep, ulp_distance

AVX2_ONLY = {"NPY_DISABLE_CPU_FEATURES": "AVX512_ICL X86_V4"}
DTYPES = ("float16", "float32", "float64", "complex128")
REDUCTIONS = ("np.sum", "np.prod", "np.mean", "np.var", "np.std", "np.max", "np.cumsum", "np.cumprod")


def ufuncs() -> dict[str, np.ufunc]:
    return {u.__name__: u for u in UNARY_UFUNCS + BINARY_UFUNCS if u.nout == 1}


def _has_loop(u: np.ufunc, dtype: str) -> bool:
    """Whether `u` has a loop taking `dtype` and returning floats (comparisons and integer ufuncs do
    not; complex `absolute` returns the real dtype)."""
    try:
        loop = u.resolve_dtypes((np.dtype(dtype),) * u.nin + (None,))
    except TypeError:
        return False
    return all(d == dtype for d in loop[:-1]) and loop[-1].kind in "fc"


def _reduction_input(dtype: str) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((300, 1001)).astype(dtype) * 3


def evaluate(n: int) -> dict[str, np.ndarray]:
    """NumPy's result of every (ufunc, dtype) over its sweep, and of every reduction over all axes and
    along each, keyed ``name/dtype`` (``name@axis/dtype``)."""
    out = {}
    with np.errstate(all="ignore"):
        for name, u in ufuncs().items():
            for dt in DTYPES:
                if _has_loop(u, dt):
                    out[f"{name}/{dt}"] = u(*math_sweep(u.nin, dt, n))
        for name in REDUCTIONS:
            fn = getattr(np, name[3:])
            for dt in ("float32", "float64"):
                x = _reduction_input(dt)
                for axis in (None, 0, 1):
                    out[f"{name}@{axis}/{dt}"] = np.asarray(fn(x, axis=axis))
    return out


def numtrace_cpu(n: int) -> dict[str, np.ndarray | None]:
    """The CPU backend's result of each one-op graph over the same sweeps; None where it runs the op
    with NumPy's own loop (a fallback)."""
    import numtrace_cpu

    def run(op, inputs, attrs):
        g = testing.build_graph(op, Sample(inputs, attrs))
        exe = numtrace_cpu.compile_graph(g, [v.type for v in g.inputs])
        (got,) = exe(*inputs)
        return None if exe.stats()["fallbacks"] else np.asarray(got)

    out = {}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, u in ufuncs().items():
            for dt in DTYPES:
                if _has_loop(u, dt):
                    out[f"{name}/{dt}"] = run(registry.for_numpy(u), math_sweep(u.nin, dt, n), {})
        for name in REDUCTIONS:
            for dt in ("float32", "float64"):
                for axis in (None, 0, 1):
                    x = _reduction_input(dt)
                    out[f"{name}@{axis}/{dt}"] = run(registry.get(name), (x,), {"axis": axis})
    return out


def _child(n: int, path: str) -> None:
    from numpy.lib.introspect import opt_func_info

    target = opt_func_info(func_name="^power$")["power"]["ddd"]["current"]
    np.savez(path, **{k.replace("/", "__"): v for k, v in evaluate(n).items()}, target__=np.array(target))


def _numpy_in_child(n: int, env: dict, folder: str, tag: str) -> tuple[dict[str, np.ndarray], str]:
    path = os.path.join(folder, f"{tag}.npz")
    subprocess.run([sys.executable, __file__, "--child", path, "--n", str(n)], check=True,
                   env={**os.environ, **env})
    with np.load(path) as f:
        return {k.replace("__", "/"): f[k] for k in f.files if k != "target__"}, str(f["target__"])


def _cell(a: np.ndarray | None, b: np.ndarray | None) -> str:
    if a is None or b is None:
        return "NumPy"
    worst = float(ulp_distance(a, b).max(initial=0))
    return "inf" if worst == np.inf else f"{worst:.0f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="inputs per ufunc and dtype")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.n, args.child)
        return
    with tempfile.TemporaryDirectory() as folder:
        wide, wide_target = _numpy_in_child(args.n, {}, folder, "default")
        narrow, narrow_target = _numpy_in_child(args.n, AVX2_ONLY, folder, "avx2")
    if wide_target == narrow_target:
        sys.exit(f"NumPy runs its {wide_target} loops either way: nothing to compare on this CPU")
    ours = numtrace_cpu(args.n)
    print(f"NumPy {np.__version__} ({wide_target} loops against {narrow_target}), {args.n} inputs per "
          "ufunc and dtype; largest distance in ulps, per dtype\n")
    for title, keys, dts in (("ufunc", sorted({k.split("/")[0] for k in wide if "@" not in k}), DTYPES),
                             ("reduction", [f"{r}@{a}" for r in REDUCTIONS for a in (None, 0, 1)],
                              ("float32", "float64"))):
        short = ", ".join(d.replace("float", "f").replace("complex", "c") for d in dts)
        print(f"| {title} | NumPy AVX-512 vs AVX2 ({short}) | numtrace CPU vs NumPy AVX-512 "
              "| numtrace CPU vs NumPy AVX2 |")
        print("|---|---|---|---|")
        same = []
        for key in keys:
            cells = [[_cell(a[f"{key}/{dt}"], b[f"{key}/{dt}"]) if f"{key}/{dt}" in wide else "–"
                      for dt in dts] for a, b in ((wide, narrow), (ours, wide), (ours, narrow))]
            if all(c in ("0", "NumPy", "–") for row in cells for c in row):
                same.append(f"`{key}`")
            else:
                print(f"| `{key}` | " + " | ".join(", ".join(row) for row in cells) + " |")
        print(f"\nBit-identical in every column (or NumPy's own loop on the CPU backend): "
              f"{', '.join(same)}\n")


if __name__ == "__main__":
    main()
