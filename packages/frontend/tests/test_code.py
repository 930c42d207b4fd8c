"""``.code``: the generated Python source runs with NumPy and computes what the trace computes."""

import numpy as np
import numtrace as nt
from numtrace import codegen, nn


def _run_code(traced, *args):
    namespace = {"np": np, "op": codegen.op, "CONSTANTS": traced.constants}
    exec(traced.code, namespace)
    fn = namespace[traced.__name__]
    return fn(*args)


def test_code_of_a_function_executes(rng):
    big = rng.standard_normal(40)

    def f(x, y):
        z = np.concatenate([x, y]) * 2.0 + big
        z[3] = 0.0
        w = np.add.outer(x[:2], y[:2])
        return z.reshape(x.shape[0] * 2, -1).sum(axis=1), w, np.einsum("i,i->", x, y)

    x, y = rng.standard_normal(20), rng.standard_normal(20)
    traced = nt.trace(f, (x, y), backend="reference")
    code = traced.code
    assert code.startswith("def f(x, y):")
    assert "np.concatenate([x, y]" in code and "CONSTANTS['c0']" in code
    assert "op('np.add.outer')" in code
    for got, want in zip(_run_code(traced, x, y), f(x, y)):
        np.testing.assert_allclose(got, want)


def test_code_of_a_module_takes_its_state(rng):
    model = nn.Sequential(nn.Linear(3, 4, seed=0), nn.ReLU(), nn.LayerNorm(4))
    x = rng.standard_normal((2, 3)).astype(np.float32)
    traced = nt.trace(model, x, backend="reference")
    fn = traced.methods["forward"]
    assert fn.code.startswith("def forward(x, v_0_weight, v_0_bias, v_2_weight, v_2_bias):")
    state = [traced.state_dict()[n] for n in fn.state_names]
    np.testing.assert_allclose(_run_code(fn, x, *state), model(x), rtol=1e-6)


def test_code_of_special_forms_executes(rng):
    def f(x):
        return (np.clip(x, None, 0.5), np.astype(x, np.int32), np.where(x > 0, x, 0.0), x[[0, 1]], x[x > 0],
                np.sort(x, axis=0), np.stack([x, x], axis=1), *np.split(x, 2))

    x = rng.standard_normal((4, 3))
    traced = nt.trace(f, (x,), backend="reference")
    got, want = _run_code(traced, x), f(x)
    flat_want = list(want)
    assert len(got) == len(flat_want)
    for g, w in zip(got, flat_want):
        np.testing.assert_array_equal(g, w)
