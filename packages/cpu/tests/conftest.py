"""Hypothesis draws the same examples each run under CI, random ones elsewhere (see
`numtrace_ir.testing.hypothesis_profiles`)."""

import os

import numpy as np
import pytest

# Generated kernels only where a test asks for them (compiled synchronously: see test_codegen.py), so
# which path runs never depends on timing, and the suite does not compile every test's passes.
os.environ.setdefault("NUMTRACE_CODEGEN", "0")
# Passes of short rows run generated in the tests (production keeps them on the interpreter, which is
# faster there), so the generated code for them stays checked bit for bit against the interpreter.
os.environ.setdefault("NUMTRACE_CODEGEN_SHORT_ROWS", "4096")

from numtrace_cpu import get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir.testing import hypothesis_profiles

hypothesis_profiles.load()



@pytest.fixture
def numpy_quiet():
    """NumPy's floating-point errors ignored for the test: its inputs hold NaN, inf and values outside
    a function's domain on purpose, for which NumPy warns and so does a call (test_fp_errors.py)."""
    with np.errstate(all="ignore"):
        yield


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """The test at 1 and at 2 threads (the value), thread count restored after it."""
    old = get_num_threads()
    set_num_threads(request.param)
    yield request.param
    set_num_threads(old)


@pytest.fixture
def team():
    """The team on (spinning), thread count restored after the test."""
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    blocks.set_team_spin_us(2000)
    yield
    set_num_threads(old)
    blocks.set_team_spin_us(old_spin)
