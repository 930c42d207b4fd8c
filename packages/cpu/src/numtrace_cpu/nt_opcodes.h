/* The block interpreter's instruction set: register dtype codes, instruction categories, opcodes and
 * reductions, each written once.
 *
 * Why X-macros (as numexpr's opcodes.hpp): the opcode list below is expanded into the enum, the
 * names table the lowering reads (numtrace_cpu.runtime.OPS), the category and dtype tables the
 * program validation reads, and the float-unary loops (nt_vmath.h), so none of them can drift from
 * the others.  An entry is X(ENUM, name, category, dtypes). */
#ifndef NT_OPCODES_H
#define NT_OPCODES_H

#include <math.h>

/* Compute dtypes (codes below NCOMPUTE) have kernels; storage-only dtypes are read from operands
 * and only ever converted by a cast, so e.g. a uint8 image joins a float pass without an astype. */
enum {
    DT_BOOL = 0, DT_I32 = 1, DT_I64 = 2, DT_F32 = 3, DT_F64 = 4, NCOMPUTE = 5,
    DT_U8 = 5, DT_I8 = 6, DT_I16 = 7, DT_U16 = 8, DT_U32 = 9, DT_U64 = 10, NDT = 11
};
static const Py_ssize_t nt_itemsize[NDT] = {1, 4, 8, 4, 8, 1, 1, 2, 2, 4, 8};

/* Dtype sets an op computes in, as bit masks over the codes above. */
#define NT_DTS_ALL ((1u << DT_BOOL) | (1u << DT_I32) | (1u << DT_I64) | (1u << DT_F32) | (1u << DT_F64))
#define NT_DTS_NUM ((1u << DT_I32) | (1u << DT_I64) | (1u << DT_F32) | (1u << DT_F64))
#define NT_DTS_INT ((1u << DT_BOOL) | (1u << DT_I32) | (1u << DT_I64))
#define NT_DTS_SIGNED ((1u << DT_I32) | (1u << DT_I64))
#define NT_DTS_FLT ((1u << DT_F32) | (1u << DT_F64))
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

/* Float-only unary ops, evaluated in double (float32 rounds the result once): an entry is
 * Y(X, ENUM, name, expr) with expr the result for the element x.  NT_OPCODES lists them through
 * NT_AS_FLOAT_UNARY_OP; nt_vmath.h expands them into one loop per op (where no vector kernel or
 * exact float32 form takes the op). */
#define NT_FLOAT_UNARY(Y, X) \
    Y(X, EXP, exp, exp(x)) Y(X, LOG, log, log(x)) Y(X, SQRT, sqrt, sqrt(x)) Y(X, TANH, tanh, tanh(x)) \
    Y(X, SIN, sin, sin(x)) Y(X, COS, cos, cos(x)) Y(X, TAN, tan, tan(x)) Y(X, RECIP, reciprocal, 1.0 / x) \
    Y(X, FLOOR, floor, floor(x)) Y(X, CEIL, ceil, ceil(x)) Y(X, RINT, rint, rint(x)) \
    Y(X, TRUNC, trunc, trunc(x)) Y(X, EXPM1, expm1, expm1(x)) Y(X, LOG1P, log1p, log1p(x)) \
    Y(X, LOG2, log2, log2(x)) Y(X, LOG10, log10, log10(x)) Y(X, EXP2, exp2, exp2(x)) \
    Y(X, ARCTAN, arctan, atan(x)) Y(X, ARCSIN, arcsin, asin(x)) Y(X, ARCCOS, arccos, acos(x)) \
    Y(X, SINH, sinh, sinh(x)) Y(X, COSH, cosh, cosh(x)) Y(X, ARCSINH, arcsinh, asinh(x)) \
    Y(X, ARCCOSH, arccosh, acosh(x)) Y(X, ARCTANH, arctanh, atanh(x)) Y(X, CBRT, cbrt, cbrt(x))
#define NT_AS_FLOAT_UNARY_OP(X, ENUM, name, expr) X(ENUM, name, CAT_UNARY, NT_DTS_FLT)

#define NT_OPCODES(X) \
    X(COPY, copy, CAT_UNARY, NT_DTS_ALL) X(NEG, negative, CAT_UNARY, NT_DTS_NUM) \
    X(ABS, absolute, CAT_UNARY, NT_DTS_NUM) X(SQUARE, square, CAT_UNARY, NT_DTS_NUM) \
    X(SIGN, sign, CAT_UNARY, NT_DTS_NUM) X(INVERT, invert, CAT_UNARY, NT_DTS_INT) \
    NT_FLOAT_UNARY(NT_AS_FLOAT_UNARY_OP, X) \
    X(ISNAN, isnan, CAT_UNARY_BOOL, NT_DTS_FLT) X(ISINF, isinf, CAT_UNARY_BOOL, NT_DTS_FLT) \
    X(ISFINITE, isfinite, CAT_UNARY_BOOL, NT_DTS_FLT) X(NOT, logical_not, CAT_UNARY_BOOL, NT_DTS_ALL) \
    X(SIGNBIT, signbit, CAT_UNARY_BOOL, NT_DTS_FLT) \
    X(ADD, add, CAT_BINARY, NT_DTS_ALL) X(SUB, subtract, CAT_BINARY, NT_DTS_NUM) \
    X(MUL, multiply, CAT_BINARY, NT_DTS_ALL) X(DIV, divide, CAT_BINARY, NT_DTS_FLT) \
    X(MAX, maximum, CAT_BINARY, NT_DTS_ALL) X(MIN, minimum, CAT_BINARY, NT_DTS_ALL) \
    X(FMAX, fmax, CAT_BINARY, NT_DTS_FLT) X(FMIN, fmin, CAT_BINARY, NT_DTS_FLT) \
    X(POW, power, CAT_BINARY, NT_DTS_FLT) X(ARCTAN2, arctan2, CAT_BINARY, NT_DTS_FLT) \
    X(HYPOT, hypot, CAT_BINARY, NT_DTS_FLT) X(COPYSIGN, copysign, CAT_BINARY, NT_DTS_FLT) \
    X(BITAND, bitwise_and, CAT_BINARY, NT_DTS_INT) X(BITOR, bitwise_or, CAT_BINARY, NT_DTS_INT) \
    X(BITXOR, bitwise_xor, CAT_BINARY, NT_DTS_INT) \
    X(LSHIFT, left_shift, CAT_BINARY, NT_DTS_SIGNED) X(RSHIFT, right_shift, CAT_BINARY, NT_DTS_SIGNED) \
    X(HEAVISIDE, heaviside, CAT_BINARY, NT_DTS_FLT) \
    X(EQ, equal, CAT_BINARY_BOOL, NT_DTS_ALL) X(NE, not_equal, CAT_BINARY_BOOL, NT_DTS_ALL) \
    X(LT, less, CAT_BINARY_BOOL, NT_DTS_ALL) X(LE, less_equal, CAT_BINARY_BOOL, NT_DTS_ALL) \
    X(GT, greater, CAT_BINARY_BOOL, NT_DTS_ALL) X(GE, greater_equal, CAT_BINARY_BOOL, NT_DTS_ALL) \
    X(LAND, logical_and, CAT_BINARY_BOOL, NT_DTS_ALL) X(LOR, logical_or, CAT_BINARY_BOOL, NT_DTS_ALL) \
    X(LXOR, logical_xor, CAT_BINARY_BOOL, NT_DTS_ALL) \
    X(WHERE, where, CAT_WHERE, NT_DTS_ALL) X(CAST, cast, CAT_CAST, NT_DTS_ALL)

#define NT_OP_ENUM(ENUM, name, cat, dts) OP_##ENUM,
#define NT_OP_NAME(ENUM, name, cat, dts) #name,
#define NT_OP_CAT(ENUM, name, cat, dts) cat,
#define NT_OP_DTS(ENUM, name, cat, dts) dts,
enum { NT_OPCODES(NT_OP_ENUM) NOPS };
static const char *const nt_op_names[NOPS] = { NT_OPCODES(NT_OP_NAME) };
static const int nt_op_category[NOPS] = { NT_OPCODES(NT_OP_CAT) };
static const unsigned int nt_op_dtypes[NOPS] = { NT_OPCODES(NT_OP_DTS) };

/* np.maximum / np.minimum: NaN in either operand wins, and of equal operands the second (NumPy's
 * loops on x86: np.maximum(-0.0, 0.0) is 0.0, so ReLU of -0.0 is +0.0). For integers the NaN test is
 * false and a tie gives the same value. One definition for every loop computing them (blocks.pxi's
 * kernels, nt_pairs.h's pair loops, nt_gemv.h's ReLU epilogue); `|` and a select, no branch, so the
 * loops vectorize. */
#define NT_MAXIMUM(a, b) ((((a) > (b)) | ((a) != (a))) ? (a) : (b))
#define NT_MINIMUM(a, b) ((((a) < (b)) | ((a) != (a))) ? (a) : (b))

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
