"""The .pyi stubs describe the Cython modules to type checkers (mypy reads them, not the .pyx): the
runtime and every installed build of the block loops."""

import importlib

import pytest
from numtrace_cpu import isa, runtime
from numtrace_ir.testing.stubs import stub_mismatches

# The builds this CPU can import (a build for a wider instruction set may not load here).
RUNNABLE = [b for b in isa.built() if isa.BUILDS[b][1] <= runtime.cpu_features()]
COMPILED = ["numtrace_cpu.runtime"] + [f"numtrace_cpu.blocks_{b}" for b in RUNNABLE]


@pytest.mark.parametrize("name", COMPILED)
def test_the_stub_describes_the_compiled_module(name):
    assert stub_mismatches(importlib.import_module(name)) == []
