/* Sites whose values live elsewhere (site_sparse.h): the host settles the
 * candidates a device flagged with exactly the code krn_site runs. */
#include "kernels/site_sparse.h"

#include <string.h>

#include "kernels/site_internal.h"

void krn_sparse_fail(krn_ctx *ctx, int rc)
{
    (void)krn_site_leave(ctx, rc);
}

int krn_sparse_begin(krn_ctx *ctx, const char *name, size_t n, bool banded, krn_sparse_site *s)
{
    memset(s, 0, sizeof *s);
    int rc = krn_site_enter(ctx, name);
    if (rc < 0)
        return rc;
    s->name = name;
    s->site = ctx->step.next_site++;
    s->n = n;
    s->banded = banded;
    s->record = ctx->cfg.mode == KRN_RECORD && banded;
    s->flag_band = (ctx->cfg.mode == KRN_RECORD || ctx->cfg.mode == KRN_REPLAY) && banded;
    ctx->stats.sites++;
    ctx->stats.outputs += n;
    rc = krn_site_take_log(ctx, s->site, name, n, banded, &s->logged);
    return rc < 0 ? krn_site_leave(ctx, rc) : 0;
}

int krn_sparse_finish(krn_ctx *ctx, const krn_sparse_site *s, const krn_sparse_values *cand,
                      const krn_sparse_values *logged)
{
    site_job job = {.ctx = ctx, .name = s->name, .site = s->site, .n = s->n, .record = s->record,
                    .replay = ctx->cfg.mode == KRN_REPLAY && s->banded, .logged = s->logged};
    int rc = krn_site_reserve_chunks(ctx, 1);
    if (rc < 0)
        return krn_site_leave(ctx, rc);
    chunk_out *co = &ctx->threads.chunks[0];
    co->count = 0;
    co->wide = 0;
    co->ambiguous[0] = co->ambiguous[1] = 0;
    memset(co->within, 0, sizeof co->within);
    for (size_t k = 0; k < cand->count; k++) {
        size_t i = (size_t)cand->index[k];
        krn_rlog_entry e;
        double tau = s->flag_band ? cand->tau[k] : 0.0;
        if (i >= s->n || (k > 0 && cand->index[k] <= cand->index[k - 1]))
            return krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): candidate %zu "
                                                            "(element %zu) out of order or range",
                                                (unsigned long long)ctx->step.index, s->site, s->name, k, i));
        rc = krn_site_settle(&job, i, cand->x[k], tau, &cand->out[k], &e, co);
        if (rc == 1)
            rc = krn_site_chunk_push(co, &e);
        if (rc < 0)
            return krn_site_leave(ctx, rc);
    }
    job.wide = co->wide;
    memcpy(job.within, co->within, sizeof job.within);
    ctx->stats.ambiguous += co->ambiguous[0];
    ctx->stats.ambiguous_exact += co->ambiguous[1];
    if (s->record && co->count > 0) {
        rc = krn_rlog_add_site(ctx->step.log, s->site, s->n, co->entries, co->count);
        if (rc < 0)
            return krn_site_leave(ctx, rc);
        ctx->stats.logged += co->count;
    }
    if (s->logged != NULL) {
        for (size_t k = 0; k < s->logged->count; k++) {
            const krn_rlog_entry *e = &s->logged->entries[k];
            if (e->index >= s->n)
                return krn_site_leave(ctx, krn_site_entry_beyond(&job, e));
            rc = krn_site_apply_entry(&job, e, logged->x[k], logged->tau[k], &logged->out[k]);
            if (rc < 0)
                return krn_site_leave(ctx, rc);
        }
        ctx->stats.logged += s->logged->count;
    }
    ctx->stats.wide += job.wide;
    if ((rc = krn_site_row(&job)) < 0)
        return krn_site_leave(ctx, rc);
    return krn_site_leave(ctx, krn_site_findings_close(&job));
}
