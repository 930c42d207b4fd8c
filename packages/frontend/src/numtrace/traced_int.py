"""``TracedInt``: a shape read from a traced array (``x.shape[0]``) that stays in the graph.

It *is* an ``int`` (so ``range(n)``, slicing and NumPy calls just work with its
value) and also carries the graph value that computes it (a ``prim.dim`` node, or
scalar arithmetic on such nodes). Where an op takes a scalar as a graph input, the
recorded value is used, so the trace follows the actual shape at run time; where an
op takes it as a static attribute, it is baked in as a plain int.
"""

from __future__ import annotations

import operator
from typing import Any

from .tracer import current_tracer


class TracedScalar:
    """What `TracedInt` and `TracedFloat` share: the tracer and graph value behind a Python number."""

    def __new__(cls, value: Any, tracer: Any, graph_value: Any) -> Any:
        self = super().__new__(cls, value)
        self._tracer = tracer
        self._value = graph_value
        return self

    def _graph_value(self, tracer: Any) -> Any:
        if tracer is not self._tracer:
            raise RuntimeError("a shape value from another trace was used; traced values cannot "
                               "outlive the trace that produced them")
        return self._value

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """``np.sqrt(x.shape[-1])`` and the like are recorded (NumPy would otherwise read the plain number).

        The result is a 0-d traced array, typed as NumPy types it (``np.int64``, not a weak Python int).
        """
        from . import dispatch

        if current_tracer() is not self._tracer:
            return getattr(ufunc, method)(*dispatch.unwrap(inputs), **dispatch.unwrap(kwargs))
        return dispatch.call(ufunc, method, inputs, kwargs)


class TracedInt(TracedScalar, int):
    """An ``int`` whose value was computed from traced shapes; arithmetic on it is recorded."""

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self):
        return (int, (int(self),))


class TracedFloat(TracedScalar, float):
    """A ``float`` computed from traced shapes (``x.shape[-1] ** 0.5`` aside: ``d * 0.5``, ``1 / d``);
    arithmetic on it is recorded, so a scale taken from a shape follows the input at run time."""

    def __repr__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self):
        return (float, (float(self),))


def plain(x: Any) -> Any:
    """The plain Python number of a traced (or plain) int or float."""
    return float(x) if isinstance(x, float) else int(x)


def _binary(name: str, reflected: bool, numbers: tuple):
    """The recorded ``__name__`` (or its reflection) for operands of the types in `numbers`."""
    py_op = getattr(operator, name)
    prim = f"prim.{name}"

    def method(self: TracedScalar, other: Any) -> Any:
        if type(other) not in numbers and not isinstance(other, TracedScalar):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        result = py_op(plain(a), plain(b))
        tracer = self._tracer
        if current_tracer() is not tracer:
            return result
        return tracer.record(prim, [a, b], {}, result)

    method.__name__ = f"__r{name}__" if reflected else f"__{name}__"
    return method


def _neg(self: TracedScalar) -> Any:
    tracer = self._tracer
    if current_tracer() is not tracer:
        return -plain(self)
    return tracer.record("prim.neg", [self], {}, -plain(self))


# The recorded operators and the plain operand types each takes: an int's floor division and modulo
# stay ints; with a float (or true division) the result is a recorded TracedFloat. Other operators
# (``**``, comparisons) give plain numbers.
_FLOAT_OPS = {"add": (int, float), "sub": (int, float), "mul": (int, float), "truediv": (int, float)}
_INT_OPS = {**_FLOAT_OPS, "floordiv": (int,), "mod": (int,)}
for _cls, _ops in ((TracedInt, _INT_OPS), (TracedFloat, _FLOAT_OPS)):
    _cls.__neg__ = _neg
    for _name, _numbers in _ops.items():
        setattr(_cls, f"__{_name}__", _binary(_name, False, _numbers))
        setattr(_cls, f"__r{_name}__", _binary(_name, True, _numbers))
del _cls, _ops, _name, _numbers
