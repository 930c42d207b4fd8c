/* What a generated fused-pass kernel (numtrace_cpu.codegen) and the ISA build that runs it
 * (blocks.pxi) agree on: the kernel's signature, the unit geometry, and NumPy's casts.
 *
 * A generated kernel runs the work units [u0, u1) of a pass: for an elementwise pass the units of the
 * block interpreter's `_elementwise_unit` (NT_GEN_CHUNK elements of the innermost collapsed dim at
 * one multi-index of the outer dims), for a pass with reductions one kept multi-index each. `data` and `strides` (nops x NT_GEN_MAXD byte strides) are the
 * validated operands of FusedKernel._run, so the kernel only visits indices inside `shape`.
 * `loops` is the build's table of block loops (nt_loops.h's nt_block_loops, op * NCOMPUTE + dtype):
 * the generated code runs the float-unary ops through it, on tile buffers, so exp or sin give the
 * interpreter's bits (nt_vmath.h's kernels, compiled once with the build's flags). */
#ifndef NT_GEN_H
#define NT_GEN_H

#include <stdint.h>
#include <string.h>

#define NT_GEN_MAXD 64
#define NT_GEN_CHUNK 16384
#define NT_GEN_MAXCOLS 64   /* interp.pxd's MAXCOLS: most columns of a column-mode unit */

typedef void (*nt_gen_loop_fn)(char *d, const char *a, const char *b, Py_ssize_t n);

/* A pass's reductions as the build folds them (blocks.pxi's _acc_init, _fold, _acc_store for
 * reduction j of the pass `cx`), on accumulators of NT_GEN_ACC_BYTES the kernel keeps; nkept: the
 * pass's kept dims, which come first. */
#define NT_GEN_ACC_BYTES 128
typedef struct {
    void (*init)(const void *cx, int j, void *acc);
    void (*fold)(const void *cx, int j, void *acc, const char *x, Py_ssize_t n);
    void (*store)(const void *cx, int j, const void *acc, char *out);
    const void *cx;
    int nkept;
    /* Column mode (blocks.pxi's _columns_unit; cols 0: not in column mode): the dims are (kept...,
     * reduced, innermost kept); a unit is cols columns at one outer kept multi-index, folded in
     * blocks of `rows` reduced rows. store_sum stores a sum or mean (of float values, added in
     * double) whose running total is s over count rows, as _acc_store does. */
    Py_ssize_t cols, rows;
    void (*store_sum)(const void *cx, int j, double s, Py_ssize_t count, char *out);
    /* Row blocks (cols 0, rows > 1: blocks.pxi's _rows_unit, the pass reduces its short innermost
     * dim): rows of fewer elements than this the build sums one element after another from +0
     * (nt_simd.h's NT_SUM_SEQUENTIAL_BELOW), so a kernel may too; longer ones go through fold. */
    Py_ssize_t sequential_below;
    /* Bit k set: operand k is an output the kernel writes with streaming (non-temporal) stores where
     * it is contiguous (see nt_gen_stream); set by the runtime for large outputs no input shares. */
    uint64_t stream;
    /* > 1: a pass of short rows run in tiles of `tile_rows` whole rows (codegen's _rows_units for an
     * elementwise pass, _row_tile_units for one reducing its innermost dim; only kernels with that
     * path get it); else 1. */
    Py_ssize_t tile_rows;
    /* Reduction j of `rows` rows of n elements each (row i at x + i * n elements) into out + i * so
     * bytes: blocks.pxi's _fold_rows_of, the interpreter's own fold of a block of short rows. */
    void (*fold_rows)(const void *cx, int j, const char *x, Py_ssize_t n, Py_ssize_t rows, char *out,
                      Py_ssize_t so);
} nt_gen_reduce;

typedef void (*nt_gen_fn)(char *const *data, const Py_ssize_t *strides, const Py_ssize_t *shape, int nd,
                          Py_ssize_t u0, Py_ssize_t u1, const double *fc, const int64_t *ic,
                          const nt_gen_loop_fn *loops, const nt_gen_reduce *red);

/* A value converted as NumPy casts it (blocks.pxi's _convert): float to int32/int64 truncates, and
 * NaN or out-of-range gives the integer minimum (x86 behaviour) instead of C's undefined behaviour. */
#define NT_GEN_TO_BOOL(x) ((unsigned char)((x) != 0))
#define NT_GEN_F_TO_I32(x) (((x) >= -2147483648.0) & ((x) < 2147483648.0) ? (int32_t)(x) : INT32_MIN)
#define NT_GEN_F_TO_I64(x) (((x) >= -9223372036854775808.0) & ((x) < 9223372036854775808.0) ? (int64_t)(x) : INT64_MIN)
/* Whether x lies outside what those casts convert (an out-of-range value; a NaN's compare raises
 * 'invalid' itself). NumPy's cast of one raises 'invalid' (x86's truncating convert does), which the
 * casts above skip: a pass ORs these into a value and raises it with nt_gen_raise_invalid. */
#define NT_GEN_F_OUT_I32(x) (((x) < -2147483648.0) | ((x) >= 2147483648.0))
#define NT_GEN_F_OUT_I64(x) (((x) < -9223372036854775808.0) | ((x) >= 9223372036854775808.0))
static inline void nt_gen_raise_invalid(void) { volatile double z = 0.0; z = z / z; }
/* A zero the compiler cannot see (read once per kernel call): a float cast to an int is XORed with
 * it. Without it GCC folds (double)(int32_t)x, under -fno-trapping-math, into trunc(x) in scalar
 * loops, which keeps x's sign: -0.0 and -0.3 came back as -0.0 where NumPy's round trip gives +0.0. */
static volatile int64_t nt_gen_opaque_zero = 0;
/* A double the compiler cannot see through, for a cast of it to float: GCC folds (float)(double)x
 * of a float x into x, which keeps a signaling NaN x signaling and raises no 'invalid', where NumPy's
 * two casts quiet it and raise 'invalid'. XORing the double's bits with the opaque zero stops it. */
static inline double nt_gen_opaque_f64(double x, int64_t zero) {
    uint64_t u; memcpy(&u, &x, sizeof u); u ^= (uint64_t)zero; memcpy(&x, &u, sizeof u); return x;
}

/* a + b, or a itself where a is NaN: x86 gives the first operand's NaN where both are NaN, and the
 * compiler may swap a commutative add's operands, so a column's block totals (blocks.pxi's
 * _fold_columns, a generated kernel's column units) add through this to keep one NaN's sign. */
static inline double nt_gen_add(double a, double b) {
    return a != a ? a : a + b;
}

#ifdef NT_GEN_KERNEL
#include <string.h>
/* a + b as one scalar add with a as its first source, so of two NaN operands a's is kept: the first
 * NaN of a column a generated column block sums row by row (NumPy's, which adds each row to the sum
 * so far; nt_simd.h's nt_colsum keeps it with a test). The compiler may swap the operands of `+`,
 * and nt_gen_add's test lengthens the chain of dependent adds (half the speed on narrow columns). */
static inline double nt_gen_add_first(double a, double b) {
#if defined(__AVX__)
    __asm__("vaddsd %2, %1, %0" : "=x"(a) : "x"(a), "x"(b));
#else
    __asm__("addsd %1, %0" : "+x"(a) : "x"(b));
#endif
    return a;
}
/* part[c] = nt_gen_add_first(part[c], x[i * N + c]) for rows i in [0, r), N columns (2, 4 or 8) of
 * a tile of values (float or double) a column block computed in one vectorized loop: each row's
 * columns as one packed add with the running sums as its first source, which keeps the first
 * operand's NaN in each lane as the scalar add does, so each column adds up, NaN and flags, as
 * nt_gen_add_first's row-by-row sum would. Asm, as there: the compiler may swap the operands of an
 * add (an intrinsic's too). */
#if defined(__AVX__)
#define NT_GEN_PADD(A, B) __asm__("vaddpd %2, %1, %0" : "=v"(A) : "v"(A), "v"(B))
#else
#define NT_GEN_PADD(A, B) __asm__("addpd %1, %0" : "+x"(A) : "x"(B))
#endif
typedef double nt_gen_d2 __attribute__((vector_size(16), aligned(8)));
typedef float nt_gen_f2 __attribute__((vector_size(8), aligned(4)));
#if defined(__AVX__)
typedef double nt_gen_d4 __attribute__((vector_size(32), aligned(8)));
typedef float nt_gen_f4 __attribute__((vector_size(16), aligned(4)));
#endif
#if defined(__AVX512F__)
typedef double nt_gen_d8 __attribute__((vector_size(64), aligned(8)));
typedef float nt_gen_f8 __attribute__((vector_size(32), aligned(4)));
#endif
/* The lanes of N columns loaded from x (of type T) as doubles: a float widens exactly, as the
 * scalar block's (double) cast, a signaling NaN quieted with 'invalid' as there. */
#define NT_GEN_COLSUM(D, LOAD)                                                                  \
    do {                                                                                           \
        D s_;                                                                                      \
        memcpy(&s_, part, sizeof s_);                                                              \
        for (Py_ssize_t i = 0; i < r; i++) {                                                       \
            D v_ = LOAD;                                                                           \
            NT_GEN_PADD(s_, v_);                                                                   \
        }                                                                                          \
        memcpy(part, &s_, sizeof s_);                                                              \
    } while (0)
/* Columns of other counts (1, 3) through the scalar pinned add, the same sums. */
static inline void nt_gen_colsum_f64(double *part, const double *x, Py_ssize_t r, int n) {
    for (Py_ssize_t i = 0; i < r; i++)
        for (int c = 0; c < n; c++) part[c] = nt_gen_add_first(part[c], x[i * n + c]);
}
static inline void nt_gen_colsum_f32(double *part, const float *x, Py_ssize_t r, int n) {
    for (Py_ssize_t i = 0; i < r; i++)
        for (int c = 0; c < n; c++) part[c] = nt_gen_add_first(part[c], (double)x[i * n + c]);
}
/* N columns as two vectors D of N / 2 lanes each, two independent chains (8 columns without
 * AVX-512, 4 without AVX). */
#define NT_GEN_COLSUM_HALVES(N, D, LOAD)                                                           \
    do {                                                                                           \
        D lo_, hi_;                                                                                \
        memcpy(&lo_, part, sizeof lo_);                                                            \
        memcpy(&hi_, part + N / 2, sizeof hi_);                                                    \
        for (Py_ssize_t i = 0; i < r; i++) {                                                       \
            D a_ = LOAD(x + i * N), b_ = LOAD(x + i * N + N / 2);                                  \
            NT_GEN_PADD(lo_, a_);                                                                  \
            NT_GEN_PADD(hi_, b_);                                                                  \
        }                                                                                          \
        memcpy(part, &lo_, sizeof lo_);                                                            \
        memcpy(part + N / 2, &hi_, sizeof hi_);                                                    \
    } while (0)
#define NT_GEN_LD2(p) (*(const nt_gen_d2 *)(p))
#define NT_GEN_LF2(p) __builtin_convertvector(*(const nt_gen_f2 *)(p), nt_gen_d2)
#if defined(__AVX__)
#define NT_GEN_LD4(p) (*(const nt_gen_d4 *)(p))
#define NT_GEN_LF4(p) __builtin_convertvector(*(const nt_gen_f4 *)(p), nt_gen_d4)
#endif
#if defined(__AVX512F__)
#define NT_GEN_LD8(p) (*(const nt_gen_d8 *)(p))
#define NT_GEN_LF8(p) __builtin_convertvector(*(const nt_gen_f8 *)(p), nt_gen_d8)
#endif
/* The packed column sums of 4 and 8 columns on this build's widest vectors: one chain where a vector
 * holds them all, else two chains of half vectors (or the scalar pinned add, 8 without AVX). LD is D
 * (double) or F (float, widened), for the NT_GEN_L<LD><lanes> loads above. */
#if defined(__AVX__)
#define NT_GEN_COLSUM4_BODY(LD, SUF) NT_GEN_COLSUM(nt_gen_d4, NT_GEN_L##LD##4(x + 4 * i))
#else
#define NT_GEN_COLSUM4_BODY(LD, SUF) NT_GEN_COLSUM_HALVES(4, nt_gen_d2, NT_GEN_L##LD##2)
#endif
#if defined(__AVX512F__)
#define NT_GEN_COLSUM8_BODY(LD, SUF) NT_GEN_COLSUM(nt_gen_d8, NT_GEN_L##LD##8(x + 8 * i))
#elif defined(__AVX__)
#define NT_GEN_COLSUM8_BODY(LD, SUF) NT_GEN_COLSUM_HALVES(8, nt_gen_d4, NT_GEN_L##LD##4)
#else
#define NT_GEN_COLSUM8_BODY(LD, SUF) nt_gen_colsum_##SUF(part, x, r, 8)
#endif
#define NT_GEN_COLSUMS(SUF, T, LD)                                                                 \
static inline void nt_gen_colsum2_##SUF(double *part, const T *x, Py_ssize_t r) {                 \
    NT_GEN_COLSUM(nt_gen_d2, NT_GEN_L##LD##2(x + 2 * i));                                          \
}                                                                                                  \
static inline void nt_gen_colsum4_##SUF(double *part, const T *x, Py_ssize_t r) {                 \
    NT_GEN_COLSUM4_BODY(LD, SUF);                                                                  \
}                                                                                                  \
static inline void nt_gen_colsum8_##SUF(double *part, const T *x, Py_ssize_t r) {                 \
    NT_GEN_COLSUM8_BODY(LD, SUF);                                                                  \
}
NT_GEN_COLSUMS(f64, double, D)
NT_GEN_COLSUMS(f32, float, F)
/* np.where(c, a, b) computes a and b for every element, as NumPy does, and so raises their flags:
 * GCC computes an operand of a C select (c ? a : b) only where it is selected (a branch around a
 * scalar op, a masked vector op), which loses the 'invalid' of np.where(x >= 0, np.sqrt(x), 0) at a
 * negative x. So a kernel ORs the bits of each such operand computed from floats (of np.where, of
 * any dtype, heaviside and left_shift: codegen's _SELECTED; or the ops under it that may raise:
 * codegen's _kept) into one value per width (`seen`, `seen32`: reductions that vectorize where one
 * statement at the end of a loop body ORs them all, codegen's _keep) that it stores to a volatile
 * at its end. */
static inline uint64_t nt_gen_bits_f64(double a) { uint64_t u; memcpy(&u, &a, sizeof u); return u; }
static inline uint32_t nt_gen_bits_f32(float a) { uint32_t u; memcpy(&u, &a, sizeof u); return u; }
static inline void nt_gen_keep(uint64_t seen) { volatile uint64_t kept = seen; (void)kept; }
/* A row block's loop over a short row (its sums through the pinned add: never vectorized) holds each
 * kept value in a register instead, through an empty asm that reads it: no instruction, where the OR
 * moved each value to an integer register first ((20000, 3) to (20000, 12) where row sums 1.2-1.8x
 * faster). */
static inline void nt_gen_hold_f64(double a) { __asm__("" : : "x"(a)); }
static inline void nt_gen_hold_f32(float a) { __asm__("" : : "x"(a)); }
static inline void nt_gen_hold_int(uint64_t a) { __asm__("" : : "r"(a)); }
/* n elements of `isz` bytes from src (byte stride st) into the tile dst, and back: the operands a
 * tile cannot read or write in place (strided, broadcast along the innermost dim, unaligned).
 * Shared by every kernel of a file, so each kernel compiles only its own loops. */
#define NT_GEN_GATHER_AS(T)                                                                          \
    do {                                                                                           \
        T *d_ = (T *)dst, v_;                                                                      \
        if (st == 0) {                                                                             \
            memcpy(&v_, src, sizeof(T));                                                           \
            for (Py_ssize_t i = 0; i < n; i++) d_[i] = v_;                                         \
        } else {                                                                                   \
            for (Py_ssize_t i = 0; i < n; i++) memcpy(&d_[i], src + i * st, sizeof(T));           \
        }                                                                                          \
        return;                                                                                    \
    } while (0)
/* The tiles are aligned for any item: a broadcast operand (stride 0) fills the tile with its one
 * value, the common item sizes copy with fixed-size moves. */
__attribute__((noinline)) static void nt_gen_gather(void *dst, const char *src, Py_ssize_t st, size_t isz,
                                                    Py_ssize_t n) {
    char *d = (char *)dst;
    switch (isz) {
    case 1: NT_GEN_GATHER_AS(uint8_t);
    case 2: NT_GEN_GATHER_AS(uint16_t);
    case 4: NT_GEN_GATHER_AS(uint32_t);
    case 8: NT_GEN_GATHER_AS(uint64_t);
    default: break;
    }
    for (Py_ssize_t i = 0; i < n; i++) memcpy(d + i * isz, src + i * st, isz);
}
#define NT_GEN_MOVES(COPY) \
    switch (isz) { \
    case 8: COPY(8) break; case 4: COPY(4) break; case 2: COPY(2) break; case 1: COPY(1) break; \
    default: COPY(isz) \
    }
__attribute__((noinline)) static void nt_gen_scatter(char *dst, Py_ssize_t st, const void *src, size_t isz,
                                                     Py_ssize_t n) {
    const char *s = (const char *)src;
#define NT_GEN_SCATTER(SIZE) for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + i * st, s + i * (SIZE), SIZE);
    NT_GEN_MOVES(NT_GEN_SCATTER)
#undef NT_GEN_SCATTER
}
/* Bytes a tile buffer has past its TILE elements: room for nt_gen_gather_rows's last 64-byte store. */
#define NT_GEN_PAD 64
/* `rows` rows of `inner` elements (row i at src + i * so) into the tile dst, and back. A row of one
 * value (st == 0, as ``x[:, None]``) is filled with whole 64-byte stores of that value, each row's
 * last store running into the next row (which then overwrites it) or into dst's NT_GEN_PAD bytes:
 * a loop of `inner` stores per row cost more than the pass's arithmetic. One row repeated along the
 * rows (so == 0, as the bias b of ``x + b``) is gathered once and copied into the others in doubling
 * runs: a gather call per row cost bias_relu_10 (rows of 10) a quarter of its time. */
__attribute__((noinline)) static void nt_gen_gather_rows(void *dst, const char *src, Py_ssize_t st, Py_ssize_t so,
                                                         size_t isz, Py_ssize_t inner, Py_ssize_t rows) {
#define NT_GEN_FILL_ROWS(T) \
    for (Py_ssize_t r = 0; r < rows; r++) { \
        T v, line[64 / sizeof(T)]; \
        memcpy(&v, src + r * so, sizeof(T)); \
        for (size_t i = 0; i < 64 / sizeof(T); i++) line[i] = v; \
        char *d = (char *)dst + r * inner * sizeof(T); \
        for (Py_ssize_t k = 0; k < inner * (Py_ssize_t)sizeof(T); k += 64) memcpy(d + k, line, 64); \
    } \
    return;
    if (st == 0) {
        switch (isz) {
        case 8: NT_GEN_FILL_ROWS(uint64_t) case 4: NT_GEN_FILL_ROWS(uint32_t)
        case 2: NT_GEN_FILL_ROWS(uint16_t) case 1: NT_GEN_FILL_ROWS(uint8_t)
        }
    }
#undef NT_GEN_FILL_ROWS
    if (so == 0 && rows > 1) {
        const size_t row = (size_t)inner * isz, total = row * (size_t)rows;
        nt_gen_gather(dst, src, st, isz, inner);
        for (size_t done = row; done < total; done *= 2)   /* log2(rows) copies */
            memcpy((char *)dst + done, dst, total - done < done ? total - done : done);
        return;
    }
    for (Py_ssize_t r = 0; r < rows; r++) nt_gen_gather((char *)dst + r * inner * isz, src + r * so, st, isz, inner);
}
__attribute__((noinline)) static void nt_gen_scatter_rows(char *dst, Py_ssize_t st, Py_ssize_t so, const void *src,
                                                          size_t isz, Py_ssize_t inner, Py_ssize_t rows) {
    for (Py_ssize_t r = 0; r < rows; r++) nt_gen_scatter(dst + r * so, st, (const char *)src + r * inner * isz, isz, inner);
}
/* nbytes from the tile src to contiguous dst, the whole cache lines of dst with streaming stores:
 * an output much larger than the caches is then written without first reading each line into the
 * cache (a read-for-ownership, a fifth of W1's memory traffic) and without evicting the inputs.
 * Partial lines at either end take plain stores, so no line is streamed partly by two threads. The
 * bytes written are src's: the stores change where the data goes, never what it is. */
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif
__attribute__((noinline)) static void nt_gen_stream(char *dst, const char *src, size_t nbytes) {
    size_t head = (64 - (uintptr_t)dst % 64) % 64;
    if (head >= nbytes) { memcpy(dst, src, nbytes); return; }
    memcpy(dst, src, head);
    size_t i = head;
    for (; i + 64 <= nbytes; i += 64) {
#if defined(__AVX512F__)
        _mm512_stream_si512((__m512i *)(dst + i), _mm512_loadu_si512((const void *)(src + i)));
#elif defined(__AVX__)
        _mm256_stream_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
        _mm256_stream_si256((__m256i *)(dst + i + 32), _mm256_loadu_si256((const __m256i *)(src + i + 32)));
#elif defined(__SSE2__)
        for (int j = 0; j < 64; j += 16)
            _mm_stream_si128((__m128i *)(dst + i + j), _mm_loadu_si128((const __m128i *)(src + i + j)));
#else
        memcpy(dst + i, src + i, 64);
#endif
    }
    memcpy(dst + i, src + i, nbytes - i);
}
/* Streaming stores are weakly ordered: the kernel fences them before it returns, so the thread that
 * joins the pass (and every later reader) sees the data. */
static inline void nt_gen_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
#endif

#ifdef NT_LOOPS_H
/* The build's loop table, as the generated kernels index it. */
static inline const nt_gen_loop_fn *nt_gen_loop_table(void) {
    return (const nt_gen_loop_fn *)&nt_block_loops[0][0];
}
#endif

#endif
