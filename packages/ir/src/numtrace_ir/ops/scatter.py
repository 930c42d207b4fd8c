"""Scatters: ``ufunc.at`` (`np.ufunc.at`), `np.put` and `np.put_along_axis`, as functional ops that
return the updated copy of their first input (the tracer writes it back into the caller's array, as
for ``x[key] = v``).

``ufunc.at`` applies the ufunc once per index, in index order, so a repeated index accumulates
(``np.add.at(a, [0, 0], 1)`` adds 2), where ``a[idx] += v`` would apply it once. Its key is
`np.setitem`'s: the attr ``index`` with ``"input"`` placeholders filled by the index inputs, which
come first in ``operands``; the second operand of a binary ufunc is the last one. `np.put` and
`np.put_along_axis` assign (a repeated index keeps the last value). An index out of range raises
NumPy's ``IndexError`` when the op runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.foreign import resolve_ufunc
from numtrace_ir.ops.indexing import (
    INPUT,
    _index_memo_key,
    _key,
    _to_index,
    indexed_shape,
    split_key,
    value_fits,
)
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Sample, register, register_target
from numtrace_ir.types import TensorType

__all__ = ["SCATTER_OPS", "plain_sequence"]

# The ops of NumPy functions that write into their first argument (and return None): each returns the
# updated copy, to which the tracer rebinds that argument.
SCATTER_OPS = ("np.ufunc.at", "np.put", "np.put_along_axis")


def plain_sequence(name: str, v: Any) -> Any:
    """A list or tuple argument as the array NumPy makes of it; `NotImplementedError` (the call is then
    a host call) when it holds anything but numbers (traced arrays: the op cannot hold them)."""
    if not isinstance(v, (list, tuple)):
        return v

    def plain(e):
        return isinstance(e, (int, float, complex, bool, np.generic)) or (
            isinstance(e, (list, tuple)) and all(plain(x) for x in e))

    if not plain(v):
        raise NotImplementedError(f"{name}: a sequence holding arrays is not an op argument")
    return np.asarray(v)


# -- ufunc.at ------------------------------------------------------------------------------------------

def _ufunc_of(v: Any) -> np.ufunc:
    ufunc = resolve_ufunc(v)
    if ufunc.nout != 1 or ufunc.nin not in (1, 2):
        raise ValueError(f"{v}.at: only ufuncs of one or two inputs and one output have .at")
    return ufunc


def _checked_ufunc(v: Any) -> str:
    _ufunc_of(v)
    return v


def _split(name: str, ufunc: np.ufunc, index: tuple, operands: list) -> tuple[list, list]:
    """The operands as (index inputs, [the ufunc's second operand] or [])."""
    k = sum(e == INPUT for e in index)
    if len(operands) != k + ufunc.nin - 1:
        raise TypeError(f"{name}: index {index} and a ufunc of {ufunc.nin} inputs take "
                        f"{k + ufunc.nin - 1} operands, got {len(operands)}")
    return operands[:k], operands[k:]


def _at_rule(types, attrs):
    ufunc = _ufunc_of(attrs["ufunc"])
    name = f"{attrs['ufunc']}.at"
    t = rules.first_tensor(name, types)
    idx, value = _split(name, ufunc, attrs["index"], list(types[1:]))
    target = indexed_shape(name, t, attrs["index"], tuple(idx), "nnz")
    if value:
        value_fits(name, rules.shape_of(value[0]), target)
    # The ufunc must have a loop; its result is cast back into the array unsafely, as NumPy does.
    rules.ufunc_dtypes(name, ufunc, (TensorType(t.dtype, ()), *value))
    return t


def _at_impl(a, operands, ufunc, index):
    u = _ufunc_of(ufunc)
    idx, value = _split(f"{ufunc}.at", u, index, list(operands))
    out = np.array(a, copy=True)
    u.at(out, tuple(_key(f"{ufunc}.at", index, idx)), *value)
    return out


def _at_binder(name: str):
    def bind(args, kwargs):
        if kwargs or len(args) not in (2, 3):
            raise TypeError(f"{name}.at: expected (a, indices[, b])")
        key = plain_sequence(f"{name}.at", args[1]) if isinstance(args[1], list) else args[1]
        try:
            index, inputs = split_key(key)
        except TypeError as exc:   # a key the op cannot hold (traced slice bounds): a host call
            raise NotImplementedError(f"{name}.at: {exc}") from None
        return [args[0], *inputs, *args[2:]], {"ufunc": name, "index": index}

    return bind


def _at_samples(rng):
    x = lambda shape, dt="f8": sampling.array(rng, shape, dt)
    dup = np.array([0, 2, 2, -1, 0, 2])
    for ufunc in ("numpy.add", "numpy.subtract", "numpy.multiply", "numpy.maximum", "numpy.minimum"):
        for dt in ("f8", "f4", "i8", "i4"):
            yield Sample((x((5,), dt), dup, x((6,), dt)), {"ufunc": ufunc, "index": (INPUT,)})
    yield Sample((x((5,), "i1"), dup, np.int8(100)), {"ufunc": "numpy.add", "index": (INPUT,)},
                 note="int8 wraps")
    yield Sample((x((5,), "f8"), dup, 1.5), {"ufunc": "numpy.add", "index": (INPUT,)}, note="scalar")
    yield Sample((x((5,), "f8"), dup), {"ufunc": "numpy.negative", "index": (INPUT,)}, note="unary")
    yield Sample((x((4, 3), "f8"), np.array([1, 1, 3]), x((3, 3), "f8")),
                 {"ufunc": "numpy.add", "index": (INPUT,)}, note="rows")
    yield Sample((x((4, 3), "f8"), np.array([0, 2, 2]), x((4, 1), "f8")),
                 {"ufunc": "numpy.add", "index": (slice(None), INPUT)}, note="columns")
    yield Sample((x((4, 3), "i8"), np.array([0, 3, 0]), np.array([1, 1, 1]), x((3,), "i8")),
                 {"ufunc": "numpy.add", "index": (INPUT, INPUT)}, note="tuple of arrays")
    yield Sample((x((4, 3), "f8"), sampling.array(rng, (4, 3), bool), 1.0),
                 {"ufunc": "numpy.add", "index": (INPUT,)}, note="mask")
    yield Sample((x((5,), "f8"), np.array([0, 4, 0]), np.array([-np.inf, np.inf, 2.0])),
                 {"ufunc": "numpy.maximum", "index": (INPUT,)}, note="infinities")
    yield Sample((x((5,), "?"), dup, sampling.array(rng, (6,), bool)),
                 {"ufunc": "numpy.logical_or", "index": (INPUT,)})
    yield Sample((x((5,), "f8"), np.zeros(0, np.intp), x((0,), "f8")),
                 {"ufunc": "numpy.add", "index": (INPUT,)},
                 note="empty index")
    yield Sample((x((5,), "f8"), 2.0), {"ufunc": "numpy.add", "index": (slice(1, None, 2),)}, note="slice")


_AT = register(
    OpDef(
        "np.ufunc.at",
        "index",
        [
            Input("a"),
            Inputs("operands", "any", star=True, minimum=0),
            Attr("ufunc", convert=_checked_ufunc),
            Attr("index", convert=_to_index),
        ],
        _at_rule,
        _at_impl,
        samples=_at_samples,
        memo_key=lambda attrs: ((attrs or {}).get("ufunc"), _index_memo_key(attrs)),
        pure=False,
        doc="functional ``ufunc.at(a, key[, b])`` (the ufunc by its dotted name): the updated copy, the "
        "ufunc applied once per index in index order, so repeated indices accumulate. A backend that "
        "adds atomically (Triton) sums repeated float indices in another order: equal within the "
        "summation tolerance, not bit for bit",
    )
)

for _name in dir(np):  # every NumPy ufunc that has .at
    _ufunc = getattr(np, _name)
    if isinstance(_ufunc, np.ufunc) and _ufunc.nout == 1 and _ufunc.nin in (1, 2) \
            and _ufunc.__name__ == _name:
        register_target(_ufunc, "at", _AT.variant(binder=_at_binder(f"numpy.{_name}")))


# -- np.put ----------------------------------------------------------------------------------------------

_MODES = ("raise", "wrap", "clip")


def _mode(v: Any) -> str:
    if v not in _MODES:
        raise ValueError(f"np.put: mode must be one of {_MODES}, got {v!r}")
    return v


def _index_dtype(name: str, t) -> None:
    """NumPy casts an index to intp by the 'safe' rule."""
    weak = {"int": np.dtype(np.intp), "bool": np.dtype(bool)}
    dt = t.dtype if isinstance(t, TensorType) else weak.get(t.kind)
    if dt is None or not np.can_cast(dt, np.intp, "safe"):
        raise TypeError(f"{name}: indices must be integers, got {t}")


def _put_rule(types, attrs):
    t, ind, v = types
    _index_dtype("np.put", ind)
    if isinstance(v, TensorType) and v.dtype.kind == "c" and t.dtype.kind != "c":
        raise TypeError(f"np.put: cannot store complex {v} into {t}")
    return t


def _put_impl(a, ind, v, mode):
    out = np.array(a, copy=True)
    np.put(out, ind, v, mode=mode)
    return out


def _put_bind(args, kwargs):
    names = ["a", "ind", "v", "mode"]
    for k in kwargs:
        if k not in names:
            raise TypeError(f"np.put: unexpected keyword argument {k!r}")
    named = dict(zip(names, args), **kwargs)
    if len(named) < 3:
        raise TypeError("np.put: expected (a, ind, v, mode='raise')")
    return [named["a"], plain_sequence("np.put", named["ind"]), plain_sequence("np.put", named["v"])], \
        {"mode": named.get("mode", "raise")}


def _put_samples(rng):
    for dt in sampling.DTYPES:
        a, v = sampling.array(rng, (3, 4), dt), sampling.array(rng, (4,), dt)
        yield Sample((a, np.array([0, 5, 5, -1]), v), {"mode": "raise"})
    yield Sample((sampling.array(rng, (5,), "f8"), np.array([1, 9, -8]), sampling.array(rng, (2,), "f8")),
                 {"mode": "wrap"}, note="values repeat")
    yield Sample((sampling.array(rng, (5,), "i4"), np.array([[1, 9], [-8, 2]]), 7), {"mode": "clip"})
    yield Sample((sampling.array(rng, (5,), "f8"), np.zeros(0, np.intp), 1.0), {"mode": "raise"},
                 note="empty")


register(
    OpDef(
        "np.put",
        "index",
        [Input("a"), Input("ind", "any"), Input("v", "any"), Attr("mode", "raise", _mode)],
        _put_rule,
        _put_impl,
        numpy_targets=[np.put],
        samples=_put_samples,
        binder=_put_bind,
        pure=False,
        doc="functional ``np.put(a, ind, v, mode)``: the updated copy (values repeat to the indices' "
        "count; a repeated index keeps the last value)",
    )
)


# -- np.put_along_axis -----------------------------------------------------------------------------------

def _along_rule(types, attrs):
    name = "np.put_along_axis"
    t, ind, v = types
    if not isinstance(ind, TensorType):
        raise TypeError(f"{name}: indices must be an array, got {ind}")
    _index_dtype(name, ind)
    axis = attrs["axis"]
    if axis is None:
        if ind.ndim != 1:
            raise ShapeError(f"{name}: when axis=None, `indices` must have a single dimension")
    else:
        rules.axis(name, axis, t.ndim)
        if ind.ndim != t.ndim:
            raise ShapeError(f"{name}: `indices` and `arr` must have the same number of dimensions")
        ax = axis % t.ndim   # NumPy's index: aranges over arr's other axes, broadcast with indices
        target = rules.broadcast(name, t.shape[:ax] + (1,) + t.shape[ax + 1:], ind.shape)
        value_fits(name, rules.shape_of(v), target)   # (flat: the values repeat, as np.put's do)
    if isinstance(v, TensorType) and v.dtype.kind == "c" and t.dtype.kind != "c":
        raise TypeError(f"{name}: cannot store complex {v} into {t}")
    return t


def _along_impl(arr, indices, values, axis):
    out = np.array(arr, copy=True)
    np.put_along_axis(out, indices, values, axis)
    return out


def _along_samples(rng):
    x = lambda shape, dt="f8": sampling.array(rng, shape, dt)
    yield Sample((x((3, 4)), rng.integers(-4, 4, (3, 2)), x((3, 2))), {"axis": 1})
    yield Sample((x((3, 4), "i8"), rng.integers(0, 3, (1, 4)), 5), {"axis": 0}, note="broadcast")
    yield Sample((x((3, 4)), np.array([0, 11, 11]), x((3,))), {"axis": None}, note="flat")
    yield Sample((x((3, 4)), np.zeros((3, 0), np.intp), 1.0), {"axis": -1}, note="empty")


register(
    OpDef(
        "np.put_along_axis",
        "index",
        [Input("arr"), Input("indices"), Input("values", "any"), Attr("axis", convert=rules.to_int_or_none)],
        _along_rule,
        _along_impl,
        numpy_targets=[np.put_along_axis],
        samples=_along_samples,
        pure=False,
        doc="functional ``np.put_along_axis(arr, indices, values, axis)``: the updated copy",
    )
)
