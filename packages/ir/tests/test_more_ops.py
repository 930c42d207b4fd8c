"""The rules of np.linalg.*, np.diff, the stacking helpers, atleast_nd, diag, broadcast_arrays, isclose,
percentile/quantile/median and real/imag on symbolic dims, and their errors (the OpInfo test checks
them on concrete samples)."""

import numpy as np
import pytest
from numtrace_ir import dims, registry
from numtrace_ir.dims import ShapeError
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.filterwarnings("error")


def T(dtype, *shape):
    return TensorType(dtype, shape)


@pytest.mark.parametrize(
    "name,types,attrs,expected",
    [
        ("np.linalg.norm", [T("f4", "B", 3)], {"axis": 1}, (T("f4", "B"),)),
        ("np.linalg.norm", [T("i4", "B", 3)], {"ord": "fro", "keepdims": True}, (T("f8", 1, 1),)),
        ("np.linalg.norm", [T("c8", "B", 3, 4)], {"axis": (2, 0), "ord": 2}, (T("f4", 3),)),
        ("np.linalg.inv", [T("f4", "B", 3, 3)], {}, (T("f4", "B", 3, 3),)),
        ("np.linalg.inv", [T("i8", "N", "N")], {}, (T("f8", "N", "N"),)),
        ("np.linalg.det", [T("f8", "B", "N", "N")], {}, (T("f8", "B"),)),
        ("np.linalg.solve", [T("f8", "B", 3, 3), T("f4", 3)], {}, (T("f8", "B", 3),)),
        ("np.linalg.solve", [T("f4", "B", 3, 3), T("f4", 1, 3, "K")], {}, (T("f4", "B", 3, "K"),)),
        ("np.diff", [T("f8", "B", 3)], {"axis": 0}, (T("f8", "max(0,B-1)", 3),)),
        ("np.diff", [T("bool", "B")], {"n": 0}, (T("bool", "B"),)),
        ("np.hstack", [T("f8", "B", 3), T("i4", "B", 4)], {}, (T("f8", "B", 7),)),
        ("np.hstack", [T("f8", "B"), T("f8")], {"dtype": np.dtype("f4")}, (T("f4", "B+1"),)),
        ("np.vstack", [T("f8", "B", 3), T("f8", 3)], {}, (T("f8", "B+1", 3),)),
        ("np.column_stack", [T("f8", "B"), T("f8", "B", 2)], {}, (T("f8", "B", 3),)),
        ("np.atleast_1d", [T("f8")], {}, (T("f8", 1),)),
        ("np.atleast_2d", [T("f8", "B"), T("i4", 2, 3, 4)], {}, (T("f8", 1, "B"), T("i4", 2, 3, 4))),
        ("np.atleast_3d", [T("f8", "B"), T("f8", "B", 2)], {}, (T("f8", 1, "B", 1), T("f8", "B", 2, 1))),
        ("np.diag", [T("f8", "B")], {"k": -2}, (T("f8", "B+2", "B+2"),)),
        ("np.diag", [T("f8", "B", 3)], {"k": 1}, (T("f8", "min(2,B)"),)),
        ("np.broadcast_arrays", [T("f8", "B", 1), T("i4", 3)], {}, (T("f8", "B", 3), T("i4", "B", 3))),
        ("np.isclose", [T("f4", "B", 3), T("i8", 1, 3)], {}, (T("bool", "B", 3),)),
        ("np.percentile", [T("i4", "B", 3)], {"q": (10, 50), "axis": 0}, (T("f8", 2, 3),)),
        ("np.quantile", [T("i4", "B", 3)], {"q": 0.5, "method": "lower"}, (T("i4"),)),
        ("np.median", [T("f4", "B", 3)], {"axis": 1, "keepdims": True}, (T("f4", "B", 1),)),
        ("np.real", [T("c8", "B")], {}, (T("f4", "B"),)),
        ("np.imag", [T("i4", "B")], {}, (T("i4", "B"),)),
    ],
)
def test_symbolic_rules(name, types, attrs, expected):
    assert registry.get(name).infer(types, attrs) == expected


def test_diff_length_is_exact_for_every_size():
    for n in range(4):
        (t,) = registry.get("np.diff").infer([T("f8", "B")], {"n": n})
        for b in range(6):
            assert dims.evaluate(t.shape[0], {"B": b}) == np.diff(np.zeros(b), n).shape[0]


@pytest.mark.parametrize(
    "name,types,attrs,error,match",
    [
        ("np.linalg.norm", [T("f8", 2, 3, 4)], {"ord": 2}, ShapeError, "improper number of dimensions"),
        ("np.linalg.norm", [T("f8", 3)], {"ord": "fro"}, ShapeError, "'fro' for vectors"),
        ("np.linalg.norm", [T("f8", 3, 3)], {"ord": 3}, ShapeError, "order 3 for matrices"),
        ("np.linalg.norm", [T("f8", 3, 3)], {"axis": (0, 0)}, ShapeError, "duplicate axes"),
        ("np.linalg.norm", [T("f8", 3)], {"ord": "max"}, ValueError, "ord must be"),
        ("np.linalg.inv", [T("f8", 3, 4)], {}, ShapeError, "must be square"),
        ("np.linalg.det", [T("f8", 3)], {}, ShapeError, "at least two-dimensional"),
        ("np.linalg.solve", [T("f8", 3, 3), T("f8", 4)], {}, ShapeError, "does not match"),
        ("np.linalg.solve", [T("f8", 3, 3), T("f8", 4, 2)], {}, ShapeError, "3 rows"),
        ("np.diff", [T("f8")], {}, ShapeError, "at least one dimensional"),
        ("np.diff", [T("f8", 3)], {"n": -1}, ShapeError, "non-negative"),
        ("np.hstack", [T("f8", 3), T("f8", 2, 3)], {}, ShapeError, "differ"),
        ("np.hstack", [T("f8", 3), T("i4", 2)], {"casting": "no"}, TypeError, "cannot cast"),
        ("np.concatenate", [T("f64", 3), T("i32", 2)], {"casting": "equiv"}, TypeError, "cannot cast int32"),
        ("np.concatenate", [T("f64", 3)], {"dtype": np.dtype("i4")}, TypeError, "casting='same_kind'"),
        ("np.stack", [T("i64", 3), T("i32", 3)], {"dtype": np.dtype("i4"), "casting": "safe"}, TypeError,
         "cannot cast int64 to int32"),
        ("np.vstack", [T("f8", 3), T("f8", 4)], {}, ShapeError, "differ off axis"),
        ("np.diag", [T("f8", 2, 3, 4)], {}, ShapeError, "1- or 2-d"),
        ("np.broadcast_arrays", [T("f8", 3), T("f8", 4)], {}, ShapeError, "3 vs 4"),
        ("np.percentile", [T("bool", 3)], {"q": 50.0}, TypeError, "unsupported dtypes"),
        ("np.percentile", [T("f8", 3)], {"q": 101}, ValueError, r"range \[0, 100\]"),
        ("np.quantile", [T("f8", 3)], {"q": (0.5, 2.0)}, ValueError, r"range \[0, 1\]"),
        ("np.quantile", [T("f8", 3)], {"q": 0.5, "method": "cubic"}, ValueError, "expected one of"),
    ],
)
def test_rule_errors(name, types, attrs, error, match):
    with pytest.raises(error, match=match):
        registry.get(name).infer(types, attrs)


def test_numpy_entry_points():
    for func, name in [
        (np.linalg.norm, "np.linalg.norm"),
        (np.linalg.inv, "np.linalg.inv"),
        (np.linalg.solve, "np.linalg.solve"),
        (np.linalg.det, "np.linalg.det"),
        (np.diff, "np.diff"),
        (np.hstack, "np.hstack"),
        (np.vstack, "np.vstack"),
        (np.column_stack, "np.column_stack"),
        (np.atleast_1d, "np.atleast_1d"),
        (np.atleast_2d, "np.atleast_2d"),
        (np.atleast_3d, "np.atleast_3d"),
        (np.diag, "np.diag"),
        (np.broadcast_arrays, "np.broadcast_arrays"),
        (np.isclose, "np.isclose"),
        (np.percentile, "np.percentile"),
        (np.quantile, "np.quantile"),
        (np.median, "np.median"),
        (np.real, "np.real"),
        (np.imag, "np.imag"),
    ]:
        assert registry.for_numpy(func).name == name


def test_bind_numpy_calls():
    x = np.zeros((3, 4))
    inputs, attrs = registry.get("np.linalg.norm").bind([x, np.inf, 1], {"keepdims": True})
    assert attrs == {"ord": np.inf, "axis": 1, "keepdims": True}
    _, attrs = registry.get("np.linalg.norm").bind([x, 2.0], {})
    assert attrs["ord"] == 2 and type(attrs["ord"]) is int  # 2.0 and 2 are one norm
    _, attrs = registry.get("np.percentile").bind([x, np.array([10, 90])], {"axis": 0})
    assert attrs["q"] == (10.0, 90.0) and attrs["method"] == "linear"
    inputs, _ = registry.get("np.atleast_2d").bind([x, x], {})
    assert len(inputs) == 2
    inputs, attrs = registry.get("np.diff").bind([x], {"prepend": 0})
    assert inputs == [x, 0] and attrs["omitted"] == ("append",)
    with pytest.raises(NotImplementedError, match="weights= is not modelled"):   # a host call
        registry.get("np.quantile").bind([x, 0.5], {"method": "inverted_cdf", "weights": x})


def test_references_return_new_arrays():
    x = np.arange(6.0).reshape(2, 3)
    for name, args, attrs in [
        ("np.real", (x,), {}),
        ("np.diff", (x,), {"n": 0}),
        ("np.atleast_2d", (x,), {}),
        ("np.diag", (x,), {}),
        ("np.broadcast_arrays", (x,), {}),
    ]:
        out = registry.get(name).reference(*args, **attrs)
        assert isinstance(out, np.ndarray) and not np.shares_memory(out, x), name
