"""Hunt in np.where's kept operands after codegen's `_kept` and `_snan_covered` (the wheresp branch):
a selected operand is kept only where an op under it may raise a flag NumPy reports, and x +- c not
where another op computed for every element multiplies or adds x (it raises the signaling NaN's
'invalid' anyway). NumPy computes both operands of a where for every element, so it warns for the
elements the where does not select; numtrace's kernels raise the same flags, and the call then runs
NumPy's references for its reports (numtrace_ir.fp_errors). A flag the kernel misses is a warning lost.

Each program runs with generated kernels (sync) and on the interpreter (off), at 1 and 2 threads, and
reports under np.errstate per kind (warn, raise) and all="warn" what NumPy reports; values as NumPy's.

Finding: GCC knows x * x is not negative and folds signbit(x * x) into 0 and copysign(y, x * x) into
fabs(y), dropping the product, its 'overflow' and a signaling NaN's 'invalid'; and a where's x - 1
(`_snan_covered`) relied on that product. nt_opcodes.h now computes both from the bits."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graph_programs import RUNNABLE, graph_of
from numtrace_cpu import isa, set_num_threads
from numtrace_ir import testing
from test_codegen import _cache, _compiled  # noqa: F401  (_cache: autouse fixture)

KINDS = ("divide", "over", "under", "invalid")


def _both(fn, examples):
    """fn(np, *inputs) compiled with generated kernels and for the interpreter."""
    g, types = graph_of(fn, examples)
    with np.errstate(all="ignore"):
        return {"sync": _compiled(g, types, "sync"), "off": _compiled(g, types, "off")}


def _reports(call):
    """What call() reports per kind (warned under warn, whether it raised under raise), all warned."""
    out = {}
    for kind in KINDS:
        with np.errstate(all="ignore", **{kind: "warn"}):
            warned, _, _ = testing.fp_reports(call)
        with np.errstate(all="ignore", **{kind: "raise"}):
            _, raised, _ = testing.fp_reports(call)
        out[kind] = (warned, raised is not None)
    with np.errstate(all="warn"):
        out["all"], _, result = testing.fp_reports(call)
    return out, result


def _snan(dtype, negative: bool = False):
    if np.dtype(dtype) == np.float64:
        return np.array([0x7FF0000000000001 | (negative << 63)], np.uint64).view(np.float64)[0]
    return np.array([0x7F800001 | (negative << 31)], np.uint32).view(np.float32)[0]


def _check(fn, args, *, flagged: bool = True, threads=(1, 2)):
    """fn(np, *args) traced reports and returns what NumPy does, on both modes and thread counts."""
    want, expected = _reports(lambda: fn(np, *args))
    assert not flagged or any(w[1] for k, w in want.items() if k != "all"), "NumPy must report a flag"
    expected = expected if isinstance(expected, tuple) else (expected,)
    for mode, exe in _both(fn, args).items():
        for n in threads:
            set_num_threads(n)
            try:
                got, actual = _reports(lambda exe=exe: exe(*args))
            finally:
                set_num_threads(1)
            assert got == want, f"{mode}, {n} threads"
            for a, e in zip(actual, expected):
                assert a.dtype == e.dtype and a.shape == e.shape, mode
                np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def _arrays(dtype, shape, special, seed=0):
    """x uniform in [-2, 2) with `special` where the mask m holds (a where's first operand there)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, shape).astype(dtype)
    m = rng.random(shape) < 0.5
    m.reshape(-1)[::7] = True
    x[m] = special
    return x, m


# -- finding: signbit and copysign of a square (GCC's nonnegative x * x) ------------------------------

_SQUARES = {
    "signbit": lambda np, x, m: np.signbit(x * x),
    "copysign": lambda np, x, m: np.copysign(x, x * x),
    # the where's x - 1 is not kept (_snan_covered: x * x raises the signaling NaN's invalid), and
    # signbit(x * x) was folded into 0: neither op ran at a signaling NaN the where does not select
    "where_covered_by_square": lambda np, x, m: (np.where(m, abs(x), x - 1), np.signbit(x * x)),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("special", ["snan", "big"])
@pytest.mark.parametrize("name", sorted(_SQUARES))
def test_signbit_and_copysign_of_a_square_raise_as_numpy(name, special, dtype):
    """NumPy's x * x overflows at a big x and raises 'invalid' at a signaling NaN x, whatever reads it;
    the generated kernel computed signbit(x * x) as 0 and copysign(x, x * x) as |x|, without it."""
    value = _snan(dtype) if special == "snan" else (1e200 if dtype == np.float64 else 1e30)
    _check(_SQUARES[name], _arrays(dtype, (64, 5), value))


# -- passing checks: what the branch keeps and drops ----------------------------------------------

_BIG = {t: np.finfo(t).max for t in (np.float64, np.float32)}
# dtype: (a Python float whose x + c overflows at the largest x, the largest c x * c underflows at 1e-10)
_CONSTS = {np.float64: (1e300, 1e-300), np.float32: (3e31, 1e-30)}
# name: (program of the dtype's constants, the special value where m holds: there the where selects
# its other operand, NumPy computes the one that raises all the same)
_KEPT = {
    # x - 1 alone: kept; covered by a multiply or add of x computed for every element: dropped
    "offset_alone": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x - 1), "snan"),
    "offset_covered_in_nested_where": (
        lambda big, tiny: lambda np, x, m: np.where(m, 0.0, np.where(x > 0, x * 3, x - 1)), "snan"),
    "offset_covered_by_kept_mul": (
        lambda big, tiny: lambda np, x, m: np.where(m, 1.0, np.where(x > 0, 2 * x, 1 - x)), "snan"),
    # x - c of a c the offsets leave out: inf (inf - inf), huge (overflow at the largest float)
    "offset_inf": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x - np.inf), np.inf),
    "offset_huge": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x + big), "big"),
    "two_x_at_max": (lambda big, tiny: lambda np, x, m: np.where(m, x, 2 * x), "big"),
    "times_tiny": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x * tiny), 1e-10),
    "over_huge": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x / big), 1e-10),
    "clip_of_product": (
        lambda big, tiny: lambda np, x, m: np.where(m, x, np.clip(x * x * x, -1.0, 1.0)), "big"),
    "nan_to_num_of_product": (lambda big, tiny: lambda np, x, m: np.where(m, x, np.nan_to_num(x * x)), "big"),
    "abs_max_of_sqrt": (
        lambda big, tiny: lambda np, x, m: np.where(m, 0.0, np.maximum(abs(np.sqrt(x)), x)), -4.0),
    "cast_to_int": (lambda big, tiny: lambda np, x, m: np.where(m, 0, x.astype(np.int64)), np.nan),
    "cast_to_float32": (lambda big, tiny: lambda np, x, m: np.where(m, 0.0, x.astype(np.float32)), "snan"),
    "sum1_offset_alone": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x - 1).sum(axis=1), "snan"),
    "sum0_offset_alone": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x - 1).sum(axis=0), "snan"),
    "sum_offset_alone": (lambda big, tiny: lambda np, x, m: np.where(m, abs(x), x - 1).sum(), "snan"),
    "sum1_two_x": (lambda big, tiny: lambda np, x, m: np.where(m, x, 2 * x).sum(axis=1), "big"),
}
# elementwise; column blocks (narrow, wide), row blocks (unrolled, a short row's loop), long rows
_SHAPES = [(64, 5), (600, 40), (2000, 3), (300, 7), (300, 16), (5, 700)]


def _cases():
    """Each program at shapes of its kernel's paths: elementwise at two, reductions at every one."""
    for name in sorted(_KEPT):
        for shape in _SHAPES[1:] if "sum" in name else _SHAPES[:3:2]:
            yield name, shape


def _special(value, dtype):
    return {"snan": _snan(dtype), "big": _BIG[dtype]}.get(value, value) if isinstance(value, str) else value


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(("name", "shape"), list(_cases()), ids=str)
def test_unselected_operand_warns_as_numpy(name, shape, dtype):
    make, value = _KEPT[name]
    fn = make(*_CONSTS[dtype])
    if name == "cast_to_float32" and dtype == np.float32:
        pytest.skip("a float32 x is cast to nothing")
    args = _arrays(dtype, shape, _special(value, dtype), seed=len(name))
    _check(fn, args, threads=(1, 2) if shape == (600, 40) else (1,))


_ISA_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    import test_hunt_wkeep as h
    from numtrace_cpu import isa
    out = []
    for name in ("signbit", "copysign", "where_covered_by_square"):
        for dtype in (np.float32, np.float64):
            for value in (h._snan(dtype), 1e30):
                args = h._arrays(dtype, (300, 4), value)
                want = h._reports(lambda: h._SQUARES[name](np, *args))[0]
                for mode, exe in h._both(h._SQUARES[name], args).items():
                    out.append((name, mode, h._reports(lambda: exe(*args))[0] == want, isa.BUILD))
    for name in ("offset_alone", "sum1_offset_alone", "two_x_at_max", "sum1_two_x", "cast_to_int"):
        for dtype in (np.float32, np.float64):
            fn, value = h._KEPT[name][0](*h._CONSTS[dtype]), h._KEPT[name][1]
            for shape in ((300, 4), (300, 7), (40, 70)):
                args = h._arrays(dtype, shape, h._special(value, dtype))
                want = h._reports(lambda: fn(np, *args))[0]
                for mode, exe in h._both(fn, args).items():
                    out.append((name, mode, h._reports(lambda: exe(*args))[0] == want, isa.BUILD))
    print(out)
""")


@pytest.mark.parametrize("build", [b for b in RUNNABLE if b != isa.BUILD] or ["none"])
def test_other_isa_builds_warn_as_numpy(build, tmp_path):
    """The avx2 and baseline builds (NUMTRACE_CPU_ISA, a child process: the generated kernels compile for
    the build in use; the baseline build has no masked vector ops, so its selects may branch)."""
    if build == "none":
        pytest.skip("this machine runs one ISA build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    code = _ISA_CHILD.format(tests=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert results and all(r[2] and r[3] == build for r in results), [r for r in results if not r[2]]
