/* The math of the Llama ops (kernels/ops.h), not only their
 * reproducibility (test_ops_replay): every backward against central finite
 * differences of its forward (fd_check.h), forward values against ones
 * computed by hand (Python's float64 math, rounded to FP32, written in as
 * literals), and grouped-query attention against GPT-2's attention: with
 * NKV = NH it is the same op, bit for bit, and with NKV < NH the forward is
 * multi-head attention with each key/value head repeated, bit for bit.
 * The cpu backend in NEAREST mode. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/ops.h"
#include "fd_check.h"
#include "ops_fixture.h"

static krn_ctx *ctx;

/* |got - want| <= rel * |want| + abs, with a message naming what. */
static void check_near(const char *what, double got, double want, double rel, double abs)
{
    CHECK_MSG(fabs(got - want) <= rel * fabs(want) + abs, "%s: %.9g, want %.9g", what, got, want);
}

/* ---- RMSNorm ---- */

typedef struct {
    size_t N, C;
    float *inp, *w, *out, *rstd, *r;
} rms_case;

static double rms_loss(void *ud)
{
    rms_case *c = ud;
    RUN(krn_rmsnorm_forward(ctx, c->out, c->rstd, c->inp, c->w, 1e-5, c->N, c->C));
    return dot_r(c->out, c->r, c->N * c->C);
}

static void test_rmsnorm(void)
{
    /* row [3, 4], weight [1, 2]: ms = 12.5, rstd = 1/sqrt(12.50001) */
    float x[2] = {3, 4}, w2[2] = {1, 2}, out2[2], rstd1;
    RUN(krn_rmsnorm_forward(ctx, out2, &rstd1, x, w2, 1e-5, 1, 2));
    CHECK(rstd1 == 0.28284260630607605f);
    CHECK(out2[0] == 0.8485277891159058f);
    CHECK(out2[1] == 2.2627408504486084f);
    CHECK(krn_rmsnorm_forward(ctx, out2, &rstd1, x, w2, 0.0, 1, 2) == OVT_EINVAL);

    rms_case c = {.N = 4, .C = 24};
    c.inp = fx_normal(c.N * c.C, 21, 1, 1.0);
    c.w = fx_normal(c.C, 21, 2, 1.0);
    c.out = fx_alloc(c.N * c.C);
    c.rstd = fx_alloc(c.N);
    c.r = fx_normal(c.N * c.C, 21, 3, 1.0);
    rms_loss(&c);
    float *dinp = fx_alloc(c.N * c.C), *dw = fx_alloc(c.C);
    RUN(krn_rmsnorm_backward(ctx, dinp, dw, c.r, c.inp, c.w, c.rstd, c.N, c.C));
    fd_check("rmsnorm dinp", c.inp, c.N * c.C, dinp, rms_loss, &c);
    fd_check("rmsnorm dweight", c.w, c.C, dw, rms_loss, &c);
    free(c.inp), free(c.w), free(c.out), free(c.rstd), free(c.r), free(dinp), free(dw);
}

/* ---- rotary position embedding ---- */

typedef struct {
    size_t B, T, NH, hs;
    float *cs, *sn, *inp, *out, *r;
} rope_case;

static double rope_loss(void *ud)
{
    rope_case *c = ud;
    RUN(krn_rope_forward(ctx, c->out, c->inp, c->cs, c->sn, c->B, c->T, c->NH, c->hs));
    return dot_r(c->out, c->r, c->B * c->T * c->NH * c->hs);
}

static void test_rope(void)
{
    /* theta 10000, hs 4: freq = [1, 10000^-0.5 = 0.01 (FP32 0.0099999998)] */
    float cs[6], sn[6];
    RUN(krn_rope_table(ctx, cs, sn, 3, 4, 10000.0));
    static const float want_cos[6] = {1.0f, 1.0f, 0.5403022766113281f, 0.9999499917030334f,
                                      -0.416146844625473f, 0.9998000264167786f};
    static const float want_sin[6] = {0.0f, 0.0f, 0.8414709568023682f, 0.009999833069741726f,
                                      0.9092974066734314f, 0.019998665899038315f};
    for (size_t k = 0; k < 6; k++) { /* one FP32 ulp: the libm band lets a near-midpoint value go either way */
        check_near("rope cos", cs[k], want_cos[k], 0x1p-23, 0);
        check_near("rope sin", sn[k], want_sin[k], 0x1p-23, 0);
    }
    /* position 1 of one head: (1, 2) turns by 1 radian, (3, 4) by 0.01 */
    float x[8] = {9, 9, 9, 9, 1, 2, 3, 4}, y[8];
    RUN(krn_rope_forward(ctx, y, x, cs, sn, 1, 2, 1, 4));
    double c1 = 0.5403023058681398, s1 = 0.8414709848078965, c2 = 0.9999500004166653, s2 = 0.009999833334166664;
    check_near("rope fwd x0", y[4], 1 * c1 - 2 * s1, 1e-6, 1e-7);
    check_near("rope fwd x1", y[5], 1 * s1 + 2 * c1, 1e-6, 1e-7);
    check_near("rope fwd x2", y[6], 3 * c2 - 4 * s2, 1e-6, 1e-7);
    check_near("rope fwd x3", y[7], 3 * s2 + 4 * c2, 1e-6, 1e-7);
    CHECK(y[0] == 9 && y[1] == 9 && y[2] == 9 && y[3] == 9); /* position 0: cos 1, sin 0 */
    RUN(krn_rope_forward(ctx, x, x, cs, sn, 1, 2, 1, 4)); /* in place: the same values */
    CHECK(memcmp(x, y, sizeof x) == 0);

    rope_case c = {.B = 2, .T = 7, .NH = 3, .hs = 6};
    size_t n = c.B * c.T * c.NH * c.hs, nt = c.T * c.hs / 2;
    c.cs = fx_alloc(nt);
    c.sn = fx_alloc(nt);
    RUN(krn_rope_table(ctx, c.cs, c.sn, c.T, c.hs, 500000.0));
    c.inp = fx_normal(n, 22, 1, 1.0);
    c.out = fx_alloc(n);
    c.r = fx_normal(n, 22, 2, 1.0);
    float *dinp = fx_alloc(n);
    RUN(krn_rope_backward(ctx, dinp, c.r, c.cs, c.sn, c.B, c.T, c.NH, c.hs));
    fd_check("rope dinp", c.inp, n, dinp, rope_loss, &c);
    free(c.cs), free(c.sn), free(c.inp), free(c.out), free(c.r), free(dinp);
}

/* ---- SwiGLU ---- */

typedef struct {
    size_t n;
    float *a, *b, *out, *r;
} swiglu_case;

static double swiglu_loss(void *ud)
{
    swiglu_case *c = ud;
    RUN(krn_swiglu_forward(ctx, c->out, c->a, c->b, c->n));
    return dot_r(c->out, c->r, c->n);
}

static void test_swiglu(void)
{
    /* silu(a) * b = a*b / (1 + exp(-a)) */
    float a[4] = {1, -2, 0, 10}, b[4] = {1, 1, 3, -0.5f}, out[4];
    RUN(krn_swiglu_forward(ctx, out, a, b, 4));
    static const double want[4] = {0.7310585786300049, -0.2384058440442351, 0.0, -4.9997730106564875};
    for (size_t i = 0; i < 4; i++)
        check_near("swiglu fwd", out[i], want[i], 1e-6, 0);

    swiglu_case c = {.n = 40};
    c.a = fx_normal(c.n, 23, 1, 3.0);
    c.b = fx_normal(c.n, 23, 2, 1.0);
    c.out = fx_alloc(c.n);
    c.r = fx_normal(c.n, 23, 3, 1.0);
    float *da = fx_alloc(c.n), *db = fx_alloc(c.n);
    RUN(krn_swiglu_backward(ctx, da, db, c.r, c.a, c.b, c.n));
    fd_check("swiglu da", c.a, c.n, da, swiglu_loss, &c);
    fd_check("swiglu db", c.b, c.n, db, swiglu_loss, &c);
    free(c.a), free(c.b), free(c.out), free(c.r), free(da), free(db);
}

/* ---- grouped-query attention ---- */

typedef struct {
    size_t B, T, NH, NKV, hs;
    float *q, *k, *v, *out, *pre, *att, *r;
} gqa_case;

static double gqa_loss(void *ud)
{
    gqa_case *c = ud;
    RUN(krn_gqa_forward(ctx, c->out, c->pre, c->att, c->q, c->k, c->v, c->B, c->T, c->NH, c->NKV, c->hs));
    return dot_r(c->out, c->r, c->B * c->T * c->NH * c->hs);
}

/* Columns [off, off + width) of each of rows rows of m (row stride ld) into
 * dst (row stride dld, at doff). */
static void copy_cols(float *dst, size_t dld, size_t doff, const float *m, size_t ld, size_t off, size_t width,
                      size_t rows)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(dst + r * dld + doff, m + r * ld + off, width * sizeof(float));
}

static bool same(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Frees a NULL-terminated list of buffers. */
static void free_list(float **bufs)
{
    for (; *bufs; bufs++)
        free(*bufs);
}

/* NKV = NH: krn_gqa_* on q, k, v is krn_attention_* on the fused qkv, bit
 * for bit (outputs, saved and scratch tensors, gradients). */
static void test_gqa_is_mha(void)
{
    size_t B = 2, T = 6, NH = 2, hs = 4, C = NH * hs, bt = B * T, ntt = B * NH * T * T;
    float *qkv = fx_normal(bt * 3 * C, 24, 1, 1.0), *q = fx_alloc(bt * C), *k = fx_alloc(bt * C);
    float *v = fx_alloc(bt * C);
    copy_cols(q, C, 0, qkv, 3 * C, 0, C, bt);
    copy_cols(k, C, 0, qkv, 3 * C, C, C, bt);
    copy_cols(v, C, 0, qkv, 3 * C, 2 * C, C, bt);
    float *o1 = fx_alloc(bt * C), *p1 = fx_alloc(ntt), *a1 = fx_alloc(ntt);
    float *o2 = fx_alloc(bt * C), *p2 = fx_alloc(ntt), *a2 = fx_alloc(ntt);
    RUN(krn_attention_forward(ctx, o1, p1, a1, qkv, B, T, C, NH));
    RUN(krn_gqa_forward(ctx, o2, p2, a2, q, k, v, B, T, NH, NH, hs));
    CHECK(same(o1, o2, bt * C) && same(p1, p2, ntt) && same(a1, a2, ntt));

    float *dout = fx_normal(bt * C, 24, 2, 1.0), *dinp = fx_normal(bt * 3 * C, 24, 3, 0.5);
    float *dq = fx_alloc(bt * C), *dk = fx_alloc(bt * C), *dv = fx_alloc(bt * C), *part = fx_alloc(bt * C);
    float *dt1 = fx_alloc(ntt), *dt2 = fx_alloc(ntt);
    copy_cols(dq, C, 0, dinp, 3 * C, 0, C, bt);
    copy_cols(dk, C, 0, dinp, 3 * C, C, C, bt);
    copy_cols(dv, C, 0, dinp, 3 * C, 2 * C, C, bt);
    RUN(krn_attention_backward(ctx, dinp, p1, dt1, dout, qkv, a1, B, T, C, NH));
    RUN(krn_gqa_backward(ctx, dq, dk, dv, p2, dt2, dout, q, k, v, a1, B, T, NH, NH, hs));
    CHECK(same(p1, p2, ntt) && same(dt1, dt2, ntt)); /* dpreatt, datt */
    float *grads[3] = {dq, dk, dv};
    for (size_t third = 0; third < 3; third++) {
        copy_cols(part, C, 0, dinp, 3 * C, third * C, C, bt);
        CHECK_MSG(same(part, grads[third], bt * C), "gqa gradient %zu differs from attention's", third);
    }
    free_list((float *[]){qkv, q, k, v, o1, p1, a1, o2, p2, a2, dout, dinp, dq, dk, dv, part, dt1, dt2, NULL});
}

/* NKV < NH: the forward is multi-head attention with key/value head j
 * repeated for its G query heads, bit for bit; the backward's dk and dv
 * are the sums over the G heads of that attention's, to rounding (one
 * chunked sum against G rounded ones). */
static void test_gqa_groups(void)
{
    size_t B = 2, T = 5, NH = 4, NKV = 2, G = NH / NKV, hs = 3, C = NH * hs, KVW = NKV * hs, bt = B * T;
    size_t ntt = B * NH * T * T;
    float *q = fx_normal(bt * C, 25, 1, 1.0), *k = fx_normal(bt * KVW, 25, 2, 1.0), *v = fx_normal(bt * KVW, 25, 3, 1.0);
    float *kr = fx_alloc(bt * C), *vr = fx_alloc(bt * C);
    for (size_t h = 0; h < NH; h++) {
        copy_cols(kr, C, h * hs, k, KVW, h / G * hs, hs, bt);
        copy_cols(vr, C, h * hs, v, KVW, h / G * hs, hs, bt);
    }
    float *o1 = fx_alloc(bt * C), *p1 = fx_alloc(ntt), *a1 = fx_alloc(ntt);
    float *o2 = fx_alloc(bt * C), *p2 = fx_alloc(ntt), *a2 = fx_alloc(ntt);
    RUN(krn_gqa_forward(ctx, o1, p1, a1, q, k, v, B, T, NH, NKV, hs));
    RUN(krn_gqa_forward(ctx, o2, p2, a2, q, kr, vr, B, T, NH, NH, hs));
    CHECK(same(o1, o2, bt * C) && same(p1, p2, ntt) && same(a1, a2, ntt));

    float *dout = fx_normal(bt * C, 25, 4, 1.0), *dt = fx_alloc(ntt);
    float *dq1 = fx_alloc(bt * C), *dk1 = fx_alloc(bt * KVW), *dv1 = fx_alloc(bt * KVW);
    float *dq2 = fx_alloc(bt * C), *dk2 = fx_alloc(bt * C), *dv2 = fx_alloc(bt * C);
    RUN(krn_gqa_backward(ctx, dq1, dk1, dv1, p1, dt, dout, q, k, v, a1, B, T, NH, NKV, hs));
    RUN(krn_gqa_backward(ctx, dq2, dk2, dv2, p2, dt, dout, q, kr, vr, a1, B, T, NH, NH, hs));
    CHECK(same(dq1, dq2, bt * C));
    for (size_t r = 0; r < bt; r++)
        for (size_t j = 0; j < KVW; j++) {
            double sk = 0, sv = 0;
            for (size_t g = 0; g < G; g++) {
                sk += dk2[r * C + (j / hs * G + g) * hs + j % hs];
                sv += dv2[r * C + (j / hs * G + g) * hs + j % hs];
            }
            check_near("gqa dk", dk1[r * KVW + j], sk, 1e-6, 1e-7);
            check_near("gqa dv", dv1[r * KVW + j], sv, 1e-6, 1e-7);
        }
    free_list((float *[]){q, k, v, kr, vr, o1, p1, a1, o2, p2, a2, dout, dt, dq1, dk1, dv1, dq2, dk2, dv2, NULL});
}

static void test_gqa_grad(void)
{
    gqa_case c = {.B = 2, .T = 5, .NH = 4, .NKV = 2, .hs = 3};
    size_t nq = c.B * c.T * c.NH * c.hs, nkv = c.B * c.T * c.NKV * c.hs, ntt = c.B * c.NH * c.T * c.T;
    c.q = fx_normal(nq, 26, 1, 1.0);
    c.k = fx_normal(nkv, 26, 2, 1.0);
    c.v = fx_normal(nkv, 26, 3, 1.0);
    c.out = fx_alloc(nq);
    c.pre = fx_alloc(ntt);
    c.att = fx_alloc(ntt);
    c.r = fx_normal(nq, 26, 4, 1.0);
    gqa_loss(&c);
    float *dq = fx_alloc(nq), *dk = fx_alloc(nkv), *dv = fx_alloc(nkv), *dpre = fx_alloc(ntt), *datt = fx_alloc(ntt);
    RUN(krn_gqa_backward(ctx, dq, dk, dv, dpre, datt, c.r, c.q, c.k, c.v, c.att, c.B, c.T, c.NH, c.NKV, c.hs));
    fd_check("gqa dq", c.q, nq, dq, gqa_loss, &c);
    fd_check("gqa dk", c.k, nkv, dk, gqa_loss, &c);
    fd_check("gqa dv", c.v, nkv, dv, gqa_loss, &c);
    CHECK(krn_gqa_forward(ctx, c.out, c.pre, c.att, c.q, c.k, c.v, c.B, c.T, 4, 3, c.hs) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "do not divide") != NULL);
    free_list((float *[]){c.q, c.k, c.v, c.out, c.pre, c.att, c.r, dq, dk, dv, dpre, datt, NULL});
}

/* ---- the encoder without position embeddings ---- */

static void test_encoder_nopos(void)
{
    size_t B = 2, T = 3, C = 4, V = 5;
    int32_t tok[6] = {1, 4, 1, 0, 4, 1};
    float *wte = fx_normal(V * C, 27, 1, 1.0), *out = fx_alloc(B * T * C), *dout = fx_normal(B * T * C, 27, 2, 1.0);
    float *dwte = fx_normal(V * C, 27, 3, 1.0), *old = fx_alloc(V * C);
    memcpy(old, dwte, V * C * sizeof *old);
    RUN(krn_encoder_forward(ctx, out, tok, wte, NULL, B, T, C, V));
    for (size_t i = 0; i < B * T; i++)
        CHECK(same(out + i * C, wte + (size_t)tok[i] * C, C));
    RUN(krn_encoder_backward(ctx, dwte, NULL, dout, tok, B, T, C, V));
    for (size_t v = 0; v < V; v++)
        for (size_t c = 0; c < C; c++) {
            double s = old[v * C + c];
            for (size_t i = 0; i < B * T; i++)
                s += tok[i] == (int32_t)v ? dout[i * C + c] : 0.0;
            check_near("encoder dwte", dwte[v * C + c], s, 1e-6, 1e-7);
        }
    free_list((float *[]){wte, out, dout, dwte, old, NULL});
}

int main(void)
{
    krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = 32, .threads = 1};
    if (krn_ctx_new(&ctx, &cfg) != 0 || krn_step_begin(ctx, 0, NULL) != 0) {
        fprintf(stderr, "ctx: %s\n", ovt_errmsg());
        return 1;
    }
    CHECK_RUN(test_rmsnorm());
    CHECK_RUN(test_rope());
    CHECK_RUN(test_swiglu());
    CHECK_RUN(test_gqa_is_mha());
    CHECK_RUN(test_gqa_groups());
    CHECK_RUN(test_gqa_grad());
    CHECK_RUN(test_encoder_nopos());
    CHECK(krn_step_end(ctx, NULL) == 0);
    krn_ctx_free(ctx);
    return check_done();
}
