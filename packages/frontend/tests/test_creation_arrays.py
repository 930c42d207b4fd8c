"""Arrays created with plain shapes while tracing, then filled with traced data.

``r = np.zeros((len(x), 3)); r[:, 0] = np.sin(x)``: the created array is traced (``prim.full``, a
small node), so the writes are recorded and one trace serves every value of the inputs, where a
plain array would take the traced data in through ``__array__`` and guard its values.
"""

import warnings

import numpy as np
import numtrace as nt
import pytest
from numpy import zeros as bound_zeros  # a name bound before tracing: intercepted as np.zeros is


def _check_every_value(f, backend, rng, shape=(5,), other_shapes=()):
    """Trace at ``shape``; new values at that shape never re-trace; every call equals NumPy."""
    traced = nt.trace(f, (rng.random(shape),), backend=backend)
    for _ in range(3):
        x = rng.random(shape)
        np.testing.assert_allclose(traced(x), f(x), rtol=1e-12)
    assert traced.stats()["retraces"] == 0
    for other in other_shapes:
        x = rng.random(other)
        np.testing.assert_allclose(traced(x), f(x), rtol=1e-12)
    return traced


def preallocated_len(x):
    r = np.zeros((len(x), 3))
    r[:, 0] = np.sin(x)
    r[:, 1] = x * 2
    return r


def preallocated_shape(x):
    r = np.zeros((x.shape[0], 3))
    r[:, 0] = np.sin(x)
    r[:, 1] = x * 2
    return r


def test_preallocated_with_len_serves_every_value(backend, rng):
    traced = _check_every_value(preallocated_len, backend, rng)
    assert "prim.full" in [n.op for n in traced.graph.nodes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        for n in (7, 1):  # len(x) is guarded: another size traces again, and is right
            x = rng.random(n)
            np.testing.assert_allclose(traced(x), preallocated_len(x), rtol=1e-12)


def test_preallocated_with_shape_serves_every_size(backend, rng):
    traced = _check_every_value(preallocated_shape, backend, rng, other_shapes=[(7,), (1,), (100,)])
    assert traced.stats()["retraces"] == 0


def test_created_node_is_small(rng):
    traced = nt.trace(lambda x: np.add(np.zeros((1000, 1000)), x[0]), (rng.random(3),),
                      backend="reference")
    assert [n.op for n in traced.graph.nodes].count("prim.Constant") <= 1  # the index only: no data


CREATED = {
    "zeros_shape_array": lambda x: _filled(np.zeros(np.array([4, 3]), dtype=np.float32), x),
    "zeros_dtype": lambda x: _filled(np.zeros((4, 3), dtype=np.float32), x),
    "ones": lambda x: _filled(np.ones((4, 3)), x),
    "empty": lambda x: _filled(_set(np.empty((4, 3))), x),
    "full": lambda x: _filled(np.full((4, 3), 7.5), x),
    "full_list_fill": lambda x: _filled(np.full((4, 3), [1.0, 2.0, 3.0]), x),
    "full_traced_fill": lambda x: np.full((2, 4), x[0]) * 3.0,
    "full_traced_fill_cast": lambda x: np.full((2, 4), x * 10, dtype=np.int64),
    "bound_zeros": lambda x: _filled(bound_zeros((4, 3)), x),
    "eye": lambda x: _filled(np.eye(4, 3), x),
    "identity": lambda x: _filled(np.identity(4)[:, :3].copy(), x),
    "zeros_like": lambda x: _filled(np.zeros_like(PLAIN), x),
    "ones_like_dtype": lambda x: _filled(np.ones_like(PLAIN, dtype=np.float32), x),
    "empty_like": lambda x: _filled(_set(np.empty_like(PLAIN)), x),
    "full_like": lambda x: _filled(np.full_like(PLAIN, 2.5), x),
}
PLAIN = np.arange(12.0).reshape(4, 3)


def _set(r):
    r[...] = 1.0  # np.empty's contents are unspecified
    return r


def _filled(r, x):
    r[1:3, 0] = x[:2]
    r[0] += x[2]
    return r


@pytest.mark.parametrize("name", sorted(CREATED))
def test_created_arrays_take_traced_writes(name, backend, rng):
    _check_every_value(CREATED[name], backend, rng, shape=(4,))


def test_data_of_created_arrays_leaves_the_graph_without_a_guard(backend, rng):
    """A created array's data depends on no input: reading it as Python values (warnings are errors
    here) needs no guard."""
    def f(x):
        r = np.zeros(3)
        r[0] = 1.0
        scale = float(r.sum()) if r[0] > 0 else 0.0
        return x.reshape(tuple(np.full(2, 2, dtype=int).tolist())) * scale

    _check_every_value(f, backend, rng, shape=(4,))


def test_object_and_string_dtypes_stay_plain(rng):
    def f(x):
        labels, names = np.zeros(3, dtype=object), np.full(2, "a")
        assert type(labels) is np.ndarray and type(names) is np.ndarray
        return x * 2.0

    _check_every_value(f, "reference", rng)


def test_data_read_from_inputs_still_warns(rng):
    def f(x):
        r = np.zeros(3)
        r[:] = x
        return x * 2.0 if r[0] > 0.5 else x

    with pytest.warns(nt.TracerWarning, match="bool"):
        nt.trace(f, (rng.random(3),), backend="reference")


def test_created_array_given_to_code_that_needs_an_ndarray_is_guarded(rng):
    """Code that reads the real ndarray (``as_strided``: ``__array__``) gets its data, guarded as for
    any traced array: another value traces again, and every call equals NumPy."""
    def f(x):
        r = np.zeros(4)
        r[:] = x
        return np.lib.stride_tricks.as_strided(r, shape=(2,), strides=(16,)) * 1.0

    with pytest.warns(nt.TracerWarning, match="__array__"):
        traced = nt.trace(f, (rng.random(4),), backend="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        x = rng.random(4)
        np.testing.assert_array_equal(traced(x), f(x))
    assert traced.stats()["retraces"] == 1
