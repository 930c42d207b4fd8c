"""The backend contract's conformance suite (numtrace_ir.conformance) on the triton backend."""

import pytest
from numtrace_ir import conformance
from numtrace_triton import Backend


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(check):
    conformance.CHECKS[check](Backend())
