/* The math of the ResNet ops (kernels/ops.h: convolution, batch norm,
 * pooling), not only their reproducibility (test_ops_replay): the
 * convolution against a direct loop over its definition (no im2col), bit
 * for bit on small integers (every sum exact in any order) and to 1e-6 on
 * normal values, forward and backward; every backward against central
 * finite differences of its forward (fd_check.h); batch norm, its running
 * statistics and the pools against values computed by hand; a residual
 * basic block chained forward and backward against finite differences.
 * The cpu backend in NEAREST mode. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/ops.h"
#include "fd_check.h"
#include "ops_fixture.h"

static krn_ctx *ctx;

static void check_near(const char *what, double got, double want, double rel, double abs)
{
    CHECK_MSG(fabs(got - want) <= rel * fabs(want) + abs, "%s: %.9g, want %.9g", what, got, want);
}

static void free_list(float **bufs)
{
    for (; *bufs; bufs++)
        free(*bufs);
}

/* ---- convolution ---- */

typedef struct {
    size_t N, C, H, W, OC, KH, KW, stride, pad, OH, OW;
    float *inp, *w, *b, *out, *r;
} conv_case;

static conv_case conv_make(size_t N, size_t C, size_t H, size_t W, size_t OC, size_t KH, size_t KW, size_t stride,
                           size_t pad)
{
    conv_case c = {N, C, H, W, OC, KH, KW, stride, pad, (H + 2 * pad - KH) / stride + 1,
                   (W + 2 * pad - KW) / stride + 1, NULL, NULL, NULL, NULL, NULL};
    return c;
}

/* Grid values: small integers in [-4, 4] (int_vals) or ~ N(0, scale). */
static float *values(size_t n, uint64_t seed, uint64_t stream, bool int_vals, double scale)
{
    float *p = fx_normal(n, seed, stream, scale);
    for (size_t i = 0; int_vals && i < n; i++)
        p[i] = (float)((int)krn_rng_below(seed, stream, KRN_RNG_TEST, i, 9) - 4);
    return p;
}

/* The input row under output row o and tap k, or -1 in the padding. */
static long in_at(const conv_case *c, size_t o, size_t k, size_t len)
{
    long h = (long)(o * c->stride + k) - (long)c->pad;
    return h >= 0 && h < (long)len ? h : -1;
}

/* The definition, in FP64 in loop order: out = sum over (c, kh, kw) of
 * inp*w + bias; dinp, dweight, dbias (NULL: skipped) += the gradients of
 * sum out*dout (the loops of every term, not im2col). */
static void conv_direct(const conv_case *c, double *out, const float *dout, double *dinp, double *dw, double *db)
{
    for (size_t n = 0; n < c->N; n++)
        for (size_t oc = 0; oc < c->OC; oc++)
            for (size_t oh = 0; oh < c->OH; oh++)
                for (size_t ow = 0; ow < c->OW; ow++) {
                    size_t o = ((n * c->OC + oc) * c->OH + oh) * c->OW + ow;
                    double s = c->b ? c->b[oc] : 0.0;
                    for (size_t ci = 0; ci < c->C; ci++)
                        for (size_t kh = 0; kh < c->KH; kh++)
                            for (size_t kw = 0; kw < c->KW; kw++) {
                                long h = in_at(c, oh, kh, c->H), w = in_at(c, ow, kw, c->W);
                                if (h < 0 || w < 0)
                                    continue;
                                size_t i = ((n * c->C + ci) * c->H + (size_t)h) * c->W + (size_t)w;
                                size_t k = ((oc * c->C + ci) * c->KH + kh) * c->KW + kw;
                                s += (double)c->inp[i] * c->w[k];
                                if (dinp)
                                    dinp[i] += (double)dout[o] * c->w[k];
                                if (dw)
                                    dw[k] += (double)dout[o] * c->inp[i];
                            }
                    if (out)
                        out[o] = s;
                    if (db)
                        db[oc] += dout[o];
                }
}

static double conv_loss(void *ud)
{
    conv_case *c = ud;
    RUN(krn_conv2d_forward(ctx, c->out, c->inp, c->w, c->b, c->N, c->C, c->H, c->W, c->OC, c->KH, c->KW,
                           c->stride, c->pad));
    return dot_r(c->out, c->r, c->N * c->OC * c->OH * c->OW);
}

/* Forward and backward against conv_direct: exact on integers, to 1e-6 of
 * the terms' magnitude on normal values. */
static void conv_against_direct(conv_case c, bool ints, uint64_t seed)
{
    size_t nin = c.N * c.C * c.H * c.W, nw = c.OC * c.C * c.KH * c.KW, nout = c.N * c.OC * c.OH * c.OW;
    c.inp = values(nin, seed, 1, ints, 1.0);
    c.w = values(nw, seed, 2, ints, 0.3);
    c.b = values(c.OC, seed, 3, ints, 1.0);
    c.out = fx_alloc(nout);
    float *dout = values(nout, seed, 4, ints, 1.0);
    float *dinp = values(nin, seed, 5, ints, 1.0), *dw = values(nw, seed, 6, ints, 1.0);
    float *db = values(c.OC, seed, 7, ints, 1.0);
    double *want = calloc(nout, sizeof *want), *wdinp = calloc(nin, sizeof *wdinp);
    double *wdw = calloc(nw, sizeof *wdw), *wdb = calloc(c.OC, sizeof *wdb);
    for (size_t i = 0; i < nin; i++)
        wdinp[i] = dinp[i];
    for (size_t i = 0; i < nw; i++)
        wdw[i] = dw[i];
    for (size_t i = 0; i < c.OC; i++)
        wdb[i] = db[i];
    conv_direct(&c, want, dout, wdinp, wdw, wdb);
    RUN(krn_conv2d_forward(ctx, c.out, c.inp, c.w, c.b, c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.pad));
    RUN(krn_conv2d_backward(ctx, dinp, dw, db, dout, c.inp, c.w, c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride,
                            c.pad));
    double tol = ints ? 0 : 1e-6 * sqrt((double)(c.C * c.KH * c.KW * c.OC * c.N * c.OH * c.OW));
    size_t bad = 0;
    for (size_t i = 0; i < nout; i++)
        bad += fabs(c.out[i] - want[i]) > tol;
    for (size_t i = 0; i < nin; i++)
        bad += fabs(dinp[i] - wdinp[i]) > tol;
    for (size_t i = 0; i < nw; i++)
        bad += fabs(dw[i] - wdw[i]) > tol;
    for (size_t i = 0; i < c.OC; i++)
        bad += fabs(db[i] - wdb[i]) > tol;
    CHECK_MSG(bad == 0, "conv %zux%zu stride %zu pad %zu, C %zu OC %zu%s: %zu values differ from the direct loop",
              c.KH, c.KW, c.stride, c.pad, c.C, c.OC, ints ? " (integers)" : "", bad);
    free_list((float *[]){c.inp, c.w, c.b, c.out, dout, dinp, dw, db, NULL});
    free(want), free(wdinp), free(wdw), free(wdb);
}

static void test_conv_direct(void)
{
    /* 3x3 pad 1, stride 2 with K = 144 > one chunk, 7x7 stride 2 pad 3
     * (ResNet's stem), 1x1 stride 2 (a projection), a non-square kernel,
     * a stride larger than the kernel (inputs no tap reaches), a 1x1 of
     * one value, and padding 2 around a 2x2 input (patches of padding only) */
    const conv_case shapes[] = {conv_make(2, 16, 6, 5, 5, 3, 3, 2, 1), conv_make(2, 3, 9, 9, 4, 7, 7, 2, 3),
                                conv_make(3, 6, 5, 5, 7, 1, 1, 2, 0), conv_make(1, 2, 5, 6, 3, 2, 3, 1, 1),
                                conv_make(2, 3, 7, 7, 2, 2, 2, 3, 0), conv_make(1, 1, 3, 3, 1, 3, 3, 1, 0),
                                conv_make(1, 1, 1, 1, 1, 1, 1, 1, 0), conv_make(2, 2, 2, 2, 3, 3, 3, 1, 2)};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        conv_against_direct(shapes[i], true, 40 + i);
        conv_against_direct(shapes[i], false, 50 + i);
    }
    /* K*N*P = 576*8192 values of the column matrix, more than the backward
     * builds at once: dweight in two parts of rows */
    conv_against_direct(conv_make(2, 64, 64, 64, 2, 3, 3, 1, 1), true, 60);
    /* one hand value: a 3x3 all-ones kernel over a 3x3 input 1..9 is 45 */
    float in9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, o1[9];
    RUN(krn_conv2d_forward(ctx, o1, in9, ones, NULL, 1, 1, 3, 3, 1, 3, 3, 1, 0));
    CHECK(o1[0] == 45.0f);
    /* pad 1: the corner sees 1 + 2 + 4 + 5 */
    RUN(krn_conv2d_forward(ctx, o1, in9, ones, NULL, 1, 1, 3, 3, 1, 3, 3, 1, 1));
    CHECK(o1[0] == 12.0f && o1[4] == 45.0f && o1[8] == 28.0f);
    CHECK(krn_conv2d_forward(ctx, o1, in9, ones, NULL, 1, 1, 3, 3, 1, 5, 5, 1, 0) == OVT_EINVAL);
    CHECK(krn_conv2d_forward(ctx, o1, in9, ones, NULL, 1, 1, 3, 3, 1, 3, 3, 0, 0) == OVT_EINVAL);
}

static void test_conv_grad(void)
{
    conv_case c = conv_make(2, 3, 6, 5, 4, 3, 3, 2, 1);
    size_t nin = c.N * c.C * c.H * c.W, nw = c.OC * c.C * c.KH * c.KW, nout = c.N * c.OC * c.OH * c.OW;
    c.inp = fx_normal(nin, 31, 1, 1.0);
    c.w = fx_normal(nw, 31, 2, 0.5);
    c.b = fx_normal(c.OC, 31, 3, 1.0);
    c.out = fx_alloc(nout);
    c.r = fx_normal(nout, 31, 4, 1.0);
    float *dinp = fx_alloc(nin), *dw = fx_alloc(nw), *db = fx_alloc(c.OC);
    RUN(krn_conv2d_backward(ctx, dinp, dw, db, c.r, c.inp, c.w, c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride,
                            c.pad));
    fd_check("conv dinp", c.inp, nin, dinp, conv_loss, &c);
    fd_check("conv dweight", c.w, nw, dw, conv_loss, &c);
    fd_check("conv dbias", c.b, c.OC, db, conv_loss, &c);
    /* dinp NULL: the other two alone, the same values */
    float *dw2 = fx_alloc(nw), *db2 = fx_alloc(c.OC);
    RUN(krn_conv2d_backward(ctx, NULL, dw2, db2, c.r, c.inp, c.w, c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride,
                            c.pad));
    CHECK(memcmp(dw, dw2, nw * sizeof(float)) == 0 && memcmp(db, db2, c.OC * sizeof(float)) == 0);
    free_list((float *[]){c.inp, c.w, c.b, c.out, c.r, dinp, dw, db, dw2, db2, NULL});
}

/* ---- batch norm ---- */

typedef struct {
    size_t N, C, HW;
    float *inp, *w, *b, *out, *mean, *rstd, *rm, *rv, *r;
} bn_case;

static double bn_loss(void *ud)
{
    bn_case *c = ud;
    RUN(krn_batchnorm_forward(ctx, c->out, c->mean, c->rstd, c->rm, c->rv, c->inp, c->w, c->b, c->N, c->C, c->HW,
                              1e-5, 0.1));
    return dot_r(c->out, c->r, c->N * c->C * c->HW);
}

static void test_batchnorm(void)
{
    /* one channel, N = 2, HW = 2: [1, 2 | 3, 4] (n-major), weight 2, bias
     * 0.5: mean 2.5, var 1.25, rstd 1/sqrt(1.25001), running mean
     * 0.9*0 + 0.1*2.5 = 0.25, running var 0.9*1 + 0.1*(1.25*4/3) = 1.0666...;
     * with C = 2 the second channel [10, 10 | 10, 30] (mean 15, var 75) is
     * interleaved by NCHW: n0 = [1, 2, 10, 10], n1 = [3, 4, 10, 30] */
    float x[8] = {1, 2, 10, 10, 3, 4, 10, 30}, w[2] = {2, 1}, b[2] = {0.5f, 0}, out[8];
    float mean[2], rstd[2], rm[2] = {0, 1}, rv[2] = {1, 2};
    RUN(krn_batchnorm_forward(ctx, out, mean, rstd, rm, rv, x, w, b, 2, 2, 2, 1e-5, 0.1));
    CHECK(mean[0] == 2.5f && mean[1] == 15.0f);
    check_near("bn rstd", rstd[0], 1 / sqrt(1.25001), 0x1p-23, 0);
    check_near("bn rstd", rstd[1], 1 / sqrt(75.00001), 0x1p-23, 0);
    check_near("bn out", out[0], -1.5 * 2 / sqrt(1.25001) + 0.5, 1e-6, 0);
    check_near("bn out", out[5], 1.5 * 2 / sqrt(1.25001) + 0.5, 1e-6, 0);
    check_near("bn out", out[7], 15 / sqrt(75.00001), 1e-6, 0);
    check_near("bn running mean", rm[0], 0.25, 1e-7, 0);
    check_near("bn running mean", rm[1], 0.9 + 1.5, 1e-7, 0);
    check_near("bn running var", rv[0], 0.9 + 0.1 * (1.25 * 4 / 3), 1e-7, 0);
    check_near("bn running var", rv[1], 1.8 + 0.1 * 100, 1e-7, 0);
    /* evaluation mode from those running statistics */
    float ev[8];
    RUN(krn_batchnorm_eval(ctx, ev, x, w, b, rm, rv, 2, 2, 2, 1e-5));
    check_near("bn eval", ev[1], (2 - 0.25) / sqrt(rv[0] + 1e-5) * 2 + 0.5, 1e-6, 0);
    check_near("bn eval", ev[7], (30 - 2.4) / sqrt(rv[1] + 1e-5), 1e-6, 0);
    CHECK(krn_batchnorm_forward(ctx, out, mean, rstd, rm, rv, x, w, b, 1, 8, 1, 1e-5, 0.1) == OVT_EINVAL);

    bn_case c = {.N = 3, .C = 4, .HW = 5};
    size_t n = c.N * c.C * c.HW;
    c.inp = fx_normal(n, 23, 1, 2.0);
    c.w = fx_normal(c.C, 23, 2, 1.0);
    c.b = fx_normal(c.C, 23, 3, 1.0);
    c.out = fx_alloc(n), c.mean = fx_alloc(c.C), c.rstd = fx_alloc(c.C);
    c.rm = fx_alloc(c.C), c.rv = fx_const(c.C, 1);
    c.r = fx_normal(n, 23, 4, 1.0);
    bn_loss(&c);
    float *dinp = fx_alloc(n), *dw = fx_alloc(c.C), *db = fx_alloc(c.C);
    RUN(krn_batchnorm_backward(ctx, dinp, dw, db, c.r, c.inp, c.w, c.mean, c.rstd, c.N, c.C, c.HW));
    fd_check("bn dinp", c.inp, n, dinp, bn_loss, &c);
    fd_check("bn dweight", c.w, c.C, dw, bn_loss, &c);
    fd_check("bn dbias", c.b, c.C, db, bn_loss, &c);
    free_list((float *[]){c.inp, c.w, c.b, c.out, c.mean, c.rstd, c.rm, c.rv, c.r, dinp, dw, db, NULL});
}

/* ---- pooling ---- */

typedef struct {
    size_t N, C, H, W, k, stride, pad, OH, OW;
    float *inp, *out, *r;
    int32_t *idx;
} pool_case;

static double maxpool_loss(void *ud)
{
    pool_case *c = ud;
    RUN(krn_maxpool2d_forward(ctx, c->out, c->idx, c->inp, c->N, c->C, c->H, c->W, c->k, c->stride, c->pad));
    return dot_r(c->out, c->r, c->N * c->C * c->OH * c->OW);
}

static double avgpool_loss(void *ud)
{
    pool_case *c = ud;
    RUN(krn_avgpool_global_forward(ctx, c->out, c->inp, c->N, c->C, c->H * c->W));
    return dot_r(c->out, c->r, c->N * c->C);
}

static void test_pools(void)
{
    /* ties go to the first maximum in row-major window order; 3x3 windows
     * at stride 2, padding 1, overlap, and two of them pick element 1 */
    float p[16] = {1, 3, 3, 0, 2, 3, 0, 0, 5, 5, 1, 1, 5, 5, 1, 2}, o[4];
    int32_t idx[4];
    RUN(krn_maxpool2d_forward(ctx, o, idx, p, 1, 1, 4, 4, 2, 2, 0));
    CHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 8 && idx[3] == 15);
    CHECK(o[0] == 3 && o[1] == 3 && o[2] == 5 && o[3] == 2);
    RUN(krn_maxpool2d_forward(ctx, o, idx, p, 1, 1, 4, 4, 3, 2, 1));
    CHECK(idx[0] == 1 && idx[1] == 1 && idx[2] == 8 && idx[3] == 9);
    float dout[4] = {0.5f, 0.25f, 2, 4}, dinp[16] = {0};
    dinp[1] = 1;
    RUN(krn_maxpool2d_backward(ctx, dinp, dout, idx, 1, 1, 4, 4, 3, 2, 1));
    CHECK(dinp[1] == 1.75f && dinp[8] == 2 && dinp[9] == 4 && dinp[0] == 0 && dinp[15] == 0);
    idx[2] = 16;
    CHECK(krn_maxpool2d_backward(ctx, dinp, dout, idx, 1, 1, 4, 4, 3, 2, 1) == OVT_EINVAL);
    CHECK(krn_maxpool2d_forward(ctx, o, idx, p, 1, 1, 4, 4, 2, 2, 2) == OVT_EINVAL);
    /* global average: the plane's mean; backward spreads dout / HW */
    float a[8] = {1, 2, 3, 4, 10, 20, 30, 41}, m[2], g[2] = {4, 8}, da[8] = {0};
    RUN(krn_avgpool_global_forward(ctx, m, a, 1, 2, 4));
    CHECK(m[0] == 2.5f && m[1] == 25.25f);
    da[7] = 1;
    RUN(krn_avgpool_global_backward(ctx, da, g, 1, 2, 4));
    CHECK(da[0] == 1 && da[3] == 1 && da[4] == 2 && da[7] == 3);

    /* finite differences: distinct values 2^(j/16) apart by 4.4%, more than
     * the step 2^-7 moves one (no maximum changes) */
    pool_case c = {.N = 2, .C = 3, .H = 7, .W = 6, .k = 3, .stride = 2, .pad = 1};
    c.OH = (c.H + 2 * c.pad - c.k) / c.stride + 1;
    c.OW = (c.W + 2 * c.pad - c.k) / c.stride + 1;
    size_t n = c.N * c.C * c.H * c.W, no = c.N * c.C * c.OH * c.OW;
    c.inp = fx_alloc(n);
    for (size_t i = 0; i < n; i++) /* j a permutation of 0..n-1 */
        c.inp[i] = (float)exp2((double)((i * 37 + 11) % n) / 16.0);
    c.out = fx_alloc(no);
    c.r = fx_normal(no, 24, 1, 1.0);
    c.idx = calloc(no, sizeof *c.idx);
    maxpool_loss(&c);
    float *dx = fx_alloc(n);
    RUN(krn_maxpool2d_backward(ctx, dx, c.r, c.idx, c.N, c.C, c.H, c.W, c.k, c.stride, c.pad));
    fd_check("maxpool dinp", c.inp, n, dx, maxpool_loss, &c);
    free(c.r), free(dx), free(c.inp);
    c.inp = fx_normal(n, 24, 3, 1.0);
    c.r = fx_normal(c.N * c.C, 24, 2, 1.0);
    dx = fx_alloc(n);
    RUN(krn_avgpool_global_backward(ctx, dx, c.r, c.N, c.C, c.H * c.W));
    fd_check("avgpool dinp", c.inp, n, dx, avgpool_loss, &c);
    free_list((float *[]){c.inp, c.out, c.r, dx, NULL});
    free(c.idx);
}

/* ---- a residual basic block, end to end ---- */

/* x (N,C,S,S) -> conv1 -> bn1 -> act -> conv2 -> bn2 -> + x -> act ->
 * global average -> loss = sum avg*R: ResNet's basic block, its ops
 * chained forward and backward as a model will chain them (the layouts
 * agree, the accumulating backwards compose). act is GELU, not ReLU: with
 * ReLU the finite differences' step (2^-7) moves enough pre-activations
 * across 0 to miss by 10-30% (checked: without the activation, or with a
 * smooth one, every element agrees). */
typedef struct {
    size_t N, C, S;
    float *x, *cw1, *cw2, *bw1, *bb1, *bw2, *bb2, *r;
    float *c1, *b1, *r1, *c2, *b2, *sum, *y, *avg, *m1, *s1, *m2, *s2, *rm, *rv;
} block;

static double block_loss(void *ud)
{
    block *b = ud;
    size_t N = b->N, C = b->C, S = b->S, HW = S * S, n = N * C * HW;
    RUN(krn_conv2d_forward(ctx, b->c1, b->x, b->cw1, NULL, N, C, S, S, C, 3, 3, 1, 1));
    RUN(krn_batchnorm_forward(ctx, b->b1, b->m1, b->s1, b->rm, b->rv, b->c1, b->bw1, b->bb1, N, C, HW, 1e-5, 0.1));
    RUN(krn_gelu_forward(ctx, b->r1, b->b1, n));
    RUN(krn_conv2d_forward(ctx, b->c2, b->r1, b->cw2, NULL, N, C, S, S, C, 3, 3, 1, 1));
    RUN(krn_batchnorm_forward(ctx, b->b2, b->m2, b->s2, b->rm, b->rv, b->c2, b->bw2, b->bb2, N, C, HW, 1e-5, 0.1));
    RUN(krn_residual_forward(ctx, b->sum, b->b2, b->x, n));
    RUN(krn_gelu_forward(ctx, b->y, b->sum, n));
    RUN(krn_avgpool_global_forward(ctx, b->avg, b->y, N, C, HW));
    return dot_r(b->avg, b->r, N * C);
}

static void test_basic_block(void)
{
    block b = {.N = 2, .C = 4, .S = 5};
    size_t N = b.N, C = b.C, S = b.S, HW = S * S, n = N * C * HW, nw = C * C * 9;
    b.x = fx_normal(n, 25, 1, 1.0), b.cw1 = fx_normal(nw, 25, 2, 0.3), b.cw2 = fx_normal(nw, 25, 3, 0.3);
    b.bw1 = fx_uniform(C, 25, 4, 0.5, 1.5), b.bb1 = fx_normal(C, 25, 5, 0.5);
    b.bw2 = fx_uniform(C, 25, 6, 0.5, 1.5), b.bb2 = fx_normal(C, 25, 7, 0.5), b.r = fx_normal(N * C, 25, 8, 1.0);
    float **acts[] = {&b.c1, &b.b1, &b.r1, &b.c2, &b.b2, &b.sum, &b.y};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        *acts[i] = fx_alloc(n);
    b.avg = fx_alloc(N * C), b.m1 = fx_alloc(C), b.s1 = fx_alloc(C), b.m2 = fx_alloc(C), b.s2 = fx_alloc(C);
    b.rm = fx_alloc(C), b.rv = fx_const(C, 1);
    block_loss(&b);
    /* backward, last op first; every gradient starts at 0 */
    float *dy = fx_alloc(n), *dsum = fx_alloc(n), *db2 = fx_alloc(n), *dc2 = fx_alloc(n), *dr1 = fx_alloc(n);
    float *db1 = fx_alloc(n), *dc1 = fx_alloc(n), *dx = fx_alloc(n), *dcw1 = fx_alloc(nw), *dcw2 = fx_alloc(nw);
    float *dbw1 = fx_alloc(C), *dbb1 = fx_alloc(C), *dbw2 = fx_alloc(C), *dbb2 = fx_alloc(C);
    RUN(krn_avgpool_global_backward(ctx, dy, b.r, N, C, HW));
    RUN(krn_gelu_backward(ctx, dsum, b.sum, dy, n));
    RUN(krn_residual_backward(ctx, db2, dx, dsum, n));
    RUN(krn_batchnorm_backward(ctx, dc2, dbw2, dbb2, db2, b.c2, b.bw2, b.m2, b.s2, N, C, HW));
    RUN(krn_conv2d_backward(ctx, dr1, dcw2, NULL, dc2, b.r1, b.cw2, N, C, S, S, C, 3, 3, 1, 1));
    RUN(krn_gelu_backward(ctx, db1, b.b1, dr1, n));
    RUN(krn_batchnorm_backward(ctx, dc1, dbw1, dbb1, db1, b.c1, b.bw1, b.m1, b.s1, N, C, HW));
    RUN(krn_conv2d_backward(ctx, dx, dcw1, NULL, dc1, b.x, b.cw1, N, C, S, S, C, 3, 3, 1, 1));
    fd_check("block dx", b.x, n, dx, block_loss, &b);
    fd_check("block dconv1", b.cw1, nw, dcw1, block_loss, &b);
    fd_check("block dconv2", b.cw2, nw, dcw2, block_loss, &b);
    fd_check("block dbn1 weight", b.bw1, C, dbw1, block_loss, &b);
    fd_check("block dbn2 bias", b.bb2, C, dbb2, block_loss, &b);
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        free(*acts[i]);
    free_list((float *[]){b.x, b.cw1, b.cw2, b.bw1, b.bb1, b.bw2, b.bb2, b.r, b.avg, b.m1, b.s1, b.m2, b.s2, b.rm,
                          b.rv, dy, dsum, db2, dc2, dr1, db1, dc1, dx, dcw1, dcw2, dbw1, dbb1, dbw2, dbb2, NULL});
}

int main(void)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = 32, .threads = 2};
    if (krn_ctx_new(&ctx, &cfg) != 0 || krn_step_begin(ctx, 0, NULL) != 0) {
        fprintf(stderr, "ctx: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK_RUN(test_conv_direct());
    CHECK_RUN(test_conv_grad());
    CHECK_RUN(test_batchnorm());
    CHECK_RUN(test_pools());
    CHECK_RUN(test_basic_block());
    CHECK(krn_step_end(ctx, NULL) == 0);
    krn_ctx_free(ctx);
    return check_done();
}
