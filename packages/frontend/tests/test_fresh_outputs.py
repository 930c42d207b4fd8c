"""The backend contract (docs/design/contract.md): every output of every backend is a fresh array that
shares memory with no input and no other output, whatever the op (reshape, transpose, ravel, squeeze
and other ops whose NumPy reference returns a view included). Every registry op's samples run on every
installed backend (triton, in interpreter mode, on one sample with an array input per op: it is slow)."""

import numpy as np
import numtrace
import pytest
from numtrace.backends import get_backend
from numtrace_ir import registry, testing

CASES = list(testing.iter_cases(registry.all_ops()))
# Triton: per op, the first sample with an array input (or none at all); the others have nothing to alias.
_FIRST = {}
for _op, _sample in CASES:
    if not _sample.inputs or any(isinstance(v, np.ndarray) for v in _sample.inputs):
        _FIRST.setdefault(_op.name, (_op, _sample))
BACKENDS = numtrace.available_backends()


def _check_fresh(backend, op, sample):
    graph = testing.build_graph(op, sample)
    try:
        exe = get_backend(backend).compile(graph, [testing.type_of(v) for v in sample.inputs])
    except NotImplementedError as exc:  # a documented refusal at compile time
        pytest.skip(f"{backend} does not lower {op.name}: {exc}")
    inputs = [np.array(v, copy=True) if isinstance(v, np.ndarray) else v for v in sample.inputs]
    outputs = exe(*inputs)
    arrays = [v for v in inputs if isinstance(v, np.ndarray)]
    for i, out in enumerate(outputs):
        if not isinstance(out, np.ndarray):  # a scalar output (shape arithmetic) is immutable
            assert isinstance(out, (bool, int, float, complex, np.generic)), (op.name, type(out))
            continue
        for j, a in enumerate(arrays):
            assert not np.shares_memory(out, a), f"{op.name} on {backend}: output {i} shares input {j}"
        for k, other in enumerate(outputs[:i]):
            assert not np.shares_memory(out, other), f"{op.name} on {backend}: outputs {k} and {i} share"


@pytest.mark.parametrize(("op", "sample"), CASES,
                         ids=[testing.case_id(op, s, i) for i, (op, s) in enumerate(CASES)])
def test_outputs_never_share_memory_with_inputs(backend, op, sample):
    _check_fresh(backend, op, sample)


@pytest.mark.skipif("triton" not in BACKENDS, reason="triton is not installed")
@pytest.mark.parametrize(("op", "sample"), list(_FIRST.values()), ids=list(_FIRST))
def test_triton_outputs_never_share_memory_with_inputs(op, sample):
    _check_fresh("triton", op, sample)


def test_traced_views_of_inputs_are_views_as_numpys(rng, backend):
    # The executable's outputs are fresh (above); the traced call returns NumPy's view of the argument.
    x = rng.random((2, 3))
    for f in (lambda x: x.reshape(3, 2), lambda x: x.T, np.ravel, lambda x: np.expand_dims(x, 0),
              lambda x: np.squeeze(x[None])):
        traced = numtrace.trace(f, (x,), backend=backend)
        out = traced(x)
        np.testing.assert_array_equal(out, f(x))
        assert np.shares_memory(out, x) and out.base is not None
