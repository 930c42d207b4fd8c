"""Symbolic dimensions shared by every shape rule: equality, broadcasting, arithmetic, evaluation.

A dim is an ``int >= 0`` or a ``str``: a symbol (``"B"``) or an expression over symbols written with
identifiers, ints, ``+ - * //``, parentheses and the calls ``max(a,b)``, ``min(a,b)`` and
``bcast(a,b)`` (the broadcast of two dims that are not known to be equal). Expressions contain no
spaces and no comma outside parentheses, so the IR text form holds them verbatim inside ``f32[...]``.

Every function here returns dims in one canonical form: a sum of terms ``coef*atom*atom``, atoms
sorted, higher-degree terms first, the constant last; an expression that folds to a number is an
``int``. Two dims are provably equal exactly when their canonical forms are equal.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from functools import lru_cache
from math import prod as _iprod

__all__ = [
    "Dim",
    "IndexShapeError",
    "NotModelledError",
    "ShapeError",
    "add",
    "bcast",
    "broadcast",
    "broadcast_shapes",
    "equal",
    "evaluate",
    "floordiv",
    "is_static",
    "match_shape",
    "maximum",
    "minimum",
    "mul",
    "normalize",
    "prod",
    "sub",
    "symbols",
]

Dim = int | str

FUNCTIONS = ("max", "min", "bcast")


class ShapeError(ValueError):
    """Input shapes an op cannot accept (incompatible broadcast, bad axis, bad reshape, ...)."""


class IndexShapeError(ShapeError, IndexError):
    """An integer index out of range for its axis: NumPy's ``IndexError`` (``except IndexError``
    catches it as it catches NumPy's)."""


class NotModelledError(ShapeError):
    """Shapes NumPy's call takes, whose answer the op does not model: a refusal of the trace, not
    NumPy's error (a check of dead code, whose value is never used, leaves the call to NumPy)."""


# A polynomial: monomial (sorted tuple of atom strings, repeated for powers) -> int coefficient.
# The empty monomial is the constant term. Atoms are symbols or canonical call/floordiv strings.
_Poly = dict
# Atoms known to be >= 0: every symbol (dims are sizes) plus calls/quotients proven so when built.
_NONNEG_ATOMS: set[str] = set()


def _const(p: _Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return None


def _accumulate(r: _Poly, m: tuple, c: int) -> None:
    """``r[m] += c``, keeping no zero coefficients (so equal polynomials are equal dicts)."""
    v = r.get(m, 0) + c
    if v:
        r[m] = v
    else:
        r.pop(m, None)


def _padd(p: _Poly, q: _Poly, sign: int = 1) -> _Poly:
    r = dict(p)
    for m, c in q.items():
        _accumulate(r, m, sign * c)
    return r


def _pmul(p: _Poly, q: _Poly) -> _Poly:
    r: _Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            _accumulate(r, tuple(sorted(m1 + m2)), c1 * c2)
    return r


def _nonneg(p: _Poly) -> bool:
    return all(c >= 0 and all(a in _NONNEG_ATOMS for a in m) for m, c in p.items())


def _atom(text: str, nonneg: bool) -> _Poly:
    if nonneg:
        _NONNEG_ATOMS.add(text)
    return {(text,): 1}


def _render_atom(a: str) -> str:
    # A quotient inside a product needs parentheses: `2*(B//3)` is not `2*B//3`.
    return f"({a})" if _top_level_floordiv(a) else a


def _top_level_floordiv(a: str) -> bool:
    depth = 0
    for i, ch in enumerate(a):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and a.startswith("//", i):
            return True
    return False


def _render(p: _Poly) -> Dim:
    c = _const(p)
    if c is not None:
        return c
    terms = sorted(p.items(), key=lambda mc: (-len(mc[0]), mc[1] < 0, mc[0]))
    out: list[str] = []
    for m, c in terms:
        # A lone atom with coefficient 1 needs no parentheses, even a quotient: `+` binds looser than
        # `//`; unary minus binds tighter, so `-(B//2)` keeps them.
        body = "".join(m) if len(m) == 1 and c == 1 else "*".join(_render_atom(a) for a in m)
        if not m:
            body = str(abs(c))
        elif abs(c) != 1:
            body = f"{abs(c)}*{body}"
        out.append(("-" if c < 0 else ("+" if out else "")) + body)
    return "".join(out)


def _wrap(p: _Poly, divisor: bool) -> str:
    """Text of `p` as an operand of `//`. A dividend needs parentheses only around a sum (`//` binds
    tighter than `+ -` and groups left to right); a divisor around anything but a number or one atom
    (`A//(B*T)` is not `A//B*T`)."""
    r = _render(p)
    if isinstance(r, int):
        return str(r) if r >= 0 or not divisor else f"({r})"
    single = len(p) == 1
    if not divisor and single:
        return r
    if divisor and single and next(iter(p.values())) == 1 and len(next(iter(p))) == 1:
        (atom,) = next(iter(p))
        if not _top_level_floordiv(atom):
            return r
    return f"({r})"


def _floordiv(p: _Poly, q: _Poly) -> _Poly:
    qc = _const(q)
    if qc == 0:
        raise ShapeError("division by zero in a symbolic dim")
    if qc is not None:
        if all(c % qc == 0 for c in p.values()):
            return {m: c // qc for m, c in p.items()}
        pc = _const(p)
        if pc is not None:
            return {(): pc // qc} if pc // qc else {}
    elif len(q) == 1:
        # Cancel a common monomial factor: (6*B*T)//(2*B) -> 3*T.
        ((qm, qcoef),) = q.items()
        out: _Poly = {}
        for m, c in p.items():
            rest = list(m)
            try:
                for a in qm:
                    rest.remove(a)
            except ValueError:
                break
            if c % qcoef:
                break
            out[tuple(rest)] = c // qcoef
        else:
            return out
    return _atom(f"{_wrap(p, False)}//{_wrap(q, True)}", _nonneg(p) and _nonneg(q))


def _call(fn: str, args: list[_Poly]) -> _Poly:
    if fn == "bcast":
        if len(args) != 2:
            raise ValueError("bcast takes two dims")
        a, b = args
        ca, cb = _const(a), _const(b)
        if a == b or cb == 1:
            return a
        if ca == 1:
            return b
        if ca is not None and cb is not None:
            raise ShapeError(f"dims {ca} and {cb} do not broadcast")
        # A known size other than 1 wins: the other side must equal it (or be 1).
        if ca is not None:
            return a
        if cb is not None:
            return b
        ra, rb = sorted([str(_render(a)), str(_render(b))])
        return _atom(f"bcast({ra},{rb})", True)
    if len(args) < 2:
        raise ValueError(f"{fn} takes at least two dims")
    pick_max = fn == "max"
    kept: list[_Poly] = []
    for a in args:
        for i, k in enumerate(kept):
            diff = _const(_padd(a, k, -1))  # comparable: they differ by a constant
            if diff is not None:
                if (diff > 0) == pick_max and diff != 0:
                    kept[i] = a
                break
        else:
            kept.append(a)
    # Sizes are >= 0: max(x, 0) is x and min(x, 0) is 0 when x is provably non-negative.
    zero_kept = any(_const(k) == 0 for k in kept)
    if zero_kept and len(kept) > 1 and all(_nonneg(k) for k in kept):
        kept = [k for k in kept if _const(k) != 0] if pick_max else [{}]
    if len(kept) == 1:
        return kept[0]
    texts = sorted(str(_render(k)) for k in kept)
    nonneg = any(map(_nonneg, kept)) if pick_max else all(map(_nonneg, kept))
    return _atom(f"{fn}({','.join(texts)})", nonneg)


def _to_poly(node: ast.AST) -> _Poly:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return {(): node.value} if node.value else {}
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise ValueError(f"{node.id!r} is a function, not a symbol")
        return _atom(node.id, True)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return {m: -c for m, c in _to_poly(node.operand).items()}
    if isinstance(node, ast.BinOp):
        a, b = _to_poly(node.left), _to_poly(node.right)
        if isinstance(node.op, ast.Add):
            return _padd(a, b)
        if isinstance(node.op, ast.Sub):
            return _padd(a, b, -1)
        if isinstance(node.op, ast.Mult):
            return _pmul(a, b)
        if isinstance(node.op, ast.FloorDiv):
            return _floordiv(a, b)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        return _call(node.func.id, [_to_poly(a) for a in node.args])
    raise ValueError(f"unsupported syntax in a symbolic dim: {ast.dump(node)}")


@lru_cache(maxsize=8192)
def _parse_cached(text: str) -> tuple:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"not a symbolic dim expression: {text!r}") from None
    return tuple(_to_poly(tree.body).items())


def _parse(d: Dim) -> _Poly:
    if type(d) is int:
        return {(): d} if d else {}
    if not isinstance(d, str):
        raise TypeError(f"a dim must be an int or a str, got {type(d).__name__} {d!r}")
    if d.isidentifier() and d not in FUNCTIONS:
        _NONNEG_ATOMS.add(d)
        return {(d,): 1}
    return dict(_parse_cached(d))


def normalize(d: Dim) -> Dim:
    """The canonical form of a dim (``"T*B+0"`` -> ``"B*T"``, ``"2*3"`` -> ``6``)."""
    return _render(_parse(d))


def is_static(d: Dim) -> bool:
    return type(d) is int


def equal(a: Dim, b: Dim) -> bool:
    """True when `a` and `b` are provably the same size."""
    if a == b:
        return True
    if type(a) is int and type(b) is int:
        return False
    return _parse(a) == _parse(b)


def add(a: Dim, b: Dim) -> Dim:
    if type(a) is int and type(b) is int:
        return a + b
    return _render(_padd(_parse(a), _parse(b)))


def sub(a: Dim, b: Dim) -> Dim:
    if type(a) is int and type(b) is int:
        return a - b
    return _render(_padd(_parse(a), _parse(b), -1))


def mul(a: Dim, b: Dim) -> Dim:
    if type(a) is int and type(b) is int:
        return a * b
    return _render(_pmul(_parse(a), _parse(b)))


def floordiv(a: Dim, b: Dim) -> Dim:
    if type(a) is int and type(b) is int:
        if b == 0:
            raise ShapeError("division by zero in a dim")
        return a // b
    return _render(_floordiv(_parse(a), _parse(b)))


def maximum(*ds: Dim) -> Dim:
    if all(type(d) is int for d in ds):
        return max(ds)
    return _render(_call("max", [_parse(d) for d in ds]))


def minimum(*ds: Dim) -> Dim:
    if all(type(d) is int for d in ds):
        return min(ds)
    return _render(_call("min", [_parse(d) for d in ds]))


def prod(ds: Iterable[Dim]) -> Dim:
    """The product of dims (the element count of a shape)."""
    ds = tuple(ds)
    if all(type(d) is int for d in ds):
        return _iprod(ds)
    p: _Poly = {(): 1}
    for d in ds:
        p = _pmul(p, _parse(d))
    return _render(p)


def bcast(a: Dim, b: Dim) -> Dim:
    """NumPy's broadcast of two dims: equal stays, 1 yields to the other, a known n>1 wins over a
    symbol (which must then be n or 1 at run time), distinct symbols give ``bcast(A,B)``.
    `ShapeError` when two known sizes differ and neither is 1."""
    if a == b:
        return a
    if type(a) is int and type(b) is int:
        if a == 1:
            return b
        if b == 1:
            return a
        raise ShapeError(f"dims {a} and {b} do not broadcast")
    return _render(_call("bcast", [_parse(a), _parse(b)]))


broadcast = bcast


def broadcast_shapes(*shapes: tuple) -> tuple:
    """NumPy's broadcast of shapes (right-aligned), dims per `bcast`."""
    if len(shapes) == 1:
        return tuple(shapes[0])
    ndim = max(len(s) for s in shapes)
    out: list[Dim] = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, d in enumerate(s):
            try:
                out[off + i] = bcast(out[off + i], d)
            except ShapeError:
                raise ShapeError(
                    f"shapes {', '.join(_fmt(x) for x in shapes)} do not broadcast "
                    f"(axis {off + i - ndim}: {out[off + i]} vs {d})"
                ) from None
    return tuple(out)


def _fmt(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def symbols(d: Dim) -> frozenset[str]:
    """The symbol names a dim mentions."""
    if type(d) is int:
        return frozenset()
    tree = ast.parse(_text(d), mode="eval")
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in FUNCTIONS)


def evaluate(d: Dim, bindings: Mapping[str, int]) -> int:
    """The value of `d` given a value for each of its symbols; `KeyError` names an unbound symbol,
    `ShapeError` reports a ``bcast`` of incompatible sizes or a negative result."""
    if type(d) is int:
        return d
    text = _text(d)
    if text in bindings:
        return int(bindings[text])
    value = _eval(ast.parse(text, mode="eval").body, bindings, text)
    if value < 0:
        raise ShapeError(f"dim {d} evaluates to {value} < 0 with {dict(bindings)}")
    return value


def _eval(node: ast.AST, env: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        try:
            return int(env[node.id])
        except KeyError:
            raise KeyError(f"symbol {node.id!r} of dim {text!r} has no value") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env, text)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv):
            if b == 0:
                raise ShapeError(f"dim {text} divides by zero with {dict(env)}")
            return a // b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        args = [_eval(a, env, text) for a in node.args]
        if node.func.id == "max":
            return max(args)
        if node.func.id == "min":
            return min(args)
        return int(bcast(*args))  # of known sizes: an int
    raise ValueError(f"unsupported syntax in symbolic dim {text!r}")


def _text(d: Dim) -> str:
    """A symbolic dim's text; a dim that is neither an int nor a str (a bool, a NumPy integer) is refused
    here rather than failing inside the parser."""
    if not isinstance(d, str):
        raise TypeError(f"a dim is an int or a str, not {type(d).__name__} ({d!r})")
    return d


def match_shape(pattern: tuple, shape: tuple, bindings: dict[str, int]) -> None:
    """Bind the plain symbols of `pattern` to the concrete dims of `shape` (updating `bindings`) and
    check every other dim; `ShapeError` on a rank mismatch, a conflict or an expression that
    evaluates to a different size."""
    if len(pattern) != len(shape):
        raise ShapeError(f"rank mismatch: expected {_fmt(pattern)}, got {_fmt(shape)}")
    deferred = []
    for i, (p, s) in enumerate(zip(pattern, shape)):
        if type(p) is int:
            if p != s:
                raise ShapeError(f"axis {i}: expected {p}, got {s} (shape {_fmt(shape)})")
        elif p.isidentifier():
            if bindings.setdefault(p, s) != s:
                raise ShapeError(f"axis {i}: symbol {p} is already {bindings[p]}, got {s}")
        else:
            deferred.append((i, p, s))
    for i, p, s in deferred:
        if evaluate(p, bindings) != s:
            raise ShapeError(f"axis {i}: {p} = {evaluate(p, bindings)} with {bindings}, got {s}")
