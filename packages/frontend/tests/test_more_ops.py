"""Programs calling np.linalg (norm, inv, solve, det), np.diff, the stacking helpers, atleast_nd, diag,
broadcast_arrays, isclose, percentile/quantile/median, .real/.imag and copy.copy/deepcopy record those
ops (warnings are errors here, so a frozen constant's TracerWarning fails the test), and the trace runs
at another input size, equal to eager NumPy."""

import copy

import numpy as np
import numtrace as nt
import pytest


def norms(x):
    return (
        np.linalg.norm(x, axis=1),
        np.linalg.norm(x, ord=1, axis=0, keepdims=True),
        np.linalg.norm(x),
        np.linalg.norm(x, "fro"),
        np.linalg.norm(x, np.inf),
        np.linalg.norm(x, 2),
        np.linalg.norm(x[:, 0], ord=3),
    )


def solvers(x):
    a = x + 4.0 * np.eye(3)
    return np.linalg.inv(a), np.linalg.det(a), np.linalg.solve(a, x[:, :, :1]), np.linalg.solve(a[0], x[0, 0])


def differences(x):
    return np.diff(x, axis=0), np.diff(x, n=2), np.diff(x > 0, axis=0)


def stacking(x):
    return (
        np.hstack([x, 2 * x]),
        np.vstack([x, x[:1]]),
        np.column_stack([x[:, 0], x]),
        np.atleast_1d(x[0, 0]),
        np.atleast_2d(x[:, 0]),
        np.atleast_3d(x),
        *np.atleast_1d(x[0, 0], x),
    )


def diagonals(x):
    return np.diag(x[:, 0]), np.diag(x), np.diag(x, k=1), np.diag(x[:, 1], -2)


def broadcasting(x):
    a, b = np.broadcast_arrays(x[:, :1], x[0])
    return a * b, np.isclose(x, x + 1e-9), np.isclose(x, 0.5, atol=0.3), np.isclose(a, b, rtol=0.5)


def order_statistics(x):
    return (
        np.percentile(x, 50, axis=0),
        np.percentile(x, [10, 90], axis=1, keepdims=True),
        np.quantile(x, 0.3, method="lower"),
        np.quantile(x, (0.25, 0.75), axis=0, method="midpoint"),
        np.median(x, axis=0),
        np.median(x),
    )


def parts(z):
    w = z.real * 2 + z.imag
    return w, np.real(z), np.imag(z.real)


def _floats(rng, shape):
    return rng.standard_normal(shape)


def _complex(rng, shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


CASES = [
    (norms, (4, 3), (7, 3), _floats, ["np.linalg.norm"]),
    (solvers, (4, 3, 3), (7, 3, 3), _floats, ["np.linalg.inv", "np.linalg.det", "np.linalg.solve"]),
    (differences, (4, 3), (7, 3), _floats, ["np.diff"]),
    (stacking, (4, 3), (7, 3), _floats,
     ["np.hstack", "np.vstack", "np.column_stack", "np.atleast_1d", "np.atleast_2d", "np.atleast_3d"]),
    (diagonals, (4, 3), (7, 3), _floats, ["np.diag"]),
    (broadcasting, (4, 3), (7, 3), _floats, ["np.broadcast_arrays", "np.isclose"]),
    (order_statistics, (4, 3), (7, 3), _floats, ["np.percentile", "np.quantile", "np.median"]),
    (parts, (4, 3), (7, 3), _complex, ["np.real", "np.imag"]),
]


@pytest.mark.parametrize(("func", "shape", "new_shape", "make", "ops"), CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_traced_program_records_the_ops_and_runs_at_another_size(func, shape, new_shape, make, ops,
                                                                  backend, rng):
    x = make(rng, shape)
    traced = nt.trace(func, (x,), backend=backend)
    text = str(traced.graph)
    for name in ops:
        assert f"{name}(" in text or f"{name}[" in text, f"{name} not recorded:\n{text}"
    frozen = [n for n in traced.graph.nodes
              if n.op == "prim.Constant" and isinstance(n.attrs["value"], np.ndarray)]
    assert not frozen, text  # solvers' np.eye(3) is an np.eye node, not its data
    for inputs in (x, make(rng, new_shape)):
        got, expected = traced(inputs), func(inputs)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert (g.dtype, g.shape) == (e.dtype, e.shape), func.__name__
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12, err_msg=func.__name__)


def test_diff_prepend_and_append_are_one_op(rng):
    def f(x, y):
        return np.diff(x, axis=0, prepend=0.0), np.diff(x, append=y)

    traced = nt.trace(f, (rng.standard_normal((4, 3)), rng.standard_normal((4, 2))), backend="reference")
    assert [n.op for n in traced.graph.nodes if n.op != "prim.Constant"] == ["np.diff", "np.diff"]
    x, y = rng.standard_normal((9, 3)), rng.standard_normal((9, 2))
    for g, e in zip(traced(x, y), f(x, y)):
        np.testing.assert_array_equal(g, e)
    assert traced.retraces == 0


def test_unknown_quantile_method_is_a_clear_error(rng):
    with pytest.raises(ValueError, match="'bogus' is not a valid method"):  # NumPy's own, from the eager run
        nt.trace(lambda x: np.percentile(x, 50, method="bogus"), (rng.standard_normal((4, 3)),))


def test_percentile_out_of_range_is_a_clear_error(rng):
    with pytest.raises(ValueError):
        nt.trace(lambda x: np.percentile(x, 150), (rng.standard_normal((4, 3)),))


def copies(x):
    y = copy.copy(x)
    y[0] = 0.0  # a write to the copy leaves x alone ...
    z = x * 1.0
    w = copy.deepcopy([z, z])
    assert w[0] is w[1]  # one copy per array within one deepcopy, as for ndarrays
    z[1:] *= 2.0  # ... and a write to the original leaves the copy alone
    return x + y, z - w[0], y


def test_copy_and_deepcopy_record_a_copy(backend, rng):
    x = rng.standard_normal((4, 3))
    traced = nt.trace(copies, (x,), backend=backend)
    text = str(traced.graph)
    assert text.count("np.copy[") == 2 and "copy.py" not in text, text  # located at the user's lines
    for inputs in (x, rng.standard_normal((7, 3))):
        for g, e in zip(traced(inputs), copies(inputs)):
            np.testing.assert_array_equal(g, e)


def test_interp_at_a_python_number_is_numpys_scalar_answer(rng):
    """skfuzzy's interp_membership: np.interp(0.3, xp, fp) with a Python number for x (the op's rule
    takes arrays only; the call runs as a host call instead of refusing)."""
    def f(xp, fp):
        return np.interp(0.3, xp, fp) * fp

    xp = np.linspace(0.0, 1.0, 5)
    with pytest.warns(nt.TracerWarning, match="host call"):
        traced = nt.trace(f, (xp, rng.standard_normal(5)), backend="reference")
    fp = rng.standard_normal(5)
    np.testing.assert_array_equal(traced(xp, fp), f(xp, fp))
