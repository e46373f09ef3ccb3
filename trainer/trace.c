/* A training step with its trace (trainer/trace.h). */
#include "trainer/trace.h"

#include <stdio.h>
#include <string.h>

size_t trn_batch_arrays(trn_batch_array out[TRN_BATCH_ARRAYS], const trn_batch *batch, size_t in_dim)
{
    size_t bt = (size_t)batch->B * batch->T;
    const trn_batch_array all[TRN_BATCH_ARRAYS] = {{"batch.inputs", batch->inputs, bt},
                                                   {"batch.targets", batch->targets, bt},
                                                   {"batch.x", batch->x, (size_t)batch->B * in_dim},
                                                   {"batch.labels", batch->labels, batch->B}};
    size_t n = 0;
    for (size_t i = 0; i < TRN_BATCH_ARRAYS; i++)
        if (all[i].words)
            out[n++] = all[i];
    return n;
}

int trn_trace_regions(krn_trace *t, const trn_state *st, const trn_batch *batch)
{
    static const char *const section[3] = {"params", "m", "v"};
    const float *base[3] = {st->params, st->m, st->v};
    const trn_layout *l = &st->layout;
    char name[64];
    int rv = 0;
    for (int s = 0; s < 3 && !rv; s++)
        for (size_t i = 0; i < l->count && !rv; i++) {
            snprintf(name, sizeof name, "%s/%s", section[s], l->t[i].name);
            rv = krn_trace_region(t, KRN_TRACE_STATE, name, base[s] + l->t[i].offset, l->t[i].size);
        }
    trn_batch_array arr[TRN_BATCH_ARRAYS];
    size_t n = trn_batch_arrays(arr, batch, st->config.model.in_dim);
    for (size_t i = 0; i < n && !rv; i++)
        rv = krn_trace_region(t, KRN_TRACE_BATCH, arr[i].name, arr[i].words, arr[i].n);
    return rv;
}

int trn_train_step_traced(krn_ctx *ctx, trn_workspace *w, trn_state *st, const trn_batch *batch, krn_rlog *log,
                          krn_trace *t, trn_step_info *info, int *trace_rc, ovt_hash *root)
{
    memset(root, 0, sizeof *root);
    char msg[512];
    int setup = trn_trace_regions(t, st, batch);
    if (!setup)
        setup = krn_ctx_set_trace(ctx, t);
    if (setup) { /* the step runs all the same, untraced */
        snprintf(msg, sizeof msg, "%s", ovt_errmsg());
        int rv = trn_train_step(ctx, w, st, batch, log, info);
        *trace_rc = setup;
        if (!rv)
            ovt_fail(setup, "%s", msg);
        return rv;
    }
    int rv = trn_train_step(ctx, w, st, batch, log, info);
    int off = krn_ctx_set_trace(ctx, NULL);
    (void)off; /* detaching cannot fail */
    snprintf(msg, sizeof msg, "%s", rv ? ovt_errmsg() : "");
    *trace_rc = krn_trace_finish(t, root);
    if (rv) /* the step's failure is the message to keep */
        ovt_fail(rv, "%s", msg);
    return rv;
}
