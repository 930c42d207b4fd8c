"""``TracedArray``: the stand-in for an ndarray while a function is traced.

It holds the concrete NumPy value (every op also runs eagerly, so the traced run
returns what the untraced one would) and the graph value that computes it. NumPy
hands it every ufunc and array function (``__array_ufunc__``/``__array_function__``);
operators and ndarray methods call those NumPy functions, so all paths meet in
``dispatch.call``.

In-place writes (``x[i] = v``, ``x += y``, ``out=``) are functionalized: the new
value is recorded out of place and the proxy is rebound. A proxy made by basic
indexing is a *view*: it remembers its parent and index, writes to it are written
back into the parent, and it re-reads itself from the parent when the parent was
written since (``_version``), so views and bases never disagree in the graph.
"""

from __future__ import annotations

import os
import sys
import weakref
from types import FrameType
from typing import Any, Literal

import numpy as np
from numtrace_ir import registry

from . import array_api, dispatch, hostcall, indexing
from .errors import TracerWarning
from .scalar_power import (
    NUMPY_SCALARS,
    is_scalar_operator,
    record_scalar_operator,
    record_scalar_power,
    record_scalar_unary_operator,
)
from .source import user_location, warn_at_user_line
from .traced_int import TracedFloat, TracedInt
from .traced_value import TracedValue, unwrap
from .tracer import Tracer, active_tracer, current_tracer
from .views import mark_untracked_aliases, note_layout_write, refuse_stale


def _left_graph(array: TracedArray, what: str) -> None:
    """``array``'s data leaves the graph as a Python value (``what``): the trace records a guard on it,
    checked by every run (a run where it differs is traced again), and says so at the user's line."""
    if hostcall.inside_implementation():
        raise hostcall.Untraceable(what)
    tracer = current_tracer()
    if tracer is not array._tracer or tracer.input_free(array._graph_value(tracer)):
        return  # after its trace, or data that is the same at every call: a plain value
    tracer.guard_data(array, what)
    warn_at_user_line(
        f"Converting a traced array to {what}: the trace depends on the value seen while tracing and guards "
        "it: a call where it differs traces the function again (and past the re-trace limit runs it "
        "eagerly). Keep the value an array (np.where instead of a branch on data) to stay in one trace.",
        TracerWarning,
    )


_MASKED_DIR = os.path.dirname(os.path.abspath(np.ma.__file__)) + os.sep


def _refuse_masked_array() -> None:
    """A ``numpy.ma`` masked array built around a traced array would hold its value as a constant and
    compute outside the trace: refused, naming the user's line."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(12):
        if frame is None:
            return
        if frame.f_code.co_filename.startswith(_MASKED_DIR):
            raise TypeError(f"numpy.ma cannot hold a traced array (at {user_location()}): a masked array's "
                            "operations are not recorded. Compute with the mask instead, e.g. "
                            "np.where(mask, fill, x) or x[~mask]")
        frame = frame.f_back


class TracedArray(TracedValue):
    """An array being traced: concrete value + graph value; behaves like an ndarray."""

    __slots__ = ("_parent", "_view", "_seen", "_version", "_scalar", "_reshaped_of", "__weakref__")
    _kind = "tensor"

    # An ndarray on the left of an operator defers to this class (via __array_ufunc__).
    __array_priority__ = 1000

    def __init__(self, tracer: Tracer, graph_value: Any, concrete: np.ndarray):
        self._tracer = tracer
        self._ir = graph_value
        self._concrete = concrete
        # View bookkeeping (see views.py): the parent, how this view relates to it, the parent's version seen.
        self._parent: TracedArray | None = None
        self._view: Any = None
        self._seen = 0
        self._version = 0
        # (base, whether unit dims matter) for a reshape NumPy made a view or a copy of base by layout
        self._reshaped_of: Any = None
        # NumPy gave an immutable scalar (np.generic) for this value (set by Tracer.wrap): `s += x` then
        # binds a new value and leaves other references to the old one alone, where an array is written.
        self._scalar = False
        tracer.live.append(weakref.ref(self))

    # -- graph value, views, writes ------------------------------------------------------------
    def _graph_value(self, tracer: Tracer) -> Any:
        if tracer is not self._tracer:
            raise RuntimeError("a traced array from another trace was used; traced arrays cannot outlive "
                               "the trace that produced them (store results, not traced intermediates)")
        if tracer.stale:
            refuse_stale(tracer, self)
        parent = self._parent
        if parent is not None:
            parent._graph_value(tracer)
            if self._seen != parent._version:
                # The parent was written since this view was taken: read it again (and so are views of
                # this view: its version moves on too).
                self._ir = self._view.read(tracer, parent, self._concrete)
                self._seen = parent._version
                self._version += 1
        return self._ir

    def _static(self, where: str) -> Any:
        raise TypeError(f"{where} must be a static value, but a traced array was given; numtrace "
                        "records this argument as a constant of the graph")

    def _assign(self, new: Any, what: str, casting: Literal["same_kind", "unsafe"] = "same_kind") -> None:
        """Make ``new`` the whole content of this array, as ``self[...] = new`` does (cast, broadcast)."""
        tracer = active_tracer(what)
        np.copyto(self._concrete, unwrap(new), casting=casting)  # NumPy's errors, NumPy's casts
        if not isinstance(new, TracedArray):
            new = dispatch.freeze(tracer, np.asarray(unwrap(new)).astype(self._concrete.dtype))
        if new._concrete.dtype != self._concrete.dtype:
            new = np.astype(new, self._concrete.dtype)
        if new._concrete.shape != self._concrete.shape:
            new = np.broadcast_to(new, self.shape)  # traced dims: follows the shapes
        elif new._ir is not self._ir and any(a != b for a, b in zip(new.shape, self.shape)):
            # Equal here; each inequality test records a guard that they stay equal, so a call where
            # the value would outgrow this array (NumPy: "non-broadcastable output operand") re-traces.
            raise AssertionError("numtrace internal error: shapes differ")
        self._rebind(tracer, new._graph_value(tracer), what)

    def _rebind(self, tracer: Tracer, graph_value: Any, what: str) -> None:
        """Point this proxy at a new graph value of the same type; propagate the write to its base."""
        self._warn_untracked_aliases(tracer, what)
        tracer.writes += 1
        note_layout_write(tracer, self)
        self._ir = graph_value
        self._version += 1
        parent = self._parent
        if parent is not None:
            written = self._view.write(tracer, parent, self)
            parent._rebind(tracer, written, what)
            self._seen = parent._version

    def _warn_untracked_aliases(self, tracer: Tracer, what: str) -> None:
        mark_untracked_aliases(tracer, self, what)

    # -- NumPy protocols -----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if self._scalar and is_scalar_operator(ufunc, method, inputs, kwargs, sys._getframe(1)):
            if ufunc is np.power:
                return _scalar_power(*inputs)   # np.float64(2) ** x[0]: NumPy's scalar math
            if _runs_scalar_math(ufunc, *inputs):
                return _scalar_operator(ufunc, *inputs)   # np.int8(1) + x[0]
        return dispatch.call(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        special = _SPECIAL_FUNCTIONS.get(func)
        if special is not None:
            return special(*args, **kwargs)
        result = dispatch.call(func, "__call__", args, kwargs)
        if func in _SCALAR_METHODS and args and args[0] is self:
            return _as_scalar_of(self, result)
        return result

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        _refuse_masked_array()
        _left_graph(self, "an ndarray (by code that calls __array__)")
        if copy is True or (dtype is not None and np.dtype(dtype) != self._concrete.dtype):
            return np.array(self._concrete, dtype=dtype, copy=True)
        # Code given the data itself (``np.lib.stride_tricks.as_strided``, compiled code) may write into
        # it, and the graph would never see the write: it gets the data read-only, so NumPy refuses that.
        value = self._concrete.view()
        value.flags.writeable = False
        return value

    # -- attributes ----------------------------------------------------------------------------
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """``isinstance(x, np.ndarray)`` holds as for the array NumPy gives (``isinstance`` falls back to
        ``__class__``, as for ``unittest.mock``); a value NumPy gives as a scalar is that scalar's class
        (``np.float64``: an ``np.generic``, a ``numbers.Number``, ``np.isscalar``), so code branching on
        it takes NumPy's branch. ``type(x)`` names the traced class, so C code (``np.asarray``) still
        reads data only through ``__array__``, and numtrace's own checks use ``type()``."""
        return self._concrete.dtype.type if self._scalar else np.ndarray

    @property
    def shape(self) -> tuple:
        """The shape as traced ints: each dim is recorded (``prim.dim``), so code computing with it
        stays in the graph."""
        tracer = active_tracer("x.shape")
        return tuple(tracer.record("prim.dim", [self], {"axis": i}, d)
                     for i, d in enumerate(self._concrete.shape))

    @property
    def ndim(self) -> int:
        return self._concrete.ndim

    @property
    def dtype(self) -> np.dtype:
        return self._concrete.dtype

    @property
    def size(self) -> Any:
        """The element count as a traced int (``prim.size``): ``x.sum() / x.size`` follows the input."""
        tracer = active_tracer("x.size")
        return tracer.record("prim.size", [self], {}, int(self._concrete.size))

    @property
    def itemsize(self) -> int:
        return self._concrete.itemsize

    @property
    def nbytes(self) -> Any:
        """``x.size * x.itemsize`` as a traced int, so that it follows the input's size."""
        return self.size * self._concrete.itemsize

    @property
    def T(self) -> TracedArray:
        return np.transpose(self)  # type: ignore[return-value]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    @property
    def mT(self) -> TracedArray:
        return np.matrix_transpose(self)  # type: ignore[return-value]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    @property
    def real(self) -> TracedArray:
        return np.real(self)

    @property
    def imag(self) -> TracedArray:
        return np.imag(self)

    # -- the Python array API ---------------------------------------------------------------------
    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """NumPy's functions, with ``asarray`` keeping traced arrays traced: libraries that dispatch on
        the array API (SciPy with ``SCIPY_ARRAY_API=1``) are recorded instead of frozen."""
        return array_api

    @property
    def device(self) -> str:
        return "cpu"

    def to_device(self, device: Any, stream: Any = None) -> TracedArray:
        if device != "cpu":
            raise ValueError(f"traced arrays live on the cpu device, got {device!r}")
        return self

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the class does not define.
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise NotImplementedError(f"ndarray.{name} is not supported on traced arrays; express it with "
                                      "NumPy functions, or compute it outside the traced function")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        """NumPy's text (``array([...])``, ``np.float64(...)``): its data leaves the graph, so it is
        guarded as ``str(x)`` is."""
        _left_graph(self, "text (repr(x))")
        return repr(self._concrete[()] if self._scalar else self._concrete)

    def __hash__(self) -> int:
        # An array is unhashable, as NumPy's; a value NumPy gives as a scalar (np.float64) is hashable,
        # and its hash is its data: guarded like float(x), so another value traces again.
        if not self._scalar:
            raise TypeError("unhashable type: 'numpy.ndarray'")
        _left_graph(self, "hash(x)")
        return hash(self._concrete[()])

    def __str__(self) -> str:
        _left_graph(self, "text (str(x))")
        return str(self._concrete)

    def __format__(self, spec: str) -> str:
        _left_graph(self, "text (f\"{x}\", format(x))")
        return format(self._concrete, spec)

    # -- conversions that leave the graph -------------------------------------------------------
    def __bool__(self) -> bool:
        value = bool(self._concrete)  # NumPy's error for an array of several elements
        if current_tracer() is self._tracer and not hostcall.inside_implementation():
            truth: Any = self if self._concrete.dtype == np.bool_ else np.not_equal(self, 0)
            _left_graph(truth, "bool(x)")
        else:
            _left_graph(self, "bool(x)")
        return value

    def __int__(self) -> int:
        _left_graph(self, "int(x)")
        return int(self._concrete)

    def __float__(self) -> float:
        _left_graph(self, "float(x)")
        return float(self._concrete)

    def __complex__(self) -> complex:
        _left_graph(self, "complex(x)")
        return complex(self._concrete)

    def __index__(self) -> int:
        value = self._concrete.__index__()
        _left_graph(self, "an index (operator.index(x))")
        return value

    def item(self, *args: Any) -> Any:
        _left_graph(self, "x.item()")
        return self._concrete.item(*args)

    def tolist(self) -> Any:
        _left_graph(self, "x.tolist()")
        return self._concrete.tolist()

    def __len__(self) -> int:
        """Python makes ``len()`` a plain int, so the length is guarded (``x.shape[0]`` stays traced)."""
        if self._concrete.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0].guarded()

    def __iter__(self):
        """Iteration unrolls over the traced length, which is guarded."""
        if self._concrete.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    def __getstate__(self):
        raise TypeError("a traced array cannot be pickled or copied out of its trace")

    # -- indexing -------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        return indexing.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        indexing.setitem(self, key, value)

    # -- methods that are NumPy functions ------------------------------------------------------
    def reshape(self, *shape: Any, order: str = "C") -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return np.reshape(self, shape, order=order)  # type: ignore[call-overload]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    def transpose(self, *axes: Any) -> Any:
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = () if axes[0] is None else tuple(axes[0])
        return np.transpose(self, axes or None)

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> Any:
        if order != "K" or casting != "unsafe" or not subok:
            raise NotImplementedError("astype(order=, casting=, subok=) is not supported by the tracer")
        return np.astype(self, dtype, copy=copy)  # type: ignore[call-overload]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    @property
    def flat(self) -> _Flat:
        return _Flat(self)

    def flatten(self, order: str = "C") -> Any:
        return np.ravel(self, order=order).copy()  # type: ignore[call-overload]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    def copy(self, order: str = "C") -> Any:
        return _as_scalar_of(self, np.copy(self, order=order))  # type: ignore[call-overload]  # NEP 18: NumPy dispatches a TracedArray to its __array_function__

    def fill(self, value: Any) -> None:
        if self._scalar:
            return  # a NumPy scalar fills a temporary array: its own value stays
        self[...] = value

    def sort(self, axis: int = -1, kind: Any = None) -> None:
        """In-place sort, functionalized: the array is rebound to ``np.sort(self, axis)``."""
        self._assign(np.sort(self, axis=axis, kind=kind), "ndarray.sort")

    def view(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ndarray.view cannot be traced (it reinterprets memory); use astype")

    def conjugate(self) -> Any:
        """``x.conj()``: for data that is not complex, NumPy's method returns ``x`` itself (writes into
        the result reach ``x``), where ``np.conjugate`` makes a new array."""
        return np.conjugate(self) if self._concrete.dtype.kind == "c" else self

    conj = conjugate

    def compress(self, condition: Any, axis: Any = None, out: Any = None) -> Any:
        """``x.compress(condition)`` is ``np.compress(condition, x)``: the array is the function's
        second argument, not its first."""
        return np.compress(condition, self, axis=axis, out=out)

    def __copy__(self) -> Any:
        """``copy.copy(x)``: a recorded ``np.copy``, a new array as for an ndarray (writes to either
        one leave the other alone)."""
        return np.copy(self)

    def __deepcopy__(self, memo: dict) -> Any:
        """``copy.deepcopy(x)``: a recorded ``np.copy``, shared within one deepcopy call as usual."""
        result = memo.get(id(self))
        if result is None:
            result = memo[id(self)] = np.copy(self)
        return result


class _Flat:
    """``x.flat`` of a traced array: reading it (iteration, ``len``, ``x.flat[key]``, a copy as NumPy
    gives) reads ``np.ravel(x)``; writing through it is refused, as NumPy writes into ``x`` itself."""

    __slots__ = ("_array",)

    def __init__(self, array: TracedArray):
        self._array = array

    def __iter__(self) -> Any:
        return iter(np.ravel(self._array))

    def __len__(self) -> int:
        return len(np.ravel(self._array))

    def __getitem__(self, key: Any) -> Any:
        item = np.ravel(self._array)[key]
        return item if item._scalar else np.copy(item)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NotImplementedError("writing through ndarray.flat is not supported on traced arrays; "
                                  "assign with x[np.unravel_index(i, x.shape)] = value")


def _method(name: str):
    """``x.name(...)``: the registry's ``np.ndarray.name`` variant where it has one (the method's own
    signature and defaults: ``x.clip(0.0)``, ``x.round(2)``), else ``np.name(x, ...)``."""
    method_func = getattr(np.ndarray, name)
    if registry.for_numpy(method_func) is not None:
        def method(self: TracedArray, *args: Any, **kwargs: Any) -> Any:
            return _as_scalar_of(self, dispatch.call(method_func, "__call__", (self, *args), kwargs))

        method.__doc__ = f"``ndarray.{name}`` applied to this array (recorded)."
    else:
        func = getattr(np, name)

        def method(self: TracedArray, *args: Any, **kwargs: Any) -> Any:
            return _as_scalar_of(self, func(self, *args, **kwargs))

        method.__doc__ = f"``np.{name}`` applied to this array (recorded)."
    method.__name__ = name
    return method


# ndarray methods: through the registry's method variant, or the NumPy function with the array first.
for _name in ("sum", "mean", "std", "var", "prod", "max", "min", "argmax", "argmin", "any", "all",
              "cumsum", "cumprod", "clip", "dot", "squeeze", "ravel", "swapaxes", "repeat", "take",
              "argsort", "round", "nonzero", "diagonal", "trace", "searchsorted",
              "choose", "argpartition", "put"):
    setattr(TracedArray, _name, _method(_name))
del _name



def _binary(ufunc: np.ufunc):
    def forward(self, other):
        if self._scalar and _runs_scalar_math(ufunc, self, other):
            return _scalar_operator(ufunc, self, other)
        return ufunc(self, other)

    def reflected(self, other):
        if self._scalar and _runs_scalar_math(ufunc, other, self):
            return _scalar_operator(ufunc, other, self)
        return ufunc(other, self)

    def inplace(self, other):
        if self._scalar:
            return forward(self, other)  # a NumPy scalar is immutable: `s += x` is `s = s + x`
        return ufunc(self, other, out=(self,))

    return forward, reflected, inplace


def _fast_power(self, other) -> np.ufunc | None:
    """The ufunc ndarray.__pow__ and __ipow__ call instead of np.power (NumPy's fast_scalar_power): a
    float or complex array to the Python int -1 or 2 or the Python float 0.5 is np.reciprocal,
    np.square or np.sqrt, whose complex results differ from np.power's in the last bits and whose
    warnings name them ("overflow encountered in square"); a bool array squared is np.square, int8 where
    np.power gives int64. An exponent computed from a shape (``x ** (n - 1)``) is such a Python number
    at run time: its comparisons here are guards, so a call where it becomes 2 traces again. A NumPy
    scalar base runs NumPy's scalar math, which takes no shortcut (np.True_ ** 2 is np.int64)."""
    kind = self.dtype.kind
    if self._scalar or kind not in "bfc":
        return None
    if type(other) in (int, TracedInt):
        if other == 2:
            return np.square
        return np.reciprocal if kind != "b" and other == -1 else None
    return np.sqrt if type(other) in (float, TracedFloat) and kind != "b" and other == 0.5 else None


def _scalar_operand(v: Any) -> bool:
    """A NumPy scalar (traced or not) or a Python number (traced or not): what NumPy's scalar ``**`` takes."""
    if isinstance(v, TracedArray):
        return v._scalar
    return isinstance(v, (*NUMPY_SCALARS, TracedInt, TracedFloat)) or type(v) in (int, float, bool, complex)


def _scalar_power(base: Any, exponent: Any) -> Any:
    return record_scalar_power(current_tracer() or active_tracer("**"), base, exponent)


# The operators whose NumPy scalar math differs from the ufunc on 0-d arrays in more than the warnings'
# names for every real dtype (``//`` and ``%``: their warnings only, recorded as cheap host steps)...
_ALL_REAL_SCALAR_MATH = (np.floor_divide, np.remainder, np.divmod)
# ...and for integer dtypes (int overflow checked: "overflow encountered in scalar add").
_INT_SCALAR_MATH = (np.add, np.subtract, np.multiply, np.true_divide, *_ALL_REAL_SCALAR_MATH)
# Complex scalar math differs from the ufuncs in bits (its `*` rounds each product, the ufunc's loop
# fuses them: np.complex128 products differ in the last bit) and in errors (the ufunc warns "overflow
# encountered in multiply" at (1e308+1e308j) * 1.5, where the operator returns the same value silently).
_COMPLEX_SCALAR_MATH = (np.add, np.subtract, np.multiply, np.true_divide)


def _scalar_math_kind(v: Any) -> str:
    """The dtype kind of a NumPy scalar (traced or not); "p" / "q" / "j" for a Python int or bool / float
    (traced or not) / complex; "" for anything else (an array, a 0-d array)."""
    if type(v) is TracedArray:
        return v._concrete.dtype.kind if v._scalar else ""
    if isinstance(v, np.generic):
        return v.dtype.kind
    return {int: "p", bool: "p", TracedInt: "p", float: "q", TracedFloat: "q", complex: "j"}.get(type(v), "")


def _runs_scalar_math(ufunc: np.ufunc, a: Any, b: Any) -> bool:
    """Whether ``a <op> b`` (`ufunc`'s operator) must run as NumPy's scalar math, `np.scalar_operator`: NumPy
    int scalars with int or bool scalars or Python ints (int overflow warned, raised under
    np.errstate(over="raise"), where the ufunc on 0-d arrays wraps silently), ``+ - * /`` of NumPy complex
    scalars (the bits of ``*``, the overflow the ufunc reports where the operator does not), and ``//``
    ``%`` ``divmod`` of real scalars ("scalar remainder" warnings). Float ``+ - * /`` stay the ufuncs, which
    the backends fuse: IEEE gives them NumPy's bits; only their warnings' names lack "scalar"
    (docs/guide/sharp-edges.md)."""
    pair = _scalar_math_kind(a) + _scalar_math_kind(b)
    if len(pair) != 2:   # an operand not a scalar
        return False
    kinds = set(pair)
    if kinds & set("iu") and kinds <= set("iubp"):
        return ufunc in _INT_SCALAR_MATH
    if "c" in kinds and kinds <= set("iubfcpqj"):
        return ufunc in _COMPLEX_SCALAR_MATH
    return ufunc in _ALL_REAL_SCALAR_MATH and bool(kinds & set("iuf")) and kinds <= set("iubfpq")


def _scalar_operator(ufunc: np.ufunc, a: Any, b: Any) -> Any:
    return record_scalar_operator(current_tracer() or active_tracer(ufunc.__name__), ufunc, a, b)


def _unary(ufunc: np.ufunc):
    scalar_math = ufunc in (np.negative, np.absolute)   # + and ~ of NumPy scalars never warn: the ufuncs

    def operator(self):
        kind = self._concrete.dtype.kind
        if scalar_math and self._scalar and (kind in "iu" or (kind == "c" and ufunc is np.absolute)):
            # NumPy's scalar math: "overflow encountered in scalar negative" (-np.int8(-128), -np.uint8(3));
            # a complex scalar's abs() is C hypot, whose last bit np.absolute's loop differs from
            tracer = current_tracer() or active_tracer(ufunc.__name__)
            return record_scalar_unary_operator(tracer, ufunc, self)
        return ufunc(self)

    return operator


def _pow(self, other):
    if self._scalar and _scalar_operand(other):
        return _scalar_power(self, other)
    fast = _fast_power(self, other)
    return np.power(self, other) if fast is None else fast(self)


def _rpow(self, other):
    return _scalar_power(other, self) if self._scalar and _scalar_operand(other) else np.power(other, self)


def _ipow(self, other):
    if self._scalar and _scalar_operand(other):
        return _scalar_power(self, other)   # a NumPy scalar is immutable: `s **= y` is `s = s ** y`
    fast = _fast_power(self, other)
    return _binary(np.power)[2](self, other) if fast is None else fast(self, out=(self,))


for _op, _ufunc in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
                    "matmul": np.matmul, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
                    "lshift": np.left_shift, "rshift": np.right_shift}.items():
    _f, _r, _i = _binary(_ufunc)
    setattr(TracedArray, f"__{_op}__", _pow if _op == "pow" else _f)
    setattr(TracedArray, f"__r{_op}__", _rpow if _op == "pow" else _r)
    setattr(TracedArray, f"__i{_op}__", _ipow if _op == "pow" else _i)

for _op, _ufunc in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                    "eq": np.equal, "ne": np.not_equal}.items():
    setattr(TracedArray, f"__{_op}__", _binary(_ufunc)[0])
for _op, _ufunc in {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}.items():
    setattr(TracedArray, f"__{_op}__", _unary(_ufunc))
for _op, _f in zip(("__divmod__", "__rdivmod__"), _binary(np.divmod)):   # (as // and %: scalar math)
    setattr(TracedArray, _op, _f)
del _op, _ufunc, _f, _r, _i


def _shape(a: Any) -> tuple:
    return a.shape if isinstance(a, TracedArray) else np.shape(unwrap(a))


def _ndim(a: Any) -> int:
    return np.ndim(unwrap(a))


def _size(a: Any, axis: int | None = None) -> Any:
    if not isinstance(a, TracedArray):
        return np.size(unwrap(a), axis)
    return a.size if axis is None else a.shape[axis]  # traced: they follow the input


def _about_dtypes(func: Any) -> Any:
    """A function of dtypes only (``np.result_type``): dtypes are fixed by the trace's signature."""
    return lambda *args, **kwargs: func(*unwrap(args), **unwrap(kwargs))


def _nonzero(a: Any) -> tuple:
    """``np.nonzero(a)``: per axis, the index grid read through the boolean mask ``a != 0``, so each
    result's length is the mask's data-dependent count (as ``x[mask]`` records it)."""
    if not isinstance(a, TracedArray):
        return np.nonzero(unwrap(a))
    np.nonzero(a._concrete)  # NumPy's own errors (a 0-d array)
    mask = a if a.dtype == np.bool_ else np.not_equal(a, 0)
    shape = a.shape
    grids = []
    for axis in range(a.ndim):
        line = np.arange(shape[axis]).reshape([-1 if i == axis else 1 for i in range(a.ndim)])
        grids.append(np.broadcast_to(line, shape)[mask])
    return tuple(grids)


def _where(condition: Any, *args: Any, **kwargs: Any) -> Any:
    """``np.where(condition)`` is ``np.nonzero(condition)``; the three-argument form is the op."""
    if not args and not kwargs:
        return _nonzero(np.asarray(condition))
    return dispatch.call(np.where, "__call__", (condition, *args), kwargs)


# Array functions that return Python values about the array, not arrays: answered directly; and
# functions whose NumPy form has a data-dependent result (nonzero) composed from recorded ops.
# NumPy functions that call the scalar's own method (``np.reshape(s, ())`` is ``s.reshape(())``): on a
# NumPy scalar they give a NumPy scalar where the result is 0-d, as the methods and properties do.
_SCALAR_METHODS = frozenset({np.reshape, np.transpose, np.squeeze, np.real, np.imag, np.astype})


def _as_scalar_of(array: TracedArray, result: Any) -> Any:
    """`result` of a method of `array`, a NumPy scalar where `array` is one and `result` is 0-d (NumPy's
    scalar methods return scalars; the traced scalar's own value is a 0-d array)."""
    if array._scalar and isinstance(result, TracedArray) and result._concrete.ndim == 0:
        result._scalar = True
    return result


_SPECIAL_FUNCTIONS: dict[Any, Any] = {
    np.shape: _shape, np.ndim: _ndim, np.size: _size, np.nonzero: _nonzero, np.where: _where,
    **{f: _about_dtypes(f) for f in (np.result_type, np.iscomplexobj, np.isrealobj, np.can_cast,
                                     np.min_scalar_type)},
}
