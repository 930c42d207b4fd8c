"""What every traced value is, below the modules that define the kinds of them.

The tracer, dispatch and views work on ``TracedValue`` alone: the graph value a traced value stands
for (``_ir``), the value NumPy computed for it while tracing (``_concrete``) and its tracer. The
kinds (``traced_int.TracedInt``/``TracedFloat``, ``proxy.TracedArray``) sit above them and register
under the graph type they stand for, so the tracer wraps new graph values without importing them.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["TracedValue", "guarded", "is_traced_array", "unwrap"]


class TracedValue:
    """A value of a trace: its tracer, its graph value and its concrete value (an array or a number)."""

    __slots__ = ("_concrete", "_ir", "_tracer")

    # The graph type its kind stands for: "tensor", "int" or "float" (None for an abstract class).
    _kind: ClassVar[str | None] = None
    # The class of each kind, filled as the kinds are defined (see ``Tracer.wrap``).
    _of_kind: ClassVar[dict[str, type[TracedValue]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("_kind")
        if kind is not None:
            if kind in TracedValue._of_kind:
                raise TypeError(f"{cls.__name__}: traced values of kind {kind!r} are already "
                                f"{TracedValue._of_kind[kind].__name__}")
            TracedValue._of_kind[kind] = cls

    def __init__(self, tracer: Any, graph_value: Any, concrete: Any) -> None:
        self._tracer = tracer
        self._ir = graph_value
        self._concrete = concrete

    def _graph_value(self, tracer: Any) -> Any:
        """The graph value, for an op of ``tracer``'s graph (refused for another trace's value)."""
        raise NotImplementedError

    def _static(self, where: str) -> Any:
        """This value as a static attribute of a node (``where`` names the attribute)."""
        raise NotImplementedError

    def guarded(self) -> Any:
        """A traced number's plain value, guarded (arrays have none: `_guarded` keeps them traced)."""
        raise NotImplementedError


def is_traced_array(obj: Any) -> bool:
    """Whether ``obj`` is a traced array (``proxy.TracedArray``)."""
    return isinstance(obj, TracedValue) and obj._kind == "tensor"


def _replace(obj: Any, leaf: Any) -> Any:
    """``obj`` with ``leaf(x)`` for each traced array or number ``x`` (tuples, lists, dicts and slices
    walked)."""
    if isinstance(obj, TracedValue):
        return leaf(obj)
    if isinstance(obj, (tuple, list)):
        items = [_replace(x, leaf) for x in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        return {k: _replace(v, leaf) for k, v in obj.items()}
    if type(obj) is slice:
        return slice(_replace(obj.start, leaf), _replace(obj.stop, leaf), _replace(obj.step, leaf))
    return obj


def _concrete(x: TracedValue) -> Any:
    return x._concrete


def _guarded(x: TracedValue) -> Any:
    return x if x._kind == "tensor" else x.guarded()


def unwrap(obj: Any) -> Any:
    """``obj`` with every traced array or number replaced by its concrete value (containers walked)."""
    return _replace(obj, _concrete)


def guarded(obj: Any) -> Any:
    """``obj`` with traced numbers replaced by their values, each guarded (containers and slices
    walked): for values that leave the graph, such as the arguments of a function run as a constant."""
    return _replace(obj, _guarded)
