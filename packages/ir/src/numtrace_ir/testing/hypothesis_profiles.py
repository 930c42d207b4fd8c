"""The Hypothesis profile of numtrace's test suites: derandomized in CI, random elsewhere.

A red CI run must be reproducible, so under CI (the ``CI`` environment variable set, as CI sets it)
every property test draws the same examples each run and prints the blob that replays a failure; a
local run keeps Hypothesis' random draws, which find new cases. Each package's ``tests/conftest.py``
calls `load` (the test-only dependency ``hypothesis`` is imported there, not at import of this module).
"""

from __future__ import annotations

import os

__all__ = ["CI_PROFILE", "in_ci", "load"]

CI_PROFILE = "numtrace-ci"


def in_ci() -> bool:
    """Whether the ``CI`` environment variable asks for a CI run (set, and not ``0``/``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def load() -> str:
    """Register `CI_PROFILE` and load it under CI, else Hypothesis' ``default``; returns the name."""
    from hypothesis import settings

    settings.register_profile(CI_PROFILE, derandomize=True, database=None, deadline=None, print_blob=True)
    name = CI_PROFILE if in_ci() else "default"
    settings.load_profile(name)
    return name
