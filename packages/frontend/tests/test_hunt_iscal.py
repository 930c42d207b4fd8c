"""Hunted in branch iscal's change: the tracer tells traced NumPy scalars (x[i], a full reduction's result,
an op's NumPy-scalar result, a NumPy scalar argument) from 0-d arrays, and records operators of NumPy int
scalars as NumPy's scalar math (np.scalar_operator). Traced at one input, called at others, under
np.errstate warn, raise and ignore, on the reference, cpu (interpreter and generated kernels, 1 and 2
threads) and triton backends, against eager NumPy: values, dtypes, types (np.int8 vs 0-d ndarray) and
warnings. Findings are fixed (with the check that failed) or strict xfails with their cause; the passing
checks guard the scalar / 0-d array distinction the change relies on."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from test_hunt_breadth import mode  # noqa: F401  (mode: the cpu kernel modes' fixture)
from test_hunt_hunt_sect import threads  # noqa: F401  (1 and 2 threads' fixture)
from test_hunt_known import _matches, _trace

_INT8_CALLS = [(np.array(v, np.int8),) for v in ([120, 100, 3, -128, 1], [-100, -128, 0, 4, 2])]


def _i8(*values):
    return (np.array(values, np.int8),)


def _overflowing_uses(e):
    """A value and its operators with Python ints, which overflow int8 at the calls' values: NumPy's
    scalar math warns (and raises under errstate raise) where the ufunc on a 0-d array wraps silently."""
    return e, e + 100, 100 - e, e * 3, e // 7


# --- Findings: fixed ----------------------------------------------------------------------------------------

def _inlined_scalar_results(inner):
    def outer(x):
        a, t = inner(x)
        return (a, *_overflowing_uses(a), t * 2)
    return outer


def _element_and_extreme(x):
    return x[0], x.max()


@pytest.mark.triton
def test_a_traced_functions_numpy_scalar_results_stay_numpy_scalars_when_inlined(backend):
    """Fixed (numtrace.inlining): a traced function called while another is traced records its graph
    there, running each node's reference; `x[0]`'s reference gives a 0-d array, so the inlined result was
    traced as a 0-d array: the outer call returned array(120, dtype=int8) where NumPy returns np.int8(120),
    and `a + 100` recorded np.add, wrapping to -36 silently where NumPy warns 'overflow encountered in
    scalar add' and raises under errstate raise. The results the inner trace returns as NumPy scalars
    (its output spec's ScalarLeaf) are traced as NumPy scalars now."""
    inner = _trace(_element_and_extreme, _i8(1, 2), backend="reference")
    outer = _inlined_scalar_results(inner)
    traced = _trace(outer, _i8(1, 2, 3, 4, 5), backend=backend)
    assert traced.code.count("np.scalar_operator") == 5
    _matches(traced, _inlined_scalar_results(_element_and_extreme), _INT8_CALLS,
             states=("warn", "raise", "ignore"))


def _complex_scalar_operators(x):
    a, b, t = x[0], x[1], x.sum()
    s = a
    s *= b
    return (a * b, s, t * a, a * 1.5, 1.5 * a, a * (1 + 2j), (0.5 - 1j) * b, np.complex128(0.3 + 0.7j) * a,
            a * x.real[1], x.real[1] * a, a + b, a - 1e308, a / b, a / x.shape[0],
            x.astype(np.complex64)[0] * x.astype(np.complex64)[1], x.astype(np.complex64)[0] * x.real[1],
            np.multiply(a, b), x * a, x.real[0] * (1 + 1j))   # a call, arrays, a float scalar: the ufuncs


_COMPLEX_CALLS = [(np.array([-0.7037352358069926 - 2.3250307746388343j,
                             -1.2654214710460525 - 0.21879166393254573j, 0.5, 3.0]),),
                  (np.array([0.5838473983585957 + 0.48940762075201505j,
                             0.3214733738478813 - 0.028848096531987416j, -1.5 + 2j, 0.25j]),),
                  (np.array([1e308 + 1e308j, 10 + 10j, np.inf + 0j, 0j]),),
                  (np.array([1e-320 + 1j, 0j, -0.0 + 0j, np.nan + 1j]),)]


@pytest.mark.triton
def test_operators_of_numpy_complex_scalars_are_numpy_scalar_math(backend):
    """Fixed (proxy._runs_scalar_math): `+ - * /` of a NumPy complex scalar (x[0], a reduction's result)
    recorded the ufuncs on 0-d arrays. NumPy's complex scalar `*` rounds each product where the ufunc's
    loop fuses them: x[0] * x[1] at (-0.70-2.33j) * (-1.27-0.22j) was 0.3818243254442189+3.0961j for
    NumPy's 0.38182432544421885+3.0961j (the reference backend; about half of random products differ in
    a last bit, complex64 too); and np.multiply warns 'overflow encountered in multiply' at
    (1e308+1e308j) * 1.5, where NumPy's operator returns the same value silently, so a call under
    np.errstate(over='raise') raised FloatingPointError where NumPy returns. Now np.scalar_operator."""
    traced = _trace(_complex_scalar_operators, (np.arange(4) + 1j,), backend=backend)
    assert traced.code.count("np.scalar_operator") == 16
    _matches(traced, _complex_scalar_operators, _COMPLEX_CALLS,
             states=("ignore",) if backend == "triton" else ("warn", "raise", "ignore"))


def test_complex_scalar_products_bits_in_generated_kernels(mode, threads):  # noqa: F811
    """The complex scalar product feeding fused passes (interpreter and generated kernels, 1 and 2 threads):
    NumPy's bits for the scalar and for the arrays scaled by it."""
    def fn(x):
        s = x[0] * x[1]
        return s, x * s, (x * x[2]).sum() * x[3], np.abs(x - s)
    traced = _trace(fn, (np.arange(40) + 1j,), backend="cpu")
    rng = np.random.default_rng(7)
    calls = [(rng.standard_normal(n) + 1j * rng.standard_normal(n),) for n in (4, 33, 1000)]
    _matches(traced, fn, calls, states=("warn",))


def _unary_operators_of_scalars(x):
    c = x.astype(np.complex128)
    z = c[0] + 1j * c[1]
    u = x.astype(np.uint8)
    return (abs(z), abs(c.sum() * 1j + c[2]), -x[0], abs(x[3]), -u[1], abs(u[2]), -x.astype(np.int64)[3],
            -z, abs(x.astype(np.float32)[0]), -x.astype(np.float16)[1], ~x[0], +x[0],
            np.abs(z), np.negative(x[0]), abs(np.asarray(x[3])), -np.asarray(u[1]))   # calls, 0-d: ufuncs


_UNARY_CALLS = [_i8(-42, 76, 3, -128), _i8(5, -1, 0, 127), _i8(-128, 0, 128 - 256, -128)]


@pytest.mark.triton
def test_unary_operators_of_numpy_int_and_complex_scalars_are_numpy_scalar_math(backend):
    """Fixed (np.scalar_unary_operator): `-s` and `abs(s)` of a traced NumPy int scalar recorded
    np.negative /
    np.absolute on a 0-d array, which wrap silently where NumPy's scalar math warns 'overflow encountered
    in scalar negative' (int8 -128; -s of a uint at every nonzero value) and raises under errstate raise;
    abs() of a NumPy complex scalar is C hypot in NumPy's scalar math, where np.absolute's loop differs in
    the last bit: abs(-0.0421+0.7594j) was 0.7605190917128595 for NumPy's 0.7605190917128594 (about a
    third of random values, complex64 too). Explicit ufunc calls, 0-d arrays, float scalars, +s and ~s
    stay the ufuncs."""
    traced = _trace(_unary_operators_of_scalars, _i8(1, 2, 3, 4), backend=backend)
    assert traced.code.count("np.scalar_unary") == 7
    _matches(traced, _unary_operators_of_scalars, _UNARY_CALLS,
             states=("ignore",) if backend == "triton" else ("warn", "raise", "ignore"))


def _complex_abs(x):
    return abs(x[0]), abs(x[1:2].sum()), abs(x.astype(np.complex64)[2]), x * abs(x[3])


def test_complex_scalars_abs_bits(backend):
    """abs() of NumPy complex scalars at values where np.absolute's loop and C hypot differ in the last
    bit (complex128 and complex64), and the result scaling an array."""
    rng = np.random.default_rng(3)
    calls = [(np.array([-0.042130213050934895 + 0.7593512586465077j, -13.210486 - 0.589035j,
                        -13.210486 - 0.589035j, 1e-310 + 3e-310j]),)]
    calls += [(rng.standard_normal(4) * 10.0 ** rng.integers(-5, 5, 4) + 1j * rng.standard_normal(4),)
              for _ in range(8)]
    traced = _trace(_complex_abs, (np.ones(4, complex),), backend=backend)
    _matches(traced, _complex_abs, calls, states=("warn",))


def _scalar_ops_of_an_argument(x, s):
    c = x.astype(np.complex128)
    return -x[0], abs(x[1]), abs(c[0] * 1j + c[1]), s * c[2], -s, abs(s), s / x.shape[0]


def test_new_scalar_steps_after_the_checker_save_load_and_inlining(backend, tmp_path):
    """np.scalar_unary_operator and complex np.scalar_operator (a complex64 scalar argument too) in a trace
    made with check_inputs, after save and load, and inlined into another trace."""
    fn = _scalar_ops_of_an_argument
    traced = _trace(fn, (np.array([1, 2, 3], np.int8), np.complex64(1 + 2j)), backend=backend,
                    check_inputs=[(np.array([7, 8, 9], np.int8), np.complex64(3j))])
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    inlined = _trace(lambda x, s: traced(x, s), (np.array([1, 2, 3], np.int8), np.complex64(1 + 2j)),
                     backend=backend)
    calls = [(np.array([-128, -128, 5], np.int8), np.complex64(-0.042130213050934895 + 0.7593512586465077j)),
             (np.array([3, 4, 5], np.int8), np.complex64(1e38 + 1e38j))]
    for t in (traced, loaded, inlined):
        _matches(t, fn, calls, states=("warn", "raise", "ignore"))


# --- Findings: not fixed ----------------------------------------------------------------------------------

def _scalar_of_an_element(x):
    return np.int8(x[0]) + 100, x.dtype.type(x[1]) * 2


@pytest.mark.xfail(strict=True, reason=(
    "pre-existing, beside the change: np.int8(x[0]) (and x.dtype.type(x[0])) reads the traced element "
    "through __array__: a guard on its value, and the int8 scalar's operators run on a plain NumPy "
    "scalar, folded into a constant while tracing. A call with another value traces again with NumPy's "
    "RuntimeWarnings silenced (specializations._specialization: 'the new graph' is to say them, but it "
    "holds the folded constant), so at x[0] = 120 the call warns nothing where NumPy warns 'overflow "
    "encountered in scalar add', and a later call with that value under np.errstate(over='raise') "
    "returns np.int8(-36) where NumPy raises FloatingPointError. np.int8(traced) cannot be intercepted "
    "(a type); np.asarray(x[0]).astype(np.int8)[()] or x[0].astype(np.int8) stay in the graph"))
def test_a_numpy_scalar_made_from_an_element_keeps_its_overflow(backend):
    traced = _trace(_scalar_of_an_element, _i8(1, 2), backend=backend)
    _matches(traced, _scalar_of_an_element, [_i8(120, 100), _i8(121, 3)])


def _branch_on_a_scalar_sum(x):
    if x[0] + 100 > 0:
        return x * 2
    return x - 1


@pytest.mark.xfail(strict=True, reason=(
    "pre-existing in kind (any warning in a data guard's cone; the reference backend repeats ufunc "
    "warnings before a failing guard too): `x[0] + 100` runs (and warns 'overflow encountered in scalar "
    "add') before the guard on its comparison fails; that run is discarded and the new trace's graph runs "
    "it again, so the call that breaks the guard warns twice where NumPy warns once (an errstate 'call' "
    "handler is called twice)"))
def test_a_scalar_overflow_before_a_broken_guard_warns_once(backend):
    traced = _trace(_branch_on_a_scalar_sum, _i8(1, 2), backend=backend)
    counts = []
    for fn in (traced, _branch_on_a_scalar_sum):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warnings.simplefilter("ignore", nt.TracerWarning)
            fn(*_i8(120, 2))
        counts.append([str(w.message) for w in caught])
    assert counts[0] == counts[1] == ["overflow encountered in scalar add"]


# --- Passing checks: NumPy scalars and 0-d arrays, as NumPy makes them -----------------------------------

_SCALARS = {   # each a NumPy int scalar in NumPy
    "x[-1]": lambda x: x[-1], "x[::-1][0]": lambda x: x[::-1][0], "x[None][0, 0]": lambda x: x[None][0, 0],
    "x[[0]][0]": lambda x: x[[0]][0], "x[np.intp(1)]": lambda x: x[np.intp(1)],
    "x[np.array(0)]": lambda x: x[np.array(0)], "x[x.argmax()]": lambda x: x[x.argmax()],
    "x.sum(axis=0)": lambda x: x.sum(axis=0, dtype=np.int8), "x.max(axis=(0,))": lambda x: x.max(axis=(0,)),
    "np.max(x, keepdims)[0]": lambda x: np.max(x, keepdims=True)[0], "np.maximum.reduce": np.maximum.reduce,
    "x.min(initial)": lambda x: x.min(initial=5), "x.flat[0]": lambda x: x.flat[0],
    "np.take": lambda x: np.take(x, 0), "x[0].astype": lambda x: x[0].astype(np.int8),
    "0-d[()]": lambda x: np.asarray(x[0])[()], "x[0][()]": lambda x: x[0][()],
    "reshape(())[()]": lambda x: x[:1].reshape(())[()],
    "np.minimum": lambda x: np.minimum(x[0], np.int8(100)), "np.abs": lambda x: np.abs(x[0]),
    "x[0].copy()": lambda x: x[0].copy(), "np.sort[0]": lambda x: np.sort(x)[0],
    "np.cumsum[-1]": lambda x: np.cumsum(x, dtype=np.int8)[-1], "np.diff[0]": lambda x: np.diff(x)[0],
    "2-d [1, 1]": lambda x: x[:4].reshape(2, 2)[1, 1], "F-order [1, 0]": lambda x: np.asfortranarray(
        x[:4].reshape(2, 2))[1, 0], "2-d [0][1]": lambda x: x[:4].reshape(2, 2)[0][1],
    "2-d max()": lambda x: x[:4].reshape(2, 2).max(),
    "0-d + 0-d": lambda x: np.asarray(x[0]) + np.asarray(x[1]),
    "s + 0-d": lambda x: x[0] + np.zeros((), np.int8), "np.add": lambda x: np.add(x[0], x[1]),
    "max()": lambda x: max(x[0], x[1]), "sum()": sum, "list(x)[0]": lambda x: list(x)[0],
    "np.unstack": lambda x: np.unstack(x)[0], "x & y": lambda x: x[0] & x[1], "+x[0]": lambda x: +x[0],
    "np.max(where)": lambda x: np.max(x, where=x > 0, initial=0), "np.einsum": lambda x: np.einsum(
        "i->", x, dtype=np.int8), "np.trace": lambda x: np.trace(x[:4].reshape(2, 2), dtype=np.int8),
    "x[0].clip": lambda x: x[0].clip(0), "np.partition": lambda x: np.partition(x, 2)[2],
    "np.round": lambda x: np.round(x[0], -1), "x.astype(np.uint8)[1]": lambda x: x.astype(np.uint8)[1],
    "x[0].reshape(())": lambda x: x[0].reshape(()),   # (a NumPy scalar's reshape gives a scalar)
}
_ZERO_D = {   # each a 0-d int8 array in NumPy
    "x[..., 0]": lambda x: x[..., 0], "x[0, ...]": lambda x: x[0, ...],
    "np.asarray": lambda x: np.asarray(x[0]), "np.copy": lambda x: np.copy(x[0]),
    "np.array": lambda x: np.array(x[0]), "x[0][...]": lambda x: x[0][...],
    "reshape(())": lambda x: x[:1].reshape(()), "np.squeeze": lambda x: np.squeeze(x[:1]),
    "np.where": lambda x: np.where(x[0] > 0, x[0], x[1]), "np.full": lambda x: np.full((), x[0]),
}


@pytest.mark.parametrize("name", [*_SCALARS, *_ZERO_D])
def test_numpy_scalars_and_0d_arrays_as_numpy_makes_them(name):
    """A value NumPy gives as a scalar is returned as one and its operators are NumPy's scalar math
    (overflow warned and raised); a 0-d array is returned as one and its operators are the ufuncs (silent
    wrap). (Reference backend: the distinction is the tracer's.)"""
    make = {**_SCALARS, **_ZERO_D}[name]

    def fn(x):
        return _overflowing_uses(make(x))
    traced = _trace(fn, _i8(5, 2, 3, 4, 1), backend="reference")
    assert ("np.scalar_operator" in traced.code) == (name in _SCALARS)
    _matches(traced, fn, _INT8_CALLS)


def _sizes_with_scalars(x):
    n = x.shape[0]
    return x[0] - n, n * x[0], x[0] + n * 2, x.astype(np.uint8)[0] - n, x[0] + len(x), x[0] + x.size


def test_traced_sizes_with_int_scalars_across_the_int8_range(backend):
    """A traced size with an int8 scalar: NumPy's scalar math at sizes past 127 refuses the Python int
    (OverflowError), below it warns of overflow; the traced size is such an int at each call."""
    traced = _trace(_sizes_with_scalars, (np.ones(5, np.int8),), backend=backend)
    calls = [(np.full(n, v, np.int8),) for n, v in ((3, 127), (4, 120), (127, 1), (2, -128))]
    _matches(traced, _sizes_with_scalars, calls)
    for n in (128, 300):
        with pytest.raises(OverflowError, match="out of bounds for int8"), warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # (a call at a new size may trace again)
            traced(np.ones(n, np.int8))


def _int_scalars_into_passes(x):
    a, b, t, u = x[0], x[-1], x.max(), x.min()
    return (a + b, t * 2, u - 100, x * (t + 1), x - (a * b), (x + 1).max() + 100, t // (u - u), t % (a - a),
            x.astype(np.int64).sum() * 2**40, x.astype(np.uint8)[1] - np.uint8(200))


def test_int_scalar_math_between_reductions_and_passes(mode, threads):  # noqa: F811
    """np.scalar_operator steps between reductions and fused passes (interpreter and generated kernels,
    1 and 2 threads, long rows): warnings and errors as NumPy's, in the calling thread's np.errstate."""
    traced = _trace(_int_scalars_into_passes, _i8(1, 2, 3, 4, 5), backend="cpu")
    calls = [(np.array([120, 100, 3, -128, 7] * 3000, np.int8),), (np.array([-100, 1], np.int8),),
             (np.full(70001, 127, np.int8),)]
    _matches(traced, _int_scalars_into_passes, calls, states=("warn", "raise", "ignore"))


@pytest.mark.skipif("cpu" not in nt.available_backends(), reason="numtrace-cpu is not installed")
@pytest.mark.parametrize("fn, groups", [(lambda x: x / x.sum(), [1, 1]),
                                        (lambda x: (x * x).sum() ** 0.5, [2, 1])], ids=["x/x.sum()", "norm"])
def test_float_scalar_operators_stay_fused(fn, groups):
    """A float NumPy scalar into a pass and a float reduction's ** keep their fused groups (x * x in its
    sum): no np.scalar_operator step."""
    traced = _trace(fn, (np.linspace(0.0, 1.0, 4096),), backend="cpu")
    assert "np.scalar_operator" not in traced.code
    (stats,) = traced.stats()["signatures"].values()
    assert sorted(stats["fused_group_sizes"]) == sorted(groups)
