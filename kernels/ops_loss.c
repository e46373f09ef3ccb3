/* Softmax cross-entropy with a mean loss (kernels/ops.h). Bands: docs/op-bounds.md. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/trace.h"
#include "kernels/widen.h"

static int check_targets(const char *op, const int32_t *targets, size_t N, size_t V)
{
    for (size_t i = 0; i < N; i++)
        if (targets[i] < 0 || (size_t)targets[i] >= V)
            return ovt_fail(OVT_EINVAL, "%s: target %d of row %zu is outside [0, %zu)", op,
                            (int)targets[i], i, V);
    return 0;
}

/* The row loops of the forward, by ranges of rows on the pool. */
typedef struct {
    const krn_cpu *be;
    const float *logits, *probs, *sums;
    float *mx;
    double *x, *mag;
    size_t V;
    size_t row0; /* xent.exp: the first row of the part x holds */
    atomic_int rc;
} xent_job;

/* Rows row0 + r0 .. row0 + r1 of exp(logit - max(row)), into the part's x. */
static void xent_exp_rows(void *arg, size_t r0, size_t r1)
{
    const xent_job *j = arg;
    size_t V = j->V;
    for (size_t r = r0; r < r1; r++) {
        size_t i = j->row0 + r;
        const float *row = j->logits + i * V;
        float m = row[0];
        for (size_t k = 1; k < V; k++)
            m = row[k] > m ? row[k] : m;
        j->mx[i] = m;
        for (size_t k = 0; k < V; k++)
            j->x[r * V + k] = krn_cpu_libm(j->be, KRN_FN_EXP, (double)row[k] - (double)m);
    }
}

/* Rows' sums of the rounded exponentials (chunked, over each row's FP64
 * copy) and their magnitudes. */
static void xent_sum_rows(void *arg, size_t r0, size_t r1)
{
    xent_job *j = arg;
    size_t V = j->V;
    double *e = malloc(V * sizeof *e);
    if (e == NULL) {
        atomic_store(&j->rc, OVT_ENOMEM);
        return;
    }
    for (size_t i = r0; i < r1; i++) {
        krn_widen(e, j->probs + i * V, V);
        j->x[i] = krn_chunked_dot(j->be, e, 1, NULL, 0, V);
        double m = 0;
        for (size_t k = 0; k < V; k++)
            m += e[k];
        j->mag[i] = m;
    }
    free(e);
}

/* xent.probs' values e / sum of its row, e the rounded exponential that
 * probs still holds (the site reads its own out before writing it). */
static void xent_div_fill(void *arg, size_t i0, size_t len, double *x)
{
    const xent_job *j = arg;
    size_t r = i0 / j->V, c = i0 % j->V;
    for (size_t k = 0; k < len; k++) {
        x[k] = (double)j->probs[i0 + k] / (double)j->sums[r];
        if (++c == j->V) {
            c = 0;
            r++;
        }
    }
}

/* Rows of xent.exp computed and rounded at once: about 1M doubles. */
#define XENT_PART ((size_t)1 << 20)

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("cross-entropy fwd"). */
int krn_crossentropy_forward(krn_ctx *ctx, float *loss, float *losses, float *probs,
                             const float *logits, const int32_t *targets, size_t N, size_t V)
{
    static const char op[] = "crossentropy_forward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "loss", loss)) || (rc = krn_check_ptr(op, "losses", losses)) ||
        (rc = krn_check_ptr(op, "probs", probs)) || (rc = krn_check_ptr(op, "logits", logits)) ||
        (rc = krn_check_ptr(op, "targets", targets)) || (rc = krn_check_dims(op, N, V, &n)) ||
        (rc = check_targets(op, targets, N, V)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {logits, n});
    KRN_TRACE_READS(ctx, 1, {probs, n});
    KRN_TRACE_READS(ctx, 2, {probs, n}); /* and xent.sum's sums, xent.logsum's (below) */
    KRN_TRACE_READS(ctx, 4, {logits, n}, {targets, N});
    KRN_TRACE_READS(ctx, 5, {losses, N});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_crossentropy_forward(ctx, loss, losses, probs, logits, targets, N, V));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    /* x holds a part of xent.exp's rows (all N*V would be 103 MB for GPT-2
     * small), later the per-row sites: per-thread scratch, kept across calls */
    size_t part_rows = XENT_PART / V ? XENT_PART / V : 1;
    part_rows = part_rows < N ? part_rows : N;
    double *x = krn_scratch(KRN_SCRATCH_A, part_rows * V > N ? part_rows * V : N);
    double *e = krn_doubles(N, op), *mag = krn_doubles(N, op);
    float *mx = krn_floats(N, op), *sums = krn_floats(N, op), *logsum = krn_floats(N, op);
    if (!x || !e || !mag || !mx || !sums || !logsum)
        goto done;
    KRN_TRACE_READS(ctx, 2, {sums, N});
    KRN_TRACE_READS(ctx, 3, {sums, N});
    KRN_TRACE_READS(ctx, 4, {logsum, N});
    /* rows on the pool: a few rows per range, at least one range per row
     * block of about 64K elements */
    size_t rows = ((size_t)1 << 16) / V ? ((size_t)1 << 16) / V : 1;
    xent_job j = {.be = &be, .logits = logits, .probs = probs, .sums = sums, .mx = mx, .x = x,
                  .mag = mag, .V = V};
    atomic_init(&j.rc, 0);
    krn_band band = krn_band_libm();
    krn_site_parts *sp = NULL;
    if ((rc = krn_site_parts_begin(ctx, &sp, "xent.exp", probs, n, &band)))
        goto done;
    for (size_t r0 = 0; r0 < N && rc == 0; r0 += part_rows) {
        size_t nr = N - r0 < part_rows ? N - r0 : part_rows;
        j.row0 = r0;
        if ((rc = krn_parallel_ranges(&be, nr, rows, xent_exp_rows, &j)) == 0)
            rc = krn_site_part(sp, x, nr * V, NULL, NULL);
    }
    int end_rc = krn_site_parts_end(sp);
    if (rc == 0)
        rc = end_rc;
    if (rc || (rc = krn_parallel_ranges(&be, N, rows, xent_sum_rows, &j)))
        goto done;
    if ((rc = atomic_load(&j.rc))) {
        rc = ovt_fail(rc, "%s: out of memory for a row's FP64 copy", op);
        goto done;
    }
    band = krn_band_reduction(KRN_BAND_ARRAY, V, 1.0, 0);
    band.a = mag;
    if ((rc = krn_site(ctx, "xent.sum", sums, x, N, &band)))
        goto done;
    if ((rc = krn_site_exact_fill(ctx, "xent.probs", probs, n, xent_div_fill, &j)))
        goto done;
    for (size_t i = 0; i < N; i++)
        x[i] = krn_cpu_libm(&be, KRN_FN_LOG, (double)sums[i]);
    band = krn_band_libm();
    if ((rc = krn_site(ctx, "xent.logsum", logsum, x, N, &band)))
        goto done;
    for (size_t i = 0; i < N; i++)
        x[i] = (double)logsum[i] - ((double)logits[i * V + (size_t)targets[i]] - (double)mx[i]);
    band = krn_band_exact();
    if ((rc = krn_site(ctx, "xent.losses", losses, x, N, &band)))
        goto done;
    krn_widen(e, losses, N);
    double m = 0;
    for (size_t i = 0; i < N; i++)
        m += fabs(e[i]);
    x[0] = krn_chunked_dot(&be, e, 1, NULL, 0, N) / (double)N;
    band = krn_band_reduction(KRN_BAND_CONST, N, 1.0 / (double)N, 1);
    band.scale *= m;
    rc = krn_site(ctx, "xent.loss", loss, x, 1, &band);
done:
    free(e);
    free(mag);
    free(mx);
    free(sums);
    free(logsum);
    return rc;
}

/* xent.bwd's values, (probs - onehot(target)) * g + the old dlogits, by
 * blocks of the flattened (N,V) tensor. */
typedef struct {
    const float *dlogits, *probs;
    const int32_t *targets;
    size_t V;
    double g;
} xent_bwd_job;

static void xent_bwd_fill(void *arg, size_t i0, size_t len, double *x)
{
    const xent_bwd_job *j = arg;
    size_t r = i0 / j->V, c = i0 % j->V;
    for (size_t k = 0; k < len; k++) {
        size_t i = i0 + k;
        double ind = (size_t)j->targets[r] == c ? 1.0 : 0.0;
        x[k] = ((double)j->probs[i] - ind) * j->g + (double)j->dlogits[i];
        if (++c == j->V) {
            c = 0;
            r++;
        }
    }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("cross-entropy bwd"). */
int krn_crossentropy_backward_rows(krn_ctx *ctx, float *dlogits, const float *probs, const int32_t *targets,
                                   float dloss, size_t N, size_t rows, size_t V)
{
    static const char op[] = "crossentropy_backward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "dlogits", dlogits)) || (rc = krn_check_ptr(op, "probs", probs)) ||
        (rc = krn_check_ptr(op, "targets", targets)) || (rc = krn_check_dims(op, rows, V, &n)) ||
        (rc = check_targets(op, targets, rows, V)))
        return rc;
    if (!isfinite(dloss) || rows > N || (rows != N && krn_ctx_config(ctx)->backend == KRN_BACKEND_CUDA))
        return ovt_fail(OVT_EINVAL, "%s: dloss is not finite, or %zu rows of %zu (part of the rows: cpu only)", op,
                        rows, N);
    KRN_TRACE_READS(ctx, 0, {probs, n}, {targets, rows}, {dlogits, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_crossentropy_backward(ctx, dlogits, probs, targets, dloss, N, V));
    xent_bwd_job j = {.dlogits = dlogits, .probs = probs, .targets = targets, .V = V,
                      .g = (double)dloss / (double)N};
    return krn_site_exact_fill(ctx, "xent.bwd", dlogits, n, xent_bwd_fill, &j);
}

int krn_crossentropy_backward(krn_ctx *ctx, float *dlogits, const float *probs,
                              const int32_t *targets, float dloss, size_t N, size_t V)
{
    return krn_crossentropy_backward_rows(ctx, dlogits, probs, targets, dloss, N, N, V);
}
