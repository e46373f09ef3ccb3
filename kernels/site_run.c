/* Running a site (site.h, site_internal.h): large sites are split into
 * fixed chunks run on the ctx's thread pool (pool.h); each chunk collects
 * its own entries, and the chunks are appended to the log in order, so the
 * log does not depend on the thread count or on scheduling. */
#include "kernels/site_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/band.h"
#include "kernels/site_ctx.h"

/* Sites rounded together (krn_site_exact_fills), or one site: all of the
 * same length n; only the first may have a band. */
typedef struct {
    site_job *jobs;
    size_t njobs;
    size_t lo, hi; /* the elements rounded now: all, or one part (krn_site_part) */
} site_group;

/* Rounds elements [i0, i1) of the group's sites, block by block, each block
 * of every site in site order, collecting the first site's entries into co.
 * A site that fails stops itself and the sites after it; the sites before
 * it go on, so each site's failure is the one at its lowest element index,
 * as if the sites ran one after the other. */
static void run_range(const site_group *g, size_t i0, size_t i1, chunk_out *co)
{
    double xbuf[SITE_BLOCK];
    co->count = 0;
    co->wide = 0;
    co->ambiguous[0] = co->ambiguous[1] = 0;
    memset(co->within, 0, sizeof co->within);
    size_t active = g->njobs;
    for (size_t b0 = i0; b0 < i1 && active > 0; b0 += SITE_BLOCK) {
        size_t len = i1 - b0 < SITE_BLOCK ? i1 - b0 : SITE_BLOCK;
        for (size_t s = 0; s < active; s++)
            if (krn_site_block(&g->jobs[s], b0, len, xbuf, co) < 0)
                active = s;
    }
}

static void run_chunk(void *arg, size_t c)
{
    const site_group *g = arg;
    size_t i0 = g->lo + c * SITE_CHUNK;
    size_t i1 = g->hi - i0 < SITE_CHUNK ? g->hi : i0 + SITE_CHUNK;
    run_range(g, i0, i1, &g->jobs[0].ctx->threads.chunks[c]);
}

/* Makes room for the per-chunk results of a site of nchunks chunks. */
int krn_site_reserve_chunks(krn_ctx *ctx, size_t nchunks)
{
    if (nchunks <= ctx->threads.chunks_cap)
        return 0;
    chunk_out *p = realloc(ctx->threads.chunks, nchunks * sizeof *p);
    if (p == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu chunks", nchunks);
    memset(p + ctx->threads.chunks_cap, 0, (nchunks - ctx->threads.chunks_cap) * sizeof *p);
    ctx->threads.chunks = p;
    ctx->threads.chunks_cap = nchunks;
    return 0;
}

/* Runs the group's sites over elements [lo, hi), in chunks on the pool
 * when they are large, and appends the first site's entries to the log in
 * index order. Fails with the failure of the first site that failed. */
int krn_site_run_group(site_job *jobs, size_t njobs, size_t lo, size_t hi)
{
    krn_ctx *ctx = jobs[0].ctx;
    size_t n = hi - lo;
    bool split = n >= SITE_PARALLEL_MIN && ctx->threads.n > 1;
    size_t nchunks = split ? (n + SITE_CHUNK - 1) / SITE_CHUNK : 1;
    krn_pool *pool = NULL;
    int rc = krn_site_reserve_chunks(ctx, nchunks);
    if (rc == 0 && split)
        rc = krn_ctx_pool(ctx, &pool);
    if (rc < 0)
        return rc;
    site_group g = {.jobs = jobs, .njobs = njobs, .lo = lo, .hi = hi};
    for (size_t s = 0; s < njobs; s++) {
        pthread_mutex_init(&jobs[s].err_mu, NULL);
        jobs[s].mu_live = true;
    }
    if (split)
        krn_pool_run_on(pool, ctx->threads.n, nchunks, run_chunk, &g);
    else
        run_range(&g, lo, hi, &ctx->threads.chunks[0]);
    for (size_t s = 0; s < njobs; s++) {
        jobs[s].mu_live = false;
        pthread_mutex_destroy(&jobs[s].err_mu);
    }
    for (size_t s = 0; s < njobs; s++)
        if (jobs[s].err_code < 0)
            return ovt_fail(jobs[s].err_code, "%s", jobs[s].err_msg);
    site_job *job = &jobs[0];
    for (size_t c = 0; c < nchunks; c++) {
        chunk_out *co = &ctx->threads.chunks[c];
        job->wide += co->wide;
        for (int k = 0; k < SITE_WITHIN; k++)
            job->within[k] += co->within[k];
        ctx->stats.ambiguous += co->ambiguous[0];
        ctx->stats.ambiguous_exact += co->ambiguous[1];
        if (job->record && co->count > 0) {
            rc = krn_rlog_add_site(ctx->step.log, job->site, job->n, co->entries, co->count);
            if (rc < 0)
                return rc;
            ctx->stats.logged += co->count;
        }
    }
    return 0;
}

static int site_run(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
                    const krn_band *band)
{
    if (krn_site_skipped(ctx)) {
        ctx->step.next_site++;
        return 0;
    }
    int rc = krn_band_check(band, n);
    if (rc < 0)
        return ovt_fail_wrap(rc, "step %llu site %u (%s)", (unsigned long long)ctx->step.index,
                             ctx->step.next_site, name);
    site_job job = {
        .ctx = ctx,
        .name = name,
        .site = ctx->step.next_site++,
        .out = out,
        .x = x,
        .n = n,
        .band = krn_band_is_zero(band) ? NULL : band,
        .record = ctx->cfg.mode == KRN_RECORD && !krn_band_is_zero(band),
        .replay = ctx->cfg.mode == KRN_REPLAY && !krn_band_is_zero(band),
    };
    ctx->stats.sites++;
    ctx->stats.outputs += n;
    const krn_rlog_site *logged;
    if ((rc = krn_site_take_log(ctx, job.site, name, n, job.band != NULL, &logged)) < 0)
        return rc;
    job.logged = logged;
    rc = krn_site_run_group(&job, 1, 0, n);
    if (rc < 0)
        return rc;
    if (ctx->forge.armed && job.record)
        krn_site_forge_entry(&job);
    if (ctx->forge.flip_armed && job.record)
        krn_site_flip_entry(&job);
    if (logged != NULL) {
        for (size_t k = 0; k < logged->count; k++) {
            const krn_rlog_entry *e = &logged->entries[k];
            size_t i = (size_t)e->index;
            if (e->index >= n)
                return krn_site_entry_beyond(&job, e);
            rc = krn_site_apply_entry(&job, e, x[i], krn_band_at(job.band, x, i), &out[i]);
            if (rc < 0)
                return rc;
        }
        ctx->stats.logged += logged->count;
    }
    ctx->stats.wide += job.wide;
    if ((rc = krn_site_row(&job)) < 0 || (rc = krn_site_findings_close(&job)) < 0)
        return rc;
    krn_site_done(&job);
    return 0;
}

int krn_site_exact_fills(krn_ctx *ctx, const krn_exact_fill *sites, size_t nsites, size_t n,
                         void *arg)
{
    if (nsites == 0 || nsites > KRN_EXACT_FILLS_MAX)
        return ovt_fail(OVT_EINVAL, "krn_site_exact_fills: %zu sites (1..%d)", nsites,
                        KRN_EXACT_FILLS_MAX);
    int rc = krn_site_enter(ctx, sites[0].name);
    if (rc < 0)
        return rc;
    if (ctx->block.on && ctx->step.next_site + nsites <= ctx->block.target) {
        ctx->step.next_site += (uint32_t)nsites; /* block mode: every one before the target */
        return 0;
    }
    /* block mode with the target in the group: the sites before it are
     * skipped (their outputs, which it reads, hold what the block gave) */
    size_t skip = ctx->block.on && ctx->step.next_site < ctx->block.target ? ctx->block.target - ctx->step.next_site
                                                                           : 0;
    site_job jobs[KRN_EXACT_FILLS_MAX];
    for (size_t s = 0; s < nsites; s++) {
        jobs[s] = (site_job){.ctx = ctx, .name = sites[s].name, .site = ctx->step.next_site++,
                             .out = sites[s].out, .fill = sites[s].fill, .fill_arg = arg, .n = n};
        ctx->stats.sites++;
        ctx->stats.outputs += n;
    }
    const krn_rlog_site *next = NULL;
    if (ctx->cfg.mode == KRN_REPLAY && ctx->step.replay_next < krn_rlog_nsites(ctx->step.log))
        next = krn_rlog_site_at(ctx->step.log, ctx->step.replay_next);
    for (size_t s = 0; s < nsites && rc == 0; s++)
        if (next != NULL && next->site == jobs[s].site)
            rc = ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) but the log has "
                                      "%zu entries for it",
                          (unsigned long long)ctx->step.index, jobs[s].site, jobs[s].name, next->count);
    if (rc == 0)
        rc = krn_site_run_group(jobs + skip, nsites - skip, 0, n);
    for (size_t s = skip; s < nsites && rc == 0; s++)
        rc = krn_site_row(&jobs[s]);
    for (size_t s = skip; s < nsites && rc == 0; s++)
        krn_site_done(&jobs[s]);
    return krn_site_leave(ctx, rc);
}

int krn_site_exact_fill(krn_ctx *ctx, const char *name, float *out, size_t n, krn_site_fill fill,
                        void *arg)
{
    krn_exact_fill site = {.name = name, .out = out, .fill = fill};
    return krn_site_exact_fills(ctx, &site, 1, n, arg);
}

int krn_site(krn_ctx *ctx, const char *name, float *out, const double *x, size_t n,
             const krn_band *band)
{
    int rc = krn_site_enter(ctx, name);
    if (rc < 0)
        return rc;
    return krn_site_leave(ctx, site_run(ctx, name, out, x, n, band));
}
