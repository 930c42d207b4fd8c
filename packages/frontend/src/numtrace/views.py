"""How a traced view relates to its base: read it again after the base changed, write it back into the base.

NumPy's views share memory with their base, so a write into one is a write into the other. The graph is
functional: a view is a node computing a new value, so the tracer keeps, for each view, a recipe that
re-reads it from the base's latest graph value (after a write into the base) and one that turns a write
into the view into the base's new value:

- ``indexing.BasicIndex``: ``x[1:]``, ``x[0]``, ``x[:, None]`` (``np.getitem`` / ``np.setitem``);
- ``Regrouped``: reshape, ravel, squeeze, expand_dims (the op again / a reshape to the base's shape);
- ``Permuted``: transpose, ``.T``, swapaxes, moveaxis (the op again / the inverse transpose).

The op facts come from the registry (``OpDef.view``), not from op names.

Whether NumPy's reshape (ravel, ...) returns a view depends on the array's layout: ``x.reshape(-1)`` of
a Fortran-ordered or strided ``x`` is a copy. A write through a reshape, view or copy, therefore makes
the trace's meaning depend on the layouts of the arguments it was traced with: the tracer is told
(`note_layout_write`) and the trace then refuses calls whose arguments are laid out otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .traced_value import is_traced_array, unwrap


class _OpView:
    """A view made by a registry op: re-read by recording the op again on the base's latest value."""

    __slots__ = ("op", "extra", "attrs")

    def __init__(self, op: str, extra: list, attrs: dict):
        self.op, self.extra, self.attrs = op, extra, attrs

    def read(self, tracer: Any, base: Any, concrete: np.ndarray) -> Any:
        return tracer.record_node(self.op, [base, *self.extra], self.attrs, concrete,
                                  exact=self.op.startswith("prim.")).output


class Regrouped(_OpView):
    """All of the base's elements in C order, in another shape: written back by a reshape."""

    __slots__ = ()
    layout_dependent = True   # another layout of the same base may have made NumPy copy

    def write(self, tracer: Any, base: Any, view: Any) -> Any:
        return np.reshape(view, base.shape)._ir  # type: ignore[attr-defined]  # a TracedArray via NEP 18


class _ReshapedCopy:
    """The mark (`TracedArray._view` with no parent) of a reshape that NumPy copied: writes into it stay
    in the copy, though with another layout they would have reached the base."""

    __slots__ = ()
    layout_dependent = True


RESHAPED_COPY = _ReshapedCopy()


def note_layout_write(tracer: Any, array: Any) -> None:
    """Called for each array a write reaches: a write through a reshape (view or copy) makes the trace
    depend on its arguments' layouts (see the module docstring), and on which of their dims are 1 (the
    transpose of a C-contiguous (1, n) array is C-contiguous too): those are guarded, so that at shapes
    with other unit dims the function is traced again. Not for a reshape of a C-contiguous argument
    itself: that is a view at every shape, and the argument's layout is checked per call."""
    if not getattr(array._view, "layout_dependent", False):
        return
    tracer.layout_dependent = True
    base = array._parent
    argument = base is not None and any(base is p for p in tracer.input_proxies) and all(
        base is not p for p in tracer.state_proxies())
    if (argument and base._concrete.flags.c_contiguous) or tracer.unit_dims_guarded:
        return
    tracer.unit_dims_guarded = True
    for proxy in tracer.input_proxies:
        for d in proxy.shape:
            bool(d == 1)   # records the guard


def layout_of(a: np.ndarray) -> Any:
    """What decides whether NumPy's reshapes of `a` (and of what is computed from it) are views: "C",
    "F", or for any other layout its exact shape and strides."""
    if a.flags.c_contiguous:
        return "C"
    if a.flags.f_contiguous:
        return "F"
    return (tuple(a.shape), tuple(a.strides))


def layout_text(layout: Any) -> str:
    if layout == "C":
        return "C-contiguous"
    if layout == "F":
        return "Fortran-ordered"
    return f"a strided array of shape {layout[0]} and strides {layout[1]}"


class Permuted(_OpView):
    """The base with its axes permuted by ``perm``: written back by the inverse permutation."""

    __slots__ = ("inverse",)

    def __init__(self, op: str, extra: list, attrs: dict, perm: tuple):
        super().__init__(op, extra, attrs)
        self.inverse = tuple(int(i) for i in np.argsort(perm))

    def write(self, tracer: Any, base: Any, view: Any) -> Any:
        return np.transpose(view, self.inverse)._ir  # type: ignore[attr-defined]  # a TracedArray via NEP 18


def op_view(op: Any, func: Any, args: tuple, kwargs: dict, inputs: list, attrs: dict, result: Any) -> Any:
    """The recipe for ``result`` of registry op ``op`` if NumPy made it a view of its first input (a
    traced array), else None."""
    base: Any = inputs[0] if inputs else None
    if op.view is None or not is_traced_array(base) or not is_traced_array(result):
        return None
    if result._concrete.size == 0 or not np.shares_memory(result._concrete, base._concrete):
        # NumPy copied (``ravel`` of a transposed array): writes do not reach the base
        if op.view == "reshape" and result._concrete.size:
            result._view = RESHAPED_COPY
        return None
    if op.view == "reshape":
        if attrs.get("order", "C") != "C":
            return None
        return Regrouped(op.name, inputs[1:], attrs)
    perm = _permutation(func, args, kwargs, base._concrete)
    return None if perm is None else Permuted(op.name, inputs[1:], attrs, perm)


def _permutation(func: Any, args: tuple, kwargs: dict, base: np.ndarray) -> tuple | None:
    """Which base axis each axis of ``func(base, ...)`` is, read from the strides of the same call on a
    stand-in whose axes all have distinct strides."""
    ndim = base.ndim
    probe = np.lib.stride_tricks.as_strided(np.zeros(ndim + 1), shape=(1,) * ndim,
                                            strides=tuple(8 * (i + 1) for i in range(ndim)))
    try:
        moved = func(probe, *unwrap(args[1:]), **unwrap(kwargs))
    except Exception:
        return None
    by_stride = {8 * (i + 1): i for i in range(ndim)}
    axes = [by_stride.get(s) for s in getattr(moved, "strides", ())]
    perm = tuple(a for a in axes if a is not None)  # a stride of no base axis: not a permutation
    return perm if len(perm) == len(axes) == ndim and sorted(perm) == list(range(ndim)) else None
