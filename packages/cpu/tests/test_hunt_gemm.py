"""Hunt of merge11's packed-kernel changes (nt_gemm.h, packed.pxi): stacks of head views run at a table of
per-product offsets cached per layout (tblock), panels of at most one vector of columns on half tiles,
a stack's B of exactly one vector's columns read where it lies, and single products whose rows split
over the team (w3half). Every check: NumPy's values within the products' rounding, and the bits of the
same product on contiguous copies (or of the same columns in a full panel, or of one thread)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graph_programs import RUNNABLE, compiled_both, numpy_outputs
from numtrace_cpu import compile_graph, get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_packed import _assert_close, _call, _compile, _expected, _op
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

MR = blocks.GEMM_MICRO_TILE[0]


def _nr(dtype):
    return blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2]


def _special(a):
    """`a` with -0.0, NaN and -inf sprinkled in (a copy)."""
    a = a.copy()
    a.flat[::23] = -0.0
    a.flat[5::211] = np.nan
    a.flat[7::307] = -np.inf
    return a


def _stack_exe(a_shape, b_shape, dtype, resid):
    """a @ b (a stack of products), then + r of the product's shape when `resid`."""
    t = np.dtype(dtype)
    g = Graph()
    a = g.add_input("a", TensorType(t, a_shape))
    b = g.add_input("b", TensorType(t, b_shape))
    out = _op(g, "np.matmul", a, b)
    if resid:
        out = _op(g, "np.add", out, g.add_input("r", TensorType(t, out.type.shape)))
    g.set_outputs([out])
    exe = compile_graph(g, [v.type for v in g.inputs])
    assert exe.stats()["packed_matmuls"] == 1 and exe.stats()["packed_epilogue_ops"] == int(resid)
    return exe


def _layout(name, make, shape):
    """An array of `shape` (B, H, R, C) laid out as `name` says, its values from make(shape)."""
    b, h, r, c = shape
    if name == "contig":
        return make((b, h, r, c))
    if name == "heads":        # (B, R, H * C) seen as (B, H, R, C): leading dims do not merge
        return make((b, r, h, c)).transpose(0, 2, 1, 3)
    if name == "heads_pad":    # the same, each head's columns one element past a padded row's start
        return make((b, r, h, c + 3))[..., 1:c + 1].transpose(0, 2, 1, 3)
    if name == "hb":           # batch and heads swapped in memory
        return make((h, b, r, c)).transpose(1, 0, 2, 3)
    if name == "neg":          # both leading dims reversed
        return make((b, h, r, c))[::-1, ::-1]
    if name == "neg_heads":
        return make((b, r, h, c)).transpose(0, 2, 1, 3)[:, ::-1]
    if name == "bcast_b":      # 0-stride batch dim
        return np.broadcast_to(make((1, h, r, c)), (b, h, r, c))
    if name == "bcast_h":      # 0-stride heads (k shared by every head)
        return np.broadcast_to(make((b, 1, r, c)), (b, h, r, c))
    raise KeyError(name)


LAYOUTS = ["contig", "heads", "heads_pad", "hb", "neg", "neg_heads", "bcast_b", "bcast_h"]


def _check_stack(exe, ins, dtype):
    """exe(*ins) against NumPy (within rounding) and, bit for bit, against exe on contiguous copies
    (one product step apart, no table). The count of runs at a table of offsets, before and after."""
    before = exe.stats()["packed_stack_offset_runs"]
    (got,) = exe(*ins)
    tabled = exe.stats()["packed_stack_offset_runs"] - before
    (flat,) = exe(*(np.ascontiguousarray(v) for v in ins))
    assert got.tobytes() == flat.tobytes()
    a, b = ins[0], ins[1]
    want = a @ b + (ins[2] if len(ins) > 2 else 0)
    n, k = b.shape[-1], b.shape[-2]
    bound = np.ones((k, n), dtype) * np.max(np.abs(np.nan_to_num(b, nan=0, posinf=0, neginf=0)))
    _assert_close(got.reshape(-1, n), want.reshape(-1, n), np.nan_to_num(a, nan=0).reshape(-1, k), bound,
                  dtype,
                  None if len(ins) < 3 else np.nan_to_num(ins[2], nan=0).reshape(-1, n))
    return tabled


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bh", [(2, 3), (3, 100)], ids=str)   # 300 products: more than one team job
def test_offset_table_follows_every_layout_of_one_step(dtype, bh, threads):
    """One product step called with the same shapes at layout after layout (the table of offsets is
    cached per layout: a stale table would read another layout's products): head views, padded
    heads, swapped batch and heads, reversed leading dims, 0-stride batch or heads (k broadcast),
    a residual of its own layout; then the first layout again. Narrow (one vector, half tile, read in
    place) and odd N, K across the k-blocking."""
    b, h = bh
    nr = _nr(dtype)
    rng = np.random.default_rng(b * h)

    def make(shape):
        return _special(rng.standard_normal(shape).astype(dtype))

    for m, k, n in [(9, 257, nr // 2), (MR + 3, 40, nr // 2 + 1), (17, 16, 1)]:
        exe = _stack_exe((b, h, m, k), (b, h, k, n), dtype, resid=True)
        # (A, B, residual): consecutive calls change one operand's layout at a time
        seq = [("heads", "heads", "contig"), ("heads", "neg_heads", "contig"), ("hb", "neg_heads", "contig"),
               ("hb", "bcast_h", "neg"), ("neg", "bcast_b", "neg"), ("heads_pad", "bcast_b", "neg"),
               ("heads_pad", "hb", "bcast_h"), ("contig", "heads", "hb"), ("heads", "heads", "hb"),
               ("heads", "heads", "contig")]
        tabled = 0
        for la, lb, lr in seq:
            ins = [_layout(la, make, (b, h, m, k)), _layout(lb, make, (b, h, k, n)),
                   _layout(lr, make, (b, h, m, n))]
            tabled += _check_stack(exe, ins, dtype)
        assert tabled == len(seq)   # every layout above ran at a table (none fell back to NumPy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_dims_of_one_and_flat_stacks_share_a_step_with_tables(dtype, threads):
    """Batch 1 (the heads' leading dims merge: no table), then heads views of batch 2 on a step traced
    at batch 2 contiguous: each call the bits of contiguous copies."""
    rng = np.random.default_rng(1)

    def make(shape):
        return rng.standard_normal(shape).astype(dtype)

    nr = _nr(dtype)
    one = _stack_exe((1, 4, 12, 20), (1, 4, 20, nr // 2), dtype, resid=False)
    assert _check_stack(one, [_layout("heads", make, (1, 4, 12, 20)),
                              _layout("heads", make, (1, 4, 20, nr // 2))], dtype) == 0
    two = _stack_exe((2, 4, 12, 20), (2, 4, 20, nr // 2), dtype, resid=False)
    for la in ("contig", "heads", "contig", "neg_heads"):
        _check_stack(two, [_layout(la, make, (2, 4, 12, 20)), _layout("heads", make, (2, 4, 20, nr // 2))],
                     dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_v_of_one_vector_read_in_place_unaligned_and_4kb_apart(dtype, threads):
    """p @ v with v one vector of columns a head (half a panel), rows contiguous: read where it lies
    (g.direct) when its rows are less than 16 KB apart and not a multiple of 4 KB; at an odd element
    offset (unaligned to the vector), and 4 KB apart (packed instead): the bits of contiguous copies."""
    nr = _nr(dtype)
    d = nr // 2
    item = np.dtype(dtype).itemsize
    rng = np.random.default_rng(2)
    exe = _stack_exe((2, 4, 33, 300), (2, 4, 300, d), dtype, resid=False)
    p = _special(rng.standard_normal((2, 4, 33, 300)).astype(dtype))
    heads = rng.standard_normal((2, 300, 4 * d + 1)).astype(dtype)
    v_odd = heads[..., 1:].reshape(2, 300, 4, d).transpose(0, 2, 1, 3)   # one element off
    wide = rng.standard_normal((2, 300, 4096 // item)).astype(dtype)      # rows 4 KB apart
    v_4k = wide[..., :4 * d].reshape(2, 300, 4, d).transpose(0, 2, 1, 3)
    direct = exe.stats()["packed_direct_runs"]
    assert _check_stack(exe, [p, v_odd], dtype) == 1
    assert exe.stats()["packed_direct_runs"] == direct + 2   # the view and its copy
    assert _check_stack(exe, [p, v_4k], dtype) == 1
    assert exe.stats()["packed_direct_runs"] == direct + 3   # the copy only


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_v_read_in_place_against_a_guard_page(dtype, threads):
    """v of one vector's columns a head, read where it lies (half tiles load one vector a row), its
    first or last byte against a PROT_NONE page: no load past it (a fault would end the run)."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    d = _nr(dtype) // 2
    rng = np.random.default_rng(6)
    keep = []
    for b, h, s, k in [(2, 3, 9, 40), (2, 4, 33, 257)]:
        exe = _stack_exe((b, h, s, k), (b, h, k, d), dtype, resid=False)
        for at_end in (True, False):
            nbytes = b * k * h * d * np.dtype(dtype).itemsize
            npages = (nbytes + page - 1) // page + 2
            m = mmap.mmap(-1, npages * page)
            keep.append(m)
            addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
            assert libc.mprotect(addr, page, 0) == 0
            assert libc.mprotect(addr + (npages - 1) * page, page, 0) == 0
            off = (npages - 1) * page - nbytes if at_end else page
            buf = np.frombuffer(m, dtype, b * k * h * d, off).reshape(b, k, h * d)
            buf[...] = rng.standard_normal(buf.shape)
            direct = exe.stats()["packed_direct_runs"]
            p = rng.standard_normal((b, h, s, k)).astype(dtype)
            assert _check_stack(exe, [p, buf.reshape(b, k, h, d).transpose(0, 2, 1, 3)], dtype) == 1
            assert exe.stats()["packed_direct_runs"] == direct + 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("source", ["constant", "runtime"])
def test_half_tile_bits_over_tile_and_block_boundaries(dtype, source, threads):
    """Panels of 1 .. L + 1 columns (and a last one of L after a full one) over M around the register
    tile and K around the k-blocking (255, 256, 257, 513): the bits of the same columns in a full
    panel, NaN/inf/-0.0, with and without the bias + residual + ReLU epilogue; NumPy's values."""
    nr = _nr(dtype)
    half = nr // 2
    rng = np.random.default_rng(nr)
    for n in (1, half - 1, half, half + 1, nr + half):
        # (with fewer rows these products run on the GEMV kernels)
        for k, m in [(255, 9), (256, 2 * MR - 1), (257, 2 * MR + 3), (513, 65), (7, 130)]:
            epi = ("bias", "residual", "relu") if (n + k) % 2 else ()
            x = _special(rng.standard_normal((m, k)).astype(dtype))
            w = _special(rng.standard_normal((k, n)).astype(dtype))
            wide = np.concatenate([w, rng.standard_normal((k, nr)).astype(dtype)], axis=1)
            b, r = rng.standard_normal(n).astype(dtype), rng.standard_normal((m, n)).astype(dtype)
            bw = np.concatenate([b, np.zeros(nr, dtype)])
            rw = np.concatenate([r, np.zeros((m, nr), dtype)], axis=1)
            got = _call(_compile(x.shape, w, dtype, epi, source=source), x, w, b if epi else None,
                        r if epi else None, source)
            full = _call(_compile(x.shape, wide, dtype, epi, source=source), x, wide, bw if epi else None,
                         rw if epi else None, source)
            assert got.tobytes() == np.ascontiguousarray(full[:, :n]).tobytes(), (n, k, m)
            _assert_close(got, _expected(x, w, epi, b, r), np.nan_to_num(x, nan=0), np.nan_to_num(w, nan=0),
                          dtype, r if epi else None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_single_product_rows_split_over_two_threads_keep_one_threads_bits(dtype):
    """A single product's rows split over the team (w3half): M around the tile and the row chunks,
    N of one vector (half tiles) and of panels, enough multiply-adds for the team; two threads give
    one thread's bits."""
    nr = _nr(dtype)
    rng = np.random.default_rng(3)
    old = get_num_threads()
    try:
        for m, k, n in [(MR * 16 + 1, 1024, nr // 2), (129, 520, nr + 1), (255, 300, 3 * nr), (260, 256, 10)]:
            x = _special(rng.standard_normal((m, k)).astype(dtype))
            w = rng.standard_normal((k, n)).astype(dtype)
            b = rng.standard_normal(n).astype(dtype)
            for source in ("constant", "runtime"):
                exe = _compile(x.shape, w, dtype, ("bias",), source=source)
                set_num_threads(1)
                one = _call(exe, x, w, b, None, source)
                set_num_threads(2)
                before = blocks.team_counts()["jobs"] + blocks.team_counts()["solo_runs"]
                two = _call(exe, x, w, b, None, source)
                assert blocks.team_counts()["jobs"] + blocks.team_counts()["solo_runs"] > before
                assert one.tobytes() == two.tobytes(), (m, k, n, source)
                _assert_close(one, x @ w + b, np.nan_to_num(x, nan=0), w, dtype)
    finally:
        set_num_threads(old)


def test_concurrent_calls_at_two_layouts_read_their_own_tables(threads):
    """Python threads calling one step at two head layouts at once: each call keeps its own table of
    offsets while another replaces the cached one; every result has its contiguous copy's bits."""
    rng = np.random.default_rng(4)
    exe = _stack_exe((2, 6, 16, 64), (2, 6, 64, 16), np.float32, resid=True)
    make = lambda s: rng.standard_normal(s).astype(np.float32)
    cases = []
    for la, lb, lr in [("heads", "hb", "heads"), ("hb", "heads", "heads"), ("neg_heads", "bcast_h", "heads")]:
        ins = [_layout(la, make, (2, 6, 16, 64)), _layout(lb, make, (2, 6, 64, 16)),
               _layout(lr, make, (2, 6, 16, 16))]
        cases.append((ins, exe(*(np.ascontiguousarray(v) for v in ins))[0].tobytes()))
    errors = []

    def work(i):
        for j in range(60):
            ins, want = cases[(i + j) % len(cases)]
            if exe(*ins)[0].tobytes() != want:
                errors.append((i, j))

    run_threads(work, range(3))
    assert not errors


def _attention(np, q, k, v, x, wo, bshd):
    """Multi-head attention written in NumPy: split heads with reshape/transpose, q @ k.T, softmax,
    p @ v, merge heads, output projection plus the residual x."""
    b, s, heads, d = bshd
    hd = heads * d

    def split(a):
        return np.transpose(np.reshape(a, shape=(b, s, heads, d), order="C"), axes=(0, 2, 1, 3))

    qh, kh, vh = split(q), split(k), split(v)
    sc = np.matmul(qh, np.transpose(kh, axes=(0, 1, 3, 2)))
    sc = sc - sc.max(axis=-1, keepdims=True)
    p = np.exp(sc)
    p = p / p.sum(axis=-1, keepdims=True)
    o = np.transpose(np.matmul(p, vh), axes=(0, 2, 1, 3))
    return np.add(np.matmul(np.reshape(o, shape=(b, s, hd), order="C"), wo), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bshd", [(2, 40, 4, 8), (3, 9, 2, 16), (2, 130, 3, 4)], ids=str)
def test_traced_attention_matches_numpy_generated_and_interpreted(dtype, bshd, threads):
    """The attention program as a graph, generated kernels and interpreter: q @ k.T and p @ v at tables
    of offsets (head views), the same bits both ways, NumPy's values within rounding, NaN rows where
    a query holds NaN."""
    b, s, h, d = bshd
    rng = np.random.default_rng(b * s * h * d)
    q, k, v, x = (rng.standard_normal((b, s, h * d)).astype(dtype) for _ in range(4))
    q[0, 1, 0] = np.nan
    wo = (rng.standard_normal((h * d, h * d)) / np.sqrt(h * d)).astype(dtype)
    fn = lambda np, *a: _attention(np, *a, bshd=bshd)
    gen, interp = compiled_both(fn, [q, k, v, x, wo])
    assert gen.stats()["packed_matmuls"] >= 2
    (got,) = gen(q, k, v, x, wo)
    (again,) = interp(q, k, v, x, wo)
    assert got.tobytes() == again.tobytes()
    assert gen.stats()["packed_stack_offset_runs"] == 2 * int(b > 1)
    (want,) = numpy_outputs(fn, q, k, v, x, wo)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


_CHILD = textwrap.dedent("""
    import sys, warnings
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    from numtrace_cpu import set_num_threads
    from numtrace_cpu.isa import blocks
    from test_hunt_gemm import _check_stack, _layout, _stack_exe, _special
    done = 0
    for dtype in (np.float32, np.float64):
        nr = blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2]
        rng = np.random.default_rng(nr)
        make = lambda s: _special(rng.standard_normal(s).astype(dtype))
        mr = blocks.GEMM_MICRO_TILE[0]
        for m, k, n in [(9, 257, nr // 2), (2 * mr + 1, 33, nr // 2 - 1), (12, 20, nr + nr // 2)]:
            exe = _stack_exe((2, 3, m, k), (2, 3, k, n), dtype, resid=True)
            for threads in (1, 2):
                set_num_threads(threads)
                for la, lb, lr in [("heads", "heads", "hb"), ("heads_pad", "bcast_h", "neg")]:
                    ins = [_layout(la, make, (2, 3, m, k)), _layout(lb, make, (2, 3, k, n)),
                           _layout(lr, make, (2, 3, m, n))]
                    done += _check_stack(exe, ins, dtype)
    print(done)
""")


@pytest.mark.parametrize("build", ["avx2", "baseline"])
def test_offset_tables_and_half_tiles_in_other_builds(build, tmp_path):
    """The avx2 and baseline builds (NUMTRACE_CPU_ISA, a child process): their tile widths make other
    panels narrow; stacks at tables of offsets with the bits of contiguous copies, NumPy's values."""
    if build not in RUNNABLE:
        pytest.skip(f"{build} not runnable here")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    done = subprocess.run([sys.executable, "-c", _CHILD, os.path.dirname(__file__)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) == 2 * 3 * 2 * 2
