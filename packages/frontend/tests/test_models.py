"""The end-to-end models (MLP, CNN, transformer block) traced and run on every backend: checked at a
second batch size, equal to the eager model on new inputs, following new weights, and surviving a
save/load round trip."""

import numpy as np
import numtrace as nt
import pytest
from e2e_models import model_cases

IDS = [c[0] for c in model_cases()]


def _new_input(x: np.ndarray, batch: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch,) + x.shape[1:]).astype(x.dtype)


@pytest.fixture(params=range(len(IDS)), ids=IDS)
def case(request):
    """A fresh model per test: the weight test changes its parameters."""
    return model_cases()[request.param]


def test_model_matches_eager_numpy(case, backend):
    name, model, x = case
    model.eval()
    traced = nt.trace(model, x, check_inputs=[(_new_input(x, 1, 1),)], backend=backend)
    for batch, seed in [(x.shape[0], 2), (x.shape[0] + 3, 3)]:
        x2 = _new_input(x, batch, seed)
        got = traced(x2)
        assert got.shape == model(x2).shape and got.dtype == np.float32, name
        np.testing.assert_allclose(got, model(x2), rtol=1e-4, atol=1e-5, err_msg=name)


def test_model_follows_new_weights_and_round_trips(case, backend, tmp_path):
    name, model, x = case
    model.eval()
    traced = nt.trace(model, x, backend=backend)
    rng = np.random.default_rng(5)
    state = {k: (0.2 * rng.standard_normal(np.shape(v))).astype(np.float32)
             for k, v in model.state_dict().items()}
    traced.load_state_dict(state)
    model.load_state_dict(state)
    np.testing.assert_allclose(traced(x), model(x), rtol=1e-4, atol=1e-5, err_msg=name)
    traced.save(tmp_path / "model.nt")
    loaded = nt.load(tmp_path / "model.nt", backend=backend)
    np.testing.assert_allclose(loaded(x), model(x), rtol=1e-4, atol=1e-5, err_msg=name)
