"""``traced.explain()``: what each backend's executable does; readable graph text and ``.code``."""

import os

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir import format_graph

needs_cpu = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="numtrace-cpu is not installed")


def f(x, w, b):
    h = np.maximum(x @ w + b, 0.0)
    return np.sort(h, axis=1), np.tanh(h).sum(axis=1)


@pytest.fixture
def args():
    """16 rows of x: more than the GEMV kernels take (a BLAS product)."""
    rng = np.random.default_rng(0)
    return rng.random((16, 32), np.float32), rng.random((32, 24), np.float32), rng.random(24, np.float32)


@needs_cpu
def test_cpu_explain_lists_steps(args):
    traced = nt.trace(f, args)
    text = traced.explain()
    assert text.startswith("# f on backend 'cpu'\ncpu executable for (%x : f32[16, 32]")
    assert "BLAS matmul f32[16, 32] @ f32[32, 24] -> f32[16, 24]" in text
    assert "fused pass of 2 nodes" in text and "np.maximum" in text
    assert "fallback to NumPy (no kernel for this op)" in text and "np.sort" in text
    assert "buffers:" in text and "bytes" in text


@needs_cpu
def test_cpu_explain_gives_each_fused_output_its_type_and_names_reductions():
    """A pass with outputs of two shapes lists each with its own type; a pass that only reduces says so
    (it runs no elementwise instruction, which "0 instructions" would hide)."""
    def two_shapes(x):
        return x.sum(axis=1), np.maximum(x, 0.0)

    x = np.ones((64, 256), np.float32)
    text = nt.trace(two_shapes, (x,)).explain()
    assert "fused pass of 2 nodes (1 elementwise instruction, 1 reduction) -> %3 : f32[64, 256], " \
           "%1 : f32[64]" in text
    text = nt.trace(lambda x: x.sum(axis=1), (x,)).explain()
    assert "fused pass of 1 node (1 reduction) -> %1 : f32[64]" in text and "0 instruction" not in text


def test_explain_for_given_inputs_and_each_signature(args, backend):
    traced = nt.trace(f, args, backend=backend)
    x8 = np.ones((8, 32), np.float32)
    assert "f32[8, 32]" in traced.explain(x8, *args[1:])
    traced(*args)
    traced(x8, *args[1:])
    both = traced.explain()
    assert both.count(f"{backend} executable for") == 2


def test_reference_explain_lists_nodes(args):
    traced = nt.trace(f, args, backend="reference")
    text = traced.explain()
    assert "reference executable for" in text
    assert [line.split(":")[0].strip() for line in text.splitlines()[3:]] == [
        str(k) for k in range(1, len(traced.graph) + 1)]


@needs_cpu
def test_fallback_reason_for_unsupported_dtype():
    traced = nt.trace(lambda x: np.exp(x) + 1, (np.ones(5, np.complex64),))
    text = traced.explain()
    assert "fallback to NumPy (" in text


def test_explain_without_the_optional_method(args, monkeypatch):
    traced = nt.trace(f, args, backend="reference")

    class Bare:
        def __init__(self, exe):
            self.exe = exe

        def __call__(self, *a, **k):
            return self.exe(*a, **k)

        def stats(self):
            return {"backend": "bare"}

    backend = traced._backend
    original = backend.compile
    monkeypatch.setattr(backend, "compile", lambda g, t, spec=None: Bare(original(g, t, spec)))
    traced = traced.to("reference")   # a fresh executable cache
    assert "does not describe its executables; its stats: {'backend': 'bare'}" in traced.explain()


def test_module_explain():
    class M(nt.Module):
        def __init__(self):
            super().__init__()
            self.lin = nt.nn.Linear(6, 3)

        def forward(self, x):
            return self.lin(x)

    tm = nt.trace_module(M(), {"forward": (np.ones((2, 6), np.float32),)}, backend="reference")
    assert "# forward on backend 'reference'" in tm.explain()
    assert "f32[5, 6]" in tm.explain(np.ones((5, 6), np.float32))


def test_large_constants_abbreviated_in_graph_not_in_code_or_saves(tmp_path):
    w = np.random.default_rng(1).random((64, 32), np.float32)
    traced = nt.trace(lambda x: x @ w, (np.ones((2, 64), np.float32),), backend="reference")
    text = str(traced.graph)
    assert "array(f32[64, 32]; ...)" in text and len(text) < 600
    assert any(np.array_equal(c, w) for c in traced.constants.values())
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt")
    assert format_graph(loaded.graph) == format_graph(traced.graph)


def test_locations_relative_to_cwd_in_text_and_code(args, monkeypatch):
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.chdir(here)
    traced = nt.trace(f, args, backend="reference")
    name = os.path.basename(__file__)
    assert f"  # {name}:" in str(traced.graph) and f"  # {name}:" in traced.code
    assert all(n.loc is None or os.path.isabs(n.loc.rpartition(":")[0]) for n in traced.graph)
