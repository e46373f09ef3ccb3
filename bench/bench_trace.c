/* bench_trace: issue 40's figures for the step's trace (kernels/trace.h).
 * From the same state and batch (random tokens), interleaved in one run:
 * a RECORD step on the cpu backend, then the same step traced; the median
 * wall time of each, their ratio, and whether the two give the same
 * stateHash (they must: the trace changes no bit); and the same step with
 * proof of replay's cheap recorder (krn_trace_outputs_only: one site's
 * output root, the middle site's, no reads). Also the trace's size:
 * its sites (records), reads, the bytes of the records' encodings and of
 * the trace file, and the bytes of site outputs it hashed.
 *
 *   bench_trace [--model gpt2-small] [--batch 4] [--seq 64] [--threads 2] [--reps 3]
 * Results are written down in docs/bench-trainer.md. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rlog.h"
#include "kernels/site.h"
#include "kernels/trace.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"
#include "trainer/trace.h"
#include "trainer/train.h"

#include "bench_setup.h"

static void fail(const char *what)
{
    fprintf(stderr, "bench_trace: %s: %s\n", what, ovt_errmsg());
    exit(1);
}

/* One timed RECORD step of r from a fresh copy of init, traced into t
 * unless t is NULL; its stateHash in *hash. */
static double timed_step(trn_runner *r, const trn_state *init, krn_trace *t, ovt_hash *hash)
{
    trn_runner_result res;
    if (t && trn_runner_trace_next(r, t))
        fail("trace");
    if (bench_runner_step(r, init, &res))
        fail("step");
    if (res.trace_rc)
        fail("trace");
    trn_state_hash(hash, trn_runner_state(r));
    return res.seconds;
}

int main(int argc, char **argv)
{
    bench_shape shape = {.model = "gpt2-small", .B = 4, .T = 64, .threads = 2};
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (bench_shape_flag(&shape, argv[i], argv[i + 1]))
            continue;
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    }
    const char *model = shape.model;
    uint32_t B = shape.B, T = shape.T;
    int threads = shape.threads;
    if (reps < 1 || reps > 32)
        reps = 3;
    trn_model_config m;
    if (trn_model_preset(&m, model))
        fail("model");
    bench_step_inputs in;
    const char *what;
    if (bench_step_inputs_new(&in, &m, B, T, &what))
        fail(what);
    trn_runner *rec = NULL;
    if (bench_runner_open(&rec, &in, KRN_RECORD, threads))
        fail("runner");
    double plain[32], traced[32], one[32];
    ovt_hash h_plain, h_traced;
    bool same = true;
    krn_trace *t = NULL, *o = NULL;
    (void)timed_step(rec, in.init, NULL, &h_plain); /* warm: pages, scratch */
    for (int r = 0; r < reps; r++) {
        krn_trace_free(t);
        krn_trace_free(o);
        if (krn_trace_new(&t, false) || krn_trace_new(&o, false))
            fail("trace");
        plain[r] = timed_step(rec, in.init, NULL, &h_plain);
        traced[r] = timed_step(rec, in.init, t, &h_traced);
        same = same && !memcmp(h_plain.b, h_traced.b, 32);
        krn_trace_outputs_only(o, (uint32_t)(krn_trace_count(t) / 2));
        one[r] = timed_step(rec, in.init, o, &h_traced);
        same = same && !memcmp(h_plain.b, h_traced.b, 32);
    }
    size_t half = krn_trace_count(t) / 2;
    same = same && krn_trace_count(o) == krn_trace_count(t) &&
           !memcmp(krn_trace_record_at(o, half)->root.b, krn_trace_record_at(t, half)->root.b, 32);
    size_t nreads = 0;
    double hashed = 0;
    for (size_t i = 0; i < krn_trace_count(t); i++) {
        nreads += krn_trace_record_at(t, i)->nreads;
        hashed += 4.0 * (double)krn_trace_record_at(t, i)->n;
    }
    uint8_t *file;
    size_t file_len;
    ovt_hash root;
    if (krn_trace_finish(t, &root) || krn_trace_file(t, 1, &root, &file, &file_len))
        fail("trace file");
    double mp = median(plain, reps), mt = median(traced, reps), mo = median(one, reps);
    printf("%s B=%u T=%u threads=%d reps=%d\n", model, B, T, threads, reps);
    printf("  step          %.3f s (median)\n", mp);
    printf("  traced step   %.3f s (median), x%.3f, +%.3f s\n", mt, mt / mp, mt - mp);
    printf("  one site      %.3f s (median), x%.3f, +%.3f s (outputs only: site %zu's root, no reads)\n", mo,
           mo / mp, mo - mp, half);
    printf("  stateHash     %s with and without the trace (and the site's root the full trace's)\n",
           same ? "the same" : "DIFFERS");
    printf("  trace         %zu sites, %zu reads, %zu bytes of records, %zu bytes as a file\n", krn_trace_count(t),
           nreads, krn_trace_bytes(t), file_len);
    printf("  outputs       %.2f GB hashed into the records' trees, %.2f GB/s of the extra time\n", hashed / 1e9,
           hashed / 1e9 / (mt - mp));
    free(file);
    krn_trace_free(o);
    krn_trace_free(t);
    trn_runner_free(rec);
    bench_step_inputs_free(&in);
    return same ? 0 : 1;
}
