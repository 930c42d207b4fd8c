"""Generate docs/numpy-coverage.md: how numtrace handles every public function of `numpy`, `numpy.linalg`
and `numpy.fft` that computes arrays from arrays.

    python ci/numpy_coverage.py            # rewrite the page
    python ci/numpy_coverage.py --check    # exit 1 when the page is stale

Needs numtrace_ir and numtrace_cpu installed. Each function is put in one class:

- fused: a registry op that the CPU backend computes in its own kernels (fused elementwise passes,
  folded reductions, scans), possibly after decomposing it into such ops;
- planned call: a registry op that the CPU backend computes with NumPy's (or BLAS's) own call
  writing into its planned buffer, or keeps as NumPy's view; one trace serves every shape;
- traced through: no op, but NumPy's implementation is Python, which the tracer runs on its proxies,
  recording the ops it calls (shape-generic as far as those are);
- host call: a compiled function without an op: called at run time on the real arrays, guarded on
  the shapes it was traced at (a call at other shapes re-traces; a loaded trace refuses it);
- refused: the tracer does not record it (why is given).

The CPU column comes from compiling each op's first registry sample (`numtrace_ir.testing`) and
reading the executable's `stats()`, so it is what the backend does, not a list kept by hand.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import warnings
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parents[1] / "docs" / "numpy-coverage.md"
MODULES = (("numpy", np), ("numpy.linalg", np.linalg), ("numpy.fft", np.fft))

# Public functions that do not compute arrays from arrays: dtype and type queries, printing,
# configuration, file I/O, array construction from sizes or Python data, introspection.
NOT_ARRAY_FUNCTIONS = frozenset("""
    can_cast result_type promote_types min_scalar_type common_type issubdtype isdtype mintypecode typename
    array2string array_repr array_str format_float_positional format_float_scientific base_repr binary_repr
    get_printoptions set_printoptions printoptions geterr seterr errstate getbufsize setbufsize geterrcall
    seterrcall info show_config show_runtime test get_include may_share_memory shares_memory ndim shape size
    isscalar iterable isfortran load save savez savez_compressed savetxt loadtxt genfromtxt fromfile
    fromregex frombuffer fromiter fromstring fromfunction arange zeros ones empty full eye identity tri
    indices diag_indices tril_indices triu_indices mask_indices ravel_multi_index unravel_index
    fftfreq rfftfreq busday_count busday_offset is_busday datetime_as_string datetime_data
    asarray asanyarray ascontiguousarray asfortranarray asarray_chkfinite require array from_dlpack
    broadcast_shapes set_module vectorize frompyfunc nested_iters ndindex ndenumerate
    get_state set_state seed
""".split())

CLASSES = ("fused", "planned call", "traced through", "host call", "refused")


def public_functions() -> list[tuple[str, str, object]]:
    """(module, name, callable) for every public function or ufunc of the modules, in name order."""
    out = []
    for modname, mod in MODULES:
        for name in sorted(getattr(mod, "__all__", None) or dir(mod)):
            if name.startswith("_") or name in NOT_ARRAY_FUNCTIONS:
                continue
            obj = getattr(mod, name, None)
            if isinstance(obj, np.ufunc) or (callable(obj) and not isinstance(obj, type)
                                              and not inspect.ismodule(obj)):
                out.append((modname, name, obj))
    return out


def _cpu_class(op) -> str:
    """"fused" or "planned call": how the CPU backend runs the op's first sample."""
    from numtrace_cpu import compile_graph
    from numtrace_ir import testing

    samples = [s for s in op.samples(np.random.default_rng(0)) if not op.nondeterministic]
    if not samples:
        return "planned call"
    def float64(s):
        return all(isinstance(v, np.ndarray) and v.dtype == np.float64 and v.size for v in s.inputs)

    def same_shapes(s):   # an elementwise op's operands unbroadcast: an exponent broadcast along an axis
        return op.kind != "elementwise" or len({v.shape for v in s.inputs}) == 1   # is NumPy's power

    sample = next((s for s in samples if float64(s) and same_shapes(s)),
                  next((s for s in samples if float64(s)), samples[0]))   # the dtype every kernel takes
    try:
        graph = testing.build_graph(op, sample)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats = compile_graph(graph, [testing.type_of(v) for v in sample.inputs]).stats()
    except Exception:  # a sample the plain graph builder cannot take (index keys): NumPy's call
        return "planned call"
    if stats.get("fused_nodes", 0) or stats.get("scans", 0) or stats.get("small_matmuls", 0):
        return "fused"
    return "planned call"


_WRITERS = {"copyto", "put", "place", "putmask", "fill_diagonal"}


def classify(modname: str, name: str, func: object) -> tuple[str, str]:
    """(class, detail) for one function."""
    from numtrace_ir import registry
    from numtrace_ir.ops.host import DENIED, host_name

    op = registry.for_numpy(func)
    if op is not None:
        return _cpu_class(op), f"`{op.name}`"
    if name in DENIED:
        return "refused", "reads or writes files or process state: never recorded"
    impl = getattr(func, "_implementation", func)
    if inspect.isfunction(impl):
        detail = "writes into its argument: recorded as a functional update" if name in _WRITERS else ""
        return "traced through", detail
    if host_name(func) is None:
        return "refused", "not resolvable by name in an allowed module"
    return "host call", ""


def render() -> str:
    rows = [classify(m, n, f) + (m, n) for m, n, f in public_functions()]
    counts = {c: sum(r[0] == c for r in rows) for c in CLASSES}
    lines = [
        "# NumPy coverage",
        "",
        "How numtrace handles each public function of `numpy`, `numpy.linalg` and `numpy.fft` that",
        "computes arrays from arrays (generated by `ci/numpy_coverage.py` from the registry and the CPU",
        "backend; a test fails while this page is stale). The classes:",
        "",
        "- **fused**: a registry op the CPU backend computes in its own kernels (fused passes, folded",
        "  reductions, scans), possibly after decomposing it into such ops;",
        "- **planned call**: a registry op the CPU backend computes with NumPy's (or BLAS's) own call",
        "  into its planned buffer, or keeps as NumPy's view; one trace serves every shape;",
        "- **traced through**: no op, but NumPy's implementation is Python: the tracer runs it and records",
        "  the ops it calls;",
        "- **host call**: called at run time on the real arrays, guarded on the input shapes it was",
        "  traced at (other shapes re-trace; a loaded trace refuses them);",
        "- **refused**: never recorded (the reason is given).",
        "",
        "| class | functions |",
        "|---|---|",
        *(f"| {c} | {counts[c]} |" for c in CLASSES),
        "",
        "| function | handling | op or note |",
        "|---|---|---|",
    ]
    for cls, detail, modname, name in rows:
        lines.append(f"| `{modname}.{name}` | {cls} | {detail} |")
    return "\n".join(lines) + "\n"


def counts(text: str) -> dict[str, int]:
    """The per-class counts of a rendered page."""
    return {c: int(line.split("|")[2]) for line in text.splitlines() for c in CLASSES
            if line.startswith(f"| {c} |")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python ci/numpy_coverage.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(counts(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
