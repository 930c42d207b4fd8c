/* The floating-point status flags NumPy reports (divide by zero, overflow, underflow, invalid), for
 * numtrace_ir.fp_errors: a call gathers the flags its kernels raise and reports as NumPy would.
 * The flags are per thread: a worker takes (reads and clears) its own after each unit of a pass, and
 * the thread that ran the pass puts their union into its own status, so a call reads one thread's.
 * Reading costs a few cycles; clearing only happens when a flag is set. */
#ifndef NT_FPFLAGS_H
#define NT_FPFLAGS_H

#include <fenv.h>

#define NT_FP_WATCHED (FE_DIVBYZERO | FE_OVERFLOW | FE_UNDERFLOW | FE_INVALID)

static inline int nt_fp_take(void) {
    int f = fetestexcept(NT_FP_WATCHED);
    if (f) feclearexcept(f);
    return f;
}

static inline void nt_fp_put(int f) {
    if (f) feraiseexcept(f);
}

/* The flags in `f` as NumPy's bits (divide 1, over 2, under 4, invalid 8). */
static inline int nt_fp_numpy_bits(int f) {
    return ((f & FE_DIVBYZERO) ? 1 : 0) | ((f & FE_OVERFLOW) ? 2 : 0) | ((f & FE_UNDERFLOW) ? 4 : 0)
           | ((f & FE_INVALID) ? 8 : 0);
}

#endif
