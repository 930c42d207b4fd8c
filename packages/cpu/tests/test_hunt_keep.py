"""np.where's kept operands (codegen's _keep: one `seen |=` per loop body; per column in wide column
blocks; held by an empty asm in row blocks) in the kernel paths other tests leave out: reductions of
a where (tile loops, row blocks and column units, whose element is codegen's _element), a where split
by a table op (log between the mask and its operand), heaviside and left_shift in a reduction, a
raising op under ops that raise nothing (codegen's _kept keeps the op under them). Each warns and
raises as NumPy does, on both modes and 1 and 2 threads, in float64 and float32. And a pass's
constants: a Python float that underflows the pass's float32 raises no FloatingPointError when the
first call at a shape compiles under np.errstate(all="raise")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numtrace_cpu import codegen, compiler, set_num_threads
from numtrace_ir import Graph, testing
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)

MODES = ["off", "sync"]


@pytest.fixture(params=MODES)
def mode(request):
    old = compiler.set_mode(request.param)
    yield request.param
    compiler.set_mode(old)


def _reports(fn, *args):
    """What fn(*args) warns under np.errstate(all="warn"), and whether it raises under "raise"."""
    with np.errstate(all="warn"):
        reports, _, result = testing.fp_reports(lambda: fn(*args))
    with np.errstate(all="raise"):
        _, raised, _ = testing.fp_reports(lambda: fn(*args))
    return reports, raised is not None, result


def _x(shape, dtype):
    x = (np.random.default_rng(7).standard_normal(shape) * 3).astype(dtype)
    x.reshape(-1)[::11] = 0.0
    return x


# Programs whose masked-out operand raises a flag, reduced over a middle or the innermost axis (the
# column and row-block units fold in registers; a long row is folded tile by tile), or elementwise
# with a table op between the mask and the operand.
_PROGRAMS = {
    "sum0_where_sqrt": lambda x: np.where(x >= 0, np.sqrt(x), 0).sum(axis=0),
    "sum1_where_sqrt": lambda x: np.where(x >= 0, np.sqrt(x), 0).sum(axis=1),
    "mean1_where_recip": lambda x: np.where(x != 0, 1 / x, 0).mean(axis=1),
    "sum0_heaviside": lambda x: np.heaviside(x, np.sqrt(x)).sum(axis=0),
    "sum1_where_bool": lambda x: (x * np.where(x > 0, np.sqrt(x) > 1, False)).sum(axis=1),
    "where_log": lambda x: np.where(x > 0, np.log(x), 0),
    "exp_where_log": lambda x: np.exp(np.where(x > 0, np.log(x), -x)),
    "left_shift_cast": lambda x: np.left_shift((x * 1e18).astype(np.int64), (x > 0).astype(np.int64)),
    # a raising op under ops that raise nothing (codegen's _FLAG_FREE): the keep goes down to it
    "sum0_where_min_sqrt": lambda x: np.where(x >= 0, np.minimum(np.sqrt(x), 1.0), -1.0).sum(axis=0),
    "mean1_where_abs_recip": lambda x: np.where(x != 0, np.abs(1 / x), 0).mean(axis=1),
    "where_clip_square": lambda x: np.where(np.abs(x) < 1, np.clip(x * x * 1e308, -1, 1), x),
    "where_where_sqrt": lambda x: np.where(x > -1, np.maximum(np.where(x < 5, np.sqrt(x), 0), -x), 2),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("shape", [(600, 40), (2000, 3), (300, 7)], ids=str)
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_kept_operands_warn_as_numpy_in_every_path(name, shape, mode, dtype):
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)
    fn = _PROGRAMS[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        traced = nt.trace(fn, (np.abs(_x((5, 3), dtype)) + 1,), backend="cpu", check_trace=False)
    x = _x(shape, dtype)
    want, want_raised, expected = _reports(fn, x)
    assert want_raised, "the program's masked-out operand must raise a flag"
    for threads in (1, 2):
        set_num_threads(threads)
        try:
            got, got_raised, actual = _reports(traced, x)
        finally:
            set_num_threads(1)
        assert (got, got_raised) == (want, want_raised), f"{threads} threads"
        np.testing.assert_allclose(actual, expected, rtol=1e-12 if dtype == np.float64 else 1e-5,
                                   atol=0 if dtype == np.float64 else 1e-5)


_SPECIAL = [np.nan, -np.inf, np.inf, 0.0, -0.0, 1.0, -2.5, 1e-310, 1e-40, 1e300, -3e38, 1.7e308]


def _specials(dtype):
    """Values whose ops raise every flag somewhere, and a signaling NaN (NumPy's loops pass it on)."""
    with np.errstate(all="ignore"):
        x = np.array(_SPECIAL, np.float64).astype(dtype)
    wide = dtype == np.float64
    bits = np.array([0x7FF0000000000001 if wide else 0x7F800001], np.uint64 if wide else np.uint32)
    return np.concatenate([x, bits.view(dtype)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(codegen._FLAG_FREE))
def test_ops_kept_through_raise_no_flag_in_numpy(name, dtype):
    """codegen._kept keeps no operand an op of _FLAG_FREE computes, only the ops under it: so NumPy
    must raise no flag for such an op on any pair of special values, a signaling NaN included (a
    flag it raised would be lost where GCC computes the op only for the elements a where selects)."""
    x = _specials(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    fn = getattr(np, name, None)
    calls = {"copy": lambda: a.copy(), "where": lambda: np.where(np.arange(a.size) % 2 == 0, a, b)}
    call = calls.get(name) or ((lambda: fn(a, b)) if fn.nin == 2 else (lambda: fn(a)))
    with np.errstate(all="raise"):
        call()


# x - 1 raises only 'invalid', from a signaling NaN x (codegen's _snan_covered): its keep is dropped
# where another op computed for every element multiplies x (covered), kept where none does (alone).
_SNAN_PROGRAMS = {
    "covered": lambda x: np.where(x != 7, x * 3, x - 1),
    "alone": lambda x: np.where(x < 7, x - 1, np.abs(x)),
    "covered_sum1": lambda x: np.where(x != 7, x * 3, x - 1).sum(axis=1),
    "alone_sum1": lambda x: np.where(x < 7, x - 1, np.abs(x)).sum(axis=1),
    "alone_sum0": lambda x: np.where(x < 7, x - 1, np.abs(x)).sum(axis=0),
    "alone_mul_by_1": lambda x: np.where(x < 7, x - 1, np.abs(x) + x * 1.0),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("shape", [(600, 40), (2000, 3)], ids=str)
@pytest.mark.parametrize("name", sorted(_SNAN_PROGRAMS))
def test_a_signaling_nan_under_a_dropped_keep_warns_as_numpy(name, shape, dtype, mode):
    """A signaling NaN where the where selects its other operand: NumPy's x - 1 raises 'invalid'."""
    nt = pytest.importorskip("numtrace")
    fn = _SNAN_PROGRAMS[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        traced = nt.trace(fn, (np.ones((5, 3), dtype),), backend="cpu", check_trace=False)
    x = np.random.default_rng(3).uniform(-2, 2, shape).astype(dtype)
    x.reshape(-1)[::97] = _specials(dtype)[-1]
    want, want_raised, expected = _reports(fn, x)
    assert want_raised, "NumPy's x - 1 raises invalid at a signaling NaN"
    got, got_raised, actual = _reports(traced, x)
    assert (got, got_raised) == (want, want_raised)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("value", [1e-50, 1e-320], ids=["1e-50", "1e-320"])
def test_a_constant_that_underflows_float32_raises_nothing_at_compile(mode, value):
    """x * 1e-50 of a float32 x: NumPy casts the Python float to float32 (0) and raises nothing, under
    np.errstate(all="raise") too; the compile at the call's shape cast it with the call's errstate."""
    x = np.full(7, 2.0, np.float32)
    g = Graph()
    t = testing.type_of(x)
    xv = g.add_input("x", t)
    c = g.create_node("prim.Constant", [], attrs={"value": value}).output
    g.set_outputs([g.create_node("np.multiply", [xv, c]).outputs[0]])
    with np.errstate(all="raise"):
        want = x * value
        (got,) = _compiled(g, [t], mode)(x)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


_WEAK_OVERFLOW = ("x < 1e100 of a float32 x: NumPy casts the Python float to float32 at each call and "
                  "warns 'overflow encountered in cast' (FloatingPointError under errstate(raise)); the "
                  "cpu backend casts the constant once, at compile, and reports nothing")


@pytest.mark.xfail(strict=True, reason=_WEAK_OVERFLOW)
def test_a_constant_that_overflows_float32_warns_at_each_call(mode):
    x = np.full(7, 2.0, np.float32)
    g = Graph()
    t = testing.type_of(x)
    xv = g.add_input("x", t)
    c = g.create_node("prim.Constant", [], attrs={"value": 1e100}).output
    g.set_outputs([g.create_node("np.less", [xv, c]).outputs[0]])
    exe = _compiled(g, [t], mode)
    want, want_raised, expected = _reports(lambda x: x < 1e100, x)
    got, got_raised, actual = _reports(exe, x)
    assert (got, got_raised) == (want, want_raised)
