"""Every registry op on the cpu backend against its NumPy reference (the OpInfo pattern): contiguous
and non-contiguous inputs, every sampled dtype and shape (0-d, empty, broadcasting)."""

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import testing
from numtrace_ir.registry import all_ops

CASES = list(testing.iter_cases(all_ops()))


def _run(op, sample, inputs):
    graph = testing.build_graph(op, sample)
    exe = compile_graph(graph, [testing.type_of(v) for v in sample.inputs])
    return exe, exe(*inputs)


@pytest.mark.parametrize(("op", "sample"), CASES,
                         ids=[testing.case_id(op, s, i) for i, (op, s) in enumerate(CASES)])
def test_op_matches_reference(op, sample):
    expected = testing.reference_outputs(op, sample)
    if op.nondeterministic:   # a random draw: only its types can be compared
        _, got = _run(op, sample, sample.inputs)
        assert [(np.asarray(g).dtype, np.shape(g)) for g in got] == \
            [(np.asarray(e).dtype, np.shape(e)) for e in expected]
        return
    _, got = _run(op, sample, sample.inputs)
    testing.assert_outputs_close(got, expected, what=op.name, op=op, inputs=sample.inputs)
    strided = [testing.noncontiguous(v) for v in sample.inputs]
    _, got = _run(op, sample, strided)
    testing.assert_outputs_close(got, expected, what=f"{op.name} (non-contiguous)", op=op,
                                 inputs=sample.inputs)
