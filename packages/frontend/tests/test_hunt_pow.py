"""Hunted in hunt_breadth's frontend changes: ``x ** 2 / -1 / 0.5`` recorded as NumPy's shortcut ufuncs,
``x.nbytes`` recorded, host calls keeping NumPy scalars, an eager Module keeping a parameter updated in
place. Traced at one size and called at others, on every dtype, NumPy scalars and 0-d arrays as bases,
exponents of every Python and NumPy type, in place on arguments and views, on both kernel modes, the
reference backend and saved traces, against eager NumPy. Each finding is a minimal program kept as a
regression test, with the passing checks that cover the paths it went through."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from test_hunt_breadth import _same, mode  # noqa: F401  (mode: the kernel modes' fixture)
from test_hunt_hunt_sect import threads  # noqa: F401  (1 and 2 threads' fixture)

_SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 1e-40, 2.0, -3.0, 0.7, 1e308, -1e308, 3e38, 7e4, -1.5]


def _quiet(fn, *args, **kwargs):
    """fn(*args) with NumPy's floating-point reports and numtrace's notes ignored."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", nt.TracerWarning)
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return fn(*args, **kwargs)


def _trace(fn, args, **kwargs):
    return _quiet(nt.trace, fn, args, **kwargs)


def _values(dtype, n: int) -> np.ndarray:
    """n values of `dtype`: the special floats (and their complex mixes) or small and wrapping ints."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.resize([True, False, False], n)
    if dtype.kind in "iu":
        return np.resize(np.array([0, 1, 2, 3, 7, 100, 127, 255, 1000, -1, -7]).astype(dtype), n)
    real = np.resize(_SPECIAL, n)
    with np.errstate(all="ignore"):
        return (real + 1j * np.roll(real, 3) if dtype.kind == "c" else real).astype(dtype)


# --- Findings ------------------------------------------------------------------------------------------

def _bool_scalar_squared(x):
    return x[0] ** 2, x.any() ** 2, x[0, ...] ** 2, x ** 2


def test_a_numpy_bool_scalar_squared_is_int64(backend):
    """``np.True_ ** 2`` is NumPy's scalar math, np.power's int64; the trace took the bool-array shortcut
    (np.square, int8) for NumPy scalars too. A 0-d array and an array squared stay int8."""
    traced = _trace(_bool_scalar_squared, (np.ones(3, bool),), backend=backend)
    for x in (np.array([True, False]), np.array([False]), np.zeros(5, bool)):
        assert _same(traced(x), _bool_scalar_squared(x))


def _by_shape_power(x):
    return x ** (x.shape[0] - 1), x ** (x.shape[0] - 4), x ** (x.shape[0] / 6)


def _by_shape_power_in_place(x):
    y = x * 1
    y **= x.shape[0] - 1
    return y


@pytest.mark.parametrize("fn", [_by_shape_power, _by_shape_power_in_place])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.bool_, np.float64])
def test_an_exponent_computed_from_a_shape_takes_numpys_shortcut(backend, fn, dtype):
    """``x ** (n - 1)`` with n a traced size is a Python int at run time: where it is 2 (-1, or 0.5 for
    ``n / 6``) NumPy takes np.square (np.reciprocal, np.sqrt). The trace recorded np.power, whose
    complex results differ in the last bits and at zeros and infinities (``-0.0 + 1e300j`` squared), and
    whose bool result is int64 where np.square's is int8, at the very size it was traced at. The
    exponents' comparisons are now guards: a size where the shortcut changes traces again."""
    if dtype == np.bool_ and fn is _by_shape_power:
        fn = _bool_by_shape_power
    traced = _trace(fn, (_signed_zeros(dtype, 3),), backend=backend)
    for n in (3, 2, 5, 3, 4):
        x = _signed_zeros(dtype, n)
        assert _same(_quiet(traced, x), _quiet(fn, x)), n


def _signed_zeros(dtype, n: int) -> np.ndarray:
    """-0.0 - 0.0j, -inf + 0j and other values whose squares and roots differ from np.power's."""
    if np.dtype(dtype).kind == "b":
        return _values(dtype, n)
    special = [-0.0, -np.inf, 4.0, np.nan, 0.0, 2.0, -3.0, 1e300, 0.0, -0.0]
    real, imag = np.resize(special, n), np.resize(special[::-1], n)
    with np.errstate(all="ignore"):
        return (real + 1j * imag if np.dtype(dtype).kind == "c" else real).astype(dtype)


def _bool_by_shape_power(x):
    return x ** (x.shape[0] - 1)   # a bool array to a negative int raises in NumPy


def test_a_python_int_out_of_a_small_int_range_raises_overflow_error(backend):
    """``x.astype(np.int8) + x.nbytes``: at a size where the byte count leaves int8's range, NumPy raises
    OverflowError ("Python integer 168 out of bounds for int8"); the trace raised a KeyError about
    '__builtins__': NumPy's error path imports a module from the frame the interpreter runs a node in,
    whose globals had no __builtins__."""
    def shifted(x):
        return x.astype(np.int8) + x.nbytes

    traced = _trace(shifted, (np.ones((4, 3)),), backend=backend)
    assert _same(traced(np.ones((5, 2))), shifted(np.ones((5, 2))))
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        shifted(np.ones((7, 3)))
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        traced(np.ones((7, 3)))


@pytest.mark.parametrize("x, exponent", [
    (np.float64(0.3624182010806754), 2), (np.float64(-1.6979398304606041), -1),
    (np.float32(-0.9600179), 2), (np.float32(-0.79218745), -1)], ids=["f8-2", "f8-m1", "f4-2", "f4-m1"])
def test_a_numpy_float_scalar_squared_is_c_pow(backend, x, exponent):
    """A NumPy scalar's ** is NumPy's scalar math, the C library's pow (about 0.52 ulp), which takes no
    shortcut: pow(x, 2) and pow(x, -1) differ from the correctly rounded x * x and 1 / x by an ulp for
    about 1 value in 1000. The trace recorded np.power on a 0-d array, which both backends ran as
    square / reciprocal; now `np.scalar_power`, NumPy's own ** on the scalars."""
    def scalar_power(a):
        return a[0] ** exponent

    traced = _trace(scalar_power, (np.ones(2, x.dtype),), backend=backend)
    a = np.array([x, 1.0], x.dtype)
    assert _same(traced(a), scalar_power(a))


@pytest.mark.xfail(strict=True, raises=ValueError, reason=(
    "an in-place ufunc on a traced array runs NumPy's call without out= first, then checks the out= cast: "
    "`b **= -1` of a bool array (or `u **= np.int8(-1)` of uint8) raises NumPy's loop error (ValueError: "
    "'Integers to negative integer powers') at trace time, where NumPy refuses the cast to the out= "
    "array first (UFuncTypeError, a TypeError)"))
@pytest.mark.parametrize("dtype, exponent", [(np.bool_, -1), (np.uint8, np.int8(-1))], ids=["bool", "uint8"])
def test_an_in_place_power_refuses_the_out_cast_first(backend, dtype, exponent):
    def inverted(x):
        y = x.copy()
        y **= exponent
        return y

    with pytest.raises(TypeError, match="Cannot cast ufunc 'power' output"):
        inverted(np.ones(3, dtype))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'power' output"):
        _trace(inverted, (np.ones(3, dtype),), backend=backend)


# --- Passing checks of the areas hunted ------------------------------------------------------------------

_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64, np.float16, np.float32,
           np.float64, np.complex64, np.complex128]
# Exponents whose results are exact in NumPy (its shortcuts, integer powers): compared bit for bit.
_EXPONENTS = [2, -1, 0.5, 2.0, 1, 0, True, False, np.int64(2), np.float32(0.5), -1.0]


def _pow_forms(exponent):
    def forms(x):
        powers = x ** exponent, x[::-1] ** exponent, x[:1, ...][0, ...] ** exponent
        y = x.copy()
        y **= exponent
        out = np.empty(x.shape, np.result_type(x, exponent))
        np.power(x, exponent, out=out)
        return (*powers, y, out)

    return forms


@pytest.mark.parametrize("exponent", _EXPONENTS, ids=repr)
@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_powers_of_every_dtype_are_numpys(backend, dtype, exponent):
    """``x ** e``, of a reversed view and of a 0-d array, ``y **= e`` and ``np.power(x, e, out=...)``:
    NumPy's dtype and bits, or NumPy's exception (integers to negative powers, in-place casts)."""
    fn = _pow_forms(exponent)
    try:
        _quiet(fn, _values(dtype, 4))
    except (ValueError, TypeError, OverflowError) as error:
        with pytest.raises(type(error)):
            _trace(fn, (_values(dtype, 4),), backend=backend)
        return
    traced = _trace(fn, (_values(dtype, 4),), backend=backend)
    for n in (15, 1, 6):
        x = _values(dtype, n)
        assert _same(_quiet(traced, x), _quiet(fn, x)), n


def _shortcuts_in_place(x, z):
    x **= 2
    v = z[::2]
    v **= 0.5
    z[1::2] **= -1
    return x * 1.0, z * 1.0


@pytest.mark.usefixtures("mode", "threads")
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.float16])
def test_shortcuts_in_place_on_arguments_and_views_are_numpys(dtype, tmp_path):
    """The shortcuts written into an argument, a strided view of one and a fancy slice of one: NumPy's
    bits in the results and in the arguments, through a saved and loaded trace too."""
    make = lambda n: (_values(dtype, n), _values(dtype, 2 * n)[::-1].copy())
    traced = _trace(_shortcuts_in_place, make(4))
    traced.save(tmp_path / "pow.nt")
    loaded = nt.load(tmp_path / "pow.nt")
    for run in (traced, loaded):
        for n in (4, 1, 9, 40):
            mine, theirs = make(n), make(n)
            assert _same(_quiet(run, *mine), _quiet(_shortcuts_in_place, *theirs)), n
            assert _same(list(mine), list(theirs)), n
    if dtype == np.float32 and pytest.importorskip("numtrace_cpu.compiler").mode() == "sync":
        assert sum(s["generated_runs"] for s in traced.stats()["signatures"].values()) > 0


def test_reflected_and_integer_powers_are_numpys(backend):
    """``2 ** x`` of ints and bools, an int array to a traced exponent that becomes negative (NumPy's
    ValueError at run time), and int ** 2 wrapping."""
    def powers(x):
        return 2 ** x, 2 ** (x > 3), x ** 2, x ** (x.shape[0] - 4)

    traced = _trace(powers, (np.arange(5, dtype=np.int8),), backend=backend)
    for x in (np.arange(5, dtype=np.int8), np.arange(4, dtype=np.int8), np.arange(100, 107, dtype=np.int8)):
        assert _same(_quiet(traced, x), _quiet(powers, x))
    with pytest.raises(ValueError, match="negative integer powers"):
        powers(np.arange(3, dtype=np.int8))
    with pytest.raises(ValueError, match="negative integer powers"):
        _quiet(traced, np.arange(3, dtype=np.int8))


def _byte_counts(x):
    return (x * 0 + x.nbytes, x[1:].nbytes * x[:1], np.broadcast_to(x, (3, *x.shape)).nbytes + x[..., :1],
            x.reshape(-1).nbytes / 1024 + x[:1], x.astype(np.float32) * x.sum().nbytes,
            np.zeros(x.nbytes // x.itemsize, np.int16), (x > 0).nbytes * x[:0], x.T[::2].nbytes + x[:1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.complex64, np.bool_])
def test_nbytes_follows_views_reshapes_and_broadcasts(backend, dtype, tmp_path):
    """nbytes of views, of 0-size arrays, of broadcast results, of reshapes and of a NumPy scalar, in
    expressions whose dtypes follow NEP 50 (a Python int), through a saved trace too."""
    make = lambda *shape: np.ones(shape, dtype)
    traced = _trace(_byte_counts, (make(4, 3),), backend=backend)
    traced.save(tmp_path / "nbytes.nt")
    loaded = nt.load(tmp_path / "nbytes.nt", backend=backend)
    for x in (make(4, 3), make(1, 3), make(7, 3), make(0, 3), np.asfortranarray(make(5, 3)),
              make(6, 6)[::2, ::2], make(8, 3)[::-2]):
        for run in (traced, loaded):
            assert _same(_quiet(run, x), _quiet(_byte_counts, x)), x.shape


def _host_scalars(x):
    m = np.fmax.reduce(x)                   # np.float64: a strong type under NEP 50
    m32 = np.fmax.reduce(x.astype(np.float32))
    same = np.isclose(x[0], x[1])           # np.bool_
    return (x.astype(np.float32) * m, x * m32, x.astype(np.float32) + same, np.allclose(x, 1.0) * x[:2],
            m ** 2, m32 ** 0.5, (m, m32), np.interp(2.5, x, x) * x.astype(np.float16))


def test_host_call_scalars_in_expressions_are_numpys(backend, tmp_path):
    """Host calls' NumPy scalars (np.float64, np.float32, np.bool_) and Python bools inside larger
    expressions: NumPy's result dtypes (NEP 50) and values, returned as NumPy returns them, saved too."""
    traced = _trace(_host_scalars, (np.arange(1.0, 6.0),), backend=backend, check_trace=False)
    traced.save(tmp_path / "host.nt")
    loaded = nt.load(tmp_path / "host.nt", backend=backend)
    for x in (np.arange(1.0, 6.0) * 1.5, np.array([np.nan, 2.0, 3e38, -0.0, 4.0]), np.ones(5)):
        want = _quiet(_host_scalars, x)
        assert _same(_quiet(traced, x), want)
        if not np.allclose(x, 1.0):   # a loaded trace refuses where the guard on np.allclose breaks
            assert _same(_quiet(loaded, x), want)


class _Momentum(nt.Module):
    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones(3))
        self.b = nt.Parameter(np.zeros((), np.float32))
        self.register_buffer("v", np.zeros(3))

    def forward(self, g):
        self.v *= 0.9
        self.v += g
        self.w -= 0.1 * self.v
        self.w **= 2
        self.b += np.float32(1.0)
        self.b *= 2
        return self.w.sum() + self.b


def test_an_eager_module_keeps_its_parameters_through_several_updates(backend):
    """Several in-place updates of a vector and a 0-d parameter per call, eager and traced: the
    parameters stay registered (the same objects), state_dict round trips, trace_module agrees."""
    eager, traced_module = _Momentum(), _Momentum()
    w, b = eager.w, eager.b
    traced = _trace(traced_module, np.ones(3), backend=backend)
    traced_module.load_state_dict(_Momentum().state_dict())
    shared = _Momentum()
    methods = _quiet(nt.trace_module, shared, {"forward": np.ones(3)}, backend=backend)
    shared.load_state_dict(_Momentum().state_dict())
    for g in (np.full(3, 2.0), np.arange(3.0), np.ones(3)):
        want = eager(g)
        assert _same(traced(g), want)
        assert _same(methods.forward(g), want)
        assert eager.w is w and eager.b is b
        assert [k for k, _ in eager.named_parameters()] == ["w", "b"]
        for k, v in eager.state_dict().items():
            assert _same(traced_module.state_dict()[k], v), k
    fresh = _Momentum()
    fresh.load_state_dict(eager.state_dict())
    assert all(_same(fresh.state_dict()[k], v) for k, v in eager.state_dict().items())
    assert _same(fresh(np.ones(3)), eager(np.ones(3)))
