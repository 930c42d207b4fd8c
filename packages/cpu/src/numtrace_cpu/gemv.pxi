# Matrix-vector products for numtrace_cpu's MatmulStep, included by each ISA build (blocks_<isa>.pyx)
# so the kernels (nt_gemv.h) get that build's vector width.
#
# (1, K) @ (K, N), (K,) @ (K, N) and (M, K) @ (K,) in float32/float64, and (M, K) @ (K, N) for a few
# rows (M <= NT_GEMV_MAX_M, one pass over the weights for all of them), with the bias add and ReLU
# that follow fused in. The work is split over a persistent team of worker threads (nt_team.h; as many
# as numtrace_cpu.set_num_threads says) by a fixed rule (worker t always takes share t: contiguous
# row chunks of a C-ordered matrix, or contiguous output rows of a transposed one), so on repeated
# calls each thread reads the same contiguous slice of the weights, which stays in its core's
# cache when it fits. Layouts the kernels do not take (strided vectors, a
# matrix with neither axis contiguous) run the step's NumPy fallback instead.

cimport numpy as cnp
from cpython.mem cimport PyMem_Free, PyMem_Malloc

import os

import numpy as np

cnp.import_array()

cdef extern from "nt_gemv.h" nogil:
    int NT_ACT_NONE, NT_ACT_RELU, NT_ACT_RELU_ZERO_FIRST, NT_GEMV_CHUNK, NT_GEMV_MAX_M, NT_GV_TAIL
    void nt_gemv_rows_f32(const float* x, const float* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t n, float* y)
    void nt_gemv_rows_f64(const double* x, const double* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t n,
                          double* y)
    void nt_gemv_rows_lead_f32(const float* x, const float* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t head,
                               Py_ssize_t n, float* y)
    void nt_gemv_rows_lead_f64(const double* x, const double* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t head,
                               Py_ssize_t n, double* y)
    void nt_gemv_rows_m_f32(const float* x, Py_ssize_t ldx, Py_ssize_t M, const float* w, Py_ssize_t ldw,
                            Py_ssize_t K, Py_ssize_t n, float* y, Py_ssize_t ldy)
    void nt_gemv_rows_m_f64(const double* x, Py_ssize_t ldx, Py_ssize_t M, const double* w, Py_ssize_t ldw,
                            Py_ssize_t K, Py_ssize_t n, double* y, Py_ssize_t ldy)
    void nt_gemv_finish_f32(float* y, const float* parts, Py_ssize_t nparts, Py_ssize_t stride, Py_ssize_t n,
                            const float* b, int act)
    void nt_gemv_finish_f64(double* y, const double* parts, Py_ssize_t nparts, Py_ssize_t stride,
                            Py_ssize_t n, const double* b, int act)
    void nt_gemv_fold_f32(float* y, const float* part, Py_ssize_t n, int first)
    void nt_gemv_fold_f64(double* y, const double* part, Py_ssize_t n, int first)
    void nt_gemv_epilogue_f32(float* y, const float* b, Py_ssize_t n, int act)
    void nt_gemv_epilogue_f64(double* y, const double* b, Py_ssize_t n, int act)
    void nt_gemv_dots_f32(const float* x, const float* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t n,
                          const float* b, int act, float* y)
    void nt_gemv_dots_f64(const double* x, const double* w, Py_ssize_t ldw, Py_ssize_t K, Py_ssize_t n,
                          const double* b, int act, double* y)

# The thread team's declarations (nt_team.h) are in blocks.pxi, included before this file.


def team_spin_us() -> int:
    """Microseconds the team's workers spin after a GEMV or packed-product job (0: every GEMV on the
    calling thread, and the workers sleep right after each packed product)."""
    return nt_team_spin_ns // 1000


def set_team_spin_us(us):
    """Let the team's workers spin `us` microseconds after each GEMV or packed-product job before
    they sleep, so the next one (an MLP's next layer, a transformer block's next product, or the
    next call) finds them awake; 0 runs every GEMV on the calling thread and lets the workers sleep
    right after each packed product. Default 50 (NUMTRACE_TEAM_SPIN_US at import): a sleeping
    worker takes about 7 us to wake on the 2-core VM, as long as half a 784x512 GEMV. While
    spinning, a worker gives up its core every few microseconds, and after a few jobs in a row that
    the workers missed (the caller ran every unit while they were awake, or waited for a worker's
    unit longer than it worked: they were descheduled) GEMVs and packed products run on the calling
    thread for 1 to 20 ms (nt_team.h)."""
    global nt_team_spin_ns
    if isinstance(us, bool) or not isinstance(us, int) or not 0 <= us <= 10_000_000:
        raise ValueError(f"team spin must be an int from 0 to 10000000 microseconds, got {us!r}")
    nt_team_spin_ns = <long long>us * 1000   # 10 s in ns does not fit an int


def team_counts() -> dict:
    """What the thread team did in this process: `jobs` run on it (GEMVs and packed products),
    `jobs_shared` of them in which a worker ran a unit, `jobs_spinning` of them after which the
    workers spun, GEMVs and packed products meant for the team that ran on the calling thread alone
    (`solo_runs`: during a back-off, or while another thread held the team), spinning jobs the
    workers missed (`misses`, see team_job_missed), back-offs entered (`backoffs`, one per few
    misses in a row), and shared spinning jobs whose caller waited more than 50 us for a worker's
    unit (`long_waits`: misses only when the wait was also longer than the caller's own work); and
    why the solo runs were alone: `solo_backoff` (a back-off), `solo_lagging` (a worker, descheduled,
    was still in the job before last, whose slot the job takes) and `solo_held` (another thread held
    the team, or the caller's workers could not be started)."""
    return {"jobs": nt_team_jobs, "jobs_shared": nt_team_jobs_shared, "jobs_spinning": nt_team_jobs_spinning,
            "solo_runs": nt_team_solo_runs, "misses": nt_team_misses_total, "backoffs": nt_team_backoffs,
            "long_waits": nt_team_long_waits, "solo_backoff": nt_team_solo_backoff,
            "solo_lagging": nt_team_solo_lagging, "solo_held": nt_team_solo_held}


def team_job_missed(int mine, int nunits, bint all_awake, long long work_ns, long long wait_ns) -> bool:
    """The team's rule (nt_team.h) for a spinning job that counts toward a back-off: the caller ran
    `mine` of `nunits` units, working `work_ns` and then waiting `wait_ns` for the workers'; a miss when
    the workers ran nothing although all were awake (`all_awake`), or when the caller waited longer
    than it worked (and than a small job's jitter): a worker was preempted inside its unit."""
    return bool(nt_team_job_missed(mine, nunits, all_awake, work_ns, wait_ns))


def _team_spin_from_env():
    env = os.environ.get("NUMTRACE_TEAM_SPIN_US")
    if not env:
        return
    try:
        us = int(env)
    except ValueError:
        us = -1
    if not 0 <= us <= 10_000_000:
        raise ValueError(f"NUMTRACE_TEAM_SPIN_US must be an integer from 0 to 10000000, got {env!r}")
    set_team_spin_us(us)


_team_spin_from_env()

# Below this many multiply-adds a product stays on the calling thread: waking the team costs more.
GEMV_PARALLEL_MIN = 1 << 15
cdef Py_ssize_t _gemv_parallel_min = GEMV_PARALLEL_MIN

GEMV_PEELS = bool(NT_GV_TAIL)
"""Whether this build reads the first columns of weights whose rows start past a 64-byte boundary
apart (an AVX-512 build: masked vectors, see nt_gemv.h)."""

GEMV_MAX_M = NT_GEMV_MAX_M
"""The most rows of x a product of the rows form takes in one pass over the weights."""

GEMV_ACTIVATIONS = {None: NT_ACT_NONE, "relu": NT_ACT_RELU, "relu_zero_first": NT_ACT_RELU_ZERO_FIRST}
"""Epilogue activation name -> kernel code (see nt_gemv.h for their NumPy semantics)."""


cdef struct GemvArgs:
    const char* x
    const char* w
    const char* b
    char* y
    char* parts       # rows form: the chunks' partial sums, M rows of n each (y itself for one chunk)
    Py_ssize_t ldw, K, n, itemsize, nchunks
    Py_ssize_t M, ldx, ldy, ldp   # vectors; elements between rows of x, of y, of the partials
    # rows form: the columns before W's first 64-byte-aligned one (0 when its rows start aligned, or
    # do not all start at the same offset): they are a piece of their own, and the other pieces'
    # bounds move by as many, so every vector load of W and of the partials is aligned
    Py_ssize_t head
    Py_ssize_t per_unit  # pieces (rows form) or outputs (dot form) per unit of the team
    Py_ssize_t ncols, colw   # rows form: each row chunk is cut into ncols pieces of colw columns
    int rows, act, f64
    int fold      # rows form on the team: each unit folds its own pieces' partials into y (_gemv_fold_unit)
    int reverse   # fold form: units compute their pieces last to first (every other call, see Gemv)
    int turn      # fold form: the unit whose fold is next (nt_team_wait_turn)


cdef void _gemv_rows_piece(const GemvArgs* g, Py_ssize_t c, Py_ssize_t j0, Py_ssize_t j1) noexcept nogil:
    """Partial sums of columns [j0, j1) of row chunk c of the rows form, the head columns apart.
    Every column is its own k-order sum, so how the columns are cut changes no bits."""
    cdef Py_ssize_t k0 = c * NT_GEMV_CHUNK, kc = min(<Py_ssize_t>NT_GEMV_CHUNK, g.K - k0)
    if j0 < g.head < j1 and g.M == 1:   # the head beside the other columns, in one pass
        if g.f64:
            nt_gemv_rows_lead_f64(<const double*>g.x + k0, <const double*>g.w + k0 * g.ldw + j0, g.ldw, kc,
                                  g.head - j0, j1 - j0, <double*>g.parts + c * g.ldp + j0)
        else:
            nt_gemv_rows_lead_f32(<const float*>g.x + k0, <const float*>g.w + k0 * g.ldw + j0, g.ldw, kc,
                                  g.head - j0, j1 - j0, <float*>g.parts + c * g.ldp + j0)
        return
    if j0 < g.head < j1:
        _gemv_rows_cols(g, c, j0, g.head)
        j0 = g.head
    _gemv_rows_cols(g, c, j0, j1)


cdef void _gemv_rows_cols(const GemvArgs* g, Py_ssize_t c, Py_ssize_t j0, Py_ssize_t j1) noexcept nogil:
    cdef Py_ssize_t k0 = c * NT_GEMV_CHUNK, kc = min(<Py_ssize_t>NT_GEMV_CHUNK, g.K - k0), n = j1 - j0
    cdef const char* x = g.x + k0 * g.itemsize
    cdef const char* w = g.w + (k0 * g.ldw + j0) * g.itemsize
    cdef char* part = g.parts + (c * g.M * g.ldp + j0) * g.itemsize
    if g.M > 1 and g.f64:
        nt_gemv_rows_m_f64(<const double*>x, g.ldx, g.M, <const double*>w, g.ldw, kc, n, <double*>part, g.ldp)
    elif g.M > 1:
        nt_gemv_rows_m_f32(<const float*>x, g.ldx, g.M, <const float*>w, g.ldw, kc, n, <float*>part, g.ldp)
    elif g.f64:
        nt_gemv_rows_f64(<const double*>x, <const double*>w, g.ldw, kc, n, <double*>part)
    else:
        nt_gemv_rows_f32(<const float*>x, <const float*>w, g.ldw, kc, n, <float*>part)


cdef void _gemv_dots_range(const GemvArgs* g, Py_ssize_t j0, Py_ssize_t j1) noexcept nogil:
    """Outputs [j0, j1) of the dot form, epilogue included."""
    if j1 <= j0:
        return
    cdef const char* w = g.w + j0 * g.ldw * g.itemsize
    cdef const char* b = g.b + j0 * g.itemsize if g.b != NULL else NULL
    cdef const char* x
    cdef char* y
    cdef Py_ssize_t m
    for m in range(g.M):   # the unit's rows of W stay in cache for the next vector
        x = g.x + m * g.ldx * g.itemsize
        y = g.y + (m * g.ldy + j0) * g.itemsize
        if g.f64:
            nt_gemv_dots_f64(<const double*>x, <const double*>w, g.ldw, g.K, j1 - j0, <const double*>b, g.act,
                             <double*>y)
        else:
            nt_gemv_dots_f32(<const float*>x, <const float*>w, g.ldw, g.K, j1 - j0, <const float*>b, g.act,
                             <float*>y)


cdef inline Py_ssize_t _gemv_col_bound(const GemvArgs* g, Py_ssize_t q) noexcept nogil:
    """Where column range q of the rows form starts (q = ncols: the end): q column widths past the
    head, so that a range starts at an aligned column of W."""
    return 0 if q == 0 else min(g.n, q * g.colw + g.head)


cdef inline void _gemv_rows_unit_piece(const GemvArgs* g, Py_ssize_t f) noexcept nogil:
    cdef Py_ssize_t q = f % g.ncols
    _gemv_rows_piece(g, f // g.ncols, _gemv_col_bound(g, q), _gemv_col_bound(g, q + 1))


cdef void _gemv_rows_unit(void* arg, int u) noexcept nogil:
    cdef const GemvArgs* g = <const GemvArgs*>arg
    cdef Py_ssize_t f
    for f in range(u * g.per_unit, min(g.nchunks * g.ncols, (u + 1) * g.per_unit)):
        _gemv_rows_unit_piece(g, f)


cdef void _gemv_fold_piece(const GemvArgs* g, Py_ssize_t f) noexcept nogil:
    """Piece f's partials added to y (copied for row chunk 0): one step of _gemv_run's finish."""
    cdef Py_ssize_t c = f // g.ncols, q = f % g.ncols, m
    cdef Py_ssize_t j0 = _gemv_col_bound(g, q), j1 = _gemv_col_bound(g, q + 1)
    cdef char* part
    cdef char* y
    for m in range(g.M):
        part = g.parts + ((c * g.M + m) * g.ldp + j0) * g.itemsize
        y = g.y + (m * g.ldy + j0) * g.itemsize
        if g.f64:
            nt_gemv_fold_f64(<double*>y, <const double*>part, j1 - j0, c == 0)
        else:
            nt_gemv_fold_f32(<float*>y, <const float*>part, j1 - j0, c == 0)


cdef void _gemv_fold_unit(void* arg, int u) noexcept nogil:
    """A thread's share of the rows form, finish included: the partials of its pieces (a contiguous
    range of the (row chunk, column range) pieces), then, once the units before it have folded
    theirs, its own folded into y in piece order, so that every column sums its row chunks in chunk
    order, as the caller's finish does: the same bits, but each thread reads only the partials it
    wrote (they stay in its core's cache) instead of the caller reading them all. The unit of the last
    piece adds the bias and the activation. The order in which a unit computes its pieces changes no
    bits; alternating it between calls leaves the slice of the weights read last in the core's cache
    to be read first."""
    cdef GemvArgs* g = <GemvArgs*>arg
    cdef Py_ssize_t total = g.nchunks * g.ncols, f
    cdef Py_ssize_t f0 = u * g.per_unit, f1 = min(total, (u + 1) * g.per_unit)
    for f in range(f1 - f0):
        _gemv_rows_unit_piece(g, f1 - 1 - f if g.reverse else f0 + f)
    nt_team_wait_turn(&g.turn, u)
    for f in range(f0, f1):
        _gemv_fold_piece(g, f)
    if f1 == total:
        for f in range(g.M):
            if g.f64:
                nt_gemv_epilogue_f64(<double*>g.y + f * g.ldy, <const double*>g.b, g.n, g.act)
            else:
                nt_gemv_epilogue_f32(<float*>g.y + f * g.ldy, <const float*>g.b, g.n, g.act)
    nt_team_pass_turn(&g.turn, u + 1)


cdef void _gemv_dots_unit(void* arg, int u) noexcept nogil:
    cdef const GemvArgs* g = <const GemvArgs*>arg
    _gemv_dots_range(g, u * g.per_unit, min(g.n, (u + 1) * g.per_unit))


cdef inline Py_ssize_t _gemv_column_pieces(Py_ssize_t nchunks, Py_ssize_t n, Py_ssize_t align,
                                          int nteam) noexcept nogil:
    """Into how many column ranges the rows form cuts each row chunk: one per thread when the chunks
    do not divide evenly among `nteam` threads and each range keeps two vectors (`align` elements)."""
    return nteam if nteam > 1 and nchunks % nteam and n >= 2 * align * nteam else 1


def gemv_team_folds(Py_ssize_t K, int nthreads) -> bool:
    """Whether a team product of the rows form with K rows folds its partials on the team
    (_gemv_fold_unit): more than one row chunk, more than one thread (stats())."""
    return K > NT_GEMV_CHUNK and nthreads > 1 and nt_team_spin_ns > 0


def gemv_column_pieces(Py_ssize_t K, Py_ssize_t n, Py_ssize_t itemsize, int nthreads) -> int:
    """`_gemv_column_pieces` for a rows-form product of K rows and n columns on the team (stats())."""
    return _gemv_column_pieces((K + NT_GEMV_CHUNK - 1) // NT_GEMV_CHUNK, n, 64 // itemsize, nthreads)


cdef void _gemv_run(GemvArgs* g, int nthreads) noexcept nogil:
    """The product over a team of up to `nthreads` (nt_team.h). Its units are pieces of the rows
    form (each row chunk cut into one 64-byte-aligned column range per thread, so that the threads'
    shares stay even when the chunks do not divide evenly among them) or 64-byte-aligned output
    ranges of the dot form, grouped to at most NT_TEAM_MAX_UNITS, or, for the rows form on more than
    one thread with more than one row chunk, grouped to one unit per thread that also folds its
    partials (_gemv_fold_unit); each thread starts on the same units every call, so it keeps working
    on the same slice of the weights."""
    cdef Py_ssize_t align = 64 // g.itemsize
    cdef Py_ssize_t fine, units
    cdef int nteam = nthreads if g.M * g.K * g.n >= _gemv_parallel_min and nt_team_spin_ns > 0 else 1
    g.ncols = _gemv_column_pieces(g.nchunks, g.n, align, nteam) if g.rows else 1
    g.colw = g.n
    if g.ncols > 1:
        g.colw = ((g.n + g.ncols - 1) // g.ncols + align - 1) // align * align
        g.ncols = (g.n + g.colw - 1) // g.colw
    fine = g.nchunks * g.ncols if g.rows else (g.n + align - 1) // align
    g.fold = g.rows and g.nchunks > 1 and nteam > 1
    g.turn = 0
    units = nteam if g.fold else NT_TEAM_MAX_UNITS   # the fold form: one unit per thread
    g.per_unit = (fine + units - 1) // units
    units = (fine + g.per_unit - 1) // g.per_unit if fine else 0
    if not g.rows:
        g.per_unit *= align
    nt_team_run_spin(_gemv_fold_unit if g.fold else _gemv_rows_unit if g.rows else _gemv_dots_unit, g,
                     <int>units, nteam, nt_team_spin_ns)
    if not g.rows or g.fold:
        return
    cdef Py_ssize_t m
    for m in range(g.M):
        if g.f64:
            nt_gemv_finish_f64(<double*>g.y + m * g.ldy, <const double*>g.parts + m * g.ldp, g.nchunks,
                               g.M * g.ldp, g.n, <const double*>g.b, g.act)
        else:
            nt_gemv_finish_f32(<float*>g.y + m * g.ldy, <const float*>g.parts + m * g.ldp, g.nchunks,
                               g.M * g.ldp, g.n, <const float*>g.b, g.act)


cdef inline bint _gemv_unit_stride(cnp.ndarray a, int axis, Py_ssize_t itemsize):
    return a.shape[axis] == 1 or a.strides[axis] == itemsize


cdef class Gemv:
    """A matrix-vector MatmulStep as `run(env, nthreads)`: env[vec] (the (K,) or (M, K) vectors,
    M <= GEMV_MAX_M),
    env[mat] (the matrix; `k_axis` is its summed axis), optional env[bias] of shape (N,) added, then
    the activation, written to env[out]. `fallback(env, nthreads)` computes the same with NumPy for
    layouts the kernels do not take."""
    cdef Py_ssize_t vec, mat, bias, out
    cdef int k_axis, act, typenum
    cdef unsigned calls   # the fold form's direction alternates with each call (_gemv_fold_unit)
    cdef int form   # the last call's: -1 none yet, 0 dots, 1 rows, 2 NumPy (see last_form)
    cdef bint peeled   # the last call's: W's first columns peeled off to align its loads (GemvArgs.head)
    cdef object fallback

    def __init__(self, Py_ssize_t vec, Py_ssize_t mat, Py_ssize_t out, int k_axis, object dtype,
                 Py_ssize_t bias=-1, object activation=None, object fallback=None):
        if k_axis not in (0, 1):
            raise ValueError(f"k_axis must be 0 or 1, got {k_axis}")
        if activation not in GEMV_ACTIVATIONS:
            raise ValueError(f"unknown epilogue activation {activation!r}")
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"the GEMV kernels take float32 and float64, got {dtype}")
        if not callable(fallback):
            raise ValueError("a Gemv needs its NumPy fallback")
        self.vec, self.mat, self.out, self.bias = vec, mat, out, bias
        self.k_axis = k_axis
        self.act = GEMV_ACTIVATIONS[activation]
        self.typenum = np.dtype(dtype).num
        self.fallback = fallback
        self.form = -1

    @property
    def last_form(self):
        """What the last call ran: "rows" (a matrix whose summed axis is its outer one), "dots" (the
        other way), "numpy" (a layout the kernels do not take), or None before the first call. The
        matrix's layout at the call decides, not the one traced (stats())."""
        return (None, "dots", "rows", "numpy")[self.form + 1]

    @property
    def last_peeled(self):
        """Whether the last call read W's first columns apart, so that its other loads of W were
        64-byte aligned: a rows-form matrix of more than one row chunk whose rows start at one
        unaligned offset (a NumPy array is 16-byte aligned, a view may be less) (stats())."""
        return bool(self.peeled)

    def __call__(self, list env, int nthreads):
        cdef GemvArgs g
        cdef object xo = env[self.vec], wo = env[self.mat], yo = env[self.out]
        cdef object bo = env[self.bias] if self.bias >= 0 else None
        cdef cnp.ndarray x, w, y, b
        cdef Py_ssize_t itemsize, sk, sj
        cdef bint rows_ok
        self.form, self.peeled = 2, False
        if not (type(xo) is np.ndarray and type(wo) is np.ndarray and type(yo) is np.ndarray
                and (bo is None or type(bo) is np.ndarray)):
            return self.fallback(env, nthreads)
        x, w, y = xo, wo, yo
        b = bo
        if (cnp.PyArray_TYPE(x) != self.typenum or cnp.PyArray_TYPE(w) != self.typenum
                or cnp.PyArray_TYPE(y) != self.typenum or w.ndim != 2
                or (b is not None and (cnp.PyArray_TYPE(b) != self.typenum or b.ndim != 1))):
            return self.fallback(env, nthreads)
        itemsize = cnp.PyArray_ITEMSIZE(w)
        g.K = w.shape[self.k_axis]
        g.n = w.shape[1 - self.k_axis]
        # The vectors (rows of x), outputs (rows of y) and bias run along one contiguous axis of the
        # expected length; a few vectors (M rows of x) make as many rows of y.
        g.M = x.shape[0] if x.ndim == 2 else 1
        if g.M == 1:
            rows_ok = y.size == g.n
        else:
            rows_ok = (g.M <= NT_GEMV_MAX_M and y.ndim == 2 and y.shape[0] == g.M and y.shape[1] == g.n
                       and x.strides[0] % itemsize == 0 and y.strides[0] % itemsize == 0)
        if (x.shape[x.ndim - 1] != g.K or x.size != g.M * g.K or not rows_ok
                or not _gemv_unit_stride(x, x.ndim - 1, itemsize)
                or not _gemv_unit_stride(y, y.ndim - 1, itemsize) or not cnp.PyArray_ISALIGNED(x)
                or not cnp.PyArray_ISALIGNED(w) or not cnp.PyArray_ISALIGNED(y)
                or (b is not None and (b.shape[0] != g.n or not _gemv_unit_stride(b, 0, itemsize)
                                       or not cnp.PyArray_ISALIGNED(b)))):
            return self.fallback(env, nthreads)
        sk = w.strides[self.k_axis]
        sj = w.strides[1 - self.k_axis]
        if _gemv_unit_stride(w, 1 - self.k_axis, itemsize) and sk % itemsize == 0:
            g.rows, g.ldw = 1, sk // itemsize
        elif _gemv_unit_stride(w, self.k_axis, itemsize) and sj % itemsize == 0:
            g.rows, g.ldw = 0, sj // itemsize
        else:
            return self.fallback(env, nthreads)
        self.form = g.rows
        g.x = <const char*>cnp.PyArray_DATA(x)
        g.w = <const char*>cnp.PyArray_DATA(w)
        g.y = <char*>cnp.PyArray_DATA(y)
        g.b = <const char*>cnp.PyArray_DATA(b) if b is not None else NULL
        g.itemsize = itemsize
        g.act = self.act
        g.f64 = self.typenum == cnp.NPY_DOUBLE
        g.ldx = x.strides[0] // itemsize if g.M > 1 else 0
        g.ldy = y.strides[0] // itemsize if g.M > 1 else 0
        g.nchunks = (g.K + NT_GEMV_CHUNK - 1) // NT_GEMV_CHUNK if g.rows else 0
        g.reverse = self.calls & 1
        self.calls += 1
        g.parts, g.ldp, g.head = g.y, g.ldy, 0
        cdef char* parts_mem = NULL
        cdef Py_ssize_t offset = 0
        if g.nchunks > 1:
            # The partials get W's offset within 64 bytes and rows a multiple of 64 bytes apart, so a
            # column that starts a vector of W starts one of the partials too; a weight matrix whose
            # rows all start at one offset past a 64-byte boundary has its first columns peeled off
            # (GemvArgs.head): a vector load across two cache lines costs two.
            if NT_GV_TAIL and g.ldw * itemsize % 64 == 0:
                offset = <Py_ssize_t>(<size_t>g.w % 64)
                g.head = (64 - offset) // itemsize if offset else 0
                if g.head >= g.n:
                    g.head, offset = 0, 0
            g.ldp = (g.n + 64 // itemsize - 1) // (64 // itemsize) * (64 // itemsize)
            parts_mem = <char*>PyMem_Malloc(g.nchunks * g.M * g.ldp * itemsize + 128)
            if parts_mem == NULL:
                raise MemoryError()
            g.parts = parts_mem + (offset - <Py_ssize_t>(<size_t>parts_mem % 64) + 64) % 64
        self.peeled = g.head > 0
        try:
            with nogil:
                _gemv_run(&g, max(1, nthreads))
        finally:
            PyMem_Free(parts_mem)
