/* Causal multi-head self-attention from a fused qkv (kernels/ops.h), llm.c's
 * layout, and grouped-query attention from separate q, k, v (Llama), one
 * implementation. Bands: docs/op-bounds.md. Entries above the diagonal
 * (t2 > t) are 0 in every (T,T) tensor and are exact. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/alloc.h"
#include "kernels/argcheck.h"
#include "kernels/chunked_gemm.h"
#include "kernels/cuda/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "kernels/reduce.h"
#include "kernels/scratch.h"
#include "kernels/widen.h"

/* The shapes and derived strides of one call. Query heads NH of size hs
 * (C = NH*hs channels); key/value heads NKV, each shared by G = NH/NKV
 * query heads (GPT-2: NKV = NH, G = 1). */
typedef struct {
    size_t B, T, C, NH, NKV, G, hs;
    size_t KVW;   /* NKV*hs: the width of k and v */
    size_t n_tt;  /* B*NH*T*T */
    size_t n_row; /* B*NH*T */
    size_t n_out; /* B*T*C */
    size_t n_kv;  /* B*T*KVW */
    size_t n_inp; /* B*T*3C (the fused qkv of krn_attention_*) */
    double scale; /* 1/sqrt(hs) */
} attn_dims;

static int dims_fill(const char *op, size_t B, size_t T, size_t NH, size_t NKV, size_t hs, attn_dims *d)
{
    size_t bt, C, x;
    int rc;
    if ((rc = krn_check_dims(op, B, T, &bt)) || (rc = krn_check_dims(op, NH, hs, &C)) ||
        (rc = krn_check_dims(op, bt, 3 * C, &d->n_inp)) || (rc = krn_check_dims(op, bt * NH, T, &d->n_tt)) ||
        (rc = krn_check_dims(op, NKV, hs, &x)))
        return rc;
    if (NH % NKV != 0)
        return ovt_fail(OVT_EINVAL, "%s: NKV = %zu key/value heads do not divide NH = %zu", op, NKV, NH);
    d->B = B;
    d->T = T;
    d->C = C;
    d->NH = NH;
    d->NKV = NKV;
    d->G = NH / NKV;
    d->hs = hs;
    d->KVW = NKV * hs;
    d->n_row = bt * NH;
    d->n_out = bt * C;
    d->n_kv = bt * d->KVW;
    d->scale = 1.0 / sqrt((double)hs);
    return 0;
}

static int attn_check(const char *op, size_t B, size_t T, size_t C, size_t NH, attn_dims *d)
{
    size_t x;
    int rc;
    if ((rc = krn_check_dims(op, C, NH, &x)))
        return rc;
    if (C % NH != 0)
        return ovt_fail(OVT_EINVAL, "%s: C = %zu is not a multiple of NH = %zu", op, C, NH);
    return dims_fill(op, B, T, NH, NH, C / NH, d);
}

/* Index of (b, h, t, t2) in a (B,NH,T,T) tensor, and of row (b, h, t). */
static size_t tt_index(const attn_dims *d, size_t b, size_t h, size_t t, size_t t2)
{
    return ((b * d->NH + h) * d->T + t) * d->T + t2;
}

/* Per (b, t, h): the Euclidean norm of head h's slice of a tensor of
 * (B,T) rows with row stride `stride` and `nheads` heads, h*hs.. in each row. */
static void head_norms(double *norms, const attn_dims *d, const double *m, size_t stride, size_t nheads)
{
    for (size_t bt = 0; bt < d->B * d->T; bt++)
        for (size_t h = 0; h < nheads; h++) {
            const double *p = m + bt * stride + h * d->hs;
            double s = 0;
            for (size_t i = 0; i < d->hs; i++)
                s += p[i] * p[i];
            norms[bt * nheads + h] = sqrt(s);
        }
}

/* The heads of one call, on the pool: head bh computes its own products
 * and writes only its own elements of x and mag, so the values are those
 * of a loop over the heads in order. The products inside run on one
 * thread (one (T,T) product per head; the pool is busy with the heads, and
 * a loop on it from inside one of its loops would run on one thread anyway,
 * pool.h). */
typedef struct {
    krn_cpu be1; /* be with one thread and no pool */
    const attn_dims *d;
    const double *a, *an, *b, *bn; /* mix_site: a the (T,T) weights, b the values */
    size_t sa, sb;
    size_t bdiv; /* pair_dot: b's head is the query head / bdiv */
    double factor;
    const float *old;
    size_t old_stride;
    bool by_row;
    double *x, *mag, *norms; /* norms: (G*)T + hs per head (mix_site) */
    atomic_int rc;
} heads_job;

static void pair_dot_head(void *arg, size_t bh)
{
    heads_job *j = arg;
    const attn_dims *d = j->d;
    size_t T = d->T, bb = bh / d->NH, h = bh % d->NH, hb = h / j->bdiv, nhb = d->NH / j->bdiv;
    double *prod = krn_scratch(KRN_SCRATCH_OUT, T * T);
    const double *ah = j->a + bb * T * j->sa + h * d->hs, *bhp = j->b + bb * T * j->sb + hb * d->hs;
    if (!prod || krn_chunked_gemm(&j->be1, prod, false, ah, j->sa, true, bhp, j->sb, T, T, d->hs)) {
        atomic_store(&j->rc, OVT_ENOMEM);
        return;
    }
    for (size_t t = 0; t < T; t++)
        for (size_t t2 = 0; t2 < T; t2++) {
            size_t i = tt_index(d, bb, h, t, t2);
            if (t2 > t) {
                j->x[i] = j->mag[i] = 0;
                continue;
            }
            double v = prod[t * T + t2];
            j->x[i] = j->factor == 1.0 ? v : v * j->factor;
            j->mag[i] = j->an[(bb * T + t) * d->NH + h] * j->bn[(bb * T + t2) * nhb + hb];
        }
}

/* Runs fn over `heads` heads; OVT_ENOMEM if a head's product found no
 * memory. */
static int run_heads(const krn_cpu *be, heads_job *j, size_t heads, void (*fn)(void *arg, size_t bh))
{
    j->be1 = *be;
    j->be1.threads = 1;
    j->be1.pool = NULL;
    atomic_init(&j->rc, 0);
    int rc = krn_parallel(be, heads, fn, j);
    if (rc == 0 && atomic_load(&j->rc))
        rc = ovt_fail(OVT_ENOMEM, "attention: out of memory for a head's product");
    return rc;
}

/* Site `name` (B,NH,T,T): x = (a_t . b_t2) * factor over the head's
 * channels, for t2 <= t; one chunked product per (b, h) (K = hs). a is a
 * slice of a tensor with row stride sa and NH heads, b of one with row
 * stride sb and NH/bdiv heads (query head h reads b's head h/bdiv); an and
 * bn their head norms. */
static int pair_dot_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                         const attn_dims *d, const double *a, size_t sa, const double *an,
                         const double *b, size_t sb, const double *bn, size_t bdiv, double factor,
                         int ops, double *x, double *mag)
{
    heads_job j = {.d = d, .a = a, .an = an, .b = b, .bn = bn, .sa = sa, .sb = sb, .bdiv = bdiv,
                   .factor = factor, .x = x, .mag = mag};
    int rc = run_heads(be, &j, d->B * d->NH, pair_dot_head);
    if (rc)
        return rc;
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->hs, factor, ops);
    band.a = mag;
    return krn_site(ctx, name, out, x, d->n_tt, &band);
}

/* Site `name` (B,NH,T): per row t, sum_{t2<=t} w[t][t2] * y[t][t2] (y NULL:
 * plain sum of w), a reduction over t2. */
static int row_sum_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                        const attn_dims *d, const double *w, const double *y, double *x,
                        double *mag)
{
    for (size_t r = 0; r < d->n_row; r++) {
        size_t t = r % d->T, len = t + 1;
        const double *wr = w + r * d->T, *yr = y ? y + r * d->T : NULL;
        x[r] = krn_chunked_dot(be, wr, 1, yr, 1, len);
        double m = 0;
        for (size_t t2 = 0; t2 < len; t2++)
            m += fabs(yr ? wr[t2] * yr[t2] : wr[t2]);
        mag[r] = m;
    }
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, d->T, 1.0, 0);
    band.a = mag;
    return krn_site(ctx, name, out, x, d->n_row, &band);
}

/* Norms of the rows (by_rows) or columns of a rows x cols block with row
 * stride ld. */
static void block_norms(double *norms, const double *m, size_t rows, size_t cols, size_t ld,
                        bool by_rows)
{
    size_t n = by_rows ? rows : cols;
    for (size_t k = 0; k < n; k++)
        norms[k] = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double v = m[r * ld + c];
            norms[by_rows ? r : c] += v * v;
        }
    for (size_t k = 0; k < n; k++)
        norms[k] = sqrt(norms[k]);
}

/* Site `name`: for each (b, output head) the product of (T,T) blocks of w
 * (or their transposes, !by_row) with the (T,hs) slices of val (row stride
 * sv), times factor, plus old (if not NULL, row stride old_stride):
 *   by_row:   out_t  = sum_t2 w[t][t2] * val[t2]   (w zero above the diagonal)
 *             for each query head h, val's head h/G (B,T,C out);
 *   !by_row:  out_t2 = sum_g sum_t w_h[t][t2] * val_h[t], h = o*G + g
 *             for each key/value head o, val with NH heads (B,T,NKV*hs out).
 * Each a chunked sum over all (G*)T terms (masked terms are exact zeros;
 * the G heads' terms stacked in (g, t) order), so the band uses K = T or
 * G*T and the Cauchy-Schwarz bound: the norm of the weights' row (stacked
 * column) times the norm of val's (stacked) column. The result goes to out
 * (contiguous). */
static void mix_head(void *arg, size_t bo)
{
    heads_job *j = arg;
    const attn_dims *d = j->d;
    size_t T = d->T, hs = d->hs, G = j->by_row ? 1 : d->G, nout = j->by_row ? d->NH : d->NKV;
    size_t b = bo / nout, o = bo % nout, outw = nout * hs, K = G * T;
    double *prod = krn_scratch(KRN_SCRATCH_OUT, T * hs);
    double *wn = j->norms + bo * (K + hs), *vn = wn + K;
    const double *wh, *vh;
    size_t ldv = j->sb;
    if (j->by_row) {
        wh = j->a + tt_index(d, b, o, 0, 0);
        vh = j->b + b * T * j->sb + (o / d->G) * hs;
    } else {
        wh = j->a + tt_index(d, b, o * G, 0, 0); /* the G heads' (T,T) blocks, contiguous */
        vh = j->b + b * T * j->sb + o * G * hs;
        if (G > 1) { /* the G heads' slices of val, stacked */
            double *gather = krn_scratch(KRN_SCRATCH_GATHER, K * hs);
            if (!gather) {
                atomic_store(&j->rc, OVT_ENOMEM);
                return;
            }
            for (size_t g = 0; g < G; g++)
                for (size_t t = 0; t < T; t++)
                    memcpy(gather + (g * T + t) * hs, vh + t * j->sb + g * hs, hs * sizeof(double));
            vh = gather;
            ldv = hs;
        }
    }
    if (!prod || krn_chunked_gemm(&j->be1, prod, !j->by_row, wh, T, false, vh, ldv, T, hs, K)) {
        atomic_store(&j->rc, OVT_ENOMEM);
        return;
    }
    block_norms(wn, wh, j->by_row ? T : K, T, T, j->by_row);
    block_norms(vn, vh, K, hs, ldv, false);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < hs; i++) {
            size_t r = b * T + t, ox = r * outw + o * hs + i;
            double v = prod[t * hs + i];
            if (j->factor != 1.0)
                v = v * j->factor;
            if (j->old)
                v = v + (double)j->old[r * j->old_stride + o * hs + i];
            j->x[ox] = v;
            j->mag[ox] = wn[t] * vn[i];
        }
}

static int mix_site(krn_ctx *ctx, const krn_cpu *be, const char *name, float *out,
                    const attn_dims *d, const double *w, bool by_row, const double *val, size_t sv,
                    double factor, const float *old, size_t old_stride, double *x, double *mag)
{
    size_t nout = by_row ? d->NH : d->NKV, K = by_row ? d->T : d->G * d->T;
    double *norms = krn_doubles(d->B * nout * (K + d->hs), name);
    if (!norms)
        return OVT_ENOMEM;
    heads_job j = {.d = d, .a = w, .b = val, .sb = sv, .factor = factor, .old = old,
                   .old_stride = old_stride, .by_row = by_row, .x = x, .mag = mag, .norms = norms};
    int rc = run_heads(be, &j, d->B * nout, mix_head);
    free(norms);
    if (rc)
        return rc;
    int ops = (factor != 1.0) + (old != NULL);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, K, factor, ops);
    band.a = mag;
    return krn_site(ctx, name, out, x, by_row ? d->n_out : d->n_kv, &band);
}

/* e = exp(preatt - rowmax) for t2 <= t, 0 above the diagonal (the max and
 * the difference are exact), rows [r0, r1). */
typedef struct {
    const krn_cpu *be;
    const attn_dims *d;
    const float *preatt;
    double *x;
} exp_job;

static void exp_rows(void *arg, size_t r0, size_t r1)
{
    const exp_job *j = arg;
    size_t T = j->d->T;
    for (size_t r = r0; r < r1; r++) {
        size_t t = r % T;
        const float *pr = j->preatt + r * T;
        float mx = pr[0];
        for (size_t t2 = 1; t2 <= t; t2++)
            mx = pr[t2] > mx ? pr[t2] : mx;
        for (size_t t2 = 0; t2 < T; t2++)
            j->x[r * T + t2] = t2 <= t ? krn_cpu_libm(j->be, KRN_FN_EXP, (double)pr[t2] - (double)mx) : 0.0;
    }
}

/* The forward's scratch: x and mag (n_tt or n_out, whichever is larger),
 * the widened att w, the row sums. */
typedef struct {
    double *x, *mag, *w;
    float *sums;
} fwd_bufs;

/* "attn.exp", "attn.sum", "attn.softmax" from preatt into att, and att
 * widened into b->w for the output's mix. */
static int softmax_sites(krn_ctx *ctx, const krn_cpu *be, const attn_dims *d, const float *preatt,
                         float *att, const fwd_bufs *b)
{
    exp_job ej = {.be = be, .d = d, .preatt = preatt, .x = b->x};
    int rc = krn_parallel_ranges(be, d->n_row, 64, exp_rows, &ej);
    if (rc)
        return rc;
    krn_band band = krn_band_libm();
    if ((rc = krn_site(ctx, "attn.exp", att, b->x, d->n_tt, &band)))
        return rc;
    krn_widen(b->w, att, d->n_tt);
    if ((rc = row_sum_site(ctx, be, "attn.sum", b->sums, d, b->w, NULL, b->x, b->mag)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {b->sums, d->n_row});
    size_t T = d->T;
    for (size_t r = 0; r < d->n_row; r++)
        for (size_t t2 = 0; t2 < T; t2++)
            b->x[r * T + t2] = b->w[r * T + t2] / (double)b->sums[r]; /* 0 above the diagonal */
    band = krn_band_exact();
    if ((rc = krn_site(ctx, "attn.softmax", att, b->x, d->n_tt, &band)))
        return rc;
    krn_widen(b->w, att, d->n_tt);
    return 0;
}

/* The whole forward from widened q, k, v (row strides sq, sk, sv; k and v
 * with NKV heads). */
static int forward_sites(krn_ctx *ctx, const krn_cpu *be, const attn_dims *d, float *out, float *preatt,
                         float *att, const double *q, size_t sq, const double *k, size_t sk, const double *v,
                         size_t sv)
{
    static const char op[] = "attention_forward";
    size_t nx = d->n_tt > d->n_out ? d->n_tt : d->n_out;
    /* the (B,NH,T,T) temporaries are per-thread scratch, kept across calls */
    fwd_bufs b = {.x = krn_scratch(KRN_SCRATCH_B, nx), .mag = krn_scratch(KRN_SCRATCH_C, nx),
                  .w = krn_scratch(KRN_SCRATCH_D, d->n_tt), .sums = krn_floats(d->n_row, op)};
    double *qn = krn_doubles(d->n_row, op), *kn = krn_doubles(d->B * d->T * d->NKV, op);
    int rc = OVT_ENOMEM;
    if (!b.x || !b.mag || !b.w || !b.sums || !qn || !kn)
        goto done;
    head_norms(qn, d, q, sq, d->NH);
    head_norms(kn, d, k, sk, d->NKV);
    if ((rc = pair_dot_site(ctx, be, "attn.qk", preatt, d, q, sq, qn, k, sk, kn, d->G, d->scale, 1, b.x,
                            b.mag)) ||
        (rc = softmax_sites(ctx, be, d, preatt, att, &b)))
        goto done;
    rc = mix_site(ctx, be, "attn.out", out, d, b.w, true, v, sv, 1.0, NULL, 0, b.x, b.mag);
done:
    free(qn);
    free(kn);
    free(b.sums);
    return rc;
}

/* The forward's reads after attn.qk (kernels/trace.h): attn.exp reads
 * preatt, attn.sum and attn.softmax att (and the sums, softmax_sites),
 * attn.out att (and v, by the caller). */
static void fwd_trace_reads(krn_ctx *ctx, const attn_dims *d, const float *preatt, const float *att)
{
    KRN_TRACE_READS(ctx, 1, {preatt, d->n_tt});
    KRN_TRACE_READS(ctx, 2, {att, d->n_tt});
    KRN_TRACE_READS(ctx, 3, {att, d->n_tt});
    KRN_TRACE_READS(ctx, 4, {att, d->n_tt});
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention fwd"). */
int krn_attention_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *inp,
                          size_t B, size_t T, size_t C, size_t NH)
{
    static const char op[] = "attention_forward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "preatt", preatt)) ||
        (rc = krn_check_ptr(op, "att", att)) || (rc = krn_check_ptr(op, "inp", inp)) ||
        (rc = attn_check(op, B, T, C, NH, &d)))
        return rc;
    size_t BT = B * T;
    krn_trace_read_rows(ctx, 0, inp, C, 3 * C, BT);     /* q */
    krn_trace_read_rows(ctx, 0, inp + C, C, 3 * C, BT); /* k */
    fwd_trace_reads(ctx, &d, preatt, att);
    krn_trace_read_rows(ctx, 4, inp + 2 * C, C, 3 * C, BT); /* v */
    KRN_CUDA_DISPATCH(ctx, krn_cuda_attention_forward(ctx, out, preatt, att, inp, B, T, C, NH));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    double *qkv = krn_scratch(KRN_SCRATCH_A, d.n_inp);
    if (!qkv)
        return OVT_ENOMEM;
    krn_widen(qkv, inp, d.n_inp);
    return forward_sites(ctx, &be, &d, out, preatt, att, qkv, 3 * C, qkv + C, 3 * C, qkv + 2 * C, 3 * C);
}

static int gqa_check(const char *op, const float *q, const float *k, const float *v, size_t B, size_t T,
                     size_t NH, size_t NKV, size_t hs, attn_dims *d)
{
    int rc;
    if ((rc = krn_check_ptr(op, "q", q)) || (rc = krn_check_ptr(op, "k", k)) || (rc = krn_check_ptr(op, "v", v)))
        return rc;
    return dims_fill(op, B, T, NH, NKV, hs, d);
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention fwd"). */
int krn_gqa_forward(krn_ctx *ctx, float *out, float *preatt, float *att, const float *q, const float *k,
                    const float *v, size_t B, size_t T, size_t NH, size_t NKV, size_t hs)
{
    static const char op[] = "gqa_forward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "out", out)) || (rc = krn_check_ptr(op, "preatt", preatt)) ||
        (rc = krn_check_ptr(op, "att", att)) || (rc = gqa_check(op, q, k, v, B, T, NH, NKV, hs, &d)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {q, d.n_out}, {k, d.n_kv});
    fwd_trace_reads(ctx, &d, preatt, att);
    KRN_TRACE_READS(ctx, 4, {v, d.n_kv});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_gqa_forward(ctx, out, preatt, att, q, k, v, B, T, NH, NKV, hs));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    double *wide = krn_scratch(KRN_SCRATCH_A, d.n_out + 2 * d.n_kv);
    if (!wide)
        return OVT_ENOMEM;
    double *qd = wide, *kd = qd + d.n_out, *vd = kd + d.n_kv;
    krn_widen(qd, q, d.n_out);
    krn_widen(kd, k, d.n_kv);
    krn_widen(vd, v, d.n_kv);
    return forward_sites(ctx, &be, &d, out, preatt, att, qd, d.C, kd, d.KVW, vd, d.KVW);
}

/* The backward's operands, widened: q, k, v with their row strides, dout
 * (g, row stride C), att (w); scratch y, x, mag; and where each gradient
 * goes: into `part` and then scattered (GPT-2's fused dinp) or straight
 * into its tensor, old values read from there. */
typedef struct {
    const double *q, *k, *v, *g, *w;
    size_t sq, sk, sv;
    double *y, *x, *mag;
    float *r;
} bwd_bufs;

typedef struct {
    float *dq, *dk, *dv; /* where each site writes (n_out, n_kv, n_kv contiguous) */
    const float *oldq, *oldk, *oldv; /* the old gradients and their row stride */
    size_t sold_q, sold_kv;
    float *fused;       /* GPT-2: dinp (B,T,3C), each part scattered in after its site */
    float *part;
} bwd_out;

/* Copies the (B,T,C) tensor part into the third `which` of dinp (B,T,3C). */
static void scatter_third(float *dinp, const float *part, const attn_dims *d, int which)
{
    for (size_t bt = 0; bt < d->B * d->T; bt++)
        memcpy(dinp + bt * 3 * d->C + (size_t)which * d->C, part + bt * d->C, d->C * sizeof(float));
}

static int backward_sites(krn_ctx *ctx, const krn_cpu *be, const attn_dims *d, const bwd_bufs *b, const bwd_out *o,
                          float *dpreatt, float *datt)
{
    static const char op[] = "attention_backward";
    double *gn = krn_doubles(d->n_row, op), *vn = krn_doubles(d->B * d->T * d->NKV, op);
    int rc = OVT_ENOMEM;
    if (!gn || !vn)
        goto done;
    head_norms(gn, d, b->g, d->C, d->NH);
    head_norms(vn, d, b->v, b->sv, d->NKV);
    if ((rc = pair_dot_site(ctx, be, "attn.bwd.datt", datt, d, b->g, d->C, gn, b->v, b->sv, vn, d->G, 1.0, 0,
                            b->x, b->mag)) ||
        (rc = mix_site(ctx, be, "attn.bwd.dv", o->dv, d, b->w, false, b->g, d->C, 1.0, o->oldv, o->sold_kv, b->x,
                       b->mag)))
        goto done;
    if (o->fused) {
        scatter_third(o->fused, o->dv, d, 2);
        krn_trace_scatter(ctx, o->fused + 2 * d->C, o->dv, d->C, 3 * d->C, d->B * d->T);
    }
    krn_widen(b->y, datt, d->n_tt);
    if ((rc = row_sum_site(ctx, be, "attn.bwd.r", b->r, d, b->w, b->y, b->x, b->mag)))
        goto done;
    KRN_TRACE_READS(ctx, 0, {b->r, d->n_row}); /* before it is read (block mode fills it here) */
    size_t T = d->T;
    for (size_t row = 0; row < d->n_row; row++)
        for (size_t t2 = 0; t2 < T; t2++) {
            size_t i = row * T + t2;
            b->x[i] = b->w[i] * (b->y[i] - (double)b->r[row]); /* 0 above the diagonal: att is 0 there */
        }
    krn_band band = krn_band_exact();
    if ((rc = krn_site(ctx, "attn.bwd.dpreatt", dpreatt, b->x, d->n_tt, &band)))
        goto done;
    krn_widen(b->y, dpreatt, d->n_tt);
    if ((rc = mix_site(ctx, be, "attn.bwd.dq", o->dq, d, b->y, true, b->k, b->sk, d->scale, o->oldq, o->sold_q,
                       b->x, b->mag)))
        goto done;
    if (o->fused) {
        scatter_third(o->fused, o->dq, d, 0);
        krn_trace_scatter(ctx, o->fused + 0 * d->C, o->dq, d->C, 3 * d->C, d->B * d->T);
    }
    if ((rc = mix_site(ctx, be, "attn.bwd.dk", o->dk, d, b->y, false, b->q, b->sq, d->scale, o->oldk, o->sold_kv,
                       b->x, b->mag)))
        goto done;
    if (o->fused) {
        scatter_third(o->fused, o->dk, d, 1);
        krn_trace_scatter(ctx, o->fused + 1 * d->C, o->dk, d->C, 3 * d->C, d->B * d->T);
    }
done:
    free(gn);
    free(vn);
    return rc;
}

/* The backward's reads of attn.bwd.r and attn.bwd.dpreatt (and its r,
 * backward_sites), and dq's and dk's dpreatt (their q, k and old
 * gradients by the caller). */
static void bwd_trace_reads(krn_ctx *ctx, const attn_dims *d, const float *att, const float *datt,
                            const float *dpreatt)
{
    KRN_TRACE_READS(ctx, 2, {att, d->n_tt}, {datt, d->n_tt});
    KRN_TRACE_READS(ctx, 3, {att, d->n_tt}, {datt, d->n_tt});
    KRN_TRACE_READS(ctx, 4, {dpreatt, d->n_tt});
    KRN_TRACE_READS(ctx, 5, {dpreatt, d->n_tt});
}

/* Widens dout and att and fills the scratch of b (q, k, v set by the caller). */
static int bwd_prepare(bwd_bufs *b, const attn_dims *d, const float *dout, const float *att, const char *op)
{
    size_t nx = d->n_tt > d->n_out ? d->n_tt : d->n_out;
    double *g = krn_scratch(KRN_SCRATCH_F, d->n_out), *w = krn_scratch(KRN_SCRATCH_D, d->n_tt);
    b->x = krn_scratch(KRN_SCRATCH_B, nx);
    b->mag = krn_scratch(KRN_SCRATCH_C, nx);
    b->y = krn_scratch(KRN_SCRATCH_E, d->n_tt);
    b->r = krn_floats(d->n_row, op);
    if (!g || !w || !b->x || !b->mag || !b->y || !b->r)
        return OVT_ENOMEM;
    krn_widen(g, dout, d->n_out);
    krn_widen(w, att, d->n_tt);
    b->g = g;
    b->w = w;
    return 0;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention bwd"). */
int krn_attention_backward(krn_ctx *ctx, float *dinp, float *dpreatt, float *datt,
                           const float *dout, const float *inp, const float *att, size_t B,
                           size_t T, size_t C, size_t NH)
{
    static const char op[] = "attention_backward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "dinp", dinp)) || (rc = krn_check_ptr(op, "dpreatt", dpreatt)) ||
        (rc = krn_check_ptr(op, "datt", datt)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "inp", inp)) || (rc = krn_check_ptr(op, "att", att)) ||
        (rc = attn_check(op, B, T, C, NH, &d)))
        return rc;
    size_t BT = B * T;
    const float *q = inp, *k = inp + C, *v = inp + 2 * C;
    KRN_TRACE_READS(ctx, 0, {dout, d.n_out});
    krn_trace_read_rows(ctx, 0, v, C, 3 * C, BT);
    KRN_TRACE_READS(ctx, 1, {att, d.n_tt}, {dout, d.n_out});
    krn_trace_read_rows(ctx, 1, dinp + 2 * C, C, 3 * C, BT);
    bwd_trace_reads(ctx, &d, att, datt, dpreatt);
    krn_trace_read_rows(ctx, 4, k, C, 3 * C, BT);
    krn_trace_read_rows(ctx, 4, dinp, C, 3 * C, BT);
    krn_trace_read_rows(ctx, 5, q, C, 3 * C, BT);
    krn_trace_read_rows(ctx, 5, dinp + C, C, 3 * C, BT);
    KRN_CUDA_DISPATCH(ctx, krn_cuda_attention_backward(ctx, dinp, dpreatt, datt, dout, inp, att, B, T, C, NH));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    double *qkv = krn_scratch(KRN_SCRATCH_A, d.n_inp);
    float *part = krn_floats(d.n_out, op);
    bwd_bufs b = {.q = qkv, .k = qkv ? qkv + C : NULL, .v = qkv ? qkv + 2 * C : NULL, .sq = 3 * C, .sk = 3 * C,
                  .sv = 3 * C};
    rc = OVT_ENOMEM;
    if (qkv && part && !(rc = bwd_prepare(&b, &d, dout, att, op))) {
        krn_widen(qkv, inp, d.n_inp);
        bwd_out o = {.dq = part, .dk = part, .dv = part, .oldq = dinp, .oldk = dinp + C, .oldv = dinp + 2 * C,
                     .sold_q = 3 * C, .sold_kv = 3 * C, .fused = dinp};
        rc = backward_sites(ctx, &be, &d, &b, &o, dpreatt, datt);
    }
    free(part);
    free(b.r);
    return rc;
}

/* Sites and bands: kernels/ops.h, docs/op-bounds.md ("attention bwd"). */
int krn_gqa_backward(krn_ctx *ctx, float *dq, float *dk, float *dv, float *dpreatt, float *datt,
                     const float *dout, const float *q, const float *k, const float *v, const float *att,
                     size_t B, size_t T, size_t NH, size_t NKV, size_t hs)
{
    static const char op[] = "gqa_backward";
    attn_dims d;
    int rc;
    if ((rc = krn_check_ptr(op, "dq", dq)) || (rc = krn_check_ptr(op, "dk", dk)) ||
        (rc = krn_check_ptr(op, "dv", dv)) || (rc = krn_check_ptr(op, "dpreatt", dpreatt)) ||
        (rc = krn_check_ptr(op, "datt", datt)) || (rc = krn_check_ptr(op, "dout", dout)) ||
        (rc = krn_check_ptr(op, "att", att)) || (rc = gqa_check(op, q, k, v, B, T, NH, NKV, hs, &d)))
        return rc;
    KRN_TRACE_READS(ctx, 0, {dout, d.n_out}, {v, d.n_kv});
    KRN_TRACE_READS(ctx, 1, {att, d.n_tt}, {dout, d.n_out}, {dv, d.n_kv});
    bwd_trace_reads(ctx, &d, att, datt, dpreatt);
    KRN_TRACE_READS(ctx, 4, {dpreatt, d.n_tt}, {k, d.n_kv}, {dq, d.n_out});
    KRN_TRACE_READS(ctx, 5, {dpreatt, d.n_tt}, {q, d.n_out}, {dk, d.n_kv});
    KRN_CUDA_DISPATCH(ctx, krn_cuda_gqa_backward(ctx, dq, dk, dv, dpreatt, datt, dout, q, k, v, att, B, T, NH, NKV,
                                                 hs));
    krn_cpu be;
    if ((rc = krn_cpu_from_ctx(ctx, &be)))
        return rc;
    double *wide = krn_scratch(KRN_SCRATCH_A, d.n_out + 2 * d.n_kv);
    bwd_bufs b = {.sq = d.C, .sk = d.KVW, .sv = d.KVW};
    rc = OVT_ENOMEM;
    if (wide && !(rc = bwd_prepare(&b, &d, dout, att, op))) {
        double *qd = wide, *kd = qd + d.n_out, *vd = kd + d.n_kv;
        krn_widen(qd, q, d.n_out);
        krn_widen(kd, k, d.n_kv);
        krn_widen(vd, v, d.n_kv);
        b.q = qd;
        b.k = kd;
        b.v = vd;
        bwd_out o = {.dq = dq, .dk = dk, .dv = dv, .oldq = dq, .oldk = dk, .oldv = dv, .sold_q = d.C,
                     .sold_kv = d.KVW};
        rc = backward_sites(ctx, &be, &d, &b, &o, dpreatt, datt);
    }
    free(b.r);
    return rc;
}
