/* bench_peers: the C side of the peer benchmark (bench/peers/run.sh). One
 * GPT-2, Llama or ResNet model and batch shape (a ResNet's batch: random
 * images), three steps kept warm in one process: ovt's
 * RECORD step (the trainer's, log written), ovt's PLAIN step (the same ops,
 * sites that only convert to FP32, no log; a baseline the protocol never
 * uses) and, for GPT-2, a plain FP32 step with OpenBLAS SGEMM (gpt2_fp32.c;
 * the others have none: their FP32_s is printed as -1). After one
 * warm-up step of each it reads lines from stdin: for each line "round" it
 * runs one timed step of each, in that order, and prints
 *   round RECORD_s PLAIN_s FP32_s
 * so that run.sh can interleave it with other processes (PyTorch's step)
 * without either paying a cold start. Each ovt step starts from the same
 * state (a fresh copy); the FP32 model keeps training its own copy. The ovt
 * steps run on two step runners (trainer/runner.h), RECORD's and PLAIN's,
 * each timed by its step seconds (not the batch's making). For the
 * line "rss" it prints "rss KB", the process's peak resident set so far
 * (getrusage: the initial state, the step's copy of it and the two
 * runners' workspaces all count; before the runners, one workspace served
 * both modes).
 *
 * --write-data PATH writes the random dataset (token or image file) the
 * steps train on to PATH and exits, for `ovt train --data PATH`.
 *
 *   bench_peers [--model gpt2-small] [--batch B] [--seq T] [--threads N] [--write-data PATH] */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/rlog.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/step.h"
#include "trainer/train.h"

#include "../bench_setup.h"
#include "gpt2_fp32.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_peers: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

/* One timed ovt step of r (its mode) from a fresh copy of init (the copy
 * is not timed), which is freed after it: one copy of the state at a time. */
static double ovt_step(trn_runner *r, const trn_state *init, bool record)
{
    trn_runner_result res;
    if (bench_runner_step(r, init, &res))
        fail(record ? "RECORD step" : "PLAIN step");
    trn_state_free(trn_runner_release(r));
    return res.seconds;
}

static double fp32_step(fp32_gpt2 *g, const trn_batch *b, const fp32_adamw *opt, int threads)
{
    openblas_set_num_threads(threads);
    double t0 = now();
    fp32_gpt2_step(g, b->inputs, b->targets, opt);
    double t = now() - t0;
    openblas_set_num_threads(1);
    return t;
}

int main(int argc, char **argv)
{
    bench_shape shape = {.model = "gpt2-small", .B = 4, .T = 64, .threads = 2};
    const char *write_data = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (bench_shape_flag(&shape, argv[i], argv[i + 1]))
            continue;
        if (!strcmp(argv[i], "--write-data"))
            write_data = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_peers [--model NAME] [--batch B] [--seq T] [--threads N] "
                            "[--write-data PATH]\n");
            return 2;
        }
    }
    const char *model = shape.model;
    uint32_t B = shape.B, T = shape.T;
    int threads = shape.threads;
    if (threads < 1 || B < 1 || T < 1) {
        fprintf(stderr, "bench_peers: threads, batch and seq must be positive\n");
        return 2;
    }
    trn_model_config m;
    if (trn_model_preset(&m, model))
        fail("--model");
    if (m.kind == TRN_MODEL_MLP) {
        fprintf(stderr, "bench_peers: a GPT-2, Llama or ResNet model is needed\n");
        return 2;
    }
    int has_fp32 = m.kind == TRN_MODEL_GPT2;
    bench_step_inputs in;
    const char *what;
    if (bench_step_inputs_new(&in, &m, B, T, &what))
        fail(what);
    if (write_data) {
        if (ovt_write_atomic(write_data, in.file, in.file_len, 0644))
            fail(write_data);
        printf("wrote %s: %zu bytes, the dataset of %s at batch %u\n", write_data, in.file_len, model, B);
        bench_step_inputs_free(&in);
        return 0;
    }
    trn_state *init = in.init;
    trn_runner *rec = NULL, *plain = NULL;
    if (bench_runner_open(&rec, &in, KRN_RECORD, threads) || bench_runner_open(&plain, &in, KRN_PLAIN, threads))
        fail("setup");
    krn_rlog *log = trn_runner_log(rec);
    trn_step_batch batch; /* the ovt steps' batch (step 1's), which the FP32 model trains on too */
    if (trn_step_batch_get(&batch, &in.data, &in.rc, init->step + 1))
        fail("batch");
    fp32_gpt2 *g = NULL;
    if (has_fp32 && fp32_gpt2_new(&g, m.n_layer, m.width, m.n_head, m.vocab, m.max_seq, B, T, in.rc.seed))
        fail("out of memory");
    fp32_adamw opt = {(float)in.rc.lr,  (float)in.rc.beta1,        (float)in.rc.beta2,
                      (float)in.rc.eps, (float)in.rc.weight_decay, (float)in.rc.grad_clip};

    /* warm-up: first touch of the workspaces, activations and moments */
    ovt_step(rec, init, true);
    ovt_step(plain, init, false);
    if (has_fp32)
        fp32_step(g, &batch.view, &opt, threads);
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    if (krn_rlog_encode(log, &enc, &enc_len))
        fail("log encoding");
    free(enc);
    printf("ready %s %zu params B %u T %u threads %d log_entries %llu log_bytes %zu\n", model, init->layout.nparams, B,
           in.rc.seq_len, threads, (unsigned long long)krn_rlog_nentries(log), enc_len);
    fflush(stdout);

    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "rss", 3)) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            printf("rss %ld\n", ru.ru_maxrss);
            fflush(stdout);
            continue;
        }
        if (strncmp(line, "round", 5))
            break;
        double t_rec = ovt_step(rec, init, true);
        double t_plain = ovt_step(plain, init, false);
        double f32 = has_fp32 ? fp32_step(g, &batch.view, &opt, threads) : -1;
        printf("round %.4f %.4f %.4f\n", t_rec, t_plain, f32);
        fflush(stdout);
    }
    if (g)
        fp32_gpt2_free(g);
    trn_step_batch_free(&batch);
    trn_runner_free(plain);
    trn_runner_free(rec);
    bench_step_inputs_free(&in);
    return 0;
}
