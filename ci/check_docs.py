"""Build check for the Markdown docs: every relative link resolves and every example runs.

The docs are plain Markdown read on the forge and in the repo, so "building"
them means proving they are true: each ```python block of a page runs, in
order, in one namespace per page (a block fenced as ```python no-run is shown
only). Any failure, or a link to a missing file or heading, is an error.

Usage: python ci/check_docs.py PATH [PATH ...]   (files or folders of .md)
"""

from __future__ import annotations

import re
import sys
import tempfile
import traceback
from pathlib import Path

FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```\s*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub-style anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def check_links(page: Path, text: str) -> list[str]:
    errors = []
    prose = FENCE.sub("", text)
    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):
            continue  # external or mailto: not checked offline
        path_part, _, frag = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            errors.append(f"{page}: link to missing file {target!r}")
            continue
        if frag and dest.suffix == ".md":
            anchors = {_anchor(h) for h in re.findall(r"^#+\s+(.*)$", dest.read_text(), re.M)}
            if frag not in anchors:
                errors.append(f"{page}: link to missing heading {target!r}")
    return errors


def run_examples(page: Path, text: str) -> list[str]:
    namespace: dict = {"__name__": f"docs:{page.name}"}
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, match in enumerate(FENCE.finditer(text)):
            lang, info, body = match.groups()
            if lang != "python" or "no-run" in info:
                continue
            line = text[: match.start()].count("\n") + 2
            namespace["DOCS_TMP"] = tmp
            try:
                # Pad so tracebacks and traced source locations name the page's own lines.
                exec(compile("\n" * (line - 1) + body, str(page), "exec"), namespace)
            except Exception:
                errors.append(f"{page}: example {i} (line {line}) failed:\n{traceback.format_exc()}")
                break  # later blocks of the page usually depend on this one
    return errors


def main(argv: list[str]) -> int:
    pages: list[Path] = []
    for arg in argv or ["README.md", "docs"]:
        p = Path(arg)
        pages += sorted(p.rglob("*.md")) if p.is_dir() else [p]
    errors: list[str] = []
    examples = 0
    for page in pages:
        text = page.read_text()
        runnable = [m for m in FENCE.finditer(text) if m.group(1) == "python" and "no-run" not in m.group(2)]
        examples += len(runnable)
        errors += check_links(page, text)
        errors += run_examples(page, text)
    for e in errors:
        print(e, file=sys.stderr)
    print(f"docs: {len(pages)} pages, {examples} examples, {len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
