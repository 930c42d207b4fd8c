/* A persistent thread team for the GEMV kernels (gemv.pxi): workers that stay alive between calls,
 * worker t running share t of a job whenever it is ready for it.
 *
 * Why not the OpenMP team: numtrace_cpu makes OpenMP threads sleep between passes
 * (OMP_WAIT_POLICY=PASSIVE, see __init__.py) so they leave the cores to BLAS; waking a sleeping
 * thread costs several microseconds, as much as a whole 512x512 GEMV. These workers spin for
 * nt_team_spin_ns after each job (the three GEMVs of an MLP arrive microseconds apart) before they
 * sleep on a condition variable; gemv.pxi only uses the team when that spin is on (see
 * set_team_spin_us there for the measurements).
 *
 * The caller never waits for a worker that has not started: each unit is claimed once (an atomic
 * flag), so the caller takes over whatever a late or descheduled worker has not begun, and waits
 * only for units a worker is running (small: a preempted worker holds up at most one). A new job
 * starts only once every worker has finished looking at the previous one; until then, and while
 * another Python thread holds the team, the caller runs all units itself. Which thread runs a unit
 * never changes the result: the units fix the summation order. After fork() the child starts a
 * fresh team.
 */
#ifndef NT_TEAM_H
#define NT_TEAM_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NT_TEAM_PAUSE() _mm_pause()
#else
#define NT_TEAM_PAUSE() ((void)0)
#endif

#define NT_TEAM_MAX 63            /* workers beside the calling thread */
#define NT_TEAM_MAX_UNITS 256     /* units per job (callers group finer work into these) */
/* How long an idle worker spins before it sleeps (NUMTRACE_TEAM_SPIN_US, see gemv.pxi). */
static long long nt_team_spin_ns = 0;

typedef void (*nt_team_fn)(void *arg, int unit);

typedef struct {
    pthread_mutex_t busy;         /* held by the caller whose job the team runs */
    pthread_mutex_t sleep_mu;
    pthread_cond_t wake;
    atomic_uint gen;              /* bumped once per job */
    atomic_int done;              /* units of the current job finished */
    atomic_int acked;             /* workers finished with the current job */
    atomic_int claimed[NT_TEAM_MAX_UNITS];
    nt_team_fn fn;
    void *arg;
    int nunits, nteam;
    int nworkers;
    pid_t pid;                    /* the process whose threads these are */
    unsigned start_gen[NT_TEAM_MAX + 1];   /* the generation each worker was started at */
} nt_team_t;

static nt_team_t nt_team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline long long nt_team_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Run unit u if nobody has claimed it yet. */
static inline void nt_team_try_unit(int u) {
    int expected = 0;
    if (atomic_load_explicit(&nt_team.claimed[u], memory_order_relaxed) == 0
            && atomic_compare_exchange_strong_explicit(&nt_team.claimed[u], &expected, 1, memory_order_acq_rel,
                                                       memory_order_relaxed)) {
        nt_team.fn(nt_team.arg, u);
        atomic_fetch_add_explicit(&nt_team.done, 1, memory_order_release);
    }
}

/* Thread t's part of the job: its home range, then the rest in order (what is left of it). */
static inline void nt_team_work(int t) {
    const int n = nt_team.nunits, start = (int)((long long)t * n / nt_team.nteam);
    int i;
    for (i = 0; i < n; i++) nt_team_try_unit((start + i) % n);
}

static void *nt_team_worker(void *p) {
    const int me = (int)(size_t)p;
    unsigned seen = nt_team.start_gen[me];   /* written before pthread_create */
    for (;;) {
        long long deadline = nt_team_now_ns() + nt_team_spin_ns;
        unsigned spins = 0;
        while (atomic_load_explicit(&nt_team.gen, memory_order_acquire) == seen) {
            NT_TEAM_PAUSE();
            if ((++spins & 255u) == 0 && nt_team_now_ns() > deadline) {
                pthread_mutex_lock(&nt_team.sleep_mu);
                while (atomic_load_explicit(&nt_team.gen, memory_order_acquire) == seen)
                    pthread_cond_wait(&nt_team.wake, &nt_team.sleep_mu);
                pthread_mutex_unlock(&nt_team.sleep_mu);
            }
        }
        seen = atomic_load_explicit(&nt_team.gen, memory_order_acquire);
        if (me < nt_team.nteam) nt_team_work(me);
        atomic_fetch_add_explicit(&nt_team.acked, 1, memory_order_release);
    }
    return NULL;
}

/* Start workers until there are `want` (fewer if the system refuses threads); holds `busy`. */
static int nt_team_grow(int want) {
    pthread_attr_t attr;
    if (want > NT_TEAM_MAX) want = NT_TEAM_MAX;
    if (nt_team.nworkers >= want) return nt_team.nworkers;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1 << 18);
    while (nt_team.nworkers < want) {
        pthread_t th;
        nt_team.start_gen[nt_team.nworkers + 1] = atomic_load_explicit(&nt_team.gen, memory_order_relaxed);
        if (pthread_create(&th, &attr, nt_team_worker, (void *)(size_t)(nt_team.nworkers + 1)) != 0) break;
        nt_team.nworkers++;
        atomic_fetch_add_explicit(&nt_team.acked, 1, memory_order_relaxed);   /* it has no job to finish */
    }
    pthread_attr_destroy(&attr);
    return nt_team.nworkers;
}

/* fn(arg, u) for every u in [0, nunits) (at most NT_TEAM_MAX_UNITS), on this thread and up to
 * nteam - 1 workers (or all here, see above). Returns when all are done. */
static void nt_team_run(nt_team_fn fn, void *arg, int nunits, int nteam) {
    int u, spins;
    if (nteam > nunits) nteam = nunits;
    if (nteam > 1 && nunits <= NT_TEAM_MAX_UNITS && pthread_mutex_trylock(&nt_team.busy) == 0) {
        if (nt_team.pid != getpid()) {   /* first use, or a forked child: no workers here */
            nt_team.pid = getpid();
            nt_team.nworkers = 0;
            atomic_store_explicit(&nt_team.acked, 0, memory_order_relaxed);
            pthread_mutex_init(&nt_team.sleep_mu, NULL);
            pthread_cond_init(&nt_team.wake, NULL);
        }
        if (atomic_load_explicit(&nt_team.acked, memory_order_acquire) >= nt_team.nworkers
                && nt_team_grow(nteam - 1) >= nteam - 1) {
            nt_team.fn = fn;
            nt_team.arg = arg;
            nt_team.nunits = nunits;
            nt_team.nteam = nteam;
            for (u = 0; u < nunits; u++) atomic_store_explicit(&nt_team.claimed[u], 0, memory_order_relaxed);
            atomic_store_explicit(&nt_team.done, 0, memory_order_relaxed);
            atomic_store_explicit(&nt_team.acked, 0, memory_order_relaxed);
            pthread_mutex_lock(&nt_team.sleep_mu);
            atomic_fetch_add_explicit(&nt_team.gen, 1, memory_order_release);
            pthread_cond_broadcast(&nt_team.wake);
            pthread_mutex_unlock(&nt_team.sleep_mu);
            nt_team_work(0);
            /* only units a worker is running are left: wait for them, giving up the core after a
               short spin in case that worker needs it */
            for (spins = 0; atomic_load_explicit(&nt_team.done, memory_order_acquire) < nunits; spins++) {
                if (spins < 4096) NT_TEAM_PAUSE();
                else sched_yield();
            }
            pthread_mutex_unlock(&nt_team.busy);
            return;
        }
        pthread_mutex_unlock(&nt_team.busy);
    }
    for (u = 0; u < nunits; u++) fn(arg, u);
}

#endif
