/* The block loops of the unary, binary, predicate and comparison opcodes, for every register type
 * each computes in, expanded from nt_opcodes.h's lists: one loop per op and type, each calling the
 * op's scalar function (nt_op_<name>_<suffix>), and a table that dispatches an instruction to its
 * loop. Compiled once per ISA build (blocks.pxi includes it), so the loops vectorize for its -march.
 *
 *   nt_block_loops[op][dt](d, a, b, n)       d[i] = op(a[i], b[i]) (b unused by unary ops)
 *   nt_scalar_loops[op][dt][left](d, a, s, n) d[i] = op(a[i], *s), or op(*s, a[i]) when left: a
 *       binary op or comparison whose other operand is one value over the block (a constant, or an operand
 *       broadcast along the innermost dim) reads it as a scalar, with no filled register streaming
 *       through the loop. The same scalar function, so the same bits as the block loop.
 * Registers either coincide (d == a) or do not overlap. */
#ifndef NT_LOOPS_H
#define NT_LOOPS_H

#include <string.h>
#include "nt_opcodes.h"
#include "nt_vmath.h"
#include "nt_qcmp.h"

/* The result type of a loop: the operands' (NT_RES_SAME) or bool (NT_RES_BOOL). */
#define NT_RES_SAME(T) T
#define NT_RES_BOOL(T) unsigned char

typedef void (*nt_loop_fn)(char *d, const char *a, const char *b, Py_ssize_t n);

/* A float compare runs its quiet vector loop first where this build has one (nt_qcmp.h). */
#define NT_LOOP_1(T, SUF, DT, ENUM, name, R) \
    static void nt_loop_##name##_##SUF(char *d_, const char *a_, const char *b_, Py_ssize_t n) { \
        R(T) *d = (R(T) *)d_; const T *a = (const T *)a_; \
        for (Py_ssize_t i = nt_qcmp_##SUF(OP_##ENUM, d_, a_, b_, n, 3); i < n; i++) \
            d[i] = nt_op_##name##_##SUF(a[i]); \
    }
#define NT_LOOP_2(T, SUF, DT, ENUM, name, R) \
    static void nt_loop_##name##_##SUF(char *d_, const char *a_, const char *b_, Py_ssize_t n) { \
        R(T) *d = (R(T) *)d_; const T *a = (const T *)a_, *b = (const T *)b_; \
        for (Py_ssize_t i = nt_qcmp_##SUF(OP_##ENUM, d_, a_, b_, n, 0); i < n; i++) \
            d[i] = nt_op_##name##_##SUF(a[i], b[i]); \
    } \
    static void nt_loop_##name##_##SUF##_s(char *d_, const char *a_, const char *s_, Py_ssize_t n) { \
        R(T) *d = (R(T) *)d_; const T *a = (const T *)a_; const T s = *(const T *)s_; \
        for (Py_ssize_t i = nt_qcmp_##SUF(OP_##ENUM, d_, a_, s_, n, 1); i < n; i++) \
            d[i] = nt_op_##name##_##SUF(a[i], s); \
    } \
    static void nt_loop_##name##_##SUF##_sl(char *d_, const char *a_, const char *s_, Py_ssize_t n) { \
        R(T) *d = (R(T) *)d_; const T *a = (const T *)a_; const T s = *(const T *)s_; \
        for (Py_ssize_t i = nt_qcmp_##SUF(OP_##ENUM, d_, a_, s_, n, 2); i < n; i++) \
            d[i] = nt_op_##name##_##SUF(s, a[i]); \
    }
/* A float-unary op: this build's faster loop where it has one, else the table's expression. */
#define NT_LOOP_FLOAT_1(T, SUF, DT, ENUM, name, R) \
    static void nt_loop_##name##_##SUF(char *d_, const char *a_, const char *b_, Py_ssize_t n) { \
        T *d = (T *)d_; const T *a = (const T *)a_; \
        if (nt_float_unary_fast_##SUF(OP_##ENUM, d, a, n)) return; \
        _Pragma("omp simd") \
        for (Py_ssize_t i = 0; i < n; i++) d[i] = nt_op_##name##_##SUF(a[i]); \
    }
#define NT_LOOPS_1(ENUM, name, dts, expr) NT_TYPES_##dts(NT_LOOP_1, ENUM, name, NT_RES_SAME)
#define NT_LOOPS_1_BOOL(ENUM, name, dts, expr) NT_TYPES_##dts(NT_LOOP_1, ENUM, name, NT_RES_BOOL)
#define NT_LOOPS_FLOAT_1(ENUM, name, dts, expr) NT_TYPES_##dts(NT_LOOP_FLOAT_1, ENUM, name, NT_RES_SAME)
#define NT_LOOPS_2(ENUM, name, dts, expr) NT_TYPES_##dts(NT_LOOP_2, ENUM, name, NT_RES_SAME)
#define NT_LOOPS_2_BOOL(ENUM, name, dts, expr) NT_TYPES_##dts(NT_LOOP_2, ENUM, name, NT_RES_BOOL)
NT_UNARY_OPS(NT_LOOPS_1)
NT_FLOAT_UNARY_OPS(NT_LOOPS_FLOAT_1)
NT_UNARY_BOOL_OPS(NT_LOOPS_1_BOOL)
NT_BINARY_OPS(NT_LOOPS_2)
NT_BINARY_BOOL_OPS(NT_LOOPS_2_BOOL)

#define NT_ENTRY(T, SUF, DT, ENUM, name, tail) [OP_##ENUM][DT] = nt_loop_##name##_##SUF,
#define NT_ENTRIES(ENUM, name, dts, expr) NT_TYPES_##dts(NT_ENTRY, ENUM, name, )
static const nt_loop_fn nt_block_loops[NOPS][NCOMPUTE] = {
    NT_UNARY_OPS(NT_ENTRIES) NT_FLOAT_UNARY_OPS(NT_ENTRIES) NT_UNARY_BOOL_OPS(NT_ENTRIES)
    NT_BINARY_OPS(NT_ENTRIES) NT_BINARY_BOOL_OPS(NT_ENTRIES)
};
#define NT_SCALAR_ENTRY(T, SUF, DT, ENUM, name, tail) \
    [OP_##ENUM][DT] = {nt_loop_##name##_##SUF##_s, nt_loop_##name##_##SUF##_sl},
#define NT_SCALAR_ENTRIES(ENUM, name, dts, expr) NT_TYPES_##dts(NT_SCALAR_ENTRY, ENUM, name, )
static const nt_loop_fn nt_scalar_loops[NOPS][NCOMPUTE][2] = {
    NT_BINARY_OPS(NT_SCALAR_ENTRIES) NT_BINARY_BOOL_OPS(NT_SCALAR_ENTRIES)
};

/* OP_POW_BCAST's loop for an exponent e (its value, the same in every element): the op's own where
 * NumPy's loop branches on e, else OP_POW's, whose elements then compare nothing (a pow call each:
 * the compares cost about a fifth more). */
static inline int nt_pow_bcast_loop(int dt, const char *e) {
    double v = dt == DT_F32 ? (double)*(const float *)e : *(const double *)e;
    return (v == -1.0) | (v == 0.0) | (v == 0.5) | (v == 1.0) | (v == 2.0) ? OP_POW_BCAST : OP_POW;
}

/* One instruction of a category above over n elements (its opcode and dtype validated when the
 * program was loaded). */
static inline void nt_run_loop(int op, int dt, char *d, const char *a, const char *b, Py_ssize_t n) {
    if (op == OP_COPY) {
        if (d != a) memcpy(d, a, (size_t)(n * nt_itemsize[dt]));
        return;
    }
    if (op == OP_POW_BCAST) {
        if (n <= 0) return;
        op = nt_pow_bcast_loop(dt, b);
    }
    nt_block_loops[op][dt](d, a, b, n);
}

/* A binary or comparison instruction with the scalar operand s (left: it is the first operand). */
static inline void nt_run_scalar_loop(int op, int dt, char *d, const char *a, const char *s, int left,
                                      Py_ssize_t n) {
    if (op == OP_POW_BCAST) {
        if (n <= 0) return;
        op = nt_pow_bcast_loop(dt, left ? a : s);   /* left: s is the base, a the exponent's register */
    }
    nt_scalar_loops[op][dt][left](d, a, s, n);
}

#endif
