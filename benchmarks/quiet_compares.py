"""A/B of the cpu float compare loops (benchmarks/quiet_compares.c) built from two header folders, in
one process: the median ns per element over rounds that alternate the builds, on a NaN-free input and
on one half NaN (4096 elements, in cache), and whether each build's loop raised FE_INVALID.

    python3 benchmarks/quiet_compares.py OLD_DIR/quiet_compares.so NEW_DIR/quiet_compares.so [reps]
"""
import ctypes
import statistics
import sys
import time

import numpy as np

FE_INVALID, FE_ALL = 1, 0x3D
OPS = ["greater", "less_equal", "maximum", "minimum", "fmax", "sign", "isfinite", "isinf", "heaviside",
       "max-reduce", "colmax-reduce"]
BOOL = {"greater", "less_equal", "isfinite", "isinf"}
DT = {np.float32: 3, np.float64: 4}


def _load(path):
    lib = ctypes.CDLL(path)
    lib.nt_ab_op.argtypes = [ctypes.c_char_p]
    lib.nt_ab_loop.argtypes = ([ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 3
                               + [ctypes.c_ssize_t, ctypes.c_int])
    lib.nt_ab_max.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
    lib.nt_ab_max.restype = ctypes.c_double
    lib.nt_ab_colmax.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_ssize_t, ctypes.c_int]
    lib.nt_ab_colmax.restype = ctypes.c_double
    return lib


def _run(lib, name, dtype, d, a, b, n, reps):
    if name == "max-reduce":
        lib.nt_ab_max(a.ctypes.data, n, reps)
    elif name == "colmax-reduce":   # 64 rows of 64 columns
        lib.nt_ab_colmax(a.ctypes.data, 64, 64, reps)
    else:
        op = lib.nt_ab_op(name.encode())
        lib.nt_ab_loop(op, DT[dtype], d.ctypes.data, a.ctypes.data, b.ctypes.data, n, reps)


def main():
    libm = ctypes.CDLL("libm.so.6")
    builds = {"old": _load(sys.argv[1]), "new": _load(sys.argv[2])}
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    n, rounds, rng = 4096, 9, np.random.default_rng(0)
    print(f"n={n} reps={reps} rounds={rounds}: median ns/element old -> new (ratio), "
          "FE_INVALID raised old/new")
    for dtype in (np.float64, np.float32):
        clean, other = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
        nans = clean.copy()
        nans[rng.random(n) < 0.5] = np.nan
        for name in OPS:
            if name.endswith("-reduce") and dtype is np.float32:
                continue
            row = []
            for label, a in (("no NaN", clean), ("half NaN", nans)):
                d = np.empty(n, bool if name in BOOL else dtype)
                times, raised = {"old": [], "new": []}, {}
                for r in range(rounds):
                    for which in ("old", "new") if r % 2 == 0 else ("new", "old"):
                        libm.feclearexcept(FE_ALL)
                        t0 = time.perf_counter_ns()
                        _run(builds[which], name, dtype, d, a, other, n, reps)
                        times[which].append((time.perf_counter_ns() - t0) / (n * reps))
                        raised[which] = int(bool(libm.fetestexcept(FE_INVALID)))
                old, new = statistics.median(times["old"]), statistics.median(times["new"])
                flags = f"{raised['old']}/{raised['new']}"
                row.append(f"{label}: {old:.3f} -> {new:.3f} (x{new / old:.2f}) {flags}")
            print(f"{np.dtype(dtype).name:8s} {name:13s} " + " | ".join(row))


if __name__ == "__main__":
    main()
