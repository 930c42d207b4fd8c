"""NumPy callables for the steps that run NumPy's own code on planned buffers: ``fn(*inputs, out=o)``
for an `IntoStep` (the reference's loop without its temporary) and a static basic index as a view.
"""

from __future__ import annotations

import numpy as np
from numtrace_ir import registry
from numtrace_ir.interpreter import at_location
from numtrace_ir.ops.foreign import resolve_ufunc
from numtrace_ir.registry import OpDef
from numtrace_ir.types import TensorType

from numtrace_cpu import threads
from numtrace_cpu.classify import opdef_of, tensor_type
from numtrace_cpu.isa import blocks
from numtrace_cpu.linalg_into import decomposition_into

__all__ = ["RowArg", "basic_index_view", "into_call", "scatter_call"]

# The ops this module reads by identity (a misspelt name fails at import).
(_MATMUL, _STACK, _CONCATENATE, _GETITEM, _TRIU, _TRIL, _DIAG, _OUTER, _FULL, _AT, _PUT, _ALONG) = map(
    registry.get, ("np.matmul", "np.stack", "np.concatenate", "np.getitem", "np.triu", "np.tril", "np.diag",
                   "np.outer", "prim.full", "np.ufunc.at", "np.put", "np.put_along_axis"))
# Ops whose NumPy function takes ``out=`` and the op's attrs as its keywords, with the reference's
# own computation: the NaN-aware reductions NumPy warns in, the one-axis FFTs, the vector gufuncs. (NumPy's
# n-d FFTs write each axis's pass into out=, and read it back wrongly: they run as fallbacks.)
_OUT_KEYWORD_OPS = frozenset(map(registry.get, (
    "np.nanmean", "np.nanvar", "np.nanstd", "np.nanmax", "np.nanmin", "np.nanargmax", "np.nanargmin",
    "np.fft.fft", "np.fft.ifft", "np.fft.rfft", "np.fft.irfft", "np.vecdot", "np.matvec", "np.vecmat",
    "np.cumulative_sum", "np.cumulative_prod")))


def into_call(node):
    """``fn(*inputs, out=o)`` computing the node with NumPy's own function into a given array, for
    ops whose NumPy function takes ``out=`` with the same loop as the reference (``out=(o1, o2)`` for
    the multi-output decompositions of `linalg_into`); None otherwise."""
    outs = node.outputs
    op = opdef_of(node)
    linalg = decomposition_into(op, node)
    if linalg is not None:
        return linalg
    if len(outs) != 1 or not isinstance(outs[0].type, TensorType) or not outs[0].type.is_concrete:
        return None
    if op is _FULL:   # the shape is known: its dims inputs are not read
        return _fill_into(node.attrs["fill_value"])
    ins = [tensor_type(v) for v in node.inputs]
    if not ins or any(t is None or not t.is_concrete for t in ins):
        return None
    out_dt = outs[0].type.dtype
    attrs = node.attrs
    layout = _layout_into(op, ins, out_dt, attrs)
    if layout is not None:
        return layout
    kind = op.reduction if op is not None else None
    if kind in ("cumsum", "cumprod") and ins[0].ndim >= 1 and out_dt.kind in "biuf":
        fn = np.cumsum if kind == "cumsum" else np.cumprod
        axis = attrs.get("axis")

        def scan(a, out):
            fn(a, axis=axis, dtype=out_dt, out=out)
        return scan
    if kind in ("argmin", "argmax") and 0 not in tuple(ins[0].shape) and out_dt == np.dtype(np.intp):
        fn = np.argmin if kind == "argmin" else np.argmax
        axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))
        nd = ins[0].ndim
        if ins[0].dtype in _ROW_ARG_DTYPES and axis is not None and nd and axis % nd == nd - 1:
            return RowArg(fn, kind == "argmax", keepdims)

        def arg(a, out):
            fn(a, axis=axis, out=out, keepdims=keepdims)
        return arg
    if (op is _STACK or op is _CONCATENATE) and out_dt.kind in "biufc" and all(t.ndim >= 1 or op is _STACK
                                                                               for t in ins):
        fn = np.stack if op is _STACK else np.concatenate
        axis = attrs.get("axis", 0)
        casting = "same_kind" if attrs.get("dtype") is None else "unsafe"

        def join(*arrays, out):
            fn(arrays, axis=axis, out=out, casting=casting)
        return join
    if op is _MATMUL and len(ins) == 2 and min(t.ndim for t in ins) >= 1 and out_dt.kind in "biufc":
        return _out_call(np.matmul)
    if op in _OUT_KEYWORD_OPS and out_dt.kind in "biufc":
        return _keyword_call(at_location(op.numpy_targets[0][0], node), attrs)
    return None


_ROW_ARG_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


class RowArg:
    """``argmin``/``argmax`` along the last axis of a float array into the planned buffer: numtrace's
    row loop (blocks.row_arg_extreme: NumPy's first extreme or first NaN, without NumPy's per-row
    setup, which costs ~20 ns a row of 8) where the input is contiguous, NumPy's otherwise. `runs`
    counts the calls the row loop answered (stats()["row_arg_runs"])."""

    def __init__(self, fn, want_max: bool, keepdims: bool):
        self.fn, self.want_max, self.keepdims, self.runs = fn, want_max, keepdims, 0

    def __call__(self, a, out):
        if blocks.row_arg_extreme(a, out, self.want_max, threads.get_num_threads()):
            self.runs += 1
        else:
            self.fn(a, axis=-1, out=out, keepdims=self.keepdims)


def _keyword_call(fn, attrs):
    """``fn(*inputs, **attrs, out=out)`` for ops whose attrs are the NumPy function's keywords (`fn`
    called from the node's line: NumPy's warnings for its caller name the user's line)."""
    kwargs = {k: v for k, v in attrs.items() if k != "omitted"}

    def call(*arrays, out):
        fn(*arrays, **kwargs, out=out)
    return call


def _out_call(fn):
    """``fn(*inputs, out=out)``: a NumPy function that takes ``out=`` with the reference's own loop."""
    def call(*arrays, out):
        fn(*arrays, out=out)
    return call


def _fill_into(value):
    """``np.full``'s own assignment (``copyto`` with unsafe casting) into the planned buffer."""
    copyto = np.copyto

    def fill(*dims, out):
        copyto(out, value, casting="unsafe")
    return fill


def _layout_into(op: OpDef | None, ins: list, out_dt: np.dtype, attrs: dict):
    """Into-buffer forms of triu/tril (a mask fixed by the shape), diag and outer; None for others.
    Each gives the reference's values: triu/tril are ``where(mask, a, 0)``, diag's 2-d form a copy of
    the diagonal and its 1-d form zeros with `a` on it, outer ``multiply`` of the raveled inputs."""
    copyto = np.copyto
    if (op is _TRIU or op is _TRIL) and ins[0].dtype == out_dt and ins[0].ndim >= 2:
        k = int(attrs.get("k", 0))
        rows, cols = ins[0].shape[-2:]
        tri_mask = np.tri(rows, cols, k if op is _TRIL else k - 1, dtype=bool)
        keep = tri_mask if op is _TRIL else ~tri_mask

        def tri(a, out):
            out.fill(0)
            copyto(out, a, where=keep)
        return tri
    if op is _DIAG and ins[0].dtype == out_dt and ins[0].ndim in (1, 2):
        k = int(attrs.get("k", 0))
        if ins[0].ndim == 2:
            def diagonal(a, out):
                copyto(out, np.diagonal(a, k))
            return diagonal
        n = ins[0].shape[0]
        rows, cols = np.arange(n) + max(-k, 0), np.arange(n) + max(k, 0)

        def diag(a, out):
            out.fill(0)
            out[rows, cols] = a
        return diag
    if op is _OUTER and len(ins) == 2 and out_dt.kind in "biufc":
        return _out_call(np.outer)
    return None


def scatter_call(node):
    """``scatter(out, *operands)`` doing a scatter op's write into ``out`` (holding its array) with
    NumPy's own function: ``ufunc.at`` applies the ufunc per index in index order, as the reference
    does, so repeated float indices accumulate to the same bits. None for other ops."""
    op, attrs = opdef_of(node), node.attrs
    if op is _AT:
        ufunc, index = resolve_ufunc(attrs["ufunc"]), tuple(attrs["index"])
        k = sum(e == "input" for e in index)

        def at(out, *operands):
            it = iter(operands[:k])
            ufunc.at(out, tuple(next(it) if e == "input" else e for e in index), *operands[k:])
        return at
    if op is _PUT:
        mode, put = attrs.get("mode", "raise"), np.put

        def put_into(out, ind, v):
            put(out, ind, v, mode=mode)
        return put_into
    if op is _ALONG:
        axis, put_along = attrs["axis"], np.put_along_axis

        def along(out, ind, v):
            put_along(out, ind, v, axis)
        return along
    return None


def basic_index_view(node):
    """``x[key]`` for a static key (ints, slices, None, Ellipsis) as NumPy's own view: the reference
    copies (its results are values), which would turn a free slice into a pass over the data."""
    if opdef_of(node) is not _GETITEM or len(node.inputs) != 1:
        return None
    key = tuple(node.attrs["index"])
    if Ellipsis not in key:
        key += (Ellipsis,)   # keeps an all-int key a 0-d array, not a NumPy scalar
    return lambda a: a[key]
