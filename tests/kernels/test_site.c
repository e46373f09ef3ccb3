/* Rounding sites: RECORD on x, REPLAY on a perturbed x' (|x - x'| <= tau)
 * gives bitwise identical outputs; NEAREST on x' does not, on inputs built
 * near midpoints (the ablation); forged logs are rejected as fraud; the log
 * does not depend on the thread count; non-finite values fail the step. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/grid.h"
#include "kernels/rng.h"
#include "kernels/site.h"

/* Contract version 2: the pairwise bound delta is at most tau/(2*M),
 * M = 1.0625 (kernels/contract.h), so the fixtures perturb by at most that. */
#define BAND_MARGIN 1.0625
#define DELTA_PER_TAU (0.5 / BAND_MARGIN)

static krn_ctx *new_ctx(krn_mode mode, int b, int threads)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = mode, .grid_bits = b, .threads = threads};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &cfg) != 0) {
        fprintf(stderr, "krn_ctx_new: %s\n", ovt_errmsg());
        exit(1);
    }
    return ctx;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static double uni(uint64_t seed, uint64_t k)
{
    return krn_rng_uniform(seed, 0, KRN_RNG_TEST, k);
}

/* A test case: the trainer's values x, the verifier's x2 (within tau), the
 * band a (tau_i = scale * a[i] with scale 1), and which elements were built
 * to straddle a midpoint (their nearest roundings differ). */
typedef struct {
    size_t n;
    double *x, *x2, *a;
    bool *straddle;
} fixture;

static void fixture_free(fixture *f)
{
    free(f->x);
    free(f->x2);
    free(f->a);
    free(f->straddle);
}

/* Kinds of elements, by k % 8:
 *  0-3 random values of random magnitude, relative band 2^-30 .. 2^-20;
 *  4-5 built on a grid midpoint +- a fraction of tau (tau <= step/64),
 *      perturbed to the other side: a direction entry that matters;
 *  6   near zero with a band much wider than the grid step (value entries);
 *  7   a midpoint at a binade edge or in the subnormal range. */
static fixture make_fixture(size_t n, int b, uint64_t seed)
{
    fixture f = {.n = n};
    f.x = malloc(n * sizeof *f.x);
    f.x2 = malloc(n * sizeof *f.x2);
    f.a = malloc(n * sizeof *f.a);
    f.straddle = calloc(n, sizeof *f.straddle);
    int p = b - 8;
    for (size_t k = 0; k < n; k++) {
        double u1 = uni(seed, 4 * k), u2 = uni(seed, 4 * k + 1), u3 = uni(seed, 4 * k + 2);
        double sign = uni(seed, 4 * k + 3) < 0.5 ? -1.0 : 1.0;
        double x, tau, x2;
        switch (k % 8) {
        default: {
            x = sign * ldexp(1.0 + u1, (int)(u2 * 60.0) - 30);
            tau = fabs(x) * ldexp(1.0, -30 + (int)(u3 * 10.0));
            x2 = x + tau * (2.0 * u3 - 1.0) * 0.999 * DELTA_PER_TAU;
            break;
        }
        case 4:
        case 5: {
            /* a grid value g of p bits, its midpoint to the next value */
            int e = (int)(u2 * 40.0) - 20;
            double g = ldexp(floor(ldexp(1.0 + u1, p - 1)), e - p + 1);
            double step = ldexp(1.0, e - p + 1);
            double m = g + step / 2;
            tau = step / 64.0 * (0.1 + u3);
            double off = tau * (0.05 + 0.9 * u3) * 0.5 * DELTA_PER_TAU;
            x = sign * (m + off * (k % 2 ? 1 : -1));
            x2 = sign * (m - off * (k % 2 ? 1 : -1) * 0.999);
            f.straddle[k] = true;
            break;
        }
        case 6: {
            /* heavy cancellation: |x| tiny, the band many grid steps wide */
            double step = ldexp(1.0, -20 - p);
            tau = step * ldexp(1.0, (int)(u2 * 20.0));
            x = sign * step * u1 * 3.0;
            x2 = x + tau * (2.0 * u3 - 1.0) * 0.999 * DELTA_PER_TAU;
            break;
        }
        case 7: {
            /* midpoints just below a binade edge (finer step) and subnormal */
            int e = (int)(u2 * 250.0) - 125;
            double step = ldexp(1.0, e - p); /* the step just below 2^e */
            double m = u1 < 0.5 ? ldexp(1.0, e) - step / 2 : ldexp(1.0, -126) * u1;
            if (u1 >= 0.5) {
                double qmin = ldexp(1.0, -117 - b);
                m = (floor(m / qmin) + 0.5) * qmin;
                step = qmin;
            }
            tau = step / 64.0 * (0.1 + u3);
            double off = tau * 0.5 * 0.999 * DELTA_PER_TAU;
            x = sign * (m + off);
            x2 = sign * (m - off);
            f.straddle[k] = true;
            break;
        }
        }
        f.x[k] = x;
        f.x2[k] = x2;
        f.a[k] = tau;
    }
    return f;
}

static void test_replay_matches(int b, size_t n, int threads, uint64_t seed)
{
    fixture f = make_fixture(n, b, seed);
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = f.a};
    float *out1 = malloc(n * sizeof *out1), *out2 = malloc(n * sizeof *out2),
          *out3 = malloc(n * sizeof *out3);
    krn_rlog *log = krn_rlog_new();

    krn_ctx *rec = new_ctx(KRN_RECORD, b, threads);
    CHECK(krn_step_begin(rec, 7, log) == 0);
    CHECK(krn_site(rec, "exact.before", out1, f.x, n, NULL) == 0); /* site 0: exact */
    CHECK(krn_site(rec, "test.site", out1, f.x, n, &band) == 0);   /* site 1 */
    krn_stats st;
    CHECK(krn_step_end(rec, &st) == 0);
    CHECK(st.sites == 2 && st.outputs == 2 * n);
    CHECK(st.logged == krn_rlog_nentries(log));
    CHECK(krn_rlog_nsites(log) == 1 && krn_rlog_site_at(log, 0)->site == 1);
    CHECK(st.wide > 0 && st.wide < st.logged);

    krn_ctx *rep = new_ctx(KRN_REPLAY, b, threads);
    CHECK(krn_step_begin(rep, 7, log) == 0);
    CHECK(krn_site(rep, "exact.before", out2, f.x2, n, NULL) == 0);
    int rc = krn_site(rep, "test.site", out2, f.x2, n, &band);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    krn_stats st2;
    CHECK(krn_step_end(rep, &st2) == 0);
    CHECK(st2.logged == st.logged);
    CHECK(st2.max_dist_over_tau <= 1.5 && st2.max_dist_over_tau > 0.5);

    size_t differ = 0, nstraddle = 0, nearest_differ = 0;
    krn_ctx *abl = new_ctx(KRN_NEAREST, b, threads);
    CHECK(krn_step_begin(abl, 7, NULL) == 0);
    CHECK(krn_site(abl, "exact.before", out3, f.x2, n, NULL) == 0);
    CHECK(krn_site(abl, "test.site", out3, f.x2, n, &band) == 0);
    CHECK(krn_step_end(abl, NULL) == 0);
    for (size_t k = 0; k < n; k++) {
        differ += fbits(out1[k]) != fbits(out2[k]);
        CHECK(krn_grid_contains(out1[k], b));
        if (f.straddle[k]) {
            nstraddle++;
            nearest_differ += fbits(out1[k]) != fbits(out3[k]);
        }
        /* RECORD rounds to nearest, with zeros written as +0 */
        float rn = krn_grid_round(f.x[k], b);
        CHECK(fbits(out1[k]) == fbits(rn == 0.0f ? 0.0f : rn));
    }
    CHECK_MSG(differ == 0, "b=%d: %zu of %zu outputs differ after replay", b, differ, n);
    /* every built straddling element flips without the log */
    CHECK_MSG(nearest_differ == nstraddle && nstraddle > n / 8,
              "b=%d: NEAREST differs on %zu of %zu built elements", b, nearest_differ, nstraddle);
    krn_ctx_free(rec);
    krn_ctx_free(rep);
    krn_ctx_free(abl);
    krn_rlog_free(log);
    free(out1);
    free(out2);
    free(out3);
    fixture_free(&f);
}

/* The log and the outputs do not depend on the number of threads. */
static void test_threads(void)
{
    size_t n = 300001;
    fixture f = make_fixture(n, 32, 11);
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = f.a};
    float *o1 = malloc(n * sizeof *o1), *o4 = malloc(n * sizeof *o4);
    krn_rlog *l1 = krn_rlog_new(), *l4 = krn_rlog_new();
    krn_ctx *c1 = new_ctx(KRN_RECORD, 32, 1), *c4 = new_ctx(KRN_RECORD, 32, 4);
    CHECK(krn_step_begin(c1, 1, l1) == 0 && krn_step_begin(c4, 1, l4) == 0);
    CHECK(krn_site(c1, "t", o1, f.x, n, &band) == 0);
    CHECK(krn_site(c4, "t", o4, f.x, n, &band) == 0);
    CHECK(krn_step_end(c1, NULL) == 0 && krn_step_end(c4, NULL) == 0);
    CHECK_MEM(o1, o4, n * sizeof *o1);
    CHECK(krn_rlog_nentries(l1) == krn_rlog_nentries(l4) && krn_rlog_nentries(l1) > n / 4);
    const krn_rlog_site *s1 = krn_rlog_site_at(l1, 0), *s4 = krn_rlog_site_at(l4, 0);
    CHECK(s1 && s4 && s1->count == s4->count);
    if (s1 && s4 && s1->count == s4->count)
        CHECK_MEM(s1->entries, s4->entries, s1->count * sizeof *s1->entries);
    /* the failure reported is the one at the lowest index, whichever
     * thread meets which first */
    for (int rep = 0; rep < 5; rep++) {
        double keep1 = f.x[250000], keep2 = f.x[100001];
        f.x[250000] = NAN;
        f.x[100001] = INFINITY;
        CHECK(krn_step_begin(c4, 2, l4) == 0);
        CHECK(krn_site(c4, "t", o4, f.x, n, &band) == OVT_ENUMERIC);
        CHECK_MSG(strstr(ovt_errmsg(), "element 100001:") != NULL, "%s", ovt_errmsg());
        CHECK(krn_step_end(c4, NULL) == OVT_ENUMERIC);
        f.x[250000] = keep1;
        f.x[100001] = keep2;
    }
    krn_ctx_free(c1);
    krn_ctx_free(c4);
    krn_rlog_free(l1);
    krn_rlog_free(l4);
    free(o1);
    free(o4);
    fixture_free(&f);
}

/* The band kinds compute tau = base + rel |x| as documented. */
static void test_bands(void)
{
    /* A 2x3 output with tau from row and column norms: element (r, c) is
     * built at distance 0.9 * tau from a midpoint, so it is logged, and at
     * 1.1 * tau in a second run, so it is not. */
    double rows[2] = {1.0, 2.0}, cols[3] = {1.0, 3.0, 0.5};
    double scale = 0x1p-34, rel = 0x1p-40;
    for (int run = 0; run < 2; run++) {
        double x[6];
        for (int i = 0; i < 6; i++) {
            double m = 1.0 + 0x1p-24 + (double)i * 0x1p-22; /* midpoints of the b = 32 grid */
            double base = scale * rows[i / 3] * cols[i % 3];
            double tau = base + rel * m;
            x[i] = m + (run == 0 ? 0.9 : 1.1) * tau;
        }
        krn_band band = {.kind = KRN_BAND_OUTER, .scale = scale, .a = rows, .b = cols, .cols = 3,
                         .rel = rel};
        float out[6];
        krn_rlog *log = krn_rlog_new();
        krn_ctx *ctx = new_ctx(KRN_RECORD, 32, 1);
        CHECK(krn_step_begin(ctx, 0, log) == 0);
        CHECK(krn_site(ctx, "outer", out, x, 6, &band) == 0);
        CHECK(krn_step_end(ctx, NULL) == 0);
        CHECK_EQ_U64(krn_rlog_nentries(log), run == 0 ? 6 : 0);
        krn_ctx_free(ctx);
        krn_rlog_free(log);
    }
    /* malformed bands are refused */
    krn_ctx *ctx = new_ctx(KRN_RECORD, 32, 1);
    krn_rlog *log = krn_rlog_new();
    float out[6];
    double x[6] = {0};
    krn_band bad = {.kind = KRN_BAND_OUTER, .scale = 1, .a = rows, .b = cols, .cols = 4};
    CHECK(krn_step_begin(ctx, 0, log) == 0);
    CHECK(krn_site(ctx, "bad", out, x, 6, &bad) == OVT_EINVAL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    krn_band bad2 = {.kind = KRN_BAND_ARRAY, .scale = 1};
    CHECK(krn_step_begin(ctx, 0, log) == 0);
    CHECK(krn_site(ctx, "bad", out, x, 6, &bad2) == OVT_EINVAL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    double nan_a[6] = {1, 1, NAN, 1, 1, 1};
    krn_band bad3 = {.kind = KRN_BAND_ARRAY, .scale = 1, .a = nan_a};
    CHECK(krn_step_begin(ctx, 0, log) == 0);
    CHECK(krn_site(ctx, "nanband", out, x, 6, &bad3) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "element 2") != NULL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    krn_ctx_free(ctx);
    krn_rlog_free(log);
}

/* Replays a one-site step of n elements (values x, constant band tau)
 * against `log`; returns krn_site's code, or krn_step_end's. */
static int replay_one(krn_rlog *log, uint64_t step, const double *x, size_t n, double tau,
                      int nsites)
{
    krn_ctx *ctx = new_ctx(KRN_REPLAY, 32, 1);
    krn_band band = {.kind = KRN_BAND_CONST, .scale = tau};
    float out[16];
    int rc = krn_step_begin(ctx, step, log);
    for (int s = 0; rc == 0 && s < nsites; s++)
        rc = krn_site(ctx, "forged.op", out, x, n, &band);
    if (rc == 0)
        rc = krn_step_end(ctx, NULL);
    krn_ctx_free(ctx);
    return rc;
}

/* The tolerant replay (krn_config.tolerant): a forged direction at element
 * 3 of site 0 and a forged value at element 5 of site 1 do not fail the
 * step; both elements round to nearest (not as the log says), every other
 * output is the strict replay's, and the step's first violation is the
 * strict failure (site 0, element 3, its message). */
static void test_tolerant(void)
{
    double x[8] = {1.0, 2.0, 3.0, 1.5, -0.75, 0.375, 5.0, 6.0};
    double tau = 0x1p-30;
    krn_band band = {.kind = KRN_BAND_CONST, .scale = tau};
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_UP, 0) == 0);
    CHECK(krn_rlog_add(log, 1, 8, 5, KRN_DIR_VALUE, 0.5f) == 0);
    float strict_out[8], out[2][8];
    krn_ctx *strict = new_ctx(KRN_REPLAY, 32, 1);
    CHECK(krn_step_begin(strict, 5, log) == 0);
    CHECK(krn_site(strict, "forged.op", strict_out, x, 8, &band) == OVT_EFRAUD);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ovt_errmsg());
    krn_ctx_free(strict);
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .grid_bits = 32, .threads = 1,
                      .tolerant = true};
    krn_ctx *ctx = NULL;
    CHECK(krn_ctx_new(&ctx, &cfg) == 0);
    if (!ctx)
        return;
    CHECK(krn_step_begin(ctx, 5, log) == 0);
    CHECK(krn_site(ctx, "forged.op", out[0], x, 8, &band) == 0);
    CHECK(krn_site(ctx, "forged.op", out[1], x, 8, &band) == 0);
    CHECK_MSG(krn_step_end(ctx, NULL) == 0, "%s", ovt_errmsg());
    const krn_finding *v = krn_ctx_violation(ctx);
    CHECK(v->rule == KRN_RULE_DIRECTION_FAR && v->site == 0 && v->element == 3 && v->step == 5);
    CHECK_MSG(strcmp(v->message, msg) == 0, "tolerant: %s; strict: %s", v->message, msg);
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 8; i++)
            CHECK_MSG(out[s][i] == (float)x[i], "site %d element %d: %a", s, i, (double)out[s][i]);
    /* an honest log: no violation */
    krn_rlog_reset(log, 6);
    CHECK(krn_step_begin(ctx, 6, log) == 0 && krn_site(ctx, "forged.op", out[0], x, 8, &band) == 0 &&
          krn_step_end(ctx, NULL) == 0);
    CHECK(krn_ctx_violation(ctx)->rule == KRN_RULE_NONE);
    krn_ctx_free(ctx);
    krn_rlog_free(log);
}

static void test_fraud(void)
{
    /* x[3] = 1.5 is a grid value, half a step from the nearest midpoints */
    double x[8] = {1.0, 2.0, 3.0, 1.5, -0.75, 0.375, 5.0, 6.0};
    double tau = 0x1p-30;
    krn_rlog *log = krn_rlog_new();

    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_UP, 0) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == OVT_EFRAUD);
    const char *m = ovt_errmsg();
    CHECK_MSG(strstr(m, "step 5") && strstr(m, "site 0") && strstr(m, "forged.op") &&
                  strstr(m, "element 3") && strstr(m, "tau"),
              "message: %s", m);

    /* a forged value entry: 1.5 logged as 2.0 */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_VALUE, 2.0f) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "rounding interval") != NULL);
    /* ... while the value 1.5 itself is accepted */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_VALUE, 1.5f) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == 0);
    /* a value that is not on the grid */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_VALUE, 1.5f + 0x1p-23f) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == OVT_EFRAUD); /* b = 32: a grid value, too far */
    CHECK(strstr(ovt_errmsg(), "rounding interval") != NULL);
    krn_ctx *c24 = new_ctx(KRN_REPLAY, 24, 1);
    krn_band band = {.kind = KRN_BAND_CONST, .scale = tau};
    float out[8];
    CHECK(krn_step_begin(c24, 5, log) == 0);
    CHECK(krn_site(c24, "grid24", out, x, 8, &band) == OVT_EFRAUD); /* b = 24: not a grid value */
    CHECK(strstr(ovt_errmsg(), "not a finite grid value") != NULL);
    krn_ctx_free(c24);

    /* an entry for a site that never runs */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 3, 8, 1, KRN_DIR_UP, 0) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 2) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "site 3") && strstr(ovt_errmsg(), "never executed"));
    /* a site whose element count differs (so an index may be out of range) */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 100, 50, KRN_DIR_UP, 0) == 0);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "100 elements") != NULL);
    /* a log for another step */
    krn_rlog_reset(log, 4);
    CHECK(replay_one(log, 5, x, 8, tau, 1) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "step 4") != NULL);
    /* an entry in an exact site */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 3, KRN_DIR_UP, 0) == 0);
    CHECK(replay_one(log, 5, x, 8, 0.0, 1) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "exact") != NULL);
    /* a direction entry where the band is too wide for one */
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 8, 5, KRN_DIR_UP, 0) == 0);
    x[5] = 1e-30;
    CHECK(replay_one(log, 5, x, 8, 1e-20, 1) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "too wide") != NULL);
    /* honest entries pass: x[0] = 1 + 2^-24 + tau/2 is near the midpoint of 1 and 1 + 2^-23 */
    double y[1] = {1.0 + 0x1p-24 + 0x1p-31};
    krn_rlog_reset(log, 5);
    CHECK(krn_rlog_add(log, 0, 1, 0, KRN_DIR_DOWN, 0) == 0);
    CHECK(replay_one(log, 5, y, 1, tau, 1) == 0);
    krn_rlog_free(log);
}

/* ---- the version-2 rule, element by element ---- */

/* What an element with no entry, a direction or a value entry should meet,
 * stated independently of kernels/site.c (docs/numeric-contract.md section
 * 6): the verifier's own distance dist = |x' - m'|, whether x' is above m',
 * its band tau (tau <= s/32 here, so the direction geometry always holds).
 * entry: 0 none, 1 direction to own side, 2 direction to the other side,
 * 3 value RN(x'), 4 value across the midpoint. */
typedef struct {
    krn_rule rule; /* KRN_RULE_NONE: accepted by the strict rule */
    bool certain;  /* outside the thresholds widened by delta' */
} rule_outcome;

static rule_outcome rule_expect(double dist, double tau, int entry)
{
    double delta = tau / (2.0 * BAND_MARGIN);
    double widen = delta + delta * 0x1p-20; /* delta' and the bands' last bits */
    double half = tau / 2.0;
    rule_outcome o = {KRN_RULE_NONE, false};
    switch (entry) {
    case 0:
        if (dist <= half)
            o = (rule_outcome){KRN_RULE_MISSING_ENTRY, dist <= half - widen};
        break;
    case 1:
    case 2:
        if (dist > 2.0 * tau)
            o = (rule_outcome){KRN_RULE_DIRECTION_FAR, dist > 2.0 * tau + widen};
        else if (entry == 2 && dist > half)
            o = (rule_outcome){KRN_RULE_IMPOSSIBLE_DIRECTION, dist > half + widen};
        break;
    case 3:
        break; /* x' lies in RN(x')'s interval */
    case 4:
        if (dist > half) /* the neighbour's interval begins at the midpoint */
            o = (rule_outcome){KRN_RULE_VALUE_FAR, dist > half + widen};
        break;
    }
    return o;
}

/* Elements placed at chosen distances from a b = 32 midpoint: within the
 * certain part of tau/2, the uncertain edges on both sides of tau/2, between
 * tau/2 and tau, between tau and 2 tau, around 2 tau and past it; each with
 * every kind of entry, replayed by the arbiter and by the auditor. The
 * outcome (fails or not, the finding's rule and certainty, the output) must
 * be the one rule_expect states. */
static void test_rule_v2_random(void)
{
    const double wf = (1.0 + 0x1p-20) / (2.0 * BAND_MARGIN); /* widening / tau */
    const double zones[][2] = {{0.0, 0.5 - wf},        {0.5 - wf, 0.5},       {0.5, 0.5 + wf},
                               {0.5 + wf, 1.0},        {1.0, 2.0},            {2.0, 2.0 + wf},
                               {2.0 + wf, 3.0}};
    const int nzones = (int)(sizeof zones / sizeof zones[0]);
    size_t cases = 0, failed_arb = 0, failed_aud = 0, uncertain = 0;
    krn_rlog *log = krn_rlog_new();
    for (uint64_t r = 0; r < 60; r++) {
        for (int z = 0; z < nzones; z++) {
            for (int entry = 0; entry <= 4; entry++) {
                uint64_t k = (r * 16 + (uint64_t)z) * 8 + (uint64_t)entry;
                double u1 = uni(77, 4 * k), u2 = uni(77, 4 * k + 1), u3 = uni(77, 4 * k + 2);
                int e = (int)(u2 * 40.0) - 20;
                double g = ldexp(floor(ldexp(1.0 + u1, 23)), e - 23); /* a b = 32 grid value */
                double s = ldexp(1.0, e - 23), m = g + s / 2;
                double tau = s * ldexp(1.0, -5 - (int)(u3 * 12.0));
                double f = zones[z][0] + (zones[z][1] - zones[z][0]) * uni(77, 4 * k + 3);
                bool above = (k / 3) % 2 == 0;
                double x = above ? m + f * tau : m - f * tau;
                double dist = fabs(x - m);
                float below_v = (float)g, above_v = (float)(g + s);
                float nearest = above ? above_v : below_v, other = above ? below_v : above_v;
                if (dist == 0.0)
                    continue; /* a tie: no side */
                rule_outcome want = rule_expect(dist, tau, entry);
                for (int role = 0; role < 2; role++) {
                    krn_rlog_reset(log, 3);
                    if (entry == 1 || entry == 2) {
                        bool up = (entry == 1) == above;
                        CHECK(krn_rlog_add(log, 0, 1, 0, up ? KRN_DIR_UP : KRN_DIR_DOWN, 0) == 0);
                    } else if (entry >= 3) {
                        CHECK(krn_rlog_add(log, 0, 1, 0, KRN_DIR_VALUE, entry == 3 ? nearest : other) == 0);
                    }
                    krn_config cfg = {.mode = KRN_REPLAY, .grid_bits = 32, .threads = 1,
                                      .verifier = role ? KRN_VERIFY_AUDITOR : KRN_VERIFY_ARBITER};
                    krn_ctx *ctx = NULL;
                    CHECK(krn_ctx_new(&ctx, &cfg) == 0);
                    krn_band band = {.kind = KRN_BAND_CONST, .scale = tau};
                    float out = -1.0f;
                    CHECK(krn_step_begin(ctx, 3, log) == 0);
                    int rc = krn_site(ctx, "rule.site", &out, &x, 1, &band);
                    int rc_end = krn_step_end(ctx, NULL);
                    const krn_finding *fd = krn_ctx_finding(ctx);
                    bool should_fail = want.rule != KRN_RULE_NONE && (role == 0 || want.certain);
                    CHECK_MSG((rc == OVT_EFRAUD) == should_fail && rc_end == rc,
                              "zone %d entry %d role %d: d/tau = %.9g, rc %d: %s", z, entry, role,
                              dist / tau, rc, rc ? ovt_errmsg() : "accepted");
                    CHECK_MSG(fd->rule == want.rule, "zone %d entry %d role %d: d/tau = %.9g: finding '%s', "
                              "want '%s'", z, entry, role, dist / tau, krn_rule_name(fd->rule),
                              krn_rule_name(want.rule));
                    if (want.rule != KRN_RULE_NONE) {
                        CHECK(fd->certain == want.certain && fd->element == 0 && fd->site == 0 &&
                              fd->step == 3 && !strcmp(fd->op, "rule.site"));
                        CHECK(strstr(fd->message, krn_rule_name(want.rule)) != NULL);
                        CHECK(fabs(fd->dist_over_tau - dist / tau) <= 1e-12 * (dist / tau) + 1e-300);
                        if (role == 1)
                            CHECK(strstr(fd->message, want.certain ? "(certain" : "(not certain") != NULL);
                    }
                    if (rc == 0) {
                        /* the output follows the entry, or rounds to nearest without one */
                        float want_out = entry == 0 || entry == 3 ? nearest
                                       : entry == 4              ? other
                                       : entry == 1              ? nearest
                                                                 : other;
                        CHECK(fbits(out) == fbits(want_out));
                    }
                    failed_arb += role == 0 && rc != 0;
                    failed_aud += role == 1 && rc != 0;
                    uncertain += role == 1 && want.rule != KRN_RULE_NONE && !want.certain;
                    krn_ctx_free(ctx);
                    cases++;
                }
            }
        }
    }
    /* every branch was reached: the auditor fails less often than the arbiter */
    CHECK(cases > 3000 && failed_aud > 0 && failed_arb > failed_aud && uncertain > 100);
    krn_rlog_free(log);
}

/* A site where some honest elements are logged and the trainer dropped an
 * entry: the arbiter names the missing entry at the lowest element index,
 * whatever the thread count, and accepts the complete log. */
static void test_missing_entry_site(void)
{
    size_t n = 200003;
    fixture f = make_fixture(n, 32, 5);
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = f.a};
    float *out = malloc(n * sizeof *out), *out2 = malloc(n * sizeof *out2);
    krn_rlog *log = krn_rlog_new(), *cut = krn_rlog_new();
    krn_ctx *rec = new_ctx(KRN_RECORD, 32, 4);
    CHECK(krn_step_begin(rec, 2, log) == 0);
    CHECK(krn_site(rec, "t", out, f.x, n, &band) == 0);
    CHECK(krn_step_end(rec, NULL) == 0);
    /* drop every entry from the 1000th on whose own d' is within tau/2 - delta' */
    const krn_rlog_site *ls = krn_rlog_site_at(log, 0);
    size_t first_dropped = SIZE_MAX;
    krn_rlog_reset(cut, 2);
    for (size_t k = 0; k < ls->count; k++) {
        size_t i = (size_t)ls->entries[k].index;
        krn_grid_pos pos;
        CHECK(krn_grid_locate(f.x2[i], 32, &pos) == 0);
        bool drop = k >= 1000 && ls->entries[k].dir != KRN_DIR_VALUE && pos.dist < 0.02 * f.a[i];
        if (drop && first_dropped == SIZE_MAX)
            first_dropped = i;
        if (!drop)
            CHECK(krn_rlog_add(cut, 0, n, i, ls->entries[k].dir, ls->entries[k].value) == 0);
    }
    CHECK(first_dropped != SIZE_MAX);
    for (int threads = 1; threads <= 4; threads += 3) {
        for (int role = 0; role < 2; role++) {
            krn_config cfg = {.mode = KRN_REPLAY, .grid_bits = 32, .threads = threads,
                              .verifier = role ? KRN_VERIFY_AUDITOR : KRN_VERIFY_ARBITER};
            krn_ctx *ctx = NULL;
            CHECK(krn_ctx_new(&ctx, &cfg) == 0);
            CHECK(krn_step_begin(ctx, 2, log) == 0);
            CHECK_MSG(krn_site(ctx, "t", out2, f.x2, n, &band) == 0, "%s", ovt_errmsg());
            CHECK(krn_step_end(ctx, NULL) == 0 && krn_ctx_finding(ctx)->rule == KRN_RULE_NONE);
            CHECK_MEM(out, out2, n * sizeof *out);
            CHECK(krn_step_begin(ctx, 2, cut) == 0);
            CHECK(krn_site(ctx, "t", out2, f.x2, n, &band) == OVT_EFRAUD);
            char want[64];
            snprintf(want, sizeof want, "element %zu: missing entry", first_dropped);
            CHECK_MSG(strstr(ovt_errmsg(), want) != NULL, "%s (want %s)", ovt_errmsg(), want);
            CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
            CHECK(krn_ctx_finding(ctx)->rule == KRN_RULE_MISSING_ENTRY &&
                  krn_ctx_finding(ctx)->element == first_dropped && krn_ctx_finding(ctx)->certain);
            krn_ctx_free(ctx);
        }
    }
    krn_ctx_free(rec);
    krn_rlog_free(log);
    krn_rlog_free(cut);
    free(out);
    free(out2);
    fixture_free(&f);
}

static void test_errors(void)
{
    krn_ctx *ctx = new_ctx(KRN_RECORD, 32, 1);
    krn_rlog *log = krn_rlog_new();
    float out[4];
    double x[4] = {1.0, 2.0, NAN, 4.0};
    krn_band band = {.kind = KRN_BAND_CONST, .scale = 1e-12};
    CHECK(krn_site(ctx, "early", out, x, 4, &band) == OVT_EINVAL); /* outside a step */
    CHECK(krn_step_begin(ctx, 9, NULL) == OVT_EINVAL);               /* RECORD needs a log */
    CHECK(krn_step_begin(ctx, 9, log) == 0);
    CHECK(krn_step_begin(ctx, 10, log) == OVT_EINVAL);
    CHECK(krn_site(ctx, "ok", out, x, 2, &band) == 0);
    CHECK(krn_site(ctx, "attn.softmax", out, x, 4, &band) == OVT_ENUMERIC);
    CHECK_MSG(strstr(ovt_errmsg(), "site 1 (attn.softmax) element 2") != NULL, "%s", ovt_errmsg());
    /* the step has failed: later sites refuse, the end reports it */
    CHECK(krn_site(ctx, "later", out, x, 2, &band) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "later not run") && strstr(ovt_errmsg(), "attn.softmax"));
    CHECK(krn_step_end(ctx, NULL) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "site 1 (attn.softmax) element 2") != NULL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    x[2] = 1e39;
    CHECK(krn_step_begin(ctx, 10, log) == 0);
    CHECK(krn_site(ctx, "big", out, x, 4, NULL) == OVT_ENUMERIC);
    /* the whole reason once, after the site's prefix (it used to repeat the
     * prefix over the start of the reason) */
    CHECK_MSG(!strcmp(ovt_errmsg(), "step 10 site 0 (big) element 2: value 9.9999999999999994e+38 rounds past "
                                    "the largest finite grid value (b = 32)"),
              "%s", ovt_errmsg());
    CHECK(krn_step_end(ctx, NULL) == OVT_ENUMERIC);
    x[2] = -INFINITY;
    CHECK(krn_step_begin(ctx, 10, log) == 0);
    CHECK(krn_site(ctx, "inf", out, x, 4, NULL) == OVT_ENUMERIC);
    CHECK(krn_step_end(ctx, NULL) == OVT_ENUMERIC);
    /* zeros are written as +0 in every mode */
    double z[3] = {-0.0, -1e-300, -0x1p-151};
    CHECK(krn_step_begin(ctx, 11, log) == 0);
    CHECK(krn_site(ctx, "zeros", out, z, 3, NULL) == 0);
    CHECK(fbits(out[0]) == 0 && fbits(out[1]) == 0 && fbits(out[2]) == 0);
    CHECK(krn_step_end(ctx, NULL) == 0);
    krn_ctx_free(ctx);
    krn_config bad = {.mode = KRN_RECORD, .grid_bits = 23};
    krn_ctx *c2 = NULL;
    CHECK(krn_ctx_new(&c2, &bad) == OVT_EINVAL && c2 == NULL);
    krn_rlog_free(log);
}

static void count_own(const double *x, const double *a, size_t n, int b, uint64_t *half, uint64_t *within);

/* The sites' fast path is a second implementation of grid rounding: it must
 * agree with krn_grid_round (checked against oracles in test_grid) on every
 * kind of input, in every mode, for every b, zeros written as +0; RECORD
 * must log exactly the elements within their band (krn_grid_locate's
 * count), so no element the fast path should have flagged slips through.
 * Both with the AVX-512 loops (where the CPU has them) and the portable
 * ones. */
static void test_fast_path_agrees(void)
{
    const size_t n = 120000;
    double *x = malloc(n * sizeof *x), *a = malloc(n * sizeof *a);
    float *out = malloc(n * sizeof *out);
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b++) {
        int p = b - 8;
        for (size_t k = 0; k < n; k++) {
            uint64_t r = krn_rng_u64(31, (uint64_t)b, KRN_RNG_TEST, k);
            double u = uni(32 + (uint64_t)b, k);
            int e = (int)(r % 300) - 170; /* past both ends of the FP32 range */
            double g = ldexp(floor(ldexp(1.0 + u, p - 1)), e - p + 1);
            double step = ldexp(1.0, e - p + 1);
            switch ((r >> 16) % 7) {
            case 0: x[k] = g; break;                                 /* a grid value */
            case 1: x[k] = g + step / 2; break;                      /* an exact tie */
            case 2: x[k] = nextafter(g + step / 2, (r >> 20) & 1 ? 0 : INFINITY); break;
            case 3: x[k] = ldexp(1.0, e) * (1.0 + ldexp(u, -p - 3)); break; /* just above 2^e */
            case 4: x[k] = ldexp(1.0, e) * (1.0 - ldexp(u, -p - 3)); break; /* just below */
            case 5: x[k] = ldexp(1.0 + u, e); break;
            default: x[k] = 0.0; break; /* +0 and, below, -0: both become +0 */
            }
            if (fabs(x[k]) >= 0x1p127)
                x[k] = ldexp(x[k], -60);
            if ((r >> 24) & 1)
                x[k] = -x[k];
            a[k] = fabs(x[k]) * ldexp(1.0, -(int)((r >> 32) % 40)); /* from wide to narrow */
        }
        krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = a};
        uint64_t half, within;
        count_own(x, a, n, b, &half, &within);
        for (int run = 0; run < 6; run++) {
            int mode = run % 3;
            krn_site_force_portable(run >= 3);
            krn_rlog *log = krn_rlog_new();
            krn_ctx *ctx = new_ctx((krn_mode)mode, b, 2);
            krn_rlog_reset(log, 3);
            CHECK(krn_step_begin(ctx, 3, log) == 0);
            int rc = krn_site(ctx, "agree", out, x, n, mode == KRN_REPLAY ? NULL : &band);
            CHECK_MSG(rc == 0, "%s", ovt_errmsg());
            CHECK(krn_step_end(ctx, NULL) == 0);
            if (mode == KRN_RECORD)
                CHECK_MSG(krn_rlog_nentries(log) == within && within > 0,
                          "b=%d portable %d: %llu entries, %llu elements within tau", b, run >= 3,
                          (unsigned long long)krn_rlog_nentries(log), (unsigned long long)within);
            size_t bad = 0;
            for (size_t k = 0; k < n; k++) {
                float want = krn_grid_round(x[k], b);
                if (want == 0.0f)
                    want = 0.0f;
                bad += fbits(out[k]) != fbits(want);
            }
            CHECK_MSG(bad == 0, "b=%d mode %d portable %d: %zu outputs differ from krn_grid_round", b, mode,
                      run >= 3, bad);
            krn_ctx_free(ctx);
            krn_rlog_free(log);
        }
    }
    krn_site_force_portable(false);
    free(x);
    free(a);
    free(out);
}

/* Just above a binade edge 2^e the nearest midpoint can be the one of the
 * finer grid below the edge: x = 2^e + q/16 is 7q/16 from its own interval's
 * midpoint but 5q/16 from 2^e - q/4. With tau = 3q/8 the trainer must log it
 * (a value entry: tau > s/16), and x' = x - 0.99 tau, on the other side of
 * that midpoint, must replay to the same output. */
static void test_binade_edge(void)
{
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b += 2) {
        int p = b - 8;
        enum { N = 200 };
        double x[N], x2[N], a[N];
        float o1[N], o2[N], o3[N];
        for (int k = 0; k < N; k++) {
            int e = -120 + k;
            double q = ldexp(1.0, e - p + 1);
            double sign = k % 2 ? -1.0 : 1.0;
            x[k] = sign * (ldexp(1.0, e) + q / 16);
            a[k] = 3 * q / 8;
            x2[k] = x[k] - sign * 0.99 * a[k];
        }
        krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = a};
        krn_rlog *log = krn_rlog_new();
        krn_ctx *rec = new_ctx(KRN_RECORD, b, 1), *rep = new_ctx(KRN_REPLAY, b, 1),
                *abl = new_ctx(KRN_NEAREST, b, 1);
        CHECK(krn_step_begin(rec, 1, log) == 0 && krn_site(rec, "edge", o1, x, N, &band) == 0);
        krn_stats st;
        CHECK(krn_step_end(rec, &st) == 0);
        CHECK_EQ_U64(st.logged, N);
        CHECK_EQ_U64(st.wide, N);
        CHECK(krn_step_begin(rep, 1, log) == 0 && krn_site(rep, "edge", o2, x2, N, &band) == 0);
        CHECK(krn_step_end(rep, NULL) == 0);
        CHECK(krn_step_begin(abl, 1, NULL) == 0 && krn_site(abl, "edge", o3, x2, N, &band) == 0);
        CHECK(krn_step_end(abl, NULL) == 0);
        int same = 0, nearest_same = 0;
        for (int k = 0; k < N; k++) {
            same += fbits(o1[k]) == fbits(o2[k]);
            nearest_same += fbits(o1[k]) == fbits(o3[k]);
        }
        CHECK_MSG(same == N, "b=%d: %d of %d replayed outputs agree", b, same, N);
        CHECK(nearest_same == 0);
        krn_ctx_free(rec);
        krn_ctx_free(rep);
        krn_ctx_free(abl);
        krn_rlog_free(log);
    }
}

/* Bands with a relative term: the verifier's tau' = base + rel |x'| differs
 * from the trainer's. Elements sit near midpoints with tau right at the
 * direction threshold (s/16) and at the verifier's limit (s/8), and x' is
 * anywhere within the pairwise bound min(tau, tau')/(2M) of x: an honest replay must never be called
 * fraud and must reproduce the trainer's outputs. */
static void test_rel_band_thresholds(void)
{
    enum { N = 40000 };
    static double x[N], x2[N], base[N];
    static float o1[N], o2[N];
    for (int b = 24; b <= 32; b += 8) {
        int p = b - 8;
        double rel = 0x1p-36;
        for (int k = 0; k < N; k++) {
            double u1 = uni(70, 3 * (uint64_t)k), u2 = uni(71, 3 * (uint64_t)k),
                   u3 = uni(72, 3 * (uint64_t)k);
            int e = (int)(u1 * 40) - 20;
            double s = ldexp(1.0, e - p + 1);
            double m = ldexp(floor(ldexp(1.0 + u2, p - 1)), e - p + 1) + s / 2;
            double target = (k % 2 ? s / 16 : s / 8) * (1.0 + ldexp((double)(k % 7) - 3.0, -40));
            base[k] = target - rel * m;
            double tau = base[k] + rel * m;
            x[k] = m + tau * (2.0 * u3 - 1.0);
            double tau_x = base[k] + rel * fabs(x[k]);
            double e2 = tau_x * 0.98 * DELTA_PER_TAU * (2.0 * uni(73, (uint64_t)k) - 1.0);
            x2[k] = x[k] + e2;
            double tau_x2 = base[k] + rel * fabs(x2[k]);
            if (fabs(e2) > 0.99 * DELTA_PER_TAU * tau_x2) /* below both bounds */
                x2[k] = x[k];
        }
        krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = base, .rel = rel};
        krn_rlog *log = krn_rlog_new();
        krn_ctx *rec = new_ctx(KRN_RECORD, b, 1), *rep = new_ctx(KRN_REPLAY, b, 1);
        krn_stats st;
        CHECK(krn_step_begin(rec, 2, log) == 0 && krn_site(rec, "rel", o1, x, N, &band) == 0);
        CHECK(krn_step_end(rec, &st) == 0);
        CHECK(st.logged > N / 4 && st.wide > 0 && st.wide < st.logged);
        CHECK(krn_step_begin(rep, 2, log) == 0);
        int rc = krn_site(rep, "rel", o2, x2, N, &band);
        CHECK_MSG(rc == 0, "b=%d: %s", b, ovt_errmsg());
        CHECK(krn_step_end(rep, NULL) == 0);
        CHECK_MEM(o1, o2, sizeof o1);
        krn_ctx_free(rec);
        krn_ctx_free(rep);
        krn_rlog_free(log);
    }
}

/* A large KRN_BAND_OUTER site whose rows do not line up with the blocks
 * and chunks the site is cut into: element i sits at 0.9 tau_i from a
 * midpoint when i is even and 1.1 tau_i when odd, tau_i = (scale * a[r]) *
 * b[c] + rel |x_i|; exactly the even ones must be logged, on any thread count. */
static void test_outer_large(void)
{
    const size_t cols = 3001, rows = 70, n = rows * cols;
    double *a = malloc(rows * sizeof *a), *bn = malloc(cols * sizeof *bn);
    double *x = malloc(n * sizeof *x);
    float *out = malloc(n * sizeof *out);
    double scale = 0x1p-40, rel = 0x1p-45;
    for (size_t r = 0; r < rows; r++)
        a[r] = 1.0 + uni(80, r);
    for (size_t c = 0; c < cols; c++)
        bn[c] = 1.0 + uni(81, c);
    for (size_t i = 0; i < n; i++) {
        double m = ldexp(floor(ldexp(1.0 + uni(82, i), 23)) + 0.5, -23); /* in [1, 2) */
        double tau = (scale * a[i / cols]) * bn[i % cols] + rel * m;
        x[i] = m + (i % 2 ? 1.1 : 0.9) * tau;
    }
    krn_band band = {.kind = KRN_BAND_OUTER, .scale = scale, .a = a, .b = bn, .cols = cols,
                     .rel = rel};
    for (int threads = 1; threads <= 3; threads += 2) {
        krn_rlog *log = krn_rlog_new();
        krn_ctx *ctx = new_ctx(KRN_RECORD, 32, threads);
        CHECK(krn_step_begin(ctx, 4, log) == 0);
        CHECK(krn_site(ctx, "outer.large", out, x, n, &band) == 0);
        CHECK(krn_step_end(ctx, NULL) == 0);
        const krn_rlog_site *s = krn_rlog_site_at(log, 0);
        CHECK(s != NULL && s->count == (n + 1) / 2);
        size_t wrong = 0;
        for (size_t k = 0; s && k < s->count; k++)
            wrong += s->entries[k].index != 2 * k || s->entries[k].dir != KRN_DIR_UP; /* x > m */
        CHECK_MSG(wrong == 0, "threads %d: %zu entries wrong", threads, wrong);
        krn_ctx_free(ctx);
        krn_rlog_free(log);
    }
    free(a);
    free(bn);
    free(x);
    free(out);
}

/* krn_site_exact_fill: values computed by blocks round exactly as krn_site
 * rounds the same array with a zero band (+0 and -0, ties, subnormals,
 * ordinary values), in every mode, on one and two threads; a non-finite
 * value fails the step naming the site; a REPLAY log with entries for the
 * site is fraud. KRN_PLAIN converts with (float)x. */
typedef struct {
    const double *x;
    int calls;
} fill_src;

static void fill_copy(void *arg, size_t i0, size_t len, double *x)
{
    fill_src *f = arg;
    __atomic_fetch_add(&f->calls, 1, __ATOMIC_RELAXED);
    memcpy(x, f->x + i0, len * sizeof *x);
}

static void test_exact_fill(void)
{
    const size_t n = 150001; /* split over the pool, and a ragged last block */
    double *x = malloc(n * sizeof *x);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    for (size_t k = 0; k < n; k++) {
        uint64_t r = krn_rng_u64(41, 0, KRN_RNG_TEST, k);
        double u = uni(42, k);
        switch (r % 6) {
        case 0: x[k] = 0.0; break;
        case 1: x[k] = -0.0; break;
        case 2: x[k] = 1.0 + 0x1p-24; break;             /* a tie: to even */
        case 3: x[k] = ldexp(u, -140); break;             /* subnormal range */
        default: x[k] = ldexp(u - 0.5, (int)(r >> 8) % 40 - 20); break;
        }
    }
    krn_band exact = {.kind = KRN_BAND_ZERO};
    for (int mode = 0; mode < 4; mode++)
        for (int threads = 1; threads <= 2; threads++) {
            krn_rlog *log = krn_rlog_new();
            krn_rlog_reset(log, 5);
            krn_ctx *ctx = new_ctx((krn_mode)mode, 32, threads);
            CHECK(krn_step_begin(ctx, 5, log) == 0);
            fill_src src = {.x = x};
            CHECK_MSG(krn_site(ctx, "array", want, x, n, &exact) == 0, "%s", ovt_errmsg());
            CHECK_MSG(krn_site_exact_fill(ctx, "fill", got, n, fill_copy, &src) == 0, "%s",
                      ovt_errmsg());
            krn_stats st;
            CHECK(krn_step_end(ctx, &st) == 0);
            CHECK(st.sites == 2 && st.outputs == 2 * n && st.logged == 0);
            CHECK(src.calls == (int)((n + 1023) / 1024)); /* each block once */
            size_t bad = 0, badref = 0;
            for (size_t k = 0; k < n; k++) {
                bad += fbits(got[k]) != fbits(want[k]);
                float ref = mode == KRN_PLAIN ? (float)x[k] : krn_grid_round(x[k], 32);
                if (mode != KRN_PLAIN && ref == 0.0f)
                    ref = 0.0f; /* zeros are written as +0 */
                badref += fbits(want[k]) != fbits(ref);
            }
            CHECK_MSG(bad == 0, "mode %d threads %d: %zu fill outputs differ", mode, threads, bad);
            CHECK_MSG(badref == 0, "mode %d threads %d: %zu outputs differ from the reference", mode,
                      threads, badref);
            CHECK(krn_rlog_nsites(log) == 0 || mode == KRN_REPLAY);
            krn_ctx_free(ctx);
            krn_rlog_free(log);
        }

    /* a NaN from the fill fails the step and names the site */
    krn_ctx *ctx = new_ctx(KRN_RECORD, 32, 2);
    krn_rlog *log = krn_rlog_new();
    double saved = x[123456];
    x[123456] = NAN;
    fill_src src = {.x = x};
    CHECK(krn_step_begin(ctx, 6, log) == 0);
    CHECK(krn_site_exact_fill(ctx, "nanfill", got, n, fill_copy, &src) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "nanfill") != NULL && strstr(ovt_errmsg(), "123456") != NULL);
    CHECK(krn_site(ctx, "after", want, x, 1, &exact) == OVT_ENUMERIC);
    CHECK(krn_step_end(ctx, NULL) == OVT_ENUMERIC);
    x[123456] = saved;
    krn_ctx_free(ctx);

    /* REPLAY: entries logged for an exact fill site are fraud */
    krn_rlog_entry e = {.index = 3, .dir = KRN_DIR_UP};
    krn_rlog_reset(log, 7);
    CHECK(krn_rlog_add_site(log, 0, n, &e, 1) == 0);
    ctx = new_ctx(KRN_REPLAY, 32, 2);
    CHECK(krn_step_begin(ctx, 7, log) == 0);
    CHECK(krn_site_exact_fill(ctx, "forged", got, n, fill_copy, &src) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "forged") != NULL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
    krn_ctx_free(ctx);
    krn_rlog_free(log);

    /* KRN_PLAIN is FP32 only */
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_PLAIN, .grid_bits = 30};
    CHECK(krn_ctx_new(&ctx, &cfg) == OVT_EINVAL && ctx == NULL);
    free(x);
    free(want);
    free(got);
}

/* krn_site_exact_fills: three exact sites, each reading the rounded output
 * of the one before, rounded together block by block give the same outputs
 * and counts as krn_site_exact_fill run three times, in every mode, on one
 * and two threads; a failure is the first failing site's, at its lowest
 * element, even where a later site fails earlier in the same chunk; a
 * REPLAY log with entries for any of the sites is fraud. */
typedef struct {
    const double *x;
    float *out[3];
    double nan_at[3]; /* element index + 1 where site s yields a NaN, or 0 */
    double nan_at2[3];
} chain_src;

static double chain_nan(const chain_src *c, int s, size_t i, double v)
{
    return (c->nan_at[s] == (double)(i + 1) || c->nan_at2[s] == (double)(i + 1)) ? NAN : v;
}

static void chain0(void *arg, size_t i0, size_t len, double *x)
{
    const chain_src *c = arg;
    for (size_t k = 0; k < len; k++)
        x[k] = chain_nan(c, 0, i0 + k, c->x[i0 + k] * 3.0);
}

static void chain1(void *arg, size_t i0, size_t len, double *x)
{
    const chain_src *c = arg;
    for (size_t k = 0; k < len; k++)
        x[k] = chain_nan(c, 1, i0 + k, (double)c->out[0][i0 + k] + c->x[i0 + k] * 0.1);
}

static void chain2(void *arg, size_t i0, size_t len, double *x)
{
    const chain_src *c = arg;
    for (size_t k = 0; k < len; k++) {
        size_t i = i0 + k;
        x[k] = chain_nan(c, 2, i, (double)c->out[1][i] / ((double)c->out[0][i] + 0.5) + (double)c->out[2][i]);
    }
}

/* Runs the chain as one krn_site_exact_fills call (fused) or three calls. */
static int run_chain(krn_ctx *ctx, chain_src *c, size_t n, bool fused)
{
    static const krn_site_fill fills[3] = {chain0, chain1, chain2};
    static const char *const names[3] = {"chain.a", "chain.b", "chain.c"};
    krn_exact_fill sites[3];
    for (int s = 0; s < 3; s++)
        sites[s] = (krn_exact_fill){names[s], c->out[s], fills[s]};
    if (fused)
        return krn_site_exact_fills(ctx, sites, 3, n, c);
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++)
        rc = krn_site_exact_fill(ctx, names[s], c->out[s], n, fills[s], c);
    return rc;
}

static void test_exact_fills(void)
{
    const size_t n = 150001;
    double *x = malloc(n * sizeof *x);
    float *buf = malloc(6 * n * sizeof *buf);
    for (size_t k = 0; k < n; k++)
        x[k] = ldexp(uni(43, k) - 0.5, (int)(krn_rng_u64(44, 0, KRN_RNG_TEST, k) % 30) - 15);
    for (int mode = 0; mode < 4; mode++)
        for (int threads = 1; threads <= 2; threads++) {
            chain_src c[2];
            krn_stats st[2];
            for (int fused = 0; fused < 2; fused++) {
                c[fused] = (chain_src){.x = x};
                for (int s = 0; s < 3; s++) {
                    c[fused].out[s] = buf + (3 * fused + s) * n;
                    for (size_t k = 0; k < n; k++)
                        c[fused].out[s][k] = (float)(k % 7); /* the old values site c adds */
                }
                krn_rlog *log = krn_rlog_new();
                krn_rlog_reset(log, 5);
                krn_ctx *ctx = new_ctx((krn_mode)mode, 32, threads);
                CHECK(krn_step_begin(ctx, 5, log) == 0);
                CHECK_MSG(run_chain(ctx, &c[fused], n, fused) == 0, "%s", ovt_errmsg());
                CHECK(krn_step_end(ctx, &st[fused]) == 0);
                krn_ctx_free(ctx);
                krn_rlog_free(log);
            }
            CHECK(st[1].sites == 3 && st[1].outputs == 3 * n && st[1].sites == st[0].sites);
            size_t bad = 0;
            for (size_t k = 0; k < 3 * n; k++)
                bad += fbits(buf[k]) != fbits(buf[3 * n + k]);
            CHECK_MSG(bad == 0, "mode %d threads %d: %zu fused outputs differ", mode, threads, bad);
        }

    /* failures: site b fails at 100, site a at 30000 (same chunk, a later
     * block): a's failure is reported; then only b, at 100 and 140000 */
    for (int only_b = 0; only_b < 2; only_b++)
        for (int fused = 0; fused < 2; fused++) {
            chain_src c = {.x = x, .out = {buf, buf + n, buf + 2 * n}};
            c.nan_at[1] = 101;
            c.nan_at2[1] = 140001;
            if (!only_b)
                c.nan_at[0] = 30001;
            krn_ctx *ctx = new_ctx(KRN_RECORD, 32, 2);
            krn_rlog *log = krn_rlog_new();
            CHECK(krn_step_begin(ctx, 6, log) == 0);
            CHECK(run_chain(ctx, &c, n, fused) == OVT_ENUMERIC);
            const char *want = only_b ? "site 1 (chain.b) element 100:" : "site 0 (chain.a) element 30000:";
            CHECK_MSG(strstr(ovt_errmsg(), want) != NULL, "fused %d: %s", fused, ovt_errmsg());
            CHECK(krn_step_end(ctx, NULL) == OVT_ENUMERIC);
            krn_ctx_free(ctx);
            krn_rlog_free(log);
        }

    /* REPLAY: entries logged for the second site of the group are fraud */
    krn_rlog *log = krn_rlog_new();
    krn_rlog_entry e = {.index = 3, .dir = KRN_DIR_UP};
    krn_rlog_reset(log, 7);
    CHECK(krn_rlog_add_site(log, 1, n, &e, 1) == 0);
    krn_ctx *ctx = new_ctx(KRN_REPLAY, 32, 2);
    chain_src c = {.x = x, .out = {buf, buf + n, buf + 2 * n}};
    CHECK(krn_step_begin(ctx, 7, log) == 0);
    CHECK(run_chain(ctx, &c, n, true) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "site 1 (chain.b)") != NULL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
    krn_ctx_free(ctx);
    krn_rlog_free(log);
    free(x);
    free(buf);
}

/* The names the commands accept for --backend, and a clear refusal. */
static void test_backend_names(void)
{
    const char *names[] = {"cpu", "ref", "shuffle", "cuda"};
    const krn_backend_kind kinds[] = {KRN_BACKEND_CPU, KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE, KRN_BACKEND_CUDA};
    for (int i = 0; i < 4; i++) {
        krn_backend_kind k = KRN_BACKEND_CPU;
        CHECK(krn_backend_parse(&k, names[i]) == 0 && k == kinds[i]);
    }
    krn_backend_kind k = KRN_BACKEND_REF;
    CHECK(krn_backend_parse(&k, "gpu") == OVT_EINVAL && k == KRN_BACKEND_REF);
    CHECK(strstr(ovt_errmsg(), "'gpu'") && strstr(ovt_errmsg(), "cpu, ref, shuffle, cuda"));
    CHECK(krn_backend_parse(&k, "CPU") == OVT_EINVAL); /* names are exact */
}

/* Per-site counts (krn_ctx_collect_sites) against an independent count with
 * krn_grid_locate: elements with tau > 0 and d <= tau/2, d <= tau, on the
 * trainer's x in RECORD (where every such element is logged, and nothing
 * else: entries == within tau) and on the verifier's x2 in REPLAY (entries:
 * the log's); an exact site has a row with zeros; outputs and logs are the
 * same bits with counting on and off, on 1 and 3 threads; NEAREST has no
 * rows. */
static void count_own(const double *x, const double *a, size_t n, int b, uint64_t *half, uint64_t *within)
{
    *half = *within = 0;
    for (size_t i = 0; i < n; i++) {
        krn_grid_pos pos;
        if (krn_grid_locate(x[i], b, &pos) < 0 || !(a[i] > 0.0))
            continue;
        *half += pos.dist <= 0.5 * a[i];
        *within += pos.dist <= a[i];
    }
}

static void test_site_stats(int threads)
{
    const int b = 32;
    const size_t n = 150000;
    fixture f = make_fixture(n, b, 4242 + (uint64_t)threads);
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = f.a};
    float *o1 = malloc(n * sizeof *o1), *o2 = malloc(n * sizeof *o2), *ex = malloc(n * sizeof *ex);
    krn_rlog *log = krn_rlog_new(), *log_off = krn_rlog_new();
    uint64_t half, within;
    size_t count = 0;
    for (int on = 0; on < 2; on++) {
        krn_ctx *ctx = new_ctx(KRN_RECORD, b, threads);
        krn_ctx_collect_sites(ctx, on);
        CHECK(krn_step_begin(ctx, 3, on ? log : log_off) == 0);
        CHECK(krn_site(ctx, "exact", ex, f.x2, n, NULL) == 0);
        CHECK(krn_site(ctx, "banded", on ? o1 : o2, f.x, n, &band) == 0);
        CHECK(krn_step_end(ctx, NULL) == 0);
        const krn_site_stats *rows = krn_ctx_site_stats(ctx, &count);
        if (!on) {
            CHECK(rows == NULL && count == 0);
        } else {
            CHECK(rows != NULL && count == 2);
        }
        if (on && rows != NULL && count == 2) {
            count_own(f.x, f.a, n, b, &half, &within);
            CHECK(rows[0].site == 0 && !rows[0].banded && rows[0].entries == 0 && rows[0].within_tau == 0);
            CHECK(rows[1].site == 1 && rows[1].banded && rows[1].n == n && strcmp(rows[1].op, "banded") == 0);
            CHECK_EQ_U64(rows[1].within_half, half);
            CHECK_EQ_U64(rows[1].within_tau, within);
            CHECK_EQ_U64(rows[1].entries, krn_rlog_nentries(log));
            CHECK_EQ_U64(rows[1].entries, within); /* RECORD logs exactly the elements within tau */
            CHECK(half > 0 && half < within);
        }
        krn_ctx_free(ctx);
    }
    CHECK(memcmp(o1, o2, n * sizeof *o1) == 0);
    CHECK(krn_rlog_nentries(log) == krn_rlog_nentries(log_off));

    /* REPLAY on x2: the verifier's own counts, the trainer's entries */
    for (int on = 0; on < 2; on++) {
        krn_ctx *ctx = new_ctx(KRN_REPLAY, b, threads);
        krn_ctx_collect_sites(ctx, on);
        CHECK(krn_step_begin(ctx, 3, log) == 0);
        CHECK(krn_site(ctx, "exact", ex, f.x2, n, NULL) == 0);
        CHECK(krn_site(ctx, "banded", on ? o2 : o1, f.x2, n, &band) == 0);
        CHECK(krn_step_end(ctx, NULL) == 0);
        const krn_site_stats *rows = krn_ctx_site_stats(ctx, &count);
        CHECK(!on || (rows != NULL && count == 2));
        if (on && rows != NULL && count == 2) {
            count_own(f.x2, f.a, n, b, &half, &within);
            CHECK_EQ_U64(rows[1].within_half, half);
            CHECK_EQ_U64(rows[1].within_tau, within);
            CHECK_EQ_U64(rows[1].entries, krn_rlog_nentries(log));
            CHECK(rows[1].within_half <= rows[1].within_tau);
        }
        krn_ctx_free(ctx);
    }
    CHECK(memcmp(o1, o2, n * sizeof *o1) == 0);

    krn_ctx *ctx = new_ctx(KRN_NEAREST, b, threads);
    krn_ctx_collect_sites(ctx, true);
    CHECK(krn_step_begin(ctx, 3, NULL) == 0);
    CHECK(krn_site(ctx, "banded", o1, f.x, n, &band) == 0);
    CHECK(krn_step_end(ctx, NULL) == 0);
    CHECK(krn_ctx_site_stats(ctx, &count) == NULL && count == 0);
    krn_ctx_free(ctx);
    krn_rlog_free(log);
    krn_rlog_free(log_off);
    free(o1);
    free(o2);
    free(ex);
    fixture_free(&f);
}


/* krn_site_parts: a banded site handed over in ragged parts gives the
 * outputs, log entries and counts of krn_site on the same values, in
 * RECORD and in REPLAY (the verifier's own values, the trainer's log), on
 * one and two threads; a fraudulent entry fails both with the same message;
 * a part that does not fit fails the step. */
static int parts_site(krn_ctx *ctx, float *out, const fixture *f, const double *x, size_t n)
{
    static const size_t cuts[] = {70001, 1, 65536, 1024};
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0};
    krn_site_parts *sp = NULL;
    int rc = krn_site_parts_begin(ctx, &sp, "test.site", out, n, &band);
    if (rc)
        return rc;
    for (size_t k = 0, at = 0; at < n && rc == 0; k++) {
        size_t len = k < 4 ? cuts[k] : n - at;
        rc = krn_site_part(sp, x + at, len, f->a + at, NULL);
        at += len;
    }
    int end = krn_site_parts_end(sp);
    return rc ? rc : end;
}

static void test_site_parts(void)
{
    const size_t n = 200003;
    fixture f = make_fixture(n, 32, 77);
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .a = f.a};
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    for (int threads = 1; threads <= 2; threads++) {
        krn_rlog *log1 = krn_rlog_new(), *log2 = krn_rlog_new();
        krn_ctx *ctx = new_ctx(KRN_RECORD, 32, threads);
        krn_stats s1, s2;
        CHECK(krn_step_begin(ctx, 3, log1) == 0);
        CHECK(krn_site(ctx, "test.site", want, f.x, n, &band) == 0);
        CHECK(krn_step_end(ctx, &s1) == 0);
        CHECK(krn_step_begin(ctx, 3, log2) == 0);
        CHECK_MSG(parts_site(ctx, got, &f, f.x, n) == 0, "%s", ovt_errmsg());
        CHECK(krn_step_end(ctx, &s2) == 0);
        CHECK(memcmp(want, got, n * sizeof *got) == 0);
        CHECK(s1.logged == s2.logged && s1.logged > 0 && s1.wide == s2.wide && s1.ambiguous == s2.ambiguous);
        CHECK(krn_rlog_nsites(log1) == 1 && krn_rlog_nsites(log2) == 1);
        const krn_rlog_site *a = krn_rlog_site_at(log1, 0), *b = krn_rlog_site_at(log2, 0);
        CHECK(a->count == b->count && memcmp(a->entries, b->entries, a->count * sizeof *a->entries) == 0);
        krn_ctx_free(ctx);

        ctx = new_ctx(KRN_REPLAY, 32, threads);
        CHECK(krn_step_begin(ctx, 3, log1) == 0);
        CHECK_MSG(krn_site(ctx, "test.site", want, f.x2, n, &band) == 0, "%s", ovt_errmsg());
        CHECK(krn_step_end(ctx, &s1) == 0);
        CHECK(krn_step_begin(ctx, 3, log1) == 0);
        CHECK_MSG(parts_site(ctx, got, &f, f.x2, n) == 0, "%s", ovt_errmsg());
        CHECK(krn_step_end(ctx, &s2) == 0);
        CHECK(memcmp(want, got, n * sizeof *got) == 0);
        CHECK(s1.logged == s2.logged && s1.max_dist_over_tau == s2.max_dist_over_tau);

        /* a direction entry for an element far from its midpoint: fraud */
        krn_rlog_entry e = {.index = 131072 + 8, .dir = KRN_DIR_UP}; /* k % 8 == 0: a random value */
        krn_rlog_reset(log2, 4);
        CHECK(krn_rlog_add_site(log2, 0, n, &e, 1) == 0);
        char msg1[512];
        CHECK(krn_step_begin(ctx, 4, log2) == 0);
        CHECK(krn_site(ctx, "test.site", want, f.x2, n, &band) == OVT_EFRAUD);
        snprintf(msg1, sizeof msg1, "%s", ovt_errmsg());
        CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
        CHECK(krn_step_begin(ctx, 4, log2) == 0);
        CHECK(parts_site(ctx, got, &f, f.x2, n) == OVT_EFRAUD);
        CHECK_MSG(strcmp(msg1, ovt_errmsg()) == 0, "'%s' vs '%s'", msg1, ovt_errmsg());
        CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
        krn_ctx_free(ctx);
        krn_rlog_free(log1);
        krn_rlog_free(log2);
    }
    /* parts that overrun the site fail the step */
    krn_ctx *ctx = new_ctx(KRN_NEAREST, 32, 1);
    krn_site_parts *sp = NULL;
    CHECK(krn_step_begin(ctx, 5, NULL) == 0);
    CHECK(krn_site_parts_begin(ctx, &sp, "short", got, 10, &band) == 0);
    CHECK(krn_site_part(sp, f.x, 11, f.a, NULL) == OVT_EINVAL);
    CHECK(krn_site_parts_end(sp) == OVT_EINVAL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    krn_ctx_free(ctx);
    free(want);
    free(got);
    fixture_free(&f);
}

/* krn_site_part_keep against krn_site on the same values: kept ranges are
 * the FP32 values out already holds with band array 0, between them a part
 * of the fixture's values. Kept values are grid values and +0, with one
 * block each holding a -0, a subnormal and (b < 32) a value off the grid,
 * which the keep takes through the ordinary path; outputs, entries and
 * counts match in RECORD; REPLAY of the reference log matches; a hostile
 * entry on a kept element is fraud with krn_site's message; a NaN among
 * the kept values (its band is NaN too) fails both with the same code and
 * message. */
static int keep_site(krn_ctx *ctx, float *out, const fixture *f, size_t n, size_t k1, size_t k2,
                     const krn_band *band)
{
    krn_site_parts *sp = NULL;
    int rc = krn_site_parts_begin(ctx, &sp, "test.keep", out, n, band);
    if (rc)
        return rc;
    if ((rc = krn_site_part_keep(sp, k1)) == 0 && (rc = krn_site_part(sp, f->x + k1, k2 - k1, f->a + k1, NULL)) == 0)
        rc = krn_site_part_keep(sp, n - k2);
    int end = krn_site_parts_end(sp);
    return rc ? rc : end;
}

static void test_site_part_keep(int b, int threads)
{
    const size_t n = 70000, k1 = 30000, k2 = 41000;
    fixture f = make_fixture(n, b, 99 + (uint64_t)b);
    float *old = malloc(n * sizeof *old), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    double *xr = malloc(n * sizeof *xr), *ar = malloc(n * sizeof *ar);
    for (size_t k = 0; k < n; k++) {
        double u = uni(500 + (uint64_t)b, k);
        old[k] = k % 5 == 0 ? 0.0f : krn_grid_round(ldexp(u - 0.5, (int)(k % 40) - 20), b);
    }
    old[5000] = -0.0f;
    old[12001] = 0x1p-140f;
    if (b < 32)
        old[20002] = 1.0f + 0x1p-23f; /* not on a grid of fewer than 24 bits */
    for (size_t k = 0; k < n; k++) {
        bool kept = k < k1 || k >= k2;
        xr[k] = kept ? (double)old[k] : f.x[k];
        ar[k] = kept ? 0.0 : f.a[k];
    }
    krn_band band = {.kind = KRN_BAND_ARRAY, .scale = 1.0, .rel = 0x1p-40};
    krn_band band_ref = band;
    band_ref.a = ar;
    krn_rlog *log1 = krn_rlog_new(), *log2 = krn_rlog_new();
    krn_ctx *ctx = new_ctx(KRN_RECORD, b, threads);
    krn_stats s1, s2;
    CHECK(krn_step_begin(ctx, 3, log1) == 0);
    CHECK(krn_site(ctx, "test.keep", want, xr, n, &band_ref) == 0);
    CHECK(krn_step_end(ctx, &s1) == 0);
    memcpy(got, old, n * sizeof *got);
    CHECK(krn_step_begin(ctx, 3, log2) == 0);
    CHECK_MSG(keep_site(ctx, got, &f, n, k1, k2, &band) == 0, "%s", ovt_errmsg());
    CHECK(krn_step_end(ctx, &s2) == 0);
    CHECK_MSG(memcmp(want, got, n * sizeof *got) == 0, "b=%d: outputs differ", b);
    CHECK(fbits(got[5000]) == 0 && got[12001] == krn_grid_round(0x1p-140, b));
    CHECK(b == 32 || got[20002] == krn_grid_round(1.0 + 0x1p-23, b));
    CHECK(s1.logged == s2.logged && s1.logged > 0 && s1.wide == s2.wide && s1.ambiguous == s2.ambiguous);
    const krn_rlog_site *e1 = krn_rlog_site_at(log1, 0), *e2 = krn_rlog_site_at(log2, 0);
    CHECK(e1 && e2 && e1->count == e2->count && memcmp(e1->entries, e2->entries, e1->count * sizeof *e1->entries) == 0);
    krn_ctx_free(ctx);

    ctx = new_ctx(KRN_REPLAY, b, threads);
    CHECK(krn_step_begin(ctx, 3, log1) == 0);
    CHECK(krn_site(ctx, "test.keep", want, xr, n, &band_ref) == 0);
    CHECK(krn_step_end(ctx, &s1) == 0);
    memcpy(got, old, n * sizeof *got);
    CHECK(krn_step_begin(ctx, 3, log1) == 0);
    CHECK_MSG(keep_site(ctx, got, &f, n, k1, k2, &band) == 0, "%s", ovt_errmsg());
    CHECK(krn_step_end(ctx, &s2) == 0);
    CHECK(memcmp(want, got, n * sizeof *got) == 0 && s1.logged == s2.logged);

    /* the honest entries and a direction entry on a kept grid value: fraud
     * at that element, as krn_site finds it */
    e1 = krn_rlog_site_at(log1, 0);
    size_t ne = e1 ? e1->count : 0;
    krn_rlog_entry *es = malloc((ne + 1) * sizeof *es);
    if (ne)
        memcpy(es, e1->entries, ne * sizeof *es);
    es[ne] = (krn_rlog_entry){.index = 60001, .dir = KRN_DIR_UP};
    krn_rlog_reset(log2, 4);
    CHECK(krn_rlog_add_site(log2, 0, n, es, ne + 1) == 0);
    free(es);
    char msg[512];
    CHECK(krn_step_begin(ctx, 4, log2) == 0);
    CHECK(krn_site(ctx, "test.keep", want, xr, n, &band_ref) == OVT_EFRAUD);
    snprintf(msg, sizeof msg, "%s", ovt_errmsg());
    CHECK_MSG(strstr(msg, "element 60001"), "%s", msg);
    CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
    memcpy(got, old, n * sizeof *got);
    CHECK(krn_step_begin(ctx, 4, log2) == 0);
    CHECK(keep_site(ctx, got, &f, n, k1, k2, &band) == OVT_EFRAUD);
    CHECK_MSG(strcmp(msg, ovt_errmsg()) == 0, "'%s' vs '%s'", msg, ovt_errmsg());
    CHECK(krn_step_end(ctx, NULL) == OVT_EFRAUD);
    krn_ctx_free(ctx);

    /* a NaN among the kept values fails both ways alike */
    old[65000] = NAN;
    xr[65000] = NAN;
    ctx = new_ctx(KRN_RECORD, b, threads);
    CHECK(krn_step_begin(ctx, 5, log1) == 0);
    int rc = krn_site(ctx, "test.keep", want, xr, n, &band_ref);
    CHECK(rc < 0 && strstr(ovt_errmsg(), "element 65000"));
    snprintf(msg, sizeof msg, "%s", ovt_errmsg());
    CHECK(krn_step_end(ctx, NULL) == rc);
    memcpy(got, old, n * sizeof *got);
    CHECK(krn_step_begin(ctx, 5, log2) == 0);
    CHECK(keep_site(ctx, got, &f, n, k1, k2, &band) == rc);
    CHECK_MSG(strcmp(msg, ovt_errmsg()) == 0, "'%s' vs '%s'", msg, ovt_errmsg());
    CHECK(krn_step_end(ctx, NULL) == rc);
    /* an OUTER band cannot be kept */
    krn_band outer = {.kind = KRN_BAND_OUTER, .scale = 1.0, .cols = 10};
    krn_site_parts *sp = NULL;
    CHECK(krn_step_begin(ctx, 6, log2) == 0);
    CHECK(krn_site_parts_begin(ctx, &sp, "outer", got, 100, &outer) == 0);
    CHECK(krn_site_part_keep(sp, 10) == OVT_EINVAL);
    CHECK(krn_site_parts_end(sp) == OVT_EINVAL);
    CHECK(krn_step_end(ctx, NULL) == OVT_EINVAL);
    krn_ctx_free(ctx);
    krn_rlog_free(log1);
    krn_rlog_free(log2);
    free(old);
    free(want);
    free(got);
    free(xr);
    free(ar);
    fixture_free(&f);
}

int main(void)
{
    CHECK_RUN(test_backend_names());
    CHECK_RUN(test_exact_fill());
    CHECK_RUN(test_exact_fills());
    CHECK_RUN(test_site_parts());
    CHECK_RUN(test_site_part_keep(32, 1));
    CHECK_RUN(test_site_part_keep(32, 2));
    CHECK_RUN(test_site_part_keep(26, 2));
    CHECK_RUN(test_outer_large());
    CHECK_RUN(test_rel_band_thresholds());
    CHECK_RUN(test_binade_edge());
    CHECK_RUN(test_fast_path_agrees());
    for (int b = KRN_GRID_BITS_MIN; b <= KRN_GRID_BITS_MAX; b++)
        CHECK_RUN(test_replay_matches(b, 20000 + (size_t)b, 1, (uint64_t)b));
    CHECK_RUN(test_replay_matches(32, 200000, 2, 99));
    CHECK_RUN(test_replay_matches(26, 200000, 3, 98));
    CHECK_RUN(test_threads());
    CHECK_RUN(test_bands());
    CHECK_RUN(test_fraud());
    CHECK_RUN(test_tolerant());
    CHECK_RUN(test_rule_v2_random());
    CHECK_RUN(test_missing_entry_site());
    CHECK_RUN(test_errors());
    CHECK_RUN(test_site_stats(1));
    CHECK_RUN(test_site_stats(3));
    return check_done();
}
