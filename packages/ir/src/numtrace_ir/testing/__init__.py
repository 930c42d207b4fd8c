"""Helpers for op tests on every backend (the OpInfo pattern): iterate ``(op, sample)`` cases, build a
one-op graph from a sample, run the reference, compare outputs with per-dtype tolerances, and make
non-contiguous copies of inputs.

The tools every package's own tests use live here, in the one package each of them depends on, so
that a package's tests run with only that package and its declared dependencies installed:
`numtrace_ir.testing.import_cycles` (each package's test that its modules form layers) and
`hypothesis_profiles` (the derandomized profile CI runs)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.interpreter import Interpreter
from numtrace_ir.registry import OpDef, Sample
from numtrace_ir.types import ScalarType, TensorType, Type, normalize_dtype

__all__ = [
    "TOLERANCES",
    "assert_outputs_close",
    "build_graph",
    "case_id",
    "iter_cases",
    "noncontiguous",
    "reference_outputs",
    "run_reference",
    "sampled_dtypes",
    "type_of",
]

# (rtol, atol) per result dtype kind and size; integers and bools compare exactly.
TOLERANCES = {
    np.dtype(np.float16): (1e-2, 1e-3),
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.float64): (1e-9, 1e-12),
    np.dtype(np.complex64): (1e-4, 1e-5),
    np.dtype(np.complex128): (1e-9, 1e-12),
}


def type_of(value: Any) -> TensorType | ScalarType:
    """The IR type of a runtime value: arrays and NumPy scalars are tensors, Python scalars weak."""
    if isinstance(value, (np.ndarray, np.generic)):
        return TensorType(normalize_dtype(value.dtype), value.shape)
    if isinstance(value, bool):
        return ScalarType("bool")
    for kind, py in (("int", int), ("float", float), ("complex", complex)):
        if isinstance(value, py):
            return ScalarType(kind)
    raise TypeError(f"no IR type for {type(value).__name__} {value!r}")


def iter_cases(ops: Iterable[OpDef] | None = None, seed: int = 0) -> Iterator[tuple[OpDef, Sample]]:
    """Every ``(op, sample)`` pair; each op draws from its own generator seeded by `seed` and its name,
    so adding an op never changes another op's samples."""
    for op in registry.all_ops() if ops is None else ops:
        rng = np.random.default_rng([seed, *op.name.encode()])
        for sample in op.samples(rng):
            yield op, sample


def case_id(op: OpDef, sample: Sample, i: int) -> str:
    """A readable pytest id: op name, sample index, input types."""
    return f"{op.name}-{i}-" + ",".join(str(type_of(v)) for v in sample.inputs)


def reference_outputs(op: OpDef, sample: Sample) -> tuple:
    """The reference's outputs as a tuple (one entry per output)."""
    out = op.reference(*sample.inputs, **sample.attrs)
    return out if isinstance(out, tuple) else (out,)


def run_reference(graph: Any, inputs: Iterable[Any]) -> tuple:
    """The graph's outputs computed node by node with each op's NumPy reference (the test oracle), as
    the references return them (see `numtrace_ir.interpreter.Interpreter.run`)."""
    return tuple(Interpreter(graph).run(*inputs))


def build_graph(op: OpDef, sample: Sample, inputs: Iterable[Any] | None = None) -> Graph:
    """A graph with one input per sample input (typed from the values, or from `inputs` when given:
    types or values) and one node of `op`, whose outputs are the graph's outputs."""
    g = Graph()
    values = [
        g.add_input(f"x{i}", v if isinstance(v, Type) else type_of(v))
        for i, v in enumerate(sample.inputs if inputs is None else inputs)
    ]
    node = g.create_node(op.name, values, attrs=op.normalize_attrs(sample.attrs))
    g.set_outputs(node.outputs)
    return g


def noncontiguous(value: Any) -> Any:
    """A copy of an array with the same values and a strided (non-contiguous) layout; other values
    are returned unchanged. 0-d and empty arrays cannot be made non-contiguous and are copied."""
    if not isinstance(value, np.ndarray) or value.ndim == 0 or value.size == 0:
        return value.copy() if isinstance(value, np.ndarray) else value
    buf = np.empty(value.shape[:-1] + (2 * value.shape[-1],), value.dtype)
    view = buf[..., ::2]
    view[...] = value
    return view


def sampled_dtypes(op: OpDef) -> list[str]:
    """Short names of the input dtypes the op's samples cover (for docs and coverage reports)."""
    seen: dict[str, None] = {}
    rng = np.random.default_rng(0)
    for s in op.samples(rng):
        for v in s.inputs:
            t = type_of(v)
            seen[t.dtype_name if isinstance(t, TensorType) else t.kind] = None
    return list(seen)


def assert_outputs_close(actual: Any, expected: Any, *, what: str = "", computed_in: Any = None) -> None:
    """Outputs equal the reference's: same count, dtype and shape exactly; values within the
    tolerance of their dtype (exact for ints and bools; nan equals nan). `computed_in`: a float dtype
    some intermediate was rounded to, whose looser tolerance then applies to float outputs too (a
    float64 result of float32 work is only as close as float32)."""
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    if len(actual) != len(expected):
        raise AssertionError(f"{what}: {len(actual)} outputs, expected {len(expected)}")
    for i, (a, e) in enumerate(zip(actual, expected)):
        where = f"{what} output {i}"
        if not isinstance(e, (np.ndarray, np.generic)):  # a Python scalar
            if type(a) is not type(e) or not (a == e or (a != a and e != e)):
                raise AssertionError(f"{where}: {a!r} != expected {e!r}")
            continue
        a, e = np.asarray(a), np.asarray(e)
        if a.dtype != e.dtype or a.shape != e.shape:
            raise AssertionError(f"{where}: got {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}")
        rtol, atol = TOLERANCES.get(e.dtype, (0, 0))
        if computed_in is not None and e.dtype.kind in "fc":
            rtol, atol = map(max, (rtol, atol), TOLERANCES.get(np.dtype(computed_in), (0, 0)))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=where, strict=True)
