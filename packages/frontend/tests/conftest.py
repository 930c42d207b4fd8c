"""Shared fixtures: the backends every tracer test runs on, seeded RNGs, warnings as errors.

Tests that take a ``backend`` argument run on every available backend the ``numtrace.backends``
entry points name, and ``reference``; ``triton`` (in interpreter mode, which is slow) only for tests
marked ``@pytest.mark.triton``.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
# Generated CPU kernels only where a test asks for them (compiled synchronously, so which path runs
# never depends on timing): compiling every test's passes would dominate the suite's time.
os.environ.setdefault("NUMTRACE_CODEGEN", "0")
os.environ.setdefault("NUMTRACE_CODEGEN_SHORT_ROWS", "4096")  # short rows run generated too (cpu conftest)
# Generated passes stream outputs from 64 bytes (production: from the size of the last-level cache), so
# the fuzzers' generated passes meet both kinds of stores.
os.environ.setdefault("NUMTRACE_STREAM_MIN_BYTES", "64")
# Generated elementwise passes with a table op take the short tiles at the fuzzers' sizes too (cpu codegen).
os.environ.setdefault("NUMTRACE_SHORT_TILES_FROM", "64")

import numpy as np
import numtrace
import pytest
from numtrace_ir.testing import hypothesis_profiles

hypothesis_profiles.load()  # derandomized under CI

_AVAILABLE = numtrace.available_backends()


def pytest_configure(config):
    config.addinivalue_line("filterwarnings", "error")
    config.addinivalue_line("markers", "triton: also run this test on the triton backend (slow interpreter)")


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        # Every available backend found through the entry points; Triton's interpreter is slow, so it
        # runs only the tests marked for it.
        marked = metafunc.definition.get_closest_marker("triton") is not None
        metafunc.parametrize("backend", [b for b in _AVAILABLE if b != "triton" or marked])


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
