"""Hunt for wrong answers and wrong refusals around guards on array data and host calls: functions are
traced at one shape and value and called at others; every call returns what eager NumPy does (or
re-traces), never a refusal of a program NumPy runs."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def _trace(f, *args, backend="reference"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(f, tuple(np.copy(a) for a in args), check_trace=False, backend=backend)


def _call(traced, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return traced(*args)


def _srgb_like(x):
    """colour's ``eotf_inverse_sRGB``: ``as_float`` converts a whole array with ``np.float64(a)``, so its
    value is a constant of the trace that a later ``np.where`` combines with the input."""
    y = np.float64(1.055 * np.abs(x) ** (1 / 2.4) - 0.055)
    return np.where(x <= 0.0031308, x * 12.92, y)


def test_array_converted_whole_then_combined_with_input_retraces_at_other_size(backend, rng):
    x = rng.random((5, 3))
    traced = _trace(_srgb_like, x, backend=backend)
    for n in (7, 5, 1, 7):
        z = rng.random((n, 3))
        np.testing.assert_allclose(_call(traced, z), _srgb_like(z), rtol=1e-15, atol=0)
