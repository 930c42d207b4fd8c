"""Movement ops as views: each op's `OpDef.as_view` (the NumPy call that returns its view) applied to a
stand-in array laid out like the input buffer.

The registry's references may copy (graph values never alias), so the planner cannot ask them
whether an op is a view; it applies ``as_view`` (a "rule" here) to the stand-in and reads the view's
offset and strides off NumPy's answer (a copy there means the op is not a view for that layout).
``out`` is the node's output shape when concrete; ``prim.*`` ops take their target shape from the
traced dims (``extra``, folded values).
"""

from __future__ import annotations

import numpy as np

from .kernel_plan import View, c_strides, numel

__all__ = [
    "SAME_VALUE",
    "order_preserving_shapes",
    "permuted_layout",
    "view_result",
]


# Copies of an immutable value are the value itself (when the dtype is kept).
SAME_VALUE = frozenset({"np.copy", "np.ascontiguousarray"})


def view_result(
    rule, out_shape: tuple, attrs: dict, extra: list, view: View, n_out: int
) -> list[View] | None:
    """The strided views ``rule`` gives for an array laid out like ``view``, or None if not strided.

    First on a stand-in sharing no real data (NumPy answers with views, whatever the size); if NumPy
    copies, on an array of element offsets (small buffers only): when each result's offsets are an
    affine function of its index (``ravel(order="F")``, a negative-step copy...), that is a view too.
    """
    itemsize = view.dtype.itemsize
    lo = view.offset + sum(s * (n - 1) for s, n in zip(view.strides, view.shape) if s < 0)
    hi = view.offset + sum(s * (n - 1) for s, n in zip(view.strides, view.shape) if s > 0) + 1
    if lo < 0:
        raise AssertionError("view reaches before its buffer")
    backing = np.empty(hi, dtype=view.dtype)  # virtual memory: view ops never touch it
    array = np.lib.stride_tricks.as_strided(
        backing[view.offset :], view.shape, tuple(s * itemsize for s in view.strides)
    )
    results = _as_list(rule(array, out_shape, attrs, extra), n_out)
    out = []
    for r in results:
        if r.size == 0:
            out.append(View(view.buffer, view.dtype, 0, r.shape, (0,) * r.ndim))
            continue
        offset_bytes = r.ctypes.data - backing.ctypes.data
        if (
            r.dtype != view.dtype
            or not np.may_share_memory(r, backing)
            or offset_bytes % itemsize
            or any(s % itemsize for s in r.strides)
        ):
            return _affine_result(rule, out_shape, attrs, extra, view, n_out, hi)
        out.append(
            View(
                view.buffer,
                view.dtype,
                offset_bytes // itemsize,
                r.shape,
                tuple(s // itemsize for s in r.strides),
            )
        )
    return out


_AFFINE_LIMIT = 1 << 22  # elements: beyond this, a copying movement op is not analysed


def _affine_result(rule, out_shape, attrs, extra, view: View, n_out: int, extent: int) -> list[View] | None:
    if extent > _AFFINE_LIMIT:
        return None
    offsets = np.arange(extent, dtype=np.int64)
    array = np.lib.stride_tricks.as_strided(
        offsets[view.offset :], view.shape, tuple(s * 8 for s in view.strides)
    )
    out = []
    for r in _as_list(rule(array, out_shape, attrs, extra), n_out):
        r = np.asarray(r)
        base = int(r.flat[0]) if r.size else 0
        strides = tuple(
            int(r[(0,) * d + (1,) + (0,) * (r.ndim - d - 1)]) - base if n > 1 else 0
            for d, n in enumerate(r.shape)
        )
        expected = base + sum(
            np.arange(n).reshape((n,) + (1,) * (r.ndim - d - 1)) * s
            for d, (n, s) in enumerate(zip(r.shape, strides))
        )
        if r.size and not np.array_equal(r, np.broadcast_to(expected, r.shape)):
            return None
        out.append(View(view.buffer, view.dtype, base, r.shape, strides))
    return out


def _as_list(result, n_out: int) -> list[np.ndarray]:
    if result is None:  # `as_view` has no view for these attrs (the planner refuses those first)
        raise AssertionError("a movement op without a strided view reached the view planner")
    return [np.asarray(r) for r in result] if n_out > 1 else [np.asarray(result)]


def order_preserving_shapes(
    rule, out_shape: tuple, attrs: dict, extra: list, shape: tuple[int, ...]
) -> tuple[tuple[int, ...]] | None:
    """``(new_shape,)`` if ``rule`` on a C-contiguous array keeps the elements in C order (a reshape)."""
    view = View(0, np.dtype(np.uint8), 0, shape, c_strides(shape))
    try:
        results = view_result(rule, out_shape, attrs, extra, view, 1)
    except NotImplementedError:
        return None
    if not results:
        return None
    (r,) = results
    preserved = (
        r.offset == 0
        and numel(r.shape) == numel(shape)
        and all(s == c for s, c, n in zip(r.strides, c_strides(r.shape), r.shape) if n != 1)
    )
    return (r.shape,) if preserved else None


def permuted_layout(
    rule, out_shape: tuple, attrs: dict, extra: list, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """For a rule that only permutes dims (transpose, swapaxes, moveaxis), ``(result_shape, strides)``:
    the strides that store an array of ``shape`` into a C-contiguous buffer of the result's shape, so
    that the permuted view of it is contiguous. None for any other rule."""
    view = View(0, np.dtype(np.uint8), 0, shape, c_strides(shape))
    try:
        results = view_result(rule, out_shape, attrs, extra, view, 1)
    except NotImplementedError:
        return None
    if not results or results[0].offset != 0 or numel(results[0].shape) != numel(shape):
        return None
    (r,) = results
    target = c_strides(r.shape)
    source = c_strides(shape)
    strides = []
    used: set[int] = set()
    for d, n in enumerate(shape):
        if n == 1:
            strides.append(0)
            continue
        match = [
            j
            for j, (m, s) in enumerate(zip(r.shape, r.strides))
            if m == n and s == source[d] and j not in used
        ]
        if len(match) != 1:
            return None
        used.add(match[0])
        strides.append(target[match[0]])
    return r.shape, tuple(strides)
