"""ndarray methods on traced arrays behave as the ndarray methods (their own signatures and defaults,
through the registry's ``np.ndarray.*`` variants): each traced call equals eager NumPy at the traced
shape and at another one."""

import numpy as np
import numtrace as nt
import pytest

METHODS = {
    "clip(0.0)": lambda x: x.clip(0.0),
    "clip(max=)": lambda x: x.clip(max=0.1),
    "clip(min, max)": lambda x: x.clip(-0.5, 0.5),
    "sum(axis=0, keepdims=True)": lambda x: x.sum(axis=0, keepdims=True),
    "sum(initial=)": lambda x: x.sum(initial=2.0),
    "prod(1)": lambda x: x.prod(1),
    "mean(axis=1)": lambda x: x.mean(axis=1),
    "round(2)": lambda x: x.round(2),
    "round()": lambda x: x.round(),
    "std(ddof=1)": lambda x: x.std(ddof=1),
    "var(0, ddof=1)": lambda x: x.var(0, ddof=1),
    "max(initial=)": lambda x: x.max(initial=0.5),
    "min(axis=1, initial=)": lambda x: x.min(axis=1, initial=-0.2),
    "max(0)": lambda x: x.max(0),
    "argmax(1)": lambda x: x.argmax(1),
    "argmin()": lambda x: x.argmin(),
    "any()": lambda x: (x > 0).any(axis=0),
    "all()": lambda x: (x > -5).all(),
    "cumsum(0)": lambda x: x.cumsum(0),
    "cumprod(axis=1)": lambda x: x.cumprod(axis=1),
    "argsort(1)": lambda x: x.argsort(1),
    "take(axis=1)": lambda x: x.take([0, 2], axis=1),
    "repeat(2, 1)": lambda x: x.repeat(2, 1),
    "swapaxes(0, 1)": lambda x: x.swapaxes(0, 1),
    "squeeze()": lambda x: x[:, None].squeeze(1),
    "ravel()": lambda x: x.ravel(),
    "diagonal()": lambda x: x.diagonal(),
    "dot": lambda x: x.dot(np.ones((4, 2))),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_method_matches_numpy(backend, name, rng):
    f = METHODS[name]
    x = rng.standard_normal((3, 4))
    traced = nt.trace(f, (x,), backend=backend, check_inputs=[(rng.standard_normal((5, 4)),)])
    for shape in ((3, 4), (6, 4)):
        y = rng.standard_normal(shape)
        got, want = traced(y), f(y)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_method_variant_is_recorded_not_frozen(rng):
    traced = nt.trace(lambda x: x.clip(0.0).sum(axis=0, keepdims=True), (rng.standard_normal((3, 4)),),
                      backend="reference")
    assert [n.op for n in traced.graph.nodes if not n.op.startswith("prim.")] == ["np.clip", "np.sum"]
