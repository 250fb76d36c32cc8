/* Peak FMA throughput probe, C intrinsics, OpenMP over all cores.
 *
 * Each thread keeps NACC independent vector accumulators and updates every one with
 * acc = acc * m + c per step; NACC must cover FMA latency x FMA issue rate (Zen 3: 4 cycles x
 * 2 pipes = 8 chains) so that the FMA pipes never wait on a result, and NACC + 2 (the two
 * constants) must fit in the vector register file, else the accumulators spill to the stack
 * and the loop runs at about half rate (24 ymm chains on a 16-register AVX2 core). Widest
 * vectors the compiler targets: AVX-512 (__AVX512F__, 32 zmm) else AVX2+FMA (__FMA__, 16 ymm).
 * FLOPs = 2 per FMA per lane.
 *
 *   build: gcc -O3 -march=native -fopenmp [-DNACC=n] fma_peak.c -o fma_peak
 *   run:   OMP_NUM_THREADS=<cores> OMP_PROC_BIND=close OMP_PLACES=cores ./fma_peak [steps] [reps]
 * scripts/cpu_reference.py passes -DNACC= with the numba probe's count (from
 * roofs/probes/fma_model.py) so that both run the same shape. The last stdout line is one JSON
 * object.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__AVX512F__)
#define VREGS 32
#define VBITS 512
typedef __m512d vd;
typedef __m512 vs;
#define SET1_PD _mm512_set1_pd
#define SET1_PS _mm512_set1_ps
#define FMA_PD _mm512_fmadd_pd
#define FMA_PS _mm512_fmadd_ps
#define ADD_PD _mm512_add_pd
#define ADD_PS _mm512_add_ps
#define STORE_PD _mm512_storeu_pd
#define STORE_PS _mm512_storeu_ps
#elif defined(__FMA__)
#define VREGS 16
#define VBITS 256
typedef __m256d vd;
typedef __m256 vs;
#define SET1_PD _mm256_set1_pd
#define SET1_PS _mm256_set1_ps
#define FMA_PD _mm256_fmadd_pd
#define FMA_PS _mm256_fmadd_ps
#define ADD_PD _mm256_add_pd
#define ADD_PS _mm256_add_ps
#define STORE_PD _mm256_storeu_pd
#define STORE_PS _mm256_storeu_ps
#else
#error "needs FMA (AVX2) or AVX-512; build with -march=native on an x86-64 CPU that has them"
#endif

/* Chains: 1.5 x (latency 4 x 2 pipes) of current cores, never more than the registers hold. */
#ifndef NACC
#define NACC ((VREGS - 2) < 12 ? (VREGS - 2) : 12)
#endif
#if NACC < 1 || NACC > VREGS - 2
#error "NACC must be 1 .. vector registers - 2 (the accumulators and the two constants)"
#endif

#define LANES_PD (VBITS / 64)
#define LANES_PS (VBITS / 32)

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed run of `steps` x NACC vector FMAs on every thread; returns seconds. V is the
 * vector type, T its lane type, SFX the intrinsics' suffix (PD, PS). */
#define RUN_FMA(NAME, V, T, SFX, M, C)                                                   \
    static double NAME(long steps, double *sink) {                                       \
        double t0 = omp_get_wtime();                                                     \
        _Pragma("omp parallel")                                                          \
        {                                                                                \
            V acc[NACC];                                                                 \
            const V m = SET1_##SFX(M), c = SET1_##SFX(C);                                \
            for (int k = 0; k < NACC; k++)                                               \
                acc[k] = SET1_##SFX((T)1 + (T)0.01 * k + omp_get_thread_num());          \
            for (long s = 0; s < steps; s++) {                                           \
                _Pragma("GCC unroll 16")                                                 \
                for (int k = 0; k < NACC; k++) acc[k] = FMA_##SFX(acc[k], m, c);         \
            }                                                                            \
            V sum = acc[0];                                                              \
            for (int k = 1; k < NACC; k++) sum = ADD_##SFX(sum, acc[k]);                 \
            T out[LANES_##SFX];                                                          \
            STORE_##SFX(out, sum); /* every chain feeds the stored result: no dead code */ \
            _Pragma("omp atomic")                                                        \
            sink[0] += out[0];                                                           \
        }                                                                                \
        return omp_get_wtime() - t0;                                                     \
    }
RUN_FMA(run_fp64, vd, double, PD, 0.999999, 1e-6)
RUN_FMA(run_fp32, vs, float, PS, 0.9999f, 1e-4f)

static void report(const char *name, double flops_per_run, const double *sec, int reps,
                   int last) {
    double *sorted = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) sorted[r] = sec[r];
    qsort(sorted, reps, sizeof(double), cmp_dbl);
    double best = flops_per_run / sorted[0] / 1e9;
    double med = flops_per_run /
                 (reps % 2 ? sorted[reps / 2] : 0.5 * (sorted[reps / 2 - 1] + sorted[reps / 2])) /
                 1e9;
    printf("\"%s\": {\"best_gflops\": %.4f, \"median_gflops\": %.4f, \"flops_per_run\": %.0f, "
           "\"seconds\": [",
           name, best, med, flops_per_run);
    for (int r = 0; r < reps; r++) printf("%s%.9g", r ? ", " : "", sec[r]);
    printf("]}%s", last ? "" : ", ");
    free(sorted);
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 20000000L;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (steps <= 0 || reps <= 0) {
        fprintf(stderr, "usage: %s [steps>0] [reps>0]\n", argv[0]);
        return 2;
    }
    int nt = omp_get_max_threads();
    double sink = 0.0;
    double *s64 = malloc(sizeof(double) * reps), *s32 = malloc(sizeof(double) * reps);
    run_fp64(steps / 10 + 1, &sink); /* warm-up: thread start, clocks ramp */
    run_fp32(steps / 10 + 1, &sink);
    for (int r = 0; r < reps; r++) { /* interleaved so both see the same conditions */
        s64[r] = run_fp64(steps, &sink);
        s32[r] = run_fp32(steps, &sink);
    }
    double f64 = 2.0 * LANES_PD * NACC * (double)steps * nt;
    double f32 = 2.0 * LANES_PS * NACC * (double)steps * nt;
    printf("{\"program\": \"fma_peak\", \"vector_bits\": %d, \"vector_registers\": %d, "
           "\"accumulators\": %d, \"threads\": %d, \"steps\": %ld, \"reps\": %d, "
           "\"sink\": %.6g, ",
           VBITS, VREGS, NACC, nt, steps, reps, sink);
    report("fp64", f64, s64, reps, 0);
    report("fp32", f32, s32, reps, 1);
    printf("}\n");
    free(s64);
    free(s32);
    return 0;
}
