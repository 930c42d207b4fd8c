"""Every registry op with a NumPy entry point, traced as a one-op function and run on new inputs.

The sample inputs of each op (``OpDef.samples``) give the example call; the traced
function is then called on the samples drawn with another seed and must equal
NumPy (exactly on the reference backend, within a few ulps on the others), and so
must the trace's ``.code``. This is the tracer's half of the registry-driven op test.
"""

import inspect
import operator

import numpy as np
import numtrace as nt
import pytest
from numtrace import codegen
from numtrace.codegen import positional_only
from numtrace_ir import registry
from numtrace_ir.registry import Attr, Input, Inputs

INPUT = "input"


def _primary_target(op):
    """The NumPy callable whose name is the op's name (np.sum for "np.sum"), else the first target."""
    for func, method in op.numpy_targets:
        name = getattr(func, "__name__", "")
        if method == "__call__" and op.name == f"np.{name}":
            return func, method
        if method != "__call__" and op.name == f"np.{name}.{method}":
            return func, method
    return op.numpy_targets[0] if op.numpy_targets else None


def _call_numpy(op, func, method, inputs, attrs):
    """Call the NumPy entry point with a sample's graph inputs and attrs, in the schema's order."""
    if op.name in ("np.getitem", "np.getitem_mask"):
        it = iter(inputs[1:])
        key = tuple(next(it) if e == INPUT else e for e in attrs["index"])
        return inputs[0][key]
    if op.name == "np.setitem":
        it = iter(inputs[1:-1])
        key = tuple(next(it) if e == INPUT else e for e in attrs["index"])
        out = inputs[0].copy()
        out[key] = inputs[-1]
        return out
    fn = func if method == "__call__" else getattr(func, method)
    if op.name == "np.histogram":   # bins: the attr (a count) or the input `edges`
        full = op.normalize_attrs(attrs)
        a, *rest = inputs
        bins = full["bins"] if "edges" in full["omitted"] else rest.pop(0)
        return fn(a, bins, full["range"], full["density"], rest[0] if rest else None)
    if op.name in ("np.put", "np.put_along_axis"):   # they write into their first argument
        out = inputs[0].copy()
        fn(out, *inputs[1:], *op.normalize_attrs(attrs).values())
        return out
    if op.name == "np.select":   # the op's inputs are NumPy's two lists, then the default
        n = op.normalize_attrs(attrs)["n"]
        return fn(list(inputs[:n]), list(inputs[n:2 * n]), inputs[2 * n])
    if op.name == "np.gradient":   # spacings are NumPy's *varargs
        full = op.normalize_attrs(attrs)
        return fn(*inputs, *full["spacing"], axis=full["axis"], edge_order=full["edge_order"])
    attrs = dict(attrs)
    omitted = set(attrs.pop("omitted", ()))
    for name in _not_numpy_parameters(fn, attrs):   # read off NumPy's result (eig's real dtype), not passed
        del attrs[name]
    remaining = list(inputs)
    args, kwargs, by_keyword = [], {}, False
    last_input = max(i for i, p in enumerate(op.params) if isinstance(p, (Input, Inputs)))
    for i, p in enumerate(op.params):
        if isinstance(p, Input):
            if p.name in omitted and p.name in op.absent_by_default:   # NumPy's default is not None
                by_keyword = True
            elif by_keyword:
                kwargs[p.name] = remaining.pop(0)
            else:
                args.append(None if p.name in omitted else remaining.pop(0))
        elif isinstance(p, Inputs):
            group, remaining = remaining, []
            if p.star:
                args.extend(group)
            else:
                args.append(group)
        elif isinstance(p, Attr) and i < last_input and p.name not in attrs:
            args.append(p.default)   # holds the place of the inputs after it
        elif isinstance(p, Attr) and p.name in attrs:
            if i < last_input or p.name in positional_only(fn):
                args.append(attrs[p.name])
            else:
                kwargs[p.name] = attrs[p.name]
    return fn(*args, **kwargs)


def _not_numpy_parameters(fn, attrs):
    """The attrs that are no parameter of NumPy's function (``np.linalg.eig``'s ``real``, which the tracer
    reads off NumPy's result; ``np.linalg.lstsq``'s residuals ``size`` symbol)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):   # ufuncs and other callables without one
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [name for name in attrs if name not in params]


def _assert_matches(got, expected, backend, what):
    """Exact on the reference backend and for integers; a few ulps for other backends' float math."""
    if backend == "reference" or expected.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    eps = float(np.finfo(expected.dtype).eps)
    np.testing.assert_allclose(got, expected, rtol=8 * eps, atol=8 * eps, equal_nan=True, err_msg=what)


def _traceable_ops():
    ops = []
    for op in registry.all_ops():
        target = _primary_target(op)
        if op.nondeterministic or op.name.startswith("prim.") or target is None or \
                target[0] in _NOT_DISPATCHED:
            continue
        ops.append(op)
    return ops


def _array_positions(inputs):
    return [i for i, x in enumerate(inputs) if isinstance(x, np.ndarray)]


def _flat(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


# NumPy does not dispatch these to __array_function__ (they convert their argument with __array__), so
# a traced program cannot reach their ops; the tracer warns about the conversion instead.
_NOT_DISPATCHED = {np.ascontiguousarray}


@pytest.mark.parametrize("op", _traceable_ops(), ids=lambda op: op.name)
def test_one_op_trace_matches_numpy_on_new_inputs(op, backend):
    func, method = _primary_target(op)
    first = list(op.samples(np.random.default_rng(0)))
    second = list(op.samples(np.random.default_rng(1)))
    assert first, f"{op.name} has no samples"
    for sample, fresh in zip(first, second):
        positions = _array_positions(sample.inputs)
        if not positions:
            continue

        def one_op(*arrays, _sample=sample, _positions=positions):
            inputs = list(_sample.inputs)
            for i, a in zip(_positions, arrays):
                inputs[i] = a
            result = _call_numpy(op, func, method, inputs, _sample.attrs)
            return tuple(result) if isinstance(result, list) else result  # np.split returns a list

        example = tuple(sample.inputs[i] for i in positions)
        new = tuple(fresh.inputs[i] for i in positions)
        try:
            with np.errstate(all="ignore"):
                one_op(*example)
                one_op(*new)
        except (IndexError, ValueError):
            continue  # a sample NumPy itself rejects (e.g. a random index out of bounds) tests no tracing
        with np.errstate(all="ignore"):
            traced = nt.trace(one_op, example, backend=backend, check_trace=False)
            expected = _flat(one_op(*new))
            got = _flat(traced(*new))
        namespace = {"np": np, "op": codegen.op, "CONSTANTS": traced.constants}
        exec(traced.code, namespace)
        with np.errstate(all="ignore"):
            from_code = _flat(namespace[traced.__name__](*new))
        assert len(got) == len(expected) == len(from_code)
        for c, e in zip(from_code, expected):
            np.testing.assert_array_equal(c, e, err_msg=f".code of {op.name} ({sample.note})")
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert g.dtype == e.dtype, f"{op.name} ({sample.note}): dtype {g.dtype} != {e.dtype}"
            _assert_matches(g, e, backend, f"{op.name} ({sample.note}) on {backend}")


def test_registry_has_at_least_120_traceable_ops():
    assert len(_traceable_ops()) >= 120


def test_getitem_dispatch_is_registered():
    assert registry.for_numpy(operator.getitem).name == "np.getitem"
