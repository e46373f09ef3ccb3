#ifndef OVT_BENCH_SETUP_H
#define OVT_BENCH_SETUP_H

/* What the step benchmarks (bench_step, bench_arbiter, bench/peers) set up:
 * a dataset of random tokens (or images), the inputs of one timed step on a
 * step runner, and the
 * OpenBLAS DGEMM rate their FLOP floor is measured against. */
#include <cblas.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "common/err.h"
#include "kernels/rng.h"
#include "data/dataset.h"
#include "data/images.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/step.h"

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

/* 16 batches' worth of random images of a ResNet m (m->in_ch x in_hw x
 * in_hw pixels, labels below m->n_class) encoded as an ovt image file into
 * *file. Timing does not depend on the pixels' values. */
static inline int bench_random_images(uint8_t **file, size_t *file_len, const trn_run_config *rc,
                                      const trn_model_config *m)
{
    data_images im = {.count = rc->batch_size * 16, .channels = m->in_ch, .height = m->in_hw, .width = m->in_hw,
                      .n_class = m->n_class};
    size_t npix = (size_t)im.count * m->in_dim;
    im.pixels = malloc(npix);
    im.labels = malloc(im.count);
    if (!im.pixels || !im.labels) {
        data_images_free(&im);
        return ovt_fail(OVT_ENOMEM, "out of memory for %u random images", im.count);
    }
    for (size_t i = 0; i < npix; i++)
        im.pixels[i] = (uint8_t)krn_rng_below(rc->seed, 0, 98, i, 256);
    for (uint32_t i = 0; i < im.count; i++)
        im.labels[i] = (uint8_t)krn_rng_below(rc->seed, 0, 97, i, m->n_class);
    int rv = data_images_encode(&im, file, file_len);
    data_images_free(&im);
    return rv;
}

/* 16 batches' worth of random tokens for rc (its model m; random images for
 * a ResNet: bench_random_images), encoded as an ovt token (image) file (as
 * the store would hand it over) into *file (the caller frees it after data)
 * and parsed into data, which sets rc's datasetHash. 0 or a negative OVT_E*
 * code with the message set. */
static inline int bench_random_dataset(trn_run_data *data, uint8_t **file, size_t *file_len, trn_run_config *rc,
                                       const trn_model_config *m)
{
    int rv;
    if (m->kind == TRN_MODEL_RESNET) {
        rv = bench_random_images(file, file_len, rc, m);
    } else {
        size_t ntok = (size_t)rc->batch_size * rc->seq_len * 16 + rc->seq_len + 1;
        uint32_t *tok = malloc(ntok * sizeof *tok);
        if (!tok)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        for (size_t i = 0; i < ntok; i++)
            tok[i] = (uint32_t)krn_rng_below(rc->seed, 0, 99, i, m->vocab);
        rv = data_tokens_encode(tok, ntok, m->vocab, file, file_len);
        free(tok);
    }
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

/* The shape every step benchmark takes from its command line: --model NAME,
 * --batch B, --seq T, --threads N (the caller sets the defaults). Whether
 * flag is one of them; its value is taken from value. */
typedef struct {
    const char *model;
    uint32_t B, T;
    int threads;
} bench_shape;

static inline bool bench_shape_flag(bench_shape *s, const char *flag, const char *value)
{
    if (!strcmp(flag, "--model"))
        s->model = value;
    else if (!strcmp(flag, "--batch"))
        s->B = (uint32_t)atoi(value);
    else if (!strcmp(flag, "--seq"))
        s->T = (uint32_t)atoi(value);
    else if (!strcmp(flag, "--threads"))
        s->threads = atoi(value);
    else
        return false;
    return true;
}

/* What a step benchmark times over and over: model m's default config at
 * batch B and sequence T (a language model's only), a random dataset for it
 * (bench_random_dataset) and the initial state. The steps run on step
 * runners (bench_runner_open), each timed one from a fresh copy of init. */
typedef struct {
    trn_run_config rc;
    trn_run_data data;
    uint8_t *file;
    size_t file_len;
    trn_state *init;
} bench_step_inputs;

/* 0, or a negative OVT_E* code with the message set and *what naming the
 * stage that failed ("dataset" or "setup"); nothing is left to free then. */
static inline int bench_step_inputs_new(bench_step_inputs *in, const trn_model_config *m, uint32_t B, uint32_t T,
                                        const char **what)
{
    memset(in, 0, sizeof *in);
    trn_config_default(&in->rc, m);
    in->rc.batch_size = B;
    if (trn_model_is_lm(m))
        in->rc.seq_len = T; /* a ResNet has none */
    *what = "dataset";
    int rv = bench_random_dataset(&in->data, &in->file, &in->file_len, &in->rc, m);
    if (rv)
        return rv;
    *what = "setup";
    if ((rv = trn_state_new(&in->init, &in->rc))) {
        trn_run_data_free(&in->data);
        free(in->file);
        return rv;
    }
    trn_state_init(in->init);
    return 0;
}

static inline void bench_step_inputs_free(bench_step_inputs *in)
{
    trn_state_free(in->init);
    trn_run_data_free(&in->data);
    free(in->file);
}

/* A step runner of in's run on the cpu backend in `mode` on `threads`;
 * the caller hashes the state when it wants to (hash_later). */
static inline int bench_runner_open(trn_runner **r, const bench_step_inputs *in, krn_mode mode, int threads)
{
    trn_runner_opts o = {.backend = KRN_BACKEND_CPU, .mode = mode, .threads = threads, .hash_later = true};
    return trn_runner_open(r, &in->rc, &in->data, &o);
}

/* The step after init (its schedule's batch) on r from a fresh copy of
 * init; res->seconds is the step's own time (and its log's read). */
static inline int bench_runner_step(trn_runner *r, const trn_state *init, trn_runner_result *res)
{
    int rv = trn_runner_copy_state(r, init);
    return rv ? rv : trn_runner_step(r, res);
}

#endif
