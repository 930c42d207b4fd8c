"""Hunt in the small-K product's loop over back-to-back rows (nt_smallk.h: `a @ w` with K <= 8 and a
1-D `w`, rows that lie back to back, element-aligned and apart from the output run a vectorized loop
with K fixed at compile time and restrict pointers; everything else keeps the strided loop).

Checked here: which layouts take that loop (stats()["small_matmul_packed_runs"] and the kernel's
return value) and that they give the strided loop's bits in every ISA build; an output next to or
overlapping `a`'s rows (the restrict test, off by one element either way); two threads splitting a
line mid-row; traced programs around the product (fused passes before and after, an update written
into an input, strided `out=` arrays) against NumPy on both execution paths.

Findings: in the baseline build the vectorized loop keeps the later of two NaNs in a row where the
strided loop keeps the first (xfail below). Not a finding: a zero sum of negative products that
underflow (``-tiny * 0.25``) is -0.0 in the FMA builds (the FMA keeps the exact tiny product), on both
loops as on main; NumPy's sign there depends on its BLAS kernel (-0.0 for float64 K = 5 in C order,
+0.0 for K = 3 or in Fortran order), so only the two loops' agreement is checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_programs import RUNNABLE
from graph_programs import GraphNumpy as _GraphNumpy
from graph_programs import Value as _Value
from numtrace_cpu import isa
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType
from test_codegen import _assert_same_bits, _cache, _compiled  # noqa: F401  (_cache: autouse fixture)

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # NaN, inf and underflow on purpose

DTYPES = [np.dtype("float32"), np.dtype("float64")]


def _at_offset(x: np.ndarray, offset: int) -> np.ndarray:
    """x's values at `offset` bytes into a fresh buffer (not element-aligned when offset is not a
    multiple of the item size)."""
    buf = np.zeros(x.nbytes + offset + 64, np.uint8)
    v = np.frombuffer(buf.data, np.uint8, x.nbytes, offset).view(x.dtype).reshape(x.shape)
    v[...] = x
    return v


def _layout(x: np.ndarray, kind: str) -> np.ndarray:
    """x (batch, rows, K) in layout `kind`, the same values (a broadcast one repeats a row or a batch)."""
    pad = [(0, 0)] * x.ndim
    if kind == "c":
        return x.copy()
    if kind == "fortran":
        return np.asfortranarray(x)
    if kind == "rows_reversed":
        return x[:, ::-1].copy()[:, ::-1]
    if kind == "row_gap":                         # one element between rows
        pad[-1] = (0, 1)
        return np.pad(x, pad)[..., :x.shape[-1]]
    if kind == "batch_gap":                       # rows back to back, batches apart
        pad[1] = (0, 3)
        return np.pad(x, pad)[:, :x.shape[1]]
    if kind == "row_broadcast":                   # 0-stride rows
        return np.broadcast_to(x[:, :1], x.shape)
    if kind == "batch_broadcast":                 # 0-stride batches of back-to-back rows
        return np.broadcast_to(x[:1], x.shape)
    if kind.startswith("offset"):                 # offset<bytes>
        return _at_offset(x, int(kind[6:]))
    raise ValueError(kind)


def _strided(blocks, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a @ w by the strided loop (a copy of a with a gap between its rows)."""
    gapped = _layout(np.ascontiguousarray(a).reshape(-1, 1, a.shape[-1]), "row_gap").reshape(a.shape)
    out = np.empty(a.shape[:-1], a.dtype)
    assert blocks.small_k_matmul(gapped, w, out, 1) is False
    return out


def _assert_close(got: np.ndarray, a: np.ndarray, w: np.ndarray, want: np.ndarray | None = None) -> None:
    """got equals NumPy's a @ w within the rounding of K products and their sum (BLAS may pair or fuse
    them differently), with NaN and infinities where NumPy has them."""
    want = a @ w if want is None else want
    eps = np.finfo(got.dtype).eps
    bound = 4 * a.shape[-1] * eps * (np.abs(a) @ np.abs(w)) + np.finfo(got.dtype).tiny
    finite = np.isfinite(want)
    inf = np.isinf(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[inf], want[inf])
    excess = np.abs(got - want)[finite] - bound[finite]
    assert np.all(excess <= 0), np.max(excess)


def _one_special_per_row(rng, shape, dtype) -> np.ndarray:
    """Normal values with at most one NaN or infinity per row (with two NaNs which one a sum keeps
    depends on the add's operand order: see the xfail below), signed zeros and subnormals."""
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    rows = x.reshape(-1, shape[-1])
    pick = rng.integers(0, shape[-1], len(rows))
    rows[np.arange(len(rows)), pick] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0, tiny, -tiny, 1e30],
                                                           dtype), len(rows))
    return x


# (a's layout, out's layout) -> whether the vectorized loop runs, for a (3, 11, K) a @ w (K > 1).
# float32 at 4 bytes in is element-aligned, float64 there is not; float32 at 2 bytes is not.
LAYOUTS = {
    ("c", "c"): True, ("batch_gap", "c"): True, ("batch_broadcast", "c"): True,
    ("offset4", "c"): "float32", ("offset8", "c"): True, ("offset2", "c"): False,
    ("offset12", "c"): "float32",
    ("fortran", "c"): False, ("rows_reversed", "c"): False, ("row_gap", "c"): False,
    ("row_broadcast", "c"): False,
    ("c", "fortran"): False, ("c", "rows_reversed"): False, ("c", "offset4"): "float32",
    ("c", "offset8"): True, ("c", "offset1"): False,
}


@pytest.mark.parametrize("build", RUNNABLE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_which_layouts_take_the_vectorized_loop_and_their_bits(dtype, build):
    """Every layout of `a` and `out` in LAYOUTS, K 2 to 8: the kernel says whether the vectorized loop
    ran as LAYOUTS expects, and the result is the strided loop's bits (and NumPy's within rounding)."""
    blocks = isa.load(build)
    rng = np.random.default_rng(len(build))
    for k in range(2, 9):
        x = _one_special_per_row(rng, (3, 11, k), dtype)
        w = rng.standard_normal(k).astype(dtype)
        for (a_kind, o_kind), expected in LAYOUTS.items():
            a = _layout(x, a_kind)
            want = _strided(blocks, a, w)
            out = _layout(np.zeros(x.shape[:-1] + (1,), dtype), o_kind)[..., 0]
            packed = blocks.small_k_matmul(a, w, out, 1)
            assert packed is (expected is True or expected == dtype.name), (a_kind, o_kind, k)
            assert np.ascontiguousarray(out).tobytes() == want.tobytes(), (a_kind, o_kind, k)
            _assert_close(out, a, w)


@pytest.mark.parametrize("build", RUNNABLE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_around_the_vector_widths_and_the_k_boundary(dtype, build):
    """1 to 40 back-to-back rows (the vector body and every tail length), K 1 to 8, `w` of shape (K,)
    or (K, 1): the strided loop's bits; K = 9 is not a small-K product."""
    blocks = isa.load(build)
    rng = np.random.default_rng(7)
    for k in range(1, 9):
        w = rng.standard_normal(k).astype(dtype)
        for rows in range(1, 41):
            a = _one_special_per_row(rng, (rows, k), dtype)
            out = np.empty(rows, dtype)
            assert blocks.small_k_matmul(a, w, out, 1) is (rows > 1)
            assert out.tobytes() == _strided(blocks, a, w).tobytes(), (k, rows)
            column = np.empty((rows, 1), dtype)            # a (K, 1) right operand: the same loop
            assert blocks.small_k_matmul(a, w[:, None], column, 1) is (rows > 1)
            assert column.tobytes() == out.tobytes(), (k, rows)
    with pytest.raises(ValueError, match="K, m <= 8"):
        blocks.small_k_matmul(np.ones((4, 9), dtype), np.ones(9, dtype), np.empty(4, dtype), 1)


@pytest.mark.parametrize("build", RUNNABLE)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_sums_of_underflowing_products_match_the_strided_loop(dtype, build):
    """Rows whose products underflow to zero (-tiny * 0.25, one -0.0, one positive tiny product): the
    zero's sign is the strided loop's in every build (-0.0 where an FMA keeps the exact negative
    product; NumPy's sign there varies with its BLAS kernel), K 1 to 8."""
    blocks = isa.load(build)
    tiny = np.finfo(dtype).smallest_subnormal
    for k in range(1, 9):
        x = np.full((37, k), -tiny, dtype)
        x[1::2, 0] = -0.0
        x[2::3, -1] = tiny * 2
        out = np.empty(37, dtype)
        assert blocks.small_k_matmul(x, np.full(k, 0.25, dtype), out, 1)
        assert out.tobytes() == _strided(blocks, x, np.full(k, 0.25, dtype)).tobytes(), k
        assert not out.any()


@pytest.mark.parametrize("build", RUNNABLE)
def test_output_next_to_or_overlapping_a(build):
    """`out` in the same buffer as `a`'s rows: right before them or right after them the loop runs
    (restrict holds), one element into them it does not; out at a's own start (each output written
    after its row is read, rows further on untouched) gives the product."""
    blocks = isa.load(build)
    n, k = 16, 3
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = np.array([0.299, 0.587, 0.114], np.float32)
    want = _strided(blocks, x, w)
    start = 2 * n
    for at, packed in [(start - n, True), (start - n + 1, False), (start + n * k, True),
                       (start + n * k - 1, False), (start, False)]:
        buf = np.zeros(start + n * k + 2 * n, np.float32)
        a = buf[start:start + n * k].reshape(n, k)
        a[...] = x
        out = buf[at:at + n]
        assert blocks.small_k_matmul(a, w, out, 1) is packed, at
        if packed or at == start:
            assert out.tobytes() == want.tobytes(), at


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("k", [1, 3, 8])
def test_two_threads_split_a_line_mid_row(k, dtype):
    """Enough rows for two threads (rows * K >= 2**20), batches of 7 rows apart from each other: the
    split falls inside a line, each half runs the vectorized loop, the bits are one thread's."""
    from numtrace_cpu.isa import blocks
    rng = np.random.default_rng(k)
    lines = ((1 << 20) // (7 * k) + 1) | 1           # an odd count: the half of the rows is mid-line
    assert lines * 7 * k >= 1 << 20 and ((lines * 7 + 1) // 2) % 7
    x = _one_special_per_row(rng, (lines, 7, k), dtype)
    w = rng.standard_normal(k).astype(dtype)
    a = _layout(x, "batch_gap")
    one, two = np.empty(x.shape[:-1], dtype), np.empty(x.shape[:-1], dtype)
    assert blocks.small_k_matmul(a, w, one, 1) and blocks.small_k_matmul(a, w, two, 2)
    assert one.tobytes() == two.tobytes() == _strided(blocks, a, w).tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_baseline_rows_with_two_nans_are_nan_where_the_strided_loops_are(dtype):
    """Which of two NaNs a row keeps is not kept (docs/cpu.md): in the baseline build GCC picks the SSE
    add's operand order per loop, so the vectorized loop keeps the later NaN where the strided loop keeps
    the first, and NumPy's own choice varies with its BLAS kernel. Each row is NaN in both loops."""
    if "baseline" not in RUNNABLE:
        pytest.skip("no baseline build here")
    blocks = isa.load("baseline")
    nan = np.array([np.nan], dtype)
    second = -np.frombuffer((nan.view(f"u{dtype.itemsize}") | 1).tobytes(), dtype)   # another NaN
    x = np.ones((16, 5), dtype)
    x[:, 0], x[:, 1] = nan[0], second[0]
    w = np.ones(5, dtype)
    out = np.empty(16, dtype)
    assert blocks.small_k_matmul(x, w, out, 1)
    assert np.isnan(out).all() and np.isnan(_strided(blocks, x, w)).all()


# -- traced programs --------------------------------------------------------------------------------

GRAY = np.array([0.299, 0.587, 0.114])

PROGRAMS = {
    # a fused pass writes the product's operand (back to back), another reads the product
    "scaled_gray_clipped": lambda np, img, w, g: np.clip(np.matmul(img * 255.0, w), 0.0, 255.0) / 255.0,
    # the product of the input as given, then a pass with a reduction of the same input
    "gray_minus_mean": lambda np, img, w, g: np.matmul(img, w) - img.mean(axis=-1),
    # the product added into an input written in place (updates)
    "accumulate_into_g": lambda np, img, w, g: g + np.matmul(-img, w) * 0.5,
}


def _program(name, examples, mode, updates=None):
    g = Graph()
    ins = [_Value(g, g.add_input(f"x{i}", testing.type_of(a))) for i, a in enumerate(examples)]
    out = PROGRAMS[name](_GraphNumpy(), *ins)
    g.set_outputs([out.v])
    return _compiled(g, [testing.type_of(a) for a in examples], mode, updates)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_traced_programs_around_the_product(program, dtype, threads):
    """Each program with generated kernels and on the interpreter (same bits), against NumPy within
    the product's rounding, for C, Fortran, reversed and (float64) unaligned images; the product runs
    the vectorized loop exactly when its operand's rows lie back to back."""
    rng = np.random.default_rng(len(program))
    img = rng.random((5, 13, 3)).astype(dtype)
    img[0, 1] = [-0.0, np.inf, 1.0]
    w, g0 = GRAY.astype(dtype), rng.random((5, 13)).astype(dtype)
    updates = {0: 2} if program == "accumulate_into_g" else None
    gen, interp = (_program(program, (img, w, g0), mode, updates) for mode in ("sync", "off"))
    images = [img, np.asfortranarray(img), img[:, ::-1].copy()[:, ::-1]]
    if dtype == np.float64:
        images.append(_at_offset(img, 4))
    for x in images:
        want = PROGRAMS[program](np, x, w, g0.copy())
        g_gen, g_interp = g0.copy(), g0.copy()
        (got,) = gen(x, w, g_gen)
        (same,) = interp(x, w, g_interp)
        _assert_same_bits([got, g_gen], [same, g_interp], program)
        np.testing.assert_allclose(got, want, rtol=0, atol=32 * np.finfo(dtype).eps)   # values about 1
        if updates:
            assert np.shares_memory(got, g_gen) and got.tobytes() == g_gen.tobytes()
    # img * 255 and -img are fresh buffers (always back to back); img itself only in C order
    packed = 1 if program == "gray_minus_mean" else len(images)
    for exe in (gen, interp):
        st = exe.stats()
        assert st["small_matmuls"] == 1 and st["small_matmul_packed_runs"] == packed, st


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_product_into_strided_and_overlapping_out_arrays(dtype, threads):
    """A graph whose output is the product itself, into caller `out=` arrays: every other column,
    Fortran order, reversed rows, an unaligned float64 buffer, a contiguous one at an element-aligned
    offset and a view of the input (computed aside): the bits of a fresh output."""
    g = Graph()
    img, w = (_Value(g, g.add_input(n, TensorType(dtype, s))) for n, s in (("img", (6, 9, 3)), ("w", (3,))))
    g.set_outputs([img.node("np.matmul", img, w).v])
    exe = _compiled(g, [TensorType(dtype, (6, 9, 3)), TensorType(dtype, (3,))])
    rng = np.random.default_rng(2)
    x, wv = rng.random((6, 9, 3)).astype(dtype), GRAY.astype(dtype)
    (fresh,) = exe(x, wv)
    _assert_close(fresh, x, wv)
    zeros = np.zeros((6, 9), dtype)
    outs = [np.zeros((6, 18), dtype)[:, ::2], np.asfortranarray(zeros), zeros.copy()[::-1],
            _at_offset(zeros, 4), _at_offset(zeros, dtype.itemsize)]
    for out in outs:
        exe(x, wv, out=[out])
        assert np.ascontiguousarray(out).tobytes() == fresh.tobytes()
    inside = x.copy()
    exe(inside, wv, out=[inside.reshape(-1)[:54].reshape(6, 9)])
    assert inside.reshape(-1)[:54].tobytes() == fresh.tobytes()
    # the vectorized loop: fresh, reversed rows (each line of 9 back to back), the aligned offsets (float32
    # at 4 bytes), the output computed aside
    assert exe.stats()["small_matmul_packed_runs"] == 4 + (dtype == np.float32)
