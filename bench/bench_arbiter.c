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

#include "bench_setup.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_arbiter: %s: %s\n", what, ovt_errmsg());
    exit(1);
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
    trn_run_data data;
    uint8_t *file;
    size_t file_len;
    if (bench_random_dataset(&data, &file, &file_len, &rc, &m))
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
    double rate = bench_dgemm_rate(N, 4 * C, C, blas_threads, NULL);
    if (rate < 0)
        fail("out of memory");
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
