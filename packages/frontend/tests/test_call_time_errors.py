"""An error that a call's data makes NumPy raise is raised by the trace with NumPy's class (a subclass
that names the node and the user's line, so ``except ValueError`` / ``except np.linalg.LinAlgError``
catch it as they catch NumPy's), also where the call's result is unused."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


def inverse(a):
    return np.linalg.inv(a) + 0.0


def chosen(c, a):
    return np.choose(c, (a, a + 1.0))


def unused_choice(c, a):
    np.choose(c, (a, a + 1.0))   # NumPy checks every entry even though the result is dropped
    return a * 2.0


def gathered(a, i):
    return np.take(a, i) * 1.0


_CASES = [
    (inverse, (np.eye(3),), (np.zeros((3, 3)),), np.linalg.LinAlgError),
    (chosen, (np.array([0, 1, 0]), np.ones(3)), (np.array([0, 5, 0]), np.ones(3)), ValueError),
    (unused_choice, (np.array([0, 1, 0]), np.ones(3)), (np.array([0, 5, 0]), np.ones(3)), ValueError),
    (gathered, (np.arange(4.0), np.array([0, 3])), (np.arange(4.0), np.array([0, 9])), IndexError),
]


def _numpy_error(fn, args):
    try:
        fn(*args)
    except Exception as exc:
        return type(exc)
    return None


@pytest.mark.triton
@pytest.mark.parametrize(("fn", "example", "bad", "error"), _CASES, ids=[c[0].__name__ for c in _CASES])
def test_numpys_error_class_is_raised(backend, fn, example, bad, error):
    assert issubclass(_numpy_error(fn, bad), error)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "np.choose is not in numtrace's op registry", nt.TracerWarning)
        traced = nt.trace(fn, example, backend=backend, check_trace=False)
    with pytest.raises(error) as info:
        traced(*bad)
    assert __file__.rsplit("/", 1)[-1] in str(info.value)   # the error names the user's line
    np.testing.assert_array_equal(traced(*example), fn(*example))


def test_error_classes_are_made_once_per_numpy_class():
    from numtrace_ir.errors import execution_error

    class Node:
        op, loc = "np.x", "f.py:3"

    a = execution_error(Node, np.linalg.LinAlgError("a"))
    b = execution_error(Node, np.linalg.LinAlgError("b"))
    assert type(a) is type(b) and isinstance(a, np.linalg.LinAlgError) and isinstance(a, RuntimeError)
    axis = execution_error(Node, np.exceptions.AxisError(2, 1))
    assert isinstance(axis, np.exceptions.AxisError) and "axis 2 is out of bounds" in str(axis)
    assert type(execution_error(Node, NotImplementedError("n"))) is NotImplementedError
