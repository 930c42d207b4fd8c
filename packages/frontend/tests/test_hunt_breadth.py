"""Hunted across what ordinary NumPy programs write (fancy and boolean writes, ufunc.at and reduceat,
scans, sorts with NaN, integer edges, clip/round/pad/roll/take/put, casts, linalg, einsum, seeded
draws, module state, saved traces): traced at one size, called at others and with other layouts and
special values, on both kernel modes and 1 and 2 threads, against eager NumPy. Each finding is a minimal
program kept as a regression test, with the passing checks that cover the paths it went through."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest

_SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 2.0, -3.0, 0.7, 1e308, -1e308])
_I64 = np.iinfo(np.int64)


def _same(got, want) -> bool:
    """Same type, dtype, shape and bits (NaNs by their bits too), item by item in tuples."""
    if isinstance(want, (tuple, list)):
        return (type(got) is type(want) and len(got) == len(want)
                and all(_same(g, w) for g, w in zip(got, want)))
    return (type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype
            and np.asarray(got).shape == np.asarray(want).shape
            and np.asarray(got).tobytes() == np.asarray(want).tobytes())


def _trace(fn, args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(fn, args, **kwargs)


def _quiet(fn, *args):
    """fn(*args) with NumPy's floating-point reports and numtrace's re-tracing notes ignored."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", nt.TracerWarning)
        return fn(*args)


def _reports(fn, *args):
    """fn(*args)'s result and its RuntimeWarnings' texts under np.errstate(all="warn")."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        result = fn(*args)
    return result, sorted(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))


@pytest.fixture(params=["off", "sync"])
def mode(request, tmp_path_factory, monkeypatch):
    """The cpu backend's interpreter ("off") or its generated kernels, compiled synchronously ("sync")."""
    compiler = pytest.importorskip("numtrace_cpu.compiler")
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "hunt_breadth_kernels"))
    old = compiler.set_mode(request.param)
    yield request.param
    compiler.set_mode(old)


# --- Findings ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: np.fmax.reduce(x), lambda x: np.logaddexp.reduce(x),
    lambda x: np.bitwise_or.reduce(x.astype(np.int64)), lambda x: np.trace(x.reshape(-1, 1)),
    lambda x: np.interp(2.5, x, x * 2.0), lambda x: (np.fmax.reduce(x), x.sum()),
], ids=["fmax.reduce", "logaddexp.reduce", "bitwise_or.reduce", "trace", "interp", "in-a-tuple"])
def test_a_host_call_returning_a_numpy_scalar_returns_one(backend, fn, tmp_path):
    """A function NumPy runs at call time (a host call) that returns a NumPy scalar (np.float64): the
    trace wrapped its result as an array, so the traced call returned a 0-d ndarray where NumPy returns
    np.float64 (not a float to isinstance, not JSON-serializable, written into by `r += 1`)."""
    traced = _trace(fn, (np.arange(5.0),), backend=backend, check_trace=False)
    traced.save(tmp_path / "host.nt")
    x = np.arange(5.0) * 1.5 + 1.0
    assert _same(_quiet(traced, x), fn(x))
    assert _same(nt.load(tmp_path / "host.nt", backend=backend)(x), fn(x))


def _by_nbytes(x):
    return x * 0.0 + x.nbytes, np.zeros(x.nbytes // x.itemsize), x.ravel()[:1] * x.T.nbytes


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8])
def test_nbytes_follows_the_input_size(backend, dtype):
    """``x.nbytes`` was the example's byte count frozen into the trace, with no guard and no warning: a
    call at another size returned values (and an array's length) computed from the traced size."""
    traced = _trace(_by_nbytes, (np.ones((2, 3), dtype),), backend=backend)
    for x in (np.ones((5, 3), dtype), np.ones((1, 3), dtype), np.ones((4, 8), dtype)[:, ::3],
              np.ones((0, 3), dtype)):
        assert _same(_quiet(traced, x), _by_nbytes(x))


def _z(n=64):
    rng = np.random.default_rng(3)
    return rng.standard_normal(n) + 1j * rng.standard_normal(n)


def _pow2(x):
    return x ** 2


def _pow_m1(x):
    return x ** -1


def _pow_half(x):
    return x ** 0.5


def _zpow2_in_place(z):
    z **= 2


def _zpow_half_in_place(z):
    z **= 0.5
    return z * 1.0


@pytest.mark.parametrize("fn", [_pow2, _pow_m1, _pow_half, _zpow2_in_place, _zpow_half_in_place])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_power_shortcuts_of_complex_arrays_are_numpys(backend, fn, dtype):
    """``z ** 2``, ``z ** -1`` and ``z ** 0.5`` of a complex array are NumPy's np.square, np.reciprocal
    and np.sqrt (ndarray.__pow__'s fast path), deterministic arithmetic; the trace recorded np.power,
    whose complex loop differs in the last bits for about a third of the elements."""
    traced = _trace(fn, (_z(4).astype(dtype),), backend=backend)
    for z in (_z().astype(dtype), _z(9)[::-2].astype(dtype)):
        mine, theirs = z.copy(), z.copy()
        assert _same(traced(mine), fn(theirs))
        assert _same(mine, theirs)


def _pow_half_in_place(x):
    y = x * 1.0
    y **= 0.5     # a local: a write into the caller's array reports "in a traced call" (docs/cpu.md)
    return y


def _pow2_not_a_shortcut(x):
    return x ** 2.0, np.power(x, 2)   # a float 2.0 and np.power itself stay np.power in NumPy


@pytest.mark.parametrize("fn", [_pow2, _pow_m1, _pow_half, _pow_half_in_place, _pow2_not_a_shortcut])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_shortcuts_warn_as_numpy(mode, fn, dtype):
    """``x ** 2`` overflowing warns "overflow encountered in square" in NumPy (``x ** 0.5`` of a
    negative "... in sqrt", ``x ** -1`` of a zero "... in reciprocal"); the trace said "... in power"."""
    traced = _trace(fn, (np.ones(4, dtype),))
    with np.errstate(all="ignore"):
        x = np.array([1e200, -1.0, 0.0, -0.0, 3e38, 4.0, np.nan]).astype(dtype)
    got, got_warned = _reports(traced, x.copy())
    want, want_warned = _reports(fn, x.copy())
    assert _same(got, want)
    assert got_warned == want_warned


def _scalar_root(x):
    return x[0] ** 0.5, x.sum() ** 0.5


def _scalar_powers(x):
    return x[0] ** 2, x.sum() ** -1, x[1] ** 2.0, x.max() ** 1


def _int_scalar_sum(x):
    return x[0] + x[1], x.sum() * 2


@pytest.mark.parametrize("dtype", [np.int64, np.int8])
def test_integer_scalar_overflow_raises_under_errstate(backend, dtype):
    """NumPy's scalar math checks integer overflow ('overflow encountered in scalar add', a
    FloatingPointError under np.errstate(over='raise')); the trace recorded the ufunc on 0-d arrays, whose
    integer loops wrap silently. Now np.scalar_operator."""
    traced = _trace(_int_scalar_sum, (np.arange(1, 4, dtype=dtype),), backend=backend)
    x = np.array([np.iinfo(dtype).max, 1, 0], dtype)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        _int_scalar_sum(x)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        traced(x)


def test_a_numpy_scalar_to_the_half_is_c_pow(backend):
    """``s ** 0.5`` of a NumPy float scalar runs NumPy's scalar math, C pow: pow(-0.0, 0.5) is +0.0 and
    pow(-inf, 0.5) is +inf. The trace recorded np.power on a 0-d array, whose SIMD loop (and the cpu
    backend's sqrt for the constant 0.5) gave -0.0 and NaN, silently. Now `np.scalar_power`."""
    traced = _trace(_scalar_root, (np.ones(3),), backend=backend)
    for x in (np.array([-0.0, 1.0, 2.0]), np.array([-np.inf, 0.0, 0.0])):
        assert _same(_quiet(traced, x), _quiet(_scalar_root, x))


def _ipow(x):
    s = x.max()
    s **= 0.5
    return s


_SCALAR_POWERS = {   # NumPy routes each by its operands' types: to scalar math or to np.power's loop
    "py_float": lambda x: x[0] ** 0.5,
    "py_neg_float": lambda x: x[1] ** -1.5,
    "py_int": lambda x: x[0] ** 3,
    "reflected": lambda x: 2.5 ** x[0],
    "scalars": lambda x: x[0] ** x[1],
    "f32_exponent": lambda x: x.sum() ** np.float32(0.5),
    "f64_exponent": lambda x: x[0] ** np.float64(-0.5),
    "int8_exponent": lambda x: x[1] ** np.int8(3),
    "complex": lambda x: x[0] ** (0.5 + 0j),
    "zero_d_array": lambda x: x[0] ** np.asarray(0.5),    # the ufunc, as NumPy
    "builtin_pow": lambda x: pow(x.min(), 0.5),
    "in_place": _ipow,
    "traced_size": lambda x: x[0] ** (x.shape[0] - 3),
    "size_to_scalar": lambda x: x.shape[0] ** np.float64(-0.5) + x[1] ** (1 - x.shape[0] % 2),
}
_POWER_BASES = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, 1.0, -2.5, 0.5, 3.0, 1e300, 5e-324])


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "i1", "i8", "u1"])
@pytest.mark.parametrize("name", _SCALAR_POWERS)
def test_a_numpy_scalars_power_is_numpys_own(backend, name, dtype):
    """``**`` and ``pow`` of NumPy scalars with Python numbers, other NumPy scalars and traced sizes:
    values bit for bit, types, and warnings (their text, "scalar power" where NumPy's scalar math
    reports) under np.errstate warn and raise, at signed zeros, infinities, NaN and tiny and huge
    values, at several sizes. The traced sizes' exponents run NumPy's scalar math too."""
    fn = _SCALAR_POWERS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        bases = _POWER_BASES.astype(dtype)
    traced = _trace(fn, (np.ones(4, dtype),), backend=backend)
    for i in range(len(bases)):
        x = np.resize(np.roll(bases, i), 4 + i % 3)
        for state in ("warn", "raise"):
            got, want = _outcome(traced, x, state), _outcome(fn, x, state)
            assert _same(got[0], want[0]) and got[1:] == want[1:], (x, state, got, want)


def _outcome(fn, x, state):
    """fn(x) under np.errstate(all=state): its result or the type and text of its error (a traced call
    names its node first), and NumPy's warnings' texts."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=state):
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", nt.TracerWarning)
        try:
            result = fn(x)
        except (ArithmeticError, ValueError) as exc:
            kind = FloatingPointError if isinstance(exc, FloatingPointError) else ValueError
            return None, kind, str(exc).rsplit(": ", 1)[-1], []
    return result, None, None, sorted(str(w.message) for w in caught)


def test_a_numpy_scalar_constant_to_a_traced_power_is_c_pow(backend):
    """``np.float64(-np.inf) ** x[0]`` reaches the traced operand as np.power (NumPy's scalar finds an
    __array_ufunc__ and calls the ufunc), as an explicit np.power call does; it was recorded as np.power,
    whose NumPy loop (the reference backend) is not C pow. The caller's `**` now records np.scalar_power."""
    def fn(x):
        return np.float64(-np.inf) ** x[0]

    traced = _trace(fn, (np.ones(3),), backend=backend)
    x = np.array([0.5, 1.0, 2.0])
    assert _same(_quiet(traced, x), _quiet(fn, x))


def test_a_numpy_scalar_squared_or_inverted_is_numpys(backend):
    """The exponents whose C pow equals the ufunc NumPy's array loop takes (2, -1, 2.0, 1), at zeros,
    infinities and NaN."""
    traced = _trace(_scalar_powers, (np.ones(3),), backend=backend)
    for x in ([-0.0, 0.0, 2.0], [-np.inf, np.nan, 3.0], [1e200, -1e-200, 5e-324]):
        assert _same(_quiet(traced, np.array(x)), _quiet(_scalar_powers, np.array(x)))


class _Sgd(nt.Module):
    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones(3))
        self.register_buffer("steps", np.zeros((), np.int64))

    def forward(self, g):
        self.w -= 0.1 * g
        self.steps += 1
        return self.w * 2.0


def test_an_eager_module_keeps_a_parameter_updated_in_place(backend):
    """``self.w -= lr * g`` in an eager ``forward``: a Parameter's in-place operator gives back its memory as
    a plain ndarray, which ``Module.__setattr__`` took for a new plain attribute, so the eager module lost
    ``w`` from its parameters and ``state_dict()`` while the traced one kept it (docs: modules.md)."""
    eager, traced_module = _Sgd(), _Sgd()
    weight = eager.w
    eager(np.ones(3))
    traced_module(np.ones(3))
    assert eager.w is weight and [k for k, _ in eager.named_parameters()] == ["w"]
    assert list(eager.state_dict()) == ["w", "steps"]
    traced = _trace(traced_module, np.ones(3), backend=backend)
    for g in (np.full(3, 2.0), np.arange(3.0)):
        assert _same(traced(g), eager(g))
        assert all(_same(traced_module.state_dict()[k], eager.state_dict()[k]) for k in ("w", "steps"))
    assert [k for k, _ in traced.named_parameters()] == [k for k, _ in eager.named_parameters()] == ["w"]
    eager.w = np.zeros(3)          # assigning a new plain array still makes it a plain attribute
    assert [k for k, _ in eager.named_parameters()] == []


@pytest.mark.xfail(strict=True, reason="`/` of NumPy float scalars (a reduction's result, x[0]) runs NumPy's "
                   "scalar math, which names itself 'scalar divide'; the trace records the ufunc, which the "
                   "backends fuse and which gives the same IEEE bits, and reports it as a 0-d array's "
                   "'divide' (float + - * / are left so: docs/guide/sharp-edges.md; `//` `%` and int "
                   "operators are scalar math)")
def test_an_op_on_numpy_scalars_warns_as_scalar_math(backend):
    def mean_of(x):
        return x.sum() / x[0], x[1] // 0.0

    traced = _trace(mean_of, (np.ones(3),), backend=backend)
    got, got_warned = _reports(traced, np.zeros(2))
    want, want_warned = _reports(mean_of, np.zeros(2))
    assert _same(got, want)
    assert got_warned == want_warned


# --- Passing checks of the areas hunted ------------------------------------------------------------------

def _fancy_writes(x, i, v):
    x[i] = v            # repeated and negative indices: the last write wins, as in NumPy
    x[i[:2]] += 1.0
    x[x > 0.5] *= -1.0
    return x.sum()


def _ufunc_at(x, i, v):
    np.add.at(x, i, v)
    np.maximum.at(x, i[::-1], v * 0.5)
    np.subtract.at(x, i, 1.0)
    starts = i[:3] % x.shape[0]
    return np.add.reduceat(x, starts), np.maximum.reduceat(x, starts[::-1])


def _scans(x):
    return (np.cumsum(x, axis=0), np.cumprod(x, axis=1), np.diff(x, axis=0), np.diff(x, n=2, axis=-1),
            np.maximum.accumulate(x, axis=1), np.diff(x, prepend=0.0))


def _sorts(x):
    return (np.sort(x, axis=0), np.argsort(x, axis=1, kind="stable"), np.partition(x, 1, axis=1),
            np.unique(x), np.searchsorted(np.sort(x.ravel()), x[0]))


def _int_edges(a, b):
    return a // b, a % b, np.fmod(a, b), a << (b & 63), a >> (b & 63), a ** (b & 7), -a, abs(a)


def _clip_round(x, lo):
    return (np.clip(x, lo, 1.0), np.clip(x, np.nan, 1.0), np.round(x * 123.456, -1), np.around(x, 2),
            np.maximum(x, lo), np.fmin(x, lo), np.nan_to_num(x))


def _joins(a, b):
    return (np.concatenate([a, b]), np.stack([a, b], -1), np.pad(a, ((1, 2), (0, 1)), mode="reflect"),
            np.pad(a, 1, mode="edge"), np.roll(a, -1, axis=0), np.tile(a, (2, 1)), np.repeat(a, 2, axis=1),
            np.take(a, np.array([0, -1]), axis=0))


def _put(x, i, v):
    np.put(x, i, v)
    return x * 1.0


def _casts(x):
    return x.astype(np.int64), x.astype(np.int32), x.astype(np.uint8), x.astype(np.int8), x.astype(bool)


def _linalg(a, b):
    return (np.linalg.norm(a), np.linalg.norm(a, 1), np.linalg.norm(a, np.inf), np.linalg.norm(a, "fro"),
            np.linalg.norm(b, 0), np.linalg.norm(b, -np.inf), np.einsum("ii->i", a), np.einsum("ii", a),
            np.einsum("ij,ij->", a, a))


def _draws(x):
    return x + np.random.rand(*x.shape), np.random.randint(0, 9, size=x.shape[0]), np.random.randn(2)


_PROGRAMS = {
    "fancy_writes": (_fancy_writes, lambda r, n: (r.random(n), r.integers(-n, n, n + 2), r.random(n + 2))),
    "ufunc_at": (_ufunc_at, lambda r, n: (r.random(n), r.integers(-n, n, 2 * n), r.random(2 * n))),
    "scans": (_scans, lambda r, n: (r.standard_normal((n, 4)),)),
    "scans_special": (_scans, lambda r, n: (np.resize(_SPECIAL, (n, 4)),)),
    "sorts_nan": (_sorts, lambda r, n: (np.where(r.random((n, 3)) < 0.3, np.nan, r.integers(0, 3, (n, 3))),)),
    "int_edges": (_int_edges, lambda r, n: (np.resize([_I64.min, -7, 7, 0, -1, _I64.max], n),
                                            np.resize([-1, 0, 2, -2, _I64.min, -1, 64, 65], n))),
    "clip_round": (_clip_round, lambda r, n: (np.resize(_SPECIAL, n), np.resize(_SPECIAL[::-1], n))),
    "joins": (_joins, lambda r, n: (r.random((n, 3)), r.random((n, 3))[::-1])),
    "put": (_put, lambda r, n: (r.random(n), r.integers(-n, n, 3), r.random(3))),
    "casts": (_casts, lambda r, n: (np.resize([np.nan, np.inf, -np.inf, 1e20, -2.5, 2.5, -0.9, 255.5], n),)),
    "linalg": (_linalg, lambda r, n: (r.standard_normal((n, n)), r.standard_normal(n) * (r.random(n) < .5))),
}


# The programs whose passes run as generated kernels in "sync" mode (the others are NumPy's own calls).
_GENERATED = {"casts", "clip_round", "fancy_writes", "int_edges", "put", "ufunc_at"}


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_programs_match_numpy(mode, name):
    """Each program traced at one size and called at others (batch 1 included), on 1 and 2 threads:
    NumPy's values, dtypes, shapes and writes into the arguments, bit for bit."""
    from numtrace_cpu import get_num_threads, set_num_threads

    fn, make = _PROGRAMS[name]
    traced = _trace(fn, make(np.random.default_rng(0), 4))
    old = get_num_threads()
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            for seed, n in enumerate((4, 1, 7, 33)):
                mine, theirs = make(np.random.default_rng(seed), n), make(np.random.default_rng(seed), n)
                assert _same(_quiet(traced, *mine), _quiet(fn, *theirs)), (threads, n)
                assert all(_same(m, t) for m, t in zip(mine, theirs)), (threads, n)
    finally:
        set_num_threads(old)
    if mode == "sync" and name in _GENERATED:
        assert sum(s["generated_runs"] for s in traced.stats()["signatures"].values()) > 0


def test_seeded_global_draws_are_numpys(backend):
    """After np.random.seed(s) outside the function, a traced call draws what the function draws, at
    every size, and the stream goes on from there."""
    traced = _trace(_draws, (np.zeros((3, 2)),), backend=backend, check_trace=False)
    for n in (3, 1, 6):
        np.random.seed(n)
        got = _quiet(traced, np.zeros((n, 2))), np.random.rand(2)
        np.random.seed(n)
        assert _same(got, (_draws(np.zeros((n, 2))), np.random.rand(2)))


def test_saved_trace_writes_back_and_serves_other_sizes(backend, tmp_path):
    """A loaded trace that updates its argument in place and returns a scan, at other sizes and layouts."""
    def center(x, y):
        x -= x.mean(axis=0)
        z = x @ y
        z[z < 0] = 0.0
        return np.cumsum(z, axis=1), z.argmax(axis=0)

    rng = np.random.default_rng(5)
    _trace(center, (rng.random((4, 3)), rng.random((3, 2))), backend=backend).save(tmp_path / "c.nt")
    loaded = nt.load(tmp_path / "c.nt", backend=backend)
    for x, y in ((rng.random((7, 3)), rng.random((3, 5))), (rng.random((1, 3)), rng.random((3, 1))),
                 (rng.random((9, 3))[::-2], rng.random((5, 3)).T)):
        mine, theirs = x.copy(), x.copy()
        got, want = _quiet(loaded, mine, y), center(theirs, y)
        assert np.array_equal(got[1], want[1]) and np.allclose(got[0], want[0], rtol=1e-12)
        assert np.allclose(mine, theirs, rtol=1e-15, atol=0)


def test_module_buffers_updated_in_forward_follow_numpy(backend):
    """A module whose forward updates a running mean, a counter and an indexed history in place."""
    class Tracker(nt.Module):
        def __init__(self):
            super().__init__()
            self.w = nt.Parameter(np.ones(3))
            self.register_buffer("mean", np.zeros(3))
            self.register_buffer("count", np.zeros((), np.int64))
            self.register_buffer("hist", np.zeros(4))

        def forward(self, x):
            m = x.mean(0)
            self.mean = 0.9 * self.mean + 0.1 * m
            self.count += 1
            self.hist[self.count % 4] = m.sum()
            return (x - self.mean) * self.w

    rng = np.random.default_rng(2)
    module, eager = Tracker(), Tracker()
    traced = _trace(module, rng.random((5, 3)), backend=backend)
    for n in (5, 1, 8):
        x = rng.random((n, 3))
        assert _same(_quiet(traced, x), eager(x))
        assert all(_same(getattr(module, k), getattr(eager, k)) for k in ("mean", "count", "hist"))
