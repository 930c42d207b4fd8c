"""Boolean-mask reads as a device compaction (`numtrace_triton.compaction`, `numtrace_triton.staged`):
bit for bit NumPy's result and order for every dtype, for empty, all-True and leading-dims masks, 0-size
and non-contiguous inputs, with kernels before and after the read, never the whole graph on the host."""

import dataclasses
import warnings

import numpy as np
import pytest
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_triton import Backend, backend
from numtrace_triton.staged import StagedExecutable

RNG = np.random.default_rng(22)
BACKEND = Backend()


def _node(g, op, inputs, **attrs):
    return g.create_node(op, inputs, attrs=registry.get(op).normalize_attrs(attrs)).output


def _const(g, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


def _read(g, a, m, index=("input",), extra=()):
    attrs = registry.get("np.getitem_mask").normalize_attrs(
        {"index": index, "size": f"nnz{len(g.nodes)}"})
    return g.create_node("np.getitem_mask", [a, m, *extra], attrs=attrs).output


def _compile(build, *arrays):
    """``build(g, *inputs)`` returns the outputs of a graph over ``arrays``; compiled at their types."""
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    outs = build(g, *xs)
    g.set_outputs(outs if isinstance(outs, (tuple, list)) else [outs])
    return BACKEND.compile(g, [type_of(a) for a in arrays])


def _same(got, expected):
    """Bit for bit: dtype, shape and bytes (so -0.0 and NaN payloads count)."""
    got = np.asarray(got)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes(), (got, expected)


def _data(shape, dtype):
    x = RNG.standard_normal(shape) * 50
    x.flat[::7] = -0.0
    return x.astype(dtype)


def _masks(shape):
    return {"random": RNG.random(shape) < 0.4, "empty": np.zeros(shape, bool), "all": np.ones(shape, bool)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint16", "int64", "bool"])
@pytest.mark.parametrize(("shape", "k"), [((5, 7), 2), ((5, 7, 3), 1), ((5, 7, 3), 2), ((11,), 1)])
@pytest.mark.parametrize("kind", ["random", "empty", "all"])
def test_mask_read_equals_numpy_bit_for_bit(dtype, shape, k, kind):
    x = _data(shape, dtype)
    m = _masks(shape[:k])[kind]
    exe = _compile(lambda g, a, b: _read(g, a, b), x, m)
    assert isinstance(exe, StagedExecutable)
    (got,) = exe(x, m)
    _same(got, x[m])
    text = exe.explain()
    assert "mask_0_count" in text and "mask_0_scan" in text and "mask_0_write" in text
    assert "whole graph runs on the host" not in text and "mask read on the host" not in text


@pytest.mark.parametrize(("xshape", "mshape"),
                         [((0, 3), (0,)), ((4, 0), (4,)), ((0,), (0,)), ((3, 0, 2), (3, 0))])
def test_zero_size_inputs(xshape, mshape):
    x = np.ones(xshape, np.float32)
    m = np.ones(mshape, bool)
    m.flat[::2] = False
    exe = _compile(lambda g, a, b: _read(g, a, b), x, m)
    (got,) = exe(x, m)
    _same(got, x[m])


def test_non_contiguous_inputs_and_a_mask_of_a_transposed_view():
    base = _data((8, 10), "float64")
    x = base[::2, ::-1]  # (4, 10), strided
    m = (RNG.random((10, 20)) < 0.5)[:, ::5].T  # (4, 10), strided
    exe = _compile(lambda g, a, b: _read(g, a, b), x, m)
    _same(exe(x, m)[0], x[m])

    def transposed(g, a):
        t = _node(g, "np.transpose", [a])
        return _read(g, t, _node(g, "np.greater", [t, _const(g, 0.0)]))

    exe = _compile(transposed, x)
    _same(exe(x)[0], x.T[x.T > 0])


def test_kernels_before_and_after_the_read_stay_on_the_device():
    """x -> tanh kernels -> mask -> compaction -> further kernels; the rest is planned per count."""
    def build(g, a):
        t = _node(g, "np.tanh", [a])
        r = _read(g, t, _node(g, "np.greater", [a, _const(g, 0.0)]))
        return _node(g, "np.add", [_node(g, "np.negative", [r]), r]), _node(g, "np.max", [r])

    x = _data((6, 9), "float32")
    x[0, 0] = 1.0  # at least one kept
    exe = _compile(build, x)
    got, top = exe(x)
    r = np.tanh(x)[x > 0]
    np.testing.assert_allclose(got, -r + r)  # tanh is within ulps of NumPy's
    assert got.shape == r.shape and top.shape == ()
    text = exe.explain()
    assert "host step" not in text and "whole graph" not in text
    assert "the last one run" in text and "pointwise" in text
    stats = exe.stats()
    assert stats["rest_plans"] == 1 and stats["mask_reads"] == 1 and stats["mask_reads_on_host"] == 0
    y = x.copy()
    y[1] = -1.0  # another count: another plan of the rest, then both reused
    exe(y)
    exe(x)
    exe(y)
    assert exe.stats()["rest_plans"] == 2


def test_reads_of_one_mask_share_one_stage_and_a_dependent_read_starts_another():
    x = _data((4, 6), "int64")
    y = _data((4, 6), "float64")

    def build(g, a, b):
        m = _node(g, "np.greater", [a, _const(g, 0)])
        r1, r2 = _read(g, a, m), _read(g, b, m)
        return r1, r2, _read(g, r2, _node(g, "np.less", [r1, _const(g, 20)]))

    exe = _compile(build, x, y)
    got = exe(x, y)
    m = x > 0
    _same(got[0], x[m])
    _same(got[1], y[m])
    _same(got[2], y[m][x[m] < 20])
    # One count of the shared mask: the second read writes through the first one's offsets.
    assert [len(r.kernels) for r in exe.reads] == [3, 1] and exe.reads[1].twin is exe.reads[0]
    assert "mask_0_count" in exe.explain() and "mask_1_count" not in exe.explain()


def test_a_key_with_a_slice_beside_the_mask_reads_on_the_host_in_its_stage():
    x = _data((3, 5, 2), "float32")
    m = np.array([True, False, True, True, False])
    exe = _compile(lambda g, a, b: _node(g, "np.negative", [_read(g, a, b, (slice(None), "input"))]), x, m)
    _same(exe(x, m)[0], -x[:, m])
    assert "mask read on the host" in exe.explain()


def test_many_blocks_and_a_looping_scan(monkeypatch):
    """Small blocks: the counts, the carried scan over chunks and the offsets cross block edges."""
    small = dataclasses.replace(backend._tuning(), max_block=16, max_persistent=64, loop_block=16,
                                tile_elems=64, mm_block=16, autotune=False)
    monkeypatch.setattr(backend, "_tuning", lambda: small)
    for shape, k in (((1000,), 1), ((300, 5), 1), ((40, 30), 2)):
        x = _data(shape, "float64")
        m = RNG.random(shape[:k]) < 0.3
        exe = _compile(lambda g, a, b: _read(g, a, b), x, m)
        _same(exe(x, m)[0], x[m])
        assert exe.reads[0].nblocks > 16  # the scan loops


# -- through the tracer: np.nonzero, np.where(c), np.flatnonzero, np.extract --------------------------

def _trace(f, *args):
    nt = pytest.importorskip("numtrace")  # not a dependency of this package
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(f, args, backend="triton")


@pytest.mark.parametrize("name", ["nonzero", "where", "flatnonzero", "extract", "mask_then_ops"])
def test_traced_mask_functions_follow_new_counts_and_sizes(name):
    funcs = {
        "nonzero": lambda x: np.nonzero(x > 0.2),
        "where": lambda x: np.where(x < 0),
        "flatnonzero": lambda x: np.flatnonzero(x > 0.5),
        "extract": lambda x: np.extract(x > 0, x * 2.0),
        "mask_then_ops": lambda x: (np.abs(x[x > 0]) + 1.0, x[x > 0].max(initial=-1.0)),
    }
    f = funcs[name]
    traced = _trace(f, RNG.standard_normal((5, 4)))
    for shape in ((5, 4), (1, 4), (13, 4), (0, 4)):
        for x in (RNG.standard_normal(shape), np.zeros(shape), np.ones(shape)):
            got, expected = traced(x), f(x)
            for a, b in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
                _same(np.asarray(a), np.asarray(b))
    text = traced.explain()
    assert "mask_0_count" in text and "whole graph runs on the host" not in text
