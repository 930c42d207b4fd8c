"""Hypothesis draws the same examples each run under CI, random ones elsewhere (see
`numtrace_ir.testing.hypothesis_profiles`)."""

import os

# Generated kernels only where a test asks for them (compiled synchronously: see test_codegen.py), so
# which path runs never depends on timing, and the suite does not compile every test's passes.
os.environ.setdefault("NUMTRACE_CODEGEN", "0")

from numtrace_ir.testing import hypothesis_profiles

hypothesis_profiles.load()
