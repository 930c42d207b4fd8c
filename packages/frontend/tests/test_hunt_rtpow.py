"""Hunt of branch rtpow at the tracer's level: ``x ** p`` / np.power of a float array and a run-time
exponent NumPy's loop reads with stride 0 (NumPy scalar and 0-d arguments, x[0], a reduction's result,
one-element constants, views made by np.broadcast_to and ``p[None]``) traced at one input and called at
others, on every backend (cpu: interpreter and generated kernels, 1 and 2 threads), under np.errstate
warn and raise, against eager NumPy. When NumPy's loop branches is worked out in
packages/cpu/tests/test_hunt_rtpow.py's docstring; findings are strict xfails with their cause (or fixed,
said so), and the passing checks guard the paths the change added."""

from __future__ import annotations

import numpy as np
import pytest
from test_hunt_breadth import mode  # noqa: F401  (mode: the cpu kernel modes' fixture)
from test_hunt_hunt_sect import threads  # noqa: F401  (1 and 2 threads' fixture)
from test_hunt_known import _matches, _trace

_P = [0.5, 2.0, -1.0, 1.0, 0.0, -0.0, 3.0, np.nan]   # NumPy's branches, their signs, pow's


def _base(n: int, dt=np.float64) -> np.ndarray:
    return np.resize(np.array([-np.inf, -0.0, np.inf, 0.0, 4.0, -2.0, np.nan, 1e-310, 3.0], dt), n)


def _cpu_stats(traced) -> dict:
    (stats,) = traced.stats()["signatures"].values()
    return stats


# --- findings ---------------------------------------------------------------------------------------------

def _power_of_a_broadcast_view(x, p):
    return x ** np.broadcast_to(p, x.shape)


def _power_of_a_new_axis(x, p):
    return x ** p[None]


@pytest.mark.xfail(strict=True, reason=(
    "np.broadcast_to(p, x.shape) of a 0-d p is a view whose strides are all 0, which NumPy's iterator "
    "coalesces to one stride-0 dim: its power loop branches (NaN at -inf ** 0.5 with 'invalid value', -0.0 "
    "at -0.0 ** 0.5). The trace records prim.broadcast_to and np.power of an (n,) exponent, which "
    "classify.broadcast_exponent leaves to C pow (+inf, +0.0, no warning), silently. (With a cast, a float32 "
    "p to a float64 x, NumPy buffers the view contiguously and calls pow: a fix must follow the dtypes.)"))
def test_a_power_of_a_broadcast_to_view_branches_as_numpy(mode):  # noqa: F811
    traced = _trace(_power_of_a_broadcast_view, (np.ones(3), np.float64(3.0)))
    _matches(traced, _power_of_a_broadcast_view, [(_base(7), np.float64(0.5)), (_base(1), np.float64(0.5))])


@pytest.mark.xfail(strict=True, reason=(
    "at batch 1, x ** p[None] of a 0-d p: the result has one element and the exponent its ndim, the case "
    "classify.broadcast_exponent leaves to pow because NumPy reads such an exponent with its own stride; "
    "p[None]'s stride is 0 (a new axis), so NumPy's loop branches all the same (NaN, 'invalid value'), and "
    "the trace gives C pow's +inf silently. np.expand_dims(p, 0) and p.reshape(1) have stride 8: pow in "
    "both (guarded below). At other sizes the (1,) exponent is broadcast and both branch"))
def test_a_new_axis_exponent_at_batch_1_branches_as_numpy(mode):  # noqa: F811
    traced = _trace(_power_of_a_new_axis, (np.ones(3), np.float64(3.0)))
    _matches(traced, _power_of_a_new_axis, [(_base(1), np.array(0.5))])


# --- guards: run-time exponents NumPy's loop reads with stride 0 ------------------------------------------

_PROGRAMS = {
    # name: (fn, the arguments at the base x and the exponent value p, broadcast_powers on the cpu)
    "x ** np.float64": (lambda x, p: x ** p, lambda x, p: (x, np.float64(p)), 1),
    "np.power(x, np.float32) f64 x": (lambda x, p: np.power(x, p), lambda x, p: (x, np.float32(p)), 1),
    "f32 x ** np.float64 (f64 loop)": (lambda x, p: x ** p,
                                       lambda x, p: (x.astype(np.float32), np.float64(p)), 1),
    "f32 x ** np.float32": (lambda x, p: x ** p, lambda x, p: (x.astype(np.float32), np.float32(p)), 1),
    "x ** 0-d": (lambda x, p: x ** p, lambda x, p: (x, np.array(p)), 1),
    "x ** (1,)": (lambda x, p: x ** p, lambda x, p: (x, np.array([p])), None),
    "x ** e[0]": (lambda x, e: x ** e[0], lambda x, p: (x, np.array([p, 7.0])), 1),
    "x ** e.sum()": (lambda x, e: x ** e.sum(), lambda x, p: (x, np.array([p, 0.0])), 1),
    "x ** e.max()": (lambda x, e: x ** e.max(), lambda x, p: (x, np.array([p, -9.0])), 1),
    "exp(x) ** p + 1": (lambda x, p: np.exp(x) ** p + 1, lambda x, p: (x, np.float64(p)), 1),
    "x[::-1] ** p": (lambda x, p: x[::-1] ** p, lambda x, p: (x, np.float64(p)), 1),
    "x[:, None] ** (1,)": (lambda x, e: x[:, None] ** e, lambda x, p: (x, np.array([p])), 1),
    "power.outer(x, (1,))": (lambda x, e: np.power.outer(x, e), lambda x, p: (x, np.array([p])), None),
    "int x ** np.float64": (lambda x, p: x ** p,
                            lambda x, p: (np.resize([0, 1, -3, 4, 9], x.size), np.float64(p)), 1),
    "out=": (lambda x, p: np.power(x, p, out=np.empty_like(x)), lambda x, p: (x, np.float64(p)), 1),
    "where=": (lambda x, p: np.power(x, p, out=np.zeros_like(x), where=x != 4.0),
               lambda x, p: (x, np.float64(p)), 1),
    "np.float64(-inf) ** e[0]": (lambda x, e: np.power(np.float64(-np.inf), e[0]) + np.nan_to_num(x),
                                 lambda x, p: (x, np.array([p])), None),
    # NumPy calls pow: float_power's loop has no branch; a one-element exponent of the result's shape with
    # its own stride (x[:1] ** e[:1], np.expand_dims / reshape of a 0-d p at batch 1)
    "float_power": (lambda x, p: np.float_power(x, p), lambda x, p: (x, np.float64(p)), 0),
    "x[:1] ** e[:1]": (lambda x, e: x[:1] ** e[:1], lambda x, p: (x, np.array([p, 1.0])), 0),
    "x ** expand_dims(p)": (lambda x, p: x ** np.expand_dims(p, 0), lambda x, p: (x[:1], np.array(p)), 0),
    "x ** p.reshape(1)": (lambda x, p: x ** p.reshape(1), lambda x, p: (x[:1], np.array(p)), 0),
}


@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_a_run_time_exponent_matches_numpy(backend, mode, threads, name):  # noqa: F811
    """One trace called with every exponent of `_P` in a row (a loop picked by the first value would show),
    at 7 and 3000 elements (blocks, 2 threads' halves) and 1, after tracing at p = 3."""
    fn, args, branches = _PROGRAMS[name]
    traced = _trace(fn, args(np.ones(5), 3.0), backend=backend)
    if backend == "cpu" and branches is not None:
        assert _cpu_stats(traced)["broadcast_powers"] == branches
    _matches(traced, fn, [args(_base(n), p) for n in (7, 3000, 1) for p in _P], states=("warn", "raise"))


def _in_place_power(x, p):
    x **= p
    return x


def test_an_in_place_power_by_a_scalar_argument(backend, mode):  # noqa: F811
    """``x **= p``: the argument's new contents and the result are NumPy's (the warnings of a call that
    wrote into its arguments name the kinds, not the op: docs/cpu.md, so they are not compared here)."""
    traced = _trace(_in_place_power, (np.ones(5), np.float64(3.0)), backend=backend)
    for p in _P:
        x, want = _base(9), _base(9)
        with np.errstate(all="ignore"):
            got = traced(x, np.float64(p))
            _in_place_power(want, np.float64(p))
        assert got.tobytes() == want.tobytes() and x.tobytes() == want.tobytes(), p


@pytest.mark.parametrize("name", ["x ** np.float64", "x ** e[0]"])
def test_a_saved_trace_keeps_numpys_branch(backend, mode, tmp_path, name):  # noqa: F811
    import numtrace as nt

    fn, args, _ = _PROGRAMS[name]
    _trace(fn, args(np.ones(5), 3.0), backend=backend).save(tmp_path / "t.ntr")
    loaded = nt.load(tmp_path / "t.ntr")
    _matches(loaded, fn, [args(_base(7), p) for p in (0.5, -0.0, 2.0)])


def _constant_exponents(x):
    return x ** _HALF_ARRAY, x.astype(np.float32) ** 0.50000001, x ** _HALF_ARRAY_2D


_HALF_ARRAY, _HALF_ARRAY_2D = np.array([0.5]), np.array([[0.5]])


def test_a_one_element_constant_exponent_branches(backend, mode):  # noqa: F811
    """Fixed (classify._loop_value): ``x ** np.array([0.5])`` of a constant array and ``x32 ** 0.50000001``
    (0.5 in the float32 loop) were C pow (+inf at -inf, +0.0 at -0.0): NumPy's loop branches (NaN with
    'invalid value', -0.0)."""
    traced = _trace(_constant_exponents, (np.ones(5),), backend=backend)
    _matches(traced, _constant_exponents, [(_base(7),), (_base(1),)])


def _power_by_a_matrix_exponent(x, e):
    return x ** e


def test_a_batch_1_base_of_fewer_dims_than_its_exponent_branches(backend, mode):  # noqa: F811
    """Fixed (classify.broadcast_exponent, and the Triton rule alike): x(n,) ** e(1, 1) at n = 1 has one
    element and e the result's ndim, which was called pow; NumPy's iterator (x has fewer dims) hands its
    loop stride 0: NaN at -inf ** 0.5 with 'invalid value', -0.0 at -0.0 ** 0.5."""
    traced = _trace(_power_by_a_matrix_exponent, (np.ones(3), np.full((1, 1), 3.0)), backend=backend)
    calls = [(_base(n), np.full((1, 1), p)) for n in (1, 2) for p in _P]
    _matches(traced, _power_by_a_matrix_exponent, calls)


# --- an exponent broadcast along one axis: NumPy's own np.power (fixed) -----------------------------------

def _power_by_a_column(x, e):
    return x ** e[:, None] + 1.0


def _power_by_constant_rows(x):
    return x ** _ROW_WITH_HALF, x ** _ROW_WITHOUT_HALF


_ROW_WITH_HALF = np.array([0.5, 2.0, 3.0])
_ROW_WITHOUT_HALF = np.array([-1.0, 2.0, 3.0])


@pytest.mark.triton
def test_an_exponent_broadcast_along_one_axis_is_numpys_power(backend):
    """Fixed (cpu classify.exponent_read_by_layout, triton _exponent_read_by_layout): x(2, n) ** e(2, 1)
    branches in NumPy's loop (sqrt at 0.5: NaN at -inf, 'invalid value') from n = 4097 in C order, and
    calls pow below; the passes called C pow at every n (+inf, silently). Such a power now runs NumPy's
    own np.power on the operands."""
    traced = _trace(_power_by_a_column, (np.ones((2, 8)), np.ones(2)), backend=backend)
    calls = [(np.resize(_base(9), (2, n)), np.array([0.5, 2.0])) for n in (8, 4097, 5000)]
    _matches(traced, _power_by_a_column, calls, states=("ignore",) if backend == "triton" else ("warn",))


@pytest.mark.triton
def test_a_constant_exponent_row_without_a_half_stays_in_the_pass(backend):
    """A constant exponent row broadcast over the rows: with 0.5 in it NumPy's np.power runs (its loop
    branches or not by layout), without it pow and the branches agree and the pass keeps it."""
    fn = _power_by_constant_rows if backend != "triton" else (lambda x: x ** _ROW_WITH_HALF)  # (its pow:
    traced = _trace(fn, (np.ones((4, 3)),), backend=backend)   # exp2(b * log2|a|) in the interpreter)
    calls = [(np.resize(_base(9), (n, 3)),) for n in (1, 4, 3000)]
    _matches(traced, fn, calls, states=("ignore",))
    if backend == "cpu":
        from numtrace_cpu import classify

        powers = [n for n in traced.graph.nodes if n.op == "np.power"]
        assert [classify.exponent_read_by_layout(n) for n in powers] == [True, False]
