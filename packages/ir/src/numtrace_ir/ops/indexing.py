"""Indexing ops: ``x[key]`` (`np.getitem`: basic and integer-array indexing; `np.getitem_mask`:
boolean masks, whose result size is data-dependent) and functional ``x[key] = v`` (`np.setitem`, the
updated copy).

The key is the attr ``index``: a tuple of ints, slices (int bounds), None and Ellipsis, with the
string ``"input"`` where an index array is taken from the node's inputs, in order, after the indexed
array. Use `index_op(key)` to pick the getitem op for a key.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import IndexShapeError, ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Sample, register
from numtrace_ir.types import ScalarType, TensorType

INPUT = "input"  # marks an index position filled by the next index input
# The attr naming an op's data-dependent dim (a boolean mask's count, the number of unique values): a
# symbol, which the tracer makes one per node so that unrelated counts never unify.
DATA_SIZE = Attr("size", "nnz", lambda v: dims.normalize(str(v)))


def _static_entry(v) -> bool:
    return v is None or v is Ellipsis or (type(v) is int) or type(v) is slice


def split_key(key: Any) -> tuple[tuple, list]:
    """``x[key]``'s key -> (index attr, index inputs). Ints, slices with int bounds, None and Ellipsis
    are static; anything else (arrays, proxies, lists) becomes an input."""
    entries = key if type(key) is tuple else (key,)
    index, inputs = [], []
    for e in entries:
        if isinstance(e, (bool, np.bool_)):
            raise NotImplementedError("indexing with a Python bool (x[True]) is not an op")
        if isinstance(e, np.integer):
            e = int(e)
        if type(e) is slice:
            for b in (e.start, e.stop, e.step):
                if b is not None and not isinstance(b, (int, np.integer)):
                    raise TypeError(f"slice bounds must be ints or None, got {type(b).__name__} {b!r}")
            e = slice(*(None if b is None else int(b) for b in (e.start, e.stop, e.step)))
        if _static_entry(e):
            index.append(e)
        else:
            index.append(INPUT)
            inputs.append(e)
    return tuple(index), inputs


def index_op(key: Any) -> str:
    """The getitem op for `key`: ``np.getitem_mask`` when an index is a boolean array."""
    entries = key if type(key) is tuple else (key,)
    masked = any(getattr(getattr(e, "dtype", None), "kind", None) == "b" for e in entries)
    return "np.getitem_mask" if masked else "np.getitem"


def _to_index(v):
    v = v if type(v) is tuple else (v,)
    if sum(e is Ellipsis for e in v) > 1:
        raise ValueError("an index can only have a single ellipsis ('...')")
    for e in v:
        if not (_static_entry(e) or e == INPUT):
            raise TypeError(f"index entries are ints, slices, None, Ellipsis or {INPUT!r}, got {e!r}")
    return v


def indexed_shape(name: str, t: TensorType, index: tuple, idx_types: tuple, mask_dim: Any) -> tuple:
    """NumPy's result shape of ``x[index]``; each boolean mask contributes one dim `mask_dim`."""
    entries = _key(name, index, idx_types)
    if any(type(e) is ScalarType and e.kind != "int" for e in entries):
        raise TypeError(f"{name}: scalar indices must be ints, got {entries}")
    used = sum(_consumes(e) for e in entries if e is not Ellipsis)
    if used > t.ndim:
        raise ShapeError(f"{name}: too many indices for {t}: {used} dims indexed")
    if Ellipsis in entries:
        i = entries.index(Ellipsis)
        entries[i : i + 1] = [slice(None)] * (t.ndim - used)
    else:
        entries += [slice(None)] * (t.ndim - used)
    has_array = any(isinstance(e, (TensorType, ScalarType)) for e in entries)
    before: list[dims.Dim] = []
    after: list[dims.Dim] = []
    adv_shapes: list[tuple] = []
    positions: list[int] = []
    pos_dim = 0
    for k, e in enumerate(entries):
        if e is None:
            (after if positions else before).append(1)
            continue
        if type(e) is slice:
            (after if positions else before).append(rules.slice_len(name, t.shape[pos_dim], e))
            pos_dim += 1
            continue
        if type(e) is int:
            d = t.shape[pos_dim]
            if type(d) is int and not -d <= e < d:
                raise IndexShapeError(f"{name}: index {e} is out of bounds for axis {pos_dim} with size {d}")
            pos_dim += 1
            if has_array:
                positions.append(k)
                adv_shapes.append(())
            continue
        if type(e) is ScalarType or e.dtype.kind in "iu":
            positions.append(k)
            adv_shapes.append(rules.shape_of(e))
            pos_dim += 1
            continue
        if e.dtype.kind != "b":
            raise TypeError(f"{name}: index arrays must be integer or boolean, got {e}")
        if mask_dim is None:
            raise TypeError(
                f"{name}: boolean mask index {e}: use np.getitem_mask (its size is data-dependent)"
            )
        covered = t.shape[pos_dim : pos_dim + e.ndim]
        for a, (m, d) in enumerate(zip(e.shape, covered)):
            if type(m) is int and type(d) is int and m != d:
                raise ShapeError(f"{name}: boolean index {e} does not match {t} at axis {pos_dim + a}")
        positions.append(k)
        adv_shapes.append((mask_dim,))
        pos_dim += e.ndim
    if not positions:
        return tuple(before)
    adv = rules.broadcast(name, *adv_shapes)
    if positions[-1] - positions[0] + 1 == len(positions):
        return tuple(before) + adv + tuple(after)
    return adv + tuple(before) + tuple(after)


def _consumes(e) -> int:
    if e is None:
        return 0
    if type(e) is TensorType and e.dtype.kind == "b":
        return e.ndim
    return 1


def _key(name: str, index: tuple, indices: Sequence) -> list:
    """The index with each ``"input"`` placeholder replaced by the next of `indices` (their types in a
    rule, their values in a reference); `TypeError` when the counts differ."""
    n = sum(e == INPUT for e in index)
    if n != len(indices):
        raise TypeError(f"{name}: index {index} has {n} 'input' placeholders but {len(indices)} index inputs")
    it = iter(indices)
    return [next(it) if e == INPUT else e for e in index]


def _index_memo_key(attrs):
    """`infer`'s memo key for the index ops: slices (unhashable before Python 3.12) as bound triples,
    which no other index entry can be."""
    attrs = attrs or {}
    index = attrs.get("index", ())
    index = index if type(index) is tuple else (index,)
    return (tuple((e.start, e.stop, e.step) if type(e) is slice else e for e in index), attrs.get("size"))


def _getitem_rule(name, masked):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        shape = indexed_shape(name, t, attrs["index"], types[1:], attrs["size"] if masked else None)
        return TensorType(t.dtype, shape)

    return rule


def _getitem_bind(args, kwargs):
    if kwargs or len(args) != 2:
        raise TypeError("np.getitem: expected (array, key)")
    index, inputs = split_key(args[1])
    return [args[0], *inputs], {"index": index}


def _getitem_mask_bind(args, kwargs):
    inputs, attrs = _getitem_bind(args, {})
    if kwargs.keys() - {"size"}:
        raise TypeError(f"np.getitem_mask: unexpected keyword argument(s) {sorted(kwargs)}")
    return inputs, {**attrs, **kwargs}


def _getitem_samples(rng):
    x = lambda shape=(4, 5, 6), dt="f8": sampling.array(rng, shape, dt)
    idx = lambda shape, bound: rng.integers(-bound, bound, shape)
    for dt in sampling.DTYPES:
        yield Sample((x((3, 4), dt),), {"index": (1,)})
    for index in [
        (slice(1, None), 2),
        (Ellipsis, None, slice(None, None, -2)),
        (slice(-2, 1, -1),),
        (0, 0, 0),
        (None, slice(2, 3), Ellipsis),
        (slice(10, 20),),
        (),
    ]:
        yield Sample((x(),), {"index": index})
    yield Sample((x(()),), {"index": (None, Ellipsis)}, note="0-d")
    yield Sample((x((0, 3)),), {"index": (slice(None), 1)}, note="empty")
    # Integer arrays: adjacent (result in place) and separated (result first) advanced indices.
    yield Sample((x(), idx((2, 3), 4)), {"index": (INPUT,)})
    yield Sample((x(), idx((2,), 5), idx((3, 1), 6)), {"index": (slice(None), INPUT, INPUT)})
    yield Sample((x(), idx((2,), 4), idx((2,), 6)), {"index": (INPUT, slice(1, 3), INPUT)})
    yield Sample(
        (x(), idx((), 4), 1), {"index": (INPUT, INPUT, slice(None))}, note="0-d array and traced int"
    )
    yield Sample((x(), idx((2,), 5)), {"index": (1, slice(None), INPUT)}, note="int with array, apart")
    yield Sample((x((3, 4)), idx((0,), 3)), {"index": (INPUT, None)})


def _mask_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (3, 4), bool)),
                     {"index": (INPUT,)})
    yield Sample((sampling.array(rng, (3, 4, 2), "f8"), sampling.array(rng, (4,), bool)),
                 {"index": (slice(None), INPUT)})
    yield Sample(
        (sampling.array(rng, (3, 4, 2), "f8"), sampling.array(rng, (3,), bool), rng.integers(0, 2, (1,))),
        {"index": (INPUT, slice(None), INPUT)},
    )
    yield Sample((sampling.array(rng, (0, 2), "f8"), sampling.array(rng, (0,), bool)), {"index": (INPUT,)})


def _getitem_view(a: np.ndarray, out: tuple, attrs: dict, dims: list) -> np.ndarray | None:
    """``a[key]`` as NumPy's view for a static key (ints, slices, None, Ellipsis); None for a key with
    arrays (a gather: NumPy copies)."""
    index = attrs["index"]
    if INPUT in index:
        return None
    # With an Ellipsis, NumPy returns a 0-d view instead of a scalar for a full integer index.
    return a[index] if Ellipsis in index else a[tuple(index) + (Ellipsis,)]


register(
    OpDef(
        "np.getitem",
        "index",
        [Input("a"), Inputs("indices", "any", star=True, minimum=0), Attr("index", convert=_to_index)],
        _getitem_rule("np.getitem", False),
        lambda a, indices, index: np.array(a[tuple(_key("np.getitem", index, indices))]),
        numpy_targets=[operator.getitem, np.ndarray.__getitem__],
        samples=_getitem_samples,
        binder=_getitem_bind,
        memo_key=_index_memo_key,
        as_view=_getitem_view,
        doc="basic and integer-array indexing; `index` holds the static key with 'input' placeholders",
    )
)

register(
    OpDef(
        "np.getitem_mask",
        "index",
        [
            Input("a"),
            Inputs("indices", "any", star=True, minimum=0),
            Attr("index", convert=_to_index),
            DATA_SIZE,
        ],
        _getitem_rule("np.getitem_mask", True),
        lambda a, indices, index, size: a[tuple(_key("np.getitem_mask", index, indices))],
        samples=_mask_samples,
        binder=_getitem_mask_bind,
        memo_key=_index_memo_key,
        data_dependent_shape=True,
        doc="boolean-mask indexing; `size` names the symbol of the data-dependent dim (the tracer "
        "gives each mask node its own)",
    )
)


def value_fits(name: str, value: tuple, target: tuple) -> None:
    """`ShapeError` unless a value of shape `value` broadcasts to the indexed shape `target`."""
    try:
        got = dims.broadcast_shapes(value, target)
    except ShapeError:
        got = None
    if (
        got is None
        or len(got) > len(target)
        or not all(
            dims.equal(a, b) or type(b) is not int or type(a) is not int
            for a, b in zip(got[-len(target) :], target)
        )
    ):
        raise ShapeError(f"{name}: value of shape {value} cannot be broadcast to the indexed shape {target}")


def _setitem_rule(types, attrs):
    name = "np.setitem"
    t = rules.first_tensor(name, types)
    value_fits(name, rules.shape_of(types[-1]), indexed_shape(name, t, attrs["index"], types[1:-1], "nnz"))
    if type(types[-1]) is TensorType and types[-1].dtype.kind == "c" and t.dtype.kind != "c":
        raise TypeError(f"{name}: cannot store complex {types[-1]} into {t}")
    return t


def _setitem_bind(args, kwargs):
    if kwargs or len(args) != 3:
        raise TypeError("np.setitem: expected (array, key, value)")
    index, inputs = split_key(args[1])
    return [args[0], *inputs, args[2]], {"index": index}


def _setitem_impl(a, indices, value, index):
    out = np.array(a, copy=True)
    out[tuple(_key("np.setitem", index, indices))] = value
    return out


def _setitem_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (4,), dt)), {"index": (1,)})
    yield Sample((sampling.array(rng, (3, 4), "f8"), 2.5), {"index": (slice(None), slice(1, 3))})
    yield Sample(
        (sampling.array(rng, (3, 4), "f4"), sampling.array(rng, (3, 4), bool), 0.0),
        {"index": (INPUT,)},
        note="mask",
    )
    yield Sample(
        (sampling.array(rng, (4, 5), "f8"), rng.integers(0, 4, (2,)), sampling.array(rng, (2, 1), "f8")),
        {"index": (INPUT, slice(None, 1))},
    )
    yield Sample((sampling.array(rng, (4, 5), "i8"), sampling.array(rng, (5,), "f8")),
                 {"index": (Ellipsis,)}, note="cast")
    yield Sample((sampling.array(rng, (), "f8"), 1.0), {"index": ()}, note="0-d")
    yield Sample((sampling.array(rng, (0, 3), "f8"), sampling.array(rng, (3,), "f8")), {"index": ()},
                 note="empty")


register(
    OpDef(
        "np.setitem",
        "index",
        [
            Input("a"),
            Inputs("indices", "any", star=True, minimum=0),
            Input("value", "any"),
            Attr("index", convert=_to_index),
        ],
        _setitem_rule,
        _setitem_impl,
        numpy_targets=[operator.setitem, np.ndarray.__setitem__],
        samples=_setitem_samples,
        binder=_setitem_bind,
        memo_key=_index_memo_key,
        pure=False,
        doc="functional ``a[key] = value``: returns the updated copy (value cast as NumPy does)",
    )
)
