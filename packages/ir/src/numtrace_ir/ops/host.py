"""`prim.host_call`: a function the registry has no op for, called on the real arrays at run time.

The node names the function by its public dotted path (attr ``func``: ``"numpy.fft.rfft"``,
``"numpy.add.at"`` for a ufunc method) and holds the call as a literal structure (attr ``call``: the
positional arguments and the keyword pairs, each array argument written ``"$k"`` for the node's k-th
input, a list as a tuple that starts with ``"$[]"``, and a string of the call that starts with ``$``
with one more ``$``). Its output types are
those of the example run (attr ``outputs``); the tracer guards the input shapes it was recorded at, and
a run whose result has other types (a data-dependent size, as `np.nonzero`'s) raises `GuardError`, so a
host call is never used where its recorded types do not hold. Arguments the function writes into
(attr ``writes``: input positions) are copied first and their new contents are extra outputs.

A saved graph names the function, and loading resolves it only in the modules of `HOST_MODULES`
(extended with `allow_host_module`), never in one a file names; file, process and print-state
functions (`DENIED`) are never called.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

import numpy as np

from numtrace_ir.guards import GuardError
from numtrace_ir.ops import sampling
from numtrace_ir.registry import Attr, Inputs, OpDef, Sample, register
from numtrace_ir.types import TensorType, normalize_dtype

__all__ = ["DENIED", "HOST_MODULES", "LIST", "allow_host_module", "decode_call", "host_name", "prepared",
           "resolve_host"]

# Modules whose functions a graph may call at run time (and which loading a graph may import).
HOST_MODULES: list[str] = ["numpy", "numpy.fft", "numpy.linalg", "scipy.special", "scipy.fft",
                           "scipy.linalg", "scipy.signal", "scipy.ndimage"]

# Functions that read or write files, change process-wide state or print: never host calls.
DENIED = frozenset({
    "load", "save", "savez", "savez_compressed", "savetxt", "loadtxt", "genfromtxt", "fromfile",
    "fromregex", "memmap", "open_memmap", "tofile", "set_printoptions", "printoptions", "seterr",
    "seterrcall", "errstate", "setbufsize", "info", "show_config", "show_runtime", "test", "source",
    "get_include", "lookfor", "who", "disp", "deprecate", "set_module",
})

_UFUNC_METHODS = ("at", "reduce", "accumulate", "reduceat", "outer")
_INPUT = re.compile(r"\$(\d+)\Z")
# A list argument is a tuple that starts with this (strings of the call that start with $ are escaped).
LIST = "$[]"


def allow_host_module(module: str) -> None:
    """Let graphs call (and load calls of) the functions of ``module`` at run time."""
    if not isinstance(module, str) or not all(p.isidentifier() for p in module.split(".")):
        raise ValueError(f"expected a dotted module name, got {module!r}")
    if module not in HOST_MODULES:
        HOST_MODULES.append(module)


def host_name(func: Any, method: str = "__call__") -> str | None:
    """The dotted name of `func` (`method`: a ufunc method) in an allowed module that is already
    imported, or None."""
    name = getattr(func, "__name__", None)
    if not isinstance(name, str) or name in DENIED or (method != "__call__" and method not in _UFUNC_METHODS):
        return None
    for module in HOST_MODULES:
        mod = sys.modules.get(module)
        if mod is not None and getattr(mod, name, None) is func:
            return f"{module}.{name}" + ("" if method == "__call__" else f".{method}")
    return None


def resolve_host(name: Any) -> Any:
    """The callable a graph names; ValueError for a name outside the allowed modules, denied, or not a
    function. Remembered per allow-list (every run of a host call resolves its name)."""
    key = (name, len(HOST_MODULES))
    found = _resolved.get(key) if isinstance(name, str) else None
    if found is None:
        found = _resolved[key] = _resolve(name)
    return found


_resolved: dict[tuple, Any] = {}


def _resolve(name: Any) -> Any:
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"a host call names its function by its dotted module path, got {name!r}")
    method = None
    head, _, attr = name.rpartition(".")
    if attr in _UFUNC_METHODS and head not in HOST_MODULES:
        method, (head, _, attr) = attr, head.rpartition(".")
    if head not in HOST_MODULES:
        raise ValueError(f"host call {name!r}: module {head!r} is not allowed (allowed: "
                         f"{', '.join(HOST_MODULES)}; see numtrace_ir.ops.host.allow_host_module)")
    if attr in DENIED or attr.startswith("_"):
        raise ValueError(f"host call {name!r}: {attr} is never called by a trace")
    try:
        found = getattr(importlib.import_module(head), attr, None)
    except ImportError as exc:
        raise ValueError(f"host call {name!r}: cannot import {head!r} ({exc})") from None
    if method is not None:
        if not isinstance(found, np.ufunc):
            raise ValueError(f"host call {name!r}: {head}.{attr} is not a ufunc")
        return getattr(found, method)
    if found is None or isinstance(found, type) or not callable(found) or type(found).__name__ == "module":
        raise ValueError(f"host call {name!r} does not name a function")
    return found


def decode_call(call: tuple, inputs: list) -> tuple[list, dict]:
    """(args, kwargs) of a host call: each ``"$k"`` replaced by ``inputs[k]``, ``"$$..."`` unescaped."""
    def fill(v: Any) -> Any:
        if type(v) is str and v.startswith("$"):
            m = _INPUT.match(v)
            return inputs[int(m.group(1))] if m else v[1:]
        if type(v) is tuple:
            if v[:1] == (LIST,):
                return [fill(x) for x in v[1:]]
            return tuple(fill(x) for x in v)
        if type(v) is slice:
            return slice(fill(v.start), fill(v.stop), fill(v.step))
        return v

    args, kwargs = call
    return [fill(a) for a in args], {k: fill(v) for k, v in kwargs}


def _checked_name(v: Any) -> str:
    resolve_host(v)
    return v


def _to_call(v: Any) -> tuple:
    if (type(v) is not tuple or len(v) != 2 or type(v[0]) is not tuple or type(v[1]) is not tuple
            or not all(type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in v[1])):
        raise TypeError(f"expected (args, ((name, value), ...)), got {v!r}")
    return v


def _to_outputs(v: Any) -> tuple:
    if type(v) is not tuple:
        raise TypeError(f"expected a tuple of (dtype, shape) pairs, got {v!r}")
    out = []
    for pair in v:
        if type(pair) is not tuple or len(pair) != 2 or type(pair[1]) is not tuple \
                or not all(type(d) is int and d >= 0 for d in pair[1]):
            raise TypeError(f"expected (dtype, shape) with a shape of non-negative ints, got {pair!r}")
        out.append((normalize_dtype(pair[0]), pair[1]))
    return tuple(out)


def _to_positions(v: Any) -> tuple:
    if type(v) is not tuple or not all(type(i) is int and i >= 0 for i in v):
        raise TypeError(f"expected a tuple of input positions, got {v!r}")
    return v


def _rule(types, attrs):
    resolve_host(attrs["func"])  # a graph naming another function is refused when it is read
    for k in attrs["writes"]:
        if k >= len(types) or not isinstance(types[k], TensorType):
            raise TypeError(f"prim.host_call: written input {k} is not an array input")
    for i, (t, shape) in enumerate(zip(types, attrs["shapes"])):
        if isinstance(t, TensorType) and (t.ndim != len(shape) or any(
                type(d) is int and d != s for d, s in zip(t.shape, shape))):
            raise ValueError(f"prim.host_call {attrs['func']}: input {i} is {t}, but the call was recorded "
                             f"for shape {list(shape)}")
    return (*(TensorType(dt, shape) for dt, shape in attrs["outputs"]), *(types[k] for k in attrs["writes"]))


def flat_results(result: Any) -> list:
    """The arrays a host function returned, in order (None: none; a tuple, list or named tuple: its
    items)."""
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def prepared(attrs: dict) -> Any:
    """``run(*inputs)`` computing a ``prim.host_call`` node with these attrs: the function resolved, the
    attrs read and the argument assembly chosen once, so that a run costs the call itself, a tuple
    compare of each result's (dtype, shape) with the recorded one, and no copy unless the function
    returned (a view of) an input (see `interpreter.reference_call`)."""
    func, call, writes = attrs["func"], attrs["call"], attrs["writes"]
    fn = resolve_host(func)
    outputs = tuple((np.dtype(dt), tuple(shape)) for dt, shape in attrs["outputs"])
    flat = _flat_positions(call)  # the common call fn(x, y): arguments read by position, nothing decoded

    def refused(results: list) -> GuardError:
        return GuardError(f"the results of {func}", None, [f"{dt}{list(s)}" for dt, s in outputs],
                          [f"{r.dtype}{list(r.shape)}" for r in results], "inputs")

    if flat is not None and not writes and len(outputs) == 1:
        (dtype, shape), = outputs
        in_order = flat == list(range(len(flat)))

        def run_one(*args: Any) -> Any:   # fn(x, y) -> one array: the common host call, kept short
            r = fn(*args) if in_order else fn(*[args[k] for k in flat])
            if type(r) is not np.ndarray:
                r = flat_results(r)
                if len(r) != 1:
                    raise refused(r)
                r = r[0]
            if r.dtype != dtype or r.shape != shape:
                raise refused([r])
            return _fresh(r, args)

        return run_one

    def run(*args: Any) -> Any:
        inputs = list(args)
        for k in writes:
            inputs[k] = np.array(inputs[k], copy=True)  # the function writes into its own copy
        if flat is not None:
            results = flat_results(fn(*[inputs[k] for k in flat]))
        else:
            a, kw = decode_call(call, inputs)
            results = flat_results(fn(*a, **kw))
        if len(results) != len(outputs) or any(r.dtype != dt or r.shape != shape for r, (dt, shape)
                                               in zip(results, outputs)):
            raise refused(results)
        out = (*(_fresh(r, args) for r in results), *(inputs[k] for k in writes))
        return out[0] if len(out) == 1 else out

    return run


def _fresh(r: np.ndarray, args: tuple) -> np.ndarray:
    """`r`, or a copy where it is an input or a view into one (a result is never an input's memory)."""
    if r.base is None:
        for a in args:
            if r is a:
                return np.array(r, copy=True)
        return r
    if any(isinstance(a, np.ndarray) and np.may_share_memory(r, a) for a in args):
        return np.array(r, copy=True)
    return r


def _flat_positions(call: tuple) -> list[int] | None:
    """The input positions of a call whose arguments are all arrays, given positionally; else None."""
    args, kwargs = call
    positions = [_INPUT.match(a) if type(a) is str else None for a in args]
    if kwargs or not all(positions):
        return None
    return [int(m.group(1)) for m in positions if m is not None]


def _impl(args, func, call, outputs, writes, shapes):
    return prepared({"func": func, "call": call, "outputs": outputs, "writes": writes})(*args)


def _samples(rng):
    x = sampling.array(rng, (8,), "f8")
    yield Sample((x,), {"func": "numpy.fft.rfft", "call": (("$0",), ()),
                        "outputs": ((np.dtype("c16"), (5,)),), "writes": (), "shapes": ((8,),)})
    a, b = sampling.array(rng, (4, 3), "f4"), sampling.array(rng, (4, 3), "f4")
    yield Sample((a, b), {"func": "numpy.cross", "call": (("$0", "$1"), (("axis", -1),)),
                          "outputs": ((np.dtype("f4"), (4, 3)),), "writes": (), "shapes": ((4, 3), (4, 3))})
    yield Sample((sampling.array(rng, (3, 2), "f8"),),
                 {"func": "numpy.pad", "call": (("$0", 1), (("mode", "edge"),)),
                  "outputs": ((np.dtype("f8"), (5, 4)),), "writes": (), "shapes": ((3, 2),)})
    yield Sample((sampling.array(rng, (5,), "f8"), np.array([0, 2, 0]), sampling.array(rng, (3,), "f8")),
                 {"func": "numpy.add.at", "call": (("$0", "$1", "$2"), ()), "outputs": (), "writes": (0,),
                  "shapes": ((5,), (3,), (3,))}, note="writes into its first argument")


register(
    OpDef(
        "prim.host_call",
        "other",
        [Inputs("args", "any", star=True, minimum=0), Attr("func", convert=_checked_name),
         Attr("call", convert=_to_call), Attr("outputs", convert=_to_outputs),
         Attr("writes", (), _to_positions), Attr("shapes", (), lambda v: tuple(map(tuple, v)))],
        _rule,
        _impl,
        samples=_samples,
        pure=False,
        doc="a function without an op of its own (``np.fft.rfft``, ``np.add.at``), called by its dotted "
        "name on the real arrays at run time; guarded on its input shapes and result types",
    )
)
