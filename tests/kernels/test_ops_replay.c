/* Every op: outputs computed on one backend (RECORD) and replayed on another
 * with the first one's rounding log (REPLAY) are bitwise identical, over
 * seeds, shapes (including reductions longer than a chunk) and backend
 * pairs. On inputs built on grid midpoints (tests/kernels/ops_fixture.h),
 * replaying without the log (NEAREST) differs: asserted for every op whose
 * sites include a reduction. Exact ops (delta = 0) never log and agree
 * anyway. Also: misuse and bad input give clear errors, the cuda backend
 * is refused with a clear message where it is not built or has no device. */
#include <stdbool.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/ops.h"
#include "kernels/reduce.h"
#include "kernels/rlog.h"
#include "kernels/widen.h"
#include "ops_fixture.h"
#include "cuda_device_checks.h"

/* ---- output collection ---- */

typedef struct {
    float *v;
    size_t n;
} outv;

static void out_add(outv *o, const float *a, size_t n)
{
    o->v = realloc(o->v, (o->n + n) * sizeof(float));
    if (!o->v) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    memcpy(o->v + o->n, a, n * sizeof(float));
    o->n += n;
}

/* Frees a NULL-terminated list of buffers. */
static void free_all(float **bufs)
{
    for (; *bufs; bufs++)
        free(*bufs);
}

/* ---- the ops under test: each builds its inputs from (seed, pattern),
 * runs on ctx and appends every output to o ---- */

typedef int (*op_fn)(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o);

static int op_matmul_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 16 : 7, C = pattern ? 8 : (seed % 2 ? 300 : 40), OC = pattern ? 12 : 9;
    float *inp = fx_normal(N * C, seed, 1, 1.0), *w = fx_normal(OC * C, seed, 2, 0.1);
    float *bias = pattern ? fx_const(OC, 0) : fx_normal(OC, seed, 3, 1.0), *out = fx_alloc(N * OC);
    if (pattern) {
        fx_pattern_rows(inp, N, C, seed, 1);
        for (size_t j = 0; j < OC; j++)
            for (size_t k = 0; k < C; k++)
                w[j * C + k] = ldexpf(1.0f, (int)(j % 3));
    }
    int rc = krn_matmul_forward(ctx, out, inp, w, bias, N, C, OC);
    out_add(o, out, N * OC);
    free_all((float *[]){inp, w, bias, out, NULL});
    return rc;
}

static int op_matmul_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    /* random shapes put each of the three reductions over a chunk in turn */
    size_t N = 8, C = 5, OC = 8;
    if (!pattern) {
        N = seed % 3 == 0 ? 270 : 6;
        OC = seed % 3 == 1 ? 260 : 11;
        C = 13;
    }
    float *dout = fx_normal(N * OC, seed, 1, 1.0), *inp = fx_normal(N * C, seed, 2, 1.0);
    float *w = fx_normal(OC * C, seed, 3, 0.2);
    float *dinp = pattern ? fx_const(N * C, 0) : fx_normal(N * C, seed, 4, 0.5);
    float *dw = pattern ? fx_const(OC * C, 0) : fx_normal(OC * C, seed, 5, 0.5);
    float *db = pattern ? fx_const(OC, 0) : fx_normal(OC, seed, 6, 0.5);
    if (pattern) {
        fx_latin(dout, seed, 7);
        for (size_t c = 0; c < C; c++) {
            for (size_t i = 0; i < N; i++)
                inp[i * C + c] = ldexpf(1.0f, (int)(c % 3));
            for (size_t j = 0; j < OC; j++)
                w[j * C + c] = ldexpf(1.0f, -(int)(c % 2));
        }
    }
    int rc = krn_matmul_backward(ctx, dinp, dw, db, dout, inp, w, N, C, OC);
    out_add(o, dinp, N * C);
    out_add(o, dw, OC * C);
    out_add(o, db, OC);
    free_all((float *[]){dout, inp, w, dinp, dw, db, NULL});
    return rc;
}

static int op_bias(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 8 : 300, C = pattern ? 8 : 7;
    float *inp = fx_normal(N * C, seed, 1, 1.0), *bias = fx_normal(C, seed, 2, 1.0);
    float *out = fx_alloc(N * C), *db = pattern ? fx_const(C, 0) : fx_normal(C, seed, 3, 1.0);
    if (pattern)
        fx_latin(inp, seed, 4);
    int rc = krn_bias_forward(ctx, out, inp, bias, N, C);
    if (rc == 0)
        rc = krn_bias_backward(ctx, db, inp, N, C); /* inp doubles as dout */
    out_add(o, out, N * C);
    out_add(o, db, C);
    free_all((float *[]){inp, bias, out, db, NULL});
    return rc;
}

static int op_layernorm_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 8 : 6, C = pattern ? 8 : (seed % 2 ? 300 : 24);
    float *inp = fx_normal(N * C, seed, 1, 2.0), *w = fx_normal(C, seed, 2, 1.0);
    float *b = fx_normal(C, seed, 3, 1.0);
    float *out = fx_alloc(N * C), *mean = fx_alloc(N), *rstd = fx_alloc(N);
    if (pattern)
        fx_pattern_rows(inp, N, C, seed, 4);
    int rc = krn_layernorm_forward(ctx, out, mean, rstd, inp, w, b, N, C);
    out_add(o, out, N * C);
    out_add(o, mean, N);
    out_add(o, rstd, N);
    free_all((float *[]){inp, w, b, out, mean, rstd, NULL});
    return rc;
}

static int op_layernorm_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 8 : (seed % 2 ? 270 : 5), C = pattern ? 8 : (seed % 2 ? 6 : 280);
    float *dout = fx_normal(N * C, seed, 1, 1.0), *inp = fx_normal(N * C, seed, 2, 1.0);
    float *w = pattern ? fx_const(C, 1) : fx_normal(C, seed, 3, 1.0);
    float *mean = fx_normal(N, seed, 4, 0.1), *rstd = fx_uniform(N, seed, 5, 0.5, 2.0);
    float *dinp = pattern ? fx_const(N * C, 0) : fx_normal(N * C, seed, 6, 1.0);
    float *dw = pattern ? fx_const(C, 0) : fx_normal(C, seed, 7, 1.0);
    float *db = pattern ? fx_const(C, 0) : fx_normal(C, seed, 8, 1.0);
    if (pattern)
        fx_latin(dout, seed, 9);
    int rc = krn_layernorm_backward(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    out_add(o, dinp, N * C);
    out_add(o, dw, C);
    out_add(o, db, C);
    free_all((float *[]){dout, inp, w, mean, rstd, dinp, dw, db, NULL});
    return rc;
}

static int op_attention_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    /* pattern: hs = 16 so the scale 1/4 keeps a midpoint a midpoint */
    size_t B = 2, T = pattern ? 5 : (seed % 2 ? 9 : 4), NH = 2, C = pattern ? 32 : 12;
    float *inp = fx_normal(B * T * 3 * C, seed, 1, 1.0);
    float *out = fx_alloc(B * T * C), *pre = fx_alloc(B * NH * T * T), *att = fx_alloc(B * NH * T * T);
    if (pattern) {
        size_t hs = C / NH;
        for (size_t bt = 0; bt < B * T; bt++)
            for (size_t h = 0; h < NH; h++) {
                float *q = inp + bt * 3 * C + h * hs, *k = q + C;
                fx_pattern_rows(q, 1, hs, seed, 100 + bt * NH + h);
                for (size_t i = 0; i < hs; i++) {
                    q[i] = i < FX_PATTERN ? q[i] : 0.0f;
                    k[i] = 1.0f;
                }
            }
    }
    int rc = krn_attention_forward(ctx, out, pre, att, inp, B, T, C, NH);
    out_add(o, out, B * T * C);
    out_add(o, pre, B * NH * T * T);
    out_add(o, att, B * NH * T * T);
    free_all((float *[]){inp, out, pre, att, NULL});
    return rc;
}

static int op_attention_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t B = 2, T = pattern ? 5 : (seed % 2 ? 9 : 4), NH = 2, C = pattern ? 32 : 12;
    size_t ntt = B * NH * T * T;
    float *inp = fx_normal(B * T * 3 * C, seed, 1, 1.0), *dout = fx_normal(B * T * C, seed, 2, 1.0);
    float *att = fx_uniform(ntt, seed, 3, 0.0, 1.0);
    float *dinp = pattern ? fx_const(B * T * 3 * C, 0) : fx_normal(B * T * 3 * C, seed, 4, 0.5);
    float *dpre = fx_alloc(ntt), *datt = fx_alloc(ntt);
    for (size_t r = 0; r < B * NH * T; r++)
        for (size_t t2 = r % T + 1; t2 < T; t2++)
            att[r * T + t2] = 0; /* causal */
    if (pattern) {
        size_t hs = C / NH;
        for (size_t bt = 0; bt < B * T; bt++)
            for (size_t h = 0; h < NH; h++) {
                float *g = dout + bt * C + h * hs, *v = inp + bt * 3 * C + 2 * C + h * hs;
                fx_pattern_rows(g, 1, hs, seed, 200 + bt * NH + h);
                for (size_t i = 0; i < hs; i++) {
                    g[i] = i < FX_PATTERN ? g[i] : 0.0f;
                    v[i] = 1.0f;
                }
            }
    }
    int rc = krn_attention_backward(ctx, dinp, dpre, datt, dout, inp, att, B, T, C, NH);
    out_add(o, dinp, B * T * 3 * C);
    out_add(o, dpre, ntt);
    out_add(o, datt, ntt);
    free_all((float *[]){inp, dout, att, dinp, dpre, datt, NULL});
    return rc;
}

/* The encoder forward and backward, with position embeddings (GPT-2) or
 * without (Llama: wpe, dwpe NULL). */
static int encoder_run(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o, bool pos)
{
    size_t B = pattern ? 8 : 3, T = pattern ? 1 : 9, C = pattern ? 8 : 6, V = 7;
    int32_t *tok = malloc(B * T * sizeof *tok);
    for (size_t i = 0; i < B * T; i++)
        tok[i] = pattern ? 3 : (int32_t)krn_rng_below(seed, 9, KRN_RNG_TEST, i, V);
    float *wte = fx_normal(V * C, seed, 1, 1.0), *wpe = pos ? fx_normal(T * C, seed, 2, 1.0) : NULL;
    float *out = fx_alloc(B * T * C), *dout = fx_normal(B * T * C, seed, 3, 1.0);
    float *dwte = pattern ? fx_const(V * C, 0) : fx_normal(V * C, seed, 4, 1.0);
    float *dwpe = !pos ? NULL : pattern ? fx_const(T * C, 0) : fx_normal(T * C, seed, 5, 1.0);
    if (pattern)
        fx_latin(dout, seed, 6);
    int rc = krn_encoder_forward(ctx, out, tok, wte, wpe, B, T, C, V);
    if (rc == 0)
        rc = krn_encoder_backward(ctx, dwte, dwpe, dout, tok, B, T, C, V);
    out_add(o, out, B * T * C);
    out_add(o, dwte, V * C);
    if (pos)
        out_add(o, dwpe, T * C);
    free(tok);
    free(wpe);
    free(dwpe);
    free_all((float *[]){wte, out, dout, dwte, NULL});
    return rc;
}

static int op_encoder(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    return encoder_run(ctx, seed, pattern, o, true);
}

static int op_encoder_nopos(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    return encoder_run(ctx, seed, pattern, o, false);
}

static int op_gelu(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t n = 500;
    float *x = fx_normal(n, seed, 1, 2.0), *dout = fx_normal(n, seed, 2, 1.0);
    for (size_t i = 0; pattern && i < n; i++)
        x[i] = i % 2 ? FX_TANH_INPUT : -FX_TANH_INPUT;
    float *out = fx_alloc(n), *dinp = fx_normal(n, seed, 3, 1.0);
    int rc = krn_gelu_forward(ctx, out, x, n);
    if (rc == 0)
        rc = krn_gelu_backward(ctx, dinp, x, dout, n);
    out_add(o, out, n);
    out_add(o, dinp, n);
    free_all((float *[]){x, dout, out, dinp, NULL});
    return rc;
}

static int op_crossentropy(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = 6, V = seed % 2 ? 300 : 10;
    int32_t *tgt = malloc(N * sizeof *tgt);
    for (size_t i = 0; i < N; i++)
        tgt[i] = (int32_t)krn_rng_below(seed, 9, KRN_RNG_TEST, i, V);
    float *logits = fx_normal(N * V, seed, 1, 3.0), *probs = fx_alloc(N * V), *losses = fx_alloc(N);
    for (size_t i = 0; pattern && i < N * V; i++) /* rows [0, e, e, ...]: exp(e) near a midpoint */
        logits[i] = i % V ? FX_EXP_INPUT : 0.0f;
    float *dlogits = fx_normal(N * V, seed, 2, 0.1), loss = 0;
    int rc = krn_crossentropy_forward(ctx, &loss, losses, probs, logits, tgt, N, V);
    if (rc == 0)
        rc = krn_crossentropy_backward(ctx, dlogits, probs, tgt, 1.0f, N, V);
    out_add(o, &loss, 1);
    out_add(o, losses, N);
    out_add(o, probs, N * V);
    out_add(o, dlogits, N * V);
    free(tgt);
    free_all((float *[]){logits, probs, losses, dlogits, NULL});
    return rc;
}

static int op_optimizer(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t n = 1000;
    float *p = fx_normal(n, seed, 1, 1.0), *g = fx_normal(n, seed, 2, 1.0);
    float *m = fx_normal(n, seed, 3, 0.1), *v = fx_uniform(n, seed, 4, 0.0, 0.1);
    float norm = 0, factor = 0, bc1 = 0, bc2 = 0;
    int rc = krn_grad_norm(ctx, &norm, g, n);
    if (rc == 0)
        rc = krn_clip_factor(ctx, &factor, norm, 1.0f);
    if (rc == 0)
        rc = pattern ? krn_adamw_corrections(ctx, &bc1, &bc2, FX_POW_BETA1, FX_POW_BETA2, FX_POW_T)
                     : krn_adamw_corrections(ctx, &bc1, &bc2, 0.9f, 0.95f, 1 + seed % 7);
    float b1 = pattern ? FX_POW_BETA1 : 0.9f, b2 = pattern ? FX_POW_BETA2 : 0.95f;
    if (rc == 0)
        rc = krn_adamw_update(ctx, p, m, v, g, bc1, bc2, 3e-4f, b1, b2, 1e-8f, 0.1f, factor, n);
    float scalars[4] = {norm, factor, bc1, bc2};
    out_add(o, scalars, 4);
    out_add(o, p, n);
    out_add(o, m, n);
    out_add(o, v, n);
    free_all((float *[]){p, g, m, v, NULL});
    return rc;
}

/* ---- the Llama ops ---- */

/* Rows of C >= 8 values whose squares sum to C times an FP32 midpoint plus
 * less than an FP64 ulp of the sum: [2^10, 2^-2, 2^-17, 2^-17, 2^-17, 0, ...]
 * cyclically shifted by the row. 2^20 + 2^-4 is a midpoint of the grid at
 * 2^20 (step 2^-3), and the three 2^-34 (a quarter of an FP64 ulp there
 * each) are lost one by one after 2^20 but add up to one ulp before it, so
 * two summation orders land on opposite sides (the division by C = 8 is
 * exact). */
static void rms_pattern_rows(float *m, size_t rows, size_t C)
{
    static const float p[8] = {0x1p10f, 0x1p-2f, 0x1p-17f, 0x1p-17f, 0x1p-17f, 0, 0, 0};
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < C; c++)
            m[i * C + c] = c < 8 ? p[(c + i) % 8] : 0.0f;
}

static int op_rmsnorm_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 8 : 6, C = pattern ? 8 : (seed % 2 ? 300 : 24);
    float *inp = fx_normal(N * C, seed, 1, 2.0), *w = fx_normal(C, seed, 2, 1.0);
    float *out = fx_alloc(N * C), *rstd = fx_alloc(N);
    if (pattern)
        rms_pattern_rows(inp, N, C);
    int rc = krn_rmsnorm_forward(ctx, out, rstd, inp, w, 1e-5, N, C);
    out_add(o, out, N * C);
    out_add(o, rstd, N);
    free_all((float *[]){inp, w, out, rstd, NULL});
    return rc;
}

static int op_rmsnorm_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    /* pattern: norm = inp*rstd = 1 and weight 1, so both reductions sum
     * the Latin square dout, by rows (dnmean) and by columns (dweight) */
    size_t N = pattern ? 8 : (seed % 2 ? 270 : 5), C = pattern ? 8 : (seed % 2 ? 6 : 280);
    float *dout = fx_normal(N * C, seed, 1, 1.0);
    float *inp = pattern ? fx_const(N * C, 1) : fx_normal(N * C, seed, 2, 1.0);
    float *w = pattern ? fx_const(C, 1) : fx_normal(C, seed, 3, 1.0);
    float *rstd = pattern ? fx_const(N, 1) : fx_uniform(N, seed, 4, 0.5, 2.0);
    float *dinp = pattern ? fx_const(N * C, 0) : fx_normal(N * C, seed, 5, 1.0);
    float *dw = pattern ? fx_const(C, 0) : fx_normal(C, seed, 6, 1.0);
    if (pattern)
        fx_latin(dout, seed, 7);
    int rc = krn_rmsnorm_backward(ctx, dinp, dw, dout, inp, w, rstd, N, C);
    out_add(o, dinp, N * C);
    out_add(o, dw, C);
    free_all((float *[]){dout, inp, w, rstd, dinp, dw, NULL});
    return rc;
}

/* A rotary table whose sin at one position lies on an FP32 midpoint, found
 * by a search over FP32 frequencies f and positions t < 64 (glibc 2.36,
 * x86_64): sin(41 * 0x1.b42a78p-7) is 0x1.09c0ffp-1, a midpoint, in FP64.
 * theta = 1/f^2 makes the frequency of pair 1 of a head of size 4
 * theta^(-2/4) = f (rounded to FP32). */
#define ROPE_F 0x1.b42a78p-7f
#define ROPE_T 41
#define ROPE_THETA (1.0 / ((double)ROPE_F * (double)ROPE_F))

static bool rope_near_midpoint(void)
{
    return fx_ulps_from_midpoint(sin(ROPE_T * (double)ROPE_F)) <= 1.5;
}

/* The table (libm sites), then the rotation in place and its transpose. */
static int op_rope(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t B = 2, T = seed % 2 ? 9 : 300, NH = 3, hs = seed % 2 ? 8 : 6;
    double theta = seed % 2 ? 10000.0 : 500000.0;
    if (pattern) {
        T = ROPE_T + 1;
        hs = 4;
        theta = ROPE_THETA;
    }
    size_t half = hs / 2, n = B * T * NH * hs;
    float *cs = fx_alloc(T * half), *sn = fx_alloc(T * half);
    float *x = fx_normal(n, seed, 1, 1.0), *dout = fx_normal(n, seed, 2, 1.0), *dinp = fx_normal(n, seed, 3, 1.0);
    int rc = krn_rope_table(ctx, cs, sn, T, hs, theta);
    if (rc == 0)
        rc = krn_rope_forward(ctx, x, x, cs, sn, B, T, NH, hs);
    if (rc == 0)
        rc = krn_rope_backward(ctx, dinp, dout, cs, sn, B, T, NH, hs);
    out_add(o, cs, T * half);
    out_add(o, sn, T * half);
    out_add(o, x, n);
    out_add(o, dinp, n);
    free_all((float *[]){cs, sn, x, dout, dinp, NULL});
    return rc;
}

static int op_swiglu(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t n = 500;
    float *a = fx_normal(n, seed, 1, 3.0), *b = fx_normal(n, seed, 2, 1.0), *dout = fx_normal(n, seed, 3, 1.0);
    for (size_t i = 0; pattern && i < n; i++) /* exp(-|a|) near a midpoint, for both signs of a */
        a[i] = i % 2 ? FX_EXP_INPUT : -FX_EXP_INPUT;
    float *out = fx_alloc(n), *da = fx_normal(n, seed, 4, 1.0), *db = fx_normal(n, seed, 5, 1.0);
    int rc = krn_swiglu_forward(ctx, out, a, b, n);
    if (rc == 0)
        rc = krn_swiglu_backward(ctx, da, db, dout, a, b, n);
    out_add(o, out, n);
    out_add(o, da, n);
    out_add(o, db, n);
    free_all((float *[]){a, b, dout, out, da, db, NULL});
    return rc;
}

/* Shapes that put each reduction over a chunk in turn: G*T = 140 terms for
 * dk and dv (two chunks across the group's heads), G = 4, and T = 130 with
 * G = 1 (multi-head attention through the GQA entry). */
static void gqa_shape(uint64_t seed, bool pattern, size_t *T, size_t *NH, size_t *NKV, size_t *hs)
{
    static const size_t shapes[3][4] = {{70, 4, 2, 4}, {6, 4, 1, 6}, {130, 2, 2, 3}};
    const size_t *s = shapes[seed % 3];
    *T = pattern ? 5 : s[0];
    *NH = pattern ? 4 : s[1];
    *NKV = pattern ? 2 : s[2];
    *hs = pattern ? 16 : s[3];
}

/* pattern: a head's rows of q (forward) or dout (backward) hold a
 * cancellation pattern and k (v) is all ones, so q.k (dout.v) is a midpoint
 * (hs = 16: the scale 1/4 keeps it one). */
static void gqa_pattern(float *a, float *ones, size_t BT, size_t NH, size_t NKV, size_t hs, uint64_t seed)
{
    for (size_t bt = 0; bt < BT; bt++) {
        for (size_t h = 0; h < NH; h++) {
            float *r = a + (bt * NH + h) * hs;
            fx_pattern_rows(r, 1, hs, seed, 300 + bt * NH + h);
            for (size_t i = FX_PATTERN; i < hs; i++)
                r[i] = 0.0f;
        }
        for (size_t i = 0; i < NKV * hs; i++)
            ones[bt * NKV * hs + i] = 1.0f;
    }
}

static int op_gqa_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t B = 2, T, NH, NKV, hs;
    gqa_shape(seed, pattern, &T, &NH, &NKV, &hs);
    size_t nq = B * T * NH * hs, nkv = B * T * NKV * hs, ntt = B * NH * T * T;
    float *q = fx_normal(nq, seed, 1, 1.0), *k = fx_normal(nkv, seed, 2, 1.0), *v = fx_normal(nkv, seed, 3, 1.0);
    float *out = fx_alloc(nq), *pre = fx_alloc(ntt), *att = fx_alloc(ntt);
    if (pattern)
        gqa_pattern(q, k, B * T, NH, NKV, hs, seed);
    int rc = krn_gqa_forward(ctx, out, pre, att, q, k, v, B, T, NH, NKV, hs);
    out_add(o, out, nq);
    out_add(o, pre, ntt);
    out_add(o, att, ntt);
    free_all((float *[]){q, k, v, out, pre, att, NULL});
    return rc;
}

static int op_gqa_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t B = 2, T, NH, NKV, hs;
    gqa_shape(seed, pattern, &T, &NH, &NKV, &hs);
    size_t nq = B * T * NH * hs, nkv = B * T * NKV * hs, ntt = B * NH * T * T;
    float *q = fx_normal(nq, seed, 1, 1.0), *k = fx_normal(nkv, seed, 2, 1.0), *v = fx_normal(nkv, seed, 3, 1.0);
    float *dout = fx_normal(nq, seed, 4, 1.0), *att = fx_uniform(ntt, seed, 5, 0.0, 1.0);
    float *dq = pattern ? fx_const(nq, 0) : fx_normal(nq, seed, 6, 0.5);
    float *dk = pattern ? fx_const(nkv, 0) : fx_normal(nkv, seed, 7, 0.5);
    float *dv = pattern ? fx_const(nkv, 0) : fx_normal(nkv, seed, 8, 0.5);
    float *dpre = fx_alloc(ntt), *datt = fx_alloc(ntt);
    for (size_t r = 0; r < B * NH * T; r++)
        for (size_t t2 = r % T + 1; t2 < T; t2++)
            att[r * T + t2] = 0; /* causal */
    if (pattern)
        gqa_pattern(dout, v, B * T, NH, NKV, hs, seed);
    int rc = krn_gqa_backward(ctx, dq, dk, dv, dpre, datt, dout, q, k, v, att, B, T, NH, NKV, hs);
    out_add(o, dq, nq);
    out_add(o, dk, nkv);
    out_add(o, dv, nkv);
    out_add(o, dpre, ntt);
    out_add(o, datt, ntt);
    free_all((float *[]){q, k, v, dout, att, dq, dk, dv, dpre, datt, NULL});
    return rc;
}

/* Exact ops only: they may never log. */
static int op_exact(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t n = 777;
    float *a = fx_normal(n, seed, 1, 1.0), *b = fx_normal(n, seed, 2, 1.0);
    float *d1 = fx_normal(n, seed, 3, 1.0), *d2 = fx_normal(n, seed, 4, 1.0), *out = fx_alloc(n);
    float *r = fx_alloc(n), *dr = fx_normal(n, seed, 5, 1.0);
    int rc = krn_residual_forward(ctx, out, a, b, n);
    if (rc == 0)
        rc = krn_residual_backward(ctx, d1, d2, b, n);
    if (rc == 0)
        rc = krn_accumulate(ctx, d1, a, n);
    if (rc == 0)
        rc = krn_relu_forward(ctx, r, a, n);
    if (rc == 0)
        rc = krn_relu_backward(ctx, dr, a, b, n);
    out_add(o, out, n);
    out_add(o, d1, n);
    out_add(o, d2, n);
    out_add(o, r, n);
    out_add(o, dr, n);
    free_all((float *[]){a, b, d1, d2, out, r, dr, NULL});
    return rc;
}

/* ---- the ResNet ops ---- */

/* pattern: inp[n][c][p] = a cancellation pattern over the channels (its own
 * per position), the weight's centre tap 2^(oc % 3) and every other tap 0,
 * so each output's K = 72 terms sum to a midpoint (the zeros add nothing) */
static int op_conv_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    /* K = 144 at stride 2 (3x3, pad 1), K = 147 for ResNet's 7x7 stem */
    size_t N = 2, C = seed % 2 ? 16 : 3, H = seed % 2 ? 6 : 9, W = H, OC = seed % 2 ? 5 : 4;
    size_t KH = seed % 2 ? 3 : 7, stride = 2, pad = seed % 2 ? 1 : 3;
    if (pattern)
        C = 8, H = W = 3, OC = 6, KH = 3, stride = 1, pad = 1;
    size_t K = C * KH * KH, P = ((H + 2 * pad - KH) / stride + 1) * ((W + 2 * pad - KH) / stride + 1);
    float *inp = fx_normal(N * C * H * W, seed, 1, 1.0), *w = fx_normal(OC * K, seed, 2, 0.2);
    float *bias = pattern ? NULL : fx_normal(OC, seed, 3, 1.0), *out = fx_alloc(N * OC * P);
    if (pattern) {
        for (size_t n = 0; n < N; n++)
            for (size_t p = 0; p < H * W; p++) {
                float pat[FX_PATTERN];
                fx_pattern(pat, seed, 500 + n * H * W + p);
                for (size_t c = 0; c < C; c++)
                    inp[(n * C + c) * H * W + p] = pat[(c + p) % FX_PATTERN];
            }
        for (size_t k = 0; k < OC * K; k++)
            w[k] = k % 9 == 4 ? ldexpf(1.0f, (int)(k / K % 3)) : 0.0f;
    }
    int rc = krn_conv2d_forward(ctx, out, inp, w, bias, N, C, H, W, OC, KH, KH, stride, pad);
    out_add(o, out, N * OC * P);
    free(bias);
    free_all((float *[]){inp, w, out, NULL});
    return rc;
}

/* pattern: dout (OC = 8, N*P = 8) a Latin square, the input all ones and
 * the weight's centre tap 1 (others 0): dinp's centre tap sums a column of
 * it, dweight's centre tap and dbias a row, each a midpoint */
static int op_conv_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    /* random: N*P = 162 (dweight, dbias), OC = 130 (dinp), a 1x1 at stride
     * 2 without dinp, in turn */
    static const size_t shapes[3][8] = {{2, 3, 9, 9, 4, 3, 1, 1}, {1, 2, 4, 4, 130, 3, 2, 1}, {2, 5, 5, 6, 3, 1, 2, 0}};
    const size_t *sh = shapes[seed % 3];
    size_t N = sh[0], C = sh[1], H = sh[2], W = sh[3], OC = sh[4], KH = sh[5], stride = sh[6], pad = sh[7];
    if (pattern)
        N = 2, C = 3, H = W = 2, OC = 8, KH = 3, stride = 1, pad = 1;
    size_t K = C * KH * KH, P = ((H + 2 * pad - KH) / stride + 1) * ((W + 2 * pad - KH) / stride + 1);
    size_t nin = N * C * H * W;
    float *dout = fx_normal(N * OC * P, seed, 1, 1.0), *inp = fx_normal(nin, seed, 2, 1.0);
    float *w = fx_normal(OC * K, seed, 3, 0.2);
    float *dinp = pattern ? fx_const(nin, 0) : fx_normal(nin, seed, 4, 0.5);
    float *dw = pattern ? fx_const(OC * K, 0) : fx_normal(OC * K, seed, 5, 0.5);
    float *db = pattern ? fx_const(OC, 0) : fx_normal(OC, seed, 6, 0.5);
    if (pattern) {
        float sq[FX_PATTERN * FX_PATTERN];
        fx_latin(sq, seed, 7);
        for (size_t n = 0; n < N; n++)
            for (size_t oc = 0; oc < OC; oc++)
                for (size_t p = 0; p < P; p++)
                    dout[(n * OC + oc) * P + p] = sq[oc * FX_PATTERN + n * P + p];
        for (size_t i = 0; i < nin; i++)
            inp[i] = 1.0f;
        for (size_t k = 0; k < OC * K; k++)
            w[k] = k % 9 == 4 ? 1.0f : 0.0f;
    }
    bool with_dinp = pattern || seed % 3 != 2, with_db = pattern || seed % 3 != 1;
    int rc = krn_conv2d_backward(ctx, with_dinp ? dinp : NULL, dw, with_db ? db : NULL, dout, inp, w, N, C, H, W,
                                 OC, KH, KH, stride, pad);
    out_add(o, dinp, nin);
    out_add(o, dw, OC * K);
    out_add(o, db, OC);
    free_all((float *[]){dout, inp, w, dinp, dw, db, NULL});
    return rc;
}

/* pattern: each channel's M = 8 values a cancellation pattern, so its mean
 * is a midpoint (the division by 8 keeps it one); then evaluation mode from
 * the updated running statistics */
static int op_batchnorm_fwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = pattern ? 2 : 3, C = pattern ? 5 : 4, HW = pattern ? 4 : (seed % 2 ? 50 : 7), n = N * C * HW;
    float *inp = fx_normal(n, seed, 1, 2.0), *w = fx_normal(C, seed, 2, 1.0), *b = fx_normal(C, seed, 3, 1.0);
    float *rm = fx_normal(C, seed, 4, 0.5), *rv = fx_uniform(C, seed, 5, 0.5, 2.0);
    float *out = fx_alloc(n), *mean = fx_alloc(C), *rstd = fx_alloc(C), *ev = fx_alloc(n);
    if (pattern)
        for (size_t c = 0; c < C; c++) {
            float pat[FX_PATTERN];
            fx_pattern(pat, seed, 600 + c);
            for (size_t m = 0; m < N * HW; m++)
                inp[(m / HW * C + c) * HW + m % HW] = pat[(m + c) % FX_PATTERN];
        }
    int rc = krn_batchnorm_forward(ctx, out, mean, rstd, rm, rv, inp, w, b, N, C, HW, 1e-5, 0.1);
    if (rc == 0)
        rc = krn_batchnorm_eval(ctx, ev, inp, w, b, rm, rv, N, C, HW, 1e-5);
    out_add(o, out, n);
    out_add(o, mean, C);
    out_add(o, rstd, C);
    out_add(o, rm, C);
    out_add(o, rv, C);
    out_add(o, ev, n);
    free_all((float *[]){inp, w, b, rm, rv, out, mean, rstd, ev, NULL});
    return rc;
}

/* pattern: norm = 1 (inp 1, mean 0, rstd 1) and weight 1, dout per channel
 * a row of a Latin square: all four reductions sum it to a midpoint */
static int op_batchnorm_bwd(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = 2, C = pattern ? 8 : 3, HW = pattern ? 4 : (seed % 2 ? 70 : 5), n = N * C * HW;
    float *dout = fx_normal(n, seed, 1, 1.0), *inp = pattern ? fx_const(n, 1) : fx_normal(n, seed, 2, 1.0);
    float *w = pattern ? fx_const(C, 1) : fx_normal(C, seed, 3, 1.0);
    float *mean = pattern ? fx_const(C, 0) : fx_normal(C, seed, 4, 0.1);
    float *rstd = pattern ? fx_const(C, 1) : fx_uniform(C, seed, 5, 0.5, 2.0);
    float *dinp = pattern ? fx_const(n, 0) : fx_normal(n, seed, 6, 1.0);
    float *dw = pattern ? fx_const(C, 0) : fx_normal(C, seed, 7, 1.0);
    float *db = pattern ? fx_const(C, 0) : fx_normal(C, seed, 8, 1.0);
    if (pattern) {
        float sq[FX_PATTERN * FX_PATTERN];
        fx_latin(sq, seed, 9);
        for (size_t c = 0; c < C; c++)
            for (size_t m = 0; m < N * HW; m++)
                dout[(m / HW * C + c) * HW + m % HW] = sq[c * FX_PATTERN + m];
    }
    int rc = krn_batchnorm_backward(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C, HW);
    out_add(o, dinp, n);
    out_add(o, dw, C);
    out_add(o, db, C);
    free_all((float *[]){dout, inp, w, mean, rstd, dinp, dw, db, NULL});
    return rc;
}

/* Global average pooling; pattern: each plane of HW = 8 a cancellation
 * pattern (a midpoint, / 8 keeps it one). */
static int op_avgpool(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    size_t N = 2, C = 3, HW = pattern ? 8 : (seed % 2 ? 200 : 9), n = N * C * HW;
    float *inp = fx_normal(n, seed, 1, 1.0), *out = fx_alloc(N * C);
    float *dout = fx_normal(N * C, seed, 2, 1.0), *dinp = fx_normal(n, seed, 3, 1.0);
    if (pattern)
        fx_pattern_rows(inp, N * C, HW, seed, 8);
    int rc = krn_avgpool_global_forward(ctx, out, inp, N, C, HW);
    if (rc == 0)
        rc = krn_avgpool_global_backward(ctx, dinp, dout, N, C, HW);
    out_add(o, out, N * C);
    out_add(o, dinp, n);
    free_all((float *[]){inp, out, dout, dinp, NULL});
    return rc;
}

/* Max pooling (exact): 3x3 windows at stride 2, padding 1, so windows
 * overlap and an element can take several douts; inputs from {0, 1, 2, 3}
 * so ties are common. */
static int op_maxpool(krn_ctx *ctx, uint64_t seed, bool pattern, outv *o)
{
    (void)pattern;
    size_t N = 2, C = 3, H = seed % 2 ? 9 : 6, W = 7, k = 3, stride = 2, pad = 1;
    size_t OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
    size_t n = N * C * H * W, no = N * C * OH * OW;
    float *inp = fx_alloc(n), *out = fx_alloc(no), *dout = fx_normal(no, seed, 1, 1.0);
    float *dinp = fx_normal(n, seed, 2, 1.0), *idxf = fx_alloc(no);
    int32_t *idx = calloc(no, sizeof *idx);
    for (size_t i = 0; i < n; i++)
        inp[i] = (float)krn_rng_below(seed, 3, KRN_RNG_TEST, i, 4);
    int rc = krn_maxpool2d_forward(ctx, out, idx, inp, N, C, H, W, k, stride, pad);
    if (rc == 0)
        rc = krn_maxpool2d_backward(ctx, dinp, dout, idx, N, C, H, W, k, stride, pad);
    for (size_t i = 0; i < no; i++)
        idxf[i] = (float)idx[i];
    out_add(o, out, no);
    out_add(o, idxf, no);
    out_add(o, dinp, n);
    free(idx);
    free_all((float *[]){inp, out, dout, dinp, idxf, NULL});
    return rc;
}

/* The libm searches' results hold on the libm this test runs on. */
static bool libm_near_midpoints(void)
{
    double t = tanh(fx_gelu_arg(FX_TANH_INPUT)), e = exp((double)FX_EXP_INPUT);
    double p1 = pow(FX_POW_BETA1, FX_POW_T), p2 = pow(FX_POW_BETA2, FX_POW_T);
    return fx_ulps_from_midpoint(t) <= 1.5 && fx_ulps_from_midpoint(e) <= 1.5 &&
           fx_ulps_from_midpoint(p1) <= 1.5 && fx_ulps_from_midpoint(p2) <= 1.5;
}

typedef struct {
    const char *name;
    op_fn fn;
    bool forced;      /* the pattern inputs make NEAREST differ */
    bool exact;       /* no site of the op can log */
    bool (*pre)(void); /* a condition for `forced` (NULL: always) */
} op_case;

static const op_case cases[] = {
    {"matmul_forward", op_matmul_fwd, true, false, NULL},
    {"matmul_backward", op_matmul_bwd, true, false, NULL},
    {"bias_forward+backward", op_bias, true, false, NULL},
    {"layernorm_forward", op_layernorm_fwd, true, false, NULL},
    {"layernorm_backward", op_layernorm_bwd, true, false, NULL},
    {"attention_forward", op_attention_fwd, true, false, NULL},
    {"attention_backward", op_attention_bwd, true, false, NULL},
    {"encoder_forward+backward", op_encoder, true, false, NULL},
    {"gelu_forward+backward", op_gelu, true, false, libm_near_midpoints},
    {"crossentropy_forward+backward", op_crossentropy, true, false, libm_near_midpoints},
    {"grad_norm+clip+adamw", op_optimizer, true, false, libm_near_midpoints},
    {"residual+accumulate+relu", op_exact, false, true, NULL},
    {"rmsnorm_forward", op_rmsnorm_fwd, true, false, NULL},
    {"rmsnorm_backward", op_rmsnorm_bwd, true, false, NULL},
    {"rope_table+forward+backward", op_rope, true, false, rope_near_midpoint},
    {"swiglu_forward+backward", op_swiglu, true, false, libm_near_midpoints},
    {"gqa_forward", op_gqa_fwd, true, false, NULL},
    {"gqa_backward", op_gqa_bwd, true, false, NULL},
    {"encoder_nopos_forward+backward", op_encoder_nopos, true, false, NULL},
    {"conv2d_forward", op_conv_fwd, true, false, NULL},
    {"conv2d_backward", op_conv_bwd, true, false, NULL},
    {"batchnorm_forward+eval", op_batchnorm_fwd, true, false, NULL},
    {"batchnorm_backward", op_batchnorm_bwd, true, false, NULL},
    {"avgpool_global_forward+backward", op_avgpool, true, false, NULL},
    {"maxpool2d_forward+backward", op_maxpool, false, true, NULL},
};

/* ---- running one step ---- */

typedef struct {
    krn_backend_kind backend;
    uint64_t shuffle_seed;
    int threads; /* 0: 2 */
    int bits;    /* 0: 32 */
} backend_sel;

static const char *backend_name(krn_backend_kind k)
{
    return k == KRN_BACKEND_CPU ? "cpu" : k == KRN_BACKEND_REF ? "ref" : k == KRN_BACKEND_CUDA ? "cuda" : "shuffle";
}

/* Runs op on one backend in one mode as step 1; returns its outputs. */
static int run_step(const op_case *c, uint64_t seed, bool pattern, backend_sel be, krn_mode mode,
                    krn_rlog *log, outv *o, krn_stats *st)
{
    krn_config cfg = {.backend = be.backend, .mode = mode, .grid_bits = be.bits ? be.bits : 32,
                      .shuffle_seed = be.shuffle_seed, .threads = be.threads ? be.threads : 2};
    krn_ctx *ctx = NULL;
    int rc = krn_ctx_new(&ctx, &cfg);
    if (rc == 0)
        rc = krn_step_begin(ctx, 1, log);
    if (rc == 0)
        rc = c->fn(ctx, seed, pattern, o);
    if (rc == 0)
        rc = krn_step_end(ctx, st);
    if (rc != 0)
        fprintf(stderr, "%s on %s: %s\n", c->name, backend_name(be.backend), ovt_errmsg());
    krn_ctx_free(ctx);
    return rc;
}

static size_t count_diff(const outv *a, const outv *b)
{
    size_t d = 0;
    for (size_t i = 0; i < a->n && i < b->n; i++)
        d += memcmp(&a->v[i], &b->v[i], sizeof(float)) != 0;
    return d;
}

/* The log as the verifier gets it: encoded to file bytes and decoded. */
static krn_rlog *through_file_format(const krn_rlog *log)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    krn_rlog *copy = krn_rlog_new();
    if (krn_rlog_encode(log, &buf, &len) != 0 || krn_rlog_decode(copy, buf, len) != 0) {
        fprintf(stderr, "log codec: %s\n", ovt_errmsg());
        exit(1);
    }
    free(buf);
    return copy;
}

/* RECORD on a, REPLAY on b: identical. NEAREST on b: returns the number of
 * outputs that differ from a's. */
static size_t check_pair(const op_case *c, uint64_t seed, bool pattern, backend_sel a, backend_sel b,
                         uint64_t *logged)
{
    outv oa = {0}, ob = {0}, on = {0};
    krn_stats st;
    krn_rlog *log = krn_rlog_new();
    CHECK(run_step(c, seed, pattern, a, KRN_RECORD, log, &oa, &st) == 0);
    *logged += krn_rlog_nentries(log);
    if (c->exact)
        CHECK_MSG(krn_rlog_nentries(log) == 0, "%s logged %llu entries", c->name,
                  (unsigned long long)krn_rlog_nentries(log));
    krn_rlog *replay_log = through_file_format(log);
    CHECK(run_step(c, seed, pattern, b, KRN_REPLAY, replay_log, &ob, &st) == 0);
    CHECK_MSG(oa.n == ob.n && count_diff(&oa, &ob) == 0,
              "%s seed %llu%s: %s -> %s replay differs in %zu of %zu outputs", c->name,
              (unsigned long long)seed, pattern ? " (midpoints)" : "", backend_name(a.backend),
              backend_name(b.backend), count_diff(&oa, &ob), oa.n);
    CHECK(run_step(c, seed, pattern, b, KRN_NEAREST, NULL, &on, &st) == 0);
    size_t flips = count_diff(&oa, &on);
    if (c->exact)
        CHECK_MSG(flips == 0, "%s: exact op differs across backends", c->name);
    free(oa.v);
    free(ob.v);
    free(on.v);
    krn_rlog_free(log);
    krn_rlog_free(replay_log);
    return flips;
}

static const backend_sel cpu = {KRN_BACKEND_CPU, 0, 0, 0}, ref = {KRN_BACKEND_REF, 0, 0, 0};
static const backend_sel sh1 = {KRN_BACKEND_SHUFFLE, 11, 0, 0}, sh2 = {KRN_BACKEND_SHUFFLE, 12, 0, 0};
static const backend_sel cuda = {KRN_BACKEND_CUDA, 0, 0, 0};

/* Seeds of random and of midpoint inputs per case and pair (the cuda run
 * takes fewer: every cuda step creates a device context). */
static uint64_t replay_seeds = 6, pattern_seeds = 4;

/* Every case over seeds and the backend pairs (RECORD on the first, REPLAY
 * and NEAREST on the second). */
static void test_replay(const backend_sel (*pairs)[2], size_t npairs)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const op_case *c = &cases[i];
        uint64_t logged_random = 0, logged_pattern = 0;
        size_t flips = 0;
        for (uint64_t seed = 1; seed <= replay_seeds; seed++)
            for (size_t p = 0; p < npairs; p++)
                check_pair(c, seed, false, pairs[p][0], pairs[p][1], &logged_random);
        bool forced = c->forced && (!c->pre || c->pre());
        if (c->forced && !forced)
            printf("%s: this libm does not put the searched arguments near midpoints; "
                   "the flip check is skipped\n", c->name);
        if (forced) {
            for (uint64_t seed = 1; seed <= pattern_seeds; seed++)
                for (size_t p = 0; p < npairs; p++)
                    flips += check_pair(c, 100 + seed, true, pairs[p][0], pairs[p][1], &logged_pattern);
            CHECK_MSG(flips > 0, "%s: midpoint inputs never made NEAREST differ", c->name);
            CHECK_MSG(logged_pattern > 0, "%s: midpoint inputs were never logged", c->name);
        }
        printf("%-32s random: %llu entries logged; midpoints: %llu logged, %zu outputs differ without the log\n",
               c->name, (unsigned long long)logged_random, (unsigned long long)logged_pattern, flips);
    }
}

/* A narrower grid (b = 26): the same exchange on random data. */
static void test_narrow_grid(void)
{
    const backend_sel cpu26 = {KRN_BACKEND_CPU, 0, 0, 26}, ref26 = {KRN_BACKEND_REF, 0, 0, 26};
    const backend_sel sh26 = {KRN_BACKEND_SHUFFLE, 21, 0, 26};
    uint64_t logged = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (uint64_t seed = 1; seed <= 2; seed++) {
            check_pair(&cases[i], seed, false, cpu26, ref26, &logged);
            check_pair(&cases[i], seed, false, sh26, cpu26, &logged);
        }
    printf("grid b = 26: %llu entries logged over all ops\n", (unsigned long long)logged);
}

/* The cpu backend's result and log do not depend on its thread count (the
 * tiles are independent; each adds its chunks in order). */
static void test_thread_count(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const op_case *c = &cases[i];
        uint8_t *buf[2] = {NULL, NULL};
        size_t len[2] = {0, 0};
        outv o[2] = {{0}, {0}};
        for (int t = 0; t < 2; t++) {
            backend_sel be = {KRN_BACKEND_CPU, 0, t == 0 ? 1 : 3, 0};
            krn_rlog *log = krn_rlog_new();
            krn_stats st;
            CHECK(run_step(c, 105, true, be, KRN_RECORD, log, &o[t], &st) == 0);
            CHECK(krn_rlog_encode(log, &buf[t], &len[t]) == 0);
            krn_rlog_free(log);
        }
        CHECK_MSG(len[0] == len[1] && memcmp(buf[0], buf[1], len[0]) == 0,
                  "%s: the log depends on the thread count", c->name);
        CHECK_MSG(o[0].n == o[1].n && count_diff(&o[0], &o[1]) == 0,
                  "%s: the outputs depend on the thread count", c->name);
        free(buf[0]), free(buf[1]), free(o[0].v), free(o[1].v);
    }
    /* a product of 2 x 2 output tiles (256 x 512 each) with 3 chunks */
    size_t N = 300, C = 300, OC = 600;
    float *inp = fx_normal(N * C, 9, 1, 1.0), *w = fx_normal(OC * C, 9, 2, 1.0);
    float *out[2] = {fx_alloc(N * OC), fx_alloc(N * OC)};
    uint64_t entries[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        krn_config cfg = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32,
                          .threads = t == 0 ? 1 : 4};
        krn_ctx *ctx = NULL;
        krn_rlog *log = krn_rlog_new();
        CHECK(krn_ctx_new(&ctx, &cfg) == 0 && krn_step_begin(ctx, 1, log) == 0);
        CHECK(krn_matmul_forward(ctx, out[t], inp, w, NULL, N, C, OC) == 0);
        CHECK(krn_step_end(ctx, NULL) == 0);
        entries[t] = krn_rlog_nentries(log);
        krn_rlog_free(log);
        krn_ctx_free(ctx);
    }
    CHECK(memcmp(out[0], out[1], N * OC * sizeof(float)) == 0);
    CHECK(entries[0] == entries[1]);
    free(inp), free(w), free(out[0]), free(out[1]);
}

/* A forged entry (an element the trainer never logged, far from any
 * midpoint) makes the op fail in REPLAY with OVT_EFRAUD. */
static void test_forged_entry(void)
{
    size_t N = 7, C = 40, OC = 9;
    float *inp = fx_normal(N * C, 3, 1, 1.0), *w = fx_normal(OC * C, 3, 2, 0.1), *out = fx_alloc(N * OC);
    krn_rlog *log = krn_rlog_new();
    krn_rlog_reset(log, 1);
    CHECK(krn_rlog_add(log, 0, N * OC, 5, KRN_DIR_UP, 0) == 0);
    krn_config cfg = {.backend = KRN_BACKEND_REF, .mode = KRN_REPLAY, .grid_bits = 32};
    krn_ctx *ctx = NULL;
    CHECK(krn_ctx_new(&ctx, &cfg) == 0 && krn_step_begin(ctx, 1, log) == 0);
    int rc = krn_matmul_forward(ctx, out, inp, w, NULL, N, C, OC);
    if (rc == 0)
        rc = krn_step_end(ctx, NULL);
    CHECK_MSG(rc == OVT_EFRAUD, "forged entry: rc %d (%s)", rc, ovt_errmsg());
    krn_ctx_free(ctx);
    krn_rlog_free(log);
    free(inp), free(w), free(out);
}

/* ---- misuse and bad input ---- */

static krn_ctx *plain_ctx(krn_backend_kind be)
{
    krn_config cfg = {.backend = be, .mode = KRN_NEAREST, .grid_bits = 32};
    krn_ctx *ctx = NULL;
    if (krn_ctx_new(&ctx, &cfg) != 0 || krn_step_begin(ctx, 0, NULL) != 0) {
        fprintf(stderr, "ctx: %s\n", ovt_errmsg());
        exit(1);
    }
    return ctx;
}

static void test_errors(void)
{
    float a[64] = {0}, b[64] = {0}, out[64];
    krn_ctx *ctx = plain_ctx(KRN_BACKEND_CPU);
    CHECK(krn_matmul_forward(ctx, out, NULL, b, NULL, 2, 2, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "inp is NULL") != NULL);
    CHECK(krn_matmul_forward(ctx, out, a, b, NULL, 0, 2, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "zero dimension") != NULL);
    CHECK(krn_matmul_forward(ctx, out, a, b, NULL, SIZE_MAX / 2, 4, 2) == OVT_EINVAL);
    int32_t tok[2] = {0, 5};
    CHECK(krn_encoder_forward(ctx, out, tok, a, b, 1, 2, 2, 5) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "outside the vocabulary") != NULL);
    int32_t tgt[2] = {-1, 0};
    float loss;
    CHECK(krn_crossentropy_forward(ctx, &loss, out, b, a, tgt, 2, 4) == OVT_EINVAL);
    CHECK(krn_attention_forward(ctx, out, a, b, a, 1, 2, 3, 2) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "not a multiple") != NULL);
    CHECK(krn_clip_factor(ctx, out, 1.0f, 0.0f) == OVT_EINVAL);
    CHECK(krn_adamw_corrections(ctx, out, out + 1, 0.9f, 0.95f, 0) == OVT_EINVAL);
    CHECK(krn_adamw_corrections(ctx, out, out + 1, 1.5f, 0.95f, 1) == OVT_EINVAL);
    /* a non-finite result fails the step at the site, naming it */
    float big[4] = {3e38f, 3e38f, 3e38f, 3e38f}, one[4] = {1, 1, 1, 1};
    CHECK(krn_matmul_forward(ctx, out, big, one, NULL, 1, 4, 1) == OVT_ENUMERIC);
    CHECK(strstr(ovt_errmsg(), "matmul.fwd") != NULL);
    krn_ctx_free(ctx);

    /* the cuda backend: refused at krn_ctx_new when ovt was built without
     * CUDA, or when no device is usable (test_cuda_ops, this file built with
     * OVT_TEST_CUDA, runs it where one is) */
    krn_config cc = {.backend = KRN_BACKEND_CUDA, .mode = KRN_NEAREST, .grid_bits = 32};
    ctx = NULL;
    int crc = krn_ctx_new(&ctx, &cc);
#ifdef OVT_HAVE_CUDA
    if (crc != 0)
        CHECK(crc == OVT_EINVAL && strstr(ovt_errmsg(), "no usable CUDA device") != NULL);
#else
    CHECK(crc == OVT_EINVAL && strstr(ovt_errmsg(), "built without CUDA") != NULL);
#endif
    CHECK(crc != 0 || ctx != NULL);
    CHECK(crc == 0 || ctx == NULL);
    krn_ctx_free(ctx);
}

/* The chunk contract itself: x = [1, 1, 0 ..., 2^53 (first of chunk 2), 0 ...].
 * The ref backend sums each chunk last term first; a reversed sum over all K
 * terms would give 2^53 (each 1 lost against 2^53 by ties-to-even), the
 * chunked order adds chunk 1's sum 2 to chunk 2's 2^53 exactly. Every
 * backend must give 2^53 + 2 (any order inside a chunk is exact here). */
static void test_chunk_order(void)
{
    size_t K = 2 * KRN_GEMM_CHUNK;
    double *x = calloc(K, sizeof *x);
    x[0] = 1;
    x[1] = 1;
    x[KRN_GEMM_CHUNK] = 0x1p53;
    for (int k = 0; k < 3; k++) {
        krn_cpu be = {(krn_backend_kind)k, 7, 2, KRN_CPU_GEMM_BEST, NULL};
        CHECK(krn_chunked_dot(&be, x, 1, NULL, 0, K) == 0x1p53 + 2);
    }
    double reversed = 0;
    for (size_t k = K; k-- > 0;)
        reversed += x[k];
    CHECK(reversed == 0x1p53);
    /* the chunked bound coefficient: gamma_{c + n - 1} */
    CHECK(krn_chunked_gamma(100) == krn_gamma(100));
    CHECK(krn_chunked_gamma(3 * KRN_GEMM_CHUNK) == krn_gamma(KRN_GEMM_CHUNK + 2));
    CHECK(krn_chunked_gamma(3 * KRN_GEMM_CHUNK + 1) == krn_gamma(KRN_GEMM_CHUNK + 3));
    free(x);
}

/* The ref backend's GEMM (rank-1 updates, last k first) sums every element
 * in exactly the order of its reversed dot product, for every transposition. */
static void test_ref_gemm_order(void)
{
    size_t m = 37, n = 29, k = 100;
    float *af = fx_normal(m * k, 4, 1, 3.0), *bf = fx_normal(k * n, 4, 2, 3.0);
    double *a = calloc(m * k, sizeof *a), *b = calloc(k * n, sizeof *b), *c = calloc(m * n, sizeof *c);
    krn_widen(a, af, m * k);
    krn_widen(b, bf, k * n);
    krn_cpu be = {KRN_BACKEND_REF, 0, 1, KRN_CPU_GEMM_BEST, NULL};
    size_t bad = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            size_t lda = ta ? m : k, ldb = tb ? k : n;
            krn_cpu_gemm(&be, c, n, ta, a, lda, tb, b, ldb, m, n, k);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    const double *ai = ta ? a + i : a + i * lda, *bj = tb ? b + j * ldb : b + j;
                    double d = krn_cpu_dot(&be, ai, ta ? (ptrdiff_t)lda : 1, bj,
                                           tb ? 1 : (ptrdiff_t)ldb, k);
                    bad += memcmp(&d, &c[i * n + j], sizeof d) != 0;
                }
        }
    CHECK_MSG(bad == 0, "%zu ref GEMM elements differ from the reversed dot", bad);
    free(af), free(bf), free(a), free(b), free(c);
}

/* krn_cpu_gemm_add (OpenBLAS with beta = 1) gives exactly the chunk product
 * into a buffer plus one addition per element, for every transposition,
 * shapes with edge tiles, and chunks of up to KRN_GEMM_CHUNK terms: the
 * chunked GEMM of the cpu backend relies on it. */
static void test_gemm_add(void)
{
    krn_cpu be = {KRN_BACKEND_CPU, 0, 1, KRN_CPU_GEMM_BLAS, NULL};
    const size_t shapes[][3] = {{37, 29, KRN_GEMM_CHUNK}, {256, 512, KRN_GEMM_CHUNK}, {13, 70, 1},
                                {64, 33, KRN_GEMM_CHUNK - 3}};
    size_t bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *af = fx_normal(m * k, 5, (uint32_t)s, 3.0), *bf = fx_normal(k * n, 6, (uint32_t)s, 3.0);
        float *cf = fx_normal(m * n, 7, (uint32_t)s, 50.0);
        double *a = calloc(m * k, sizeof *a), *b = calloc(k * n, sizeof *b);
        double *c = calloc(m * n, sizeof *c), *part = calloc(m * n, sizeof *part);
        krn_widen(a, af, m * k);
        krn_widen(b, bf, k * n);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                size_t lda = ta ? m : k, ldb = tb ? k : n;
                krn_widen(c, cf, m * n);
                krn_cpu_gemm_add(&be, c, n, ta, a, lda, tb, b, ldb, m, n, k);
                krn_cpu_gemm(&be, part, n, ta, a, lda, tb, b, ldb, m, n, k);
                for (size_t i = 0; i < m * n; i++) {
                    double want = (double)cf[i] + part[i];
                    bad += memcmp(&want, &c[i], sizeof want) != 0;
                }
            }
        free(af), free(bf), free(cf), free(a), free(b), free(c), free(part);
    }
    CHECK_MSG(bad == 0, "%zu elements of krn_cpu_gemm_add differ from product + addition", bad);
}

#ifndef OVT_TEST_CUDA
int main(void)
{
    (void)cuda;
    CHECK_RUN(test_ref_gemm_order());
    CHECK_RUN(test_gemm_add());
    CHECK_RUN(test_errors());
    CHECK_RUN(test_forged_entry());
    CHECK_RUN(test_chunk_order());
    const backend_sel pairs[][2] = {{cpu, ref}, {ref, cpu}, {cpu, sh1}, {sh1, cpu}, {sh1, sh2}, {ref, sh2}};
    CHECK_RUN(test_replay(pairs, sizeof pairs / sizeof pairs[0]));
    CHECK_RUN(test_narrow_grid());
    CHECK_RUN(test_thread_count());
    return check_done();
}
#else
/* test_cuda_ops: the same cases with the cuda backend on one side of every
 * pair. Skipped (exit 77, ctest SKIP_RETURN_CODE) where ovt has no CUDA or
 * the machine no usable device. */
int main(void)
{
    (void)ref;
    (void)sh2;
    (void)test_errors;
    (void)test_gemm_add;
    (void)test_chunk_order;
    (void)test_ref_gemm_order;
    (void)test_forged_entry;
    (void)test_narrow_grid;
    (void)test_thread_count;
    krn_config cc = {.backend = KRN_BACKEND_CUDA, .mode = KRN_NEAREST, .grid_bits = 32};
    krn_ctx *probe = NULL;
    if (krn_ctx_new(&probe, &cc) != 0) {
        printf("SKIP: the cuda backend is not available here: %s\n", ovt_errmsg());
        return 77;
    }
    krn_ctx_free(probe);
    const backend_sel pairs[][2] = {{cpu, cuda}, {cuda, cpu}, {cuda, sh1}, {sh1, cuda}};
    replay_seeds = 3;
    pattern_seeds = 3;
    test_replay(pairs, sizeof pairs / sizeof pairs[0]);
#ifdef OVT_HAVE_CUDA
    CHECK_RUN(test_cuda_gemm_paths());
    CHECK_RUN(test_cuda_tree_root());
#endif
    return check_done();
}
#endif
