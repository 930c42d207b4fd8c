"""Hypothesis draws the same examples each run under CI, random ones elsewhere (see
`numtrace_ir.testing.hypothesis_profiles`)."""

from numtrace_ir.testing import hypothesis_profiles

hypothesis_profiles.load()
