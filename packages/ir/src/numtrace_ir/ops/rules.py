"""Pieces of shape/dtype rules shared by the op families: NEP 50 dtype resolution, axis handling,
attr converters. Rules raise `ShapeError` for shapes and `TypeError` for dtypes, naming the op."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.types import ScalarType, TensorType, Type, normalize_dtype

# What a weak Python scalar of each kind looks like to NumPy's NEP 50 type resolution.
WEAK_TYPES = {"int": int, "float": float, "complex": complex, "bool": np.dtype(bool)}
_WEAK_VALUE = {"int": 1, "float": 1.0, "complex": 1j, "bool": True}


def weak(t: TensorType | ScalarType) -> Any:
    """`t` as an operand of NumPy's type resolution: a dtype, or a Python type for a weak scalar."""
    return t.dtype if isinstance(t, TensorType) else WEAK_TYPES[t.kind]


def strong(t: TensorType | ScalarType) -> np.dtype:
    """`t`'s dtype with a Python scalar converted as `np.asarray` converts it (its kind's default
    dtype): what functions that take their operands as arrays first (``ufunc.outer``) compute with."""
    return t.dtype if isinstance(t, TensorType) else np.asarray(_WEAK_VALUE[t.kind]).dtype


def results(arrays: Any) -> Any:
    """NumPy's sequence of result arrays as an op's results: a tuple, or the array itself when there is
    one (a one-output node's reference returns its value, so ``np.split(x, 1)``'s list of one array is
    that array, not a 1-tuple that a backend would read as an array with one more axis)."""
    arrays = tuple(arrays)
    return arrays[0] if len(arrays) == 1 else arrays


def shape_of(t: Type) -> tuple:
    return t.shape if type(t) is TensorType else ()


def example(t: TensorType | ScalarType) -> Any:
    """A one-element value of type `t` (shape dropped) for probing NumPy's dtype rules."""
    return np.ones((1,), t.dtype) if isinstance(t, TensorType) else _WEAK_VALUE[t.kind]


def probe_dtype(op: str, fn: Callable, *args: Any, **kwargs: Any) -> np.dtype:
    """The result dtype of `fn` on tiny stand-in arguments: NumPy itself decides, so rules that are
    tables in NumPy (accumulator dtypes, mean of ints, ...) cannot drift from it."""
    try:
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise TypeError(f"{op}: unsupported dtypes ({e})") from None
    return normalize_dtype(np.asarray(out).dtype)


def ufunc_dtypes(op: str, ufunc: np.ufunc, types: tuple) -> tuple:
    """NEP 50 output dtypes of `ufunc` for these input types."""
    try:
        resolved = ufunc.resolve_dtypes(tuple(weak(t) for t in types) + (None,) * ufunc.nout)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise TypeError(f"{op}: no loop for input types ({', '.join(map(str, types))}): {e}") from None
    return tuple(normalize_dtype(d) for d in resolved[ufunc.nin :])


def result_dtype(op: str, types: tuple) -> np.dtype:
    """`np.result_type` of the inputs with Python scalars weak."""
    try:
        return normalize_dtype(
            np.result_type(*(weak(t) if type(t) is TensorType else _WEAK_VALUE[t.kind] for t in types))
        )
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise TypeError(f"{op}: cannot promote ({', '.join(map(str, types))}): {e}") from None


def broadcast(op: str, *shapes: tuple) -> tuple:
    try:
        return dims.broadcast_shapes(*shapes)
    except ShapeError as e:
        raise ShapeError(f"{op}: {e}") from None


def axis(op: str, ax: int, ndim: int) -> int:
    """A non-negative axis; `ShapeError` when out of range."""
    if not -ndim <= ax < ndim:
        raise ShapeError(f"{op}: axis {ax} is out of bounds for an array of dimension {ndim}")
    return ax % ndim


def axes(op: str, ax: Any, ndim: int) -> tuple[int, ...]:
    """Normalised, sorted axes of an ``axis=None|int|tuple`` attr (None: all); repeats are errors."""
    if ax is None:
        return tuple(range(ndim))
    items = ax if isinstance(ax, tuple) else (ax,)
    out = tuple(axis(op, a, ndim) for a in items)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: repeated axis in {ax}")
    return tuple(sorted(out))


def first_tensor(op: str, types: tuple) -> TensorType:
    t = types[0]
    if type(t) is not TensorType:
        raise TypeError(f"{op}: expected an array, got {t}")
    return t


# -- attr converters: canonical, hashable values ----------------------------------------------------


def to_int(v: Any) -> int:
    """An int attr; as in NumPy, any object with ``__index__`` is one (a traced size is read through it,
    which makes the tracer guard the value it bakes in)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected an int, got {type(v).__name__} {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if hasattr(type(v), "__index__") and not issubclass(type(v), np.ndarray):
        return operator.index(v)
    raise TypeError(f"expected an int, got {type(v).__name__} {v!r}")


def to_ints(v: Any) -> tuple[int, ...]:
    """An int or a sequence of ints -> tuple of ints."""
    if issubclass(type(v), (list, tuple, np.ndarray)):
        return tuple(to_int(x) for x in v)
    return (to_int(v),)


def to_axis(v: Any) -> int | tuple[int, ...] | None:
    """``axis=None|int|sequence`` -> None, int or tuple."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return tuple(to_int(x) for x in v)
    return to_int(v)


def to_int_or_none(v: Any) -> int | None:
    return None if v is None else to_int(v)


def to_dtype(v: Any) -> np.dtype:
    """A program's dtype argument as NumPy reads it, as the IR's dtype: a string is NumPy's code
    (``"i8"`` is int64, ``"u8"`` uint64, not the IR's int8 and uint8 of the same name)."""
    if isinstance(v, str):
        try:
            v = np.dtype(v)
        except TypeError:
            pass   # an IR name NumPy lacks ("f32"): normalize_dtype reads it
    return normalize_dtype(v)


def to_dtype_or_none(v: Any) -> np.dtype | None:
    return None if v is None else to_dtype(v)


def to_bool(v: Any) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected a bool, got {type(v).__name__} {v!r}")
    return bool(v)


def to_shape(v: Any) -> tuple[int, ...]:
    """A shape argument (int or sequence of ints) -> tuple."""
    return to_ints(v)


def to_dyn_shape(v: Any) -> tuple:
    """A shape whose entries are ints or dim symbols (each supplied by an int input at run time)."""
    v = v if isinstance(v, tuple) else tuple(v) if isinstance(v, list) else (v,)
    out: list = []
    for d in v:
        if isinstance(d, str):
            d = dims.normalize(d)
            if not isinstance(d, str):
                raise ValueError(f"a dynamic dim must be symbolic (pass a static size as an int), got {d!r}")
            out.append(d)
        else:
            out.append(to_int(d))
    return tuple(out)


def check_dyn_dims(name: str, attr: str, shape: tuple, scalars: tuple) -> tuple:
    """`shape` (ints and symbols) checked against its int scalar inputs: one per symbol, in order."""
    n_sym = sum(isinstance(d, str) for d in shape)
    if n_sym != len(scalars):
        raise TypeError(
            f"{name}: {attr} {shape} names {n_sym} dynamic dims but {len(scalars)} int inputs were given"
        )
    for t in scalars:
        if t != ScalarType("int"):
            raise TypeError(f"{name}: dynamic dims must be int scalars, got {t}")
    return shape


def fill_dyn_shape(shape: tuple, values: Any) -> tuple:
    """`shape` with its symbols replaced, in order, by the run-time `values` of their int inputs."""
    it = iter(values)
    return tuple(int(next(it)) if isinstance(d, str) else d for d in shape)


def to_scalar(v: Any) -> int | float | bool | complex:
    """A Python scalar attr (NumPy scalars are converted; arrays are not scalars)."""
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (bool, int, float, complex)):
        if hasattr(type(v), "__index__") and not issubclass(type(v), np.ndarray):
            return operator.index(v)  # an int-like object (a traced size): read through its protocol
        raise TypeError(f"expected a Python scalar, got {type(v).__name__} {v!r}")
    return v


def _is_numpy_scalar(v: Any) -> bool:
    return isinstance(v, np.generic) or (type(v) is np.ndarray and v.ndim == 0)


def to_number(v: Any, real: bool = False) -> int | float | bool | np.ndarray:
    """A number attr: a real Python number, or a NumPy scalar kept as a 0-d array of its dtype (an attr
    value the printer and parser round-trip bit for bit), so its strong type and scalar math reach the
    op as in NumPy: ``np.linspace(np.float32(0), np.float32(1), n)`` is float32. A Python complex is
    refused (the ops' rules model real Python numbers); a NumPy complex scalar is kept unless `real`
    (np.arange's bounds, fftfreq's spacing: NumPy would only warn of the cast)."""
    if _is_numpy_scalar(v):
        kinds = "biuf" if real else "biufc"
        if np.dtype(v.dtype).kind not in kinds:
            raise TypeError(f"expected a {'real ' if real else ''}number, got {np.asarray(v)[()]!r}")
        normalize_dtype(v.dtype)   # TypeError for a dtype the IR lacks (longdouble)
        return np.array(v)
    s = to_scalar(v)
    if isinstance(s, complex):
        raise TypeError(f"expected a real number, got {s!r}")
    return s


def to_fill_value(v: Any) -> int | float | bool | complex | np.ndarray:
    """A fill value: a NumPy scalar kept as `to_number` keeps it (NumPy casts it into the array from its
    own type: ``np.full(n, np.int64(2**53 + 1), np.int32)`` wraps, a Python int would overflow), else any
    Python scalar."""
    return to_number(v) if _is_numpy_scalar(v) else to_scalar(v)


def numpy_value(v: Any) -> Any:
    """A `to_number` attr as NumPy's function takes it: a 0-d array back to its NumPy scalar."""
    return v[()] if type(v) is np.ndarray else v


def typed_memo_key(attrs: dict | None) -> tuple:
    """`infer`'s memo key with each number's type: the default key would share one entry between
    ``np.arange(0, n, 1)`` and ``np.arange(0, n, 1.0)`` (1 == 1.0), whose dtypes differ (int64, float64),
    and a `to_number` 0-d array is unhashable (keyed by its dtype and bytes)."""
    return tuple((k, type(v), (v.dtype.str, v.tobytes()) if type(v) is np.ndarray else v)
                 for k, v in (attrs or {}).items())


def to_float(v: Any) -> float:
    """A real scalar attr as a float; a complex value is refused (float() would drop nothing silently,
    but its own error does not name the attr)."""
    s = to_scalar(v)
    if isinstance(s, complex):
        raise TypeError(f"expected a real number, got complex {s!r}")
    return float(s)


def to_float_or_none(v: Any) -> float | None:
    return None if v is None else to_float(v)


def one_of(*choices: Any) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if v not in choices:
            raise ValueError(f"expected one of {choices}, got {v!r}")
        return v

    return convert


def reshape_dims(op: str, in_shape: tuple, new_shape: tuple) -> tuple:
    """`new_shape` (ints, dims, at most one -1) resolved against the element count of `in_shape`."""
    unknown = [i for i, d in enumerate(new_shape) if type(d) is int and d < 0]
    if len(unknown) > 1 or any(d != -1 for d in new_shape if type(d) is int and d < 0):
        raise ShapeError(f"{op}: bad shape {new_shape}: only one -1 and no other negative dims")
    total = dims.prod(in_shape)
    known = dims.prod(d for d in new_shape if not (type(d) is int and d < 0))
    if unknown:
        if known == 0:
            raise ShapeError(f"{op}: cannot infer -1 in {new_shape} for {in_shape}: other dims are 0")
        rest = dims.floordiv(total, known)
        if type(total) is int and type(known) is int and total % known:
            raise ShapeError(f"{op}: cannot reshape {in_shape} ({total} elements) into {new_shape}")
        out = list(new_shape)
        out[unknown[0]] = rest
        return tuple(out)
    if type(total) is int and type(known) is int and total != known:
        raise ShapeError(f"{op}: cannot reshape {in_shape} ({total} elements) into {new_shape}")
    if not dims.equal(total, known) and (type(total) is int) == (type(known) is int):
        raise ShapeError(f"{op}: cannot prove that {in_shape} and {new_shape} have the same size")
    return tuple(new_shape)


def slice_len(op: str, d: Any, s: slice) -> Any:
    """Length of ``range(d)[s]`` for a concrete or symbolic dim `d` and static slice bounds (the
    symbolic forms are exact for every size, e.g. ``x[1:]`` on ``B`` is ``max(0,B-1)``)."""
    if type(d) is int:
        return len(range(*s.indices(d)))
    step = 1 if s.step is None else s.step
    if step == 0:
        raise ShapeError(f"{op}: slice step cannot be zero")
    if step > 0:
        stop = (
            d
            if s.stop is None
            else dims.minimum(s.stop, d)
            if s.stop >= 0
            else dims.maximum(dims.add(d, s.stop), 0)
        )
        if s.start is not None and s.start < 0 and s.stop is None:
            span = dims.minimum(-s.start, d)
        else:
            start = (
                0 if s.start is None else s.start if s.start >= 0 else dims.maximum(dims.add(d, s.start), 0)
            )
            span = dims.maximum(dims.sub(stop, start), 0)
    else:
        start = _bound(s.start, d, dims.sub(d, 1), -1)
        stop = _bound(s.stop, d, -1, -1)
        span = dims.maximum(dims.sub(start, stop), 0)
    k = abs(step)
    return span if k == 1 else dims.floordiv(dims.add(span, k - 1), k)


def _bound(v: int | None, d: Any, default: Any, low: int) -> Any:
    """A slice bound of a negative step clamped as Python does: into [-1, d - 1]."""
    if v is None:
        return default
    hi = dims.add(d, low)
    if v >= 0:
        return dims.minimum(v, hi)
    return dims.maximum(dims.add(d, v), low)


def positional(fn: Callable) -> Callable:
    """A reference that takes the schema's inputs by name and passes them on positionally, in order
    (for callables without keyword parameters: ufuncs, operators). Its ``__wrapped__`` is `fn`, which
    the interpreter calls directly (`numtrace_ir.interpreter.reference_call`)."""
    def call(**named: Any) -> Any:
        return fn(*named.values())

    call.__wrapped__ = fn   # type: ignore[attr-defined]
    return call



def forwarding(fn: Callable, name: str, drop: tuple[str, ...] = (), method: bool = False) -> Callable:
    """A reference for a one-input op whose attrs are `fn`'s keywords: ``fn(input, **attrs)``, the
    input named `name`, the attrs in `drop` left out; for an ndarray `method` the input's own method
    of that name (a NumPy scalar's too). The interpreter calls `fn` itself from the node's source line
    (for a `method`, on an input of rank 1 or more, always an ndarray): NumPy's warnings for its caller
    (``warnings.warn(..., stacklevel=2)`` of ``np.nanmean``, a C method's) then name the user's line,
    as in the untraced program (`numtrace_ir.interpreter.reference_call`)."""
    def call(**named: Any) -> Any:
        x = named.pop(name)
        attrs = {k: v for k, v in named.items() if k not in drop}
        return getattr(x, fn.__name__)(**attrs) if method else fn(x, **attrs)

    call.__wrapped__ = fn   # type: ignore[attr-defined]
    call.forwards = (drop, int(method))   # type: ignore[attr-defined]
    return call
