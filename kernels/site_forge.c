/* A forged entry, for fault injection only (krn_ctx_forge_next_site, site.h;
 * `ovt train --inject-fault forged-log`): a RECORD site rounds one element
 * to the wrong neighbour and logs that direction, which every verifier must
 * reject as fraud. The log is otherwise untouched. */
#include "kernels/site_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/band.h"
#include "kernels/grid.h"

void krn_ctx_forge_next_site(krn_ctx *ctx)
{
    ctx->forge.armed = true;
    ctx->forge.hidden = false;
    ctx->forge.made = false;
}

void krn_ctx_forge_hidden(krn_ctx *ctx)
{
    krn_ctx_forge_next_site(ctx);
    ctx->forge.hidden = true;
}

bool krn_ctx_forged(const krn_ctx *ctx)
{
    return ctx->forge.made;
}

void krn_ctx_flip_entry(krn_ctx *ctx, uint32_t site, uint64_t element)
{
    ctx->forge.flip_armed = true;
    ctx->forge.flip_site = site;
    ctx->forge.flip_element = element;
    ctx->forge.flipped = false;
}

void krn_ctx_flip_output_bit(krn_ctx *ctx, uint32_t site, uint64_t element, unsigned bit)
{
    ctx->forge.bit_armed = true;
    ctx->forge.bit_made = false;
    ctx->forge.bit_site = site;
    ctx->forge.bit_element = element;
    ctx->forge.bit_bit = bit % 32;
}

bool krn_ctx_output_flipped(const krn_ctx *ctx)
{
    return ctx->forge.bit_made;
}

void krn_site_flip_output(site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (job->site != ctx->forge.bit_site || job->n == 0)
        return;
    float *o = &job->out[ctx->forge.bit_element % job->n];
    uint32_t bits;
    memcpy(&bits, o, sizeof bits);
    bits ^= (uint32_t)1 << ctx->forge.bit_bit;
    memcpy(o, &bits, sizeof bits);
    ctx->forge.bit_armed = false;
    ctx->forge.bit_made = true;
}

void krn_ctx_steer(krn_ctx *ctx, int dir)
{
    ctx->forge.steer = dir > 0 ? 1 : dir < 0 ? -1 : 0;
}

bool krn_ctx_flipped(const krn_ctx *ctx)
{
    return ctx->forge.flipped;
}

/* Adds entry e to the job's site, which is the last site of the log so
 * far: the log is rebuilt with e in index order, in place of the site's
 * entry for the same element if it has one (replace). Testing only
 * (krn_site_forge_entry, krn_site_flip_entry). */
static int put_entry(krn_ctx *ctx, const site_job *job, const krn_rlog_entry *e, bool replace)
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
        j += replace && j < ls->count && ls->entries[j].index == e->index;
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
    bool hidden = ctx->forge.hidden;
    for (size_t i = hi; i-- > lo;) {
        while (k > 0 && s->entries[k - 1].index > i)
            k--;
        bool logged = k > 0 && s->entries[k - 1].index == i;
        if (logged != hidden || (hidden && s->entries[k - 1].dir == KRN_DIR_VALUE))
            continue; /* forge: an unlogged element; hidden: a logged direction */
        double xi = job->x[i - job->base];
        double tau = krn_band_at(job->band, job->x, i - job->base);
        krn_grid_pos pos;
        double ax = fabs(xi);
        if (!(tau > 0.0) || !(ax >= 0x1p-100 && ax < 0x1p100) ||
            krn_grid_locate(xi, ctx->cfg.grid_bits, &pos) < 0)
            continue;
        bool range = hidden ? pos.dist > 0.5 * tau && pos.dist <= 0.5 * tau + krn_site_widening(tau)
                            : pos.dist > 1.25 * tau && pos.dist <= 1.5 * tau;
        if (!range || !(2.0 * tau <= 0.25 * pos.spacing))
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
    if (!f->found || isinf(f->wrong) || f->wrong == 0.0f || put_entry(ctx, job, &f->entry, ctx->forge.hidden) < 0)
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

void krn_site_flip_entry(site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (job->site != ctx->forge.flip_site || ctx->forge.flip_element >= job->n)
        return;
    ctx->forge.flip_armed = false;
    const krn_rlog_site *s = krn_rlog_find(ctx->step.log, job->site);
    size_t i = (size_t)ctx->forge.flip_element;
    for (size_t k = 0; s != NULL && k < s->count; k++) {
        krn_rlog_entry e = s->entries[k];
        if (e.index != i || (e.dir != KRN_DIR_UP && e.dir != KRN_DIR_DOWN))
            continue;
        /* the neighbour across the midpoint: v's interval ends at the
         * midpoints to its neighbours, so they are 2 lo - v and 2 hi - v */
        double lo, hi, v = (double)job->out[i];
        if (krn_grid_interval(job->out[i], ctx->cfg.grid_bits, &lo, &hi) < 0)
            return;
        double other = e.dir == KRN_DIR_UP ? 2.0 * lo - v : 2.0 * hi - v;
        e.dir = e.dir == KRN_DIR_UP ? KRN_DIR_DOWN : KRN_DIR_UP;
        if (isinf(other) || put_entry(ctx, job, &e, true) < 0)
            return;
        job->out[i] = krn_canonical_zero((float)other);
        ctx->forge.flipped = true;
        return;
    }
}
