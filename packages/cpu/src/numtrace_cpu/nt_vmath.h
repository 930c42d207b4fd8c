/* Vectorizable float64 math for the fused pass's float-unary instructions (exp, expm1, exp2, log,
 * log1p, log2, log10, sin, cos, tanh, arcsin, arctan) and the faster block loops of the other
 * float-unary ops (nt_float_unary_fast_*; the rest run their nt_opcodes.h expression, nt_loops.h).
 *
 * Why: glibc's scalar exp/log/sin/cos cost 5-12 ns an element, and calling them through a switch
 * per element kept even floor or 1/x from vectorizing.  Here each function is written branch-free
 * on doubles and 64-bit integers (no int64<->double conversions, which AVX2 lacks), so GCC turns
 * an `omp simd` loop over it into 4-lane AVX2 / 8-lane AVX-512 code.  The algorithms are fdlibm's
 * (as in musl) with Cody-Waite argument reduction, the reduction's rounding error carried along;
 * over dense sweeps against a long-double reference they stay within the ulp bounds docs/cpu.md
 * states (tests/test_vmath.py checks them).
 *
 * Nothing outside a function's fast range is approximated: each function has a `_slow` predicate
 * (NaN, infinities, overflow and underflow edges, subnormal log inputs, |x| too large for the
 * reduction), and the lanes it flags are recomputed with the C library's function, so special
 * values are exactly libm's (= NumPy's).  float32 blocks run the same double kernels and round the
 * result once.  The kernels rely on fused multiply-add for the exact first step of the sin/cos
 * reduction, so only builds with FMA (the AVX2 and AVX-512 ones) use them; the baseline build
 * keeps libm, in the table's per-op loops. */
#ifndef NT_VMATH_H
#define NT_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "nt_opcodes.h"
#include "nt_simd.h"

/* Elements per chunk of a vector-math loop: a chunk's lane flags live in a stack array this size. */
#define NT_VCHUNK 256

#if defined(__FMA__)

static inline uint64_t nt_dbits(double x) { uint64_t i; memcpy(&i, &x, 8); return i; }
static inline double nt_bitsd(uint64_t i) { double x; memcpy(&x, &i, 8); return x; }

/* Range checks on a double's bits: integer compares raise no flag, where a NaN in a float compare
 * would raise invalid (its bits lie above inf's, so it falls outside every finite range), and they
 * vectorize as cheaply as a float compare. Both are read as signed: a negative x orders below every
 * positive one. */
static inline int64_t nt_sbits(double x) { return (int64_t)nt_dbits(x); }
static inline int64_t nt_abits(double x) { return (int64_t)(nt_dbits(x) & 0x7fffffffffffffffULL); }
#define NT_ABS_BELOW(x, c) (nt_abits(x) < nt_sbits(c))   /* |x| < c for a positive finite c; NaN: 0 */
#define NT_ABS_AT_MOST(x, c) (nt_abits(x) <= nt_sbits(c))

/* `fast` where `slow` is 0, else `other`. A chunk runs its kernel on every lane, x replaced by 1.0 (in
 * every kernel's fast range) where the lane is flagged (nt_fast_arg): a NaN or infinity there would
 * raise invalid in its compares or its inf - inf, where the C library's function that recomputes the
 * lane raises none. Bit selects, not `?:`: behind a branch on
 * the flag the compiler would know the lane unflagged and fold the replacement away. */
static inline double nt_fast_pick(double fast, double other, int64_t slow) {
    uint64_t keep = (uint64_t)slow - 1;
    return nt_bitsd((nt_dbits(fast) & keep) | (nt_dbits(other) & ~keep));
}
static inline double nt_fast_arg(double x, int64_t slow) { return nt_fast_pick(x, 1.0, slow); }

/* Adding 1.5 * 2^52 rounds a double below 2^51 in magnitude to an integer, which then sits in the
 * low mantissa bits (two's complement, relative to the constant's bits). */
#define NT_SHIFT 0x1.8p52
#define NT_LN2_HI 6.93147180369123816490e-01   /* 32 trailing zero bits: k * NT_LN2_HI is exact */
#define NT_LN2_LO 1.90821492927058770002e-10

/* Small integer k (|k| < 2^51) as a double, without a conversion instruction. */
static inline double nt_i2d(uint64_t k) { return nt_bitsd(nt_dbits(NT_SHIFT) + k) - NT_SHIFT; }

/* P(r) = (e^r - 1 - r) / r^2 for |r| <= ln2/2 + a little: Taylor's to degree 13 in e^r
 * (truncation below 1e-17 relative). */
static inline double nt_exp_poly(double r) {
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    return p;
}

/* expm1(r + rlo) for |r| <= ln2/2 + a little, as hi + *lo: r + r^2 P(r), the last addition's error
 * and rlo (1 + e) kept in *lo. */
static inline double nt_expm1_kernel(double r, double rlo, double *lo) {
    double p = nt_exp_poly(r);
    double t = (r * r) * p;
    double hi = r + t;
    *lo = ((r - hi) + t) + (rlo + rlo * hi);
    return hi;
}

/* a + b = hi + *lo exactly (Knuth's two-sum). */
static inline double nt_two_sum(double a, double b, double *lo) {
    double hi = a + b, bb = hi - a;
    *lo = (a - (hi - bb)) + (b - bb);
    return hi;
}

/* x = k ln2 + r + rlo: returns r, its rounding error in *rlo, and k (as the bits to add to an
 * exponent field, k << 52, and as a double). */
static inline double nt_exp_reduce(double x, double *rlo, uint64_t *k52, double *kd) {
    double kf = x * 0x1.71547652b82fep0 + NT_SHIFT;
    double k = kf - NT_SHIFT;
    *kd = k;
    *k52 = (nt_dbits(kf) - nt_dbits(NT_SHIFT)) << 52;
    double hi = x - k * NT_LN2_HI, lo = k * NT_LN2_LO;
    double r = hi - lo;
    *rlo = (hi - r) - lo;
    return r;
}

/* expm1(x) = (2^k - 1) + 2^k expm1(r) as hi + *lo: 2^k - 1 is exact for the k that matter and
 * 2^k expm1(r) too (a power of two times a double), so only their sum is rounded, with its error
 * kept.  |x| < 708. */
static inline double nt_expm1_hilo(double x, double *lo) {
    uint64_t k52; double kd, rlo, elo, slo;
    double r = nt_exp_reduce(x, &rlo, &k52, &kd);
    double s = nt_bitsd(nt_dbits(1.0) + k52);
    double e = nt_expm1_kernel(r, rlo, &elo);
    double hi = nt_two_sum(s * e, s - 1.0, &slo);
    *lo = slo + s * elo;
    return hi;
}

/* exp on |x| < 708, where the result and 2^k are normal: 2^k is added to the exponent field of
 * y = e^(r + rlo) = 1 + r + (t + rlo), t = r^2 P(r).  1 + r is kept exactly as s + slo, and only
 * the last sum s + (t + rlo + slo) is rounded at y's scale (the rest is far smaller): within 0.7
 * ulp without carrying a hi + lo pair through expm1's kernel.  nt_vexp_inf also gives e^-inf = +0,
 * with no flag as libm's: a masked softmax's -inf lanes stay in the vector loop instead of each
 * calling the C library; its chunk (nt_vchunk_exp_*) runs nt_vexp, without that select, where no
 * lane is -inf. A finite x <= -708 is the C library's, which raises underflow as NumPy's loop does. */
static inline int nt_exp_neginf(double x) { return nt_dbits(x) == 0xfff0000000000000ULL; }
static inline int nt_exp_slow(double x) { return !(NT_ABS_BELOW(x, 708.0) | nt_exp_neginf(x)); }
static inline double nt_vexp(double x) {
    uint64_t k52; double kd, rlo;
    double r = nt_exp_reduce(x, &rlo, &k52, &kd);
    double p = nt_exp_poly(r);
    double s = 1.0 + r, slo = (1.0 - s) + r;   /* 1 + r exactly, as s + slo (|r| < 1) */
    double y = s + (((r * r) * p + rlo) + slo);
    return nt_bitsd(nt_dbits(y) + k52);
}
static inline double nt_vexp_inf(double x) {
    const int zero = nt_exp_neginf(x);
    double y = nt_vexp(nt_fast_pick(x, 0.0, zero));   /* -inf: no inf - inf */
    return zero ? 0.0 : y;
}

/* exp2 on |x| < 1020: x = k + f exactly (|f| <= 1/2), r + rlo = f ln2 (the product's error by FMA). */
static inline int nt_exp2_slow(double x) { return !NT_ABS_BELOW(x, 1020.0); }
static inline double nt_vexp2(double x) {
    double kf = x + NT_SHIFT;
    double f = x - (kf - NT_SHIFT);
    uint64_t k52 = (nt_dbits(kf) - nt_dbits(NT_SHIFT)) << 52;
    double r = f * 0x1.62e42fefa39efp-1;
    double rlo = fma(f, 0x1.62e42fefa39efp-1, -r) + f * 0x1.abc9e3b39803fp-56;
    double elo, ylo;
    double e = nt_expm1_kernel(r, rlo, &elo);
    double y = nt_two_sum(1.0, e, &ylo);
    return nt_bitsd(nt_dbits(y + (ylo + elo)) + k52);
}

/* expm1 = (2^k - 1) + 2^k expm1(r): 2^k - 1 is exact for the k that matter, one rounding after. */
static inline int nt_expm1_slow(double x) { return !NT_ABS_BELOW(x, 708.0); }
static inline double nt_vexpm1(double x) {
    double lo;
    double y = nt_expm1_hilo(x, &lo);
    y += lo;
    return fabs(x) < 0x1p-54 ? x : y;      /* keeps -0.0 (the kernel would give +0.0) */
}

/* tanh(|x|) = -e / (e + 2) with e = expm1(-2|x|) (as glibc), e and e + 2 carried as hi + lo and
 * the quotient corrected by one Newton step on its remainder; 1 beyond 20, where tanh rounds to 1;
 * x itself below 2^-27, where it is the correctly rounded result (and -0.0 stays -0.0). */
static inline int nt_tanh_slow(double x) { return x != x; }
static inline double nt_vtanh(double x) {
    double ax = fabs(x);
    double t = ax > 20.0 ? 20.0 : ax;
    double elo, dlo;
    double e = nt_expm1_hilo(-2.0 * t, &elo);
    double den = nt_two_sum(e, 2.0, &dlo);
    dlo += elo;
    double q = -e / den;
    q += (fma(-q, den, -e) - elo - q * dlo) / den;
    double y = ax > 20.0 ? 1.0 : q;
    y = copysign(y, x);
    return ax < 0x1p-27 ? x : y;
}

/* x = 2^k (1+f), 1+f in [sqrt(1/2), sqrt(2)) (musl's log): returns f, with hfsq = f^2/2, *sr = the
 * rest of log(1+f) = f - hfsq + sr, and k as a double.  x must be positive, finite and normal. */
static inline double nt_log_parts(double x, double *hfsq, double *sr, double *dk) {
    uint64_t ui = nt_dbits(x) + ((uint64_t)(0x3ff00000 - 0x3fe6a09e) << 32);
    uint64_t k = (ui >> 52) - 0x3ff;
    ui = (ui & 0x000fffffffffffffULL) + ((uint64_t)0x3fe6a09e << 32);
    double f = nt_bitsd(ui) - 1.0;
    double h = 0.5 * f * f;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    double t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01
                + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    *hfsq = h;
    *sr = s * (h + t1 + t2);
    *dk = nt_i2d(k);
    return f;
}

/* log(x) + c (c is log1p's correction term, 0 for log). */
static inline double nt_log_kernel(double x, double c) {
    double hfsq, sr, dk;
    double f = nt_log_parts(x, &hfsq, &sr, &dk);
    return sr + (dk * NT_LN2_LO + c) - hfsq + f + dk * NT_LN2_HI;
}

static inline int nt_log_slow(double x) {
    return !((nt_sbits(x) >= nt_sbits(0x1p-1022)) & (nt_sbits(x) < nt_sbits(INFINITY)));
}
static inline double nt_vlog(double x) { return nt_log_kernel(x, 0.0); }

/* log2 and log10 (musl): log(1+f) split into hi (21 bits, so hi * C_hi is exact) + lo before the
 * scaling, and k (times log10(2) in two parts) added with its rounding error kept. */
static inline double nt_log_hilo(double x, double *lo, double *dk) {
    double hfsq, sr;
    double f = nt_log_parts(x, &hfsq, &sr, dk);
    double hi = nt_bitsd(nt_dbits(f - hfsq) & 0xffffffff00000000ULL);
    *lo = f - hi - hfsq + sr;
    return hi;
}
static inline double nt_vlog2(double x) {
    const double c_hi = 1.44269504072144627571e+00, c_lo = 1.67517131648865118353e-10;
    double lo, dk;
    double hi = nt_log_hilo(x, &lo, &dk);
    double vhi = hi * c_hi, vlo = (lo + hi) * c_lo + lo * c_hi;
    double w = dk + vhi;
    return (vlo + ((dk - w) + vhi)) + w;
}
static inline double nt_vlog10(double x) {
    const double c_hi = 4.34294481878168880939e-01, c_lo = 2.50829467116452752298e-11;
    double lo, dk;
    double hi = nt_log_hilo(x, &lo, &dk);
    double y2 = dk * 3.01029995663611771306e-01;
    double vhi = hi * c_hi, vlo = dk * 3.69423907715893078616e-13 + (lo + hi) * c_lo + lo * c_hi;
    double w = y2 + vhi;
    return (vlo + ((y2 - w) + vhi)) + w;
}

/* log1p: log of u = 1 + x plus the rounding error of the sum, c ~ (x - (u - 1)) / u (musl). */
/* Fast on (-1, inf): |x| < 1 of either sign, or a positive finite x. */
static inline int nt_log1p_slow(double x) {
    return !(NT_ABS_BELOW(x, 1.0) | ((nt_sbits(x) >= 0) & (nt_sbits(x) < nt_sbits(INFINITY))));
}
static inline double nt_vlog1p(double x) {
    double u = 1.0 + x;
    double c = (u >= 2.0 ? 1.0 - (u - x) : x - (u - 1.0)) / u;
    double y = nt_log_kernel(u, c);
    return fabs(x) < 0x1p-54 ? x : y;
}

/* sin and cos: x = n pi/2 + r, |r| <= pi/4 (a little more where x * 2/pi rounds up).  With FMA the
 * first step x - n*P1 is exact (both are multiples of 2^-53 and the difference is below 1), the
 * second is rounded once and its rounding error kept as a tail y (fdlibm's kernels take r + y), so
 * the reduced argument is good to far below an ulp whatever the cancellation. */
#define NT_PIO2_1 0x1.921fb54442d18p+0
#define NT_PIO2_2 0x1.1a62633145c07p-54
#define NT_PIO2_3 (-0x1.f1976b7ed8fbcp-110)

static inline int nt_trig_slow(double x) { return !NT_ABS_BELOW(x, 0x1p28); }
static inline double nt_vsincos(double x, uint64_t quadrant) {
    double kf = x * 0x1.45f306dc9c883p-1 + NT_SHIFT;
    double n = kf - NT_SHIFT;
    uint64_t q = nt_dbits(kf) + quadrant;
    double r1 = fma(-n, NT_PIO2_1, x);
    double r = fma(-n, NT_PIO2_2, r1);
    double y = fma(-n, NT_PIO2_3, fma(-n, NT_PIO2_2, r1 - r));   /* r's rounding error, the tail */
    double z = r * r, w = z * z;
    double sr = 8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * 2.75573137070700676789e-06)
        + z * w * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10);
    double v = z * r;
    double sn = r - ((z * (0.5 * y - v * sr) - y) - v * -1.66666666666666324348e-01);
    double cr = z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * 2.48015872894767294178e-05))
        + w * w * (-2.75573143513906633035e-07 + z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11));
    double hz = 0.5 * z, cw = 1.0 - hz;
    double cs = cw + (((1.0 - cw) - hz) + (z * cr - r * y));
    double res = (q & 1) ? cs : sn;
    return nt_bitsd(nt_dbits(res) ^ ((q & 2) << 62));
}
static inline double nt_vsin(double x) { return nt_vsincos(x, 0); }
static inline double nt_vcos(double x) { return nt_vsincos(x, 1); }

/* arcsin (fdlibm): x + x R(x^2) below 0.5; above, pi/2 - 2 asin(sqrt((1-|x|)/2)) with the square
 * root split in two parts below 0.975 so the subtraction keeps full precision. */
static inline int nt_asin_slow(double x) { return !NT_ABS_AT_MOST(x, 1.0); }
static inline double nt_asin_r(double z) {
    double p = z * (1.66666666666666657415e-01 + z * (-3.25565818622400915405e-01 + z * (2.01212532134862925881e-01
        + z * (-4.00555345006794114027e-02 + z * (7.91534994289814532176e-04 + z * 3.47933107596021167570e-05)))));
    double q = 1.0 + z * (-2.40339491173441421878e+00 + z * (2.02094576023350569471e+00
        + z * (-6.88283971605453293030e-01 + z * 7.70381505559019352791e-02)));
    return p / q;
}
static inline double nt_vasin(double x) {
    const double pio2_hi = 1.57079632679489655800e+00, pio2_lo = 6.12323399573676603587e-17;
    double ax = fabs(x);
    int small = ax < 0.5;
    double z = small ? x * x : (1.0 - ax) * 0.5;
    double r = nt_asin_r(z);
    double s = sqrt(z);
    double f = nt_bitsd(nt_dbits(s) & 0xffffffff00000000ULL);
    double sf = s + f;   /* 0 where z is (x = 0, +-1): 0 / 0 would raise invalid; c is then 0 */
    double c = (z - f * f) / (sf + (double)(sf == 0.0));
    double near1 = pio2_hi - (2.0 * (s + s * r) - pio2_lo);
    double mid = 0.5 * pio2_hi - (2.0 * s * r - (pio2_lo - 2.0 * c) - (0.5 * pio2_hi - 2.0 * f));
    double big = copysign(ax >= 0.975 ? near1 : mid, x);
    return small ? x + x * r : big;
}

/* arctan (fdlibm): |x| is mapped by one of five Moebius maps, picked by range, to t with
 * |t| <= 7/16, then atan(|x|) = atan(c) + atan(t) with atan(c) in two parts; the branches are
 * selects, and a single division serves every range. */
static inline int nt_atan_slow(double x) { return x != x; }
static inline double nt_vatan(double x) {
    double ax = fabs(x);
    int r0 = ax >= 0.4375, r1 = ax >= 0.6875, r2 = ax >= 1.1875, r3 = ax >= 2.4375;
    double num = r3 ? -1.0 : r2 ? ax - 1.5 : r1 ? ax - 1.0 : r0 ? 2.0 * ax - 1.0 : ax;
    double den = r3 ? ax : r2 ? 1.0 + 1.5 * ax : r1 ? ax + 1.0 : r0 ? 2.0 + ax : 1.0;
    double hi = r3 ? 1.57079632679489655800e+00 : r2 ? 9.82793723247329054082e-01
        : r1 ? 7.85398163397448278999e-01 : 4.63647609000806093515e-01;
    double lo = r3 ? 6.12323399573676603587e-17 : r2 ? 1.39033110312309984516e-17
        : r1 ? 3.06161699786838301793e-17 : 2.26987774529616870924e-17;
    double t = num / den;
    double z = t * t, w = z * z;
    double s1 = z * (3.33333333333329318027e-01 + w * (1.42857142725034663711e-01 + w * (9.09088713343650656196e-02
        + w * (6.66107313738753120669e-02 + w * (4.97687799461593236017e-02 + w * 1.62858201153657823623e-02)))));
    double s2 = w * (-1.99999999998764832476e-01 + w * (-1.11111104054623557880e-01 + w * (-7.69187620504482999495e-02
        + w * (-5.83357013379057348645e-02 + w * -3.65315727442169155270e-02))));
    double y = r0 ? hi - ((t * (s1 + s2) - lo) - t) : t - t * (s1 + s2);
    return copysign(y, x);
}

/* The functions with a fast kernel: V(ENUM, libm function, kernel, fast-range predicate, the macro
 * that defines its chunk function). */
#define NT_VMATH_FUNCS(V, T, SUF) \
    V(T, SUF, EXP, exp, nt_vexp_inf, nt_exp_slow, NT_VEXP_CHUNK) \
    V(T, SUF, EXPM1, expm1, nt_vexpm1, nt_expm1_slow, NT_VMATH_CHUNK) \
    V(T, SUF, EXP2, exp2, nt_vexp2, nt_exp2_slow, NT_VMATH_CHUNK) \
    V(T, SUF, LOG, log, nt_vlog, nt_log_slow, NT_VMATH_CHUNK) \
    V(T, SUF, LOG1P, log1p, nt_vlog1p, nt_log1p_slow, NT_VMATH_CHUNK) \
    V(T, SUF, LOG2, log2, nt_vlog2, nt_log_slow, NT_VMATH_CHUNK) \
    V(T, SUF, LOG10, log10, nt_vlog10, nt_log_slow, NT_VMATH_CHUNK) \
    V(T, SUF, SIN, sin, nt_vsin, nt_trig_slow, NT_VMATH_CHUNK) \
    V(T, SUF, COS, cos, nt_vcos, nt_trig_slow, NT_VMATH_CHUNK) \
    V(T, SUF, TANH, tanh, nt_vtanh, nt_tanh_slow, NT_VMATH_CHUNK) \
    V(T, SUF, ARCSIN, asin, nt_vasin, nt_asin_slow, NT_VMATH_CHUNK) \
    V(T, SUF, ARCTAN, atan, nt_vatan, nt_atan_slow, NT_VMATH_CHUNK)

/* One function's vector loop over m elements (m a multiple of NT_VPAD): d[i] = kernel(a[i]), or a[i]
 * itself where the predicate flags it (bad[i] = 1; d may equal a, so x is kept in d); returns
 * whether any lane was flagged. The flags come first, in their own cheap loop, so that a chunk with
 * none (the usual case) runs the kernel without the bit selects that keep flagged lanes quiet; both
 * kernel loops inline the same FAST and differ only in integer selects around it. Not inlined, so
 * every element, tail included, runs these compiled vector bodies: a scalar remainder loop could
 * contract a*b+c into FMAs differently and make an element's last bit depend on its position. */
#define NT_VMATH_CHUNK(T, SUF, ENUM, LIBM, FAST, SLOW) \
__attribute__((noinline)) static int64_t nt_vchunk_##LIBM##_##SUF(T *d, const T *a, Py_ssize_t m, int64_t *bad) { \
    int64_t any = 0; \
    _Pragma("omp simd reduction(|:any)") \
    for (Py_ssize_t i = 0; i < m; i++) { int64_t b = SLOW((double)a[i]); bad[i] = b; any |= b; } \
    if (!any) { \
        _Pragma("omp simd") \
        for (Py_ssize_t i = 0; i < m; i++) d[i] = (T)FAST((double)a[i]); \
        return 0; \
    } \
    _Pragma("omp simd") \
    for (Py_ssize_t i = 0; i < m; i++) { \
        double x = (double)a[i]; int64_t b = bad[i]; \
        d[i] = (T)nt_fast_pick(FAST(nt_fast_arg(x, b)), x, b); \
    } \
    return any; \
}

/* exp's chunk: as NT_VMATH_CHUNK, but its first loop only tests |x| < 708 on every lane, and a chunk
 * where that holds runs nt_vexp, without the -inf select; otherwise a second test loop finds the
 * flagged lanes (-inf is not one), and a chunk without any (the -inf lanes of a masked softmax) runs
 * FAST on every lane. Only a chunk with flagged lanes writes its part of bad. */
#define NT_VEXP_CHUNK(T, SUF, ENUM, LIBM, FAST, SLOW) \
__attribute__((noinline)) static int64_t nt_vchunk_##LIBM##_##SUF(T *d, const T *a, Py_ssize_t m, int64_t *bad) { \
    int64_t big = 0, any = 0; \
    _Pragma("omp simd reduction(|:big)") \
    for (Py_ssize_t i = 0; i < m; i++) big |= !NT_ABS_BELOW((double)a[i], 708.0); \
    if (!big) { \
        _Pragma("omp simd") \
        for (Py_ssize_t i = 0; i < m; i++) d[i] = (T)nt_vexp((double)a[i]); \
        return 0; \
    } \
    _Pragma("omp simd reduction(|:any)") \
    for (Py_ssize_t i = 0; i < m; i++) any |= SLOW((double)a[i]); \
    if (!any) { \
        _Pragma("omp simd") \
        for (Py_ssize_t i = 0; i < m; i++) d[i] = (T)FAST((double)a[i]); \
        return 0; \
    } \
    _Pragma("omp simd") \
    for (Py_ssize_t i = 0; i < m; i++) { \
        double x = (double)a[i]; int64_t b = SLOW(x); bad[i] = b; \
        d[i] = (T)nt_fast_pick(FAST(nt_fast_arg(x, b)), x, b); \
    } \
    return any; \
}
#define NT_VMATH_MAKE(T, SUF, ENUM, LIBM, FAST, SLOW, CHUNK) CHUNK(T, SUF, ENUM, LIBM, FAST, SLOW)

/* Lanes per vector at most (16 floats on AVX-512): the chunk loop runs on multiples of it. */
#define NT_VPAD 16

/* A block through a chunk function: NT_VCHUNK elements at a time, the last < NT_VPAD through a
 * padded buffer, then the flagged lanes recomputed with the C library. A chunk call that returns 0
 * may leave its part of bad unwritten, so only the parts of calls that returned 1 are read. */
#define NT_VMATH_DRIVER(T, SUF) \
static inline void nt_vmath_drive_##SUF(int64_t (*chunk)(T *, const T *, Py_ssize_t, int64_t *), \
                                        double (*libm)(double), T *d, const T *a, Py_ssize_t n) { \
    int64_t bad[NT_VCHUNK + NT_VPAD]; \
    T buf[NT_VPAD]; \
    for (Py_ssize_t s = 0; s < n; s += NT_VCHUNK) { \
        Py_ssize_t m = n - s < NT_VCHUNK ? n - s : NT_VCHUNK, full = m - m % NT_VPAD; \
        int64_t any = full ? chunk(d + s, a + s, full, bad) : 0, any_tail = 0; \
        if (full < m) { \
            for (Py_ssize_t j = 0; j < NT_VPAD; j++) buf[j] = j < m - full ? a[s + full + j] : (T)0.5; \
            any_tail = chunk(buf, buf, NT_VPAD, bad + full); \
            for (Py_ssize_t j = 0; j < m - full; j++) d[s + full + j] = buf[j]; \
        } \
        for (Py_ssize_t i = any ? 0 : full; i < (any_tail ? m : full); i++) \
            if (bad[i]) d[s + i] = (T)libm((double)d[s + i]); \
    } \
}
NT_VMATH_FUNCS(NT_VMATH_MAKE, double, f64)
NT_VMATH_FUNCS(NT_VMATH_MAKE, float, f32)
NT_VMATH_DRIVER(double, f64)
NT_VMATH_DRIVER(float, f32)

#define NT_VMATH_CASE(T, SUF, ENUM, LIBM, FAST, SLOW, CHUNK) \
    case OP_##ENUM: nt_vmath_drive_##SUF(nt_vchunk_##LIBM##_##SUF, LIBM, d, a, n); return 1;
#define NT_VMATH_CASES(T, SUF) NT_VMATH_FUNCS(NT_VMATH_CASE, T, SUF)
#else
#define NT_VMATH_CASES(T, SUF)
#endif

/* float32 ops whose float result equals the double one rounded (correctly rounded or exact), so
 * they run on 8 float lanes instead of converting to 4 double lanes. */
#define NT_F32_LOOP(expr) \
    _Pragma("omp simd") \
    for (Py_ssize_t i_ = 0; i_ < n; i_++) { float x = a[i_]; d[i_] = (expr); } \
    return 1;
static inline int nt_float_unary_f32_exact(int op, float *d, const float *a, Py_ssize_t n) {
    switch (op) {
        case OP_SQRT: NT_F32_LOOP(sqrtf(x))
        case OP_RECIP: NT_F32_LOOP(1.0f / x)
        case OP_FLOOR: NT_F32_LOOP(floorf(x))
        case OP_CEIL: NT_F32_LOOP(ceilf(x))
        case OP_RINT: NT_F32_LOOP(rintf(x))
        case OP_TRUNC: NT_F32_LOOP(truncf(x))
        default: return 0;
    }
}

/* The faster loops of a float-unary opcode over a block (d may equal a), where this build has one:
 * 1 if one ran.  Otherwise nt_loops.h runs the op's table expression (nt_opcodes.h) in a plain loop,
 * which GCC vectorizes for the cheap ones (floor, sqrt, 1/x, ...). */
static inline int nt_float_unary_fast_f64(int op, double *d, const double *a, Py_ssize_t n) {
    switch (op) {
        NT_VMATH_CASES(double, f64)
        default: return 0;
    }
}
static inline int nt_float_unary_fast_f32(int op, float *d, const float *a, Py_ssize_t n) {
    if (op == OP_EXP) { nt_expf_loop(d, a, n); return 1; }
    if (op == OP_TANH) { nt_tanhf_loop(d, a, n); return 1; }
    if (nt_float_unary_f32_exact(op, d, a, n)) return 1;
    switch (op) {
        NT_VMATH_CASES(float, f32)
        default: return 0;
    }
}

#endif
