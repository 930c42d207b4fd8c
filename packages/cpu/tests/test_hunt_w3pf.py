"""Hunt in the w3pf branch's run-time right operands (nt_gemm.h): a B packed per call with contiguous
rows is packed row by row (every panel of a unit from one run of each row, the row 8 on prefetched),
and each unit prefetches the next stripe of B (the next block of k, panel or unit) while it computes.
Neither may change a bit: every case here is the bits of the same B in layouts the element loop
packs (columns apart) or the transposed pack reads (Fortran order), NumPy's values and NaN/inf/-0
placement within the product tolerance; around MR/NR, KC = 256 and the 128-row limit of reading in
place, with rows 4/8/12/16 KB apart, reversed, sliced, broadcast (stride 0) and unaligned starts,
deep stacks run as several team jobs, B that is A, B changed between calls, Python threads; B
placed against a PROT_NONE page on either side (a load past B faults: prefetches never do), and the
avx2 and baseline builds in a child process."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler, get_num_threads, isa, set_num_threads
from numtrace_cpu.products import RUNTIME_MIN_ROWS
from test_hunt_hunt_w3args import _trace
from test_packed import _assert_close, _expected, _graph
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # NaN and inf on purpose


def _exe(x_shape, w_shape, dtype, epilogue=(), source="runtime"):
    g = _graph(x_shape, np.zeros(w_shape, dtype), dtype, epilogue, constant=source == "constant")
    return compile_graph(g, [v.type for v in g.inputs], state=(1,) if source == "state" else ())


def _specials(w, rng, scale=1):
    for value, count in ((np.nan, 2), (np.inf, 2), (-np.inf, 2), (-0.0, 10 * scale), (0.0, 10 * scale)):
        w.flat[rng.integers(0, w.size, count * scale)] = value
    return w


def _layouts(w):
    """w's values in the layouts a per-call pack reads with contiguous rows (the changed code), the
    names saying how: rows 4/8/12/16 KB apart, sliced from a wider array, reversed, an odd offset."""
    k, n = w.shape
    out = {"contiguous": w}
    for kb in (4, 8, 12, 16):
        row = kb * 1024 // w.itemsize
        if row >= n + 1:
            big = np.full((k, row), np.nan, w.dtype)
            big[:, 1:1 + n] = w
            out[f"rows_{kb}kb_apart"] = big[:, 1:1 + n]
    big = np.full((k + 1, n + 7), np.nan, w.dtype)
    big[1:, 3:3 + n] = w
    out["b[1:, 3:]"] = big[1:, 3:3 + n]
    out["b[::-1]"] = np.ascontiguousarray(w[::-1])[::-1]
    if w.itemsize == 4:   # a view starting an odd number of floats into its buffer
        buf = np.full(w.size + 1, np.nan, w.dtype)
        out["odd_start"] = buf[1:].reshape(k, n)
        out["odd_start"][...] = w
    return out


def _packed_elsewhere(w):
    """w's values where the unchanged pack loops read them: columns apart, and Fortran order."""
    big = np.full((w.shape[0], 2 * w.shape[1]), np.nan, w.dtype)
    big[:, ::2] = w
    return big[:, ::2], np.asfortranarray(w)


def _check(exe, x, w, wl, extra, epilogue, dtype, want_bits=None):
    (got,) = exe(x, wl, *extra)
    if want_bits is not None:
        assert got.tobytes() == want_bits
    b = extra[0] if "bias" in epilogue else None
    r = extra[-1] if "residual" in epilogue else None
    _assert_close(got, _expected(x, w, epilogue, b, r), x, w, dtype, r)
    return got


SHAPES = [(1, 1, 1), (2, 2, 7), (7, 255, 33), (15, 256, 16), (16, 257, 17), (17, 1, 31), (31, 513, 64),
          (33, 2, 63), (63, 17, 65), (64, 300, 129), (65, 256, 257), (127, 257, 32), (128, 600, 129),
          (129, 257, 65), (255, 255, 33), (256, 513, 17), (257, 40, 1000)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", SHAPES, ids=str)
def test_per_call_pack_row_by_row_gives_the_bits_of_the_element_loop(dtype, mkn, threads):
    """Every contiguous-row layout of B (packed row by row, or read in place up to 128 rows of A)
    gives the bits of the same B columns apart and in Fortran order, NumPy's values and specials."""
    m, k, n = mkn
    rng = np.random.default_rng(m * 1000 + k + n)
    x = _specials(rng.standard_normal((m, k)).astype(dtype), rng)
    w = _specials(rng.standard_normal((k, n)).astype(dtype), rng)
    epilogue = [(), ("bias",), ("bias", "relu"), ("bias", "residual")][(m + k + n) % 4]
    extra = [rng.standard_normal(n).astype(dtype)] if "bias" in epilogue else []
    if "residual" in epilogue:
        extra.append(rng.standard_normal((m, n)).astype(dtype))
    exe = _exe(x.shape, w.shape, dtype, epilogue)
    packed = exe.stats()["packed_matmuls"] == 1
    assert packed == (m >= RUNTIME_MIN_ROWS), exe.stats()   # (fewer rows stay with BLAS: no bits held)
    stepped, fortran = _packed_elsewhere(w)
    want = _check(exe, x, w, stepped, extra, epilogue, dtype).tobytes() if packed else None
    _check(exe, x, w, fortran, extra, epilogue, dtype, want)
    for wl in _layouts(w).values():
        _check(exe, x, w, wl, extra, epilogue, dtype, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_rows_and_module_state(dtype, threads):
    """B a broadcast row (rows 0 bytes apart: packed row by row from one row), and module state:
    the bits of the same values columns apart."""
    rng = np.random.default_rng(11)
    k, n = 300, 70
    x = _specials(rng.standard_normal((140, k)).astype(dtype), rng)
    row = _specials(rng.standard_normal(n).astype(dtype), rng)
    w = np.broadcast_to(row, (k, n))
    for source in ("runtime", "state"):
        exe = _exe(x.shape, w.shape, dtype, (), source)
        want = _check(exe, x, w, _packed_elsewhere(np.array(w))[0], [], (), dtype).tobytes()
        _check(exe, x, w, w, [], (), dtype, want)
        _check(exe, x, w, np.ascontiguousarray(w), [], (), dtype, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_deep_stacks_over_several_team_jobs(dtype, threads):
    """A stack of products deeper than a team job holds (B's step between products, the next unit's
    stripe in the next product), tall and short A: the bits of the stack in Fortran order."""
    rng = np.random.default_rng(12)
    for bt, m, k, n in ((300, 8, 40, 96), (3, 200, 300, 70), (5, 129, 257, 33)):
        a = rng.standard_normal((bt, m, k)).astype(dtype)
        w = _specials(rng.standard_normal((bt, k, n + 3)).astype(dtype), rng, 5)
        g = _graph(a.shape, np.zeros((bt, k, n), dtype), dtype, constant=False)
        exe = compile_graph(g, [v.type for v in g.inputs])
        fortran = np.moveaxis(np.asfortranarray(np.moveaxis(w[:, :, 1:1 + n], 0, 2)), 2, 0)
        (want,) = exe(a, fortran)
        ws = w[:, :, 1:1 + n]
        for wl in (ws, np.ascontiguousarray(ws), np.ascontiguousarray(ws[::-1])[::-1],   # (batch step < 0)
                   np.ascontiguousarray(ws[:, ::-1])[:, ::-1]):
            (got,) = exe(a, wl)
            assert got.tobytes() == want.tobytes(), (bt, m, k, n, wl.strides)
        ref = a @ w[:, :, 1:1 + n]
        for i in (0, bt - 1):
            _assert_close(want[i], ref[i], a[i], w[i, :, 1:1 + n], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_b_that_is_a_and_b_changed_between_calls(dtype, threads):
    """x @ x (B the same memory as A), then B written in place between calls: read as it is now."""
    rng = np.random.default_rng(13)
    for m in (129, 100):
        x = rng.standard_normal((m, m)).astype(dtype)
        exe = _exe(x.shape, x.shape, dtype)
        stepped = _packed_elsewhere(x)[0]
        want = _check(exe, x, x, stepped, [], (), dtype).tobytes()
        _check(exe, x, x, x, [], (), dtype, want)
        x[::3] *= -1.5
        x[5, 7] = np.nan
        want = _check(exe, x, x, _packed_elsewhere(x)[0], [], (), dtype).tobytes()
        _check(exe, x, x, x, [], (), dtype, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_b_not_aligned_to_its_element(dtype, threads):
    """B starting 4 bytes (float64) or 1 byte (float32) into an element: NumPy's values (the packed
    kernels leave such a B to another path), never a crash."""
    rng = np.random.default_rng(15)
    k, n = 300, 70
    x = rng.standard_normal((140, k)).astype(dtype)
    w = _specials(rng.standard_normal((k, n)).astype(dtype), rng)
    shift = 4 if dtype == np.float64 else 1
    raw = np.zeros(w.nbytes + 8, np.uint8)
    wl = raw[shift:shift + w.nbytes].view(dtype).reshape(k, n)
    wl[...] = w
    assert not wl.flags.aligned
    exe = _exe(x.shape, w.shape, dtype, ("bias",))
    _check(exe, x, w, wl, [np.ones(n, dtype)], ("bias",), dtype)


def test_python_threads_with_their_own_weights(threads):
    """Four Python threads call one executable, each with its own B (packed row by row into its own
    scratch): each gets its own bits, never another thread's."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((160, 300)).astype(np.float32)
    ws = [_specials(rng.standard_normal((300, 200)).astype(np.float32), rng) for _ in range(4)]
    exe = _exe(x.shape, ws[0].shape, np.float32)
    want = [exe(x, _packed_elsewhere(w)[0])[0].tobytes() for w in ws]
    bad = []

    def work(i):
        for j in range(15):
            if exe(x, ws[(i + j) % 4])[0].tobytes() != want[(i + j) % 4]:
                bad.append((i, j))

    run_threads(work, range(4))
    assert not bad


_CHILD = textwrap.dedent("""
    import ctypes, mmap, sys, warnings
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    from numtrace_cpu import set_num_threads
    from test_hunt_w3pf import _exe, _packed_elsewhere
    PAGE = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    keep = []

    def guarded(shape, dtype, at_end):
        # C order, its last byte (at_end) or its first against a PROT_NONE page
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        npages = (nbytes + PAGE - 1) // PAGE + 2
        m = mmap.mmap(-1, npages * PAGE)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        assert libc.mprotect(addr, PAGE, 0) == 0
        assert libc.mprotect(addr + (npages - 1) * PAGE, PAGE, 0) == 0
        keep.append(m)
        off = (npages - 1) * PAGE - nbytes if at_end else PAGE
        return np.frombuffer(m, dtype, int(np.prod(shape)), off).reshape(shape)

    rng = np.random.default_rng(0)
    done = 0
    for dtype in (np.float32, np.float64):
        for m, k, n in [(20, 1, 33), (17, 9, 31), (40, 257, 33), (129, 300, 65), (128, 256, 64),
                        (65, 513, 1000), (300, 40, 17), (200, 255, 257)]:
            w = rng.standard_normal((k, n)).astype(dtype)
            w.flat[::7] = np.nan
            x = rng.standard_normal((m, k)).astype(dtype)
            exe = _exe(x.shape, w.shape, dtype)
            for threads in (1, 2):
                set_num_threads(threads)
                want = exe(x, _packed_elsewhere(w)[0])[0].tobytes()
                for at_end in (True, False):
                    for lay in ("c", "rev", "slice"):
                        if lay == "slice":   # rows farther apart than N, the last against the page
                            g = guarded((k, n + 3), dtype, at_end)
                            g[:, 3:] = w
                            wl = g[:, 3:] if at_end else g[:, :n]
                            if not at_end:
                                g[:, :n] = w
                        else:
                            g = guarded((k, n), dtype, at_end)
                            g[...] = w[::-1] if lay == "rev" else w
                            wl = g[::-1] if lay == "rev" else g
                        assert exe(x, wl)[0].tobytes() == want, (dtype, m, k, n, lay, at_end, threads)
                        done += 1
    print(done)
""")


@pytest.mark.parametrize("build", ["native", "avx2", "baseline"])
def test_b_against_a_guard_page_in_every_build(build, tmp_path):
    """B's first or last byte against a PROT_NONE page (an ordinary load past B faults; prefetches
    do not), in a child process per ISA build: no crash, the bits of B columns apart."""
    if build != "native" and build not in isa.built():
        pytest.skip(f"{build} not built here")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path))
    env.pop("NUMTRACE_CPU_ISA", None)
    if build != "native":
        env["NUMTRACE_CPU_ISA"] = build
    done = subprocess.run([sys.executable, "-c", _CHILD, os.path.dirname(__file__)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) == 2 * 8 * 2 * 2 * 3



_PREFETCH_AS_LOADS_C = r"""
/* nt_gemm.h's prefetches turned into ordinary loads, B against PROT_NONE pages on either side: a
   prefetch (or a load of the pack or the kernel) of an address outside B's pages faults. Every unit
   of each product run in turn, against the sequential sum over k (-ffp-contract=off: bit for bit). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stddef.h>
typedef ptrdiff_t Py_ssize_t;
static volatile char nt_sink;
#define __builtin_prefetch(p, rw, loc) (nt_sink = *(const volatile char*)(p))
#include "nt_gemm.h"
#define NT_CAT(a, b) a##b
#define NT_UNIT_(s) NT_CAT(nt_gemm_unit_, s)
#define NT_NR_(s) NT_CAT(NT_GEMM_NR_, s)
#define NT_UNIT NT_UNIT_(HSUF)
#define NT_NR NT_NR_(HSUF)

static HT* guarded(size_t n, int at_end, void** base, size_t* len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = n * sizeof(HT);
    size_t pages = (bytes + page - 1) / page + 2;
    char* m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    mprotect(m, page, PROT_NONE);
    mprotect(m + (pages - 1) * page, page, PROT_NONE);
    *base = m; *len = pages * page;
    return (HT*)(at_end ? m + (pages - 1) * page - bytes : m + page);
}

static int run(ptrdiff_t M, ptrdiff_t K, ptrdiff_t N, ptrdiff_t ldb, int rev, int at_end, int direct,
               ptrdiff_t rchunk, ptrdiff_t pchunk, ptrdiff_t nbatch) {
    const ptrdiff_t NR = NT_NR, npanels = (N + NR - 1) / NR;
    void* base; size_t len;
    size_t nb = (size_t)(nbatch * K * ldb);
    HT *A, *B, *C, *R;
    if (rev && nbatch > 1) return 0;
    B = guarded(nb, at_end, &base, &len);
    A = malloc(sizeof(HT) * M * K * nbatch);
    C = malloc(sizeof(HT) * M * N * nbatch);
    R = malloc(sizeof(HT) * M * N * nbatch);
    ptrdiff_t i, j, k, t, u;
    for (i = 0; i < (ptrdiff_t)nb; i++) B[i] = (HT)((i * 7) % 13) - 6;
    for (i = 0; i < M * K * nbatch; i++) A[i] = (HT)((i * 5) % 11) - 5;
    nt_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a = (const char*)A; g.c = (char*)C; g.lda = K; g.ldc = N; g.M = M; g.N = N; g.K = K;
    g.nbatch = nbatch; g.sa = M * K; g.sc = M * N; g.sb = K * ldb;
    g.bsk = rev ? -ldb : ldb; g.bsj = 1;
    g.b = (const char*)(rev ? B + (K - 1) * ldb : B);
    g.direct = direct;
    g.panel_chunk = pchunk > npanels ? npanels : pchunk;
    g.n_panel_chunks = (npanels + g.panel_chunk - 1) / g.panel_chunk;
    g.row_chunk = (rchunk + NT_GEMM_MR - 1) / NT_GEMM_MR * NT_GEMM_MR;
    g.n_row_chunks = (M + g.row_chunk - 1) / g.row_chunk;
    for (u = 0; u < nbatch * g.n_row_chunks * g.n_panel_chunks; u++) NT_UNIT(&g, (int)u);
    for (t = 0; t < nbatch; t++)
        for (i = 0; i < M; i++)
            for (j = 0; j < N; j++) {
                HT s = 0;
                for (k = 0; k < K; k++) {
                    const HT* brow = rev ? B + (K - 1 - k) * ldb : B + t * K * ldb + k * ldb;
                    s += A[t * M * K + i * K + k] * brow[j];
                }
                R[t * M * N + i * N + j] = s;
            }
    for (i = 0; i < M * N * nbatch; i++)
        if (C[i] != R[i]) {
            printf("M %td K %td N %td ldb %td rev %d end %d direct %d: C[%td] %g, not %g\n", M, K, N, ldb,
                   rev, at_end, direct, i, (double)C[i], (double)R[i]);
            return 1;
        }
    munmap(base, len); free(A); free(C); free(R);
    return 0;
}

int main(void) {
    const ptrdiff_t Ms[] = {1, 9, 40}, Ks[] = {1, 9, 257, 300}, Ns[] = {1, 17, 33, 65, 130};
    int bad = 0, n = 0, rev, end, direct, a, b, c, extra, rc, pc, nbt;
    for (a = 0; a < 3; a++) for (b = 0; b < 4; b++) for (c = 0; c < 5; c++)
    for (extra = 0; extra < 2; extra++) for (rev = 0; rev < 2; rev++) for (end = 0; end < 2; end++)
    for (direct = 0; direct < 2; direct++) for (rc = 0; rc < 2; rc++) for (pc = 0; pc < 2; pc++)
    for (nbt = 1; nbt <= 2; nbt++) {
        ptrdiff_t N = Ns[c], ldb = N + extra * 3;
        if (direct && N < NT_NR) continue;
        bad |= run(Ms[a], Ks[b], N, ldb, rev, end, direct, rc ? 8 : 256, pc ? 1 : 4, nbt);
        n++;
    }
    printf("%d cases, bad %d\n", n, bad);
    return bad;
}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("arch", ["this build", "baseline"])
def test_prefetches_name_only_addresses_inside_b(dtype, arch, tmp_path):
    """nt_gemm.h compiled with its prefetches turned into ordinary loads and run on a B against a
    PROT_NONE page on either side (rows contiguous, apart, reversed; direct and packed per call; a
    stack of two; row and panel chunks of every kind): no fault, and the sequential sum's bits."""
    command = compiler._command()
    if not command:
        pytest.skip("no C compiler runs here")
    command = [c for c in command if c not in ("-shared", "-fPIC")]
    if arch == "baseline":
        command = [c for c in command if not c.startswith(("-march", "-mprefer"))]
    source = tmp_path / "pf.c"
    source.write_text(_PREFETCH_AS_LOADS_C)
    ht, suf = ("float", "f32") if dtype == np.float32 else ("double", "f64")
    binary = str(tmp_path / "pf")
    subprocess.run(command + [f"-DHT={ht}", f"-DHSUF={suf}", str(source), "-o", binary, "-lpthread"],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([binary], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:])
    assert done.stdout.split()[-1] == "0", done.stdout[-2000:]

def _ln(x, g, b):
    mu = np.mean(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5) * g + b


def _encoder(seq, dm, heads):
    """benchmarks/cpu_workloads.py's W3 block (pre-LN, attention, tanh-GELU MLP) at any size."""
    dh = dm // heads

    def block(x, g1, b1, wqkv, bqkv, wo, bo, g2, b2, wf1, bf1, wf2, bf2):
        h = _ln(x, g1, b1)
        qkv = h @ wqkv + bqkv
        q = np.transpose(np.reshape(qkv[:, :dm], (seq, heads, dh)), (1, 0, 2))
        k = np.transpose(np.reshape(qkv[:, dm:2 * dm], (seq, heads, dh)), (1, 2, 0))
        v = np.transpose(np.reshape(qkv[:, 2 * dm:], (seq, heads, dh)), (1, 0, 2))
        s = (q @ k) * (1.0 / np.sqrt(dh))
        p = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = p / np.sum(p, axis=-1, keepdims=True)
        x = x + (np.reshape(np.transpose(p @ v, (1, 0, 2)), (seq, dm)) @ wo + bo)
        u = _ln(x, g2, b2) @ wf1 + bf1
        u = 0.5 * u * (1 + np.tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)))
        return x + (u @ wf2 + bf2)

    return block


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 256, 4), (129, 96, 3), (33, 64, 2)], ids=str)
def test_w3_block_with_weights_in_every_layout(dtype, shape, threads):
    """The W3 block with its weights as arguments (read in place at 128 rows, packed row by row past
    them): the bits of the same weights in Fortran order and columns apart, NumPy's values; a NaN in
    a weight makes its columns NaN as in NumPy."""
    seq, dm, heads = shape
    rng = np.random.default_rng(seq + dm)

    def w(*s):
        return (rng.standard_normal(s) / np.sqrt(s[0])).astype(dtype)

    def z(n, v=0.0):
        return (v + 0.1 * rng.standard_normal(n)).astype(dtype)

    args = [rng.standard_normal((seq, dm)).astype(dtype), z(dm, 1), z(dm), w(dm, 3 * dm), z(3 * dm),
            w(dm, dm), z(dm), z(dm, 1), z(dm), w(dm, 4 * dm), z(4 * dm), w(4 * dm, dm), z(dm)]
    fn = _encoder(seq, dm, heads)
    traced = _trace(fn, args)
    got = traced(*args)
    tol = 2e-3 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(got, fn(*args), rtol=tol, atol=tol)
    (stats,) = traced.stats()["signatures"].values()
    assert stats["packed_runtime"] == 6 and stats["fallbacks"] == 0   # 4 weights, q @ k, p @ v
    assert (stats["packed_direct_runs"] > 0) == (seq <= 128)
    weights = (3, 5, 9, 11)
    sliced = lambda a: _layouts(a)["b[1:, 3:]"]
    for relayout in (np.asfortranarray, lambda a: _packed_elsewhere(a)[0], sliced):
        moved = [relayout(a) if i in weights else a for i, a in enumerate(args)]
        assert traced(*moved).tobytes() == got.tobytes()
    bad = list(args)
    bad[11] = args[11].copy()
    bad[11][7, 5] = np.nan
    out = traced(*bad)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(fn(*bad)))
    assert np.isnan(out[:, 5]).all() and np.isnan(out).sum() == seq


def test_gemv_nan_is_placed_on_any_threads_or_alignment():
    """x (2, 513) @ B (513, 33) runs the GEMV kernels; column 27 holds inf and -inf (their sum the
    default NaN, sign set) and a +NaN further down. Which of the two NaNs a column keeps depends on
    the code form (vector, tail, lead columns) it falls in, so two threads give the sign-set NaN
    for some 64-byte offsets of B where one thread and NumPy give +NaN (docs/guide/sharp-edges.md:
    a product's NaN sign and payload are not kept). Where the NaNs are, and every finite bit, are
    the same on any thread count and alignment."""
    k, n = 513, 33
    x = np.ones((2, k))
    w = np.random.default_rng(1).standard_normal((k, n))
    w[89, 27], w[125, 27], w[450, 27] = -np.inf, np.inf, np.nan
    exe = _exe(x.shape, w.shape, np.float64)
    assert exe.stats()["gemv"] == 1
    want = x @ w
    old = get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            set_num_threads(threads)
            for off in range(0, 64, 8):
                buf = np.zeros(k * 128 + 32)
                start = (-buf.ctypes.data % 64 + off) // 8
                wl = buf[start:start + k * 128].reshape(k, 128)[:, :n]
                wl[...] = w
                results.append(exe(x, wl)[0].copy())
    finally:
        set_num_threads(old)
    for got in results:
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[:, 27]).all()
        finite = ~np.isnan(got)
        np.testing.assert_array_equal(got[finite].view(np.int64), results[0][finite].view(np.int64))
