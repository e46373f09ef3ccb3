/* The sites' slow path (site_internal.h): the elements the fast path left
 * over are located on the grid (krn_grid_locate), rounded, counted and, in
 * RECORD, given their log entries; in REPLAY an unlogged one near a midpoint
 * is checked against the rule (site_verify.c). The block loop that hands
 * this path the fast path's candidates is here too, so that the call for
 * each candidate stays inside one file, where the compiler can inline it. */
#include "kernels/site_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/band.h"
#include "kernels/contract.h"
#include "kernels/grid.h"

/* The failure of element i with code and the reason what, which may be
 * ovt_errmsg() itself (the reason krn_grid_locate gave): it is copied
 * first, since the new message is written over the old one. */
int krn_site_elem_fail(const site_job *job, size_t i, int code, const char *what)
{
    char reason[400];
    snprintf(reason, sizeof reason, "%s", what);
    return ovt_fail(code, "step %llu site %u (%s) element %zu: %s",
                    (unsigned long long)job->ctx->step.index, job->site, job->name, i, reason);
}

/* Rounds an element the fast path left over; RECORD also decides its entry.
 * Returns 1 if *entry was filled, 0 if not, or an error. */
int krn_site_settle(site_job *job, size_t i, double xi, double tau, float *outi,
                    krn_rlog_entry *entry, chunk_out *co)
{
    int b = job->ctx->cfg.grid_bits;
    if (!(tau >= 0.0)) {
        char what[96];
        snprintf(what, sizeof what, "the band is %g (NaN or negative)", tau);
        return krn_site_elem_fail(job, i, OVT_EINVAL, what);
    }
    krn_grid_pos pos;
    if (krn_grid_locate(xi, b, &pos) < 0)
        return krn_site_elem_fail(job, i, OVT_ENUMERIC, ovt_errmsg());
    float v = krn_canonical_zero(pos.nearest);
    *outi = v;
    double w = krn_site_widening(tau);
    if (tau > 0.0 && pos.dist <= tau * (0.5 / KRN_BAND_MARGIN)) {
        co->ambiguous[0]++;
        co->ambiguous[1] += xi == 0.0 || pos.dist == 0.0;
    }
    if (tau > 0.0 && pos.dist <= tau) {
        co->within[SITE_WITHIN_HALF] += pos.dist <= 0.5 * tau;
        co->within[SITE_WITHIN_TAU]++;
        co->within[SITE_FREE_V2] += pos.dist <= 0.5 * tau + w;
        co->within[SITE_FREE_V3] += pos.dist <= w;
    }
    if (job->replay) {
        krn_site_check_unlogged(job, i, pos.dist, tau);
        return 0;
    }
    if (!job->record || !(tau > 0.0) || !(pos.dist <= tau))
        return 0;
    entry->index = i;
    if (16.0 * tau <= pos.spacing) {
        entry->dir = pos.nearest == pos.above ? KRN_DIR_UP : KRN_DIR_DOWN;
        entry->value = 0.0f;
        int steer = job->ctx->forge.steer;
        if (steer != 0 && pos.dist <= w && !isinf(steer > 0 ? pos.above : pos.below)) {
            entry->dir = steer > 0 ? KRN_DIR_UP : KRN_DIR_DOWN; /* testing: krn_ctx_steer */
            *outi = krn_canonical_zero(steer > 0 ? pos.above : pos.below);
        }
    } else {
        entry->dir = KRN_DIR_VALUE;
        entry->value = v;
    }
    return 1;
}

int krn_site_chunk_push(chunk_out *co, const krn_rlog_entry *e)
{
    if (co->count == co->cap) {
        size_t cap = co->cap ? 2 * co->cap : 64;
        krn_rlog_entry *p = realloc(co->entries, cap * sizeof *p);
        if (p == NULL)
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu rounding-log entries", cap);
        co->entries = p;
        co->cap = cap;
    }
    co->entries[co->count++] = *e;
    co->wide += e->dir == KRN_DIR_VALUE;
    return 0;
}

/* Keeps the failure with the lowest element index, whatever thread saw it. */
static void job_fail(site_job *job, size_t i, int code)
{
    pthread_mutex_lock(&job->err_mu);
    if (job->err_code == 0 || i < job->err_index) {
        job->err_code = code;
        job->err_index = i;
        snprintf(job->err_msg, sizeof job->err_msg, "%s", ovt_errmsg());
    }
    pthread_mutex_unlock(&job->err_mu);
}

/* Rounds the block [b0, b0 + len) of one site, collecting entries into co.
 * Returns 0, or a failure, which it records in the job. */
int krn_site_block(site_job *job, size_t b0, size_t len, double *xbuf, chunk_out *co)
{
    double tau[SITE_BLOCK];
    uint8_t flag[SITE_BLOCK];
    uint32_t cand[SITE_BLOCK];
    int b = job->ctx->cfg.grid_bits;
    bool banded = job->record || job->replay;
    const double *xb = job->x ? job->x + (b0 - job->base) : xbuf;
    if (!job->x)
        job->fill(job->fill_arg, b0, len, xbuf);
    if (job->ctx->cfg.mode == KRN_PLAIN) {
        for (size_t j = 0; j < len; j++)
            job->out[b0 + j] = (float)xb[j];
        return 0;
    }
    if (banded)
        krn_band_fill(job->band, xb, b0 - job->base, len, tau);
    size_t nc = krn_site_round_cands(xb, banded ? tau : NULL, job->out + b0, flag, cand, len, b);
    for (size_t k = 0; k < nc; k++) {
        size_t i = b0 + cand[k];
        krn_rlog_entry e;
        int rc = krn_site_settle(job, i, xb[cand[k]], banded ? tau[cand[k]] : 0.0, &job->out[i], &e, co);
        if (rc == 1)
            rc = krn_site_chunk_push(co, &e);
        if (rc < 0) {
            job_fail(job, i, rc);
            return rc;
        }
    }
    return 0;
}
