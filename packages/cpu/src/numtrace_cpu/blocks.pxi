"""The typed block loops of the interpreter: everything that runs with the GIL released, per ISA.

This file is compiled once per instruction set (blocks_baseline, blocks_avx2, blocks_avx512, each a
one-line .pyx that includes it; setup.py gives each its -march), because only these loops gain from
wider vectors. The program validation, operand binding, call runtime and output recycling are
ISA-independent and compiled once, in runtime.pyx; numtrace_cpu.isa hands the runtime the pass of
the widest build this CPU runs (RUN_PASS below).

A pass walks its iteration space in blocks of at most `BLOCK` elements: operands are read in place
when their innermost stride is unit (otherwise gathered), every instruction is one tight loop over
the block (nt_loops.h, expanded from nt_opcodes.h's table; an operand that is one value over the
block is read as a scalar, and two float instructions joined by a one-use temporary run as one
loop: nt_pairs.h), outputs are written in
place, and reductions fold each block into per-row accumulators. No full-size temporary ever
exists. Large passes split their units (chunks of blocks, reduction rows or column groups) over
OpenMP threads, each with its own scratch registers. Memory safety rests
on the runtime having validated the program and every operand before the pass starts; these loops
then only visit indices inside the collapsed iteration shape. The passes that run outside the
interpreter (scans, tiny-K products) are in line_passes.pxi, included right after this file.
"""

from cpython.pycapsule cimport PyCapsule_New
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, NAN, sqrt
from libc.stdint cimport (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint16_t,
                          uint32_t, uint64_t)
from libc.string cimport memcpy, memset

from numtrace_cpu.interp cimport *

cimport numpy as cnp

cnp.import_array()

def _numpy_minmax_vector_bytes() -> int:
    """Bytes per vector of the loop NumPy dispatches np.maximum's reduction to on this CPU (its
    NPY_DISABLE_CPU_FEATURES included): which of a row's NaNs a max/min returns depends on it
    (`_store_nan_result`)."""
    try:
        from numpy.lib.introspect import opt_func_info
        target = opt_func_info(func_name="^maximum$", signature="^ddd$")["maximum"]["ddd"]["current"]
    except (ImportError, KeyError):
        from numpy._core._multiarray_umath import __cpu_features__ as features
        target = "X86_V4" if features.get("AVX512_SKX") else ("X86_V3" if features.get("AVX2") else "")
    return {"X86_V4": 64, "AVX512_SKX": 64, "X86_V3": 32, "AVX2": 32}.get(target, 16)

cdef Py_ssize_t NPY_MINMAX_VECTOR_BYTES = _numpy_minmax_vector_bytes()


cdef extern from "nt_loops.h" nogil:
    # The opcodes' loops, expanded from nt_opcodes.h's table (see there and nt_loops.h).
    void nt_run_loop(int op, int dt, char* d, const char* a, const char* b, Py_ssize_t n)
    void nt_run_scalar_loop(int op, int dt, char* d, const char* a, const char* s, int left, Py_ssize_t n)
    # The scans' steps: np.add's and np.multiply's scalar semantics.
    int32_t nt_op_add_i32(int32_t a, int32_t b)
    int64_t nt_op_add_i64(int64_t a, int64_t b)
    float nt_op_add_f32(float a, float b)
    double nt_op_add_f64(double a, double b)
    int32_t nt_op_multiply_i32(int32_t a, int32_t b)
    int64_t nt_op_multiply_i64(int64_t a, int64_t b)
    float nt_op_multiply_f32(float a, float b)
    double nt_op_multiply_f64(double a, double b)

# The persistent thread team (nt_team.h): generated passes below, GEMVs and packed products
# (gemv.pxi, packed.pxi).
cdef extern from "nt_team.h" nogil:
    int NT_TEAM_MAX_UNITS
    ctypedef void (*nt_team_fn)(void* arg, int unit) noexcept nogil
    void nt_team_run_spin(nt_team_fn fn, void* arg, int nunits, int nteam, long long spin_ns)
    void nt_team_wait_turn(const int* turn, int u)
    void nt_team_pass_turn(int* turn, int next)
    int nt_team_slot_take(int* busy, int n)
    void nt_team_slot_put(int* busy, int slot)

cdef extern from "nt_team.h":
    long long nt_team_spin_ns
    long long nt_team_jobs, nt_team_jobs_shared, nt_team_jobs_spinning, nt_team_solo_runs, nt_team_backoffs
    long long nt_team_misses_total, nt_team_long_waits
    long long nt_team_solo_backoff, nt_team_solo_lagging, nt_team_solo_held
    int nt_team_job_missed(int mine, int nunits, int all_awake, long long work_ns, long long wait_ns)

cdef extern from "nt_gen.h" nogil:
    ctypedef void (*nt_gen_loop_fn)(char* d, const char* a, const char* b, Py_ssize_t n)
    ctypedef struct nt_gen_reduce:
        void (*init)(const void* cx, int j, void* acc) noexcept nogil
        void (*fold)(const void* cx, int j, void* acc, const char* x, Py_ssize_t n) noexcept nogil
        void (*store)(const void* cx, int j, const void* acc, char* out) noexcept nogil
        const void* cx
        int nkept
        Py_ssize_t cols, rows
        void (*store_sum)(const void* cx, int j, double s, Py_ssize_t count, char* out) noexcept nogil
        Py_ssize_t sequential_below
        uint64_t stream
        Py_ssize_t tile_rows
        void (*fold_rows)(const void* cx, int j, const char* x, Py_ssize_t n, Py_ssize_t rows, char* out,
                          Py_ssize_t so) noexcept nogil
    ctypedef void (*nt_gen_fn)(char* const* data, const Py_ssize_t* strides, const Py_ssize_t* shape, int nd,
                               Py_ssize_t u0, Py_ssize_t u1, const double* fc, const int64_t* ic,
                               const nt_gen_loop_fn* loops, const nt_gen_reduce* red)
    const nt_gen_loop_fn* nt_gen_loop_table()
    double nt_gen_add(double a, double b)
    bint NT_GEN_F_OUT_I32(double x)
    bint NT_GEN_F_OUT_I64(double x)
    void nt_gen_raise_invalid()
    enum: NT_GEN_ACC_BYTES
    enum: NT_GEN_MAXCOLS

cdef extern from "nt_pairs.h" nogil:
    int nt_pair_f32(int op1, int op2, int tleft, float* d, const float* x, const float* y, const float* z,
                    Py_ssize_t n)
    int nt_pair_f64(int op1, int op2, int tleft, double* d, const double* x, const double* y, const double* z,
                    Py_ssize_t n)

cdef extern from "nt_simd.h" nogil:
    enum: NT_SUM_SEQUENTIAL_BELOW
    double nt_sum_f32(const float* a, Py_ssize_t n)
    double nt_sum_f64(const double* a, Py_ssize_t n)
    double nt_m2_f32(const float* a, Py_ssize_t n, double mean)
    double nt_m2_f64(const double* a, Py_ssize_t n, double mean)
    float nt_max_f32(const float* a, Py_ssize_t n, float acc, int* nan)
    double nt_max_f64(const double* a, Py_ssize_t n, double acc, int* nan)
    int32_t nt_max_i32(const int32_t* a, Py_ssize_t n, int32_t acc, int* nan)
    int64_t nt_max_i64(const int64_t* a, Py_ssize_t n, int64_t acc, int* nan)
    unsigned char nt_max_u8(const unsigned char* a, Py_ssize_t n, unsigned char acc, int* nan)
    float nt_min_f32(const float* a, Py_ssize_t n, float acc, int* nan)
    double nt_min_f64(const double* a, Py_ssize_t n, double acc, int* nan)
    int32_t nt_min_i32(const int32_t* a, Py_ssize_t n, int32_t acc, int* nan)
    int64_t nt_min_i64(const int64_t* a, Py_ssize_t n, int64_t acc, int* nan)
    unsigned char nt_min_u8(const unsigned char* a, Py_ssize_t n, unsigned char acc, int* nan)
    void nt_rowmax_f32(const float* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, float init)
    void nt_rowmax_f64(const double* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, double init)
    void nt_rowmax_i32(const int32_t* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, int32_t init)
    void nt_rowmax_i64(const int64_t* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, int64_t init)
    void nt_rowmax_u8(const unsigned char* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, unsigned char init)
    void nt_rowmin_f32(const float* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, float init)
    void nt_rowmin_f64(const double* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, double init)
    void nt_rowmin_i32(const int32_t* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, int32_t init)
    void nt_rowmin_i64(const int64_t* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, int64_t init)
    void nt_rowmin_u8(const unsigned char* a, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so, unsigned char init)
    void nt_colmax_f32(const float* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, float* m, int* nan)
    void nt_colmax_f64(const double* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, double* m, int* nan)
    void nt_colmax_i32(const int32_t* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, int32_t* m, int* nan)
    void nt_colmax_i64(const int64_t* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, int64_t* m, int* nan)
    void nt_colmax_u8(const unsigned char* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, unsigned char* m,
                      int* nan)
    void nt_colmin_f32(const float* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, float* m, int* nan)
    void nt_colmin_f64(const double* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, double* m, int* nan)
    void nt_colmin_i32(const int32_t* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, int32_t* m, int* nan)
    void nt_colmin_i64(const int64_t* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, int64_t* m, int* nan)
    void nt_colmin_u8(const unsigned char* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, unsigned char* m,
                      int* nan)
    void nt_colsum_f32(const float* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, double* s)
    void nt_colsum_f64(const double* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, double* s)
    void nt_colsum_i64(const int64_t* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, uint64_t* s)

ctypedef unsigned char u8

ctypedef fused num:
    u8
    int32_t
    int64_t
    float
    double

# Source types of a cast: the compute dtypes and the storage-only ones (u8 also reads uint8).
ctypedef fused num2:
    u8
    int8_t
    int16_t
    uint16_t
    int32_t
    uint32_t
    int64_t
    uint64_t
    float
    double

cdef void _where(num* d, const u8* c, const num* a, const num* b, Py_ssize_t n) noexcept nogil:
    # Both operands are read for every element, so the select compiles to a blend; a conditional
    # read (`a[i] if c[i] else b[i]`) became masked loads, ~2x slower.
    cdef Py_ssize_t i
    cdef num x, y
    for i in range(n):
        x = a[i]
        y = b[i]
        d[i] = x if c[i] else y

cdef inline num _convert(num2 x, num* kind) noexcept nogil:
    """x converted to num like NumPy's casts: float->int truncates, and NaN or out-of-range gives
    the integer minimum (x86 behaviour) instead of C's undefined behaviour."""
    if num is u8:
        return x != 0
    elif (num is int32_t) and (num2 is float or num2 is double):
        return <int32_t>x if ((x >= -2147483648.0) & (x < 2147483648.0)) else INT32_MIN
    elif (num is int64_t) and (num2 is float or num2 is double):
        return <int64_t>x if ((x >= -9223372036854775808.0) & (x < 9223372036854775808.0)) else INT64_MIN
    else:
        return <num>x

cdef void _cast_to(num* d, const num2* a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef int out = 0
    for i in range(n):
        d[i] = _convert(a[i], d)
    if (num is int32_t or num is int64_t) and (num2 is float or num2 is double):
        # NumPy's cast of a float out of the int's range raises 'invalid'; _convert's select does not
        for i in range(n):
            out |= NT_GEN_F_OUT_I32(a[i]) if num is int32_t else NT_GEN_F_OUT_I64(a[i])
        if out:
            nt_gen_raise_invalid()

cdef void _cast_from(int dst_dt, char* d, const num2* a, Py_ssize_t n) noexcept nogil:
    if dst_dt == DT_BOOL:
        _cast_to(<u8*>d, a, n)
    elif dst_dt == DT_I32:
        _cast_to(<int32_t*>d, a, n)
    elif dst_dt == DT_I64:
        _cast_to(<int64_t*>d, a, n)
    elif dst_dt == DT_F32:
        _cast_to(<float*>d, a, n)
    else:
        _cast_to(<double*>d, a, n)

cdef void _exec(const Instr* ins, char** regs, const u8* uniform, Py_ssize_t n) noexcept nogil:
    """One instruction over n elements of its registers; uniform[r]: register r holds one value
    repeated (see `_block`), which a binary op or comparison then reads as a scalar."""
    cdef char* d = regs[ins.dst]
    cdef char* a = regs[ins.a]
    cdef char* b = regs[ins.b] if ins.b >= 0 else NULL
    cdef char* c = regs[ins.c] if ins.c >= 0 else NULL
    cdef int dt = ins.dt, op = ins.op, cat = ins.cat
    if cat == CAT_WHERE:
        if dt == DT_F32: _where(<float*>d, <u8*>c, <float*>a, <float*>b, n)
        elif dt == DT_F64: _where(<double*>d, <u8*>c, <double*>a, <double*>b, n)
        elif dt == DT_I32: _where(<int32_t*>d, <u8*>c, <int32_t*>a, <int32_t*>b, n)
        elif dt == DT_I64: _where(<int64_t*>d, <u8*>c, <int64_t*>a, <int64_t*>b, n)
        else: _where(<u8*>d, <u8*>c, <u8*>a, <u8*>b, n)
    elif cat == CAT_CAST:   # dt is the destination dtype, the source register carries its own
        _cast_dispatch(dt, ins.c, d, a, n)
    elif (cat == CAT_BINARY or cat == CAT_BINARY_BOOL) and (uniform[ins.a] ^ uniform[ins.b]):
        if uniform[ins.b]:
            nt_run_scalar_loop(op, dt, d, a, b, 0, n)
        else:
            nt_run_scalar_loop(op, dt, d, b, a, 1, n)
    else:
        nt_run_loop(op, dt, d, a, b, n)

cdef bint _exec_pair(const Instr* ins, char** regs, Py_ssize_t n) noexcept nogil:
    """Instructions ins[0] and ins[1] as one loop (see nt_pairs.h), where ins[0].feeds_next says its
    result is read by ins[1] alone. False: nt_pairs.h has no loop for them, run them one by one."""
    cdef const Instr* nxt = ins + 1
    cdef int tleft = nxt.a == ins.dst
    cdef const char* z
    if ins.cat != CAT_BINARY or nxt.cat != CAT_BINARY or nxt.dt != ins.dt:
        return False
    z = regs[nxt.b] if tleft else regs[nxt.a]
    if ins.dt == DT_F32:
        return nt_pair_f32(ins.op, nxt.op, tleft, <float*>regs[nxt.dst], <const float*>regs[ins.a],
                           <const float*>regs[ins.b], <const float*>z, n)
    if ins.dt == DT_F64:
        return nt_pair_f64(ins.op, nxt.op, tleft, <double*>regs[nxt.dst], <const double*>regs[ins.a],
                           <const double*>regs[ins.b], <const double*>z, n)
    return False

cdef void _cast_dispatch(int dst_dt, int src_dt, char* d, const char* a, Py_ssize_t n) noexcept nogil:
    if src_dt == DT_F32: _cast_from(dst_dt, d, <float*>a, n)
    elif src_dt == DT_F64: _cast_from(dst_dt, d, <double*>a, n)
    elif src_dt == DT_I32: _cast_from(dst_dt, d, <int32_t*>a, n)
    elif src_dt == DT_I64: _cast_from(dst_dt, d, <int64_t*>a, n)
    elif src_dt == DT_I8: _cast_from(dst_dt, d, <int8_t*>a, n)
    elif src_dt == DT_I16: _cast_from(dst_dt, d, <int16_t*>a, n)
    elif src_dt == DT_U16: _cast_from(dst_dt, d, <uint16_t*>a, n)
    elif src_dt == DT_U32: _cast_from(dst_dt, d, <uint32_t*>a, n)
    elif src_dt == DT_U64: _cast_from(dst_dt, d, <uint64_t*>a, n)
    else: _cast_from(dst_dt, d, <u8*>a, n)   # bool and uint8 convert alike: 0..255 to any dtype

cdef void _fill(char* dst, const char* src, Py_ssize_t itemsize, Py_ssize_t n) noexcept nogil:
    """n copies of one element (a broadcast operand or a constant)."""
    cdef Py_ssize_t i
    if itemsize == 4:
        for i in range(n):
            (<uint32_t*>dst)[i] = (<const uint32_t*>src)[0]
    elif itemsize == 2:
        for i in range(n):
            (<uint16_t*>dst)[i] = (<const uint16_t*>src)[0]
    elif itemsize == 8:
        for i in range(n):
            (<uint64_t*>dst)[i] = (<const uint64_t*>src)[0]
    else:
        memset(dst, src[0], n)

cdef void _gather(char* dst, const char* src, Py_ssize_t stride, Py_ssize_t itemsize,
                  Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if stride == 0:
        _fill(dst, src, itemsize, n)
    elif stride == itemsize:
        memcpy(dst, src, n * itemsize)   # a contiguous row that is not aligned, or part of a wider one
    else:
        _strided_copy(dst, itemsize, src, stride, itemsize, n)

cdef void _scatter(char* dst, const char* src, Py_ssize_t stride, Py_ssize_t itemsize,
                   Py_ssize_t n) noexcept nogil:
    _strided_copy(dst, stride, src, itemsize, itemsize, n)

cdef void _strided_copy(char* dst, Py_ssize_t sd, const char* src, Py_ssize_t ss, Py_ssize_t itemsize,
                        Py_ssize_t n) noexcept nogil:
    """n elements from src (byte stride ss) to dst (sd). Typed moves for the usual sizes: a memcpy call
    per element made writing a stacked (interleaved) output five times slower than the pass."""
    cdef Py_ssize_t i
    if itemsize == 8:
        for i in range(n):
            (<uint64_t*>(dst + i * sd))[0] = (<const uint64_t*>(src + i * ss))[0]
    elif itemsize == 4:
        for i in range(n):
            (<uint32_t*>(dst + i * sd))[0] = (<const uint32_t*>(src + i * ss))[0]
    elif itemsize == 1:
        for i in range(n):
            dst[i * sd] = src[i * ss]
    else:
        for i in range(n):
            memcpy(dst + i * sd, src + i * ss, itemsize)

cdef inline bint _direct(const char* p, Py_ssize_t stride, Py_ssize_t itemsize) noexcept nogil:
    """An operand block can be used in place: unit stride and naturally aligned."""
    return stride == itemsize and (<size_t>p) % itemsize == 0

cdef void _block(const Ctx* cx, char** regs, char* scratch, char** ptrs, Py_ssize_t n, Py_ssize_t rows,
                 const char** tiles) noexcept nogil:
    """Run the program over one block of `rows` rows of n elements. Operand k's first element is at
    ptrs[k]; its elements advance by its innermost stride and (rows > 1) its rows by its stride
    along dim nd-2. `tiles` caches broadcast rows per register (see `_load`), or is NULL."""
    cdef int r, k, last = cx.nd - 1
    cdef Py_ssize_t st, so, isz, i
    cdef u8 uniform[256]
    for r in range(cx.nregs):
        kind = cx.reg_kind[r]
        uniform[r] = kind == REG_CONST
        if kind == REG_INPUT or kind == REG_OUTPUT:
            k = cx.reg_arg[r]
            isz = nt_itemsize[cx.reg_dt[r]]
            st = cx.strides[k * MAXD + last]
            so = cx.strides[k * MAXD + last - 1] if rows > 1 else n * st
            uniform[r] = kind == REG_INPUT and st == 0 and so == 0   # broadcast over the whole block
            if _direct(ptrs[k], st, isz) and so == n * st:
                regs[r] = ptrs[k]
            else:
                regs[r] = scratch + r * cx.reg_stride
                if kind == REG_INPUT:
                    _load(cx, regs[r], ptrs[k], st, so, isz, n, rows, (tiles + r) if tiles != NULL else NULL)
    r = 0
    while r < cx.ninstr:
        if cx.instrs[r].feeds_next and _exec_pair(&cx.instrs[r], regs, n * rows):
            r += 2
        else:
            _exec(&cx.instrs[r], regs, uniform, n * rows)
            r += 1
    for r in range(cx.nregs):
        if cx.reg_kind[r] == REG_OUTPUT:
            k = cx.reg_arg[r]
            if regs[r] != ptrs[k]:
                isz = nt_itemsize[cx.reg_dt[r]]
                st = cx.strides[k * MAXD + last]
                so = cx.strides[k * MAXD + last - 1] if rows > 1 else 0
                for i in range(rows):
                    _scatter(ptrs[k] + i * so, regs[r] + i * n * isz, st, isz, n)

cdef void _load(const Ctx* cx, char* dst, const char* src, Py_ssize_t st, Py_ssize_t so, Py_ssize_t isz,
                Py_ssize_t n, Py_ssize_t rows, const char** tile) noexcept nogil:
    """`rows` rows of an input operand into its scratch register. Rows that repeat (so == 0: the
    operand is broadcast along them, like the bias of ``x + b``) are gathered once and copied into a
    tile of cx.rows rows, which stays valid while the operand's pointer does: later blocks of the
    same unit skip the load (`tile[0]` remembers the pointer)."""
    cdef Py_ssize_t i, have = 1, m, row = n * isz
    if so == 0 and tile != NULL:
        if tile[0] == src:
            return
        _gather(dst, src, st, isz, n)
        while have < cx.rows:
            m = have if 2 * have <= cx.rows else cx.rows - have
            memcpy(dst + have * row, dst, m * row)
            have += m
        tile[0] = src
        return
    if st == 0 and rows > 1:   # one value per row, as ``x[:, None]``: no call per short row
        _fill_rows(dst, src, so, isz, n, rows)
        return
    for i in range(rows):
        _gather(dst + i * row, src + i * so, st, isz, n)

cdef void _fill_rows(char* dst, const char* src, Py_ssize_t so, Py_ssize_t isz, Py_ssize_t n,
                     Py_ssize_t rows) noexcept nogil:
    """Row i of `rows` rows of n elements: n copies of the element at src + i * so."""
    cdef Py_ssize_t i, j
    cdef uint64_t v8
    cdef uint32_t v4
    if isz == 8:
        for i in range(rows):
            v8 = (<const uint64_t*>(src + i * so))[0]
            for j in range(n):
                (<uint64_t*>dst)[i * n + j] = v8
    elif isz == 4:
        for i in range(rows):
            v4 = (<const uint32_t*>(src + i * so))[0]
            for j in range(n):
                (<uint32_t*>dst)[i * n + j] = v4
    else:
        for i in range(rows):
            _fill(dst + i * n * isz, src + i * so, isz, n)

cdef void _offsets(const Ctx* cx, Py_ssize_t index, int first, int stop, char** ptrs) noexcept nogil:
    """Add to ptrs the byte offsets of multi-index `index` over collapsed dims [first, stop)."""
    cdef int d, k
    cdef Py_ssize_t i
    for d in range(stop - 1, first - 1, -1):
        i = index % cx.shape[d]
        index = index // cx.shape[d]
        if i:
            for k in range(cx.nops):
                ptrs[k] += i * cx.strides[k * MAXD + d]

cdef void _elementwise_unit(const Ctx* cx, Py_ssize_t u, char* scratch) noexcept nogil:
    """Work unit u of an elementwise pass: CHUNK elements of the innermost dim at one outer index,
    run block by block (the per-unit setup is paid once per chunk, not per block, and an operand
    broadcast along the innermost dim is filled into its register once per chunk: see `_load`)."""
    cdef char* base[64]
    cdef char* ptrs[64]
    cdef char* regs[256]
    cdef const char* tiles[256]
    cdef int k, last = cx.nd - 1
    cdef Py_ssize_t inner = cx.shape[last], n, start, stop
    cdef Py_ssize_t nchunk = (inner + CHUNK - 1) // CHUNK
    start = (u % nchunk) * CHUNK
    stop = start + CHUNK if start + CHUNK < inner else inner
    for k in range(cx.nops):
        base[k] = cx.data[k]
    _offsets(cx, u // nchunk, 0, last, base)
    _init_const_regs(cx, regs, scratch)
    for k in range(cx.nregs):
        tiles[k] = NULL
    while start < stop:   # blocks are full but the last, so a tile filled by the first covers them all
        n = stop - start if stop - start < BLOCK else BLOCK
        for k in range(cx.nops):
            ptrs[k] = base[k] + start * cx.strides[k * MAXD + last]
        _block(cx, regs, scratch, ptrs, n, 1, tiles)
        start += n

cdef void _rows_unit(const Ctx* cx, Py_ssize_t u, char* scratch) noexcept nogil:
    """Work unit u of a pass whose innermost dim is short (cx.rows > 1), e.g. ``(n, 10) + (10,)``:
    blocks of cx.rows whole rows (dim nd-2) of it, so an instruction's dispatch is paid per block
    rather than per row of a few elements. A pass that reduces the innermost dim folds each row of a
    block into that row's own output element."""
    cdef char* base[64]
    cdef char* regs[256]
    cdef const char* tiles[256]
    cdef int k, rowd = cx.nd - 2
    cdef Py_ssize_t inner = cx.shape[cx.nd - 1], nrows = cx.shape[rowd], per_unit = cx.rows * (CHUNK // BLOCK)
    cdef Py_ssize_t nchunk = (nrows + per_unit - 1) // per_unit
    cdef Py_ssize_t start = (u % nchunk) * per_unit, stop, r
    stop = start + per_unit if start + per_unit < nrows else nrows
    for k in range(cx.nops):
        base[k] = cx.data[k] + start * cx.strides[k * MAXD + rowd]
    _offsets(cx, u // nchunk, 0, rowd, base)
    _init_const_regs(cx, regs, scratch)
    for k in range(cx.nregs):
        tiles[k] = NULL
    while start < stop:
        r = stop - start if stop - start < cx.rows else cx.rows
        _block(cx, regs, scratch, base, inner, r, tiles)
        if cx.nred:
            _fold_rows(cx, regs, base, inner, r)
        for k in range(cx.nops):
            base[k] += r * cx.strides[k * MAXD + rowd]
        start += r

cdef void _columns_unit(const Ctx* cx, Py_ssize_t u, char* scratch) noexcept nogil:
    """Work unit u of a pass in column mode, e.g. ``x.mean(axis=0)`` on a C-ordered (n, 16) x. Dims
    are (kept..., reduced, innermost kept) here. Blocks of cx.rows rows of the reduced dim by up to
    cx.cols columns are walked in memory order, and each column folds into its own accumulator;
    reducing column by column instead would stream all of x once per column. A pass that only
    reduces its inputs (cx.fold_in_place) skips the blocks: each reduction folds all rows of its
    operand where they lie, up to IN_PLACE_COLS columns wide, with no copy into a register."""
    cdef char* base[64]
    cdef char* regs[256]
    cdef const char* tiles[256]
    cdef const Reduction* rd
    cdef Acc* accs = <Acc*>(scratch + cx.acc_offset)
    cdef int k, j, red = cx.nd - 2, last = cx.nd - 1
    cdef Py_ssize_t width = cx.shape[last], nrows = cx.shape[red], nchunk = (width + cx.cols - 1) // cx.cols
    cdef Py_ssize_t c0 = (u % nchunk) * cx.cols, ncol, start = 0, r, c
    ncol = width - c0 if width - c0 < cx.cols else cx.cols
    for k in range(cx.nops):
        base[k] = cx.data[k] + c0 * cx.strides[k * MAXD + last]
    _offsets(cx, u // nchunk, 0, red, base)
    for j in range(cx.nred):
        for c in range(ncol):
            _acc_init(&cx.reds[j], &accs[j * cx.cols + c])
    if cx.fold_in_place:   # the runtime checked: no instructions, inputs aligned with unit column stride
        for j in range(cx.nred):
            rd = &cx.reds[j]
            k = cx.reg_arg[rd.src]
            _fold_columns(rd, accs + j * cx.cols, base[k], ncol,
                          cx.strides[k * MAXD + red] // nt_itemsize[rd.dt], nrows)
    else:
        _init_const_regs(cx, regs, scratch)
        for k in range(cx.nregs):
            tiles[k] = NULL
        while start < nrows:
            r = nrows - start if nrows - start < cx.rows else cx.rows
            _block(cx, regs, scratch, base, ncol, r, tiles)
            for j in range(cx.nred):
                _fold_columns(&cx.reds[j], accs + j * cx.cols, regs[cx.reds[j].src], ncol, ncol, r)
            for k in range(cx.nops):
                base[k] += r * cx.strides[k * MAXD + red]
            start += r
    for j in range(cx.nred):
        rd = &cx.reds[j]
        for c in range(ncol):
            _acc_store(rd, &accs[j * cx.cols + c], base[rd.out] + c * cx.strides[rd.out * MAXD + last])

cdef void _fold_columns(const Reduction* rd, Acc* accs, const char* x, Py_ssize_t ncol, Py_ssize_t rs,
                        Py_ssize_t r) noexcept nogil:
    """Fold column c of r rows by ncol columns (row i starts i * rs elements after x) into accs[c],
    sweeping the rows in memory order (vectorizable, as NumPy reduces a leading axis)."""
    cdef double sums[IN_PLACE_COLS]
    cdef double m2[IN_PLACE_COLS]
    cdef uint64_t isums[IN_PLACE_COLS]
    cdef double delta
    cdef Py_ssize_t c, tot
    if rd.op == R_MAX or rd.op == R_MIN:
        _fold_columns_extreme(rd, accs, x, ncol, rs, r)
        return
    if rd.dt == DT_I64:   # a sum: wraps as NumPy's does
        for c in range(ncol):
            isums[c] = 0
        nt_colsum_i64(<const int64_t*>x, ncol, rs, r, isums)
        for c in range(ncol):
            accs[c].iacc = <int64_t>(<uint64_t>accs[c].iacc + isums[c])
            accs[c].count += r
        return
    for c in range(ncol):
        sums[c] = 0
    if rd.dt == DT_F32: nt_colsum_f32(<const float*>x, ncol, rs, r, sums)
    else: nt_colsum_f64(<const double*>x, ncol, rs, r, sums)
    if rd.op == R_SUM or rd.op == R_MEAN:
        for c in range(ncol):
            accs[c].s = nt_gen_add(accs[c].s, sums[c])
            accs[c].count += r
        return
    for c in range(ncol):
        sums[c] /= r
    if rd.dt == DT_F32: _column_m2(<const float*>x, ncol, rs, r, sums, m2)
    else: _column_m2(<const double*>x, ncol, rs, r, sums, m2)
    for c in range(ncol):   # Chan et al., as in _fold
        tot = accs[c].count + r
        delta = sums[c] - accs[c].mean
        accs[c].m2 += m2[c] + delta * delta * accs[c].count * r / tot
        accs[c].mean += delta * r / tot
        accs[c].count = tot

cdef void _fold_columns_extreme(const Reduction* rd, Acc* accs, const char* x, Py_ssize_t ncol,
                                Py_ssize_t rs, Py_ssize_t r) noexcept nogil:
    """Max/min of each column into accs[c] (rows as in `_fold_columns`), sweeping the rows in memory
    order (a strided gather per column made ``x.max(axis=0)`` ten times slower than NumPy); same
    comparisons and NaN flags as `_fold`."""
    cdef double fm[IN_PLACE_COLS]
    cdef float sm[IN_PLACE_COLS]
    cdef int32_t im[IN_PLACE_COLS]
    cdef int64_t lm[IN_PLACE_COLS]
    cdef u8 bm[IN_PLACE_COLS]
    cdef int nan[IN_PLACE_COLS]
    cdef Py_ssize_t c
    cdef bint mx = rd.op == R_MAX
    for c in range(ncol):
        nan[c] = 0
    if rd.dt == DT_F64:
        for c in range(ncol):
            fm[c] = accs[c].fext
        if mx: nt_colmax_f64(<const double*>x, ncol, rs, r, fm, nan)
        else: nt_colmin_f64(<const double*>x, ncol, rs, r, fm, nan)
        for c in range(ncol):
            accs[c].fext = fm[c]
    elif rd.dt == DT_F32:
        for c in range(ncol):
            sm[c] = <float>accs[c].fext
        if mx: nt_colmax_f32(<const float*>x, ncol, rs, r, sm, nan)
        else: nt_colmin_f32(<const float*>x, ncol, rs, r, sm, nan)
        for c in range(ncol):
            accs[c].fext = sm[c]
    elif rd.dt == DT_I32:
        for c in range(ncol):
            im[c] = <int32_t>accs[c].iext
        if mx: nt_colmax_i32(<const int32_t*>x, ncol, rs, r, im, nan)
        else: nt_colmin_i32(<const int32_t*>x, ncol, rs, r, im, nan)
        for c in range(ncol):
            accs[c].iext = im[c]
    elif rd.dt == DT_I64:
        for c in range(ncol):
            lm[c] = accs[c].iext
        if mx: nt_colmax_i64(<const int64_t*>x, ncol, rs, r, lm, nan)
        else: nt_colmin_i64(<const int64_t*>x, ncol, rs, r, lm, nan)
        for c in range(ncol):
            accs[c].iext = lm[c]
    else:
        for c in range(ncol):
            bm[c] = <u8>accs[c].iext
        if mx: nt_colmax_u8(<const u8*>x, ncol, rs, r, bm, nan)
        else: nt_colmin_u8(<const u8*>x, ncol, rs, r, bm, nan)
        for c in range(ncol):
            accs[c].iext = bm[c]
    for c in range(ncol):
        if nan[c] and not accs[c].nan and (rd.dt == DT_F32 or rd.dt == DT_F64):
            _note_nan(&accs[c], x + c * nt_itemsize[rd.dt], rs, r, rd.dt)
            accs[c].nan_kept = 1
        accs[c].nan |= nan[c]
        accs[c].count += r

cdef void _column_m2(const num* x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, const double* means,
                     double* m2) noexcept nogil:
    cdef Py_ssize_t i, c
    cdef double d
    for c in range(ncol):
        m2[c] = 0
    for i in range(r):
        for c in range(ncol):
            d = x[i * rs + c] - means[c]
            m2[c] += d * d

cdef void _fold_rows(const Ctx* cx, char** regs, char** ptrs, Py_ssize_t n, Py_ssize_t rows) noexcept nogil:
    """Each of the block's rows (n elements of every reduced register) reduced into its output."""
    cdef int j
    for j in range(cx.nred):
        _fold_rows_of(cx, j, regs[cx.reds[j].src], n, rows, ptrs[cx.reds[j].out],
                      cx.strides[cx.reds[j].out * MAXD + cx.nd - 2])

cdef void _fold_rows_of(const void* cxv, int j, const char* x, Py_ssize_t n, Py_ssize_t rows, char* out,
                        Py_ssize_t so) noexcept nogil:
    """Reduction j of `rows` rows of n elements (row i at x + i * n elements) into out + i * so: what
    _fold_rows does per reduction, and what a generated kernel's row tiles call (nt_gen.h's
    fold_rows), so both give the same bits."""
    cdef const Ctx* cx = <const Ctx*>cxv
    cdef const Reduction* rd = &cx.reds[j]
    cdef Acc acc
    cdef Py_ssize_t i, isz = nt_itemsize[rd.dt]
    cdef double s
    cdef const char* xi
    if (rd.op == R_SUM or rd.op == R_MEAN) and (rd.dt == DT_F64 or rd.dt == DT_F32):
        # _acc_init, _fold and _acc_store on one block, without their dispatch per short row
        for i in range(rows):
            xi = x + i * n * isz
            s = 0.0
            s += nt_sum_f32(<const float*>xi, n) if rd.dt == DT_F32 else nt_sum_f64(<const double*>xi, n)
            if rd.op == R_MEAN:
                s = s / <double>n
            if rd.dt == DT_F32:
                (<float*>(out + i * so))[0] = <float>s
            else:
                (<double*>(out + i * so))[0] = s
        return
    if rd.op == R_MAX or rd.op == R_MIN:
        _extreme_rows(rd, x, n, rows, out, so)
        return
    for i in range(rows):
        _acc_init(rd, &acc)
        _fold(rd, &acc, x + i * n * isz, n)
        _acc_store(rd, &acc, out + i * so)

cdef void _extreme_rows(const Reduction* rd, const char* x, Py_ssize_t n, Py_ssize_t rows, char* out,
                        Py_ssize_t so) noexcept nogil:
    """_acc_init, _fold and _acc_store of a max/min on each of `rows` rows of n elements, in one C
    loop (the same block extreme from the same start, the same NaN)."""
    cdef Acc acc
    cdef int dt = rd.dt
    _acc_init(rd, &acc)
    if rd.op == R_MAX:
        if dt == DT_F32: nt_rowmax_f32(<const float*>x, n, rows, out, so, <float>acc.fext)
        elif dt == DT_F64: nt_rowmax_f64(<const double*>x, n, rows, out, so, acc.fext)
        elif dt == DT_I32: nt_rowmax_i32(<const int32_t*>x, n, rows, out, so, <int32_t>acc.iext)
        elif dt == DT_I64: nt_rowmax_i64(<const int64_t*>x, n, rows, out, so, acc.iext)
        else: nt_rowmax_u8(<const u8*>x, n, rows, out, so, <u8>acc.iext)
    else:
        if dt == DT_F32: nt_rowmin_f32(<const float*>x, n, rows, out, so, <float>acc.fext)
        elif dt == DT_F64: nt_rowmin_f64(<const double*>x, n, rows, out, so, acc.fext)
        elif dt == DT_I32: nt_rowmin_i32(<const int32_t*>x, n, rows, out, so, <int32_t>acc.iext)
        elif dt == DT_I64: nt_rowmin_i64(<const int64_t*>x, n, rows, out, so, acc.iext)
        else: nt_rowmin_u8(<const u8*>x, n, rows, out, so, <u8>acc.iext)
    if dt == DT_F32 or dt == DT_F64:
        _rows_nan_results(x, n, rows, out, so, dt)

cdef void _rows_nan_results(const char* x, Py_ssize_t n, Py_ssize_t rows, char* out, Py_ssize_t so,
                            int dt) noexcept nogil:
    """Each NaN result of `_extreme_rows` (row i at x + i * n elements) replaced by NumPy's NaN for
    that row (`_store_nan_result`); a check per row where no row holds a NaN. Rows of one element
    are left as the C loop stored them: the element itself."""
    cdef Acc acc
    cdef Py_ssize_t i, isz = nt_itemsize[dt]
    cdef double v
    if n == 1:
        return
    for i in range(rows):
        v = (<float*>(out + i * so))[0] if dt == DT_F32 else (<double*>(out + i * so))[0]
        if v == v:
            continue
        acc.count, acc.nan_kept = 0, 0
        _note_nan(&acc, x + i * n * isz, 1, n, dt)
        _store_nan_result(&acc, n, dt, out + i * so)

cdef void _init_const_regs(const Ctx* cx, char** regs, char* scratch) noexcept nogil:
    cdef int r
    for r in range(cx.nregs):
        if cx.reg_kind[r] == REG_CONST or cx.reg_kind[r] == REG_TEMP:
            regs[r] = scratch + r * cx.reg_stride

cdef void _fold(const Reduction* rd, Acc* acc, const char* x, Py_ssize_t n) noexcept nogil:
    """Fold one block of the reduced register into a row's accumulator."""
    _fold_sharing(rd, acc, x, n, NULL)

cdef double _fold_sharing(const Reduction* rd, Acc* acc, const char* x, Py_ssize_t n,
                          const double* block_sum) noexcept nogil:
    """`_fold`, where a float var/std takes the block's sum from `block_sum` when it is not NULL
    (the value a float sum/mean of the same block returned: the same nt_sum of the same elements).
    Returns the block's sum for a float sum/mean, else 0."""
    cdef double bs = 0.0, bmean, delta
    cdef Py_ssize_t i, tot
    cdef uint64_t isum = 0
    cdef int dt = rd.dt
    if rd.op == R_SUM or rd.op == R_MEAN:
        if dt == DT_F32 or dt == DT_F64:
            bs = nt_sum_f32(<const float*>x, n) if dt == DT_F32 else nt_sum_f64(<const double*>x, n)
            acc.s = nt_gen_add(acc.s, bs)   # the first block's NaN, as a split row's total keeps it
        else:
            for i in range(n):
                isum += <uint64_t>(<const int64_t*>x)[i]
            acc.iacc = <int64_t>(<uint64_t>acc.iacc + isum)
        acc.count += n
        return bs
    elif rd.op == R_VAR or rd.op == R_STD:
        # Chan et al.: combine the block's (count, mean, M2) with the running ones.
        if block_sum != NULL:
            bs = block_sum[0]
        else:
            bs = nt_sum_f32(<const float*>x, n) if dt == DT_F32 else nt_sum_f64(<const double*>x, n)
        bmean = bs / n
        tot = acc.count + n
        delta = bmean - acc.mean
        acc.m2 += (nt_m2_f32(<const float*>x, n, bmean) if dt == DT_F32
                   else nt_m2_f64(<const double*>x, n, bmean)) + delta * delta * acc.count * n / tot
        acc.mean += delta * n / tot
    elif rd.op == R_MAX or rd.op == R_MIN:
        _fold_extreme(rd, acc, x, n)
        return bs
    acc.count += n

cdef void _fold_extreme(const Reduction* rd, Acc* acc, const char* x, Py_ssize_t n) noexcept nogil:
    """`_fold` of a max/min; the block that shows a float row's first NaN records it (`_note_nan`)."""
    cdef int dt = rd.dt, had_nan = acc.nan
    if rd.op == R_MAX:
        if dt == DT_F32: acc.fext = nt_max_f32(<const float*>x, n, <float>acc.fext, &acc.nan)
        elif dt == DT_F64: acc.fext = nt_max_f64(<const double*>x, n, acc.fext, &acc.nan)
        elif dt == DT_I32: acc.iext = nt_max_i32(<const int32_t*>x, n, <int32_t>acc.iext, &acc.nan)
        elif dt == DT_I64: acc.iext = nt_max_i64(<const int64_t*>x, n, acc.iext, &acc.nan)
        else: acc.iext = nt_max_u8(<const u8*>x, n, <u8>acc.iext, &acc.nan)
    else:
        if dt == DT_F32: acc.fext = nt_min_f32(<const float*>x, n, <float>acc.fext, &acc.nan)
        elif dt == DT_F64: acc.fext = nt_min_f64(<const double*>x, n, acc.fext, &acc.nan)
        elif dt == DT_I32: acc.iext = nt_min_i32(<const int32_t*>x, n, <int32_t>acc.iext, &acc.nan)
        elif dt == DT_I64: acc.iext = nt_min_i64(<const int64_t*>x, n, acc.iext, &acc.nan)
        else: acc.iext = nt_min_u8(<const u8*>x, n, <u8>acc.iext, &acc.nan)
    if acc.nan and not had_nan and (dt == DT_F32 or dt == DT_F64):
        _note_nan(acc, x, 1, n, dt)
    acc.count += n

cdef void _note_nan(Acc* acc, const char* x, Py_ssize_t stride, Py_ssize_t n, int dt) noexcept nogil:
    """Record in acc the first NaN of the n float elements `stride` apart at x, which the caller
    knows holds one (its bytes as they are), and its position in the row (acc.count elements come
    before x)."""
    cdef Py_ssize_t i, isz = nt_itemsize[dt]
    cdef double v
    for i in range(n):
        v = (<const float*>x)[i * stride] if dt == DT_F32 else (<const double*>x)[i * stride]
        if v != v:
            acc.nanbits = 0
            memcpy(&acc.nanbits, x + i * stride * isz, isz)
            acc.nanpos = acc.count + i
            return

cdef inline void _store_nan_result(const Acc* acc, Py_ssize_t count, int dt, char* out) noexcept nogil:
    """A float max/min's result over `count` elements that hold a NaN, as NumPy's loops give it. A
    column (acc.nan_kept) and a row of one element give the first NaN itself, its bytes as they are
    (sign, payload, a float32 signaling NaN's quiet bit). NumPy reduces a longer row as element 0
    and then vectors of `lanes` elements into one accumulator, whose NaN is the default one (+NaN),
    then the remaining elements one at a time, which keep the first NaN they meet: the first NaN
    itself where it lies in that tail, else +NaN."""
    cdef Py_ssize_t isz = nt_itemsize[dt], lanes = NPY_MINMAX_VECTOR_BYTES // isz
    if acc.nan_kept or count == 1 or acc.nanpos >= 1 + (count - 1) // lanes * lanes:
        memcpy(out, &acc.nanbits, isz)
    elif dt == DT_F32:
        (<float*>out)[0] = <float>NAN
    else:
        (<double*>out)[0] = NAN

cdef void _acc_init(const Reduction* rd, Acc* acc) noexcept nogil:
    memset(acc, 0, sizeof(Acc))
    if rd.op == R_MAX:
        acc.fext = -INFINITY
        acc.iext = INT32_MIN if rd.dt == DT_I32 else (INT64_MIN if rd.dt == DT_I64 else 0)
    elif rd.op == R_MIN:
        acc.fext = INFINITY
        acc.iext = INT32_MAX if rd.dt == DT_I32 else (INT64_MAX if rd.dt == DT_I64 else 1)

cdef void _acc_store(const Reduction* rd, const Acc* acc, char* out) noexcept nogil:
    cdef double v
    cdef int dt = rd.dt
    if rd.op == R_MAX or rd.op == R_MIN:
        if (dt == DT_F32 or dt == DT_F64) and acc.nan:
            _store_nan_result(acc, acc.count, dt, out)
            return
        elif dt == DT_F32 or dt == DT_F64:
            v = acc.fext
        else:
            if dt == DT_I32: (<int32_t*>out)[0] = <int32_t>acc.iext
            elif dt == DT_I64: (<int64_t*>out)[0] = acc.iext
            else: (<u8*>out)[0] = <u8>acc.iext
            return
    elif rd.op == R_SUM:
        if dt == DT_I64:
            (<int64_t*>out)[0] = acc.iacc
            return
        v = acc.s
    elif rd.op == R_MEAN:
        # An empty slice divides 0 by 0 as NumPy does: the platform's default NaN (negative on x86).
        v = acc.s / <double>acc.count
    else:
        v = acc.count - rd.ddof
        v = acc.m2 / (v if v > 0 else 0.0)
        if rd.op == R_STD:
            v = sqrt(v)
    if dt == DT_F32:
        (<float*>out)[0] = <float>v
    else:
        (<double*>out)[0] = v

cdef inline void _store(const Ctx* cx, int j, const Acc* acc, char* out) noexcept nogil:
    """Reduction j's result of one row, or its raw sum where the row is a part (cx.raw_sums: see
    FusedKernel._run_split_row)."""
    cdef Acc runs
    if cx.raw_sums:
        (<double*>out)[0] = acc.s
    elif acc.nan and not cx.cols and cx.nd - cx.nkept > 1:
        # A row of several runs (an (n, m, k) x reduced over axes 0 and 2): NumPy folds it run by
        # run, and which NaN it keeps then is not _nan_result's; this gives the default NaN.
        runs = acc[0]
        runs.nan_kept, runs.nanpos = 0, 0
        _acc_store(&cx.reds[j], &runs, out)
    else:
        _acc_store(&cx.reds[j], acc, out)

cdef bint _may_stop_early(const Ctx* cx) noexcept nogil:
    """Whether a row may stop at its first decisive block: every reduction is an any or all (max or
    min over bool) and nothing else is written, so the blocks after it cannot change any result."""
    cdef int r
    for r in range(cx.nregs):
        if cx.reg_kind[r] == REG_OUTPUT:
            return False
    for r in range(cx.nred):
        if cx.reds[r].dt != DT_BOOL:
            return False
    return True

cdef bint _decided(const Ctx* cx, const Acc* accs) noexcept nogil:
    """Every any (max over bool) has seen a true and every all (min over bool) a false."""
    cdef int j
    for j in range(cx.nred):
        if (accs[j].iext == 0) == (cx.reds[j].op == R_MAX):
            return False
    return True

cdef void _reduction_row(const Ctx* cx, Py_ssize_t m, char* scratch) noexcept nogil:
    """Reduce row m: all reduced positions of kept multi-index m, block by block (an any/all stops
    at its first decisive block, as NumPy's does at the first decisive element). A pass that only
    reduces its inputs (cx.fold_in_place) folds them where they lie, IN_PLACE_CHUNK at a time."""
    cdef char* base[64]
    cdef char* ptrs[64]
    cdef char* regs[256]
    cdef Acc accs[16]
    cdef double sums[16]   # this block's sum per float sum/mean (what a var/std sharing it reads)
    cdef const Reduction* rd
    cdef int k, j, last = cx.nd - 1
    cdef Py_ssize_t inner = cx.shape[last], outer = 1, o, start, n
    cdef bint early = _may_stop_early(cx)
    # An any/all read in place starts with a short fold and doubles it: the decisive element is
    # usually among the first few, and reading the rest of a 1000-element row would cost more than
    # the row's whole setup.
    cdef Py_ssize_t chunk = 64 if early else IN_PLACE_CHUNK
    for k in range(cx.nops):
        base[k] = cx.data[k]
    _offsets(cx, m, 0, cx.nkept, base)
    for j in range(cx.nred):
        _acc_init(&cx.reds[j], &accs[j])
    for k in range(cx.nkept, last):
        outer *= cx.shape[k]
    _init_const_regs(cx, regs, scratch)
    for o in range(outer):
        start = 0
        while start < inner:
            n = inner - start if inner - start < BLOCK else BLOCK
            for k in range(cx.nops):
                ptrs[k] = base[k] + start * cx.strides[k * MAXD + last]
            _offsets(cx, o, cx.nkept, last, ptrs)
            if cx.fold_in_place:
                n = inner - start if inner - start < chunk else chunk
                for j in range(cx.nred):
                    rd = &cx.reds[j]
                    sums[j] = _fold_sharing(rd, &accs[j], ptrs[cx.reg_arg[rd.src]], n,
                                            &sums[rd.shares_sum] if rd.shares_sum >= 0 else NULL)
                if chunk < IN_PLACE_CHUNK:
                    chunk *= 2
            else:
                _block(cx, regs, scratch, ptrs, n, 1, NULL)
                for j in range(cx.nred):
                    rd = &cx.reds[j]
                    sums[j] = _fold_sharing(rd, &accs[j], regs[rd.src], n,
                                            &sums[rd.shares_sum] if rd.shares_sum >= 0 else NULL)
            start += n
            if early and _decided(cx, accs):
                break
        if early and _decided(cx, accs):
            break
    for j in range(cx.nred):
        _store(cx, j, &accs[j], base[cx.reds[j].out])

cdef void _fill_consts(const Ctx* cx, char* scratch) noexcept nogil:
    """Constant registers hold a block's worth of copies of their value, written once per thread."""
    cdef int r, dt
    cdef char one[8]
    for r in range(cx.nregs):
        if cx.reg_kind[r] != REG_CONST:
            continue
        dt = cx.reg_dt[r]
        if dt == DT_F32: (<float*>one)[0] = <float>cx.fconsts[cx.reg_arg[r]]
        elif dt == DT_F64: (<double*>one)[0] = cx.fconsts[cx.reg_arg[r]]
        elif dt == DT_I32: (<int32_t*>one)[0] = <int32_t>cx.iconsts[cx.reg_arg[r]]
        elif dt == DT_I64: (<int64_t*>one)[0] = cx.iconsts[cx.reg_arg[r]]
        else: (<u8*>one)[0] = cx.iconsts[cx.reg_arg[r]] != 0
        _fill(scratch + r * cx.reg_stride, one, nt_itemsize[dt], cx.reg_elems)


cdef void _unit(const Ctx* cx, Py_ssize_t u, char* scratch) noexcept nogil:
    if cx.cols:
        _columns_unit(cx, u, scratch)
    elif cx.rows > 1:
        _rows_unit(cx, u, scratch)
    elif cx.nred:
        _reduction_row(cx, u, scratch)
    else:
        _elementwise_unit(cx, u, scratch)


ctypedef struct PassJob:
    const Ctx* cx
    char* scratch              # one block of registers per thread of the team
    int* busy                  # busy[k]: block k is some thread's
    int nslots
    Py_ssize_t units, chunk


cdef void _pass_team_unit(void* arg, int c) noexcept nogil:
    """Team unit c of an interpreted pass: its units [c * chunk, (c + 1) * chunk), on a block of
    registers no other thread holds meanwhile."""
    cdef const PassJob* j = <const PassJob*>arg
    cdef int slot = nt_team_slot_take(j.busy, j.nslots)
    cdef char* scratch = j.scratch + slot * j.cx.scratch_regs
    cdef Py_ssize_t u, u1 = (c + 1) * j.chunk
    for u in range(c * j.chunk, j.units if u1 > j.units else u1):
        _unit(j.cx, u, scratch)
    nt_team_slot_put(j.busy, slot)


cdef void _run_pass(const Ctx* cx, char* scratch, int nteam, Py_ssize_t units, Py_ssize_t chunk) noexcept nogil:
    """A pass's units on the interpreter's block loops; on more than one thread, chunks of `chunk`
    units on the thread team (nt_team.h), as generated passes run (see _run_generated), each thread
    on its own block of registers in `scratch`. Which thread runs a unit never changes the result."""
    cdef int k
    cdef Py_ssize_t u
    cdef PassJob job
    cdef int busy[64]
    for k in range(nteam):
        _fill_consts(cx, scratch + k * cx.scratch_regs)
    if nteam == 1:
        for u in range(units):
            _unit(cx, u, scratch)
        return
    if nteam > 64:
        nteam = 64
    if chunk * NT_TEAM_MAX_UNITS < units:   # the team runs at most NT_TEAM_MAX_UNITS per job
        chunk = (units + NT_TEAM_MAX_UNITS - 1) // NT_TEAM_MAX_UNITS
    for k in range(nteam):
        busy[k] = 0
    job.cx, job.scratch, job.busy, job.nslots, job.units, job.chunk = cx, scratch, busy, nteam, units, chunk
    nt_team_run_spin(_pass_team_unit, &job, <int>((units + chunk - 1) // chunk), nteam, nt_team_spin_ns)


RUN_PASS = PyCapsule_New(<void*>_run_pass, b"numtrace_cpu.run_pass", NULL)
"""This build's pass (a `run_pass_fn`, see interp.pxd), for numtrace_cpu.runtime.FusedKernel."""


if sizeof(Acc) > NT_GEN_ACC_BYTES:
    raise ImportError("nt_gen.h's NT_GEN_ACC_BYTES is smaller than an Acc")
if NT_GEN_MAXCOLS != MAXCOLS:
    raise ImportError("nt_gen.h's NT_GEN_MAXCOLS differs from interp.pxd's MAXCOLS")


cdef void _gen_init(const void* cx, int j, void* acc) noexcept nogil:
    _acc_init(&(<const Ctx*>cx).reds[j], <Acc*>acc)

cdef void _gen_fold(const void* cx, int j, void* acc, const char* x, Py_ssize_t n) noexcept nogil:
    _fold(&(<const Ctx*>cx).reds[j], <Acc*>acc, x, n)

cdef void _gen_store(const void* cx, int j, const void* acc, char* out) noexcept nogil:
    _store(<const Ctx*>cx, j, <const Acc*>acc, out)


cdef void _gen_store_sum(const void* cx, int j, double s, Py_ssize_t count, char* out) noexcept nogil:
    cdef Acc acc
    cdef const Reduction* rd = &(<const Ctx*>cx).reds[j]
    _acc_init(rd, &acc)
    acc.s, acc.count = s, count
    _store(<const Ctx*>cx, j, &acc, out)


ctypedef struct GenJob:
    nt_gen_fn fn
    const Ctx* cx
    const nt_gen_loop_fn* loops
    const nt_gen_reduce* red
    Py_ssize_t units, chunk


cdef void _gen_team_unit(void* arg, int c) noexcept nogil:
    """Team unit c of a generated pass: units [c * chunk, (c + 1) * chunk) of it."""
    cdef const GenJob* j = <const GenJob*>arg
    cdef Py_ssize_t u1 = (c + 1) * j.chunk
    j.fn(j.cx.data, j.cx.strides, j.cx.shape, j.cx.nd, c * j.chunk, j.units if u1 > j.units else u1,
         j.cx.fconsts, j.cx.iconsts, j.loops, j.red)


cdef void _run_generated(void* kernel, const Ctx* cx, int nteam, Py_ssize_t units, Py_ssize_t chunk) noexcept nogil:
    """A pass's units through a generated kernel, `chunk` units per call; the kernel gets this build's
    block loops and folds (see nt_gen.h). On more than one thread the chunks run on the thread team
    (nt_team.h), whose workers then spin NUMTRACE_TEAM_SPIN_US before they sleep: the next large pass,
    or the next call of a short program (an in-place update), finds them awake. OpenMP's workers
    sleep after every pass (OMP_WAIT_POLICY=PASSIVE); a worker woken once per pass on the 2-core VM
    joined late or was placed on the caller's core, where the pass ran at one thread's speed.
    Which thread runs a chunk never changes the result: each unit's outputs are its own."""
    cdef GenJob job
    cdef nt_gen_reduce red
    cdef Py_ssize_t nchunks
    red.init, red.fold, red.store, red.cx, red.nkept = _gen_init, _gen_fold, _gen_store, cx, cx.nkept
    red.cols, red.rows, red.store_sum = cx.cols, cx.rows, _gen_store_sum
    red.sequential_below = NT_SUM_SEQUENTIAL_BELOW
    red.stream, red.tile_rows = cx.stream, (cx.rows if cx.row_tiles or not cx.nred else 1)
    red.fold_rows = _fold_rows_of
    job.fn, job.cx, job.loops, job.red, job.units = <nt_gen_fn>kernel, cx, nt_gen_loop_table(), &red, units
    if nteam == 1:
        job.fn(cx.data, cx.strides, cx.shape, cx.nd, 0, units, cx.fconsts, cx.iconsts, job.loops, &red)
        return
    if chunk * NT_TEAM_MAX_UNITS < units:   # the team runs at most NT_TEAM_MAX_UNITS per job
        chunk = (units + NT_TEAM_MAX_UNITS - 1) // NT_TEAM_MAX_UNITS
    job.chunk = chunk
    nchunks = (units + chunk - 1) // chunk
    nt_team_run_spin(_gen_team_unit, &job, <int>nchunks, nteam, nt_team_spin_ns)


RUN_GENERATED = PyCapsule_New(<void*>_run_generated, b"numtrace_cpu.run_generated", NULL)
"""This build's runner of generated kernels (a `run_generated_fn`, see interp.pxd)."""
