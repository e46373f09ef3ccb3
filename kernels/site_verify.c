/* REPLAY: the verifier's rule of contract version 2 (docs/numeric-contract.md
 * section 6), as the slow path and the log's entries meet it: a violation is
 * a finding, kept per site at the lowest element index whatever thread saw
 * it, and the site's failure where the verifier's role fails on it
 * (krn_verifier, site.h). */
#include "kernels/site_internal.h"

#include <stdio.h>

#include "kernels/contract.h"

const char *krn_rule_name(krn_rule rule)
{
    switch (rule) {
    case KRN_RULE_NONE: return "no finding";
    case KRN_RULE_MISSING_ENTRY: return "missing entry";
    case KRN_RULE_IMPOSSIBLE_DIRECTION: return "impossible direction";
    case KRN_RULE_DIRECTION_FAR: return "direction too far from the midpoint";
    case KRN_RULE_DIRECTION_WIDE: return "direction where the band is too wide";
    case KRN_RULE_VALUE_FAR: return "value too far";
    }
    return "unknown rule";
}

/* How far the auditor widens a threshold on the verifier's own value so that
 * it covers every honest arbiter's: the op's pairwise bound as this party
 * evaluates it, delta' = tau'/(2*M), plus 2^-20 of it for the last bits in
 * which two parties' bands differ (about 1e-11 relative). */
double krn_site_widening(double tau)
{
    return tau * (0.5 / KRN_BAND_MARGIN) * (1.0 + 0x1p-20);
}

bool krn_site_rule_v3(const site_job *job)
{
    return job->ctx->cfg.rule == KRN_RULE_V3;
}

void krn_site_limits(const site_job *job, double tau, double *limit, double *certain)
{
    double half = 0.5 * tau, w = krn_site_widening(tau);
    if (!krn_site_rule_v3(job)) {
        *limit = half;
        *certain = half + w;
    } else if (job->ctx->cfg.verifier == KRN_VERIFY_AUDITOR) {
        *limit = 0.0;
        *certain = 2.0 * w;
    } else {
        *limit = w;
        *certain = w;
    }
}

/* A violation of the strict rule at element i (dist: d' or the distance to a
 * value's interval): kept as the job's first finding if it has the lowest
 * index so far, and as the site's failure if the role fails on it (the
 * arbiter on any, the auditor on a certain one). what says the numbers.
 * Returns whether the role fails on it. */
bool krn_site_note_finding(site_job *job, size_t i, krn_rule rule, double dist, double tau, bool certain,
                           const char *what)
{
    krn_ctx *ctx = job->ctx;
    bool auditor = ctx->cfg.verifier == KRN_VERIFY_AUDITOR;
    krn_finding f = {.rule = rule, .step = ctx->step.index, .site = job->site, .element = i,
                     .dist_over_tau = dist / tau, .certain = certain};
    snprintf(f.op, sizeof f.op, "%s", job->name);
    snprintf(f.message, sizeof f.message, "step %llu site %u (%s) element %zu: %s: %s%s",
             (unsigned long long)ctx->step.index, job->site, job->name, i, krn_rule_name(rule), what,
             !auditor ? ""
             : certain ? " (certain: every honest arbiter within the op's bound sees it)"
                       : " (not certain: an honest arbiter within the op's bound could accept it)");
    if (job->mu_live)
        pthread_mutex_lock(&job->err_mu);
    if (job->first.rule == KRN_RULE_NONE || i < job->first.element)
        job->first = f;
    bool fails = !auditor || certain;
    if (fails && (job->fail.rule == KRN_RULE_NONE || i < job->fail.element))
        job->fail = f;
    if (job->mu_live)
        pthread_mutex_unlock(&job->err_mu);
    return fails;
}

/* True if the site's log has an entry for element i (entries are in index
 * order). */
static bool is_logged(const site_job *job, size_t i)
{
    const krn_rlog_site *s = job->logged;
    if (s == NULL)
        return false;
    size_t lo = 0, hi = s->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->entries[mid].index < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->count && s->entries[lo].index == i;
}

/* An unlogged element the fast path flagged: a missing entry if d' <= tau'/2,
 * certain if d' <= tau'/2 - delta'. Under rule 3 an auditor (not the
 * canonical view) also reports one up to tau'/2 + delta', where the canonical
 * value may be within tau/2. */
void krn_site_check_unlogged(site_job *job, size_t i, double dist, double tau)
{
    double limit = 0.5 * tau;
    if (krn_site_rule_v3(job) && job->ctx->cfg.verifier == KRN_VERIFY_AUDITOR)
        limit += krn_site_widening(tau);
    if (!(tau > 0.0) || !(dist <= limit) || is_logged(job, i))
        return;
    char what[160];
    snprintf(what, sizeof what, "own value is %.3g tau from the nearest midpoint, within 0.5 tau, "
                                "and the log has no entry for it (tau = %.17g)", dist / tau, tau);
    bool certain = dist <= 0.5 * tau - krn_site_widening(tau);
    krn_site_note_finding(job, i, KRN_RULE_MISSING_ENTRY, dist, tau, certain, what);
}

/* The failure the site's findings call for (OVT_EFRAUD with the message of
 * the failing finding at the lowest index), or 0; keeps the step's first
 * finding in the ctx. A tolerant replay does not fail: it keeps the step's
 * first failing finding as its violation (the sites close in site order)
 * and goes on. */
int krn_site_findings_close(site_job *job)
{
    krn_ctx *ctx = job->ctx;
    if (ctx->finding.rule == KRN_RULE_NONE && job->first.rule != KRN_RULE_NONE)
        ctx->finding = job->first;
    if (job->fail.rule == KRN_RULE_NONE)
        return 0;
    if (!ctx->cfg.tolerant)
        return ovt_fail(OVT_EFRAUD, "%s", job->fail.message);
    if (ctx->violation.rule == KRN_RULE_NONE)
        ctx->violation = job->fail;
    return 0;
}
