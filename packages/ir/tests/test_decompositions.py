"""The rules of the np.linalg decompositions on symbolic dims, and their errors (the OpInfo test checks
them on concrete samples)."""

import numpy as np
import pytest
from numtrace_ir import dims, registry
from numtrace_ir.dims import ShapeError
from numtrace_ir.guards import GuardError
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.filterwarnings("error")


def T(dtype, *shape):
    return TensorType(dtype, shape)


K = dims.minimum("B", 3)


@pytest.mark.parametrize(
    "name,types,attrs,expected",
    [
        ("np.linalg.eigh", [T("f4", "B", 3, 3)], {}, (T("f4", "B", 3), T("f4", "B", 3, 3))),
        ("np.linalg.eigh", [T("c8", 2, "B", "B")], {"UPLO": "u"}, (T("f4", 2, "B"), T("c8", 2, "B", "B"))),
        ("np.linalg.eigvalsh", [T("i4", "B", 2, 2)], {}, (T("f8", "B", 2),)),
        ("np.linalg.eig", [T("f4", "B", 2, 2)], {"real": True}, (T("f4", "B", 2), T("f4", "B", 2, 2))),
        ("np.linalg.eig", [T("f4", "B", 2, 2)], {}, (T("c8", "B", 2), T("c8", "B", 2, 2))),
        ("np.linalg.eigvals", [T("bool", 2, 2)], {"real": False}, (T("c16", 2),)),
        ("np.linalg.eigvals", [T("c8", 2, 2)], {"real": True}, (T("c8", 2),)),
        ("np.linalg.svd", [T("f8", "B", 3)], {}, (T("f8", "B", "B"), T("f8", K), T("f8", 3, 3))),
        ("np.linalg.svd", [T("f4", 2, "B", 3)], {"full_matrices": False},
         (T("f4", 2, "B", K), T("f4", 2, K), T("f4", 2, K, 3))),
        ("np.linalg.svd", [T("c8", "B", 3)], {"compute_uv": False}, (T("f4", K),)),
        ("np.linalg.svd", [T("i4", "B", 3, 3)], {"hermitian": True},
         (T("f8", "B", 3, 3), T("f8", "B", 3), T("f8", "B", 3, 3))),
        ("np.linalg.svdvals", [T("f4", "B", 3)], {}, (T("f4", K),)),
        ("np.linalg.qr", [T("f8", "B", 3)], {}, (T("f8", "B", K), T("f8", K, 3))),
        ("np.linalg.qr", [T("f4", "B", 3)], {"mode": "complete"}, (T("f4", "B", "B"), T("f4", "B", 3))),
        ("np.linalg.qr", [T("i8", 2, "B", 3)], {"mode": "r"}, (T("f8", 2, K, 3),)),
        ("np.linalg.cholesky", [T("f4", "B", 3, 3)], {"upper": True}, (T("f4", "B", 3, 3),)),
        ("np.linalg.slogdet", [T("c8", "B", 3, 3)], {}, (T("c8", "B"), T("f4", "B"))),
        ("np.linalg.pinv", [T("f4", "B", 3)], {}, (T("f4", 3, "B"),)),
        ("np.linalg.pinv", [T("i4", 0, 3)], {}, (T("i4", 3, 0),)),
        ("np.linalg.pinv", [T("i4", 2, 3)], {}, (T("f8", 3, 2),)),
        ("np.linalg.matrix_rank", [T("f4", "B", 3, 4)], {}, (T("intp", "B"),)),
        ("np.linalg.cond", [T("f4", "B", 3, 3)], {"p": "fro"}, (T("f4", "B"),)),
        ("np.linalg.cond", [T("i4", "B", 3)], {}, (T("f8"),)),
        ("np.linalg.lstsq", [T("f4", "B", 3), T("f4", "B")], {"size": "r1"},
         (T("f4", 3), T("f4", "r1"), T("int32"), T("f4", K))),
        ("np.linalg.lstsq", [T("f8", "B", 3), T("i4", "B", 2)], {},
         (T("f8", 3, 2), T("f8", "nres"), T("int32"), T("f8", K))),
    ],
)
def test_symbolic_rules(name, types, attrs, expected):
    assert registry.get(name).infer(types, attrs) == expected


@pytest.mark.parametrize(
    "name,types,attrs,error,match",
    [
        ("np.linalg.eigh", [T("f8", 3, 4)], {}, ShapeError, "must be square"),
        ("np.linalg.eigh", [T("f8", 3, 3)], {"UPLO": "X"}, ValueError, "UPLO"),
        ("np.linalg.eigvalsh", [T("f2", 3, 3)], {}, TypeError, "unsupported dtypes"),
        ("np.linalg.cholesky", [T("f8", 3)], {}, ShapeError, "at least two-dimensional"),
        ("np.linalg.svd", [T("f8", 3, 4)], {"hermitian": True}, ShapeError, "must be square"),
        ("np.linalg.svdvals", [T("f8", 3)], {}, ShapeError, "at least two-dimensional"),
        ("np.linalg.qr", [T("f8", 3, 3)], {"mode": "sideways"}, ValueError, "Unrecognized mode"),
        ("np.linalg.slogdet", [T("f8", 2, 3)], {}, ShapeError, "must be square"),
        ("np.linalg.cond", [T("f8", 2, 3)], {"p": 1}, ShapeError, "must be square"),
        ("np.linalg.cond", [T("f8", 3, 3)], {"p": 3}, ValueError, "Invalid norm order"),
        ("np.linalg.matrix_rank", [T("f8", 3)], {}, ShapeError, "Python int"),
        ("np.linalg.lstsq", [T("f8", 2, 3, 3), T("f8", 3)], {}, ShapeError, "a must be 2-d"),
        ("np.linalg.lstsq", [T("f8", 4, 3), T("f8", 3)], {}, ShapeError, "Incompatible dimensions"),
        ("np.linalg.pinv", [T("f2", 2, 2)], {}, TypeError, "unsupported dtypes"),
    ],
)
def test_rule_errors(name, types, attrs, error, match):
    with pytest.raises(error, match=match):
        registry.get(name).infer(types, attrs)


@pytest.mark.parametrize("mode", ["raw", "full", "economic"])
def test_unmodelled_qr_modes_are_left_to_a_host_call(mode):
    with pytest.raises(NotImplementedError):
        registry.get("np.linalg.qr").bind((np.eye(3),), {"mode": mode})


def test_tolerance_arrays_are_left_to_a_host_call():
    for name, kw in (("np.linalg.pinv", "rcond"), ("np.linalg.pinv", "rtol"),
                     ("np.linalg.matrix_rank", "tol"), ("np.linalg.lstsq", "rcond")):
        args = (np.eye(3), np.ones(3)) if name == "np.linalg.lstsq" else (np.eye(3),)
        with pytest.raises(NotImplementedError):
            registry.get(name).bind(args, {kw: np.array([0.1])})
        registry.get(name).bind(args, {kw: 0.1})   # a Python number is an attr


def test_eig_reference_refuses_the_other_dtype():
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    for name in ("np.linalg.eig", "np.linalg.eigvals"):
        op = registry.get(name)
        with pytest.raises(GuardError, match="eigenvalue"):
            op.reference(rotation, real=True)
        with pytest.raises(GuardError, match="eigenvalue"):
            op.reference(np.eye(2), real=False)
        numpy = np.linalg.eigvals if name.endswith("s") else lambda a: np.linalg.eig(a)[0]
        assert op.result_attrs(np.linalg.eig(rotation)) == {"real": False}
        got = op.reference(rotation.astype(complex), real=True)   # complex input: always complex
        np.testing.assert_array_equal(got if name.endswith("s") else got[0], numpy(rotation.astype(complex)))
