"""A trace's results are the objects NumPy's would be: one array returned twice is one object, an
argument returned is the caller's own array, and a result NumPy returns as a view of an argument or of
another result is such a view (a later write through one is seen in the other). What a trace cannot
rebuild as NumPy's view is refused when tracing."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest


def _flat(obj):
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _flat(v)]
    if isinstance(obj, (tuple, list)):
        return [x for v in obj for x in _flat(v)]
    return [obj]


def _aliasing(result, args):
    """Which of the results are the same object as, or share memory with, which results or arguments."""
    items = _flat(result) + list(args)
    return [[(a is b, np.shares_memory(a, b)) for b in items] for a in items]


def _assert_like_numpy(fn, traced, *args):
    want_args = [a.copy() for a in args]
    got_args = [a.copy() for a in args]
    want = fn(*want_args)
    got = traced(*got_args)
    for g, w in zip(_flat(got), _flat(want)):
        np.testing.assert_array_equal(g, w)
    assert _aliasing(got, got_args) == _aliasing(want, want_args)
    return got, got_args


def _trace(fn, args, backend, **kw):
    return nt.trace(fn, tuple(a.copy() for a in args), backend=backend, check_trace=False, **kw)


def twice(x):
    y = x * 2.0
    return y, y


def nested_twice(x):
    y = x + 1.0
    return (y, (x * 3.0, y))


def argument(x):
    return x


def argument_and_result(x, z):
    return z, x * 2.0, x


def view_of_argument(x):
    return x, x[::2]


def views_of_a_result(x):
    y = x + 1.0
    return y, y[::2], y.reshape(2, -1).T


def chained_views(x):
    y = x - 1.0
    v = y[1:]
    return v[::2], y, v


def half(x):
    return x[: x.shape[0] // 2]


def transposed_argument(x):
    return x.T


def written_then_viewed(x):
    x += 1.0
    return x[1:]


@pytest.mark.triton
@pytest.mark.parametrize("fn", [twice, nested_twice, argument, view_of_argument, views_of_a_result,
                                chained_views, half, written_then_viewed], ids=lambda f: f.__name__)
def test_results_alias_as_numpys(backend, fn):
    x = np.arange(6.0)
    traced = _trace(fn, (x,), backend)
    for arg in (x, np.arange(10.0) + 0.5):
        _assert_like_numpy(fn, traced, arg)


@pytest.mark.triton
def test_an_argument_returned_among_results(backend):
    x, z = np.arange(4.0), np.ones(3)
    traced = _trace(argument_and_result, (x, z), backend)
    got, args = _assert_like_numpy(argument_and_result, traced, x, z)
    assert got[0] is args[1] and got[2] is args[0]


@pytest.mark.triton
def test_a_write_through_one_result_is_seen_in_its_views(backend):
    traced = _trace(views_of_a_result, (np.arange(6.0),), backend)
    y, strided, transposed = traced(np.arange(8.0))
    y[0] = -5.0
    assert strided[0] == -5.0 and transposed[0, 0] == -5.0
    x = np.arange(8.0)
    whole, view = _trace(view_of_argument, (np.arange(6.0),), backend)(x)
    view[1] = 100.0
    assert whole is x and x[2] == 100.0


@pytest.mark.triton
@pytest.mark.parametrize("strict", [True, False])
def test_a_container_holding_one_array_twice(backend, strict):
    def listed(x):
        y = np.sqrt(x)
        return [y, x, y]

    def keyed(x):
        y = x * x
        return {"a": y, "b": (y, x)}

    x = np.arange(5.0)
    fns = [listed] + ([keyed] if not strict else [])
    for fn in fns:
        traced = _trace(fn, (x,), backend, strict=strict) if strict is False else None
        if traced is None:
            with pytest.warns(nt.TracerWarning, match="returns a list"):
                traced = _trace(fn, (x,), backend)
        _assert_like_numpy(fn, traced, x)


@pytest.mark.triton
def test_a_reshape_is_a_view_or_a_copy_as_numpy_makes_it(backend):
    def flat(x):
        return x, x.reshape(-1)

    traced = _trace(flat, (np.ones((3, 4)),), backend)
    _assert_like_numpy(flat, traced, np.arange(12.0).reshape(3, 4))
    base = np.arange(24.0).reshape(6, 4)
    got = traced(base[::2])     # NumPy copies: the reshape of a strided array is no view
    assert not np.shares_memory(got[1], base)
    np.testing.assert_array_equal(got[1], flat(base[::2])[1])


def test_transposed_argument_is_a_view_on_every_call(backend):
    traced = _trace(transposed_argument, (np.ones((2, 3)),), backend)
    x = np.arange(20.0).reshape(4, 5)
    out = traced(x)
    assert np.shares_memory(out, x) and out.flags.f_contiguous and out.shape == (5, 4)


def test_overlapping_results_that_no_view_chain_relates_are_refused(backend):
    def overlapping(x):
        t = x + 1.0
        return t[:3], t[1:4]

    with pytest.raises(NotImplementedError, match=r"output\[0\].*shares memory"):
        _trace(overlapping, (np.arange(6.0),), backend)


def test_identity_survives_save_and_load(tmp_path, backend):
    traced = _trace(views_of_a_result, (np.arange(6.0),), backend)
    path = tmp_path / "t.nt"
    traced.save(path)
    loaded = nt.load(path, backend=backend)
    _assert_like_numpy(views_of_a_result, loaded, np.arange(8.0))
    same = _trace(twice, (np.arange(3.0),), backend)
    same.save(path)
    a, b = nt.load(path, backend=backend)(np.arange(4.0))
    assert a is b


@pytest.mark.triton
def test_an_empty_tuple_is_returned_as_numpy_returns_it(backend):
    def parts(x):
        return tuple(np.unstack(x, axis=0))

    traced = _trace(parts, (np.ones((2, 3)),), backend)
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        assert traced(np.ones((0, 3))) == () == parts(np.ones((0, 3)))
    got = traced(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(got[1], [3.0, 4.0, 5.0])
    assert nt.trace(lambda x: (), (np.ones(2),), backend=backend, check_trace=False)(np.ones(5)) == ()


def test_module_state_returned_shares_the_modules_memory(backend):
    class Model(nt.Module):
        def __init__(self):
            super().__init__()
            self.w = nt.Parameter(np.arange(6.0))

        def forward(self, x):
            return self.w, self.w[::2], x * self.w

    model = Model()
    traced = nt.trace_module(model, {"forward": np.ones(6)}, backend=backend, check_trace=False)
    whole, strided, product = traced.forward(np.ones(6))
    assert np.shares_memory(whole, model.w) and np.shares_memory(strided, model.w)
    strided[1] = -1.0
    assert model.w[2] == -1.0 and not np.shares_memory(product, model.w)
