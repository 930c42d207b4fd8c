/* Two float instructions run as one loop: t = x op1 y; d = t op2 z (or z op2 t), where t is a
 * temporary that only the second instruction reads (Instr.feeds_next). The pair saves storing t and
 * reading it back, a third of the memory traffic of two block loops. Each op is its nt_opcodes.h
 * scalar function, as in the block loops.
 *
 * Each op still rounds on its own, as NumPy's ufuncs do: contracting x * y + z into one fused
 * multiply-add would change results, and the build's -ffp-contract=fast would do just that, so these
 * loops are compiled with contraction off. Only GCC can be told so per function; other compilers
 * get no pair loops (nt_pair_* returns 0 and the instructions run one by one). */
#ifndef NT_PAIRS_H
#define NT_PAIRS_H

#include "nt_opcodes.h"

/* The ops a pair may use, P(ENUM, name): float arithmetic whose loops vectorize. Listed twice, once
 * per position, because a macro cannot expand itself inside its own expansion (the first op's case
 * holds a switch over the second); the assertion below keeps the two lists equal. */
#define NT_PAIR_FIRST(P, ...) P(ADD, add, __VA_ARGS__) P(SUB, subtract, __VA_ARGS__) \
    P(MUL, multiply, __VA_ARGS__) P(DIV, divide, __VA_ARGS__) P(MAX, maximum, __VA_ARGS__) P(MIN, minimum, __VA_ARGS__)
#define NT_PAIR_SECOND(P, ...) P(ADD, add, __VA_ARGS__) P(SUB, subtract, __VA_ARGS__) \
    P(MUL, multiply, __VA_ARGS__) P(DIV, divide, __VA_ARGS__) P(MAX, maximum, __VA_ARGS__) P(MIN, minimum, __VA_ARGS__)
#define NT_PAIR_SIG(ENUM, name, ...) + (1ull << (OP_##ENUM % 64)) + ((unsigned long long)OP_##ENUM << 32)
_Static_assert((0 NT_PAIR_FIRST(NT_PAIR_SIG, )) == (0 NT_PAIR_SECOND(NT_PAIR_SIG, )), "pair lists differ");

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

#define NT_PAIR_CASE(E2, n2, T, SUF, n1) \
    case OP_##E2: \
        if (tleft) { \
            for (i = 0; i < n; i++) { T t = nt_op_##n1##_##SUF(x[i], y[i]); d[i] = nt_op_##n2##_##SUF(t, z[i]); } \
        } else { \
            for (i = 0; i < n; i++) { T t = nt_op_##n1##_##SUF(x[i], y[i]); d[i] = nt_op_##n2##_##SUF(z[i], t); } \
        } \
        return 1;
#define NT_PAIR_OUTER(E1, n1, T, SUF) \
    case OP_##E1: \
        switch (op2) { NT_PAIR_SECOND(NT_PAIR_CASE, T, SUF, n1) } \
        return 0;
#define NT_PAIR_FN(T, SUF) \
    static int nt_pair_##SUF(int op1, int op2, int tleft, T *d, const T *x, const T *y, const T *z, Py_ssize_t n) { \
        Py_ssize_t i; \
        switch (op1) { NT_PAIR_FIRST(NT_PAIR_OUTER, T, SUF) } \
        return 0; \
    }
NT_PAIR_FN(float, f32)
NT_PAIR_FN(double, f64)

#pragma GCC pop_options
#else
static int nt_pair_f32(int op1, int op2, int tleft, float *d, const float *x, const float *y, const float *z,
                       Py_ssize_t n) { return 0; }
static int nt_pair_f64(int op1, int op2, int tleft, double *d, const double *x, const double *y,
                       const double *z, Py_ssize_t n) { return 0; }
#endif

#endif
