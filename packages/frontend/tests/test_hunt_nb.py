"""Hunted in the NumPy forms branch `breadth` lifted (np.repeat with traced counts, reductions with
where=, concatenate casting=, einsum sublists, traced np.mgrid/np.ogrid, methods of traced numbers):
traced at one input, called at others, on the reference, cpu (interpreter and generated kernels, 1 and
2 threads) and triton backends, against eager NumPy. Each finding is a minimal program kept as a
regression test; the passing checks below it guard the paths it went through."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir import registry
from numtrace_ir.types import TensorType
from test_hunt_breadth import _same, mode  # noqa: F401  (mode: the cpu kernel modes' fixture)

E = Ellipsis


def _quiet(fn, *args, **kwargs):
    """fn(*args) with NumPy's floating-point reports and numtrace's re-tracing notes ignored."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", nt.TracerWarning)
        return fn(*args, **kwargs)


def _calls_match(traced, fn, calls):
    """Each call's result, and what it writes into its arguments, is NumPy's (or both raise)."""
    for args in calls:
        mine, theirs = _copy(args), _copy(args)
        try:
            want = _quiet(fn, *theirs)
        except Exception as exc:   # NumPy's error: the traced call raises too
            with pytest.raises(type(exc)):
                _quiet(traced, *mine)
            continue
        assert _same(_quiet(traced, *mine), want), args
        assert _same(tuple(mine), tuple(theirs)), args


def _copy(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _on_cpu(fn, example, calls):
    """`fn` traced on the cpu backend at `example`, each call checked on 1 and 2 threads; the trace."""
    from numtrace_cpu import get_num_threads, set_num_threads

    traced = _quiet(nt.trace, fn, example, backend="cpu")
    old = get_num_threads()
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            _calls_match(traced, fn, calls)
    finally:
        set_num_threads(old)
    return traced


# --- Findings ------------------------------------------------------------------------------------------

def _int_and_float_ranges(x):
    return x.shape[0] * 0.5 * np.arange(x.shape[0] * 1.0), np.arange(x.shape[0])


def _grids(x):
    return np.mgrid[0:1:1 / x.shape[0]], np.ogrid[0:x.shape[0]]


@pytest.mark.triton
@pytest.mark.parametrize("fn", [_int_and_float_ranges, _grids], ids=["arange", "mgrid_ogrid"])
def test_an_int_range_is_not_typed_as_a_float_range_of_equal_bounds(backend, fn):
    """``np.arange(n)`` after ``np.arange(n * 1.0)`` (or ``np.ogrid[0:n]`` after
    ``np.mgrid[0:1:1/n]`` at n = 1): the op rule's memo keyed np.arange's bounds by value, and
    3 == 3.0, so the int range got the float range's type, float64. Triton returned float64 silently,
    the cpu backend failed ("the reference returned int64[3], the op's rule says f64[3]")."""
    for n in (3, 1):
        x = np.ones(n)
        traced = _quiet(nt.trace, fn, (x,), backend=backend)
        assert _same(_quiet(traced, x), fn(x))
        assert _same(_quiet(traced, np.ones(4)), fn(np.ones(4)))


def test_the_arange_rule_keeps_int_and_float_bounds_apart():
    """The memo behind the finding above, across traces: a float range typed first must not type an
    int range with equal bounds (nor the reverse, nor a bool bound)."""
    op = registry.get("np.arange")
    attrs = {"start": 0, "stop": 3, "step": 1, "dtype": None}
    for step, dtype in ((1.0, np.float64), (1, np.int64), (True, np.int64), (1.0, np.float64)):
        assert op.infer((), {**attrs, "step": step})[0].dtype == dtype
    first = nt.trace(lambda x: np.arange(x.shape[0] * 1.0), (np.ones(3),), backend="reference")
    second = nt.trace(lambda x: np.arange(x.shape[0]), (np.ones(3),), backend="reference")
    assert first(np.ones(3)).dtype == np.float64 and second(np.ones(3)).dtype == np.int64


@pytest.mark.parametrize("fn", [
    lambda x: x * (x.shape[0] == 4 + 0j), lambda x: x * (x.shape[0] != 4 + 0j),
    lambda x: x * (4 + 0j == x.shape[0]), lambda x: x * (2.0 + 0j == x.shape[0] / 2),
    lambda x: x * (x.shape[0] in (4 + 0j, 9j)),
], ids=["eq", "ne", "reflected", "float", "in"])
def test_a_traced_size_compared_with_a_complex_is_numbers_compared(backend, fn):
    """``x.shape[0] == 4 + 0j``: the comparison returned NotImplemented for a complex, so Python fell
    back to identity: False at 4, where the plain int gives True (and ``!=`` True), silently and with
    no guard. Now computed on the guarded number, as arithmetic with a complex is."""
    traced = _quiet(nt.trace, fn, (np.ones(4),), backend=backend)
    for n in (4, 5, 4):
        assert _same(_quiet(traced, np.ones(n)), fn(np.ones(n))), n


@pytest.mark.parametrize("fn", [
    lambda x: x * (x.shape[0] * np.sqrt(2.0)),
    lambda x: x / x.shape[0] ** np.float64(0.5),
    lambda x: x.astype(np.int8) * (x.shape[0] + np.int64(1)),
    lambda x: x.astype(np.float16) * (x.shape[0] * np.float32(0.5)),
    lambda x: np.asarray(x.shape[0] - np.uint8(1)),
    lambda x: np.mgrid[np.uint8(1):x.shape[0], 0:2],
], ids=["f64_scale", "f64_pow", "i64_offset", "f32_scale", "u8_wraps", "u8_grid"])
def test_a_traced_size_with_a_numpy_scalar_is_typed_as_numpy_types_it(backend, fn):
    """``x * (x.shape[0] * np.sqrt(2.0))`` with float32 x: NumPy's np.float64 is a strong type, so the
    product is float64; the traced size took the scalar as the Python number it holds, so the trace
    returned float32 (int8 data plus ``n + np.int64(1)``: int8, not int64; ``n - np.uint8(1)`` was -1,
    not uint8 255, at n = 0, where np.mgrid[np.uint8(1):n] is 255 rows). Silent, no guard. Now the
    scalar's own operator records NumPy's ufunc."""
    traced = _quiet(nt.trace, fn, (np.ones(4, np.float32),), backend=backend)
    for n in (4, 5, 1, 0):
        x = np.arange(n, dtype=np.float32) + 0.25
        assert _same(_quiet(traced, x), _quiet(fn, x)), n


_SCALAR_TYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
                 np.uint16, np.uint32, np.uint64, np.bool_, np.complex64]


def _d(t):
    """A NumPy scalar spacing of type t (0.1 where t holds it, else 3)."""
    return t(0.1) if np.dtype(t).kind in "fc" else t(3)


_CONSTRUCTORS = {   # a traced size with NumPy scalars of type t for the other numbers
    "linspace": lambda t: lambda x: np.linspace(t(1), t(3), x.shape[0]),
    "linspace_mixed": lambda t: lambda x: np.linspace(0.1, t(3), x.shape[0], endpoint=False),
    "linspace_dtype": lambda t: lambda x: np.linspace(t(1), _d(t), x.shape[0], dtype=np.float32),
    "logspace": lambda t: lambda x: np.logspace(t(0), t(1), x.shape[0]),
    "arange_start": lambda t: lambda x: np.arange(t(1), x.shape[0]),
    "arange_step": lambda t: lambda x: np.arange(0.5, x.shape[0], _d(t)),
    "arange_dtype": lambda t: lambda x: np.arange(0, x.shape[0], _d(t), dtype=np.float32),
    "fftfreq": lambda t: lambda x: np.fft.fftfreq(x.shape[0], d=_d(t)),
    "rfftfreq": lambda t: lambda x: np.fft.rfftfreq(x.shape[0], d=_d(t)),
    "full": lambda t: lambda x: np.full(x.shape[0], _d(t)),
    "full_dtype": lambda t: lambda x: np.full((x.shape[0], 2), _d(t), dtype=np.float16),
    "eye": lambda t: lambda x: np.eye(x.shape[0], k=np.int8(1), dtype=t),
}


def _values_and_warnings(fn, *args):
    """fn(*args)'s result (or its error's type) and NumPy's warnings' texts, under np.errstate(all="warn")."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        try:
            result = fn(*args)
        except Exception as exc:
            return type(exc), []
    return result, sorted(str(w.message) for w in caught if not issubclass(w.category, nt.TracerWarning))


_COMPLEX_ARANGE = pytest.mark.xfail(strict=True, reason=(
    "left alone: np.arange of a complex NumPy scalar is not recorded (its rule would run NumPy's arange, "
    "whose cast warning would come twice): it is a constant guarded on the size, so NumPy's 'Casting "
    "complex values to real' warning comes at the traced call only"))


@pytest.mark.parametrize("name, t", [
    pytest.param(name, t, id=f"{name}-{t.__name__}",
                 marks=[_COMPLEX_ARANGE] if t is np.complex64 and name.startswith("arange") else [])
    for name in _CONSTRUCTORS for t in _SCALAR_TYPES])
def test_a_constructor_of_a_traced_size_keeps_its_numpy_scalars_types(backend, name, t):
    fn = _CONSTRUCTORS[name](t)
    with warnings.catch_warnings():   # the trace's own call warns as NumPy does (ComplexWarning)
        warnings.simplefilter("ignore")
        traced = _quiet(nt.trace, fn, (np.ones(4),), backend=backend)
    for n in (4, 5, 1, 9, 4):
        got, want = _values_and_warnings(traced, np.ones(n)), _values_and_warnings(fn, np.ones(n))
        assert _same(got[0], want[0]) and got[1] == want[1], (n, got, want)


@pytest.mark.parametrize("fn", [
    lambda x: np.linspace(np.float32(0.1), np.float32(1), x.shape[0]),
    lambda x: np.fft.rfftfreq(x.shape[0], d=np.float16(0.1)),
    lambda x: (np.arange(0.5, x.shape[0], np.float32(0.3)), np.arange(np.uint64(1), x.shape[0] + 1)),
], ids=["linspace", "rfftfreq", "arange"])
def test_a_constructors_numpy_scalar_survives_save_and_load(tmp_path, backend, fn):
    """The NumPy scalar is a 0-d array attr of `prim.dynamic`: saved as an array member, loaded bit for
    bit, so the loaded trace still computes in its type."""
    traced = _quiet(nt.trace, fn, (np.ones(4),), backend="reference")
    assert "array(f" in str(traced.graph) or "array(u" in str(traced.graph)
    traced.save(tmp_path / "f.nt")
    loaded = nt.load(tmp_path / "f.nt", backend=backend)
    assert str(loaded.graph) == str(traced.graph)
    for n in (4, 7, 2):
        assert _same(_quiet(loaded, np.ones(n)), _quiet(fn, np.ones(n))), n


@pytest.mark.parametrize("value, dtype", [
    (np.int64(2**53 + 1), np.int32), (np.int64(2**53 + 1), np.float32), (np.uint64(2**64 - 1), np.float32),
    (np.float64(1e300), np.float16), (np.int8(-3), np.uint8), (np.complex64(1 + 2j), np.float32),
], ids=["i64_i32", "i64_f32", "u64_f32", "f64_f16", "i8_u8", "c64_f32"])
@pytest.mark.parametrize("like", [False, True], ids=["full", "full_like"])
def test_a_fill_value_numpy_scalar_is_cast_from_its_own_type(backend, value, dtype, like):
    """np.full(n, np.int64(2**53 + 1), dtype=np.int32) wraps in NumPy (copyto casts unsafely from
    int64); the trace took the scalar as a Python int, which NumPy refuses for int32: the trace's own
    check failed. np.full and np.full_like now keep the scalar (a 0-d array attr)."""
    def fn(x):
        return np.full_like(x, value, dtype=dtype) if like else np.full((x.shape[0], 2), value, dtype=dtype)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = _quiet(nt.trace, fn, (np.ones(3),), backend=backend)
        for n in (3, 5, 0):
            assert _same(_quiet(traced, np.ones(n)), _quiet(fn, np.ones(n))), n


def _python_numbers(x):
    return np.linspace(0.5, 2.0, x.shape[0]) * np.fft.rfftfreq(x.shape[0], d=0.1)[1]


def test_a_constructor_saved_with_python_numbers_still_loads(tmp_path, backend):
    """A trace saved before NumPy scalars were kept holds Python numbers in the same attrs (as a trace
    of Python numbers still does): it loads and computes as before."""
    traced = _quiet(nt.trace, _python_numbers, (np.ones(4),), backend="reference")
    assert "('start', 0.5)" in str(traced.graph) and "('d', 0.1)" in str(traced.graph)
    traced.save(tmp_path / "f.nt")
    loaded = nt.load(tmp_path / "f.nt", backend=backend)
    for n in (4, 6):
        assert _same(loaded(np.ones(n)), _python_numbers(np.ones(n))), n


# --- np.repeat with traced counts ----------------------------------------------------------------------

def _write_after(x):
    y = np.repeat(x, x[:, 0], axis=0)
    x[:, 0] = 1
    return y


def _counts_updated_first(x, r):
    r += 1
    return np.repeat(x, r, axis=0)


def _reps(n, rng):
    return rng.standard_normal((n, 3)), rng.integers(0, 4, n)


_REPEAT_PROGRAMS = {
    # the counts: views and aliases of x, written before or after the repeat
    "self_counts": (lambda x: np.repeat(x, x[::-1, 0] % 3, axis=0) * 2,
                    lambda n, rng: (rng.integers(0, 5, (n, 3)),)),
    "write_after": (_write_after, lambda n, rng: (rng.integers(0, 4, (n, 3)),)),
    "counts_updated_first": (_counts_updated_first, _reps),
    # the run-time length against fixed dims: broadcasts where the sum is 1, raises where it differs
    "against_x": (lambda x, r: np.repeat(x[:, 0], r) + x[:, 0], _reps),
    "two_lengths": (lambda x, r: np.repeat(x[:, 0], r) * np.repeat(x[:, 1], r[::-1]), _reps),
    "reshape": (lambda x, r: np.repeat(x[:, 0], r).reshape(-1, 2), _reps),
    # later ops: fused passes, reductions, products, gathers, joins, int dtypes and bool counts
    "fused_sum": (lambda x, r: (np.exp(np.repeat(x, r, axis=0) * 0.5) - 1.0).sum(0), _reps),
    "gram": (lambda x, r: np.repeat(x, r, axis=0).T @ np.repeat(x, r, axis=0), _reps),
    "gather": (lambda x, r: x[np.repeat(np.arange(x.shape[0]), r)], _reps),
    "concat": (lambda x, r: np.concatenate([np.repeat(x, r, axis=0), x]).max(0, initial=-9.0), _reps),
    "flat_int8": (lambda x, r: np.repeat(x.astype(np.int8), r.astype(np.uint8)[:1]), _reps),
    "bool_counts": (lambda x, r: np.repeat(x, r > 1, axis=0).cumsum(0), _reps),
    "0d_count": (lambda x, r: np.repeat(x, r.sum() % 3, axis=1), _reps),
}


@pytest.mark.usefixtures("mode")
@pytest.mark.parametrize("name", sorted(_REPEAT_PROGRAMS))
def test_repeat_with_traced_counts_matches_numpy(name):
    """Traced at one size, called at others, batch 1, empty, all counts 0, a sum of 1 (broadcasts),
    counts of one length traced and of another called: NumPy's values, errors and writes."""
    fn, make = _REPEAT_PROGRAMS[name]
    rng = np.random.default_rng(0)
    calls = [make(n, rng) for n in (5, 1, 7, 0, 4)]
    x = rng.standard_normal((4, 3))
    example = make(4, rng)
    if len(example) == 2:   # counts that sum to the length (against_x needs it), then edge counts
        example = (example[0], np.ones(4, np.int64))
        calls += [(x, np.zeros(4, np.int64)), (x, np.array([0, 0, 1, 0])), (x, np.array([2, 0, 1, 0]))]
    traced = _on_cpu(fn, example, calls)
    assert "np.repeat_counts" in str(traced.graph)


def test_repeat_counts_traced_as_one_then_called_as_many(backend):
    fn = lambda x, r: np.repeat(x, r, axis=0)
    traced = _quiet(nt.trace, fn, (np.ones((5, 3)), np.array([2])), backend=backend)
    rng = np.random.default_rng(1)
    _calls_match(traced, fn, [(rng.standard_normal((5, 3)), rng.integers(0, 3, 5)),
                              (rng.standard_normal((4, 3)), rng.integers(0, 3, 3)),
                              (rng.standard_normal((5, 3)), np.array([-1]))])


# --- reductions with where= ----------------------------------------------------------------------------

_K = np.arange(12.0).reshape(4, 3)

_MASKED = {
    "ufunc_positional": lambda x, m: np.add.reduce(x, 0, None, None, True, 1.5, m),
    "method_positional": lambda x, m: x.max(0, None, False, -9.0, m),
    "constant_x": lambda x, m: (np.sum(_K, axis=0, where=m), _K.sum(axis=1, where=m)),
    "out_is_x": lambda x, m: (np.sum(x, axis=0, where=m, out=x[0]), x)[1],
    "python_ints": lambda x, m: (np.sum(x, axis=0, where=1), np.sum(x, axis=1, where=0)),
    "list_mask": lambda x, m: np.mean(x, axis=1, where=[True, False, True]),
    "no_axes": lambda x, m: (np.sum(x, axis=(), where=m), np.max(x, axis=(), where=m, initial=0.5)),
    "f16_mean": lambda x, m: np.mean(x.astype(np.float16), axis=0, where=m),
    "int_std": lambda x, m: np.std((x * 50).astype(np.int16), axis=0, where=m | (x == x.min(0))),
    "complex_var": lambda x, m: np.var(x + 1j * x[::-1], axis=0, where=m | (x == x.min(0))),
    "int8_prod": lambda x, m: np.prod((x * 3).astype(np.int8), axis=0, where=m, dtype=np.int8),
    "nan_max": lambda x, m: np.maximum.reduce(x / (x > 0), axis=1, where=m, initial=-np.inf),
    "mask_then_fused": lambda x, m: np.sum(x, axis=1, where=m, keepdims=True) * x + 1.0,
}


@pytest.mark.usefixtures("mode")
@pytest.mark.parametrize("name", sorted(_MASKED))
def test_masked_reductions_match_numpy(request, name):
    """Positional where= of ufunc.reduce and methods, a traced mask of a constant array (no guard),
    out= that is the input, masks of Python ints and lists, axis=(), float16/int/complex inputs, NaN."""
    fn = _MASKED[name]
    rng = np.random.default_rng(2)
    make = lambda n: (rng.standard_normal((n, 3)), rng.random((n, 3)) < 0.6)
    traced = _on_cpu(fn, make(4), [make(4), make(4), make(40)] if name == "constant_x" else
                     [make(n) for n in (6, 1, 0, 40)])
    assert "_where" in str(traced.graph)
    assert name != "constant_x" or not traced.guards   # the mask stays a graph input, never a constant
    # the pass after NumPy's masked sum runs as a generated kernel
    if request.getfixturevalue("mode") == "sync" and name == "mask_then_fused":
        assert sum(s["generated_runs"] for s in traced.stats()["signatures"].values()) > 0


# --- np.concatenate / np.stack with dtype= and casting= ---------------------------------------------------

_DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]


@pytest.mark.parametrize("name", ["np.concatenate", "np.stack", "np.hstack"])
def test_join_casting_rule_is_numpys_for_every_dtype_pair(name):
    """The join rule's result dtype, or its refusal, against NumPy's for each pair of dtypes, casting
    and target dtype."""
    fn, op = {"np.concatenate": np.concatenate, "np.stack": np.stack, "np.hstack": np.hstack}[name], \
        registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)   # NumPy's, on complex -> real
        _join_cases(fn, op, name)


def _join_cases(fn, op, name):
    for a, b, casting, dtype in itertools.product(_DTYPES, _DTYPES, ["no", "equiv", "safe", "same_kind",
                                                                     "unsafe"], [None, "i1", "f4", "?"]):
        arrays = [np.zeros((1, 2), a), np.zeros((1, 2), b)]
        try:
            want = fn(arrays, casting=casting, dtype=dtype).dtype
        except TypeError:
            want = None
        types = tuple(TensorType(np.dtype(t), (1, 2)) for t in (a, b))
        try:
            got = op.infer(types, {"dtype": None if dtype is None else np.dtype(dtype), "casting": casting,
                                   **({} if name == "np.hstack" else {"axis": 0})})[0].dtype
        except TypeError:
            got = None
        assert got == want, (a, b, casting, dtype)


def _joined_into(x, o, p):
    np.concatenate([x, x[::-1]], out=o, casting="unsafe")
    np.stack([x, x], axis=1, out=p, casting="unsafe")
    return o, p


def test_a_join_into_out_casts_as_its_casting_says(backend):
    """``np.concatenate([x, y], out=o_int8, casting="unsafe")``: NumPy copies each input into out= with
    the cast the call allows; the trace wrote the join into out= under same_kind always and refused it
    ("Cannot cast ... float64 to int8 according to the rule 'same_kind'"). Now the join's casting."""
    make = lambda n: (np.array([np.nan, np.inf, -1e10, 300.7, -0.0, 5.5] * n).reshape(2 * n, 3),
                      np.zeros((4 * n, 3), np.int8), np.zeros((2 * n, 2, 3), np.float32))
    traced = _quiet(nt.trace, _joined_into, make(1), backend=backend)
    _calls_match(traced, _joined_into, [make(n) for n in (1, 3, 0)])


def _mixed_joined_into(big, f, o, p):
    np.concatenate([big, f], out=o)                              # same_kind: int64 and float32 -> float32
    np.stack([big[:2], f[:2]], axis=0, out=p, casting="unsafe")   # int64 -> int8
    return o, p


def test_a_join_of_mixed_dtypes_into_out_casts_each_input_once(backend):
    """Found by the session's review: the join was recorded at the inputs' promoted dtype (float64 for
    int64 and float32) and that result cast into out=, rounding twice where NumPy copies each input
    into out= once: int64 2**60 + 2**36 + 1 into a float32 out= came back 1.1529215e18 (NumPy
    1.1529216e18), and under casting="unsafe" into int8 2**53 + 769 came back 0 (NumPy 1). The join
    is now recorded at out='s dtype (NumPy refuses dtype= with out=, so no call has both)."""
    def make(n):
        big = np.array([2**60 + 2**36 + 1, 2**53 + 769, -(2**62) - 2**39 - 3, 7] * n, np.int64)
        f = np.array([1.5, -2.25, 3e9, -0.0] * n, np.float32)
        return big, f, np.zeros(8 * n, np.float32), np.zeros((2, 2), np.int8)
    traced = _quiet(nt.trace, _mixed_joined_into, make(1), backend=backend)
    _calls_match(traced, _mixed_joined_into, [make(n) for n in (1, 2, 5)])
    # a float64 input into an int8 out= under same_kind: NumPy's refusal, at trace time
    with pytest.raises(TypeError):
        _quiet(nt.trace, lambda x, o: np.concatenate([x, x], out=o),
               (np.ones(2), np.zeros(4, np.int8)), backend=backend)


@pytest.mark.usefixtures("mode")
def test_join_casts_on_the_backends():
    fn = lambda x, i: (np.concatenate([x / 0.0, i], dtype=np.int32, casting="unsafe"),
                       np.stack([x, i.astype(np.float32)], axis=-1, dtype=np.float16, casting="same_kind"),
                       np.vstack((x, [[1.5, 2]]), dtype=np.float32) * 3)
    rng = np.random.default_rng(3)
    make = lambda n: (rng.standard_normal((n, 2)), rng.integers(-9, 9, (n, 2)))
    _on_cpu(fn, make(3), [make(n) for n in (5, 1, 0)])


# --- einsum's sublist form --------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda a, b: np.einsum(a, [E, 0], b, [0, 1]),
    lambda a, b: np.einsum(a, [0, 30], b, [30, 27]),                  # implicit output: 0, then 27
    lambda a, b: np.einsum(a[:, :, None] * b, [51, 26, 0]),           # implicit: 0 ('A'), 26, 51
    lambda a, b: np.einsum(a, [np.int64(0), np.uint8(1)], b, (np.int8(1), 2), [2, 0]),
    lambda a, b: np.einsum(b * a.sum(), [0, 0], [0]) * np.einsum(a, [E, 0], [E]).sum(),
], ids=["ellipsis", "implicit_order", "implicit_transposes", "numpy_ints", "diagonal"])
def test_einsum_sublists_match_numpy(backend, fn):
    rng = np.random.default_rng(4)
    make = lambda n: (rng.standard_normal((n, 3)), rng.standard_normal((3, 3)))
    traced = _quiet(nt.trace, fn, make(3), backend=backend)
    for n in (3, 5, 1):
        a, b = make(n)
        got, want = _quiet(traced, a, b), fn(a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.allclose(got, want, rtol=1e-12, atol=1e-12)   # a contraction's sums: within ulps


# --- np.mgrid / np.ogrid ------------------------------------------------------------------------------

_GRIDS = {
    "down": lambda x: np.mgrid[x.shape[0]:-3:-2, 0:2],
    "empty": lambda x: np.mgrid[3:x.shape[0], 0:2],
    "float_step": lambda x: np.mgrid[0:x.shape[0]:0.3, 0:1],
    "traced_step": lambda x: np.mgrid[0:1:1 / x.shape[0]],
    "complex_points": lambda x: np.mgrid[-x.shape[0]:x.shape[0]:3j, -1:1:2j],
    "sparse": lambda x: np.ogrid[0:x.shape[0]:0.5, 1.5:x.shape[1]],
    "int8_start": lambda x: np.mgrid[np.int8(1):x.shape[0]:np.int8(2)],
    "float32_step": lambda x: np.mgrid[0:x.shape[0]:np.float32(0.5), 0:2],
    "uint8_start": lambda x: np.mgrid[np.uint8(1):x.shape[0], 0:2],
    "near_int64_max": lambda x: np.mgrid[2**63 - 10:2**63 - 10 + x.shape[0], 0:2],
}


@pytest.mark.parametrize("name", sorted(_GRIDS))
def test_grids_match_numpy(backend, name):
    """Downward and empty grids, float and traced steps, complex point counts, NumPy scalar bounds that
    type the grid, bounds by int64's end (guarded): NumPy's grids, dtypes included, at every size."""
    fn = _GRIDS[name]
    traced = _quiet(nt.trace, fn, (np.ones((4, 3)),), backend=backend)
    _calls_match(traced, fn, [(np.ones((n, 3)),) for n in (6, 1, 0, 4, 9, 10, 11)])


# --- methods of traced numbers, and saved traces --------------------------------------------------------

def test_bit_length_of_computed_sizes(backend):
    """Negative and zero values, shifts by it: each size is NumPy's (re-tracing where the length changes)."""
    fn = lambda x: (np.ones((x.shape[0] - 8).bit_length()), np.ones(1 << (x.shape[0] - 1).bit_length()))
    traced = _quiet(nt.trace, fn, (np.ones(5),), backend=backend)
    _calls_match(traced, fn, [(np.ones(n),) for n in (5, 1, 8, 0, 9, 17)])


def test_saved_traces_of_the_new_forms(backend, tmp_path):
    """A loaded trace runs repeat_counts, masked reductions and sublist einsums at other inputs, and
    refuses (GuardError) a size whose bit_length differs: it cannot trace again."""
    def fn(x, r, m):
        return (np.repeat(x, r, axis=0).sum(0), np.mean(x, axis=1, where=m | (np.arange(3) == 0)),
                np.einsum(x, [0, 1], x, [0, 1], [1]), x * x.shape[0].bit_length())

    rng = np.random.default_rng(5)
    make = lambda n: (rng.standard_normal((n, 3)), rng.integers(0, 3, n), rng.random((n, 3)) < 0.5)
    _quiet(nt.trace, fn, make(5), backend=backend).save(tmp_path / "nb.nt")
    loaded = nt.load(tmp_path / "nb.nt", backend=backend)
    for n in (5, 6, 7):
        args = make(n)
        got, want = _quiet(loaded, *args), fn(*args)
        assert all(_same(g, w) for g, w in zip(got[:2] + got[3:], want[:2] + want[3:])), n
        assert np.allclose(got[2], want[2], rtol=1e-12)
    with pytest.raises(nt.GuardError):
        loaded(*make(8))
