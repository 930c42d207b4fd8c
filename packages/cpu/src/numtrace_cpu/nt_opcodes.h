/* The block interpreter's instruction set: register dtype codes, instruction categories, opcodes with
 * their scalar semantics, and reductions, each written once.
 *
 * Why X-macros (as numexpr's opcodes.hpp): each opcode is one table line, X(ENUM, name, dtypes,
 * expr), in the list of its category below. `name` is the NumPy ufunc it computes (the lowering
 * finds ops by ufunc name in nt_op_names), `dtypes` the class of register types it computes in (ALL,
 * NUM, INT, SIGNED, FLT: NT_TYPES_<class>), and `expr` its element: a C expression in the operands
 * `a` (and `b`) of one such type, converted to the result type as NumPy casts (NT_TO_<suffix>).
 * From the lists this header expands
 *   - the opcode enum OP_<ENUM>, nt_op_names, nt_op_category and nt_op_dtypes (the runtime's program
 *     validation and numtrace_cpu.runtime.OPS, through which the Python lowering gets every opcode);
 *   - one scalar function per op and register type, nt_op_<name>_<suffix>(a[, b]) (nt_op_add_i32,
 *     nt_op_maximum_f64, nt_op_isnan_f32): the single definition of what the op computes. Every CPU
 *     path calls these: the block loops and the scalar-operand loops (nt_loops.h), the pair loops
 *     (nt_pairs.h), the GEMV ReLU epilogue (nt_gemv.h), the scans (blocks.pxi). Generated C for a
 *     fused pass would call them the same way, on values in registers.
 * Float-unary ops compute in double (a float32 operand converts exactly; the result rounds once);
 * nt_vmath.h may run them on faster loops that tests hold to NumPy within stated ulp bounds.
 *
 * Adding an op that NumPy has as a ufunc of that name: one line in the right list; if the registry
 * (numtrace_ir/ops) lacks the ufunc, its word there too. */
#ifndef NT_OPCODES_H
#define NT_OPCODES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Compute dtypes (codes below NCOMPUTE) have kernels; storage-only dtypes are read from operands
 * and only ever converted by a cast, so e.g. a uint8 image joins a float pass without an astype. */
enum {
    DT_BOOL = 0, DT_I32 = 1, DT_I64 = 2, DT_F32 = 3, DT_F64 = 4, NCOMPUTE = 5,
    DT_U8 = 5, DT_I8 = 6, DT_I16 = 7, DT_U16 = 8, DT_U32 = 9, DT_U64 = 10, NDT = 11
};
static const Py_ssize_t nt_itemsize[NDT] = {1, 4, 8, 4, 8, 1, 1, 2, 2, 4, 8};

/* The register types of each dtype class: NT_TYPES_<class>(M, ...) is M(C type, suffix, dtype code,
 * ...) for each. Bool registers hold 0 or 1 in an unsigned char. */
#define NT_TYPES_FLT(M, ...) M(float, f32, DT_F32, __VA_ARGS__) M(double, f64, DT_F64, __VA_ARGS__)
#define NT_TYPES_SIGNED(M, ...) M(int32_t, i32, DT_I32, __VA_ARGS__) M(int64_t, i64, DT_I64, __VA_ARGS__)
#define NT_TYPES_NUM(M, ...) NT_TYPES_SIGNED(M, __VA_ARGS__) NT_TYPES_FLT(M, __VA_ARGS__)
#define NT_TYPES_INT(M, ...) M(unsigned char, b, DT_BOOL, __VA_ARGS__) NT_TYPES_SIGNED(M, __VA_ARGS__)
#define NT_TYPES_ALL(M, ...) M(unsigned char, b, DT_BOOL, __VA_ARGS__) NT_TYPES_NUM(M, __VA_ARGS__)

/* A value converted to a register type as NumPy casts it (bool: nonzero; wider unsigned integers
 * wrap into the signed type). */
#define NT_TO_b(v) ((unsigned char)((v) != 0))
#define NT_TO_i32(v) ((int32_t)(v))
#define NT_TO_i64(v) ((int64_t)(v))
#define NT_TO_f32(v) ((float)(v))
#define NT_TO_f64(v) ((double)(v))

/* Dtype sets an op computes in, as bit masks over the codes above. */
#define NT_DT_BIT(T, SUF, DT, ...) | (1u << DT)
#define NT_DTS_ALL (0u NT_TYPES_ALL(NT_DT_BIT, ))
#define NT_DTS_NUM (0u NT_TYPES_NUM(NT_DT_BIT, ))
#define NT_DTS_INT (0u NT_TYPES_INT(NT_DT_BIT, ))
#define NT_DTS_SIGNED (0u NT_TYPES_SIGNED(NT_DT_BIT, ))
#define NT_DTS_FLT (0u NT_TYPES_FLT(NT_DT_BIT, ))
#define NT_DTS_SUM ((1u << DT_I64) | (1u << DT_F32) | (1u << DT_F64))

/* Categories decide the register dtypes an instruction may read and write. */
enum {
    CAT_UNARY = 0,        /* dst, a: compute dtype */
    CAT_UNARY_BOOL = 1,   /* dst: bool; a: compute dtype */
    CAT_BINARY = 2,       /* dst, a, b: compute dtype */
    CAT_BINARY_BOOL = 3,  /* dst: bool; a, b: compute dtype */
    CAT_WHERE = 4,        /* dst, a, b: compute dtype; c: bool */
    CAT_CAST = 5          /* dst: compute dtype; a: any dtype */
};

/* Helpers of the element expressions, each a value of its operand's type (so usable in any of them).
 * Integer arithmetic wraps like NumPy's: it is computed in the unsigned type of the same width. */
#define NT_UNSIGNED(a) _Generic((a), int32_t: (uint32_t)(a), int64_t: (uint64_t)(a), default: (a))
/* -a. A float's sign bit is flipped through its bits: GCC folds a C negation into the op that reads
 * it (s + -x into s - x, -x * -x into x * x), which keeps x's NaN with x's sign where NumPy's result
 * has the flipped one; it keeps the flip (one vxorpd, vectorized as before). */
#define NT_SIGN_BIT_FN(name, T, U, op) \
    static inline T name(T a) { U u; memcpy(&u, &a, sizeof u); u op; memcpy(&a, &u, sizeof a); return a; }
NT_SIGN_BIT_FN(nt_neg_f32, float, uint32_t, ^= 0x80000000u)
NT_SIGN_BIT_FN(nt_neg_f64, double, uint64_t, ^= 0x8000000000000000ull)
#define NT_NEG(a) _Generic((a), float: nt_neg_f32(a), double: nt_neg_f64(a), default: -NT_UNSIGNED(a))
/* |a|. A float's sign bit is cleared through its bits: GCC knows x * x is not negative and drops a
 * fabs of it (fabs(x * x) into x * x), which keeps a NaN x's sign where NumPy's result is +NaN. */
NT_SIGN_BIT_FN(nt_abs_f32, float, uint32_t, &= 0x7fffffffu)
NT_SIGN_BIT_FN(nt_abs_f64, double, uint64_t, &= 0x7fffffffffffffffull)
#define NT_ABS(a) _Generic((a), float: nt_abs_f32(a), double: nt_abs_f64(a), default: ((a) < 0 ? -NT_UNSIGNED(a) : NT_UNSIGNED(a)))
/* Ordered compares that raise no flag on a NaN, as NumPy's loops raise none: NT_GT(a, b) is a > b,
 * NT_GE a >= b, and so on. C's `<` is a signaling compare (comiss; cmpltps, vcmpps _CMP_LT_OS), and
 * GCC 12 vectorizes even __builtin_isless into signaling predicates (and folds a float select of
 * the operands on their orderedness into the compare itself). So the compare never sees a NaN: the
 * operands are replaced in their bits, an integer select the compiler does not fold, where a quiet
 * test (ucomis, vcmp _CMP_UNORD_Q) finds a NaN, and an unordered pair compares false. Integer
 * operands compare as they are. The block loops of the AVX builds use quiet vector predicates
 * instead (nt_qcmp.h).
 * On the AVX builds a > b replaces a NaN a by -inf and a NaN b by +inf, which compare false with
 * anything; each replacement depends on one operand only, so for a loop-invariant operand (x > 0,
 * maximum(x, 0), clip) the compiler hoists its half out of the loop. The NaN mask is a quiet
 * compare on AVX2, and on AVX-512 the sign of INF - |bits| (integer ops: a compare there writes a
 * mask register, and a loop of two of them per element runs at about half the speed of one).
 * a >= b (-inf >= -inf holds), and a > b on the baseline build, zero both operands where the pair
 * is unordered (on the baseline build the replacement changes which of two NaNs a product in a
 * generated kernel returns). */
#if defined(__AVX512F__)
#define NT_QNAN_MASK(a, u, S, ABS, INF) ((__typeof__(u))((S)((INF) - ((u) & (ABS))) >> (8 * sizeof(u) - 1)))
#elif defined(__AVX2__)
#define NT_QNAN_MASK(a, u, S, ABS, INF) (-(__typeof__(u))__builtin_isnan(a))
#endif
#ifdef NT_QNAN_MASK
#define NT_QGT(SUF, T, U, S, ABS, INF) \
    static inline T nt_qnan_##SUF(T a, U other) { \
        U u; memcpy(&u, &a, sizeof u); \
        U k = NT_QNAN_MASK(a, u, S, ABS, INF); \
        u = (u & ~k) | (other & k); memcpy(&a, &u, sizeof u); return a; } \
    static inline int nt_qgt_##SUF(T a, T b) { return nt_qnan_##SUF(a, INF | ~ABS) > nt_qnan_##SUF(b, INF); }
#else
#define NT_QGT(SUF, T, U, S, ABS, INF) \
    static inline int nt_qgt_##SUF(T a, T b) { \
        int k = !__builtin_isunordered(a, b); return nt_qz_##SUF(a, k) > nt_qz_##SUF(b, k); }
#endif
#define NT_QUIET_CMP(SUF, T, U, S, ABS, INF) \
    static inline int nt_finite_##SUF(T a) { U u; memcpy(&u, &a, sizeof u); return (u & ABS) < INF; } \
    static inline int nt_inf_##SUF(T a) { U u; memcpy(&u, &a, sizeof u); return (u & ABS) == INF; } \
    static inline T nt_qz_##SUF(T a, int keep) { \
        U u; memcpy(&u, &a, sizeof u); u &= -(U)keep; memcpy(&a, &u, sizeof u); return a; } \
    NT_QGT(SUF, T, U, S, ABS, INF) \
    static inline int nt_qge_##SUF(T a, T b) { \
        int k = !__builtin_isunordered(a, b); return k & (nt_qz_##SUF(a, k) >= nt_qz_##SUF(b, k)); }
NT_QUIET_CMP(f32, float, uint32_t, int32_t, 0x7fffffffu, 0x7f800000u)
NT_QUIET_CMP(f64, double, uint64_t, int64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull)
#define NT_QUIET(a, b, NAME, CMP) _Generic((a) + (b), float: nt_##NAME##_f32((float)(a), (float)(b)), \
    double: nt_##NAME##_f64((double)(a), (double)(b)), default: ((a) CMP (b)))
#define NT_GT(a, b) NT_QUIET(a, b, qgt, >)
#define NT_LT(a, b) NT_QUIET(b, a, qgt, >)
#define NT_GE(a, b) NT_QUIET(a, b, qge, >=)
#define NT_LE(a, b) NT_QUIET(b, a, qge, >=)
/* np.isfinite and np.isinf from the bits (a - a == 0 raises invalid on an infinity; GCC turns
 * fabs(a) == INFINITY into a signaling compare). */
#define NT_ISFINITE(a) _Generic((a), float: nt_finite_f32(a), double: nt_finite_f64(a))
#define NT_ISINF(a) _Generic((a), float: nt_inf_f32(a), double: nt_inf_f64(a))
/* np.copysign and np.signbit from the bits: GCC knows x * x is not negative (a NaN's sign aside) and
 * folds copysign(y, x * x) into fabs(y) and signbit(x * x) into 0, dropping the product and the
 * 'overflow' or 'invalid' (a signaling NaN x) NumPy's multiply raises; bit operations it does not see
 * through. */
#define NT_SIGN_BITS(SUF, T, U, SIGN) \
    static inline int nt_signbit_##SUF(T a) { U u; memcpy(&u, &a, sizeof u); return (u & SIGN) != 0; } \
    static inline T nt_copysign_##SUF(T a, T b) { \
        U u, v; memcpy(&u, &a, sizeof u); memcpy(&v, &b, sizeof v); \
        u = (u & ~(U)SIGN) | (v & SIGN); memcpy(&a, &u, sizeof u); return a; }
NT_SIGN_BITS(f32, float, uint32_t, 0x80000000u)
NT_SIGN_BITS(f64, double, uint64_t, 0x8000000000000000ull)
#define NT_SIGNBIT(a) _Generic((a), float: nt_signbit_f32(a), double: nt_signbit_f64(a))
#define NT_COPYSIGN(a, b) _Generic((a) + (b), float: nt_copysign_f32((float)(a), (float)(b)), \
    double: nt_copysign_f64((double)(a), (double)(b)))
/* np.maximum / np.minimum: NaN in either operand wins, and of equal operands the second (NumPy's
 * loops on x86: np.maximum(-0.0, 0.0) is 0.0, so ReLU of -0.0 is +0.0). For integers the NaN test is
 * false and a tie gives the same value. `|` and a select, no branch, so the loops vectorize. */
#define NT_MAXIMUM(a, b) ((NT_GT(a, b) | ((a) != (a))) ? (a) : (b))
#define NT_MINIMUM(a, b) ((NT_LT(a, b) | ((a) != (a))) ? (a) : (b))
/* NumPy's npy_lshift: a count outside [0, bits) (negative ones included, compared as unsigned) gives
 * 0. Shifted as unsigned, so a negative a is no undefined behaviour. */
#define NT_LSHIFT(a, b) _Generic((a), \
    int32_t: ((uint32_t)(b) < 32 ? (int32_t)((uint32_t)(a) << ((uint32_t)(b) & 31)) : 0), \
    int64_t: ((uint64_t)(b) < 64 ? (int64_t)((uint64_t)(a) << ((uint64_t)(b) & 63)) : 0))
/* NumPy's npy_rshift: a count outside [0, bits) gives 0, or -1 for a negative a: what an arithmetic
 * shift by bits - 1 gives. AVX2 has no variable arithmetic shift of 64-bit lanes, only a logical one:
 * a is shifted with its bits flipped when negative (s all ones), then flipped back (vectorizes). */
#define NT_RSHIFT(a, b) _Generic((a), \
    int32_t: ((a) >> ((uint32_t)(b) < 31 ? (uint32_t)(b) : 31)), \
    int64_t: ((int64_t)((((uint64_t)(a) ^ -(uint64_t)((a) < 0)) >> ((uint64_t)(b) < 63 ? (uint64_t)(b) : 63)) \
                        ^ -(uint64_t)((a) < 0))))

/* np.scalar_power (``s ** p`` of NumPy float scalars): NumPy's scalar math calls the C library's pow,
 * and powf for float32 (not pow in double, which rounds otherwise). Both operands pass an empty asm
 * first: for a constant exponent (a generated kernel's literal) GCC folds pow(x, 2.0) into x * x and
 * pow(x, -1.0) into 1 / x, which can differ from the library's result in the last bit. */
#define NT_CPOW_FN(SUF, T, POW) \
    static inline T nt_cpow_##SUF(T a, T b) { __asm__("" : "+m"(a), "+m"(b)); return POW(a, b); }
NT_CPOW_FN(f32, float, powf)
NT_CPOW_FN(f64, double, pow)
#define NT_CPOW(a, b) _Generic((a), float: nt_cpow_f32(a, b), double: nt_cpow_f64(a, b))

/* np.power of a float array and an exponent NumPy's loop reads with stride 0 (a 0-d or run-time scalar
 * exponent broadcast over the whole pass: classify.broadcast_exponent). NumPy's FLOAT_power and
 * DOUBLE_power (loops_umath_fp.dispatch.c.src, POWER_FAST_PATH) then take these shortcuts, so
 * -inf ** 0.5 is NaN and -0.0 ** 0.5 is -0.0 (sqrt), not C pow's +inf and +0.0; any other exponent is
 * the op `power`'s pow. 1.0 / a is NumPy's double division (a float32 result rounds once more, which
 * gives the correctly rounded quotient). The exponent is the same in every element: nt_loops.h picks
 * `power`'s loop once per block for the other exponents, and this loop (which -O3 unswitches on b and
 * vectorizes) for these; generated kernels leave such passes to the interpreter (codegen.generate),
 * where compares per element made pow's path a fifth slower. */
#define NT_NPPOW_FN(SUF, T, SQRT) \
    static inline T nt_nppow_##SUF(T a, T b) { \
        if (b == -1.0) return (T)(1.0 / a); \
        if (b == 0.0) return (T)1.0; \
        if (b == 0.5) return SQRT(a); \
        if (b == 1.0) return a; \
        if (b == 2.0) return a * a; \
        return (T)pow(a, b); \
    }
NT_NPPOW_FN(f32, float, sqrtf)
NT_NPPOW_FN(f64, double, sqrt)
#define NT_NPPOW(a, b) _Generic((a), float: nt_nppow_f32(a, b), double: nt_nppow_f64(a, b))

/* Unary ops: the result has the operand's type. */
#define NT_UNARY_OPS(X) \
    X(COPY, copy, ALL, a) \
    X(NEG, negative, NUM, NT_NEG(a))  /* not 0 - a: -(+0.0) is -0.0 */ \
    X(ABS, absolute, NUM, NT_ABS(a)) \
    X(SQUARE, square, NUM, NT_UNSIGNED(a) * NT_UNSIGNED(a)) \
    X(SIGN, sign, NUM, a != a ? a : NT_GT(a, 0) - NT_LT(a, 0)) \
    X(INVERT, invert, INT, _Generic((a), unsigned char: !(a), default: ~(a)))
/* Float-unary ops: the C library's double functions (float32 converts exactly and rounds once). */
#define NT_FLOAT_UNARY_OPS(X) \
    X(EXP, exp, FLT, exp(a)) X(LOG, log, FLT, log(a)) X(SQRT, sqrt, FLT, sqrt(a)) X(TANH, tanh, FLT, tanh(a)) \
    X(SIN, sin, FLT, sin(a)) X(COS, cos, FLT, cos(a)) X(TAN, tan, FLT, tan(a)) \
    X(RECIP, reciprocal, FLT, 1.0 / a) X(FLOOR, floor, FLT, floor(a)) X(CEIL, ceil, FLT, ceil(a)) \
    X(RINT, rint, FLT, rint(a)) X(TRUNC, trunc, FLT, trunc(a)) X(EXPM1, expm1, FLT, expm1(a)) \
    X(LOG1P, log1p, FLT, log1p(a)) X(LOG2, log2, FLT, log2(a)) X(LOG10, log10, FLT, log10(a)) \
    X(EXP2, exp2, FLT, exp2(a)) X(ARCTAN, arctan, FLT, atan(a)) X(ARCSIN, arcsin, FLT, asin(a)) \
    X(ARCCOS, arccos, FLT, acos(a)) X(SINH, sinh, FLT, sinh(a)) X(COSH, cosh, FLT, cosh(a)) \
    X(ARCSINH, arcsinh, FLT, asinh(a)) X(ARCCOSH, arccosh, FLT, acosh(a)) X(ARCTANH, arctanh, FLT, atanh(a)) \
    X(CBRT, cbrt, FLT, cbrt(a))
/* Unary predicates: the result is bool. */
#define NT_UNARY_BOOL_OPS(X) \
    X(ISNAN, isnan, FLT, a != a) X(ISINF, isinf, FLT, NT_ISINF(a)) X(ISFINITE, isfinite, FLT, NT_ISFINITE(a)) \
    X(NOT, logical_not, ALL, a == 0) X(SIGNBIT, signbit, FLT, NT_SIGNBIT(a))
/* Binary ops: operands and result of one type. */
#define NT_BINARY_OPS(X) \
    X(ADD, add, ALL, NT_UNSIGNED(a) + NT_UNSIGNED(b)) \
    X(SUB, subtract, NUM, NT_UNSIGNED(a) - NT_UNSIGNED(b)) \
    X(MUL, multiply, ALL, NT_UNSIGNED(a) * NT_UNSIGNED(b)) \
    X(DIV, divide, FLT, a / b) \
    X(MAX, maximum, ALL, NT_MAXIMUM(a, b)) X(MIN, minimum, ALL, NT_MINIMUM(a, b)) \
    /* NaN loses; equal operands give b, as NumPy's vector loop does (its scalar tail differs for \
       -0.0 and 0.0); a select, so the loop vectorizes (the libm call did not). */ \
    X(FMAX, fmax, FLT, (NT_GT(a, b) | (b != b)) ? a : b) X(FMIN, fmin, FLT, (NT_LT(a, b) | (b != b)) ? a : b) \
    X(POW, power, FLT, pow(a, b)) X(SCALAR_POW, scalar_power, FLT, NT_CPOW(a, b)) \
    X(POW_BCAST, power_broadcast, FLT, NT_NPPOW(a, b)) X(ARCTAN2, arctan2, FLT, atan2(a, b)) X(HYPOT, hypot, FLT, hypot(a, b)) \
    X(COPYSIGN, copysign, FLT, NT_COPYSIGN(a, b)) X(FMOD, fmod, FLT, fmod(a, b)) \
    X(BITAND, bitwise_and, INT, a & b) X(BITOR, bitwise_or, INT, a | b) X(BITXOR, bitwise_xor, INT, a ^ b) \
    X(LSHIFT, left_shift, SIGNED, NT_LSHIFT(a, b)) X(RSHIFT, right_shift, SIGNED, NT_RSHIFT(a, b)) \
    /* NumPy's npy_heaviside: NaN, then a == 0 gives b, then the step. */ \
    X(HEAVISIDE, heaviside, FLT, a != a ? NAN : (a == 0 ? b : NT_GT(a, 0)))
/* Comparisons and logical ops: operands of one type, the result bool. */
#define NT_BINARY_BOOL_OPS(X) \
    X(EQ, equal, ALL, a == b) X(NE, not_equal, ALL, a != b) X(LT, less, ALL, NT_LT(a, b)) \
    X(LE, less_equal, ALL, NT_LE(a, b)) X(GT, greater, ALL, NT_GT(a, b)) X(GE, greater_equal, ALL, NT_GE(a, b)) \
    X(LAND, logical_and, ALL, (a != 0) & (b != 0)) X(LOR, logical_or, ALL, (a != 0) | (b != 0)) \
    X(LXOR, logical_xor, ALL, (a != 0) ^ (b != 0))
/* where (c ? a : b, c a bool register) and cast (dst and source dtypes differ) have loops of their own
 * in blocks.pxi. */
#define NT_OTHER_OPS(X) X(WHERE, where, ALL, c ? a : b) X(CAST, cast, ALL, a)

#define NT_ALL_OPS(X) NT_UNARY_OPS(X) NT_FLOAT_UNARY_OPS(X) NT_UNARY_BOOL_OPS(X) NT_BINARY_OPS(X) \
    NT_BINARY_BOOL_OPS(X) NT_OTHER_OPS(X)

#define NT_OP_ENUM(ENUM, name, dts, expr) OP_##ENUM,
#define NT_OP_NAME(ENUM, name, dts, expr) #name,
#define NT_OP_DTS(ENUM, name, dts, expr) NT_DTS_##dts,
#define NT_OP_UNARY(...) CAT_UNARY,
#define NT_OP_UNARY_BOOL(...) CAT_UNARY_BOOL,
#define NT_OP_BINARY(...) CAT_BINARY,
#define NT_OP_BINARY_BOOL(...) CAT_BINARY_BOOL,
enum { NT_ALL_OPS(NT_OP_ENUM) NOPS };
static const char *const nt_op_names[NOPS] = { NT_ALL_OPS(NT_OP_NAME) };
static const unsigned int nt_op_dtypes[NOPS] = { NT_ALL_OPS(NT_OP_DTS) };
static const int nt_op_category[NOPS] = {
    NT_UNARY_OPS(NT_OP_UNARY) NT_FLOAT_UNARY_OPS(NT_OP_UNARY) NT_UNARY_BOOL_OPS(NT_OP_UNARY_BOOL)
    NT_BINARY_OPS(NT_OP_BINARY) NT_BINARY_BOOL_OPS(NT_OP_BINARY_BOOL) CAT_WHERE, CAT_CAST
};

/* The scalar functions nt_op_<name>_<suffix>, for each type of each op's class. */
#define NT_SCALAR_1(T, SUF, DT, ENUM, name, expr) \
    static inline T nt_op_##name##_##SUF(T a) { return NT_TO_##SUF(expr); }
#define NT_SCALAR_1_BOOL(T, SUF, DT, ENUM, name, expr) \
    static inline unsigned char nt_op_##name##_##SUF(T a) { return NT_TO_b(expr); }
#define NT_SCALAR_2(T, SUF, DT, ENUM, name, expr) \
    static inline T nt_op_##name##_##SUF(T a, T b) { return NT_TO_##SUF(expr); }
#define NT_SCALAR_2_BOOL(T, SUF, DT, ENUM, name, expr) \
    static inline unsigned char nt_op_##name##_##SUF(T a, T b) { return NT_TO_b(expr); }
#define NT_SCALARS_1(ENUM, name, dts, expr) NT_TYPES_##dts(NT_SCALAR_1, ENUM, name, expr)
#define NT_SCALARS_1_BOOL(ENUM, name, dts, expr) NT_TYPES_##dts(NT_SCALAR_1_BOOL, ENUM, name, expr)
#define NT_SCALARS_2(ENUM, name, dts, expr) NT_TYPES_##dts(NT_SCALAR_2, ENUM, name, expr)
#define NT_SCALARS_2_BOOL(ENUM, name, dts, expr) NT_TYPES_##dts(NT_SCALAR_2_BOOL, ENUM, name, expr)
NT_UNARY_OPS(NT_SCALARS_1)
NT_FLOAT_UNARY_OPS(NT_SCALARS_1)
NT_UNARY_BOOL_OPS(NT_SCALARS_1_BOOL)
NT_BINARY_OPS(NT_SCALARS_2)
NT_BINARY_BOOL_OPS(NT_SCALARS_2_BOOL)

/* Reductions: R(ENUM, name, dtypes of the reduced register; the output has the same dtype). */
#define NT_REDUCTIONS(R) \
    R(SUM, sum, NT_DTS_SUM) R(MEAN, mean, NT_DTS_FLT) R(VAR, var, NT_DTS_FLT) R(STD, std, NT_DTS_FLT) \
    R(MAX, max, NT_DTS_ALL) R(MIN, min, NT_DTS_ALL)
#define NT_RED_ENUM(ENUM, name, dts) R_##ENUM,
#define NT_RED_NAME(ENUM, name, dts) #name,
#define NT_RED_DTS(ENUM, name, dts) dts,
enum { NT_REDUCTIONS(NT_RED_ENUM) NREDUCTIONS };
static const char *const nt_red_names[NREDUCTIONS] = { NT_REDUCTIONS(NT_RED_NAME) };
static const unsigned int nt_red_dtypes[NREDUCTIONS] = { NT_REDUCTIONS(NT_RED_DTS) };

#endif
