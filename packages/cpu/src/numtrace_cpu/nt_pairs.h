/* Two float instructions run as one loop: t = x op1 y; d = t op2 z (or z op2 t), where t is a
 * temporary that only the second instruction reads (Instr.feeds_next). The pair saves storing t and
 * reading it back, a third of the memory traffic of two block loops.
 *
 * Each op still rounds on its own, as NumPy's ufuncs do: contracting x * y + z into one fused
 * multiply-add would change results, and the build's -ffp-contract=fast would do just that, so these
 * loops are compiled with contraction off. Only GCC can be told so per function; other compilers
 * get no pair loops (nt_pair_* returns 0 and the instructions run one by one). */
#ifndef NT_PAIRS_H
#define NT_PAIRS_H

#include "nt_opcodes.h"

/* The ops a pair may use, numbered 0..5 for the switch below; -1: not pairable. */
static inline int nt_pair_op(int op) {
    return op == OP_ADD ? 0 : op == OP_SUB ? 1 : op == OP_MUL ? 2 : op == OP_DIV ? 3 : op == OP_MAX ? 4
           : op == OP_MIN ? 5 : -1;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

/* The ops, each the expression of blocks.pxi's kernel (maximum/minimum: nt_opcodes.h's). */
#define NT_P_ADD(a, b) ((a) + (b))
#define NT_P_SUB(a, b) ((a) - (b))
#define NT_P_MUL(a, b) ((a) * (b))
#define NT_P_DIV(a, b) ((a) / (b))
#define NT_P_MAX(a, b) NT_MAXIMUM(a, b)
#define NT_P_MIN(a, b) NT_MINIMUM(a, b)

/* + and * commute exactly, so z op2 t needs its own loop only for the other ops. */
#define NT_PAIR_LOOP(T, K2, O1, O2) \
    if (tleft || K2 == 0 || K2 == 2) { \
        for (i = 0; i < n; i++) { T t = O1(x[i], y[i]); T w = z[i]; d[i] = O2(t, w); } \
    } else { \
        for (i = 0; i < n; i++) { T t = O1(x[i], y[i]); T w = z[i]; d[i] = O2(w, t); } \
    }
#define NT_PAIR_CASE(T, K1, O1, K2, O2) case K1 * 6 + K2: NT_PAIR_LOOP(T, K2, O1, O2) return 1;
#define NT_PAIR_SECOND(T, K1, O1) \
    NT_PAIR_CASE(T, K1, O1, 0, NT_P_ADD) NT_PAIR_CASE(T, K1, O1, 1, NT_P_SUB) NT_PAIR_CASE(T, K1, O1, 2, NT_P_MUL) \
    NT_PAIR_CASE(T, K1, O1, 3, NT_P_DIV) NT_PAIR_CASE(T, K1, O1, 4, NT_P_MAX) NT_PAIR_CASE(T, K1, O1, 5, NT_P_MIN)
#define NT_PAIR_FN(NAME, T) \
    static int NAME(int op1, int op2, int tleft, T *d, const T *x, const T *y, const T *z, Py_ssize_t n) { \
        Py_ssize_t i; \
        int k1 = nt_pair_op(op1), k2 = nt_pair_op(op2); \
        if (k1 < 0 || k2 < 0) return 0; \
        switch (k1 * 6 + k2) { \
            NT_PAIR_SECOND(T, 0, NT_P_ADD) NT_PAIR_SECOND(T, 1, NT_P_SUB) NT_PAIR_SECOND(T, 2, NT_P_MUL) \
            NT_PAIR_SECOND(T, 3, NT_P_DIV) NT_PAIR_SECOND(T, 4, NT_P_MAX) NT_PAIR_SECOND(T, 5, NT_P_MIN) \
        } \
        return 0; \
    }
NT_PAIR_FN(nt_pair_f32, float)
NT_PAIR_FN(nt_pair_f64, double)

#pragma GCC pop_options
#else
static int nt_pair_f32(int op1, int op2, int tleft, float *d, const float *x, const float *y, const float *z,
                       Py_ssize_t n) { return 0; }
static int nt_pair_f64(int op1, int op2, int tleft, double *d, const double *x, const double *y,
                       const double *z, Py_ssize_t n) { return 0; }
#endif

#endif
