"""Ahead-of-time compile check: every generated kernel of the end-to-end models compiles for an H100
(CUDA capability 90) through Triton's whole pipeline, without a GPU. Catches code only the real
compiler rejects (``tl.dot`` blocks under 16, non-power-of-two ``arange``, loop-carried type changes)."""

import numpy as np
import pytest
import triton
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import generate
from numtrace_triton.aot import compile_for_gpu, compile_specs_for_gpu, kernel_spec
from numtrace_triton.emit_body import Tuning
from numtrace_triton.kernel_cache import load_kernel


def _model_kernels():
    nt = pytest.importorskip("numtrace", reason="the end-to-end models are traced by the frontend")
    from models import graph_and_types, model_cases

    kernels = []
    for _, model, x in model_cases():
        model.eval()
        graph, types = graph_and_types(nt.trace(model, x, backend="reference"), x)
        for tuning in (Tuning.gpu(), Tuning.interpreter()):  # the GPU's source and the one tests run
            kernels += generate(graph, types, tuning).kernels
    return kernels


def _reduction_kernels():
    """Looped (multi-pass) reductions and the other reduction ops, at GPU block sizes."""
    g = Graph()
    x = g.add_input("x", TensorType("float32", (4, 20000)))
    m = g.create_node("np.max", [x], attrs={"axis": -1, "keepdims": True}).output
    e = g.create_node("np.exp", [g.create_node("np.subtract", [x, m]).output]).output
    s = g.create_node("np.sum", [e], attrs={"axis": -1, "keepdims": True}).output
    outs = [g.create_node("np.divide", [e, s]).output]
    for op in ("np.prod", "np.min", "np.var", "np.argmax", "np.cumsum"):
        outs.append(g.create_node(op, [x], attrs={"axis": 0}).output)
    for op in ("np.cumsum", "np.cumprod", "np.argmin"):  # looped along the 20000-long axis
        outs.append(g.create_node(op, [x], attrs={"axis": 1}).output)
    b = g.create_node(
        "np.greater", [x, g.create_node("prim.Constant", [], attrs={"value": 0.5}).output]
    ).output
    outs += [g.create_node(op, [b], attrs={"axis": 1}).output for op in ("np.any", "np.all")]
    g.set_outputs(outs)
    return generate(g, [TensorType("float32", (4, 20000))], Tuning.gpu()).kernels


def _integer_kernels():
    """np.bitwise_count's SWAR popcount at every integer width, and a decomposed np.divmod and np.clip."""
    g = Graph()
    dtypes = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
    xs = [g.add_input(f"x{i}", TensorType(dt, (1000,))) for i, dt in enumerate(dtypes)]
    outs = [g.create_node("np.bitwise_count", [x]).output for x in xs]
    outs += g.create_node("np.divmod", [xs[4], xs[4]]).outputs
    lo, hi = (g.create_node("prim.Constant", [], attrs={"value": v}).output for v in (-1, 3))
    outs.append(g.create_node("np.clip", [xs[1], lo, hi]).output)
    g.set_outputs(outs)
    return generate(g, [x.type for x in xs], Tuning.gpu()).kernels


def _small_integer_kernels():
    """Matmuls of integers under 32 bits and a looped cumsum into int8: tl.sum widens those, which a
    loop-carried accumulator must not (the interpreter allows it, the compiler does not)."""
    g = Graph()
    dtypes = ("int8", "uint8", "int16", "uint16", "bool")
    pairs = [(g.add_input(f"a{i}", TensorType(dt, (8, 24))), g.add_input(f"b{i}", TensorType(dt, (24, 8))))
             for i, dt in enumerate(dtypes)]
    outs = [g.create_node("np.matmul", [a, b]).output for a, b in pairs]
    x = g.add_input("x", TensorType("int8", (4, 20000)))
    for op in ("np.cumsum", "np.cumprod"):
        outs.append(g.create_node(op, [x], attrs={"axis": 1, "dtype": np.dtype("int8")}).output)
    outs.append(g.create_node("np.cumsum", [x], attrs={"axis": 1, "dtype": np.dtype("uint16")}).output)
    g.set_outputs(outs)
    types = [v.type for pair in pairs for v in pair] + [x.type]
    return [k for tuning in (Tuning.gpu(), Tuning.interpreter()) for k in generate(g, types, tuning).kernels]


def _matmul_graph():
    """An MLP's matmuls (bias and ReLU in the epilogue, a 10-column classifier) in float32, and a
    float64 matmul (integers share the configs; their kernels are slow to compile)."""
    g = Graph()
    x, w1, b1, w2 = (g.add_input(n, TensorType("float32", s))
                     for n, s in (("x", (256, 784)), ("w1", (784, 512)), ("b1", (512,)), ("w2", (512, 10))))
    h = g.create_node("np.add", [g.create_node("np.matmul", [x, w1]).output, b1]).output
    zero = g.create_node("prim.Constant", [], attrs={"value": 0.0}).output
    h = g.create_node("np.maximum", [h, zero]).output
    outs = [g.create_node("np.matmul", [h, w2]).output]
    others = [(g.add_input("a64", TensorType("float64", (96, 48))),
               g.add_input("b64", TensorType("float64", (48, 40))))]
    outs += [g.create_node("np.matmul", [a, b]).output for a, b in others]
    g.set_outputs(outs)
    return g, [v.type for v in (x, w1, b1, w2)] + [v.type for pair in others for v in pair]


def test_every_autotune_config_of_a_matmul_compiles_for_h100():
    """triton.autotune compiles each config at the first launch on a GPU and skips only those out of
    resources: any other compile error of one config would fail the call. A narrow output gets narrow
    tiles."""
    graph, types = _matmul_graph()
    specs, configs = [], []
    for k in generate(graph, types, Tuning.gpu()).kernels:
        fn = load_kernel(k.name, k.source)[0]
        assert isinstance(fn, triton.runtime.Autotuner), k.name
        specs += [{**kernel_spec(k), "constexprs": {**k.constexprs, **c.kwargs}, "num_warps": c.num_warps,
                   "num_stages": c.num_stages} for c in fn.configs]
        configs += fn.configs
        if "@ [512, 10]" in k.source:  # the classifier: tiles of at most 32 columns, some of 16
            assert {c.kwargs["BLOCK_N"] for c in fn.configs} == {16, 32}, fn.configs
    assert len(specs) > 8
    results = compile_specs_for_gpu(specs, arch=90, ptx=True)
    failures = [f"{r['name']} {c}: {r['error']}" for r, c in zip(results, configs) if not r["ok"]]
    assert not failures, "\n\n".join(failures)


_KERNELS = {"models": _model_kernels, "reductions": _reduction_kernels, "integers": _integer_kernels,
            "small_integers": _small_integer_kernels}


@pytest.mark.parametrize("which", list(_KERNELS))
def test_generated_kernels_compile_for_h100(which):
    kernels = _KERNELS[which]()
    unique = list({k.source: k for k in kernels}.values())
    results = compile_for_gpu(unique, arch=90)
    failures = [f"{r['name']}: {r['error']}" for r in results if not r["ok"]]
    assert not failures, "\n\n".join(failures)
    # triton ships ptxas, so the pipeline goes all the way to a cubin.
    assert all(r["stages"][-1] == "cubin" for r in results), results
    assert len(results) == len(unique) and np.all([r["ok"] for r in results])
