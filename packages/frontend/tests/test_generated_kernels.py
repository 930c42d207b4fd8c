"""Traced programs on the cpu backend's generated C kernels (numtrace_cpu.compiler, compiled
synchronously here): stencils read their input's slices in place inside one generated loop, and a
saved trace, loaded again, gets its kernels generated anew (they are never saved)."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

compiler = pytest.importorskip("numtrace_cpu.compiler")


@pytest.fixture(autouse=True)
def _sync(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path / "cache"))
    old = compiler.set_mode("sync")
    yield
    compiler.set_mode(old)


def heat(x):
    return x[1:-1] + 0.1 * (x[:-2] - 2 * x[1:-1] + x[2:])


def jacobi(u):
    return 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


def _stats(traced):
    (s,) = traced.stats()["signatures"].values()
    return s


@pytest.mark.parametrize(("f", "shapes"), [(heat, [(100_001,), (77,)]), (jacobi, [(301, 257), (5, 40)])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stencil_is_one_generated_pass_over_input_slices(f, shapes, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shapes[0]).astype(dtype)
    traced = nt.trace(f, (x,), check_trace=False)
    np.testing.assert_array_equal(traced(x), f(x))
    s = _stats(traced)
    # The slices are views the pass reads at their offsets: no temporaries, one loop.
    assert s["fused_groups"] == 1 and s["buffer_bytes"] == 0
    assert s["generated_kernels"] == 1 and s["generated_runs"] == 1 and s["interpreted_runs"] == 0
    y = rng.standard_normal(shapes[1]).astype(dtype)[..., ::-1]   # another shape, reversed strides
    np.testing.assert_array_equal(traced(y), f(y))


def test_saved_trace_regenerates_its_kernels(tmp_path):
    x = np.linspace(-2.0, 2.0, 5000)
    traced = nt.trace(lambda x: np.tanh(x) * 3.0 + np.exp(-x * x), (x,), check_trace=False)
    want = traced(x)
    traced.save(tmp_path / "f.nt")
    assert not any(name.endswith((".so", ".c")) for name in _members(tmp_path / "f.nt"))
    loaded = nt.load(tmp_path / "f.nt", backend="cpu")
    np.testing.assert_array_equal(loaded(x), want)
    assert _stats(loaded)["generated_runs"] == 1


def _members(path):
    import zipfile

    with zipfile.ZipFile(path) as z:
        return z.namelist()
