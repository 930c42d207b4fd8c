"""Discrete Fourier transforms (`np.fft.fft ifft rfft irfft fft2 ifft2 rfftn irfftn fftn ifftn`) and the
shifts (`fftshift`, `ifftshift`). NumPy's pocketfft call is the reference (backends run it into their
buffer); the rules give the transformed lengths (``n``/``s``, or the input's; ``rfft`` keeps
``n // 2 + 1``, ``irfft`` gives ``2 * (m - 1)`` by default) and the complex or real dtype of the input's
precision."""

from __future__ import annotations

from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Sample, Unsupported, register
from numtrace_ir.types import TensorType

_NORMS = (None, "backward", "ortho", "forward")


_ONE_AXIS = {"c2c": np.fft.fft, "r2c": np.fft.rfft, "c2r": np.fft.irfft}


def _dtype(name, kind, t):
    """The dtype of the 1-d transform of this kind (the n-d ones give the same)."""
    if t.dtype.kind not in "biufc":
        raise TypeError(f"{name}: unsupported dtype {t.dtype}")
    return rules.probe_dtype(name, _ONE_AXIS[kind], np.ones((2,), t.dtype))


def _length(name, n):
    if type(n) is int and n < 1:
        raise ShapeError(f"{name}: invalid number of data points ({n}) specified")
    return n


def _one_axis_rule(name, fn, kind):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        if t.ndim == 0:
            raise ShapeError(f"{name}: input must be at least 1-d")
        ax = rules.axis(name, attrs["axis"], t.ndim)
        m = t.shape[ax]
        n = attrs["n"]
        if kind == "c2r":
            n = dims.mul(2, dims.sub(m, 1)) if n is None else n
            out = _length(name, n)
        else:
            n = _length(name, m if n is None else n)
            out = dims.add(dims.floordiv(n, 2), 1) if kind == "r2c" else n
        shape = t.shape[:ax] + (out,) + t.shape[ax + 1:]
        return TensorType(_dtype(name, kind, t), shape)

    return rule


def _axes_of(name, t, s, axes, default_all: bool):
    if axes is None:
        axes = tuple(range(t.ndim)) if s is None else tuple(range(t.ndim - len(s), t.ndim))
        if not default_all and s is None:
            axes = (-2, -1)
    axes = tuple(rules.axis(name, a, t.ndim) for a in axes)
    if s is not None and len(s) != len(axes):
        raise ShapeError(f"{name}: shape and axes have different lengths")
    return axes


def _n_axes_rule(name, fn, kind, default_all: bool):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        s, axes = attrs["s"], attrs["axes"]
        if axes is None and not default_all and s is None:
            axes = (-2, -1)
        axes = _axes_of(name, t, s, axes, True)
        if not axes:
            raise ShapeError(f"{name}: no axes to transform")
        shape = list(t.shape)
        for i, ax in enumerate(axes):
            last = i == len(axes) - 1
            if s is not None and s[i] != -1:
                n = s[i]
            elif kind == "c2r" and last:
                n = dims.mul(2, dims.sub(t.shape[ax], 1))
            else:
                n = t.shape[ax]
            n = _length(name, n)
            shape[ax] = dims.add(dims.floordiv(n, 2), 1) if kind == "r2c" and last else n
        return TensorType(_dtype(name, kind, t), tuple(shape))

    return rule


def _to_s(v):
    return None if v is None else rules.to_ints(v)


def _to_axes(v):
    return None if v is None else rules.to_ints(v)


def _one_axis_samples(kind):
    def samples(rng):
        complex_in = kind != "r2c"
        dts = ("i4", "f4", "f8", "c8", "c16") if complex_in else ("bool", "i4", "f4", "f8")
        for dt in dts:
            yield Sample((sampling.array(rng, (3, 8), dt),), {})
        base = "c16" if complex_in else "f8"
        for attrs, shape in (({"n": 5}, (2, 8)), ({"n": 12, "axis": 0}, (4, 3)), ({"norm": "ortho"}, (7,)),
                             ({"norm": "forward", "axis": 1}, (2, 5, 3)), ({}, (1,)), ({}, (0, 6))):
            if kind == "c2r" and shape[attrs.get("axis", -1)] == 1 and "n" not in attrs:
                continue
            yield Sample((sampling.array(rng, shape, base),), attrs)

    return samples


def _n_axes_samples(kind, default_all):
    def samples(rng):
        complex_in = kind != "r2c"
        for dt in ("f4", "f8", "c16") if complex_in else ("i4", "f4", "f8"):
            yield Sample((sampling.array(rng, (3, 4, 6), dt),), {})
        base = "c16" if complex_in else "f8"
        for attrs, shape in (({"s": (4, 5), "axes": (-2, -1)}, (3, 6)), ({"axes": (0,)}, (4, 3)),
                             ({"norm": "ortho"}, (2, 3, 4)),
                             ({"s": (3, 8), "axes": (2, 0)}, (3, 2, 5)), ({"axes": (1, 0)}, (5, 4)),
                             ({"s": (-1, 6), "axes": (0, 1)}, (3, 4))):
            yield Sample((sampling.array(rng, shape, base),), attrs)

    return samples


def _fft_op(fn, kind: str) -> None:
    name = f"np.fft.{fn.__name__}"

    def impl(a, n, axis, norm):
        return fn(a, n, axis, norm)

    register(OpDef(
        name, "other",
        [Input("a"), Attr("n", None, rules.to_int_or_none), Attr("axis", -1, rules.to_int),
         Attr("norm", None, rules.one_of(*_NORMS)), Unsupported("out")],
        _one_axis_rule(name, fn, kind), impl, numpy_targets=[fn], samples=_one_axis_samples(kind),
        binder=defaults_or_host(name),
        doc="NumPy's pocketfft along one axis",
    ))


def _fftn_op(fn, kind: str, default_all: bool) -> None:
    name = f"np.fft.{fn.__name__}"

    def impl(a, s, axes, norm):
        return fn(a, s, axes, norm)

    register(OpDef(
        name, "other",
        [Input("a"), Attr("s", None, _to_s), Attr("axes", None if default_all else (-2, -1), _to_axes),
         Attr("norm", None, rules.one_of(*_NORMS)), Unsupported("out")],
        _n_axes_rule(name, fn, kind, default_all), impl, numpy_targets=[fn],
        samples=_n_axes_samples(kind, default_all), binder=defaults_or_host(name),
        doc="NumPy's pocketfft over several axes",
    ))


_f: Any   # NumPy's functions, of unlike signatures
for _f in (np.fft.fft, np.fft.ifft):
    _fft_op(_f, "c2c")
_fft_op(np.fft.rfft, "r2c")
_fft_op(np.fft.irfft, "c2r")
for _f, _k in ((np.fft.fft2, "c2c"), (np.fft.ifft2, "c2c"), (np.fft.rfft2, "r2c"), (np.fft.irfft2, "c2r")):
    _fftn_op(_f, _k, False)
for _f, _k in ((np.fft.fftn, "c2c"), (np.fft.ifftn, "c2c"), (np.fft.rfftn, "r2c"), (np.fft.irfftn, "c2r")):
    _fftn_op(_f, _k, True)


# -- shifts ----------------------------------------------------------------------------------------

def _shift_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt),), {})
    for attrs, shape in (({"axes": 0}, (5, 2)), ({"axes": (1, 0)}, (3, 5)), ({}, (7,)), ({}, (0, 3))):
        yield Sample((sampling.array(rng, shape, "f8"),), attrs)


def _shift_rule(name):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        rules.axes(name, attrs["axes"], t.ndim)
        return t

    return rule


for _f in (np.fft.fftshift, np.fft.ifftshift):
    _name = f"np.fft.{_f.__name__}"
    register(OpDef(
        _name, "movement", [Input("x"), Attr("axes", None, rules.to_axis)],
        _shift_rule(_name),
        (lambda f: lambda x, axes: np.asarray(f(x, axes)))(_f), numpy_targets=[_f], samples=_shift_samples,
        doc="a roll by half of each axis's length (computed per call, so one trace serves every size)",
    ))


# -- sample frequencies ----------------------------------------------------------------------------

def _freq_rule(name: str, real: bool):
    def rule(types, attrs):
        n = attrs["n"]
        if n < 0 and type(attrs["d"]) is np.ndarray:
            raise ValueError(f"{name}: negative dimensions are not allowed (n = {n})")
        if n < 1 and type(attrs["d"]) is not np.ndarray:   # a NumPy d's 1 / (n * d) is inf, with a warning
            raise ZeroDivisionError(f"{name}: float division by zero (n = {n}), as in NumPy's 1 / (n * d)")
        return TensorType(np.dtype(np.float64), (n // 2 + 1 if real else n,))

    return rule


def _freq_spacing(v):
    """d as a float, or a real NumPy scalar kept as a 0-d array of its type (the rule's float64 result
    holds for real d only)."""
    d = rules.to_number(v, real=True)
    return d if type(d) is np.ndarray else float(d)


for _f, _real in ((np.fft.fftfreq, False), (np.fft.rfftfreq, True)):
    _name = f"np.fft.{_f.__name__}"
    register(OpDef(
        _name, "creation",
        # d: a NumPy scalar is kept (a 0-d array attr), so 1 / (n * d) is NumPy's scalar math in d's type
        [Attr("n", convert=rules.to_int), Attr("d", 1.0, _freq_spacing), Unsupported("device")],
        _freq_rule(_name, _real),
        (lambda f: lambda n, d: f(n, rules.numpy_value(d)))(_f),
        numpy_targets=[_f],
        samples=lambda rng: iter([Sample((), {"n": 8}), Sample((), {"n": 7, "d": 0.1}), Sample((), {"n": 1}),
                                  Sample((), {"n": 2, "d": -2.0}), Sample((), {"n": 4, "d": np.float32(0.1)}),
                                  Sample((), {"n": 5, "d": np.int8(3)})]),
        memo_key=rules.typed_memo_key,
        doc="the frequencies of an n-point transform; with n read from a traced shape (``x.shape[0]``) it "
        "is recorded through `prim.dynamic`, so one trace serves every length",
    ))
