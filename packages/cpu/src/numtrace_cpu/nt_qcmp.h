/* The float compare loops (greater, greater_equal, less, less_equal, maximum, minimum, fmax, fmin,
 * heaviside, sign) with quiet predicates, for the x86 builds: the block loops of nt_loops.h run
 * these on whole vectors and finish the last elements with the op's scalar function.
 *
 * Why: NumPy's loops raise no floating-point flag comparing a NaN, and a flag the call did not raise
 * in NumPy is a false report or a rerun (numtrace_ir.fp_errors). The scalar functions' compares
 * (nt_opcodes.h, NT_GT) are quiet by zeroing NaN operands first, which costs a few instructions an
 * element; vcmpps/vcmppd with an _OQ predicate is quiet in one, so these loops keep the speed of the
 * signaling compare GCC generates for `a > b`. Their results equal the scalar functions' bit for bit
 * (the same selects, made from masks).
 *
 *   nt_qcmp_<suffix>(op, d, a, b, n, mode): the elements done (a multiple of the vector width, 0
 *   where this build or op has no such loop); mode 0: d[i] = op(a[i], b[i]), 1: op(a[i], *b),
 *   2: op(*b, a[i]), 3: op(a[i]) (b unused). */
#ifndef NT_QCMP_H
#define NT_QCMP_H

#include <stdint.h>
#include <string.h>
#include "nt_opcodes.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define NT_QCMP_VECTORS 1
/* Per type: lanes, vector, mask, load, broadcast, compare (a mask), select (b where the mask is
 * clear, a where set), the mask as 0/1 bytes stored to d. */
#define NT_QV_W_f64 8
#define NT_QV_W_f32 16
typedef __m512d nt_qv_f64;
typedef __m512 nt_qv_f32;
typedef __mmask8 nt_qm_f64;
typedef __mmask16 nt_qm_f32;
#define nt_qv_load_f64 _mm512_loadu_pd
#define nt_qv_load_f32 _mm512_loadu_ps
#define nt_qv_set1_f64 _mm512_set1_pd
#define nt_qv_set1_f32 _mm512_set1_ps
#define nt_qv_cmp_f64 _mm512_cmp_pd_mask
#define nt_qv_cmp_f32 _mm512_cmp_ps_mask
#define nt_qv_or_f64(x, y) ((__mmask8)((x) | (y)))
#define nt_qv_or_f32(x, y) ((__mmask16)((x) | (y)))
#define nt_qv_bits_f64(m) ((int)(m))
#define nt_qv_bits_f32(m) ((int)(m))
#define nt_qv_pick_f64(m, a, b) _mm512_mask_blend_pd(m, b, a)
#define nt_qv_pick_f32(m, a, b) _mm512_mask_blend_ps(m, b, a)
#define nt_qv_store_f64(d, v) _mm512_storeu_pd(d, v)
#define nt_qv_store_f32(d, v) _mm512_storeu_ps(d, v)
#define nt_qv_bools_f64(d, m) _mm_storel_epi64((__m128i *)(d), _mm_maskz_set1_epi8(m, 1))
#define nt_qv_bools_f32(d, m) _mm_storeu_si128((__m128i *)(d), _mm_maskz_set1_epi8(m, 1))
#elif defined(__AVX2__) && defined(__BMI2__)
#include <immintrin.h>
#define NT_QCMP_VECTORS 1
#define NT_QV_W_f64 4
#define NT_QV_W_f32 8
typedef __m256d nt_qv_f64;
typedef __m256 nt_qv_f32;
typedef __m256d nt_qm_f64;
typedef __m256 nt_qm_f32;
#define nt_qv_load_f64 _mm256_loadu_pd
#define nt_qv_load_f32 _mm256_loadu_ps
#define nt_qv_set1_f64 _mm256_set1_pd
#define nt_qv_set1_f32 _mm256_set1_ps
#define nt_qv_cmp_f64 _mm256_cmp_pd
#define nt_qv_cmp_f32 _mm256_cmp_ps
#define nt_qv_or_f64 _mm256_or_pd
#define nt_qv_or_f32 _mm256_or_ps
#define nt_qv_bits_f64 _mm256_movemask_pd
#define nt_qv_bits_f32 _mm256_movemask_ps
#define nt_qv_pick_f64(m, a, b) _mm256_blendv_pd(b, a, m)
#define nt_qv_pick_f32(m, a, b) _mm256_blendv_ps(b, a, m)
#define nt_qv_store_f64(d, v) _mm256_storeu_pd(d, v)
#define nt_qv_store_f32(d, v) _mm256_storeu_ps(d, v)
static inline void nt_qv_bools_f64(unsigned char *d, __m256d m) {
    uint32_t v = _pdep_u32((unsigned)_mm256_movemask_pd(m), 0x01010101u); memcpy(d, &v, 4); }
static inline void nt_qv_bools_f32(unsigned char *d, __m256 m) {
    uint64_t v = _pdep_u64((unsigned)_mm256_movemask_ps(m), 0x0101010101010101ull); memcpy(d, &v, 8); }
#elif defined(__SSE2__)
/* SSE2 has no quiet ordered predicate: the operands are zeroed where the pair is unordered (cmpord
 * is quiet) before the signaling compare, as the scalar functions do, in four instructions. */
#include <emmintrin.h>
#define NT_QCMP_VECTORS 1
#ifndef _CMP_GT_OQ
#define _CMP_EQ_OQ 0x00
#define _CMP_UNORD_Q 0x03
#define _CMP_LT_OQ 0x11
#define _CMP_LE_OQ 0x12
#define _CMP_GE_OQ 0x1d
#define _CMP_GT_OQ 0x1e
#endif
#define NT_QV_SSE2(SUF, V, W, X, CAST, MOVEMASK, SPREAD) \
    typedef V nt_qv_##SUF; \
    typedef V nt_qm_##SUF; \
    enum { NT_QV_W_##SUF = W }; \
    static inline V nt_qv_cmp_##SUF(V x, V y, int p) { \
        if (p == _CMP_UNORD_Q) return _mm_cmpunord_##X(x, y); \
        if (p == _CMP_EQ_OQ) return _mm_cmpeq_##X(x, y); \
        V m = _mm_cmpord_##X(x, y); \
        x = _mm_and_##X(x, m); y = _mm_and_##X(y, m); \
        if (p == _CMP_GT_OQ) return _mm_cmpgt_##X(x, y); \
        if (p == _CMP_LT_OQ) return _mm_cmplt_##X(x, y); \
        if (p == _CMP_GE_OQ) return _mm_and_##X(m, _mm_cmpge_##X(x, y)); \
        return _mm_and_##X(m, _mm_cmple_##X(x, y)); \
    } \
    static inline V nt_qv_pick_##SUF(V m, V a, V b) { return _mm_or_##X(_mm_and_##X(m, a), _mm_andnot_##X(m, b)); } \
    static inline void nt_qv_bools_##SUF(unsigned char *d, V m) { \
        uint32_t bits = (uint32_t)MOVEMASK(m), v = SPREAD; memcpy(d, &v, W); }
NT_QV_SSE2(f64, __m128d, 2, pd, , _mm_movemask_pd, (bits & 1) | (bits & 2) << 7)
NT_QV_SSE2(f32, __m128, 4, ps, , _mm_movemask_ps,
           (bits & 1) | (bits & 2) << 7 | (bits & 4) << 14 | (bits & 8) << 21)
#define nt_qv_load_f64 _mm_loadu_pd
#define nt_qv_load_f32 _mm_loadu_ps
#define nt_qv_set1_f64 _mm_set1_pd
#define nt_qv_set1_f32 _mm_set1_ps
#define nt_qv_or_f64 _mm_or_pd
#define nt_qv_or_f32 _mm_or_ps
#define nt_qv_bits_f64 _mm_movemask_pd
#define nt_qv_bits_f32 _mm_movemask_ps
#define nt_qv_store_f64(d, v) _mm_storeu_pd(d, v)
#define nt_qv_store_f32(d, v) _mm_storeu_ps(d, v)
#endif

#ifdef NT_QCMP_VECTORS
/* One loop body over whole vectors: x and y are the operands' vectors (y loaded or broadcast). */
#define NT_QCMP_LOOP(SUF, T, BODY) \
    for (; i + NT_QV_W_##SUF <= n; i += NT_QV_W_##SUF) { \
        nt_qv_##SUF x = nt_qv_load_##SUF(a + i); \
        nt_qv_##SUF y = mode == 0 ? nt_qv_load_##SUF(b + i) : yb; \
        if (mode == 2) { nt_qv_##SUF t = x; x = y; y = t; } \
        __asm__("" : "+v"(x), "+v"(y));   /* loaded once: not again as a compare's memory operand */ \
        BODY \
    }
/* A compare into bools, and a select of x where PICK (x's NaN for maximum, y's for fmax) or the
 * quiet compare holds. */
#define NT_QCMP_BOOL(SUF, P) nt_qv_bools_##SUF((unsigned char *)d_ + i, nt_qv_cmp_##SUF(x, y, P));
#define NT_QCMP_PICK(SUF, T, P, NANOF) \
    nt_qv_store_##SUF((T *)d_ + i, nt_qv_pick_##SUF( \
        nt_qv_or_##SUF(nt_qv_cmp_##SUF(x, y, P), nt_qv_cmp_##SUF(NANOF, NANOF, _CMP_UNORD_Q)), x, y));
#define NT_QCMP_FUNC(SUF, T) \
static inline Py_ssize_t nt_qcmp_##SUF(int op, char *d_, const char *a_, const char *b_, Py_ssize_t n, \
                                       int mode) { \
    const T *a = (const T *)a_, *b = (const T *)b_; \
    nt_qv_##SUF yb = nt_qv_set1_##SUF(mode == 1 || mode == 2 ? *b : 0); \
    nt_qv_##SUF zero = nt_qv_set1_##SUF(0), one = nt_qv_set1_##SUF(1); \
    Py_ssize_t i = 0; \
    switch (op) { \
        case OP_GT: NT_QCMP_LOOP(SUF, T, NT_QCMP_BOOL(SUF, _CMP_GT_OQ)) break; \
        case OP_GE: NT_QCMP_LOOP(SUF, T, NT_QCMP_BOOL(SUF, _CMP_GE_OQ)) break; \
        case OP_LT: NT_QCMP_LOOP(SUF, T, NT_QCMP_BOOL(SUF, _CMP_LT_OQ)) break; \
        case OP_LE: NT_QCMP_LOOP(SUF, T, NT_QCMP_BOOL(SUF, _CMP_LE_OQ)) break; \
        case OP_MAX: NT_QCMP_LOOP(SUF, T, NT_QCMP_PICK(SUF, T, _CMP_GT_OQ, x)) break; \
        case OP_MIN: NT_QCMP_LOOP(SUF, T, NT_QCMP_PICK(SUF, T, _CMP_LT_OQ, x)) break; \
        case OP_FMAX: NT_QCMP_LOOP(SUF, T, NT_QCMP_PICK(SUF, T, _CMP_GT_OQ, y)) break; \
        case OP_FMIN: NT_QCMP_LOOP(SUF, T, NT_QCMP_PICK(SUF, T, _CMP_LT_OQ, y)) break; \
        case OP_HEAVISIDE: NT_QCMP_LOOP(SUF, T, \
            nt_qv_##SUF r = nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, zero, _CMP_GT_OQ), one, zero); \
            r = nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, zero, _CMP_EQ_OQ), y, r); \
            nt_qv_store_##SUF((T *)d_ + i, nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, x, _CMP_UNORD_Q), \
                                                           nt_qv_set1_##SUF(NAN), r));) break; \
        case OP_SIGN: \
            for (; i + NT_QV_W_##SUF <= n; i += NT_QV_W_##SUF) { \
                nt_qv_##SUF x = nt_qv_load_##SUF(a + i); \
                nt_qv_##SUF r = nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, zero, _CMP_GT_OQ), one, zero); \
                r = nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, zero, _CMP_LT_OQ), nt_qv_set1_##SUF(-1), r); \
                nt_qv_store_##SUF((T *)d_ + i, nt_qv_pick_##SUF(nt_qv_cmp_##SUF(x, x, _CMP_UNORD_Q), x, r)); \
            } \
            break; \
        default: break; \
    } \
    return i; \
}
NT_QCMP_FUNC(f64, double)
NT_QCMP_FUNC(f32, float)
#else
#define nt_qcmp_f64(op, d, a, b, n, mode) ((Py_ssize_t)0)
#define nt_qcmp_f32(op, d, a, b, n, mode) ((Py_ssize_t)0)
#endif
/* Integer and bool compares raise no flag: no vector loops of their own. */
#define nt_qcmp_b(op, d, a, b, n, mode) ((Py_ssize_t)0)
#define nt_qcmp_i32(op, d, a, b, n, mode) ((Py_ssize_t)0)
#define nt_qcmp_i64(op, d, a, b, n, mode) ((Py_ssize_t)0)

#endif
