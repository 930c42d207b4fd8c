"""types.pyi describes the Cython module types.pyx to type checkers: it must name what the module has."""

import ast
from pathlib import Path

import numtrace_ir.types as types_module


def _stub() -> ast.Module:
    path = Path(types_module.__file__).with_name("types.pyi")
    assert path.is_file(), f"{path} is not installed beside the module (package-data)"
    return ast.parse(path.read_text(encoding="utf-8"))


def test_the_stub_declares_exactly_the_modules_public_names():
    declared = set()
    for node in _stub().body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
    assert declared == set(types_module.__all__)


def test_every_stub_member_exists_on_the_runtime_class():
    for node in _stub().body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(types_module, node.name)
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    assert hasattr(cls, member.name), f"{node.name}.{member.name} is in the stub only"
