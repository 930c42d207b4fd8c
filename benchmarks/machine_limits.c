/* What the machine can do, for the limit column of benchmarks/peers.py: the float32 FMA throughput of
 * `threads` threads (independent AVX-512 / AVX2 FMA chains in registers, no memory traffic), and the
 * rate at which `threads` threads read a buffer that stays in their caches (each thread its own
 * share, read over and over: the GEMV's weights at batch 1). Each thread is pinned to its own CPU
 * (the first `threads` CPUs this process may run on) and the threads start together at a barrier;
 * the best of `repeats` timings is the limit (a shared machine only slows a timing down).
 *
 *   gcc -O2 -march=native -fopenmp -shared -fPIC benchmarks/machine_limits.c -o /tmp/limits.so
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Pin the calling OpenMP thread to the t-th CPU of the process's affinity mask. */
static void pin(int t) {
    cpu_set_t allowed, one;
    int c, seen = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    for (c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed)) continue;
        if (seen++ == t) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
    }
}

#if defined(__AVX512F__)
typedef __m512 vec;
#define VLEN 16
#define VSET1 _mm512_set1_ps
#define VFMA _mm512_fmadd_ps
#define VADD _mm512_add_ps
#define VLOAD _mm512_loadu_ps
#define VSUM _mm512_reduce_add_ps
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define VLEN 8
#define VSET1 _mm256_set1_ps
#define VFMA _mm256_fmadd_ps
#define VADD _mm256_add_ps
#define VLOAD _mm256_loadu_ps
static float VSUM(__m256 v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#else
#error "machine_limits.c needs AVX2+FMA or AVX-512"
#endif

/* Lanes of one vector FMA (16: AVX-512, 8: AVX2). */
int vector_lanes(void) { return VLEN; }

#define CHAINS 16   /* independent accumulators: more than FMA latency x FMA pipes */

/* `iters` rounds of CHAINS vector FMAs on one thread; returns a value the compiler must compute. The
   accumulators are named variables (an array would live in memory) and an empty asm keeps the
   compiler from folding the rounds. */
static float fma_chains(long iters, float seed) {
    const vec m = VSET1(1.0f - 1e-7f), a = VSET1(1e-7f);
    vec c0 = VSET1(seed), c1 = VSET1(seed + 1), c2 = VSET1(seed + 2), c3 = VSET1(seed + 3);
    vec c4 = VSET1(seed + 4), c5 = VSET1(seed + 5), c6 = VSET1(seed + 6), c7 = VSET1(seed + 7);
    vec c8 = VSET1(seed + 8), c9 = VSET1(seed + 9), c10 = VSET1(seed + 10), c11 = VSET1(seed + 11);
    vec c12 = VSET1(seed + 12), c13 = VSET1(seed + 13), c14 = VSET1(seed + 14), c15 = VSET1(seed + 15);
    long i;
    for (i = 0; i < iters; i++) {
        c0 = VFMA(c0, m, a); c1 = VFMA(c1, m, a); c2 = VFMA(c2, m, a); c3 = VFMA(c3, m, a);
        c4 = VFMA(c4, m, a); c5 = VFMA(c5, m, a); c6 = VFMA(c6, m, a); c7 = VFMA(c7, m, a);
        c8 = VFMA(c8, m, a); c9 = VFMA(c9, m, a); c10 = VFMA(c10, m, a); c11 = VFMA(c11, m, a);
        c12 = VFMA(c12, m, a); c13 = VFMA(c13, m, a); c14 = VFMA(c14, m, a); c15 = VFMA(c15, m, a);
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7));
        __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14),
                         "+v"(c15));
    }
    c0 = VADD(VADD(VADD(c0, c1), VADD(c2, c3)), VADD(VADD(c4, c5), VADD(c6, c7)));
    c8 = VADD(VADD(VADD(c8, c9), VADD(c10, c11)), VADD(VADD(c12, c13), VADD(c14, c15)));
    return VSUM(VADD(c0, c8));
}

static volatile float sink;

/* Best float32 FLOP/s (an FMA counts 2) of `threads` pinned threads over `repeats` timings of `iters`
   rounds each (every thread runs all its rounds; the timing ends when the last one finishes). */
double fma_flops(int threads, long iters, int repeats) {
    double best = 0.0;
    int r;
    for (r = 0; r < repeats; r++) {
        double t0 = 0.0, t1;
        float total = 0.0f;
        #pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            pin(omp_get_thread_num());
            fma_chains(iters / 16, 1.0f);   /* warm: clocks up, the 512-bit units powered */
            #pragma omp barrier
            #pragma omp master
            t0 = now_s();
            total += fma_chains(iters, (float)omp_get_thread_num());
        }
        t1 = now_s();
        sink = total;
        if (omp_get_max_threads() >= threads || threads == 1) {
            double rate = 2.0 * VLEN * CHAINS * (double)iters * threads / (t1 - t0);
            if (rate > best) best = rate;
        }
    }
    return best;
}

/* Best bytes/s at which `threads` pinned threads each read their own `bytes / threads` of float32 data,
   `passes` times over, summing it with FMAs (as a GEMV reads its weights): after one pass that brings
   each share into its core's caches, the reads come from there. */
double read_bytes_per_s(int threads, size_t bytes, int passes, int repeats) {
    double best = 0.0;
    int r;
    size_t share = (bytes / threads) / (sizeof(float) * VLEN * 8) * (sizeof(float) * VLEN * 8);
    if (share == 0) return 0.0;
    for (r = 0; r < repeats; r++) {
        double t0 = 0.0, t1;
        float total = 0.0f;
        #pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            size_t n = share / sizeof(float), i;
            float *buf;
            vec acc[8];
            int p, c;
            pin(omp_get_thread_num());
            buf = aligned_alloc(64, share);
            for (i = 0; i < n; i++) buf[i] = (float)(i & 1023) * 1e-3f;
            for (c = 0; c < 8; c++) acc[c] = VSET1(0.0f);
            for (i = 0; i < n; i += 8 * VLEN)   /* the warm pass: the share into this core's caches */
                for (c = 0; c < 8; c++) acc[c] = VADD(acc[c], VLOAD(buf + i + c * VLEN));
            #pragma omp barrier
            #pragma omp master
            t0 = now_s();
            for (p = 0; p < passes; p++) {
                const vec x = VSET1(1.0f + (float)p * 1e-9f);
                for (i = 0; i < n; i += 8 * VLEN)
                    for (c = 0; c < 8; c++) acc[c] = VFMA(VLOAD(buf + i + c * VLEN), x, acc[c]);
            }
            #pragma omp barrier
            for (c = 1; c < 8; c++) acc[0] = VADD(acc[0], acc[c]);
            total += VSUM(acc[0]);
            free(buf);
        }
        t1 = now_s();
        sink = total;
        {
            double rate = (double)share * threads * passes / (t1 - t0);
            if (rate > best) best = rate;
        }
    }
    return best;
}
