"""The end-to-end models (MLP, CNN, transformer block) run on ``triton`` (interpreter mode) and equal
``reference``; their kernels are fused the way the backend promises."""

import numpy as np
import pytest

nt = pytest.importorskip("numtrace", reason="the end-to-end models are traced by the frontend")

from models import graph_and_types, model_cases  # noqa: E402  (imports numtrace)
from numtrace_triton import Backend  # noqa: E402

CASES = model_cases()


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def traced_case(request):
    name, model, x = request.param
    model.eval()
    return name, nt.trace(model, x, backend="triton"), x


def test_model_equals_reference(traced_case):
    name, traced, x = traced_case
    expected = traced.to("reference")(x)
    got = traced(x)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=name)


def test_model_at_another_batch_size(traced_case):
    name, traced, x = traced_case
    x2 = np.concatenate([x, x[:1] * 0.5])  # one more row: re-planned, not re-traced
    np.testing.assert_allclose(traced(x2), traced.to("reference")(x2), rtol=1e-4, atol=1e-5, err_msg=name)


def _kernel_names(traced, x):
    graph, types = graph_and_types(traced, x)
    return [k.name for k in Backend().compile(graph, types).kernels]


def test_mlp_is_one_kernel_per_layer(traced_case):
    name, traced, x = traced_case
    if name != "mlp":
        pytest.skip("MLP structure only")
    names = _kernel_names(traced, x)
    # Each Linear + bias + ReLU is one matmul kernel with its epilogue fused.
    assert names == ["matmul_0_add_maximum", "matmul_1_add_maximum", "matmul_2_add"]


def test_transformer_fuses_softmax_layernorm_and_epilogues(traced_case):
    name, traced, x = traced_case
    if name != "transformer":
        pytest.skip("transformer structure only")
    names = _kernel_names(traced, x)
    reductions = [n for n in names if n.startswith("reduction")]
    # Two LayerNorms and one softmax, each a single kernel.
    assert len(reductions) == 3, names
    assert any("max" in n for n in reductions)
    # fc1 + bias + GELU(tanh) in one matmul kernel.
    assert any(n.startswith("matmul") and "tanh" in n for n in names), names
