/* The cpu block loops of the float compare family (nt_loops.h, nt_simd.h) as a shared object, for
 * benchmarks/quiet_compares.py to time two builds of them (two header folders) in one process:
 *   gcc -O3 -ffp-contract=fast -fno-math-errno -fno-trapping-math -fopenmp -march=x86-64-v4 \
 *       -mprefer-vector-width=512 -fPIC -shared -I$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])") \
 *       -I<header folder> benchmarks/quiet_compares.c -o <folder>/quiet_compares.so -lm
 * (the flags of setup.py's avx512 build; -march=x86-64-v3 for the avx2 one, none for the baseline). */
#include <Python.h>
#include "nt_loops.h"
#include "nt_simd.h"

int nt_ab_op(const char *name) {
    for (int i = 0; i < NOPS; i++) if (!strcmp(nt_op_names[i], name)) return i;
    return -1;
}
void nt_ab_loop(int op, int dt, char *d, const char *a, const char *b, Py_ssize_t n, int reps) {
    for (int r = 0; r < reps; r++) nt_run_loop(op, dt, d, a, b, n);
}
double nt_ab_max(const double *a, Py_ssize_t n, int reps) {
    double acc = 0; int nan = 0;
    for (int r = 0; r < reps; r++) acc += nt_max_f64(a, n, -INFINITY, &nan);
    return acc + nan;
}
double nt_ab_colmax(const double *x, Py_ssize_t ncol, Py_ssize_t r, int reps) {
    double m[4096], acc = 0; int nan[4096];
    for (int k = 0; k < reps; k++) {
        for (Py_ssize_t c = 0; c < ncol; c++) { m[c] = -INFINITY; nan[c] = 0; }
        nt_colmax_f64(x, ncol, ncol, r, m, nan);
        acc += m[0] + nan[0];
    }
    return acc;
}
void nt_ab_colmax_into(const double *x, Py_ssize_t ncol, Py_ssize_t r, double *m, int *nan) {
    nt_colmax_f64(x, ncol, ncol, r, m, nan);
}
