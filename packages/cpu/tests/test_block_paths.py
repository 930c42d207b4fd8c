"""The fused pass's shortcuts give NumPy's bits exactly: a binary op whose operand is one value over
the block (a constant, or an operand broadcast along the innermost dim) reads it as a scalar; two
float ops whose temporary feeds only the second run as one loop, each op still rounding on its own
(never a fused multiply-add); `where` reads both branches. Special values, both operand orders,
several sizes and layouts, in-place outputs, 1 and 2 threads."""

import itertools
import warnings

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, isa
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType

ARITH = ["np.add", "np.subtract", "np.multiply", "np.divide", "np.maximum", "np.minimum"]
PAIRABLE = ARITH
DTYPES = [np.dtype(d) for d in ("float32", "float64", "int32", "int64", "bool")]
# Every binary op and comparison of the interpreter (nt_opcodes.h's table), in each dtype it computes;
# but scalar_power, whose op takes 0-d operands only (test_scalar_power.py), and power_broadcast, np.power's
# op for an exponent NumPy reads with stride 0 (test_broadcast_power.py).
_CAT_BINARY, _CAT_BINARY_BOOL = 2, 3
EVERY_BINARY = [(f"np.{name}", dt) for name, (_, cat, dts) in isa.OPS.items()
                if cat in (_CAT_BINARY, _CAT_BINARY_BOOL) and name not in ("scalar_power", "power_broadcast")
                for dt in DTYPES if isa.DTYPES[dt] in dts]
# Where NumPy's own loop may be another implementation of the function (its AVX-512 SVML loops):
# equal within float rounding, not bit for bit.
_NOT_EXACT = {"np.power", "np.arctan2"}
# 1 element, a partial block, several blocks, several chunks (threads split those: see _threads).
SIZES = [1, 515, 40_000]


def _values(dtype: np.dtype, n: int, seed: int) -> np.ndarray:
    """Random values with the special ones mixed in: NaN, infinities, signed zeros, subnormals,
    extremes (integer extremes make add/subtract/multiply wrap)."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if dtype.kind == "i":
        x = rng.integers(-1000, 1000, n, endpoint=True).astype(dtype)
    else:
        x = (rng.standard_normal(n) * 10).astype(dtype)
    special = _special(dtype)
    idx = rng.integers(0, n, max(1, n // 7))
    x[idx] = special[rng.integers(0, len(special), len(idx))]
    return x


def _special(dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return np.array([False, True])
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        return np.array([info.min, info.max, 0, -1, 1], dtype)
    info = np.finfo(dtype)
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, info.smallest_subnormal, info.max, -info.max, 1.0],
                    dtype)


def _assert_same_bits(got: np.ndarray, want: np.ndarray, what: str, zeros: bool = True) -> None:
    """Equal values and dtypes, NaN where `want` has NaN, and the sign of every infinity and (zeros)
    zero. maximum/minimum of equal operands give the second, as NumPy's loops on x86 do
    (np.maximum(-0.0, 0.0) is 0.0), whichever of the interpreter's loops runs."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_array_equal(got, want, err_msg=what)
    if want.dtype.kind == "f":
        keep = ~np.isnan(want) & (zeros | (want != 0))
        np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]), err_msg=what)


def _vector_path(name: str, args: list, threads: int) -> np.ndarray:
    """name(*args) with every operand a full array: the interpreter's loop over two arrays, which the
    scalar shortcuts must match bit for bit."""
    full = [np.ascontiguousarray(v) for v in np.broadcast_arrays(*args)]
    exe = _graph([TensorType(v.dtype, v.shape) for v in full], lambda g, a, b: [_op(g, name, a, b)])
    return _run(exe, full, threads)[0]


def _run(exe, inputs, threads: int, out=None):
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with np.errstate(all="ignore"):
            return exe(*inputs, out=out) if out is not None else exe(*inputs)
    finally:
        numtrace_cpu.set_num_threads(before)


def _graph(types, body, updates=None):
    g = Graph()
    ins = [g.add_input(f"x{i}", t) for i, t in enumerate(types)]
    outs = body(g, *ins)
    g.set_outputs(list(outs))
    exe = compile_graph(g, list(types), updates=updates)
    st = exe.stats()
    assert st["fallbacks"] == 0 and st["fused_groups"] == 1, st
    return exe


def _op(g, name, *inputs):
    return g.create_node(name, list(inputs)).output


def _const(g, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


def _ufunc(name: str):
    return getattr(np, name.removeprefix("np."))


def _constants(dtype: np.dtype) -> list:
    if dtype.kind == "f":
        return [0.5, -0.0, float("nan"), float("inf"), -3.0]
    return [3, -2, 0]


def _cases():
    for name, dt in itertools.product(ARITH, DTYPES):
        if name == "np.subtract" and dt == np.bool_:
            continue   # NumPy refuses boolean subtract
        if name == "np.divide" and dt.kind != "f":
            continue   # true division of integers computes in float64: a cast, then the float kernel
        yield name, dt


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("left", [False, True], ids=["array-const", "const-array"])
# Not bool: a Python bool constant with a bool array runs as a NumPy step, not fused.
@pytest.mark.parametrize(("name", "dtype"), [(n, d) for n, d in _cases() if d != np.bool_], ids=str)
def test_constant_operand(name, dtype, left, threads):
    ufunc = _ufunc(name)
    for n, value in itertools.product(SIZES + ([300_000] if threads == 2 else []), _constants(dtype)):
        x = _values(dtype, n, seed=n)

        def body(g, a, v=value):
            return [_op(g, name, *([_const(g, v), a] if left else [a, _const(g, v)]))]
        exe = _graph([TensorType(dtype, (n,))], body)
        with np.errstate(all="ignore"):
            want = ufunc(value, x) if left else ufunc(x, value)
        what = f"{name}({'c, x' if left else 'x, c'}) c={value!r} n={n}"
        c = np.full_like(x, value, dtype=want.dtype)
        xw = x.astype(want.dtype)
        vector = _vector_path(name, [c, xw] if left else [xw, c], threads)
        for layout in (x, testing.noncontiguous(x)):
            (got,) = _run(exe, [layout], threads)
            _assert_same_bits(got, want, what)
            _assert_same_bits(got, vector, what + " (array operands)")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("left", [False, True], ids=["array-scalar", "scalar-array"])
@pytest.mark.parametrize(("name", "dtype"), list(_cases()), ids=str)
def test_broadcast_scalar_operand(name, dtype, left, threads):
    """An operand broadcast along the innermost dim: one value for all (shape () or (1,)), or one
    value per row (shape (rows, 1) against (rows, n)), the same value in every block of a row."""
    ufunc = _ufunc(name)
    rows, n = (2, 160_000) if threads == 2 else (3, 1100)
    x = _values(dtype, rows * n, seed=1).reshape(rows, n)
    scalars = np.concatenate([_special(dtype), _values(dtype, 2, seed=2)])
    for k in range(0, len(scalars) - rows + 1, rows):
        for s in (scalars[k].reshape(()), scalars[k:k + 1], scalars[k:k + rows].reshape(rows, 1)):
            pair = [TensorType(dtype, s.shape), TensorType(dtype, x.shape)]
            exe = _graph(pair if left else pair[::-1], lambda g, a, b: [_op(g, name, a, b)])
            args = [s, x] if left else [x, s]
            with np.errstate(all="ignore"):
                want = ufunc(*args)
            what = f"{name} with {s!r} {'left' if left else 'right'}"
            vector = _vector_path(name, args, threads)
            for layout in (args, [testing.noncontiguous(v) for v in args]):
                (got,) = _run(exe, layout, threads)
                _assert_same_bits(got, want, what)
                _assert_same_bits(got, vector, what + " (array operands)")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize(("first", "second"), list(itertools.product(PAIRABLE, PAIRABLE)))
def test_pairs(first, second, dtype, threads):
    """(x op1 y) op2 z and z op2 (x op1 y), with arrays and constants: the pair loop rounds like
    two ufuncs (x * y + z contracted to an fma would differ in the last bit for many values)."""
    f, s = _ufunc(first), _ufunc(second)
    n = 300_000 if threads == 2 else 2049
    x, y, z = (_values(dtype, n, seed) for seed in (4, 5, 6))
    t = TensorType(dtype, (n,))
    c = np.full_like(x, 0.1)

    def steps(p, q, r, t_right=False):
        """(p first q) second r as two single-instruction passes: the interpreter's unpaired bits."""
        t = _vector_path(first, [p, q], threads)
        return _vector_path(second, [r, t] if t_right else [t, r], threads)
    with np.errstate(all="ignore"):
        cases = {
            "t op z": (lambda g, a, b, c: [_op(g, second, _op(g, first, a, b), c)], s(f(x, y), z),
                       steps(x, y, z), f(x, y)),
            "z op t": (lambda g, a, b, c: [_op(g, second, c, _op(g, first, a, b))], s(z, f(x, y)),
                       steps(x, y, z, t_right=True), f(x, y)),
            "(x op 0.1) op z": (lambda g, a, b, c: [_op(g, second, _op(g, first, a, _const(g, 0.1)), c)],
                                s(f(x, dtype.type(0.1)), z), steps(x, c, z), f(x, dtype.type(0.1))),
            "z op (0.1 op y)": (lambda g, a, b, c: [_op(g, second, c, _op(g, first, _const(g, 0.1), b))],
                                s(z, f(dtype.type(0.1), y)), steps(c, y, z, t_right=True),
                                f(dtype.type(0.1), y)),
            # t read twice: not a pair, both instructions run and t stays right for its second reader.
            "t read twice": (lambda g, a, b, c: [_op(g, "np.add", _op(g, second, _op(g, first, a, b), c),
                                                     _op(g, first, a, b))],
                             np.add(s(f(x, y), z), f(x, y)), None, f(x, y)),
        }
    for what, (body, want, unpaired, _t_values) in cases.items():
        exe = _graph([t, t, t], body)
        for args in ([x, y, z], [testing.noncontiguous(v) for v in (x, y, z)]):
            (got,) = _run(exe, args, threads)
            _assert_same_bits(got, want, f"{first}/{second} {what}")
            if unpaired is not None:
                _assert_same_bits(got, unpaired, f"{first}/{second} {what} (unpaired)")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
def test_in_place_update_chain(dtype, threads):
    """SGD with momentum written in place (m = m * 0.9 + g; w = w - 0.01 * m): pairs whose outputs
    are the inputs' own memory."""
    n = 300_001 if threads == 2 else 33_333
    t = TensorType(dtype, (n,))

    def body(g, w, gr, m):
        m2 = _op(g, "np.add", _op(g, "np.multiply", m, _const(g, 0.9)), gr)
        return [_op(g, "np.subtract", w, _op(g, "np.multiply", _const(g, 0.01), m2)), m2]
    exe = _graph([t, t, t], body, updates={0: 0, 1: 2})
    w, gr, m = (_values(dtype, n, seed) for seed in (7, 8, 9))
    with np.errstate(all="ignore"):
        m_want = m * dtype.type(0.9) + gr
        w_want = w - dtype.type(0.01) * m_want
    for _ in range(2):   # the second call starts from the first call's results
        got_w, got_m = _run(exe, [w, gr, m], threads)
        _assert_same_bits(got_m, m_want, "m")
        _assert_same_bits(got_w, w_want, "w")
        w, m = got_w.copy(), got_m.copy()
        with np.errstate(all="ignore"):
            m_want = m * dtype.type(0.9) + gr
            w_want = w - dtype.type(0.01) * m_want


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_where_branches(dtype, threads):
    """where() with array, constant and broadcast branches and special values in both."""
    n = 300_000 if threads == 2 else 1537
    a, b = _values(dtype, n, 10), _values(dtype, n, 11)
    cond = np.random.default_rng(12).random(n) < 0.5
    c0 = _constants(dtype)[0]
    s = _values(dtype, 1, 13)
    tc, t, ts = TensorType(np.dtype(bool), (n,)), TensorType(dtype, (n,)), TensorType(dtype, (1,))
    cases = [
        (lambda g, c, x, y, z: [_op(g, "np.where", c, x, y)], np.where(cond, a, b)),
        (lambda g, c, x, y, z: [_op(g, "np.where", c, _const(g, c0), y)], np.where(cond, c0, b)),
        (lambda g, c, x, y, z: [_op(g, "np.where", c, x, z)], np.where(cond, a, s)),
    ]
    for body, want in cases:
        exe = _graph([tc, t, t, ts], body)
        for args in ([cond, a, b, s], [testing.noncontiguous(v) for v in (cond, a, b, s)]):
            with warnings.catch_warnings():
                (got,) = _run(exe, args, threads)
            _assert_same_bits(got, want, "where")


@pytest.mark.parametrize("left", [False, True], ids=["array-scalar", "scalar-array"])
@pytest.mark.parametrize(("name", "dtype"), EVERY_BINARY, ids=str)
def test_every_binary_op_with_a_scalar_operand(name, dtype, left):
    """Each binary op and comparison with one operand of shape () runs its scalar-operand loop
    (nt_loops.h), which gives the bits of its loop over two arrays, and NumPy's result."""
    ufunc = _ufunc(name)
    n = 515
    x = _values(dtype, n, seed=3)
    if name in ("np.left_shift", "np.right_shift"):
        x = x % (8 * dtype.itemsize + 3) - 2   # counts in and out of range, negative ones too
    pair = [TensorType(dtype, ()), TensorType(dtype, (n,))]
    exe = _graph(pair if left else pair[::-1], lambda g, a, b: [_op(g, name, a, b)])
    for s in np.concatenate([_special(dtype), _values(dtype, 3, seed=4)]):
        s = np.array(s, dtype)
        args = [s, x] if left else [x, s]
        what = f"{name} with {s!r} {'left' if left else 'right'}"
        with np.errstate(all="ignore"):
            want = ufunc(*args)
        (got,) = _run(exe, args, 1)
        _assert_same_bits(got, _vector_path(name, args, 1), what + " (array operands)")
        if name in _NOT_EXACT:
            np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, err_msg=what)
        else:
            _assert_same_bits(got, want, what)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
def test_fmod_is_fused_and_exact(dtype):
    """np.fmod of floats is an interpreter op (one line of nt_opcodes.h): fused, no NumPy fallback,
    and NumPy's bits (fmod is exact), special values and signed zeros included."""
    n = 2049
    x, y = _values(dtype, n, seed=14), _values(dtype, n, seed=15)
    t = TensorType(dtype, (n,))
    exe = _graph([t, t], lambda g, a, b: [_op(g, "np.fmod", a, b), _op(g, "np.fmod", a, _const(g, -2.5))])
    with np.errstate(all="ignore"):
        want = np.fmod(x, y), np.fmod(x, dtype.type(-2.5))
    for args in ([x, y], [testing.noncontiguous(v) for v in (x, y)]):
        got = _run(exe, args, 1)
        _assert_same_bits(got[0], want[0], "fmod(x, y)")
        _assert_same_bits(got[1], want[1], "fmod(x, -2.5)")
