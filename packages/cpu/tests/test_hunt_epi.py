"""Hunt (branch epi): the packed products' epilogue (bias, residual, ReLU) on the tile's registers
(nt_gemm.h nt_gemm_epi_on). Differential checks of the fused ops against the same product without
an epilogue followed by NumPy's ops (bit for bit), at every panel remainder N = 1..33 (and two
panels), partial row blocks, K past one block, every op order the fuser makes, special values (NaN
payloads, -NaN, inf, subnormals, signed zeros), bias/residual placed against a guard page (reads
past N would fault), residual views (row strides, negative strides, broadcast rows), stacked
products, NumPy's FP warnings, 1/2/3 threads, and the avx2/baseline builds in a child process."""

import ctypes
import itertools
import mmap
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from numtrace_cpu import get_num_threads, set_num_threads
from test_packed import _compile

pytestmark = pytest.mark.usefixtures("numpy_quiet")

NAMES = ("bias", "residual", "relu", "relu_zero_first")


def _orders(max_len=4):
    """Every op sequence the fuser takes (_packed_epilogue): up to 4 ops, one bias and one residual
    at most."""
    out = []
    for n in range(1, max_len + 1):
        for seq in itertools.product(NAMES, repeat=n):
            if seq.count("bias") <= 1 and seq.count("residual") <= 1:
                out.append(seq)
    return out


def _ibits(dtype):
    return np.int32 if np.dtype(dtype) == np.float32 else np.int64


def _special(rng, shape, dtype):
    """Normals with NaN (+, -, payloads), infinities, signed zeros and subnormals of both signs."""
    dtype = np.dtype(dtype)
    v = rng.standard_normal(shape).astype(dtype)
    flat = v.reshape(-1)
    tiny = np.finfo(dtype).smallest_subnormal
    n = max(1, flat.size // 9)
    specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, tiny * 3, -tiny * 5]
    for s in specials:
        flat[rng.integers(0, flat.size, n)] = s
    ub = flat.view(np.uint32 if dtype == np.float32 else np.uint64)
    for payload in ((0x7FC01234, 0xFFA00042) if dtype == np.float32
                    else (0x7FF8000000001234, 0xFFF4000000000042)):   # quiet +NaN, signaling -NaN
        ub[rng.integers(0, flat.size, n)] = payload
    return v


def _run(exe, x, w, order, b, r, source="constant"):
    """exe(x, [w], then the bias and residual in the order the graph added them)."""
    args = [x] + ([] if source == "constant" else [w])
    args += [b if name == "bias" else r for name in order if name in ("bias", "residual")]
    (got,) = exe(*args)
    return got


def _plain(x, w, dtype, source="constant"):
    """The packed product alone, as the same kernel computes it (a product without an epilogue may
    take another kernel): its epilogue adds a +0 bias, which keeps every bit of h (NaN payloads too)
    but a -0 sum's sign. A -0 sum needs an underflowing negative product (an FMA of it into +0);
    these tests' operands have none."""
    exe = _compile(x.shape, w, dtype, ("bias",), source=source)
    return _run(exe, x, w, ("bias",), np.zeros(w.shape[1], dtype), None, source).copy()


def _apply(h, order, b, r):
    for name in order:
        h = (h + b if name == "bias" else h + r if name == "residual"
             else np.maximum(h, 0) if name == "relu" else np.maximum(0, h))
    return h


def _assert_bits(got, want, msg=""):
    """Same bits; NaN where NumPy's is (which NaN an add of two NaNs keeps varies: docs/cpu.md), and
    a NaN that only one operand carries keeps its bits (checked by the caller where it matters)."""
    assert got.shape == want.shape and got.dtype == want.dtype, msg
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=msg)
    ib = _ibits(want.dtype)
    np.testing.assert_array_equal(got[~nan].view(ib), want[~nan].view(ib), err_msg=msg)


def _operands(rng, m, k, n, dtype, special_x=True):
    w = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((m, k)).astype(dtype)
    if special_x and m > 2:
        x[m // 2] = 0.0           # sums of +0: the ReLUs' ties and the adds' signed zeros
        x[1, 0] = np.inf          # a row of infinities (and NaN where w is 0)
        w[0, : n // 2] = 0.0
    if special_x and m > 4:
        x[3, k // 2] = np.nan
    return x, w


@pytest.fixture(params=[1, 2, 3], ids=["t1", "t2", "t3"])
def nthreads(request):
    old = get_num_threads()
    set_num_threads(request.param)
    yield request.param
    set_num_threads(old)


# ---------------------------------------------------------------- every panel remainder, bit for bit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mk", [(2, 7), (9, 40), (7, 300)], ids=str)
def test_every_panel_remainder_bits(dtype, mk, nthreads):
    """N = 1..33 and two panels +-1: half tiles, partial full tiles, the bias vectors loaded once."""
    m, k = mk
    orders = [("bias", "residual", "relu"), ("relu_zero_first", "bias", "relu", "residual")]
    for n in list(range(1, 34)) + [47, 63, 64, 65]:
        rng = np.random.default_rng(1000 * m + 10 * k + n)
        x, w = _operands(rng, m, k, n, dtype)
        plain = _plain(x, w, dtype)
        b, r = _special(rng, (n,), dtype), _special(rng, (m, n), dtype)
        for order in orders:
            exe = _compile(x.shape, w, dtype, order, source="constant")
            got = _run(exe, x, w, order, b, r)
            _assert_bits(got, _apply(plain, order, b, r), f"n={n} {order}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(13, 300, 20), (9, 33, 10), (3, 5, 40)], ids=str)
def test_every_op_order_bits(dtype, mkn):
    """Every order of up to 4 ops (190 of them) against NumPy's ops on the plain product."""
    m, k, n = mkn
    rng = np.random.default_rng(m + k + n)
    x, w = _operands(rng, m, k, n, dtype)
    plain = _plain(x, w, dtype)
    b, r = _special(rng, (n,), dtype), _special(rng, (m, n), dtype)
    for order in _orders():
        exe = _compile(x.shape, w, dtype, order, source="constant")
        got = _run(exe, x, w, order, b, r)
        _assert_bits(got, _apply(plain, order, b, r), str(order))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_keeps_nan_bits_and_zero_signs(dtype):
    """ReLU of NaN payloads / -NaN keeps the NaN's bits (np.maximum returns the NaN operand); max(h,
    0) of -0 and negative subnormals is +0; max(0, h) of -0 is -0 (the second operand wins ties)."""
    m, k, n = 4, 3, 37
    ib = _ibits(dtype)
    x = np.zeros((m, k), dtype)
    w = np.ones((k, n), dtype)
    b = np.zeros(n, dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    vals = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 1.0, -1.0], dtype)
    b[: len(vals)] = vals
    ub = b.view(np.uint32 if dtype == np.float32 else np.uint64)
    ub[10:13] = ((0x7FC01234, 0xFFFFFFFF, 0x7F800001) if dtype == np.float32      # payload, -NaN all
                 else (0x7FF8000000001234, 0xFFFFFFFFFFFFFFFF, 0x7FF0000000000001))   # bits, sNaN
    r = np.broadcast_to(-0.0, (m, n)).astype(dtype)
    for order in [("bias", "relu"), ("bias", "relu_zero_first"), ("bias", "residual", "relu_zero_first"),
                  ("bias", "relu_zero_first", "residual", "relu")]:
        exe = _compile(x.shape, w, dtype, order, source="constant")
        got = _run(exe, x, w, order, b, r)
        with np.errstate(all="ignore"):
            want = _apply(x @ w, order, b, r)
        # no two-NaN adds here: the bits must match exactly, NaNs included (sNaN quieted as NumPy)
        np.testing.assert_array_equal(got.view(ib), want.view(ib), err_msg=str(order))


# ---------------------------------------------------------------- guard pages: no read past N


_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)


def _guarded(nbytes):
    """A writable buffer whose last byte is right before a PROT_NONE page (a read past it faults)."""
    pages = (nbytes + _PAGE - 1) // _PAGE + 1
    mm = mmap.mmap(-1, (pages + 1) * _PAGE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    assert _libc.mprotect(ctypes.c_void_p(addr + pages * _PAGE), _PAGE, 0) == 0
    start = pages * _PAGE - nbytes
    return mm, start


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_and_residual_against_a_guard_page(dtype):
    """Bias and residual end at a guard page (N = 1..33, 63, 65): a vector load past column N-1 of
    the bias or the residual's last row would fault; the tiles' lanes past N are never stored."""
    isz = np.dtype(dtype).itemsize
    keep = []
    for n in list(range(1, 34)) + [63, 65]:
        for m in (2, 5, 9):
            rng = np.random.default_rng(n * 7 + m)
            x, w = _operands(rng, m, 40, n, dtype, special_x=False)
            mm_b, ob = _guarded(n * isz)
            mm_r, orr = _guarded(m * n * isz)
            keep += [mm_b, mm_r]
            b = np.frombuffer(mm_b, dtype, count=n, offset=ob)
            r = np.frombuffer(mm_r, dtype, count=m * n, offset=orr).reshape(m, n)
            b[:] = rng.standard_normal(n)
            r[:] = rng.standard_normal((m, n))
            plain = _plain(x, w, dtype)
            for order in [("bias", "residual", "relu"), ("residual", "bias")]:
                exe = _compile(x.shape, w, dtype, order, source="constant")
                _assert_bits(_run(exe, x, w, order, b, r), _apply(plain, order, b, r), f"{n} {m}")
            del b, r


# ---------------------------------------------------------------- residual layouts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_residual_views(dtype, nthreads):
    """Residual rows a step apart, reversed rows, one broadcast row (stride 0), M == 1, and a batched
    3-D input whose residual is a 3-D view."""
    rng = np.random.default_rng(5)
    k, n = 70, 37
    w = rng.standard_normal((k, n)).astype(dtype)
    order = ("bias", "residual", "relu")
    for m in (2, 9, 17):   # (M == 1 is a GEMV: see the 3-D (1, 1, K) below)
        x = rng.standard_normal((m, k)).astype(dtype)
        b = _special(rng, (n,), dtype)
        plain = _plain(x, w, dtype)
        exe = _compile(x.shape, w, dtype, order, source="constant")
        big = _special(rng, (2 * m + 1, 2 * n + 3), dtype)
        views = [big[:2 * m:2, 1:n + 1], big[:m, 3:n + 3], big[::-2, :n][:m], big[m::-1, :n][:m],
                 np.broadcast_to(big[0, :n], (m, n))]
        for r in views:
            got = _run(exe, x, w, order, b, r)
            _assert_bits(got, _apply(plain, order, b, r), f"m={m} strides={r.strides}")
    for lead in ((3, 5), (1, 1), (4, 1)):
        x3 = rng.standard_normal(lead + (k,)).astype(dtype)
        exe = _compile(x3.shape, w, dtype, order, source="constant")
        plain = _plain(x3, w, dtype)
        s, t = lead
        rows = _special(rng, (2 * s * t + 1, 2 * n + 3), dtype)
        b = _special(rng, (n,), dtype)
        # views whose rows collapse to one step (others are not the kernels' layout: a fallback)
        views = [rows[: 2 * s * t : 2, :n].reshape(lead + (n,)), rows[: s * t, 3:n + 3].reshape(lead + (n,)),
                 rows[::-2, 1:n + 1][: s * t].reshape(lead + (n,)), np.broadcast_to(rows[0, :n], lead + (n,))]
        for r in views:
            assert not r.flags.owndata and r.base is not None
            _assert_bits(_run(exe, x3, w, order, b, r), _apply(plain, order, b, r), f"{lead} {r.strides}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("source", ["state", "runtime"])
def test_sources_bits(dtype, source, nthreads):
    """Module-state and run-time weights take the same epilogue (runtime: enough rows to pack)."""
    rng = np.random.default_rng(11)
    for m, k, n in [(64, 300, 33), (70, 17, 10), (65, 40, 65)]:
        x, w = _operands(rng, m, k, n, dtype)
        plain = _plain(x, w, dtype, source)
        b, r = _special(rng, (n,), dtype), _special(rng, (m, n), dtype)
        for order in [("bias", "residual", "relu"), ("residual", "relu_zero_first", "bias", "relu")]:
            exe = _compile(x.shape, w, dtype, order, source=source)
            got = _run(exe, x, w, order, b, r, source)
            _assert_bits(got, _apply(plain, order, b, r), f"{m, k, n} {order}")


# ---------------------------------------------------------------- NumPy's FP warnings


def _warned(fn):
    with warnings.catch_warnings(record=True) as rec, np.errstate(all="warn"):
        warnings.simplefilter("always")
        out = fn()
    return out, sorted({(w.category.__name__, str(w.message)) for w in rec})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 16, 20, 33])
def test_epilogue_fp_warnings_are_numpys(dtype, n):
    """Overflow of a bias add and inf - inf in a residual add warn as NumPy's adds do; the tile's
    lanes past N (their +0 adds) raise nothing."""
    big = np.finfo(dtype).max
    rng = np.random.default_rng(n)
    m, k = 9, 3
    x = np.ones((m, k), dtype)
    w = np.full((k, n), big / 4, dtype)
    b = np.zeros(n, dtype)
    r = np.zeros((m, n), dtype)
    order = ("bias", "residual", "relu")
    exe = _compile(x.shape, w, dtype, order, source="constant")
    cases = {
        "none": (np.zeros((m, k), dtype), b, r),
        "overflow": (x, np.full(n, big, dtype), r),
        "invalid": (x * 8, b, np.full((m, n), -np.inf, dtype)),   # x @ w = inf (overflow) then inf - inf
        "specials": (x, _special(rng, (n,), dtype), _special(rng, (m, n), dtype)),
    }
    for name, (xx, bb, rr) in cases.items():
        got, wgot = _warned(lambda xx=xx, bb=bb, rr=rr: _run(exe, xx, w, order, bb, rr).copy())
        want, wwant = _warned(lambda xx=xx, bb=bb, rr=rr: _apply(xx @ w, order, bb, rr))
        _assert_bits(got, want, name)
        assert wgot == wwant, name


# ---------------------------------------------------------------- other builds (child process)

_ISA_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import test_hunt_epi as t
for dtype in (np.float32, np.float64):
    for n in list(range(1, 34)) + [63, 65]:
        for m, k in ((2, 7), (9, 300)):
            rng = np.random.default_rng(n + m)
            x, w = t._operands(rng, m, k, n, dtype)
            plain = t._plain(x, w, dtype)
            b, r = t._special(rng, (n,), dtype), t._special(rng, (m, n), dtype)
            for order in (("bias", "residual", "relu"), ("relu_zero_first", "bias", "relu", "residual")):
                exe = t._compile(x.shape, w, dtype, order, source="constant")
                t._assert_bits(t._run(exe, x, w, order, b, r), t._apply(plain, order, b, r), f"{n} {order}")
from numtrace_cpu.isa import blocks
print("ok", blocks.__name__)
"""


@pytest.mark.parametrize("build", ["avx2", "baseline"])
def test_other_builds(build, tmp_path):
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", _ISA_CHILD, here], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"ok numtrace_cpu.blocks_{build}", done.stdout


# ---------------------------------------------------------------- threads split the rows and panels


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_split_units_bits(dtype):
    """Enough rows and panels for 2 and 3 threads to split them: the same bits as 1 thread, which
    are the plain product's then NumPy's ops."""
    rng = np.random.default_rng(21)
    old = get_num_threads()
    try:
        for m, k, n in [(257, 300, 65), (130, 600, 33), (61, 40, 200)]:
            x, w = _operands(rng, m, k, n, dtype)
            b, r = _special(rng, (n,), dtype), _special(rng, (m, n), dtype)
            order = ("residual", "relu_zero_first", "bias", "relu")
            for threads in (1, 2, 3):
                set_num_threads(threads)
                plain = _plain(x, w, dtype)
                got = _run(_compile(x.shape, w, dtype, order, source="constant"), x, w, order, b, r)
                _assert_bits(got, _apply(plain, order, b, r), f"{m, k, n} threads={threads}")
    finally:
        set_num_threads(old)


# ---------------------------------------------------------------- traced programs end to end


def _close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 2e-4 if np.dtype(dtype) == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_traced_stacks_and_heads(dtype, nthreads):
    """Traced programs whose packed products take an epilogue: a batch matmul with bias and residual,
    attention's head products plus a mask (a residual), a linear layer with module-like constant
    weights; new inputs of other values, checked against NumPy."""
    nt = pytest.importorskip("numtrace")   # the frontend traces (tests_cpu runs without it)

    rng = np.random.default_rng(2)
    w_const = rng.standard_normal((48, 33)).astype(dtype)
    bias_c = rng.standard_normal(33).astype(dtype)

    def linear(x, r):
        return np.maximum(r + (x @ w_const + bias_c), 0)

    def bmm(a, bb, bias, r):
        return np.maximum(0, a @ bb + bias) + r

    def heads(q, k, mask):
        s = q @ np.swapaxes(k, -1, -2)
        return np.maximum(s + mask, 0)

    def normal(*shapes):
        return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)

    progs = [
        (linear, lambda: normal((70, 48), (70, 33))),
        (bmm, lambda: normal((3, 40, 20), (3, 20, 17), 17, (3, 40, 17))),
        (heads, lambda: normal((2, 3, 37, 16), (2, 3, 37, 16), (2, 3, 37, 37))),
    ]
    for (fn, make), ops in zip(progs, (3, 3, 2)):
        traced = nt.trace(fn, make(), backend="cpu", check_trace=False)
        for _ in range(2):
            args = make()
            _close(traced(*args), fn(*args), dtype)
        sig = list(traced.stats()["signatures"].values())
        assert [(s["packed_matmuls"], s["packed_epilogue_ops"], s["fallbacks"]) for s in sig] == [(1, ops, 0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw_k", [(3, 3, 3), (4, 6, 3), (6, 13, 2), (5, 35, 3), (9, 9, 2)], ids=str)
def test_traced_gathered_conv_with_four_ops(dtype, hw_k, nthreads):
    """An im2col conv (weight @ cols of window views, as numtrace.nn.Conv2d) followed by a bias over
    the output pixels, ReLU, a residual and ReLU again: the gathered product takes all four ops, at
    N = out_h * out_w = 1, 8, 55, 99, 64 (panel remainders), with NaN/inf in the inputs."""
    nt = pytest.importorskip("numtrace")
    h, w_, k = hw_k
    cin, cout = 3, 19   # cout: enough rows for a run-time B to be packed (RUNTIME_MIN_ROWS)
    rng = np.random.default_rng(h * w_ + k)
    wm = rng.standard_normal((cout, cin * k * k)).astype(dtype)
    oh, ow = h - k + 1, w_ - k + 1

    def conv(x, r, b):
        patches = [x[:, :, i:i + oh, j:j + ow] for i in range(k) for j in range(k)]
        cols = np.stack(patches, axis=2).reshape(-1, cin * k * k, oh * ow)
        return np.maximum(0, np.maximum(wm @ cols + b, 0) + r)

    def args():
        shapes = ((2, cin, h, w_), (2, cout, oh * ow), oh * ow)
        return tuple(rng.standard_normal(s).astype(dtype) for s in shapes)

    traced = nt.trace(conv, args(), backend="cpu", check_trace=False)
    x, r, b = args()
    x[0, 0, 0, 0] = np.nan
    x[1, 1, 1, 1] = -np.inf
    r[0, 1, 0] = -np.inf
    b[-1] = np.inf
    got, want = traced(x, r, b), conv(x, r, b)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-4 if dtype == np.float32 else 1e-11, atol=1e-5)
    ok = ~np.isnan(want)   # (a NaN's sign is not NumPy's to promise: its BLAS sums in its own order)
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    sig = list(traced.stats()["signatures"].values())
    assert [(s["packed_matmuls"], s["packed_epilogue_ops"], s["packed_gathered_runs"] > 0)
            for s in sig] == [(1, 4, True)]
