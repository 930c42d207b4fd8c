/* Small-K products over rows laid out back to back (line_passes.pxi's small_k_matmul, K <= 8, a
 * 1-D right operand): o[r] = sum_k a[r * K + k] * w[k], e.g. an (H, W, 3) image @ 3 weights.
 *
 * Why a C header: with K a compile-time constant and restrict pointers GCC vectorizes the K
 * interleaved columns as whole-vector loads and permutes. Cython's loop over run-time strides
 * compiled to 4-lane gathers of single floats and 4 single-float stores: 3-3.5x slower on
 * (520 * 64, 3) float32, and slower than NumPy's per-row BLAS calls.
 *
 * Each sum is the one that loop computes, in the same order (from +0, k ascending, `acc + a * w`),
 * and this header is compiled in the same module with the same flags, so every ISA build gives the
 * same bits as its generic loop (the AVX2/AVX-512 builds contract each step to one FMA). */
#ifndef NT_SMALLK_H
#define NT_SMALLK_H

#include <stddef.h>

#define NT_SMALLK_ROWS(T, SUF)                                                                        \
static inline __attribute__((always_inline)) void nt_smallk_k_##SUF(                                  \
        const T* restrict a, const T* restrict w, T* restrict o, ptrdiff_t n, int K) {                \
    for (ptrdiff_t r = 0; r < n; r++) {                                                               \
        T acc = 0;                                                                                    \
        for (int k = 0; k < K; k++)                                                                   \
            acc = acc + a[r * K + k] * w[k];                                                          \
        o[r] = acc;                                                                                   \
    }                                                                                                 \
}                                                                                                     \
/* Rows [0, n) of a (n, K) C-order block into o (n,), 1 <= K <= 8. */                                \
static void nt_smallk_rows_##SUF(const T* a, const T* w, T* o, ptrdiff_t n, int K) {                 \
    switch (K) {                                                                                      \
    case 1: nt_smallk_k_##SUF(a, w, o, n, 1); break;                                                  \
    case 2: nt_smallk_k_##SUF(a, w, o, n, 2); break;                                                  \
    case 3: nt_smallk_k_##SUF(a, w, o, n, 3); break;                                                  \
    case 4: nt_smallk_k_##SUF(a, w, o, n, 4); break;                                                  \
    case 5: nt_smallk_k_##SUF(a, w, o, n, 5); break;                                                  \
    case 6: nt_smallk_k_##SUF(a, w, o, n, 6); break;                                                  \
    case 7: nt_smallk_k_##SUF(a, w, o, n, 7); break;                                                  \
    default: nt_smallk_k_##SUF(a, w, o, n, 8); break;                                                 \
    }                                                                                                 \
}

NT_SMALLK_ROWS(float, f32)
NT_SMALLK_ROWS(double, f64)

#endif
