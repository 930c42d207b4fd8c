"""Hunted through the programs users write (benchmarks/realistic.py, examples/): traced at one size,
called at others and with other data, layouts and special values, against eager NumPy; each a minimal
program that a traced call answered otherwise than NumPy, kept with the passing checks that cover it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import numtrace as nt
import pytest

_SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 2.0, -3.0, 0.7])


def _same(got, want) -> bool:
    """Same type, dtype, shape and bits (NaNs by their bits too)."""
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    return len(got) == len(want) and all(
        type(g) is type(w) and np.asarray(g).dtype == np.asarray(w).dtype
        and np.asarray(g).shape == np.asarray(w).shape
        and np.asarray(g).tobytes() == np.asarray(w).tobytes() for g, w in zip(got, want))


def _clean_in_place(x):
    np.nan_to_num(x, copy=False)
    np.clip(x, -1.0, 1.0, out=x)


def _clean_then_read(x):
    np.nan_to_num(x, copy=False, nan=-1.0, posinf=9.0)
    return x * 0.5


def _clean_returned(x):
    y = np.nan_to_num(x, False)
    return y + 0.0, y


@pytest.mark.parametrize("fn", [_clean_in_place, _clean_then_read, _clean_returned])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_to_num_without_copy_writes_into_its_argument(backend, fn, dtype):
    """np.nan_to_num(x, copy=False) updates x in place; the trace recorded it as a copy, so the caller's
    array kept its NaN and infinities and a later read of x saw them (a silent wrong answer)."""
    traced = nt.trace(fn, (np.linspace(-2, 2, 6).astype(dtype),), backend=backend)
    for x in (_SPECIAL.astype(dtype), np.tile(_SPECIAL, 3)[::-2].astype(dtype)):
        mine, theirs = x.copy(), x.copy()
        assert _same(traced(mine), fn(theirs))
        assert _same(mine, theirs)


def test_nan_to_num_without_copy_returns_its_argument(backend):
    """NumPy returns the argument itself (a 0-d one as a scalar), so a write into the result reaches it."""
    def fn(x, s):
        y = np.nan_to_num(x, copy=False)
        y[0] = 5.0
        return x + 1.0, np.nan_to_num(s, copy=False)

    traced = nt.trace(fn, (np.ones(3), np.array(2.0)), backend=backend)
    for args in ((np.array([np.nan, np.inf, 1.0]), np.array(np.nan)), (np.arange(4.0), np.array(-np.inf))):
        mine, theirs = tuple(a.copy() for a in args), tuple(a.copy() for a in args)
        assert _same(traced(*mine), fn(*theirs))
        assert all(_same(m, t) for m, t in zip(mine, theirs))


@pytest.mark.parametrize("fn", [lambda x: np.argsort(x), lambda x: x.argsort(axis=0),
                                lambda x: np.argsort(x, axis=None), lambda x: x[np.argsort(x[:, 0])][-3:]],
                         ids=["default", "axis0", "flat", "top3-rows"])
def test_argsort_orders_ties_as_numpy(backend, fn):
    """np.argsort's default kind (an introsort) is deterministic; the trace ran a stable sort, so the
    indices of equal values (labels, NaNs) came out in another order than NumPy's."""
    rng = np.random.default_rng(0)
    traced = nt.trace(fn, (rng.random((10, 3)),), backend=backend, check_trace=False)
    for x in (rng.integers(0, 3, (17, 3)).astype(float), rng.integers(0, 2, (100, 3)) * 0.5,
              np.where(rng.random((40, 3)) < 0.5, np.nan, 1.0)):
        assert _same(traced(x), fn(x))


@pytest.mark.filterwarnings("ignore::numtrace.TracerWarning")   # a host call, then a guarded value
@pytest.mark.parametrize("fn", [lambda x: x * (np.allclose(x, 1.0) + 1),
                                lambda x: (x + 0, np.array_equal(x, x[::-1]))],
                         ids=["allclose-plus-one", "array_equal-returned"])
def test_a_host_call_returning_a_python_number_promotes_as_numpy(backend, fn):
    """np.allclose (a host call) returns a Python bool, a weak scalar to NumPy's promotion; the trace held it
    as a 0-d bool array, so `x32 * (np.allclose(...) + 1)` came out float64, and the result was an
    ndarray where NumPy returns a bool. The value now leaves the graph, guarded like bool(x)."""
    traced = nt.trace(fn, (np.arange(1.0, 5.0, dtype=np.float32),), backend=backend, check_trace=False)
    for x in (np.arange(1.0, 5.0, dtype=np.float32), np.ones(4, np.float32), np.ones(3, np.float32)):
        assert _same(traced(x), fn(x))


@pytest.mark.parametrize("fn", [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a[:-2] + b[2:]],
                         ids=["add", "multiply", "stencil"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_add_of_two_nans_is_a_nan(fn, dtype):
    """Where both operands are NaNs, which one an x86 loop keeps varies (NumPy's own vector loop and its
    tail differ; a C compiler may swap a commutative op's operands): docs/guide/sharp-edges.md says so.
    The result is a NaN wherever NumPy's is, in either order of the operands."""
    pytest.importorskip("numtrace_cpu")
    a, b = np.full(9, np.nan, dtype), np.full(9, -np.nan, dtype)
    traced = nt.trace(fn, (np.ones(9, dtype), np.ones(9, dtype)), backend="cpu")
    for x, y in ((a, b), (b, a)):
        got, want = traced(x, y), fn(x, y)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).all()


def _nan_sign(fn, dtype):
    """Whether fn(x), x = -3 cast to dtype, rounded by NumPy, is a NaN with its sign bit set."""
    with np.errstate(invalid="ignore"):
        return bool(np.signbit(fn(np.full(1, -3.0, dtype)))[0])


def _nan_signs_match(fn, dtype):
    pytest.importorskip("numtrace_cpu")
    traced = nt.trace(fn, (np.ones(40, dtype),), backend="cpu")
    x = np.concatenate([np.linspace(-5, -0.5, 37), [-np.inf, 1.0, 2.0]]).astype(dtype)   # vector, tail
    with np.errstate(invalid="ignore", divide="ignore"):
        assert _same(traced(x), fn(x))
        assert _same(traced(x[:3]), fn(x[:3]))


@pytest.mark.parametrize("fn", [np.log, np.log2], ids=["log", "log2"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_of_a_negative_number_is_numpys_nan(fn, dtype):
    """The cpu extensions were not linked with libm, so their log and log2 bound to glibc's oldest
    versions (SVID compatibility wrappers), whose log(-1) is +NaN; NumPy's, and glibc's current, -NaN."""
    _nan_signs_match(fn, dtype)


_COMPAT_ONLY = ("glibc has only its compatibility asin, acos and log10, which give +NaN out of their domain; "
                "NumPy's AVX-512 loops (used on this CPU) give the default NaN, -NaN, there")


@pytest.mark.parametrize("fn", [lambda x: np.arcsin(x), lambda x: np.arccos(x), lambda x: np.log10(x)],
                         ids=["arcsin", "arccos", "log10"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_out_of_domain_inverse_trig_or_log10_is_numpys_nan(request, fn, dtype):
    if _nan_sign(fn, dtype):
        request.applymarker(pytest.mark.xfail(strict=True, reason=_COMPAT_ONLY))
    _nan_signs_match(fn, dtype)


# -- passing checks: user programs end to end at other sizes, layouts, after save/load, repeated -------

def _heat(u, source):
    for _ in range(2):
        lap = np.zeros_like(u)
        lap[:, 1:-1, 1:-1] = (u[:, :-2, 1:-1] + u[:, 2:, 1:-1] + u[:, 1:-1, :-2] + u[:, 1:-1, 2:]
                              - 4.0 * u[:, 1:-1, 1:-1])
        u = u + 0.2 * lap + 0.01 * source
        u[:, 0, :], u[:, -1, :], u[:, :, 0], u[:, :, -1] = 0.0, 0.0, 0.0, 0.0
    return u


def _stencil_in_place(u):
    u[1:-1] += 0.1 * (u[:-2] - 2 * u[1:-1] + u[2:])
    return u


def _special(rng, shape, dtype=np.float64, values=_SPECIAL):
    x = rng.standard_normal(shape) * 3
    mask = rng.random(shape) < 0.3
    x[mask] = rng.choice(values, int(mask.sum()))
    return x.astype(dtype)


_ONE_NAN = _SPECIAL[1:]   # for programs that add two NaNs: see test_an_add_of_two_nans_keeps_the_first


def _realistic():
    """benchmarks/realistic.py's programs (None where benchmarks/ is not beside this package)."""
    path = Path(__file__).resolve().parents[3] / "benchmarks"
    if not (path / "realistic.py").exists():
        return None
    saved = list(sys.path)
    sys.path.insert(0, str(path))   # it imports benchmarks/_timing.py
    try:
        spec = importlib.util.spec_from_file_location("realistic_under_test", path / "realistic.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module   # its dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = saved


_R = _realistic()
# name: (program, inputs(rng, n)); exact programs only (elementwise, selects, compares, min/argmin)
_PROGRAMS = {
    "heat": (_heat, lambda r, n: (r.standard_normal((2, n, n + 1)), r.standard_normal((2, n, n + 1)))),
    "stencil_in_place": (_stencil_in_place, lambda r, n: (_special(r, (n + 2,), np.float32, _ONE_NAN),)),
}
if _R is not None:
    _PROGRAMS.update({
        "sgd_momentum": (_R.sgd_momentum_inplace,
                         lambda r, n: tuple(_special(r, (n,), np.float32, _ONE_NAN) for _ in range(3))),
        "clip_where_fill": (_R.clip_where_fill, lambda r, n: (_special(r, (n,)),)),
        "one_hot": (_R.one_hot, lambda r, n: (r.integers(-2, 12, n),)),
        "stencil_1d": (_R.stencil_1d, lambda r, n: (_special(r, (n + 2,), np.float64, _ONE_NAN),)),
    })


def _layouts(a: np.ndarray):
    """a's values C-ordered, Fortran-ordered, reversed (negative strides) and every other element."""
    yield a.copy()
    if a.ndim:
        yield np.asfortranarray(a)
        yield a[::-1].copy()[::-1]
        yield np.repeat(a, 2, axis=-1)[..., ::2]


def _check_program(traced, fn, rng, make):
    for n in (1, 3, 17, 200):
        args = make(rng, n)
        for layout in zip(*(_layouts(a) for a in args)):
            mine = tuple(a.copy(order="K") for a in layout)
            theirs = tuple(a.copy(order="K") for a in layout)
            with np.errstate(all="ignore"):
                assert _same(traced(*mine), fn(*theirs)), n
            assert all(_same(a, b) for a, b in zip(mine, theirs)), n


@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_user_programs_match_numpy_bit_for_bit(backend, name, tmp_path):
    fn, make = _PROGRAMS[name]
    rng = np.random.default_rng(0)
    with np.errstate(all="ignore"):
        traced = nt.trace(fn, make(rng, 8), backend=backend)
    traced.save(tmp_path / "f.nt")
    for t in (traced, nt.load(tmp_path / "f.nt", backend=backend)):
        _check_program(t, fn, rng, make)
    # Results of earlier calls are the caller's: later calls never write into them.
    with np.errstate(all="ignore"):
        results = [traced(*make(np.random.default_rng(k), 9)) for k in range(3)]
        for k, got in enumerate(results):
            assert _same(got, fn(*make(np.random.default_rng(k), 9)))


@pytest.mark.parametrize("name", sorted(set(_PROGRAMS) & {"heat", "stencil_in_place", "sgd_momentum",
                                                          "clip_where_fill"}))
def test_user_programs_on_generated_kernels(name, tmp_path, monkeypatch):
    """The same programs on the cpu backend's generated C kernels (compiled synchronously)."""
    compiler = pytest.importorskip("numtrace_cpu.compiler")
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path / "cache"))
    old = compiler.set_mode("sync")
    try:
        fn, make = _PROGRAMS[name]
        rng = np.random.default_rng(1)
        with np.errstate(all="ignore"):
            traced = nt.trace(fn, make(rng, 8), check_trace=False)
        _check_program(traced, fn, rng, make)
    finally:
        compiler.set_mode(old)
    assert sum(s["generated_runs"] for s in traced.stats()["signatures"].values()) > 0


def _sgd_momentum(w, g, m):
    m *= 0.9
    m += g
    w -= 0.01 * m
    return w, m


def test_an_in_place_program_from_two_threads(backend):
    """Two threads update their own arrays through one trace, at sizes that plan apart."""
    import threading

    traced = nt.trace(_sgd_momentum, tuple(np.ones(8, np.float32) for _ in range(3)), backend=backend)
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for n in (1, 7, 1000, 33) * 5:
            args = tuple(rng.standard_normal(n).astype(np.float32) for _ in range(3))
            mine, theirs = tuple(a.copy() for a in args), tuple(a.copy() for a in args)
            if not (_same(traced(*mine), _sgd_momentum(*theirs)) and _same(mine, theirs)):
                failures.append((seed, n))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
