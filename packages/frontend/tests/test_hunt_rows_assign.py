"""Wrong answers found by hunting the cpu backend's short-row passes and its in-place writes: a value
a pass writes straight into another array's memory (an assignment's slice, a join's part) must keep
its contents for as long as anything reads it, and the caller's copy of a graph output that is a view
of it is made after the last step."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

pytest.importorskip("numtrace_cpu")


def assigned_value_viewed_by_output(x):
    a = x * 2.0
    v = x[1:] * 3.0
    a[1:] = v                # v computed straight into a[1:]
    w = v[::2]               # a view of v, returned
    a[2:] = x[2:] + 7.0      # a written again: v's values must survive for w
    return a, w


def concatenated_part_viewed_by_output(x):
    v = x * 3.0
    j = np.concatenate([v, x])   # v computed straight into j[:n]
    w = v[::2]
    j[0:4] = 7.0                 # j assigned in place
    return j, w


def stacked_part_viewed_by_output(x):
    v = x * 3.0
    j = np.stack([v, x + 1.0])
    w = v[1:]
    j[0] = x - 5.0
    return j, w


CASES = [assigned_value_viewed_by_output, concatenated_part_viewed_by_output, stacked_part_viewed_by_output]


@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_view_output_of_a_value_written_in_place_keeps_its_values(f):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10)
    traced = nt.trace(f, (x,), backend="cpu")
    for y in (x, rng.standard_normal(13), rng.standard_normal(1000)):
        for got, want in zip(traced(y.copy()), f(y.copy())):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
