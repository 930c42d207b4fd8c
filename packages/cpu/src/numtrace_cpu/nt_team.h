/* A persistent thread team for the generated passes (blocks.pxi), the GEMV kernels (gemv.pxi) and the
 * packed products (packed.pxi):
 * workers that stay alive between calls, worker t running share t of a job whenever it is ready for it.
 *
 * Why not the OpenMP team: numtrace_cpu makes OpenMP threads sleep between passes
 * (OMP_WAIT_POLICY=PASSIVE, see __init__.py) so they leave the cores to BLAS; waking a sleeping
 * thread costs several microseconds (about 7 us on the 2-core VM), as much as a whole 512x512 GEMV.
 * After a job that asks for it (the GEMVs: an MLP's layers arrive microseconds apart; the packed
 * products: a transformer block's products arrive tens of microseconds apart, and a worker woken
 * per product joined each late, so two threads ran a block no faster than one) the workers spin for
 * that job's window, giving up the core every few microseconds (sched_yield) so that other
 * runnable threads are not starved, then sleep on a condition variable; after a job that asks for
 * no spin they sleep at once, and so do workers outside a job's team (a job of fewer threads than
 * an earlier one): they would take cores from it. A job wakes the workers (a broadcast) only when
 * one of its team sleeps.
 *
 * Back-off: a spinning job is a miss when the workers ran no unit although every worker of its team
 * was idle for it when it was posted (spinning, not asleep on the condition variable and not still in
 * the last job), or when the caller, done with
 * its own units, waited for a worker's unit longer than it had worked (and longer than
 * NT_TEAM_LONG_WAIT_NS): that worker was preempted in the middle of it, and the job took longer than
 * the caller alone would have. Either way the workers were starved of cores (more runnable threads
 * than cores, e.g. OpenBLAS's pool spinning in the same process, or another process), not idle. A
 * wait shorter than the caller's own work is no miss: a worker that started a little late (woken, or
 * back from a yield) still took work off the caller, and a fixed bound would count such jobs as
 * misses whenever units are long (a product's units run for hundreds of microseconds). A job whose workers were asleep wakes them and is no miss, so the
 * first jobs after a pause never count against the team. After NT_TEAM_MISSES misses in a row,
 * spinning jobs run on the calling thread alone for a back-off period, so a loaded machine gets the
 * one-thread behaviour instead of paying for wake-ups and preempted workers; the team is then
 * probed again. The period starts at NT_TEAM_SOLO_MIN_NS, doubles with each back-off up to
 * NT_TEAM_SOLO_NS, and halves with each job the workers shared without a wait: a short contention
 * (another pool's spin after its last call) costs little, and lasting contention probes the team
 * rarely.
 *
 * The caller never waits for a worker that has not started: each unit is claimed once (an atomic
 * flag), so the caller takes over whatever a late or descheduled worker has not begun, and waits
 * only for units a worker is running (small: a preempted worker holds up at most one). Jobs take two
 * slots in turn, so a worker that comes to a job late, when the caller has already run all of it,
 * does not hold up the next job (with one slot, a new job had to wait for every worker to finish
 * looking at the last, and a job after one the caller ran alone ran alone too: half of a program's
 * short passes); only a worker still in the slot's job before that does (it was descheduled), and
 * then, as while another Python thread holds the team, the caller runs all units itself. Which thread runs a unit
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

#include "nt_fpflags.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NT_TEAM_PAUSE() _mm_pause()
#else
#define NT_TEAM_PAUSE() ((void)0)
#endif

#define NT_TEAM_MAX 63            /* workers beside the calling thread */
#define NT_TEAM_MAX_UNITS 256     /* units per job (callers group finer work into these) */
#define NT_TEAM_MISSES 3          /* spinning jobs in a row the workers miss before the back-off */
/* Pauses the caller waits for a worker's unit before it gives up its core between checks. */
#define NT_TEAM_LONG_WAIT 4096
/* The shortest wait for a worker's unit (ns) that can count as a miss (longer than a small job's
   jitter; a longer wait is a miss only if it is also longer than the caller's own work). */
#define NT_TEAM_LONG_WAIT_NS 50000LL
#define NT_TEAM_SOLO_MIN_NS 1000000LL   /* the first back-off's length */
#define NT_TEAM_SOLO_NS 20000000LL      /* the longest back-off */
/* How long the workers spin after a generated pass, GEMV or packed-product job (NUMTRACE_TEAM_SPIN_US,
   see gemv.pxi). */
static long long nt_team_spin_ns = 50000;

typedef void (*nt_team_fn)(void *arg, int unit);

/* A job, in one of two slots that jobs take in turn: a worker still looking at the last job (it came
   late, or was descheduled) does not hold up the next, which goes to the other slot. */
typedef struct {
    atomic_int ready;             /* the slot holds a posted job (0 while it is written) */
    atomic_int users;             /* workers looking at the slot */
    atomic_int done;              /* units of the job finished */
    atomic_int fpflags;           /* floating-point flags the job's units raised */
    nt_team_fn fn;
    void *arg;
    int nunits, nteam;
    long long spin_ns;            /* how long the workers spin after the job */
    atomic_int claimed[NT_TEAM_MAX_UNITS];
} nt_team_job_t;

typedef struct {
    pthread_mutex_t busy;         /* held by the caller whose job the team runs */
    pthread_mutex_t sleep_mu;
    pthread_cond_t wake;
    atomic_uint gen;              /* bumped once per job; job gen is in slot jobs[gen & 1] */
    nt_team_job_t jobs[2];
    int nworkers;
    int misses;                   /* spinning jobs in a row whose units the caller ran alone */
    long long solo_until;         /* until then (monotonic ns) spinning jobs run on the caller */
    long long solo_ns;            /* the next back-off's length */
    int asleep[NT_TEAM_MAX + 1];  /* worker t is asleep on `wake` (read and written under sleep_mu) */
    pid_t pid;                    /* the process whose threads these are */
    unsigned start_gen[NT_TEAM_MAX + 1];   /* the generation each worker was started at */
} nt_team_t;

/* What the team did, for gemv.pxi's team_counts(): jobs run on it, those in which a worker ran a
   unit, those after which the workers spun, jobs asking for a spin that ran on the caller alone (a
   back-off, another thread holding the team, or workers not done with the last job), back-offs
   entered, spinning jobs missed, and shared spinning jobs whose caller waited more than
   NT_TEAM_LONG_WAIT_NS for a worker's unit (a miss only when also longer than its own work). */
static atomic_llong nt_team_jobs, nt_team_jobs_shared, nt_team_jobs_spinning, nt_team_solo_runs,
    nt_team_backoffs, nt_team_misses_total, nt_team_long_waits;
/* Why spinning jobs ran on the caller alone: a back-off, a worker still in the job slot's last job,
   the team held by another thread (or workers that could not be started). */
static atomic_llong nt_team_solo_backoff, nt_team_solo_lagging, nt_team_solo_held;

/* Whether a spinning job was a miss (see the back-off above): the caller ran `mine` of `nunits` units,
   working `work_ns` from the post and then waiting `wait_ns` for the workers' units; `all_awake`:
   every worker of its team was idle (awake, done with the last job) when it was posted. A job that
   had to wake a worker is never a miss: the wake-up itself is the wait. */
static inline int nt_team_job_missed(int mine, int nunits, int all_awake, long long work_ns, long long wait_ns) {
    if (!all_awake) return 0;
    if (mine >= nunits) return 1;
    return wait_ns > NT_TEAM_LONG_WAIT_NS && wait_ns > work_ns;
}

static nt_team_t nt_team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline long long nt_team_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Run unit u of job j if nobody has claimed it yet; 1 if this thread ran it. */
static inline int nt_team_try_unit(nt_team_job_t *j, int u) {
    int expected = 0;
    if (atomic_load_explicit(&j->claimed[u], memory_order_relaxed) == 0
            && atomic_compare_exchange_strong_explicit(&j->claimed[u], &expected, 1, memory_order_acq_rel,
                                                       memory_order_relaxed)) {
        j->fn(j->arg, u);
        int fp = nt_fp_take();   /* this thread's flags to the job's caller (nt_fpflags.h) */
        if (fp) atomic_fetch_or_explicit(&j->fpflags, fp, memory_order_relaxed);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
        return 1;
    }
    return 0;
}

/* Thread t's part of job j: its home range, then the rest in order (what is left of it). Returns
   how many units this thread ran. */
static inline int nt_team_work(nt_team_job_t *j, int t) {
    const int n = j->nunits, start = (int)((long long)t * n / j->nteam);
    int i, ran = 0;
    for (i = 0; i < n; i++) ran += nt_team_try_unit(j, (start + i) % n);
    return ran;
}

static void *nt_team_worker(void *p) {
    const int me = (int)(size_t)p;
    unsigned seen = nt_team.start_gen[me];   /* written before pthread_create */
    long long spin_ns = 0;                   /* no job yet: sleep until the first */
    pthread_mutex_lock(&nt_team.sleep_mu);
    nt_team.asleep[me] = 0;                  /* started (a job posted before now woke no one) */
    pthread_mutex_unlock(&nt_team.sleep_mu);
    for (;;) {
        long long deadline = nt_team_now_ns() + spin_ns;
        unsigned spins = 0;
        while (atomic_load_explicit(&nt_team.gen, memory_order_acquire) == seen) {
            NT_TEAM_PAUSE();
            if ((++spins & 255u) == 0) {
                if (nt_team_now_ns() <= deadline) {
                    sched_yield();   /* a runnable thread waiting for this core gets it */
                    continue;
                }
                pthread_mutex_lock(&nt_team.sleep_mu);
                if (atomic_load_explicit(&nt_team.gen, memory_order_acquire) == seen) {
                    nt_team.asleep[me] = 1;
                    while (atomic_load_explicit(&nt_team.gen, memory_order_acquire) == seen)
                        pthread_cond_wait(&nt_team.wake, &nt_team.sleep_mu);
                    nt_team.asleep[me] = 0;
                }
                pthread_mutex_unlock(&nt_team.sleep_mu);
            }
        }
        seen = atomic_load_explicit(&nt_team.gen, memory_order_acquire);
        /* Enter the job's slot, then look whether it holds a job (the handshake of nt_team_slot_free).
           A slot found empty is being written for a later job: the job of `seen` is over. */
        nt_team_job_t *j = &nt_team.jobs[seen & 1u];
        atomic_fetch_add_explicit(&j->users, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&j->ready, memory_order_seq_cst)) {
            if (me < j->nteam) {
                nt_team_work(j, me);
                spin_ns = j->spin_ns;
            } else {
                /* outside the job's team: spinning, it would take a core from the team (on 2 cores,
                   after a job of 7 threads, the team's worker shared no job) */
                spin_ns = 0;
            }
        }
        atomic_fetch_sub_explicit(&j->users, 1, memory_order_release);
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
    /* glibc's default: a generated pass keeps a tile per gathered operand on the stack (up to 64 of
       TILE doubles, over 256 KiB); only the pages touched are committed */
    pthread_attr_setstacksize(&attr, 8 << 20);
    while (nt_team.nworkers < want) {
        pthread_t th;
        nt_team.start_gen[nt_team.nworkers + 1] = atomic_load_explicit(&nt_team.gen, memory_order_relaxed);
        nt_team.asleep[nt_team.nworkers + 1] = 1;   /* until it runs: its first job is no miss */
        if (pthread_create(&th, &attr, nt_team_worker, (void *)(size_t)(nt_team.nworkers + 1)) != 0) break;
        nt_team.nworkers++;
    }
    pthread_attr_destroy(&attr);
    return nt_team.nworkers;
}

/* Whether slot j can take the next job. Its last job (two back) is over; the caller clears `ready`,
   then looks for users, while a worker enters (users++), then looks at `ready` (all seq_cst, one total
   order): either the caller sees the worker and leaves the slot alone, or the worker sees the slot
   empty (or, later, its next job whole). */
static inline int nt_team_slot_free(nt_team_job_t *j) {
    atomic_store_explicit(&j->ready, 0, memory_order_seq_cst);
    return atomic_load_explicit(&j->users, memory_order_seq_cst) == 0;
}

/* fn(arg, u) for every u in [0, nunits) (at most NT_TEAM_MAX_UNITS), on this thread and up to
 * nteam - 1 workers (or all here, see above); the workers then spin spin_ns before they sleep (0:
 * they sleep at once, and the back-off does not apply). Returns when all are done. */
static void nt_team_run_spin(nt_team_fn fn, void *arg, int nunits, int nteam, long long spin_ns) {
    int u, spins, mine, all_awake;
    long long t_post, t_own;
    atomic_llong *why = &nt_team_solo_held;
    if (nteam > NT_TEAM_MAX + 1) nteam = NT_TEAM_MAX + 1;   /* more threads than the team has: it all runs */
    if (nteam > nunits) nteam = nunits;
    if (nteam > 1 && nunits <= NT_TEAM_MAX_UNITS && pthread_mutex_trylock(&nt_team.busy) == 0) {
        if (nt_team.pid != getpid()) {   /* first use, or a forked child: no workers here */
            nt_team.pid = getpid();
            nt_team.nworkers = 0;
            nt_team.misses = 0;
            nt_team.solo_until = 0;
            nt_team.solo_ns = NT_TEAM_SOLO_MIN_NS;
            for (u = 0; u < 2; u++) {
                atomic_store_explicit(&nt_team.jobs[u].ready, 0, memory_order_relaxed);
                atomic_store_explicit(&nt_team.jobs[u].users, 0, memory_order_relaxed);
            }
            for (u = 0; u <= NT_TEAM_MAX; u++) nt_team.asleep[u] = 0;
            pthread_mutex_init(&nt_team.sleep_mu, NULL);
            pthread_cond_init(&nt_team.wake, NULL);
        }
        const unsigned next = atomic_load_explicit(&nt_team.gen, memory_order_relaxed) + 1u;
        nt_team_job_t *j = &nt_team.jobs[next & 1u];
        if (spin_ns > 0 && nt_team.solo_until != 0 && nt_team_now_ns() < nt_team.solo_until) {
            why = &nt_team_solo_backoff;   /* backing off: run alone below */
        } else if (!nt_team_slot_free(j)) {
            why = &nt_team_solo_lagging;   /* a worker is still in the slot's last job (two back) */
        } else if (nt_team_grow(nteam - 1) >= nteam - 1) {   /* else `why` stays: workers could not start */
            j->fn = fn;
            j->arg = arg;
            j->nunits = nunits;
            j->nteam = nteam;
            j->spin_ns = spin_ns;
            for (u = 0; u < nunits; u++) atomic_store_explicit(&j->claimed[u], 0, memory_order_relaxed);
            atomic_store_explicit(&j->done, 0, memory_order_relaxed);
            atomic_store_explicit(&j->fpflags, 0, memory_order_relaxed);
            atomic_store_explicit(&j->ready, 1, memory_order_release);
            pthread_mutex_lock(&nt_team.sleep_mu);
            /* the job's workers (1 .. nteam - 1); only a job that needs a sleeping one wakes them all.
               A job can be missed only by workers idle for it: all awake, and none still in the last
               job (it came to that one late: with one slot this job would have run alone, no miss) */
            for (all_awake = 1, u = 1; u < nteam; u++) all_awake &= !nt_team.asleep[u];
            const int woken = !all_awake;
            all_awake &= atomic_load_explicit(&nt_team.jobs[(next & 1u) ^ 1u].users, memory_order_acquire) == 0;
            atomic_store_explicit(&nt_team.gen, next, memory_order_release);
            if (woken) pthread_cond_broadcast(&nt_team.wake);
            pthread_mutex_unlock(&nt_team.sleep_mu);
            t_post = spin_ns > 0 ? nt_team_now_ns() : 0;
            mine = nt_team_work(j, 0);
            t_own = spin_ns > 0 ? nt_team_now_ns() : 0;
            /* only units a worker is running are left: wait for them, giving up the core after a
               short spin in case that worker needs it */
            for (spins = 0; atomic_load_explicit(&j->done, memory_order_acquire) < nunits; spins++) {
                if (spins < NT_TEAM_LONG_WAIT) NT_TEAM_PAUSE();
                else sched_yield();
            }
            nt_fp_put(atomic_load_explicit(&j->fpflags, memory_order_relaxed));
            atomic_fetch_add_explicit(&nt_team_jobs, 1, memory_order_relaxed);
            if (mine < nunits) atomic_fetch_add_explicit(&nt_team_jobs_shared, 1, memory_order_relaxed);
            if (spin_ns > 0) {
                atomic_fetch_add_explicit(&nt_team_jobs_spinning, 1, memory_order_relaxed);
                nt_team.solo_until = 0;
                /* the wait is timed only when there was one: a job whose units were all done when
                   the caller finished its own reads no clock a third time */
                const long long waited = spins ? nt_team_now_ns() - t_own : 0;
                if (mine < nunits && waited > NT_TEAM_LONG_WAIT_NS)
                    atomic_fetch_add_explicit(&nt_team_long_waits, 1, memory_order_relaxed);
                if (nt_team_job_missed(mine, nunits, all_awake, t_own - t_post, waited)) {
                    atomic_fetch_add_explicit(&nt_team_misses_total, 1, memory_order_relaxed);
                    if (++nt_team.misses >= NT_TEAM_MISSES) {
                        nt_team.misses = 0;
                        nt_team.solo_until = nt_team_now_ns() + nt_team.solo_ns;
                        nt_team.solo_ns = nt_team.solo_ns * 2 < NT_TEAM_SOLO_NS ? nt_team.solo_ns * 2 : NT_TEAM_SOLO_NS;
                        atomic_fetch_add_explicit(&nt_team_backoffs, 1, memory_order_relaxed);
                    }
                } else if (mine < nunits) {
                    nt_team.misses = 0;
                    if (nt_team.solo_ns / 2 >= NT_TEAM_SOLO_MIN_NS) nt_team.solo_ns /= 2;
                }
            }
            pthread_mutex_unlock(&nt_team.busy);
            return;
        }
        pthread_mutex_unlock(&nt_team.busy);
    }
    if (nteam > 1 && spin_ns > 0) {
        atomic_fetch_add_explicit(&nt_team_solo_runs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(why, 1, memory_order_relaxed);
    }
    for (u = 0; u < nunits; u++) fn(arg, u);
}

/* Units that must finish a step in unit order (gemv.pxi's folds): unit u waits until `*turn` reaches
   u, runs its ordered step, then passes the turn on with nt_team_pass_turn(turn, u + 1). No wait
   can deadlock: unit 0 never waits, and every unit below u is claimed by a thread that runs it
   (the caller claims any unit no worker took, in order). The wait gives up the core after a short
   spin, in case the thread it waits for was preempted on it. */
static inline void nt_team_wait_turn(const int* turn, int u) {
    int spins;
    for (spins = 0; __atomic_load_n(turn, __ATOMIC_ACQUIRE) < u; spins++) {
        if (spins < 4096) NT_TEAM_PAUSE();
        else sched_yield();
    }
}

static inline void nt_team_pass_turn(int* turn, int next) {
    __atomic_store_n(turn, next, __ATOMIC_RELEASE);
}

/* A block of per-thread scratch of `n` (busy[k]: block k is taken) for the unit this thread is about to
   run, given back with nt_team_slot_put: a job of nteam threads has at most nteam units running at once,
   so with n >= nteam one is always free. */
static inline int nt_team_slot_take(int* busy, int n) {
    for (;;) {
        for (int k = 0; k < n; k++) {
            int expected = 0;
            if (__atomic_load_n(&busy[k], __ATOMIC_RELAXED) == 0
                    && __atomic_compare_exchange_n(&busy[k], &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return k;
        }
        NT_TEAM_PAUSE();
    }
}

static inline void nt_team_slot_put(int* busy, int slot) {
    __atomic_store_n(&busy[slot], 0, __ATOMIC_RELEASE);
}

#endif
