"""The block interpreter: one fused group of elementwise ops (plus optional reductions) as one pass.

A `FusedKernel` holds a flat three-address program over typed block registers (plain C arrays
built from Python lists, so the lowering never cimports anything). `run()` walks the group's
iteration space in blocks of at most `BLOCK` elements: operands are read in place when their
innermost stride is unit (otherwise gathered), every instruction is one tight loop over the block,
outputs are written in place, and reductions fold each block into per-row accumulators. No
full-size temporary ever exists. The GIL is released for the whole pass; large groups split their
blocks (or reduction rows) over OpenMP threads, each with its own scratch registers, so one kernel
can run from several Python threads at once.

Memory safety rests on `run()` validating every operand (count, dtype, shape broadcastable to the
iteration shape, outputs writable and exactly shaped) before any pointer is formed; the
interpreter then only visits indices inside that shape.
"""

cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport (INFINITY, NAN, acos, acosh, asin, asinh, atan, atan2, atanh, cbrt, ceil, copysign, cos, cosh,
                        exp, exp2, expm1, fabs, floor, fmax, fmin, hypot, log, log1p, log2, log10, pow, rint,
                        sin, sinh, sqrt, tan, tanh, trunc)
from libc.stdint cimport (INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint16_t,
                          uint32_t, uint64_t)
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

import numpy as np

cnp.import_array()

CPU_HAS_AVX2_FMA = bool(nt_cpu_has_avx2_fma())
"""Whether this CPU can import the x86-64-v3 build of this module (`fused_avx2`)."""

cdef extern from "nt_simd.h" nogil:
    int nt_cpu_has_avx2_fma()
    void* nt_alloc_large(size_t n)
    void nt_expf_loop(float* d, const float* a, Py_ssize_t n)
    void nt_tanhf_loop(float* d, const float* a, Py_ssize_t n)
    float sqrtf(float x)
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

cdef enum:
    # Elements per block: a register then takes at most 4 KiB, so a typical program's registers stay
    # in L1/L2 while each instruction streams over them, and the per-instruction dispatch is paid
    # once per 512 elements (measured against 256 and 1024: GELU-tanh on 128x1024 float32 ~18%
    # faster than 256, W1 ~8%). Threads take work in chunks of CHUNK elements (a multiple of BLOCK)
    # so per-unit setup is amortized.
    BLOCK = 512
    CHUNK = 16384
    # Column mode (see _columns_unit) takes at most BLOCK / 8 kept columns per block, so a block has at
    # least 8 rows to fold per column.
    MAXCOLS = 64
    # Scratch registers are spaced by their size plus REG_PAD bytes: registers a multiple of 4 KiB
    # apart alias in the CPU's store-to-load check, and an instruction that reads one while writing
    # the other stalls (4K aliasing).
    REG_PAD = 192
    MAXD = 64

# ---------------------------------------------------------------------------------------------
# Register dtypes, register kinds, opcodes. The Python tables below are the only place the
# lowering learns them from.

# Compute dtypes (codes below NCOMPUTE) have kernels; storage-only dtypes are read from operands and
# only ever converted by a cast, so e.g. a uint8 image joins a float pass without a separate astype.
cdef enum:
    DT_BOOL = 0
    DT_I32 = 1
    DT_I64 = 2
    DT_F32 = 3
    DT_F64 = 4
    NCOMPUTE = 5
    DT_U8 = 5
    DT_I8 = 6
    DT_I16 = 7
    DT_U16 = 8
    DT_U32 = 9
    DT_U64 = 10
    NDT = 11

cdef Py_ssize_t ITEMSIZE[NDT]
ITEMSIZE[:] = [1, 4, 8, 4, 8, 1, 1, 2, 2, 4, 8]
cdef int TYPENUM[NDT]
TYPENUM[:] = [cnp.NPY_BOOL, cnp.NPY_INT32, cnp.NPY_INT64, cnp.NPY_FLOAT32, cnp.NPY_FLOAT64, cnp.NPY_UINT8,
              cnp.NPY_INT8, cnp.NPY_INT16, cnp.NPY_UINT16, cnp.NPY_UINT32, cnp.NPY_UINT64]

DTYPES = {np.dtype(np.bool_): DT_BOOL, np.dtype(np.int32): DT_I32, np.dtype(np.int64): DT_I64,
          np.dtype(np.float32): DT_F32, np.dtype(np.float64): DT_F64, np.dtype(np.uint8): DT_U8,
          np.dtype(np.int8): DT_I8, np.dtype(np.int16): DT_I16, np.dtype(np.uint16): DT_U16,
          np.dtype(np.uint32): DT_U32, np.dtype(np.uint64): DT_U64}
"""Register dtype code of each NumPy dtype the interpreter reads: it computes in those whose code an
op's entry in OPS lists, and only casts from the others."""

cdef enum:
    REG_TEMP = 0
    REG_INPUT = 1
    REG_CONST = 2
    REG_OUTPUT = 3

REG_KINDS = {"temp": REG_TEMP, "input": REG_INPUT, "const": REG_CONST, "output": REG_OUTPUT}

cdef enum:
    ROLE_INPUT = 0
    ROLE_OUTPUT = 1
    ROLE_REDUCED = 2

ROLES = {"input": ROLE_INPUT, "output": ROLE_OUTPUT, "reduced": ROLE_REDUCED}

# Instruction categories decide the register dtypes an instruction may read and write.
cdef enum:
    CAT_UNARY = 0         # dst, a: compute dtype
    CAT_UNARY_BOOL = 1    # dst: bool; a: compute dtype
    CAT_BINARY = 2        # dst, a, b: compute dtype
    CAT_BINARY_BOOL = 3   # dst: bool; a, b: compute dtype
    CAT_WHERE = 4         # dst, a, b: compute dtype; c: bool
    CAT_CAST = 5          # dst: compute dtype; a: any dtype

cdef enum:
    OP_COPY, OP_NEG, OP_ABS, OP_SQUARE, OP_SIGN, OP_INVERT,
    OP_EXP, OP_LOG, OP_SQRT, OP_TANH, OP_SIN, OP_COS, OP_TAN, OP_RECIP, OP_FLOOR, OP_CEIL, OP_RINT,
    OP_TRUNC, OP_EXPM1, OP_LOG1P, OP_LOG2, OP_LOG10, OP_EXP2, OP_ARCTAN, OP_ARCSIN, OP_ARCCOS, OP_SINH,
    OP_COSH, OP_ARCSINH, OP_ARCCOSH, OP_ARCTANH, OP_CBRT,
    OP_ISNAN, OP_ISINF, OP_ISFINITE, OP_NOT, OP_SIGNBIT,
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN, OP_FMAX, OP_FMIN, OP_POW, OP_ARCTAN2, OP_HYPOT,
    OP_COPYSIGN, OP_BITAND, OP_BITOR, OP_BITXOR,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_LAND, OP_LOR, OP_LXOR,
    OP_WHERE, OP_CAST, NOPS

_ALL = (DT_BOOL, DT_I32, DT_I64, DT_F32, DT_F64)
_NUM = (DT_I32, DT_I64, DT_F32, DT_F64)
_INT = (DT_BOOL, DT_I32, DT_I64)
_FLT = (DT_F32, DT_F64)
_FLOAT_UNARY = ("exp", "log", "sqrt", "tanh", "sin", "cos", "tan", "reciprocal", "floor", "ceil",
                "rint", "trunc", "expm1", "log1p", "log2", "log10", "exp2", "arctan", "arcsin",
                "arccos", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "cbrt")

OPS = {
    "copy": (OP_COPY, CAT_UNARY, _ALL), "negative": (OP_NEG, CAT_UNARY, _NUM),
    "absolute": (OP_ABS, CAT_UNARY, _NUM), "square": (OP_SQUARE, CAT_UNARY, _NUM),
    "sign": (OP_SIGN, CAT_UNARY, _NUM), "invert": (OP_INVERT, CAT_UNARY, _INT),
    **{name: (OP_EXP + i, CAT_UNARY, _FLT) for i, name in enumerate(_FLOAT_UNARY)},
    "isnan": (OP_ISNAN, CAT_UNARY_BOOL, _FLT), "isinf": (OP_ISINF, CAT_UNARY_BOOL, _FLT),
    "isfinite": (OP_ISFINITE, CAT_UNARY_BOOL, _FLT), "logical_not": (OP_NOT, CAT_UNARY_BOOL, _ALL),
    "signbit": (OP_SIGNBIT, CAT_UNARY_BOOL, _FLT),
    "add": (OP_ADD, CAT_BINARY, _ALL), "subtract": (OP_SUB, CAT_BINARY, _NUM),
    "multiply": (OP_MUL, CAT_BINARY, _ALL), "divide": (OP_DIV, CAT_BINARY, _FLT),
    "maximum": (OP_MAX, CAT_BINARY, _ALL), "minimum": (OP_MIN, CAT_BINARY, _ALL),
    "fmax": (OP_FMAX, CAT_BINARY, _FLT), "fmin": (OP_FMIN, CAT_BINARY, _FLT),
    "power": (OP_POW, CAT_BINARY, _FLT), "arctan2": (OP_ARCTAN2, CAT_BINARY, _FLT),
    "hypot": (OP_HYPOT, CAT_BINARY, _FLT), "copysign": (OP_COPYSIGN, CAT_BINARY, _FLT),
    "bitwise_and": (OP_BITAND, CAT_BINARY, _INT), "bitwise_or": (OP_BITOR, CAT_BINARY, _INT),
    "bitwise_xor": (OP_BITXOR, CAT_BINARY, _INT),
    "equal": (OP_EQ, CAT_BINARY_BOOL, _ALL), "not_equal": (OP_NE, CAT_BINARY_BOOL, _ALL),
    "less": (OP_LT, CAT_BINARY_BOOL, _ALL), "less_equal": (OP_LE, CAT_BINARY_BOOL, _ALL),
    "greater": (OP_GT, CAT_BINARY_BOOL, _ALL), "greater_equal": (OP_GE, CAT_BINARY_BOOL, _ALL),
    "logical_and": (OP_LAND, CAT_BINARY_BOOL, _ALL), "logical_or": (OP_LOR, CAT_BINARY_BOOL, _ALL),
    "logical_xor": (OP_LXOR, CAT_BINARY_BOOL, _ALL),
    "where": (OP_WHERE, CAT_WHERE, _ALL), "cast": (OP_CAST, CAT_CAST, _ALL),
}
"""Interpreter op name -> (opcode, category, compute dtypes it implements)."""

cdef enum:
    R_SUM = 0
    R_MEAN = 1
    R_VAR = 2
    R_STD = 3
    R_MAX = 4
    R_MIN = 5

REDUCTIONS = {"sum": (R_SUM, (DT_I64, DT_F32, DT_F64)), "mean": (R_MEAN, _FLT), "var": (R_VAR, _FLT),
              "std": (R_STD, _FLT), "max": (R_MAX, _ALL), "min": (R_MIN, _ALL)}
"""Reduction name -> (code, dtypes of the reduced register it accepts; the output has the same dtype)."""

cdef int _CATEGORY[NOPS]
cdef unsigned int _DT_MASK[NOPS]
for _name, (_code, _cat, _dts) in OPS.items():
    _CATEGORY[_code] = _cat
    _DT_MASK[_code] = sum(1 << d for d in _dts)
cdef unsigned int _RED_MASK[6]
for _name, (_code, _dts) in REDUCTIONS.items():
    _RED_MASK[_code] = sum(1 << d for d in _dts)

# ---------------------------------------------------------------------------------------------
# Elementwise kernels: one loop per op over a block. Integer arithmetic goes through unsigned
# types so that overflow wraps (as in NumPy) instead of being undefined behaviour.

cdef inline num _wrap_add(num x, num y) noexcept nogil:
    if num is int32_t:
        return <int32_t>(<uint32_t>x + <uint32_t>y)
    elif num is int64_t:
        return <int64_t>(<uint64_t>x + <uint64_t>y)
    elif num is u8:
        return x | y
    else:
        return x + y

cdef inline num _wrap_sub(num x, num y) noexcept nogil:
    if num is int32_t:
        return <int32_t>(<uint32_t>x - <uint32_t>y)
    elif num is int64_t:
        return <int64_t>(<uint64_t>x - <uint64_t>y)
    else:
        return x - y

cdef inline num _wrap_mul(num x, num y) noexcept nogil:
    if num is int32_t:
        return <int32_t>(<uint32_t>x * <uint32_t>y)
    elif num is int64_t:
        return <int64_t>(<uint64_t>x * <uint64_t>y)
    elif num is u8:
        return x & y
    else:
        return x * y

cdef inline double _float_unary(int op, double x) noexcept nogil:
    """Float-only unary ops, evaluated in double (float32 callers round the result once)."""
    if op == OP_EXP: return exp(x)
    if op == OP_LOG: return log(x)
    if op == OP_SQRT: return sqrt(x)
    if op == OP_TANH: return tanh(x)
    if op == OP_SIN: return sin(x)
    if op == OP_COS: return cos(x)
    if op == OP_TAN: return tan(x)
    if op == OP_RECIP: return 1.0 / x
    if op == OP_FLOOR: return floor(x)
    if op == OP_CEIL: return ceil(x)
    if op == OP_RINT: return rint(x)
    if op == OP_TRUNC: return trunc(x)
    if op == OP_EXPM1: return expm1(x)
    if op == OP_LOG1P: return log1p(x)
    if op == OP_LOG2: return log2(x)
    if op == OP_LOG10: return log10(x)
    if op == OP_EXP2: return exp2(x)
    if op == OP_ARCTAN: return atan(x)
    if op == OP_ARCSIN: return asin(x)
    if op == OP_ARCCOS: return acos(x)
    if op == OP_SINH: return sinh(x)
    if op == OP_COSH: return cosh(x)
    if op == OP_ARCSINH: return asinh(x)
    if op == OP_ARCCOSH: return acosh(x)
    if op == OP_ARCTANH: return atanh(x)
    return cbrt(x)

cdef void _unary(int op, num* d, const num* a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if op == OP_COPY:
        if d != a:
            memcpy(d, a, n * sizeof(num))   # registers either coincide or do not overlap
    elif op == OP_NEG:
        for i in range(n):
            if num is float or num is double:
                d[i] = -a[i]   # not 0 - x: -(+0.0) is -0.0
            else:
                d[i] = _wrap_sub(<num>0, a[i])
    elif op == OP_ABS:
        for i in range(n):
            if num is float or num is double:
                d[i] = fabs(a[i])
            else:
                d[i] = _wrap_sub(<num>0, a[i]) if a[i] < 0 else a[i]
    elif op == OP_SQUARE:
        for i in range(n):
            d[i] = _wrap_mul(a[i], a[i])
    elif op == OP_SIGN:
        for i in range(n):
            if num is float or num is double:
                d[i] = a[i] if a[i] != a[i] else <num>((a[i] > 0) - (a[i] < 0))
            else:
                d[i] = <num>((a[i] > 0) - (a[i] < 0))
    elif op == OP_INVERT:
        if num is u8:
            for i in range(n):
                d[i] = not a[i]
        elif num is int32_t or num is int64_t:
            for i in range(n):
                d[i] = ~a[i]
    elif num is float:
        if op == OP_EXP:
            nt_expf_loop(d, a, n)
        elif op == OP_TANH:
            nt_tanhf_loop(d, a, n)
        elif op == OP_SQRT:
            for i in range(n):
                d[i] = sqrtf(a[i])
        elif op == OP_RECIP:
            for i in range(n):
                d[i] = <float>1.0 / a[i]
        else:
            for i in range(n):
                d[i] = <float>_float_unary(op, a[i])
    elif num is double:
        if op == OP_EXP:
            for i in range(n):
                d[i] = exp(a[i])
        elif op == OP_SQRT:
            for i in range(n):
                d[i] = sqrt(a[i])
        else:
            for i in range(n):
                d[i] = _float_unary(op, a[i])

cdef void _unary_bool(int op, u8* d, const num* a, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if op == OP_NOT:
        for i in range(n):
            d[i] = a[i] == 0
    elif num is float or num is double:
        if op == OP_ISNAN:
            for i in range(n):
                d[i] = a[i] != a[i]
        elif op == OP_ISINF:
            for i in range(n):
                d[i] = fabs(a[i]) == INFINITY
        elif op == OP_ISFINITE:
            for i in range(n):
                d[i] = a[i] - a[i] == 0
        elif op == OP_SIGNBIT:
            for i in range(n):
                d[i] = copysign(1.0, a[i]) < 0

cdef inline num _maximum(num x, num y) noexcept nogil:
    # NaN in either operand wins, as in np.maximum.
    # `|`, not `or`: no short-circuit branch, so the loop vectorizes.
    if num is float or num is double:
        return x if ((x >= y) | (x != x)) else y
    else:
        return x if x >= y else y

cdef inline num _minimum(num x, num y) noexcept nogil:
    if num is float or num is double:
        return x if ((x <= y) | (x != x)) else y
    else:
        return x if x <= y else y

cdef void _binary(int op, num* d, const num* a, const num* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if op == OP_ADD:
        for i in range(n):
            d[i] = _wrap_add(a[i], b[i])
    elif op == OP_SUB:
        for i in range(n):
            d[i] = _wrap_sub(a[i], b[i])
    elif op == OP_MUL:
        for i in range(n):
            d[i] = _wrap_mul(a[i], b[i])
    elif op == OP_MAX:
        for i in range(n):
            d[i] = _maximum(a[i], b[i])
    elif op == OP_MIN:
        for i in range(n):
            d[i] = _minimum(a[i], b[i])
    elif num is u8 or num is int32_t or num is int64_t:
        if op == OP_BITAND:
            for i in range(n):
                d[i] = a[i] & b[i]
        elif op == OP_BITOR:
            for i in range(n):
                d[i] = a[i] | b[i]
        elif op == OP_BITXOR:
            for i in range(n):
                d[i] = a[i] ^ b[i]
    else:
        if op == OP_DIV:
            for i in range(n):
                d[i] = a[i] / b[i]
        elif op == OP_FMAX:
            for i in range(n):
                d[i] = fmax(a[i], b[i])
        elif op == OP_FMIN:
            for i in range(n):
                d[i] = fmin(a[i], b[i])
        elif op == OP_POW:
            for i in range(n):
                d[i] = <num>pow(a[i], b[i])
        elif op == OP_ARCTAN2:
            for i in range(n):
                d[i] = <num>atan2(a[i], b[i])
        elif op == OP_HYPOT:
            for i in range(n):
                d[i] = <num>hypot(a[i], b[i])
        elif op == OP_COPYSIGN:
            for i in range(n):
                d[i] = <num>copysign(a[i], b[i])

cdef void _binary_bool(int op, u8* d, const num* a, const num* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if op == OP_EQ:
        for i in range(n):
            d[i] = a[i] == b[i]
    elif op == OP_NE:
        for i in range(n):
            d[i] = a[i] != b[i]
    elif op == OP_LT:
        for i in range(n):
            d[i] = a[i] < b[i]
    elif op == OP_LE:
        for i in range(n):
            d[i] = a[i] <= b[i]
    elif op == OP_GT:
        for i in range(n):
            d[i] = a[i] > b[i]
    elif op == OP_GE:
        for i in range(n):
            d[i] = a[i] >= b[i]
    elif op == OP_LAND:
        for i in range(n):
            d[i] = (a[i] != 0) & (b[i] != 0)
    elif op == OP_LOR:
        for i in range(n):
            d[i] = (a[i] != 0) | (b[i] != 0)
    elif op == OP_LXOR:
        for i in range(n):
            d[i] = (a[i] != 0) ^ (b[i] != 0)

cdef void _where(num* d, const u8* c, const num* a, const num* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        d[i] = a[i] if c[i] else b[i]

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
    for i in range(n):
        d[i] = _convert(a[i], d)

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

# ---------------------------------------------------------------------------------------------
# The program

cdef struct Instr:
    int op, cat, dt, dst, a, b, c

cdef struct Reduction:
    int op, dt, src, out
    double ddof

cdef struct Acc:
    # Running state of one reduction over one row.
    double s, mean, m2, fext
    int64_t iacc, iext
    Py_ssize_t count
    int nan

cdef struct Ctx:
    # Everything a pass needs, built per call by run(); read-only while threads run.
    int nregs, ninstr, nred, nops, nd, nkept
    const Instr* instrs
    const Reduction* reds
    const int* reg_kind
    const int* reg_arg
    const int* reg_dt
    const int* op_role
    Py_ssize_t shape[MAXD]
    Py_ssize_t* strides         # nops x MAXD byte strides over the collapsed dims
    char** data                 # nops base pointers
    Py_ssize_t reg_elems        # elements per scratch register (BLOCK, or less for short passes)
    Py_ssize_t rows             # rows of the innermost dim per block (> 1 only when it is short)
    Py_ssize_t cols             # column mode (see _columns_unit): kept columns per block, else 0
    Py_ssize_t acc_offset       # column mode: where a thread's per-column accumulators start in its scratch
    Py_ssize_t reg_stride       # bytes from one scratch register to the next (see REG_PAD)
    Py_ssize_t scratch_regs     # bytes of scratch per thread: nregs registers of 8-byte elements

cdef void _exec(const Instr* ins, char** regs, Py_ssize_t n) noexcept nogil:
    cdef char* d = regs[ins.dst]
    cdef char* a = regs[ins.a]
    cdef char* b = regs[ins.b] if ins.b >= 0 else NULL
    cdef char* c = regs[ins.c] if ins.c >= 0 else NULL
    cdef int dt = ins.dt, op = ins.op, cat = ins.cat
    if cat == CAT_UNARY:
        if dt == DT_F32: _unary(op, <float*>d, <float*>a, n)
        elif dt == DT_F64: _unary(op, <double*>d, <double*>a, n)
        elif dt == DT_I32: _unary(op, <int32_t*>d, <int32_t*>a, n)
        elif dt == DT_I64: _unary(op, <int64_t*>d, <int64_t*>a, n)
        else: _unary(op, <u8*>d, <u8*>a, n)
    elif cat == CAT_BINARY:
        if dt == DT_F32: _binary(op, <float*>d, <float*>a, <float*>b, n)
        elif dt == DT_F64: _binary(op, <double*>d, <double*>a, <double*>b, n)
        elif dt == DT_I32: _binary(op, <int32_t*>d, <int32_t*>a, <int32_t*>b, n)
        elif dt == DT_I64: _binary(op, <int64_t*>d, <int64_t*>a, <int64_t*>b, n)
        else: _binary(op, <u8*>d, <u8*>a, <u8*>b, n)
    elif cat == CAT_UNARY_BOOL:
        if dt == DT_F32: _unary_bool(op, <u8*>d, <float*>a, n)
        elif dt == DT_F64: _unary_bool(op, <u8*>d, <double*>a, n)
        elif dt == DT_I32: _unary_bool(op, <u8*>d, <int32_t*>a, n)
        elif dt == DT_I64: _unary_bool(op, <u8*>d, <int64_t*>a, n)
        else: _unary_bool(op, <u8*>d, <u8*>a, n)
    elif cat == CAT_BINARY_BOOL:
        if dt == DT_F32: _binary_bool(op, <u8*>d, <float*>a, <float*>b, n)
        elif dt == DT_F64: _binary_bool(op, <u8*>d, <double*>a, <double*>b, n)
        elif dt == DT_I32: _binary_bool(op, <u8*>d, <int32_t*>a, <int32_t*>b, n)
        elif dt == DT_I64: _binary_bool(op, <u8*>d, <int64_t*>a, <int64_t*>b, n)
        else: _binary_bool(op, <u8*>d, <u8*>a, <u8*>b, n)
    elif cat == CAT_WHERE:
        if dt == DT_F32: _where(<float*>d, <u8*>c, <float*>a, <float*>b, n)
        elif dt == DT_F64: _where(<double*>d, <u8*>c, <double*>a, <double*>b, n)
        elif dt == DT_I32: _where(<int32_t*>d, <u8*>c, <int32_t*>a, <int32_t*>b, n)
        elif dt == DT_I64: _where(<int64_t*>d, <u8*>c, <int64_t*>a, <int64_t*>b, n)
        else: _where(<u8*>d, <u8*>c, <u8*>a, <u8*>b, n)
    else:  # CAT_CAST: dt is the destination dtype, the source register carries its own
        _cast_dispatch(dt, ins.c, d, a, n)

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
        for i in range(n):
            memcpy(dst + i * itemsize, src + i * stride, itemsize)

cdef void _scatter(char* dst, const char* src, Py_ssize_t stride, Py_ssize_t itemsize,
                   Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        memcpy(dst + i * stride, src + i * itemsize, itemsize)

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
    for r in range(cx.nregs):
        kind = cx.reg_kind[r]
        if kind == REG_INPUT or kind == REG_OUTPUT:
            k = cx.reg_arg[r]
            isz = ITEMSIZE[cx.reg_dt[r]]
            st = cx.strides[k * MAXD + last]
            so = cx.strides[k * MAXD + last - 1] if rows > 1 else n * st
            if _direct(ptrs[k], st, isz) and so == n * st:
                regs[r] = ptrs[k]
            else:
                regs[r] = scratch + r * cx.reg_stride
                if kind == REG_INPUT:
                    _load(cx, regs[r], ptrs[k], st, so, isz, n, rows, (tiles + r) if tiles != NULL else NULL)
    for r in range(cx.ninstr):
        _exec(&cx.instrs[r], regs, n * rows)
    for r in range(cx.nregs):
        if cx.reg_kind[r] == REG_OUTPUT:
            k = cx.reg_arg[r]
            if regs[r] != ptrs[k]:
                isz = ITEMSIZE[cx.reg_dt[r]]
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
    for i in range(rows):
        _gather(dst + i * row, src + i * so, st, isz, n)

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
    run block by block (the per-unit setup is paid once per chunk, not per block)."""
    cdef char* base[64]
    cdef char* ptrs[64]
    cdef char* regs[256]
    cdef int k, last = cx.nd - 1
    cdef Py_ssize_t inner = cx.shape[last], n, start, stop
    cdef Py_ssize_t nchunk = (inner + CHUNK - 1) // CHUNK
    start = (u % nchunk) * CHUNK
    stop = start + CHUNK if start + CHUNK < inner else inner
    for k in range(cx.nops):
        base[k] = cx.data[k]
    _offsets(cx, u // nchunk, 0, last, base)
    _init_const_regs(cx, regs, scratch)
    while start < stop:
        n = stop - start if stop - start < BLOCK else BLOCK
        for k in range(cx.nops):
            ptrs[k] = base[k] + start * cx.strides[k * MAXD + last]
        _block(cx, regs, scratch, ptrs, n, 1, NULL)
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
    reducing column by column instead would stream all of x once per column."""
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
    _init_const_regs(cx, regs, scratch)
    for k in range(cx.nregs):
        tiles[k] = NULL
    for j in range(cx.nred):
        for c in range(ncol):
            _acc_init(&cx.reds[j], &accs[j * cx.cols + c])
    while start < nrows:
        r = nrows - start if nrows - start < cx.rows else cx.rows
        _block(cx, regs, scratch, base, ncol, r, tiles)
        for j in range(cx.nred):
            _fold_columns(&cx.reds[j], accs + j * cx.cols, regs[cx.reds[j].src], ncol, r)
        for k in range(cx.nops):
            base[k] += r * cx.strides[k * MAXD + red]
        start += r
    for j in range(cx.nred):
        rd = &cx.reds[j]
        for c in range(ncol):
            _acc_store(rd, &accs[j * cx.cols + c], base[rd.out] + c * cx.strides[rd.out * MAXD + last])

cdef void _fold_columns(const Reduction* rd, Acc* accs, const char* x, Py_ssize_t ncol,
                        Py_ssize_t r) noexcept nogil:
    """Fold column c of a row-major block of r rows by ncol columns into accs[c]. Float sums, means
    and variances sweep the block row by row (vectorizable, as NumPy reduces a leading axis); the
    other reductions fold each column, made contiguous, through `_fold`."""
    cdef double sums[MAXCOLS]
    cdef double m2[MAXCOLS]
    cdef double column[BLOCK]
    cdef double bmean, delta
    cdef Py_ssize_t c, tot, isz = ITEMSIZE[rd.dt]
    cdef bint flt = rd.dt == DT_F32 or rd.dt == DT_F64
    if flt and rd.op != R_MAX and rd.op != R_MIN:
        if rd.dt == DT_F32: _column_sums(<const float*>x, ncol, r, sums)
        else: _column_sums(<const double*>x, ncol, r, sums)
        if rd.op == R_SUM or rd.op == R_MEAN:
            for c in range(ncol):
                accs[c].s += sums[c]
                accs[c].count += r
            return
        for c in range(ncol):
            sums[c] /= r
        if rd.dt == DT_F32: _column_m2(<const float*>x, ncol, r, sums, m2)
        else: _column_m2(<const double*>x, ncol, r, sums, m2)
        for c in range(ncol):   # Chan et al., as in _fold
            tot = accs[c].count + r
            delta = sums[c] - accs[c].mean
            accs[c].m2 += m2[c] + delta * delta * accs[c].count * r / tot
            accs[c].mean += delta * r / tot
            accs[c].count = tot
        return
    for c in range(ncol):
        _gather(<char*>column, x + c * isz, ncol * isz, isz, r)
        _fold(rd, &accs[c], <char*>column, r)

cdef void _column_sums(const num* x, Py_ssize_t ncol, Py_ssize_t r, double* sums) noexcept nogil:
    cdef Py_ssize_t i, c
    for c in range(ncol):
        sums[c] = 0
    for i in range(r):
        for c in range(ncol):
            sums[c] += x[i * ncol + c]

cdef void _column_m2(const num* x, Py_ssize_t ncol, Py_ssize_t r, const double* means,
                     double* m2) noexcept nogil:
    cdef Py_ssize_t i, c
    cdef double d
    for c in range(ncol):
        m2[c] = 0
    for i in range(r):
        for c in range(ncol):
            d = x[i * ncol + c] - means[c]
            m2[c] += d * d

cdef void _fold_rows(const Ctx* cx, char** regs, char** ptrs, Py_ssize_t n, Py_ssize_t rows) noexcept nogil:
    """Each of the block's rows (n elements of every reduced register) reduced into its output."""
    cdef Acc acc
    cdef const Reduction* rd
    cdef Py_ssize_t i
    cdef int j
    for j in range(cx.nred):
        rd = &cx.reds[j]
        for i in range(rows):
            _acc_init(rd, &acc)
            _fold(rd, &acc, regs[rd.src] + i * n * ITEMSIZE[rd.dt], n)
            _acc_store(rd, &acc, ptrs[rd.out] + i * cx.strides[rd.out * MAXD + cx.nd - 2])

cdef void _init_const_regs(const Ctx* cx, char** regs, char* scratch) noexcept nogil:
    cdef int r
    for r in range(cx.nregs):
        if cx.reg_kind[r] == REG_CONST or cx.reg_kind[r] == REG_TEMP:
            regs[r] = scratch + r * cx.reg_stride

cdef void _fold(const Reduction* rd, Acc* acc, const char* x, Py_ssize_t n) noexcept nogil:
    """Fold one block of the reduced register into a row's accumulator."""
    cdef double bs, bmean, delta
    cdef Py_ssize_t i, tot
    cdef uint64_t isum = 0
    cdef int dt = rd.dt
    if rd.op == R_SUM or rd.op == R_MEAN:
        if dt == DT_F32: acc.s += nt_sum_f32(<const float*>x, n)
        elif dt == DT_F64: acc.s += nt_sum_f64(<const double*>x, n)
        else:
            for i in range(n):
                isum += <uint64_t>(<const int64_t*>x)[i]
            acc.iacc = <int64_t>(<uint64_t>acc.iacc + isum)
    elif rd.op == R_VAR or rd.op == R_STD:
        # Chan et al.: combine the block's (count, mean, M2) with the running ones.
        bs = nt_sum_f32(<const float*>x, n) if dt == DT_F32 else nt_sum_f64(<const double*>x, n)
        bmean = bs / n
        tot = acc.count + n
        delta = bmean - acc.mean
        acc.m2 += (nt_m2_f32(<const float*>x, n, bmean) if dt == DT_F32
                   else nt_m2_f64(<const double*>x, n, bmean)) + delta * delta * acc.count * n / tot
        acc.mean += delta * n / tot
    elif rd.op == R_MAX:
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
    acc.count += n

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
        if dt == DT_F32 or dt == DT_F64:
            v = NAN if acc.nan else acc.fext
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
        v = acc.s / acc.count if acc.count else NAN
    else:
        v = acc.count - rd.ddof
        v = acc.m2 / (v if v > 0 else 0.0) if acc.count else NAN
        if rd.op == R_STD:
            v = sqrt(v)
    if dt == DT_F32:
        (<float*>out)[0] = <float>v
    else:
        (<double*>out)[0] = v

cdef void _reduction_row(const Ctx* cx, Py_ssize_t m, char* scratch) noexcept nogil:
    """Reduce row m: all reduced positions of kept multi-index m, block by block."""
    cdef char* base[64]
    cdef char* ptrs[64]
    cdef char* regs[256]
    cdef Acc accs[16]
    cdef int k, j, last = cx.nd - 1
    cdef Py_ssize_t inner = cx.shape[last], outer = 1, o, start, n
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
            _block(cx, regs, scratch, ptrs, n, 1, NULL)
            for j in range(cx.nred):
                _fold(&cx.reds[j], &accs[j], regs[cx.reds[j].src], n)
            start += BLOCK
    for j in range(cx.nred):
        _acc_store(&cx.reds[j], &accs[j], base[cx.reds[j].out])

cdef void _fill_consts(const Ctx* cx, char* scratch, const double* fvals, const int64_t* ivals) noexcept nogil:
    """Constant registers hold a block's worth of copies of their value, written once per thread."""
    cdef int r, dt
    cdef char one[8]
    for r in range(cx.nregs):
        if cx.reg_kind[r] != REG_CONST:
            continue
        dt = cx.reg_dt[r]
        if dt == DT_F32: (<float*>one)[0] = <float>fvals[cx.reg_arg[r]]
        elif dt == DT_F64: (<double*>one)[0] = fvals[cx.reg_arg[r]]
        elif dt == DT_I32: (<int32_t*>one)[0] = <int32_t>ivals[cx.reg_arg[r]]
        elif dt == DT_I64: (<int64_t*>one)[0] = ivals[cx.reg_arg[r]]
        else: (<u8*>one)[0] = ivals[cx.reg_arg[r]] != 0
        _fill(scratch + r * cx.reg_stride, one, ITEMSIZE[dt], cx.reg_elems)


# Work (elements x instructions) below which a pass stays on the calling thread: waking a sleeping
# OpenMP team (see OMP_WAIT_POLICY in numtrace_cpu/__init__.py) costs tens of microseconds on a
# busy machine, about what a single thread needs for this much work.
cdef Py_ssize_t PARALLEL_MIN_WORK = 1 << 20


cdef class FusedKernel:
    """One fused group, compiled for one iteration shape.

    Built from plain data (see `numtrace_cpu.lowering`): `shape` is the iteration shape and
    `reduce_axes` the axes reductions fold (outputs of role "reduced" have size 1 there);
    `regs` is a list of (dtype code, kind code, arg) where arg is the operand index of input/output
    registers and the constant index of constant registers; `instrs` are (opcode, dtype code, dst,
    a, b, c) with unused slots -1 (for "cast", c is ignored and taken from a's dtype); `reductions`
    are (reduction code, src register, output operand, ddof); `operands` are (dtype code, role).
    """
    cdef int nregs, ninstr, nred, nops, ndim
    cdef Instr* instrs
    cdef Reduction* reds
    cdef int* reg_kind
    cdef int* reg_arg
    cdef int* reg_dt
    cdef int* op_dt
    cdef int* op_role
    cdef double* fconsts
    cdef int64_t* iconsts
    cdef Py_ssize_t shape[MAXD]
    cdef bint reduced[MAXD]
    cdef Py_ssize_t size, work
    cdef int nkept_dims
    cdef readonly tuple iteration_shape
    cdef readonly int n_instructions

    def __cinit__(self, tuple shape, tuple reduce_axes, list regs, list consts, list instrs,
                  list reductions, list operands):
        cdef int i, r
        if len(shape) > MAXD:
            raise ValueError(f"iteration shape has {len(shape)} dims; at most {MAXD} are supported")
        if not 1 <= len(regs) <= 256:
            raise ValueError(f"a fused kernel needs 1..256 registers, got {len(regs)}")
        if len(operands) > 64 or len(reductions) > 16:
            raise ValueError("a fused kernel takes at most 64 operands and 16 reductions")
        self.ndim = len(shape)
        self.iteration_shape = shape
        self.size = 1
        for i, s in enumerate(shape):
            if s < 0:
                raise ValueError(f"negative dim in iteration shape {shape}")
            self.shape[i] = s
            self.reduced[i] = False
            self.size *= s
        for ax in reduce_axes:
            if not 0 <= ax < self.ndim:
                raise ValueError(f"reduce axis {ax} out of range for iteration shape {shape}")
            self.reduced[ax] = True
        self.nkept_dims = self.ndim - len(set(reduce_axes))
        self.nregs, self.ninstr, self.nred, self.nops = len(regs), len(instrs), len(reductions), len(operands)
        self.n_instructions = self.ninstr
        self.work = self.size * (self.ninstr + self.nred + 1)
        self.instrs = <Instr*>malloc(max(1, self.ninstr) * sizeof(Instr))
        self.reds = <Reduction*>malloc(max(1, self.nred) * sizeof(Reduction))
        self.reg_kind = <int*>malloc(self.nregs * sizeof(int))
        self.reg_arg = <int*>malloc(self.nregs * sizeof(int))
        self.reg_dt = <int*>malloc(self.nregs * sizeof(int))
        self.op_dt = <int*>malloc(max(1, self.nops) * sizeof(int))
        self.op_role = <int*>malloc(max(1, self.nops) * sizeof(int))
        self.fconsts = <double*>malloc(max(1, len(consts)) * sizeof(double))
        self.iconsts = <int64_t*>malloc(max(1, len(consts)) * sizeof(int64_t))
        if (not self.instrs or not self.reds or not self.reg_kind or not self.reg_arg or not self.reg_dt
                or not self.op_dt or not self.op_role or not self.fconsts or not self.iconsts):
            raise MemoryError()
        for i, (dt, role) in enumerate(operands):
            _check_code(dt, NDT, "operand dtype")
            _check_code(role, 3, "operand role")
            self.op_dt[i], self.op_role[i] = dt, role
        for i, c in enumerate(consts):
            if isinstance(c, float):
                self.fconsts[i], self.iconsts[i] = c, 0
            else:
                self.fconsts[i], self.iconsts[i] = float(c), int(c)
        self._load_regs(regs, len(consts))
        self._load_instrs(instrs)
        self._load_reductions(reductions)

    cdef _load_regs(self, list regs, int nconsts):
        cdef int r
        cdef list written = [0] * self.nops
        for r, (dt, kind, arg) in enumerate(regs):
            _check_code(dt, NDT, "register dtype")
            _check_code(kind, 4, "register kind")
            self.reg_dt[r], self.reg_kind[r], self.reg_arg[r] = dt, kind, arg
            if kind == REG_CONST:
                _check_code(arg, nconsts, "constant index")
                _check_code(dt, NCOMPUTE, "constant register dtype")
            elif kind != REG_TEMP:
                _check_code(arg, self.nops, "operand index")
                want = ROLE_INPUT if kind == REG_INPUT else ROLE_OUTPUT
                if self.op_role[arg] != want or self.op_dt[arg] != dt:
                    raise ValueError(f"register {r} does not match the role/dtype of operand {arg}")
                if kind == REG_OUTPUT:
                    written[arg] += 1
        for k in range(self.nops):
            if self.op_role[k] == ROLE_OUTPUT and written[k] != 1:
                raise ValueError(f"output operand {k} must be written by exactly one register")

    cdef _load_instrs(self, list instrs):
        cdef Instr* ins
        for i, (op, dt, dst, a, b, c) in enumerate(instrs):
            _check_code(op, NOPS, "opcode")
            _check_code(dt, NDT, "instruction dtype")
            if not (_DT_MASK[op] >> dt) & 1:
                raise ValueError(f"instruction {i}: opcode {op} has no kernel for dtype code {dt}")
            ins = &self.instrs[i]
            ins.op, ins.cat, ins.dt, ins.dst, ins.a, ins.b, ins.c = op, _CATEGORY[op], dt, dst, a, b, c
            for reg in (dst, a):
                _check_code(reg, self.nregs, "register")
            if self.reg_kind[dst] in (REG_INPUT, REG_CONST):
                raise ValueError(f"instruction {i} writes read-only register {dst}")
            cat = ins.cat
            bool_out = cat in (CAT_UNARY_BOOL, CAT_BINARY_BOOL)
            if self.reg_dt[dst] != (DT_BOOL if bool_out else dt):
                raise ValueError(f"instruction {i}: destination register has the wrong dtype")
            if cat == CAT_CAST:
                ins.c = self.reg_dt[a]
                ins.b = -1
                continue
            if self.reg_dt[a] != dt:
                raise ValueError(f"instruction {i}: operand register a has the wrong dtype")
            if cat in (CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE):
                _check_code(b, self.nregs, "register")
                if self.reg_dt[b] != dt:
                    raise ValueError(f"instruction {i}: operand register b has the wrong dtype")
            else:
                ins.b = -1
            if cat == CAT_WHERE:
                _check_code(c, self.nregs, "register")
                if self.reg_dt[c] != DT_BOOL:
                    raise ValueError(f"instruction {i}: the condition register must be bool")
            else:
                ins.c = -1

    cdef _load_reductions(self, list reductions):
        cdef Reduction* rd
        for i, (op, src, out, ddof) in enumerate(reductions):
            _check_code(op, 6, "reduction code")
            _check_code(src, self.nregs, "register")
            _check_code(out, self.nops, "operand index")
            rd = &self.reds[i]
            rd.op, rd.src, rd.out, rd.ddof, rd.dt = op, src, out, ddof, self.reg_dt[src]
            if not (_RED_MASK[op] >> rd.dt) & 1:
                raise ValueError(f"reduction {i}: code {op} has no kernel for dtype code {rd.dt}")
            if self.op_role[out] != ROLE_REDUCED or self.op_dt[out] != rd.dt:
                raise ValueError(f"reduction {i}: operand {out} is not a reduced output of its dtype")

    def __dealloc__(self):
        free(self.instrs)
        free(self.reds)
        free(self.reg_kind)
        free(self.reg_arg)
        free(self.reg_dt)
        free(self.op_dt)
        free(self.op_role)
        free(self.fconsts)
        free(self.iconsts)

    def run(self, list operands, int nthreads=1):
        """Run the pass over `operands` (ndarrays in operand order; outputs are written in place)."""
        if len(operands) != self.nops:
            raise ValueError(f"fused kernel expects {self.nops} operands, got {len(operands)}")
        self._run(operands, NULL, nthreads)

    cdef int _run(self, list env, const Py_ssize_t* ids, int nthreads) except -1:
        """Operand k is env[ids[k]] (env[k] when ids is NULL)."""
        cdef Ctx cx
        cdef int k, nteam
        cdef Py_ssize_t units, u, chunk
        cdef char* scratch
        cx.strides = <Py_ssize_t*>malloc(max(1, self.nops) * MAXD * sizeof(Py_ssize_t))
        cx.data = <char**>malloc(max(1, self.nops) * sizeof(char*))
        if not cx.strides or not cx.data:
            free(cx.strides)
            free(cx.data)
            raise MemoryError()
        try:
            for k in range(self.nops):
                self._bind(k, env[ids[k] if ids else k], &cx)
            self._collapse(&cx)
            if self.nred:
                self._check_nonempty_reduction(&cx)
            cx.nregs, cx.ninstr, cx.nred, cx.nops = self.nregs, self.ninstr, self.nred, self.nops
            cx.instrs, cx.reds = self.instrs, self.reds
            cx.reg_kind, cx.reg_arg, cx.reg_dt, cx.op_role = self.reg_kind, self.reg_arg, self.reg_dt, self.op_role
            cx.cols = _columns_per_block(&cx)
            if cx.cols:
                _swap_last_dims(&cx)
            cx.rows = _rows_per_block(&cx)
            # Registers need no more elements than the longest block this pass runs.
            cx.reg_elems = cx.rows * (cx.cols if cx.cols else cx.shape[cx.nd - 1])
            cx.reg_elems = BLOCK if cx.reg_elems >= BLOCK else (cx.reg_elems + 7) & ~7
            cx.reg_stride = cx.reg_elems * 8 + REG_PAD
            cx.acc_offset = self.nregs * cx.reg_stride + 64
            cx.scratch_regs = cx.acc_offset + (self.nred * cx.cols * sizeof(Acc) if cx.cols else 0)
            units = _count_units(&cx)
            nteam = nthreads if (nthreads > 1 and units > 1 and self.work >= PARALLEL_MIN_WORK) else 1
            if units == 0:
                return 0
            if nteam > units:
                nteam = <int>units
            chunk = max(1, units // (8 * nteam))
            scratch = <char*>malloc(nteam * cx.scratch_regs)
            if not scratch:
                raise MemoryError()
            with nogil:
                for k in range(nteam):
                    _fill_consts(&cx, scratch + k * cx.scratch_regs, self.fconsts, self.iconsts)
                if nteam == 1:
                    for u in range(units):
                        _unit(&cx, u, scratch)
                else:
                    # Dynamic chunks: on a busy machine a descheduled thread's share is taken over
                    # by the others instead of stalling the whole pass at the closing barrier.
                    for u in prange(units, num_threads=nteam, schedule="dynamic", chunksize=chunk):
                        _unit(&cx, u, scratch + threadid() * cx.scratch_regs)
            free(scratch)
        finally:
            free(cx.strides)
            free(cx.data)
        return 0

    cdef int _bind(self, int k, object arr, Ctx* cx) except -1:
        """Validate operand k and record its data pointer and strides broadcast to the iteration shape."""
        cdef cnp.ndarray a
        cdef int d, j, nd, role = self.op_role[k]
        cdef Py_ssize_t want
        if not cnp.PyArray_Check(arr):   # a C check: this runs per operand per call
            raise TypeError(f"operand {k} must be a numpy.ndarray, got {type(arr).__name__}")
        a = <cnp.ndarray>arr
        if cnp.PyArray_TYPE(a) != TYPENUM[self.op_dt[k]] or not cnp.PyArray_ISNOTSWAPPED(a):
            raise TypeError(f"operand {k} has dtype {a.dtype}; expected native "
                            f"{np.dtype(cnp.PyArray_TypeObjectFromType(TYPENUM[self.op_dt[k]]))}")
        nd = cnp.PyArray_NDIM(a)
        if role != ROLE_INPUT and not cnp.PyArray_ISWRITEABLE(a):
            raise ValueError(f"output operand {k} is read-only")
        if role == ROLE_REDUCED and nd == self.nkept_dims and nd != self.ndim:
            return self._bind_reduced(k, a, cx)
        if nd > self.ndim or (role != ROLE_INPUT and nd != self.ndim):
            raise ValueError(f"operand {k} of shape {arr.shape} does not fit iteration shape "
                             f"{self.iteration_shape}")
        cx.data[k] = <char*>cnp.PyArray_DATA(a)
        for d in range(self.ndim):
            j = d - (self.ndim - nd)
            if j < 0:
                cx.strides[k * MAXD + d] = 0
                continue
            want = self.shape[d]
            if role == ROLE_REDUCED and self.reduced[d]:
                want = 1
            if a.shape[j] == want:
                cx.strides[k * MAXD + d] = a.strides[j] if want != 1 else 0
            elif a.shape[j] == 1 and role == ROLE_INPUT:
                cx.strides[k * MAXD + d] = 0
            else:
                raise ValueError(f"operand {k} of shape {arr.shape} does not broadcast to iteration shape "
                                 f"{self.iteration_shape}")
        return 0

    cdef int _bind_reduced(self, int k, cnp.ndarray a, Ctx* cx) except -1:
        """A reduced output given without its reduced dims (keepdims=False): its dims are the kept ones."""
        cdef int d, j = 0
        cx.data[k] = <char*>cnp.PyArray_DATA(a)
        for d in range(self.ndim):
            if self.reduced[d]:
                cx.strides[k * MAXD + d] = 0
                continue
            if a.shape[j] != self.shape[d]:
                raise ValueError(f"reduced output operand {k} of shape {(<object>a).shape} does not match the kept "
                                 f"dims of iteration shape {self.iteration_shape}")
            cx.strides[k * MAXD + d] = a.strides[j] if self.shape[d] != 1 else 0
            j += 1
        return 0

    cdef void _collapse(self, Ctx* cx):
        """Order dims kept-then-reduced, drop size-1 dims and merge neighbours (within one group)
        that every operand walks contiguously, so the innermost loop is as long as possible."""
        cdef int order[MAXD]
        cdef Py_ssize_t tmp[MAXD]
        cdef int n = 0, d, k, grp, nd = 0, nkept0 = 0, nkept = 0
        for grp in range(2):
            for d in range(self.ndim):
                if self.reduced[d] == grp and self.shape[d] != 1:
                    order[n] = d
                    n += 1
            if grp == 0:
                nkept0 = n
        for k in range(self.nops):
            for d in range(n):
                tmp[d] = cx.strides[k * MAXD + order[d]]
            for d in range(n):
                cx.strides[k * MAXD + d] = tmp[d]
        for d in range(n):
            cx.shape[d] = self.shape[order[d]]
        for d in range(n):
            if nd > 0 and d != nkept0 and self._mergeable(cx, nd - 1, d):
                for k in range(self.nops):
                    cx.strides[k * MAXD + nd - 1] = cx.strides[k * MAXD + d]
                cx.shape[nd - 1] *= cx.shape[d]
            else:
                for k in range(self.nops):
                    cx.strides[k * MAXD + nd] = cx.strides[k * MAXD + d]
                cx.shape[nd] = cx.shape[d]
                nd += 1
            if d == nkept0 - 1:
                nkept = nd
        if nd == nkept and (self.nred or nd == 0):
            # Nothing left to reduce over (only size-1 axes), or a 0-d pass: one virtual dim of 1.
            cx.shape[nd] = 1
            for k in range(self.nops):
                cx.strides[k * MAXD + nd] = 0
            nd += 1
        cx.nd = nd
        cx.nkept = nkept if self.nred else nd

    cdef bint _mergeable(self, Ctx* cx, int a, int b):
        cdef int k
        for k in range(self.nops):
            if cx.strides[k * MAXD + a] != cx.strides[k * MAXD + b] * cx.shape[b]:
                return False
        return True

    cdef int _check_nonempty_reduction(self, Ctx* cx) except -1:
        cdef Py_ssize_t count = 1, rows = 1
        cdef int d
        for d in range(cx.nkept, cx.nd):
            count *= cx.shape[d]
        for d in range(cx.nkept):
            rows *= cx.shape[d]
        if count == 0 and rows > 0:
            for j in range(self.nred):
                if self.reds[j].op in (R_MAX, R_MIN) and self.reds[j].dt != DT_BOOL:
                    raise ValueError("zero-size array to a max/min reduction, which has no identity")
        return 0

    def stats(self):
        """Counts for Executable.stats()."""
        return {"instructions": self.ninstr, "reductions": self.nred, "registers": self.nregs,
                "operands": self.nops}


cdef Py_ssize_t _columns_per_block(const Ctx* cx) noexcept nogil:
    """Kept columns per block when a pass should run in column mode (see `_columns_unit`), else 0:
    it reduces one dim, and every operand that moves along it moves faster along the innermost kept
    dim (as ``x.mean(axis=0)`` on a C-ordered x). Called on the collapsed dims, kept ones first."""
    cdef int k, kept = cx.nd - 2, red = cx.nd - 1
    cdef Py_ssize_t sk, sr
    if not cx.nred or cx.nd - cx.nkept != 1 or cx.nkept < 1 or cx.shape[red] < 2:
        return 0
    for k in range(cx.nops):
        if cx.op_role[k] == ROLE_REDUCED:
            continue
        sk, sr = cx.strides[k * MAXD + kept], cx.strides[k * MAXD + red]
        if sr != 0 and (sk if sk >= 0 else -sk) >= (sr if sr >= 0 else -sr):
            return 0
    return cx.shape[kept] if cx.shape[kept] < MAXCOLS else MAXCOLS

cdef void _swap_last_dims(Ctx* cx) noexcept nogil:
    cdef int k, a = cx.nd - 2, b = cx.nd - 1
    cdef Py_ssize_t t
    cx.shape[a], cx.shape[b] = cx.shape[b], cx.shape[a]
    for k in range(cx.nops):
        t = cx.strides[k * MAXD + a]
        cx.strides[k * MAXD + a] = cx.strides[k * MAXD + b]
        cx.strides[k * MAXD + b] = t

cdef Py_ssize_t _rows_per_block(const Ctx* cx) noexcept nogil:
    """Rows of the innermost dim a block takes: one, unless that dim is short and the rows around it
    can be batched (an elementwise pass, or one that reduces exactly that dim), or in column mode."""
    cdef Py_ssize_t inner = cx.shape[cx.nd - 1]
    if cx.cols:
        return BLOCK // cx.cols
    if cx.nd < 2 or inner < 1 or inner > BLOCK // 4:
        return 1
    if cx.nred and not (cx.nd - cx.nkept == 1 and cx.nkept >= 1):
        return 1
    return BLOCK // inner

cdef Py_ssize_t _count_units(const Ctx* cx) noexcept nogil:
    """Work units of a pass: see `_rows_unit`, `_reduction_row` and `_elementwise_unit`."""
    cdef Py_ssize_t units = 1, per_unit
    cdef int k
    if cx.cols:
        units = (cx.shape[cx.nd - 1] + cx.cols - 1) // cx.cols
        for k in range(cx.nd - 2):
            units *= cx.shape[k]
    elif cx.rows > 1:
        per_unit = cx.rows * (CHUNK // BLOCK)
        units = (cx.shape[cx.nd - 2] + per_unit - 1) // per_unit
        for k in range(cx.nd - 2):
            units *= cx.shape[k]
    elif cx.nred:
        for k in range(cx.nkept):
            units *= cx.shape[k]
    else:
        units = (cx.shape[cx.nd - 1] + CHUNK - 1) // CHUNK
        for k in range(cx.nd - 1):
            units *= cx.shape[k]
    return units

cdef void _unit(const Ctx* cx, Py_ssize_t u, char* scratch) noexcept nogil:
    if cx.cols:
        _columns_unit(cx, u, scratch)
    elif cx.rows > 1:
        _rows_unit(cx, u, scratch)
    elif cx.nred:
        _reduction_row(cx, u, scratch)
    else:
        _elementwise_unit(cx, u, scratch)


cdef int _check_code(object value, int limit, str what) except -1:
    if not isinstance(value, int) or not 0 <= value < limit:
        raise ValueError(f"invalid {what}: {value!r} (expected an int in [0, {limit}))")
    return 0


# ---------------------------------------------------------------------------------------------
# The per-call loop of an executable, in C so that calling a small graph costs little more than
# its kernels (the Python-level checks and messages stay in numtrace_cpu.executable).

cdef int _num_threads = 1


def set_num_threads(int n):
    """Threads of every pass this module runs from now on (numtrace_cpu.threads owns the setting)."""
    global _num_threads
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    _num_threads = n


cdef class FusedCall:
    """A FusedKernel bound to the environment slots of its operands; `scalars` lists the operands
    that arrive as Python scalars, with the dtype they are converted to per call."""
    cdef FusedKernel kernel
    cdef Py_ssize_t* ids
    cdef int nids
    cdef list scalars

    def __cinit__(self, FusedKernel kernel not None, list ids, list scalars):
        if len(ids) != kernel.nops:
            raise ValueError(f"the kernel has {kernel.nops} operands, got {len(ids)} slots")
        self.kernel = kernel
        self.nids = len(ids)
        self.ids = <Py_ssize_t*>malloc(max(1, self.nids) * sizeof(Py_ssize_t))
        if not self.ids:
            raise MemoryError()
        for k, i in enumerate(ids):
            if i < 0:
                raise ValueError(f"negative environment slot {i}")
            self.ids[k] = i
        self.scalars = scalars

    def __dealloc__(self):
        free(self.ids)

    cdef int call(self, list env, int nthreads) except -1:
        cdef list operands
        cdef Py_ssize_t k
        for k in range(self.nids):
            if self.ids[k] >= len(env):
                raise IndexError(f"environment slot {self.ids[k]} out of range")
        if not self.scalars:
            return self.kernel._run(env, self.ids, nthreads)
        operands = [env[self.ids[k]] for k in range(self.nids)]
        for k, dt in self.scalars:
            operands[k] = np.asarray(operands[k], dt)
        return self.kernel._run(operands, NULL, nthreads)


cdef class CallPlan:
    """Inputs checked, arena taken, outputs allocated, steps run: the body of `Executable.__call__`.

    `input_specs[i]` is (typenum, shape) for an array input or None (checked by `_check_input`);
    `steps` holds `FusedCall`s (run directly) and Python callables `f(env, nthreads)`; `outputs` is
    (slot, typenum, shape, mode) with mode 0 direct, 1 copy, 2 scalar, 3 dynamic. Subclasses provide
    `_new_arena()`, `_check_inputs(inputs)`, `_prepare_out(out, inputs)` and `_finish_out(out, outs)`.
    """
    cdef int n_inputs
    cdef list input_specs, steps, outputs, arenas, per_call

    def _setup(self, list input_specs, list steps, list outputs, list per_call):
        """`per_call`: the environment slots a call fills (inputs, direct outputs, values computed
        as Python objects); they are cleared when the call ends so an idle arena holds no
        caller data."""
        self.n_inputs = len(input_specs)
        self.input_specs = input_specs
        self.steps = steps
        self.outputs = outputs
        self.per_call = per_call
        self.arenas = []

    def __call__(self, *inputs, out=None):
        cdef Py_ssize_t i, j
        cdef list work, outs
        cdef object x, spec, step, slot
        cdef int nthreads
        if len(inputs) != self.n_inputs:
            raise TypeError(f"expected {self.n_inputs} inputs, got {len(inputs)}")
        for i in range(self.n_inputs):
            if not _input_ok(inputs[i], self.input_specs[i]):
                inputs = self._check_inputs(inputs)
                break
        if out is None:
            outs = [_empty(o[1], o[2]) if o[3] < 2 else None for o in self.outputs]
        else:
            outs = self._prepare_out(out, inputs)
        try:
            work = self.arenas.pop()
        except IndexError:
            work = self._new_arena()
        try:
            for i in range(self.n_inputs):
                work[i] = inputs[i]
            for j, o in enumerate(self.outputs):
                if o[3] == 0:
                    work[o[0]] = outs[j]
            nthreads = _num_threads
            for step in self.steps:
                if type(step) is FusedCall:
                    (<FusedCall>step).call(work, nthreads)
                else:
                    step(work, nthreads)
            for j, o in enumerate(self.outputs):
                if o[3] == 1:
                    np.copyto(outs[j], work[o[0]])
                elif o[3] == 2:
                    outs[j] = work[o[0]]
                elif o[3] == 3:
                    outs[j] = np.array(work[o[0]], copy=True)
        finally:
            for slot in self.per_call:
                work[slot] = None
            self.arenas.append(work)
        if out is not None:
            return self._finish_out(out, outs)
        return tuple(outs)


cdef inline bint _input_ok(object x, object spec):
    """The fast check: an ndarray of the exact native dtype and shape (anything else takes the slow,
    explaining path)."""
    cdef cnp.ndarray a
    cdef int d
    if spec is None or type(x) is not np.ndarray:
        return False
    a = <cnp.ndarray>x
    typenum, shape = spec
    if cnp.PyArray_TYPE(a) != <int>typenum or not cnp.PyArray_ISNOTSWAPPED(a) or a.ndim != len(shape):
        return False
    for d in range(a.ndim):
        if a.shape[d] != <Py_ssize_t>shape[d]:
            return False
    return True


cdef inline object _empty(int typenum, tuple shape):
    cdef cnp.npy_intp dims[MAXD]
    cdef int d
    cdef size_t nbytes = cnp.PyArray_DescrFromType(typenum).itemsize
    for d in range(len(shape)):
        dims[d] = shape[d]
        nbytes *= <size_t>dims[d]
    if nbytes < RECYCLE_MIN_BYTES:
        return cnp.PyArray_EMPTY(len(shape), dims, typenum, 0)
    return _recycled_array(len(shape), dims, typenum, nbytes)


# ---------------------------------------------------------------------------------------------
# Recycled output memory. A large fresh output costs more in page faults than a fused pass takes
# to fill it (40 MB: ~4 ms). Outputs are still fresh arrays the caller owns, but their memory
# comes from blocks that earlier outputs gave back when the caller dropped them: already faulted
# in, on huge pages. A block is reused only after its array (and every view of it) is gone.

cdef size_t RECYCLE_MIN_BYTES = 1 << 20
cdef size_t RECYCLE_MAX_CACHED = 1 << 29          # bytes kept for reuse, all sizes together
cdef int RECYCLE_PER_SIZE = 4
cdef size_t _cached_bytes = 0
cdef dict _free_blocks = {}                        # nbytes -> list of addresses (under the GIL)


cdef class _Block:
    """Owns one block of output memory; its dealloc hands the block back (or frees it)."""
    cdef void* ptr
    cdef size_t nbytes

    def __dealloc__(self):
        global _cached_bytes
        cdef list free_list
        if self.ptr == NULL:
            return
        if (_free_blocks is not None and _cached_bytes + self.nbytes <= RECYCLE_MAX_CACHED):
            free_list = _free_blocks.setdefault(self.nbytes, [])
            if len(free_list) < RECYCLE_PER_SIZE:
                free_list.append(<size_t>self.ptr)
                _cached_bytes += self.nbytes
                return
        free(self.ptr)


cdef object _recycled_array(int nd, cnp.npy_intp* dims, int typenum, size_t nbytes):
    global _cached_bytes
    cdef _Block block = _Block.__new__(_Block)
    cdef list free_list = _free_blocks.get(nbytes)
    if free_list:
        block.ptr = <void*><size_t>free_list.pop()
        _cached_bytes -= nbytes
    else:
        block.ptr = nt_alloc_large(nbytes)
        if block.ptr == NULL:
            raise MemoryError(f"cannot allocate an output of {nbytes} bytes")
    block.nbytes = nbytes
    arr = cnp.PyArray_SimpleNewFromData(nd, dims, typenum, block.ptr)
    cnp.set_array_base(arr, block)
    return arr
