"""The package's modules form layers: no import cycle, function-local imports included."""

from pathlib import Path

from numtrace_ir.testing.import_cycles import assert_no_import_cycle


def test_no_import_cycle():
    assert_no_import_cycle(Path(__file__).parents[1] / "src" / "numtrace_cpu", "numtrace_cpu")
