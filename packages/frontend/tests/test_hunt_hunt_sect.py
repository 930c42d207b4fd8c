"""Differential checks of np.split / np.array_split sections kept as views of their input on the cpu
backend (and a copying prim.reshape of merged heads written in place) against eager NumPy: values,
writes through sections into their base and the caller's arrays, outputs' aliasing with each other and
the inputs, and results of earlier calls kept alive while later calls (other sizes too) run."""

from __future__ import annotations

import random
import warnings

import numpy as np
import numtrace as nt
import pytest

pytestmark = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="needs the cpu backend")


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    cpu = pytest.importorskip("numtrace_cpu")
    before = cpu.get_num_threads()
    cpu.set_num_threads(request.param)
    yield request.param
    cpu.set_num_threads(before)


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _run_all(fn, traced, calls):
    """Each call's NumPy and traced results (an exception stands for a result), all calls made first:
    a traced result must not change while the later calls run."""
    kept = []
    for args in calls:
        mine, theirs = [a.copy() for a in args], [a.copy() for a in args]
        results = []
        for f, a in ((fn, mine), (traced, theirs)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", nt.TracerWarning)   # re-traces at other ranks
                    results.append(f(*a))
            except Exception as exc:   # compared with NumPy's below
                results.append(exc)
        kept.append((*results, mine, theirs))
    return kept


def _assert_as_numpy(kept, rtol=0.0):
    for k, (want, got, mine, theirs) in enumerate(kept):
        if isinstance(want, Exception) or isinstance(got, Exception):
            assert type(got) is type(want), (k, want, got)
            continue
        want, got = _as_tuple(want), _as_tuple(got)
        assert len(got) == len(want)
        for j, (w, g) in enumerate(zip(want, got)):
            w, g = np.asarray(w), np.asarray(g)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), (k, j)
            if rtol:
                np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"call {k} output {j}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"call {k} output {j}", strict=True)
            for i, (a, b) in enumerate(zip(mine, theirs)):
                assert np.shares_memory(g, b) == np.shares_memory(w, a), (k, j, i)
            for jj in range(j + 1, len(want)):
                assert np.shares_memory(g, got[jj]) == np.shares_memory(w, want[jj]), (k, j, jj)
        for i, (a, b) in enumerate(zip(mine, theirs)):
            if rtol:
                np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol, err_msg=f"call {k} argument {i}")
            else:
                np.testing.assert_array_equal(b, a, err_msg=f"call {k} argument {i}")


# -- explicit programs --------------------------------------------------------------------------------

def overlapping_sections_updated(x):
    y = x * 2.0
    a, _, c = np.split(y, [3, 1], axis=0)   # a = y[:3] and c = y[1:] overlap in rows 1 and 2
    a += 1.0
    return c * 1.0, y * 1.0


def overlapping_sections_assigned(x):
    y = x * 2.0
    a, _, c = np.split(y, [3, 1], axis=0)
    a[...] = c[:3]
    return y * 1.0, c + 0.0


def overlapping_sections_out(x):
    y = x * 2.0
    a, _, c = np.split(y, [3, 1], axis=0)
    np.add(a, c[1:], out=a)
    return y * 1.0


def overlapping_input_sections(x):
    a, _, c = np.split(x, [3, 1], axis=0)
    a += c[:3]
    return x * 1.0


def section_methods(x):
    y = x * 2.0
    a, b, c = np.split(y, 3, axis=1)
    np.copyto(c, a)
    a.fill(0.5)
    b.sort(axis=0)
    return y + 0.0, b * 1.0


def base_rewritten_after_a_read(x):
    y = x * 2.0
    a, b = np.split(y, 2, axis=1)
    z = a + b
    y *= 0.0
    return z, a * 1.0


def updated_input_split(x):
    x *= 3.0
    a, b = np.split(x, 2, axis=0)
    a += 1.0
    return b - a, a


def input_split_then_updated(x, y):
    a, b = np.split(x, 2, axis=1)
    y[...] = a + b
    x += 1.0
    return y.sum(axis=0), a


def split_at_a_size_read_from_shape(x):
    a, b = np.split(x * 2.0, [x.shape[0] // 2])
    return a.sum(axis=0), b * 1.0


def split_into_shape_many(x):
    return tuple(p * 1.0 for p in np.split(x * 2.0, x.shape[1] // 2, axis=1))


PROGRAMS = [
    (overlapping_sections_updated, [(5, 3)], [(5, 3), (5, 3), (7, 3)]),
    (overlapping_sections_assigned, [(5, 3)], [(5, 3), (5, 3), (7, 3)]),
    (overlapping_sections_out, [(5, 3)], [(5, 3), (5, 3), (7, 3)]),
    (overlapping_input_sections, [(5, 3)], [(5, 3), (5, 3), (7, 3)]),
    (section_methods, [(4, 6)], [(4, 6), (4, 6), (5, 9)]),
    (base_rewritten_after_a_read, [(4, 6)], [(4, 6), (4, 6), (2, 8)]),
    (updated_input_split, [(4, 6)], [(4, 6), (4, 6), (6, 2)]),
    (input_split_then_updated, [(4, 6), (4, 3)], [((4, 6), (4, 3)), ((4, 6), (4, 3)), ((2, 4), (2, 2))]),
    (split_at_a_size_read_from_shape, [(4, 6)], [(4, 6), (5, 6), (1, 6), (0, 6), (7, 6)]),
    (split_into_shape_many, [(4, 6)], [(4, 6), (4, 8), (4, 2), (4, 6)]),
]


@pytest.mark.parametrize("fn,example,sizes", PROGRAMS, ids=[p[0].__name__ for p in PROGRAMS])
def test_sections_behave_as_numpys_views(fn, example, sizes, threads):
    rng = np.random.default_rng(len(fn.__name__))
    traced = nt.trace(fn, tuple(rng.standard_normal(s) for s in example), backend="cpu")
    calls = [tuple(rng.standard_normal(s) for s in (size if isinstance(size[0], tuple) else (size,)))
             for size in sizes]
    _assert_as_numpy(_run_all(fn, traced, calls))
    assert any(s["sections_as_views"] for s in traced.stats()["signatures"].values())


class _Block(nt.Module):
    def __init__(self, rng, d, heads):
        super().__init__()
        self.heads = heads
        self.w = nt.Parameter(rng.standard_normal((d, 3 * d)) / np.sqrt(d))
        self.wo = nt.Parameter(rng.standard_normal((d, d)) / np.sqrt(d))

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        q, k, v = np.split(x @ self.w, 3, axis=-1)
        q, k, v = (t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3) for t in (q, k, v))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // h)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        o = (s / s.sum(axis=-1, keepdims=True)) @ v
        return x + o.transpose(0, 2, 1, 3).reshape(b, n, -1) @ self.wo


class _TwoBlocks(nt.Module):
    def __init__(self, rng):
        super().__init__()
        self.first, self.second = _Block(rng, 16, 4), _Block(rng, 16, 2)

    def forward(self, x):
        y = self.second(self.first(x))
        a, c = np.split(y, 2, axis=-1)
        a += c
        return a * c, y


def test_two_attention_blocks_at_several_sizes_keep_every_result(threads):
    rng = np.random.default_rng(7)
    model = _TwoBlocks(rng)
    traced = nt.trace_module(model, {"forward": rng.standard_normal((2, 6, 16))}, backend="cpu")
    xs = [rng.standard_normal(s) for s in [(2, 6, 16)] * 3 + [(1, 6, 16), (3, 5, 16), (2, 6, 16)]]
    results = [traced.forward(x.copy()) for x in xs]
    for x, got in zip(xs, results):
        for g, w in zip(got, model.forward(x.copy()), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    stats = traced.forward.stats()["signatures"].values()
    assert all(s["sections_as_views"] == 3 and s["reshapes_in_place"] == 2 for s in stats)


# -- random programs ------------------------------------------------------------------------------------

def _program(seed: int) -> tuple[str, tuple]:
    """A function splitting a value (an input, a pass's result, a product's, a strided view's) and
    updating, assigning, re-splitting and multiplying its sections, returning some as they are."""
    r = random.Random(seed)
    nd = r.choice([1, 2, 2, 3])
    shape = [r.choice([2, 4, 6]) for _ in range(nd)]
    ax = r.randrange(-nd, nd)
    n = shape[ax]
    kind = r.choice(["even", "indices", "array_split"])
    if kind == "even":
        k = r.choice([d for d in (2, 3, n) if n % d == 0])
        split, count = f"np.split(base, {k}, axis={ax})", k
    elif kind == "indices":
        idx = (sorted(r.sample(range(-1, n + 2), r.choice([1, 2]))) if r.random() < 0.8
               else r.sample(range(n + 1), 2))
        split, count = f"np.split(base, {idx}, axis={ax})", len(idx) + 1
    else:
        k = r.choice([2, 3, 4])
        split, count = f"np.array_split(base, {k}, axis={ax})", k
    source = r.choice(["x", "x * 2.0", "np.exp(x)", "x.T.T * 1.0", "(x + 1.0)[::-1]", "x @ w",
                       "np.tanh(x @ w)", "(x @ w).T.T"])
    lines = [f"base = {source}", f"s = list({split})"]
    for _ in range(r.randint(0, 4)):
        i = r.randrange(count)
        lines.append(r.choice([
            f"s[{i}] += 1.5",
            f"s[{i}][...] = s[{r.randrange(count)}].max() * 0.5",
            "base += 0.25",
            f"np.multiply(s[{i}], -2.0, out=s[{i}])",
            f"s[{i}] = np.array_split(s[{i}], 2, axis=-1)[0]",
            f"s[{i}] = s[{i}] * 3.0",
            f"s[{i}] = s[{i}] @ np.swapaxes(s[{i}], -1, -2) if s[{i}].ndim > 1 else s[{i}] * 1.0",
            f"s[{i}] = s[{i}] - s[{i}].max(axis=-1, keepdims=True)",
        ]))
    returned = [f"s[{i}]" if r.random() < 0.4 else f"s[{i}] + 0.0" for i in range(count) if r.random() < 0.7]
    returned.append("base * 1.0" if r.random() < 0.5 else "base.sum()")
    body = "\n    ".join([*lines, f"return ({', '.join(returned)},)"])
    return f"def program(x, w):\n    {body}\n", tuple(shape)


@pytest.mark.parametrize("chunk", range(4))
def test_random_split_programs(chunk, threads):
    """Random programs over sections (seeded): NumPy's values, writes and aliasing at every call,
    results of the earlier calls kept."""
    checked = 0
    for seed in range(chunk * 20, chunk * 20 + 20):
        code, shape = _program(seed)
        scope = {"np": np}
        exec(code, scope)   # a user's function, written out so that the tracer sees plain Python
        fn = scope["program"]
        rng = np.random.default_rng(seed)
        example, *calls = [(rng.standard_normal(shape), rng.standard_normal((shape[-1], shape[-1])))
                           for _ in range(4)]
        try:
            with np.errstate(all="ignore"):
                fn(*(a.copy() for a in example))
        except ValueError:
            continue   # NumPy refuses it (an uneven split, a shape mismatch)
        try:
            traced = nt.trace(fn, example, backend="cpu")
        except NotImplementedError:
            continue   # outputs overlapping as computed values: refused with a message
        kept = _run_all(fn, traced, calls)
        try:
            _assert_as_numpy(kept, rtol=1e-9)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}:\n{code}") from exc
        checked += 1
    assert checked >= 10
