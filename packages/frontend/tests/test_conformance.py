"""The backend contract's conformance suite (numtrace_ir.conformance) on the built-in reference backend."""

import pytest
from numtrace.reference_backend import ReferenceBackend
from numtrace_ir import conformance


@pytest.mark.parametrize("check", sorted(conformance.CHECKS))
def test_conformance(check):
    conformance.CHECKS[check](ReferenceBackend())
