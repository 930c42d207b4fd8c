"""Attribute values: which static Python values a node may carry, and their exact text form.

The text form is the identity of an attribute: the printer, CSE and graph equality all use it, so
`nan` equals `nan`, `0.0` differs from `-0.0` and `1` differs from `True`, as a trace needs.
"""

import math

import numpy as np

from numtrace_ir.types cimport TensorType

from numtrace_ir.types import normalize_dtype

__all__ = ["Abbreviate", "check_attr", "format_array", "format_attr", "format_float"]

# Tuples and slices nest at most this deep: the recursive code here must never exhaust the C stack.
MAX_ATTR_DEPTH = 64


cdef _check_depth(int depth, str where):
    if depth > MAX_ATTR_DEPTH:
        raise TypeError(f"{where}: attribute values may nest at most {MAX_ATTR_DEPTH} levels deep")


cpdef object check_attr(object value, str where, int depth=0):
    """Raise `TypeError` naming `where` unless `value` is an attribute value the IR can hold."""
    cdef type t = type(value)
    if value is None or t is bool or t is int or t is float or t is str or value is Ellipsis:
        return
    if t is complex:
        return
    if t is tuple or t is slice:
        _check_depth(depth, where)
        for v in (<tuple>value if t is tuple else (value.start, value.stop, value.step)):
            check_attr(v, where, depth + 1)
        return
    if issubclass(type(value), (np.dtype, np.ndarray)):
        # Arrays and dtypes are limited to the IR's dtypes (bool, int, uint, float, complex).
        try:
            normalize_dtype(value if isinstance(value, np.dtype) else value.dtype)
        except TypeError as e:
            raise TypeError(f"{where}: {e}") from None
        return
    raise TypeError(
        f"{where}: {t.__name__} {value!r} is not an attribute value; expected None, bool, int, float, "
        "complex, str, tuple, slice, Ellipsis, numpy.dtype or numpy.ndarray")


cpdef str format_float(object x):
    """Shortest text that reads back to the same value (`inf`, `-inf`, `nan` spelled plainly)."""
    cdef double d = x
    if math.isfinite(d):
        return repr(d)
    if d != d:
        return "nan"
    return "inf" if d > 0 else "-inf"


cdef str _format_element(object x, str kind):
    # NumPy's str of a scalar is the shortest text that reads back exactly in that scalar's own dtype.
    if kind == "f":
        return str(x)
    if kind == "c":
        return f"complex({_format_element(x.real, 'f')}, {_format_element(x.imag, 'f')})"
    if kind == "b":
        return "True" if x else "False"
    return str(int(x))


class Abbreviate:
    """An `array_ref` for the human-facing text (`str(graph)`): arrays of more than `limit` elements
    print as `array(f32[784, 512]; ...)`, smaller ones in full. The parser rejects the `...` form
    with a clear error, so an abbreviated text is never mistaken for the graph."""

    __slots__ = ("limit",)

    def __init__(self, limit):
        self.limit = int(limit)


cpdef str format_array(object arr, object array_ref=None):
    """`array(f32[2, 2]; 1.0, 2.0, 3.0, 4.0)`: the type, then the elements in C order.

    With `array_ref` (a callable taking the array), the elements are replaced by `@"<member>"`, the
    name that callable returns: saved graphs keep their arrays as separate `.npy` members. With an
    `Abbreviate(limit)`, arrays of more than `limit` elements print as `array(f32[784, 512]; ...)`.
    """
    cdef str kind = arr.dtype.kind
    head = str(TensorType(arr.dtype, arr.shape))
    if array_ref is not None:
        if type(array_ref) is Abbreviate:
            if arr.size > (<object>array_ref).limit:
                return f"array({head}; ...)"
        else:
            return f"array({head}; @{array_ref(arr)!r})"
    flat = np.ascontiguousarray(arr).reshape(-1)
    if kind == "f" and arr.dtype.itemsize == 8:
        body = ", ".join([format_float(v) for v in flat.tolist()])
    elif kind in "iu":
        body = ", ".join([str(v) for v in flat.tolist()])
    else:
        body = ", ".join([_format_element(v, kind) for v in flat])
    return f"array({head}; {body})"


cpdef str format_attr(object value, object array_ref=None, int depth=0):
    """The text form of an attribute value (see the module docstring); the parser reads it back."""
    cdef type t = type(value)
    if t is tuple or t is slice:
        _check_depth(depth, "format_attr")
    if t is int or t is bool or value is None:
        return repr(value)
    if t is float:
        return format_float(value)
    if t is str:
        return repr(value)
    if t is tuple:
        if len(<tuple>value) == 1:
            return "(" + format_attr((<tuple>value)[0], array_ref, depth + 1) + ",)"
        return "(" + ", ".join([format_attr(v, array_ref, depth + 1) for v in <tuple>value]) + ")"
    if value is Ellipsis:
        return "..."
    if t is complex:
        return f"complex({format_float(value.real)}, {format_float(value.imag)})"
    if t is slice:
        return "slice(" + ", ".join([format_attr(v, array_ref, depth + 1)
                                     for v in (value.start, value.stop, value.step)]) + ")"
    if isinstance(value, np.dtype):
        return f"dtype({TensorType(value, ()).dtype_name})"
    if issubclass(type(value), np.ndarray):
        return format_array(value, array_ref)
    raise TypeError(f"{t.__name__} {value!r} is not an attribute value")
