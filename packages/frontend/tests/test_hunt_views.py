"""Wrong answers found by hunting writes through views of arguments, differential against eager NumPy:
each a minimal program traced at one shape or layout and called at another, which answered otherwise
than NumPy without raising.

Whether a write reaches a view (and a view sees a write) is decided by memory, which an empty array
does not have and which a reshape shares with its base at some layouts only: a write into the base of
such a reshape makes the trace check layouts, a write into an empty array makes it re-trace at
non-empty shapes, and an uneven ``np.split`` is refused even where its parts are never read.
"""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


def _strided(a):
    """``a`` laid out as every other column of a wider array."""
    wide = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)[..., ::2]
    wide[...] = a
    return wide


def _reversed_rows(a):
    """``a`` with a negative first stride."""
    out = np.zeros(a.shape, a.dtype)[::-1]
    out[...] = a
    return out


def _like(a):
    """A copy of ``a`` with its strides."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return a.copy(order="K")
    return _reversed_rows(a) if a.strides[0] < 0 else _strided(a)


def _agrees(f, example, calls, backend):
    """Each call of the trace answers as NumPy does (results and the argument afterwards), or raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = nt.trace(f, (_like(example),), check_trace=False, backend=backend)
        for call in calls:
            ours, eager = _like(call), _like(call)
            try:
                got = traced(ours)
            except (ValueError, nt.GuardError, NotImplementedError) as exc:   # a refusal, naming why
                assert any(w in str(exc) for w in ("traced with", "guard", "does not track")), exc
                continue
            expected = f(eager)
            for g, e in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
                np.testing.assert_array_equal(g, e)
            np.testing.assert_array_equal(ours, eager)


def _x(*shape):
    return np.arange(np.prod(shape), dtype=np.float64).reshape(shape) % 7 - 2


def _flip_write(x):
    v = np.flip(x)
    v += 1
    return x * 1


def _atleast_3d_write(x):
    v = np.atleast_3d(x)
    v += 1
    return x * 1


def _reshape_write(x):
    v = x.reshape(-1)
    v += 1
    return x * 1


def _squeeze_write(x):
    v = np.squeeze(x)
    v += 1
    return x * 1


def _contiguous_write(x):
    v = np.ascontiguousarray(x)
    v += 1
    return x * 1


def _transposed_ravel_write(x):
    v = x.T.ravel()
    v += 1
    return x * 1


def _diagonal_then_write(x):
    v = np.diagonal(x)
    x += 1
    return v * 1


@pytest.mark.parametrize("f", [_flip_write, _atleast_3d_write, _reshape_write, _squeeze_write,
                               _contiguous_write, _transposed_ravel_write, _diagonal_then_write])
def test_a_trace_taken_at_an_empty_argument_follows_views_at_other_shapes(backend, f):
    """At an empty array NumPy's views share no memory, so the write looked like one into a copy; the
    trace then dropped the write (or kept the diagonal's old value) at (3, 4)."""
    x = _x(3, 4)
    _agrees(f, np.zeros((0, 4)), [x, np.asfortranarray(x), np.zeros((0, 4))], backend)


def test_an_empty_call_does_not_leave_a_trace_that_drops_writes_at_later_calls(backend):
    """The same through the call history: a trace taken again for an empty argument served later calls."""
    def f(x):
        v = x.ravel("A")
        v[1:] = 9
        return np.copy(x)

    x = _x(6, 4)
    _agrees(f, np.asfortranarray(x), [np.zeros((0, 4)), _x(4, 6), np.asfortranarray(x)], backend)


def _ravel_then_sort(x):
    v = x.ravel()
    x.sort()
    return np.copy(v)


def _contiguous_then_write_base(x):
    v = np.expand_dims(np.ascontiguousarray(x), 0)
    np.add(x, 1, out=x)
    return v + 0


def _fortran_then_write_base(x):
    v = np.asfortranarray(x)
    x[1:] = 9
    return x, v


def _flip_reshape_then_write_flip(x):
    v = np.flip(x)
    w = v.reshape(v.shape[::-1], order="F")
    v *= 2
    return v, w


def _ravel_f_then_write_base(x):
    v = np.ravel(x, order="F")
    x += 1
    return v * 1


def _transposed_reshape_then_write_base(x):
    v = x.T.reshape(-1)
    x += 1
    return v * 1


@pytest.mark.parametrize(("f", "example", "call"), [
    (_ravel_then_sort, _reversed_rows(_x(3, 4)), _x(4, 5)),
    (_contiguous_then_write_base, np.asfortranarray(_x(6, 4)), _x(4, 6)),
    (_fortran_then_write_base, _x(6, 4), np.asfortranarray(_x(2, 4))),
    (_flip_reshape_then_write_flip, np.asfortranarray(_x(6, 4)), _reversed_rows(_x(6, 4))),
    (_ravel_f_then_write_base, _x(1, 4), _x(3, 4)),
    (_transposed_reshape_then_write_base, _x(1, 4), _x(3, 3)),
])
def test_a_write_into_the_base_of_a_reshape_reaches_it_only_where_numpy_made_a_view(backend, f, example,
                                                                                     call):
    """NumPy's reshape (ravel, ascontiguousarray, asfortranarray) of the traced argument was a copy (or
    a view) and the write went into its base, not through it: the trace answered for the traced layout
    at another one."""
    _agrees(f, example, [call, example], backend)


def test_an_f_order_view_of_a_c_contiguous_argument_depends_on_its_unit_dims(backend):
    """``np.asfortranarray`` of a C-contiguous (1, 4) array is the array itself, of a (3, 4) one a copy:
    the write reached the caller's (3, 4) array."""
    def f(x):
        v = np.asfortranarray(x)
        v += 1
        return x * 1

    _agrees(f, _x(1, 4), [_x(3, 4), _x(3, 3), _x(1, 4)], backend)


def test_an_uneven_split_raises_where_its_part_is_read_after_a_write(backend):
    """The part is read again from the written base (a slice), so the split itself was dead code and its
    refusal of uneven sections with it: the trace answered where NumPy raises."""
    def f(x):
        v = np.vsplit(x, 2)[0]
        np.add(x, 1, out=x)
        return v

    traced = nt.trace(f, (_x(6, 4),), check_trace=False, backend=backend)
    with pytest.raises(ValueError, match="equal division"), warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced(_x(1, 4))
    np.testing.assert_array_equal(traced(_x(4, 4)), f(_x(4, 4)))


def test_an_unused_uneven_split_raises(backend):
    def f(x):
        np.split(x, 2)
        return x + 0

    traced = nt.trace(f, (_x(6, 4),), check_trace=False, backend=backend)
    with pytest.raises(ValueError, match="equal division"), warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced(_x(3, 4))


def _astype_no_copy(x):
    v = x.astype(x.dtype, copy=False)
    v += 1
    return v


def _real_of_real(x):
    v = np.real(x)
    x += 1
    return v


def _laid_out_as_it_is(x):
    v = np.asarray(x, order="C")
    v += 1
    return v


def _chain_of_itself(x):
    v = np.atleast_2d(x).astype(x.dtype, copy=False)
    v[0] = 1
    return v, x


@pytest.mark.parametrize("f", [_astype_no_copy, _real_of_real, _laid_out_as_it_is, _chain_of_itself])
def test_a_written_argument_returned_through_a_view_numpy_returns_as_itself_is_the_callers_array(backend, f):
    """NumPy's result is the written argument itself (``x.real`` of real data is ``x``): the trace gave
    a copy with its values, so a later write into the result missed the caller's array."""
    traced = nt.trace(f, (_x(3, 4),), check_trace=False, backend=backend)
    ours, eager = _x(3, 4), _x(3, 4)
    got, expected = traced(ours), f(eager)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [g is ours for g in got] == [e is eager for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_draws_from_seeded_generators_made_inside_the_function_follow_numpys_stream(backend):
    """Generators the function makes itself, reached through a tuple, a list, a dict or a helper's
    return value, draw what NumPy draws at every call, for every dtype and size (found correct)."""
    def make(seed):
        return np.random.default_rng(seed)

    def f(x):
        pair = (np.random.default_rng(5), [make(6)])
        state = {"g": np.random.default_rng(7)}
        a = pair[0].random(x.shape, dtype=np.float32)
        b = pair[1][0].integers(-5, 5, x.shape[0], dtype=np.int8)
        c = state["g"].standard_normal((2, x.shape[-1]))
        return x + a, b, c, state["g"].normal(1.5, 2.0, x.shape) + pair[0].uniform(-1, 3, 3).sum()

    traced = nt.trace(f, (np.ones((4, 3)),), check_trace=False, backend=backend)
    for shape in [(4, 3), (1, 5), (0, 3), (4, 3)]:
        for g, e in zip(traced(np.ones(shape)), f(np.ones(shape))):
            np.testing.assert_array_equal(g, e)
            assert g.dtype == e.dtype


def test_a_bit_generator_made_inside_the_function_is_refused(backend):
    """Its stream is not in the graph: drawn as a closed-over generator, each call drew other numbers
    where NumPy restarts from the seed."""
    def f(x):
        return x + np.random.default_rng(np.random.PCG64(3)).random(x.shape)

    with pytest.raises(NotImplementedError, match=r"np.random.PCG64\(...\) cannot be made inside a traced"):
        nt.trace(f, (np.zeros(3),), check_trace=False, backend=backend)


def test_draws_of_a_generator_constructed_directly_are_recorded(backend):
    """np.random.Generator(bit_generator) inside the function, on a bit generator made outside: drawn
    as a closed-over generator is (fresh numbers each call, at the call's shape), never frozen into the
    trace as the numbers drawn while tracing."""
    bit_generator = np.random.PCG64(3)

    def f(x):
        g = np.random.Generator(bit_generator)
        assert isinstance(g, np.random.Generator)
        return x + g.random(x.shape)

    traced = nt.trace(f, (np.zeros(3),), check_trace=False, backend=backend)
    first, second = traced(np.zeros(3)), traced(np.zeros(3))
    assert not np.array_equal(first, second)
    assert traced(np.zeros(1)).shape == (1,)
    assert "np.random.Generator.random" in str(traced.graph)
    assert isinstance(np.random.default_rng(1), np.random.Generator)


def test_an_unused_index_out_of_range_raises(backend):
    def f(x):
        x[0]
        return x + 0

    traced = nt.trace(f, (_x(3, 4),), check_trace=False, backend=backend)
    with pytest.raises(IndexError):
        traced(np.zeros((0, 4)))
