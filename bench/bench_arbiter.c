/* bench_arbiter: what the arbiter's work costs. One GPT-2 training step is
 * recorded (the trainer's side, cpu backend, RECORD), then re-executed the
 * way `ovt arbiter watch` does it (a trn_runner: cpu backend, REPLAY with
 * the trainer's log, fraud check included); the replayed stateHash must be
 * the trainer's. The floor is bench_step's: the step's matmul FLOPs
 * (forward 2 N C OC, backward 4 N C OC per linear, the tied head counted
 * once) plus attention, at the OpenBLAS DGEMM rate measured in the same run
 * on the step's largest product shape. A warm RECORD step (the trainer's
 * second, from the same state) is timed too, so that the re-execution can
 * be read against a step of the same run. The trainer's steps run on a
 * runner of their own and are timed by its step seconds.
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
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

#include "bench_setup.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_arbiter: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

int main(int argc, char **argv)
{
    bench_shape shape = {.model = "gpt2-tiny", .B = 1, .T = 64, .threads = 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (bench_shape_flag(&shape, argv[i], argv[i + 1]))
            continue;
        fprintf(stderr, "usage: bench_arbiter [--model NAME] [--batch B] [--seq T] [--threads N]\n");
        return 2;
    }
    const char *model = shape.model;
    uint32_t B = shape.B, T = shape.T;
    int threads = shape.threads;
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
    trn_state *arbiter2;
    if (trn_state_clone(&arbiter, trainer) || trn_state_clone(&arbiter2, trainer))
        fail("clone");

    /* the trainer's step, on a runner of the trainer's (state 0 stays in
     * `trainer`, the runner steps a copy) */
    trn_runner *trn = NULL;
    trn_runner_opts to = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .threads = threads, .hash_later = true};
    trn_runner_result res;
    double t_replay = 0, t0;
    if (trn_runner_open(&trn, &rc, &data, &to))
        fail("setup");
    if (bench_runner_step(trn, trainer, &res))
        fail("record");
    double t_record = res.seconds;
    uint8_t *logbytes;
    size_t log_len;
    if (krn_rlog_encode(trn_runner_log(trn), &logbytes, &log_len))
        fail("encode");
    unsigned long long log_entries = (unsigned long long)krn_rlog_nentries(trn_runner_log(trn));
    ovt_hash h_trainer, h_arbiter;
    trn_state_hash(&h_trainer, trn_runner_state(trn));

    /* warm RECORD steps of the trainer (its context and workspace already
     * touched), the same step again from state 0, one before and one after
     * the re-execution: the yardstick the re-execution is read against,
     * measured in the same run */
    double t_warm[3], t_prepared = 0, t_prepare = 0;
    trn_runner *fresh = NULL, *prep = NULL;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = threads, .hash_later = true};
    for (int i = 0; i < 3; i++) {
        if (i == 1) {
            /* a runner of its own, made when the step is due */
            t0 = now();
            if (trn_runner_open(&fresh, &rc, &data, &ro) || trn_runner_adopt(fresh, &arbiter) ||
                krn_rlog_decode(trn_runner_log(fresh), logbytes, log_len) || trn_runner_step(fresh, &res))
                fail("replay");
            t_replay = now() - t0;
            arbiter = trn_runner_release(fresh);
            trn_runner_free(fresh);
        }
        if (i == 2) {
            /* the watcher's way: the runner prepared when the dispute opens
             * (not part of the re-execution), then the step */
            t0 = now();
            trn_runner_opts po = ro;
            po.prefault = true;
            if (trn_runner_open(&prep, &rc, &data, &po))
                fail("prepare");
            t_prepare = now() - t0;
            t0 = now();
            if (trn_runner_adopt(prep, &arbiter2) || krn_rlog_decode(trn_runner_log(prep), logbytes, log_len) ||
                trn_runner_step(prep, &res))
                fail("prepared replay");
            t_prepared = now() - t0;
            arbiter2 = trn_runner_release(prep);
            trn_runner_free(prep);
        }
        if (bench_runner_step(trn, trainer, &res))
            fail("warm record");
        t_warm[i] = res.seconds;
    }
    trn_runner_free(trn);
    trn_state_hash(&h_arbiter, arbiter);
    ovt_hash h_arbiter2;
    trn_state_hash(&h_arbiter2, arbiter2);
    int exact = memcmp(h_trainer.b, h_arbiter.b, 32) == 0 && memcmp(h_trainer.b, h_arbiter2.b, 32) == 0;

    /* the floor */
    size_t C = m.width, L = m.n_layer, V = m.vocab, N = (size_t)B * T;
    /* every matmul forward (2 N C OC) and backward (4 N C OC): per layer
     * qkv 3C^2, proj C^2, fc 4C^2, fc-proj 4C^2; the tied head V C once
     * (wte's embedding lookup is not a product); attention 4 B T^2 C per
     * layer forward, twice that backward. 191.6 GFLOP for gpt2-small at
     * B = 4, T = 64 (counting 6 FLOPs per parameter plus the head again,
     * as this benchmark did before, gave 252: wte twice). */
    double flops = 6.0 * (double)N * ((double)L * 12.0 * (double)C * (double)C + (double)V * (double)C) +
                   12.0 * (double)L * (double)B * (double)T * (double)T * (double)C;
    int blas_threads = threads ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    double rate = bench_dgemm_rate(N, 4 * C, C, blas_threads, NULL);
    if (rate < 0)
        fail("out of memory");
    double floor_s = flops / (rate * 1e9);
    printf("model %s, %zu parameters, batch %u x %u, %d thread(s)\n", model, trainer->layout.nparams, B, T,
           blas_threads);
    printf("rounding log: %llu entries, %zu bytes\n", log_entries, log_len);
    double warm = (t_warm[0] + t_warm[1] + t_warm[2]) / 3;
    printf("trainer step (RECORD), first     %8.3f s\n", t_record);
    printf("trainer step (RECORD), warm      %8.3f s   (%.3f before, %.3f between, %.3f after the re-executions)\n",
           warm, t_warm[0], t_warm[1], t_warm[2]);
    printf("arbiter re-execution (REPLAY)    %8.3f s   stateHash %s the trainer's; re-execution / warm RECORD = "
           "%.2f\n",
           t_replay, exact ? "equals" : "DIFFERS FROM", t_replay / warm);
    printf("prepared re-execution (REPLAY)   %8.3f s   (prepared before, in %.3f s); prepared / warm RECORD = %.2f\n",
           t_prepared, t_prepare, t_prepared / warm);
    printf("floor: %.4g GFLOP at %.2f GFLOP/s DGEMM (%zu x %zu x %zu) = %.3f s; re-execution / floor = %.2f, "
           "warm RECORD / floor = %.2f\n",
           flops / 1e9, rate, N, 4 * C, C, floor_s, t_replay / floor_s, warm / floor_s);
    free(logbytes);
    free(file);
    trn_state_free(trainer);
    trn_state_free(arbiter);
    trn_state_free(arbiter2);
    trn_run_data_free(&data);
    return exact ? 0 : 1;
}
