"""A traced module's parameters and modes, as the reference tracer documents them: a parameter tied to
two attributes is one graph input and one parameter (``torch.nn.Module.named_parameters`` lists it
once; ``state_dict`` keeps each name); ``train()``/``eval()`` set ``training`` on the tree, but "operations
that have different behaviors in training and eval modes will always behave as if it is in the mode it
was in during tracing", which a TracerWarning says at the call that changes the mode."""

import io
import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace import nn


class Tied(nt.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4, bias=False, seed=0)
        self.dec = nn.Linear(4, 4, seed=1)
        self.dec.weight = self.enc.weight
        self.register_buffer("scale", np.full(4, 2.0, np.float32))

    def forward(self, x):
        return self.dec(self.enc(x)) * self.scale


def _x(n=3):
    return np.random.default_rng(5).standard_normal((n, 4)).astype(np.float32)


def test_tied_parameter_is_one_input_and_listed_once(backend):
    model = Tied()
    traced = nt.trace(model, _x(), backend=backend)
    assert [v.name for v in traced.graph.inputs] == ["x", "enc.weight", "dec.bias", "scale"]
    names = [n for n, _ in traced.named_parameters()]
    assert names == [n for n, _ in model.named_parameters()] == ["enc.weight", "dec.bias"]
    every = [n for n, _ in traced.named_parameters(remove_duplicate=False)]
    assert every == [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert sorted(every) == ["dec.bias", "dec.weight", "enc.weight"]
    assert len(list(traced.parameters())) == 2
    assert [n for n, _ in traced.named_buffers()] == ["scale"]
    sd = traced.state_dict()
    assert list(sd) == list(model.state_dict())
    assert sorted(sd) == ["dec.bias", "dec.weight", "enc.weight", "scale"]
    assert sd["enc.weight"] is sd["dec.weight"]
    # Submodules list their own, by paths relative to them.
    assert sorted(n for n, _ in traced.dec.named_parameters()) == ["bias", "weight"]


@pytest.mark.parametrize("name", ["enc.weight", "dec.weight"])
def test_updating_a_tied_parameter_through_either_name_updates_both(name, backend):
    model = Tied()
    traced = nt.trace(model, _x(), backend=backend)
    w = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    traced.load_state_dict({name: w}, strict=False)
    np.testing.assert_array_equal(traced.enc.weight, w)
    np.testing.assert_array_equal(traced.dec.weight, w)
    np.testing.assert_array_equal(model.enc.weight, w)   # the module's own array, shared
    x = _x(5)
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-5)
    # Written in place through the other attribute: seen by both names and by the next call.
    other = traced.dec if name == "enc.weight" else traced.enc
    other.weight[...] = 0.5
    np.testing.assert_array_equal(traced.state_dict()[name], np.full((4, 4), 0.5, np.float32))
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-5)


def _dropout_model():
    return nn.Sequential(nn.Linear(4, 4, seed=0), nn.Dropout(0.5))


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [w for w in caught if issubclass(w.category, nt.TracerWarning)]


def test_train_on_a_module_traced_in_eval_mode_sets_the_flag_and_keeps_the_behaviour(backend):
    model = _dropout_model().eval()
    traced = nt.trace(model, _x(), backend=backend)
    x = _x(6)
    before = traced(x)
    result, caught = _warnings_of(traced.train)
    assert result is traced
    assert len(caught) == 1
    assert "eval mode they were traced in" in str(caught[0].message)
    assert caught[0].filename == __file__   # at the user's call
    assert traced.training and getattr(traced, "0").training and getattr(traced, "1").training
    assert "training mode" in repr(traced)
    np.testing.assert_array_equal(traced(x), before)   # still eval: no dropout
    np.testing.assert_array_equal(traced(x), model(x))
    # No change, no warning; back to the traced mode, no warning.
    assert _warnings_of(traced.train)[1] == []
    assert _warnings_of(traced.eval)[1] == []
    assert not traced.training and not getattr(traced, "1").training
    # train(mode=False) is eval().
    assert _warnings_of(lambda: traced.train(mode=False))[1] == [] and not traced.training


def test_eval_on_a_module_traced_in_training_mode_keeps_its_draws():
    model = _dropout_model().train()
    traced = nt.trace(model, _x(), backend="reference", check_trace=False)
    _, caught = _warnings_of(traced.eval)
    assert len(caught) == 1 and "training mode they were traced in" in str(caught[0].message)
    assert not traced.training and not getattr(traced, "1").training
    assert any(n.op == "np.random.random" for n in traced.graph)   # the traced dropout stays


def test_a_submodule_flips_only_its_subtree():
    traced = nt.trace(_dropout_model().eval(), _x(), backend="reference")
    _, caught = _warnings_of(getattr(traced, "1").train)
    assert len(caught) == 1 and "'1'" in str(caught[0].message)
    assert getattr(traced, "1").training and not traced.training and not getattr(traced, "0").training


def test_saved_module_keeps_its_mode_and_its_traced_mode():
    traced = nt.trace(_dropout_model().eval(), _x(), backend="reference")
    _warnings_of(traced.train)
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    loaded = nt.load(buf)
    assert loaded.training and getattr(loaded, "1").training
    assert _warnings_of(loaded.eval)[1] == []   # back to the mode it was traced in
    _, caught = _warnings_of(loaded.train)
    assert len(caught) == 1
    assert [n for n, _ in loaded.named_parameters()] == ["0.weight", "0.bias"]


def test_saved_tied_module_lists_the_tied_parameter_once():
    traced = nt.trace(Tied(), _x(), backend="reference")
    buf = io.BytesIO()
    traced.save(buf)
    buf.seek(0)
    loaded = nt.load(buf)
    assert [n for n, _ in loaded.named_parameters()] == ["enc.weight", "dec.bias"]
    sd = loaded.state_dict()
    assert sd["enc.weight"] is sd["dec.weight"]
