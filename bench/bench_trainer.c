/* bench_trainer: what controlled rounding's log costs a whole training step.
 * For the demo MLP and gpt2-tiny on the cpu backend, the median wall time of
 * a step that rounds to nearest without a log (NEAREST), of the trainer's
 * step that also logs (RECORD), and of a verifier's step that applies the log
 * (REPLAY), from the same state and batch, as ratios measured in the same
 * run; plus log entries and bytes per step. Each mode's steps run on a step
 * runner of its own (trainer/runner.h), from a fresh copy of the state. Results: docs/bench-trainer.md.
 *
 *   build/bench/bench_trainer [reps]      (default 7) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"

#include "bench_util.h"

/* One timed step of the runner from a fresh copy of init: the step's own
 * wall time (trn_runner_result.seconds), not the batch's making. */
static int timed_step(trn_runner *r, const trn_state *init, double *secs)
{
    trn_runner_result res;
    int rv = trn_runner_copy_state(r, init);
    if (!rv)
        rv = trn_runner_step(r, &res);
    *secs = res.seconds;
    return rv;
}

static int bench(const char *name, const trn_run_config *rc, const trn_run_data *data, int reps)
{
    const krn_mode modes[3] = {KRN_NEAREST, KRN_RECORD, KRN_REPLAY};
    trn_runner *run[3] = {NULL, NULL, NULL};
    trn_state *init = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rv = trn_state_new(&init, rc);
    if (rv)
        return rv;
    trn_state_init(init);
    for (int k = 0; k < 3 && !rv; k++) {
        trn_runner_opts o = {.backend = KRN_BACKEND_CPU, .mode = modes[k], .threads = 2, .hash_later = true};
        rv = trn_runner_open(&run[k], rc, data, &o);
    }
    double t[3][64];
    /* Warm-up, and the log the REPLAY steps use. */
    double warm;
    if (rv || (rv = timed_step(run[1], init, &warm)) || (rv = krn_rlog_encode(trn_runner_log(run[1]), &bytes, &len)))
        goto done;
    uint64_t entries = krn_rlog_nentries(trn_runner_log(run[1]));
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 3; k++) {
            /* REPLAY: a fresh copy of the log (the step reads it, RECORD resets its own) */
            if (modes[k] == KRN_REPLAY && (rv = krn_rlog_decode(trn_runner_log(run[k]), bytes, len)))
                goto done;
            if ((rv = timed_step(run[k], init, &t[k][r])))
                goto done;
        }
    for (int k = 0; k < 3; k++)
        qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
    double nearest = t[0][reps / 2], record = t[1][reps / 2], rep = t[2][reps / 2];
    printf("%-10s %9zu params  step NEAREST %8.4f s  RECORD %8.4f s (x%.3f)  REPLAY %8.4f s (x%.3f)  "
           "log %6llu entries %7zu bytes\n",
           name, init->layout.nparams, nearest, record, record / nearest, rep, rep / nearest,
           (unsigned long long)entries, len);
done:
    free(bytes);
    for (int k = 0; k < 3; k++)
        trn_runner_free(run[k]);
    trn_state_free(init);
    return rv;
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
    trn_run_data rd = {.samples = data};
    if (bench("mlp-demo", &rc, &rd, reps)) {
        fprintf(stderr, "bench_trainer: %s\n", ovt_errmsg());
        return 1;
    }
    trn_run_data_free(&rd);

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
    trn_run_data td = {.tokens = toks};
    if (bench("gpt2-tiny", &rc, &td, reps)) {
        fprintf(stderr, "bench_trainer: %s\n", ovt_errmsg());
        return 1;
    }
    trn_run_data_free(&td);
    return 0;
}
