/* Matrix-vector kernels for numtrace_cpu (see gemv.pxi), compiled once per ISA build.
 *
 * y[j] = act(sum_k x[k] * W(k, j) + b[j]), in two layouts of W:
 *   rows form: W(k, j) = w[k*ldw + j] (a C-ordered weight matrix). The rows are cut into fixed
 *              chunks of NT_GEMV_CHUNK; each chunk's partial sums are computed by streaming its rows
 *              four at a time (contiguous memory, which the prefetchers follow), summing each column
 *              in k order, and the partials are then added in chunk order. The chunking does not
 *              depend on the thread count, so 1 and N threads give bit-identical results.
 *   dot form:  W(k, j) = w[j*ldw + k] (a transposed matrix, or the rows of (M, K) @ (K,)): one dot
 *              product per j, summed in vector lanes and then across them.
 * Up to NT_GEMV_MAX_M vectors x share one pass over W (x @ W for a few rows of x): every row of
 * the result has the bits the one-vector product of that row gives.
 * NumPy's BLAS sums in another order, so results agree to float rounding, not bit for bit.
 * The vectors are GCC vector extensions: the width follows the build's -march.
 */
#ifndef NT_GEMV_H
#define NT_GEMV_H

#include <stddef.h>
#include <string.h>

#include "nt_opcodes.h"

#if defined(__AVX512F__)
#define NT_GV_BYTES 64
#else
#define NT_GV_BYTES 32
#endif

typedef float nt_gv_f32 __attribute__((vector_size(NT_GV_BYTES), aligned(4), may_alias));
typedef double nt_gv_f64 __attribute__((vector_size(NT_GV_BYTES), aligned(8), may_alias));

/* The last n % L columns of the rows form (fewer than a vector: all of a 10-wide output layer) in one
   masked vector kept in a register over the K rows, where AVX-512 masks its multiply-adds (no flag
   from a lane it does not use); elsewhere each column through memory, four rows at a time. Either
   way each column is the same k-order chain of multiply-adds from +0 (the build contracts them,
   -ffp-contract=fast), so the same bits. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define NT_GV_TAIL 1
/* y's first t columns (a masked vector) = (y or +0, per from_y) + the k-order chain of r rows of W
   times x: the tail (from +0, all K rows) and the lead (added to y) below. */
#define NT_GV_MASKED(SUF, T, MASKT, V, SET1, LOADZ, FMA3, STORE, ZERO)                                  \
static inline void nt_gv_masked_##SUF(const T* x, ptrdiff_t r, const T* w, ptrdiff_t ldw, T* y, ptrdiff_t t, \
                                      int from_y) {                                                    \
    const MASKT m = (MASKT)((1u << t) - 1);                                                            \
    V a = from_y ? LOADZ(m, y) : ZERO();                                                               \
    for (ptrdiff_t i = 0; i < r; i++) a = FMA3(SET1(x[i]), LOADZ(m, w + i * ldw), a, m);              \
    STORE(y, m, a);                                                                                    \
}
NT_GV_MASKED(f32, float, __mmask16, __m512, _mm512_set1_ps, _mm512_maskz_loadu_ps, _mm512_mask3_fmadd_ps,
             _mm512_mask_storeu_ps, _mm512_setzero_ps)
NT_GV_MASKED(f64, double, __mmask8, __m512d, _mm512_set1_pd, _mm512_maskz_loadu_pd, _mm512_mask3_fmadd_pd,
             _mm512_mask_storeu_pd, _mm512_setzero_pd)
static inline void nt_gemv_tail_f32(const float* x, const float* w, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t t,
                                    float* y) {
    nt_gv_masked_f32(x, K, w, ldw, y, t, 0);
}
static inline void nt_gemv_tail_f64(const double* x, const double* w, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t t,
                                    double* y) {
    nt_gv_masked_f64(x, K, w, ldw, y, t, 0);
}
/* The first t columns of `r` rows of W added to y (memory, as the rows form's vectors are): the
   masked vector that nt_gemv_rows_lead keeps beside the aligned ones. */
static inline void nt_gemv_lead_f32(const float* x, int r, const float* w, ptrdiff_t ldw, float* y, ptrdiff_t t) {
    nt_gv_masked_f32(x, r, w, ldw, y, t, 1);
}
static inline void nt_gemv_lead_f64(const double* x, int r, const double* w, ptrdiff_t ldw, double* y,
                                    ptrdiff_t t) {
    nt_gv_masked_f64(x, r, w, ldw, y, t, 1);
}
#else
#define NT_GV_TAIL 0
#define nt_gemv_tail_f32(x, w, ldw, K, t, y) ((void)0)
#define nt_gemv_tail_f64(x, w, ldw, K, t, y) ((void)0)
#define nt_gemv_lead_f32(x, r, w, ldw, y, t) ((void)0)
#define nt_gemv_lead_f64(x, r, w, ldw, y, t) ((void)0)
#endif

/* Epilogue activations: none; max(h, 0) and max(0, h), np.maximum's rule (nt_opcodes.h's
   nt_op_maximum_*: NaN propagates, the second operand wins ties, which decides the sign of a zero). */
enum { NT_ACT_NONE = 0, NT_ACT_RELU = 1, NT_ACT_RELU_ZERO_FIRST = 2 };

/* Rows per chunk of the rows form: the unit of work of one thread, and of the summation order. */
#define NT_GEMV_CHUNK 64
/* The most vectors (rows of x) one product of the rows form takes: (M, K) @ (K, N), M <= 8. */
#define NT_GEMV_MAX_M 8

#define NT_GEMV_DEFINE(T, V, SUF)                                                                   \
static inline T nt_gv_act_##SUF(T h, int act) {                                                    \
    if (act == NT_ACT_RELU) return nt_op_maximum_##SUF(h, (T)0);                                   \
    if (act == NT_ACT_RELU_ZERO_FIRST) return nt_op_maximum_##SUF((T)0, h);                        \
    return h;                                                                                      \
}                                                                                                  \
                                                                                                   \
static void nt_gemv_epilogue_##SUF(T* y, const T* b, ptrdiff_t n, int act) {                       \
    ptrdiff_t j;                                                                                   \
    if (b) for (j = 0; j < n; j++) y[j] += b[j];                                                   \
    if (act) for (j = 0; j < n; j++) y[j] = nt_gv_act_##SUF(y[j], act);                            \
}                                                                                                  \
                                                                                                   \
/* Rows form: y[j] = sum over K rows of x[k] * w[k*ldw + j], j in [0, n) (one chunk's partials); \
   the first `head` columns (fewer than a vector, NT_GV_TAIL builds) as one masked vector beside the \
   others, which then start `head` columns on. */                                                 \
static inline __attribute__((always_inline)) void nt_gemv_rows_body_##SUF(                         \
        const T* x, const T* wall, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t nall, T* yall, ptrdiff_t head) { \
    const ptrdiff_t L = (ptrdiff_t)(sizeof(V) / sizeof(T));                                        \
    const T* w = wall + head;                                                                      \
    T* y = yall + head;                                                                            \
    const ptrdiff_t n = nall - head;                                                               \
    const ptrdiff_t nv = n - n % L, n4 = n - n % (4 * L), ns = NT_GV_TAIL ? nv : n;                 \
    ptrdiff_t k = 0, j;                                                                            \
    memset(yall, 0, (size_t)nall * sizeof(T));                                                     \
    for (; k + 4 <= K; k += 4) {                                                                   \
        const T x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];                            \
        const T *w0 = w + k * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;                 \
        if (head) nt_gemv_lead_##SUF(x + k, 4, wall + k * ldw, ldw, yall, head);                   \
        for (j = 0; j < n4; j += 4 * L) {                                                          \
            V a0 = *(const V*)(y + j), a1 = *(const V*)(y + j + L);                                \
            V a2 = *(const V*)(y + j + 2 * L), a3 = *(const V*)(y + j + 3 * L);                    \
            a0 += x0 * *(const V*)(w0 + j); a1 += x0 * *(const V*)(w0 + j + L);                    \
            a2 += x0 * *(const V*)(w0 + j + 2 * L); a3 += x0 * *(const V*)(w0 + j + 3 * L);        \
            a0 += x1 * *(const V*)(w1 + j); a1 += x1 * *(const V*)(w1 + j + L);                    \
            a2 += x1 * *(const V*)(w1 + j + 2 * L); a3 += x1 * *(const V*)(w1 + j + 3 * L);        \
            a0 += x2 * *(const V*)(w2 + j); a1 += x2 * *(const V*)(w2 + j + L);                    \
            a2 += x2 * *(const V*)(w2 + j + 2 * L); a3 += x2 * *(const V*)(w2 + j + 3 * L);        \
            a0 += x3 * *(const V*)(w3 + j); a1 += x3 * *(const V*)(w3 + j + L);                    \
            a2 += x3 * *(const V*)(w3 + j + 2 * L); a3 += x3 * *(const V*)(w3 + j + 3 * L);        \
            *(V*)(y + j) = a0; *(V*)(y + j + L) = a1;                                              \
            *(V*)(y + j + 2 * L) = a2; *(V*)(y + j + 3 * L) = a3;                                  \
        }                                                                                          \
        for (; j < nv; j += L) {                                                                   \
            V a = *(const V*)(y + j);                                                              \
            a += x0 * *(const V*)(w0 + j); a += x1 * *(const V*)(w1 + j);                         \
            a += x2 * *(const V*)(w2 + j); a += x3 * *(const V*)(w3 + j);                          \
            *(V*)(y + j) = a;                                                                      \
        }                                                                                          \
        for (; j < ns; j++) {                                                                      \
            T a = y[j];                                                                            \
            a += x0 * w0[j]; a += x1 * w1[j]; a += x2 * w2[j]; a += x3 * w3[j];                    \
            y[j] = a;                                                                              \
        }                                                                                          \
    }                                                                                              \
    for (; k < K; k++) {                                                                           \
        const T x0 = x[k];                                                                         \
        const T* w0 = w + k * ldw;                                                                 \
        if (head) nt_gemv_lead_##SUF(x + k, 1, wall + k * ldw, ldw, yall, head);                   \
        for (j = 0; j < nv; j += L) *(V*)(y + j) += x0 * *(const V*)(w0 + j);                      \
        for (; j < ns; j++) y[j] += x0 * w0[j];                                                    \
    }                                                                                              \
    if (ns < n) nt_gemv_tail_##SUF(x, w + ns, ldw, K, n - ns, y + ns);                             \
}                                                                                                  \
                                                                                                   \
static void nt_gemv_rows_##SUF(const T* x, const T* w, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t n,    \
                               T* y) {                                                            \
    nt_gemv_rows_body_##SUF(x, w, ldw, K, n, y, 0);                                                \
}                                                                                                  \
                                                                                                   \
/* nt_gemv_rows with the first `head` columns (0 < head < min(n, L)) beside the others: where W's rows \
   start `head` columns before a 64-byte boundary, every other load of W (and of y, laid out alike) \
   is aligned. Without NT_GV_TAIL, the two column ranges one after the other. The same bits. */     \
static void nt_gemv_rows_lead_##SUF(const T* x, const T* w, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t head, \
                                    ptrdiff_t n, T* y) {                                          \
    if (!NT_GV_TAIL) {                                                                             \
        nt_gemv_rows_##SUF(x, w, ldw, K, head, y);                                                 \
        nt_gemv_rows_##SUF(x, w + head, ldw, K, n - head, y + head);                               \
        return;                                                                                    \
    }                                                                                              \
    nt_gemv_rows_body_##SUF(x, w, ldw, K, n, y, head);                                             \
}                                                                                                  \
                                                                                                   \
/* Rows form for M vectors (x rows ldx apart, partials ldy apart), one vector of outputs at a     \
   time: each weight vector is loaded once and feeds the M sums, kept in registers over the rows. \
   Each sum is the same k-order sum from +0 as nt_gemv_rows gives for that vector alone. */      \
static inline __attribute__((always_inline)) void nt_gemv_rows_m_body_##SUF(                      \
        const T* x, ptrdiff_t ldx, const ptrdiff_t M, const T* w, ptrdiff_t ldw, ptrdiff_t K,      \
        ptrdiff_t n, T* y, ptrdiff_t ldy) {                                                        \
    const ptrdiff_t L = (ptrdiff_t)(sizeof(V) / sizeof(T));                                        \
    const ptrdiff_t nv = n - n % L;                                                                \
    ptrdiff_t j, k, m;                                                                             \
    for (j = 0; j < nv; j += L) {                                                                  \
        V a[NT_GEMV_MAX_M];                                                                        \
        for (m = 0; m < M; m++) a[m] = (V){0};                                                     \
        for (k = 0; k < K; k++) {                                                                  \
            const V wv = *(const V*)(w + k * ldw + j);                                             \
            for (m = 0; m < M; m++) a[m] += x[m * ldx + k] * wv;                                   \
        }                                                                                          \
        for (m = 0; m < M; m++) *(V*)(y + m * ldy + j) = a[m];                                     \
    }                                                                                              \
    if (nv < n)   /* the last columns: nt_gemv_rows's own tail loop, so their bits match it too */  \
        for (m = 0; m < M; m++) nt_gemv_rows_##SUF(x + m * ldx, w + nv, ldw, K, n - nv, y + m * ldy + nv); \
}                                                                                                  \
                                                                                                   \
/* nt_gemv_rows_m_body with M a constant (2 to NT_GEMV_MAX_M), so its sums stay in registers. */  \
static void nt_gemv_rows_m_##SUF(const T* x, ptrdiff_t ldx, ptrdiff_t M, const T* w, ptrdiff_t ldw, \
                                 ptrdiff_t K, ptrdiff_t n, T* y, ptrdiff_t ldy) {                  \
    switch (M) {                                                                                   \
    case 2: nt_gemv_rows_m_body_##SUF(x, ldx, 2, w, ldw, K, n, y, ldy); break;                     \
    case 3: nt_gemv_rows_m_body_##SUF(x, ldx, 3, w, ldw, K, n, y, ldy); break;                     \
    case 4: nt_gemv_rows_m_body_##SUF(x, ldx, 4, w, ldw, K, n, y, ldy); break;                     \
    case 5: nt_gemv_rows_m_body_##SUF(x, ldx, 5, w, ldw, K, n, y, ldy); break;                     \
    case 6: nt_gemv_rows_m_body_##SUF(x, ldx, 6, w, ldw, K, n, y, ldy); break;                     \
    case 7: nt_gemv_rows_m_body_##SUF(x, ldx, 7, w, ldw, K, n, y, ldy); break;                     \
    default: nt_gemv_rows_m_body_##SUF(x, ldx, NT_GEMV_MAX_M, w, ldw, K, n, y, ldy); break;       \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
/* y = parts[0] + parts[1] + ... (nparts rows of n, `stride` apart, in order; zero when there are  \
   none), then the epilogue. parts may be y itself when nparts is 1. */                            \
static void nt_gemv_finish_##SUF(T* y, const T* parts, ptrdiff_t nparts, ptrdiff_t stride,         \
                                 ptrdiff_t n, const T* b, int act) {                              \
    ptrdiff_t p, j;                                                                                \
    if (nparts == 0) memset(y, 0, (size_t)n * sizeof(T));                                          \
    else if (parts != y) memcpy(y, parts, (size_t)n * sizeof(T));                                  \
    for (p = 1; p < nparts; p++)                                                                   \
        for (j = 0; j < n; j++) y[j] += parts[p * stride + j];                                     \
    nt_gemv_epilogue_##SUF(y, b, n, act);                                                          \
}                                                                                                  \
                                                                                                   \
/* One step of nt_gemv_finish's sum, for a thread that folds its own chunks' partials in chunk     \
   order: y = part (the first chunk) or y += part. The same adds, so the same bits. */             \
static void nt_gemv_fold_##SUF(T* y, const T* part, ptrdiff_t n, int first) {                      \
    ptrdiff_t j;                                                                                   \
    if (first) memcpy(y, part, (size_t)n * sizeof(T));                                             \
    else for (j = 0; j < n; j++) y[j] += part[j];                                                  \
}                                                                                                  \
                                                                                                   \
/* Dot form: y[j] = sum_k w[j*ldw + k] * x[k] for j in [0, n), four dot products at a time. */     \
static void nt_gemv_dots_##SUF(const T* x, const T* w, ptrdiff_t ldw, ptrdiff_t K, ptrdiff_t n,    \
                               const T* b, int act, T* y) {                                       \
    const ptrdiff_t L = (ptrdiff_t)(sizeof(V) / sizeof(T));                                        \
    const ptrdiff_t kv = K - K % L;                                                                \
    ptrdiff_t j = 0, k, l;                                                                         \
    for (; j + 4 <= n; j += 4) {                                                                   \
        const T *w0 = w + j * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw;                 \
        V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                                  \
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                          \
        for (k = 0; k < kv; k += L) {                                                              \
            const V xv = *(const V*)(x + k);                                                       \
            a0 += xv * *(const V*)(w0 + k); a1 += xv * *(const V*)(w1 + k);                        \
            a2 += xv * *(const V*)(w2 + k); a3 += xv * *(const V*)(w3 + k);                        \
        }                                                                                          \
        for (l = 0; l < L; l++) { s0 += a0[l]; s1 += a1[l]; s2 += a2[l]; s3 += a3[l]; }            \
        for (; k < K; k++) {                                                                       \
            s0 += x[k] * w0[k]; s1 += x[k] * w1[k]; s2 += x[k] * w2[k]; s3 += x[k] * w3[k];        \
        }                                                                                          \
        y[j] = s0; y[j + 1] = s1; y[j + 2] = s2; y[j + 3] = s3;                                    \
    }                                                                                              \
    for (; j < n; j++) {                                                                           \
        const T* w0 = w + j * ldw;                                                                 \
        V a0 = {0};                                                                                \
        T s0 = 0;                                                                                  \
        for (k = 0; k < kv; k += L) a0 += *(const V*)(x + k) * *(const V*)(w0 + k);                \
        for (l = 0; l < L; l++) s0 += a0[l];                                                       \
        for (; k < K; k++) s0 += x[k] * w0[k];                                                     \
        y[j] = s0;                                                                                 \
    }                                                                                              \
    nt_gemv_epilogue_##SUF(y, b, n, act);                                                          \
}

NT_GEMV_DEFINE(float, nt_gv_f32, f32)
NT_GEMV_DEFINE(double, nt_gv_f64, f64)

#endif
