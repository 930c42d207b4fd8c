"""Nested input/output structures: flatten, extract along a spec, rebuild, JSON round trip."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numtrace.containers import flatten, is_array, spec_from_json

_leaves = st.builds(lambda n: np.arange(n, dtype=np.float32), st.integers(0, 3))
_scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, width=32), st.booleans(), st.none())
_trees = st.recursive(
    st.one_of(_leaves, _scalars),
    lambda children: st.one_of(st.lists(children, max_size=3), st.tuples(children, children),
                               st.dictionaries(st.sampled_from("abc"), children, max_size=3)),
    max_leaves=8,
)


def _same(a, b):
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


@settings(max_examples=60, deadline=None)
@given(_trees)
def test_flatten_extract_build_and_json_round_trip(tree):
    leaves: list = []
    spec = flatten(tree, is_array, "x", leaves)
    assert _same(spec.build(leaves), tree)
    extracted: list = []
    spec.extract(tree, extracted, "x")
    assert len(extracted) == len(leaves) == spec.count()
    assert all(a is b for a, b in zip(extracted, leaves))
    again = spec_from_json(json.loads(json.dumps(spec.to_json())))
    assert _same(again.build(leaves), tree)


def test_bad_structures_are_clear_errors():
    with pytest.raises(TypeError, match=r"x\[1\]: expected an array"):
        flatten((np.ones(1), object()), is_array, "x", [])
    with pytest.raises(TypeError, match="dict keys must be strings"):
        flatten({1: np.ones(1)}, is_array, "x", [])
    with pytest.raises(ValueError, match="malformed container structure"):
        spec_from_json({"kind": "tuple"})
    with pytest.raises(ValueError, match="unknown kind"):
        spec_from_json({"kind": "set"})


# -- a list of Python numbers is data frozen into the trace; a list of arrays is a structure of inputs --

def _weighted(x, weights):
    return x * np.asarray(weights).sum()


def test_a_list_of_numbers_warns_at_trace_time_at_the_users_line():
    import numtrace as nt

    with pytest.warns(nt.TracerWarning, match="list of Python numbers") as record:
        traced = nt.trace(_weighted, (np.ones(3), [[1.0, 2.0], [3.0, 4.0]]), backend="reference")
    (w,) = [w for w in record if issubclass(w.category, nt.TracerWarning)]
    assert w.filename == __file__
    assert "'weights'" in str(w.message) and "NumPy array" in str(w.message)
    np.testing.assert_array_equal(traced(np.ones(3), [[1.0, 2.0], [3.0, 4.0]]), np.full(3, 10.0))


@pytest.mark.parametrize("other", [
    [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]],   # longer
    [[1.0, 2.0], [3.0, 5.0]],                                        # same length, another value
    np.array([[1.0, 2.0], [3.0, 4.0]]),                              # the data as an array
])
def test_calling_with_another_list_says_it_was_frozen_and_what_to_pass(other):
    import numtrace as nt

    with pytest.warns(nt.TracerWarning, match="list of Python numbers"):
        traced = nt.trace(_weighted, (np.ones(3), [[1.0, 2.0], [3.0, 4.0]]), backend="reference")
    with pytest.raises(ValueError, match=r"argument 'weights': the list \[\[1\.0, 2\.0\], \[3\.0, 4\.0\]\] "
                                         r"is a constant of the trace, frozen at trace time.*NumPy array"):
        traced(np.ones(3), other)


def test_lists_of_arrays_and_tuples_of_numbers_do_not_warn():
    import warnings

    import numtrace as nt

    def f(pair, scale):
        return pair[0] * scale[0] + pair[1]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = nt.trace(f, ([np.ones(3), np.zeros(3)], (2.0,)), backend="reference")
    np.testing.assert_array_equal(traced([np.ones(5), np.ones(5)], (2.0,)), np.full(5, 3.0))
