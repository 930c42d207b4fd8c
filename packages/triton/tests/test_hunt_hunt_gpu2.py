"""Hunt in the scatter's device-filled claims and relaxed atomics, the matmul's narrow autotune tiles and
np.pad's fill: each program compared with NumPy itself, over repeated calls with other indices."""

from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_compile_check import assert_relaxed_reductions, enabled, ptx_atomics
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_triton import Backend, Tuning, generate
from numtrace_triton.aot import compile_for_gpu
from numtrace_triton.emit_matmul import _configs

RNG = np.random.default_rng(62)
needs_compiler = pytest.mark.skipif(not enabled()[0], reason=f"no compile for a GPU here: {enabled()[1]}")


def _setitem_expected(a, index, value):
    out = a.copy()
    out[index] = value
    return out


def _at_expected(a, ufunc, index, value):
    out = a.copy()
    ufunc.at(out, index, value)
    return out


def _graph(build, arrays):
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    g.set_outputs(build(g, *xs))
    return g


def _setitem(g, a, idx, v, index=("input",)):
    return g.create_node("np.setitem", [a, idx, v], attrs={"index": index}).output


def _at(g, a, idx, v, ufunc, index=("input",)):
    attrs = registry.get("np.ufunc.at").normalize_attrs({"ufunc": ufunc, "index": index})
    return g.create_node("np.ufunc.at", [a, idx, v], attrs=attrs).output


def _compile(build, arrays):
    return Backend().compile(_graph(build, arrays), [type_of(a) for a in arrays])


def _equal(got, expected):
    assert len(got) == len(expected)
    for x, y in zip(got, expected):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("axis", [0, 1])
def test_an_nd_scatter_starts_from_fresh_claims_on_every_call(axis):
    """With a 2-d ``a`` the claims have their own fill kernel: a second call with other (and fewer
    distinct) indices must not see the first call's claims."""
    a = RNG.standard_normal((40, 40))
    index = ("input",) if axis == 0 else (slice(None), "input")
    idx0 = RNG.integers(-40, 40, 25)
    v = RNG.standard_normal((25, 40) if axis == 0 else (40, 25))
    exe = _compile(lambda g, a, i, v: [_setitem(g, a, i, v, index)], [a, idx0, v])
    for idx in (idx0, np.zeros(25, np.int64), RNG.integers(-3, 3, 25), np.arange(25), idx0[::-1].copy()):
        key = (idx,) if axis == 0 else (slice(None), idx)
        v = RNG.standard_normal(v.shape)
        _equal(exe(a, idx, v), [_setitem_expected(a, key, v)])


def test_two_scatters_chained_and_side_by_side():
    """Three scatters in one graph, two chained and one on the same input with the same index: each has
    its own claims, each returned, with repeats; repeated calls with other indices."""
    a = RNG.standard_normal(300).astype(np.float32)
    i, j = RNG.integers(-300, 300, 200), RNG.integers(0, 10, 200)
    v, w = RNG.standard_normal(200).astype(np.float32), RNG.standard_normal(200).astype(np.float32)

    def build(g, a, i, j, v, w):
        b = _setitem(g, a, i, v)
        return [b, _setitem(g, b, j, w), _setitem(g, a, i, w)]

    exe = _compile(build, [a, i, j, v, w])
    for _ in range(3):
        b = _setitem_expected(a, i, v)
        _equal(exe(a, i, j, v, w), [b, _setitem_expected(b, j, w), _setitem_expected(a, i, w)])
        i, j = RNG.integers(-300, 300, 200), RNG.integers(-5, 5, 200)


@pytest.mark.parametrize("make", ["scale", "sum", "transpose"])
def test_scatter_into_a_computed_array(make):
    """``a`` computed in the graph (a pointwise kernel, a reduction, a strided view): the claims' fill
    may join the kernel that writes ``a``'s copy; it must still run before the claims."""
    x = RNG.standard_normal((30, 30))
    idx = RNG.integers(-30, 30, 50)
    v = RNG.standard_normal(50)
    op = {"scale": lambda x: x * 2.0, "sum": lambda x: x.sum(axis=1), "transpose": lambda x: x.T[3]}[make]

    def build(g, x, i, v):
        if make == "scale":
            two = g.create_node("prim.Constant", [], {"value": 2.0}).output
            a = g.create_node("np.multiply", [x, two]).output
            a = g.create_node("np.getitem", [a], attrs={"index": (3,)}).output
        elif make == "sum":
            a = g.create_node("np.sum", [x], attrs=registry.get("np.sum").normalize_attrs({"axis": 1})).output
        else:
            t = g.create_node("np.transpose", [x],
                              attrs=registry.get("np.transpose").normalize_attrs({})).output
            a = g.create_node("np.getitem", [t], attrs={"index": (3,)}).output
        return [_setitem(g, a, i, v)]

    exe = _compile(build, [x, idx, v])
    for i in (idx, RNG.integers(0, 3, 50), np.full(50, -1)):
        a = op(x)[3] if make == "scale" else op(x)
        got = exe(x, i, v)[0]
        np.testing.assert_allclose(got, _setitem_expected(a, i, v), rtol=1e-12, atol=0)


@pytest.mark.parametrize("index_dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                         "uint64"])
def test_scatter_and_at_with_every_index_dtype(index_dtype):
    a = np.arange(100, dtype=np.int32).reshape(50, 2)
    idx = np.array([3, 7, 3, 49, 0, 7, 3], index_dtype)
    if idx.dtype.kind == "i":
        idx[1] = -1
    v = RNG.integers(-99, 99, (7, 2)).astype(np.int32)
    _equal(_compile(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, idx, v])(a, idx, v),
           [_setitem_expected(a, idx, v)])
    _equal(_compile(lambda g, a, i, v: [_at(g, a, i, v, "numpy.add")], [a, idx, v])(a, idx, v),
           [_at_expected(a, np.add, idx, v)])


@pytest.mark.parametrize("ufunc", ["add", "subtract", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_ufunc_at_with_repeats_over_calls(ufunc, dtype):
    a = (RNG.standard_normal((20, 3)) * 50).astype(dtype)
    idx = RNG.integers(-20, 20, 64)
    v = (RNG.standard_normal((64, 3)) * 50).astype(dtype)
    try:
        exe = _compile(lambda g, a, i, v: [_at(g, a, i, v, f"numpy.{ufunc}")], [a, idx, v])
    except NotImplementedError:
        pytest.skip("no atomic")
    for i in (idx, np.zeros(64, np.int64), RNG.integers(-2, 2, 64)):
        got = exe(a, i, v)[0]
        expected = _at_expected(a, getattr(np, ufunc), i, v)
        if dtype.startswith("float") and ufunc in ("add", "subtract"):  # atomics sum in any order
            np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-3)
        else:
            _equal([got], [expected])


@pytest.mark.parametrize("bad", [[0, 50], [-51, 0], [2**31 + 3, 0]])
def test_an_out_of_range_scatter_raises_and_leaves_the_inputs(bad):
    a = RNG.standard_normal((50, 2))
    v = RNG.standard_normal((2, 2))
    ok = np.array([1, 1])
    exe = _compile(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, ok, v])
    at = _compile(lambda g, a, i, v: [_at(g, a, i, v, "numpy.add")], [a, ok, v])
    before = a.copy()
    idx = np.array(bad, np.int64)
    for run in (exe, at):
        with pytest.raises(IndexError):
            run(a, idx, v)
        np.testing.assert_array_equal(a, before)
    # and the next call, in range, is right (no stale flag or claim)
    _equal(exe(a, ok, v), [_setitem_expected(a, ok, v)])
    _equal(at(a, ok, v), [_at_expected(a, np.add, ok, v)])


def test_scatter_with_a_broadcast_value_and_a_non_contiguous_array():
    base = RNG.standard_normal((20, 12))
    a = base[::2, ::3]  # (10, 4), not contiguous
    idx = np.array([[1, 9], [1, -1]])
    v = RNG.standard_normal(4)  # broadcast over the index's shape
    exe = _compile(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, idx, v])
    _equal(exe(a, idx, v), [_setitem_expected(a, idx, v)])
    idx2 = np.array([[0, 0], [0, 0]])
    _equal(exe(a, idx2, v), [_setitem_expected(a, idx2, v)])


def test_scatter_with_an_empty_index():
    a = RNG.standard_normal((5, 3))
    idx = np.zeros(0, np.int64)
    v = np.zeros((0, 3))
    _equal(_compile(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, idx, v])(a, idx, v), [a])


def test_scatter_at_another_size_after_a_retrace():
    """A second executable at another size (its own claims) and the first one called again."""
    exes = {}
    for n in (64, 7, 64, 1000):
        a = RNG.standard_normal((n, 2))
        idx = RNG.integers(-n, n, 3 * n)
        v = RNG.standard_normal((3 * n, 2))
        exe = exes.get(n) or _compile(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, idx, v])
        exes[n] = exe
        _equal(exe(a, idx, v), [_setitem_expected(a, idx, v)])


def _param_buffer(kernel, line, call):
    """The plan buffer of the pointer that ``call(p<i> + ...`` in ``line`` names."""
    return kernel.buffers[int(re.search(re.escape(call) + r"\(p(\d+) ", line).group(1))]


@pytest.mark.parametrize("shape", [(100,), (100, 3), (1, 100), (100, 1)])
def test_claims_are_filled_claimed_and_read_in_three_ordered_kernels(shape):
    """Relaxed atomics are safe only because kernel boundaries order the fill of the claims, the claims
    and the writes' reads of them: in every scatter of a chain (GPU tuning), the kernel that stores the
    fill comes before the one with the ``atomic_max``, which neither loads the claims nor stores the
    fill, and every kernel that loads them comes after."""
    axis = 1 if shape[0] == 1 else 0
    a, i = np.zeros(shape, np.float32), np.zeros(40, np.int64)
    v = np.zeros(tuple(40 if d == axis else s for d, s in enumerate(shape)), np.float32)
    index = ("input",) if axis == 0 else (slice(None), "input")
    g = _graph(lambda g, a, i, v: [_setitem(g, _setitem(g, a, i, v, index), i, v, index)], [a, i, v])
    kernels = generate(g, [type_of(x) for x in (a, i, v)], Tuning.gpu()).kernels
    claims = {}
    for n, k in enumerate(kernels):
        for line in k.source.splitlines():
            if "tl.atomic_max(" in line:
                claims[_param_buffer(k, line, "tl.atomic_max")] = n
    assert len(claims) == 2
    for buf, n in claims.items():
        stores = [m for m, k in enumerate(kernels) for line in k.source.splitlines()
                  if "tl.store(" in line and _param_buffer(k, line, "tl.store") == buf]
        loads = [m for m, k in enumerate(kernels) for line in k.source.splitlines()
                 if "tl.load(" in line and _param_buffer(k, line, "tl.load") == buf]
        assert len(stores) == 1 and stores[0] < n, (stores, n)
        assert loads and min(loads) > n, (loads, n)


@needs_compiler
def test_scatter_claims_are_reductions_without_a_returned_value():
    """On sm_90 each claim is one relaxed reduction (SASS ``RED``, no ``ATOM`` that waits for the old
    value), for a 1-d and a 2-d scatter."""
    for shape in ((100,), (100, 3)):
        a, i = np.zeros(shape, np.float32), np.zeros(40, np.int64)
        v = np.zeros((40,) + shape[1:], np.float32)
        g = _graph(lambda g, a, i, v: [_setitem(g, a, i, v)], [a, i, v])
        kernels = generate(g, [type_of(x) for x in (a, i, v)], Tuning.gpu()).kernels
        claims, = (r for r in compile_for_gpu(kernels, arch=90, sass=True) if ptx_atomics(r["ptx"]))
        assert_relaxed_reductions(claims, "max.s32")


def test_scatter_with_a_boolean_mask_over_calls():
    a = RNG.standard_normal((12, 3))
    mask = RNG.random(12) < 0.5
    v = RNG.standard_normal(3)
    exe = _compile(lambda g, a, m, v: [_setitem(g, a, m, v)], [a, mask, v])
    for m in (mask, np.zeros(12, bool), np.ones(12, bool), RNG.random(12) < 0.2):
        _equal(exe(a, m, v), [_setitem_expected(a, m, v)])


@pytest.mark.parametrize(("index_dtype", "bad"), [("int8", -128), ("uint64", 2**63 + 1),
                                                  ("uint32", 2**32 - 1), ("int16", 50)])
def test_an_out_of_range_index_of_a_narrow_or_unsigned_dtype_raises(index_dtype, bad):
    a = RNG.standard_normal(50)
    idx = np.array([1, bad], index_dtype)
    v = np.ones(2)
    for build in (lambda g, a, i, v: [_setitem(g, a, i, v)],
                  lambda g, a, i, v: [_at(g, a, i, v, "numpy.add")]):
        with pytest.raises(IndexError):
            _compile(build, [a, idx, v])(a, idx, v)


def test_matmul_autotune_candidates_fit_every_output_shape():
    """Every candidate covers the output with its grid (masks take the rest); a 1-row or 1-column output
    still has one."""
    for m in (1, 2, 10, 16, 17, 300):
        for n in (1, 10, 16, 17, 300):
            cands = _configs(m, n)
            assert cands and (16, 32, 64, 4, 3) in cands


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("shape", [(1, 37, 1), (1, 5, 300), (300, 17, 1), (33, 17, 10), (9, 100, 16),
                                   (17, 1, 17), (2, 3, 40), (3, 1, 7, 5), (2, 20, 17, 1)])
def test_every_autotune_candidate_of_a_narrow_or_odd_matmul(dtype, shape, monkeypatch):
    """Each config triton.autotune may pick for the output's shape, run in the interpreter with that
    config's tile sizes and grid: 1-row, 1-column and odd outputs, K not a multiple of any tile's K."""
    import dataclasses

    from numtrace_triton import backend, emit_matmul

    *batch, m, k, n = shape  # a leading batch: a batched matmul
    x = (RNG.standard_normal((*batch, m, k)) * 4).astype(dtype)
    y = (RNG.standard_normal((*batch, k, n)) * 4).astype(dtype)
    g = _graph(lambda g, a, b: [g.create_node("np.matmul", [a, b]).output], [x, y])
    expected = x @ y
    monkeypatch.setattr(backend, "_tuning", lambda: dataclasses.replace(Tuning.interpreter(), autotune=True))
    assemble = emit_matmul.assemble
    monkeypatch.setattr(emit_matmul, "assemble", lambda *a, **kw: assemble(*a, **{**kw, "autotune": None}))
    for config in _configs(m, n):
        monkeypatch.setattr(emit_matmul, "_configs", lambda m, n, c=config: [c])
        exe = Backend().compile(g, [type_of(x), type_of(y)])
        (kernel,) = exe.plan.kernels
        assert tuple(kernel.constexprs.values()) == config[:3]
        got = exe(x, y)[0]
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-3,
                                   err_msg=str(config))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "uint16", "float64"])
def test_pad_modes_against_numpy(mode, dtype):
    x = (RNG.standard_normal((3, 4)) * 9).astype(dtype)
    for pad_width, cv in ((((1, 2), (0, 3)), 0), (((2, 0), (1, 1)), 7), (((0, 0), (0, 0)), 1)):
        attrs = {"pad_width": pad_width, "mode": mode}
        if mode == "constant":
            attrs["constant_values"] = cv
        try:
            exe = _compile(lambda g, a, attrs=attrs: [g.create_node(
                "np.pad", [a], attrs=registry.get("np.pad").normalize_attrs(attrs)).output], [x])
        except NotImplementedError:
            continue
        expected = np.pad(x, **attrs)
        _equal(exe(x), [expected])


@pytest.mark.parametrize(("shape", "idx", "axis"), [((0,), [0], 0), ((0, 3), [0], 0), ((3, 0), [5], 0),
                                                    ((0, 3), [5], 1), ((3, 0), [-4], 0)])
def test_ufunc_at_on_an_empty_array_still_checks_its_index(shape, idx, axis):
    """``np.add.at(np.zeros(0), [0], 1)`` raises IndexError in NumPy although nothing is written."""
    a = np.zeros(shape)
    idx = np.array(idx)
    v = np.ones(1)
    index = ("input",) if axis == 0 else (slice(None), "input")
    key = (idx,) if axis == 0 else (slice(None), idx)
    for ufunc in (np.add, np.maximum):
        with pytest.raises(IndexError):
            ufunc.at(a.copy(), key, v)
        name = f"numpy.{ufunc.__name__}"
        exe = _compile(lambda g, a, i, v, name=name: [_at(g, a, i, v, name, index)], [a, idx, v])
        with pytest.raises(IndexError):
            exe(a, idx, v)
        ok = np.zeros(1, np.int64)
        if a.shape[axis]:  # an index in range: NumPy writes nothing and raises nothing
            _equal(exe(a, ok, v), [_at_expected(a, ufunc, key[:-1] + (ok,), v)])


def _outcome(fn):
    """``fn()``'s result, or the class of what it raised (warnings are errors under pytest)."""
    try:
        return fn()
    except (Exception, RuntimeWarning) as exc:
        return type(exc)


@pytest.mark.parametrize("value", [300, -1, 2.7, -2.7, float("nan"), float("inf"), 1e300, 2**70,
                                   np.int64(300), np.float64(2.5), np.uint8(255), True, -0.0])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "float32", "bool", "int64"])
def test_pad_constant_values_stored_as_numpy_stores_them(dtype, value):
    """np.pad casts ``constant_values`` as NumPy's assignment does: 2.7 into int8 is 2, np.int64(300)
    into uint8 is 44, a Python 300 into int8 or NaN into an int raises, 1e300 into float32 warns."""
    x = np.arange(4).reshape(2, 2).astype(dtype)
    attrs = {"pad_width": 1, "mode": "constant", "constant_values": value}
    expected = _outcome(lambda: np.pad(x, **attrs))
    exe = _compile(lambda g, a: [g.create_node(
        "np.pad", [a], attrs=registry.get("np.pad").normalize_attrs(attrs)).output], [x])
    got = _outcome(lambda: exe(x)[0])
    if isinstance(expected, type):
        assert isinstance(got, type) and issubclass(got, expected), (got, expected)
    else:
        _equal([got], [expected])


@pytest.mark.parametrize("shape", [(64,), (64, 3)])
def test_at_then_scatter_then_at_on_one_array(shape):
    """ufunc.at, a scatter and ufunc.at again in one graph on the same array (and the value the array
    itself for the last), each step returned: integer, so every result is exact."""
    a = RNG.integers(-50, 50, shape).astype(np.int32)
    i = RNG.integers(-64, 64, 64)
    j = RNG.integers(0, 8, 64)
    v = RNG.integers(-9, 9, (64,) + shape[1:]).astype(np.int32)

    def build(g, a, i, j, v):
        b = _at(g, a, i, v, "numpy.add")
        c = _setitem(g, b, j, v)
        return [b, c, _at(g, c, j, a, "numpy.maximum")]

    exe = _compile(build, [a, i, j, v])
    for _ in range(2):
        b = _at_expected(a, np.add, i, v)
        c = _setitem_expected(b, j, v)
        _equal(exe(a, i, j, v), [b, c, _at_expected(c, np.maximum, j, a)])
        i, j = RNG.integers(-3, 3, 64), RNG.integers(-64, 64, 64)


def test_scatter_with_a_strided_and_a_computed_index():
    """The index a strided view of the caller's array, and one computed in the graph (``-i - 1``)."""
    a = RNG.standard_normal((30, 2))
    base = RNG.integers(0, 30, (2, 40))
    i = base[:, ::2]  # (2, 20), not contiguous
    v = RNG.standard_normal((2, 20, 2))

    def build(g, a, i, v):
        neg = g.create_node("np.negative", [i]).output
        one = g.create_node("prim.Constant", [], {"value": 1}).output
        k = g.create_node("np.subtract", [neg, one]).output
        return [_setitem(g, a, i, v), _setitem(g, a, k, v)]

    exe = _compile(build, [a, i, v])
    for idx in (i, RNG.integers(0, 3, (2, 40))[:, 1::2]):
        _equal(exe(a, idx, v), [_setitem_expected(a, idx, v), _setitem_expected(a, -idx - 1, v)])
