"""The ``numtrace`` command (also ``python -m numtrace``): inspect, run, time and draw saved traces.

Subcommands: ``show``, ``code``, ``run``, ``bench``, ``draw``, ``explain``, ``backends``; ``--version``.
Errors are one line on stderr (``numtrace run: error: ...``) and exit code 1; usage errors exit 2.
Set ``NUMTRACE_DEBUG=1`` to see the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np


class CommandError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


def version_text() -> str:
    from importlib import metadata

    from . import __version__

    parts = []
    for dist in ("numtrace-ir", "numtrace-cpu", "numtrace-triton"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return f"numtrace {__version__}" + (f" ({', '.join(parts)})" if parts else "")


# -- reading files ----------------------------------------------------------------------------------

def _read_saved(path: str) -> tuple[dict, dict, dict]:
    """(graphs, meta, arrays) of a saved trace, without building callables or loading a backend."""
    from numtrace_ir import FormatError, serialize

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    try:
        graphs, meta, arrays = serialize.loads(data)
    except FormatError as exc:
        raise CommandError(f"{path!r} is not a valid saved trace: {exc}") from None
    if meta.get("format") != "numtrace.trace":
        raise CommandError(f"{path!r} is a numtrace-ir file but not a saved numtrace trace")
    return graphs, meta, arrays


def _load(path: str, backend: str | None) -> Any:
    from numtrace_ir import FormatError

    from .traced_module import load

    try:
        return load(path, backend=backend)
    except OSError as exc:
        raise CommandError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except FormatError as exc:
        raise CommandError(f"{path!r} is not a valid saved trace: {exc}") from None


def _method(obj: Any, name: str | None) -> Any:
    """The TracedFunction to use: the function itself, or a module's method (``forward`` by default)."""
    from .traced import TracedFunction

    if isinstance(obj, TracedFunction):
        if name not in (None, "forward", obj.__name__):
            raise CommandError(f"--method {name!r}: this file holds the function {obj.__name__!r}, "
                               "not a module")
        return obj
    methods = obj.methods
    name = name or ("forward" if "forward" in methods else next(iter(methods)))
    if name not in methods:
        raise CommandError(f"--method {name!r}: the module has methods {', '.join(methods)}")
    return methods[name]


def _graph_of(graphs: dict, meta: dict, name: str | None) -> tuple[str, Any]:
    if meta.get("module") is None:
        return meta.get("name", "forward"), graphs["forward"]
    name = name or ("forward" if "forward" in graphs else next(iter(graphs)))
    if name not in graphs:
        raise CommandError(f"--method {name!r}: the module has methods {', '.join(graphs)}")
    return name, graphs[name]


def _read_inputs(paths: Sequence[str]) -> list[np.ndarray]:
    """Arrays from ``.npy`` files (and ``.npz`` files: every array they hold, in stored order)."""
    arrays: list[np.ndarray] = []
    for path in paths:
        try:
            loaded = np.load(path, allow_pickle=False)
        except OSError as exc:
            raise CommandError(f"cannot read input {path!r}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CommandError(f"input {path!r} is not a NumPy .npy/.npz file: {exc}") from None
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                arrays.extend(loaded[k] for k in loaded.files)
        else:
            arrays.append(loaded)
    return arrays


def _call_args(fn: Any, arrays: list[np.ndarray]) -> tuple:
    wanted = fn._num_leaves
    if len(arrays) != wanted:
        names = [v.name or f"#{i}" for i, v in enumerate(fn.graph.inputs[:wanted])]
        raise CommandError(f"{fn.__name__} takes {wanted} input array(s) ({', '.join(names)}), "
                           f"got {len(arrays)} from --input")
    return tuple(fn.in_spec.build(list(arrays)))


def _leaves(result: Any) -> list[np.ndarray]:
    """The arrays of a call's result (tuples, lists and dicts flattened in order)."""
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _leaves(r)]
    if isinstance(result, dict):
        return [a for r in result.values() for a in _leaves(r)]
    return [np.asarray(result)]


def _nbytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# -- subcommands ------------------------------------------------------------------------------------

def cmd_show(args: argparse.Namespace) -> int:
    from collections import Counter

    from numtrace_ir.guards import guard_text

    graphs, meta, arrays = _read_saved(args.file)
    module = meta.get("module") or {}
    kind = "module" if module else "function"
    print(f"# {args.file}: saved {kind} {module.get('type') if module else meta.get('name', '?')!r}, "
          f"backend {meta.get('backend', '?')!r}"
          + (f", traced in {'training' if module.get('training') else 'eval'} mode" if module else ""))
    stored = sum(a.nbytes for a in arrays.values())
    what = "parameters and buffers" if module else "constants"
    print(f"# parameters: {len(arrays)} arrays, {_nbytes(stored)} (stored {what})")
    for name, graph in graphs.items():
        info = meta.get("methods", {}).get(name, {})
        n_state = len(info.get("state_names", ()))
        leaves = graph.inputs[: len(graph.inputs) - n_state]
        print(f"\n# method {name}" if module else f"\n# function {meta.get('name', name)}")
        print("# inputs: " + (", ".join(f"{v.name or '#' + str(i)} : {v.type}" for i, v in enumerate(leaves))
                              or "none"))
        if n_state:
            print(f"# state inputs: {n_state} ({', '.join(info['state_names'][:6])}"
                  f"{', ...' if n_state > 6 else ''})")
        print("# outputs: " + ", ".join(str(v.type) for v in graph.outputs))
        consts = [n.attrs["value"] for n in graph if n.op == "prim.Constant"
                  and isinstance(n.attrs["value"], np.ndarray)]
        print(f"# constants: {len(consts)} arrays, {_nbytes(sum(c.nbytes for c in consts))}")
        counts = Counter(n.op for n in graph)
        print(f"# ops ({len(graph)} nodes): " + ", ".join(f"{op} x{c}" for op, c in counts.most_common()))
        guards = [f"{guard_text(n)} == {n.attrs['expected']!r}" for n in graph if n.op == "prim.guard"]
        print("# guards: " + ("; ".join(guards) if guards else "none"))
        print(str(graph), end="")
    return 0


def cmd_code(args: argparse.Namespace) -> int:
    obj = _load(args.file, "reference")
    fn = _method(obj, args.method) if args.method else obj
    print(fn.code, end="" if fn.code.endswith("\n") else "\n")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    fn = _method(_load(args.file, args.backend), args.method)
    call = _call_args(fn, _read_inputs(args.input))
    outs = _leaves(fn(*call))
    if args.out:
        if args.out.endswith(".npz"):
            np.savez(args.out, *outs)
        elif len(outs) == 1:
            np.save(args.out, outs[0])
        else:
            raise CommandError(f"{fn.__name__} returns {len(outs)} arrays: give --out a .npz file")
        print(f"wrote {len(outs)} output(s) to {args.out}")
        return 0
    with np.printoptions(threshold=20, edgeitems=3, precision=6):
        for k, a in enumerate(outs):
            print(f"output {k}: {a.dtype}{list(a.shape)}\n{a}")
    return 0


def _median_seconds(fn: Any, call: tuple, repeat: int, budget: float, label: str = "") -> tuple[float, Any]:
    """Median of up to ``repeat`` timed calls within ``budget`` seconds. Progress goes to stderr (the
    table on stdout stays clean): a live call count on a terminal, one line per backend otherwise."""
    live = sys.stderr.isatty()
    sys.stderr.write(f"timing {label}: compiling and warming up" + ("" if live else "\n"))
    sys.stderr.flush()
    result = fn(*call)  # compile, warm up
    times = []
    start = time.perf_counter()
    deadline = start + budget
    for k in range(repeat):
        t0 = time.perf_counter()
        fn(*call)
        times.append(time.perf_counter() - t0)
        if live and (k % 10 == 9 or k == repeat - 1):
            sys.stderr.write(f"\rtiming {label}: {k + 1}/{repeat} calls, {time.perf_counter() - start:.1f} s "
                             f"of at most {budget:g} s\x1b[K")
            sys.stderr.flush()
        if time.perf_counter() > deadline and len(times) >= 3:
            break
    summary = f"timing {label}: {len(times)} calls in {time.perf_counter() - start:.2f} s"
    sys.stderr.write(("\r" + summary + "\x1b[K\n") if live else summary + "\n")
    return float(np.median(times)), result


def cmd_bench(args: argparse.Namespace) -> int:
    from .backends import available_backends

    arrays = _read_inputs(args.input)
    # The reference runs first: every other backend is compared with its outputs and its time.
    backends = ["reference", *(b for b in args.backend or available_backends() if b != "reference")]
    rows = []
    baseline = 1.0
    expected: list[np.ndarray] = []
    for name in backends:
        fn = _method(_load(args.file, name), args.method)
        call = _call_args(fn, [a.copy() for a in arrays])
        median, result = _median_seconds(fn, call, args.repeat, args.budget, label=name)
        outs = _leaves(result)
        if name == "reference":
            baseline, expected = median, outs
            diff = 0.0
        else:
            diff = max((float(np.max(np.abs(o.astype(np.float64) - e.astype(np.float64)))) if o.size else 0.0
                        for o, e in zip(outs, expected) if o.dtype.kind in "biuf"), default=0.0)
        rows.append((name, median, diff))
    print(f"{'backend':<12} {'median':>12} {'vs reference':>13} {'max |diff|':>11}")
    for name, median, diff in rows:
        print(f"{name:<12} {median * 1e3:>9.3f} ms {baseline / median:>12.2f}x {diff:>11.3g}")
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    from numtrace_ir import dot

    graphs, meta, _ = _read_saved(args.file)
    name, graph = _graph_of(graphs, meta, args.method)
    text = dot.to_dot(graph, name=name)
    if args.output is None or args.output == "-":
        sys.stdout.write(text)
        return 0
    if args.output.endswith(".svg"):
        if not dot.dot_available():
            raise CommandError("Graphviz 'dot' is not installed, so no SVG can be made: install Graphviz, "
                               "or write the DOT text with -o graph.dot")
        try:
            svg = dot.to_svg(text)
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        if svg is None:
            raise CommandError("Graphviz 'dot' disappeared while making the SVG")
        text = svg
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CommandError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    print(f"wrote {args.output} ({len(graph)} nodes)")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    fn = _method(_load(args.file, args.backend), args.method)
    if args.input:
        text = fn.explain(*_call_args(fn, _read_inputs(args.input)))
    else:
        text = fn.explain()
    print(text, end="")
    return 0


def cmd_backends(args: argparse.Namespace) -> int:
    from .backends import backend_report

    for name, (state, detail) in backend_report().items():
        print(f"{name}: {state}{f' ({detail})' if detail else ''}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="numtrace", description="Inspect, run, time and draw saved "
                                     "numtrace traces (files written by traced.save).")
    parser.add_argument("--version", action="version", version=version_text())
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, func: Any, file: bool = True) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help, description=help)
        if file:
            p.add_argument("file", help="a saved trace (traced.save)")
            p.add_argument("--method", help="for a saved module: the traced method (default forward)")
        p.set_defaults(func=func)
        return p

    def inputs(p: argparse.ArgumentParser, required: bool) -> None:
        p.add_argument("--input", "-i", action="extend", nargs="+", default=[], required=required,
                       metavar="X.npy",
                       help="input arrays in argument order (.npy; a .npz gives all its arrays)")

    command("show", "print inputs, op counts, parameter bytes, guards and the text IR", cmd_show)
    command("code", "print the graph as NumPy source", cmd_code)
    run = command("run", "run a trace on input arrays", cmd_run)
    inputs(run, True)
    run.add_argument("--backend", "-b", help="backend to run on (default: the one it was saved with)")
    run.add_argument("--out", "-o", help="write the output(s) to this .npy (one output) or .npz file")
    bench = command("bench", "median time per backend, against the reference backend", cmd_bench)
    inputs(bench, True)
    bench.add_argument("--backend", "-b", action="append",
                       help="backend(s) to time (default: all available)")
    bench.add_argument("--repeat", type=int, default=50, help="calls timed per backend (default 50)")
    bench.add_argument("--budget", type=float, default=5.0, help="seconds per backend at most (default 5)")
    draw = command("draw", "draw the graph: SVG with Graphviz, else DOT text", cmd_draw)
    draw.add_argument("-o", "--output",
                      help="graph.svg (needs Graphviz dot) or graph.dot; default: DOT on stdout")
    explain = command("explain", "what the backend's executable does for these inputs", cmd_explain)
    inputs(explain, False)
    explain.add_argument("--backend", "-b", help="backend (default: the one it was saved with)")
    command("backends", "list the backends: available, unavailable (why) or not installed (how to install)",
            cmd_backends, file=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        if os.environ.get("NUMTRACE_DEBUG"):
            raise
        message = str(exc) if isinstance(exc, CommandError) else f"{type(exc).__name__}: {exc}"
        message = " ".join(message.split())
        print(f"numtrace {args.command}: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
