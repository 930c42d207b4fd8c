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

# Python operator -> the prim op that records it on ints (looked up in the registry).
_INT_OPS = {
    "add": "prim.add", "sub": "prim.sub", "mul": "prim.mul",
    "floordiv": "prim.floordiv", "mod": "prim.mod",
}


class TracedInt(int):
    """An ``int`` whose value was computed from traced shapes; arithmetic on it is recorded."""


    def __new__(cls, value: int, tracer: Any, graph_value: Any) -> TracedInt:
        self = super().__new__(cls, value)
        self._tracer = tracer
        self._value = graph_value
        return self

    def _graph_value(self, tracer: Any) -> Any:
        if tracer is not self._tracer:
            raise RuntimeError("a shape value from another trace was used; traced values cannot "
                               "outlive the trace that produced them")
        return self._value

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self):
        return (int, (int(self),))

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """``np.sqrt(x.shape[-1])`` and the like are recorded (NumPy would otherwise read the plain int).

        The result is a 0-d traced array, typed as NumPy types it (``np.int64``, not a weak Python int).
        """
        from . import dispatch

        if current_tracer() is not self._tracer:
            return getattr(ufunc, method)(*dispatch.unwrap(inputs), **dispatch.unwrap(kwargs))
        return dispatch.call(ufunc, method, inputs, kwargs)


def _binary(name: str, reflected: bool):
    py_op = getattr(operator, name)
    prim = _INT_OPS[name]

    def method(self: TracedInt, other: Any) -> Any:
        if type(other) is not int and not isinstance(other, TracedInt):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        result = py_op(int(a), int(b))
        tracer = self._tracer
        if current_tracer() is not tracer:
            return result
        return tracer.record(prim, [a, b], {}, result)

    method.__name__ = f"__r{name}__" if reflected else f"__{name}__"
    return method


def _neg(self: TracedInt) -> Any:
    tracer = self._tracer
    if current_tracer() is not tracer:
        return -int(self)
    return tracer.record("prim.neg", [self], {}, -int(self))


TracedInt.__neg__ = _neg

for _name in _INT_OPS:
    setattr(TracedInt, f"__{_name}__", _binary(_name, False))
    setattr(TracedInt, f"__r{_name}__", _binary(_name, True))
del _name
