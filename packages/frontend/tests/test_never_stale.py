"""Never silently wrong: ordinary programs traced at one batch size and called at others.

Each program reads its input's shape in a way a trace could bake in as a constant. Traced at batch 5,
every call at batch 1, 5 and 1000 must equal eager NumPy: either because the size is recorded in the
graph (``x.size``, arithmetic on sizes), or because the trace guarded it and traces again (a branch on a
shape, ``range(n)``, ``math.sqrt(n)``). A loaded trace, which has no Python function to trace again,
refuses such shapes with an error naming the guard.
"""

import io
import math
import warnings

import numpy as np
import numtrace as nt
import pytest

LR = 0.1


def _split(x):
    k = max(int(0.8 * x.shape[0]), 1)
    return x[:k].mean(0) - x[k:].mean(0) if k < x.shape[0] else x[:k].mean(0)


def _write_interior(x):
    x[1 : x.shape[0] - 1] = 0.5
    return x


def _loop(x):
    total = x[0] * 0.0
    for i in range(x.shape[0]):
        total = total + x[i] * (i + 1)
    return total


# name -> (program, re-traces over the calls at batch 1, 5, 1000, 5, 1 of a trace made at batch 5)
PROGRAMS = {
    "size": (lambda x: x - x.sum() / x.size, 0),
    "math_sqrt": (lambda x: x.std(axis=0) / math.sqrt(x.shape[0]), 2),
    "pow_half": (lambda x: x.std(axis=0) / x.shape[0] ** 0.5, 0),
    "reciprocal": (lambda x: x * (1.0 / x.shape[0]), 0),
    "float": (lambda x: x / float(x.shape[0]), 2),
    "np_float32": (lambda x: x / np.float32(x.shape[0]), 2),
    "np_prod": (lambda x: x / np.prod(x.shape), 0),
    "split": (_split, 2),
    "slice_minus_one": (lambda x: x[: x.shape[0] - 1] * 2.0, 0),
    "slice_second_half": (lambda x: x[x.shape[0] // 2:] * 2.0, 0),
    "index_last": (lambda x: x[x.shape[0] - 1] * 2.0, 0),
    "floor_split": (lambda x: x[: max(math.floor(0.8 * x.shape[0]), 1)].sum(0), 1),  # max() compares: n=1
    "write_interior": (lambda x: _write_interior(x.copy()), 0),
    "linspace": (lambda x: x * np.linspace(0.0, 1.0, x.shape[0])[:, None], 0),
    "eye": (lambda x: x.T @ np.eye(x.shape[0]) @ x + np.tri(x.shape[1]), 0),
    "slice_half_len": (lambda x: x[: len(x) // 2 + 1] * 2.0, 2),
    "branch": (lambda x: x[0] * 1.0 if x.shape[0] == 1 else x * 1.0, 1),  # 1000 takes batch 5's branch
    "loop": (_loop, 2),
    "arange": (lambda x: x + np.arange(x.shape[0])[:, None], 0),
    "arange_start_stop": (lambda x: x * np.arange(1, x.shape[0] + 1)[:, None], 0),
    "ones_size": (lambda x: x + np.ones(x.size).reshape(x.shape), 0),
    "len_mean": (lambda x: x.sum(0) / len(x), 2),
}


def _call_quietly(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return fn(*args)


@pytest.mark.triton
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_reproduces_numpy_at_other_batch_sizes(name, backend):
    fn, retraces = PROGRAMS[name]
    rng = np.random.default_rng(7)
    x = rng.random((5, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning while tracing: sizes are recorded or guarded
        traced = nt.trace(fn, (x,), backend=backend)
    assert bool(traced.guards) == bool(retraces), traced.guards
    for n in (1, 5, 1000, 5, 1):
        y = rng.random((n, 3)).astype(np.float32)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = fn(y)
        got = _call_quietly(traced, y)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (n, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6, err_msg=f"batch {n}")
    # Re-traced once per new shape that breaks a guard, never per call.
    assert traced.stats()["retraces"] == retraces


def test_guards_are_listed_printed_and_saved():
    def f(x):
        return x / math.sqrt(x.shape[0])  # SQRT

    traced = nt.trace(f, (np.ones((4, 2)),), backend="reference")
    (guard,) = traced.guards
    assert guard.startswith("x.shape[0] == 4  # ") and guard.endswith(f"{__file__}:{_line_of('# SQRT')}")
    assert "prim.guard[expected=4]" in str(traced.graph)
    assert str(traced.graph).splitlines()[1] == "  # guard: x.shape[0] == 4"
    buffer = io.BytesIO()
    traced.save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()))
    assert loaded.guards == traced.guards
    np.testing.assert_allclose(loaded(np.full((4, 2), 2.0)), f(np.full((4, 2), 2.0)))
    with pytest.raises(nt.GuardError, match=r"guard x.shape\[0\] == 4 .* it is 9.*loaded from a file"):
        loaded(np.ones((9, 2)))


def test_the_recompile_limit_is_a_clear_error():
    def f(x):
        return x * float(x.shape[0])

    traced = nt.trace(f, (np.ones(1),), backend="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        for n in range(2, 10):
            np.testing.assert_allclose(traced(np.ones(n)), np.full(n, float(n)))
        with pytest.raises(RuntimeError, match="traced again 8 times"):
            traced(np.ones(10))
        np.testing.assert_allclose(traced(np.ones(9)), np.full(9, 9.0))  # the specializations still serve


def _line_of(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


# -- in-place writes reach the caller ----------------------------------------------------------------


def _step(w, g):
    w -= LR * g


def _slice_add(x):
    x[1:] += 1.0


def _out_into_input(x):
    np.multiply(x, 2.0, out=x)
    return x.sum()


def _masked_fill(x):
    x[x < 0.5] = 0.0


def _through_a_view(x):
    v = x[:, 0]
    v *= 3.0
    return x.sum()


def _through_transpose_and_reshape(x):
    x.T[0] = 1.0
    flat = x.reshape(-1)
    flat[::2] *= -1.0
    return np.swapaxes(x, 0, 1) * 1.0


def _two_arguments(x, y):
    x += y
    y -= 1.0
    return x + y


MUTATORS = [_step, _slice_add, _out_into_input, _masked_fill, _through_a_view, _through_transpose_and_reshape,
            _two_arguments]


@pytest.mark.triton
@pytest.mark.parametrize("fn", MUTATORS, ids=lambda f: f.__name__)
def test_writes_into_arguments_reach_the_caller(fn, backend):
    rng = np.random.default_rng(3)
    nargs = fn.__code__.co_argcount
    make = (lambda n: tuple(rng.random((n, 3)) for _ in range(nargs)))
    traced = nt.trace(fn, tuple(a.copy() for a in make(5)), backend=backend)
    for n in (5, 1, 1000):
        args = make(n)
        eager = [a.copy() for a in args]
        ours = [a.copy() for a in args]
        expected = fn(*eager)
        got = traced(*ours)
        if expected is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12)
        for a, b in zip(ours, eager):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_function_returning_nothing_and_writing_nothing_is_an_error():
    with pytest.raises(RuntimeError, match="wrote into none of its arguments"):
        nt.trace(lambda x: None, (np.ones(3),), backend="reference")


def test_mutations_survive_save_and_load():
    traced = nt.trace(_step, (np.ones(3), np.ones(3)), backend="reference")
    buffer = io.BytesIO()
    traced.save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()))
    w = np.ones(3)
    assert loaded(w, np.full(3, 2.0)) is None
    np.testing.assert_allclose(w, 1.0 - LR * 2.0)


def test_a_branch_on_a_data_dependent_size_is_guarded_at_run_time(backend):
    """A mask's count is known only while running: its guard is checked then, and a call that breaks it
    uses the graph traced for the other branch (traced once), never the stale one."""
    def f(x):
        y = x[x > 0.5]
        return y * 2.0 if y.shape[0] > 2 else y - 1.0

    traced = nt.trace(f, (np.array([0.9, 0.8, 0.7, 0.1]),), backend=backend)
    few, many = np.array([0.9, 0.1, 0.2, 0.3]), np.array([0.6, 0.8, 0.7, 0.1])
    for x in (few, many, few, many):
        np.testing.assert_allclose(_call_quietly(traced, x), f(x))
    assert traced.stats()["retraces"] == 1


def test_a_written_argument_that_is_returned_is_the_callers_array(backend):
    """``w -= ...; return w`` returns the caller's ``w`` in NumPy: so does the trace (no extra output)."""
    def sgd(w, g, m):
        m *= 0.9
        m += g
        w -= 0.01 * m
        return w, m, w * 2.0

    traced = nt.trace(sgd, (np.ones(5), np.ones(5), np.ones(5)), backend=backend)
    assert len(traced.graph.outputs) == 3  # w * 2.0, then the new w and m once each
    w, g, m = np.ones(7), np.full(7, 2.0), np.ones(7)
    ew, em = np.ones(7), np.ones(7)
    got, expected = traced(w, g, m), sgd(ew, g, em)
    assert got[0] is w and got[1] is m
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    buffer = io.BytesIO()
    traced.save(buffer)
    w2 = np.ones(7)
    assert nt.load(io.BytesIO(buffer.getvalue()))(w2, g, np.ones(7))[0] is w2


class _Counter(nt.Module):
    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones((3, 4), np.float32))
        self.register_buffer("count", np.zeros(1, np.float32))

    def forward(self, x):
        self.count += 1
        h = x @ self.w / math.sqrt(x.shape[0])
        return h[: x.shape[0] - 1] if x.shape[0] > 2 else h


def test_a_module_traced_again_keeps_its_state_exact(backend):
    """Tracing (first, for the checker, and again for new shapes) never writes into the module's state:
    only calls do, once each, as the eager module would."""
    model, eager = _Counter(), _Counter()
    traced = nt.trace(model, np.ones((4, 3), np.float32), backend=backend)
    assert model.count[0] == 0
    rng = np.random.default_rng(0)
    for n in (4, 2, 7, 1, 7):
        x = rng.random((n, 3)).astype(np.float32)
        np.testing.assert_allclose(_call_quietly(traced, x), eager(x), rtol=1e-6)
    assert model.count[0] == eager.count[0] == 5
    assert traced.forward.stats()["retraces"] == 3
