"""Scale-out on Dask: run a trace block by block over chunked ``dask.array`` inputs.

The trace travels to the workers as the bytes of its saved file (the safe format: text IR and
``.npy`` weights, never pickled code), one graph key every block task depends on; each worker
process loads it once (cached by content hash) and runs every block it gets through it. Output
chunks and dtype come from the trace's own shape rules for each block shape, and before any task
is built the map is checked to be block-wise: a trace that mixes elements across a chunked axis
(a reduction, a running sum, a stencil) is refused rather than computed per block into a wrong
answer. Dask is an optional extra (``pip install numtrace[dask]``), imported only here.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import threading
from typing import Any

import numpy as np
from numtrace_ir import GuardError, ShapeError, TensorType, specialize

from .specializations import retyped
from .traced import TracedFunction
from .traced_module import TracedModule

# Per worker process: content hash of a saved trace -> (backend, loaded TracedFunction).
_LOADED: dict[tuple[str, str], TracedFunction] = {}
_LOADED_LOCK = threading.Lock()
# Extent of a chunked axis in the block-wise probe (split in two parts), unless the chunk is smaller.
PROBE_EXTENT = 16


def _dask_array() -> Any:
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError("numtrace.dask needs Dask: install it with `pip install numtrace[dask]` "
                          f"({exc})") from None
    return da


def map_blocks(traced: TracedFunction | TracedModule, *arrays: Any, backend: str = "cpu") -> Any:
    """``traced`` applied block by block to dask arrays, as a lazy ``dask.array.Array``.

    Every dask array argument must have the same shape (they are rechunked to the first one's
    chunks); NumPy arrays are passed whole to every block. ``backend`` is the backend the workers
    run the blocks on. Raises ``ValueError`` when the trace cannot be mapped block-wise: its output
    is not one array of the inputs' rank, an output block's extent along a chunked axis differs from
    the input block's, or its results on a chunked axis depend on more than the rows of one block.
    """
    da = _dask_array()
    fn = _traced_function(traced)
    chunked = [a for a in arrays if isinstance(a, da.Array)]
    if not chunked:
        raise TypeError(f"numtrace.dask.map_blocks({fn.__name__}): no dask array among the arguments")
    if len(arrays) != fn._num_leaves:
        raise TypeError(f"numtrace.dask.map_blocks({fn.__name__}): the trace takes {fn._num_leaves} array "
                        f"argument(s) ({', '.join(fn.arg_names)}), got {len(arrays)}")
    first = chunked[0]
    if any(math.isnan(c) for axis in first.chunks for c in axis):
        raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): chunk sizes are unknown; call "
                         "the dask array's compute_chunk_sizes() first")
    for a in chunked[1:]:
        if a.shape != first.shape:
            raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): dask array arguments must have one "
                             f"shape, got {first.shape} and {a.shape}; pass an array every block needs whole "
                             "as a NumPy array")
    arrays = tuple(a.rechunk(first.chunks) if isinstance(a, da.Array) else np.asarray(a) for a in arrays)
    for i, (a, declared) in enumerate(zip(arrays, fn.graph.inputs)):
        fn._check_leaf(i, a, declared.type)  # dtype and rank as traced, named like a direct call's error
    data = fn.to_bytes()
    digest = hashlib.sha256(data).hexdigest()
    # Checked on the same loaded graph the workers run (no Python function to re-trace with).
    loaded = TracedFunction.from_bytes(data, "reference")
    _check_whole_guards(loaded, arrays)
    dtype, out_chunks = _output_chunks(loaded, arrays, first.chunks)
    _check_blockwise(loaded, arrays, first.chunks)
    from dask import delayed

    saved = delayed(data, pure=True, name=f"numtrace-trace-{digest}")
    return da.map_blocks(_run_block, digest, saved, backend, *arrays, dtype=dtype, chunks=out_chunks,
                         meta=np.empty((0,) * len(out_chunks), dtype),
                         token=f"numtrace-{fn.__name__}")


def _traced_function(traced: Any) -> TracedFunction:
    """The one traced function a block runs through (a module's ``forward``), checked to be mappable."""
    if isinstance(traced, TracedModule):
        methods = traced._methods
        if "forward" not in methods:
            raise TypeError(f"numtrace.dask.map_blocks: the traced module has no forward "
                            f"(traced: {', '.join(methods)})")
        traced = methods["forward"]
    if not isinstance(traced, TracedFunction):
        raise TypeError("numtrace.dask.map_blocks takes a numtrace.TracedFunction or TracedModule, "
                        f"got {type(traced).__name__}: trace the function first (numtrace.trace)")
    if traced.mutated:
        raise ValueError(f"numtrace.dask.map_blocks({traced.__name__}): the trace writes into its arguments, "
                         "which a dask block cannot do")
    if not traced.call_spec.single or not traced._flat_args:
        raise ValueError(f"numtrace.dask.map_blocks({traced.__name__}): the trace must take arrays and "
                         "return one array")
    return traced


def _block_types(arrays: tuple, chunks: tuple, index: tuple[int, ...]) -> list[TensorType]:
    """The argument types of the block at grid position ``index``."""
    shape = tuple(c[i] for c, i in zip(chunks, index))
    return [TensorType(a.dtype, shape if hasattr(a, "chunks") else a.shape) for a in arrays]


def _check_whole_guards(fn: TracedFunction, arrays: tuple) -> None:
    """The trace's guards must hold for the whole arrays' shapes, as they do (checked per block shape in
    `_output_chunks`) for every block's: the function called on the whole array takes the branch its
    whole extent decides (``if x.shape[0] > 40``), so blocks may only run a graph that branch made."""
    types = [TensorType(a.dtype, a.shape) for a in arrays]
    try:
        specialize(fn.graph, [*types, *(v.type for v in fn.graph.inputs[len(types):])], check_shapes=False)
    except GuardError as exc:
        raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): the trace was specialized to shapes the "
                         f"whole array does not have ({exc}); the function on the whole array would take "
                         "another branch than on its blocks: trace it at the whole array's shape") from exc
    except (ShapeError, TypeError, ValueError):
        pass  # a shape rule refusing the whole array: the per-block checks explain what does not fit


def _output_chunks(fn: TracedFunction, arrays: tuple, chunks: tuple) -> tuple[np.dtype, tuple]:
    """Output dtype and chunks, from the trace's shape rules at every distinct block shape."""
    ndim = len(chunks)
    out_extents: list[dict[int, int]] = [{} for _ in range(ndim)]
    dtype = None
    seen: dict[tuple, tuple] = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        types = _block_types(arrays, chunks, index)
        key = tuple(t.shape for t in types)
        if key not in seen:
            try:
                out = retyped(fn.graph, [*types, *(v.type for v in fn.graph.inputs[len(types):])],
                              fn.__name__).outputs[0].type
            except (GuardError, ValueError) as exc:
                raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): blocks of shape {key[0]} do not "
                                 f"fit the trace: {exc}") from exc
            if (not isinstance(out, TensorType) or len(out.shape) != ndim
                    or not all(isinstance(d, int) for d in out.shape)):
                raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): for blocks of shape {key[0]} the "
                                 f"trace returns {out}; a block-wise map needs an array of {ndim} "
                                 "dimension(s) with sizes known from the block shapes")
            seen[key] = (out.dtype, out.shape)
        dtype, shape = seen[key]
        for axis, (i, extent) in enumerate(zip(index, shape)):
            if len(chunks[axis]) > 1 and extent != chunks[axis][i]:
                raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): axis {axis} is chunked, "
                                 f"but a block of {chunks[axis][i]} along it gives {extent} output(s); a "
                                 "block-wise map needs one output per input along every chunked axis")
            if out_extents[axis].setdefault(i, extent) != extent:
                raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): output extent along axis {axis} "
                                 "depends on the other axes' block sizes")
    return np.dtype(dtype), tuple(tuple(e[i] for i in range(len(c))) for e, c in zip(out_extents, chunks))


def _probe_values(rng: np.random.Generator, dtype: np.dtype, shape: tuple) -> np.ndarray:
    """Test data of ``dtype``; positive floats keep logs and roots finite."""
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(1, 10, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(0.5, 1.5, shape) + 1j * rng.uniform(0.5, 1.5, shape)).astype(dtype)
    return rng.uniform(0.5, 1.5, shape).astype(dtype)


def _check_blockwise(fn: TracedFunction, arrays: tuple, chunks: tuple) -> None:
    """Along each chunked axis, f(rows of two blocks together) must equal f of each block, joined:
    checked on random data and on the same data sorted in descending order along the axis (random rows
    may happen to be in order, and then a sort along the axis would pass), so a trace that mixes rows
    is refused."""
    rng = np.random.default_rng(0)
    block = [c[0] for c in chunks]
    for axis, axis_chunks in enumerate(chunks):
        if len(axis_chunks) == 1:
            continue
        last = None
        # PROBE_EXTENT rows first (enough that random rows are not in order by chance); a real chunk
        # size (or two) if the trace refuses those extents.
        largest = max(axis_chunks)
        for total in dict.fromkeys((PROBE_EXTENT, min(largest, PROBE_EXTENT), 2 * largest, largest)):
            if total < 2:
                continue
            shape = (*block[:axis], total, *block[axis + 1:])
            probe = [_probe_values(rng, a.dtype, shape) if hasattr(a, "chunks") else a for a in arrays]
            descending = [np.flip(np.sort(p, axis=axis), axis=axis) if hasattr(a, "chunks") else p
                          for p, a in zip(probe, arrays)]
            try:
                mixes = any(_mixes_rows(fn, data, arrays, axis, total) for data in (probe, descending))
            except Exception as exc:  # this extent breaks a guard or a shape rule: try a real chunk size
                last = exc
                continue
            if mixes:
                raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): axis {axis} is chunked, "
                                 "but the trace's result along it depends on more than one block's rows (a "
                                 "reduction, running total or stencil over that axis): rechunk the array to "
                                 f"one chunk along axis {axis}, or trace a function that works row by row")
            break
        else:
            raise ValueError(f"numtrace.dask.map_blocks({fn.__name__}): could not check that the trace is "
                             f"block-wise along chunked axis {axis}: {last}")


def _mixes_rows(fn: TracedFunction, probe: list, arrays: tuple, axis: int, total: int) -> bool:
    """Whether f of the probe's rows differs from f of its two halves along ``axis``, joined."""
    together = fn(*probe)
    apart = np.concatenate([fn(*_rows(probe, arrays, range(total // 2), axis)),
                            fn(*_rows(probe, arrays, range(total // 2, total), axis))], axis=axis)
    scale = float(np.max(np.abs(together), initial=1.0)) if together.dtype.kind in "fc" else 1.0
    return together.shape != apart.shape or not np.allclose(together, apart, rtol=1e-4, atol=1e-5 * scale,
                                                            equal_nan=True)


def _rows(probe: list, arrays: tuple, part: range, axis: int) -> list:
    """The probe arguments cut to ``part`` along ``axis`` (whole arrays stay whole)."""
    return [np.take(p, part, axis) if hasattr(a, "chunks") else p for p, a in zip(probe, arrays)]


def _run_block(digest: str, data: bytes, backend: str, *blocks: np.ndarray) -> np.ndarray:
    """One block task on a worker: the trace loaded once per process, then run on the block."""
    key = (digest, backend)
    fn = _LOADED.get(key)
    if fn is None:
        with _LOADED_LOCK:
            fn = _LOADED.get(key)
            if fn is None:
                if hashlib.sha256(data).hexdigest() != digest:
                    raise ValueError("numtrace.dask: the trace bytes on this worker do not match their hash")
                fn = _LOADED[key] = TracedFunction.from_bytes(data, backend)
    return fn(*blocks)
