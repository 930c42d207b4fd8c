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
} nt_gen_reduce;

typedef void (*nt_gen_fn)(char *const *data, const Py_ssize_t *strides, const Py_ssize_t *shape, int nd,
                          Py_ssize_t u0, Py_ssize_t u1, const double *fc, const int64_t *ic,
                          const nt_gen_loop_fn *loops, const nt_gen_reduce *red);

/* A value converted as NumPy casts it (blocks.pxi's _convert): float to int32/int64 truncates, and
 * NaN or out-of-range gives the integer minimum (x86 behaviour) instead of C's undefined behaviour. */
#define NT_GEN_TO_BOOL(x) ((unsigned char)((x) != 0))
#define NT_GEN_F_TO_I32(x) (((x) >= -2147483648.0) & ((x) < 2147483648.0) ? (int32_t)(x) : INT32_MIN)
#define NT_GEN_F_TO_I64(x) (((x) >= -9223372036854775808.0) & ((x) < 9223372036854775808.0) ? (int64_t)(x) : INT64_MIN)

#ifdef NT_GEN_KERNEL
#include <string.h>
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
__attribute__((noinline)) static void nt_gen_scatter(char *dst, Py_ssize_t st, const void *src, size_t isz,
                                                     Py_ssize_t n) {
    const char *s = (const char *)src;
    for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + i * st, s + i * isz, isz);
}
#endif

#ifdef NT_LOOPS_H
/* The build's loop table, as the generated kernels index it. */
static inline const nt_gen_loop_fn *nt_gen_loop_table(void) {
    return (const nt_gen_loop_fn *)&nt_block_loops[0][0];
}
#endif

#endif
