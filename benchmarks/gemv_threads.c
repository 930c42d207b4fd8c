/* Where the time of W2 (MLP 784-512-512-10, float32, batch 1) goes on the GEMV kernels (nt_gemv.h):
 * each layer on one thread, the three layers on one thread and split over two (a spinning worker
 * takes the second half of each layer's 64-row chunks, as the team of nt_team.h does), and how long a
 * worker sleeping on a condition variable takes to wake. Prints min / p10 / median / p90 per call.
 *   gcc -O3 -march=x86-64-v4 -mprefer-vector-width=512 -ffp-contract=fast -DPy_ssize_t=ptrdiff_t \
 *       -include stddef.h -Ipackages/cpu/src/numtrace_cpu benchmarks/gemv_threads.c -o /tmp/gemv_threads \
 *       -lpthread -lm && /tmp/gemv_threads 3000 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#include "nt_gemv.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}
static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}
static void report(const char* name, double* t, int n) {
    qsort(t, n, sizeof(double), cmp);
    printf("%-34s min %7.2f  p10 %7.2f  med %7.2f  p90 %7.2f us\n", name, t[0], t[n / 10], t[n / 2], t[n - 1 - n / 10]);
}

#define NL 3
static const int dims[NL + 1] = {784, 512, 512, 10};
static float *W[NL], *B[NL], *X[NL + 1], *P[NL];

// chunks [c0, c1) of layer l into partials
static void layer_chunks(int l, int c0, int c1) {
    int K = dims[l], N = dims[l + 1];
    for (int c = c0; c < c1; c++) {
        int k0 = c * 64, kc = K - k0 < 64 ? K - k0 : 64;
        nt_gemv_rows_f32(X[l] + k0, W[l] + (size_t)k0 * N, N, kc, N, P[l] + (size_t)c * N);
    }
}
static void layer_finish(int l) {
    int K = dims[l], N = dims[l + 1], nc = (K + 63) / 64;
    nt_gemv_finish_f32(X[l + 1], P[l], nc, N, N, B[l], l < NL - 1 ? NT_ACT_RELU : NT_ACT_NONE);
}

// a spinning worker: runs layer `job_l` chunks [job_c0, job_c1) when gen changes
static atomic_int gen, done;
static int job_l, job_c0, job_c1;
static atomic_int stop;
static void* worker(void* p) {
    (void)p;
    int seen = 0;
    while (!atomic_load(&stop)) {
        int g = atomic_load_explicit(&gen, memory_order_acquire);
        if (g == seen) { _mm_pause(); continue; }
        seen = g;
        layer_chunks(job_l, job_c0, job_c1);
        atomic_store_explicit(&done, g, memory_order_release);
    }
    return NULL;
}

// condvar wake-up latency: main signals, worker records time it woke
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int cgen;
static volatile double woke_at;
static void* sleeper(void* p) {
    (void)p;
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (cgen == seen) pthread_cond_wait(&cv, &mu);
        seen = cgen;
        pthread_mutex_unlock(&mu);
        if (seen < 0) break;
        woke_at = now_us();
        atomic_store(&done, seen);
    }
    return NULL;
}

int main(int argc, char** argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    double* t = malloc(sizeof(double) * iters);
    for (int l = 0; l < NL; l++) {
        int K = dims[l], N = dims[l + 1];
        W[l] = aligned_alloc(64, (size_t)K * N * 4);
        B[l] = aligned_alloc(64, 64 * ((N * 4 + 63) / 64));
        P[l] = aligned_alloc(64, (size_t)((K + 63) / 64) * N * 4 + 64);
        for (size_t i = 0; i < (size_t)K * N; i++) W[l][i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (int i = 0; i < N; i++) B[l][i] = 0.01f;
    }
    for (int l = 0; l <= NL; l++) {
        X[l] = aligned_alloc(64, 4096);
        for (int i = 0; i < dims[l]; i++) X[l][i] = 0.5f;
    }
    // 1 thread, per layer and total
    for (int l = 0; l < NL; l++) {
        for (int i = 0; i < iters; i++) {
            // stream the other layers so this one comes from where it would (L3)
            double t0 = now_us();
            layer_chunks(l, 0, (dims[l] + 63) / 64);
            layer_finish(l);
            t[i] = now_us() - t0;
            for (int m = 0; m < NL; m++) if (m != l) { layer_chunks(m, 0, (dims[m] + 63) / 64); }
        }
        char name[64];
        snprintf(name, sizeof name, "1thr layer %d (%dx%d)", l, dims[l], dims[l + 1]);
        report(name, t, iters);
    }
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        for (int l = 0; l < NL; l++) { layer_chunks(l, 0, (dims[l] + 63) / 64); layer_finish(l); }
        t[i] = now_us() - t0;
    }
    report("1thr MLP", t, iters);
    // 2 threads with a spinning worker, half the chunks each, per layer
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    for (int i = 0; i < iters; i++) {
        double t0 = now_us();
        for (int l = 0; l < NL; l++) {
            int nc = (dims[l] + 63) / 64, half = nc / 2;
            if (dims[l] * dims[l + 1] < 32768) { layer_chunks(l, 0, nc); layer_finish(l); continue; }
            job_l = l; job_c0 = half; job_c1 = nc;
            int g = atomic_fetch_add(&gen, 1) + 1;
            layer_chunks(l, 0, half);
            while (atomic_load_explicit(&done, memory_order_acquire) != g) _mm_pause();
            layer_finish(l);
        }
        t[i] = now_us() - t0;
    }
    report("2thr spin MLP", t, iters);
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    // condvar wake-up latency
    atomic_store(&done, 0);
    pthread_create(&th, NULL, sleeper, NULL);
    for (int i = 0; i < iters; i++) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);   // let it sleep
        double t0 = now_us();
        pthread_mutex_lock(&mu);
        cgen = i + 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        while (atomic_load(&done) != i + 1) _mm_pause();
        t[i] = woke_at - t0;
    }
    report("condvar wake-up latency", t, iters);
    return 0;
}
