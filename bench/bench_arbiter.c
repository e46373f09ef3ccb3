/* bench_arbiter: what the arbiter's work costs. One GPT-2 training step is
 * recorded (the trainer's side, cpu backend, RECORD), then re-executed the
 * way `ovt arbiter watch` does it (trn_step_replay: cpu backend, REPLAY with
 * the trainer's log, fraud check included); the replayed stateHash must be
 * the trainer's. The floor is the step's FLOPs (6 per parameter per token,
 * counting the tied head once more for the logits, plus attention) at the
 * OpenBLAS DGEMM rate measured in the same run on the step's largest
 * product shape.
 *
 *   bench_arbiter [--model gpt2-tiny|gpt2-small] [--batch B] [--seq T] [--threads N]
 * Results are written down in docs/arbiter.md. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/rlog.h"
#include "kernels/rng.h"
#include "kernels/site.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/step.h"
#include "trainer/train.h"

#include "bench_util.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_arbiter: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

/* GFLOP/s of one FP64 DGEMM (m x k) @ (k x n), best of 3. */
static double dgemm_rate(size_t m, size_t n, size_t k, int threads)
{
    double *a = calloc(m * k, sizeof *a), *b = calloc(k * n, sizeof *b), *c = calloc(m * n, sizeof *c);
    if (!a || !b || !c)
        fail("out of memory");
    for (size_t i = 0; i < m * k; i++)
        a[i] = (double)(i % 7) - 3;
    for (size_t i = 0; i < k * n; i++)
        b[i] = (double)(i % 5) - 2;
    openblas_set_num_threads(threads);
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, 1.0, a,
                    (blasint)k, b, (blasint)n, 0.0, c, (blasint)n);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    free(a);
    free(b);
    free(c);
    return 2.0 * (double)m * (double)n * (double)k / best / 1e9;
}

int main(int argc, char **argv)
{
    const char *model = "gpt2-tiny";
    uint32_t B = 1, T = 64;
    int threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model"))
            model = argv[i + 1];
        else if (!strcmp(argv[i], "--batch"))
            B = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq"))
            T = (uint32_t)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_arbiter [--model NAME] [--batch B] [--seq T] [--threads N]\n");
            return 2;
        }
    }
    trn_model_config m;
    if (trn_model_preset(&m, model))
        fail("--model");
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = B;
    rc.seq_len = T;

    /* a token file of random tokens, as the store would hand it over */
    size_t ntok = (size_t)B * T * 16 + T + 1;
    uint32_t *tok = malloc(ntok * sizeof *tok);
    uint8_t *file;
    size_t file_len;
    for (size_t i = 0; i < ntok; i++)
        tok[i] = (uint32_t)krn_rng_below(rc.seed, 0, 99, i, m.vocab);
    if (trn_tokens_encode(tok, ntok, m.vocab, &file, &file_len))
        fail("tokens");
    free(tok);
    trn_run_data data;
    if (trn_run_data_parse(&data, file, file_len, &rc, 1, "tokens") || trn_config_check(&rc))
        fail("dataset");

    trn_state *trainer, *arbiter;
    if (trn_state_new(&trainer, &rc))
        fail("state");
    trn_state_init(trainer);
    if (trn_state_clone(&arbiter, trainer))
        fail("clone");

    /* the trainer's step */
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32, .threads = threads};
    krn_ctx *ctx;
    trn_workspace *w;
    krn_rlog *log = krn_rlog_new();
    trn_step_batch batch;
    trn_step_info info;
    if (krn_ctx_new(&ctx, &kc) || trn_workspace_new(&w, &rc) || trn_step_batch_get(&batch, &data, &rc, 1))
        fail("setup");
    double t0 = now();
    if (trn_train_step(ctx, w, trainer, &batch.view, log, &info))
        fail("record");
    double t_record = now() - t0;
    trn_step_batch_free(&batch);
    trn_workspace_free(w);
    krn_ctx_free(ctx);
    uint8_t *logbytes;
    size_t log_len;
    if (krn_rlog_encode(log, &logbytes, &log_len))
        fail("encode");

    /* the arbiter's re-execution */
    ovt_hash batch_hash, h_trainer, h_arbiter;
    t0 = now();
    if (trn_step_replay(arbiter, &data, log, threads, &batch_hash))
        fail("replay");
    double t_replay = now() - t0;
    trn_state_hash(&h_trainer, trainer);
    trn_state_hash(&h_arbiter, arbiter);
    int exact = memcmp(h_trainer.b, h_arbiter.b, 32) == 0;

    /* the floor */
    size_t C = m.width, L = m.n_layer, V = m.vocab, N = (size_t)B * T;
    double flops = 6.0 * (double)trainer->layout.nparams * (double)N + 6.0 * (double)V * (double)C * (double)N +
                   12.0 * (double)L * (double)B * (double)T * (double)T * (double)C;
    int blas_threads = threads ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    double rate = dgemm_rate(N, 4 * C, C, blas_threads);
    double floor_s = flops / (rate * 1e9);
    printf("model %s, %zu parameters, batch %u x %u, %d thread(s)\n", model, trainer->layout.nparams, B, T,
           blas_threads);
    printf("rounding log: %llu entries, %zu bytes\n", (unsigned long long)krn_rlog_nentries(log), log_len);
    printf("trainer step (RECORD)            %8.3f s\n", t_record);
    printf("arbiter re-execution (REPLAY)    %8.3f s   stateHash %s the trainer's\n", t_replay,
           exact ? "equals" : "DIFFERS FROM");
    printf("floor: %.3g GFLOP at %.2f GFLOP/s DGEMM (%zu x %zu x %zu) = %.3f s; re-execution / floor = %.1fx\n",
           flops / 1e9, rate, N, 4 * C, C, floor_s, t_replay / floor_s);
    free(logbytes);
    free(file);
    krn_rlog_free(log);
    trn_state_free(trainer);
    trn_state_free(arbiter);
    trn_run_data_free(&data);
    return exact ? 0 : 1;
}
