"""The harness itself: it must call a silent wrong answer silent, and warned or raised ones loud."""

from __future__ import annotations

import numpy as np
import pytest
from _harness import Case, classify


def _lies_while_tracing(x):
    # Eagerly, other batch sizes than the traced 5 take another path; the traced array skips the test,
    # so numtrace records neither a guard nor a warning, and its checker (at size 5) agrees.
    return x * 2.0 if isinstance(x, np.ndarray) and x.shape[0] != 5 else x * 3.0


def _converts_to_float(x):
    return x * float(x.sum())


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
    (_converts_to_float, "loud"),
    (_raises, "loud"),
    (_writes_into_argument, "reproduced"),
    (np.tanh, "reproduced"),
])
def test_classify(func, verdict, backend):
    assert classify(Case("selftest", func.__name__, func, _make), backend).verdict == verdict
