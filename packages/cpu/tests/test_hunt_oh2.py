"""Randomized differential hunt of per-row operands in generated passes of short rows (merge12's
codegen.row_scalar_operands, stats()["generated_row_scalar_runs"], and nt_gen_gather_rows' bias row
copied in doubling runs): seeded random programs over ``x[:, None]``, ``x[..., None]``,
``x[None, :, None]``, ``(n, 1)`` and ``(b, n, 1)`` inputs, bias rows ``(k,)`` and ``(b, 1, k)``, and
full ``(n, k)`` / ``(b, n, k)`` inputs: arithmetic, table ops (exp, tanh, log1p), where, one-hot
compares cast to a number, casts, and a row sum or max in the same pass. Each graph has symbolic
dims, as a trace does, and is compiled at several sizes (rows 1 to 5000, innermost 1 to 33) and
called with its inputs in other layouts (strided, reversed, Fortran, unaligned, 0-stride), on 1 and
2 threads, streaming on and off, and with its first output written over an input (``updates``).
Generated kernels against the interpreter and NumPy: values, dtypes, shapes, NaN places and FP flags.

What is not compared bit for bit, as docs/guide/sharp-edges.md says: which of two NaN operands an
operation returns (the rowwise loops keep the first operand's, NumPy's, where the interpreter and
main's kernels keep the second's: ``(k,) + (n, 1)``, both NaN), and the sign of a max reduction's
zero tie. Table ops and float sums compare within a tolerance against NumPy.
"""

from __future__ import annotations

import warnings

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, compiler, runtime
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_codegen import _cache  # noqa: F401  (the kernel cache fixture, autouse)

F32, F64, I32, I64 = (np.dtype(d) for d in ("float32", "float64", "int32", "int64"))
NUMBERS = [F32, F64, I64, I32]
OTHERS = [np.dtype(d) for d in ("bool", "int8", "uint8", "int16", "uint16", "uint32", "uint64")]

# leaf name -> (its input's symbolic shape, the index the program applies to it or None)
LEAVES = {
    2: {"a": (("N", "K"), None), "xc": (("N",), (slice(None), None)), "xe": (("N",), (Ellipsis, None)),
        "r1": (("N", 1), None), "b": (("K",), None)},
    3: {"a": (("B", "N", "K"), None), "xe": (("B", "N"), (Ellipsis, None)),
        "xn": (("N",), (None, slice(None), None)), "r1": (("B", "N", 1), None), "b": (("K",), None),
        "bb": (("B", 1, "K"), None)},
}
PER_ROW = {"xc", "xe", "xn", "r1"}
FULL = {"a", "b", "bb"}
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]
TABLE = ["exp", "tanh", "log1p"]
UNARY = ["negative", "absolute", "square"]
SIZES = {2: [dict(N=2049, K=10), dict(N=3, K=10), dict(N=700, K=3), dict(N=257, K=16), dict(N=1, K=7),
             dict(N=130, K=1), dict(N=5000, K=2), dict(N=64, K=33)],
         3: [dict(B=3, N=400, K=10), dict(B=2, N=5, K=3), dict(B=1, N=1, K=8), dict(B=4, N=100, K=1),
             dict(B=2, N=300, K=17)]}
LAYOUTS = ["plain", "plain", "strided", "reversed", "fortran", "unaligned", "zero"]


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def random_program(rng):
    """(rank, {leaf: dtype}, expression tree, row reduction or None): at least one per-row leaf,
    and one of the full or bias leaves, in the tree."""
    rank = _pick(rng, [2, 2, 3])
    names = list(LEAVES[rank])
    chosen = {_pick(rng, sorted(PER_ROW & set(names)))} | {n for n in names if rng.random() < 0.45}
    if not FULL & chosen:
        chosen.add(_pick(rng, ["a", "b"]))
    base = _pick(rng, NUMBERS + OTHERS[:2])
    leaves = {n: base if rng.random() < 0.7 else _pick(rng, NUMBERS + OTHERS) for n in sorted(chosen)}
    floaty = any(d.kind == "f" for d in leaves.values())

    def tree(depth, const=False):   # const: a Python scalar may stand here (a binary op's operand)
        r = rng.random()
        if depth == 0 or r < 0.25:
            return ("const", _pick(rng, [2, 0.5, -1.25, -0.0, 3])) if const and rng.random() < 0.15 else \
                ("leaf", _pick(rng, sorted(leaves)))
        if r < 0.55:
            return ("bin", _pick(rng, BINARY + (["divide"] if floaty else [])), tree(depth - 1),
                    tree(depth - 1, True))
        if r < 0.64:
            return ("un", _pick(rng, UNARY), tree(depth - 1))
        if r < 0.72 and floaty:
            return ("un", _pick(rng, TABLE), tree(depth - 1))
        if r < 0.85:
            return ("where", tree(depth - 1), tree(depth - 1), tree(depth - 1, True))
        if r < 0.93:
            return ("eqcast", tree(depth - 1), tree(depth - 1, True), _pick(rng, [F32, F64, I64]))
        return ("cast", tree(depth - 1), _pick(rng, NUMBERS))

    row = ("leaf", _pick(rng, sorted(PER_ROW & set(leaves))))
    t = ("bin", _pick(rng, BINARY), tree(int(rng.integers(1, 4))), row)
    full = ("leaf", _pick(rng, sorted(FULL & set(leaves))))   # the pass runs over whole rows
    t = ("bin", _pick(rng, BINARY), full, t) if rng.random() < 0.5 else ("bin", _pick(rng, BINARY), t, full)
    return rank, leaves, t, _pick(rng, [None, None, "sum", "max", "sum"])


class _NumPy:
    """The program's ops on arrays (and Python scalars), eagerly."""
    def const(self, v):
        return v

    def leaf(self, arrays, rank, name):
        index = LEAVES[rank][name][1]
        return arrays[name] if index is None else arrays[name][index]

    def op(self, name, *args, **attrs):
        if name == "astype":
            return np.asarray(args[0]).astype(attrs["dtype"])
        return getattr(np, name)(*args, **attrs)


class _Builder:
    """The program's ops as nodes of graph g, Python scalars as constants."""
    def __init__(self, g):
        self.g = g

    def const(self, v):
        return self.g.create_node("prim.Constant", [], attrs={"value": v}).output

    def leaf(self, values, rank, name):
        index = LEAVES[rank][name][1]
        v = values[name]
        return v if index is None else self.op("getitem", v, index=index)

    def op(self, name, *args, **attrs):
        args = [a if hasattr(a, "type") else self.const(a) for a in args]
        return self.g.create_node(f"np.{name}", args, attrs=attrs).output


def evaluate(prog, leaves, ops):
    """The program's outputs through `ops` (_NumPy or _Builder), `leaves` its inputs by name."""
    rank, _, tree, red = prog

    def ev(t):
        kind = t[0]
        if kind == "const":
            return ops.const(t[1])
        if kind == "leaf":
            return ops.leaf(leaves, rank, t[1])
        if kind == "bin":
            return ops.op(t[1], ev(t[2]), ev(t[3]))
        if kind == "un":
            return ops.op(t[1], ev(t[2]))
        if kind == "where":
            return ops.op("where", ops.op("greater", ev(t[1]), ops.const(0)), ev(t[2]), ev(t[3]))
        if kind == "eqcast":
            return ops.op("astype", ops.op("equal", ev(t[1]), ev(t[2])), dtype=t[3])
        return ops.op("astype", ev(t[1]), dtype=t[2])

    out = ev(tree)
    return [out] if red is None else [out, ops.op(red, out, axis=-1)]


def graph(prog):
    rank, leaves, _, _ = prog
    g = Graph()
    values = {n: g.add_input(n, TensorType(leaves[n], LEAVES[rank][n][0])) for n in sorted(leaves)}
    g.set_outputs(evaluate(prog, values, _Builder(g)))
    return g


def _program(rng):
    """The first random program the graph rules take (NumPy's: no - or negative of bools) and its graph."""
    while True:
        prog = random_program(rng)
        try:
            return prog, graph(prog)
        except TypeError:
            continue


def _shape(prog, name, sizes):
    return tuple(sizes[d] if isinstance(d, str) else d for d in LEAVES[prog[0]][name][0])


def _inputs(prog, sizes, rng):
    """Quarter-integers (float sums exact in any order), NaN, inf and -0.0 among the floats."""
    out = {}
    for n, dt in sorted(prog[1].items()):
        shape = _shape(prog, n, sizes)
        if dt.kind != "f":
            out[n] = rng.integers(-5 if dt.kind == "i" else 0, 6, size=shape).astype(dt)
            continue
        v = (rng.integers(-8, 9, size=shape) / 4).astype(dt)
        if v.size > 3:
            for value, count in ((np.nan, 2), (np.inf, 1), (-0.0, 1)):
                v.reshape(-1)[rng.integers(0, v.size, count)] = value
        out[n] = v
    return out


def layout(v, how):
    """v's values in another layout ("zero": every element v's first, a 0-stride array)."""
    if v.size == 0 or how == "plain":
        return v
    if how == "strided":
        view = np.empty(v.shape[:-1] + (2 * v.shape[-1],), v.dtype)[..., ::2]
        view[...] = v
        return view
    if how == "reversed":
        return np.flip(np.flip(v).copy())
    if how == "fortran":
        return np.asfortranarray(v)
    if how == "unaligned":
        u = np.frombuffer(bytearray(v.nbytes + 1), np.uint8)[1:].view(v.dtype).reshape(v.shape)
        u[...] = v
        return u
    return np.broadcast_to(v.reshape(-1)[:1].reshape((1,) * v.ndim), v.shape)


def _has(tree, names):
    return isinstance(tree, tuple) and (tree[0] == "un" and tree[1] in names
                                        or any(_has(c, names) for c in tree[1:]))


def _casts_to_int(tree):
    """Whether the tree casts to an integer (a float's -0.0 to 0 and back: see
    test_float_int_float_round_trip_keeps_positive_zero, where generated kernels give -0.0)."""
    return isinstance(tree, tuple) and (tree[0] == "cast" and tree[2].kind in "iu"
                                        or any(_casts_to_int(c) for c in tree[1:]))


def _difference(got, want, loose, zeros):
    """Why got is not want (None: it is): dtype, shape, NaN places, then the other values' bits
    (`loose`: within a tolerance; `zeros`: -0.0 and 0.0 alike)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{got.shape} is not {want.dtype}{want.shape}"
    if want.dtype.kind != "f":
        return None if got.tobytes() == want.tobytes() else "values"
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return "NaN places"
    got, want = got[~np.isnan(want)], want[~np.isnan(want)]
    if zeros:
        got, want = got + 0.0, want + 0.0
    if loose:
        return None if np.allclose(got, want, rtol=1e-5, atol=1e-6) else "values (beyond tolerance)"
    return None if got.tobytes() == want.tobytes() else "bits"


def _flags(fn, *args):
    """The FP error kinds fn(*args) raises under np.errstate(all="raise")."""
    try:
        with np.errstate(all="raise"):
            fn(*args)
    except FloatingPointError as e:
        return [k for k in ("divide by zero", "overflow", "underflow", "invalid value") if k in str(e)]
    return []


def _compile(g, types, updates):
    made = []
    for mode in ("sync", "off"):
        old = compiler.set_mode(mode)
        try:
            made.append(compile_graph(g, types, updates=updates))
        finally:
            compiler.set_mode(old)
    return made


def _call(exe, base, lay, updates):
    """exe on base's arrays (by leaf name, sorted) in the layouts `lay`; the one it writes (updates)
    a fresh copy."""
    names = sorted(base)
    args = [layout(base[n], lay[n]) for n in names]
    if updates:
        args[0] = layout(base[names[0]].copy(), lay[names[0]])
    return exe(*args)


def _compare(prog, exes, base, lay, updates, what):
    """Differences of one call of the generated and interpreted executables from each other and NumPy."""
    _, _, tree, red = prog
    loose = _has(tree, TABLE) or red == "sum"
    want_args = {n: layout(base[n], lay[n]) for n in base}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = evaluate(prog, want_args, _NumPy())
        got, ref = (_call(exe, base, lay, updates) for exe in exes)
    problems = []
    trunc = _casts_to_int(tree)   # the known -0.0 of generated kernels: compared as zeros
    for k, (a, b, w) in enumerate(zip(got, ref, want)):
        zeros = k == 1 and red == "max"
        for name, d in (("generated vs interpreter", _difference(a, b, False, trunc)),
                        ("generated vs NumPy", _difference(a, w, loose, zeros or trunc)),
                        ("interpreter vs NumPy", _difference(b, w, loose, zeros))):
            if d:
                problems.append(f"{name} output {k}: {d}; {what}")
    flags = [_flags(_call, exe, base, lay, updates) for exe in exes]
    flags.append(_flags(evaluate, prog, want_args, _NumPy()))
    if not flags[0] == flags[1] == flags[2]:
        problems.append(f"FP flags generated {flags[0]} interpreter {flags[1]} NumPy {flags[2]}; {what}")
    return problems


def check_program(seed, nsizes=3, ncalls=3, in_place=False):
    """Differences of the seed's program (a list of strings) and its generated_row_scalar_runs: at
    `nsizes` sizes (the first one many rows longer than 1), `ncalls` calls each in random layouts,
    1 or 2 threads, streaming or not; `in_place`: its first output written over its first input."""
    rng = np.random.default_rng(seed)
    prog, g = _program(rng)
    rank, leaves, _, _ = prog
    names = sorted(leaves)
    updates = {0: 0} if in_place and g.outputs[0].type == g.inputs[0].type else None
    problems, reached = [], 0
    for sizes in [SIZES[rank][i] for i in [0, *rng.permutation(len(SIZES[rank]) - 1)[:nsizes - 1] + 1]]:
        exes = _compile(g, [TensorType(leaves[n], _shape(prog, n, sizes)) for n in names], updates)
        base = _inputs(prog, sizes, rng)
        for _ in range(ncalls):
            lay = {n: _pick(rng, LAYOUTS) for n in names}
            if updates and lay[names[0]] == "zero":   # written in place: a writable array
                lay[names[0]] = "plain"
            threads, stream = int(rng.integers(1, 3)), _pick(rng, [1 << 62, 1])
            old_threads, old_stream = numtrace_cpu.get_num_threads(), runtime.set_stream_min_bytes(stream)
            numtrace_cpu.set_num_threads(threads)
            try:
                problems += _compare(prog, exes, base, lay, updates,
                                     f"seed={seed} {sizes} {lay} threads={threads} streaming from {stream}")
            finally:
                numtrace_cpu.set_num_threads(old_threads)
                runtime.set_stream_min_bytes(old_stream)
        reached += exes[0].stats()["generated_row_scalar_runs"]
        assert exes[1].stats()["generated_runs"] == 0
    return problems, reached


SEEDS = range(0, 12)


@pytest.mark.parametrize("in_place", [False, True], ids=["fresh", "in_place"])
@pytest.mark.parametrize("chunk", range(2))
def test_random_per_row_programs(chunk, in_place):
    """Six seeded programs a chunk, three sizes each, three calls a size in random layouts: no
    difference, and the per-row path reached by most of them."""
    seeds = [s for s in SEEDS if s % 2 == chunk]
    problems, reached = [], 0
    for seed in seeds:
        p, r = check_program(seed + (1000 if in_place else 0), in_place=in_place)
        problems += p
        reached += bool(r)
    assert not problems, "\n".join(problems[:10])
    assert reached >= len(seeds) // 2, f"only {reached} of {len(seeds)} programs ran the per-row path"


def check_traced(seed, mode, ncalls=2):
    """The seed's program as a Python function traced (frontend) at its first size's example and
    called at the other sizes (each a signature of its own) in random layouts, with generated
    kernels (`mode` "sync") or the interpreter ("off"): differences from NumPy, and the trace's
    generated_row_scalar_runs."""
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)
    rng = np.random.default_rng(seed)
    prog, _ = _program(rng)
    rank, leaves, tree, red = prog
    names = sorted(leaves)
    loose = _has(tree, TABLE) or red == "sum"

    def fn(*args):
        return tuple(evaluate(prog, dict(zip(names, args)), _NumPy()))
    sizes_all = SIZES[rank]
    example = _inputs(prog, sizes_all[int(rng.integers(len(sizes_all)))], rng)
    old = compiler.set_mode(mode)
    problems = []
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = nt.trace(fn, tuple(example[n] for n in names), backend="cpu", check_trace=False)
        for sizes in sizes_all:
            base = _inputs(prog, sizes, rng)
            for _ in range(ncalls):
                lay = {n: _pick(rng, LAYOUTS) for n in names}
                args = [layout(base[n], lay[n]) for n in names]
                what = f"seed={seed} traced {mode} {sizes} {lay}"
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got, want = traced(*args), fn(*args)
                for k, (a, w) in enumerate(zip(got, want)):
                    d = _difference(a, w, loose, k == 1 and red == "max" or _casts_to_int(tree))
                    if d:
                        problems.append(f"output {k}: {d}; {what}")
                flags = [_flags(traced, *args), _flags(fn, *args)]
                if flags[0] != flags[1]:
                    problems.append(f"FP flags trace {flags[0]} NumPy {flags[1]}; {what}")
    finally:
        compiler.set_mode(old)
    runs = sum(s.get("generated_row_scalar_runs", 0) for s in traced.stats()["signatures"].values())
    return problems, runs


@pytest.mark.parametrize("mode", ["sync", "off"])
def test_traced_per_row_programs_at_other_sizes(mode):
    """Traced once, called at every size of its rank: NumPy's values, FP flags as NumPy raises them;
    with generated kernels, the per-row path reached."""
    problems, reached = [], 0
    for seed in range(2000, 2006):
        p, r = check_traced(seed, mode)
        problems += p
        reached += bool(r)
    assert not problems, "\n".join(problems[:10])
    assert (reached >= 3) if mode == "sync" else reached == 0


@pytest.mark.parametrize("dtypes", [(F64, I32), (F32, I64)], ids=["f64_i32", "f32_i64"])
def test_float_int_float_round_trip_keeps_positive_zero(dtypes):
    """``x.astype(int) + x`` (found by seed 15's ``b * (xn.astype(int32) + xn)[None, :, None]``): the
    int of -0.0 or -0.3 is 0, back to float +0.0, plus -0.0 is +0.0. The generated kernel's scalar
    loop (the elements past its vector loop: all 5 of a 5-element pass, the last 3 of 1203) turned
    the cast and its way back into one vrndscalesd (GCC's ``(float)(fix_trunc x) -> trunc(x)`` under
    -fno-trapping-math, which ignores signed zeros), -0.0 for -0.0 and -0.3: the sum was -0.0. The
    kernel now XORs the int with a zero the compiler cannot see (nt_gen_opaque_zero)."""
    fdt, idt = dtypes
    g = Graph()
    x = g.add_input("x", TensorType(fdt, ("N",)))
    cast = g.create_node("np.astype", [x], attrs={"dtype": idt}).output
    back = g.create_node("np.astype", [cast], attrs={"dtype": fdt}).output
    g.set_outputs([g.create_node("np.add", [back, x]).output])
    for n in (5, 1203):
        xs = np.resize(np.array([-0.0, -0.3, np.nan, np.inf, -0.7], fdt), n)
        gen, interp = _compile(g, [TensorType(fdt, (n,))], None)
        with np.errstate(all="ignore"):
            want = xs.astype(idt).astype(fdt) + xs
            assert interp(xs)[0].tobytes() == want.tobytes()
            assert gen.stats()["generated_kernels"] == 1
            assert gen(xs)[0].tobytes() == want.tobytes(), f"n={n}: {gen(xs)[0][-5:]} != {want[-5:]}"
