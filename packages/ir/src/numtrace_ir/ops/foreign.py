"""`np.ufunc`: any NumPy ufunc the registry has no entry of its own for (``scipy.special.expit``, ``erf``,
``gammaln``, ...), recorded by name.

The ufunc is named by its public module path (attr ``ufunc``, e.g. ``"scipy.special.expit"``); its
shape rule is broadcasting and its dtype rule is the ufunc's own type resolution (NEP 50: Python scalars
are weak), so the node types what NumPy computes. A saved graph names the ufunc and loading imports
only modules on an allow-list (`UFUNC_MODULES`, extended with `allow_ufunc_module`), never one a file
names, and accepts only a real ``np.ufunc`` found there.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from typing import Any

import numpy as np

from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Inputs, OpDef, Sample, register
from numtrace_ir.types import TensorType

__all__ = ["UFUNC_MODULES", "allow_ufunc_module", "resolve_ufunc", "ufunc_name"]

# Modules whose ufuncs a graph may name (and which loading a graph may import).
UFUNC_MODULES: list[str] = ["numpy", "scipy.special"]


def allow_ufunc_module(module: str) -> None:
    """Let graphs record and load the ufuncs of ``module`` (a package of your own, say)."""
    if not isinstance(module, str) or not all(p.isidentifier() for p in module.split(".")):
        raise ValueError(f"expected a dotted module name, got {module!r}")
    if module not in UFUNC_MODULES:
        UFUNC_MODULES.append(module)


def ufunc_name(ufunc: np.ufunc) -> str | None:
    """The public dotted name of `ufunc` in an allowed module that is already imported, or None."""
    for module in UFUNC_MODULES:
        mod = sys.modules.get(module)
        if mod is not None and getattr(mod, ufunc.__name__, None) is ufunc:
            return f"{module}.{ufunc.__name__}"
    return None


def resolve_ufunc(name: Any) -> np.ufunc:
    """The ufunc a graph names; ValueError for a name outside the allowed modules or not a ufunc."""
    if not isinstance(name, str) or "." not in name:
        raise ValueError(f"a ufunc is named by its dotted module path, got {name!r}")
    module, _, attr = name.rpartition(".")
    if module not in UFUNC_MODULES:
        raise ValueError(f"ufunc {name!r}: module {module!r} is not allowed (allowed: "
                         f"{', '.join(UFUNC_MODULES)}; see numtrace_ir.ops.foreign.allow_ufunc_module)")
    try:
        found = getattr(importlib.import_module(module), attr, None)
    except ImportError as exc:
        raise ValueError(f"ufunc {name!r}: cannot import {module!r} ({exc})") from None
    if not isinstance(found, np.ufunc):
        raise ValueError(f"{name!r} is not a NumPy ufunc")
    return found


def _checked_name(v: Any) -> str:
    resolve_ufunc(v)
    return v


def _rule(types, attrs):
    name = attrs["ufunc"]
    ufunc = resolve_ufunc(name)
    if len(types) != ufunc.nin:
        raise TypeError(f"{name} takes {ufunc.nin} inputs, got {len(types)}")
    shape = rules.broadcast(name, *(rules.shape_of(t) for t in types))
    return tuple(TensorType(dt, shape) for dt in rules.ufunc_dtypes(name, ufunc, types))


def _reference(x, ufunc):
    return resolve_ufunc(ufunc)(*x)


def _samples(rng):
    for name, domain in (("numpy.logaddexp", (-3.0, 3.0)), ("numpy.frexp", (0.5, 4.0))):
        ufunc = resolve_ufunc(name)
        for dt in ("f4", "f8"):
            for shape in ((3, 4), (), (0, 2)):
                arrays = tuple(sampling.array(rng, shape, dt, domain) for _ in range(ufunc.nin))
                yield Sample(arrays, {"ufunc": name})
    yield Sample((sampling.array(rng, (2, 3), "f4"), 2.0), {"ufunc": "numpy.logaddexp"}, note="weak scalar")
    yield Sample((sampling.array(rng, (4, 1), "f8"), sampling.array(rng, (3,), "f8")),
                 {"ufunc": "numpy.logaddexp"},
                 note="broadcasting")
    if "scipy.special" in sys.modules or importlib.util.find_spec("scipy") is not None:
        for name in ("scipy.special.expit", "scipy.special.erf", "scipy.special.gammaln"):
            yield Sample((sampling.array(rng, (3, 4), "f4", (0.5, 3.0)),), {"ufunc": name})


register(
    OpDef(
        "np.ufunc",
        "elementwise",
        [Inputs("x", "any", star=True), Attr("ufunc", convert=_checked_name)],
        _rule,
        _reference,
        samples=_samples,
        doc="a ufunc without an entry of its own (``scipy.special.expit``), by its dotted name",
    )
)
