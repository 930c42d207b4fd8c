"""np.split / np.array_split into several sections kept as views of their input (classify.sections_view):
no per-call copies, the input's buffer alive while a section is read, a returned section copied for the
caller, a functional assignment into a section leaving the input as it was; values as NumPy's, bit for
bit, on 1 and 2 threads."""

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph, testing


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).outputs


def _one(g, name, *inputs, **attrs):
    (v,) = _op(g, name, *inputs, **attrs)
    return v


def _const(g, value):
    return _one(g, "prim.Constant", value=value)


def _run(g, inputs, threads, exact=True):
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with np.errstate(all="ignore"):
            expected = [np.asarray(v) for v in testing.run_reference(g, inputs)]
            exe = compile_graph(g, [v.type for v in g.inputs])
            first = exe(*inputs)
            got = exe(*inputs)
    finally:
        numtrace_cpu.set_num_threads(before)
    for out in (first, got):
        if exact:   # passes and views: NumPy's bits
            for a, b in zip(out, expected, strict=True):
                np.testing.assert_array_equal(a, b, strict=True)
        else:       # a product's sums: within the project's tolerance
            testing.assert_outputs_close(tuple(out), tuple(expected))
    return exe, got


SPLITS = {
    "split_last": ("np.split", {"indices_or_sections": 3, "axis": -1}),
    "split_rows_at": ("np.split", {"indices_or_sections": (1, 4), "axis": 0}),
    "array_split_uneven": ("np.array_split", {"indices_or_sections": 4, "axis": 1}),
    "split_empty_section": ("np.split", {"indices_or_sections": (0, 2), "axis": 0}),
}


def _sections(g, name, v):
    op, attrs = SPLITS[name]
    return _op(g, op, v, **attrs)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("source", ["pass", "input", "product"])
@pytest.mark.parametrize("split", sorted(SPLITS))
def test_sections_are_views_with_numpys_values(split, source, threads):
    rng = np.random.default_rng(len(split) + len(source))
    x = rng.standard_normal((6, 9)).astype(np.float32)
    x.reshape(-1)[[3, 11, 20]] = [np.nan, -0.0, np.inf]
    w = rng.standard_normal((9, 9)).astype(np.float32)
    g = Graph()
    a, b = g.add_input("x", testing.type_of(x)), g.add_input("w", testing.type_of(w))
    base = {"pass": lambda: _one(g, "np.multiply", a, _const(g, 2.0)), "input": lambda: a,
            "product": lambda: _one(g, "np.matmul", a, b)}[source]()
    parts = _sections(g, split, base)
    # each section read by a pass, the first also returned as is, then the base overwritten by a
    # later pass of the same size (which may reuse its buffer once no section is read)
    outs = [_one(g, "np.multiply", _one(g, "np.absolute", p), _const(g, -3.0)) for p in parts] + [parts[0]]
    outs.append(_one(g, "np.add", _one(g, "np.negative", base), _const(g, 1.0)))
    g.set_outputs(outs)
    exe, got = _run(g, [x, w], threads, exact=source != "product")
    assert exe.stats()["sections_as_views"] == 1, exe.explain()
    assert exe.stats()["fallbacks"] == 0
    assert not np.shares_memory(got[len(parts)], x)   # the caller's section is its own array


@pytest.mark.parametrize("value", ["constant", "pass"])
def test_assignment_into_a_section_leaves_the_input_and_other_sections_as_they_were(value):
    x = np.arange(24.0).reshape(4, 6)
    g = Graph()
    a = g.add_input("x", testing.type_of(x))
    base = _one(g, "np.add", a, _const(g, 0.5))
    p, q = _op(g, "np.split", base, indices_or_sections=2, axis=1)
    row = _const(g, -1.0) if value == "constant" else _one(g, "np.negative", _one(g, "np.mean", a))
    p2 = _one(g, "np.setitem", p, row, index=(0,))
    g.set_outputs([p2, q, _one(g, "np.sum", base)])
    snapshot = x.copy()
    exe, got = _run(g, [x], 1)
    np.testing.assert_array_equal(x, snapshot)
    assert exe.stats()["sections_as_views"] == 1


def test_sections_of_an_arena_value_are_bound_once_per_arena():
    """A split of a value that lives in an arena buffer is the same views on every call: bound when the
    arena is made, so a call runs no step for it (the explain lists it as a view)."""
    x = np.ones((8, 12), np.float64)
    g = Graph()
    a = g.add_input("x", testing.type_of(x))
    q, k, v = _op(g, "np.split", _one(g, "np.multiply", a, _const(g, 3.0)), indices_or_sections=3, axis=1)
    g.set_outputs([_one(g, "np.add", _one(g, "np.add", q, k), v)])
    exe, got = _run(g, [x], 1)
    np.testing.assert_array_equal(got[0], np.full((8, 4), 9.0))
    assert exe.stats()["sections_as_views"] == 1
    assert "view" in exe.explain() and "np.split" in exe.explain()


def _write_into_a_section(a):
    base = a * 2.0
    q, k = np.split(base, 2, axis=1)
    k[0] = 5.0   # NumPy writes base through its view k
    return base.sum(axis=0), q * 1.0, k + 0.0


def _update_a_section_in_place(a):
    base = a * 2.0
    q, k = np.split(base, 2, axis=1)
    q += 1.0
    return base, k


@pytest.mark.parametrize("fn", [_write_into_a_section, _update_a_section_in_place])
def test_traced_writes_through_a_section_reach_its_base_as_in_numpy(fn):
    nt = pytest.importorskip("numtrace")
    traced = nt.trace(fn, (np.arange(12.0).reshape(3, 4),), backend="cpu")
    for seed in range(3):
        b = np.random.default_rng(seed).standard_normal((3, 4))
        for got, want in zip(traced(b), fn(b), strict=True):
            np.testing.assert_array_equal(got, want, strict=True)
    (stats,) = traced.stats()["signatures"].values()
    assert stats["sections_as_views"] == 1
