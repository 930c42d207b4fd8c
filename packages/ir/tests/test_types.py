"""TensorType / ScalarType / TupleType and the dtype short-name tables."""

import numpy as np
import pytest
from numtrace_ir import DTYPE_NAMES, ScalarType, TensorType, TupleType, dtype_from_name, dtype_name


def test_dtype_tables_round_trip():
    assert list(DTYPE_NAMES) == ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                 "f16", "f32", "f64", "c64", "c128"]
    for name, dt in DTYPE_NAMES.items():
        assert dtype_from_name(name) is dt
        assert dtype_name(dt) == name
        assert dtype_name(dt.newbyteorder(">")) == name  # byte order is normalised away
    assert dtype_name(np.float32) == "f32"
    assert dtype_name("int64") == "i64"


@pytest.mark.parametrize("bad", ["object", "U3", "M8[s]", np.dtype([("a", "f4")]), "f128"])
def test_unsupported_dtypes_are_rejected(bad):
    with pytest.raises(TypeError, match="dtype|not a dtype"):
        TensorType(bad, (1,))


def test_unknown_dtype_name():
    with pytest.raises(ValueError, match="unknown dtype name 'f33'"):
        dtype_from_name("f33")


def test_tensor_type_value_semantics():
    t = TensorType("float32", ("B", 4))
    assert t.dtype is np.dtype(np.float32)
    assert t.shape == ("B", 4) and t.ndim == 2 and not t.is_concrete
    assert str(t) == "f32[B, 4]" and repr(t) == "TensorType('f32', ('B', 4))"
    same = TensorType(np.dtype(">f4"), ["B", np.int64(4)])
    assert t == same and hash(t) == hash(same) and not (t != same)
    assert type(same.shape[1]) is int
    assert t != TensorType("f32", ("B", 5)) and t != TensorType("f64", ("B", 4))
    assert str(TensorType("bool", ())) == "bool[]" and TensorType("c128", ()).is_concrete
    assert {t: 1}[same] == 1
    with pytest.raises(AttributeError):
        t.shape = (1,)


@pytest.mark.parametrize(("shape", "err", "match"), [
    ((-1,), ValueError, ">= 0"),
    (("",), ValueError, "non-empty"),
    ((" B",), ValueError, "outer spaces"),
    (("3",), ValueError, "looks like an integer"),
    (("B,C",), ValueError, "comma"),
    (("max(B,C",), ValueError, "unbalanced"),
    (("B]",), ValueError, "may not contain"),
    ((1.5,), TypeError, "float"),
    ((True,), TypeError, "bool"),
    ("B", TypeError, "tuple of dims"),
    (3, TypeError, "tuple of dims"),
])
def test_bad_dims(shape, err, match):
    with pytest.raises(err, match=match):
        TensorType("f32", shape)


def test_symbolic_expressions_are_dims():
    t = TensorType("i64", ("max(B,C)", "B*4", "(B+1)//2"))
    assert str(t) == "i64[max(B,C), B*4, (B+1)//2]"


def test_scalar_and_tuple_types():
    i = ScalarType("int")
    assert str(i) == "int" and i == ScalarType("int") and i != ScalarType("float")
    assert hash(i) == hash(ScalarType("int"))
    with pytest.raises(ValueError, match="kind must be one of"):
        ScalarType("str")
    tt = TupleType([TensorType("f32", (3,)), i])
    assert str(tt) == "(f32[3], int)" and len(tt) == 2 and tt[1] == i and list(tt) == [tt[0], i]
    assert str(TupleType([i])) == "(int,)" and str(TupleType([])) == "()"
    assert tt == TupleType((TensorType("f32", (3,)), ScalarType("int"))) and tt != TupleType([i])
    assert i != TensorType("f32", ()) and i != "int"
    with pytest.raises(TypeError, match="must be types"):
        TupleType(["f32"])


def test_types_pickle_by_value():
    import pickle

    for t in [TensorType("u16", ("B", 0)), ScalarType("complex"), TupleType([ScalarType("bool")])]:
        assert pickle.loads(pickle.dumps(t)) == t
