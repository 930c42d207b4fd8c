"""Wrong answers found by hunting the call convention through the frontend: each a minimal program
that a traced call answered differently from eager NumPy without raising.

Whether NumPy's reshape of an argument is a view, so whether a write through it reaches the argument,
depends on the argument's shape (a transposed batch of 1) and layout, and so does whether
``np.ascontiguousarray`` copies: the trace guards the unit dims and checks the layouts per call. Views
NumPy returns through other functions (``ravel('K')``, ``.real``, ``np.flip``, ``np.split``...) are
followed, or a write under one is refused where its stale value would be used.
"""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


class Accumulate(nt.Module):
    """Writes into its state from its argument."""

    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones(3))

    def forward(self, x):
        self.w += x
        return self.w * 2 + x


class WriteArgument(nt.Module):
    """Writes into its argument, reads its state."""

    def __init__(self):
        super().__init__()
        self.w = nt.Parameter(np.ones(3))

    def forward(self, x):
        x += 1
        return self.w * 2


@pytest.mark.parametrize("cls", [Accumulate, WriteArgument])
def test_an_argument_sharing_memory_with_module_state_either_writes_is_refused(backend, cls):
    traced = nt.trace_module(cls(), {"forward": np.ones(3)}, check_trace=False, backend=backend)
    w = np.asarray(traced.state_dict()["w"])
    for alias in (w, w[::-1]):
        before = w.copy()
        with pytest.raises(ValueError, match="shares memory with"):
            traced.forward(alias)
        assert np.array_equal(w, before)


def test_state_aliasing_is_checked_after_the_fast_path_took_a_call(backend):
    """The same refusal on a call that the CPU backend's exact caller would take."""
    traced = nt.trace_module(Accumulate(), {"forward": np.ones(3)}, check_trace=False, backend=backend)
    traced.forward(np.zeros(3))
    traced.forward(np.zeros(3))
    w = np.asarray(traced.state_dict()["w"])
    with pytest.raises(ValueError, match="shares memory"):
        traced.forward(w)
    traced.forward(np.zeros(3))  # a separate array still runs


def _reshape_write(a):
    b = a.T.reshape(-1)
    b[1] = 9.0
    return a


def _ravel_write(a):
    b = a.reshape(-1)
    b[1] = 5.0
    return a.T


def _derived_ravel_write(a):
    y = a * 2
    y.reshape(-1)[1] = 100.0
    return y


def _ascontiguous_write(a):
    c = np.ascontiguousarray(a)
    c[0] = -1.0
    return a


@pytest.mark.parametrize("f, trace_arg, call_arg", [
    # batch 1 -> 3: a view at trace time, a copy at the call; 3 -> batch 1: the other way round
    (_reshape_write, np.zeros((1, 4)), np.arange(12.0).reshape(3, 4)),
    (_reshape_write, np.zeros((3, 4)), np.arange(4.0).reshape(1, 4)),
    (_ravel_write, np.zeros((3, 4)), np.asfortranarray(np.arange(12.0).reshape(3, 4))),
    (_ravel_write, np.asfortranarray(np.zeros((3, 4))), np.arange(12.0).reshape(3, 4)),
    (_derived_ravel_write, np.zeros((3, 4)), np.asfortranarray(np.arange(12.0).reshape(3, 4))),
    (_ascontiguous_write, np.zeros((4, 3)).T, np.arange(12.0).reshape(3, 4)),
    (_ascontiguous_write, np.zeros((3, 4)), np.zeros((4, 3)).T),
], ids=["batch1-to-3", "3-to-batch1", "C-to-F", "F-to-C", "derived-F", "ascontiguousarray",
        "ascontiguousarray-view-to-copy"])
def test_a_write_through_a_reshape_follows_the_callers_layout(backend, f, trace_arg, call_arg):
    traced = nt.trace(f, (trace_arg,), check_trace=False, backend=backend)
    eager_arg, traced_arg = call_arg.copy(order="K"), call_arg.copy(order="K")
    expected = f(eager_arg)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # "re-tracing ...": a unit dim changed
            got = traced(traced_arg)
    except (ValueError, TypeError, nt.GuardError):
        return  # a refusal keeps the promise
    assert np.array_equal(got, expected) and np.array_equal(traced_arg, eager_arg)


class _Negating(np.ndarray):
    """A user's subclass whose ``+`` is not NumPy's."""

    def __add__(self, other):
        return np.asarray(self) - other


@pytest.mark.parametrize("make, f", [
    (lambda: np.array([[1.0, 2.0], [3.0, 4.0]]).view(np.matrix), lambda a: a * a),   # matrix product
    (lambda: np.ma.array(np.arange(4.0).reshape(2, 2), mask=[[0, 1], [0, 0]]), lambda a: a.sum()),
    (lambda: np.arange(4.0).reshape(2, 2).view(_Negating), lambda a: a + 1),
], ids=["matrix", "masked", "user-subclass"])
def test_an_ndarray_subclass_argument_is_refused(backend, make, f):
    """Its operations are not the ones the graph recorded on an ndarray."""
    traced = nt.trace(f, (np.ones((2, 2)),), check_trace=False, backend=backend)
    traced(np.ones((2, 2)))
    with pytest.raises(TypeError, match="ndarray subclass"):
        traced(make())
    with pytest.raises(TypeError, match="ndarray subclass"):
        traced(a=make())


def test_memmap_and_parameter_arguments_run_as_arrays(backend, tmp_path):
    def f(a):
        a += 1
        return a

    traced = nt.trace(f, (np.zeros(3),), check_trace=False, backend=backend)
    mm = np.memmap(tmp_path / "m.dat", dtype=float, mode="w+", shape=(3,))
    assert traced(mm) is mm and np.array_equal(mm, np.ones(3))
    p = nt.Parameter(np.zeros(3))
    assert traced(p) is p and np.array_equal(p, np.ones(3))


def test_a_numpy_scalar_written_into_is_refused_as_numpy_refuses_item_assignment(backend):
    def f(a):
        a[...] = 5.0
        return a * 2

    traced = nt.trace(f, (np.zeros(()),), check_trace=False, backend=backend)
    with pytest.raises(TypeError):
        f(np.float64(2.0))
    with pytest.raises(TypeError, match="is the NumPy scalar float64, but the function was traced with an "):
        traced(np.float64(2.0))   # (NumPy's operators differ on scalars and 0-d arrays: refused by kind)
    assert traced(np.array(2.0)) == 10.0


_VIEWS = {
    "ravel-K": lambda a: a.ravel("K"),
    "ravel-A": lambda a: np.ravel(a, "A"),
    "reshape-A": lambda a: a.reshape(-1, order="A"),
    "real": lambda a: a.real,
    "conj": lambda a: a.conj(),
    "conjugate": lambda a: a.conjugate()[1:],
    "squeeze": lambda a: np.squeeze(a),
    "flip": lambda a: np.flip(a),
    "flip-axis": lambda a: np.flip(a, 1)[::-1],
    "atleast_2d": lambda a: np.atleast_2d(a),
    "atleast_3d": lambda a: np.atleast_3d(a)[..., 0],
    "atleast_2d-of-a-row": lambda a: np.atleast_2d(a[1])[0],
    "atleast_3d-of-a-row": lambda a: np.atleast_3d(a[:, 2])[:, 0, 0],
    "astype-no-copy": lambda a: a.astype(a.dtype, copy=False),
    "split": lambda a: np.split(a, 3)[1],
    "split-axis": lambda a: np.split(a, 3, axis=1)[2][::-1],
    "array_split": lambda a: np.array_split(a.T, 2)[1],
    "split-indices": lambda a: np.split(a, [1, -1])[2],
    "diagonal": lambda a: np.diagonal(a),
    "as_strided": lambda a: np.lib.stride_tricks.as_strided(a, (2, 2), (8, 8)),
    "broadcast_to": lambda a: np.broadcast_to(a, (2, *a.shape))[0],
}


@pytest.mark.parametrize("view", _VIEWS.values(), ids=_VIEWS.keys())
@pytest.mark.parametrize("layout", ["C", "F"])
def test_a_write_through_a_numpy_view_reaches_the_argument_or_is_refused(backend, view, layout):
    def f(a):
        v = view(a)
        v[0] = 3.0
        return a * 1, v * 1

    def make(shape):
        x = np.arange(float(np.prod(shape))).reshape(shape)
        return np.asfortranarray(x) if layout == "F" else x

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # as_strided reads the data: guarded
            traced = nt.trace(f, (make((3, 3)),), check_trace=False, backend=backend)
    except NotImplementedError as exc:   # refused at trace time, naming the write's line
        assert "does not track" in str(exc) and "test_hunt_front.py" in str(exc)
        return
    except ValueError as exc:   # NumPy's own refusal: a read-only view (as_strided gets read-only data)
        assert "read-only" in str(exc)
        return
    for shape in ((3, 3), (6, 3), (3, 6)):
        eager_x, traced_x = make(shape), make(shape)
        try:
            expected = f(eager_x)
        except ValueError:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # "re-tracing ...": another shape
            got = traced(traced_x)
        assert all(np.array_equal(g, w) for g, w in zip(got, expected)) and np.array_equal(traced_x, eager_x)


_MEMORY_ORDER = {
    "ravel-K-derived": lambda a: np.ravel(a * 2, "K") + 0,
    "ravel-K-cast": lambda a: a.astype(np.float32).ravel("K") + 0,
    "flatten-K": lambda a: (a - 1).flatten("K"),
    "ravel-A-derived": lambda a: np.ravel(np.exp(a), "A") + 0,
    "reshape-A": lambda a: (a + 1).reshape(-1, 2, order="A") + 0,
    "ravel-K-argument": lambda a: a.ravel("K") + 0,
    "ravel-K-transposed": lambda a: np.ravel(a.T + 1, order="K") + 0,
}


@pytest.mark.parametrize("f", _MEMORY_ORDER.values(), ids=_MEMORY_ORDER.keys())
@pytest.mark.parametrize("traced_as", ["C", "F"])
def test_elements_read_in_memory_order_follow_the_callers_layout_or_are_refused(backend, f, traced_as):
    """NumPy's computed arrays keep their arguments' layout, so ``ravel('K')`` of one follows it; a
    backend lays out what it computes its own way."""
    def make(shape, layout):
        x = np.arange(float(np.prod(shape))).reshape(shape) / 7
        return np.asfortranarray(x) if layout == "F" else x[:, ::2] if layout == "S" else x

    traced = nt.trace(f, (make((3, 4), traced_as),), check_trace=False, backend=backend)
    for layout in ("C", "F", "S"):
        for shape in ((3, 4), (5, 2), (1, 4)):
            x = make(shape if layout != "S" else (shape[0], 2 * shape[1]), layout)
            want = f(x.copy(order="K"))
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", nt.TracerWarning)   # "re-tracing ...": a unit dim
                    got = traced(x.copy(order="K"))
            except ValueError as exc:
                assert "laid out" in str(exc) or "traced with it" in str(exc)
                continue
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("view", [
    np.squeeze,
    lambda a: a.squeeze()[::-1],
    lambda a: np.asarray(a, order="C"),
    lambda a: np.asarray(a, order="F"),
    lambda a: np.asfortranarray(a),
    lambda a: np.require(a, requirements="F"),
], ids=["squeeze", "squeeze-method", "asarray-C", "asarray-F", "asfortranarray", "require-F"])
def test_a_write_through_a_view_whose_viewness_follows_unit_dims_or_layout(backend, view):
    """``np.squeeze`` returns its argument where it has no unit dims, and a view of another shape
    where it has; ``order=``/``asfortranarray`` return their argument where it is laid out so."""
    def f(a):
        v = view(a)
        v[0] = 42.0
        return a + 0, v + 0

    def make(shape, layout):
        x = np.arange(float(np.prod(shape))).reshape(shape) - 3
        return np.asfortranarray(x) if layout == "F" else x

    for traced_layout in ("C", "F"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # conversions of the data: guarded
            traced = nt.trace(f, (make((3, 4), traced_layout),), check_trace=False, backend=backend)
        for shape in ((3, 4), (1, 3), (4, 1), (5, 2)):
            for layout in ("C", "F"):
                eager_x, traced_x = make(shape, layout), make(shape, layout)
                want = f(eager_x)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", nt.TracerWarning)   # "re-tracing ..."
                        got = traced(traced_x)
                except ValueError as exc:
                    assert "traced with it" in str(exc)
                    continue
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)
                    assert g.shape == w.shape
                np.testing.assert_array_equal(traced_x, eager_x)
