"""Finds import cycles inside one package, function-local imports included, so that every package
can keep a test that its modules form layers (a cycle hidden in a function is still a cycle).

Python modules are parsed with `ast`; for Cython modules (.pyx/.pxd/.pxi) only their import and
cimport statements are, since the rest is not Python syntax. Imports under `if TYPE_CHECKING:`
never run and are skipped. Importing `a.b.c` also runs `a/__init__` and `a/b/__init__`; those
implicit edges are left out (every package `__init__` re-exports its modules, so counting them
would make every package one cycle); an explicit `from a import name` where `name` is not a
submodule is an edge to `a`'s `__init__`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

__all__ = ["assert_no_import_cycle", "find_import_cycle", "import_graph"]

_CYTHON_SUFFIXES = (".pyx", ".pxd", ".pxi")
_CYTHON_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+\S+[ \t]+)?c?import[ \t]", re.MULTILINE)


def _module_name(path: Path, root: Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _cython_imports(text: str) -> ast.Module:
    """The import statements of a Cython source, parsed as Python (`cimport` read as `import`)."""
    statements = []
    for match in _CYTHON_IMPORT.finditer(text):
        line_end = text.find("\n", match.start())
        stmt = text[match.start() : len(text) if line_end < 0 else line_end]
        while stmt.count("(") > stmt.count(")") and line_end >= 0:  # a parenthesized name list
            next_end = text.find("\n", line_end + 1)
            stmt += " " + text[line_end + 1 : len(text) if next_end < 0 else next_end]
            line_end = next_end
        stmt = re.sub(r"\bcimport\b", "import", stmt.split("#", 1)[0].strip())
        statements.append(stmt)
    return ast.parse("\n".join(statements))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(absolute module, names imported from it) for every import statement outside TYPE_CHECKING."""
    found: list[tuple[str, list[str]]] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
        todo.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path | str, package: str) -> dict[str, set[str]]:
    """Each module of the package under `root` (the package's folder) -> the package modules it imports."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.suffix in (".py", *_CYTHON_SUFFIXES))
    modules: dict[str, Path] = {}
    for path in files:
        modules.setdefault(_module_name(path, root, package), path)  # a .pxd pairs with its .pyx
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for path in files:
        name = _module_name(path, root, package)
        text = path.read_text(encoding="utf-8")
        tree = _cython_imports(text) if path.suffix in _CYTHON_SUFFIXES else ast.parse(text, str(path))
        for base, names in _imported_names(tree, name, path.stem == "__init__"):
            if base != package and not base.startswith(package + "."):
                continue
            targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
            if len(targets) < len(names) or not names:  # a plain `import a.b`, or a name defined in `a`
                while base not in modules and "." in base:
                    base = base.rsplit(".", 1)[0]
                targets.append(base)
            graph[name].update(t for t in targets if t != name and t in modules)
    return graph


def find_import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [m0, m1, ..., m0], or None when the graph has none."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)) is not None:
            return cycle
    return None


def assert_no_import_cycle(root: Path | str, package: str) -> None:
    """Raise AssertionError naming the cycle when the package under `root` has one."""
    cycle = find_import_cycle(import_graph(root, package))
    if cycle is not None:
        raise AssertionError(f"{package} has an import cycle: {' -> '.join(cycle)}")
