"""Ufuncs of other libraries (``scipy.special``) are recorded as ``np.ufunc`` nodes by name."""

import io
import warnings

import numpy as np
import numtrace as nt
import pytest

special = pytest.importorskip("scipy.special")


@pytest.mark.triton
@pytest.mark.parametrize("name", ["expit", "erf", "gammaln", "log_ndtr", "logit"])
def test_scipy_special_ufuncs_are_recorded(name, backend, rng):
    ufunc = getattr(special, name)

    def f(x):
        return ufunc(x * 0.5 + 0.25) * 2.0

    x = rng.random((4, 3)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = nt.trace(f, (x,), backend=backend)
    node = next(n for n in traced.graph.nodes if n.op == "np.ufunc")
    assert node.attrs["ufunc"] == f"scipy.special.{name}"
    for shape in ((4, 3), (9, 3), (1, 3)):
        y = rng.random(shape).astype(np.float32)
        expected = f(y)
        got = traced(y)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    buffer = io.BytesIO()
    traced.save(buffer)
    np.testing.assert_allclose(nt.load(io.BytesIO(buffer.getvalue()))(x), f(x), rtol=1e-6)


def test_a_graph_naming_a_ufunc_outside_the_allowed_modules_is_refused():
    from numtrace_ir import TensorType, parse, specialize

    graph = parse('graph(%x : f32[3]):\n'
                  '  %1 : f32[3] = np.ufunc[ufunc="os.system"](%x)\n'
                  '  return (%1)\n')
    with pytest.raises(ValueError, match="module 'os' is not allowed"):
        specialize(graph, [TensorType(np.float32, (3,))])


def test_a_ufunc_called_with_options_is_warned_about_by_its_library_name_once(rng):
    def f(x):
        return x - special.expit(x, dtype=np.float64)

    with pytest.warns(nt.TracerWarning) as record:
        nt.trace(f, (rng.random(5),), backend="reference")
    ours = [str(w.message) for w in record if issubclass(w.category, nt.TracerWarning)]
    assert len(ours) == 1, ours  # not again for the checker's re-trace
    assert ours[0].startswith("scipy.special.expit is not in numtrace's op registry: it runs as a host call")
