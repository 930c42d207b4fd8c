"""Arguments written in place (``x += g``) computed straight into the caller's arrays on the cpu backend.

The cpu backend may write a written-back argument's new contents into the argument itself instead of
a fresh array copied back after the call; it must do so only where nothing reads the old contents
afterwards. These tests check the mechanism where it applies, the refusals where it must not, and
fuzz programs of in-place updates, views and reads against eager NumPy (and the reference backend).
"""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="numtrace-cpu is not installed")


def _in_place(traced) -> list:
    return [list(s.get("in_place_outputs", [])) for s in traced.stats()["signatures"].values()]


def _sgd(w, g, m):
    m *= 0.9
    m += g
    w -= 0.01 * m
    return w, m


def test_sgd_step_writes_into_the_arguments():
    r = np.random.default_rng(0)
    w, g, m = (r.standard_normal(50, dtype=np.float32) for _ in range(3))
    traced = nt.trace(_sgd, (w.copy(), g.copy(), m.copy()), backend="cpu")
    tw, tm = w.copy(), m.copy()
    for _ in range(3):
        got = traced(tw, g, tm)
        want = _sgd(w, g, m)
        assert got[0] is tw and got[1] is tm
        np.testing.assert_array_equal(tw, want[0])
        np.testing.assert_array_equal(tm, want[1])
    assert _in_place(traced) == [[0, 1]]
    assert "computed in place" in traced.explain()


def test_a_strided_argument_is_updated_in_place():
    base = np.arange(40.0).reshape(8, 5)
    expected = base.copy()

    def f(x):
        x *= 2.0
        x += 1.0

    traced = nt.trace(f, (np.ones((4, 5)),), backend="cpu")
    traced(base[::2])
    f(expected[::2])
    np.testing.assert_array_equal(base, expected)


@pytest.mark.parametrize("update", [lambda x: x.T, lambda x: x[::-1], lambda x: x[:, ::-1]],
                         ids=["transposed", "reversed", "columns reversed"])
def test_an_update_reading_a_view_of_itself_is_not_written_in_place(update):
    def f(x):
        x += update(x)
        return x.sum()

    x = np.arange(16.0).reshape(4, 4)
    traced = nt.trace(f, (x.copy(),), backend="cpu")
    mine, theirs = x.copy(), x.copy()
    np.testing.assert_array_equal(traced(mine), f(theirs))
    np.testing.assert_array_equal(mine, theirs)
    assert _in_place(traced) == [[]]


def test_old_contents_read_after_the_update_keep_it_out_of_place():
    def f(x, y):
        before = x * 1.0   # a copy of the old contents, read after x is updated
        x *= 3.0
        return np.cumsum(before) + y.sum()

    x, y = np.arange(6.0), np.ones(6)
    traced = nt.trace(f, (x.copy(), y), backend="cpu")
    mine, theirs = x.copy(), x.copy()
    np.testing.assert_array_equal(traced(mine, y), f(theirs, y))
    np.testing.assert_array_equal(mine, theirs)


def test_a_read_only_argument_is_refused():
    def f(x):
        x += 1.0

    traced = nt.trace(f, (np.zeros(4),), backend="cpu")
    x = np.zeros(4)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        traced(x)
    np.testing.assert_array_equal(x, 0.0)


# -- fuzz --------------------------------------------------------------------------------------------

def _done(_result) -> None:
    return None


def _read(a, b):
    return a * 2.0 + b


def _sum_read(a, b):
    return a + b.sum()


# name -> f(env, j, k): performs the step (maybe writing env[j] in place), returns a new value or None.
UPDATES = {
    "iadd_scalar": lambda a, b: _done(a.__iadd__(1.5)),
    "imul_other": lambda a, b: _done(a.__imul__(b)),
    "isub_reversed": lambda a, b: _done(a.__isub__(b[::-1])),
    "iadd_transposed": lambda a, b: _done(a.__iadd__(b.T)),
    "iadd_self_transposed": lambda a, b: _done(a.__iadd__(a.T)),
    "ufunc_out": lambda a, b: _done(np.multiply(a, b, out=a)),
    "abs_out": lambda a, b: _done(np.abs(a, out=a)),
    "isub_mean": lambda a, b: _done(a.__isub__(a.mean())),
    "slice_iadd": lambda a, b: _done(a[1:].__iadd__(b[:-1])),
    "set_row": lambda a, b: a.__setitem__(0, b[1]),
    "read": _read,
    "sum_read": _sum_read,
    "copy": lambda a, b: a.copy(),
    "cumsum": lambda a, b: np.cumsum(a, axis=1),
}


def _program(steps):
    def program(x, y, z):
        env = [x, y, z]
        for name, j, k in steps:
            new = UPDATES[name](env[j % len(env)], env[k % len(env)])
            if new is not None:
                env.append(new)
        return tuple(env[3:]) if len(env) > 3 else None
    return program


def _arguments(layout: str, seed: int) -> list:
    r = np.random.default_rng(seed)
    if layout == "contiguous":
        return [r.random((4, 4)) for _ in range(3)]
    if layout == "strided":
        return [r.random((8, 4))[::2] for _ in range(3)]
    return [np.asfortranarray(r.random((4, 4))) for _ in range(3)]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          database=None)
@given(steps=st.lists(st.tuples(st.sampled_from(sorted(UPDATES)), st.integers(0, 5), st.integers(0, 5)),
                      min_size=1, max_size=6),
       layout=st.sampled_from(["contiguous", "strided", "fortran"]))
def test_in_place_programs_match_numpy(steps, layout):
    fn = _program(steps)
    traced = nt.trace(fn, tuple(a.copy() for a in _arguments("contiguous", 0)), backend="cpu",
                      check_trace=False)
    reference = traced.to("reference")
    for seed in (1, 2):   # a second call reuses the executable's arena
        want_args = _arguments(layout, seed)
        got_args = [a.copy() if layout == "contiguous" else _arguments(layout, seed)[i]
                    for i, a in enumerate(want_args)]
        ref_args = [a.copy() for a in want_args]
        want = fn(*want_args)
        got = traced(*got_args)
        ref = reference(*ref_args)
        for g, r, w in zip(got or (), ref or (), want or ()):
            np.testing.assert_allclose(g, w, rtol=1e-12)
            np.testing.assert_allclose(r, w, rtol=1e-12)
        for g, r, w in zip(got_args, ref_args, want_args):
            np.testing.assert_allclose(g, w, rtol=1e-12)
            np.testing.assert_allclose(r, w, rtol=1e-12)


# -- graphs with guards checked while running ------------------------------------------------------------

def _store_then_step(a, b, w):
    a[0] = b.sum()      # a float scalar into an int array: guarded at run time (NumPy raises for inf)
    w -= 0.5 * b
    return a, w


def _step_then_store(a, b, w):
    w -= 0.5 * b
    a[0] = w.sum()      # the guard reads the update: it runs after it
    return a, w


def test_a_guarded_graph_still_writes_into_the_arguments():
    a, b, w = np.arange(4), np.ones(4), np.zeros(4)
    traced = nt.trace(_store_then_step, (a.copy(), b, w.copy()), backend="cpu")
    ta, tw = a.copy(), w.copy()
    got = traced(ta, b, tw)
    want = _store_then_step(a.copy(), b, w.copy())
    assert got[0] is ta and got[1] is tw
    np.testing.assert_array_equal(ta, want[0])
    np.testing.assert_array_equal(tw, want[1])
    assert _in_place(traced) == [[1]]


@pytest.mark.parametrize("fn", [_store_then_step, _step_then_store])
def test_a_failing_guard_leaves_the_arguments_untouched(fn):
    # The call is retried from the caller's arrays as they were (traced again here, where NumPy raises):
    # nothing was written into them. (NumPy itself, in `_step_then_store`, updates w before raising.)
    a, b, w = np.arange(4), np.ones(4), np.zeros(4)
    traced = nt.trace(fn, (a.copy(), b, w.copy()), backend="cpu")
    ta, tw = a.copy(), w.copy()
    with pytest.warns(nt.TracerWarning, match="re-tracing"), pytest.raises(OverflowError):
        traced(ta, np.array([np.inf, 0.0, 0.0, 0.0]), tw)
    np.testing.assert_array_equal(ta, a)
    np.testing.assert_array_equal(tw, w)
    assert _in_place(traced) == ([[1]] if fn is _store_then_step else [[]])
