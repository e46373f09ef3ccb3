/* Sites handed over in parts (krn_site_parts_begin, site.h): the values come
 * in element order, so no FP64 copy of the whole site exists; each part is
 * rounded as it comes, and in REPLAY the logged elements keep their value
 * and band until the whole site went by, when the entries are applied as
 * krn_site applies them. */
#include "kernels/site_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/band.h"

struct krn_site_parts {
    site_job job;
    krn_band band; /* the caller's kind, scale, rel and cols; a and b per part */
    size_t next;   /* elements handed over so far */
    int rc;        /* the site's failure, once it failed */
    /* REPLAY: each logged element's value and band, saved as its part goes
     * by, so that the entries are applied after the whole site as krn_site
     * applies them; saved of them so far */
    double *saved_x, *saved_tau;
    size_t saved;
    forgery forge; /* testing: the highest element a forgery fits so far */
    bool skip;     /* block mode: a site before the target, only numbered */
};

int krn_site_parts_begin(krn_ctx *ctx, krn_site_parts **out, const char *name, float *values, size_t n,
                         const krn_band *band)
{
    *out = NULL;
    int rc = krn_site_enter(ctx, name);
    if (rc < 0)
        return rc;
    if (krn_site_skipped(ctx)) {
        krn_site_parts *p = calloc(1, sizeof *p);
        if (p == NULL)
            return krn_site_leave(ctx, ovt_fail(OVT_ENOMEM, "out of memory for site %s", name));
        p->skip = true;
        p->job = (site_job){.ctx = ctx, .name = name, .site = ctx->step.next_site++, .out = values, .n = n};
        *out = p;
        return 0;
    }
    bool zero = krn_band_is_zero(band);
    if (!zero && band->kind == KRN_BAND_OUTER && (band->cols == 0 || n % band->cols != 0))
        return krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): KRN_BAND_OUTER needs cols "
                                                        "dividing n (n = %zu, cols = %zu)",
                                            (unsigned long long)ctx->step.index, ctx->step.next_site, name, n,
                                            band->cols));
    krn_site_parts *p = calloc(1, sizeof *p);
    if (p == NULL)
        return krn_site_leave(ctx, ovt_fail(OVT_ENOMEM, "out of memory for site %s", name));
    if (!zero)
        p->band = *band;
    p->job = (site_job){
        .ctx = ctx,
        .name = name,
        .site = ctx->step.next_site++,
        .out = values,
        .n = n,
        .band = zero ? NULL : &p->band,
        .record = ctx->cfg.mode == KRN_RECORD && !zero,
        .replay = ctx->cfg.mode == KRN_REPLAY && !zero,
    };
    site_job *job = &p->job;
    ctx->stats.sites++;
    ctx->stats.outputs += n;
    rc = krn_site_take_log(ctx, job->site, name, n, job->band != NULL, &job->logged);
    const krn_rlog_site *logged = job->logged;
    if (rc == 0 && logged != NULL && ((p->saved_x = malloc(logged->count * sizeof(double))) == NULL ||
                                      (p->saved_tau = malloc(logged->count * sizeof(double))) == NULL))
        rc = ovt_fail(OVT_ENOMEM, "out of memory for %zu rounding-log entries", logged->count);
    if (rc < 0) {
        free(p->saved_x);
        free(p->saved_tau);
        free(p);
        return krn_site_leave(ctx, rc);
    }
    *out = p;
    return 0;
}

/* REPLAY: whether a logged element lies in [lo, lo + len), the part at hand. */
static bool logged_in(const krn_site_parts *p, size_t lo, size_t len)
{
    const krn_rlog_site *logged = p->job.logged;
    return logged != NULL && p->saved < logged->count && logged->entries[p->saved].index < lo + len;
}

/* REPLAY: each logged element of the part keeps its value x[i - lo] and
 * band (the part's band arrays) for the end of the site. */
static void save_logged(krn_site_parts *p, size_t lo, size_t len, const double *x)
{
    for (; logged_in(p, lo, len); p->saved++) {
        size_t i = (size_t)p->job.logged->entries[p->saved].index - lo;
        p->saved_x[p->saved] = x[i];
        p->saved_tau[p->saved] = krn_band_at(p->job.band, x, i);
    }
}

int krn_site_part(krn_site_parts *p, const double *x, size_t len, const double *a, const double *b)
{
    if (p->rc < 0)
        return p->rc;
    if (p->skip)
        return 0;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    size_t lo = p->next;
    if (len == 0 || len > job->n - lo ||
        (job->band != NULL && p->band.kind == KRN_BAND_OUTER && (lo % p->band.cols || len % p->band.cols)))
        return p->rc = krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): a part of %zu "
                                                                "elements at %zu does not fit the site's %zu%s",
                                                    (unsigned long long)ctx->step.index, job->site, job->name,
                                                    len, lo, job->n,
                                                    job->band && p->band.kind == KRN_BAND_OUTER ? " in whole rows"
                                                                                                : ""));
    p->band.a = a;
    p->band.b = b;
    job->x = x;
    job->base = lo;
    int rc = krn_site_run_group(job, 1, lo, lo + len);
    if (rc < 0)
        return p->rc = krn_site_leave(ctx, rc);
    save_logged(p, lo, len, x);
    if (ctx->forge.armed && job->record)
        (void)krn_site_forge_find(job, lo, lo + len, &p->forge);
    p->next = lo + len;
    return 0;
}

/* Whether out[0 .. len) all round to themselves with a band that cannot
 * reach their midpoints: +0, or a normal grid value below 2^127 (what the
 * fast path settles without a flag when tau = rel |x|). */
static bool settled_grid(const float *out, size_t len, int b)
{
    uint32_t low = b >= 32 ? 0 : (UINT32_C(1) << (32 - b)) - 1, bad = 0;
    for (size_t j = 0; j < len; j++) {
        uint32_t u;
        memcpy(&u, &out[j], sizeof u);
        uint32_t e = (u >> 23) & 0xffu;
        bad |= (uint32_t)(u != 0) & ((uint32_t)(e - 1 > 252u) | (uint32_t)((u & low) != 0));
    }
    return bad == 0;
}

int krn_site_part_keep(krn_site_parts *p, size_t len)
{
    static const double zeros[SITE_BLOCK];
    if (p->rc < 0)
        return p->rc;
    if (p->skip)
        return 0;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    size_t lo = p->next;
    if (len == 0 || len > job->n - lo || (job->band != NULL && p->band.kind != KRN_BAND_ARRAY))
        return p->rc = krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): %zu kept elements "
                                                                "at %zu do not fit the site's %zu%s",
                                                    (unsigned long long)ctx->step.index, job->site, job->name,
                                                    len, lo, job->n,
                                                    job->band ? " (or its band is not an array)" : ""));
    double xbuf[SITE_BLOCK];
    for (size_t b0 = lo; b0 < lo + len; b0 += SITE_BLOCK) {
        size_t blen = lo + len - b0 < SITE_BLOCK ? lo + len - b0 : SITE_BLOCK;
        const float *o = job->out + b0;
        if (settled_grid(o, blen, ctx->cfg.grid_bits) && !logged_in(p, b0, blen)) {
            p->next = b0 + blen;
            continue;
        }
        /* anything else, and a block holding a logged element (REPLAY),
         * takes krn_site_part's way with the same values */
        for (size_t j = 0; j < blen; j++)
            xbuf[j] = (double)o[j];
        p->next = b0;
        int rc = krn_site_part(p, xbuf, blen, zeros, NULL);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int krn_site_parts_end(krn_site_parts *p)
{
    if (p == NULL)
        return 0;
    site_job *job = &p->job;
    krn_ctx *ctx = job->ctx;
    int rc = p->rc;
    if (p->skip) {
        free(p);
        return 0;
    }
    if (rc == 0 && p->next != job->n)
        rc = krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "step %llu site %u (%s): %zu of its %zu elements were "
                                                      "handed over",
                                          (unsigned long long)ctx->step.index, job->site, job->name, p->next,
                                          job->n));
    else if (rc == 0) {
        job->x = NULL;
        if (ctx->forge.armed && job->record)
            krn_site_forge_apply(job, &p->forge);
        if (ctx->forge.flip_armed && job->record)
            krn_site_flip_entry(job);
        const krn_rlog_site *logged = job->logged;
        for (size_t k = 0; logged != NULL && k < logged->count && rc == 0; k++) {
            const krn_rlog_entry *e = &logged->entries[k];
            if (e->index >= job->n)
                rc = krn_site_entry_beyond(job, e);
            else
                rc = krn_site_apply_entry(job, e, p->saved_x[k], p->saved_tau[k], &job->out[e->index]);
        }
        if (rc == 0 && logged != NULL)
            ctx->stats.logged += logged->count;
        if (rc == 0) {
            ctx->stats.wide += job->wide;
            if ((rc = krn_site_row(job)) == 0)
                rc = krn_site_findings_close(job);
            if (rc == 0)
                krn_site_done(job);
        }
        rc = krn_site_leave(ctx, rc);
    }
    free(p->saved_x);
    free(p->saved_tau);
    free(p);
    return rc;
}
