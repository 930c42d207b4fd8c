"""Creation ops shaped like an input: `zeros_like`, `ones_like`, `full_like` (the input's values are
not read, only its dtype and shape). Arrays created from constant shapes are constants, not ops."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir.ops import rules
from numtrace_ir.ops import sampling as S
from numtrace_ir.registry import Attr, Input, OpDef, Unsupported, register
from numtrace_ir.types import TensorType


def _like_rule(name):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        shape = t.shape if attrs["shape"] is None else attrs["shape"]
        return TensorType(attrs["dtype"] or t.dtype, shape)

    return rule


def like_op(name: str, fn: Callable, fill: bool) -> OpDef:
    params = (
        [Input("a")]
        + ([Attr("fill_value", convert=rules.to_scalar)] if fill else [])
        + [
            Attr("dtype", None, rules.to_dtype_or_none),
            Attr("order", "K", rules.one_of("C", "F", "A", "K")),
            Unsupported("subok", True),
            Attr("shape", None, lambda v: None if v is None else rules.to_shape(v)),
        ]
    )
    fill_attrs = {"fill_value": 2} if fill else {}
    cases = [
        (((3, 4),), fill_attrs),
        (((),), fill_attrs),
        (((0, 2),), {**fill_attrs, "dtype": np.dtype("f4")}),
        (((3, 4),), {**fill_attrs, "shape": (2, 5)}),
        (((2, 3),), {**fill_attrs, "order": "F"}),
    ]
    if fill:
        cases.append((((2, 2),), {"fill_value": 1.5, "dtype": np.dtype("i4")}))
    return register(
        OpDef(
            name,
            "creation",
            params,
            _like_rule(name),
            lambda a, **kw: fn(a, **kw),
            numpy_targets=[fn],
            samples=S.sweep(cases),
        )
    )


like_op("np.zeros_like", np.zeros_like, False)
like_op("np.ones_like", np.ones_like, False)
like_op("np.full_like", np.full_like, True)
