"""Traced Python numbers: a shape read from a traced array (``x.shape[0]``, ``x.size``) and arithmetic on it.

A ``TracedInt`` / ``TracedFloat`` holds the plain number seen while tracing (``_concrete``) and the graph
value that computes it from the input shapes (``_ir``). Arithmetic on it (``+ - * / // % **``,
``math.floor``, ``round``) is recorded, so a size computed from shapes follows the input at run time.

They are deliberately *not* ``int``/``float`` subclasses: C code reads a subclass's value without
asking it, so a size could leave the graph silently (``range(n)``, ``np.float32(n)``, a slice bound).
As plain objects, every way a value can leave as a Python number goes through a method here
(``__index__``, ``__int__``, ``__float__``, ``__bool__``, comparisons, ``__array__``), and each of
those records a **guard**: the expression, the value it had, the user's line. A call at shapes that
break a guard re-traces or refuses (see ``traced.py``); it never runs a graph recorded for other shapes.
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any

import numpy as np

from . import dispatch
from .scalar_power import NUMPY_SCALARS, is_scalar_operator, record_scalar_operator, record_scalar_power
from .traced_value import TracedValue, unwrap
from .tracer import current_tracer

_NUMBERS = (bool, int, float, np.integer, np.floating)


class TracedScalar(TracedValue):
    """What ``TracedInt`` and ``TracedFloat`` share: the plain number, its tracer and graph value."""

    __slots__ = ()
    __array_priority__ = 1001  # NumPy scalars and arrays on the left defer to __array_ufunc__

    def _graph_value(self, tracer: Any) -> Any:
        if tracer is not self._tracer:
            raise RuntimeError("a shape value from another trace was used; traced values cannot "
                               "outlive the trace that produced them")
        return self._ir

    def _static(self, where: str) -> Any:
        return self.guarded()

    def _live(self) -> Any:
        """The tracer, while this value's trace is being recorded on this thread; else None."""
        tracer = self._tracer
        return tracer if current_tracer() is tracer else None

    def guarded(self) -> Any:
        """The plain number, for a use the graph cannot follow: records the guard that keeps the trace
        from running at shapes where this number would be different."""
        tracer = self._live()
        if tracer is not None:
            tracer.guard(self._ir, self._concrete)
        return self._concrete

    def _guarded_result(self, op: str, args: list, result: Any) -> Any:
        """``result`` of recording ``op`` on this value, guarded: the guard holds while the *result*
        stays the same (``int(0.8 * n)`` keeps a trace for every n with the same integer part)."""
        tracer = self._live()
        if tracer is not None:
            tracer.guard(tracer.record_node(op, [self, *args], {}, result).output, result)
        return result

    # -- leaving the graph: each is a guard -------------------------------------------------------
    def __bool__(self) -> bool:
        return self._guarded_result("prim.ne", [0], self._concrete != 0)

    def __int__(self) -> int:
        if isinstance(self._concrete, int):
            return self.guarded()
        return self._guarded_result("prim.int", [], int(self._concrete))

    def __float__(self) -> float:
        return float(self.guarded())

    def __complex__(self) -> complex:
        return complex(self.guarded())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.guarded(), dtype=dtype)

    # Hashing and text read the exact value: a dict or set lookup can miss without ever comparing
    # (``n in {5, 7}`` at n = 6), and text goes anywhere. Each is a guard on the value.
    def __hash__(self) -> int:
        return hash(self.guarded())

    def __repr__(self) -> str:
        return repr(self.guarded())

    def __str__(self) -> str:
        return str(self.guarded())

    def __format__(self, spec: str) -> str:
        return format(self.guarded(), spec)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """``isinstance(x.shape[0], int)`` (and ``numbers.Integral``) holds as in NumPy; ``type()`` still
        names the traced class, and C code still reads the value only through the guarded protocols."""
        return type(self._concrete)

    def __reduce__(self) -> tuple:
        return (type(self._concrete), (self._concrete,))

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    # -- NumPy --------------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """``np.sqrt(x.shape[-1])`` and the like are recorded; the result is a 0-d traced array typed as
        NumPy types it (``np.float64``, not a weak Python float)."""
        if current_tracer() is not self._tracer:
            return getattr(ufunc, method)(*unwrap(inputs), **unwrap(kwargs))
        if is_scalar_operator(ufunc, method, inputs, kwargs, sys._getframe(1)):   # np.int8(2) + n
            return record_scalar_operator(self._tracer, ufunc, *inputs)
        return dispatch.call(ufunc, method, inputs, kwargs)

    # -- rounding: recorded, the results are traced ints ---------------------------------------------
    def _rounded(self, name: str, fn: Any) -> Any:
        tracer = self._live()
        if tracer is None:
            return fn(self._concrete)
        if isinstance(self, TracedInt):
            return self  # already whole
        return tracer.record(f"prim.{name}", [self], {}, fn(self._concrete))

    def __floor__(self) -> Any:
        return self._rounded("floor", math.floor)

    def __ceil__(self) -> Any:
        return self._rounded("ceil", math.ceil)

    def __trunc__(self) -> Any:
        return self._rounded("int", math.trunc)

    def __round__(self, ndigits: Any = None) -> Any:
        if ndigits is not None:
            return round(self.guarded(), ndigits)
        return self._rounded("round", round)

    # -- the number protocol's parts: a real number is its own real part and conjugate ---------------
    @property
    def real(self) -> Any:
        return self

    @property
    def imag(self) -> Any:
        return type(self._concrete)(0)

    def conjugate(self) -> Any:
        return self

    def _guarded_method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The plain number's method ``name``: a use the graph does not record, so a guard."""
        return getattr(self.guarded(), name)(*args, **kwargs)


class TracedInt(TracedScalar):
    """An int computed from traced shapes; arithmetic on it is recorded, other uses are guarded."""

    __slots__ = ()
    _kind = "int"
    from_bytes = int.from_bytes   # a class method of int: no value of this one is read

    def __index__(self) -> int:
        return self.guarded()

    @property
    def numerator(self) -> Any:
        return self

    @property
    def denominator(self) -> int:
        return 1

    def bit_length(self) -> int:
        """Guarded on the range of numbers with this bit length (``2**(k-1) <= |n| < 2**k``), not on the
        number: a trace that reads it keeps serving every size with the same bit length."""
        n = self._concrete
        k = n.bit_length()
        lo, hi = (1 << k >> 1), 1 << k
        # Each comparison records its guard (both hold for the traced n).
        bounds = (self >= lo, self < hi) if n >= 0 else (self > -hi, self <= -lo)
        assert all(bounds)
        return k

    def bit_count(self) -> int:
        return self._guarded_method("bit_count")

    def to_bytes(self, *args: Any, **kwargs: Any) -> bytes:
        return self._guarded_method("to_bytes", *args, **kwargs)

    def as_integer_ratio(self) -> tuple:
        return (self, 1)

    if hasattr(int, "is_integer"):  # Python 3.12
        def is_integer(self) -> bool:
            return True


class TracedFloat(TracedScalar):
    """A float computed from traced shapes (``d * 0.5``, ``1 / d``, ``d ** 0.5``); arithmetic on it is
    recorded, so a scale taken from a shape follows the input at run time."""

    __slots__ = ()
    _kind = "float"

    def is_integer(self) -> bool:
        return self._guarded_method("is_integer")

    def as_integer_ratio(self) -> tuple[int, int]:
        return self._guarded_method("as_integer_ratio")

    def hex(self) -> str:
        return self._guarded_method("hex")


def plain(x: Any) -> Any:
    """The plain Python number of a traced (or plain) number, read without a guard: only for code that
    records the number's graph value as well."""
    return x._concrete if isinstance(x, TracedScalar) else x


def _is_real(x: Any) -> bool:
    # By type: a traced array NumPy gives as a scalar says it is an np.float64 to isinstance, and it
    # must reach its own reflected operator (recorded), not be read as a plain number here.
    return issubclass(type(x), (*_NUMBERS, TracedScalar)) and not issubclass(type(x), complex)


def _records_pow(a: Any, b: Any) -> bool:
    """``a ** b`` is recorded unless its result kind could change with the traced values: an int power
    is an int only while the exponent is not negative, so an int exponent must be a plain literal."""
    if isinstance(plain(a), float) or isinstance(plain(b), float):
        return True
    return not isinstance(b, TracedScalar) and plain(b) >= 0


def _binary(name: str, reflected: bool):
    """The recorded ``__name__`` (or its reflection) for real number operands."""
    py_op = getattr(operator, name)
    prim = f"prim.{name}"

    def method(self: TracedScalar, other: Any) -> Any:
        if type(other) is complex:   # not a graph value: computed on the guarded number (``n * 1j``)
            return py_op(other, self.guarded()) if reflected else py_op(self.guarded(), other)
        if name == "pow" and isinstance(other, NUMPY_SCALARS) and self._live() is not None:
            # NumPy's scalar ``**`` (``n ** np.float64(0.5)``): its scalar math, C pow, not np.power's loop
            return record_scalar_power(self._live(), *((other, self) if reflected else (self, other)))
        if not _is_real(other) or isinstance(other, np.generic):
            # A NumPy scalar's type is strong (``n * np.float64(0.5)`` is an np.float64, ``n - np.uint8(1)``
            # a uint8 that wraps): its reflected operator records NumPy's ufunc, typed as NumPy types it.
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        result = py_op(plain(a), plain(b))
        tracer = self._live()
        if tracer is None:
            return result
        if name == "pow" and not _records_pow(a, b):
            return py_op(a.guarded() if isinstance(a, TracedScalar) else a,
                         b.guarded() if isinstance(b, TracedScalar) else b)
        return tracer.record(prim, [a, b], {}, result)

    method.__name__ = f"__r{name}__" if reflected else f"__{name}__"
    return method


def _compare(name: str):
    """``n < 3`` and friends: recorded, and guarded, since Python branches on the plain bool."""
    py_op = getattr(operator, name)

    def method(self: TracedScalar, other: Any) -> Any:
        # ``n == 4 + 0j``: on the guarded number, as arithmetic with a complex is (NotImplemented would
        # leave Python comparing identities: False, where the plain int gives True)
        if type(other) is complex:
            return py_op(self.guarded(), other)
        if not _is_real(other):
            return NotImplemented
        if isinstance(other, (np.integer, np.floating)):
            other = other.item()
        result = py_op(self._concrete, plain(other))
        tracer = self._live()
        if tracer is not None:
            tracer.guard(tracer.record_node(f"prim.{name}", [self, other], {}, result).output, result)
        return result

    method.__name__ = f"__{name}__"
    return method


def _guarded_binary(name: str, reflected: bool):
    """An operator the graph does not record (``&``, ``<<``, ``divmod``): computed on guarded numbers."""
    py_op = divmod if name == "divmod" else getattr(operator, f"{name}_" if name in ("and", "or") else name)
    accepts = _is_real if name == "divmod" else (lambda x: issubclass(type(x), (int, np.integer, TracedInt)))

    def method(self: TracedScalar, other: Any) -> Any:
        if not accepts(other):
            return NotImplemented
        mine = self.guarded()
        theirs = other.guarded() if isinstance(other, TracedScalar) else other
        return py_op(theirs, mine) if reflected else py_op(mine, theirs)

    method.__name__ = f"__r{name}__" if reflected else f"__{name}__"
    return method


def _neg(self: TracedScalar) -> Any:
    tracer = self._live()
    if tracer is None:
        return -self._concrete
    return tracer.record("prim.neg", [self], {}, -self._concrete)


def _pos(self: TracedScalar) -> Any:
    return self


def _abs(self: TracedScalar) -> Any:
    return abs(self.guarded())


for _cls in (TracedInt, TracedFloat):
    _methods = {"__neg__": _neg, "__pos__": _pos, "__abs__": _abs,
                "__divmod__": _guarded_binary("divmod", False),
                "__rdivmod__": _guarded_binary("divmod", True)}
    for _name, _method in _methods.items():
        setattr(_cls, _name, _method)
    for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
        setattr(_cls, f"__{_name}__", _binary(_name, False))
        setattr(_cls, f"__r{_name}__", _binary(_name, True))
    for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(_cls, f"__{_name}__", _compare(_name))
for _name in ("and", "or", "xor", "lshift", "rshift"):
    setattr(TracedInt, f"__{_name}__", _guarded_binary(_name, False))
    setattr(TracedInt, f"__r{_name}__", _guarded_binary(_name, True))
for _name, _method in {"__invert__": lambda self: ~self.guarded()}.items():
    setattr(TracedInt, _name, _method)
del _cls, _name, _methods, _method
