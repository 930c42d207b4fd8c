/* Stress harness for nt_team.h (test_hunt_team2.py builds it against a copy of the header with
 * NT_TEAM_HOOK(k) delays at the protocol's windows and the back-off off, so the two job slots are
 * reused while workers are late). Many short jobs on several calling threads, each with a random
 * unit count, team size (1..maxteam), spin (0, 1 us, 50 us), ordered units (nt_team_wait_turn) and a
 * unit that overflows; the job's argument lives on the caller's stack and is poisoned after the job.
 * Checks: every unit ran exactly once, in turn order when ordered, no unit of a finished job ran
 * (stale), the overflow reached the caller's flags, and a child forked while workers spin runs its
 * own jobs (and does not hang). Prints the team's counts; exits 1 on any failure.
 * `team_stress nothreads`: one spinning job whose workers cannot start (too little address space for
 * their stacks) runs alone, counted as solo_held (no worker lagged). */
#define _GNU_SOURCE
#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <sched.h>

static __thread unsigned nt_hook_seed = 12345u;
static int nt_hooks_on = 1;
/* A delay at protocol window k: a yield, a short sleep or a few thousand pauses, at random. */
static inline void nt_team_hook(int k) {
    if (!nt_hooks_on) return;
    unsigned r = (unsigned)rand_r(&nt_hook_seed) + (unsigned)k;
    if ((r & 7) == 0) sched_yield();
    else if ((r & 63) == 1) { struct timespec ts = {0, 20000 + (long)((r >> 8) % 100000)}; nanosleep(&ts, NULL); }
    else if ((r & 3) == 2) { for (unsigned i = 0; i < ((r >> 8) & 4095u); i++) __asm__ volatile("pause"); }
}
#define NT_TEAM_HOOK(k) nt_team_hook(k)
#include "nt_team.h"

#define MAGIC 0x1234
typedef struct {
    int magic, nunits, nteam, ordered, turn, overflow_unit, work;
    atomic_int count[NT_TEAM_MAX_UNITS];
    atomic_int order_bad, running, crowded;   /* units running now; more at once than the team */
} job_t;

static atomic_long stale, errors;
static int iters = 5000, maxteam = 4, forks = 0, ncallers = 1;

static void unit(void *p, int u) {
    job_t *a = (job_t *)p;
    if (a->magic != MAGIC || u < 0 || u >= a->nunits) { atomic_fetch_add(&stale, 1); return; }
    if (atomic_fetch_add(&a->running, 1) >= a->nteam) atomic_fetch_add(&a->crowded, 1);
    if (a->ordered) nt_team_wait_turn(&a->turn, u);
    volatile double s = 0;
    for (int i = 0; i < a->work; i++) s += i * 0.5;
    if (u == a->overflow_unit) { volatile double x = 1e308; x = x * 10.0; (void)x; }
    if (a->ordered) {
        if (__atomic_load_n(&a->turn, __ATOMIC_ACQUIRE) != u) atomic_fetch_add(&a->order_bad, 1);
        nt_team_pass_turn(&a->turn, u + 1);
    }
    atomic_fetch_sub(&a->running, 1);
    atomic_fetch_add(&a->count[u], 1);
}

static void one_job(unsigned *seed, int it) {
    job_t a;
    memset(&a, 0, sizeof a);
    a.magic = MAGIC;
    int r = rand_r(seed);
    a.nunits = 1 + r % ((r >> 8) % 4 == 0 ? NT_TEAM_MAX_UNITS : 8);
    a.ordered = (r >> 12) & 1;
    a.overflow_unit = ((r >> 13) & 3) == 0 ? (int)((r >> 16) % a.nunits) : -1;
    a.work = ((r >> 20) & 7) == 0 ? 2000 : ((r >> 23) & 1) ? 50 : 0;
    int nteam = 1 + (r >> 24) % maxteam;
    a.nteam = nteam < a.nunits ? nteam : a.nunits;
    long long spin = ((r >> 28) & 3) == 0 ? 0 : ((r >> 28) & 3) == 1 ? 1000 : 50000;
    feclearexcept(FE_ALL_EXCEPT);
    nt_team_run_spin(unit, &a, a.nunits, nteam, spin);
    int over = fetestexcept(FE_OVERFLOW) != 0, bad = 0;
    for (int u = 0; u < a.nunits; u++) bad += atomic_load(&a.count[u]) != 1;
    if (bad || atomic_load(&a.order_bad) || atomic_load(&a.crowded) || (a.overflow_unit >= 0) != over) {
        fprintf(stderr, "job %d: nunits %d nteam %d ordered %d spin %lld: %d units not run once, %d out of turn,"
                " %d beyond the team, overflow %d raised %d\n", it, a.nunits, nteam, a.ordered, spin, bad,
                atomic_load(&a.order_bad), atomic_load(&a.crowded), a.overflow_unit >= 0, over);
        atomic_fetch_add(&errors, 1);
    }
    memset(&a, 0xAB, sizeof a);   /* a late unit of this job finds no MAGIC */
    __asm__ volatile("" ::: "memory");
}

static void *caller(void *p) {
    const int id = (int)(size_t)p;
    unsigned seed = (unsigned)id * 7919u + 17u;
    for (int it = 0; it < iters; it++) {
        one_job(&seed, it);
        if (forks && id == 0 && it % 997 == 500) {   /* fork right after a job: the workers spin */
            pid_t pid = fork();
            if (pid == 0) {   /* the child's jobs: with one caller, some run on the child's own workers
                                 (another caller may hold the team at the fork: the child's stays held) */
                const long long shared = nt_team_jobs_shared;
                for (int k = 0; k < 300; k++) one_job(&seed, k);
                _exit(errors || stale ? 3 : nt_team_jobs_shared == shared && ncallers == 1 ? 4 : 0);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "forked child failed: status %d\n", st);
                atomic_fetch_add(&errors, 1);
            }
        }
        int r = rand_r(&seed);
        if ((r & 63) == 0) sched_yield();
        if ((r & 1023) == 1) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }
    }
    return NULL;
}

static void noop(void *p, int u) { (void)p; (void)u; }

static int no_threads(void) {
    struct rlimit rl = {8 << 20, 8 << 20};   /* less than one worker's 8 MiB stack */
    if (setrlimit(RLIMIT_AS, &rl)) { perror("setrlimit"); return 2; }
    nt_team_run_spin(noop, NULL, 8, 4, 50000);
    printf("workers %d jobs %lld solo %lld lagging %lld held %lld\n", nt_team.nworkers, (long long)nt_team_jobs,
           (long long)nt_team_solo_runs, (long long)nt_team_solo_lagging, (long long)nt_team_solo_held);
    return nt_team_solo_runs == 1 && nt_team_solo_held == 1 && nt_team_solo_lagging == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "nothreads")) return no_threads();
    ncallers = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) iters = atoi(argv[2]);
    if (argc > 3) maxteam = atoi(argv[3]);
    if (argc > 4) forks = atoi(argv[4]);
    if (argc > 5) nt_hooks_on = atoi(argv[5]);
    pthread_t th[8];
    if (ncallers > 8) ncallers = 8;
    for (int i = 0; i < ncallers; i++) pthread_create(&th[i], NULL, caller, (void *)(size_t)i);
    for (int i = 0; i < ncallers; i++) pthread_join(th[i], NULL);
    printf("errors %ld stale %ld jobs %lld shared %lld solo_lagging %lld solo_held %lld\n", (long)errors,
           (long)stale, (long long)nt_team_jobs, (long long)nt_team_jobs_shared,
           (long long)nt_team_solo_lagging, (long long)nt_team_solo_held);
    return errors || stale ? 1 : 0;
}
