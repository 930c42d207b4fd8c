"""OpInfo test: every registry entry's shape/dtype rule agrees exactly with its NumPy reference on every
sample (dtype and shape of each output), and the reference runs on non-contiguous inputs too."""

import numpy as np
import pytest
from numtrace_ir import dims
from numtrace_ir.testing import (
    assert_outputs_close,
    case_id,
    iter_cases,
    noncontiguous,
    reference_outputs,
    type_of,
)
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.filterwarnings("error")

CASES = list(iter_cases(seed=1234))


def _matches(inferred, actual) -> bool:
    """Equal types; a data-dependent (symbolic) dim matches any size."""
    if isinstance(inferred, TensorType) and isinstance(actual, TensorType):
        return (
            inferred.dtype == actual.dtype
            and inferred.ndim == actual.ndim
            and all(d == a or not dims.is_static(d) for d, a in zip(inferred.shape, actual.shape))
        )
    return inferred == actual


@pytest.mark.parametrize("op,sample", CASES, ids=[case_id(op, s, i) for i, (op, s) in enumerate(CASES)])
def test_rule_matches_reference(op, sample):
    expected = reference_outputs(op, sample)
    inferred = op.infer([type_of(v) for v in sample.inputs], sample.attrs)
    actual = tuple(type_of(v) for v in expected)
    if op.data_dependent_shape:
        assert len(inferred) == len(actual) and all(map(_matches, inferred, actual)), (inferred, actual)
    else:
        assert inferred == actual, f"{op.name} {sample.note}: rule {inferred} != reference {actual}"
    if not op.nondeterministic:
        strided = reference_outputs(op, type(sample)(tuple(map(noncontiguous, sample.inputs)), sample.attrs))
        assert_outputs_close(strided, expected, what=op.name)


def test_every_op_has_samples():
    from numtrace_ir.registry import all_ops

    names = {op.name for op, _ in CASES}
    assert [op.name for op in all_ops() if op.name not in names] == []


def test_cases_are_deterministic():
    a = [(op.name, s.inputs) for op, s in iter_cases(seed=7)][:200]
    b = [(op.name, s.inputs) for op, s in iter_cases(seed=7)][:200]
    for (na, ia), (nb, ib) in zip(a, b):
        assert na == nb
        for x, y in zip(ia, ib):
            np.testing.assert_array_equal(x, y)


def _sample_features(cases):
    """Per op name: the input dtypes its samples cover, plus '0d', 'empty', 'multi' (two or more
    array inputs) and 'bcast' (array inputs of different shapes)."""
    features: dict[str, set[str]] = {}
    for op, sample in cases:
        f = features.setdefault(op.name, set())
        arrays = [v for v in sample.inputs if isinstance(v, np.ndarray)]
        for a in arrays:
            f.add(a.dtype.name)
            f.update(k for k, on in (("0d", a.ndim == 0), ("empty", a.size == 0)) if on)
        if len(arrays) >= 2:
            f.add("multi")
        if len({a.shape for a in arrays}) > 1:
            f.add("bcast")
    return features


def test_samples_cover_0d_empty_broadcasting_and_the_main_dtypes():
    """The rule test above is only as strong as its samples: every elementwise op and reduction is
    checked on 0-d and empty inputs, every multi-input elementwise op on broadcasting shapes, and each
    of float32/float64/int32/int64/bool on most elementwise ops (the rest do not accept it)."""
    kinds = {op.name: op.kind for op, _ in CASES}
    features = _sample_features(CASES)
    gaps = []
    for name, f in features.items():
        if kinds[name] in ("elementwise", "reduction"):
            wanted = ["0d", "empty"] + (["bcast"] if kinds[name] == "elementwise" and "multi" in f else [])
            gaps += [(name, k) for k in wanted if k not in f]
    assert gaps == []
    elementwise = [f for name, f in features.items() if kinds[name] == "elementwise"]
    for dtype in ("float32", "float64", "int32", "int64", "bool"):
        covered = sum(dtype in f for f in elementwise)
        assert covered >= 0.8 * len(elementwise), (dtype, covered, len(elementwise))
