"""The ``numtrace`` command: inspect saved traces and installed backends."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _show(path: str) -> int:
    from numtrace_ir import FormatError

    from .saving import read_graphs

    try:
        graphs, meta = read_graphs(path)
    except OSError as exc:
        print(f"numtrace show: cannot read {path!r}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except FormatError as exc:
        print(f"numtrace show: {path!r} is not a valid saved trace: {exc}", file=sys.stderr)
        return 1
    kind = meta.get("kind", "?")
    print(f"# {path}: saved {kind} {meta.get('name', '?')!r}, backend {meta.get('backend', '?')!r}")
    module = meta.get("module") or {}
    if module:
        print(f"# traced in {'training' if module.get('training') else 'eval'} mode")
    for name, graph in graphs.items():
        print(f"\n# method {name}")
        print(str(graph), end="")
    return 0


def _backends() -> int:
    from .backends import installed_backends

    for name, (ok, why) in installed_backends().items():
        print(f"{name}: {'available' if ok else 'unavailable (' + why + ')'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numtrace", description="Inspect numtrace traces and backends.")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print the graphs of a saved trace")
    show.add_argument("file")
    commands.add_parser("backends", help="list installed backends and whether they are available")
    args = parser.parse_args(argv)
    if args.command == "show":
        return _show(args.file)
    return _backends()


if __name__ == "__main__":
    sys.exit(main())
