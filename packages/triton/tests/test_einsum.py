"""``np.einsum`` of one or two operands runs natively (`numtrace_triton.rewrites`): diagonals and
transposes as views, sums as reductions, contractions and outer products as one batched matmul; its
sums within the project's summation tolerance, the rest bit for bit. Other forms run as a host step."""

import numpy as np
import pytest
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import assert_outputs_close, type_of
from numtrace_triton import Backend

RNG = np.random.default_rng(7)
EINSUM = registry.get("np.einsum")


def _run(subscripts, *arrays):
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    g.set_outputs(g.create_node("np.einsum", xs, attrs=EINSUM.normalize_attrs({"subscripts": subscripts})
                                ).outputs)
    exe = Backend().compile(g, [type_of(a) for a in arrays])
    (got,) = exe(*arrays)
    expected = np.einsum(subscripts, *arrays)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    return exe, got, expected


CASES = [
    ("ij,jk->ik", (5, 7), (7, 3)),
    ("ij,jk", (4, 6), (6, 2)),
    ("bij,bjk->bik", (3, 4, 5), (3, 5, 6)),
    ("bij,bkj->bki", (2, 3, 4), (2, 5, 4)),
    ("i,j->ij", (5,), (4,)),
    ("i,i->", (9,), (9,)),
    ("i,i->i", (9,), (9,)),
    ("ij,ij->ij", (3, 4), (3, 4)),
    ("ijk,jl->lik", (2, 3, 4), (3, 5)),
    ("ij,k->ijk", (2, 3), (4,)),
    ("ii->", (5, 5)),
    ("ii->i", (5, 5)),
    ("iij->ji", (3, 3, 4)),
    ("ij->", (4, 6)),
    ("ij->j", (4, 6)),
    ("ij->ji", (4, 6)),
    ("ij->ij", (0, 3)),
    ("ij,jk->ik", (0, 3), (3, 2)),
    ("ik,jk->", (3, 4), (5, 4)),
]

NO_SUM = {"i,j->ij", "i,i->i", "ij,ij->ij", "ij,k->ijk", "ii->i", "iij->ji", "ij->ji", "ij->ij"}


@pytest.mark.parametrize(("subscripts", "shapes"), [(c[0], c[1:]) for c in CASES],
                         ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
def test_einsum_forms_run_natively(subscripts, shapes, dtype):
    arrays = [(RNG.standard_normal(s) * 4).astype(dtype) for s in shapes]
    exe, got, expected = _run(subscripts, *arrays)
    text = exe.explain()
    assert "host step" not in text and "whole graph" not in text, text
    if dtype == "int32" or subscripts in NO_SUM:
        np.testing.assert_array_equal(got, expected)  # integers, or one product (or value) per element
    else:
        assert_outputs_close((got,), (expected,), what="np.einsum", op=EINSUM, inputs=arrays)


def test_mixed_dtypes_promote_as_numpy_does():
    a, b = RNG.integers(-5, 5, (3, 4)).astype(np.int32), RNG.standard_normal((4, 2)).astype(np.float32)
    exe, got, expected = _run("ij,jk->ik", a, b)
    assert got.dtype == np.float64
    assert_outputs_close((got,), (expected,), what="np.einsum", op=EINSUM, inputs=[a, b])


@pytest.mark.parametrize(("subscripts", "shapes"), [("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
                                                    ("i,i,i->", [(4,), (4,), (4,)])])
def test_other_forms_run_as_a_host_step_with_the_reason(subscripts, shapes):
    arrays = [RNG.standard_normal(s) for s in shapes]
    exe, got, expected = _run(subscripts, *arrays)
    assert "host step: np.einsum" in exe.explain()
    np.testing.assert_array_equal(got, expected)  # NumPy's own einsum on the host
