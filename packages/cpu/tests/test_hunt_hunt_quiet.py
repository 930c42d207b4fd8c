"""Hunt in the quiet float compares (nt_opcodes.h NT_GT & co., nt_qcmp.h, the max/min reductions, the
vector math kernels' slow lanes): NaN (with payloads and signs), infinities, signed zeros and
subnormals through every compare-based op, at sizes around each build's vector widths and tails,
reversed and strided, scalar operands on either side, on each ISA build this CPU runs; and the
floating-point flags of a call that is not rerun through NumPy (it writes an argument), which must be
exactly the kinds NumPy's loop raises."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler, isa
from numtrace_ir import Graph, registry, testing
from numtrace_ir.registry import Sample
from numtrace_ir.testing import clip_cases

_COMPARES = ["np.maximum", "np.minimum", "np.fmax", "np.fmin", "np.greater", "np.greater_equal", "np.less",
             "np.less_equal", "np.equal", "np.not_equal", "np.heaviside"]
_PREDICATES = ["np.sign", "np.isfinite", "np.isinf", "np.isnan"]
_SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 513]


def _nan(dtype, sign: int, payload: int):
    if np.dtype(dtype) == np.float64:
        return np.array([0x7FF8000000000000 | payload | (sign << 63)], np.uint64).view(np.float64)[0]
    return np.array([0x7FC00000 | payload | (sign << 31)], np.uint32).view(np.float32)[0]


def _specials(dtype, n, rng):
    """NaNs of both signs with payloads, infinities, signed zeros, subnormals and normals."""
    tiny = 5e-324 if np.dtype(dtype) == np.float64 else 1e-45
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, tiny, -tiny, -2.5, 3.0], dtype)
    x = rng.choice(pool, n)
    normal = rng.random(n) < 0.4
    x[normal] = rng.standard_normal(int(normal.sum()))
    for i in np.flatnonzero(rng.random(n) < 0.25):
        x[i] = _nan(dtype, int(rng.integers(2)), int(rng.integers(1, 1000)))
    return x


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _loop_choice(want, got):
    """Elements where NumPy's fmax/fmin answer depends on the element's place in its loop (vector
    body or scalar tail), so only the value is compared: the sign of a -0.0/0.0 tie, and which of two
    NaNs is returned."""
    return ((want == 0) & (got == 0)) | (np.isnan(want) & np.isnan(got))


def _run(name, inputs, attrs=None):
    op = registry.get(name)
    graph = testing.build_graph(op, Sample(inputs, attrs or {}))
    exe = compile_graph(graph, [testing.type_of(v) for v in inputs])
    out = exe(*inputs)
    return op.reference(*inputs, **(attrs or {})), out[0] if isinstance(out, tuple) else out


def _assert_bits(name, inputs, what, attrs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):   # NumPy raises no flag on any of these; nor may the kernels
            want, got = _run(name, inputs, attrs)
    want, got = np.asarray(want), np.asarray(got)
    assert (want.dtype, want.shape) == (got.dtype, got.shape), what
    same = _bits(want) == _bits(got)
    if name in ("np.fmax", "np.fmin"):
        same |= _loop_choice(want, got)
    assert same.all(), f"{name} {what}: at {np.flatnonzero(~same.ravel())[:4]}"


def check_compares(seed: int = 0) -> None:
    """Every compare-based op bit for bit against NumPy, NaN payloads and signs included."""
    rng = np.random.default_rng(seed)
    for dtype in (np.float64, np.float32):
        for n in _SIZES:
            a, b = _specials(dtype, n, rng), _specials(dtype, n, rng)
            for name in _COMPARES:
                _assert_bits(name, (a, b), f"{np.dtype(dtype)} n={n}")
                if n > 1:
                    strided = (a[::-1], testing.noncontiguous(b))
                    _assert_bits(name, strided, f"{np.dtype(dtype)} n={n} strided")
                for s in (_nan(dtype, 1, 5), 0.0, -0.0, np.inf):
                    c = np.asarray(s, dtype)
                    _assert_bits(name, (a, c), f"{np.dtype(dtype)} n={n} (x, {s})")
                    _assert_bits(name, (c, a), f"{np.dtype(dtype)} n={n} ({s}, x)")
            for name in _PREDICATES:
                _assert_bits(name, (a,), f"{np.dtype(dtype)} n={n}")


def check_reductions(seed: int = 0) -> None:
    """max/min/argmax/argmin/nanmax/nanmin with one NaN (or inf) at the first, last, tail and block
    positions, and in some columns of 2-D axis reductions: which element, NaN or not, is NumPy's. The
    NaN's own bits are not compared: NumPy's own are its loop's (the element's at the last position,
    else the default NaN)."""
    rng = np.random.default_rng(seed)
    for dtype in (np.float64, np.float32):
        for n in (1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 63, 64, 65, 129, 1029):
            base = rng.standard_normal(n).astype(dtype)
            for p in sorted({0, n - 1, n // 2, min(n - 1, 32), min(n - 1, 64), max(0, n - 3)}):
                for v in (np.nan, np.inf, -np.inf):
                    x = base.copy()
                    x[p] = v
                    names = ["np.max", "np.min", "np.argmax", "np.argmin"]
                    names += ["np.nanmax", "np.nanmin"] * (n > 1)   # one NaN alone: All-NaN slice
                    for name in names:
                        for y in (x, x[::-1]):
                            with np.errstate(all="raise"):
                                want, got = _run(name, (y,))
                            assert np.array_equal(want, got, equal_nan=True), f"{name} n={n} {v} at {p}"
        for shape in [(3, 5), (5, 3), (7, 17), (17, 7), (9, 33), (33, 9), (130, 19)]:
            x = rng.standard_normal(shape).astype(dtype)
            x[rng.integers(shape[0], size=2), rng.integers(shape[1], size=2)] = np.nan
            x[0, 0] = np.inf
            for name in ("np.max", "np.min", "np.argmax", "np.argmin"):
                for axis in (0, 1):
                    for y in (x, x.T, x[::-1, ::2]):
                        with np.errstate(all="raise"):
                            want, got = _run(name, (y,), {"axis": axis})
                        assert np.array_equal(want, got, equal_nan=True), f"{name} {y.shape} axis={axis}"


def test_compares_are_numpys_bit_for_bit():
    check_compares()


def test_extreme_reductions_with_nan_and_inf_are_numpys():
    check_reductions()


_OTHER_BUILDS = [b for b in isa.built() if b != isa.BUILD and isa.BUILDS[b][1] <= isa.runtime.cpu_features()]


@pytest.mark.parametrize("build", _OTHER_BUILDS)
def test_the_same_on_every_build_this_cpu_runs(build):
    """The quiet compares have one vector loop per build (AVX-512 masks, AVX2 blends, SSE2 zeroing),
    and exp and tanh float32 one kernel per build: the same checks with NUMTRACE_CPU_ISA forcing each
    other build (a subprocess: the build is chosen at import)."""
    _in_build(build, "t.check_compares(1); t.check_reductions(1); t.check_flags()")


def _in_build(build: str, code: str) -> None:
    """Run `code` (this module imported as t, NumPy as np) in a subprocess with `build` forced."""
    here = os.path.dirname(__file__)
    prelude = f"import sys; sys.path.insert(0, {here!r}); import numpy as np; import {__name__} as t; "
    r = subprocess.run([sys.executable, "-c", prelude + code], env={**os.environ, "NUMTRACE_CPU_ISA": build},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


# -- floating-point flags of a call that is not rerun -------------------------------------------------

def _not_rerun(name, x):
    """`name`(x) beside ``negative(z)`` written into a last argument z: a call that writes into its
    arguments is not rerun through NumPy, so it reports the kinds its kernels raised."""
    g = Graph()
    xv = g.add_input("x", testing.type_of(x))
    out = g.create_node(name, [xv]).outputs
    z = g.add_input("z", testing.type_of(x))
    g.set_outputs(list(out) + list(g.create_node("np.negative", [z]).outputs))
    t = testing.type_of(x)
    return compile_graph(g, [t, t], {1: 1})


def _raised(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn(), None
    except FloatingPointError as e:
        return None, str(e).split(" encountered")[0]


def _assert_raises_like_numpy(name, x):
    exe = _not_rerun(name, x)
    op = registry.get(name)
    with np.errstate(all="raise"):
        want, want_raised = _raised(lambda: op.reference(x))
        got, got_raised = _raised(lambda: exe(x, np.ones_like(x)))
    assert got_raised == want_raised, f"{name}({x[:2]}...) {x.dtype}"
    if want_raised is None:
        testing.assert_matches_numpy(got[0], want, op, (x,))


@pytest.mark.parametrize("n", [1, 7, 16, 40])
@pytest.mark.parametrize("value", [-746.0, -1000.0, -1e300, -np.inf])
def test_exp_below_the_subnormals_raises_underflow_as_numpy(value, n):
    """np.exp of a finite x <= -746 is +0 with underflow raised (NumPy raises FloatingPointError under
    np.errstate(all="raise")); of -inf +0 with no flag. The vector loop gave +0 for both, silently."""
    _assert_raises_like_numpy("np.exp", np.full(n, value))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -1.0])
def test_arcsin_of_zero_and_one_raises_nothing(value, dtype):
    """np.arcsin(0.0) and (+-1.0): NumPy raises nothing; the kernel's split square root divided 0 by 0
    (invalid), so a call not rerun raised FloatingPointError."""
    _assert_raises_like_numpy("np.arcsin", np.full(20, value, dtype))


@pytest.mark.parametrize("n", [1, 7, 8, 9, 40])
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_float32_exp_of_an_infinity_raises_nothing(value, n):
    """np.exp(float32 +-inf) is inf / +0 with no flag in NumPy; the float32 kernel clamped the lane to
    89 / -104 and raised overflow / underflow."""
    _assert_raises_like_numpy("np.exp", np.full(n, value, np.float32))


@pytest.mark.parametrize("n", [1, 7, 8, 9, 40])
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_float32_tanh_of_an_infinity_raises_nothing(value, n):
    """np.tanh(float32 +-inf) is +-1 with no flag; the AVX2 kernel divided inf by inf (invalid) before
    selecting +-1."""
    _assert_raises_like_numpy("np.tanh", np.full(n, value, np.float32))


_COMPARE_FLAG_VALUES = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0, 5e-324])


def check_flags() -> None:
    """The fixed flag cases above and NaN through every compare, in calls not rerun."""
    for n in (1, 7, 8, 9, 40):
        for value in (-746.0, -1000.0, -np.inf):
            _assert_raises_like_numpy("np.exp", np.full(n, value))
        for value in (np.inf, -np.inf):
            _assert_raises_like_numpy("np.exp", np.full(n, value, np.float32))
            if isa.BUILD != "baseline":   # see test_baseline_float32_flags_are_numpys
                _assert_raises_like_numpy("np.tanh", np.full(n, value, np.float32))
    for dtype in (np.float64, np.float32):
        for value in (0.0, -0.0, 1.0, -1.0):
            _assert_raises_like_numpy("np.arcsin", np.full(20, value, dtype))
        x = np.tile(_COMPARE_FLAG_VALUES.astype(dtype), 5)
        for name in _PREDICATES:
            _assert_raises_like_numpy(name, x)
        for name in ("np.max", "np.min", "np.argmax", "np.argmin"):
            for k in range(1, 40, 3):
                _assert_raises_like_numpy(name, x[:k])


def test_compare_and_reduction_flags_on_nan_are_numpys():
    check_flags()


@pytest.mark.xfail(strict=True, reason=(
    "the float64 vector math kernels (nt_vmath.h) square the reduced argument of a tiny x (|x| below "
    "about 1e-154, subnormals included) and raise underflow where NumPy's loop raises nothing: a call "
    "not rerun raises FloatingPointError under np.errstate(all='raise')"))
@pytest.mark.parametrize("name", ["np.exp", "np.expm1", "np.sin", "np.cos", "np.tanh", "np.arctan",
                                  "np.arcsin"])
def test_tiny_inputs_raise_no_underflow(name):
    _assert_raises_like_numpy(name, np.full(20, 1e-200))


@pytest.mark.parametrize("mode", ["off", "sync"])
def test_clip_is_numpys_bit_for_bit(mode):
    """np.clip's -0.0/0.0 ties and NaNs (x's or a bound's, by NumPy's two clip loops), a_min > a_max,
    every kind of bound, on the interpreter and in generated kernels."""
    old = compiler.set_mode(mode)
    try:
        for what, inputs, attrs in clip_cases.cases():
            if mode == "sync" and "n=5 " not in what:   # one length per case in compiled C
                continue
            g, arrays = clip_cases.graph(inputs, attrs)
            with np.errstate(all="ignore"):
                want = registry.get("np.clip").reference(*inputs, **attrs)
            with np.errstate(all="raise"):   # NumPy's loop clears the flags of its compares
                (got,) = compile_graph(g, [testing.type_of(v) for v in arrays])(*arrays)
            same = clip_cases.same_bits(got, want)
            assert same.all(), f"{what}: at {np.flatnonzero(~same.ravel())[:4]}"
    finally:
        compiler.set_mode(old)


_BASELINE_FLAGS = {
    "exp": ("[t._assert_raises_like_numpy('np.exp', np.full(n, v, np.float32)) for n in (1, 3) "
            "for v in (100.0, -120.0)]",
            "np.exp of a float32 that overflows (100.0) or underflows (-120.0) as the last element of an "
            "odd-sized block (n = 1, 3, 5, ...) raises no flag where NumPy says overflow / underflow: "
            "the call returns inf / 0 silently, also under np.errstate(all='raise')"),
    "tanh": ("[t._assert_raises_like_numpy('np.tanh', np.full(n, v, np.float32)) for n in (2, 8) "
             "for v in (np.inf, -np.inf)]",
             "np.tanh of float32 +-inf (n >= 2) raises invalid where NumPy raises nothing: the loop GCC "
             "vectorizes from nt_tanhf computes an inf lane despite the clamp"),
}


@pytest.mark.skipif("baseline" not in isa.built(), reason="no baseline build")
@pytest.mark.parametrize("case", [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason="baseline build: " + r))
    for k, (_, r) in _BASELINE_FLAGS.items()])
def test_baseline_float32_flags_are_numpys(case):
    _in_build("baseline", _BASELINE_FLAGS[case][0])
