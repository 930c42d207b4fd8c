"""Checks that a compiled (Cython) module's ``.pyi`` stub, installed beside it, describes it: mypy
reads the stub instead of the module, so a name missing from the stub is unchecked and a name only in
the stub is a lie. Each package's ``test_type_stubs.py`` runs `stub_mismatches` on its modules."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

__all__ = ["public_names", "stub_mismatches", "stub_path"]


def stub_path(module: ModuleType) -> Path:
    """Where the stub of ``module`` is installed: ``<name>.pyi`` beside its compiled file."""
    return Path(str(module.__file__)).with_name(module.__name__.rsplit(".", 1)[-1] + ".pyi")


def public_names(module: ModuleType) -> set[str]:
    """Its ``__all__``, or else the names it defines itself (not modules, not imported classes or
    functions) without a leading underscore."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and getattr(value, "__module__", module.__name__) == module.__name__
    }


def _declared(tree: ast.Module) -> tuple[dict[str, ast.ClassDef | None], list[str] | None]:
    """The stub's top-level names (a class name maps to its definition) and its ``__all__``."""
    names: dict[str, ast.ClassDef | None] = {}
    exported = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                  for t in node.targets):
            exported = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "*":  # re-exports another stub's names
                    other_stub = stub_path(importlib.import_module(node.module))
                    other, _ = _declared(ast.parse(other_stub.read_text(encoding="utf-8")))
                    names.update(dict.fromkeys(other))
                elif alias.asname == alias.name:  # ``import x as x``: an explicit re-export
                    names[alias.name] = None
    return names, exported


def stub_mismatches(module: ModuleType) -> list[str]:
    """What the stub of ``module`` gets wrong (empty when it matches): public names it lacks, names
    the module lacks, class members the runtime class lacks, an ``__all__`` that differs."""
    path = stub_path(module)
    if not path.is_file():
        return [f"{path} is not installed beside the module (package data)"]
    names, exported = _declared(ast.parse(path.read_text(encoding="utf-8")))
    problems = [f"{name}: public in {module.__name__}, missing from its stub"
                for name in sorted(public_names(module) - set(names))]
    problems += [f"{name}: in the stub, not in {module.__name__}" for name in sorted(names)
                 if not hasattr(module, name)]
    if exported is not None and exported != list(getattr(module, "__all__", [])):
        problems.append(f"the stub's __all__ {exported} is not the module's")
    for name, cls in names.items():
        if cls is None or not hasattr(module, name):
            continue
        runtime = getattr(module, name)
        problems += [f"{name}.{member.name}: in the stub, not on the class" for member in cls.body
                     if isinstance(member, ast.FunctionDef) and not hasattr(runtime, member.name)]
    return problems
