"""``.code``: a traced graph as readable Python source that computes the same result with NumPy.

An op whose name is a NumPy function (``np.sum``) is written as a call of that
function: inputs positionally in schema order, attributes as keywords. Other ops
(``np.add.outer``, index ops, prims) are written as the NumPy expression they
stand for where there is one, else as ``op("name")(...)`` (the registry reference).
Array constants up to 16 elements are inlined; larger ones are read from
``CONSTANTS`` (``TracedFunction.constants`` holds them).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir import display_location, registry
from numtrace_ir.ops.indexing import DATA_SIZE
from numtrace_ir.ops.scatter import SCATTER_OPS
from numtrace_ir.registry import Attr, Input, Inputs

_INLINE_LIMIT = 16


def python_name(name: str | None, fallback: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name) if name else fallback
    if not base.isidentifier() or keyword.iskeyword(base) or base in ("np", "op", "CONSTANTS"):
        base = f"v_{base}"
    candidate, i = base, 1
    while candidate in taken:
        candidate, i = f"{base}_{i}", i + 1
    taken.add(candidate)
    return candidate


def _literal(value: Any, constants: dict[str, np.ndarray]) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= _INLINE_LIMIT:
            return f"np.array({value.tolist()!r}, dtype=np.{value.dtype.name})"
        key = f"c{len(constants)}"
        constants[key] = value
        return f"CONSTANTS[{key!r}]"
    if isinstance(value, np.dtype):
        return f"np.{value.name}"
    if isinstance(value, float) and not np.isfinite(value):
        return "np.nan" if value != value else ("np.inf" if value > 0 else "-np.inf")
    if isinstance(value, tuple):
        items = ", ".join(_literal(v, constants) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    if value is Ellipsis:
        return "..."
    return repr(value)


def _index_text(index: tuple, arrays: list[str], constants: dict[str, np.ndarray]) -> str:
    """A subscript from an ``index`` attr whose ``"input"`` entries are the index arrays, in order."""
    arrays = list(arrays)
    parts = []
    for entry in index:
        if entry == "input":
            parts.append(arrays.pop(0))
        elif type(entry) is slice:
            text = ":".join("" if b is None else str(b) for b in (entry.start, entry.stop))
            parts.append(text + (f":{entry.step}" if entry.step is not None else ""))
        else:
            parts.append(_literal(entry, constants))
    return ", ".join(parts) if parts else "()"


# Ops whose attrs are not the NumPy function's parameters (np.gradient's spacings are its *varargs,
# np.histogram's bins a count or an input, np.select's inputs its two lists and its default): written
# as calls of their reference.
_NOT_BY_SCHEMA = frozenset({"np.gradient", "np.histogram", "np.select"})


def _numpy_function(op_name: str) -> bool:
    """Whether ``op_name`` is ``np.<function>`` and calling that function is how the op is traced."""
    if not op_name.startswith("np.") or op_name.count(".") != 1 or op_name in _NOT_BY_SCHEMA:
        return False
    func = getattr(np, op_name[3:], None)
    op = None if func is None else registry.for_numpy(func)
    return op is not None and op.name == op_name


def _parameters(func: Any) -> list | None:
    """``func``'s parameters, or None if its signature is unknown."""
    import inspect

    try:
        return list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None


def positional_only(func: Any) -> set[str]:
    """Names of ``func``'s positional-only parameters (``np.astype(x, dtype, /)``); empty if unknown."""
    return {p.name for p in _parameters(func) or () if p.kind is p.POSITIONAL_ONLY}


def _read_off_result(opdef: Any, func: Any) -> set[str]:
    """The op's attrs that are no parameter of NumPy's function because the tracer reads them off NumPy's
    result (`OpDef.result_attrs`): NumPy decides them again when the code runs."""
    params = _parameters(func)
    if opdef.result_attrs is None or params is None:
        return set()
    return {p.name for p in opdef.params if isinstance(p, Attr)} - {p.name for p in params}


def _is_default(param: Attr, value: Any) -> bool:
    default = param.default
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return False
    return type(value) is type(default) and value == default


def call_text(node: Any, args: list[str], constants: dict[str, np.ndarray]) -> str:
    op = node.op
    attrs = dict(node.attrs)
    if op == "prim.Constant":
        return _literal(attrs["value"], constants)
    if op == "prim.dim":
        return f"{args[0]}.shape[{attrs['axis']}]"
    if op in ("np.getitem", "np.getitem_mask"):
        return f"{args[0]}[{_index_text(attrs['index'], args[1:], constants)}]"
    if _numpy_function(op):
        opdef = registry.get(op)
        omitted = set(attrs.pop("omitted", ()))
        pieces: list[str] = []
        remaining = list(args)
        last_input = max((i for i, p in enumerate(opdef.params) if isinstance(p, (Input, Inputs))),
                         default=-1)
        by_position = positional_only(getattr(np, op[3:]))
        not_numpys = _read_off_result(opdef, getattr(np, op[3:]))
        by_keyword = False   # after an input left out (NumPy's default for it is not None)
        for i, p in enumerate(opdef.params):
            if isinstance(p, Input):
                if p.name in omitted and p.name in opdef.absent_by_default:
                    by_keyword = True
                elif by_keyword:
                    pieces.append(f"{p.name}={remaining.pop(0)}")
                else:
                    pieces.append("None" if p.name in omitted else remaining.pop(0))
            elif isinstance(p, Inputs):
                group, remaining = remaining, []
                pieces.append(", ".join(group) if p.star else f"[{', '.join(group)}]")
            elif isinstance(p, Attr) and p.name in attrs:
                raw = attrs.pop(p.name)
                if p is DATA_SIZE or p.name in not_numpys:
                    continue  # the symbol of a data-dependent length, a dtype NumPy decides: no parameter
                if _is_default(p, raw) and i >= last_input:
                    continue  # keep the code short: NumPy's default is the traced value
                value = _literal(raw, constants)
                pieces.append(value if i < last_input or p.name in by_position else f"{p.name}={value}")
        return f"{op}({', '.join(pieces)})"
    rendered = ", ".join(args + [f"{k}={_literal(v, constants)}" for k, v in attrs.items()])
    return f"op({op!r})({rendered})"


def _scatter_text(node: Any, target: str, args: list[str], constants: dict[str, np.ndarray]) -> str | None:
    """The NumPy call writing a scatter op's update into ``target``; None for a ufunc outside NumPy."""
    attrs = node.attrs
    if node.op == "np.put":
        return f"np.put({target}, {args[0]}, {args[1]}, mode={attrs.get('mode', 'raise')!r})"
    if node.op == "np.put_along_axis":
        return f"np.put_along_axis({target}, {args[0]}, {args[1]}, {attrs['axis']!r})"
    module, _, name = attrs["ufunc"].rpartition(".")
    if module != "numpy":
        return None
    it = iter(args)
    key = [next(it) if e == "input" else repr(e) if type(e) is slice else _literal(e, constants)
           for e in attrs["index"]]
    key_text = "(" + ", ".join(key) + ",)" if key else "()"
    return f"np.{name}.at({', '.join([target, key_text, *it])})"


def graph_to_python(graph: Any, name: str, arg_names: Sequence[str], state_names: Sequence[str],
                    constants: dict[str, np.ndarray] | None = None,
                    returned: Sequence[tuple[int, int]] = ()) -> str:
    """Python source of ``def name(args..., state...)`` computing ``graph``'s outputs, with the arguments
    the function returns as themselves (`returned`: ``(position, input)``) among them."""
    constants = {} if constants is None else constants
    taken: set[str] = set()
    names: dict[Any, str] = {}
    inputs = list(graph.inputs)
    labels = list(arg_names) + list(state_names)
    for i, v in enumerate(inputs):
        names[v] = python_name(labels[i] if i < len(labels) else v.name, f"arg{i}", taken)
    lines = [f"def {python_name(name, 'traced', set())}({', '.join(names[v] for v in inputs)}):"]
    counter = 0
    for node in graph.nodes:
        if node.op == "prim.Constant" and not isinstance(node.attrs["value"], np.ndarray):
            names[node.output] = _literal(node.attrs["value"], constants)  # scalars are written inline
            continue
        outs = []
        for v in node.outputs:
            counter += 1
            names[v] = python_name(v.name, f"v{counter}", taken)
            outs.append(names[v])
        args = [names[v] for v in node.inputs]
        comment = f"  # {display_location(node.loc)}" if node.loc else ""
        if node.op == "np.setitem":
            # Functional update: a copy, then NumPy's in-place assignment on it.
            key = _index_text(node.attrs["index"], args[1:-1], constants)
            lines.append(f"    {outs[0]} = {args[0]}.copy(){comment}")
            lines.append(f"    {outs[0]}[{key}] = {args[-1]}")
            continue
        if node.op in SCATTER_OPS and _scatter_text(node, outs[0], args[1:], constants) is not None:
            lines.append(f"    {outs[0]} = {args[0]}.copy(){comment}")   # a copy, then NumPy's write into it
            lines.append(f"    {_scatter_text(node, outs[0], args[1:], constants)}")
            continue
        call = call_text(node, args, constants)
        target = outs[0] if len(outs) == 1 else ", ".join(outs)
        lines.append(f"    {target} = {call}{comment}")
    results = [names[v] for v in graph.outputs]
    for pos, i in sorted(returned):
        results.insert(pos, names[inputs[i]])
    lines.append(f"    return {results[0]}" if len(results) == 1 else f"    return ({', '.join(results)},)"
                 if results else "    return ()")
    return "\n".join(lines) + "\n"


def op(name: str) -> Any:
    """The NumPy reference of registry op ``name``: what ``op("...")`` in generated code calls."""
    return registry.get(name).reference
