"""The IR's modules form layers (no import cycle, function-local ones included), and the check finds
cycles however they are written."""

from pathlib import Path

import pytest
from numtrace_ir.testing.import_cycles import assert_no_import_cycle, find_import_cycle, import_graph


def test_no_import_cycle():
    assert_no_import_cycle(Path(__file__).parents[1] / "src" / "numtrace_ir", "numtrace_ir")


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_function_local_and_relative_imports_count(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from .a import f\n",
        "a.py": "from pkg import b\n",
        "b.py": "def g():\n    from . import c\n",
        "c.py": "import pkg.a as a\n",
    })
    assert find_import_cycle(import_graph(root, "pkg")) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    cycle = r"pkg has an import cycle: pkg\.a -> pkg\.b -> pkg\.c -> pkg\.a"
    with pytest.raises(AssertionError, match=cycle):
        assert_no_import_cycle(root, "pkg")


def test_cython_cimports_and_subpackages(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "core.pyx": "cimport cython\nfrom pkg.sub.leaf cimport (\n    Thing,\n)\ncdef int x = 1\n",
        "core.pxd": "cdef class Core:\n    pass\n",
        "sub/__init__.py": "",
        "sub/leaf.py": "from ..core import Core\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.core"] == {"pkg.sub.leaf"} and graph["pkg.sub.leaf"] == {"pkg.core"}
    assert find_import_cycle(graph) == ["pkg.core", "pkg.sub.leaf", "pkg.core"]


def test_type_checking_imports_are_no_cycle_but_names_from_the_init_are(tmp_path):
    files = {
        "__init__.py": "from pkg import low, high\n",
        "low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high import H\n",
        "high.py": "from pkg.low import L\n",
    }
    graph = import_graph(_package(tmp_path / "layers", files), "pkg")
    assert graph == {"pkg": {"pkg.low", "pkg.high"}, "pkg.low": set(), "pkg.high": {"pkg.low"}}
    assert find_import_cycle(graph) is None
    files["high.py"] += "from pkg import VERSION\n"  # runs pkg/__init__, which imports high
    graph = import_graph(_package(tmp_path / "init", files), "pkg")
    assert find_import_cycle(graph) == ["pkg", "pkg.high", "pkg"]
