"""The registry-driven op test on ``triton``: every sample of every lowered op equals the NumPy
reference (contiguous and strided inputs); every other op is listed with its reason and runs as a host
step that equals it too."""

import numpy as np
import pytest
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.registry import Sample
from numtrace_ir.testing import (
    assert_outputs_close,
    build_graph,
    case_id,
    iter_cases,
    noncontiguous,
    reference_outputs,
    type_of,
)
from numtrace_ir.types import ScalarType
from numtrace_triton import Backend
from numtrace_triton.coverage import PARTIAL, UNLOWERED, handling, is_lowered, unlowered_reason

BACKEND = Backend()
LOWERED = [op for op in registry.all_ops() if is_lowered(op)]
NOT_LOWERED = [op for op in registry.all_ops() if not is_lowered(op)]


def _cases(ops):
    out = []
    counts: dict[str, int] = {}
    for op, sample in iter_cases(ops):
        i = counts[op.name] = counts.get(op.name, -1) + 1
        out.append(pytest.param(op, sample, id=case_id(op, sample, i)))
    return out


def _is_complex(value) -> bool:
    return np.iscomplexobj(value)


def _baked_graph(op, sample):
    """The sample as a trace records it: arrays are graph inputs, Python scalars are constants."""
    g = Graph()
    values = []
    for i, v in enumerate(sample.inputs):
        if isinstance(v, (np.ndarray, np.generic)):
            values.append(g.add_input(f"x{i}", type_of(v)))
        else:
            values.append(g.create_node("prim.Constant", [], attrs={"value": v}).output)
    node = g.create_node(op.name, values, attrs=op.normalize_attrs(sample.attrs))
    g.set_outputs(node.outputs)
    return g


def _run(op, sample, inputs):
    """Compile and run; the two documented kinds of refusal are checked, then the case is skipped."""
    arrays = [v for v in inputs if isinstance(v, (np.ndarray, np.generic))]
    graph = _baked_graph(op, sample)
    complex_case = any(_is_complex(v) for v in sample.inputs) or any(
        _is_complex(v) for v in reference_outputs(op, sample)
    )
    try:
        exe = BACKEND.compile(graph, [type_of(v) for v in arrays])
    except NotImplementedError as exc:
        if complex_case and "complex" in str(exc):
            pytest.skip("complex values: Triton has no complex type (a clear NotImplementedError)")
        if op.name in PARTIAL and PARTIAL[op.name] in str(exc):
            pytest.skip(f"documented partial lowering: {PARTIAL[op.name]}")
        raise
    return exe(*arrays)


def test_every_registry_op_is_lowered_or_has_the_reason_its_host_step_gives():
    """An op listed nowhere (newer than the backend) still runs, as a host step with a generic reason."""
    for op in registry.all_ops():
        assert (unlowered_reason(op) is None) == is_lowered(op), op.name
        assert handling(op) in ("native", "host")
    assert all(reason.strip() for reason in UNLOWERED.values())
    assert unlowered_reason(registry.get("np.sort")) == UNLOWERED["np.sort"]


@pytest.mark.parametrize(("op", "sample"), _cases(LOWERED))
def test_lowered_op_matches_reference(op, sample):
    expected = reference_outputs(op, sample)
    assert_outputs_close(_run(op, sample, sample.inputs), expected, what=op.name, op=op, inputs=sample.inputs)


@pytest.mark.parametrize(("op", "sample"), _cases(LOWERED))
def test_lowered_op_on_strided_inputs(op, sample):
    inputs = [noncontiguous(v) for v in sample.inputs]
    if all(not isinstance(v, np.ndarray) or v.flags.c_contiguous or v.size <= 1 for v in inputs):
        pytest.skip("no input can be made non-contiguous")
    assert_outputs_close(_run(op, sample, inputs), reference_outputs(op, sample), what=op.name, op=op,
                         inputs=sample.inputs)


@pytest.mark.parametrize(("op", "sample"), _cases(NOT_LOWERED))
def test_unlowered_op_runs_on_the_host_and_matches_reference(op, sample):
    """An op without a lowering is never refused: it runs as a host step between kernels (or, where no
    kernel plan can hold it, the whole graph runs on the host), named by ``explain()``."""
    arrays = [v for v in sample.inputs if isinstance(v, (np.ndarray, np.generic))]
    exe = BACKEND.compile(_baked_graph(op, sample), [type_of(v) for v in arrays])
    text = exe.explain()
    on_host = f"host step: {op.name}" in text or "the whole graph runs on the host" in text
    assert on_host or any(np.size(a) == 0 for a in arrays), text
    if op.nondeterministic:
        return  # a fresh draw per run: the random tests compare streams
    assert_outputs_close(exe(*arrays), reference_outputs(op, sample), what=op.name, op=op,
                         inputs=sample.inputs)


ELEMENTWISE_WITH_SCALARS = [
    (op, s)
    for op, s in iter_cases([o for o in LOWERED if o.kind == "elementwise"])
    if any(not isinstance(v, np.ndarray) for v in s.inputs) and not any(_is_complex(v) for v in s.inputs)
]


@pytest.mark.parametrize(
    ("op", "sample"), ELEMENTWISE_WITH_SCALARS[::3], ids=lambda x: getattr(x, "name", None) or ""
)
def test_runtime_python_scalar_inputs(op, sample):
    """Python scalars passed at call time (graph inputs, not constants) follow NEP 50 like constants."""
    graph = build_graph(op, sample)
    try:
        exe = BACKEND.compile(graph, [type_of(v) for v in sample.inputs])
    except NotImplementedError as exc:
        if op.name in PARTIAL and PARTIAL[op.name] in str(exc):
            pytest.skip(f"documented partial lowering: {PARTIAL[op.name]}")
        raise
    assert_outputs_close(exe(*sample.inputs), reference_outputs(op, sample), what=op.name, op=op,
                         inputs=sample.inputs)


def test_clip_runs_a_runtime_int_bound_of_an_integer_array_on_the_host_and_drops_a_constant_one():
    """NumPy drops a Python int bound below a uint8 array's range: with a runtime bound (its value
    decides) np.clip runs on the host, a constant one is dropped by the decomposition (once a wrapped
    255, a wrong answer)."""
    a = np.array([0, 5, 200, 255], np.uint8)
    g = build_graph(registry.get("np.clip"), Sample((a, -1, 3)))
    exe = BACKEND.compile(g, [type_of(a), ScalarType("int"), ScalarType("int")])
    assert "runtime Python int bound" in exe.explain()
    np.testing.assert_array_equal(exe(a, -1, 3)[0], np.clip(a, -1, 3))
    g = Graph()
    x = g.add_input("x", type_of(a))
    lo, hi = (g.create_node("prim.Constant", [], attrs={"value": v}, out_types=[ScalarType("int")]).output
              for v in (-1, 3))
    g.set_outputs([g.create_node("np.clip", [x, lo, hi]).output])
    (out,) = BACKEND.compile(g, [type_of(a)])(a)
    np.testing.assert_array_equal(out, np.clip(a, -1, 3))


@pytest.mark.parametrize("dtype", ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"])
def test_bitwise_count_at_the_ends_of_each_integer_range(dtype):
    """The SWAR popcount of |x|: the most negative value (whose |x| only fits unsigned) included."""
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min + 1, min(info.min, -1) + 1, 0, 1, 5, info.max - 1, info.max], dtype)
    g = build_graph(registry.get("np.bitwise_count"), Sample((a,)))
    (out,) = BACKEND.compile(g, [type_of(a)])(a)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, np.bitwise_count(a))
