"""Value types of the IR: tensors (dtype + shape, dims concrete or symbolic), Python scalars, tuples.

Types are immutable and compared by value; the hash and the text form are computed once because the
printer, the lint and the registry's memoized rules look them up for every node.
"""

import numpy as np

__all__ = [
    "DTYPE_NAMES", "SCALAR_KINDS", "ScalarType", "TensorType", "TupleType", "Type",
    "check_dim", "dtype_from_name", "dtype_name", "format_dim", "normalize_dtype",
]

# Short name -> dtype, in the order the printer documents them. Only these dtypes exist in the IR.
DTYPE_NAMES = {
    "bool": np.dtype(np.bool_),
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
}
cdef dict _NAME_OF = {dt: name for name, dt in DTYPE_NAMES.items()}
SCALAR_KINDS = ("int", "float", "bool", "complex")
# Characters a symbolic dim may not contain: they delimit dims, types or lines in the text form.
cdef str _DIM_FORBIDDEN = "[]#%\n\r:="


def dtype_from_name(str name):
    """The NumPy dtype of a short name (`"f32"` -> float32); `ValueError` for an unknown name."""
    try:
        return DTYPE_NAMES[name]
    except KeyError:
        raise ValueError(
            f"unknown dtype name {name!r}; expected one of {', '.join(DTYPE_NAMES)}") from None


cpdef object normalize_dtype(object dtype):
    """The canonical native-order dtype for `dtype` (a short name, a dtype or anything `np.dtype` takes)."""
    cdef object dt
    if isinstance(dtype, str) and dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r} ({e})") from None
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    try:
        # The table's instance, so that equal dtypes are also identical.
        return DTYPE_NAMES[_NAME_OF[dt]]
    except KeyError:
        raise TypeError(
            f"dtype {dt} is not supported by the IR; expected one of {', '.join(DTYPE_NAMES)}") from None


def dtype_name(dtype):
    """The short name of a dtype (`float32` -> `"f32"`); `TypeError` for a dtype the IR does not have."""
    return _NAME_OF[normalize_dtype(dtype)]


# Backends index with int64: a larger dim could not describe an array they can run on.
cdef object _MAX_DIM = (1 << 63) - 1


cpdef object check_dim(object d):
    """Validate one dim: an `int >= 0` or a symbol/expression string that the text form can hold."""
    cdef int depth = 0
    if type(d) is int:
        if d < 0:
            raise ValueError(f"dims must be >= 0, got {d}")
        if d > _MAX_DIM:
            raise ValueError(f"dims must fit in int64 (at most {_MAX_DIM}), got {d}")
        return d
    if isinstance(d, str):
        s = <str>d
        if not s or s != s.strip():
            raise ValueError(f"symbolic dim must be a non-empty string without outer spaces, got {s!r}")
        if s.lstrip("-").isdigit():
            raise ValueError(f"symbolic dim {s!r} looks like an integer; pass the int instead")
        for ch in s:
            if ch in _DIM_FORBIDDEN:
                raise ValueError(f"symbolic dim {s!r} may not contain {ch!r}")
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth < 0:
                    break
            elif ch == "," and depth == 0:
                raise ValueError(f"symbolic dim {s!r} has a comma outside parentheses")
        if depth != 0:
            raise ValueError(f"symbolic dim {s!r} has unbalanced parentheses")
        return s
    if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
        return check_dim(int(d))
    raise TypeError(f"a dim must be an int >= 0 or a str symbol, got {type(d).__name__} {d!r}")


def format_dim(d):
    """A dim as the text form writes it."""
    return d if isinstance(d, str) else str(d)


cdef class Type:
    """Base of all value types: immutable, compared, hashed and pickled by their constructor arguments."""

    def __init__(self, *args):
        # The base holds no type: only its subclasses (which set `_args` in __cinit__) are types.
        if type(self) is Type or self._args is None:
            raise TypeError("Type is abstract: use TensorType, ScalarType or TupleType")

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Type):
            return NotImplemented
        o = <Type>other
        return type(o) is type(self) and o._hash == self._hash and o._args == self._args

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __reduce__(self):
        return (type(self), self._args)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join([repr(a) for a in self._args])})"


cdef class TensorType(Type):
    """An array of `dtype` and `shape`; dims are ints or symbol strings (e.g. `"B"`, `"B*4"`)."""

    def __cinit__(self, dtype, shape):
        self.dtype = normalize_dtype(dtype)
        self.dtype_name = _NAME_OF[self.dtype]
        if type(shape) is not tuple:
            if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
                raise TypeError(f"TensorType shape must be a tuple of dims, got {shape!r}")
            shape = tuple(shape)
        for d in <tuple>shape:
            if type(d) is not int or d < 0 or d > _MAX_DIM:
                shape = tuple([check_dim(x) for x in <tuple>shape])
                break
        self.shape = <tuple>shape
        self._args = (self.dtype_name, self.shape)
        self._hash = hash(self._args)
        self._text = None

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def is_concrete(self):
        """True when every dim is an int (no symbols)."""
        for d in self.shape:
            if type(d) is not int:
                return False
        return True

    def __str__(self):
        if self._text is None:
            self._text = f"{self.dtype_name}[{', '.join([format_dim(d) for d in self.shape])}]"
        return self._text


cdef class ScalarType(Type):
    """A Python scalar (`int`, `float`, `bool`, `complex`): weak in NumPy type promotion (NEP 50)."""

    def __cinit__(self, str kind):
        if kind not in SCALAR_KINDS:
            raise ValueError(f"ScalarType kind must be one of {SCALAR_KINDS}, got {kind!r}")
        self.kind = kind
        self._args = (kind,)
        self._hash = hash(("scalar", kind))

    def __str__(self):
        return self.kind


cdef class TupleType(Type):
    """A tuple of types (nested tuples allowed)."""

    def __cinit__(self, elements):
        elements = tuple(elements)
        for e in elements:
            if not isinstance(e, Type):
                raise TypeError(f"TupleType elements must be types, got {type(e).__name__} {e!r}")
        self.elements = elements
        self._args = (elements,)
        self._hash = hash(("tuple", elements))

    def __len__(self):
        return len(self.elements)

    def __iter__(self):
        return iter(self.elements)

    def __getitem__(self, i):
        return self.elements[i]

    def __str__(self):
        if len(self.elements) == 1:
            return f"({self.elements[0]},)"
        return "(" + ", ".join([str(e) for e in self.elements]) + ")"
