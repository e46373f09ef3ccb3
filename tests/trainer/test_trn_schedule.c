/* The learning-rate schedule (trainer/schedule.h): trn_cospi against a long
 * double libm reference over more than 10^5 points, exactly 1, 0, -1 at
 * p = 0, 1/2, 1, exact symmetry and monotonicity; the schedule's values at
 * the end of warmup, the middle and the end of the cosine fall; plain FP32
 * training (examples/demo/fp32.c) steps with the same cosine rate. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "examples/demo/fp32.h"
#include "trainer/schedule.h"

/* The bound asserted, in ulps of the double nearest the true value. */
#define COSPI_ULPS 2.0

/* cos(pi p) = sin(pi (1/2 - p)): 1/2 - p is exact in long double for every
 * double p in [2^-11, 1] (and cos is ~1 below), and the argument of sinl is
 * small where the value is, so the reference keeps ~64 bits relative. */
static long double reference(double p)
{
    const long double pi = 3.14159265358979323846264338327950288L;
    return sinl(pi * (0.5L - (long double)p));
}

/* |ours - ref| in ulps of ref rounded to double. */
static double ulps(double ours, long double ref)
{
    double r = (double)ref;
    if (r == 0)
        return ours == 0 ? 0 : INFINITY;
    double ulp = ldexp(1.0, ilogb(r) - 52);
    return (double)(fabsl((long double)ours - ref) / (long double)ulp);
}

static void test_cospi(void)
{
    CHECK(LDBL_MANT_DIG >= 64); /* the reference needs more bits than double */
    CHECK(trn_cospi(0.0) == 1.0);
    CHECK(trn_cospi(0.5) == 0.0);
    CHECK(trn_cospi(1.0) == -1.0);
    CHECK(trn_cospi(-0.25) == 1.0 && trn_cospi(1.5) == -1.0 && trn_cospi(NAN) == 1.0); /* clamped */

    double worst = 0, worst_p = 0;
    size_t points = 0, symmetric = 0, monotone = 0;
    /* A grid of 2^17 + 1 dyadic points (exact p, 1 - p): monotone and
     * symmetric exactly. */
    const uint32_t N = 1u << 17;
    double prev = 2.0;
    for (uint32_t k = 0; k <= N; k++) {
        double p = (double)k / N, c = trn_cospi(p), e = ulps(c, reference(p));
        if (e > worst)
            worst = e, worst_p = p;
        points++;
        monotone += c <= prev;
        prev = c;
        symmetric += trn_cospi(1.0 - p) == -c;
    }
    CHECK_EQ_U64(monotone, N + 1);
    CHECK_EQ_U64(symmetric, N + 1);
    /* 10^5 pseudo-random doubles in [0, 1] (all 53 bits used), and the
     * neighbours of the reduction's seams 1/4, 1/2, 3/4. */
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 100000; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double p = (double)(x >> 11) * 0x1p-53;
        double e = ulps(trn_cospi(p), reference(p));
        if (e > worst)
            worst = e, worst_p = p;
        points++;
    }
    const double seams[3] = {0.25, 0.5, 0.75};
    for (int s = 0; s < 3; s++) {
        double lo = seams[s], hi = seams[s];
        for (int k = 0; k < 64; k++) {
            lo = nextafter(lo, 0.0);
            hi = nextafter(hi, 1.0);
            double e = fmax(ulps(trn_cospi(lo), reference(lo)), ulps(trn_cospi(hi), reference(hi)));
            if (e > worst)
                worst = e, worst_p = lo;
            points += 2;
        }
    }
    printf("trn_cospi: %zu points, worst error %.3f ulp at p = %.17g (bound %.1f)\n", points, worst, worst_p,
           COSPI_ULPS);
    CHECK(points >= 100000);
    CHECK_MSG(worst <= COSPI_ULPS, "worst error %.3f ulp at p = %.17g", worst, worst_p);
}

static void test_schedule(void)
{
    trn_model_config m;
    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.lr = 6e-4;
    rc.lr_min = 6e-5;
    rc.warmup_steps = 10;
    rc.decay_steps = 110;
    rc.schedule = TRN_SCHEDULE_COSINE;
    CHECK(trn_config_check(&rc) == 0);
    CHECK(trn_schedule_lr(&rc, 5) == rc.lr * 5 / 10);  /* warmup */
    CHECK(trn_schedule_lr(&rc, 10) == rc.lr);          /* warmup end: p = 0 */
    double mid = trn_schedule_lr(&rc, 60), half = (rc.lr + rc.lr_min) / 2; /* p = 1/2 */
    CHECK_MSG(fabs(mid - half) <= nextafter(half, 1.0) - half, "mid %.17g, (lr + lr_min)/2 %.17g", mid, half);
    CHECK(trn_schedule_lr(&rc, 110) == rc.lr_min); /* end */
    CHECK(trn_schedule_lr(&rc, 500) == rc.lr_min);
    /* The whole fall: never rising, strictly inside (lr_min, lr), and the
     * textbook formula with libm's cos within a relative 1e-15. */
    double prev = rc.lr;
    size_t ok = 0;
    for (uint64_t i = 11; i < 110; i++) {
        double v = trn_schedule_lr(&rc, i), p = (double)(i - 10) / 100.0;
        double textbook = rc.lr_min + (rc.lr - rc.lr_min) * (1 + cos(M_PI * p)) / 2;
        ok += v <= prev && v > rc.lr_min && v < rc.lr && fabs(v - textbook) <= 1e-15 * textbook;
        prev = v;
    }
    CHECK_EQ_U64(ok, 99);
    /* Linear, as before the cosine existed (existing runs keep their bits). */
    rc.schedule = TRN_SCHEDULE_LINEAR;
    CHECK(trn_schedule_lr(&rc, 35) == rc.lr - (rc.lr - rc.lr_min) * (25.0 / 100.0));
    CHECK(trn_schedule_lr(&rc, 60) == rc.lr - (rc.lr - rc.lr_min) * 0.5);
    CHECK(trn_schedule_lr(&rc, 110) == rc.lr_min);
    /* No decay: constant after warmup, whatever the kind. */
    rc.schedule = TRN_SCHEDULE_COSINE;
    rc.decay_steps = 0;
    CHECK(trn_schedule_lr(&rc, 11) == rc.lr && trn_schedule_lr(&rc, 1000) == rc.lr);

    trn_schedule_kind k;
    CHECK(trn_schedule_parse(&k, "cosine") == 0 && k == TRN_SCHEDULE_COSINE);
    CHECK(trn_schedule_parse(&k, "linear") == 0 && k == TRN_SCHEDULE_LINEAR);
    CHECK(trn_schedule_parse(&k, "cos") == OVT_EINVAL && strstr(ovt_errmsg(), "linear, cosine") != NULL);
}

/* AdamW's first step moves every parameter whose gradient is far above eps
 * by lr_1 * g / (|g| + eps) (m and v start at 0 and the bias corrections
 * undo the betas), so the largest move is lr_1 to a few FP32 ulps: check it
 * is the cosine's lr_1, not the linear one, in plain FP32 training. */
static void test_fp32_follows_cosine(void)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 1, .width = 8, .in_dim = 4, .n_class = 3};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.lr = 0.01;
    rc.lr_min = 0.001;
    rc.decay_steps = 3; /* step 1: p = 1/3, cosine weight 3/4, linear 2/3 */
    rc.batch_size = 4;
    rc.grad_clip = 0;
    rc.schedule = TRN_SCHEDULE_COSINE;
    trn_state *st = NULL, *before = NULL;
    demo_fp32 *w = NULL;
    CHECK(trn_state_new(&st, &rc) == 0 && demo_fp32_new(&w, &rc) == 0);
    if (!st || !w)
        return;
    trn_state_init(st);
    CHECK(trn_state_clone(&before, st) == 0);
    float x[16];
    int32_t labels[4] = {0, 1, 2, 1};
    for (int i = 0; i < 16; i++)
        x[i] = (float)((i * 37 % 11) - 5) / 4;
    trn_batch b = {.B = 4, .T = 0, .x = x, .labels = labels};
    float loss;
    CHECK(demo_fp32_step(w, st, &b, false, &loss) == 0);
    double most = 0;
    for (size_t i = 0; i < st->layout.nparams; i++)
        most = fmax(most, fabs((double)st->params[i] - (double)before->params[i]));
    double cosine = 0.001 + 0.009 * 0.75, linear = 0.01 - 0.009 / 3;
    CHECK_MSG(fabs(most - cosine) < 1e-4 * cosine, "largest move %.9g, cosine lr %.9g, linear lr %.9g", most, cosine,
              linear);
    demo_fp32_free(w);
    trn_state_free(st);
    trn_state_free(before);
}

int main(void)
{
    CHECK_RUN(test_cospi());
    CHECK_RUN(test_schedule());
    CHECK_RUN(test_fp32_follows_cosine());
    return check_done();
}
