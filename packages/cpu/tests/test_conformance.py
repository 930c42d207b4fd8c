"""The backend contract's conformance suite (numtrace_ir.conformance) on the cpu backend."""

import pytest
from numtrace_cpu import Backend
from numtrace_ir import conformance


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(check):
    conformance.CHECKS[check](Backend())
