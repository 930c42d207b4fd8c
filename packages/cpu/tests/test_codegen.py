"""Generated C kernels for fused elementwise passes (numtrace_cpu.codegen, numtrace_cpu.compiler):
bit for bit the interpreter's results (and so NumPy's wherever the interpreter's are), over the
registry's elementwise ops, random op chains, dtypes and layouts; the disk cache across processes;
the modes; the note when no compiler runs.

Kernels compile synchronously here (mode ``sync``), so the generated path runs deterministically.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_cpu.codegen import generate
from numtrace_cpu.steps import FusedStep
from numtrace_ir import Graph, testing
from numtrace_ir.registry import all_ops
from numtrace_ir.types import TensorType

F32 = np.dtype(np.float32)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _compiled(graph, types, mode="off", updates=None):
    old = compiler.set_mode(mode)
    try:
        return compile_graph(graph, types, updates=updates)
    finally:
        compiler.set_mode(old)


def _both(graph, types):
    """The graph's executable with generated kernels, and one on the interpreter."""
    return _compiled(graph, types, "sync"), _compiled(graph, types, "off")


def _assert_same_bits(got, want, what):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, what
        assert g.tobytes() == w.tobytes(), f"{what}: generated kernel differs from the interpreter"


def _registry_cases():
    """Every elementwise registry op's samples in one of its dtype signatures, a different one from op
    to op (each signature is a kernel to compile: all of them would take the compiler half a minute);
    the random chains below cover every dtype of the common ops."""
    by_op: dict = {}
    for op, sample in testing.iter_cases(all_ops()):
        if op.kind == "elementwise" and not op.nondeterministic:
            sig = tuple(str(getattr(testing.type_of(v), "dtype", type(v).__name__)) for v in sample.inputs)
            by_op.setdefault(op.name, {}).setdefault(sig, []).append((op, sample))
    cases = []
    for name, sigs in by_op.items():
        keys = sorted(sigs)
        cases += sigs[keys[zlib.crc32(name.encode()) % len(keys)]]
    return cases


CASES = _registry_cases()


@pytest.fixture(scope="module")
def registry_executables(tmp_path_factory):
    """Per case, its executable with generated kernels (all of them compiled in one compiler run) and
    one on the interpreter; None where the graph does not compile on the cpu backend."""
    pairs = []
    for op, sample in CASES:
        graph = testing.build_graph(op, sample)
        types = [testing.type_of(v) for v in sample.inputs]
        try:
            pairs.append((_compiled(graph, types, "off"), _compiled(graph, types, "off")))
        except Exception:   # test_ops.py holds the backend to its contract on these
            pairs.append(None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))
        compiler.request([s.kernel for p in pairs if p for s in p[0]._steps if isinstance(s, FusedStep)],
                         "sync")
    return pairs


@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[testing.case_id(op, s, i) for i, (op, s) in enumerate(CASES)])
def test_registry_op_generated_matches_interpreter_and_numpy(case, registry_executables):
    op, sample = CASES[case]
    if registry_executables[case] is None or not registry_executables[case][0].stats()["generated_kernels"]:
        pytest.skip("no fused elementwise pass")
    gen, interp = registry_executables[case]
    expected = testing.reference_outputs(op, sample)
    runs = gen.stats()["generated_runs"]
    for inputs, what in ((sample.inputs, op.name), ([testing.noncontiguous(v) for v in sample.inputs],
                                                    f"{op.name} (non-contiguous)")):
        got = gen(*inputs)
        _assert_same_bits(got, interp(*inputs), what)
        testing.assert_outputs_close(got, expected, what=what, op=op, inputs=sample.inputs)
    assert gen.stats()["generated_runs"] > runs or not any(np.size(g) for g in got)


# Random chains: ops drawn from the interpreter's table over float and int values, with constants,
# comparisons, where and casts, read through layouts the interpreter handles (strided, transposed,
# reversed, broadcast, unaligned).
_FLOAT_UNARY = ["exp", "log", "sqrt", "tanh", "sin", "cos", "negative", "absolute", "square", "floor",
                "reciprocal", "expm1", "log1p", "arctan", "rint", "sign", "cbrt", "exp2", "log2", "tan"]
_FLOAT_BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "fmax", "fmin", "power",
                 "arctan2", "hypot", "copysign", "fmod", "heaviside"]
_INT_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_xor",
               "left_shift", "right_shift"]
_COMPARE = ["less", "greater_equal", "equal", "not_equal"]


def _chain_graph(rng, dtype, shape):
    """A graph of (x, y, z) built from random elementwise steps in `dtype`; z is broadcast."""
    g = Graph()
    t = TensorType(np.dtype(dtype), shape)
    env = [g.add_input("x", t), g.add_input("y", t),
           g.add_input("z", TensorType(np.dtype(dtype), (1, shape[1])))]

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    def const(value):
        return node("prim.Constant", value=value)

    floats = np.issubdtype(dtype, np.floating)
    for _ in range(int(rng.integers(4, 10))):
        kind = int(rng.integers(0, 6))
        a, b = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        u, v = env[a], env[b]
        if kind == 0 and floats:
            r = node(f"np.{rng.choice(_FLOAT_UNARY)}", u)
        elif kind == 1:
            r = node("np.add", node("np.multiply", u, const(float(rng.choice([0.5, -2.0, 3.0])) if floats
                                                          else int(rng.choice([3, -2, 7])))), v)
        elif kind == 2:
            cond = node(f"np.{rng.choice(_COMPARE)}", u, v)
            r = node("np.where", cond, u, node("np.subtract", v, const(1)))
        elif kind == 3:
            other = np.int32 if floats else np.float32
            r = node("np.astype", node("np.astype", u, dtype=np.dtype(other)), dtype=np.dtype(dtype))
        else:
            name = str(rng.choice(_FLOAT_BINARY if floats else _INT_BINARY))
            if name in ("left_shift", "right_shift"):
                v = node("np.bitwise_and", v, const(7))
            r = node(f"np.{name}", u, v)
        env[a if a < 2 else 0] = r
    g.set_outputs([node("np.add", env[0], node("np.multiply", env[1], env[2]))])
    return g


def _layouts(x):
    """x, and arrays with x's values through other layouts."""
    strided = np.empty((x.shape[0], 2 * x.shape[1]), x.dtype)[:, ::2]
    strided[...] = x
    unaligned = np.frombuffer(bytearray(x.nbytes + 1), np.uint8)[1:].view(x.dtype).reshape(x.shape)
    unaligned[...] = x
    reversed_ = x[::-1, ::-1].copy()[::-1, ::-1]
    return [x, strided, np.asfortranarray(x), reversed_, unaligned]


def _chain_case(rng, dtype, shape):
    """A random chain's executables (generated, interpreted) and its inputs x, y and broadcast z."""
    graph = _chain_graph(rng, dtype, shape)
    if np.issubdtype(dtype, np.floating):
        x, y, z = (rng.standard_normal(s).astype(dtype) * 3 for s in (shape, shape, (1, shape[1])))
    else:
        x, y, z = (rng.integers(-1000, 1000, s).astype(dtype) for s in (shape, shape, (1, shape[1])))
    return (*_both(graph, [testing.type_of(v) for v in (x, y, z)]), (x, y, z))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("seed", range(4))
def test_random_chains_generated_equals_interpreter(dtype, seed):
    rng = np.random.default_rng(1000 * seed + np.dtype(dtype).itemsize)
    shape = (37, 1100)
    gen, interp, (x, y, z) = _chain_case(rng, dtype, shape)
    assert gen.stats()["generated_kernels"] >= 1
    with np.errstate(all="ignore"):
        for lx, ly in zip(_layouts(x), _layouts(y)):
            _assert_same_bits(gen(lx, ly, z), interp(lx, ly, z), f"{np.dtype(dtype)} seed {seed}")
    assert gen.stats()["generated_runs"] >= len(_layouts(x))


@pytest.mark.parametrize(("dtype", "ufunc"), [(np.bool_, np.logical_xor), (np.float32, np.subtract),
                                             (np.float64, np.multiply), (np.int64, np.subtract)])
def test_operands_broadcast_along_the_innermost_dim(dtype, ufunc):
    """A (rows, 1) operand broadcast over each row (a layer norm's mean) is gathered into a tile of its
    one value, and strided or unaligned operands item by item, for each item size."""
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    shape = (37, 1100)
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), shape))
    c = g.add_input("c", TensorType(np.dtype(dtype), (shape[0], 1)))
    g.set_outputs([g.create_node(f"np.{ufunc.__name__}", [x, c]).output])
    xv, cv = (rng.integers(-50, 50, s).astype(dtype) for s in (shape, (shape[0], 1)))
    gen, interp = _both(g, [testing.type_of(v) for v in (xv, cv)])
    assert gen.stats()["generated_kernels"] == 1
    for lx, lc in zip(_layouts(xv), _layouts(cv)):
        _assert_same_bits(gen(lx, lc), interp(lx, lc), np.dtype(dtype).name)
        _assert_same_bits(gen(lx, lc), (ufunc(xv, cv),), np.dtype(dtype).name)
    assert gen.stats()["generated_runs"] >= len(_layouts(xv))


def _w1_graph():
    g = Graph()
    a, b, c, d = (g.add_input(n, TensorType(F32, ("N",))) for n in "abcd")

    def node(op, *args):
        return g.create_node(op, list(args)).output

    one = g.create_node("prim.Constant", [], attrs={"value": 1}).output
    num = node("np.add", node("np.multiply", a, b), c)
    den = node("np.add", one, node("np.absolute", a))
    g.set_outputs([node("np.divide", node("np.multiply", num, node("np.exp", node("np.negative", d))), den)])
    return g


def test_w1_explain_stats_and_threads():
    n = 3_000_007
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(n).astype(F32) for _ in range(4)]
    gen, interp = _both(_w1_graph(), [TensorType(F32, (n,))] * 4)
    old = numtrace_cpu.get_num_threads()
    try:
        for threads in (1, 2):
            numtrace_cpu.set_num_threads(threads)
            _assert_same_bits(gen(*args), interp(*args), f"W1 on {threads} threads")
    finally:
        numtrace_cpu.set_num_threads(old)
    a, b, c, d = args
    want = (a * b + c) * np.exp(-d) / (1 + np.abs(a))
    np.testing.assert_allclose(gen(*args)[0], want, rtol=1e-5, atol=1e-6)
    s = gen.stats()
    assert s["generated_kernels"] == s["fused_groups"] == 1
    assert s["generated_runs"] == 3 and s["interpreted_runs"] == 0
    assert interp.stats()["generated_kernels"] == 0 and interp.stats()["interpreted_runs"] == 2
    text = gen.explain()
    assert "generated C kernel: ready at " in text and ".so" in text
    assert "nt_op_multiply_f32" in text and "/* exp */" in text
    out = np.empty_like(args[0])
    gen(*args, out=(out,))
    _assert_same_bits([out], interp(*args), "W1 into out=")


_REDUCTIONS = ["np.sum", "np.mean", "np.var", "np.std", "np.max", "np.min"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "axis"), [((50, 1300), 1), ((7, 9, 600), (1, 2)), ((40, 30), 1),
                                             ((2, 3000), None), ((1300, 50), 0)])
def test_reductions_generated_equal_interpreter(dtype, shape, axis):
    """Each reduction of an elementwise prologue, with an elementwise output beside it; row reductions
    (long and short rows: the tests' conftest lets short rows run generated) run generated, column
    mode (axis 0 of a C array) on the interpreter."""
    g = Graph()
    t = TensorType(np.dtype(dtype), shape)
    x, y = g.add_input("x", t), g.add_input("y", t)

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    e = node("np.add", node("np.multiply", x, y), node("np.exp", node("np.negative", node("np.square", x))))
    outs = [node(name, e, axis=axis) for name in _REDUCTIONS] + [node("np.multiply", e, e)]
    g.set_outputs(outs)
    rng = np.random.default_rng(len(shape))
    v = [rng.standard_normal(shape).astype(dtype) for _ in range(2)]
    gen, interp = _both(g, [t, t])
    layouts = [v, [np.asfortranarray(a) for a in v], [np.flip(a).copy() for a in v]]
    for args in layouts:
        _assert_same_bits(gen(*args), interp(*args), f"reductions over axis {axis} of {shape}")
    for got, name in zip(gen(*v), _REDUCTIONS):
        want = getattr(np, name[3:])(v[0] * v[1] + np.exp(-np.square(v[0])), axis=axis)
        np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    s = gen.stats()
    assert s["generated_kernels"] == s["fused_groups"]
    if axis != 0:
        assert s["generated_runs"] >= len(layouts)


def _pair_graph(dtype, n, m, k):
    """n-body's two reductions over inputs d (n, m, k) and w (n, m, 1): ``s = (d * d).sum(-1) + c``
    reduces short rows (row blocks), ``(d * w).sum(axis=1)`` and ``(d - w).mean(axis=1)`` a middle
    axis (column mode), with ``d * w`` also an elementwise output of the column pass."""
    g = Graph()
    d = g.add_input("d", TensorType(np.dtype(dtype), (n, m, k)))
    w = g.add_input("w", TensorType(np.dtype(dtype), (n, m, 1)))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    c = g.create_node("prim.Constant", [], attrs={"value": 1e-3}).output
    s = node("np.add", node("np.sum", node("np.multiply", d, d), axis=-1), c)
    dw = node("np.multiply", d, w)
    g.set_outputs([s, node("np.sum", dw, axis=1), node("np.mean", node("np.subtract", d, w), axis=1), dw])
    return g


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "m", "k"), [(6, 5, 3), (4, 171, 3), (3, 400, 1), (2, 300, 2), (5, 90, 4),
                                           (3, 200, 8), (4, 60, 9), (3, 40, 20), (2, 7, 70)])
def test_column_and_row_block_reductions_generated_equal_interpreter(dtype, n, m, k):
    """Middle-axis reductions (column mode) and reductions of short innermost rows (row blocks) run
    generated, summing in registers, with the interpreter's bits: over blocks of reduced rows
    (171 and more rows of 3 columns cross one), unrolled and general widths (1-4, 8, 9), C, Fortran and
    reversed layouts, NaN and signed zeros. Rows of 16 and more elements run one row per unit (the
    tests' NUMTRACE_CODEGEN_SHORT_ROWS), folded by the build."""
    g = _pair_graph(dtype, n, m, k)
    rng = np.random.default_rng(n * m * k)
    d = (rng.standard_normal((n, m, k)) * 10.0 ** rng.integers(-8, 8, (n, m, k))).astype(dtype)
    w = rng.standard_normal((n, m, 1)).astype(dtype)
    d.flat[::7] = -0.0
    d.flat[5::97] = np.nan
    gen, interp = _both(g, [testing.type_of(d), testing.type_of(w)])
    layouts = [(d, w), (np.asfortranarray(d), np.asfortranarray(w)), (np.flip(d).copy()[::-1, ::-1, ::-1], w)]
    for args in layouts:
        _assert_same_bits(gen(*args), interp(*args), f"pair reductions of {(n, m, k)}")
    s = gen.stats()
    assert s["generated_kernels"] == s["fused_groups"] and s["interpreted_runs"] == 0
    assert s["generated_column_runs"] >= 1 or k == 1   # k == 1: axis 1 is the innermost after collapsing
    assert s["generated_row_block_runs"] >= 1 or not 1 < k < 16
    want = np.mean(d - w, axis=1)
    np.testing.assert_array_equal(np.isnan(gen(d, w)[2]), np.isnan(want))


def test_middle_axis_reduction_generated_on_threads():
    """A column pass large enough to split over a team: each unit its own columns, same bits."""
    g = _pair_graph(np.float64, 700, 600, 3)
    rng = np.random.default_rng(7)
    d, w = rng.standard_normal((700, 600, 3)), rng.standard_normal((700, 600, 1))
    gen, interp = _both(g, [testing.type_of(d), testing.type_of(w)])
    old = numtrace_cpu.get_num_threads()
    try:
        for threads in (1, 2):
            numtrace_cpu.set_num_threads(threads)
            _assert_same_bits(gen(d, w), interp(d, w), f"pair reductions on {threads} threads")
    finally:
        numtrace_cpu.set_num_threads(old)
    assert gen.stats()["generated_column_runs"] == 2 and gen.stats()["generated_row_block_runs"] == 2


@pytest.mark.parametrize(("shape", "axis"), [((300, 7), 0), ((20, 30, 3), 1), ((40, 2), 0)])
def test_column_pass_reads_its_first_constant(shape, axis):
    """``np.sum(2.0 * x, axis)`` in column mode: the kernel's first constant register (c0) is the
    2.0, not the unit's first column."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.float64), shape))
    two = g.create_node("prim.Constant", [], attrs={"value": 2.0}).output
    prod = g.create_node("np.multiply", [two, x]).output
    g.set_outputs([g.create_node("np.sum", [prod], attrs={"axis": axis}).output])
    xs = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    gen, interp = _both(g, [testing.type_of(xs)])
    got = gen(xs)
    _assert_same_bits(got, interp(xs), f"2 * x summed over axis {axis}")
    np.testing.assert_allclose(got[0], np.sum(2.0 * xs, axis=axis), rtol=1e-12, atol=1e-12)
    assert gen.stats()["generated_column_runs"] == 1


def test_program_without_instructions_is_not_generated():
    assert generate(((4,), (), [(3, 1, 0)], [], [], [], [(3, 0)])) is None


_CHILD = textwrap.dedent("""
    import numpy as np, numtrace_cpu.compiler as c
    from numtrace_cpu import compile_graph
    from numtrace_ir import Graph
    from numtrace_ir.types import TensorType
    t = TensorType(np.dtype(np.float64), (1000,))
    g = Graph()
    x = g.add_input("x", t)
    k = g.create_node("prim.Constant", [], attrs={"value": 0.001}).output
    g.set_outputs([g.create_node("np.exp", [g.create_node("np.multiply", [x, k]).output]).output])
    f = compile_graph(g, [t])
    v = np.arange(1000.0)
    f(v)
    c.flush()
    f(v)
    s = f.stats()
    print(s["generated_kernels"], s["generated_runs"])
""")


def _child(env_extra, tmp_path):
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), **env_extra)
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, check=True,
                          timeout=300)
    return done.stdout.split(), done.stderr


def test_disk_cache_is_reused_by_another_process(tmp_path):
    assert _child({"NUMTRACE_CODEGEN": "1"}, tmp_path)[0] == ["1", "1"]   # background: ready after flush
    objects = sorted((tmp_path / "cpu-kernels").glob("*.so"))
    assert len(objects) == 1
    stamp = objects[0].stat().st_mtime_ns
    assert _child({"NUMTRACE_CODEGEN": "sync"}, tmp_path)[0] == ["1", "2"]
    assert objects[0].stat().st_mtime_ns == stamp   # loaded, not compiled again
    assert not list((tmp_path / "cpu-kernels").glob("*.tmp"))


def test_codegen_off_by_environment(tmp_path):
    assert _child({"NUMTRACE_CODEGEN": "0"}, tmp_path)[0] == ["0", "0"]
    assert not (tmp_path / "cpu-kernels").exists()


def test_no_compiler_notes_once_and_interprets(tmp_path):
    code = ("import sysconfig; sysconfig.get_config_vars()['CC'] = 'numtrace-no-such-cc'\n" + _CHILD
            + "f2 = compile_graph(g, [t]); f2(v); c.flush()\n")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CODEGEN="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          timeout=300)
    assert done.stdout.split() == ["0", "0"]
    notes = [line for line in done.stderr.splitlines() if line.startswith("numtrace:")]
    assert len(notes) == 1 and "no C compiler" in notes[0]


def test_concurrent_processes_share_one_cache_entry(tmp_path):
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CODEGEN="sync")
    children = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, text=True)
                for _ in range(3)]
    outs = [c.communicate(timeout=300)[0].split() for c in children]
    assert all(c.returncode == 0 for c in children) and outs == [["1", "2"]] * 3
    assert len(list((tmp_path / "cpu-kernels").glob("*.so"))) == 1
    assert not list((tmp_path / "cpu-kernels").glob("*.tmp"))


def test_generated_kernel_from_several_threads():
    from concurrent.futures import ThreadPoolExecutor

    n = 200_001
    gen, interp = _both(_w1_graph(), [TensorType(F32, (n,))] * 4)
    inputs = [[np.random.default_rng(s).standard_normal(n).astype(F32) for _ in range(4)] for s in range(8)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda xs: gen(*xs), inputs))
    for g, xs in zip(got, inputs):
        _assert_same_bits(g, interp(*xs), "W1 from several threads")


_ISA_CHILD = textwrap.dedent("""
    import numpy as np, numtrace_cpu
    from numtrace_cpu import compile_graph, compiler
    from numtrace_ir import Graph
    from numtrace_ir.types import TensorType
    t = TensorType(np.dtype(np.float32), (70001,))
    g = Graph()
    x, y = g.add_input("x", t), g.add_input("y", t)
    def node(op, *args):
        return g.create_node(op, list(args)).output
    s = node("np.sin", node("np.multiply", x, y))
    e = node("np.exp", node("np.negative", node("np.absolute", y)))
    g.set_outputs([node("np.add", node("np.tanh", s), e)])
    rng = np.random.default_rng(0)
    v = [rng.standard_normal(70001).astype(np.float32) * 4 for _ in range(2)]
    compiler.set_mode("off")
    want = compile_graph(g, [t, t])(*v)[0]
    compiler.set_mode("sync")
    exe = compile_graph(g, [t, t])
    print(numtrace_cpu.ISA, exe.stats()["generated_kernels"], want.tobytes() == exe(*v)[0].tobytes())
    # reductions of a middle axis and of short rows, summed in registers where the build's sums are
    # sequential, folded by the build where they are not
    t = TensorType(np.dtype(np.float64), (30, 200, 3))
    v = rng.standard_normal((30, 200, 3))
    runs, same = [], []
    for axis in (1, -1):
        g = Graph()
        d = g.add_input("d", t)
        e = node("np.multiply", d, node("np.sqrt", node("np.absolute", d)))
        g.set_outputs([g.create_node("np.sum", [e], attrs={"axis": axis}).output])
        compiler.set_mode("off")
        want = compile_graph(g, [t])(v)[0]
        compiler.set_mode("sync")
        exe = compile_graph(g, [t])
        same.append(want.tobytes() == exe(v)[0].tobytes())
        runs.append(exe.stats()["generated_column_runs" if axis == 1 else "generated_row_block_runs"])
    print(*runs, all(same))
""")


@pytest.mark.parametrize("build", ["baseline", "avx2", "avx512"])
def test_every_isa_build_generated_equals_interpreter(build, tmp_path):
    from numtrace_cpu import isa, runtime

    if build not in isa.built() or not isa.BUILDS[build][1] <= runtime.cpu_features():
        pytest.skip(f"this CPU or installation has no {build} build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    done = subprocess.run([sys.executable, "-c", _ISA_CHILD], capture_output=True, text=True, env=env,
                          check=True, timeout=300)
    assert done.stdout.split() == [isa.BUILDS[build][0], "1", "True", "1", "1", "True"]


def _streaming(nbytes):
    """Context: generated passes stream outputs from `nbytes` (see FusedKernel._streamed)."""
    import contextlib

    from numtrace_cpu import runtime

    @contextlib.contextmanager
    def scope():
        old = runtime.set_stream_min_bytes(nbytes)
        try:
            yield
        finally:
            runtime.set_stream_min_bytes(old)
    return scope()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_streamed_outputs_equal_interpreter(dtype):
    """Outputs written with streaming stores (whole cache lines streamed, the partial lines at a tile's
    ends stored plainly) hold the interpreter's bits in every layout, into fresh and out= arrays at any
    offset from a cache line, on 1 and 2 threads."""
    rng = np.random.default_rng(7)
    shape = (37, 1100)
    gen, interp, (x, y, z) = _chain_case(rng, dtype, shape)
    old = numtrace_cpu.get_num_threads()
    with _streaming(1), np.errstate(all="ignore"):
        try:
            for threads in (1, 2):
                numtrace_cpu.set_num_threads(threads)
                for lx in _layouts(x):
                    want = interp(lx, y, z)
                    _assert_same_bits(gen(lx, y, z), want, f"{np.dtype(dtype)} streamed, {threads} threads")
                    for offset in (0, 1, 5):   # out= starting `offset` items past a cache line
                        buf = np.empty(x.size + 64, dtype)
                        start = offset + (-buf.ctypes.data // buf.itemsize) % (64 // buf.itemsize)
                        out = buf[start:start + x.size].reshape(shape)
                        gen(lx, y, z, out=(out,))
                        _assert_same_bits([out], want[:1], f"{np.dtype(dtype)} streamed into out=+{offset}")
        finally:
            numtrace_cpu.set_num_threads(old)
    assert gen.stats()["streamed_runs"] == gen.stats()["generated_runs"] > 0
    assert interp.stats()["streamed_runs"] == 0


def _momentum_graph(negated):
    """m * 0.9 + g (and its negation)."""
    g = Graph()
    m, grad = (g.add_input(n, TensorType(F32, (4096,))) for n in "mg")
    c = g.create_node("prim.Constant", [], attrs={"value": 0.9}).output
    new_m = g.create_node("np.add", [g.create_node("np.multiply", [m, c]).output, grad]).output
    g.set_outputs([new_m, g.create_node("np.negative", [new_m]).output] if negated else [new_m])
    return g


def test_streaming_threshold_and_outputs_over_inputs():
    """Below the threshold nothing streams; an output written over its input (``m *= 0.9; m += g``
    updating an argument in place) never does: the pass has just read those cache lines."""
    types = [TensorType(F32, (4096,))] * 2
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(4096).astype(F32) for _ in range(2)]
    want = _compiled(_momentum_graph(True), types, "off")(*args)
    fresh = _compiled(_momentum_graph(True), types, "sync")
    with _streaming(2 * 4096 * 4 + 1):   # one byte more than the two outputs hold
        _assert_same_bits(fresh(*args), want, "below the threshold")
    assert fresh.stats()["streamed_runs"] == 0 and fresh.stats()["generated_runs"] == 1
    with _streaming(2 * 4096 * 4):
        _assert_same_bits(fresh(*args), want, "at the threshold")
    assert fresh.stats()["streamed_runs"] == 1
    in_place = _compiled(_momentum_graph(False), types, "sync", updates={0: 0})
    arg = args[0].copy()
    with _streaming(1):
        (got,) = in_place(arg, args[1])
    _assert_same_bits([got], want[:1], "in place")
    assert np.shares_memory(got, arg) and in_place.stats()["in_place_outputs"] == [0]
    assert in_place.stats()["generated_runs"] == 1 and in_place.stats()["streamed_runs"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_short_rows_run_generated_in_blocks_of_rows(dtype):
    """An elementwise pass whose innermost dim is short runs its generated kernel in blocks of whole
    rows (a repeated row gathered once a unit, strided and unaligned operands row by row, outputs
    written where they lie, streamed or scattered): the interpreter's bits, on 1 and 2 threads."""
    rng = np.random.default_rng(11)
    shape = (20001, 10)
    gen, interp, (x, y, z) = _chain_case(rng, dtype, shape)
    old = numtrace_cpu.get_num_threads()
    try:
        for threads, streaming in ((1, 1 << 62), (2, 1 << 62), (2, 1)):
            numtrace_cpu.set_num_threads(threads)
            with _streaming(streaming), np.errstate(all="ignore"):
                for lx, ly in zip(_layouts(x), _layouts(y)):
                    want = interp(lx, ly, z)
                    before = gen.stats()["generated_rows_runs"]
                    _assert_same_bits(gen(lx, ly, z), want, f"{np.dtype(dtype)} rows, {threads} threads")
                    if lx is x:   # C order: rows of 10 (a Fortran-ordered x runs along its columns)
                        assert gen.stats()["generated_rows_runs"] == before + 1
                    out = np.empty((shape[0], 2 * shape[1]), dtype)[:, ::2]
                    gen(lx, ly, z, out=(out,))
                    _assert_same_bits([out], want, f"{np.dtype(dtype)} rows into a strided out=")
    finally:
        numtrace_cpu.set_num_threads(old)
    assert gen.stats()["streamed_runs"] > 0


def test_one_hot_runs_generated_in_blocks_of_rows():
    """``(labels[:, None] == np.arange(10)).astype(np.float32)``: a row of one value and a row repeated
    along the rows, compared in int64 and cast, gives the interpreter's (and NumPy's) bits."""
    g = Graph()
    labels = g.add_input("labels", TensorType(np.dtype(np.int64), (30001,)))
    col = g.create_node("np.getitem", [labels], attrs={"index": (slice(None), None)}).output
    classes = g.create_node("prim.Constant", [], attrs={"value": np.arange(10)}).output
    eq = g.create_node("np.equal", [col, classes]).output
    g.set_outputs([g.create_node("np.astype", [eq], attrs={"dtype": F32}).output])
    lab = np.random.default_rng(2).integers(0, 10, 30001)
    gen, interp = _both(g, [testing.type_of(lab)])
    for streaming in (1 << 62, 1):
        with _streaming(streaming):
            for x in (lab, testing.noncontiguous(lab)):
                _assert_same_bits(gen(x), interp(x), "one-hot")
                _assert_same_bits(gen(x), [(lab[:, None] == np.arange(10)).astype(F32)], "one-hot vs NumPy")
    s = gen.stats()
    assert s["generated_rows_runs"] == s["generated_runs"] == 8 and s["streamed_runs"] == 4


def _graph(inputs, build):
    """A graph over inputs {name: TensorType}, outputs build(node, *values) where node(op, *args,
    **attrs) adds a node (a non-array argument: a constant)."""
    g = Graph()
    values = [g.add_input(name, t) for name, t in inputs.items()]

    def node(op, *args, **attrs):
        args = [a if not isinstance(a, float) else
                g.create_node("prim.Constant", [], attrs={"value": a}).output for a in args]
        return g.create_node(op, args, attrs=attrs).output
    g.set_outputs(list(build(node, *values)))
    return g


def _run_both_ways(g, args, streaming, threads=(1, 2)):
    """Generated and interpreted executables of g, run on args at each thread count with outputs
    streamed from `streaming` bytes; their bits must agree. Returns the generated one's stats()."""
    gen, interp = _both(g, [testing.type_of(a) for a in args])
    old = numtrace_cpu.get_num_threads()
    try:
        for n in threads:
            numtrace_cpu.set_num_threads(n)
            with _streaming(streaming), np.errstate(all="ignore"):
                _assert_same_bits(gen(*args), interp(*args), f"{n} threads, streaming from {streaming}")
    finally:
        numtrace_cpu.set_num_threads(old)
    assert interp.stats()["generated_runs"] == 0
    return gen.stats()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_streamed_output_beside_middle_axis_reduction(dtype):
    """One program with large outputs streamed (``z * 2 + 1``, and ``z * z`` beside its sum over the
    last axis) and middle-axis sums in column mode whose pass also writes a large elementwise output
    ``x * w`` (column units store it element by element, never streamed): the interpreter's bits."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 70, 900)).astype(dtype)
    w = rng.standard_normal((3, 70, 1)).astype(dtype)
    z = rng.standard_normal((400, 700)).astype(dtype)
    x.flat[::13] = -0.0

    def build(node, x, w, z):
        xw, zz = node("np.multiply", x, w), node("np.multiply", z, z)
        return (xw, node("np.sum", xw, axis=1), node("np.mean", node("np.subtract", x, w), axis=1),
                node("np.add", node("np.multiply", z, 2.0), 1.0), zz, node("np.sum", zz, axis=-1))

    g = _graph({"x": testing.type_of(x), "w": testing.type_of(w), "z": testing.type_of(z)}, build)
    for streaming in (1, 1 << 62):
        s = _run_both_ways(g, (x, w, z), streaming)
        assert s["generated_column_runs"] == 2 and s["interpreted_runs"] == 0
        assert (s["streamed_runs"] == 2) == (streaming == 1)
    # the column pass alone, streaming from one byte: its outputs go through the cache, same bits
    g = _graph({"x": testing.type_of(x), "w": testing.type_of(w)}, lambda node, x, w: (
        (xw := node("np.multiply", x, w)), node("np.sum", xw, axis=1)))
    s = _run_both_ways(g, (x, w), 1)
    assert s["generated_column_runs"] == s["generated_runs"] == 2 and s["streamed_runs"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_row_tiles_beside_row_block_reduction(dtype):
    """A short-row elementwise pass (tiles of whole rows, ``a * 2 + b`` with a repeated row b) next to
    a reduction of short rows in row blocks (``((d - c) ** 2).sum(-1)`` and its elementwise output),
    streamed and not, on 1 and 2 threads, in C and Fortran order: the interpreter's bits."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((20001, 10)).astype(dtype)
    b = rng.standard_normal(10).astype(dtype)
    d = rng.standard_normal((9001, 5, 6)).astype(dtype)
    c = rng.standard_normal((5, 6)).astype(dtype)
    d.flat[::11] = -0.0

    def build(node, a, b, d, c):
        e = node("np.subtract", d, c)
        return (node("np.add", node("np.multiply", a, 2.0), b),
                node("np.sum", node("np.multiply", e, e), axis=-1), node("np.absolute", e))

    g = _graph({"a": testing.type_of(a), "b": testing.type_of(b), "d": testing.type_of(d),
                "c": testing.type_of(c)}, build)
    for streaming in (1, 1 << 62):
        for args in ((a, b, d, c), (np.asfortranarray(a), b, d, c)):
            s = _run_both_ways(g, args, streaming)
            assert s["generated_row_block_runs"] >= 2 and s["interpreted_runs"] == 0
            assert s["generated_rows_runs"] >= (2 if args[0] is a else 0)
        assert (s["streamed_runs"] > 0) == (streaming == 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ncol", [1, 2, 3, 4, 8])
def test_narrow_column_sums_of_where_equal_interpreter(dtype, ncol):
    """``np.sum(np.where(x > y, x * 2, x - 1), axis=0)`` (and its mean) over a few columns: each
    block's values computed in one loop over its rows, each column then added row by row (packed
    over 2, 4 and 8 columns): the interpreter's bits, each column's first NaN (sign and payload)
    kept, over blocks of rows (300 rows of 8 cross one), C, Fortran and reversed layouts, and the
    sqrt's 'invalid' of the operand np.where does not select raised."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), (300, ncol)))
    y = g.add_input("y", TensorType(np.dtype(dtype), (ncol,)))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    picked = node("np.where", node("np.greater", x, y), node("np.multiply", x, const(2.0)),
                  node("np.subtract", x, const(1.0)))
    rooted = node("np.where", node("np.greater_equal", x, const(0.0)), node("np.sqrt", x), x)
    g.set_outputs([node("np.sum", picked, axis=0), node("np.mean", rooted, axis=0)])
    rng = np.random.default_rng(ncol)
    xv = rng.standard_normal((300, ncol)).astype(dtype)
    bits = xv.view(np.uint32 if dtype == np.float32 else np.uint64)
    nans = rng.integers(0, xv.size, 40)
    xv.flat[nans] = np.nan
    bits.flat[nans[::2]] ^= rng.integers(1, 1 << 20, len(nans[::2])).astype(bits.dtype)   # payloads
    bits.flat[nans[::3]] ^= bits.dtype.type(1) << bits.dtype.type(8 * bits.itemsize - 1)   # signs
    xv.flat[::11] = -0.0
    yv = rng.standard_normal(ncol).astype(dtype)
    gen, interp = _both(g, [testing.type_of(xv), testing.type_of(yv)])
    for args in [(xv, yv), (np.asfortranarray(xv), yv), (xv[::-1].copy()[::-1], yv[::-1].copy()[::-1])]:
        with pytest.warns(RuntimeWarning, match="invalid value encountered in sqrt"):
            got = gen(*args)
        with pytest.warns(RuntimeWarning, match="invalid value encountered in sqrt"):
            want = interp(*args)
        _assert_same_bits(got, want, f"narrow column sums of a where over {ncol} columns")
    assert gen.stats()["generated_column_runs"] >= 2 or ncol == 1   # the Fortran x sums its rows


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("width", [2, 3, 7, 10, 17, 64])
def test_repeated_row_filled_into_row_tiles(dtype, width):
    """``x + b`` (tiles of whole rows) and with it ``max(x * b, -1)`` (tiles of rows folded by the
    row fold), b a row repeated along the rows of x, contiguous or every other element of a longer
    array: each tile holds copies of b (nt_gen.h's nt_gen_gather_rows gathers it once, then doubles
    the copies), over row counts that end inside a unit and a tile, on 1 and 2 threads: the
    interpreter's and NumPy's bits."""
    rng = np.random.default_rng(width)
    x = rng.integers(-100, 100, (3 * 16384 // width + 5, width)).astype(dtype)
    b = rng.integers(-100, 100, 2 * width).astype(dtype)
    programs = {"generated_rows_runs": lambda node, x, b: (node("np.add", x, b),),
                "generated_row_tile_runs": lambda node, x, b: (
                    node("np.add", x, b), node("np.max", node("np.multiply", x, b), axis=-1))}
    for counter, build in programs.items():
        for row in (b[:width], b[::2]):
            g = _graph({"x": testing.type_of(x), "b": testing.type_of(row)}, build)
            assert _run_both_ways(g, (x, row), 1 << 62)[counter] == 2
            want = [x + row, (x * row).max(axis=-1)][:len(g.outputs)]
            _assert_same_bits(_compiled(g, [testing.type_of(x), testing.type_of(row)], "sync")(x, row), want,
                              f"{counter}, rows of {width} vs NumPy")
