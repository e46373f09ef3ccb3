/* A plain FP32 GPT-2 training step, the way a careful C user would write it
 * for a CPU: llm.c's structure (the same model as ovt's gpt2 presets: pre-norm
 * blocks, GELU (tanh), tied head, mean cross-entropy, AdamW with global-norm
 * clipping), FP32 everywhere, every product an OpenBLAS SGEMM (attention's
 * per-head products included), the other passes plain loops on one thread.
 * Nothing here is rounded under the numeric contract: it is the peer
 * benchmark's baseline (bench/peers/run.sh), never part of the protocol. */
#include "gpt2_fp32.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NPARAM = 16 };

struct fp32_gpt2 {
    size_t L, C, NH, V, maxT, B, T;
    size_t sizes[NPARAM], nparams;
    float *params, *grads, *m, *v;
    /* parameter tensors, sliced from params (llm.c's order) */
    float *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
        *fcprojb, *lnfw, *lnfb;
    float *gwte, *gwpe, *gln1w, *gln1b, *gqkvw, *gqkvb, *gattprojw, *gattprojb, *gln2w, *gln2b, *gfcw, *gfcb,
        *gfcprojw, *gfcprojb, *glnfw, *glnfb;
    /* activations of all layers (what the backward pass reads) */
    float *acts;
    float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2, *ln2, *ln2_mean,
        *ln2_rstd, *fch, *fch_gelu, *residual3, *lnf, *lnf_mean, *lnf_rstd, *probs;
    /* gradients of one layer's activations, reused layer after layer */
    float *dacts;
    float *dres, *dln, *dqkv, *datty, *datt, *dfch, *dfch_gelu;
    uint64_t step;
};

static void slice(float **ptrs[], const size_t *sizes, size_t n, float *base)
{
    for (size_t i = 0; i < n; i++) {
        *ptrs[i] = base;
        base += sizes[i];
    }
}

/* ---- ops, outputs first, dimensions last ---- */

static void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe, size_t B, size_t T,
                            size_t C)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            float *o = out + (b * T + t) * C;
            const float *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + t * C;
            for (size_t i = 0; i < C; i++)
                o[i] = we[i] + pe[i];
        }
}

static void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp, size_t B, size_t T,
                             size_t C)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const float *d = dout + (b * T + t) * C;
            float *dwe = dwte + (size_t)inp[b * T + t] * C, *dpe = dwpe + t * C;
            for (size_t i = 0; i < C; i++) {
                dwe[i] += d[i];
                dpe[i] += d[i];
            }
        }
}

static void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                              const float *b, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        float mu = 0, var = 0;
        for (size_t i = 0; i < C; i++)
            mu += x[i];
        mu /= (float)C;
        for (size_t i = 0; i < C; i++)
            var += (x[i] - mu) * (x[i] - mu);
        float s = 1.0f / sqrtf(var / (float)C + 1e-5f);
        for (size_t i = 0; i < C; i++)
            out[n * C + i] = (x[i] - mu) * s * w[i] + b[i];
        mean[n] = mu;
        rstd[n] = s;
    }
}

/* dinp += (the gradient through the norm); dw, db += */
static void layernorm_backward(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                               const float *w, const float *mean, const float *rstd, size_t N, size_t C)
{
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *d = dout + n * C;
        float mu = mean[n], s = rstd[n], dnorm_mean = 0, dnorm_norm_mean = 0;
        for (size_t i = 0; i < C; i++) {
            float norm = (x[i] - mu) * s, dnorm = w[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= (float)C;
        dnorm_norm_mean /= (float)C;
        for (size_t i = 0; i < C; i++) {
            float norm = (x[i] - mu) * s, dnorm = w[i] * d[i];
            db[i] += d[i];
            dw[i] += norm * d[i];
            dinp[n * C + i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

/* out (N,OC) = inp (N,C) @ w^T (w is (OC,C)) + bias */
static void matmul_forward(float *out, const float *inp, const float *w, const float *bias, size_t N, size_t C,
                           size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)N, (blasint)OC, (blasint)C, 1.0f, inp,
                (blasint)C, w, (blasint)C, 0.0f, out, (blasint)OC);
    if (bias)
        for (size_t n = 0; n < N; n++)
            for (size_t o = 0; o < OC; o++)
                out[n * OC + o] += bias[o];
}

/* dinp = dout @ w (overwritten); dw += dout^T @ inp; dbias += column sums */
static void matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                            const float *w, size_t N, size_t C, size_t OC)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)N, (blasint)C, (blasint)OC, 1.0f, dout,
                (blasint)OC, w, (blasint)C, 0.0f, dinp, (blasint)C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)OC, (blasint)C, (blasint)N, 1.0f, dout,
                (blasint)OC, inp, (blasint)C, 1.0f, dw, (blasint)C);
    if (dbias)
        for (size_t n = 0; n < N; n++)
            for (size_t o = 0; o < OC; o++)
                dbias[o] += dout[n * OC + o];
}

/* causal self-attention; qkv (B,T,3C), att (B,NH,T,T) softmax weights, out (B,T,C) */
static void attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            const float *q = qkv + b * T * 3 * C + h * hs, *k = q + C, *v = q + 2 * C;
            float *a = att + (b * NH + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)T, (blasint)hs, scale, q,
                        (blasint)(3 * C), k, (blasint)(3 * C), 0.0f, a, (blasint)T);
            for (size_t t = 0; t < T; t++) {
                float *row = a + t * T, mx = -INFINITY, sum = 0;
                for (size_t j = 0; j <= t; j++)
                    mx = row[j] > mx ? row[j] : mx;
                for (size_t j = 0; j <= t; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                for (size_t j = 0; j <= t; j++)
                    row[j] /= sum;
                for (size_t j = t + 1; j < T; j++)
                    row[j] = 0;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)hs, (blasint)T, 1.0f, a,
                        (blasint)T, v, (blasint)(3 * C), 0.0f, out + b * T * C + h * hs, (blasint)C);
        }
}

/* dqkv = the gradient of qkv (overwritten); datt is (T,T) scratch */
static void attention_backward(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                               size_t B, size_t T, size_t C, size_t NH)
{
    size_t hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            size_t off = b * T * 3 * C + h * hs;
            const float *q = qkv + off, *k = q + C, *v = q + 2 * C, *a = att + (b * NH + h) * T * T;
            const float *d = dout + b * T * C + h * hs;
            float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
            /* datt = dout_h @ v^T; dv = att^T @ dout_h */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)T, (blasint)hs, 1.0f, d,
                        (blasint)C, v, (blasint)(3 * C), 0.0f, datt, (blasint)T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)T, (blasint)hs, (blasint)T, 1.0f, a,
                        (blasint)T, d, (blasint)C, 0.0f, dv, (blasint)(3 * C));
            /* through the softmax: dpreatt = att * (datt - rowsum(att * datt)), in place */
            for (size_t t = 0; t < T; t++) {
                const float *ar = a + t * T;
                float *dr = datt + t * T, dot = 0;
                for (size_t j = 0; j <= t; j++)
                    dot += ar[j] * dr[j];
                for (size_t j = 0; j <= t; j++)
                    dr[j] = ar[j] * (dr[j] - dot);
                for (size_t j = t + 1; j < T; j++)
                    dr[j] = 0;
            }
            /* dq = scale dpreatt @ k; dk = scale dpreatt^T @ q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)hs, (blasint)T, scale,
                        datt, (blasint)T, k, (blasint)(3 * C), 0.0f, dq, (blasint)(3 * C));
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)T, (blasint)hs, (blasint)T, scale, datt,
                        (blasint)T, q, (blasint)(3 * C), 0.0f, dk, (blasint)(3 * C));
        }
}

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */

static void gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

/* dinp = dout * gelu'(inp) (overwritten) */
static void gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], u = GELU_S * (x + 0.044715f * x * x * x), th = tanhf(u);
        float du = GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
    }
}

/* probs (N,V) = softmax(logits) in place; returns the mean loss; then
 * probs becomes dlogits = (probs - onehot) / N */
static float crossentropy_forward_backward(float *probs, const int32_t *targets, size_t N, size_t V)
{
    double loss = 0;
    for (size_t n = 0; n < N; n++) {
        float *p = probs + n * V, mx = -INFINITY, sum = 0;
        for (size_t i = 0; i < V; i++)
            mx = p[i] > mx ? p[i] : mx;
        for (size_t i = 0; i < V; i++) {
            p[i] = expf(p[i] - mx);
            sum += p[i];
        }
        float inv = 1.0f / sum;
        loss -= log((double)(p[targets[n]] * inv));
        for (size_t i = 0; i < V; i++)
            p[i] = p[i] * inv / (float)N;
        p[targets[n]] -= 1.0f / (float)N;
    }
    return (float)(loss / (double)N);
}

/* ---- the model ---- */

int fp32_gpt2_new(fp32_gpt2 **out, size_t L, size_t C, size_t NH, size_t V, size_t maxT, size_t B, size_t T,
                  uint64_t seed)
{
    *out = NULL;
    fp32_gpt2 *g = calloc(1, sizeof *g);
    if (!g)
        return -1;
    *g = (fp32_gpt2){.L = L, .C = C, .NH = NH, .V = V, .maxT = maxT, .B = B, .T = T};
    size_t s[NPARAM] = {V * C,     maxT * C, L * C,     L * C,         L * 3 * C * C, L * 3 * C,
                        L * C * C, L * C,    L * C,     L * C,         L * 4 * C * C, L * 4 * C,
                        L * C * 4 * C,       L * C,     C,             C};
    memcpy(g->sizes, s, sizeof s);
    for (int i = 0; i < NPARAM; i++)
        g->nparams += s[i];
    size_t BT = B * T;
    size_t na = BT * C + L * (BT * C + 2 * BT + BT * 3 * C + BT * C + B * NH * T * T + BT * C + BT * C + BT * C +
                              2 * BT + 2 * BT * 4 * C + BT * C) +
                BT * C + 2 * BT + BT * V;
    size_t nd = BT * C + BT * C + BT * 3 * C + BT * C + T * T + 2 * BT * 4 * C;
    g->params = malloc(g->nparams * sizeof(float));
    g->grads = calloc(g->nparams, sizeof(float));
    g->m = calloc(g->nparams, sizeof(float));
    g->v = calloc(g->nparams, sizeof(float));
    g->acts = malloc(na * sizeof(float));
    g->dacts = malloc(nd * sizeof(float));
    if (!g->params || !g->grads || !g->m || !g->v || !g->acts || !g->dacts) {
        fp32_gpt2_free(g);
        return -1;
    }
    float **pp[NPARAM] = {&g->wte,  &g->wpe,      &g->ln1w, &g->ln1b, &g->qkvw,    &g->qkvb,
                          &g->attprojw, &g->attprojb, &g->ln2w, &g->ln2b, &g->fcw, &g->fcb,
                          &g->fcprojw,  &g->fcprojb,  &g->lnfw, &g->lnfb};
    float **gp[NPARAM] = {&g->gwte,  &g->gwpe,      &g->gln1w, &g->gln1b, &g->gqkvw,    &g->gqkvb,
                          &g->gattprojw, &g->gattprojb, &g->gln2w, &g->gln2b, &g->gfcw, &g->gfcb,
                          &g->gfcprojw,  &g->gfcprojb,  &g->glnfw, &g->glnfb};
    slice(pp, s, NPARAM, g->params);
    slice(gp, s, NPARAM, g->grads);
    size_t as[] = {BT * C,         L * BT * C, L * BT,     L * BT,     L * BT * 3 * C, L * BT * C, L * B * NH * T * T,
                   L * BT * C,     L * BT * C, L * BT * C, L * BT,     L * BT,         L * BT * 4 * C,
                   L * BT * 4 * C, L * BT * C, BT * C,     BT,         BT,             BT * V};
    float **ap[] = {&g->encoded, &g->ln1,  &g->ln1_mean, &g->ln1_rstd, &g->qkv,     &g->atty,     &g->att,
                    &g->attproj, &g->residual2, &g->ln2,  &g->ln2_mean, &g->ln2_rstd, &g->fch,
                    &g->fch_gelu, &g->residual3, &g->lnf, &g->lnf_mean, &g->lnf_rstd, &g->probs};
    slice(ap, as, sizeof as / sizeof as[0], g->acts);
    size_t ds[] = {BT * C, BT * C, BT * 3 * C, BT * C, T * T, BT * 4 * C, BT * 4 * C};
    float **dp[] = {&g->dres, &g->dln, &g->dqkv, &g->datty, &g->datt, &g->dfch, &g->dfch_gelu};
    slice(dp, ds, sizeof ds / sizeof ds[0], g->dacts);
    /* GPT-2's init: N(0, 0.02) weights (a cheap uniform of that spread here:
     * the benchmark times steps, not learning), zero biases, unit norms */
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < g->nparams; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        g->params[i] = 0.0346f * ((float)(x >> 40) / 16777216.0f - 0.5f) * 2.0f;
    }
    for (size_t i = 0; i < L * C; i++)
        g->ln1w[i] = g->ln2w[i] = 1, g->ln1b[i] = g->ln2b[i] = g->attprojb[i] = g->fcprojb[i] = 0;
    for (size_t i = 0; i < L * 3 * C; i++)
        g->qkvb[i] = 0;
    for (size_t i = 0; i < L * 4 * C; i++)
        g->fcb[i] = 0;
    for (size_t i = 0; i < C; i++)
        g->lnfw[i] = 1, g->lnfb[i] = 0;
    *out = g;
    return 0;
}

void fp32_gpt2_free(fp32_gpt2 *g)
{
    if (!g)
        return;
    free(g->params);
    free(g->grads);
    free(g->m);
    free(g->v);
    free(g->acts);
    free(g->dacts);
    free(g);
}

size_t fp32_gpt2_nparams(const fp32_gpt2 *g)
{
    return g->nparams;
}

float fp32_gpt2_step(fp32_gpt2 *g, const int32_t *inputs, const int32_t *targets, const fp32_adamw *opt)
{
    size_t L = g->L, C = g->C, NH = g->NH, V = g->V, B = g->B, T = g->T, BT = B * T;
    /* forward */
    encoder_forward(g->encoded, inputs, g->wte, g->wpe, B, T, C);
    for (size_t l = 0; l < L; l++) {
        const float *res = l == 0 ? g->encoded : g->residual3 + (l - 1) * BT * C;
        float *ln1 = g->ln1 + l * BT * C, *qkv = g->qkv + l * BT * 3 * C, *atty = g->atty + l * BT * C;
        float *att = g->att + l * B * NH * T * T, *attproj = g->attproj + l * BT * C;
        float *res2 = g->residual2 + l * BT * C, *ln2 = g->ln2 + l * BT * C, *fch = g->fch + l * BT * 4 * C;
        float *fchg = g->fch_gelu + l * BT * 4 * C, *res3 = g->residual3 + l * BT * C;
        layernorm_forward(ln1, g->ln1_mean + l * BT, g->ln1_rstd + l * BT, res, g->ln1w + l * C, g->ln1b + l * C,
                          BT, C);
        matmul_forward(qkv, ln1, g->qkvw + l * 3 * C * C, g->qkvb + l * 3 * C, BT, C, 3 * C);
        attention_forward(atty, att, qkv, B, T, C, NH);
        matmul_forward(attproj, atty, g->attprojw + l * C * C, g->attprojb + l * C, BT, C, C);
        for (size_t i = 0; i < BT * C; i++)
            res2[i] = res[i] + attproj[i];
        layernorm_forward(ln2, g->ln2_mean + l * BT, g->ln2_rstd + l * BT, res2, g->ln2w + l * C, g->ln2b + l * C,
                          BT, C);
        matmul_forward(fch, ln2, g->fcw + l * 4 * C * C, g->fcb + l * 4 * C, BT, C, 4 * C);
        gelu_forward(fchg, fch, BT * 4 * C);
        matmul_forward(res3, fchg, g->fcprojw + l * C * 4 * C, g->fcprojb + l * C, BT, 4 * C, C);
        for (size_t i = 0; i < BT * C; i++)
            res3[i] += res2[i];
    }
    const float *last = g->residual3 + (L - 1) * BT * C;
    layernorm_forward(g->lnf, g->lnf_mean, g->lnf_rstd, last, g->lnfw, g->lnfb, BT, C);
    matmul_forward(g->probs, g->lnf, g->wte, NULL, BT, C, V);
    float loss = crossentropy_forward_backward(g->probs, targets, BT, V);

    /* backward */
    memset(g->grads, 0, g->nparams * sizeof(float));
    matmul_backward(g->dln, g->gwte, NULL, g->probs, g->lnf, g->wte, BT, C, V);
    memset(g->dres, 0, BT * C * sizeof(float));
    layernorm_backward(g->dres, g->glnfw, g->glnfb, g->dln, last, g->lnfw, g->lnf_mean, g->lnf_rstd, BT, C);
    for (size_t l = L; l-- > 0;) {
        const float *res = l == 0 ? g->encoded : g->residual3 + (l - 1) * BT * C;
        const float *ln1 = g->ln1 + l * BT * C, *qkv = g->qkv + l * BT * 3 * C, *atty = g->atty + l * BT * C;
        const float *att = g->att + l * B * NH * T * T, *res2 = g->residual2 + l * BT * C;
        const float *ln2 = g->ln2 + l * BT * C, *fch = g->fch + l * BT * 4 * C, *fchg = g->fch_gelu + l * BT * 4 * C;
        /* dres is d residual3: it flows on to residual2 and is the fcproj's dout */
        matmul_backward(g->dfch_gelu, g->gfcprojw + l * C * 4 * C, g->gfcprojb + l * C, g->dres, fchg,
                        g->fcprojw + l * C * 4 * C, BT, 4 * C, C);
        gelu_backward(g->dfch, g->dfch_gelu, fch, BT * 4 * C);
        matmul_backward(g->dln, g->gfcw + l * 4 * C * C, g->gfcb + l * 4 * C, g->dfch, ln2, g->fcw + l * 4 * C * C,
                        BT, C, 4 * C);
        layernorm_backward(g->dres, g->gln2w + l * C, g->gln2b + l * C, g->dln, res2, g->ln2w + l * C,
                           g->ln2_mean + l * BT, g->ln2_rstd + l * BT, BT, C);
        /* dres is now d residual2: on to the block's input and the attention's projection */
        matmul_backward(g->datty, g->gattprojw + l * C * C, g->gattprojb + l * C, g->dres, atty,
                        g->attprojw + l * C * C, BT, C, C);
        attention_backward(g->dqkv, g->datt, g->datty, qkv, att, B, T, C, NH);
        matmul_backward(g->dln, g->gqkvw + l * 3 * C * C, g->gqkvb + l * 3 * C, g->dqkv, ln1, g->qkvw + l * 3 * C * C,
                        BT, C, 3 * C);
        layernorm_backward(g->dres, g->gln1w + l * C, g->gln1b + l * C, g->dln, res, g->ln1w + l * C,
                           g->ln1_mean + l * BT, g->ln1_rstd + l * BT, BT, C);
    }
    encoder_backward(g->gwte, g->gwpe, g->dres, inputs, B, T, C);

    /* AdamW with global-norm clipping */
    double sumsq = 0;
    for (size_t i = 0; i < g->nparams; i++)
        sumsq += (double)g->grads[i] * g->grads[i];
    float norm = (float)sqrt(sumsq);
    float clip = opt->grad_clip > 0 && norm > opt->grad_clip ? opt->grad_clip / norm : 1.0f;
    g->step++;
    float c1 = 1.0f - powf(opt->beta1, (float)g->step), c2 = 1.0f - powf(opt->beta2, (float)g->step);
    for (size_t i = 0; i < g->nparams; i++) {
        float gr = g->grads[i] * clip;
        float m = opt->beta1 * g->m[i] + (1.0f - opt->beta1) * gr;
        float v = opt->beta2 * g->v[i] + (1.0f - opt->beta2) * gr * gr;
        g->m[i] = m;
        g->v[i] = v;
        g->params[i] -= opt->lr * ((m / c1) / (sqrtf(v / c2) + opt->eps) + opt->weight_decay * g->params[i]);
    }
    return loss;
}
