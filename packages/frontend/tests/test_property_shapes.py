"""Property test: random programs of shape idioms, traced at one shape and called at others.

Programs are drawn from the idioms ordinary NumPy code uses to read its input's size (size arithmetic,
computed slices, loops and branches on shapes, ``np.arange(n)``, ``len``), plus in-place writes into an
argument. Each is traced at one shape and called at other shapes: the result and the written argument
must equal eager NumPy, or the call must raise a clear error where NumPy raises too. A silent mismatch
fails the test. ``NUMTRACE_PROPERTY_EXAMPLES`` raises the example count (the nox ``stress`` session).
"""

import math
import os
import warnings

import numpy as np
import numtrace as nt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("NUMTRACE_PROPERTY_EXAMPLES", "0"))


def _rows(x):
    return x.shape[0]


# Each step: (name, x, y) -> new x; ``y`` is an argument the program may write into.
STEPS = {
    "center_by_size": lambda x, y: x - x.sum() / x.size,
    "scale_sqrt_rows": lambda x, y: x / math.sqrt(x.shape[0]),
    "scale_pow_half": lambda x, y: x * (x.shape[0] ** 0.5),
    "scale_reciprocal": lambda x, y: x * (1.0 / x.shape[1]),
    "scale_float": lambda x, y: x / float(x.size),
    "drop_last_row": lambda x, y: x[: max(x.shape[0] - 1, 1)],
    "first_80_percent": lambda x, y: x[: max(int(0.8 * x.shape[0]), 1)],
    "second_half": lambda x, y: x[len(x) // 2:],
    "branch_on_rows": lambda x, y: x * 2.0 if x.shape[0] > 3 else x + 1.0,
    "branch_on_one": lambda x, y: x[0:1] * 1.0 if x.shape[0] == 1 else x - x[0],
    "loop_rows": lambda x, y: sum((x[i] for i in range(min(x.shape[0], 3))), x * 0.0),
    "arange_cols": lambda x, y: x + np.arange(x.shape[1]),
    "arange_rows": lambda x, y: x + np.arange(x.shape[0])[:, None] * 0.5,
    "ones_like_shape": lambda x, y: x + np.ones(x.shape),
    "reshape_rows": lambda x, y: x.reshape(x.shape[0], -1) * 1.5,
    "mean_by_len": lambda x, y: x - x.sum(0) / len(x),
    "prod_shape": lambda x, y: x / np.prod(x.shape),
    "write_arg_add": lambda x, y: _then(x, y.__iadd__(1.0)),
    "write_arg_row": lambda x, y: _then(x, y.__setitem__(0, x.sum())),
    "write_arg_mask": lambda x, y: _then(x, y.__setitem__(y > 0.5, 0.25)),
    "write_arg_view": lambda x, y: _then(x, y[:, 0].__imul__(3.0)),
    "write_arg_tail": lambda x, y: _then(x, y[1:].__isub__(0.5)),
    "write_arg_transposed": lambda x, y: _then(x, y.T.__setitem__(0, x.mean())),
    "write_arg_flat": lambda x, y: _then(x, y.reshape(-1)[::2].__imul__(-1.0)),
    "read_arg_transposed": lambda x, y: x + y.T.sum(0)[:, None].mean(),
    "write_arg_interior": lambda x, y: _then(x, y.__setitem__(slice(1, y.shape[0] - 1), 0.125)),
    "last_row": lambda x, y: x - x[x.shape[0] - 1],
    "seeded_noise": lambda x, y: x + np.random.default_rng(7).random(x.shape),
    "linspace_rows": lambda x, y: x * np.linspace(0.0, 1.0, x.shape[0])[:, None],
}


def _then(x, _):
    return x


def _program(steps):
    def program(x, y):
        for name in steps:
            x = STEPS[name](x, y)
        return x

    return program


def _eager(fn, x, y):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(x, y), None
        except (ValueError, IndexError, TypeError, ZeroDivisionError) as exc:
            return None, exc


def _check(steps, traced_rows, cols, call_rows, backend):
    fn = _program(steps)
    rng = np.random.default_rng(len(steps) * 100 + traced_rows)
    x0, y0 = rng.random((traced_rows, cols)), rng.random((traced_rows, cols))
    _, error = _eager(fn, x0.copy(), y0.copy())
    if error is not None:
        return  # not a program at the traced shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        traced = nt.trace(fn, (x0.copy(), y0.copy()), backend=backend, check_trace=False)
    for rows in call_rows:
        x, y = rng.random((rows, cols)), rng.random((rows, cols))
        expected_y = y.copy()
        expected, error = _eager(fn, x.copy(), expected_y)
        ours = y.copy()
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            if error is not None:
                with pytest.raises((ValueError, IndexError, TypeError, RuntimeError)):  # as NumPy does
                    traced(x, ours)
                continue
            got = traced(x, ours)
        assert got.shape == expected.shape, (steps, rows, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=f"{steps} at {rows} rows")
        np.testing.assert_allclose(ours, expected_y, rtol=1e-9, atol=1e-12,
                                   err_msg=f"{steps} at {rows} rows: the written argument")


PROGRAMS = st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5)
SIZES = st.integers(min_value=1, max_value=7)


def _settings(default_examples):
    return settings(max_examples=EXAMPLES or default_examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@_settings(2000)
@given(steps=PROGRAMS, traced_rows=SIZES, cols=st.integers(1, 4), call_rows=st.lists(SIZES, min_size=1,
                                                                                        max_size=3))
def test_random_shape_programs_on_the_reference_backend(steps, traced_rows, cols, call_rows):
    _check(steps, traced_rows, cols, call_rows, "reference")


@_settings(200)
@given(steps=PROGRAMS, traced_rows=SIZES, cols=st.integers(1, 4), call_rows=st.lists(SIZES, min_size=1,
                                                                                        max_size=2))
def test_random_shape_programs_on_the_cpu_backend(steps, traced_rows, cols, call_rows):
    if "cpu" not in nt.available_backends():
        pytest.skip("the cpu backend is not installed")
    _check(steps, traced_rows, cols, call_rows, "cpu")
