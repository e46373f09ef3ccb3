/* The math of the ops, not only its reproducibility: every backward op
 * against central finite differences of its forward (loss = sum out*R for a
 * random R, which is then the dout of the backward), computed with the ops
 * themselves in NEAREST mode; the optimizer ops against plain FP64 formulas.
 * Tolerances are loose (FP32 outputs, step h = 2^-7). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/ops.h"
#include "fd_check.h"
#include "ops_fixture.h"

static krn_ctx *ctx;

/* ---- matmul ---- */

typedef struct {
    size_t N, C, OC;
    float *inp, *w, *bias, *out, *r;
} mm_case;

static double mm_loss(void *ud)
{
    mm_case *m = ud;
    RUN(krn_matmul_forward(ctx, m->out, m->inp, m->w, m->bias, m->N, m->C, m->OC));
    return dot_r(m->out, m->r, m->N * m->OC);
}

static void test_matmul(void)
{
    mm_case m = {.N = 5, .C = 300, .OC = 7};
    m.inp = fx_normal(m.N * m.C, 1, 1, 1.0);
    m.w = fx_normal(m.OC * m.C, 1, 2, 0.1);
    m.bias = fx_normal(m.OC, 1, 3, 1.0);
    m.out = fx_alloc(m.N * m.OC);
    m.r = fx_normal(m.N * m.OC, 1, 4, 1.0);
    float *dinp = fx_alloc(m.N * m.C), *dw = fx_alloc(m.OC * m.C), *db = fx_alloc(m.OC);
    RUN(krn_matmul_backward(ctx, dinp, dw, db, m.r, m.inp, m.w, m.N, m.C, m.OC));
    fd_check("matmul dinp", m.inp, m.N * m.C, dinp, mm_loss, &m);
    fd_check("matmul dweight", m.w, m.OC * m.C, dw, mm_loss, &m);
    fd_check("matmul dbias", m.bias, m.OC, db, mm_loss, &m);
    /* accumulation: a second backward adds the same gradient again */
    float first = dw[11];
    RUN(krn_matmul_backward(ctx, NULL, dw, NULL, m.r, m.inp, m.w, m.N, m.C, m.OC));
    CHECK(dw[11] == krn_grid_round(2.0 * (double)first, 32));
    free(m.inp), free(m.w), free(m.bias), free(m.out), free(m.r), free(dinp), free(dw), free(db);
}

/* ---- layernorm ---- */

typedef struct {
    size_t N, C;
    float *inp, *w, *b, *out, *mean, *rstd, *r;
} ln_case;

static double ln_loss(void *ud)
{
    ln_case *l = ud;
    RUN(krn_layernorm_forward(ctx, l->out, l->mean, l->rstd, l->inp, l->w, l->b, l->N, l->C));
    return dot_r(l->out, l->r, l->N * l->C);
}

static void test_layernorm(void)
{
    ln_case l = {.N = 4, .C = 24};
    l.inp = fx_normal(l.N * l.C, 2, 1, 1.0);
    l.w = fx_normal(l.C, 2, 2, 1.0);
    l.b = fx_normal(l.C, 2, 3, 1.0);
    l.out = fx_alloc(l.N * l.C);
    l.mean = fx_alloc(l.N);
    l.rstd = fx_alloc(l.N);
    l.r = fx_normal(l.N * l.C, 2, 4, 1.0);
    ln_loss(&l);
    float *dinp = fx_alloc(l.N * l.C), *dw = fx_alloc(l.C), *db = fx_alloc(l.C);
    RUN(krn_layernorm_backward(ctx, dinp, dw, db, l.r, l.inp, l.w, l.mean, l.rstd, l.N, l.C));
    fd_check("layernorm dinp", l.inp, l.N * l.C, dinp, ln_loss, &l);
    fd_check("layernorm dweight", l.w, l.C, dw, ln_loss, &l);
    fd_check("layernorm dbias", l.b, l.C, db, ln_loss, &l);
    /* forward: mean and rstd against FP64 formulas */
    double s = 0, v = 0;
    for (size_t c = 0; c < l.C; c++)
        s += l.inp[c];
    s /= (double)l.C;
    for (size_t c = 0; c < l.C; c++)
        v += ((double)l.inp[c] - s) * ((double)l.inp[c] - s);
    v /= (double)l.C;
    CHECK(fabs((double)l.mean[0] - s) <= 1e-6 * (1 + fabs(s)));
    CHECK(fabs((double)l.rstd[0] - 1.0 / sqrt(v + 1e-5)) <= 1e-5 / sqrt(v + 1e-5));
    free(l.inp), free(l.w), free(l.b), free(l.out), free(l.mean), free(l.rstd), free(l.r);
    free(dinp), free(dw), free(db);
}

/* ---- attention ---- */

typedef struct {
    size_t B, T, C, NH;
    float *inp, *out, *pre, *att, *r;
} at_case;

static double at_loss(void *ud)
{
    at_case *a = ud;
    RUN(krn_attention_forward(ctx, a->out, a->pre, a->att, a->inp, a->B, a->T, a->C, a->NH));
    return dot_r(a->out, a->r, a->B * a->T * a->C);
}

static void test_attention(void)
{
    at_case a = {.B = 2, .T = 5, .C = 8, .NH = 2};
    size_t ntt = a.B * a.NH * a.T * a.T, nin = a.B * a.T * 3 * a.C;
    a.inp = fx_normal(nin, 3, 1, 1.0);
    a.out = fx_alloc(a.B * a.T * a.C);
    a.pre = fx_alloc(ntt);
    a.att = fx_alloc(ntt);
    a.r = fx_normal(a.B * a.T * a.C, 3, 2, 1.0);
    at_loss(&a);
    /* each causal row of att sums to 1 */
    for (size_t row = 0; row < a.B * a.NH * a.T; row++) {
        double s = 0;
        for (size_t t2 = 0; t2 < a.T; t2++)
            s += a.att[row * a.T + t2];
        CHECK(fabs(s - 1.0) < 1e-6);
        CHECK(row % a.T == a.T - 1 || a.att[row * a.T + a.T - 1] == 0.0f);
    }
    float *dinp = fx_alloc(nin), *dpre = fx_alloc(ntt), *datt = fx_alloc(ntt);
    RUN(krn_attention_backward(ctx, dinp, dpre, datt, a.r, a.inp, a.att, a.B, a.T, a.C, a.NH));
    fd_check("attention dinp", a.inp, nin, dinp, at_loss, &a);
    /* every third of dinp (q, k, v) checked at a few places too */
    for (size_t third = 0; third < 3; third++)
        fd_check("attention dinp third", a.inp + 3 * a.C + third * a.C, a.C,
                 dinp + 3 * a.C + third * a.C, at_loss, &a);
    free(a.inp), free(a.out), free(a.pre), free(a.att), free(a.r), free(dinp), free(dpre), free(datt);
}

/* ---- elementwise, embedding, bias, loss ---- */

typedef struct {
    size_t n;
    float *inp, *out, *r;
    int which; /* 0 gelu, 1 relu */
} el_case;

static double el_loss(void *ud)
{
    el_case *e = ud;
    if (e->which == 0)
        RUN(krn_gelu_forward(ctx, e->out, e->inp, e->n));
    else
        RUN(krn_relu_forward(ctx, e->out, e->inp, e->n));
    return dot_r(e->out, e->r, e->n);
}

static void test_elementwise(void)
{
    for (int which = 0; which < 2; which++) {
        el_case e = {.n = 40, .which = which};
        e.inp = fx_normal(e.n, 4, 1, 2.0);
        for (size_t i = 0; i < e.n; i++) /* keep ReLU's kink out of reach of h */
            if (fabsf(e.inp[i]) < 0.1f)
                e.inp[i] = 0.5f;
        e.out = fx_alloc(e.n);
        e.r = fx_normal(e.n, 4, 2, 1.0);
        float *dinp = fx_alloc(e.n);
        if (which == 0)
            RUN(krn_gelu_backward(ctx, dinp, e.inp, e.r, e.n));
        else
            RUN(krn_relu_backward(ctx, dinp, e.inp, e.r, e.n));
        fd_check(which == 0 ? "gelu dinp" : "relu dinp", e.inp, e.n, dinp, el_loss, &e);
        if (which == 0) { /* the forward itself against the formula */
            el_loss(&e);
            double x = e.inp[0], want = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
            CHECK(fabs((double)e.out[0] - want) <= 1e-6 * (1 + fabs(want)));
        }
        free(e.inp), free(e.out), free(e.r), free(dinp);
    }
}

typedef struct {
    size_t B, T, C, V;
    int32_t *tok;
    float *wte, *wpe, *out, *r;
} en_case;

static double en_loss(void *ud)
{
    en_case *e = ud;
    RUN(krn_encoder_forward(ctx, e->out, e->tok, e->wte, e->wpe, e->B, e->T, e->C, e->V));
    return dot_r(e->out, e->r, e->B * e->T * e->C);
}

static void test_encoder(void)
{
    en_case e = {.B = 2, .T = 6, .C = 5, .V = 4};
    e.tok = malloc(e.B * e.T * sizeof *e.tok);
    for (size_t i = 0; i < e.B * e.T; i++)
        e.tok[i] = (int32_t)(i * 7 % e.V);
    e.wte = fx_normal(e.V * e.C, 5, 1, 1.0);
    e.wpe = fx_normal(e.T * e.C, 5, 2, 1.0);
    e.out = fx_alloc(e.B * e.T * e.C);
    e.r = fx_normal(e.B * e.T * e.C, 5, 3, 1.0);
    float *dwte = fx_alloc(e.V * e.C), *dwpe = fx_alloc(e.T * e.C);
    RUN(krn_encoder_backward(ctx, dwte, dwpe, e.r, e.tok, e.B, e.T, e.C, e.V));
    fd_check("encoder dwte", e.wte, e.V * e.C, dwte, en_loss, &e);
    fd_check("encoder dwpe", e.wpe, e.T * e.C, dwpe, en_loss, &e);
    free(e.tok), free(e.wte), free(e.wpe), free(e.out), free(e.r), free(dwte), free(dwpe);
}

typedef struct {
    size_t N, C;
    float *inp, *bias, *out, *r;
} bi_case;

static double bi_loss(void *ud)
{
    bi_case *b = ud;
    RUN(krn_bias_forward(ctx, b->out, b->inp, b->bias, b->N, b->C));
    return dot_r(b->out, b->r, b->N * b->C);
}

static void test_bias_residual(void)
{
    bi_case b = {.N = 6, .C = 4};
    b.inp = fx_normal(b.N * b.C, 6, 1, 1.0);
    b.bias = fx_normal(b.C, 6, 2, 1.0);
    b.out = fx_alloc(b.N * b.C);
    b.r = fx_normal(b.N * b.C, 6, 3, 1.0);
    float *db = fx_alloc(b.C);
    RUN(krn_bias_backward(ctx, db, b.r, b.N, b.C));
    fd_check("bias dbias", b.bias, b.C, db, bi_loss, &b);
    /* residual: out = a + b, both gradients = dout */
    float *d1 = fx_alloc(b.C), *d2 = fx_const(b.C, 1.0f);
    RUN(krn_residual_backward(ctx, d1, d2, b.r, b.C));
    for (size_t i = 0; i < b.C; i++) {
        CHECK(d1[i] == b.r[i]);
        CHECK(d2[i] == krn_grid_round(1.0 + (double)b.r[i], 32));
    }
    free(b.inp), free(b.bias), free(b.out), free(b.r), free(db), free(d1), free(d2);
}

typedef struct {
    size_t N, V;
    int32_t *tgt;
    float *logits, *probs, *losses;
} ce_case;

static double ce_loss(void *ud)
{
    ce_case *c = ud;
    float loss;
    RUN(krn_crossentropy_forward(ctx, &loss, c->losses, c->probs, c->logits, c->tgt, c->N, c->V));
    return loss;
}

static void test_crossentropy(void)
{
    ce_case c = {.N = 4, .V = 9};
    c.tgt = malloc(c.N * sizeof *c.tgt);
    for (size_t i = 0; i < c.N; i++)
        c.tgt[i] = (int32_t)(i * 5 % c.V);
    c.logits = fx_normal(c.N * c.V, 7, 1, 2.0);
    c.probs = fx_alloc(c.N * c.V);
    c.losses = fx_alloc(c.N);
    double loss = ce_loss(&c);
    /* the loss against an FP64 log-sum-exp */
    double want = 0;
    for (size_t i = 0; i < c.N; i++) {
        double s = 0;
        for (size_t j = 0; j < c.V; j++)
            s += exp((double)c.logits[i * c.V + j]);
        want += log(s) - (double)c.logits[i * c.V + (size_t)c.tgt[i]];
    }
    want /= (double)c.N;
    CHECK_MSG(fabs(loss - want) <= 1e-6 * (1 + fabs(want)), "loss %.9g, want %.9g", loss, want);
    float *dl = fx_alloc(c.N * c.V);
    RUN(krn_crossentropy_backward(ctx, dl, c.probs, c.tgt, 1.0f, c.N, c.V));
    fd_check("crossentropy dlogits", c.logits, c.N * c.V, dl, ce_loss, &c);
    free(c.tgt), free(c.logits), free(c.probs), free(c.losses), free(dl);
}

/* ---- optimizer against FP64 formulas ---- */

static void test_optimizer(void)
{
    size_t n = 1000;
    float *g = fx_normal(n, 8, 1, 1.0), *p = fx_normal(n, 8, 2, 1.0);
    float *m = fx_normal(n, 8, 3, 0.1), *v = fx_uniform(n, 8, 4, 0.0, 0.1);
    float *p0 = fx_alloc(n), *m0 = fx_alloc(n), *v0 = fx_alloc(n);
    memcpy(p0, p, n * sizeof *p);
    memcpy(m0, m, n * sizeof *m);
    memcpy(v0, v, n * sizeof *v);
    float norm, factor, bc1, bc2;
    RUN(krn_grad_norm(ctx, &norm, g, n));
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)g[i] * g[i];
    CHECK(fabs((double)norm - sqrt(ss)) <= 1e-6 * sqrt(ss));
    RUN(krn_clip_factor(ctx, &factor, norm, 1.0f));
    CHECK(fabs((double)factor - 1.0 / (double)norm) <= 1e-7 / (double)norm);
    RUN(krn_clip_factor(ctx, &factor, 0.5f, 1.0f));
    CHECK(factor == 1.0f);
    RUN(krn_adamw_corrections(ctx, &bc1, &bc2, 0.9f, 0.95f, 3));
    CHECK(fabs((double)bc1 - (1 - pow(0.9f, 3))) < 1e-7);
    CHECK(fabs((double)bc2 - (1 - pow(0.95f, 3))) < 1e-7);
    float lr = 1e-3f, wd = 0.1f, eps = 1e-8f, scale = 0.5f;
    RUN(krn_adamw_update(ctx, p, m, v, g, bc1, bc2, lr, 0.9f, 0.95f, eps, wd, scale, n));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double gi = (double)g[i] * scale;
        double b1 = 0.9f, b2 = 0.95f; /* the grid values the op was given */
        double mi = b1 * m0[i] + (1 - b1) * gi, vi = b2 * v0[i] + (1 - b2) * gi * gi;
        double pi = p0[i] - lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + wd * p0[i]);
        bad += fabs((double)m[i] - mi) > 1e-6 * (fabs(mi) + 1e-6);
        bad += fabs((double)v[i] - vi) > 1e-6 * (fabs(vi) + 1e-9);
        bad += fabs((double)p[i] - pi) > 1e-6 * (fabs(pi) + 1e-6);
    }
    CHECK_MSG(bad == 0, "%zu AdamW values off the FP64 formula", bad);
    free(g), free(p), free(m), free(v), free(p0), free(m0), free(v0);
}

int main(void)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = 32, .threads = 1};
    if (krn_ctx_new(&ctx, &cfg) != 0 || krn_step_begin(ctx, 0, NULL) != 0) {
        fprintf(stderr, "ctx: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK_RUN(test_matmul());
    CHECK_RUN(test_layernorm());
    CHECK_RUN(test_attention());
    CHECK_RUN(test_elementwise());
    CHECK_RUN(test_encoder());
    CHECK_RUN(test_bias_residual());
    CHECK_RUN(test_crossentropy());
    CHECK_RUN(test_optimizer());
    /* released scratch grows back on the next call */
    krn_ops_release();
    float in[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, out = 0;
    CHECK(krn_matmul_forward(ctx, &out, in, w, NULL, 1, 4, 1) == 0 && out == 10.0f);
    krn_ops_release();
    krn_ctx_free(ctx);
    return check_done();
}
