"""Differential fuzzer for writes through views: random programs over NumPy's views (reshape, ravel in
every order, flip, split parts, atleast_nd, ascontiguousarray/asfortranarray, astype(copy=False),
.real, conj, squeeze, diagonal, transposes, basic indexing) and in-place writes (``+=``, ``x[...] =``,
``out=``, fill, sort, copyto), traced at one shape and layout and called at others (C, F, strided,
negative strides, transposed, unit dims, empty), twice each, against eager NumPy.

A call must answer as NumPy does (results, dtypes, the argument afterwards, a written argument
returned as itself) or raise. Not collected by pytest; run it by hand:

    python packages/frontend/tests/fuzz_views.py SEED COUNT BACKEND
"""

from __future__ import annotations

import collections
import random
import sys
import warnings

import numpy as np
import numtrace as nt

VIEWS = [
    "{a}.T", "{a}[1:]", "{a}[::-1]", "{a}[0]", "{a}.reshape(-1)", "{a}.ravel()", "{a}.ravel('F')",
    "{a}.ravel('K')", "{a}.ravel('A')", "{a}.reshape({a}.shape[::-1], order='F')", "np.flip({a})",
    "np.flip({a}, -1)", "np.split({a}, 2)[1]", "np.array_split({a}, 3)[1]", "np.split({a}, [1])[1]",
    "np.atleast_2d({a})", "np.atleast_3d({a})", "np.ascontiguousarray({a})", "np.asfortranarray({a})",
    "np.asarray({a}, order='F')", "np.asarray({a}, order='C')", "{a}.astype({a}.dtype, copy=False)",
    "{a}.real", "{a}.imag", "{a}.conj()", "np.squeeze({a})", "np.diagonal({a})", "np.swapaxes({a}, 0, -1)",
    "np.expand_dims({a}, 0)", "{a}[..., None]", "{a}[:, ::2]", "np.broadcast_arrays({a}, {a})[0]",
    "np.copy({a})", "{a}[[0]]", "np.rot90({a})", "{a}.sum()",
]
WRITES = [
    "{a} += 1", "{a}[...] = 7", "{a}[0] = 3", "np.add({a}, 1, out={a})", "{a}.fill(5)", "{a}.sort()",
    "np.negative({a}, out={a})", "{a}[...] = {a}[::-1]", "np.copyto({a}, 2)", "{a}[1:] = 9",
    "np.add({b}, 1, out={a}) if {a}.shape == {b}.shape else None", "{a}.T[...] = 1", "{a}[::-1] += 1",
]
RETURNS = ["{a}", "{a} + 0", "({a}, {b})", "{a}.sum()", "({a}, x)", "x", "x.copy()"]
DTYPES = [np.float64, np.complex128, np.int8, np.bool_, np.float16, np.float32, np.int64]


def program(r: random.Random) -> str:
    lines, pool = [], ["x"]
    for _ in range(r.randint(1, 4)):
        a = r.choice(pool)
        if r.random() < 0.55:
            lines.append(f"v{len(pool)} = " + r.choice(VIEWS).format(a=a))
            pool.append(f"v{len(pool)}")
        else:
            lines.append(r.choice(WRITES).format(a=a, b=r.choice(pool)))
    lines.append("return " + r.choice(RETURNS).format(a=r.choice(pool), b=r.choice(pool)))
    return "def f(x):\n" + "".join(f"    {line}\n" for line in lines)


def arguments(shape: tuple, dtype) -> list:
    """The same values in several shapes and layouts."""
    out = []
    for sh in [shape, shape[::-1], (1, *shape[1:]), (*shape[:-1], 1), tuple(s + 1 for s in shape),
               (0, *shape[1:])]:
        v = (np.arange(int(np.prod(sh))) % 7 - 2).reshape(sh)
        c = (v % 3 == 0) if dtype == np.bool_ else (v + 1j * (v % 3) if np.dtype(dtype).kind == "c" else v)
        c = c.astype(dtype)
        strided = np.zeros((*sh[:-1], 2 * sh[-1]), dtype)[..., ::2]
        strided[...] = c
        negative = np.zeros(sh, dtype)[::-1]
        negative[...] = c
        out += [c, np.asfortranarray(c), strided, negative, np.ascontiguousarray(c.T).T]
    return out


def like(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` with its layout."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return a.copy(order="K")
    if a.strides[0] < 0:
        out = np.zeros(a.shape, a.dtype)[::-1]
    else:
        out = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)[..., ::2]
    out[...] = a
    return out


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def check(src: str, example: np.ndarray, calls: list, backend: str, stats: collections.Counter) -> list:
    namespace: dict = {"np": np}
    exec(compile(src, "<program>", "exec"), namespace)
    f = namespace["f"]
    try:
        f(like(example))
        traced = nt.trace(f, (like(example),), check_trace=False, backend=backend)
    except Exception:
        stats["not traced"] += 1
        return []
    wrong = []
    for call in calls * 2:   # twice: nothing stale across calls
        stats["calls"] += 1
        eager, ours = like(call), like(call)
        try:
            expected = f(eager)
        except Exception as exc:
            try:
                traced(ours)
            except Exception:
                continue
            wrong.append(f"{call.shape} {call.strides}: NumPy raised {type(exc).__name__}, not the trace")
            continue
        try:
            got = traced(ours)
        except Exception:
            stats["refused"] += 1
            continue
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = got if isinstance(got, tuple) else (got,)
        written = not same(eager, call)
        if not (len(got) == len(expected) and all(same(g, e) for g, e in zip(got, expected))
                and same(ours, eager)
                # the argument itself where NumPy returns it written (an unwritten one is copied)
                and all((g is not ours or e is eager) and (g is ours or e is not eager or not written)
                        for g, e in zip(got, expected))):
            wrong.append(f"{call.shape} {call.strides}")
    stats["wrong" if wrong else "ok"] += 1
    return wrong


def main(seed: int, count: int, backend: str) -> None:
    r = random.Random(seed)
    stats: collections.Counter = collections.Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(count):
            src = program(r)
            candidates = arguments(r.choice([(4, 6), (3, 4), (2, 2)]), r.choice(DTYPES))
            example = r.choice(candidates[:5])
            for line in check(src, example, r.sample(candidates, 8), backend, stats):
                print(f"traced at {example.dtype}{example.shape} {example.strides}, called at {line}\n{src}")
    print(dict(stats))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
