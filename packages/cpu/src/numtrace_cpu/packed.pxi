# Matrix products with a constant or module-parameter weight for numtrace_cpu's MatmulStep, included by
# each ISA build (blocks_<isa>.pyx) so the kernels (nt_gemm.h) get that build's vector width and
# register tile.
#
# (..., M, K) @ (K, N), or a stack (..., M, K) @ (..., K, N) with the same leading dims or
# (M, K) @ (..., K, N), in float32/float64, with the epilogue that follows in the graph (bias add,
# residual add, ReLU) fused in.
# A constant weight is packed on the first call and the pack kept (a trace constant never changes);
# any other (a module parameter, a run-time value) is packed inside the product on every call, block
# by block by the thread that uses it (or, rows contiguous, read where it lies: see _GEMM_DIRECT_MAX_BYTES),
# so a weight the user changes between calls (in place or by load_state_dict) is always read as it is now. The work is split into row chunks x column-panel
# chunks over the team of nt_team.h; each output belongs to one unit and is summed in k order, so
# the thread count never changes the result. Layouts the kernels do not take run the step's NumPy
# fallback.

cdef extern from "nt_gemm.h" nogil:
    int NT_GEMM_MR, NT_GEMM_MAX_OPS, NT_GEMM_NR_f32, NT_GEMM_NR_f64
    int NT_EPI_BIAS, NT_EPI_RESIDUAL, NT_EPI_RELU, NT_EPI_RELU_ZERO_FIRST
    ctypedef struct nt_gemm_args:
        const char* a
        const char* b
        const char* packed
        const char* bias
        const char* resid
        char* c
        Py_ssize_t lda, bsk, bsj, ldc, ldr, M, N, K, nbatch, sa, sb, sc, sr
        Py_ssize_t row_chunk, panel_chunk, n_row_chunks, n_panel_chunks
        int ops[4]
        int nops, failed, direct
        const Py_ssize_t* koff
        const Py_ssize_t* runs
        const Py_ssize_t* prun
        const int32_t* joff
        const Py_ssize_t* boff
    void nt_gemm_pack_all_f32(const float* b, Py_ssize_t sk, Py_ssize_t sj, Py_ssize_t K, Py_ssize_t N,
                              float* dst)
    void nt_gemm_pack_all_f64(const double* b, Py_ssize_t sk, Py_ssize_t sj, Py_ssize_t K, Py_ssize_t N,
                              double* dst)
    void nt_gemm_unit_f32(const nt_gemm_args* g, int u)
    void nt_gemm_unit_f64(const nt_gemm_args* g, int u)

EPILOGUE_OPS = {"bias": NT_EPI_BIAS, "residual": NT_EPI_RESIDUAL, "relu": NT_EPI_RELU,
                "relu_zero_first": NT_EPI_RELU_ZERO_FIRST}
"""Epilogue op name -> kernel code (nt_gemm.h applies them in order after the product)."""
GEMM_MICRO_TILE = (NT_GEMM_MR, NT_GEMM_NR_f32, NT_GEMM_NR_f64)
"""(rows, float32 columns, float64 columns) of this build's register tile."""

# Below this many multiply-adds a product stays on the calling thread: waking the team costs more. They
# are counted as the kernels run them: the columns of the last panel rounded up (to one vector when
# they fit one, nt_gemm_htile; else to the panel): a head of 10 classes costs 16 or 32 columns.
GEMM_PARALLEL_MIN = 1 << 20
# Rows of A one unit sweeps per column panel: with a block of NT_GEMM_KC columns, 256 KB of float32.
_GEMM_MAX_ROW_CHUNK = 256
# A B packed per call whose rows are contiguous is read where it lies (its full panels, and in a stack
# a B of one vector's columns, attention's v, which the half tiles read as it is; nt_gemm.h's `direct`) when its rows are less than this many bytes apart and not a multiple of _GEMM_ALIAS_BYTES
# apart. Measured on one thread (Zen 5, AVX-512 and AVX2 builds, float32 and float64), (128, K) @ (K, N)
# for N*itemsize of 400 B to 6 KB: reading in place is as fast as a weight packed once, 3-10% ahead of
# packing per call at 128 rows and 1.4x at 16; with rows a multiple of 4 KB apart the rows of a panel
# fall into a few L1 sets and it is 5-30% behind packing.
_GEMM_DIRECT_MAX_BYTES = 16384
_GEMM_ALIAS_BYTES = 4096
# ... and when A has at most this many rows: at 256 rows (the W2 MLP at batch 256, weights passed as
# arguments) a panel read in place from L2 by every row block was 3% behind one packed per call.
_GEMM_DIRECT_MAX_ROWS = 128


cdef inline Py_ssize_t _panel_width(int typenum):
    return NT_GEMM_NR_f64 if typenum == cnp.NPY_DOUBLE else NT_GEMM_NR_f32


def pack_weights(cnp.ndarray w):
    """The packed form of a 2-D float32/float64 weight (any strides): a 64-byte aligned 1-D array of
    ceil(N / NR) column panels of K rows each (nt_gemm.h)."""
    if w.ndim != 2 or cnp.PyArray_TYPE(w) not in (cnp.NPY_FLOAT, cnp.NPY_DOUBLE) or not cnp.PyArray_ISALIGNED(w):
        raise ValueError("pack_weights takes an aligned 2-D float32 or float64 array")
    cdef int typenum = cnp.PyArray_TYPE(w)
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(w), K = w.shape[0], N = w.shape[1]
    cdef Py_ssize_t nr = _panel_width(typenum), n = ((N + nr - 1) // nr) * nr * K
    if w.strides[0] % itemsize or w.strides[1] % itemsize:
        raise ValueError("pack_weights: strides must be whole elements")
    raw = np.empty(n * itemsize + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    cdef cnp.ndarray dst = raw[start:start + n * itemsize].view(w.dtype)
    cdef Py_ssize_t sk = w.strides[0] // itemsize, sj = w.strides[1] // itemsize
    with nogil:
        if typenum == cnp.NPY_DOUBLE:
            nt_gemm_pack_all_f64(<const double*>cnp.PyArray_DATA(w), sk, sj, K, N, <double*>cnp.PyArray_DATA(dst))
        else:
            nt_gemm_pack_all_f32(<const float*>cnp.PyArray_DATA(w), sk, sj, K, N, <float*>cnp.PyArray_DATA(dst))
    return dst


cdef void _gemm_unit_f64(void* arg, int u) noexcept nogil:
    cdef nt_gemm_args* g = <nt_gemm_args*>arg
    if not g.failed:
        nt_gemm_unit_f64(g, u)


cdef void _gemm_unit_f32(void* arg, int u) noexcept nogil:
    cdef nt_gemm_args* g = <nt_gemm_args*>arg
    if not g.failed:
        nt_gemm_unit_f32(g, u)


cdef inline bint _collapse(cnp.ndarray a, int d0, int d1, Py_ssize_t itemsize, Py_ssize_t* step):
    """Whether dims [d0, d1) of `a` are one run of equally spaced items (as after a reshape that
    merges them); their spacing in elements in *step (0 when they hold one item)."""
    cdef int d, inner = -1
    step[0] = 0
    for d in range(d1 - 1, d0 - 1, -1):
        if a.shape[d] == 1:
            continue
        if a.strides[d] % itemsize:
            return False
        if inner < 0:
            step[0] = a.strides[d] // itemsize
        elif a.strides[d] != a.strides[inner] * a.shape[inner]:
            return False
        inner = d
    return True


cdef inline bint _unit_last(cnp.ndarray a, Py_ssize_t itemsize):
    return a.shape[a.ndim - 1] == 1 or a.strides[a.ndim - 1] == itemsize


cdef inline bint _overlap(cnp.ndarray a, cnp.ndarray b):
    """Whether the memory spans of `a` and `b` (first to last byte they can touch) intersect."""
    cdef Py_ssize_t lo_a, hi_a, lo_b, hi_b
    _span(a, &lo_a, &hi_a)
    _span(b, &lo_b, &hi_b)
    return lo_a < hi_b and lo_b < hi_a


cdef inline void _span(cnp.ndarray a, Py_ssize_t* lo, Py_ssize_t* hi):
    cdef Py_ssize_t base = <Py_ssize_t>cnp.PyArray_DATA(a), low = 0, high = 0, d
    for d in range(a.ndim):
        if a.shape[d] == 0:
            lo[0] = hi[0] = base
            return
        if a.strides[d] < 0:
            low += (a.shape[d] - 1) * a.strides[d]
        else:
            high += (a.shape[d] - 1) * a.strides[d]
    lo[0] = base + low
    hi[0] = base + high + cnp.PyArray_ITEMSIZE(a)


cdef object _memory_owner(cnp.ndarray a):
    """The array at the end of a's chain of bases: views of one allocation share it."""
    cdef object o = a
    while type(o.base) is np.ndarray:
        o = o.base
    return o


cdef class PackedMatmul:
    """A MatmulStep on the packed-weight kernels as `run(env, nthreads)`: env[a] (..., M, K) @ env[b]
    (K, N) (or a stack of products, (..., M, K) @ (..., K, N)) into env[out], then `epilogue` ((op name, value number or -1), in order: "bias" adds an
    (N,) value, "residual" one of the output's shape, "relu"/"relu_zero_first" as np.maximum with
    0). `constant`: env[b] is a trace constant (packed once, kept); else it is packed on every call.
    `fallback(env, nthreads)` computes the same with NumPy for layouts the kernels do not take."""
    cdef Py_ssize_t a, b, out, bias, resid
    cdef int typenum, nops
    cdef int ops[4]
    cdef bint constant
    cdef object packed
    cdef object fallback
    cdef readonly int calls_packed
    cdef readonly int calls_direct     # calls that read B's full panels where they lie (g.direct)
    cdef tuple windows          # gathered B: the window values, their stack axis, the reshape's shape
    cdef int stack_axis
    cdef tuple rshape
    # the offset tables of the last layout: (key, koff, runs, prun, joff32, base, sb), replaced as one
    # object so that a concurrent call never reads one layout's key with another's tables
    cdef object gather
    cdef readonly int calls_gathered
    # a stack whose leading dims do not merge into one step (attention's heads): the last layout's
    # (key, per-product offsets), replaced as one object as `gather` is
    cdef object stack_offsets
    cdef readonly int calls_stack_offsets

    def __init__(self, Py_ssize_t a, Py_ssize_t b, Py_ssize_t out, object dtype, object epilogue=(),
                 bint constant=False, object fallback=None, tuple windows=(), int stack_axis=0,
                 tuple rshape=()):
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"the packed kernels take float32 and float64, got {dtype}")
        if not callable(fallback):
            raise ValueError("a PackedMatmul needs its NumPy fallback")
        epilogue = list(epilogue)
        if len(epilogue) > NT_GEMM_MAX_OPS:
            raise ValueError(f"at most {NT_GEMM_MAX_OPS} epilogue ops, got {len(epilogue)}")
        self.a, self.b, self.out, self.bias, self.resid = a, b, out, -1, -1
        self.nops = 0
        for name, v in epilogue:
            if name not in EPILOGUE_OPS:
                raise ValueError(f"unknown epilogue op {name!r}")
            if name in ("bias", "residual"):
                if v < 0 or (self.bias if name == "bias" else self.resid) >= 0:
                    raise ValueError(f"epilogue {name!r} needs its one value")
                if name == "bias":
                    self.bias = v
                else:
                    self.resid = v
            self.ops[self.nops] = EPILOGUE_OPS[name]
            self.nops += 1
        self.typenum = np.dtype(dtype).num
        self.constant = constant
        self.packed = None
        self.fallback = fallback
        self.calls_packed = 0
        self.calls_direct = 0
        self.windows, self.stack_axis, self.rshape = windows, stack_axis, rshape
        if windows and (constant or len(rshape) < 2):
            raise ValueError("a gathered B is packed per call and needs the (..., K, N) shape it is read as")
        self.gather = None
        self.calls_gathered = 0
        self.stack_offsets = None
        self.calls_stack_offsets = 0

    def __call__(self, list env, int nthreads):
        cdef nt_gemm_args g
        cdef object xo = env[self.a], wo = env[self.b], yo = env[self.out]
        cdef object bo = env[self.bias] if self.bias >= 0 else None
        cdef object ro = env[self.resid] if self.resid >= 0 else None
        cdef cnp.ndarray x, w, y, b, r, offsets = None
        cdef Py_ssize_t itemsize
        cdef int nb, xnb, i
        if self.windows:
            return self._gathered(env, nthreads)
        if not (type(xo) is np.ndarray and type(wo) is np.ndarray and type(yo) is np.ndarray
                and (self.bias < 0 or type(bo) is np.ndarray) and (self.resid < 0 or type(ro) is np.ndarray)):
            return self.fallback(env, nthreads)
        x, w, y, b, r = xo, wo, yo, bo, ro
        if (cnp.PyArray_TYPE(x) != self.typenum or cnp.PyArray_TYPE(w) != self.typenum
                or cnp.PyArray_TYPE(y) != self.typenum
                or (b is not None and (cnp.PyArray_TYPE(b) != self.typenum or b.ndim != 1))
                or (r is not None and (cnp.PyArray_TYPE(r) != self.typenum or r.ndim != y.ndim))):
            return self.fallback(env, nthreads)
        itemsize = cnp.PyArray_ITEMSIZE(w)
        # stacked products: the same leading dims on x, w, y (and the residual), or a 2-D x that every
        # product of the stack shares (a convolution's weight over its patches)
        nb = w.ndim - 2
        xnb = nb if x.ndim > 2 else 0
        if w.ndim < 2 or x.ndim < 2 or y.ndim != max(x.ndim, w.ndim) or (nb and xnb and x.ndim != w.ndim):
            return self.fallback(env, nthreads)
        for i in range(nb):
            if (xnb and x.shape[i] != w.shape[i]) or y.shape[i] != w.shape[i]:
                return self.fallback(env, nthreads)
        g.K = w.shape[nb]
        g.N = w.shape[nb + 1]
        if x.shape[x.ndim - 1] != g.K or y.shape[y.ndim - 1] != g.N or g.K == 0 or g.N == 0 or y.size == 0:
            return self.fallback(env, nthreads)   # (K == 0: zeros then the epilogue, NumPy does it)
        g.M = x.shape[x.ndim - 2] if nb else x.size // g.K
        g.nbatch = y.size // (g.M * g.N)
        # x and y: rows (every dim but the last, or the one before the last of a stack) equally
        # spaced, each row contiguous; w: any whole-element strides.
        # the products of a stack: equally spaced, or at the offsets of a table (_stack_offsets)
        if not (_collapse(x, 0, xnb, itemsize, &g.sa) and _collapse(y, 0, nb, itemsize, &g.sc)
                and _collapse(w, 0, nb, itemsize, &g.sb)
                and (r is None or _collapse(r, 0, nb, itemsize, &g.sr))):
            offsets = self._stack_offsets(x, w, y, r, nb, xnb, itemsize)
            if offsets is None:
                return self.fallback(env, nthreads)
            g.sa = g.sb = g.sc = 0
        if (not _unit_last(x, itemsize) or not _unit_last(y, itemsize)
                or not _collapse(x, xnb, x.ndim - 1, itemsize, &g.lda)
                or not _collapse(y, nb, y.ndim - 1, itemsize, &g.ldc)
                or (g.M > 1 and g.ldc < g.N) or w.strides[nb] % itemsize or w.strides[nb + 1] % itemsize
                or not cnp.PyArray_ISALIGNED(x) or not cnp.PyArray_ISALIGNED(w) or not cnp.PyArray_ISALIGNED(y)
                or _overlap(y, x) or _overlap(y, w)):
            return self.fallback(env, nthreads)
        if not self._epilogue_operands(&g, y, b, r, nb, itemsize, offsets is not None):
            return self.fallback(env, nthreads)
        g.boff = NULL
        if offsets is not None:
            g.boff = <const Py_ssize_t*>cnp.PyArray_DATA(offsets)
            self.calls_stack_offsets += 1
        if self.constant and not nb:
            if self.packed is None:   # under the GIL: one pack even when threads race to the first call
                self.packed = pack_weights(w)
                self.calls_packed += 1
            g.packed = <const char*>cnp.PyArray_DATA(<cnp.ndarray>self.packed)
        else:
            g.packed = NULL
        g.b = <const char*>cnp.PyArray_DATA(w)
        g.bsk = w.strides[nb] // itemsize
        g.bsj = w.strides[nb + 1] // itemsize
        g.direct = (g.packed == NULL and g.bsj == 1 and 0 < w.strides[nb] < _GEMM_DIRECT_MAX_BYTES
                    and w.strides[nb] % _GEMM_ALIAS_BYTES != 0 and g.M <= _GEMM_DIRECT_MAX_ROWS
                    and (g.N >= _panel_width(self.typenum) or (nb and 2 * g.N == _panel_width(self.typenum))))
        if g.direct:
            self.calls_direct += 1
        g.a = <const char*>cnp.PyArray_DATA(x)
        g.c = <char*>cnp.PyArray_DATA(y)
        g.nops = self.nops
        for i in range(self.nops):
            g.ops[i] = self.ops[i]
        g.koff = g.runs = g.prun = NULL
        g.joff = NULL
        self._run(&g, itemsize, nthreads)

    def _gathered(self, list env, int nthreads):
        """env[a] (M, K) @ B, B the stack of the windows env[windows] along `stack_axis`, reshaped
        to `rshape` (..., K, N): each window must be a view of the same memory as the first (same
        shape and strides, its start some whole elements away), and B's reshape must read every
        product's B[k, j] at koff[k] + joff[j] from the start of its product (see _gather_tables)."""
        cdef nt_gemm_args g
        cdef object xo = env[self.a], yo = env[self.out]
        cdef object bo = env[self.bias] if self.bias >= 0 else None
        cdef object ro = env[self.resid] if self.resid >= 0 else None
        cdef cnp.ndarray x, y, b, r, w0, koff, runs, prun, joff32
        cdef Py_ssize_t itemsize, d, base, sb
        cdef int nb = len(self.rshape) - 2, i
        cdef char* p0
        if not (type(xo) is np.ndarray and type(yo) is np.ndarray
                and (self.bias < 0 or type(bo) is np.ndarray) and (self.resid < 0 or type(ro) is np.ndarray)):
            return self.fallback(env, nthreads)
        x, y, b, r = xo, yo, bo, ro
        ws = [env[v] for v in self.windows]
        w0 = ws[0] if type(ws[0]) is np.ndarray else None
        if (w0 is None or cnp.PyArray_TYPE(x) != self.typenum or cnp.PyArray_TYPE(y) != self.typenum
                or cnp.PyArray_TYPE(w0) != self.typenum
                or (b is not None and (cnp.PyArray_TYPE(b) != self.typenum or b.ndim != 1))
                or (r is not None and (cnp.PyArray_TYPE(r) != self.typenum or r.ndim != y.ndim))):
            return self.fallback(env, nthreads)
        itemsize = cnp.PyArray_ITEMSIZE(w0)
        p0 = <char*>cnp.PyArray_DATA(w0)
        shape, strides = ws[0].shape, ws[0].strides
        owner = _memory_owner(w0)
        offsets = []
        for wo in ws:
            # windows in other allocations (a view NumPy made as a copy) are never addressed from w0
            if (type(wo) is not np.ndarray or cnp.PyArray_TYPE(<cnp.ndarray>wo) != self.typenum
                    or wo.shape != shape or wo.strides != strides or not cnp.PyArray_ISALIGNED(<cnp.ndarray>wo)
                    or _memory_owner(wo) is not owner or _overlap(y, <cnp.ndarray>wo)):
                return self.fallback(env, nthreads)
            d = <char*>cnp.PyArray_DATA(<cnp.ndarray>wo) - p0
            if d % itemsize:
                return self.fallback(env, nthreads)
            offsets.append(d // itemsize)
        key = (shape, strides, tuple(offsets))
        # this call's tables, held while its kernels read them (a concurrent call with another layout
        # may replace the cached ones)
        cached = self.gather
        if cached is None or cached[0] != key:
            tables = _gather_tables(shape, [s // itemsize for s in strides], offsets, self.stack_axis,
                                    self.rshape, [s % itemsize for s in strides])
            if tables is None:
                return self.fallback(env, nthreads)
            koff, joff, base, sb = tables
            runs, prun = _panel_runs(joff, _panel_width(self.typenum))
            joff32 = joff.astype(np.int32) if joff.size and np.abs(joff).max() < 2**31 - 1 else None
            cached = (key, koff, runs, prun, joff32, base, sb)
            self.gather = cached
        _, koff, runs, prun, joff32, base, sb = cached
        g.K = self.rshape[nb]
        g.N = self.rshape[nb + 1]
        g.nbatch = 1
        for i in range(nb):
            g.nbatch *= self.rshape[i]
        if (x.ndim != 2 or x.shape[1] != g.K or y.ndim != nb + 2 or y.shape[nb + 1] != g.N or g.K == 0
                or g.N == 0 or y.size == 0):
            return self.fallback(env, nthreads)
        for i in range(nb):
            if y.shape[i] != self.rshape[i]:
                return self.fallback(env, nthreads)
        g.M = x.shape[0]
        if (y.shape[nb] != g.M or not _unit_last(x, itemsize) or not _unit_last(y, itemsize)
                or not _collapse(y, 0, nb, itemsize, &g.sc) or not _collapse(x, 0, 1, itemsize, &g.lda)
                or not _collapse(y, nb, y.ndim - 1, itemsize, &g.ldc) or (g.M > 1 and g.ldc < g.N)
                or not cnp.PyArray_ISALIGNED(x) or not cnp.PyArray_ISALIGNED(y) or _overlap(y, x)):
            return self.fallback(env, nthreads)
        if not self._epilogue_operands(&g, y, b, r, nb, itemsize, False):
            return self.fallback(env, nthreads)
        g.sa = 0
        g.boff = NULL
        g.sb = sb
        g.packed = NULL
        g.b = p0 + base * itemsize
        g.bsk = g.bsj = 0
        g.direct = 0
        g.koff = <const Py_ssize_t*>cnp.PyArray_DATA(koff)
        g.runs = <const Py_ssize_t*>cnp.PyArray_DATA(runs)
        g.prun = <const Py_ssize_t*>cnp.PyArray_DATA(prun)
        g.joff = <const int32_t*>cnp.PyArray_DATA(joff32) if joff32 is not None else NULL
        g.a = <const char*>cnp.PyArray_DATA(x)
        g.c = <char*>cnp.PyArray_DATA(y)
        g.nops = self.nops
        for i in range(self.nops):
            g.ops[i] = self.ops[i]
        self.calls_gathered += 1
        self._run(&g, itemsize, nthreads)

    cdef void _run(self, nt_gemm_args* gp, Py_ssize_t itemsize, int nthreads) except *:
        """Split the product set up in `gp` (all but its units) over the team and run it."""
        cdef nt_gemm_args g = gp[0]
        cdef Py_ssize_t nr, npanels, run_columns, npc, nrc, units, want, per_job, total, done
        cdef int nteam
        g.failed = 0
        # Units: chunks of at most 4 column panels (a block of them stays in L2) x row chunks x products
        # of the stack, enough of them to keep every thread busy, at most NT_TEAM_MAX_UNITS per team
        # job (a deeper stack runs as several jobs).
        nr = _panel_width(self.typenum)
        npanels = (g.N + nr - 1) // nr
        run_columns = nr // 2 if g.N <= nr // 2 else npanels * nr
        nteam = max(1, nthreads) if g.nbatch * g.M * run_columns * g.K >= GEMM_PARALLEL_MIN else 1
        g.panel_chunk = max(min(npanels, 4), (npanels + 127) // 128)
        if g.packed == NULL and g.nbatch == 1 and nteam > 1:
            # a weight packed per call: narrower panel chunks first, so that the rows need no split
            # (each row chunk packs the panels it uses again), four per thread where there are enough
            # panels, so that a worker that starts late or is preempted holds up the caller for a
            # quarter of its share at most; still at most 128 chunks, so that a team job holds at
            # least one unit of every chunk
            g.panel_chunk = max((npanels + 127) // 128, min(g.panel_chunk, npanels // (4 * nteam)))
        npc = (npanels + g.panel_chunk - 1) // g.panel_chunk
        g.n_panel_chunks = npc
        # products of the stack per team job: one for a single product, whose rows are then split as
        # `want` asks (the bound below keeps a job to NT_TEAM_MAX_UNITS units)
        per_job = min(g.nbatch, max(1, NT_TEAM_MAX_UNITS // npc))
        want = (2 * nteam + npc * per_job - 1) // (npc * per_job) if nteam > 1 else 1
        g.row_chunk = min((g.M + want - 1) // want, _GEMM_MAX_ROW_CHUNK)
        g.row_chunk = max(g.row_chunk, (g.M * per_job + NT_TEAM_MAX_UNITS // npc - 1) // (NT_TEAM_MAX_UNITS // npc))
        g.row_chunk = (g.row_chunk + NT_GEMM_MR - 1) // NT_GEMM_MR * NT_GEMM_MR
        nrc = (g.M + g.row_chunk - 1) // g.row_chunk
        g.n_row_chunks = nrc
        total = g.nbatch
        done = 0
        while done < total:
            g.nbatch = min(per_job, total - done)
            units = g.nbatch * nrc * npc
            with nogil:   # the workers spin after it, for the next product (see set_team_spin_us)
                nt_team_run_spin(_gemm_unit_f64 if self.typenum == cnp.NPY_DOUBLE else _gemm_unit_f32, &g,
                                 <int>units, nteam, nt_team_spin_ns)
            if g.failed:
                raise MemoryError("packed matrix product: no memory for the weight blocks")
            done += g.nbatch
            g.a += g.nbatch * g.sa * itemsize
            g.b += g.nbatch * g.sb * itemsize
            g.c += g.nbatch * g.sc * itemsize
            if g.resid != NULL:
                g.resid += g.nbatch * g.sr * itemsize
            if g.boff != NULL:
                g.boff += 4 * g.nbatch

    cdef object _stack_offsets(self, object x, object w, object y, object r, int nb, int xnb,
                               Py_ssize_t itemsize):
        """The offsets (elements) of each product's A, B, C and residual, (products, 4) intp, for a stack
        whose leading dims do not merge into one step (q @ k.T of heads viewed out of (B, S, H, D)):
        every index of the leading dims in C order, as the stack's product numbers run. None when a
        leading stride is no whole element. Cached for the last layout: a traced step sees one."""
        key = (x.shape, x.strides, w.shape, w.strides, y.shape, y.strides,
               None if r is None else r.strides)
        cached = self.stack_offsets
        if cached is not None and cached[0] == key:
            return cached[1]
        n = 1
        for i in range(nb):
            n *= y.shape[i]
        table = np.zeros((n, 4), np.intp)
        for j, a, k in ((0, x, xnb), (1, w, nb), (2, y, nb), (3, r, nb)):
            if a is None or k == 0:
                continue
            off = np.zeros((), np.intp)
            for i in range(k):
                if a.shape[i] != y.shape[i] or a.strides[i] % itemsize:
                    return None
                off = np.add.outer(off, np.arange(a.shape[i], dtype=np.intp) * (a.strides[i] // itemsize))
            table[:, j] = off.ravel()
        self.stack_offsets = (key, table)
        return table

    cdef bint _epilogue_operands(self, nt_gemm_args* g, cnp.ndarray y, cnp.ndarray b, cnp.ndarray r, int nb,
                                 Py_ssize_t itemsize, bint tabled) except -1:
        """Set the bias and residual of `g` from `b` and `r` (None when the epilogue has none); False
        when their layout is not one the kernels take. `tabled`: the products' offsets are a table's
        (the residual's leading dims need not merge)."""
        cdef int i
        g[0].bias = NULL
        g[0].resid = NULL
        g[0].ldr = g[0].sr = 0
        if b is not None:
            if (b.shape[0] != g[0].N or (g[0].N > 1 and b.strides[0] != itemsize) or not cnp.PyArray_ISALIGNED(b)
                    or _overlap(y, b)):
                return False
            g[0].bias = <const char*>cnp.PyArray_DATA(b)
        if r is not None:
            for i in range(y.ndim):
                if r.shape[i] != y.shape[i]:
                    return False
            if (not _unit_last(r, itemsize) or (not tabled and not _collapse(r, 0, nb, itemsize, &g[0].sr))
                    or not _collapse(r, nb, r.ndim - 1, itemsize, &g[0].ldr) or not cnp.PyArray_ISALIGNED(r)
                    or _overlap(y, r)):
                return False
            g[0].resid = <const char*>cnp.PyArray_DATA(r)
        return True


def _gather_tables(shape, strides, offsets, int axis, tuple rshape, remainders):
    # (this file's directives turn off negative indexing: every index below counts from the start)
    """For windows of `shape` and `strides` (elements) starting `offsets` from the first, stacked along
    `axis` and reshaped (C order) to `rshape` (..., K, N): (koff, joff, base, sb) with the element
    [b, k, j] of the reshape at base + b * sb + koff[k] + joff[j] from the first window's start, or
    None when the reshape does not read it so (or a stride is no whole element)."""
    if any(remainders):
        return None
    per_dim = [np.arange(n, dtype=np.intp) * s for n, s in zip(shape, strides)]
    per_dim.insert(axis, np.asarray(offsets, dtype=np.intp))
    where = np.zeros((), np.intp)
    for k, v in enumerate(per_dim):
        where = np.add.outer(where, v) if k else v
    if where.size != int(np.prod(rshape, dtype=np.int64)) or where.size == 0:
        return None
    n = len(rshape)
    lead = where.reshape(-1, rshape[n - 2], rshape[n - 1])
    corner = lead[:, 0, 0]
    koff = np.ascontiguousarray(lead[0, :, 0] - corner[0])
    joff = np.ascontiguousarray(lead[0, 0, :] - corner[0])
    sb = int(corner[1] - corner[0]) if corner.size > 1 else 0
    expect = (corner[0] + np.arange(corner.size, dtype=np.intp)[:, None, None] * sb
              + koff[None, :, None] + joff[None, None, :])
    if not np.array_equal(expect, lead):
        return None
    return koff, joff, int(corner[0]), sb


def _panel_runs(joff, Py_ssize_t nr):
    """The columns of each panel of `nr` as runs of equally spaced offsets: (runs (R, 4): first column
    in its panel, length, offset joff of the first, step; prun: panel p's runs are prun[p] to
    prun[p + 1] - 1), what nt_gemm_pack_gather copies."""
    cdef Py_ssize_t n = len(joff), p, j, start, end, step
    offs = [int(v) for v in joff]
    runs, prun = [], [0]
    for p in range(0, n, nr):
        j, end = p, min(n, p + nr)
        while j < end:
            start = j
            step = offs[j + 1] - offs[j] if j + 1 < end else 1
            j += 1
            while j < end and offs[j] - offs[j - 1] == step:
                j += 1
            runs.append((start - p, j - start, offs[start], step))
        prun.append(len(runs))
    return np.array(runs, dtype=np.intp).reshape(-1, 4), np.array(prun, dtype=np.intp)
