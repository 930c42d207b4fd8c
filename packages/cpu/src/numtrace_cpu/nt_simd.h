/* Branch-free float32 math and block reductions that GCC auto-vectorizes.
 *
 * Why a C header: the kernels need `#pragma omp simd` reductions (a plain
 * floating-point sum is never vectorized without permission to reassociate)
 * and bit-level float tricks, neither of which Cython can express.  Every
 * function is `static inline` so it is inlined into the interpreter's loops.
 */
#ifndef NT_SIMD_H
#define NT_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "nt_opcodes.h"
#include "nt_qcmp.h"

static inline float nt_bits_to_float(uint32_t i) { union { uint32_t i; float f; } u; u.i = i; return u.f; }
static inline uint32_t nt_float_to_bits(float f) { union { uint32_t i; float f; } u; u.f = f; return u.i; }

/* exp for float32, about 1 ulp: Cody-Waite reduction x = k ln2 + r, a degree-6 polynomial for
 * exp(r), and 2^k applied as two factors so that subnormal results stay exact.  The input is
 * clamped to [-104, 89], just past where the result underflows to 0 or overflows to inf, so those
 * come out of the arithmetic itself; a NaN passes the clamp (quiet compares) and propagates.  k is read from the
 * mantissa of the rounding constant (no float-to-int conversion), and the only selects are the
 * clamp and the infinities', which GCC turns into vector blends under -fno-trapping-math. */
static inline float nt_expf(float x) {
    /* +-inf: inf and +0 with no flag, as NumPy's (the clamped lane would overflow or underflow). */
    uint32_t u = nt_float_to_bits(x);
    int pinf = u == 0x7f800000u, ninf = u == 0xff800000u;
    x = nt_qz_f32(x, !(pinf | ninf));
    float xc = NT_GT(x, 89.0f) ? 89.0f : (NT_LT(x, -104.0f) ? -104.0f : x);
    float kf = xc * 1.44269504088896341f + 12582912.0f;     /* 1.5 * 2^23: round to nearest */
    float k = kf - 12582912.0f;
    int32_t ki = (int32_t)(nt_float_to_bits(kf) - 0x4B400000u);
    float r = xc - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    /* y = 1 + r + p r^2 with 1 + r split into h and its exact rounding error e (Fast2Sum, |r| < 1):
     * only the small term's rounding is added before the final one, so y stays within 1 ulp
     * (0.8 measured); adding p r^2 + r first rounds it at r's scale, up to 0.5 ulp of y below 1. */
    float h = 1.0f + r;
    float e = (1.0f - h) + r;
    float y = h + (p * r * r + e);
    int32_t k1 = ki >> 1;
    y = y * nt_bits_to_float((uint32_t)(k1 + 127) << 23) * nt_bits_to_float((uint32_t)(ki - k1 + 127) << 23);
    return pinf ? INFINITY : (ninf ? 0.0f : y);
}

/* tanh for float32: a [13/6] rational approximation on [-7.905, 7.905] (where tanh rounds to +-1),
 * relative error below 3e-7, one division and no exp.  Below 4e-4 the result is x itself, which
 * keeps tiny inputs (and -0) exact; NaN passes the clamp and propagates. */
static inline float nt_tanhf(float x) {
    const float c = 7.90531110763549805f;
    float xc = NT_GT(x, c) ? c : (NT_LT(x, -c) ? -c : x);
    float x2 = xc * xc;
    float p = x2 * -2.76076847742355e-16f + 2.00018790482477e-13f;
    p = x2 * p + -8.60467152213735e-11f;
    p = x2 * p + 5.12229709037114e-08f;
    p = x2 * p + 1.48572235717979e-05f;
    p = x2 * p + 6.37261928875436e-04f;
    p = x2 * p + 4.89352455891786e-03f;
    float q = x2 * 1.19825839466702e-06f + 1.18534705686654e-04f;
    q = x2 * q + 2.26843463243900e-03f;
    q = x2 * q + 4.89352518554385e-03f;
    float r = xc * p / q;
    return NT_LT(fabsf(x), 4e-4f) ? x : r;
}

/* Whole-block exp and tanh: nt_expf_loop(d, a, n) writes nt_expf(a[i]) to d[i] (d may equal a).
 *
 * GCC vectorizes a plain loop over nt_expf/nt_tanhf, but threads the clamp's branches into the
 * tail (computing the constant results for clamped inputs) and then blends three precomputed
 * results per lane: about ten extra compares, ands and blends per vector on a loop bound by its
 * floating-point ports.  Where the build has AVX2 and FMA the loops below use the same operations
 * in the same order as the scalar functions, so every float32 input (checked exhaustively) gives
 * bit-identical results, NaN aside, whose payload may differ:
 *   - exp scales by 2^k with one integer add to the exponent field when every lane's result is a
 *     normal number (|k| <= 125, which also excludes inf and NaN), and otherwise runs the scalar
 *     function's clamp and two-factor scaling;
 *   - tanh replaces the clamp with one select of +-1 for |x| > 7.905 (what the scalar function
 *     returns there; inf included), and keeps x itself below 4e-4.
 * A block whose length is not a multiple of 8 finishes through an 8-float buffer, so every element
 * takes the same vector path. The AVX-512 build runs sixteen-lane forms of the same operations
 * (a softmax's exp 1.28x, GELU's tanh 1.07x faster per element on Zen 5). */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* The arithmetic the eight- and sixteen-lane forms share, for vector type V with intrinsics P##_...
 * (_mm256 or _mm512): each lane runs the same operations in the same order, so the same bits.
 * NT_EXP_REDUCED: exp(r) for the reduced argument r = x - k*ln2 (|r| <= ln2/2), nt_expf's polynomial
 * and sum in its order; NT_EXP_ARG: that r from x and k (two steps of ln2); NT_TANH_RATIONAL:
 * nt_tanhf's rational function of x (|x| <= 7.905). */
#define NT_EXP_REDUCED(NAME, V, P) \
static inline V NAME(V r) { \
    V p = P##_set1_ps(1.9875691500e-4f); \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.3981999507e-3f)); \
    p = P##_fmadd_ps(p, r, P##_set1_ps(8.3334519073e-3f)); \
    p = P##_fmadd_ps(p, r, P##_set1_ps(4.1665795894e-2f)); \
    p = P##_fmadd_ps(p, r, P##_set1_ps(1.6666665459e-1f)); \
    p = P##_fmadd_ps(p, r, P##_set1_ps(5.0000001201e-1f)); \
    V one = P##_set1_ps(1.0f); \
    V h = P##_add_ps(one, r); \
    V e = P##_add_ps(P##_sub_ps(one, h), r); \
    return P##_add_ps(h, P##_fmadd_ps(P##_mul_ps(p, r), r, e)); \
}
#define NT_EXP_ARG(NAME, V, P) \
static inline V NAME(V x, V k) { \
    V r = P##_fnmadd_ps(k, P##_set1_ps(0.693359375f), x); \
    return P##_fnmadd_ps(k, P##_set1_ps(-2.12194440e-4f), r); \
}
#define NT_TANH_RATIONAL(NAME, V, P) \
static inline V NAME(V x) { \
    V x2 = P##_mul_ps(x, x); \
    V p = P##_fmadd_ps(x2, P##_set1_ps(-2.76076847742355e-16f), P##_set1_ps(2.00018790482477e-13f)); \
    p = P##_fmadd_ps(x2, p, P##_set1_ps(-8.60467152213735e-11f)); \
    p = P##_fmadd_ps(x2, p, P##_set1_ps(5.12229709037114e-08f)); \
    p = P##_fmadd_ps(x2, p, P##_set1_ps(1.48572235717979e-05f)); \
    p = P##_fmadd_ps(x2, p, P##_set1_ps(6.37261928875436e-04f)); \
    p = P##_fmadd_ps(x2, p, P##_set1_ps(4.89352455891786e-03f)); \
    V q = P##_fmadd_ps(x2, P##_set1_ps(1.19825839466702e-06f), P##_set1_ps(1.18534705686654e-04f)); \
    q = P##_fmadd_ps(x2, q, P##_set1_ps(2.26843463243900e-03f)); \
    q = P##_fmadd_ps(x2, q, P##_set1_ps(4.89352518554385e-03f)); \
    return P##_div_ps(P##_mul_ps(x, p), q); \
}
/* NT_EXP_SCALED: exp of a clamped x (in [-104, 89]) scaled by 2^k as two factors, each a normal
 * power of two: nt_expf's full path; SI names the width's integer intrinsics (si256, si512). */
#define NT_EXP_SCALED(NAME, V, VI, P, SI, REDUCED, ARG) \
static inline V NAME(V xc) { \
    V kf = P##_fmadd_ps(xc, P##_set1_ps(1.44269504088896341f), P##_set1_ps(12582912.0f)); \
    V k = P##_sub_ps(kf, P##_set1_ps(12582912.0f)); \
    VI ki = P##_sub_epi32(P##_castps_##SI(kf), P##_set1_epi32(0x4B400000)); \
    V y = REDUCED(ARG(xc, k)); \
    VI k1 = P##_srai_epi32(ki, 1); \
    VI bias = P##_set1_epi32(127); \
    V s1 = P##_cast##SI##_ps(P##_slli_epi32(P##_add_epi32(k1, bias), 23)); \
    V s2 = P##_cast##SI##_ps(P##_slli_epi32(P##_add_epi32(P##_sub_epi32(ki, k1), bias), 23)); \
    return P##_mul_ps(P##_mul_ps(y, s1), s2); \
}
NT_EXP_REDUCED(nt_exp_reduced_v8, __m256, _mm256)
NT_EXP_ARG(nt_exp_arg_v8, __m256, _mm256)
NT_TANH_RATIONAL(nt_tanh_rational_v8, __m256, _mm256)
NT_EXP_SCALED(nt_exp_scaled_v8, __m256, __m256i, _mm256, si256, nt_exp_reduced_v8, nt_exp_arg_v8)

/* Eight lanes of nt_expf with its clamp and two-factor scaling (any input). vminps raises invalid on
 * a NaN operand, and a clamped infinity overflows or underflows, so NaN and +-inf lanes are clamped
 * as 0 and given back x (+0 for -inf) at the end (NumPy raises nothing). */
static inline __m256 nt_expf_v8_full(__m256 x) {
    __m256i xi = _mm256_castps_si256(x);
    __m256 ninf = _mm256_castsi256_ps(_mm256_cmpeq_epi32(xi, _mm256_set1_epi32((int)0xff800000u)));
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),   /* NaN or +inf: the result is x */
                              _mm256_castsi256_ps(_mm256_cmpeq_epi32(xi, _mm256_set1_epi32(0x7f800000))));
    __m256 xc = _mm256_max_ps(_mm256_set1_ps(-104.0f),
                              _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_andnot_ps(_mm256_or_ps(nan, ninf), x)));
    return _mm256_andnot_ps(ninf, _mm256_blendv_ps(nt_exp_scaled_v8(xc), x, nan));
}

/* Eight lanes of nt_expf: without the clamp, and with 2^k added to the exponent field, when all
 * eight results are normal; y lies in [0.70, 1.42], so |k| <= 125 keeps y * 2^k normal. */
static inline __m256 nt_expf_v8(__m256 x) {
    __m256 kf = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(12582912.0f));
    __m256 k = _mm256_sub_ps(kf, _mm256_set1_ps(12582912.0f));
    __m256i ki = _mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_set1_epi32(0x4B400000));
    __m256i big = _mm256_cmpgt_epi32(_mm256_abs_epi32(ki), _mm256_set1_epi32(125));
    if (!_mm256_testz_si256(big, big)) return nt_expf_v8_full(x);   /* |x| > ~86.6, inf or NaN */
    __m256 y = nt_exp_reduced_v8(nt_exp_arg_v8(x, k));
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), _mm256_slli_epi32(ki, 23)));
}

/* Eight lanes of nt_tanhf.  Lanes with |x| > 7.905 (inf included) run the rational function on 0
 * (on inf it would divide inf by inf: invalid, which NumPy does not raise), and the +-1 select
 * replaces the result; NaN fails both compares and stays NaN. */
static inline __m256 nt_tanhf_v8(__m256 x0) {
    const __m256 c = _mm256_set1_ps(7.90531110763549805f);
    __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x0);
    __m256 big = _mm256_cmp_ps(ax, c, _CMP_GT_OQ);
    __m256 x = _mm256_andnot_ps(big, x0);
    __m256 r = nt_tanh_rational_v8(x);
    __m256 one = _mm256_or_ps(_mm256_xor_ps(x0, ax), _mm256_set1_ps(1.0f));   /* copysign(1, x) */
    r = _mm256_blendv_ps(r, one, big);
    return _mm256_blendv_ps(r, x0, _mm256_cmp_ps(ax, _mm256_set1_ps(4e-4f), _CMP_LT_OQ));
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
/* The AVX-512 build's sixteen-lane forms of the three functions above: the same operations in the
 * same order on each lane (masks in place of blends), so each lane's bits are the eight-lane ones
 * (test_vmath.py compares the builds), at twice the lanes per instruction. */
NT_EXP_REDUCED(nt_exp_reduced_v16, __m512, _mm512)
NT_EXP_ARG(nt_exp_arg_v16, __m512, _mm512)
NT_TANH_RATIONAL(nt_tanh_rational_v16, __m512, _mm512)
NT_EXP_SCALED(nt_exp_scaled_v16, __m512, __m512i, _mm512, si512, nt_exp_reduced_v16, nt_exp_arg_v16)

static inline __m512 nt_expf_v16_full(__m512 x) {
    __m512i xi = _mm512_castps_si512(x);
    __mmask16 ninf = _mm512_cmpeq_epi32_mask(xi, _mm512_set1_epi32((int)0xff800000u));
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)
                    | _mm512_cmpeq_epi32_mask(xi, _mm512_set1_epi32(0x7f800000));
    __m512 xc = _mm512_max_ps(_mm512_set1_ps(-104.0f),
                              _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_maskz_mov_ps(~(nan | ninf), x)));
    return _mm512_maskz_mov_ps(~ninf, _mm512_mask_mov_ps(nt_exp_scaled_v16(xc), nan, x));
}

static inline __m512 nt_expf_v16(__m512 x) {
    __m512 kf = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f));
    __m512 k = _mm512_sub_ps(kf, _mm512_set1_ps(12582912.0f));
    __m512i ki = _mm512_sub_epi32(_mm512_castps_si512(kf), _mm512_set1_epi32(0x4B400000));
    if (_mm512_cmpgt_epi32_mask(_mm512_abs_epi32(ki), _mm512_set1_epi32(125)))
        return nt_expf_v16_full(x);   /* |x| > ~86.6, inf or NaN */
    __m512 y = nt_exp_reduced_v16(nt_exp_arg_v16(x, k));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(y), _mm512_slli_epi32(ki, 23)));
}

static inline __m512 nt_tanhf_v16(__m512 x0) {
    const __m512 c = _mm512_set1_ps(7.90531110763549805f);
    __m512 ax = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x0);
    __mmask16 big = _mm512_cmp_ps_mask(ax, c, _CMP_GT_OQ);
    __m512 x = _mm512_maskz_mov_ps(~big, x0);
    __m512 r = nt_tanh_rational_v16(x);
    __m512 one = _mm512_or_ps(_mm512_xor_ps(x0, ax), _mm512_set1_ps(1.0f));   /* copysign(1, x) */
    r = _mm512_mask_mov_ps(r, big, one);
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(ax, _mm512_set1_ps(4e-4f), _CMP_LT_OQ), x0);
}

/* The tail's missing lanes are loaded as 0 (the eight-lane loops' buffer holds 0 there too). */
#define NT_V16_LOOP(NAME, VEC) \
static inline void NAME(float *d, const float *a, Py_ssize_t n) { \
    Py_ssize_t i = 0; \
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, VEC(_mm512_loadu_ps(a + i))); \
    if (i < n) { \
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1); \
        _mm512_mask_storeu_ps(d + i, m, VEC(_mm512_maskz_loadu_ps(m, a + i))); \
    } \
}
NT_V16_LOOP(nt_expf_loop, nt_expf_v16)
NT_V16_LOOP(nt_tanhf_loop, nt_tanhf_v16)
#else
#define NT_V8_LOOP(NAME, VEC) \
static inline void NAME(float *d, const float *a, Py_ssize_t n) { \
    Py_ssize_t i = 0; \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, VEC(_mm256_loadu_ps(a + i))); \
    if (i < n) { \
        float buf[8] = {0}; \
        for (Py_ssize_t j = 0; j < n - i; j++) buf[j] = a[i + j]; \
        _mm256_storeu_ps(buf, VEC(_mm256_loadu_ps(buf))); \
        for (Py_ssize_t j = 0; j < n - i; j++) d[i + j] = buf[j]; \
    } \
}
NT_V8_LOOP(nt_expf_loop, nt_expf_v8)
NT_V8_LOOP(nt_tanhf_loop, nt_tanhf_v8)
#endif
#else
static inline void nt_expf_loop(float *d, const float *a, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) d[i] = nt_expf(a[i]);
}
static inline void nt_tanhf_loop(float *d, const float *a, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) d[i] = nt_tanhf(a[i]);
}
#endif

/* Block reductions.  Sums accumulate in double (more accurate than NumPy's
 * float32 pairwise sum); max/min propagate NaN like np.maximum.reduce.
 *
 * With AVX2 a sum keeps four vector accumulators (sixteen partial sums, combined pairwise at the
 * end of the block): GCC vectorizes the plain loop below with one, whose add latency then bounds
 * it at a third of NumPy's speed on a block in cache. */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define NT_LOAD4_F64(p) _mm256_loadu_pd(p)
#define NT_LOAD4_F32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
/* The sum over a block of the terms of its elements: TERM(acc, v) adds those of the four doubles v,
 * STERM(x) is one element's; PARAMS are the function's parameters after n (NT_NO_PARAMS: none). */
#define NT_NO_PARAMS
#define NT_MEAN_PARAM , double mean
#define NT_SUM_V(NAME, T, LOAD4, TERM, STERM, PARAMS) \
static inline double NAME(const T *a, Py_ssize_t n PARAMS) { \
    Py_ssize_t i = 0; double s = 0.0; \
    if (n >= 16) { \
        __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0; \
        for (; i + 16 <= n; i += 16) { \
            s0 = TERM(s0, LOAD4(a + i)); s1 = TERM(s1, LOAD4(a + i + 4)); \
            s2 = TERM(s2, LOAD4(a + i + 8)); s3 = TERM(s3, LOAD4(a + i + 12)); \
        } \
        double l[4]; \
        _mm256_storeu_pd(l, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3))); \
        s = (l[0] + l[1]) + (l[2] + l[3]); \
    } \
    for (; i < n; i++) s += STERM((double)a[i]); \
    return s; \
}
#define NT_ADD(acc, v) _mm256_add_pd(acc, v)
#define NT_SAME(v) (v)
NT_SUM_V(nt_sum_f32, float, NT_LOAD4_F32, NT_ADD, NT_SAME, NT_NO_PARAMS)
NT_SUM_V(nt_sum_f64, double, NT_LOAD4_F64, NT_ADD, NT_SAME, NT_NO_PARAMS)
/* Blocks shorter than this are summed one element after another from +0 (what a generated kernel
 * may do in registers instead; see nt_gen.h's nt_gen_reduce.sequential_below). */
#define NT_SUM_SEQUENTIAL_BELOW 16
/* Sum of squared deviations from `mean` (the M2 term of Chan's update). */
#define NT_ADD_SQDEV(acc, v) _mm256_fmadd_pd(_mm256_sub_pd(v, _mm256_set1_pd(mean)), \
                                             _mm256_sub_pd(v, _mm256_set1_pd(mean)), acc)
#define NT_SQDEV(v) (((v) - mean) * ((v) - mean))
NT_SUM_V(nt_m2_f32, float, NT_LOAD4_F32, NT_ADD_SQDEV, NT_SQDEV, NT_MEAN_PARAM)
NT_SUM_V(nt_m2_f64, double, NT_LOAD4_F64, NT_ADD_SQDEV, NT_SQDEV, NT_MEAN_PARAM)
#else
#define NT_SUM(NAME, T) \
static inline double NAME(const T *a, Py_ssize_t n) { \
    double s = 0.0; \
    _Pragma("omp simd reduction(+:s)") \
    for (Py_ssize_t i = 0; i < n; i++) s += (double)a[i]; \
    return s; \
}
NT_SUM(nt_sum_f32, float)
NT_SUM(nt_sum_f64, double)
#define NT_SUM_SEQUENTIAL_BELOW 0   /* the compiler picks the order of the loop above */

/* Sum of squared deviations from `mean` (the M2 term of Chan's update). */
#define NT_M2(NAME, T) \
static inline double NAME(const T *a, Py_ssize_t n, double mean) { \
    double s = 0.0; \
    _Pragma("omp simd reduction(+:s)") \
    for (Py_ssize_t i = 0; i < n; i++) { double d = (double)a[i] - mean; s += d * d; } \
    return s; \
}
NT_M2(nt_m2_f32, float)
NT_M2(nt_m2_f64, double)
#endif

/* Block max/min: returns the running extreme; *nan is set when a NaN was seen
 * (the caller then reports NaN, as NumPy does). CMP is NT_GT or NT_LT (nt_opcodes.h): a NaN
 * compares false and raises no flag, as in NumPy's reduction. */
#define NT_EXTREME(NAME, T, CMP, PRAGMA) \
static inline T NAME(const T *a, Py_ssize_t n, T acc, int *nan) { \
    T m = acc; int bad = 0; \
    _Pragma(PRAGMA) \
    for (Py_ssize_t i = 0; i < n; i++) { T v = a[i]; bad |= (v != v); m = CMP(v, m) ? v : m; } \
    *nan |= bad; return m; \
}
#define NT_MAX_PRAGMA "omp simd reduction(max:m) reduction(|:bad)"
#define NT_MIN_PRAGMA "omp simd reduction(min:m) reduction(|:bad)"
NT_EXTREME(nt_max_i32, int32_t, NT_GT, NT_MAX_PRAGMA)
NT_EXTREME(nt_max_i64, int64_t, NT_GT, NT_MAX_PRAGMA)
NT_EXTREME(nt_max_u8, uint8_t, NT_GT, NT_MAX_PRAGMA)
NT_EXTREME(nt_min_i32, int32_t, NT_LT, NT_MIN_PRAGMA)
NT_EXTREME(nt_min_i64, int64_t, NT_LT, NT_MIN_PRAGMA)
NT_EXTREME(nt_min_u8, uint8_t, NT_LT, NT_MIN_PRAGMA)

/* Float max/min.  With AVX2, four independent vector accumulators (GCC's vectorization of the loop
 * above keeps one, and its NaN flag costs a second dependency chain per element: half NumPy's speed
 * on a block that sits in cache).  VEXT(v, m) is `v CMP m ? v : m` lane by lane, the comparison of
 * NT_EXTREME. vmaxpd raises invalid on a NaN operand, so each group of vectors is tested with a
 * quiet unordered compare first, and a NaN ends the block (the result is NaN whatever else it holds).
 * The lanes, then the elements after the last group (all of a short row), go one at a time through
 * NT_QSTEP_*: the same instruction on one lane, on an element that a quiet unordered compare found
 * NaN replaced by IDENT (-inf for max, +inf for min), so the running extreme, never a NaN, waits on
 * one max/min per element (NT_GT's bit selects on it cost several times that: a row of ten
 * elements is all this loop). */
#if defined(__AVX2__)
#include <immintrin.h>
/* m = EXT1(x or IDENT where x is NaN, m), the NaN lane or-ed into u (all __m128d / __m128). */
#define NT_QSTEP_F64(m, u, x, EXT1, IDENT) do { \
    __m128d v_ = _mm_set_sd(x), k_ = _mm_cmpunord_sd(v_, v_); u = _mm_or_pd(u, k_); \
    m = EXT1(_mm_blendv_pd(v_, _mm_set_sd(IDENT), k_), m); } while (0)
#define NT_QSTEP_F32(m, u, x, EXT1, IDENT) do { \
    __m128 v_ = _mm_set_ss(x), k_ = _mm_cmpunord_ss(v_, v_); u = _mm_or_ps(u, k_); \
    m = EXT1(_mm_blendv_ps(v_, _mm_set_ss(IDENT), k_), m); } while (0)
#define NT_EXTREME_V(NAME, T, V, W, LOAD, SET1, STORE, VEXT, UNORD, OR, TESTZ, V1, ZERO1, SET1_1, \
                     STEP, EXT1, IDENT, MASK1, CVT1) \
static inline T NAME(const T *a, Py_ssize_t n, T acc, int *nan) { \
    Py_ssize_t i = 0; \
    V1 m = SET1_1(acc), u1 = ZERO1(); \
    if (n >= 4 * W) { \
        V m0 = SET1(acc), m1 = m0, m2 = m0, m3 = m0; \
        for (; i + 4 * W <= n; i += 4 * W) { \
            V v0 = LOAD(a + i), v1 = LOAD(a + i + W), v2 = LOAD(a + i + 2 * W), v3 = LOAD(a + i + 3 * W); \
            V u = OR(UNORD(v0, v1), UNORD(v2, v3)); \
            if (!TESTZ(u, u)) { *nan = 1; return acc; } \
            m0 = VEXT(v0, m0); m1 = VEXT(v1, m1); m2 = VEXT(v2, m2); m3 = VEXT(v3, m3); \
        } \
        T lanes[W]; \
        STORE(lanes, VEXT(VEXT(m0, m1), VEXT(m2, m3))); \
        for (int j = 0; j < W; j++) STEP(m, u1, lanes[j], EXT1, IDENT); \
    } \
    for (; i < n; i++) STEP(m, u1, a[i], EXT1, IDENT); \
    *nan |= MASK1(u1) & 1; return CVT1(m); \
}
#define NT_UNORD_PD(a, b) _mm256_cmp_pd(a, b, _CMP_UNORD_Q)
#define NT_UNORD_PS(a, b) _mm256_cmp_ps(a, b, _CMP_UNORD_Q)
NT_EXTREME_V(nt_max_f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_set1_pd, _mm256_storeu_pd, _mm256_max_pd,
             NT_UNORD_PD, _mm256_or_pd, _mm256_testz_pd, __m128d, _mm_setzero_pd, _mm_set_sd,
             NT_QSTEP_F64, _mm_max_sd, -INFINITY, _mm_movemask_pd, _mm_cvtsd_f64)
NT_EXTREME_V(nt_min_f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_set1_pd, _mm256_storeu_pd, _mm256_min_pd,
             NT_UNORD_PD, _mm256_or_pd, _mm256_testz_pd, __m128d, _mm_setzero_pd, _mm_set_sd,
             NT_QSTEP_F64, _mm_min_sd, INFINITY, _mm_movemask_pd, _mm_cvtsd_f64)
NT_EXTREME_V(nt_max_f32, float, __m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_storeu_ps, _mm256_max_ps,
             NT_UNORD_PS, _mm256_or_ps, _mm256_testz_ps, __m128, _mm_setzero_ps, _mm_set_ss,
             NT_QSTEP_F32, _mm_max_ss, -INFINITY, _mm_movemask_ps, _mm_cvtss_f32)
NT_EXTREME_V(nt_min_f32, float, __m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_storeu_ps, _mm256_min_ps,
             NT_UNORD_PS, _mm256_or_ps, _mm256_testz_ps, __m128, _mm_setzero_ps, _mm_set_ss,
             NT_QSTEP_F32, _mm_min_ss, INFINITY, _mm_movemask_ps, _mm_cvtss_f32)
#else
NT_EXTREME(nt_max_f32, float, NT_GT, NT_MAX_PRAGMA)
NT_EXTREME(nt_max_f64, double, NT_GT, NT_MAX_PRAGMA)
NT_EXTREME(nt_min_f32, float, NT_LT, NT_MIN_PRAGMA)
NT_EXTREME(nt_min_f64, double, NT_LT, NT_MIN_PRAGMA)
#endif

/* Max/min of each of `rows` rows of n elements (row i at a + i * n) into the element at out + i * so
 * bytes: the block extreme above from `init` (_acc_init's), NaN where the row holds one (_acc_store's
 * default NaN, or the row's one element, bits and all, where n is 1: blocks.pxi's _lone_nan), in
 * one loop without a call per row (a row of ten elements costs about as much as the call). */
#define NT_ROWS_EXTREME(NAME, EXT, T, RESULT) \
static inline void NAME(const T *a, Py_ssize_t n, Py_ssize_t rows, char *out, Py_ssize_t so, T init) { \
    for (Py_ssize_t i = 0; i < rows; i++) { \
        int nan = 0; T m = EXT(a + i * n, n, init, &nan); \
        m = RESULT(m, nan, T, a[i * n], n); memcpy(out + i * so, &m, sizeof m); \
    } \
}
#define NT_OR_NAN(m, nan, T, first, n) ((nan) ? ((n) == 1 ? (first) : (T)NAN) : (m))
#define NT_AS_IS(m, nan, T, first, n) (m)
/* nt_row<KIND>_<dtype> for the five dtypes the block extremes above take (KIND: max or min). */
#define NT_ROWS_EXTREMES(KIND) \
    NT_ROWS_EXTREME(nt_row##KIND##_f32, nt_##KIND##_f32, float, NT_OR_NAN) \
    NT_ROWS_EXTREME(nt_row##KIND##_f64, nt_##KIND##_f64, double, NT_OR_NAN) \
    NT_ROWS_EXTREME(nt_row##KIND##_i32, nt_##KIND##_i32, int32_t, NT_AS_IS) \
    NT_ROWS_EXTREME(nt_row##KIND##_i64, nt_##KIND##_i64, int64_t, NT_AS_IS) \
    NT_ROWS_EXTREME(nt_row##KIND##_u8, nt_##KIND##_u8, uint8_t, NT_AS_IS)
NT_ROWS_EXTREMES(max)
NT_ROWS_EXTREMES(min)

/* Column reductions of r rows by ncol columns, row i starting rs elements after row i-1 (a block
 * in a register, rs == ncol, or the operand itself, folded in place): the block is swept four rows
 * at a time, so the inner loop runs along contiguous memory and vectorizes (as NumPy reduces a
 * leading axis) and each accumulator is loaded and stored once per four rows. */
#define NT_COL_ROWS(T, BODY4, BODY1) \
    Py_ssize_t i = 0; \
    for (; i + 4 <= r; i += 4) { \
        const T *x0 = x + i * rs, *x1 = x0 + rs, *x2 = x1 + rs, *x3 = x2 + rs; \
        _Pragma("omp simd") \
        for (Py_ssize_t c = 0; c < ncol; c++) { BODY4 } \
    } \
    for (; i < r; i++) { \
        const T *x0 = x + i * rs; \
        _Pragma("omp simd") \
        for (Py_ssize_t c = 0; c < ncol; c++) { BODY1 } \
    }

/* Column max/min into m[c], flagging NaNs in nan[c]: the comparison of NT_EXTREME (a NaN is never
 * kept; the flagged column's result is NaN, so which value a NaN displaced does not matter). */
#define NT_PICK(a, b, CMP) (CMP(a, b) ? (a) : (b))
#define NT_COL_EXTREME(NAME, T, CMP) \
static inline void NAME(const T *x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, T *m, int *nan) { \
    NT_COL_ROWS(T, \
        T v0 = x0[c]; T v1 = x1[c]; T v2 = x2[c]; T v3 = x3[c]; \
        nan[c] |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3); \
        T p = NT_PICK(v0, v1, CMP); T q = NT_PICK(v2, v3, CMP); T pq = NT_PICK(p, q, CMP); \
        m[c] = NT_PICK(pq, m[c], CMP);, \
        T v = x0[c]; nan[c] |= (v != v); m[c] = NT_PICK(v, m[c], CMP);) \
}
/* Float columns: W columns at a time with quiet vector compares (nt_qcmp.h), in NT_COL_EXTREME's
 * order (a NaN is never kept; its column is flagged from an unordered compare's lanes). */
#ifdef NT_QCMP_VECTORS
#define NT_QPICK(SUF, a, b, P) nt_qv_pick_##SUF(nt_qv_cmp_##SUF(a, b, P), a, b)
#define NT_COL_EXTREME_Q(NAME, T, SUF, CMP, P) \
NT_COL_EXTREME(NAME##_s, T, CMP) \
static inline void NAME(const T *x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, T *m, int *nan) { \
    Py_ssize_t c = 0; \
    for (; c + NT_QV_W_##SUF <= ncol; c += NT_QV_W_##SUF) { \
        nt_qv_##SUF acc = nt_qv_load_##SUF(m + c); \
        nt_qm_##SUF bad = nt_qv_cmp_##SUF(acc, acc, _CMP_UNORD_Q); \
        Py_ssize_t i = 0; \
        for (; i + 4 <= r; i += 4) { \
            const T *x0 = x + i * rs + c; \
            nt_qv_##SUF v0 = nt_qv_load_##SUF(x0), v1 = nt_qv_load_##SUF(x0 + rs); \
            nt_qv_##SUF v2 = nt_qv_load_##SUF(x0 + 2 * rs), v3 = nt_qv_load_##SUF(x0 + 3 * rs); \
            bad = nt_qv_or_##SUF(bad, nt_qv_or_##SUF(nt_qv_cmp_##SUF(v0, v1, _CMP_UNORD_Q), \
                                                     nt_qv_cmp_##SUF(v2, v3, _CMP_UNORD_Q))); \
            nt_qv_##SUF pq = NT_QPICK(SUF, NT_QPICK(SUF, v0, v1, P), NT_QPICK(SUF, v2, v3, P), P); \
            acc = NT_QPICK(SUF, pq, acc, P); \
        } \
        for (; i < r; i++) { \
            nt_qv_##SUF v = nt_qv_load_##SUF(x + i * rs + c); \
            bad = nt_qv_or_##SUF(bad, nt_qv_cmp_##SUF(v, v, _CMP_UNORD_Q)); \
            acc = NT_QPICK(SUF, v, acc, P); \
        } \
        nt_qv_store_##SUF(m + c, acc); \
        int bits = nt_qv_bits_##SUF(bad); \
        if (bits) for (int j = 0; j < NT_QV_W_##SUF; j++) nan[c + j] |= (bits >> j) & 1; \
    } \
    if (c < ncol) NAME##_s(x + c, ncol - c, rs, r, m + c, nan + c); \
}
NT_COL_EXTREME_Q(nt_colmax_f32, float, f32, NT_GT, _CMP_GT_OQ)
NT_COL_EXTREME_Q(nt_colmax_f64, double, f64, NT_GT, _CMP_GT_OQ)
#else
NT_COL_EXTREME(nt_colmax_f32, float, NT_GT)
NT_COL_EXTREME(nt_colmax_f64, double, NT_GT)
#endif
NT_COL_EXTREME(nt_colmax_i32, int32_t, NT_GT)
NT_COL_EXTREME(nt_colmax_i64, int64_t, NT_GT)
NT_COL_EXTREME(nt_colmax_u8, uint8_t, NT_GT)
#ifdef NT_QCMP_VECTORS
NT_COL_EXTREME_Q(nt_colmin_f32, float, f32, NT_LT, _CMP_LT_OQ)
NT_COL_EXTREME_Q(nt_colmin_f64, double, f64, NT_LT, _CMP_LT_OQ)
#else
NT_COL_EXTREME(nt_colmin_f32, float, NT_LT)
NT_COL_EXTREME(nt_colmin_f64, double, NT_LT)
#endif
NT_COL_EXTREME(nt_colmin_i32, int32_t, NT_LT)
NT_COL_EXTREME(nt_colmin_i64, int64_t, NT_LT)
NT_COL_EXTREME(nt_colmin_u8, uint8_t, NT_LT)

/* Column sums into s[c] (a float in double, an int64 in uint64 so it wraps as NumPy's does), adding
 * the rows in order: for float64 the same additions, in the same order, as NumPy's reduction over
 * a leading axis. */
#define NT_COL_SUM(NAME, T, A) \
static inline void NAME(const T *x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, A *s) { \
    NT_COL_ROWS(T, s[c] = s[c] + (A)x0[c] + (A)x1[c] + (A)x2[c] + (A)x3[c];, s[c] += (A)x0[c];) \
}
/* a + b keeping a where it is a NaN: of two NaN operands an addition gives its first source's, and
 * the compiler may swap the operands of +, so a float column's first NaN (NumPy's, which adds each
 * row to the sum so far) is kept by this test, not by the order of the operands. */
#define NT_ADD_KEEP_NAN(a, b) ((a) != (a) ? (a) : (a) + (b))
#define NT_COL_SUM_F(NAME, T) \
static inline void NAME(const T *x, Py_ssize_t ncol, Py_ssize_t rs, Py_ssize_t r, double *s) { \
    NT_COL_ROWS(T, double t = NT_ADD_KEEP_NAN(s[c], (double)x0[c]); t = NT_ADD_KEEP_NAN(t, (double)x1[c]); \
                t = NT_ADD_KEEP_NAN(t, (double)x2[c]); s[c] = NT_ADD_KEEP_NAN(t, (double)x3[c]);, \
                s[c] = NT_ADD_KEEP_NAN(s[c], (double)x0[c]);) \
}
NT_COL_SUM_F(nt_colsum_f32, float)
NT_COL_SUM_F(nt_colsum_f64, double)
NT_COL_SUM(nt_colsum_i64, int64_t, uint64_t)

#endif
