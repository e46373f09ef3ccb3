/* REPLAY: applying the log (site_internal.h). A site's entries are found by
 * its number as the sites run, and applied after the whole site is rounded,
 * in index order, each under the rule of contract version 2
 * (docs/numeric-contract.md section 6; the findings: site_verify.c). */
#include "kernels/site_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "kernels/grid.h"

/* REPLAY: the log's entries for the site just numbered (site, n elements,
 * banded or exact): the log's next site if it is this one, which the step
 * then has matched, or NULL where the log has none for it (and in every
 * other mode). OVT_EFRAUD where the entries cannot be the site's: the log
 * gives it another size, or the site is exact (never logged). */
int krn_site_take_log(krn_ctx *ctx, uint32_t site, const char *name, size_t n, bool banded,
                      const krn_rlog_site **logged)
{
    *logged = NULL;
    if (ctx->cfg.mode != KRN_REPLAY || ctx->step.replay_next >= krn_rlog_nsites(ctx->step.log))
        return 0;
    const krn_rlog_site *s = krn_rlog_site_at(ctx->step.log, ctx->step.replay_next);
    if (s->site != site)
        return 0;
    *logged = s;
    ctx->step.replay_next++;
    if (s->n != n)
        return ovt_fail(OVT_EFRAUD, "step %llu site %u (%s): the log says the site has %llu "
                                    "elements, it has %zu",
                        (unsigned long long)ctx->step.index, site, name, (unsigned long long)s->n, n);
    if (!banded)
        return ovt_fail(OVT_EFRAUD, "step %llu site %u (%s) is exact (zero band) but the log has "
                                    "%zu entries for it",
                        (unsigned long long)ctx->step.index, site, name, s->count);
    return 0;
}

static int fraud(const site_job *job, size_t i, const char *fmt, ...) OVT_PRINTF(3, 4);

static int fraud(const site_job *job, size_t i, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return krn_site_elem_fail(job, i, OVT_EFRAUD, what);
}

int krn_site_entry_beyond(const site_job *job, const krn_rlog_entry *e)
{
    return fraud(job, (size_t)e->index, "the log has an entry beyond the site's %zu elements",
                 job->n);
}

/* Applies one logged entry to element e->index, whose value on this side is
 * xi and band tau, writing the result to *outi. The rule (contract version
 * 2, with tau = 2*M*delta):
 *   direction: tau' > 0, 2*tau' <= s'/4, d' <= 2*tau', and where
 *              d' > tau'/2 the verifier's own side of m';
 *   value:     a finite grid value whose rounding interval is within
 *              tau'/2 of x'.
 * A violation is a finding (krn_site_note_finding): certain where it lies
 * outside the thresholds widened by delta' (what no honest arbiter
 * accepts). The output follows the entry wherever the entry is well formed;
 * a site with a finding its role fails on fails as a whole
 * (krn_site_findings_close), except in a tolerant replay, where that
 * element rounds to nearest instead and the site goes on. A malformed
 * entry (exact element, not a grid value, unknown kind, past the largest
 * grid value) fails at once with OVT_EFRAUD, tolerant or not. */
int krn_site_apply_entry(site_job *job, const krn_rlog_entry *e, double xi, double tau, float *outi)
{
    krn_ctx *ctx = job->ctx;
    int b = ctx->cfg.grid_bits;
    size_t i = (size_t)e->index;
    if (!(tau > 0.0))
        return fraud(job, i, "the element is logged but its band is %g (the site is exact there)",
                     tau);
    krn_grid_pos pos;
    if (krn_grid_locate(xi, b, &pos) < 0)
        return krn_site_elem_fail(job, i, OVT_ENUMERIC, ovt_errmsg());
    double limit, certain, w = krn_site_widening(tau);
    krn_site_limits(job, tau, &limit, &certain);
    char what[240];
    float v;
    double dist;
    bool failed = false;
    if (e->dir == KRN_DIR_VALUE) {
        double lo, hi;
        if (krn_grid_interval(e->value, b, &lo, &hi) < 0)
            return fraud(job, i, "the logged value %a is not a finite grid value", (double)e->value);
        dist = xi < lo ? lo - xi : (xi > hi ? xi - hi : 0.0);
        if (!(dist <= limit)) {
            snprintf(what, sizeof what, "own value is %.3g tau from the logged value's rounding "
                                        "interval (limit %.3g, rule %d, tau = %.17g)",
                     dist / tau, limit / tau, krn_site_rule_v3(job) ? 3 : 2, tau);
            failed |= krn_site_note_finding(job, i, KRN_RULE_VALUE_FAR, dist, tau, !(dist <= certain), what);
        }
        v = e->value;
    } else if (e->dir == KRN_DIR_DOWN || e->dir == KRN_DIR_UP) {
        dist = pos.dist;
        krn_dir own = xi > pos.mid ? KRN_DIR_UP : KRN_DIR_DOWN;
        if (!(2.0 * tau <= 0.25 * pos.spacing)) {
            snprintf(what, sizeof what, "2 tau = %.17g is more than a quarter of the grid step %.17g",
                     2.0 * tau, pos.spacing);
            failed |= krn_site_note_finding(job, i, KRN_RULE_DIRECTION_WIDE, dist, tau,
                         !(2.0 * tau * (1.0 - 0x1p-20) <= 0.25 * pos.spacing), what);
        } else if (!(dist <= 2.0 * tau)) {
            snprintf(what, sizeof what, "own value is %.3g tau from the nearest midpoint (limit 2, "
                                        "tau = %.17g)", dist / tau, tau);
            failed |= krn_site_note_finding(job, i, KRN_RULE_DIRECTION_FAR, dist, tau, !(dist <= 2.0 * tau + w), what);
        } else if (dist > limit && e->dir != own) {
            snprintf(what, sizeof what, "the log says %s, but own value is %.3g tau %s the midpoint "
                                        "(rule %d: beyond %.3g tau every honest value is on that side; "
                                        "tau = %.17g)",
                     e->dir == KRN_DIR_UP ? "up" : "down", dist / tau,
                     own == KRN_DIR_UP ? "above" : "below", krn_site_rule_v3(job) ? 3 : 2,
                     krn_site_rule_v3(job) ? w / tau : 0.5, tau);
            failed |= krn_site_note_finding(job, i, KRN_RULE_IMPOSSIBLE_DIRECTION, dist, tau, dist > certain, what);
        }
        v = e->dir == KRN_DIR_UP ? pos.above : pos.below;
        if (isinf(v))
            return fraud(job, i, "the logged direction leads past the largest grid value");
    } else {
        return fraud(job, i, "unknown entry kind %d", (int)e->dir);
    }
    /* tolerant: an entry the role fails on is not followed; the element
     * rounds to nearest, as an unlogged one */
    *outi = krn_canonical_zero(failed && ctx->cfg.tolerant && !ctx->cfg.follow_log ? pos.nearest : v);
    double ratio = dist / tau;
    if (ratio > ctx->stats.max_dist_over_tau)
        ctx->stats.max_dist_over_tau = ratio;
    job->wide += e->dir == KRN_DIR_VALUE;
    return 0;
}
