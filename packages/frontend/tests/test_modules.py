"""Modules: the Module API, numtrace.nn layers, trace(module) and trace_module."""

import numpy as np
import numtrace as nt
import pytest
from numtrace import nn


class Net(nt.Module):
    """The seed's module example: one Conv2d, plus a second method."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, seed=0)

    def forward(self, x):
        return self.conv(x)

    def weighted_kernel_sum(self, weight):
        return weight * self.conv.weight


def _conv_reference(x, w, b, stride=1, padding=0):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return out + b.reshape(1, o, 1, 1)


def test_seed_example_module_with_conv2d(backend, rng):
    n = Net()
    x = rng.random((1, 1, 3, 3), dtype=np.float32)
    weight = rng.random((1, 1, 3, 3), dtype=np.float32)
    module = nt.trace(n, x, backend=backend)
    assert isinstance(module, nt.TracedModule)
    np.testing.assert_allclose(module(x), n(x), rtol=1e-5)
    module = nt.trace(n.forward, x, backend=backend)
    np.testing.assert_allclose(module.forward(x), n(x), rtol=1e-5)
    module = nt.trace_module(n, {"forward": x, "weighted_kernel_sum": weight}, backend=backend)
    np.testing.assert_allclose(module.weighted_kernel_sum(weight), weight * n.conv.weight, rtol=1e-6)
    np.testing.assert_allclose(module.forward(x), n(x), rtol=1e-5)


@pytest.mark.parametrize("stride, padding", [(1, 0), (2, 1), (1, 2)])
def test_conv2d_matches_a_direct_convolution(stride, padding, rng):
    conv = nn.Conv2d(3, 4, 3, stride=stride, padding=padding, seed=1)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    want = _conv_reference(x, conv.weight, conv.bias, stride, padding)
    np.testing.assert_allclose(conv(x), want, rtol=1e-4, atol=1e-5)
    traced = nt.trace(conv, x, backend="reference")
    np.testing.assert_allclose(traced(x), want, rtol=1e-4, atol=1e-5)


def test_layers_match_numpy(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    lin = nn.Linear(6, 3, seed=2)
    np.testing.assert_allclose(lin(x), x @ lin.weight.T + lin.bias, rtol=1e-6)
    ln = nn.LayerNorm(6)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(x), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(nn.ReLU()(x), np.maximum(x, 0))
    gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(nn.GELU()(x), gelu, rtol=1e-5, atol=1e-6)
    emb = nn.Embedding(10, 4, seed=3)
    idx = np.array([[1, 2], [9, 0]])
    np.testing.assert_array_equal(emb(idx), emb.weight[idx])
    with pytest.raises(TypeError, match="integer indices"):
        emb(x)


@pytest.mark.triton
def test_mlp_traces_and_runs_at_other_batch_sizes(backend, rng):
    model = nn.Sequential(nn.Linear(8, 16, seed=0), nn.ReLU(), nn.Linear(16, 4, seed=1), nn.GELU())
    x = rng.standard_normal((5, 8)).astype(np.float32)
    traced = nt.trace(model, x, backend=backend)
    for batch in (1, 5, 9):
        a = rng.standard_normal((batch, 8)).astype(np.float32)
        np.testing.assert_allclose(traced(a), model(a), rtol=1e-5, atol=1e-6)


def test_embedding_and_layernorm_trace(backend, rng):
    class Encoder(nt.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, seed=4)
            self.norm = nn.LayerNorm(8)

        def forward(self, tokens):
            return self.norm(self.emb(tokens))

    enc = Encoder()
    tokens = rng.integers(0, 20, (3, 5))
    traced = nt.trace(enc, tokens, backend=backend)
    other = rng.integers(0, 20, (3, 5))
    np.testing.assert_allclose(traced(other), enc(other), rtol=1e-5, atol=1e-6)


def test_parameters_are_graph_inputs_and_load_state_dict_changes_outputs(rng):
    lin = nn.Linear(3, 2, seed=0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    traced = nt.trace(lin, x, backend="reference")
    names = [v.name for v in traced.graph.inputs]
    assert names == ["x", "weight", "bias"]
    assert not [n for n in traced.graph.nodes if n.op == "prim.Constant" and
                isinstance(n.attrs["value"], np.ndarray)]
    new_w = rng.standard_normal((2, 3)).astype(np.float32)
    traced.load_state_dict({"weight": new_w, "bias": np.zeros(2, np.float32)})
    np.testing.assert_allclose(traced(x), x @ new_w.T, rtol=1e-6)
    np.testing.assert_array_equal(traced.state_dict()["weight"], new_w)
    with pytest.raises(KeyError, match="missing keys"):
        traced.load_state_dict({"weight": new_w})
    with pytest.raises(ValueError, match="expected shape"):
        traced.load_state_dict({"weight": new_w.T, "bias": np.zeros(2)})


def test_tied_parameters_are_one_input(rng):
    class Tied(nt.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4, bias=False, seed=0)
            self.b = nn.Linear(4, 4, bias=False, seed=1)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    model = Tied()
    assert [n for n, _ in model.named_parameters()] == ["a.weight"]
    assert list(model.state_dict()) == ["a.weight", "b.weight"]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    assert [v.name for v in traced.graph.inputs] == ["x", "a.weight"]
    w = rng.standard_normal((4, 4)).astype(np.float32)
    traced.load_state_dict({"a.weight": w, "b.weight": w})
    np.testing.assert_allclose(traced(x), x @ w.T @ w.T, rtol=1e-5)


def test_dropout_honours_training_mode_and_the_flag_is_frozen(rng):
    model = nn.Sequential(nn.Linear(4, 4, seed=0), nn.Dropout(0.5))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    model.eval()
    traced = nt.trace(model, x, backend="reference")
    assert traced.training is False
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-6)
    model.train()
    assert model.training and model[1].training
    with pytest.warns(nt.TracerWarning) as record:
        traced_train = nt.trace(model, x, backend="reference")
    assert any("Did you forget to call .eval()" in str(w.message) for w in record)
    assert traced_train.training is True
    assert any(n.op == "np.random.random" for n in traced_train.graph.nodes)
    assert "training mode" in repr(traced_train)


def test_submodule_tree_is_kept_and_not_callable(rng):
    class Outer(nt.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(2, 2, seed=0), nn.ReLU())
            self.unused = None
            self.register_buffer("scale", np.full(2, 3.0, np.float32))

        def forward(self, x):
            return self.body(x) * self.scale

    model = Outer()
    x = rng.standard_normal((1, 2)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    assert "scale" in traced.state_dict()
    np.testing.assert_array_equal(traced.body[0].weight if hasattr(traced.body, "__getitem__")
                                  else getattr(traced.body, "0").weight, model.body[0].weight)
    with pytest.raises(TypeError, match="not callable on its own"):
        traced.body(x)
    with pytest.raises(AttributeError):
        _ = traced.unused
    traced.load_state_dict({**traced.state_dict(), "scale": np.ones(2, np.float32)})
    np.testing.assert_allclose(traced(x), model.body(x), rtol=1e-6)


def test_trace_module_errors(rng):
    n = Net()
    x = rng.random((1, 1, 3, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="trace_module"):
        nt.trace(n.weighted_kernel_sum, x, backend="reference")
    with pytest.raises(TypeError, match="expects a numtrace.Module"):
        nt.trace_module(lambda x: x, {"forward": x}, backend="reference")
    with pytest.raises(TypeError, match="dict of method name"):
        nt.trace_module(n, x, backend="reference")
    with pytest.raises(AttributeError, match="no method 'nope'"):
        nt.trace_module(n, {"nope": x}, backend="reference")


def test_trace_module_check_inputs(rng):
    n = Net()
    x = rng.random((1, 1, 3, 3), dtype=np.float32)
    w = rng.random((1, 1, 3, 3), dtype=np.float32)
    checks = [{"forward": rng.random((2, 1, 3, 3), dtype=np.float32), "weighted_kernel_sum": w}]
    traced = nt.trace_module(n, {"forward": x, "weighted_kernel_sum": w}, check_inputs=checks,
                             backend="reference")
    assert set(traced.methods) == {"forward", "weighted_kernel_sum"}


def test_module_state_api(rng):
    lin = nn.Linear(3, 2, seed=0)
    sd = lin.state_dict()
    assert list(sd) == ["weight", "bias"]
    lin.load_state_dict({"weight": np.ones((2, 3)), "bias": np.zeros(2)})
    assert lin.weight.dtype == np.float32 and (lin.weight == 1).all()
    with pytest.raises(KeyError, match="unexpected keys"):
        lin.load_state_dict({"weight": np.ones((2, 3)), "bias": np.zeros(2), "x": np.ones(1)})
    lin.load_state_dict({"weight": np.zeros((2, 3))}, strict=False)
    assert (lin.weight == 0).all()
    assert isinstance(lin.weight * 2, np.ndarray) and not isinstance(lin.weight * 2, nt.Parameter)
    assert "Linear(in_features=3" in repr(nn.Sequential(lin))

    class Broken(nt.Module):
        def __init__(self):
            self.x = 1

    with pytest.raises(AttributeError, match="super"):
        Broken()


class RunningMean(nt.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", np.zeros(3, np.float32))
        self.register_buffer("calls", np.zeros(1, np.float32))

    def forward(self, x):
        self.calls += 1
        if self.training:
            self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
        return x - self.mean


def test_assigning_a_buffer_keeps_it_a_buffer(rng):
    """``self.mean = ...`` updates the buffer (as in torch); a trace records it as a write into the buffer,
    which each call of the trace makes on the module's own array, as the eager module would."""
    model, eager = RunningMean(), RunningMean()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    model(x)
    assert list(model.state_dict()) == ["mean", "calls"]
    np.testing.assert_allclose(model.mean, 0.1 * x.mean(0), rtol=1e-6)
    traced = nt.trace(model, x, backend="reference", check_trace=False)  # tracing runs forward once more
    assert type(model.mean) is np.ndarray and list(model.state_dict()) == ["mean", "calls"]
    eager.load_state_dict(model.state_dict())
    for n in (4, 1, 9):
        y = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_allclose(traced(y), eager(y), rtol=1e-6)
        np.testing.assert_allclose(model.mean, eager.mean, rtol=1e-6)
        np.testing.assert_allclose(model.calls, eager.calls)
    model.eval()
    traced = nt.trace(model, x, backend="reference", check_trace=False)
    np.testing.assert_allclose(traced(x), x - model.mean, rtol=1e-6)
    assert type(model.calls) is np.ndarray and list(model.state_dict()) == ["mean", "calls"]


def test_a_buffer_assigned_another_shape_is_a_clear_error(rng):
    class Grow(nt.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", np.zeros(3, np.float32))

        def forward(self, x):
            self.seen = x.sum(0)
            return x

    with pytest.raises(ValueError, match="must keep its shape"):
        nt.trace(Grow(), np.ones((2, 4), np.float32), backend="reference")


def test_module_with_keyword_example_inputs(rng):
    class Scale(nt.Module):
        def __init__(self):
            super().__init__()
            self.w = nt.Parameter(np.full(3, 2.0, np.float32))

        def forward(self, x, shift):
            return x * self.w + shift

    model = Scale()
    x, shift = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    traced = nt.trace(model, example_kwarg_inputs={"shift": shift, "x": x}, backend="reference")
    np.testing.assert_allclose(traced(x=x, shift=shift), model(x, shift), rtol=1e-6)
    np.testing.assert_allclose(traced(x, shift), model(x, shift), rtol=1e-6)


def test_module_list_registers_its_modules(rng):
    class Stack(nt.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(3, 3, seed=i) for i in range(2))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Stack()
    assert list(model.state_dict()) == ["layers.0.weight", "layers.0.bias",
                                        "layers.1.weight", "layers.1.bias"]
    x = rng.standard_normal((2, 3)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    assert [v.name for v in traced.graph.inputs][1:] == list(model.state_dict())
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-6)
    with pytest.raises(TypeError, match="not a numtrace.Module"):
        nn.ModuleList([3])


def test_weights_changed_between_calls_are_never_stale(backend, rng):
    """A traced module reads its parameters as they are at each call: written in place (the module's own
    arrays) or replaced through load_state_dict, including NaN and inf (the cpu backend runs these
    products on its packed-weight kernels and must never reuse a pack of old weights)."""
    model = nn.Sequential(nn.Linear(64, 48, seed=0), nn.ReLU(), nn.Linear(48, 10, seed=1)).eval()
    x = rng.standard_normal((32, 64)).astype(np.float32)
    traced = nt.trace(model, x, backend=backend)

    def check():
        for batch in (x, x[:7], x[:1]):
            # float32 sums of ~100 in another order than BLAS's
            np.testing.assert_allclose(traced(batch), model(batch), rtol=1e-4, atol=1e-3)

    check()
    model[0].weight[:, :10] *= -3.0                    # in place, the arrays the trace shares
    model[2].bias[...] = 1.5
    check()
    sd = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in model.state_dict().items()}
    traced.load_state_dict(sd)
    check()
    model[2].weight[3, 5] = np.inf
    model[0].weight[7, 2] = np.nan
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(traced(x)), np.isnan(model(x)))
    if backend == "cpu":
        assert any(s["packed_matmuls"] == 2 for s in traced.forward.stats()["signatures"].values())
