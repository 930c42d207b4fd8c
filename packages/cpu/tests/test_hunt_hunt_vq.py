"""Hunt in the quiet NT_GT/NT_LT (a NaN operand replaced by -inf / +inf in its bits) and exp's three
chunk paths (nt_vmath.h): exp at the |x| < 708 edge, the overflow and underflow limits, -inf and NaN
in otherwise clean chunks, at every part of a chunk (body, chunk boundary, padded tail), values and
the flags of a call that is not rerun; integer operands whose bits read as a float NaN through the
compares, on the interpreter and in generated kernels; and the flags of a np.where branch that is
not selected."""

from __future__ import annotations

import numpy as np
import pytest
from numtrace_ir import Graph, registry, testing
from numtrace_ir.registry import Sample
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)


def _exp(x):
    graph = testing.build_graph(registry.get("np.exp"), Sample((x,), {}))
    with np.errstate(all="ignore"):
        (got,) = _compiled(graph, [testing.type_of(x)])(x)
    return got


def _nan(dtype, sign, payload):
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    top = 0x7FF8000000000000 if u.itemsize == 8 else 0x7FC00000
    return np.array([top | payload | (sign << (8 * u.itemsize - 1))], u).view(dtype)[0]


_EXP_EDGES = [707.999999, 708.0, np.nextafter(708.0, 0), -708.0, np.nextafter(-708.0, 0), 709.78,
              709.782712893384, 709.79, -745.13, -745.1332191019412, -745.14, -np.inf, np.inf, 88.72, 88.73,
              -103.97, -104.0, 1e-310, -0.0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_exp_edges_anywhere_in_a_chunk_leave_every_lane_its_own_value(dtype):
    """Each edge value (and NaNs with payloads) at the first lane, the chunk boundary (255/256), the
    first padded-tail lane and the last lane of clean data: its own lane is exp of it alone (within
    the ulp bound of NumPy's, the same NaN), and every other lane is what the clean data gives, bit
    for bit, whichever of the three chunk paths ran."""
    rng = np.random.default_rng(3)
    specials = np.array([dtype(v) for v in _EXP_EDGES] + [_nan(dtype, 0, 77), _nan(dtype, 1, 3)], dtype)
    alone = np.concatenate([_exp(specials[i:i + 1]) for i in range(len(specials))])
    with np.errstate(all="ignore"):
        want = np.exp(specials)
    finite = np.isfinite(want) & (want != 0)
    np.testing.assert_array_equal(np.isnan(alone), np.isnan(want))
    np.testing.assert_array_equal(alone[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    assert (np.abs(alone[finite] - want[finite]) <= 2 * np.spacing(np.abs(want[finite]))).all()
    limit = 700 if dtype == np.float64 else 85
    for n in (17, 273, 529):
        base = (rng.random(n) * 2 * limit - limit).astype(dtype)
        clean = _exp(base)
        for k, v in enumerate(specials):
            for p in sorted({0, min(n - 1, 255), min(n - 1, 256), n - n % 16, n - 1}):
                x = base.copy()
                x[p] = v
                expect = clean.copy()
                expect[p] = alone[k]
                got = _exp(x)
                assert got.tobytes() == expect.tobytes(), f"exp {np.dtype(dtype)} n={n}: {v!r} at {p}"
        x = base.copy()
        x[::3] = -np.inf                          # a masked softmax's lanes
        x[7] = specials[int(rng.integers(len(specials)))]
        expect = clean.copy()
        expect[::3] = 0.0
        expect[7] = _exp(x[7:8])[0]
        assert _exp(x).tobytes() == expect.tobytes(), f"exp {np.dtype(dtype)} n={n}: -inf lanes and {x[7]!r}"


def _exp_writing_an_argument(x):
    """exp(x) beside negative(z) written into z: a call that writes an argument is not rerun through
    NumPy, so its flags are the kernels'."""
    g = Graph()
    t = testing.type_of(x)
    xv, zv = g.add_input("x", t), g.add_input("z", t)
    g.set_outputs([g.create_node("np.exp", [xv]).outputs[0], g.create_node("np.negative", [zv]).outputs[0]])
    return _compiled(g, [t, t], updates={1: 1})


@pytest.mark.parametrize("n", [5, 16, 256, 300])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("mix", [("-inf",), ("-inf", "nan"), ("-inf", "under"), ("-inf", "over"), ("nan",),
                                 ("nan", "under"), ("edge",), ("edge", "-inf")])
def test_exp_flags_of_mixed_chunks_are_numpys(mix, dtype, n):
    """-inf (no flag), NaN (no flag), a finite x that underflows or overflows, and |x| just at 708,
    together in one chunk of clean values: a call not rerun raises what NumPy raises."""
    f64 = dtype == np.float64
    values = {"-inf": -np.inf, "nan": np.nan, "under": -745.14 if f64 else -110.0,
              "over": 709.79 if f64 else 89.0, "edge": 708.0 if f64 else -87.0}
    x = np.full(n, 0.25, dtype)
    for i, what in enumerate(mix):
        x[(i * 7 + 3) % n] = values[what]
        x[-1 - i] = values[what]
    exe = _exp_writing_an_argument(x)
    with np.errstate(all="raise"):
        want, want_raised, expected = testing.fp_reports(lambda: np.exp(x))
        got, got_raised, actual = testing.fp_reports(lambda: exe(x, np.ones_like(x)))
    kind = [r and r.split(" encountered")[0] for r in (want_raised, got_raised)]   # the call names no ufunc
    assert (got, kind[1]) == (want, kind[0]), f"exp of {mix} in {n} {np.dtype(dtype)}"
    if want_raised is None:
        testing.assert_matches_numpy(actual[0], expected, registry.get("np.exp"), (x,))


def _int_specials(dtype, n, rng):
    """Integers whose bits read as a float NaN or infinity of the same width, extremes, small ones."""
    info = np.iinfo(dtype)
    pool = [0, 1, -1, 2, 5, info.max, info.min]
    pool += {8: [0x7FF8000000000001, 0x7FF0000000000001, -0x0007FFFFFFFFFFFF, 0x7FF0000000000000,
                 -0x10000000000000],
             4: [0x7FC00001, 0x7F800001, -0x7FFFFF, 0x7F800000, -0x800000]}.get(np.dtype(dtype).itemsize, [])
    return rng.choice(np.array([p for p in pool if info.min <= p <= info.max], dtype), n)


_INT_OPS = ["np.maximum", "np.minimum", "np.greater", "np.less", "np.greater_equal", "np.less_equal"]


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.int8])
def test_integer_operands_with_nan_bits_compare_as_integers(dtype, mode):
    """The NaN replacement is for float operands only: an integer operand whose bits are a float NaN
    compares (and takes part in maximum, minimum, sign and a compare-masked select) as the integer."""
    rng = np.random.default_rng(11)
    n = 37
    x, y = _int_specials(dtype, n, rng), _int_specials(dtype, n, rng)
    g = Graph()
    t = testing.type_of(x)
    xv, yv = g.add_input("x", t), g.add_input("y", t)
    outs = [g.create_node(name, [xv, yv]).outputs[0] for name in _INT_OPS]
    outs.append(g.create_node("np.sign", [xv]).outputs[0])
    mask = g.create_node("np.less", [yv, xv]).outputs[0]
    outs.append(g.create_node("np.where", [mask, yv, xv]).outputs[0])
    g.set_outputs(outs)
    got = _compiled(g, [t, t], mode)(x, y)
    want = [registry.get(name).reference(x, y) for name in _INT_OPS] + [np.sign(x), np.where(y < x, y, x)]
    for name, w, a in zip(_INT_OPS + ["np.sign", "np.where"], want, got):
        np.testing.assert_array_equal(a, w, err_msg=f"{name} {np.dtype(dtype)} {mode}")
        assert a.dtype == w.dtype


_WHERES = {"sqrt": ("np.sqrt", "np.greater_equal", lambda x, z: np.where(x >= z, np.sqrt(x), z)),
           "reciprocal": ("np.reciprocal", "np.greater", lambda x, z: np.where(x > z, np.reciprocal(x), z))}


def _where(x, branch):
    """np.where(x >= z, np.sqrt(x), z) (or x > z, np.reciprocal(x)) with z zeros: NumPy computes the
    branch of every element, the ones np.where does not select included."""
    op, cmp, _ = _WHERES[branch]
    g = Graph()
    t = testing.type_of(x)
    xv, zv = g.add_input("x", t), g.add_input("z", t)
    computed = g.create_node(op, [xv]).outputs[0]
    mask = g.create_node(cmp, [xv, zv]).outputs[0]
    g.set_outputs(g.create_node("np.where", [mask, computed, zv]).outputs)
    return g, t


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("branch", sorted(_WHERES))
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_where_warns_for_its_unselected_branch_as_numpy(dtype, branch, mode):
    """The flags of the element np.where does not select ('invalid' of sqrt(-1), 'divide by zero' of
    1/0) are reported as NumPy reports them, in the kernel's scalar loop and its vector body."""
    numpy_where = _WHERES[branch][2]
    for x in (np.array([-1.0], dtype), np.array([2.0, 0.5, -1.0, 0.0], dtype),
              np.r_[np.ones(37), -1.0, 0.0, np.ones(90)].astype(dtype)):
        z = np.zeros_like(x)
        g, t = _where(x, branch)
        exe = _compiled(g, [t, t], mode)
        for state in ({}, {"all": "raise"}):
            with np.errstate(**state):
                want, want_raised, _ = testing.fp_reports(lambda x=x, z=z: numpy_where(x, z))
                got, got_raised, _ = testing.fp_reports(lambda x=x, z=z, exe=exe: exe(x, z))
            assert (got, got_raised) == (want, want_raised), f"{x} np.errstate({state})"
