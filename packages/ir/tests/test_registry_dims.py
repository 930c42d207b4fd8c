"""Symbolic dims: canonical forms, broadcasting, arithmetic, evaluation, matching, and exactness of the
symbolic size formulas the rules build (checked against concrete sizes)."""

import ast
import itertools

import numpy as np
import pytest
from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops.rules import slice_len
from numtrace_ir.types import TensorType, check_dim

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(
    "text,canonical",
    [
        ("B", "B"),
        ("T*B", "B*T"),
        ("B*T+0", "B*T"),
        ("2*3", 6),
        ("B-B", 0),
        ("B+B", "2*B"),
        ("(B+1)*(B-1)", "B*B-1"),
        ("4*B//2", "2*B"),
        ("(6*B*T)//(2*B)", "3*T"),
        ("(B+1)//2", "(B+1)//2"),
        ("2*((B+1)//2)", "2*((B+1)//2)"),
        ("max(B,0)", "B"),
        ("min(B,0)", 0),
        ("max(B-1,B)", "B"),
        ("min(3,B)", "min(3,B)"),
        ("max(B,A)", "max(A,B)"),
        ("bcast(B,1)", "B"),
        ("bcast(B,A)", "bcast(A,B)"),
        ("bcast(B,4)", 4),
        ("-B+3", "-B+3"),
    ],
)
def test_normalize(text, canonical):
    assert dims.normalize(text) == canonical
    if isinstance(canonical, str):
        assert dims.normalize(canonical) == canonical  # canonical forms are fixed points


@pytest.mark.parametrize("bad", ["B+", "B,C", "f(B)", "B/2", "B**2", "max", "B.x", "1.5*B"])
def test_normalize_rejects_other_syntax(bad):
    with pytest.raises((ValueError, TypeError)):
        dims.normalize(bad)


def test_equal():
    assert dims.equal("B*T", "T*B") and dims.equal(4, 4) and dims.equal("2*B", "B+B")
    assert not dims.equal("B", "C") and not dims.equal("B", 4) and not dims.equal(3, 4)


@pytest.mark.parametrize(
    "a,b,out",
    [
        ("B", "B", "B"),
        ("B", 1, "B"),
        (1, "B", "B"),
        ("B", 5, 5),
        (0, "B", 0),
        ("A", "B", "bcast(A,B)"),
        (3, 3, 3),
        (1, 7, 7),
        (0, 1, 0),
    ],
)
def test_bcast(a, b, out):
    assert dims.bcast(a, b) == out and dims.bcast(b, a) == out


def test_bcast_incompatible():
    with pytest.raises(ShapeError, match="3 and 4"):
        dims.bcast(3, 4)
    with pytest.raises(ShapeError, match=r"axis -2: 3 vs 4"):
        dims.broadcast_shapes((3, 5), (4, 1))


def test_broadcast_shapes():
    assert dims.broadcast_shapes(("B", 1, 4), (3, 1), ()) == ("B", 3, 4)
    assert dims.broadcast_shapes(("B",), ("T",)) == ("bcast(B,T)",)


def test_arithmetic_and_prod():
    assert dims.add("B", 2) == "B+2" and dims.sub("B", "B") == 0 and dims.mul("B", 0) == 0
    assert dims.prod(["B", 4, "T"]) == "4*B*T" and dims.prod([]) == 1 and dims.prod([2, 3]) == 6
    assert dims.floordiv(dims.prod(["B", 4, 8]), "B") == 32 and dims.floordiv(7, 2) == 3
    assert dims.maximum(2, 5) == 5 and dims.minimum("B", "B") == "B"
    with pytest.raises(ShapeError):
        dims.floordiv("B", 0)


def test_evaluate():
    assert dims.evaluate("2*((B+1)//2)+max(A,3)", {"A": 1, "B": 4}) == 7
    assert dims.evaluate("bcast(A,B)", {"A": 1, "B": 5}) == 5 and dims.evaluate(6, {}) == 6
    with pytest.raises(ShapeError):
        dims.evaluate("bcast(A,B)", {"A": 2, "B": 5})
    with pytest.raises(KeyError, match="'C'"):
        dims.evaluate("B*C", {"B": 2})
    with pytest.raises(ShapeError, match="< 0"):
        dims.evaluate("B-3", {"B": 2})


def test_symbols_and_match_shape():
    assert dims.symbols("max(A,B)*C+2") == {"A", "B", "C"} and dims.symbols(3) == frozenset()
    env = {}
    dims.match_shape(("B", 4, "2*B"), (3, 4, 6), env)
    assert env == {"B": 3}
    with pytest.raises(ShapeError, match="axis 1"):
        dims.match_shape(("B", "2*B"), (3, 7), {})
    with pytest.raises(ShapeError, match="already 3"):
        dims.match_shape(("B", "B"), (3, 4), {})
    with pytest.raises(ShapeError, match="rank"):
        dims.match_shape(("B",), (3, 4), {})


def test_expressions_fit_the_text_form():
    """Every form the rules produce is a legal dim of the IR's types and survives print + parse."""
    from numtrace_ir import Graph, parse

    exprs = ["2*((B+1)//2)", "bcast(A,B)", "max(0,min(3,B)-1)", "B*T-1", "-B+3", "(max(0,B-2)+2)//3"]
    g = Graph()
    for i, e in enumerate(exprs):
        assert check_dim(e) == e
        g.add_input(f"x{i}", TensorType("f4", (e, 4)))
    g.set_outputs(g.inputs)
    assert [v.type.shape[0] for v in parse(str(g)).inputs] == exprs


@pytest.mark.parametrize(
    "start,stop,step",
    list(itertools.product([None, 0, 1, 3, -1, -3, 7], [None, 0, 2, 5, -1, -4], [None, 1, 2, 3, -1, -2])),
)
def test_slice_len_symbolic_is_exact(start, stop, step):
    s = slice(start, stop, step)
    expr = slice_len("test", "B", s)
    for n in range(0, 10):
        assert dims.evaluate(expr, {"B": n}) == len(range(n)[s]), (s, expr, n)


def test_split_sizes_symbolic_are_exact():
    from numtrace_ir.registry import get

    for k in (1, 2, 3, 4):
        outs = get("np.array_split").infer([TensorType("f4", ("N", 2))], {"indices_or_sections": k})
        for n in range(0, 12):
            sizes = [dims.evaluate(t.shape[0], {"N": n}) for t in outs]
            assert sizes == [len(range(n)[i::k]) for i in range(k)]


_SYMS = ("A", "B", "C")


def _expr(draw_int, depth: int) -> str:
    """A random dim expression over A, B, C (a tiny grammar walked by a seeded generator)."""
    kind = draw_int(0, 7 if depth else 1)
    if kind == 0:
        return _SYMS[draw_int(0, 2)]
    if kind == 1:
        return str(draw_int(0, 5))
    a, b = _expr(draw_int, depth - 1), _expr(draw_int, depth - 1)
    if kind <= 4:
        return f"({a}){'+-*'[kind - 2]}({b})"
    if kind == 5:
        return f"({a})//({draw_int(1, 4)})"
    return f"{('max', 'min')[kind - 6]}({a},{b})"


def _value(expr, env) -> int:
    """The value of a dim expression, negative intermediate results allowed."""
    if isinstance(expr, int):
        return expr
    return dims._eval(ast.parse(expr, mode="eval").body, env, expr)


def test_canonical_forms_keep_their_values():
    """normalize() and the arithmetic helpers never change a dim's value (random expressions)."""
    rng = np.random.default_rng(20)
    draw = lambda lo, hi: int(rng.integers(lo, hi + 1))
    for _ in range(400):
        e1, e2 = _expr(draw, 3), _expr(draw, 2)
        env = {s: draw(0, 6) for s in _SYMS}
        v1, v2 = _value(e1, env), _value(e2, env)
        n1 = dims.normalize(e1)
        assert _value(n1, env) == v1, (e1, n1, env)
        assert dims.normalize(n1) == n1, (e1, n1)
        k = draw(1, 4)
        for out, expected in (
            (dims.add(e1, e2), v1 + v2),
            (dims.sub(e1, e2), v1 - v2),
            (dims.mul(e1, e2), v1 * v2),
            (dims.floordiv(e1, k), v1 // k),
            (dims.maximum(e1, e2), max(v1, v2)),
            (dims.minimum(e1, e2), min(v1, v2)),
        ):
            assert _value(out, env) == expected, (e1, e2, k, out, env)
        if v2 > 0:  # a symbolic divisor
            out = dims.floordiv(e1, e2)
            assert _value(out, env) == v1 // v2 and dims.normalize(out) == out, (e1, e2, out, env)
