#ifndef OVT_BENCH_SETUP_H
#define OVT_BENCH_SETUP_H

/* What the step benchmarks (bench_step, bench_arbiter) both set up: a
 * dataset of random tokens, and the OpenBLAS DGEMM rate their FLOP floor is
 * measured against. */
#include <cblas.h>
#include <stdlib.h>

#include "bench_util.h"
#include "common/err.h"
#include "kernels/rng.h"
#include "trainer/data.h"
#include "trainer/rundata.h"

/* GFLOP/s of one FP64 DGEMM (m x k) @ (k x n) on `threads` OpenBLAS threads,
 * best of 3, per wall second and (*cpu_rate, when not NULL) per CPU second
 * of the process. OpenBLAS is left on 1 thread. -1 when out of memory. */
static inline double bench_dgemm_rate(size_t m, size_t n, size_t k, int threads, double *cpu_rate)
{
    double *a = calloc(m * k, sizeof *a), *b = calloc(k * n, sizeof *b), *c = calloc(m * n, sizeof *c);
    double rate = -1;
    if (a && b && c) {
        for (size_t i = 0; i < m * k; i++)
            a[i] = (double)(i % 7) - 3;
        for (size_t i = 0; i < k * n; i++)
            b[i] = (double)(i % 5) - 2;
        openblas_set_num_threads(threads);
        double best = 1e30, best_cpu = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now(), c0 = cpu_now();
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0, a,
                        (blasint)k, b, (blasint)n, 0.0, c, (blasint)n);
            double t = now() - t0, tc = cpu_now() - c0;
            best = t < best ? t : best;
            best_cpu = tc < best_cpu ? tc : best_cpu;
        }
        openblas_set_num_threads(1);
        double flop = 2.0 * (double)m * (double)n * (double)k;
        rate = flop / best / 1e9;
        if (cpu_rate)
            *cpu_rate = flop / best_cpu / 1e9;
    }
    free(a);
    free(b);
    free(c);
    return rate;
}

/* 16 batches' worth of random tokens for rc (its model m), encoded as an ovt
 * token file (as the store would hand it over) into *file (the caller frees
 * it after data) and parsed into data, which sets rc's datasetHash. 0 or a
 * negative OVT_E* code with the message set. */
static inline int bench_random_dataset(trn_run_data *data, uint8_t **file, size_t *file_len, trn_run_config *rc,
                                       const trn_model_config *m)
{
    size_t ntok = (size_t)rc->batch_size * rc->seq_len * 16 + rc->seq_len + 1;
    uint32_t *tok = malloc(ntok * sizeof *tok);
    if (!tok)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    for (size_t i = 0; i < ntok; i++)
        tok[i] = (uint32_t)krn_rng_below(rc->seed, 0, 99, i, m->vocab);
    int rv = trn_tokens_encode(tok, ntok, m->vocab, file, file_len);
    free(tok);
    if (rv)
        return rv;
    if (!(rv = trn_run_data_parse(data, *file, *file_len, rc, 1, "tokens")) && (rv = trn_config_check(rc)))
        trn_run_data_free(data);
    if (rv) {
        free(*file);
        *file = NULL;
    }
    return rv;
}

#endif
