"""Crash hunt: hypothesis-generated NumPy programs traced and run on every backend.

``backend`` is parametrized by conftest.py (reference, cpu; triton for the marked test, fewer programs).

A program is a list of steps over an environment of arrays that starts with the arguments (two float
arrays and an integer array). Steps cover ufuncs, reductions, basic/mask/integer-array indexing, in-place
writes (into arguments too), views written through, seeded random draws, creation functions sized by
traced shapes, ndarray methods and NumPy functions the tracer does not support. Each program is traced
on every backend and called at the traced shapes and at another batch size. The contract:

* eager NumPy succeeds -> the traced call returns the same values, dtypes and shapes and leaves the
  arguments as NumPy leaves them, or raises a clear Python exception;
* eager NumPy raises -> tracing or the call raises too;
* never an interpreter crash (faulthandler prints the traceback; the nox ``stress`` session runs
  batches of this file in child processes and fails on any signal exit code).

``NUMTRACE_FUZZ_EXAMPLES`` sets the number of programs (CI default: 200).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings

import numpy as np
import numtrace as nt
import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from layouts import layout_copies, layout_copy

EXAMPLES = int(os.environ.get("NUMTRACE_FUZZ_EXAMPLES", "200"))

# Exceptions that are never a "clear error": they are bugs in numtrace, not messages for the user.
UNCLEAR = (SystemError, AssertionError, NameError, RecursionError, MemoryError)


# In-place steps skip 0-d operands: NumPy's reductions return immutable scalars (whose ``fill`` is a
# no-op and that have no ``__iadd__``), while traced reductions are 0-d arrays; see
# test_fill_on_a_reduction_scalar (test_reliability.py).
def _setitem(a, key, v):
    if np.ndim(a) == 0:
        return a
    a[key] = v
    return a


def _iop(a, name, v):
    if np.ndim(a) == 0:
        return a
    return getattr(a, name)(v)


def _fill(a, v):
    if np.ndim(a):
        a.fill(v)
    return a


def _rows_idx(a):
    return np.array([0, -1, 1]) if a.ndim else np.array([0])


# Steps aimed at the cpu backend's fast paths (see FAST_PATHS below).
def _stack_then_write(a):
    p, q = np.ravel(a) * 2.0, np.ravel(a) - 1.0
    s = np.stack([p, q])
    s[0] = 0.0
    return s + p   # p, written into the joined array, is read after the join was written


def _concatenate_then_write(a, b):
    p, q = np.ravel(a) * 2.0, np.ravel(b) + 1.0
    s = np.concatenate([p, q])
    s[np.array([0, -1])] = 7.0
    return np.concatenate([s, p])


def _column_stack_then_write(a):
    p, q = np.ravel(a) * 3.0, np.ravel(a) ** 2
    s = np.column_stack([p, q])
    s[:, 0] = -0.0
    return s.sum(axis=1) + p


def _small_k(a, sign=1.0):
    if np.ndim(a) == 0 or np.shape(a)[-1] < 3:
        return a
    w = np.array([[1.0, -0.0], [0.5, 2.0], [-0.0, 1.0]])
    return (a * sign)[..., :3] @ w


def _small_k_vector(a):
    """A 1-D right operand over a computed value's rows, which lie back to back (nt_smallk.h's loop)."""
    if np.ndim(a) < 2 or not 1 <= np.shape(a)[-1] <= 8:
        return a
    return (a * 1.5) @ np.array([0.299, -0.0, 0.114, 1.0, -2.0, 0.5, 3.0, -0.25])[:np.shape(a)[-1]]


def _gemv(a):
    v = np.ravel(a)
    w = np.ones((np.size(v), 3)) * np.array([1.0, -1.0, 0.5])
    return np.maximum(v @ w + np.array([0.5, -0.0, 0.0]), 0.0)


# Weights of a GEMV with enough multiply-adds to split over the cpu backend's thread team
# (GEMV_PARALLEL_MIN), signed zeros among them.
_TEAM_W = (np.outer(np.linspace(-1.0, 1.0, 256), np.linspace(0.5, -0.5, 130))
           * np.where(np.arange(130) % 7, 1.0, -0.0))
_TEAM_B = np.where(np.arange(130) % 3, 0.25, -0.0)


def _gemv_team(a):
    return np.maximum(np.sum(a) * np.linspace(-1.0, 1.0, 256) @ _TEAM_W + _TEAM_B, 0.0)


# Seven row chunks of 64, which 2 to 6 threads do not divide: the team cuts each chunk into column
# ranges.
_TEAM_W7 = np.concatenate([_TEAM_W, _TEAM_W[:192] * -0.5])


def _gemv_team_columns(a):
    return np.maximum(np.sum(a) * np.linspace(-1.0, 1.0, 448) @ _TEAM_W7 + _TEAM_B, 0.0)


# 136 float64 columns: rows 17 cache lines apart.
_TEAM_WP = np.concatenate([_TEAM_W, _TEAM_W[:, :6] * -2.0], axis=1)


def _gemv_peeled(a):
    """A GEMV whose weights are a column slice of a computed (256, 136) matrix: its rows start 8 bytes
    past the buffer's (at least 16-byte-aligned) start, never on a 64-byte boundary, so the cpu
    backend computes their first columns apart to align its loads of the others."""
    w = np.sum(a) * _TEAM_WP
    return np.maximum(np.linspace(-1.0, 1.0, 256) @ w[:, 1:] + _TEAM_WP[7, 1:], 0.0)


# A full float sum/mean long enough for the cpu backend to share its one row over two threads in
# rows of a block (300,001 elements: a part block at the end), a NaN and -0.0 terms among them.
_SPLIT_ROW = np.where(np.arange(300_001) % 1001, np.linspace(-1.0, 1.0, 300_001), -0.0)
_SPLIT_ROW[150_000] = np.nan


def _split_row_sum(a):
    e = np.exp(np.sum(a) * _SPLIT_ROW)
    return np.stack([np.mean(e), np.sum(e * -0.5), np.nansum(e)])


def _team_pass(a):
    """An elementwise pass over _SPLIT_ROW long enough for two threads: on the cpu backend's generated
    kernels its chunks split over the thread team."""
    return np.sum(a) * _SPLIT_ROW * 0.5 - _SPLIT_ROW


def _team_softmax(a):
    """A softmax over 512 rows of 128 (an attention block's scores): passes of less work than the
    interpreter's OpenMP threshold that the cpu backend's generated kernels share with the thread team."""
    s = np.reshape(_SPLIT_ROW[:65536], (512, 128)) * (np.sum(a) * 8.0)
    p = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return p / np.sum(p, axis=-1, keepdims=True)


def _head_products(a):
    """Attention's q @ k.T and p @ v over two heads viewed out of (2, 16, 3 * 2 * 8) values of
    _SPLIT_ROW (its NaN, -0.0 and all) times a's sum: on the cpu backend stacks whose leading dims do
    not merge, run on the packed kernels at a table of each product's offsets; v's 8 columns a head
    are a narrow column panel (half tiles)."""
    x = np.reshape(_SPLIT_ROW[149_500:151_036], (2, 16, 48)) * np.sum(a)
    q, k, v = (x[..., i:i + 16].reshape(2, 16, 2, 8).transpose(0, 2, 1, 3) for i in (0, 16, 32))
    return (q @ np.swapaxes(k, -1, -2)) @ v


def _const_col_sums(a):
    """A first-axis sum of an expression whose first operand is a constant (then an int one): on the
    cpu backend's generated kernels, a column-mode pass whose kernel holds its first constant in
    register c0, beside its column index."""
    return np.sum(2.0 * np.atleast_2d(a) - 3, axis=0)


def _argmin_nan_rows(a):
    """argmin and argmax along rows holding NaNs and tied signed zeros (NumPy: the first NaN, else the
    first extreme): on the cpu backend, its row loop."""
    m = np.atleast_2d(a)
    r = np.where(m > 0.7, np.nan, -0.0 * m)
    return np.stack([np.argmin(r, axis=-1), np.argmax(r.astype(np.float32), axis=-1)])


def _gemv_rows(a):
    """A few rows of x times a run-time W (from the input, with signed zeros): the GEMV kernels'
    (M, K) @ (K, N) form."""
    v = np.ravel(a)
    k = np.size(v) // 3
    if k < 1:
        return a
    w = np.multiply.outer(v[:k], np.array([1.0, -0.0, 0.5, -1.0]))
    return np.maximum(v[:3 * k].reshape(3, k) @ w + np.array([0.5, -0.0, 0.0, 1.0]), 0.0)


# Constant weights: products with them run on the cpu backend's packed-weight kernels (signed zeros,
# a zero column and a bias of zeros exercise the sums of -0.0 and ReLU's zero signs).
_PACKED_W = np.array([[1.0, -0.0, 0.5, 0.0, -1.0, 2.0, 0.25, -0.5, 3.0],
                      [-0.0, -0.0, 1.0, 0.0, 0.5, -2.0, 0.0, 1.5, -3.0],
                      [0.5, -0.0, -1.0, 0.0, 0.0, 1.0, -0.25, 0.0, 1.0],
                      [2.0, -0.0, 0.0, 0.0, -0.5, 0.0, 1.0, -1.0, 0.5]])
_PACKED_B = np.array([0.5, -0.0, 0.0, -0.0, 0.0, -0.25, 0.0, 1.0, -0.0])


def _packed(a, residual=False):
    if np.ndim(a) < 2 or np.shape(a)[-1] < 4:
        return a
    s = a[..., :4]
    if residual:
        return s @ _PACKED_W[:, :4] + s
    return np.maximum(s @ _PACKED_W + _PACKED_B, 0.0)


_IM2COL_W = np.ascontiguousarray(_PACKED_W.T)


def _im2col(a):
    """nn.Conv2d's im2col on a 2-D argument as a (1, 1, n, 4) image: the 2x2 windows stacked and
    reshaped, times a constant (9, 4) weight with signed zeros (the cpu backend reads B from the
    windows in place), then a ReLU."""
    if np.ndim(a) != 2 or np.shape(a)[0] < 2 or np.shape(a)[1] < 2:
        return a
    x = a[None, None]
    oh, ow = x.shape[2] - 1, x.shape[3] - 1
    cols = np.stack([x[:, :, i:i + oh, j:j + ow] for i in range(2) for j in range(2)], axis=2)
    return np.maximum(_IM2COL_W @ cols.reshape(-1, 4, oh * ow), 0.0)


def _runtime_product(a):
    """A product of two run-time values with enough rows and columns for the cpu backend's packed
    kernels (a's columns repeated 3 times, its rows 16 times, times its transpose: a strided operand),
    a bias add and a ReLU on signed zeros."""
    if np.ndim(a) != 2:
        return a
    s = np.concatenate([a] * 3, axis=1)
    return np.maximum(np.concatenate([s * -0.0] * 8 + [s] * 8) @ s.T + a[:, 0] * -0.0, 0.0)


def _runtime_rows_product(a):
    """A product of two run-time values whose right operand has contiguous rows (a's columns repeated
    5 times: 20 columns, a full panel of the cpu backend's packed kernels and a partial one), which
    those kernels read where it lies, then a bias of signed zeros and a ReLU."""
    if np.ndim(a) != 2 or np.shape(a)[1] != 4:
        return a
    s = np.concatenate([a] * 5, axis=1)
    return np.maximum(np.concatenate([s.T * -0.0] * 2 + [s.T] * 2) @ s + s[0] * -0.0, 0.0)


def _causal_softmax(a, k=1):
    """Causal attention over a's rows in float32 (the cpu backend: the mask, fixed by the traced shape,
    folded into a constant; exp over its -inf lanes; the float64 softmax @ the float32 values widened to
    a float64 product). k=0 masks all of row 0: -inf - -inf, a row of NaN as NumPy's."""
    if np.ndim(a) != 2:
        return a
    t, d = a.shape
    q = a.astype(np.float32)
    with np.errstate(invalid="ignore"):
        s = np.where(np.triu(np.ones((t, t), dtype=bool), k=k), -np.inf, q @ q.T / np.sqrt(d))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ q


_HEADS_W = np.array([[[1.0, -0.0, 0.5], [0.0, 2.0, -1.0], [-0.5, 0.0, 1.0], [1.0, 1.0, -0.0]],
                     [[-0.0, 1.0, 0.0], [0.5, -0.0, 2.0], [1.0, -1.0, 0.0], [0.0, 0.25, 1.0]]])


def _merge_heads(a, product=True):
    """Attention's merge of its heads: a stack of two products (or a fused pass) over a's rows,
    transposed and reshaped to one row per row of a, which NumPy copies; the cpu backend computes the
    stack in the merged layout instead."""
    if np.ndim(a) != 2 or np.shape(a)[-1] != 4:
        return a
    h = a[None] * np.array([1.0, -0.0])[:, None, None]
    h = h @ _HEADS_W if product else np.sin(h)
    return np.reshape(np.transpose(h, (1, 0, 2)), (len(a), -1)) - 1.0


def _merge_heads_shape(a):
    """`_merge_heads` reshaped to sizes read from ``a.shape`` (a prim.reshape), as attention's
    ``.reshape(batch, length, d)`` does."""
    if np.ndim(a) != 2 or np.shape(a)[-1] != 4:
        return a
    h = (a[None] * np.array([1.0, -0.0])[:, None, None]) @ _HEADS_W
    return np.transpose(h, (1, 0, 2)).reshape(a.shape[0], -1) - 1.0


def _split_sections(a):
    """A product's result split into three sections along its last axis (views of it: no copies), read
    by a product and a pass; one section is returned, so the caller gets a copy of it."""
    if np.ndim(a) != 2 or np.shape(a)[-1] != 4:
        return a
    q, k, v = np.split((a - 0.5) @ _HEADS_W.reshape(4, 6), 3, axis=-1)
    first, rest = np.array_split(v, [1], axis=0)
    return (q @ k.T) @ v + np.exp(-np.abs(k)), first.sum() + rest


def _assign_expr(a, b):
    """Row sums and means of a broadcast difference whose middle dim (2) is shorter than its first (the
    cpu backend's blocks of short rows then walk the first dim; -0.0 sums as NumPy's), then
    ``out[1:-1] = expr`` into a computed array: the pass computing expr writes into out's slice,
    unless expr reads out (then out copies as NumPy does)."""
    if np.ndim(a) == 0 or len(a) < 3:
        return a
    a = a.reshape(len(a), -1)
    d = a[:, None, :] - a[None, :2, :]
    r = (d * d).sum(-1) + np.abs(d).mean(-1) + (d * -0.0).sum(-1)
    out = r * 1.5
    out[1:-1] = r[:-2] - r[2:] * 0.5 if np.shape(b) != np.shape(a) else out[:-2] + r[2:]
    return out


def _pair_sums(a, b):
    """Both reductions of n-body forces over pairs of rows: the short last axis (row blocks) and the
    middle axis (column mode) of an (n, m, k) array."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    d = a[None, :, :] - b[:, None, :]
    r2 = (d ** 2).sum(axis=-1) + 1e-3
    return (d * (1.0 / (r2 * np.sqrt(r2)))[:, :, None]).sum(axis=1)


def _layer_norm(a):
    """A layer norm's statistics over a's last axis: the mean and the variance (and std) of the same
    input in one pass, where the cpu backend's var/std take the mean's block sums."""
    if np.ndim(a) == 0:
        return a
    a = np.concatenate([a] * 40, axis=-1)   # rows longer than the cpu backend's short rows
    mu = np.mean(a, axis=-1, keepdims=True)
    return (a - mu) / np.sqrt(np.var(a, axis=-1, keepdims=True) + 1e-5) + np.std(a, axis=-1, keepdims=True)


def _row_extremes(a):
    """max/min over the short rows of the argument itself and of an expression with NaN lanes: on the
    cpu backend's interpreter, each block of rows folded in one loop."""
    a = np.atleast_2d(a)
    b = np.where(a > 0.8, np.nan, a - 0.5)
    return np.stack([a.max(axis=-1), a.min(axis=-1), b.max(axis=-1), b.min(axis=-1)])


def _int_scalar_math(a):
    """int8 scalars (an element, a reduction's result) and Python ints (a traced size) in NumPy's scalar
    math, binary, divmod and unary, which can overflow (wrapping under the fuzzer's errstate ignore, as
    NumPy's does: -np.int8(-128))."""
    c = (np.ravel(a) > 0.5).astype(np.int8)
    s = np.int8(120) + c.sum(dtype=np.int8) * c[0] - c[-1] // 2 + c.shape[0]
    q, r = divmod(s, 3)
    return a * (abs(-s) + q - r)


def _through_reshape(a, view):
    if np.ndim(a) == 0:
        return a
    v = view(a)
    v[0] = 9.0
    return a


# name -> (arity, function of the operands). Operands are picked from the environment by index.
STEPS = {
    # ufuncs
    "sin": (1, np.sin), "exp": (1, lambda a: np.exp(np.clip(a, -30, 30))), "abs": (1, np.abs),
    "neg": (1, np.negative), "sqrt": (1, np.sqrt), "log1p": (1, np.log1p), "floor": (1, np.floor),
    "tanh": (1, np.tanh), "square": (1, np.square), "sign": (1, np.sign), "isnan": (1, np.isnan),
    "add": (2, np.add), "sub": (2, np.subtract), "mul": (2, np.multiply), "div": (2, np.divide),
    "max2": (2, np.maximum), "min2": (2, np.minimum), "pow": (2, lambda a, b: np.power(np.abs(a), b)),
    "gt": (2, np.greater), "eq": (2, np.equal), "where": (2, lambda a, b: np.where(a > b, a, b)),
    "add_scalar": (1, lambda a: a + 1.5), "rsub_int": (1, lambda a: 3 - a), "floordiv": (2, np.floor_divide),
    "mod": (2, np.mod), "logical_and": (2, lambda a, b: np.logical_and(a > 0.3, b < 0.7)),
    "matmul": (2, lambda a, b: a @ b.T), "dot": (2, np.dot),
    # reductions
    "sum": (1, np.sum), "sum0": (1, lambda a: a.sum(axis=0)),
    "sum_mid": (2, lambda a, b: (np.atleast_2d(a)[:, None, :] * np.atleast_2d(b)[None, :, :]).sum(axis=1)),
    "mean_pairs_last": (2, lambda a, b: np.abs(np.atleast_2d(a)[:, None, :] - np.atleast_2d(b)).mean(-1)),
    "pair_sums": (2, _pair_sums),
    "sum_last_keep": (1, lambda a: a.sum(-1, keepdims=True)),
    "mean": (1, np.mean), "max0": (1, lambda a: a.max(axis=0)), "min": (1, np.min),
    "prod_last": (1, lambda a: a.prod(-1)),
    "argmax": (1, np.argmax), "argmin0": (1, lambda a: a.argmin(axis=0)), "std": (1, np.std),
    "argmin_last": (1, lambda a: np.argmin(a, axis=-1)),
    "argmax_last_keep": (1, lambda a: np.argmax(a, axis=-1, keepdims=True)),
    "var0": (1, lambda a: a.var(axis=0)), "any": (1, lambda a: (a > 0.5).any(axis=-1)), "all": (1, np.all),
    "cumsum": (1, lambda a: np.cumsum(a, axis=-1)), "count_nonzero": (1, np.count_nonzero),
    # indexing
    "tail": (1, lambda a: a[1:]), "rev": (1, lambda a: a[::-1]), "step2": (1, lambda a: a[..., ::2]),
    "mask": (1, lambda a: a[a > 0.5]), "mask_other": (2, lambda a, b: a[b > 0.5]),
    "int_idx": (1, lambda a: a[_rows_idx(a)]), "int_arg_idx": (2, lambda a, i: a[np.asarray(i) % 3]),
    "newaxis": (1, lambda a: a[:, None]), "first": (1, lambda a: a[0]), "last_col": (1, lambda a: a[..., -1]),
    "ellipsis_neg": (1, lambda a: a[..., -2:]), "scalar_idx2": (1, lambda a: a[0, 1]),
    # in-place writes (an argument is written when it is the operand)
    "set_mask": (1, lambda a: _setitem(a, a > 0.5, 0.25)),
    "set_row": (2, lambda a, b: _setitem(a, 0, b.sum())),
    "set_slice": (1, lambda a: _setitem(a, slice(1, None), -1.0)),
    "iadd": (1, lambda a: _iop(a, "__iadd__", 1.0)),
    "imul_other": (2, lambda a, b: _iop(a, "__imul__", b)),
    "set_int_idx": (1, lambda a: _setitem(a, np.array([0, 0]), 7.0)),
    "ufunc_out": (1, lambda a: np.add(a, 1.0, out=a) if np.ndim(a) else a),
    "set_ellipsis": (2, lambda a, b: _setitem(a, ..., b)),
    # views, written through
    "transpose": (1, lambda a: a.T), "ravel": (1, np.ravel), "reshape": (1, lambda a: a.reshape(-1)),
    "view_write": (1, lambda a: (_iop(a[::2], "__imul__", 2.0), a)[1] if np.ndim(a) else a),
    "T_write": (1, lambda a: (_setitem(a.T, 0, 3.0), a)[1]),
    "swapaxes": (1, lambda a: np.swapaxes(a, 0, -1)), "squeeze": (1, lambda a: a[None].squeeze(0)),
    "broadcast": (1, lambda a: np.broadcast_to(a, (2, *np.shape(a))) + 0.0),
    # random draws (seeded: the traced draw equals the eager draw)
    "rng_normal": (1, lambda a: a + np.random.default_rng(3).normal(size=np.shape(a))),
    "rng_integers": (1, lambda a: a * np.random.default_rng(5).integers(0, 4, size=np.shape(a))),
    # creation functions with traced sizes
    "zeros": (1, lambda a: a + np.zeros(np.shape(a))), "ones_rows": (1, lambda a: np.ones((len(a), 2))),
    "arange": (1, lambda a: a + np.arange(np.shape(a)[-1])), "full": (1, lambda a: np.full(np.shape(a), 2.5)),
    "eye": (1, lambda a: np.eye(len(a)) @ a), "linspace": (1, lambda a: np.linspace(0.0, 1.0, np.size(a))),
    "zeros_like": (1, np.zeros_like), "empty_fill": (1, lambda a: _setitem(np.empty(np.shape(a)), ..., 1.0)),
    # ndarray methods
    "clip": (1, lambda a: a.clip(0.2, 0.8)), "astype32": (1, lambda a: a.astype(np.float32)),
    "astype_int": (1, lambda a: a.astype(np.int64)), "round": (1, lambda a: a.round(2)),
    "copy": (1, lambda a: a.copy()),
    "flatten": (1, lambda a: a.flatten()), "fill": (1, lambda a: _fill(a, 0.5)),
    "item": (1, lambda a: a.sum().item()),
    "tolist": (1, lambda a: np.asarray(a.tolist())), "concat": (2, lambda a, b: np.concatenate([a, b])),
    "stack": (2, lambda a, b: np.stack([a, b])), "sort": (1, lambda a: np.sort(a, axis=-1)),
    # NumPy functions the tracer may not support: a clear error or the right answer
    "unique": (1, np.unique), "svd": (1, lambda a: np.linalg.svd(a)[1]),
    "fft": (1, lambda a: np.fft.fft(a).real),
    "histogram": (1, lambda a: np.histogram(a, bins=3)[0]), "nonzero": (1, lambda a: np.nonzero(a > 0.5)[0]),
    "searchsorted": (2, lambda a, b: np.searchsorted(np.sort(np.ravel(a)), b)), "diff": (1, np.diff),
    "convolve": (2, lambda a, b: np.convolve(np.ravel(a), np.ravel(b))), "median": (1, np.median),
    "vectorize": (1, np.vectorize(lambda v: v * 2)), "frombuffer": (1, lambda a: np.frombuffer(a.tobytes())),
    "float_of": (1, lambda a: a * float(a.sum())),
    # NumPy forms with run-time lengths, masks and traced grid sizes
    "repeat_counts": (2, lambda a, r: np.repeat(a, np.asarray(r) % 3, axis=0)),
    "sum_where": (2, lambda a, b: np.sum(a, axis=-1, where=np.asarray(b) > 0.5)),
    "max_where": (2, lambda a, b: np.max(a, axis=0, where=np.asarray(b) > 0.3, initial=-1.0)),
    "mean_where": (1, lambda a: np.mean(a, axis=-1, where=np.asarray(a) > 0.2)),
    "einsum_sublist": (2, lambda a, b: np.einsum(np.atleast_2d(a), [0, 1], np.atleast_2d(b), [2, 1], [0, 2])),
    "mgrid": (1, lambda a: np.mgrid[:len(np.atleast_1d(a)), :2].sum(0) * 0.5),
    "concat_cast": (2, lambda a, b: np.concatenate([np.ravel(a), np.ravel(b)], dtype=np.float32,
                                                   casting="same_kind")),
    "bit_length": (1, lambda a: a * len(np.atleast_1d(a)).bit_length()),
    "bool_branch": (1, lambda a: a * 2 if a.sum() > 1 else a - 1),
    # the cpu backend's fast paths: joins written in place then written, joins of 0-d reductions,
    # small-K, GEMV and packed-weight products with epilogues on signed zeros, scans of fused passes,
    # constant exponents over extreme ranges, clip and maximum/minimum ties, writes through reshapes
    "stack_write": (1, _stack_then_write), "concat_write": (2, _concatenate_then_write),
    "column_stack_write": (1, _column_stack_then_write),
    "stack_0d": (1, lambda a: np.stack([a.sum(), a.max()])),
    "array_0d": (1, lambda a: np.array([a.mean(), a.std()])),
    "small_k": (1, _small_k), "small_k_neg_zero": (1, lambda a: _small_k(a, -0.0)), "gemv": (1, _gemv),
    "small_k_vector": (1, _small_k_vector),
    "gemv_rows": (1, _gemv_rows),
    "packed": (1, _packed), "packed_residual": (1, lambda a: _packed(a, residual=True)),
    "packed_runtime": (1, _runtime_product), "im2col": (1, _im2col),
    "merge_heads": (1, _merge_heads), "merge_heads_shape": (1, _merge_heads_shape),
    "split_sections": (1, lambda a: _split_sections(a)[0]),
    "split_sections_rest": (1, lambda a: _split_sections(a)[1]),
    "merge_heads_pass": (1, lambda a: _merge_heads(a, product=False)),
    "neg_zero": (1, lambda a: a * -0.0), "clip_tie": (1, lambda a: np.clip(a * -0.0, 0.0, 1.0)),
    "clip_tie_high": (1, lambda a: np.clip(a * 0.0, -1.0, -0.0)),
    "max_tie": (1, lambda a: np.maximum(a * -0.0, 0.0)), "min_tie": (1, lambda a: np.minimum(0.0, a * -0.0)),
    "scan_of_pass": (1, lambda a: np.cumsum(np.log1p(np.abs(a)), axis=-1) if np.ndim(a) else a),
    "cumprod_of_pass": (1, lambda a: np.cumprod(a * 0.5 + 0.75, axis=-1) if np.ndim(a) else a),
    "pow_m2_huge": (1, lambda a: (a * 1e156) ** -2), "pow_m2_tiny": (1, lambda a: (a * 1e-155) ** -2),
    "pow_m1_subnormal": (1, lambda a: (a * 1e-310) ** -1), "pow_half": (1, lambda a: (a * 1e-300) ** 0.5),
    "pow_3_huge": (1, lambda a: (a * 1e103) ** 3), "pow_4": (1, lambda a: (a - 0.5) ** 4),
    "pow_m_half": (1, lambda a: np.abs(a) ** -0.5), "pow_2_neg_zero": (1, lambda a: (a * -0.0) ** 2),
    # ** of a NumPy scalar (a reduction's result): NumPy's scalar math, C pow (+0.0 at -0.0)
    "scalar_pow_half": (1, lambda a: a * np.copysign(1.0, (np.ravel(a).sum() * -0.0) ** 0.5)),
    "scalar_rpow": (1, lambda a: a - 2.0 ** np.ravel(a).sum()),
    # ** of an array to a traced NumPy scalar (0-d, stride 0 in NumPy's loop): np.power's branch at 0.5,
    # sqrt (NaN at -inf, 'invalid value'), not C pow's +inf
    "bcast_pow_half": (1, lambda a: np.minimum(a, -np.inf) ** (np.ravel(a).sum() * 0.0 + 0.5)),
    # a NumPy scalar constant's ** reaches the traced scalar as an np.power call: the operator's (C pow)
    "scalar_const_pow": (1, lambda a: a * np.copysign(1.0, np.float32(-0.0) ** (np.ravel(a).sum() * 0.0
                                                                               + 0.5))),
    # a NumPy scalar constant times a traced size: np.scalar_operator, NumPy's scalar math
    "scalar_const_size": (1, lambda a: a - np.float32(0.25) * np.ravel(a).shape[0]),
    # operators of traced NumPy int scalars (x[0], a reduction's result): np.scalar_operator, scalar math
    "int_scalar_math": (1, _int_scalar_math),
    "assign_expr": (2, _assign_expr),
    "causal_softmax": (1, _causal_softmax), "causal_softmax_nan_row": (1, lambda a: _causal_softmax(a, k=0)),
    "outer_pass": (1, lambda a: np.ravel(a)[:, None] * 0.5 - np.ravel(a)[None, :]),
    "one_hot": (1, lambda a: (np.ravel(a)[:, None] == np.arange(3)).astype(np.float32)),
    # a flat pass with exp (a table op): its generated kernel's short tiles (conftest lowers the size)
    "exp_flat": (1, lambda a: np.exp(np.ravel(a) * 0.5) * np.ravel(a)),
    "layer_norm": (1, _layer_norm),
    "row_extremes": (1, _row_extremes),
    "reshape_write": (1, lambda a: _through_reshape(a, lambda v: v.reshape(-1))),
    "ravel_write": (1, lambda a: _through_reshape(a, np.ravel)),
    "T_reshape_write": (1, lambda a: _through_reshape(a, lambda v: v.T.reshape(-1))),
}
FAST_STEPS = [name for name in STEPS if name in (
    "stack_write", "concat_write", "column_stack_write", "stack_0d", "array_0d", "small_k",
    "small_k_neg_zero", "small_k_vector",
    "gemv", "gemv_rows", "packed", "packed_runtime",
    "neg_zero", "clip_tie", "clip_tie_high", "max_tie", "min_tie", "scan_of_pass", "cumprod_of_pass",
    "pow_m2_huge", "pow_m2_tiny", "pow_m1_subnormal", "pow_half", "pow_3_huge", "pow_4", "pow_m_half",
    "pow_2_neg_zero", "bcast_pow_half", "reshape_write", "ravel_write", "T_reshape_write", "set_row",
    "set_slice", "iadd", "set_int_idx", "assign_expr", "sum_mid", "mean_pairs_last", "pair_sums")]
STEPS.update({"gemv_team": (1, _gemv_team), "gemv_team_columns": (1, _gemv_team_columns),
              "gemv_peeled": (1, _gemv_peeled),
              "split_row_sum": (1, _split_row_sum), "team_pass": (1, _team_pass),
              "team_softmax": (1, _team_softmax), "const_col_sums": (1, _const_col_sums),
              "argmin_nan_rows": (1, _argmin_nan_rows), "packed_rows_in_place": (1, _runtime_rows_product),
              "head_products": (1, _head_products)})
# Steps only the explicit examples below run, so that adding them leaves the random draws as they were.
EXAMPLE_ONLY = {"merge_heads", "merge_heads_pass", "merge_heads_shape", "split_sections",
                "split_sections_rest", "causal_softmax", "causal_softmax_nan_row", "gemv_team",
                "gemv_team_columns", "outer_pass", "one_hot", "layer_norm", "split_row_sum", "im2col",
                "team_pass", "team_softmax", "const_col_sums", "argmin_nan_rows", "gemv_peeled",
                "row_extremes", "head_products"}
NAMES = sorted(set(STEPS) - EXAMPLE_ONLY)

# The fast-path steps drawn about as often as all the others together.
step_st = st.tuples(st.sampled_from(NAMES + FAST_STEPS * 3), st.integers(0, 7), st.integers(0, 7))
program_st = st.lists(step_st, min_size=1, max_size=6)


def run_steps(steps, env):
    """The steps' results over the environment `env` (which they extend)."""
    start = len(env)
    for name, j, k in steps:
        arity, fn = STEPS[name]
        args = [env[j % len(env)], env[k % len(env)]][:arity]
        env.append(fn(*args))
    # Every step's result is an output: a dead step that raises in NumPy would be removed from the
    # graph and not raise (a known difference, see test_dead_raising_step_is_removed).
    return tuple(env[start:])


def make_program(steps):
    def program(x, y, i):
        return run_steps(steps, [x, y, i])
    program.__name__ = "fuzz_" + "_".join(s[0] for s in steps)
    return program


def _inputs(n, seed, kind="plain"):
    """The arguments of a call: C-contiguous, or one of them Fortran-ordered, strided, an int64 array by
    another dtype name (np.longlong), or a masked array (an ndarray subclass: refused)."""
    r = np.random.default_rng(seed)
    x, y, i = r.random((n, 4)), r.random((n, 4)), r.integers(0, 3, n)
    if kind == "fortran":
        x = np.asfortranarray(x)
    elif kind == "strided":
        x = layout_copy(r.random((n, 8))[:, ::2])
    elif kind == "longlong":
        i = i.astype(np.longlong)
    elif kind == "masked":
        y = np.ma.masked_array(y, mask=y > 0.5)
    return [x, y, i]




GEMV_PEELED = "GEMV with unaligned weight rows, first columns apart"
# Per path of the cpu backend, a counter of stats() that says it ran, and the programs it ran in (their
# values compared with NumPy's); test_fuzz_reached_every_fast_path checks the counts.
FAST_PATHS = {
    "join parts written in place": lambda s: s["parts_in_place"],
    "small-K product": lambda s: s["small_matmuls"],
    "small-K product over back-to-back rows": lambda s: s["small_matmul_packed_runs"],
    "GEMV": lambda s: s["gemv"],
    "GEMV with a fused bias": lambda s: s["gemv_epilogues"],
    "GEMV over a few rows of x": lambda s: s["gemv_rows_of_x"],
    "GEMV split over the thread team": lambda s: s["gemv_team"],
    "GEMV team pieces cut by columns": lambda s: s["gemv_team_columns"],
    "GEMV team folding its own partials": lambda s: s["gemv_team_folds"],
    GEMV_PEELED: lambda s: s["gemv_peeled"],
    "packed-weight product": lambda s: s["packed_matmuls"],
    "packed-weight product with a fused epilogue": lambda s: s["packed_epilogue_ops"],
    "packed product of run-time values": lambda s: s["packed_runtime"],
    "packed product reading an im2col's windows in place": lambda s: s["packed_gathered_runs"],
    "packed product of run-time values reading B in place": lambda s: s["packed_direct_runs"],
    "packed stack of products at a table of offsets": lambda s: s["packed_stack_offset_runs"],
    "scan": lambda s: s["scans"],
    "scan in place": lambda s: s["scans_in_place"],
    "constant exponent": lambda s: s["constant_powers"],
    "NumPy float scalar's ** as C pow in a pass": lambda s: s["scalar_powers"],
    "run-time scalar exponent on NumPy's branch": lambda s: s["broadcast_powers"],
    "assignment in place": lambda s: s["setitems_in_place"],
    "argument updated in place": lambda s: s["in_place_outputs"],
    "generated kernel": lambda s: s["generated_runs"],
    "short rows walked along a longer dim": lambda s: s["rows_widened_runs"],
    "middle-axis reduction generated": lambda s: s["generated_column_runs"],
    "short rows reduced generated": lambda s: s["generated_row_block_runs"],
    "short rows reduced generated in tiles of rows": lambda s: s["generated_row_tile_runs"],
    "x[:, None] read once a row in generated tiles of rows": lambda s: s["generated_row_scalar_runs"],
    "broadcast value computed again in a later pass": lambda s: s["recomputed_nodes"],
    "outputs written with streaming stores": lambda s: s["streamed_runs"],
    "large elementwise pass with a table op in short tiles": lambda s: s["generated_short_tile_runs"],
    "assignment computed in place": lambda s: s["assigned_in_place"],
    "constant folded": lambda s: s["folded_constants"],
    "mixed float product widened": lambda s: s["products_widened"],
    "copying reshape computed in place": lambda s: s["reshapes_in_place"],
    "split sections kept as views": lambda s: s["sections_as_views"],
    "var sharing a mean's block sums": lambda s: s["shared_sum_runs"],
    "full sum split over the thread team": lambda s: s["split_row_runs"],
    "max/min of short rows folded in blocks": lambda s: s["extreme_rows_runs"],
    "generated pass split over the thread team": lambda s: s["generated_team_runs"],
    "interpreted pass split over the thread team": lambda s: s["interpreted_team_runs"],
    "argmin/argmax along contiguous rows": lambda s: s["row_arg_runs"],
}
# Outcomes of the argument kinds a call may take (see _inputs).
CALL_PATHS = ("Fortran-ordered argument", "strided argument", "np.longlong argument", "masked array refused",
              "layout refused", "module state written", "module state updated in place",
              "argument sharing module state refused",
              "argument sharing module state compared", "common subexpressions merged")
PATH_PROGRAMS: dict[str, int] = dict.fromkeys([*FAST_PATHS, *CALL_PATHS], 0)
CPU_ONLY = {*FAST_PATHS, "module state updated in place"}


def _same(a, b, what):
    a = np.asarray(a)
    b = np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {b.shape} != NumPy's {a.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {b.dtype} != NumPy's {a.dtype}"
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-9, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(b, a, err_msg=what)


def _check_clear(exc: BaseException, where: str):
    if isinstance(exc, UNCLEAR) or not str(exc).strip():
        raise AssertionError(f"{where}: unclear exception {type(exc).__name__}: {exc!r}") from exc


def _eager(fn, args):
    args = layout_copies(args)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args), args, None
    except Exception as exc:
        return None, args, exc


def _flatten(out):
    return list(out) if isinstance(out, tuple) else [out]


def run_case(steps, backend):
    """Trace ``steps`` on ``backend`` and compare with eager NumPy; returns an outcome label."""
    fn = make_program(steps)
    example = _inputs(3, 0)
    want, _, eager_exc = _eager(fn, example)
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        try:
            traced = nt.trace(fn, tuple(layout_copies(example)), backend=backend, check_trace=False)
        except Exception as exc:
            _check_clear(exc, f"{fn.__name__} tracing on {backend}")
            return "refused"
        # A TracerWarning at trace time says the trace may not generalize (a value frozen as a
        # constant, an untraced branch): that is the loud outcome, so values are not compared; the
        # calls still run, to hunt crashes.
        warned = any(issubclass(w.category, nt.TracerWarning) for w in caught)
        if eager_exc is not None and not warned:
            # Tracing succeeded though NumPy raises: the call must raise too.
            with pytest.raises(Exception) as info:
                traced(*layout_copies(example))
            _check_clear(info.value, f"{fn.__name__} on {backend}")
            return "raised"
        outcome = "ok"
        reached: set = set()
        for n, seed, kind in ((3, 1, "plain"), (5, 2, "plain"), (1, 3, "plain"), (4, 4, "fortran"),
                              (4, 5, "strided"), (3, 6, "longlong"), (3, 7, "masked")):
            args = _inputs(n, seed, kind)
            want, want_args, eager_exc = _eager(fn, args)
            got_args = layout_copies(args)
            if kind == "masked":
                with pytest.raises(TypeError, match="subclass"):
                    traced(*got_args)
                reached.add("masked array refused")
                continue
            try:
                got = traced(*got_args)
            except Exception as exc:
                _check_clear(exc, f"{fn.__name__} at n={n} ({kind}) on {backend}")
                if "laid out" in str(exc):
                    reached.add("layout refused")
                outcome = "raised"
                continue
            if warned:
                outcome = "warned"
                continue
            assert eager_exc is None, (f"{fn.__name__} at n={n} on {backend}: NumPy raises "
                                       f"{eager_exc!r} but the traced call returned {got!r}")
            want_l, got_l = _flatten(want), _flatten(got)
            assert len(want_l) == len(got_l)
            for j, (w, g) in enumerate(zip(want_l, got_l)):
                _same(w, g, f"{fn.__name__} at n={n} ({kind}) on {backend}: output {j}")
            for j, (w, g) in enumerate(zip(want_args, got_args)):
                _same(w, g, f"{fn.__name__} at n={n} ({kind}) on {backend}: argument {j} after the call")
            reached.add({"fortran": "Fortran-ordered argument", "strided": "strided argument",
                         "longlong": "np.longlong argument"}.get(kind, "compared"))
        if "compared" in reached and traced.stats()["cse_merged"]:
            reached.add("common subexpressions merged")   # values compared with the merges made
        if backend == "cpu" and "compared" in reached:
            for stats in traced.stats()["signatures"].values():
                reached.update(path for path, count in FAST_PATHS.items() if count(stats))
        for path in reached & PATH_PROGRAMS.keys():
            PATH_PROGRAMS[path] += 1
        return outcome


@settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("NUMTRACE_FUZZ_SEED") is None,
          suppress_health_check=list(HealthCheck), database=None)
@seed(int(os.environ.get("NUMTRACE_FUZZ_SEED", "0")))
@given(steps=program_st)
# Programs every run compares, whatever the draws (the CI and local hypothesis profiles draw different
# programs, and what other test modules do at import can change what a draw reaches), two or more per
# fast path: the epilogues of the packed products, the assignments computed in place (only where the
# value does not read its target: assign_expr with arguments of two shapes), arguments updated in
# place, the passes of short rows written in place, the merged heads, GEMV over a few rows and over the
# thread team, reductions of a middle axis and of short rows on generated kernels, and causal attention's
# folded mask and widened product (which the random programs reach only now and then).
@example(steps=[("packed", 0, 0)])
@example(steps=[("gemv_team", 0, 0)])
@example(steps=[("gemv_team_columns", 0, 0)])
@example(steps=[("gemv_peeled", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("gemv_peeled", 3, 0)])
@example(steps=[("neg_zero", 1, 0), ("gemv_team_columns", 3, 0)])
@example(steps=[("neg_zero", 1, 0), ("gemv_team", 3, 0)])
@example(steps=[("packed_residual", 1, 0), ("packed", 0, 0)])
@example(steps=[("assign_expr", 0, 1)])
@example(steps=[("assign_expr", 1, 0)])
@example(steps=[("assign_expr", 0, 2)])
@example(steps=[("assign_expr", 2, 1)])
@example(steps=[("iadd", 0, 0)])
@example(steps=[("iadd", 1, 0)])
@example(steps=[("neg_zero", 1, 0), ("gemv_rows", 3, 0)])
@example(steps=[("scan_of_pass", 0, 0)])
@example(steps=[("add", 0, 1), ("cumprod_of_pass", 3, 0)])
@example(steps=[("pow_4", 0, 0)])
@example(steps=[("scalar_pow_half", 0, 0), ("scalar_rpow", 3, 0)])
@example(steps=[("neg_zero", 1, 0), ("scalar_pow_half", 3, 0)])
@example(steps=[("scalar_const_pow", 0, 0)])
@example(steps=[("bcast_pow_half", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("bcast_pow_half", 3, 0)])
@example(steps=[("add", 0, 1), ("bcast_pow_half", 3, 0)])
@example(steps=[("scalar_const_size", 0, 0)])
@example(steps=[("pow_m2_huge", 1, 0)])
@example(steps=[("add", 0, 1), ("set_slice", 3, 0)])
@example(steps=[("add", 0, 1), ("set_row", 3, 1)])
@example(steps=[("array_0d", 0, 0)])
@example(steps=[("add", 0, 1), ("array_0d", 3, 0)])
@example(steps=[("merge_heads", 0, 0)])
@example(steps=[("merge_heads_shape", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("merge_heads_shape", 3, 0)])
@example(steps=[("split_sections", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("split_sections_rest", 3, 0)])
@example(steps=[("merge_heads_pass", 1, 0), ("add", 3, 3)])
@example(steps=[("gemv_rows", 0, 0)])
@example(steps=[("small_k_vector", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("small_k_vector", 3, 0)])
@example(steps=[("pair_sums", 0, 1)])
@example(steps=[("sum_mid", 0, 1), ("mean_pairs_last", 1, 0)])
@example(steps=[("causal_softmax", 0, 0)])
@example(steps=[("causal_softmax_nan_row", 1, 0)])
@example(steps=[("outer_pass", 0, 0)])
@example(steps=[("one_hot", 2, 0)])
@example(steps=[("neg_zero", 1, 0), ("one_hot", 3, 0)])
@example(steps=[("exp_flat", 2, 0)])
@example(steps=[("exp_flat", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("exp_flat", 3, 0)])
@example(steps=[("layer_norm", 0, 0)])
@example(steps=[("split_row_sum", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("split_row_sum", 3, 0)])
@example(steps=[("im2col", 0, 0)])
@example(steps=[("head_products", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("head_products", 3, 0)])
@example(steps=[("neg_zero", 1, 0), ("im2col", 3, 0)])
@example(steps=[("team_pass", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("team_pass", 3, 0)])
@example(steps=[("team_softmax", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("team_softmax", 3, 0)])
@example(steps=[("team_softmax", 1, 0)])
@example(steps=[("team_pass", 1, 0)])
@example(steps=[("const_col_sums", 0, 0)])
@example(steps=[("argmin_nan_rows", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("argmin_nan_rows", 3, 0)])
@example(steps=[("argmin_last", 0, 0), ("argmax_last_keep", 1, 0)])
@example(steps=[("neg_zero", 1, 0), ("const_col_sums", 3, 0)])
@example(steps=[("row_extremes", 0, 0)])
@example(steps=[("packed_rows_in_place", 0, 0)])
@example(steps=[("neg_zero", 1, 0), ("packed_rows_in_place", 3, 0)])
@example(steps=[("neg_zero", 1, 0), ("row_extremes", 3, 0)])
@example(steps=[("repeat_counts", 0, 2), ("sum_where", 3, 3)])
@example(steps=[("max_where", 0, 1), ("mean_where", 1, 0), ("einsum_sublist", 0, 1)])
@example(steps=[("mgrid", 0, 0), ("concat_cast", 0, 2), ("bit_length", 1, 0)])
def test_traced_program_matches_numpy_or_raises_clearly(steps, backend):
    # Every GENERATED_EVERY-th program on the cpu backend compiles its fused passes to C before its
    # first call (numtrace_cpu.compiler's sync mode), so they run on the generated kernels; so do the
    # explicit GENERATED_EXAMPLES, whose paths only generated kernels take; INTERPRETED_EXAMPLES never.
    generated = backend == "cpu" and (not next(_CPU_PROGRAMS) % GENERATED_EVERY
                                      or steps in GENERATED_EXAMPLES)
    if not generated or steps in INTERPRETED_EXAMPLES:
        with _team_threads(steps, backend):
            run_case(steps, backend)
        return
    from numtrace_cpu import compiler

    old = compiler.set_mode("sync")
    try:
        with _team_threads(steps, backend):
            run_case(steps, backend)
    finally:
        compiler.set_mode(old)


GENERATED_EVERY = 8
# The explicit programs whose reductions only generated kernels fold in registers, and a pass writing
# its outputs with streaming stores (conftest.py lowers NUMTRACE_STREAM_MIN_BYTES).
GENERATED_EXAMPLES = ([("pair_sums", 0, 1)], [("sum_mid", 0, 1), ("mean_pairs_last", 1, 0)],
                      [("outer_pass", 0, 0)], [("one_hot", 2, 0)], [("neg_zero", 1, 0), ("one_hot", 3, 0)],
                      [("split_row_sum", 0, 0)], [("team_pass", 0, 0)],
                      [("neg_zero", 1, 0), ("team_pass", 3, 0)], [("team_softmax", 0, 0)],
                      [("neg_zero", 1, 0), ("team_softmax", 3, 0)], [("const_col_sums", 0, 0)],
                      [("neg_zero", 1, 0), ("const_col_sums", 3, 0)], [("exp_flat", 2, 0)],
                      [("exp_flat", 0, 0)], [("neg_zero", 1, 0), ("exp_flat", 3, 0)])
# Programs kept on the interpreter: its passes split over the thread team (the generated kernels
# take team_softmax's, whose short rows they reduce in tiles of rows, and team_pass's).
INTERPRETED_EXAMPLES = ([("team_softmax", 1, 0)], [("team_pass", 1, 0)])
_CPU_PROGRAMS = itertools.count(1)
# Steps whose path depends on the cpu backend's thread count: the team cuts _TEAM_W7's seven row
# chunks by columns only when they do not divide among the threads and each thread's columns keep
# two vectors (2 to 6 or 8 threads), each thread folds its own row chunks' partials only on more than
# one thread, and a full sum's row is shared only by a team of two or more. Their programs run at this
# count, whatever the machine's cores.
TEAM_STEPS_THREADS = {"gemv_team": 2, "gemv_team_columns": 2, "gemv_peeled": 2, "split_row_sum": 2,
                      "team_pass": 2, "team_softmax": 2}


@contextlib.contextmanager
def _team_threads(steps, backend):
    """The cpu backend's thread count set for the steps in TEAM_STEPS_THREADS while the program runs."""
    want = [TEAM_STEPS_THREADS[name] for name, *_ in steps if name in TEAM_STEPS_THREADS]
    if backend != "cpu" or not want:
        yield
        return
    import numtrace_cpu

    old = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(want[0])
    try:
        yield
    finally:
        numtrace_cpu.set_num_threads(old)


class StateProgram(nt.Module):
    """A program over the arguments and the module's buffer ``w`` (the environment's fourth array): its
    steps may write into ``w``, and half the programs decay ``w`` at the end, as a running statistic
    does."""

    def __init__(self, steps):
        super().__init__()
        self.register_buffer("w", np.linspace(0.1, 0.9, 4))
        self.steps = steps

    def forward(self, x, y, i):
        out = run_steps(self.steps, [x, y, i, self.w])
        if self.steps[0][1] % 2:
            self.w *= 0.9
        return out


def run_module_case(steps, backend):
    """A StateProgram traced and called like the eager module: outputs, arguments and the state after
    each call equal NumPy's, also when an argument is the state itself (or the call is refused)."""
    model, eager = StateProgram(steps), StateProgram(steps)
    example = _inputs(3, 0)
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        try:
            traced = nt.trace(model, tuple(layout_copies(example)), backend=backend, check_trace=False)
        except Exception as exc:
            _check_clear(exc, f"module {steps} tracing on {backend}")
            return
    if any(issubclass(w.category, nt.TracerWarning) for w in caught):
        return   # may not generalize: values are not compared
    eager.load_state_dict(model.state_dict())   # tracing ran forward once more on the model
    if traced.forward.mutated:
        PATH_PROGRAMS["module state written"] += 1
    for n, draw in ((3, 1), (5, 3), (1, 2)):
        args, eager_args = _inputs(n, draw), _inputs(n, draw)
        if n == 1:   # the state itself as an argument
            args[1], eager_args[1] = model.state_dict()["w"][None, :], eager.w[None, :]
            _count_state_in_place(traced.forward)
        want, eager_exc = None, None
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = eager(*eager_args)
        except Exception as exc:
            eager_exc = exc
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", nt.TracerWarning)
                got = traced(*args)
        except Exception as exc:
            _check_clear(exc, f"module {steps} at n={n} on {backend}")
            if "shares memory" in str(exc):
                PATH_PROGRAMS["argument sharing module state refused"] += 1
            return   # the states now differ: nothing more to compare
        if eager_exc is not None:
            return
        what = f"module {steps} at n={n} on {backend}"
        for j, (w, g) in enumerate(zip(_flatten(want), _flatten(got))):
            _same(w, g, f"{what}: output {j}")
        _same(eager.w, model.state_dict()["w"], f"{what}: the module state after the call")
        for j, (w, g) in enumerate(zip(eager_args, args)):
            _same(w, g, f"{what}: argument {j} after the call")
        if n == 1:
            PATH_PROGRAMS["argument sharing module state compared"] += 1


def _count_state_in_place(method):
    """Count the program when the backend computed the module state's new contents in place."""
    state_outputs = {len(method.graph.outputs) - len(method.mutated) + k
                     for k, i in enumerate(method.mutated) if i >= len(method.arg_names_flat())}
    if any(state_outputs & set(s.get("in_place_outputs", ())) for s in method.stats()["signatures"].values()):
        PATH_PROGRAMS["module state updated in place"] += 1


@settings(max_examples=max(EXAMPLES // 2, 10), deadline=None,
          derandomize=os.environ.get("NUMTRACE_FUZZ_SEED") is None,
          suppress_health_check=list(HealthCheck), database=None)
@seed(int(os.environ.get("NUMTRACE_FUZZ_SEED", "0")))
@given(steps=program_st)
def test_module_state_program_matches_the_eager_module(steps, backend):
    run_module_case(steps, backend)


def test_fuzz_reached_every_fast_path(capsys):
    """The programs above ran every fast path of the cpu backend, and every argument kind, in at least
    MIN_PROGRAMS programs each (values compared with NumPy's); prints the count per path."""
    if not any(PATH_PROGRAMS.values()):
        pytest.skip("the fuzz test did not run in this session")
    paths = [p for p in PATH_PROGRAMS if p not in CPU_ONLY or "cpu" in nt.available_backends()]
    if "cpu" in nt.available_backends():
        from numtrace_cpu.isa import blocks
        if not blocks.GEMV_PEELS:   # a build without AVX-512 reads unaligned weights as they are
            paths.remove(GEMV_PEELED)
    with capsys.disabled():
        print(f"\nprograms per path ({EXAMPLES} programs per backend):")
        for path in paths:
            print(f"  {PATH_PROGRAMS[path]:6d}  {path}")
    least = max(1, EXAMPLES // 100)
    missed = {path: PATH_PROGRAMS[path] for path in paths if PATH_PROGRAMS[path] < least}
    assert not missed, f"paths reached in fewer than {least} programs: {missed}"


# Programs the fuzzer found wrong answers or crashes in, pinned so they run in every session.
@pytest.mark.parametrize("steps", [
    [("mask", 0, 0), ("set_mask", 0, 0)],
    [("view_write", 0, 0), ("T_write", 1, 0)],
    [("ufunc_out", 1, 0), ("int_arg_idx", 0, 2)],
    [("T_reshape_write", 0, 0)] * 3 + [("pow_m1_subnormal", 0, 0), ("set_row", 2, 6)],
    [("int_scalar_math", 0, 0), ("int_scalar_math", 2, 0)],
])
def test_pinned_programs(steps, backend):
    run_case(steps, backend)


def test_the_int_scalar_step_records_numpy_scalar_math():
    """The fuzzer's int_scalar_math step reaches np.scalar_operator (divmod too) and
    np.scalar_unary_operator from traced NumPy scalars (not only constants), so the programs that draw it
    compare those recordings with NumPy."""
    with np.errstate(all="ignore"):
        traced = nt.trace(make_program([("int_scalar_math", 0, 0)]), tuple(_inputs(3, 0)),
                          backend="reference")
    assert traced.code.count("np.scalar_operator") == 8, traced.code
    assert traced.code.count("np.scalar_unary_operator") == 2, traced.code


@pytest.mark.triton
@settings(max_examples=max(EXAMPLES // 10, 10), deadline=None,
          derandomize=os.environ.get("NUMTRACE_FUZZ_SEED") is None,
          suppress_health_check=list(HealthCheck), database=None)
@seed(int(os.environ.get("NUMTRACE_FUZZ_SEED", "0")))
@given(steps=program_st)
def test_traced_program_on_triton_matches_numpy_or_is_refused_clearly(steps, backend):
    """The Triton backend in interpreter mode (slow): fewer programs; an op it does not lower is a clear
    refusal when the trace compiles."""
    if backend != "triton":
        pytest.skip("the other backends run the full count above")
    run_case(steps, backend)
