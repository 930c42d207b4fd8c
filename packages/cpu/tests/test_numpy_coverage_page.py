"""docs/numpy-coverage.md is what `ci/numpy_coverage.py` generates from the registry and this backend:
regenerated here and compared, so a new op, a new lowering or a new NumPy function updates it."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "ci" / "numpy_coverage.py"


def _generator():
    if not SCRIPT.exists():
        pytest.skip("ci/numpy_coverage.py is not part of an installed package")
    spec = importlib.util.spec_from_file_location("numpy_coverage", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numpy_coverage_page_is_current():
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(), "regenerate it: python ci/numpy_coverage.py"


def test_every_class_is_counted_and_the_new_ops_are_not_host_calls():
    gen = _generator()
    text = gen.PAGE.read_text()
    assert sum(gen.counts(text).values()) == text.count("\n| `numpy.")
    for name in ("nansum", "nanmean", "convolve", "interp", "gradient", "cross", "fft.rfft", "fft.fftshift"):
        row = next(line for line in text.splitlines() if line.startswith(f"| `numpy.{name}` |"))
        assert "| fused |" in row or "| planned call |" in row, row
