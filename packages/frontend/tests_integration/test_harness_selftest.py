"""The harness itself: a wrong answer is silent whether or not it was warned; only a raise is loud."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from _harness import Case, classify


def _lies_while_tracing(x):
    # Eagerly, other batch sizes than the traced 5 take another path; the traced array skips the test,
    # so numtrace records neither a guard nor a warning, and its checker (at size 5) agrees.
    return x * 2.0 if type(x) is np.ndarray and x.shape[0] != 5 else x * 3.0


def _warns_and_lies(x):
    # The same lie as above, announced by a TracerWarning: a warning does not excuse a wrong result.
    if type(x) is not np.ndarray:
        warnings.warn("the value seen while tracing is used as a constant", nt.TracerWarning, stacklevel=2)
    return _lies_while_tracing(x)


def _raises(x):
    return x.tobytes()


def _writes_into_argument(x):
    x *= 2.0
    return x.sum(axis=0)


def _make(n, rng):
    return (rng.normal(size=(n, 3)),)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize(("func", "verdict"), [
    (_lies_while_tracing, "silent"),
    (_warns_and_lies, "silent"),
    (_raises, "loud"),
    (_writes_into_argument, "reproduced"),
    (np.tanh, "reproduced"),
])
def test_classify(func, verdict, backend):
    assert classify(Case("selftest", func.__name__, func, _make), backend).verdict == verdict
