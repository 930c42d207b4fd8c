/* What the ISA-independent runtime asks of the host: which instruction-set features the CPU and OS
 * support (to choose an ISA build of the block loops), and large allocations for recycled outputs. */
#ifndef NT_PLATFORM_H
#define NT_PLATFORM_H

#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* A large block on 2 MiB boundaries, marked for transparent huge pages: first touch then costs
 * one fault per 2 MiB instead of one per 4 KiB.  NULL when out of memory. */
static inline void *nt_alloc_large(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)1 << 21, n ? n : 1) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

/* The features an ISA build may need, as bit i of nt_cpu_features() for name i.  GCC's
 * __builtin_cpu_supports reads cpuid and, for AVX and AVX-512, checks that the OS saves the
 * registers (XCR0), so a feature reported here is usable.  It needs a literal name, hence one
 * call per feature. */
enum { NT_NFEATURES = 7 };
static const char *const nt_cpu_feature_names[NT_NFEATURES] = {
    "avx2", "fma", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};

static inline unsigned int nt_cpu_features(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return (unsigned int)((__builtin_cpu_supports("avx2") ? 1u : 0u) | (__builtin_cpu_supports("fma") ? 2u : 0u)
        | (__builtin_cpu_supports("avx512f") ? 4u : 0u) | (__builtin_cpu_supports("avx512bw") ? 8u : 0u)
        | (__builtin_cpu_supports("avx512cd") ? 16u : 0u) | (__builtin_cpu_supports("avx512dq") ? 32u : 0u)
        | (__builtin_cpu_supports("avx512vl") ? 64u : 0u));
#else
    return 0;
#endif
}

#endif
