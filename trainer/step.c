#include "trainer/step.h"

#include <string.h>

#include "kernels/site.h"
#include "trainer/train.h"

int trn_step_replay(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads, ovt_hash *batch_hash)
{
    memset(batch_hash, 0, sizeof *batch_hash);
    uint64_t i = st->step + 1;
    if (krn_rlog_step(log) != i)
        return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)i);
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .grid_bits = (int)st->config.grid_bits,
                     .threads = threads};
    krn_ctx *ctx = NULL;
    trn_workspace *w = NULL;
    trn_step_batch b;
    memset(&b, 0, sizeof b);
    int rv;
    if ((rv = krn_ctx_new(&ctx, &kc)) || (rv = trn_workspace_new(&w, &st->config)) ||
        (rv = trn_step_batch_get(&b, d, &st->config, i)))
        goto done;
    *batch_hash = b.hash;
    trn_step_info info;
    rv = trn_train_step(ctx, w, st, &b.view, log, &info);
done:
    trn_step_batch_free(&b);
    trn_workspace_free(w);
    krn_ctx_free(ctx);
    return rv;
}
