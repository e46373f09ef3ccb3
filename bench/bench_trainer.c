/* bench_trainer: what controlled rounding's log costs a whole training step.
 * For the demo MLP and gpt2-tiny on the cpu backend, the median wall time of
 * a step that rounds to nearest without a log (NEAREST), of the trainer's
 * step that also logs (RECORD), and of a verifier's step that applies the log
 * (REPLAY), from the same state and batch, as ratios measured in the same
 * run; plus log entries and bytes per step. Results: docs/bench-trainer.md.
 *
 *   build/bench/bench_trainer [reps]      (default 7) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/state.h"
#include "trainer/train.h"

#include "bench_util.h"

/* One timed step of a fresh copy of init in the given mode. */
static int timed_step(const trn_state *init, trn_workspace *w, krn_mode mode, const trn_batch *b, krn_rlog *log,
                      double *secs)
{
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = mode, .grid_bits = 32, .threads = 2};
    krn_ctx *ctx;
    trn_state *st;
    int rv = krn_ctx_new(&ctx, &kc);
    if (rv)
        return rv;
    if ((rv = trn_state_clone(&st, init))) {
        krn_ctx_free(ctx);
        return rv;
    }
    trn_step_info info;
    double t0 = now();
    rv = trn_train_step(ctx, w, st, b, mode == KRN_NEAREST ? NULL : log, &info);
    *secs = now() - t0;
    trn_state_free(st);
    krn_ctx_free(ctx);
    return rv;
}

static int bench(const char *name, const trn_run_config *rc, const trn_batch *b, int reps)
{
    trn_state *init;
    trn_workspace *w;
    krn_rlog *log = krn_rlog_new();
    int rv = trn_state_new(&init, rc);
    if (rv || (rv = trn_workspace_new(&w, rc)))
        return rv;
    trn_state_init(init);
    double t[3][64];
    const krn_mode modes[3] = {KRN_NEAREST, KRN_RECORD, KRN_REPLAY};
    /* Warm-up, and the log the REPLAY steps use. */
    double warm;
    if ((rv = timed_step(init, w, KRN_RECORD, b, log, &warm)))
        return rv;
    uint8_t *bytes;
    size_t len;
    if ((rv = krn_rlog_encode(log, &bytes, &len)))
        return rv;
    free(bytes);
    uint64_t entries = krn_rlog_nentries(log);
    krn_rlog *replay = krn_rlog_new();
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 3; k++) {
            if (modes[k] == KRN_REPLAY) {
                /* A fresh copy: RECORD resets the log it fills. */
                if ((rv = krn_rlog_encode(log, &bytes, &len)) || (rv = krn_rlog_decode(replay, bytes, len)))
                    return rv;
                free(bytes);
            }
            krn_rlog *use = modes[k] == KRN_REPLAY ? replay : log;
            if ((rv = timed_step(init, w, modes[k], b, use, &t[k][r])))
                return rv;
        }
    }
    for (int k = 0; k < 3; k++)
        qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
    double nearest = t[0][reps / 2], record = t[1][reps / 2], rep = t[2][reps / 2];
    printf("%-10s %9zu params  step NEAREST %8.4f s  RECORD %8.4f s (x%.3f)  REPLAY %8.4f s (x%.3f)  "
           "log %6llu entries %7zu bytes\n",
           name, init->layout.nparams, nearest, record, record / nearest, rep, rep / nearest,
           (unsigned long long)entries, len);
    krn_rlog_free(replay);
    krn_rlog_free(log);
    trn_workspace_free(w);
    trn_state_free(init);
    return 0;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > 64) {
        fprintf(stderr, "usage: bench_trainer [reps 1..64]\n");
        return 2;
    }
    printf("bench_trainer: median of %d steps per mode, cpu backend, 2 threads, b = 32\n", reps);

    /* The demo MLP (head shift 12) on its synthetic data. */
    trn_model_config m;
    if (trn_model_preset(&m, "mlp-demo"))
        return 1;
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 32;
    rc.head_shift = 12;
    data_samples data;
    if (data_samples_synthetic(&data, 1, 1024, m.in_dim, m.n_class, 32))
        return 1;
    rc.dataset_hash = data.hash;
    data_sample_batch sb;
    if (data_sample_batch_get(&sb, &data, rc.seed, 1, rc.batch_size))
        return 1;
    trn_batch b = {.B = sb.B, .x = sb.x, .labels = sb.y};
    if (bench("mlp-demo", &rc, &b, reps)) {
        fprintf(stderr, "bench_trainer: %s\n", ovt_errmsg());
        return 1;
    }
    data_sample_batch_free(&sb);
    data_samples_free(&data);

    /* gpt2-tiny on byte-level tokens of a generated text, B = 8, T = 64. */
    if (trn_model_preset(&m, "gpt2-tiny"))
        return 1;
    trn_config_default(&rc, &m);
    rc.batch_size = 8;
    rc.seq_len = 64;
    enum { N = 4096 };
    static uint8_t text[N];
    for (int i = 0; i < N; i++)
        text[i] = (uint8_t)("abcdefgh ijklmnop\n"[(i * 7 + i / 13) % 18]);
    data_tokens toks;
    if (data_tokens_parse(&toks, text, N))
        return 1;
    rc.dataset_hash = toks.hash;
    data_token_batch tb;
    if (data_token_batch_get(&tb, &toks, rc.seed, 1, rc.batch_size, rc.seq_len))
        return 1;
    trn_batch gb = {.B = tb.B, .T = tb.T, .inputs = tb.inputs, .targets = tb.targets};
    if (bench("gpt2-tiny", &rc, &gb, reps)) {
        fprintf(stderr, "bench_trainer: %s\n", ovt_errmsg());
        return 1;
    }
    data_token_batch_free(&tb);
    data_tokens_free(&toks);
    return 0;
}
