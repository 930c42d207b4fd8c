"""The .pyi stubs describe the Cython modules to type checkers (mypy reads them, not the .pyx): each
must be installed beside its module and name what the module has."""

import importlib

import pytest
from numtrace_ir.testing.stubs import stub_mismatches

COMPILED = ["numtrace_ir.types", "numtrace_ir.graph", "numtrace_ir.attrs", "numtrace_ir.parser",
            "numtrace_ir.printer"]


@pytest.mark.parametrize("name", COMPILED)
def test_the_stub_describes_the_compiled_module(name):
    assert stub_mismatches(importlib.import_module(name)) == []


def test_a_wrong_stub_is_reported(tmp_path, monkeypatch):
    import numtrace_ir.testing.stubs as stubs

    fake = tmp_path / "graph.pyi"
    fake.write_text("class Graph:\n    def no_such_method(self) -> None: ...\ndef not_there() -> None: ...\n")
    monkeypatch.setattr(stubs, "stub_path", lambda module: fake)
    problems = stub_mismatches(importlib.import_module("numtrace_ir.graph"))
    assert "Graph.no_such_method: in the stub, not on the class" in problems
    assert "not_there: in the stub, not in numtrace_ir.graph" in problems
    assert "Node: public in numtrace_ir.graph, missing from its stub" in problems
