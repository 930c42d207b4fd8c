/* Packed-weight matrix products for numtrace_cpu (see packed.pxi), compiled once per ISA build.
 *
 * C = epilogue(A @ B) with A (M, K) rows `lda` apart (each row contiguous) and B (K, N) packed into
 * column panels of NT_GEMM_NR columns: panel p holds rows k = 0..K-1 of columns p*NR .. p*NR+NR-1,
 * NR values per row, contiguous, the columns past N zero. A constant weight is packed once; any other
 * B (a module parameter, a run-time value, each product of a stack of them) is packed block by block
 * inside the product on every call (nt_gemm_unit), so a weight changed between calls is never read
 * from a stale pack; when its rows are contiguous (`direct`, chosen by packed.pxi) its full panels are
 * read where they lie instead, rows bsk apart: the same values in the same order, so the same bits.
 * Either way such a B is read a row of its columns at a time, rows apart, which the hardware
 * prefetchers do not follow across pages; the unit prefetches what it reads next (nt_gemm_unit).
 *
 * The micro-kernel keeps an MR x NR tile of C in vector registers and adds a[i, k] * b[k, :] for k
 * in order, in blocks of NT_GEMM_KC rows of B (the block's panel stays in L1 while every row block
 * of A passes over it); between blocks the tile goes through C. Each output is therefore one
 * sequential sum over k starting from +0 (a sum of -0.0 products is +0.0, as NumPy's BLAS gives;
 * the AVX2/AVX-512 builds' multiply-adds round once, so a product that underflows to -0 inside one
 * can leave -0.0 where the baseline build gives +0.0: NumPy's BLAS does either, by build),
 * whatever the blocking or the thread that runs it: 1 and N threads give bit-identical results.
 * NumPy's BLAS orders its sums otherwise, so results agree to float rounding, not bit for bit.
 * After the last block the epilogue ops run on the tile's registers in order before it is stored:
 * bias add (b[j]), residual add (r[i, j]), max(h, 0) or max(0, h) with np.maximum's NaN and
 * signed-zero rule (see nt_gemm_epi).
 */
#ifndef NT_GEMM_H
#define NT_GEMM_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "nt_gemv.h"   /* the build's vector types (nt_gv_f32/f64) */

#if defined(__AVX512F__)
#define NT_GEMM_MR 8     /* 16 accumulators of 32 registers */
#elif defined(__AVX2__)
#define NT_GEMM_MR 6     /* 12 accumulators of 16 registers */
#else
#define NT_GEMM_MR 4     /* 32-byte vectors are two SSE registers each */
#endif
#define NT_GEMM_KC 256
/* A panel of at most one vector of columns (attention's p @ v at 16 columns a head on AVX-512, whose
   panels are 32 wide) runs on half tiles: MR rows of one vector each, where the full tile would spend
   half its multiply-adds on the panel's zero columns (1.7x on p @ v's kernel on Zen 5). Twice the
   rows a tile was slower there: sixteen rows' offsets do not fit the general registers. */
#define NT_GEMM_MAX_OPS 4
#ifndef NT_GEMM_PF
#define NT_GEMM_PF 2     /* __builtin_prefetch locality of B's next stripe */
#endif
#define NT_GEMM_PACK_AHEAD 8   /* a pack of B's rows prefetches the row this many ahead */
/* At most this many cache lines of B's next stripe prefetched before one tile: with fewer rows of A
   than that needs (under about 32 at a block of 256 rows of k), the prefetches cost more than a
   cold stripe does (measured on Zen 5 with B in L2 and L3: up to 20% slower at 8 rows). */
#define NT_GEMM_PF_LINES 80

enum { NT_EPI_BIAS = 1, NT_EPI_RESIDUAL = 2, NT_EPI_RELU = 3, NT_EPI_RELU_ZERO_FIRST = 4 };

typedef struct {
    const char *a, *b, *packed, *bias, *resid;   /* packed: the whole pack, or NULL (pack per block) */
    char *c;
    ptrdiff_t lda, bsk, bsj, ldc, ldr;           /* in elements */
    ptrdiff_t M, N, K;
    ptrdiff_t nbatch, sa, sb, sc, sr;            /* products stacked `nbatch` deep, these steps apart */
    ptrdiff_t row_chunk, panel_chunk, n_row_chunks, n_panel_chunks;
    /* a unit: row_chunk rows x panel_chunk panels of one product of the stack */
    int ops[NT_GEMM_MAX_OPS], nops;
    int failed;                                  /* a unit could not get its packing scratch */
    int direct;                                  /* B unpacked, rows contiguous (bsj == 1): its full
                                                    panels are read where they lie, rows bsk apart */
    /* B gathered (koff != NULL): B[k, j] = b[koff[k] + joff[j]] (elements), the windows of an im2col
       read where they lie instead of from a stacked copy, joff given as the runs of each panel (see
       nt_gemm_pack_gather); bsk and bsj are unused */
    const ptrdiff_t *koff, *runs, *prun;
    const int32_t *joff;                         /* joff itself, when every offset fits in 32 bits */
    /* a stack whose leading dims are not one run of equal steps (attention's heads of (B, S, H, D)
       viewed as (B, H, S, D)): product bt's offsets of A, B, C and the residual (elements) at
       boff[4 * bt] .. boff[4 * bt + 3], in place of bt * sa, sb, sc, sr; NULL otherwise */
    const ptrdiff_t *boff;
} nt_gemm_args;

/* Product bt's offset of operand j (0: A, 1: B, 2: C, 3: the residual), `step` apart without a table. */
#define NT_GEMM_BOFF(g, bt, j, step) ((g)->boff ? (g)->boff[4 * (bt) + (j)] : (bt) * (step))

/* The calling thread's packing scratch, at least `bytes` long and 64-byte aligned, or NULL when no
 * memory: one buffer per thread, kept between calls (a unit runs on one thread from start to end, so
 * concurrent products never share one) and freed when the thread exits. */
static pthread_key_t nt_gemm_scratch_key;
static pthread_once_t nt_gemm_scratch_once = PTHREAD_ONCE_INIT;

static void nt_gemm_scratch_key_make(void) { pthread_key_create(&nt_gemm_scratch_key, free); }

static void *nt_gemm_scratch(size_t bytes) {
    char *p;
    pthread_once(&nt_gemm_scratch_once, nt_gemm_scratch_key_make);
    p = (char *)pthread_getspecific(nt_gemm_scratch_key);
    if (p && *(size_t *)p >= bytes) return p + 64;
    free(p);
    bytes = (bytes + 63) / 64 * 64;
    p = (char *)aligned_alloc(64, bytes + 64);   /* the first 64 bytes hold the size */
    pthread_setspecific(nt_gemm_scratch_key, p);
    if (!p) return NULL;
    *(size_t *)p = bytes;
    return p + 64;
}

/* Into the cache ahead of its use: the `bytes` (> 0) from `row` on, every line they touch. */
static inline void nt_gemm_prefetch_row(const void* row, ptrdiff_t bytes) {
    const char* s = (const char*)((uintptr_t)row & ~(uintptr_t)63);
    const char* e = (const char*)row + bytes;
    for (; s < e; s += 64) __builtin_prefetch(s, 0, NT_GEMM_PF);
}

/* Packing a transposed B (its rows k adjacent, its columns sj apart: the keys of q @ k.T): 16 rows of
 * k at a time, each column's 16 values read with one vector load and a 16 x 16 block transposed in
 * registers, where the element loop reads every value from another cache line. The same values land
 * in the same places, so the pack (and every product) is bit for bit the element loop's. Returns the
 * first row of k it left to the element loop (k1 when it packed them all). AVX-512 float32 only,
 * where a panel is 32 columns: two such blocks. */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline void nt_gemm_transpose16_f32(__m512 r[16]) {
    __m512 t[16];
    int i;
    for (i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
    }
}

static ptrdiff_t nt_gemm_pack_t_f32(const float* s, ptrdiff_t sj, ptrdiff_t nc, ptrdiff_t k0, ptrdiff_t k1,
                                    float* d) {
    /* s: column 0 of the panel at row k = 0; d: the panel's row k0 (32 values a row) */
    __m512 r[16];
    ptrdiff_t k;
    int h, c;
    for (k = k0; k + 16 <= k1; k += 16) {
        for (h = 0; h < 2; h++) {
            for (c = 0; c < 16; c++)
                r[c] = h * 16 + c < nc ? _mm512_loadu_ps(s + (h * 16 + c) * sj + k) : _mm512_setzero_ps();
            nt_gemm_transpose16_f32(r);
            for (c = 0; c < 16; c++) _mm512_storeu_ps(d + (k - k0 + c) * 32 + h * 16, r[c]);
        }
    }
    return k;
}
#define NT_GEMM_PACK_T_f32(s, sj, nc, k0, k1, d) \
    (NT_GEMM_NR_f32 == 32 ? nt_gemm_pack_t_f32(s, sj, nc, k0, k1, d) : (k0))

/* Rows [k0, k1) of a full 32-column panel of a gathered B (see nt_gemm_pack_gather) with two 16-lane
 * gathers a row: the same values in the same places as the element loop. */
static void nt_gemm_gather32_f32(const float* b, const ptrdiff_t* koff, const int32_t* jo, ptrdiff_t k0,
                                 ptrdiff_t k1, float* d) {
    const __m512i i0 = _mm512_loadu_si512((const void*)jo), i1 = _mm512_loadu_si512((const void*)(jo + 16));
    ptrdiff_t k;
    for (k = k0; k < k1; k++, d += 32) {
        const float* s = b + koff[k];
        _mm512_storeu_ps(d, _mm512_i32gather_ps(i0, s, 4));
        _mm512_storeu_ps(d + 16, _mm512_i32gather_ps(i1, s, 4));
    }
}
/* One run of a gathered row: len values `st` apart (st 1 or 2) from src to `to`, 16 at a time with
 * masked loads (masked-off lanes are never read) and, for st 2, the even lanes picked from two vectors.
 * Returns 0 (nothing copied) for another step. */
static inline int nt_gemm_run_f32(float* to, const float* src, ptrdiff_t len, ptrdiff_t st) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    if (st != 1 && st != 2) return 0;
    while (len > 0) {
        const int n = len < 16 ? (int)len : 16;
        const __mmask16 m = (__mmask16)((1u << n) - 1);
        if (st == 1) {
            _mm512_mask_storeu_ps(to, m, _mm512_maskz_loadu_ps(m, src));
        } else {
            const int span = 2 * n - 1;   /* values read: src[0 .. span - 1] */
            const __mmask16 lo = (__mmask16)(span >= 16 ? 0xFFFFu : (1u << span) - 1);
            const __mmask16 hi = (__mmask16)(span > 16 ? (1u << (span - 16)) - 1 : 0);
            const __m512 a = _mm512_maskz_loadu_ps(lo, src), b = _mm512_maskz_loadu_ps(hi, src + 16);
            _mm512_mask_storeu_ps(to, m, _mm512_permutex2var_ps(a, even, b));
        }
        to += n; src += n * st; len -= n;
    }
    return 1;
}
#define NT_GEMM_RUN_f32(to, src, len, st) (NT_GEMM_NR_f32 == 32 && nt_gemm_run_f32(to, src, len, st))
#define NT_GEMM_GATHER_f32(b, koff, jo, nc, k0, k1, d) \
    (NT_GEMM_NR_f32 == 32 && (jo) && (nc) == 32 ? (nt_gemm_gather32_f32(b, koff, jo, k0, k1, d), 1) : 0)
#else
#define NT_GEMM_RUN_f32(to, src, len, st) 0
#define NT_GEMM_GATHER_f32(b, koff, jo, nc, k0, k1, d) 0
#define NT_GEMM_PACK_T_f32(s, sj, nc, k0, k1, d) (k0)
#endif
#define NT_GEMM_PACK_T_f64(s, sj, nc, k0, k1, d) (k0)
#define NT_GEMM_GATHER_f64(b, koff, jo, nc, k0, k1, d) 0
#define NT_GEMM_RUN_f64(to, src, len, st) 0

/* tile(mr, ...) for the row count mr of a row block: the full block, else one register-tile
   specialization per row count of the last block (mr is a compile-time constant in each). */
#define NT_GEMM_ROWS_DISPATCH(tile)                                                                \
    if (mr == NT_GEMM_MR) { tile(NT_GEMM_MR, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); return; } \
    switch (mr) {                                                                                  \
    case 1: tile(1, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    case 2: tile(2, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    case 3: tile(3, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    case 4: tile(4, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    case 5: tile(5, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    case 6: tile(6, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                            \
    default: tile(7, a, lda, bp, ldb, kc, c, ldc, nc, more, epi); break;                           \
    }

/* The epilogue ops as a tile of the last block of k applies them to its registers before it stores
   them, in order: a bias or residual add is the same rounding of the same two values as an add to
   the stored sum, and max(h, 0) / max(0, h) pick np.maximum's operand from the bits (no compare that
   could raise a flag, NaN propagating, the second operand winning ties), so the same bits as ops on
   the stored tile, without storing it and reading it back (5% of a 128 x 256 x 1024 product with a
   bias, where the tile's reload waited for its own stores). */
typedef struct {
    int op[NT_GEMM_MAX_OPS];          /* NT_EPI_* */
    const void* p[NT_GEMM_MAX_OPS];   /* an add's values at the product's row 0, column 0 */
    ptrdiff_t ld[NT_GEMM_MAX_OPS];    /* elements between its rows (0: a bias, one row for all) */
    int n;
    ptrdiff_t row, col;               /* the tile's first row and column in the product */
} nt_gemm_epi;

typedef int32_t nt_gemm_vi_f32 __attribute__((vector_size(NT_GV_BYTES)));
typedef int64_t nt_gemm_vi_f64 __attribute__((vector_size(NT_GV_BYTES)));
#define NT_GEMM_MAG_f32 0x7fffffff
#define NT_GEMM_INF_f32 0x7f800000
#define NT_GEMM_MAG_f64 0x7fffffffffffffffLL
#define NT_GEMM_INF_f64 0x7ff0000000000000LL

#define NT_GEMM_DEFINE(T, V, SUF)                                                                   \
enum { NT_GEMM_L_##SUF = (int)(sizeof(V) / sizeof(T)), NT_GEMM_NR_##SUF = 2 * NT_GEMM_L_##SUF };     \
                                                                                                   \
/* Panels [p0, p1) of rows [k0, k1) of B (b[k*sk + j*sj]) into dst: panel p at                     \
   dst + (p - p0) * pstride, row k at + (k - k0) * NR. */                                          \
static void nt_gemm_pack_##SUF(const T* b, ptrdiff_t sk, ptrdiff_t sj, ptrdiff_t N, ptrdiff_t p0,   \
                               ptrdiff_t p1, ptrdiff_t k0, ptrdiff_t k1, T* dst, ptrdiff_t pstride) { \
    const ptrdiff_t NR = NT_GEMM_NR_##SUF;                                                         \
    ptrdiff_t p, k, c;                                                                             \
    if (sj == 1 && sk != 1) {   /* rows contiguous: row by row, each row's columns of every panel  \
                                   read in one run, the row NT_GEMM_PACK_AHEAD on prefetched */    \
        const ptrdiff_t ja = p0 * NR, jb = p1 * NR < N ? p1 * NR : N;                             \
        for (k = k0; k < k1; k++) {                                                                \
            const T* s = b + k * sk;                                                               \
            if (k + NT_GEMM_PACK_AHEAD < k1)                                                       \
                nt_gemm_prefetch_row(s + NT_GEMM_PACK_AHEAD * sk + ja, (jb - ja) * (ptrdiff_t)sizeof(T)); \
            for (p = p0; p < p1; p++) {                                                            \
                const ptrdiff_t j0 = p * NR, nc = N - j0 < NR ? N - j0 : NR;                       \
                T* d = dst + (p - p0) * pstride + (k - k0) * NR;                                   \
                for (c = 0; c < nc; c++) d[c] = s[j0 + c];                                         \
                for (; c < NR; c++) d[c] = 0;                                                      \
            }                                                                                      \
        }                                                                                          \
        return;                                                                                    \
    }                                                                                              \
    for (p = p0; p < p1; p++) {                                                                    \
        const ptrdiff_t j0 = p * NR, nc = N - j0 < NR ? N - j0 : NR;                               \
        T* d = dst + (p - p0) * pstride;                                                           \
        k = k0;                                                                                    \
        if (sk == 1 && sj != 1) {   /* a transposed B: whole blocks of rows through registers */  \
            k = NT_GEMM_PACK_T_##SUF(b + j0 * sj, sj, nc, k0, k1, d);                              \
            d += (k - k0) * NR;                                                                    \
        }                                                                                          \
        for (; k < k1; k++, d += NR) {                                                             \
            const T* s = b + k * sk + j0 * sj;                                                     \
            if (sj == 1) for (c = 0; c < nc; c++) d[c] = s[c];                                     \
            else for (c = 0; c < nc; c++) d[c] = s[c * sj];                                        \
            for (; c < NR; c++) d[c] = 0;                                                          \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
/* As nt_gemm_pack_##SUF for a gathered B: row k of panel p is read from b + koff[k] as the runs   \
   runs[prun[p]] .. runs[prun[p + 1] - 1], each (first column in the panel, length, offset, step), \
   so that a window's stretch is copied as one (AVX-512 float32: 16 at a time, also with step 2); \
   a panel of many short runs is gathered by its offsets jo instead. The same values land in the  \
   same places either way. */                                                                      \
static void nt_gemm_pack_gather_##SUF(const T* b, const nt_gemm_args* g, ptrdiff_t p0, ptrdiff_t p1, \
                                      ptrdiff_t k0, ptrdiff_t k1, T* dst, ptrdiff_t pstride) {     \
    const ptrdiff_t NR = NT_GEMM_NR_##SUF, N = g->N;                                               \
    const ptrdiff_t *koff = g->koff, *runs = g->runs, *prun = g->prun;                             \
    ptrdiff_t p, k, c, r;                                                                          \
    for (p = p0; p < p1; p++) {                                                                    \
        const ptrdiff_t nc = N - p * NR < NR ? N - p * NR : NR;                                    \
        const int32_t* jo = g->joff ? g->joff + p * NR : NULL;                                     \
        T* d = dst + (p - p0) * pstride;                                                           \
        if (jo && 8 * (prun[p + 1] - prun[p]) > NR) {                                              \
            if (NT_GEMM_GATHER_##SUF(b, koff, jo, nc, k0, k1, d)) continue;                        \
            for (k = k0; k < k1; k++, d += NR) {                                                   \
                const T* s = b + koff[k];                                                          \
                for (c = 0; c < nc; c++) d[c] = s[jo[c]];                                          \
                for (; c < NR; c++) d[c] = 0;                                                      \
            }                                                                                      \
            continue;                                                                              \
        }                                                                                          \
        for (k = k0; k < k1; k++, d += NR) {                                                       \
            const T* s = b + koff[k];                                                              \
            for (r = prun[p]; r < prun[p + 1]; r++) {                                              \
                const ptrdiff_t* q = runs + 4 * r;                                                 \
                const T* src = s + q[2];                                                           \
                T* to = d + q[0];                                                                  \
                const ptrdiff_t len = q[1], st = q[3];                                             \
                if (NT_GEMM_RUN_##SUF(to, src, len, st)) continue;                                 \
                if (st == 1) for (c = 0; c < len; c++) to[c] = src[c];                             \
                else for (c = 0; c < len; c++) to[c] = src[c * st];                                \
            }                                                                                      \
            for (c = nc; c < NR; c++) d[c] = 0;                                                    \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
/* The whole pack of B: ceil(N / NR) panels of K rows. */                                          \
static void nt_gemm_pack_all_##SUF(const T* b, ptrdiff_t sk, ptrdiff_t sj, ptrdiff_t K, ptrdiff_t N, \
                                   T* dst) {                                                       \
    const ptrdiff_t NR = NT_GEMM_NR_##SUF;                                                         \
    nt_gemm_pack_##SUF(b, sk, sj, N, 0, (N + NR - 1) / NR, 0, K, dst, K * NR);                     \
}                                                                                                  \
                                                                                                   \
/* A vector of an add's values from p: the first nc (all when nc >= L), +0 past them (never read: \
   the lanes of a tile's columns past N, whose sums are +0 or NaN, are not stored). */             \
static inline __attribute__((always_inline)) V nt_gemm_add_load_##SUF(const T* p, ptrdiff_t nc) { \
    const ptrdiff_t L = NT_GEMM_L_##SUF;                                                           \
    T tmp[NT_GEMM_L_##SUF] __attribute__((aligned(64)));                                           \
    ptrdiff_t j;                                                                                   \
    if (nc >= L) return *(const V*)p;                                                              \
    for (j = 0; j < L; j++) tmp[j] = j < nc ? p[j] : 0;                                            \
    return *(const V*)tmp;                                                                         \
}                                                                                                  \
                                                                                                   \
/* np.maximum(h, 0) (zero_first: np.maximum(0, h)) of each lane, from its bits: max(h, 0) keeps h   \
   where h > 0 or h is NaN, else gives +0; max(0, h) gives +0 where h < 0 (not -0, not NaN), else h. */ \
static inline __attribute__((always_inline)) V nt_gemm_relu_##SUF(V h, int zero_first) {           \
    typedef nt_gemm_vi_##SUF VI;                                                                   \
    const VI bits = (VI)h, mag = bits & NT_GEMM_MAG_##SUF, nan = mag > NT_GEMM_INF_##SUF;          \
    if (!zero_first) return (V)(bits & ((bits > 0) | nan));                                        \
    return (V)(bits & ~((bits < 0) & (mag != 0) & ~nan));                                          \
}                                                                                                  \
                                                                                                   \
/* The epilogue's ops, in order, on a tile's registers: rows [0, mr), W vectors a row (2: a tile,   \
   1: a half tile) of columns [0, nc); a bias's vectors are read once for all rows. */             \
static inline __attribute__((always_inline)) void nt_gemm_epi_on_##SUF(                            \
        const int mr, const int W, V* acc, const nt_gemm_epi* epi, ptrdiff_t nc) {                 \
    const ptrdiff_t L = NT_GEMM_L_##SUF;                                                           \
    int o, r, w;                                                                                   \
    for (o = 0; o < epi->n; o++) {                                                                 \
        const int op = epi->op[o];                                                                 \
        const T* p = (const T*)epi->p[o] + epi->row * epi->ld[o] + epi->col;                       \
        if (op == NT_EPI_RELU || op == NT_EPI_RELU_ZERO_FIRST) {                                   \
            _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                            \
                if (r >= mr) break;                                                                \
                for (w = 0; w < W; w++)                                                            \
                    acc[r * W + w] = nt_gemm_relu_##SUF(acc[r * W + w], op == NT_EPI_RELU_ZERO_FIRST); \
            }                                                                                      \
        } else if (epi->ld[o] == 0) {   /* a bias: one row for all */                              \
            V bv[2];                                                                               \
            for (w = 0; w < W; w++) bv[w] = nt_gemm_add_load_##SUF(p + w * L, nc - w * L);         \
            _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                            \
                if (r >= mr) break;                                                                \
                for (w = 0; w < W; w++) acc[r * W + w] += bv[w];                                   \
            }                                                                                      \
        } else {                                                                                   \
            _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                            \
                if (r >= mr) break;                                                                \
                for (w = 0; w < W; w++)                                                            \
                    acc[r * W + w] += nt_gemm_add_load_##SUF(p + r * epi->ld[o] + w * L, nc - w * L); \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
/* C[0:mr, 0:nc] (+)= A[0:mr, 0:kc] @ panel; `more`: C already holds the sum of earlier blocks. */ \
static inline __attribute__((always_inline)) void nt_gemm_tile_##SUF(                              \
        const int mr, const T* a, ptrdiff_t lda, const T* bp, ptrdiff_t ldb, ptrdiff_t kc, T* c,    \
        ptrdiff_t ldc, ptrdiff_t nc, int more, const nt_gemm_epi* epi) {                          \
    const ptrdiff_t L = NT_GEMM_L_##SUF, NR = NT_GEMM_NR_##SUF;                                    \
    V acc[NT_GEMM_MR][2];                                                                          \
    T tmp[NT_GEMM_NR_##SUF] __attribute__((aligned(64)));                                          \
    ptrdiff_t k, j;                                                                                \
    int r;                                                                                         \
    _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                    \
        if (r >= mr) break;                                                                        \
        if (!more) { acc[r][0] = (V){0}; acc[r][1] = (V){0}; }                                     \
        else if (nc == NR) {                                                                       \
            acc[r][0] = *(const V*)(c + r * ldc); acc[r][1] = *(const V*)(c + r * ldc + L);         \
        } else {                                                                                   \
            for (j = 0; j < NR; j++) tmp[j] = j < nc ? c[r * ldc + j] : 0;                         \
            acc[r][0] = *(const V*)tmp; acc[r][1] = *(const V*)(tmp + L);                          \
        }                                                                                          \
    }                                                                                              \
    for (k = 0; k < kc; k++) {                                                                     \
        const V b0 = *(const V*)(bp + k * ldb), b1 = *(const V*)(bp + k * ldb + L);                \
        _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                \
            if (r >= mr) break;                                                                    \
            const T ar = a[r * lda + k];                                                           \
            acc[r][0] += ar * b0; acc[r][1] += ar * b1;                                            \
        }                                                                                          \
    }                                                                                              \
    if (epi) nt_gemm_epi_on_##SUF(mr, 2, &acc[0][0], epi, nc);                                     \
    _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                    \
        if (r >= mr) break;                                                                        \
        if (nc == NR) { *(V*)(c + r * ldc) = acc[r][0]; *(V*)(c + r * ldc + L) = acc[r][1]; }      \
        else {                                                                                     \
            *(V*)tmp = acc[r][0]; *(V*)(tmp + L) = acc[r][1];                                      \
            for (j = 0; j < nc; j++) c[r * ldc + j] = tmp[j];                                      \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
static void nt_gemm_tile_any_##SUF(int mr, const T* a, ptrdiff_t lda, const T* bp, ptrdiff_t ldb,   \
                                   ptrdiff_t kc, T* c, ptrdiff_t ldc, ptrdiff_t nc, int more,      \
                                   const nt_gemm_epi* epi) {                                      \
    NT_GEMM_ROWS_DISPATCH(nt_gemm_tile_##SUF)                                                      \
}                                                                                                  \
                                                                                                   \
/* As nt_gemm_tile for a panel of nc <= L columns, one vector a row: each output is the same sum   \
   over k in the same order (the same multiply-adds), so the same bits. */                         \
static inline __attribute__((always_inline)) void nt_gemm_htile_##SUF(                             \
        const int mr, const T* a, ptrdiff_t lda, const T* bp, ptrdiff_t ldb, ptrdiff_t kc, T* c,   \
        ptrdiff_t ldc, ptrdiff_t nc, int more, const nt_gemm_epi* epi) {                          \
    const ptrdiff_t L = NT_GEMM_L_##SUF;                                                           \
    V acc[NT_GEMM_MR];                                                                             \
    T tmp[NT_GEMM_L_##SUF] __attribute__((aligned(64)));                                           \
    ptrdiff_t k, j;                                                                                \
    int r;                                                                                         \
    _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                    \
        if (r >= mr) break;                                                                        \
        if (!more) acc[r] = (V){0};                                                                \
        else if (nc == L) acc[r] = *(const V*)(c + r * ldc);                                       \
        else {                                                                                     \
            for (j = 0; j < L; j++) tmp[j] = j < nc ? c[r * ldc + j] : 0;                          \
            acc[r] = *(const V*)tmp;                                                               \
        }                                                                                          \
    }                                                                                              \
    for (k = 0; k < kc; k++) {                                                                     \
        const V b0 = *(const V*)(bp + k * ldb);                                                    \
        _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                \
            if (r >= mr) break;                                                                    \
            acc[r] += a[r * lda + k] * b0;                                                         \
        }                                                                                          \
    }                                                                                              \
    if (epi) nt_gemm_epi_on_##SUF(mr, 1, acc, epi, nc);                                            \
    _Pragma("GCC unroll 16") for (r = 0; r < NT_GEMM_MR; r++) {                                    \
        if (r >= mr) break;                                                                        \
        if (nc == L) *(V*)(c + r * ldc) = acc[r];                                                  \
        else {                                                                                     \
            *(V*)tmp = acc[r];                                                                     \
            for (j = 0; j < nc; j++) c[r * ldc + j] = tmp[j];                                      \
        }                                                                                          \
    }                                                                                              \
}                                                                                                  \
                                                                                                   \
static void nt_gemm_htile_any_##SUF(int mr, const T* a, ptrdiff_t lda, const T* bp, ptrdiff_t ldb, \
                                    ptrdiff_t kc, T* c, ptrdiff_t ldc, ptrdiff_t nc, int more,     \
                                    const nt_gemm_epi* epi) {                                     \
    NT_GEMM_ROWS_DISPATCH(nt_gemm_htile_##SUF)                                                     \
}                                                                                                  \
                                                                                                   \
/* Stripe s of unit u's reads of an unpacked B (rows sk apart, columns contiguous), in the order \
   the unit reads them: a direct B one full panel of a block of k after the other, any other B one \
   block of k of all the unit's columns (what its pack reads). Sets where B's first row of it     \
   starts, its rows [r0, r1), its bytes a row and how many tiles read it; 0 when there is no such \
   stripe (a constant pack, a gathered or column-strided B, past the last unit). */               \
static int nt_gemm_stripe_##SUF(const nt_gemm_args* g, ptrdiff_t u, ptrdiff_t s, const char** src,  \
                                ptrdiff_t* r0, ptrdiff_t* r1, ptrdiff_t* bytes, ptrdiff_t* tiles) { \
    const ptrdiff_t NR = NT_GEMM_NR_##SUF, npanels = (g->N + NR - 1) / NR;                         \
    const ptrdiff_t per_batch = g->n_row_chunks * g->n_panel_chunks, bt = u / per_batch;           \
    const ptrdiff_t ub = u % per_batch, i0 = (ub % g->n_row_chunks) * g->row_chunk;                \
    const ptrdiff_t rows = (g->M - i0 < g->row_chunk ? g->M - i0 : g->row_chunk);                  \
    const ptrdiff_t p0 = (ub / g->n_row_chunks) * g->panel_chunk;                                  \
    const ptrdiff_t p1 = p0 + g->panel_chunk < npanels ? p0 + g->panel_chunk : npanels;            \
    const ptrdiff_t nkb = (g->K + NT_GEMM_KC - 1) / NT_GEMM_KC, per = g->direct ? p1 - p0 : 1;      \
    const ptrdiff_t kb = s / per, ja = (p0 + (g->direct ? s % per : 0)) * NR;                      \
    const ptrdiff_t jb = (g->direct ? ja + NR : p1 * NR) < g->N ? (g->direct ? ja + NR : p1 * NR) : g->N; \
    if (g->packed || g->koff || g->bsj != 1 || u >= g->nbatch * per_batch || kb >= nkb) return 0;  \
    *src = (const char*)((const T*)g->b + NT_GEMM_BOFF(g, bt, 1, g->sb) + ja);                     \
    *r0 = kb * NT_GEMM_KC;                                                                         \
    *r1 = *r0 + NT_GEMM_KC < g->K ? *r0 + NT_GEMM_KC : g->K;                                       \
    *bytes = (jb - ja) * (ptrdiff_t)sizeof(T);                                                     \
    *tiles = (p1 - p0) / per * ((rows + NT_GEMM_MR - 1) / NT_GEMM_MR);                             \
    return 1;                                                                                      \
}                                                                                                  \
                                                                                                   \
/* Unit u: rows chunk u % n_row_chunks, then panel chunk, then product of the stack; every block  \
   of k. An unpacked B is read with gaps between its rows, which the hardware prefetchers do not  \
   follow across pages: while the tiles of one stripe of it run (nt_gemm_stripe), each prefetches \
   its share of the rows of the next stripe (the next unit's first, after the unit's last: the    \
   unit this thread most likely runs next), so that they come from L2. Prefetches read nothing    \
   into a result and fault on no address, and only addresses inside B are named. */              \
static void nt_gemm_unit_##SUF(const nt_gemm_args* g, int u) {                                     \
    const ptrdiff_t NR = NT_GEMM_NR_##SUF, npanels = (g->N + NR - 1) / NR;                         \
    const ptrdiff_t per_batch = g->n_row_chunks * g->n_panel_chunks, bt = u / per_batch;           \
    const ptrdiff_t ub = u % per_batch;                                                            \
    const ptrdiff_t i0 = (ub % g->n_row_chunks) * g->row_chunk;                                    \
    const ptrdiff_t i1 = i0 + g->row_chunk < g->M ? i0 + g->row_chunk : g->M;                      \
    const ptrdiff_t p0 = (ub / g->n_row_chunks) * g->panel_chunk;                                  \
    const ptrdiff_t p1 = p0 + g->panel_chunk < npanels ? p0 + g->panel_chunk : npanels;            \
    const T* a = (const T*)g->a + NT_GEMM_BOFF(g, bt, 0, g->sa);                                   \
    const T* b = (const T*)g->b + NT_GEMM_BOFF(g, bt, 1, g->sb);                                   \
    T* c = (T*)g->c + NT_GEMM_BOFF(g, bt, 2, g->sc);                                               \
    T* scratch = NULL;                                                                             \
    ptrdiff_t k0, p, i;                                                                            \
    nt_gemm_epi epi;   /* the epilogue ops, their operands at this product (tiles set row, col) */    \
    int o;                                                                                         \
    for (o = 0; o < g->nops; o++) {                                                                \
        epi.op[o] = g->ops[o];                                                                     \
        epi.p[o] = g->ops[o] == NT_EPI_BIAS ? g->bias                                              \
                   : g->ops[o] == NT_EPI_RESIDUAL ? (const void*)((const T*)g->resid               \
                                                               + NT_GEMM_BOFF(g, bt, 3, g->sr))    \
                   : NULL;                                                                         \
        epi.ld[o] = g->ops[o] == NT_EPI_RESIDUAL ? g->ldr : 0;                                     \
    }                                                                                              \
    epi.n = g->nops;                                                                               \
    ptrdiff_t stripe = 0, tile = 0, ntiles = 0, pr0 = 0, pr1 = 0, pbytes = 0, pshare = 0, r;       \
    const char* psrc = NULL;                                                                       \
    if (!g->packed) {                                                                              \
        scratch = (T*)nt_gemm_scratch((size_t)(p1 - p0) * NT_GEMM_KC * NR * sizeof(T));           \
        if (!scratch) { ((nt_gemm_args*)g)->failed = 1; return; }                                  \
    }                                                                                              \
    for (k0 = 0; k0 < g->K; k0 += NT_GEMM_KC) {                                                    \
        const ptrdiff_t kc = g->K - k0 < NT_GEMM_KC ? g->K - k0 : NT_GEMM_KC;                      \
        const int last = k0 + kc >= g->K;                                                          \
        const T* base;                                                                             \
        ptrdiff_t pstride;                                                                         \
        if (scratch) {                                                                             \
            /* read directly: only a last, partial panel is packed (into scratch's first place) */  \
            const ptrdiff_t nl = g->N - (p1 - 1) * NR;   /* columns of the last panel */           \
            const ptrdiff_t q0 = g->direct ? (nl < NR && nl != NT_GEMM_L_##SUF ? p1 - 1 : p1) : p0; \
            if (g->koff) nt_gemm_pack_gather_##SUF(b, g, p0, p1, k0, k0 + kc, scratch, kc * NR);    \
            else if (q0 < p1)                                                                      \
                nt_gemm_pack_##SUF(b, g->bsk, g->bsj, g->N, q0, p1, k0, k0 + kc, scratch, kc * NR);  \
            base = scratch; pstride = kc * NR;                                                     \
        } else {                                                                                   \
            base = (const T*)g->packed + (p0 * g->K + k0) * NR; pstride = g->K * NR;               \
        }                                                                                          \
        for (p = p0; p < p1; p++) {                                                                \
            const ptrdiff_t j0 = p * NR, nc = g->N - j0 < NR ? g->N - j0 : NR;                     \
            if (tile == ntiles && !g->packed && !g->koff) {   /* a stripe begins: find the next */ \
                ptrdiff_t dummy;                                                                   \
                if (!nt_gemm_stripe_##SUF(g, u, stripe, &psrc, &pr0, &pr1, &pbytes, &ntiles))       \
                    ntiles = PTRDIFF_MAX;   /* B is read no way a stripe describes: none to fetch */ \
                stripe++;                                                                          \
                if (!nt_gemm_stripe_##SUF(g, u, stripe, &psrc, &pr0, &pr1, &pbytes, &dummy)        \
                        && !nt_gemm_stripe_##SUF(g, u + 1, 0, &psrc, &pr0, &pr1, &pbytes, &dummy))  \
                    pr1 = pr0;                                                                     \
                pshare = (pr1 - pr0 + ntiles - 1) / ntiles;                                        \
                if (pshare * (pbytes / 64 + 2) > NT_GEMM_PF_LINES) pr1 = pr0;   /* too few tiles */ \
                tile = 0;                                                                          \
            }                                                                                      \
            /* read in place: a full panel, or one vector's columns (a half tile reads no more) */ \
            const int here = g->direct && (nc == NR || nc == NT_GEMM_L_##SUF);                     \
            const T* bp = here ? b + k0 * g->bsk + j0                                              \
                               : base + (g->direct ? 0 : (p - p0) * pstride);                      \
            const ptrdiff_t ldb = here ? g->bsk : NR;                                              \
            for (i = i0; i < i1; i += NT_GEMM_MR) {                                                \
                const int mr = (int)(i1 - i < NT_GEMM_MR ? i1 - i : NT_GEMM_MR);                   \
                if (pr0 < pr1) {   /* this tile's share of the next stripe's rows */                \
                    const ptrdiff_t ra = pr0 + tile * pshare, rb = ra + pshare < pr1 ? ra + pshare : pr1; \
                    for (r = ra; r < rb; r++)                                                      \
                        nt_gemm_prefetch_row(psrc + r * g->bsk * (ptrdiff_t)sizeof(T), pbytes);    \
                }                                                                                  \
                tile++;                                                                            \
                const nt_gemm_epi* epi_here = last && epi.n ? &epi : NULL;                         \
                epi.row = i; epi.col = j0;                                                         \
                if (nc <= NT_GEMM_L_##SUF)   /* a panel of one vector's columns or fewer */        \
                    nt_gemm_htile_any_##SUF(mr, a + i * g->lda + k0, g->lda, bp, ldb, kc,          \
                                            c + i * g->ldc + j0, g->ldc, nc, k0 > 0, epi_here);        \
                else                                                                               \
                    nt_gemm_tile_any_##SUF(mr, a + i * g->lda + k0, g->lda, bp, ldb, kc,           \
                                           c + i * g->ldc + j0, g->ldc, nc, k0 > 0, epi_here);         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
}

NT_GEMM_DEFINE(float, nt_gv_f32, f32)
NT_GEMM_DEFINE(double, nt_gv_f64, f64)

#endif
