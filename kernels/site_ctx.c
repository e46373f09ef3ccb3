/* The rounding sites' context (site.h, site_ctx.h): its configuration and
 * threads, the step it is in, what a step counts and found. The sites
 * themselves: site_internal.h lists the files. */
#include "kernels/site_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpus.h"
#include "kernels/grid.h"
#include "kernels/site_internal.h"

int krn_backend_parse(krn_backend_kind *out, const char *name)
{
    static const struct {
        const char *name;
        krn_backend_kind kind;
    } known[] = {{"cpu", KRN_BACKEND_CPU},
                 {"ref", KRN_BACKEND_REF},
                 {"shuffle", KRN_BACKEND_SHUFFLE},
                 {"cuda", KRN_BACKEND_CUDA}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(name, known[i].name)) {
            *out = known[i].kind;
            return 0;
        }
    return ovt_fail(OVT_EINVAL, "unknown backend '%s' (known: cpu, ref, shuffle, cuda)", name);
}

int krn_ctx_new(krn_ctx **out, const krn_config *cfg)
{
    *out = NULL;
    int rc = krn_grid_check_bits(cfg->grid_bits);
    if (rc < 0)
        return rc;
    if (cfg->mode != KRN_RECORD && cfg->mode != KRN_REPLAY && cfg->mode != KRN_NEAREST &&
        cfg->mode != KRN_PLAIN)
        return ovt_fail(OVT_EINVAL, "unknown rounding mode %d", (int)cfg->mode);
    if (cfg->mode == KRN_PLAIN && cfg->grid_bits != 32)
        return ovt_fail(OVT_EINVAL, "KRN_PLAIN converts to FP32: grid_bits must be 32, not %d",
                        cfg->grid_bits);
    if (cfg->mode == KRN_PLAIN && cfg->backend == KRN_BACKEND_CUDA)
        return ovt_fail(OVT_EINVAL, "KRN_PLAIN (benchmark baseline) runs on the CPU backends only, "
                                    "not cuda");
    if (cfg->mem_guard && cfg->backend == KRN_BACKEND_CUDA)
        return ovt_fail(OVT_EINVAL, "the memory guard (krn_config.mem_guard) is a testing mode of the CPU "
                                    "backends, not of cuda, whose tensors are device memory already");
    if (cfg->threads < 0)
        return ovt_fail(OVT_EINVAL, "thread count %d is negative", cfg->threads);
    if (cfg->rule != 0 && cfg->rule != KRN_RULE_V2 && cfg->rule != KRN_RULE_V3)
        return ovt_fail(OVT_EINVAL, "unknown REPLAY rule version %d (this build knows 2 and 3)", cfg->rule);
    krn_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for a kernels context");
    ctx->cfg = *cfg;
    int threads = cfg->threads ? cfg->threads : ovt_cpu_count();
    if (threads > KRN_MAX_THREADS)
        threads = KRN_MAX_THREADS;
    ctx->threads.n = threads;
    if (cfg->backend == KRN_BACKEND_CUDA) {
        rc = krn_cuda_attach(ctx);
        if (rc < 0) {
            free(ctx);
            return rc;
        }
    }
    *out = ctx;
    return 0;
}

void *krn_ctx_device(const krn_ctx *ctx)
{
    return ctx->device.state;
}

void *krn_ctx_mem(const krn_ctx *ctx)
{
    return ctx->mem.table;
}

void krn_ctx_set_mem(krn_ctx *ctx, void *mem, void (*mem_free)(krn_ctx *ctx, void *mem))
{
    ctx->mem.table = mem;
    ctx->mem.release = mem_free;
}

void krn_ctx_set_device(krn_ctx *ctx, void *device, void (*device_free)(void *device))
{
    ctx->device.state = device;
    ctx->device.release = device_free;
}

#ifndef OVT_HAVE_CUDA
int krn_cuda_attach(krn_ctx *ctx)
{
    (void)ctx;
    return ovt_fail(OVT_EINVAL, "backend cuda: this ovt was built without CUDA (not built: CMake found "
                                "no CUDA toolkit with cuBLAS, or -DOVT_CUDA=OFF); use cpu, ref or shuffle");
}
#endif

void krn_ctx_free(krn_ctx *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->mem.table != NULL && ctx->mem.release != NULL)
        ctx->mem.release(ctx, ctx->mem.table);
    if (ctx->device.state != NULL && ctx->device.release != NULL)
        ctx->device.release(ctx->device.state);
    krn_pool_detach(ctx->threads.pool);
    for (size_t c = 0; c < ctx->threads.chunks_cap; c++)
        free(ctx->threads.chunks[c].entries);
    free(ctx->threads.chunks);
    free(ctx->sites.rows);
    free(ctx);
}

const krn_config *krn_ctx_config(const krn_ctx *ctx)
{
    return &ctx->cfg;
}

int krn_step_begin(krn_ctx *ctx, uint64_t step, krn_rlog *log)
{
    if (ctx->step.open)
        return ovt_fail(OVT_EINVAL, "step %llu begun before step %llu ended",
                        (unsigned long long)step, (unsigned long long)ctx->step.index);
    bool logs = ctx->cfg.mode == KRN_RECORD || ctx->cfg.mode == KRN_REPLAY;
    if (logs && log == NULL)
        return ovt_fail(OVT_EINVAL, "step %llu: %s needs a rounding log", (unsigned long long)step,
                        ctx->cfg.mode == KRN_RECORD ? "RECORD" : "REPLAY");
    if (ctx->cfg.mode == KRN_REPLAY && krn_rlog_step(log) != step)
        return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)step);
    if (ctx->cfg.mode == KRN_RECORD)
        krn_rlog_reset(log, step);
    ctx->step.log = logs ? log : NULL;
    ctx->step.index = step;
    ctx->step.next_site = 0;
    ctx->step.replay_next = 0;
    memset(&ctx->stats, 0, sizeof ctx->stats);
    ctx->step.failed = 0;
    ctx->forge.made = false;
    ctx->forge.flipped = false;
    ctx->forge.bit_made = false;
    memset(&ctx->finding, 0, sizeof ctx->finding);
    memset(&ctx->violation, 0, sizeof ctx->violation);
    ctx->sites.on = ctx->sites.next && logs;
    ctx->sites.n = 0;
    ctx->step.open = true;
    return 0;
}

int krn_step_end(krn_ctx *ctx, krn_stats *stats)
{
    if (stats != NULL)
        memset(stats, 0, sizeof *stats);
    if (!ctx->step.open)
        return ovt_fail(OVT_EINVAL, "krn_step_end without krn_step_begin");
    ctx->step.open = false;
    ctx->forge.armed = false;
    ctx->forge.flip_armed = false;
    ctx->forge.bit_armed = false;
    if (stats != NULL)
        *stats = ctx->stats;
    if (ctx->step.failed < 0)
        return ovt_fail(ctx->step.failed, "%s", ctx->step.failed_msg);
    if (ctx->cfg.mode == KRN_REPLAY && ctx->step.replay_next < krn_rlog_nsites(ctx->step.log)) {
        const krn_rlog_site *s = krn_rlog_site_at(ctx->step.log, ctx->step.replay_next);
        return ovt_fail(OVT_EFRAUD,
                        "step %llu: the rounding log has %zu entries for site %u, which was never "
                        "executed (the step ran %u sites)",
                        (unsigned long long)ctx->step.index, s->count, s->site, ctx->step.next_site);
    }
    return 0;
}

uint32_t krn_ctx_next_site(const krn_ctx *ctx)
{
    return ctx->step.next_site;
}

int krn_ctx_set_next_site(krn_ctx *ctx, uint32_t site)
{
    if (!ctx->step.open || (ctx->cfg.mode != KRN_RECORD && ctx->cfg.mode != KRN_NEAREST))
        return ovt_fail(OVT_EINVAL, "krn_ctx_set_next_site: only inside a RECORD or NEAREST step");
    if (site < ctx->step.next_site)
        return ovt_fail(OVT_EINVAL, "krn_ctx_set_next_site: site %u is below the %u sites already numbered", site,
                        ctx->step.next_site);
    ctx->step.next_site = site;
    return 0;
}

int krn_ctx_threads(const krn_ctx *ctx)
{
    return ctx->threads.n;
}

int krn_ctx_pool(krn_ctx *ctx, krn_pool **pool)
{
    *pool = NULL;
    if (ctx->threads.pool == NULL && ctx->threads.n > 1) {
        int rc = krn_pool_attach(&ctx->threads.pool, ctx->threads.n);
        if (rc < 0)
            return rc;
    }
    *pool = ctx->threads.pool;
    return 0;
}

int krn_ctx_parallel(krn_ctx *ctx, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    krn_pool *pool = NULL;
    int rc = n > 1 ? krn_ctx_pool(ctx, &pool) : 0;
    if (rc < 0)
        return rc;
    if (pool != NULL)
        krn_pool_run_on(pool, ctx->threads.n, n, fn, arg);
    else
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
    return 0;
}

int krn_ctx_background(krn_ctx *ctx, size_t n, void (*fn)(void *arg, size_t j), void *arg)
{
    krn_pool *pool = NULL;
    int rc = krn_ctx_pool(ctx, &pool);
    if (rc < 0)
        return rc;
    if (pool == NULL)
        return 0;
    krn_pool_background_on(pool, ctx->threads.n, n, fn, arg);
    return 1;
}

void krn_ctx_background_wait(krn_ctx *ctx)
{
    if (ctx->threads.pool != NULL)
        krn_pool_background_wait(ctx->threads.pool);
}

int krn_site_enter(krn_ctx *ctx, const char *name)
{
    if (!ctx->step.open)
        return ovt_fail(OVT_EINVAL, "site %s executed outside a step", name);
    if (ctx->step.failed < 0)
        return ovt_fail(ctx->step.failed, "site %s not run: %s", name, ctx->step.failed_msg);
    if (ctx->block.on && ctx->block.reached)
        return krn_site_leave(ctx, ovt_fail(OVT_EINVAL, "site %s not run: block mode stops after site %u",
                                            name, ctx->block.target));
    if (ctx->trace != NULL)
        krn_trace_enter(ctx, name);
    return 0;
}

int krn_site_leave(krn_ctx *ctx, int rc)
{
    if (rc < 0 && ctx->step.open && ctx->step.failed == 0) {
        ctx->step.failed = rc;
        snprintf(ctx->step.failed_msg, sizeof ctx->step.failed_msg, "%s", ovt_errmsg());
    }
    return rc;
}

/* ---- per-site counts (krn_ctx_collect_sites) and findings ---- */

void krn_ctx_collect_sites(krn_ctx *ctx, bool on)
{
    ctx->sites.next = on;
}

const krn_site_stats *krn_ctx_site_stats(const krn_ctx *ctx, size_t *count)
{
    *count = ctx->sites.on ? ctx->sites.n : 0;
    return ctx->sites.on ? ctx->sites.rows : NULL;
}

/* Adds the job's row when the step counts per site: its counts, and its
 * entries (RECORD: those the log now has for it, REPLAY: the trainer's). */
int krn_site_row(const site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (!ctx->sites.on)
        return 0;
    if (ctx->sites.n == ctx->sites.cap) {
        size_t cap = ctx->sites.cap ? 2 * ctx->sites.cap : 64;
        krn_site_stats *p = realloc(ctx->sites.rows, cap * sizeof *p);
        if (p == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu per-site counts", cap);
        ctx->sites.rows = p;
        ctx->sites.cap = cap;
    }
    const krn_rlog_site *ls = ctx->cfg.mode == KRN_RECORD ? krn_rlog_find(ctx->step.log, job->site) : job->logged;
    krn_site_stats *r = &ctx->sites.rows[ctx->sites.n++];
    memset(r, 0, sizeof *r);
    r->site = job->site;
    snprintf(r->op, sizeof r->op, "%s", job->name);
    r->n = job->n;
    r->banded = job->record || job->replay;
    r->entries = ls != NULL ? ls->count : 0;
    r->within_half = job->within[SITE_WITHIN_HALF];
    r->within_tau = job->within[SITE_WITHIN_TAU];
    r->free_v2 = job->within[SITE_FREE_V2];
    r->free_v3 = job->within[SITE_FREE_V3];
    return 0;
}

const krn_finding *krn_ctx_finding(const krn_ctx *ctx)
{
    return &ctx->finding;
}

const krn_finding *krn_ctx_violation(const krn_ctx *ctx)
{
    return &ctx->violation;
}
