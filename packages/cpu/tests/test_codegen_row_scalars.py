"""Per-row operands in the generated tiles of rows (codegen.row_scalar_operands, stats()
["generated_row_scalar_runs"]): an input broadcast along the pass's innermost dim, as the
``x[:, None]`` of one-hot encoding ``(x[:, None] == classes).astype(np.float32)`` or of an outer
difference ``x[:, None] - y``, is read once per row into a register, each row's loop running over the
program's literal innermost length. The interpreter's bits (and NumPy's), FP flags as it raises them,
over innermost lengths 1 to 40, 1 to many rows, strided, reversed, unaligned and 0-stride operands,
1 and 2 threads, streamed and cached outputs, and the avx2 and baseline builds.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from graph_programs import each_setting
from numtrace_cpu import codegen, isa, runtime
from numtrace_cpu.steps import FusedStep
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_codegen import _cache, _compiled  # noqa: F401  (_cache: autouse fixture)

F32, F64, I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)
INNERS = (1, 2, 3, 5, 7, 8, 9, 10, 16, 17, 33, 40)


def _one_hot(node, col, y):
    return [node("np.astype", node("np.equal", col, y), dtype=F32)]


def _sub(node, col, y):
    return [node("np.subtract", col, y)]


def _where(node, col, y):   # np.where computes both values: sqrt's 'invalid' at a negative y
    return [node("np.where", node("np.greater", col, y), node("np.multiply", col, 2.0), node("np.sqrt", y))]


def _exp_rows(node, col, y):   # exp through the loop table, its rows summed in tiles of rows
    e = node("np.exp", node("np.subtract", col, y))
    return [e, node("np.sum", e, axis=-1)]


# name -> (dtype of x and y, outputs of (x[:, None], y))
PROGRAMS = {"one_hot": (I64, _one_hot), "sub": (F64, _sub), "where": (F32, _where),
            "exp_rows": (F32, _exp_rows)}


def _graph(name, n, inner):
    dtype, build = PROGRAMS[name]
    g = Graph()
    x = g.add_input("x", TensorType(dtype, (n,)))
    y = g.add_input("y", TensorType(dtype, (inner,)))

    def node(op, *args, **attrs):
        args = [a if not isinstance(a, float) else
                g.create_node("prim.Constant", [], attrs={"value": a}).output for a in args]
        return g.create_node(op, args, attrs=attrs).output
    col = node("np.getitem", x, index=(slice(None), None))
    g.set_outputs(build(node, col, y))
    return g


def _both(name, n, inner):
    """The program's generated and interpreted executables."""
    dtype = PROGRAMS[name][0]
    types = [TensorType(dtype, (n,)), TensorType(dtype, (inner,))]
    return [_compiled(_graph(name, n, inner), types, mode) for mode in ("sync", "off")]


def _values(name, n, inner, rng):
    dtype = PROGRAMS[name][0]
    if dtype == I64:
        return rng.integers(0, max(inner, 2), n), np.arange(inner)
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(inner).astype(dtype)
    x.flat[::7], y.flat[::5] = -0.0, np.nan
    if n > 3:
        x[1], x[2] = np.inf, np.nan
    return x, y


def _layouts(v):
    """v, and arrays of its values strided, reversed (negative stride), unaligned; a 0-stride one of
    its first value."""
    strided = np.empty(2 * len(v), v.dtype)[::2]
    strided[...] = v
    unaligned = np.frombuffer(bytearray(v.nbytes + 1), np.uint8)[1:].view(v.dtype)
    unaligned[...] = v
    return [v, strided, v[::-1].copy()[::-1], unaligned, np.broadcast_to(v[:1], v.shape)]


def _bits(outs):
    return [(np.asarray(o).dtype, np.asarray(o).shape, np.asarray(o).tobytes()) for o in outs]


def _flags(exe, args):
    """The FP errors a call raises with np.errstate(all='raise') (None: none)."""
    try:
        with np.errstate(all="raise"):
            exe(*args)
    except FloatingPointError as e:
        return str(e)
    return None


def _check(name, n, inner, threads=(1, 2), streaming=(1 << 62, 1)):
    """Generated against interpreted (and NumPy's one-hot and difference) over the layouts of x and y;
    returns the generated executable's stats()."""
    gen, interp = _both(name, n, inner)
    x, y = _values(name, n, inner, np.random.default_rng(n * 41 + inner))
    pairs = [(lx, y) for lx in _layouts(x)] + [(x, ly) for ly in _layouts(y)[1:]]
    for t, s in each_setting(threads, streaming):
        for args in pairs:
            what = f"{name} n={n} inner={inner} {t} threads streaming from {s}"
            with np.errstate(all="ignore"):
                got, want = gen(*args), interp(*args)
            assert _bits(got) == _bits(want), what
            assert _flags(gen, args) == _flags(interp, args), what
            with np.errstate(all="ignore"):
                if name == "one_hot":
                    numpy = [(args[0][:, None] == args[1]).astype(F32)]
                elif name == "sub":
                    numpy = [args[0][:, None] - args[1]]
                else:
                    continue
            assert _bits(got) == _bits(numpy), what + " vs NumPy"
    assert interp.stats()["generated_runs"] == 0
    return gen.stats()


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("inner", INNERS)
def test_per_row_operand_equals_interpreter(name, inner):
    """Over 2049 rows (two units of tiles of rows, the second short): the per-row path wherever the
    innermost dim is longer than 1 (a dim of 1 broadcasts nothing), the interpreter's bits."""
    s = _check(name, 2049, inner)
    if inner == 1:
        assert s["generated_row_scalar_runs"] == 0
    else:
        assert s["generated_row_scalar_runs"] > 0, "the per-row operand was gathered"
        tiles = s["generated_row_tile_runs"] if name == "exp_rows" else s["generated_rows_runs"]
        assert s["generated_row_scalar_runs"] == tiles


@pytest.mark.parametrize("name", ["one_hot", "where"])
@pytest.mark.parametrize("n", [1, 2, 3, 52, 50001])
def test_per_row_operand_over_row_counts(name, n):
    """1 row to many (50001: units for both threads of a team)."""
    s = _check(name, n, 10)
    if n >= 52:
        assert s["generated_row_scalar_runs"] > 0
    if n == 50001:
        assert s["generated_team_runs"] > 0


def test_innermost_length_other_than_the_programs_keeps_the_tiles():
    """``x[:, None, None] + y`` over (n, 3, 10) with a C-ordered (3, 10) y collapses to rows of 30,
    not the program's 10: the kernel gathers x's rows as before, same bits, and the run is not
    counted. A Fortran-ordered y keeps the dims, and the per-row path."""
    g = Graph()
    x = g.add_input("x", TensorType(F64, (4001,)))
    y = g.add_input("y", TensorType(F64, (3, 10)))
    col = g.create_node("np.getitem", [x], attrs={"index": (slice(None), None, None)}).output
    g.set_outputs([g.create_node("np.add", [col, y]).output])
    types = [TensorType(F64, (4001,)), TensorType(F64, (3, 10))]
    gen, interp = (_compiled(g, types, mode) for mode in ("sync", "off"))
    rng = np.random.default_rng(4)
    xv, yv = rng.standard_normal(4001), rng.standard_normal((3, 10))
    assert _bits(gen(xv, yv)) == _bits(interp(xv, yv)) == _bits([xv[:, None, None] + yv])
    s = gen.stats()
    assert s["generated_rows_runs"] == 1 and s["generated_row_scalar_runs"] == 0
    fortran = np.asfortranarray(yv)
    assert _bits(gen(xv, fortran)) == _bits(interp(xv, fortran)) == _bits([xv[:, None, None] + yv])
    assert gen.stats()["generated_row_scalar_runs"] == 1


def test_row_scalar_operands_of_programs():
    """The hint: x[:, None] is marked, y and the output are not; a pass without a per-row operand
    (``a + y`` over (n, 10)) marks none, and its kernel has no per-row loops. Rows of 8 or more keep
    their loop (not unrolled, so GCC vectorizes it); shorter ones do not."""
    def programs(g, types):
        return [s.kernel.program for s in _compiled(g, types)._steps if isinstance(s, FusedStep)]

    for inner, loop in ((10, True), (3, False)):
        (program,) = programs(_graph("sub", 100, inner), [TensorType(F64, (100,)), TensorType(F64, (inner,))])
        assert codegen.row_scalar_operands(program) == 1
        source = codegen.generate(program)
        assert f"const int rowwise = inner == {inner} &&" in source
        assert ("#pragma GCC unroll 1" in source) == loop
    g = Graph()
    a = g.add_input("a", TensorType(F64, (100, 10)))
    y = g.add_input("y", TensorType(F64, (10,)))
    g.set_outputs([g.create_node("np.add", [a, y]).output])
    (program,) = programs(g, [TensorType(F64, (100, 10)), TensorType(F64, (10,))])
    assert codegen.row_scalar_operands(program) == 0 and "rowwise" not in codegen.generate(program)



def test_an_operand_a_table_op_or_fold_reads_is_not_read_per_row():
    """A per-row operand is read in place only by the tile's elementwise loops: were a table op (exp)
    or a fold to read it directly, its pointer would run over rows * inner elements of the operand
    (wrong values, past its end). The fuser gives neither such an operand today (``np.exp(x[:, None])``
    is its own (n, 1) pass), so the hint is checked on the program: the same program with the marked
    register read by exp, or folded, marks nothing."""
    (program,) = [s.kernel.program for s in _compiled(_graph("sub", 100, 10), [
        TensorType(F64, (100,)), TensorType(F64, (10,))])._steps if isinstance(s, FusedStep)]
    assert codegen.row_scalar_operands(program) == 1
    shape, axes, regs, consts, instrs, reductions, operands = program
    marked = next(r for r, reg in enumerate(regs) if reg[2] == 0 and reg[1] == codegen.REG_KINDS["input"])
    exp = next(code for code, name in codegen._BY_CODE.items() if name == "exp")
    op, dt, dst, _a, b, c = instrs[0]
    assert codegen._through_table(exp, dt)
    through_exp = (shape, axes, regs, consts, ((exp, dt, dst, marked, b, c), *instrs[1:]), reductions,
                   operands)
    assert codegen.row_scalar_operands(through_exp) == 0
    folded = (shape, axes, regs, consts, instrs, ((0, marked, 0, 0),), operands)
    assert codegen.has_row_tiles(folded) and codegen.row_scalar_operands(folded) == 0


_ISA_CHILD = r"""
import numpy as np, numtrace_cpu
from numtrace_cpu import compile_graph, compiler, isa
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

def exes(dtype, n, inner, op):
    g = Graph()
    x = g.add_input("x", TensorType(dtype, (n,)))
    y = g.add_input("y", TensorType(dtype, (inner,)))
    col = g.create_node("np.getitem", [x], attrs={"index": (slice(None), None)}).output
    v = g.create_node(op, [col, y]).output
    if op == "np.equal":
        v = g.create_node("np.astype", [v], attrs={"dtype": np.dtype(np.float32)}).output
    g.set_outputs([v])
    types = [TensorType(dtype, (n,)), TensorType(dtype, (inner,))]
    made = []
    for mode in ("sync", "off"):
        compiler.set_mode(mode)
        made.append(compile_graph(g, types))
    return made

rng = np.random.default_rng(3)
results = []
for dtype, op, inner in ((np.dtype(np.int64), "np.equal", 10), (np.dtype(np.float32), "np.subtract", 16),
                         (np.dtype(np.float64), "np.subtract", 3)):
    gen, interp = exes(dtype, 20001, inner, op)
    x = rng.integers(0, inner, 20001) if dtype.kind == "i" else rng.standard_normal(20001).astype(dtype)
    y = np.arange(inner).astype(dtype)
    for t in (1, 2):
        numtrace_cpu.set_num_threads(t)
        for a in (x, x[::-1]):
            results.append(gen(a, y)[0].tobytes() == interp(a, y)[0].tobytes())
    results.append(gen.stats()["generated_row_scalar_runs"] == 4)
print(isa.BUILD, all(results))
"""


@pytest.mark.parametrize("build", ["baseline", "avx2"])
def test_other_isa_builds_read_per_row_operands_alike(build, tmp_path):
    """The avx2 and baseline builds (NUMTRACE_CPU_ISA, a child process: the kernels compile for the
    build in use): one-hot and outer differences over rows of 16 and 3, the interpreter's bits."""
    if build not in isa.built() or not isa.BUILDS[build][1] <= runtime.cpu_features():
        pytest.skip(f"this CPU or installation has no {build} build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    done = subprocess.run([sys.executable, "-c", _ISA_CHILD], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [build, "True"]
