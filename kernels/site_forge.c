/* A forged entry, for fault injection only (krn_ctx_forge_next_site, site.h;
 * `ovt train --inject-fault forged-log`): a RECORD site rounds one element
 * to the wrong neighbour and logs that direction, which every verifier must
 * reject as fraud. The log is otherwise untouched. */
#include "kernels/site_internal.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/band.h"
#include "kernels/grid.h"

void krn_ctx_forge_next_site(krn_ctx *ctx)
{
    ctx->forge.armed = true;
    ctx->forge.made = false;
}

bool krn_ctx_forged(const krn_ctx *ctx)
{
    return ctx->forge.made;
}

/* Adds entry e (for an element the site has no entry for) to the job's
 * site, which is the last site of the log so far: the log is rebuilt with
 * e in index order. Testing only (krn_site_forge_entry). */
static int insert_entry(krn_ctx *ctx, const site_job *job, const krn_rlog_entry *e)
{
    krn_rlog *copy = krn_rlog_new();
    krn_rlog_entry *merged = NULL;
    int rc = copy ? 0 : OVT_ENOMEM;
    if (rc == 0)
        krn_rlog_reset(copy, ctx->step.index);
    for (size_t k = 0; rc == 0 && k < krn_rlog_nsites(ctx->step.log); k++) {
        const krn_rlog_site *ls = krn_rlog_site_at(ctx->step.log, k);
        if (ls->site != job->site) {
            rc = krn_rlog_add_site(copy, ls->site, ls->n, ls->entries, ls->count);
            continue;
        }
        merged = malloc((ls->count + 1) * sizeof *merged);
        if (merged == NULL) {
            rc = OVT_ENOMEM;
            break;
        }
        size_t m = 0, j = 0;
        for (; j < ls->count && ls->entries[j].index < e->index; j++)
            merged[m++] = ls->entries[j];
        merged[m++] = *e;
        for (; j < ls->count; j++)
            merged[m++] = ls->entries[j];
        rc = krn_rlog_add_site(copy, ls->site, ls->n, merged, m);
    }
    if (rc == 0 && krn_rlog_find(ctx->step.log, job->site) == NULL)
        rc = krn_rlog_add_site(copy, job->site, job->n, e, 1);
    if (rc == 0) {
        krn_rlog_reset(ctx->step.log, ctx->step.index);
        for (size_t k = 0; rc == 0 && k < krn_rlog_nsites(copy); k++) {
            const krn_rlog_site *ls = krn_rlog_site_at(copy, k);
            rc = krn_rlog_add_site(ctx->step.log, ls->site, ls->n, ls->entries, ls->count);
        }
    }
    free(merged);
    krn_rlog_free(copy);
    return rc;
}

/* The forgery for the highest element of [lo, hi) that allows one, if any
 * (x and the band's arrays start at element job->base); the site's entries
 * up to hi are in the log. */
bool krn_site_forge_find(const site_job *job, size_t lo, size_t hi, forgery *f)
{
    krn_ctx *ctx = job->ctx;
    const krn_rlog_site *s = krn_rlog_find(ctx->step.log, job->site);
    size_t k = s != NULL ? s->count : 0; /* entries below the element looked at */
    for (size_t i = hi; i-- > lo;) {
        while (k > 0 && s->entries[k - 1].index > i)
            k--;
        if (k > 0 && s->entries[k - 1].index == i)
            continue; /* logged */
        double xi = job->x[i - job->base];
        double tau = krn_band_at(job->band, job->x, i - job->base);
        krn_grid_pos pos;
        double ax = fabs(xi);
        if (!(tau > 0.0) || !(ax >= 0x1p-100 && ax < 0x1p100) ||
            krn_grid_locate(xi, ctx->cfg.grid_bits, &pos) < 0)
            continue;
        if (!(pos.dist > 1.25 * tau && pos.dist <= 1.5 * tau) || !(2.0 * tau <= 0.25 * pos.spacing))
            continue;
        bool up = pos.nearest != pos.above;
        f->found = true;
        f->wrong = up ? pos.above : pos.below;
        f->entry = (krn_rlog_entry){.index = i, .dir = up ? KRN_DIR_UP : KRN_DIR_DOWN};
        return true;
    }
    return false;
}

void krn_site_forge_apply(site_job *job, const forgery *f)
{
    krn_ctx *ctx = job->ctx;
    if (!f->found || isinf(f->wrong) || f->wrong == 0.0f || insert_entry(ctx, job, &f->entry) < 0)
        return;
    job->out[f->entry.index] = f->wrong;
    ctx->stats.logged++;
    ctx->forge.armed = false;
    ctx->forge.made = true;
}

void krn_site_forge_entry(site_job *job)
{
    forgery f = {0};
    if (krn_site_forge_find(job, 0, job->n, &f))
        krn_site_forge_apply(job, &f);
}
