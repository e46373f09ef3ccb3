/* matmul, bias add, residual add, gradient accumulation and the token +
 * position embedding (kernels/ops.h). Each site's band: docs/op-bounds.md. */
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/chunked_gemm.h"
#include "kernels/contract.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/sum_sites.h"
#include "kernels/trace.h"
#include "kernels/widen.h"

/* The values of an exact site out[i] = a[i] + b[i % period], computed
 * block by block as the site rounds them (krn_site_exact_fill). */
typedef struct {
    const float *a, *b;
    size_t period;
} add_job;

static void add_fill(void *arg, size_t i0, size_t len, double *x)
{
    const add_job *j = arg;
    size_t c = i0 % j->period;
    for (size_t k = 0; k < len; k++) {
        x[k] = (double)j->a[i0 + k] + (double)j->b[c];
        if (++c == j->period)
            c = 0;
    }
}

/* Exact site out = a + b (n elements); out may alias a or b. */
static int exact_add(krn_ctx *ctx, const char *name, float *out, const float *a, const float *b,
                     size_t n)
{
    add_job j = {.a = a, .b = b, .period = n};
    return krn_site_exact_fill(ctx, name, out, n, add_fill, &j);
}

/* Exact site out (N,C) = inp + bias broadcast over rows; out may alias inp. */
static int bias_site(krn_ctx *ctx, const char *name, float *out, const float *inp,
                     const float *bias, size_t N, size_t C)
{
    add_job j = {.a = inp, .b = bias, .period = C};
    return krn_site_exact_fill(ctx, name, out, N * C, add_fill, &j);
}

/* Site dsum (C) += column sums of m (N,C), a reduction over N. */
static int column_sum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *dsum,
                           const float *m, size_t N, size_t C)
{
    double *md = krn_doubles(N * C, name);
    if (!md)
        return OVT_ENOMEM;
    int rc = krn_widen_rows(be, md, NULL, m, N, C);
    if (rc == 0)
        rc = krn_colsum_site(ctx, be, name, dsum, md, N, C);
    free(md);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("matmul fwd"). */
int krn_matmul_forward(krn_ctx *ctx, float *out, const float *inp, const float *weight,
                       const float *bias, size_t N, size_t C, size_t OC)
{
    static const char op[] = "matmul_forward";
    size_t nin, nw, nout;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "weight", weight)) || (rc = krn_check_dims(op, N, C, &nin)) ||
        (rc = krn_check_dims(op, OC, C, &nw)) || (rc = krn_check_dims(op, N, OC, &nout)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, nin}, {weight, nw});
    KRN_TRACE_READS(ctx, 1, {bias ? out : NULL, nout}, {bias, OC});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_matmul_forward(ctx, out, inp, weight, bias, N, C, OC));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    /* the weight is widened tile by tile inside the product (it is the
     * 50257 x 768 wte for GPT-2's head), which takes its row norms from
     * FP32 as it reads it */
    double *a = krn_scratch(KRN_SCRATCH_A, nin), *x = krn_scratch(KRN_SCRATCH_OUT, nout);
    double *rn = krn_doubles(N, op), *cn = krn_doubles(OC, op);
    if (!a || !x || !rn || !cn)
        goto done;
    krn_gemm_in in = {.a = a, .lda = C, .tb = true, .bf = weight, .ldb = C, .bnorms = cn};
    if ((rc = krn_widen_rows(&be, a, rn, inp, N, C)) || (rc = krn_chunked_gemm_in(&be, x, &in, N, OC, C)))
        goto done;
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, C, 1.0, 0);
    band.a = rn;
    band.b = cn;
    band.cols = OC;
    if ((rc = krn_site(ctx, "matmul.fwd", out, x, nout, &band)))
        goto done;
    if (bias)
        rc = bias_site(ctx, "matmul.fwd.bias", out, out, bias, N, OC);
done:
    free(rn);
    free(cn);
    return rc;
}

/* The most FP64 values of dweight computed at once (then rounded, then
 * the next rows): 4M doubles, 32 MB. */
#define DWEIGHT_PART ((size_t)1 << 22)

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("matmul bwd"). */
int krn_matmul_backward(krn_ctx *ctx, float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, size_t N, size_t C, size_t OC)
{
    static const char op[] = "matmul_backward";
    size_t nin, nw, nout;
    int rc;
    if ((rc = krn_check_ptr(op, "dweight", dweight)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "weight", weight)) ||
        (rc = krn_check_dims(op, N, C, &nin)) || (rc = krn_check_dims(op, OC, C, &nw)) ||
        (rc = krn_check_dims(op, N, OC, &nout)))
        return rc;
    unsigned k = 0;
    if (dinp)
        KRN_TRACE_READS(ctx, k++, {dout, nout}, {weight, nw}, {dinp, nin});
    KRN_TRACE_READS(ctx, k++, {dout, nout}, {inp, nin}, {dweight, nw});
    KRN_TRACE_READS(ctx, k, {dbias ? dout : NULL, nout}, {dbias, OC});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, N, C, OC));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    /* the weight is widened tile by tile inside the dinp product; the old
     * gradients are added inside the products' tiles; dweight is computed
     * and rounded in parts of whole tile rows (GPT-2's head: 50257 x 768,
     * 309 MB in FP64 at once) */
    size_t part_rows = OC;
    if (nw > DWEIGHT_PART) {
        part_rows = DWEIGHT_PART / C / KRN_TILE_M * KRN_TILE_M;
        part_rows = part_rows ? part_rows : KRN_TILE_M;
    }
    size_t npart = (part_rows < OC ? part_rows : OC) * C;
    size_t nx = nin > npart ? nin : npart;
    double *g = krn_scratch(KRN_SCRATCH_A, nout), *a = krn_scratch(KRN_SCRATCH_B, nin);
    double *x = krn_scratch(KRN_SCRATCH_OUT, nx);
    double *gn = krn_doubles(N > OC ? N : OC, op);
    double *cn = krn_doubles(C, op);
    if (!g || !a || !x || !gn || !cn)
        goto done;
    if ((rc = krn_widen_rows(&be, g, gn, dout, N, OC)) || (rc = krn_widen_rows(&be, a, NULL, inp, N, C)))
        goto done;
    if (dinp) {
        /* dinp (N,C) += dout (N,OC) @ weight (OC,C): K = OC. */
        krn_gemm_in in = {.a = g, .lda = OC, .bf = weight, .ldb = C, .old = dinp, .bnorms = cn};
        if ((rc = krn_chunked_gemm_in(&be, x, &in, N, C, OC)))
            goto done;
        krn_band band = krn_band_reduction(KRN_BAND_OUTER, OC, 1.0, 1);
        band.a = gn;
        band.b = cn;
        band.cols = C;
        if ((rc = krn_site(ctx, "matmul.bwd.dinp", dinp, x, nin, &band)))
            goto done;
    }
    /* dweight (OC,C) += dout^T (OC,N) @ inp (N,C): K = N, by parts of rows
     * r0 .. r0+rows of dweight (rows r0.. of dout^T are columns r0.. of dout) */
    if ((rc = krn_col_norms(&be, gn, dout, N, OC)) || (rc = krn_col_norms(&be, cn, inp, N, C)))
        goto done;
    krn_band band = krn_band_reduction(KRN_BAND_OUTER, N, 1.0, 1);
    band.cols = C;
    krn_site_parts *sp = NULL;
    if ((rc = krn_site_parts_begin(ctx, &sp, "matmul.bwd.dweight", dweight, nw, &band)))
        goto done;
    for (size_t r0 = 0; r0 < OC && rc == 0; r0 += part_rows) {
        size_t rows = OC - r0 < part_rows ? OC - r0 : part_rows;
        krn_gemm_in in = {.ta = true, .a = g + r0, .lda = OC, .b = a, .ldb = C, .old = dweight + r0 * C};
        if ((rc = krn_chunked_gemm_in(&be, x, &in, rows, C, N)) == 0)
            rc = krn_site_part(sp, x, rows * C, gn + r0, cn);
    }
    int end_rc = krn_site_parts_end(sp);
    if (rc == 0)
        rc = end_rc;
    if (rc)
        goto done;
    if (dbias)
        rc = krn_colsum_site(ctx, &be, "matmul.bwd.dbias", dbias, g, N, OC); /* g: dout in FP64 */
done:
    free(gn);
    free(cn);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("bias"). */
int krn_bias_forward(krn_ctx *ctx, float *out, const float *inp, const float *bias, size_t N,
                     size_t C)
{
    static const char op[] = "bias_forward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = krn_check_ptr(op, "bias", bias)) || (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp, n}, {bias, C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_bias_forward(ctx, out, inp, bias, N, C));
    return bias_site(ctx, "bias.fwd", out, inp, bias, N, C);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("bias"). */
int krn_bias_backward(krn_ctx *ctx, float *dbias, const float *dout, size_t N, size_t C)
{
    static const char op[] = "bias_backward";
    size_t n;
    int rc;
    if ((rc = krn_check_ptr(op, "dbias", dbias)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_dims(op, N, C, &n)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, n}, {dbias, C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_bias_backward(ctx, dbias, dout, N, C));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    return column_sum_site(ctx, &be, "bias.bwd", dbias, dout, N, C);
}

/* encoder.bwd.dwte's band: an array whose element holds gamma(count of its
 * token) * sum |dout| (the count differs per token), one add after. */
static krn_band dwte_band(void)
{
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, 1, 1.0, 1);
    band.scale = KRN_BAND_WIDTH * 2.0;
    return band;
}

/* The band is the ops' own (krn_colsum_site's, krn_matmul_backward's
 * dweight band as an array: the outer product's element per element;
 * krn_grad_norm's for its one sum of squares). */
int krn_batch_sum_round(krn_ctx *ctx, const char *name, float *out, const double *x, const double *mag,
                        size_t n, size_t K)
{
    if (strcmp(name, "gradnorm.sumsq") == 0 && n == 1) { /* krn_grad_norm's: nothing added after the sum */
        krn_band band = krn_band_reduction(KRN_BAND_CONST, K, 1.0, 0);
        band.scale *= mag[0];
        return krn_site(ctx, name, out, x, n, &band);
    }
    if (strcmp(name, "encoder.bwd.dwte") == 0) { /* krn_encoder_backward's: mag holds gamma(count) */
        krn_band band = dwte_band();
        band.a = mag;
        return krn_site(ctx, name, out, x, n, &band);
    }
    /* krn_conv2d_backward's: an outer band over N*P, one add after; the
     * norms' column sums are krn_colsum_site's, the band of bias.bwd, and
     * so is encoder.bwd.dwpe's (a sum over B per position, + old) */
    if (strcmp(name, "matmul.bwd.dweight") && strcmp(name, "matmul.bwd.dbias") && strcmp(name, "bias.bwd") &&
        strcmp(name, "conv.bwd.dweight") && strcmp(name, "layernorm.bwd.dbias") &&
        strcmp(name, "layernorm.bwd.dweight") && strcmp(name, "rmsnorm.bwd.dweight") &&
        strcmp(name, "encoder.bwd.dwpe"))
        return ovt_fail(OVT_EINVAL, "krn_batch_sum_round: '%s' is not a sum over the batch it knows", name);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, K, 1.0, 1);
    band.a = mag;
    return krn_site(ctx, name, out, x, n, &band);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("residual, accumulate"). */
int krn_residual_forward(krn_ctx *ctx, float *out, const float *inp1, const float *inp2, size_t n)
{
    static const char op[] = "residual_forward";
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "inp1", inp1)) ||
        (rc = krn_check_ptr(op, "inp2", inp2)) || (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {inp1, n}, {inp2, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_residual_forward(ctx, out, inp1, inp2, n));
    return exact_add(ctx, "residual.fwd", out, inp1, inp2, n);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("residual, accumulate"). */
int krn_residual_backward(krn_ctx *ctx, float *dinp1, float *dinp2, const float *dout, size_t n)
{
    static const char op[] = "residual_backward";
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp1", dinp1)) || (rc = krn_check_ptr(op, "dinp2", dinp2)) ||
        (rc = krn_check_ptr(op, "dout", dout)) || (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dinp1, n}, {dout, n});
    KRN_TRACE_READS(ctx, 1, {dinp2, n}, {dout, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_residual_backward(ctx, dinp1, dinp2, dout, n));
    if ((rc = exact_add(ctx, "residual.bwd1", dinp1, dinp1, dout, n)))
        return rc;
    return exact_add(ctx, "residual.bwd2", dinp2, dinp2, dout, n);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("residual, accumulate"). */
int krn_accumulate(krn_ctx *ctx, float *dst, const float *src, size_t n)
{
    static const char op[] = "accumulate";
    size_t nn;
    int rc;
    if ((rc = krn_check_ptr(op, "dst", dst)) || (rc = krn_check_ptr(op, "src", src)) ||
        (rc = krn_check_dims(op, n, 1, &nn)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dst, n}, {src, n});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_accumulate(ctx, dst, src, n));
    return exact_add(ctx, "accumulate", dst, dst, src, n);
}

static int check_tokens(const char *op, const int32_t *tokens, size_t n, size_t V)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (size_t)tokens[i] >= V)
            return ovt_fail(OVT_EINVAL, "%s: token %d at position %zu is outside the vocabulary [0, %zu)",
                            op, (int)tokens[i], i, V);
    return 0;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("encoder fwd"). */
int krn_encoder_forward(krn_ctx *ctx, float *out, const int32_t *tokens, const float *wte,
                        const float *wpe, size_t B, size_t T, size_t C, size_t V)
{
    static const char op[] = "encoder_forward";
    size_t bt, n, nv;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "tokens", tokens)) ||
        (rc = krn_check_ptr(op, "wte", wte)) || (rc = krn_check_dims(op, B, T, &bt)) ||
        (rc = krn_check_dims(op, bt, C, &n)) || (rc = krn_check_dims(op, V, C, &nv)) ||
        (rc = check_tokens(op, tokens, bt, V)))
        return rc;
    /* a gather reads its whole table: which rows is a function of the tokens */
    KRN_TRACE_READS(ctx, 0, {tokens, bt}, {wte, nv}, {wpe, T * C});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_encoder_forward(ctx, out, tokens, wte, wpe, B, T, C, V));
    double *x = krn_doubles(n, op);
    if (!x)
        return OVT_ENOMEM;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const float *te = wte + (size_t)tokens[b * T + t] * C, *pe = wpe ? wpe + t * C : NULL;
            double *xo = x + (b * T + t) * C;
            for (size_t c = 0; c < C; c++)
                xo[c] = pe ? (double)te[c] + (double)pe[c] : (double)te[c];
        }
    krn_band band = krn_band_exact();
    rc = krn_site(ctx, "encoder.fwd", out, x, n, &band);
    free(x);
    return rc;
}

/* The batch's distinct tokens per range of encoder.bwd.dwte's loop on the
 * pool. */
#define DWTE_ROWS 8

/* encoder.bwd.dwte's values and band magnitudes for the rows of the batch's
 * distinct tokens, one compact row each. */
typedef struct {
    const krn_cpu *be;
    const double *g;       /* dout in FP64 */
    const float *dwte;
    const size_t *start, *pos; /* each token's occurrences, in b*T+t order */
    const size_t *uniq;        /* the distinct tokens, increasing */
    double *x, *mag, *gather;  /* rows of uniq; gather: BT doubles per range */
    size_t C, bt;
} dwte_job;

/* For each token its occurrences' dout rows, chunk-summed; the band's scale
 * is folded into mag because K differs per token. */
static void dwte_rows(void *arg, size_t r0, size_t r1)
{
    const dwte_job *j = arg;
    size_t C = j->C;
    double *gather = j->gather + r0 / DWTE_ROWS * j->bt;
    for (size_t r = r0; r < r1; r++) {
        size_t v = j->uniq[r];
        size_t cnt = j->start[v + 1] - j->start[v];
        double gam = krn_chunked_gamma(cnt);
        for (size_t c = 0; c < C; c++) {
            double m = 0;
            for (size_t k = 0; k < cnt; k++) {
                gather[k] = j->g[j->pos[j->start[v] + k] * C + c];
                m += gather[k] < 0 ? -gather[k] : gather[k];
            }
            double s = krn_chunked_dot(j->be, gather, 1, NULL, 0, cnt);
            j->x[r * C + c] = s + (double)j->dwte[v * C + c];
            j->mag[r * C + c] = gam * m;
        }
    }
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("encoder bwd"). */
int krn_encoder_backward(krn_ctx *ctx, float *dwte, float *dwpe, const float *dout,
                         const int32_t *tokens, size_t B, size_t T, size_t C, size_t V)
{
    static const char op[] = "encoder_backward";
    size_t bt, n, nv, nt;
    int rc;
    if ((rc = krn_check_ptr(op, "dwte", dwte)) || (rc = krn_check_ptr(op, "dout", dout)) || (rc = krn_check_ptr(op, "tokens", tokens)) ||
        (rc = krn_check_dims(op, B, T, &bt)) || (rc = krn_check_dims(op, bt, C, &n)) ||
        (rc = krn_check_dims(op, V, C, &nv)) || (rc = krn_check_dims(op, T, C, &nt)) ||
        (rc = check_tokens(op, tokens, bt, V)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, n}, {tokens, bt}, {dwte, nv});
    KRN_TRACE_READS(ctx, 1, {dwpe ? dout : NULL, n}, {dwpe, nt});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_encoder_backward(ctx, dwte, dwpe, dout, tokens, B, T, C, V));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    rc = OVT_ENOMEM;
    /* x and mag: the distinct tokens' rows (at most bt), and dwpe's nt */
    size_t nx = bt * C > nt ? bt * C : nt;
    double *g = krn_doubles(n, op), *x = krn_scratch(KRN_SCRATCH_A, nx);
    size_t ranges = (bt + DWTE_ROWS - 1) / DWTE_ROWS;
    double *mag = krn_scratch(KRN_SCRATCH_B, nx), *gather = krn_doubles(ranges * bt, op);
    size_t *start = calloc(V + 1, sizeof *start), *pos = calloc(bt, sizeof *pos);
    size_t *uniq = calloc(bt, sizeof *uniq);
    if (!g || !x || !mag || !gather || !start || !pos || !uniq) {
        ovt_fail(OVT_ENOMEM, "%s: out of memory", op);
        goto done;
    }
    krn_widen(g, dout, n);
    /* Positions of each token in increasing b*T+t order (a stable counting sort). */
    for (size_t i = 0; i < bt; i++)
        start[tokens[i] + 1]++;
    for (size_t v = 0; v < V; v++)
        start[v + 1] += start[v];
    for (size_t i = 0; i < bt; i++) {
        size_t v = (size_t)tokens[i];
        pos[start[v]++] = i;
    }
    for (size_t v = V; v > 0; v--)
        start[v] = start[v - 1];
    start[0] = 0;
    size_t nu = 0;
    for (size_t v = 0; v < V; v++)
        if (start[v + 1] > start[v])
            uniq[nu++] = v;
    dwte_job j = {.be = &be, .g = g, .dwte = dwte, .start = start, .pos = pos, .uniq = uniq,
                  .x = x, .mag = mag, .gather = gather, .C = C, .bt = bt};
    if ((rc = krn_parallel_ranges(&be, nu, DWTE_ROWS, dwte_rows, &j)))
        goto done;
    /* The site over all V rows: a row no token of the batch names has the
     * value dwte already holds and a zero band, and is kept as it is
     * (krn_site_part_keep); runs of the batch's tokens are handed over from
     * their compact rows. */
    krn_band band = dwte_band();
    krn_site_parts *sp = NULL;
    if ((rc = krn_site_parts_begin(ctx, &sp, "encoder.bwd.dwte", dwte, nv, &band)))
        goto done;
    size_t v = 0;
    for (size_t u = 0; u < nu && rc == 0;) {
        size_t run = 1;
        while (u + run < nu && uniq[u + run] == uniq[u] + run)
            run++;
        if (uniq[u] > v)
            rc = krn_site_part_keep(sp, (uniq[u] - v) * C);
        if (rc == 0)
            rc = krn_site_part(sp, x + u * C, run * C, mag + u * C, NULL);
        v = uniq[u] + run;
        u += run;
    }
    if (rc == 0 && v < V)
        rc = krn_site_part_keep(sp, (V - v) * C);
    int end_rc = krn_site_parts_end(sp);
    if (rc == 0)
        rc = end_rc;
    if (rc || !dwpe)
        goto done;
    /* dwpe: for each position t the sum over b (stride T*C). */
    for (size_t i = 0; i < nt; i++) {
        x[i] = krn_chunked_dot(&be, g + i, (ptrdiff_t)nt, NULL, 0, B) + (double)dwpe[i];
        double m = 0;
        for (size_t b = 0; b < B; b++)
            m += g[b * nt + i] < 0 ? -g[b * nt + i] : g[b * nt + i];
        mag[i] = m;
    }
    band = krn_band_reduction(KRN_BAND_ARRAY, B, 1.0, 1);
    band.a = mag;
    rc = krn_site(ctx, "encoder.bwd.dwpe", dwpe, x, nt, &band);
done:
    free(g);
    free(gather);
    free(start);
    free(pos);
    free(uniq);
    return rc;
}
