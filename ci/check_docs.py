"""Check for the docs: every relative link resolves and every example runs.

The pages are read in the repository and built into a site by MkDocs (`mkdocs build --strict`,
which checks the site's own links); this proves them true: each ```python block of a page runs,
in order, in one namespace per page that starts empty, as a reader's interpreter does (a block
fenced as ```python {.no-run} is shown only); what the examples print is shown with a failure only. The API
reference pages render docstrings (`::: numtrace.trace`), so the ```python blocks of those
docstrings (and of a documented class's members) run too, one namespace per documented object.
Any failure, or a link to a missing file or heading, is an error. An API reference entry is the
anchor of its name and of its members' names.

With ``--site DIR`` it also checks the built site: it must read the same offline (no script or
stylesheet from the network; highlighted code styled by a stylesheet the site ships).

Usage: python ci/check_docs.py [--site DIR] PATH [PATH ...]   (files or folders of .md)
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
import sys
import tempfile
import textwrap
import traceback
from pathlib import Path

# A fenced block, possibly indented (inside a docstring's Examples section): indent, language, info, body.
FENCE = re.compile(r"^([ \t]*)```(\w*)([^\n]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
API_ENTRY = re.compile(r"^::: ([\w.]+)", re.M)


def _anchor(heading: str) -> str:
    """GitHub-style anchor of a heading (MkDocs makes the same for the headings used here)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _has_anchor(dest: Path, frag: str) -> bool:
    text = dest.read_text()
    if frag in {_anchor(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)}:
        return True
    return any(frag == name or frag.startswith(name + ".") for name in API_ENTRY.findall(text))


def check_links(page: Path, text: str) -> list[str]:
    errors = []
    prose = re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))  # code is not a link
    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):
            continue  # external or mailto: not checked offline
        path_part, _, frag = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            errors.append(f"{page}: link to missing file {target!r}")
            continue
        if frag and dest.suffix == ".md" and not _has_anchor(dest, frag):
            errors.append(f"{page}: link to missing heading {target!r}")
    return errors


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line of the block's first code line, dedented code)`` of each runnable ```python block."""
    blocks = []
    for match in FENCE.finditer(text):
        _, lang, info, body = match.groups()
        if lang == "python" and "no-run" not in info:
            blocks.append((text[: match.start()].count("\n") + 2, textwrap.dedent(body)))
    return blocks


def run_examples(where: str, text: str) -> tuple[int, list[str]]:
    """Run the blocks of ``text`` in order in one namespace: (number of blocks, errors).

    The namespace starts empty, as a reader's interpreter does: a block that uses a name no earlier
    block of its page defines fails. What the examples print is shown only with a failure: their
    output (an error message a page demonstrates) is the page's, not the check's.
    """
    blocks = python_blocks(text)
    namespace: dict = {"__name__": f"docs:{where}"}
    errors = []
    printed = io.StringIO()
    for i, (line, body) in enumerate(blocks):
        try:
            with contextlib.redirect_stdout(printed):
                # Pad so tracebacks and traced source locations name the page's own lines.
                exec(compile("\n" * (line - 1) + body, where, "exec"), namespace)
        except Exception:
            output = printed.getvalue()
            shown = f"its page's examples printed:\n{textwrap.indent(output, '    ')}" if output else ""
            errors.append(f"{where}: example {i} (line {line}) failed:\n{traceback.format_exc()}{shown}")
            break  # later blocks usually depend on this one
    return len(blocks), errors


def _resolve(dotted: str) -> object:
    """The object a ``::: dotted.name`` entry documents: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import any module of {dotted!r}")


def docstrings(dotted: str) -> str:
    """The docstring of the documented object and, for a class, of its own public members."""
    obj = _resolve(dotted)
    texts = [inspect.getdoc(obj) or ""]
    if inspect.isclass(obj):
        for name, member in vars(obj).items():
            if not name.startswith("_"):
                texts.append(inspect.getdoc(member) or "")
    return "\n\n".join(texts)


REMOTE_ASSET = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]*\"")
LINK_TAG = re.compile(r"<link\b[^>]*>")
HREF = re.compile(r"\bhref=\"([^\"]+)\"")


def check_site(site: Path) -> list[str]:
    """The built site reads the same offline: no page loads a script or stylesheet from the network,
    and every page with highlighted code links a stylesheet of the site that styles it."""
    errors = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text()
        errors += [f"{page}: loads {m.group(0)!r} from the network" for m in REMOTE_ASSET.finditer(html)]
        if 'class="highlight"' in html:
            sheets = [(page.parent / href).resolve() for tag in LINK_TAG.findall(html)
                      if 'rel="stylesheet"' in tag for href in HREF.findall(tag)]
            if not any(sheet.is_file() and ".highlight ." in sheet.read_text() for sheet in sheets):
                errors.append(f"{page}: highlighted code, but no linked stylesheet styles .highlight")
    return errors


def main(argv: list[str]) -> int:
    # Examples save traces under tempfile.mkdtemp(), as a reader would; keep those out of the real /tmp.
    with tempfile.TemporaryDirectory(prefix="numtrace-docs-") as scratch:
        tempfile.tempdir = scratch
        try:
            return _check(argv)
        finally:
            tempfile.tempdir = None


def _check(argv: list[str]) -> int:
    site = None
    if "--site" in argv:
        at = argv.index("--site")
        site, argv = Path(argv[at + 1]), argv[:at] + argv[at + 2:]
    pages: list[Path] = []
    for arg in argv or ["README.md", "docs"]:
        p = Path(arg)
        pages += sorted(p.rglob("*.md")) if p.is_dir() else [p]
    errors: list[str] = check_site(site) if site is not None else []
    examples = 0
    for page in pages:
        text = page.read_text()
        errors += check_links(page, text)
        count, failed = run_examples(str(page), text)
        examples += count
        errors += failed
        for dotted in API_ENTRY.findall(text):
            try:
                count, failed = run_examples(f"docstring of {dotted}", docstrings(dotted))
            except Exception as exc:
                count, failed = 0, [f"{page}: cannot read the docstring of {dotted}: {exc!r}"]
            examples += count
            errors += failed
    for e in errors:
        print(e, file=sys.stderr)
    print(f"docs: {len(pages)} pages, {examples} examples, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
