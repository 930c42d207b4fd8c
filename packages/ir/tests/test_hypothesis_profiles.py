"""Property tests are derandomized exactly when CI runs them (a red CI run is reproducible), and the
conftest loaded that profile for this run."""

import pytest
from hypothesis import settings
from numtrace_ir.testing import hypothesis_profiles


@pytest.mark.parametrize("value, expected", [("true", True), ("1", True), ("yes", True), ("", False),
                                             ("false", False), ("0", False), ("FALSE", False)])
def test_ci_is_read_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("CI", value)
    assert hypothesis_profiles.in_ci() is expected


def test_ci_is_unset_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not hypothesis_profiles.in_ci()


def test_this_run_has_the_profile_its_environment_asks_for():
    assert settings.default.derandomize is hypothesis_profiles.in_ci()
    assert (settings.default.database is None) or not hypothesis_profiles.in_ci()


@pytest.mark.parametrize("ci, derandomized", [("true", True), (None, False)])
def test_load_selects_the_profile(monkeypatch, ci, derandomized):
    before = settings.default
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    try:
        name = hypothesis_profiles.load()
        assert name == (hypothesis_profiles.CI_PROFILE if derandomized else "default")
        assert settings.default.derandomize is derandomized
    finally:
        settings.register_profile("_restore", before)
        settings.load_profile("_restore")
