"""The Python array API: traced arrays have a namespace, so array-API libraries are recorded, not frozen."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import numtrace as nt
import pytest


def test_the_namespace_keeps_traced_arrays_traced(rng):
    def f(x):
        xp = x.__array_namespace__()
        y = xp.asarray(x, dtype=xp.float64)
        return xp.exp(y - xp.max(y, axis=0)) * (x.device == "cpu")

    traced = nt.trace(f, (rng.random((4, 3)).astype(np.float32),), backend="reference")
    constants = [n for n in traced.graph.nodes if n.op == "prim.Constant"]
    assert not any(getattr(n.attrs["value"], "ndim", 0) for n in constants)
    x = rng.random((6, 3)).astype(np.float32)
    np.testing.assert_allclose(traced(x), f(x), rtol=1e-12)


def test_size_and_result_type_answer_without_freezing(rng):
    def f(x):
        return x.astype(np.result_type(x, np.float32)) / np.size(x)

    traced = nt.trace(f, (rng.random(4),), backend="reference")
    assert traced.guards == []
    np.testing.assert_allclose(traced(np.ones(8)), np.full(8, 1 / 8))


def test_scipy_with_its_array_api_dispatch_is_recorded():
    pytest.importorskip("scipy")
    code = textwrap.dedent("""
        import warnings
        import numpy as np
        import numtrace as nt
        from scipy import special
        for fn in (lambda x: special.softmax(x, axis=1), lambda x: special.log_softmax(x, axis=1)):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                traced = nt.trace(fn, (np.random.rand(4, 3),), backend="reference")
            assert all(n.op != "prim.Constant" or np.ndim(n.attrs["value"]) == 0 for n in traced.graph.nodes)
            x = np.random.rand(9, 3)
            assert np.allclose(traced(x), fn(x))
        print("ok")
    """)
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
