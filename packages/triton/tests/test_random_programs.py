"""Random programs of elementwise ops, reductions and matmuls (seeded): whatever the planner fuses,
merges or stores, the results equal NumPy's. Exercises group merging, sibling reductions, kernel
ordering and output buffers on graphs nobody wrote by hand."""

import numpy as np
import pytest
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import Backend

UNARY = {"np.exp": np.exp, "np.tanh": np.tanh, "np.negative": np.negative, "np.absolute": np.abs}
BINARY = {"np.add": np.add, "np.multiply": np.multiply, "np.maximum": np.maximum, "np.subtract": np.subtract}
REDUCE = {"np.sum": np.sum, "np.max": np.max, "np.mean": np.mean}


def _program(seed: int):
    """A random float64 graph on (4, 6), (6, 6) and (1, 6) inputs, and its NumPy evaluation."""
    rng = np.random.default_rng(seed)
    g = Graph()
    inputs = [rng.uniform(-1, 1, (4, 6)), rng.uniform(-1, 1, (6, 6)), rng.uniform(-1, 1, (1, 6))]
    values = []  # (graph value, numpy value)
    for i, a in enumerate(inputs):
        values.append((g.add_input(f"x{i}", TensorType("float64", a.shape)), a))
    for _ in range(int(rng.integers(4, 14))):
        kind = rng.choice(["unary", "binary", "binary", "reduce", "matmul", "move"])
        v, a = values[int(rng.integers(len(values)))]
        if kind == "unary":
            name = str(rng.choice(list(UNARY)))
            values.append((g.create_node(name, [v]).output, UNARY[name](a)))
        elif kind == "binary":
            w, b = values[int(rng.integers(len(values)))]
            try:
                np.broadcast_shapes(a.shape, b.shape)
            except ValueError:
                continue
            name = str(rng.choice(list(BINARY)))
            values.append((g.create_node(name, [v, w]).output, BINARY[name](a, b)))
        elif kind == "move" and a.ndim == 2:
            choice = int(rng.integers(3))
            if choice == 0:
                node = g.create_node("np.transpose", [v], attrs={"axes": None})
                values.append((node.output, a.T))
            elif choice == 1:
                shape = (a.shape[1], a.shape[0])
                values.append(
                    (g.create_node("np.reshape", [v], attrs={"shape": shape}).output, a.reshape(shape))
                )
            elif a.shape[0] > 1:
                index = (slice(None, None, -1), slice(None))
                values.append((g.create_node("np.getitem", [v], attrs={"index": index}).output, a[::-1]))
        elif kind == "reduce" and a.ndim == 2 and a.size > 1:
            name, axis = str(rng.choice(list(REDUCE))), int(rng.integers(2))
            node = g.create_node(name, [v], attrs={"axis": axis, "keepdims": True})
            values.append((node.output, REDUCE[name](a, axis=axis, keepdims=True)))
        elif kind == "matmul" and a.shape == (4, 6):
            w, b = values[1]
            values.append((g.create_node("np.matmul", [v, w]).output, a @ b))
    picks = sorted({int(i) for i in rng.integers(len(inputs), len(values), 3)}) if len(values) > 3 else [0]
    g.set_outputs([values[i][0] for i in picks])
    return g, inputs, [values[i][1] for i in picks]


@pytest.mark.parametrize("seed", range(80))
def test_random_program_matches_numpy(seed):
    graph, inputs, expected = _program(seed)
    exe = Backend().compile(graph, [TensorType("float64", a.shape) for a in inputs])
    for got, want in zip(exe(*inputs), expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
