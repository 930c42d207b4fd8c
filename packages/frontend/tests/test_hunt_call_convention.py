"""Differential hunt for silent wrong answers in the call convention (`numtrace_ir.CallSpec`).

A seeded generator writes small programs over one to three float arguments that write into them
(``+=``, ``x[idx] = v``, ``out=``, writes through transposes and reversed or sliced views, one written
argument read after another is written, writes decided by values converted to Python, host calls)
and return written and unwritten arguments, views of them and fresh results, in every argument
structure the tracer takes (positional, tuple, list, dict, keyword). Each program is traced at one
shape and called, on every backend (and its saved and loaded copy), at other shapes (batch 1 and odd
sizes) and layouts (Fortran order, negative strides, strided slices, broadcast and read-only views),
with the same array or overlapping views of one array as two arguments, twice per call (the second
takes the fast path where there is one). The contract, per call: eager NumPy's results and its
writes into the arguments, value for value, dtype and shape, or a clear exception (a refused alias,
a guard) from the traced call.

``NUMTRACE_HUNT_PROGRAMS`` sets the number of programs (default 120: a few seconds).
"""

from __future__ import annotations

import linecache
import os
import warnings

import numpy as np
import numtrace as nt
import pytest

PROGRAMS = int(os.environ.get("NUMTRACE_HUNT_PROGRAMS", "120"))
UNCLEAR = (SystemError, AssertionError, NameError, RecursionError, MemoryError)
NAMES = ("a", "b", "c")


# -- programs -------------------------------------------------------------------------------------
def _statement(rng: np.random.Generator, names: tuple[str, ...]) -> str:
    x, y, z = (names[int(i)] for i in rng.integers(len(names), size=3))
    c = float(rng.integers(-3, 4)) / 2
    return str(rng.choice([
        f"{x} += {c}",
        f"{x} *= {y}",
        f"{x} -= {y}.sum(axis=0)",
        f"{x}[0] = {c}",
        f"{x}[-1] = {y}[0]",
        f"{x}[1:] += {y}[:-1]",
        f"{x}[::-1] += {c}",
        f"{x}[:, 0] = {y}[:, -1]",
        f"{x}.T[0] += {c}",
        f"{x}[::2] *= {c}",
        f"np.add({x}, {y}, out={z})",
        f"np.multiply({x}, {c}, out={x})",
        f"{x}[...] = {y}[::-1]",
        f"{x}[{x} > {c}] = {c}",
        f"v = {x}[1:]; v += {y}[1:]",
        f"{x}[None][0, 0] = {c}",
        f"np.moveaxis({x}, 0, 1)[0] -= {c}",
        f"{x}.swapaxes(0, 1)[::-1] += {y}.T",
        f"np.expand_dims({x}, 1)[0] = {c}",
        f"np.asarray({x})[0] += 1",
        f"{x}[:] = {x}.T[:, :1].T",
        f"{x}[1:] = {x}[:-1]",
        f"w = {x}.T; w[:] = w * {c}",
        f"if {y}.sum() > {c}: {x} += 1.0",
        f"{x}[int({y}.argmax()) % len({x})] = {c}",
        f"{x}[:, :int({y}[0, 0] > 0) + 1] = {c}",
        f"{x} -= float({y}.max())",
        f"{x} += np.rot90({y}, 2)",
        *LAYOUT_DEPENDENT(x, c),
    ]))


def _no_layout_dependent(x: str, c: float) -> list[str]:
    return []


# Writes through a reshape, whose being a view depends on the layout and the shape (see
# test_hunt_front.py's reshape tests): off by default, NUMTRACE_HUNT_RESHAPE=1 turns them on.
def _layout_dependent(x: str, c: float) -> list[str]:
    return [f"{x}.reshape(-1)[1] = {c}", f"{x}.T.reshape(-1)[1] += {c}", f"{x}.ravel()[2] = {c}",
            f"np.ascontiguousarray({x})[0] = {c}"]


LAYOUT_DEPENDENT = _layout_dependent if os.environ.get("NUMTRACE_HUNT_RESHAPE") else _no_layout_dependent


def _result(rng: np.random.Generator, names: tuple[str, ...]) -> str:
    x, y = (names[int(i)] for i in rng.integers(len(names), size=2))
    return str(rng.choice([x, f"{x}[0]", f"{x}.T", f"{x}[::-1]", f"{x} + {y}", f"{x}.sum()",
                           f"{x}[1:, ::2]", f"{x}.copy()",
                           f"({x}, {x})", f"{x}[None]", f"np.moveaxis({x}, 0, 1)", f"{x}.astype(np.float32)",
                           f"({x}, {y}, {x}.T)"]))


def _program(rng: np.random.Generator, index: int) -> tuple[str, str, int]:
    """(source, argument structure, number of arrays): a function ``f`` of the structure."""
    n = int(rng.integers(1, 4))
    names = NAMES[:n]
    structure = str(rng.choice(["flat", "tuple", "list", "dict", "kwargs"]))
    params = {"flat": ", ".join(names), "tuple": "t", "list": "t", "dict": "d", "kwargs": ", ".join(names)}
    lines = [f"def f({params[structure]}):"]
    if structure in ("tuple", "list"):
        lines.append(f"    {', '.join(names)}{',' if n == 1 else ''} = t")
    elif structure == "dict":
        lines.extend(f"    {name} = d[{name!r}]" for name in names)
    lines.extend("    " + _statement(rng, names) for _ in range(int(rng.integers(1, 4))))
    results = [_result(rng, names) for _ in range(int(rng.integers(1, 4)))]
    lines.append(f"    return {results[0] if len(results) == 1 else '(' + ', '.join(results) + ')'}")
    return "\n".join(lines) + "\n", structure, n


def _compile(source: str, index: int):
    filename = f"<hunt-program-{index}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"np": np}
    exec(compile(source, filename, "exec"), scope)
    return scope["f"]


# -- arguments ------------------------------------------------------------------------------------
def _layout(rng: np.random.Generator, base: np.ndarray, kind: str) -> np.ndarray:
    if kind == "broadcast":
        return np.broadcast_to(base[:1], base.shape)
    if kind == "readonly":
        base.flags.writeable = False
        return base
    if kind == "F":
        return np.asfortranarray(base)
    if kind == "reversed":
        return base[::-1, ::-1].copy()[::-1, ::-1]
    if kind == "strided":
        wide = np.zeros((base.shape[0], 2 * base.shape[1]))
        wide[:, ::2] = base
        return wide[:, ::2]
    return base.copy()


def _arrays(seed: int, shape: tuple[int, int], n: int, share: str,
            writable: bool = False) -> list[np.ndarray]:
    """``n`` arrays of ``shape``, the same for the same seed; ``share``: "none", "same" (the first
    array twice) or "overlap" (the first two are overlapping views of one buffer)."""
    rng = np.random.default_rng(seed)
    kinds = ["C", "F", "reversed", "strided"] + ([] if writable else ["broadcast", "readonly"])
    arrays = [_layout(rng, np.round(rng.standard_normal(shape) * 4) / 2, str(rng.choice(kinds)))
              for _ in range(n)]
    if n >= 2 and share == "same":
        arrays[1] = arrays[0]
    elif n >= 2 and share == "overlap":
        buf = np.round(rng.standard_normal((shape[0] + 1, shape[1])) * 4) / 2
        arrays[0], arrays[1] = buf[:-1], buf[1:]
    return arrays


def _packed(structure: str, arrays: list[np.ndarray]) -> tuple[tuple, dict]:
    names = NAMES[:len(arrays)]
    if structure == "tuple":
        return (tuple(arrays),), {}
    if structure == "list":
        return (list(arrays),), {}
    if structure == "dict":
        return (dict(zip(names, arrays)),), {}
    if structure == "kwargs":
        return (), dict(zip(names, arrays))
    return tuple(arrays), {}


def _same(expected, got) -> bool:
    if isinstance(expected, (tuple, list)):
        return (type(expected) is type(got) and len(expected) == len(got)
                and all(_same(e, g) for e, g in zip(expected, got)))
    e, g = np.asarray(expected), np.asarray(got)
    return e.dtype == g.dtype and e.shape == g.shape and np.array_equal(e, g, equal_nan=True)


def _check_call(traced, f, structure: str, make, what: str) -> str:
    """Compare one call of `traced` with eager `f` on two sets of the same arguments (``make()``);
    an error message or ''."""
    eager_arrays, traced_arrays = make(), make()
    args, kwargs = _packed(structure, eager_arrays)
    try:
        expected = f(*args, **kwargs)
    except Exception:
        expected = None
    args, kwargs = _packed(structure, traced_arrays)
    try:
        got = traced(*args, **kwargs)
    except UNCLEAR:
        raise
    except Exception:
        return ""  # a refusal (alias, guard, shape) is within the contract
    if expected is None:
        return f"{what}: eager NumPy raised, the traced call returned {got!r}"
    if not _same(expected, got):
        return f"{what}: results differ:\n eager {expected!r}\n trace {got!r}"
    if not all(_same(e, g) for e, g in zip(eager_arrays, traced_arrays)):
        return f"{what}: arguments differ after the call:\n eager {eager_arrays!r}\n trace {traced_arrays!r}"
    return ""


def hunt(seed: int, backend: str, tmp_path=None) -> list[str]:
    """Trace and call one generated program; the wrong answers found."""
    rng = np.random.default_rng(seed)
    source, structure, n = _program(rng, seed)
    f = _compile(source, seed)
    trace_shape = (int(rng.choice([3, 4])), 4)
    args, kwargs = _packed(structure, _arrays(seed, trace_shape, n, "none", writable=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if structure == "kwargs":
                traced = nt.trace(f, example_kwarg_inputs=kwargs, check_trace=False, backend=backend)
            else:
                traced = nt.trace(f, args, check_trace=False, backend=backend)
        except UNCLEAR:
            raise
        except Exception:
            return []
    variants = [traced]
    if tmp_path is not None and not traced.guards:
        path = tmp_path / f"hunt-{seed}.nt"
        traced.save(path)
        variants.append(nt.load(path, backend=backend))
    problems = []
    for shape in [trace_shape, (1, 4), (5, 4), (2, 3), trace_shape]:
        for share in ("none", "same", "overlap"):
            call_seed = int(rng.integers(2**31))

            def make(shape=shape, share=share, call_seed=call_seed):
                return _arrays(call_seed, shape, n, share)
            for k, v in enumerate(variants):
                for repeat in range(2):  # the second call takes the fast path where there is one
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        msg = _check_call(v, f, structure, make,
                                          f"{shape} {share} {'loaded' if k else 'traced'} call {repeat}")
                    if msg:
                        problems.append(f"program {seed} on {backend} ({structure}):\n{source}{msg}")
    return problems


@pytest.mark.parametrize("chunk", range(4))
def test_generated_call_convention_programs(backend, chunk, tmp_path):
    problems = []
    for seed in range(chunk, PROGRAMS, 4):
        problems.extend(hunt(seed, backend, tmp_path))
    assert not problems, "\n\n".join(problems[:3])


def test_concurrent_calls_write_back_into_their_own_arguments(backend):
    """Threads calling one trace that writes into and returns its arguments, at several shapes and
    layouts (the fast path and the general path at once): each call sees only its own arrays."""
    import threading

    def f(a, b):
        a += b
        b[::-1] *= 2.0
        return a, b.T, a.sum()

    traced = nt.trace(f, (np.ones((3, 4)), np.ones((3, 4))), check_trace=False, backend=backend)
    failures: list[str] = []

    def worker(seed: int) -> None:
        for k in range(60):
            shape = ((3, 4), (1, 4), (7, 4))[k % 3]
            make = lambda s=shape, c=seed * 1000 + k: _arrays(c, s, 2, "none", writable=True)
            msg = _check_call(traced, f, "flat", make, f"thread {seed} call {k}")
            if msg:
                failures.append(msg)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]
