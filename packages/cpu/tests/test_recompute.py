"""Cheap broadcast values computed again in the later pass that reads them instead of stored
(numtrace_cpu.fusion.recomputable): n-body's pair differences are never written, results keep the
interpreter's bits and NumPy's values, NaN and infinities included."""

from __future__ import annotations

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)

ALL = slice(None)


def _nbody(n, dtype, costly=False, diff_out=False):
    """``diff = pos[None] - pos[:, None]; r2 = (diff ** 2).sum(-1) + 1e-3; inv = 1 / (r2 * sqrt(r2));
    (diff * (mass[None, :, None] * inv[:, :, None])).sum(axis=1)``; `costly`: diff is exp of the
    difference (not recomputed); `diff_out`: diff is an output too."""
    g = Graph()
    pos = g.add_input("pos", TensorType(np.dtype(dtype), (n, 3)))
    mass = g.add_input("mass", TensorType(np.dtype(dtype), (n,)))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    diff = node("np.subtract", node("np.getitem", pos, index=(None, ALL, ALL)),
                node("np.getitem", pos, index=(ALL, None, ALL)))
    if costly:
        diff = node("np.exp", diff)
    r2 = node("np.add", node("np.sum", node("np.multiply", diff, diff), axis=-1), const(1e-3))
    inv = node("np.divide", const(1.0), node("np.multiply", r2, node("np.sqrt", r2)))
    w = node("np.multiply", node("np.getitem", mass, index=(None, ALL, None)),
             node("np.getitem", inv, index=(ALL, ALL, None)))
    forces = node("np.sum", node("np.multiply", diff, w), axis=1)
    g.set_outputs([forces, diff] if diff_out else [forces])
    return g


def _numpy(pos, mass, costly=False):
    diff = pos[None, :, :] - pos[:, None, :]
    if costly:
        diff = np.exp(diff)
    r2 = (diff * diff).sum(axis=-1) + 1e-3
    inv = 1.0 / (r2 * np.sqrt(r2))
    return (diff * (mass[None, :, None] * inv[:, :, None])).sum(axis=1), diff


def _assert_same_bits(got, want):
    """Equal bit for bit, except that a NaN may be either NaN: where two NaNs meet in an operation
    (inf - inf's default NaN and pos's own), which one the result carries depends on the operand
    order the C compiler picks for a commutative multiply or add."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()


def _bodies(n, dtype, special):
    rng = np.random.default_rng(n)
    pos = rng.standard_normal((n, 3)).astype(dtype)
    mass = rng.uniform(1, 2, n).astype(dtype)
    if special and n > 5:
        pos[1, 0], pos[4, 2], pos[5] = np.nan, np.inf, -0.0
    return pos, mass


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 7, 33, 129, 301])
def test_pair_differences_computed_again_never_stored(n, dtype):
    """The pass summing over the middle axis computes diff again from pos: no n*n*3 buffer, the
    interpreter's bits from both engines."""
    g = _nbody(n, dtype)
    def errs():
        return np.errstate(invalid="ignore", divide="ignore", over="ignore")

    for special in (False, True):
        pos, mass = _bodies(n, dtype, special)
        with errs():
            want = _numpy(pos, mass)[0]
        types = [testing.type_of(pos), testing.type_of(mass)]
        gen, interp = (_compiled(g, types, mode) for mode in ("sync", "off"))
        with errs():
            got, ref = gen(pos, mass), interp(pos, mass)
        _assert_same_bits(got[0], ref[0])
        testing.assert_outputs_close(tuple(got), (want,))
        s = gen.stats()
        if n > 1:   # one body: pos is as large as diff, which is then stored
            assert s["recomputed_nodes"] == 1 and s["fused_groups"] == 4
            assert s["buffer_bytes"] < n * n * 3 * np.dtype(dtype).itemsize


def test_recomputed_value_that_is_an_output_is_stored_once():
    """diff is an output: its own pass writes it, the later pass still computes it again."""
    g = _nbody(17, np.float64, diff_out=True)
    pos, mass = _bodies(17, np.float64, special=True)
    exe = compile_graph(g, [testing.type_of(pos), testing.type_of(mass)])
    with np.errstate(invalid="ignore"):
        got = exe(pos, mass)
        want = _numpy(pos, mass)
    testing.assert_outputs_close(tuple(got), want)
    assert got[1].tobytes() == want[1].tobytes()
    assert exe.stats()["recomputed_nodes"] == 1


def test_costly_broadcast_is_stored_not_recomputed():
    """exp of the differences is read from its buffer: computing it again would cost more."""
    g = _nbody(20, np.float64, costly=True)
    pos, mass = _bodies(20, np.float64, special=False)
    exe = compile_graph(g, [testing.type_of(pos), testing.type_of(mass)])
    testing.assert_outputs_close(tuple(exe(pos, mass)), (_numpy(pos, mass, costly=True)[0],))
    assert exe.stats()["recomputed_nodes"] == 0
    assert exe.stats()["buffer_bytes"] >= 20 * 20 * 3 * 8


def test_value_only_a_broadcasting_pass_reads_is_not_computed_twice():
    """``d = a[None, :] - b[:, None]; d * c`` with c of shape (k, 1, 1): the product's pass (of
    another shape) computes d itself, and d's own pass, which nothing else reads, is dropped."""
    g = Graph()
    a = g.add_input("a", TensorType(np.dtype("float64"), (5,)))
    b = g.add_input("b", TensorType(np.dtype("float64"), (7,)))
    c = g.add_input("c", TensorType(np.dtype("float64"), (3, 1, 1)))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    row, col = node("np.getitem", a, index=(None, ALL)), node("np.getitem", b, index=(ALL, None))
    d = node("np.subtract", row, col)
    g.set_outputs([node("np.multiply", d, c)])
    rng = np.random.default_rng(3)
    x, y, z = rng.standard_normal(5), rng.standard_normal(7), rng.standard_normal((3, 1, 1))
    x[2], y[4] = np.inf, np.nan
    exe = compile_graph(g, [testing.type_of(x), testing.type_of(y), testing.type_of(z)])
    got = exe(x, y, z)[0]
    want = (x[None, :] - y[:, None]) * z
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan) and got[~nan].tobytes() == want[~nan].tobytes()
    s = exe.stats()
    assert s["fused_groups"] == 1 and s["buffer_bytes"] == 0
