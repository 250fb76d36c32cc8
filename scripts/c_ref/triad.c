/* STREAM triad a[i] = b[i] + s * c[i], FP64, plain C + OpenMP (the reference the numba probe
 * is compared against). Bytes counted as STREAM does: 24 B per element (read b, c; write a);
 * write-allocate traffic is not counted. Arrays are first-touched by the threads that use them
 * (static schedule in both places) so pages land where they are used. Like numpy (which
 * roofbench's numba probe allocates with), large arrays ask for transparent huge pages
 * (madvise): with THP in "madvise" mode a plain malloc gets 4 KiB pages and loses ~half its
 * bandwidth to TLB misses, which would make the comparison about page size, not code.
 *
 *   build: gcc -O3 -march=native -fopenmp triad.c -o triad
 *   run:   OMP_NUM_THREADS=<cores> OMP_PROC_BIND=close OMP_PLACES=cores ./triad N [reps]
 * N = elements per array; roofbench uses at least 4x the last-level cache per array.
 * The last stdout line is one JSON object (parsed by roofbench.bench.cpu_reference).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE (2UL << 20)

/* 2 MiB-aligned block, rounded up to whole 2 MiB pages, marked for transparent huge pages. */
static double *alloc_array(long n, int *thp) {
    size_t bytes = ((size_t)n * sizeof(double) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, bytes);
#ifdef MADV_HUGEPAGE
    if (p && madvise(p, bytes, MADV_HUGEPAGE) != 0) *thp = 0;
#else
    *thp = 0;
#endif
    return p;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    if (n <= 0 || reps <= 0) {
        fprintf(stderr, "usage: %s N>0 [reps>0]\n", argv[0]);
        return 2;
    }
    int thp = 1;
    double *a = alloc_array(n, &thp), *b = alloc_array(n, &thp), *c = alloc_array(n, &thp);
    if (!a || !b || !c) {
        fprintf(stderr, "triad: cannot allocate 3 x %ld doubles\n", n);
        return 1;
    }
    const double s = 3.0;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = 1.0 + (double)(i % 1000) * 1e-3;
        c[i] = 2.0 - (double)(i % 777) * 1e-3;
    }
    double *sec = malloc(sizeof(double) * (reps + 1));
    for (int r = 0; r <= reps; r++) { /* r = 0 is the warm-up, not reported */
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        sec[r] = omp_get_wtime() - t0;
    }
    /* Check every element: a wrong kernel must not produce a bandwidth. */
    long bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
    for (long i = 0; i < n; i++) bad += fabs(a[i] - (b[i] + s * c[i])) > 1e-12;
    double bytes = 24.0 * (double)n;
    double *sorted = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) sorted[r] = sec[r + 1];
    qsort(sorted, reps, sizeof(double), cmp_dbl);
    double med_s = reps % 2 ? sorted[reps / 2] : 0.5 * (sorted[reps / 2 - 1] + sorted[reps / 2]);
    printf("{\"program\": \"triad\", \"n\": %ld, \"bytes_per_rep\": %.0f, \"threads\": %d, "
           "\"reps\": %d, \"thp_madvise\": %s, \"valid\": %s, \"best_gbs\": %.4f, "
           "\"median_gbs\": %.4f, \"seconds\": [",
           n, bytes, omp_get_max_threads(), reps, thp ? "true" : "false", bad ? "false" : "true",
           bytes / sorted[0] / 1e9, bytes / med_s / 1e9);
    for (int r = 0; r < reps; r++) printf("%s%.9g", r ? ", " : "", sec[r + 1]);
    printf("]}\n");
    free(sorted);
    free(sec);
    free(a);
    free(b);
    free(c);
    return bad ? 1 : 0;
}
