/* The ops of the block engine (arbiter/block_ops.h). Each entry turns a
 * record's sizes into the op's dimensions and runs the op of kernels/ops.h
 * on some of its rows; block mode (krn_ctx_block) does the rest. A row is
 * what the op computes independently of its other rows: a row of a matrix
 * product or of a norm, an element of an elementwise op, a sequence of
 * attention, rotary embedding and the encoder (positions matter). */
#include "arbiter/block_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/grid.h"
#include "kernels/ops.h"
#include "kernels/trace.h"
#include "trainer/schedule.h"

/* ---- buffers ---- */

/* Up to 12 zeroed float buffers of the given sizes for one call; the
 * call's arguments, freed together. */
typedef struct {
    float *p[12];
    size_t n;
} bufs;

static float *buf(bufs *b, uint64_t count)
{
    float *p = calloc(count ? count : 1, sizeof *p);
    if (p != NULL)
        b->p[b->n++] = p;
    return p;
}

static void bufs_free(bufs *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->p[i]);
}

/* Allocates count buffers of the sizes given; OVT_ENOMEM naming op. */
static int bufs_alloc(bufs *b, const char *op, size_t count, const uint64_t *sizes, float **out)
{
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < count; i++)
        if ((out[i] = buf(b, sizes[i])) == NULL) {
            bufs_free(b);
            return ovt_fail(OVT_ENOMEM, "block: out of memory for %s's buffers", op);
        }
    return 0;
}

/* The dimension K two matrices share when a = X*K, b = Y*K and X*Y = c
 * (the products' sizes), or 0 when none does: estimated in FP64 as
 * sqrt(a*b/c) (the products can pass 2^64 at a large batch), then checked
 * exactly. */
static uint64_t shared_dim(uint64_t a, uint64_t b, uint64_t c)
{
    if (c == 0)
        return 0;
    uint64_t K = (uint64_t)llround(sqrt((double)a * (double)b / (double)c));
    return K && a % K == 0 && b % K == 0 && (a / K) * (b / K) == c ? K : 0;
}

static int misfit(const blk_rec *r, const char *what)
{
    return ovt_fail(OVT_EINVAL, "block: the record's sizes (n = %llu, %zu inputs) do not fit %s",
                    (unsigned long long)r->n, r->ninputs, what);
}

/* ---- matrix products, bias, elementwise sums ---- */

/* matmul.fwd: inp (N,C), weight (OC,C) -> (N,OC). */
static int shape_mm_fwd(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 2 || r->n == 0)
        return misfit(r, "matmul.fwd (inp, weight)");
    uint64_t C = shared_dim(r->S[0], r->S[1], r->n);
    if (C == 0)
        return misfit(r, "matmul.fwd (inp, weight)");
    *s = (blk_shape){.R = r->S[0] / C, .d = {C, r->S[1] / C}, .whole_inputs = 1u << 1};
    return 0;
}

static int call_mm_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0], OC = s->d[1];
    float *a[3];
    bufs b;
    /* the weight (OC x C: the LM head's is 512 MB at Llama-7B's shapes) is
     * read in place from its proven slice when the engine gives it */
    const float *weight = s->given[1];
    int rc = bufs_alloc(&b, "matmul.fwd", weight ? 2 : 3, (uint64_t[]){rows * OC, rows * C, OC * C}, a);
    if (rc == 0)
        rc = krn_matmul_forward(ctx, a[0], a[1], weight ? weight : a[2], NULL, rows, C, OC);
    bufs_free(&b);
    return rc;
}

/* Exact x + bias[i % C]: matmul.fwd.bias, bias.fwd; x (N,C), bias (C). */
static int shape_bias(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 2 || r->S[1] == 0 || r->n % r->S[1] || r->S[0] != r->n)
        return misfit(r, "a bias (x, bias)");
    *s = (blk_shape){.R = r->n / r->S[1], .d = {r->S[1]}, .whole_inputs = 1u << 1};
    return 0;
}

/* Exact a + b elementwise: residual.fwd, residual.bwd1/2, accumulate. */
static int shape_add(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 2 || r->S[0] != r->n || r->S[1] != r->n)
        return misfit(r, "an elementwise sum (a, b)");
    *s = (blk_shape){.R = r->n, .d = {1}};
    return 0;
}

/* Both run as krn_bias_forward (the same exact add; an elementwise sum is
 * a bias of period rows). */
static int call_bias(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0], N = rows;
    if (C == 1) { /* elementwise: one row of `rows` elements */
        C = rows;
        N = 1;
    }
    float *a[3];
    bufs b;
    int rc = bufs_alloc(&b, "bias", 3, (uint64_t[]){N * C, N * C, C}, a);
    if (rc == 0)
        rc = krn_bias_forward(ctx, a[0], a[1], a[2], N, C);
    bufs_free(&b);
    return rc;
}

/* matmul.bwd.dinp: dout (N,OC), weight (OC,C), old dinp (N,C) -> (N,C). */
static int shape_mm_dinp(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 3 || r->S[1] == 0)
        return misfit(r, "matmul.bwd.dinp (dout, weight, dinp)");
    uint64_t N = shared_dim(r->n, r->S[0], r->S[1]);
    if (N == 0)
        return misfit(r, "matmul.bwd.dinp (dout, weight, dinp)");
    *s = (blk_shape){.R = N, .d = {r->n / N, r->S[0] / N}, .whole_inputs = 1u << 1};
    return 0;
}

static int call_mm_dinp(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0], OC = s->d[1];
    float *a[5]; /* dinp, dweight, dout, inp, weight */
    bufs b;
    /* the weight read in place when the engine gives it, as matmul.fwd's
     * (dweight's buffer is never written: block mode stops after dinp) */
    const float *weight = s->given[1];
    int rc = bufs_alloc(&b, "matmul.bwd.dinp", weight ? 4 : 5,
                        (uint64_t[]){rows * C, OC * C, rows * OC, rows * C, OC * C}, a);
    if (rc == 0)
        rc = krn_matmul_backward(ctx, a[0], a[1], NULL, a[2], a[3], weight ? weight : a[4], rows, C, OC);
    bufs_free(&b);
    return rc;
}

/* matmul.bwd.dweight: dout (N,OC), inp (N,C), old dweight (OC,C): a sum
 * over every row. */
static int shape_mm_dweight(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 3 || r->n == 0)
        return misfit(r, "matmul.bwd.dweight (dout, inp, dweight)");
    uint64_t N = shared_dim(r->S[0], r->S[1], r->n);
    if (N == 0)
        return misfit(r, "matmul.bwd.dweight (dout, inp, dweight)");
    *s = (blk_shape){.R = N, .d = {r->S[1] / N, r->S[0] / N}, .whole = true};
    return 0;
}

static int call_mm_dweight(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0], OC = s->d[1];
    float *a[4]; /* dweight, dout, inp, weight */
    bufs b;
    int rc = bufs_alloc(&b, "matmul.bwd.dweight", 4, (uint64_t[]){OC * C, rows * OC, rows * C, OC * C}, a);
    if (rc == 0)
        rc = krn_matmul_backward(ctx, NULL, a[0], NULL, a[1], a[2], a[3], rows, C, OC);
    bufs_free(&b);
    return rc;
}

/* Column sums: matmul.bwd.dbias, bias.bwd; dout (N,C), old dbias (C). */
static int shape_colsum(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 2 || r->S[1] != r->n || r->n == 0 || r->S[0] % r->n)
        return misfit(r, "a column sum (dout, dbias)");
    *s = (blk_shape){.R = r->S[0] / r->n, .d = {r->n}, .whole = true};
    return 0;
}

static int call_colsum(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0];
    float *a[2];
    bufs b;
    int rc = bufs_alloc(&b, "bias.bwd", 2, (uint64_t[]){C, rows * C}, a);
    if (rc == 0)
        rc = krn_bias_backward(ctx, a[0], a[1], rows, C);
    bufs_free(&b);
    return rc;
}

/* ---- activations (elementwise: a row is an element) ---- */

static int shape_elementwise(const blk_rec *r, blk_shape *s)
{
    for (size_t m = 0; m < r->ninputs; m++)
        if (r->S[m] != r->n)
            return misfit(r, "an elementwise op");
    *s = (blk_shape){.R = r->n, .d = {1}};
    return 0;
}

/* Runs op on `rows` elements with k buffers of that size. */
#define ELEMENTWISE(fn, k, ...)                                                                              \
    static int fn(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)                \
    {                                                                                                        \
        (void)s;                                                                                             \
        (void)cfg;                                                                                           \
        float *a[k];                                                                                         \
        uint64_t sz[k];                                                                                      \
        for (size_t i = 0; i < k; i++)                                                                       \
            sz[i] = rows;                                                                                    \
        bufs b;                                                                                              \
        int rc = bufs_alloc(&b, #fn, k, sz, a);                                                              \
        if (rc == 0)                                                                                         \
            rc = __VA_ARGS__;                                                                                \
        bufs_free(&b);                                                                                       \
        return rc;                                                                                           \
    }

ELEMENTWISE(call_gelu_fwd, 2, krn_gelu_forward(ctx, a[0], a[1], rows))
ELEMENTWISE(call_gelu_bwd, 3, krn_gelu_backward(ctx, a[0], a[1], a[2], rows))
ELEMENTWISE(call_relu_fwd, 2, krn_relu_forward(ctx, a[0], a[1], rows))
ELEMENTWISE(call_relu_bwd, 3, krn_relu_backward(ctx, a[0], a[1], a[2], rows))
ELEMENTWISE(call_swiglu_fwd, 3, krn_swiglu_forward(ctx, a[0], a[1], a[2], rows))
ELEMENTWISE(call_swiglu_bwd, 5, krn_swiglu_backward(ctx, a[0], a[1], a[2], a[3], a[4], rows))

/* ---- layernorm, RMSNorm (a row is a row of C) ---- */

/* The per-row sites that read the row (mean, var, ms, dmean, dnmean):
 * output N, input 0 (N,C). */
static int shape_norm_row(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs < 1 || r->n == 0 || r->S[0] % r->n)
        return misfit(r, "a norm's per-row site");
    uint64_t C = r->S[0] / r->n;
    uint32_t whole = 0;
    for (size_t m = 0; m < r->ninputs; m++)
        if (r->S[m] == C && C != r->S[0])
            whole |= 1u << m; /* the weight */
    *s = (blk_shape){.R = r->n, .d = {C}, .whole_inputs = whole};
    return 0;
}

/* rstd from var or ms: elementwise over N rows (C plays no part). */
static int shape_norm_rstd(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 1 || r->S[0] != r->n)
        return misfit(r, "a norm's rstd (var)");
    *s = (blk_shape){.R = r->n, .d = {1}};
    return 0;
}

/* The per-element sites (fwd, bwd.dinp): output (N,C), N from a per-row
 * input (the smallest that is not C). */
static int shape_norm_elem(const blk_rec *r, blk_shape *s)
{
    uint64_t C = r->cfg->model.width;
    if (C == 0 || r->n % C)
        return misfit(r, "a norm's per-element site");
    uint32_t whole = 0;
    for (size_t m = 0; m < r->ninputs; m++)
        if (r->S[m] == C)
            whole |= 1u << m;
    *s = (blk_shape){.R = r->n / C, .d = {C}, .whole_inputs = whole};
    return 0;
}

/* The column sums (dbias, dweight): output C, a sum over every row. */
static int shape_norm_col(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs < 1 || r->n == 0 || r->S[0] % r->n)
        return misfit(r, "a norm's column sum");
    *s = (blk_shape){.R = r->S[0] / r->n, .d = {r->n}, .whole = true};
    return 0;
}

static int call_ln_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0];
    float *a[6]; /* out, mean, rstd, inp, weight, bias */
    bufs b;
    int rc = bufs_alloc(&b, "layernorm", 6, (uint64_t[]){rows * C, rows, rows, rows * C, C, C}, a);
    if (rc == 0)
        rc = krn_layernorm_forward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], rows, C);
    bufs_free(&b);
    return rc;
}

static int call_ln_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0];
    float *a[8]; /* dinp, dweight, dbias, dout, inp, weight, mean, rstd */
    bufs b;
    int rc = bufs_alloc(&b, "layernorm.bwd", 8,
                        (uint64_t[]){rows * C, C, C, rows * C, rows * C, C, rows, rows}, a);
    if (rc == 0)
        rc = krn_layernorm_backward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], rows, C);
    bufs_free(&b);
    return rc;
}

static int call_rms_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    uint64_t C = s->d[0];
    float *a[4]; /* out, rstd, inp, weight */
    bufs b;
    int rc = bufs_alloc(&b, "rmsnorm", 4, (uint64_t[]){rows * C, rows, rows * C, C}, a);
    if (rc == 0)
        rc = krn_rmsnorm_forward(ctx, a[0], a[1], a[2], a[3], cfg->model.norm_eps, rows, C);
    bufs_free(&b);
    return rc;
}

static int call_rms_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0];
    float *a[6]; /* dinp, dweight, dout, inp, weight, rstd */
    bufs b;
    int rc = bufs_alloc(&b, "rmsnorm.bwd", 6, (uint64_t[]){rows * C, C, rows * C, rows * C, C, rows}, a);
    if (rc == 0)
        rc = krn_rmsnorm_backward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], rows, C);
    bufs_free(&b);
    return rc;
}

/* ---- attention (a row is a sequence: all heads of one b) ---- */

typedef struct {
    uint64_t T, C, NH, NKV, hs, KVW;
} attn_cfg;

static bool attn_of(const trn_run_config *cfg, attn_cfg *a)
{
    const trn_model_config *m = &cfg->model;
    a->T = cfg->seq_len;
    a->C = m->width;
    a->NH = m->n_head;
    if (a->T == 0 || a->NH == 0 || a->C % a->NH)
        return false;
    a->hs = a->C / a->NH;
    a->NKV = m->kind == TRN_MODEL_LLAMA && m->n_kv_head ? m->n_kv_head : a->NH;
    a->KVW = a->NKV * a->hs;
    return true;
}

/* B from the site's output size: per sequence it holds NH*T*T (scores),
 * NH*T (row sums), T*C (outputs, dq) or T*KVW (dk, dv) elements. */
static int shape_attn(const blk_rec *r, blk_shape *s, uint64_t per_seq_of_kind)
{
    if (per_seq_of_kind == 0 || r->n % per_seq_of_kind)
        return misfit(r, "attention at the config's heads and sequence length");
    *s = (blk_shape){.R = r->n / per_seq_of_kind};
    return 0;
}

#define ATTN_SHAPE(fn, expr)                                                                                 \
    static int fn(const blk_rec *r, blk_shape *s)                                                            \
    {                                                                                                        \
        attn_cfg a;                                                                                          \
        if (!attn_of(r->cfg, &a))                                                                            \
            return misfit(r, "attention (the config names no heads)");                                       \
        return shape_attn(r, s, (expr));                                                                     \
    }
ATTN_SHAPE(shape_attn_tt, a.NH * a.T * a.T)
ATTN_SHAPE(shape_attn_row, a.NH * a.T)
ATTN_SHAPE(shape_attn_out, a.T * a.C)
ATTN_SHAPE(shape_attn_kv, a.T * a.KVW)

static int call_attn_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)s;
    attn_cfg c;
    (void)attn_of(cfg, &c);
    uint64_t bt = rows * c.T, tt = rows * c.NH * c.T * c.T;
    float *a[6]; /* out, preatt, att, then inp (GPT-2) or q, k, v (Llama) */
    bufs b;
    int rc;
    if (cfg->model.kind == TRN_MODEL_LLAMA) {
        rc = bufs_alloc(&b, "attn", 6, (uint64_t[]){bt * c.C, tt, tt, bt * c.C, bt * c.KVW, bt * c.KVW}, a);
        if (rc == 0)
            rc = krn_gqa_forward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], rows, c.T, c.NH, c.NKV, c.hs);
    } else {
        rc = bufs_alloc(&b, "attn", 4, (uint64_t[]){bt * c.C, tt, tt, bt * 3 * c.C}, a);
        if (rc == 0)
            rc = krn_attention_forward(ctx, a[0], a[1], a[2], a[3], rows, c.T, c.C, c.NH);
    }
    bufs_free(&b);
    return rc;
}

static int call_attn_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)s;
    attn_cfg c;
    (void)attn_of(cfg, &c);
    uint64_t bt = rows * c.T, tt = rows * c.NH * c.T * c.T;
    float *a[10];
    bufs b;
    int rc;
    if (cfg->model.kind == TRN_MODEL_LLAMA) { /* dq, dk, dv, dpreatt, datt, dout, q, k, v, att */
        uint64_t q = bt * c.C, kv = bt * c.KVW;
        rc = bufs_alloc(&b, "attn.bwd", 10, (uint64_t[]){q, kv, kv, tt, tt, q, q, kv, kv, tt}, a);
        if (rc == 0)
            rc = krn_gqa_backward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], rows, c.T, c.NH,
                                  c.NKV, c.hs);
    } else { /* dinp, dpreatt, datt, dout, inp, att */
        rc = bufs_alloc(&b, "attn.bwd", 6, (uint64_t[]){bt * 3 * c.C, tt, tt, bt * c.C, bt * 3 * c.C, tt}, a);
        if (rc == 0)
            rc = krn_attention_backward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], rows, c.T, c.C, c.NH);
    }
    bufs_free(&b);
    return rc;
}

/* ---- rotary embedding, encoder (a row is a sequence) ---- */

/* rope.fwd (inp, cos, sin), rope.bwd (dout, cos, sin, dinp): the tables are
 * T*hs/2; the heads are the rest of a sequence's width. */
static int shape_rope(const blk_rec *r, blk_shape *s)
{
    const trn_run_config *cfg = r->cfg;
    uint64_t T = cfg->seq_len, B = cfg->batch_size / (cfg->shards ? cfg->shards : 1);
    if (r->ninputs < 3 || !T || !B || r->S[1] % T || r->S[1] != r->S[2] || r->S[1] == 0)
        return misfit(r, "rope (x, cos, sin)");
    uint64_t hs = 2 * r->S[1] / T;
    if (r->n % (B * T * hs))
        return misfit(r, "rope (x, cos, sin) at the config's batch");
    *s = (blk_shape){.R = B, .d = {T, r->n / (B * T * hs), hs}, .whole_inputs = 1u << 1 | 1u << 2};
    return 0;
}

static int call_rope(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg, bool fwd)
{
    (void)cfg;
    uint64_t T = s->d[0], NH = s->d[1], hs = s->d[2], n = rows * T * NH * hs, tab = T * hs / 2;
    float *a[4];
    bufs b;
    int rc = bufs_alloc(&b, "rope", 4, (uint64_t[]){n, n, tab, tab}, a);
    if (rc == 0)
        rc = fwd ? krn_rope_forward(ctx, a[0], a[1], a[2], a[3], rows, T, NH, hs)
                 : krn_rope_backward(ctx, a[0], a[1], a[2], a[3], rows, T, NH, hs);
    bufs_free(&b);
    return rc;
}

static int call_rope_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_rope(ctx, s, rows, cfg, true);
}

static int call_rope_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_rope(ctx, s, rows, cfg, false);
}

/* encoder.fwd: tokens (B,T), wte (V,C), wpe (T,C) or none. */
static int shape_encoder(const blk_rec *r, blk_shape *s)
{
    uint64_t T = r->cfg->seq_len, C = r->cfg->model.width;
    if (r->ninputs < 2 || !T || !C || r->n % (T * C) || r->S[0] * C != r->n || r->S[1] % C)
        return misfit(r, "encoder.fwd (tokens, wte[, wpe])");
    *s = (blk_shape){.R = r->n / (T * C), .d = {T, C, r->S[1] / C, r->ninputs > 2},
                     .whole_inputs = 1u << 1 | 1u << 2};
    return 0;
}

static int call_encoder(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t T = s->d[0], C = s->d[1], V = s->d[2];
    float *a[4]; /* out, tokens, wte, wpe */
    bufs b;
    int rc = bufs_alloc(&b, "encoder", 4, (uint64_t[]){rows * T * C, rows * T, V * C, T * C}, a);
    if (rc == 0)
        rc = krn_encoder_forward(ctx, a[0], (const int32_t *)a[1], a[2], s->d[3] ? a[3] : NULL, rows, T, C, V);
    bufs_free(&b);
    return rc;
}

/* ---- cross-entropy (a row is a position's logits) ---- */

static uint64_t xent_V(const trn_run_config *cfg)
{
    return cfg->model.kind == TRN_MODEL_GPT2 || cfg->model.kind == TRN_MODEL_LLAMA ? cfg->model.vocab
                                                                                      : cfg->model.n_class;
}

/* The forward's sites per element (exp, probs: N*V) and per row (sum,
 * logsum, losses: N); xent.loss sums every row. */
static int shape_xent(const blk_rec *r, blk_shape *s, bool per_elem)
{
    uint64_t V = xent_V(r->cfg);
    if (!V || r->n == 0 || (per_elem && r->n % V))
        return misfit(r, "cross-entropy (the config names no classes)");
    *s = (blk_shape){.R = per_elem ? r->n / V : r->n, .d = {V}};
    return 0;
}

static int shape_xent_elem(const blk_rec *r, blk_shape *s)
{
    return shape_xent(r, s, true);
}

static int shape_xent_row(const blk_rec *r, blk_shape *s)
{
    return shape_xent(r, s, false);
}

static int shape_xent_loss(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 1 || r->n != 1)
        return misfit(r, "xent.loss (losses)");
    *s = (blk_shape){.R = r->S[0], .d = {xent_V(r->cfg)}, .whole = true};
    return 0;
}

static int call_xent_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t V = s->d[0];
    float *a[5]; /* loss, losses, probs, logits, targets */
    bufs b;
    int rc = bufs_alloc(&b, "xent", 5, (uint64_t[]){1, rows, rows * V, rows * V, rows}, a);
    if (rc == 0)
        rc = krn_crossentropy_forward(ctx, a[0], a[1], a[2], a[3], (const int32_t *)a[4], rows, V);
    bufs_free(&b);
    return rc;
}

/* xent.bwd: probs (N,V), targets (N), old dlogits (N,V). */
static int shape_xent_bwd(const blk_rec *r, blk_shape *s)
{
    if (r->ninputs != 3 || r->S[1] == 0 || r->n % r->S[1])
        return misfit(r, "xent.bwd (probs, targets, dlogits)");
    *s = (blk_shape){.R = r->S[1], .d = {r->n / r->S[1]}};
    return 0;
}

static int call_xent_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t V = s->d[0];
    float *a[3]; /* dlogits, probs, targets */
    bufs b;
    int rc = bufs_alloc(&b, "xent.bwd", 3, (uint64_t[]){rows * V, rows * V, rows}, a);
    if (rc == 0) /* every model's dloss is 1 (trainer/gpt2.c, llama.c, mlp.c) */
        rc = krn_crossentropy_backward_rows(ctx, a[0], a[1], (const int32_t *)a[2], 1.0f, s->R, rows, V);
    bufs_free(&b);
    return rc;
}

/* ---- AdamW (a row is a parameter) ---- */

/* adamw.m (scale?, grads, m), adamw.v (scale?, grads, v), adamw.param
 * (scale?, bc1, bc2, lr, params, m, v): the scalars come by value, read
 * from the sites that made them (trainer/train.c declares them first). */
static int shape_adamw(const blk_rec *r, blk_shape *s)
{
    size_t k = r->ninputs;
    bool param = k >= 6, clip = param ? k == 7 : k == 3;
    if ((param && k != 6 && k != 7) || (!param && k != 2 && k != 3) || r->S[k - 1] != r->n)
        return misfit(r, "AdamW");
    uint32_t whole = clip ? 1u : 0u;
    if (param)
        whole |= clip ? 0xeu : 0x7u; /* bc1, bc2, lr */
    *s = (blk_shape){.R = r->n, .d = {clip}, .whole_inputs = whole};
    return 0;
}

static int call_adamw(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    int b = (int)cfg->grid_bits;
    float scale = 1.0f, bc1 = 1.0f, bc2 = 1.0f, lr = 0.0f;
    for (unsigned k = 0; k < 3; k++)
        KRN_TRACE_READS(ctx, k, {s->d[0] ? &scale : NULL, 1});
    KRN_TRACE_READS(ctx, 2, {&bc1, 1}, {&bc2, 1}, {&lr, 1});
    float *a[4]; /* params, m, v, grads */
    bufs bb;
    int rc = bufs_alloc(&bb, "adamw", 4, (uint64_t[]){rows, rows, rows, rows}, a);
    if (rc == 0)
        rc = krn_adamw_update(ctx, a[0], a[1], a[2], a[3], bc1, bc2, lr, krn_grid_round(cfg->beta1, b),
                              krn_grid_round(cfg->beta2, b), krn_grid_round(cfg->eps, b),
                              krn_grid_round(cfg->weight_decay, b), scale, rows);
    bufs_free(&bb);
    return rc;
}

/* ---- the optimizer's scalars and the gradient norm (one element each,
 * from every gradient or from the config and the step) ---- */

/* A site of one element: gradnorm.sqrt, clip.factor, schedule.lr, the
 * corrections; d[0] the step. */
static int shape_scalar(const blk_rec *r, blk_shape *s)
{
    if (r->n != 1)
        return misfit(r, "a scalar site");
    *s = (blk_shape){.R = 1, .d = {r->step}, .whole = true};
    return 0;
}

/* gradnorm.sumsq: a sum over every gradient. */
static int shape_sumsq(const blk_rec *r, blk_shape *s)
{
    if (r->n != 1 || r->ninputs != 1 || r->S[0] == 0)
        return misfit(r, "gradnorm.sumsq (grads)");
    *s = (blk_shape){.R = r->S[0], .d = {r->S[0]}, .whole = true};
    return 0;
}

static int call_grad_norm(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    (void)rows;
    uint64_t n = s->d[0] > 1 ? s->d[0] : 1; /* gradnorm.sqrt: no gradient is read */
    float *a[2];
    bufs b;
    int rc = bufs_alloc(&b, "gradnorm", 2, (uint64_t[]){1, n}, a);
    if (rc == 0)
        rc = krn_grad_norm(ctx, a[0], a[1], n);
    bufs_free(&b);
    return rc;
}

/* clip.factor: the norm by value, declared by trainer/train.c. */
static int call_clip(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)s;
    (void)rows;
    float norm = 0.0f, factor;
    KRN_TRACE_READS(ctx, 0, {&norm, 1});
    return krn_clip_factor(ctx, &factor, norm, krn_grid_round(cfg->grad_clip, (int)cfg->grid_bits));
}

/* schedule.lr: the schedule's exact value at the step (trainer/train.c). */
static int call_lr(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)rows;
    float lr;
    double lr64 = trn_schedule_lr(cfg, s->d[0]);
    const krn_band exact = {.kind = KRN_BAND_ZERO};
    return krn_site(ctx, "schedule.lr", &lr, &lr64, 1, &exact);
}

static int call_corrections(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)rows;
    int b = (int)cfg->grid_bits;
    float bc1, bc2;
    return krn_adamw_corrections(ctx, &bc1, &bc2, krn_grid_round(cfg->beta1, b), krn_grid_round(cfg->beta2, b),
                                 s->d[0]);
}

/* encoder.bwd.dwte (dout, tokens, dwte), .dwpe (dout, dwpe): sums over
 * every position (a token's rows, a position's sequences). */
static int shape_encoder_bwd(const blk_rec *r, blk_shape *s)
{
    uint64_t T = r->cfg->seq_len, C = r->cfg->model.width, V = r->cfg->model.vocab;
    if (r->ninputs < 2 || !T || !C || !V || r->S[0] % (T * C))
        return misfit(r, "the encoder's backward (dout, ...)");
    *s = (blk_shape){.R = r->S[0] / (T * C), .d = {T, C, V}, .whole = true};
    return 0;
}

static int call_encoder_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t T = s->d[0], C = s->d[1], V = s->d[2];
    float *a[4]; /* dwte, dwpe, dout, tokens */
    bufs b;
    int rc = bufs_alloc(&b, "encoder.bwd", 4, (uint64_t[]){V * C, T * C, rows * T * C, rows * T}, a);
    if (rc == 0)
        rc = krn_encoder_backward(ctx, a[0], a[1], a[2], (const int32_t *)a[3], rows, T, C, V);
    bufs_free(&b);
    return rc;
}

/* ---- the rotary table (a function of the config) ---- */

static int shape_rope_table(const blk_rec *r, blk_shape *s)
{
    attn_cfg a;
    if (!attn_of(r->cfg, &a) || (r->n != a.hs / 2 && r->n != a.T * a.hs / 2))
        return misfit(r, "the rotary table");
    *s = (blk_shape){.R = 1, .d = {a.T, a.hs}, .whole = true};
    return 0;
}

static int call_rope_table(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)rows;
    uint64_t tab = s->d[0] * s->d[1] / 2;
    float *a[2];
    bufs b;
    int rc = bufs_alloc(&b, "rope.table", 2, (uint64_t[]){tab, tab}, a);
    if (rc == 0)
        rc = krn_rope_table(ctx, a[0], a[1], s->d[0], s->d[1], cfg->model.rope_theta);
    bufs_free(&b);
    return rc;
}

/* ---- batch norm and global average pooling (ResNet; a row is an image) ---- */

static uint64_t shard_batch(const trn_run_config *cfg)
{
    return cfg->batch_size / (cfg->shards ? cfg->shards : 1);
}

/* The images' sites: bn.fwd (inp, mean, rstd, weight, bias) and
 * bn.bwd.dinp (dout, weight, inp, mean, rstd, dinp, dmean, dnmean): C is a
 * per-channel input's size, N the shard's batch. */
static int shape_bn_image(const blk_rec *r, blk_shape *s)
{
    uint64_t N = shard_batch(r->cfg), C = 0;
    for (size_t m = 0; m < r->ninputs && !C; m++)
        if (r->S[m] < r->n)
            C = r->S[m];
    if (!N || !C || r->n % (N * C))
        return misfit(r, "batch norm over images");
    uint32_t whole = 0;
    for (size_t m = 0; m < r->ninputs; m++)
        if (r->S[m] == C)
            whole |= 1u << m;
    *s = (blk_shape){.R = N, .d = {C, r->n / (N * C)}, .whole_inputs = whole};
    return 0;
}

/* The channels' sums over every image (mean, var, dmean, dnmean, dbias,
 * dweight): the first input is (N,C,HW). */
static int shape_bn_sum(const blk_rec *r, blk_shape *s)
{
    uint64_t N = shard_batch(r->cfg), C = r->n;
    if (!N || !C || r->ninputs < 1 || r->S[0] % (N * C))
        return misfit(r, "a batch norm's sum over images");
    *s = (blk_shape){.R = N, .d = {C, r->S[0] / (N * C)}, .whole = true};
    return 0;
}

/* bn.rstd (var), bn.running_mean (running_mean, mean): elementwise over
 * the channels. */
static int shape_bn_channel(const blk_rec *r, blk_shape *s)
{
    for (size_t m = 0; m < r->ninputs; m++)
        if (r->S[m] != r->n)
            return misfit(r, "batch norm's per-channel site");
    if (r->ninputs == 0)
        return misfit(r, "batch norm's per-channel site");
    *s = (blk_shape){.R = r->n, .d = {1, 1}, .whole_inputs = 0};
    return 0;
}

/* bn.rstd and bn.running_mean run as a batch norm of two images of one
 * element per channel (rows channels): they need only var and eps, the
 * running mean, mean and the momentum. (bn.running_var needs M = N*HW,
 * which its record does not give: the whole step decides it.) */
static int call_bn_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    bool rstd_only = s->d[0] == 1 && s->d[1] == 1;
    uint64_t N = rstd_only ? 2 : rows, C = rstd_only ? rows : s->d[0], HW = rstd_only ? 1 : s->d[1];
    uint64_t n = N * C * HW;
    float *a[8]; /* out, mean, rstd, running_mean, running_var, inp, weight, bias */
    bufs b;
    int rc = bufs_alloc(&b, "bn", 8, (uint64_t[]){n, C, C, C, C, n, C, C}, a);
    if (rc == 0)
        rc = krn_batchnorm_forward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], N, C, HW,
                                   cfg->model.bn_eps, 1.0); /* momentum 1, as trainer/resnet.c calls it (the
                                                               run's momentum is applied by "bn.running") */
    bufs_free(&b);
    return rc;
}

static int call_bn_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    (void)cfg;
    uint64_t C = s->d[0], HW = s->d[1], n = rows * C * HW;
    float *a[8]; /* dinp, dweight, dbias, dout, inp, weight, mean, rstd */
    bufs b;
    int rc = bufs_alloc(&b, "bn.bwd", 8, (uint64_t[]){n, C, C, n, n, C, C, C}, a);
    if (rc == 0)
        rc = krn_batchnorm_backward(ctx, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], rows, C, HW);
    bufs_free(&b);
    return rc;
}

/* avgpool.fwd (inp (N,C,HW) -> (N,C)), avgpool.bwd (dout (N,C), dinp). */
static int shape_avgpool(const blk_rec *r, blk_shape *s)
{
    uint64_t N = shard_batch(r->cfg);
    bool fwd = r->ninputs == 1;
    uint64_t small = fwd ? r->n : r->S[0], big = fwd ? r->S[0] : r->n;
    if (!N || !small || small % N || big % small)
        return misfit(r, "global average pooling");
    *s = (blk_shape){.R = N, .d = {small / N, big / small}};
    return 0;
}

static int call_avgpool(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg, bool fwd)
{
    (void)cfg;
    uint64_t C = s->d[0], HW = s->d[1];
    float *a[2];
    bufs b;
    int rc = bufs_alloc(&b, "avgpool", 2, (uint64_t[]){fwd ? rows * C : rows * C * HW, fwd ? rows * C * HW : rows * C},
                        a);
    if (rc == 0)
        rc = fwd ? krn_avgpool_global_forward(ctx, a[0], a[1], rows, C, HW)
                 : krn_avgpool_global_backward(ctx, a[0], a[1], rows, C, HW);
    bufs_free(&b);
    return rc;
}

static int call_avgpool_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_avgpool(ctx, s, rows, cfg, true);
}

static int call_avgpool_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_avgpool(ctx, s, rows, cfg, false);
}

/* ---- convolutions (ResNet; a row is an image) ---- */

static uint64_t square_root(uint64_t v)
{
    uint64_t r = (uint64_t)llround(sqrt((double)v));
    return r * r == v ? r : 0;
}

/* A ResNet's convolutions are square, k x k with k 1 or 3, padding k / 2,
 * stride 1 or 2 (trainer/resnet.c). From the image (C,H,H) of size `in`,
 * the weight's size and the output image's size `out`: the one (C, H, OC,
 * k, stride) that fits, into d[] = {C, H, OC, k, stride}; false when none
 * or several do. */
static bool conv_dims(uint64_t in, uint64_t wsize, uint64_t out, uint64_t d[6])
{
    int found = 0;
    for (uint64_t k = 1; k <= 3; k += 2) {
        if (wsize % (k * k))
            continue;
        uint64_t co = wsize / (k * k); /* C * OC */
        for (uint64_t C = 1; C <= co && C <= 8192; C++) {
            if (co % C || in % C)
                continue;
            uint64_t OC = co / C, H = square_root(in / C);
            if (!H || out % OC)
                continue;
            uint64_t OH = square_root(out / OC);
            for (uint64_t stride = 1; OH && stride <= 2; stride++)
                if (H + 2 * (k / 2) >= k && (H + 2 * (k / 2) - k) / stride + 1 == OH) {
                    uint64_t cand[6] = {C, H, OC, k, stride, 0};
                    if (found++ == 0)
                        memcpy(d, cand, sizeof cand);
                }
        }
    }
    return found == 1;
}

/* conv.fwd (inp (N,C,H,H), weight (OC,C,k,k)), conv.bwd.dinp (dout
 * (N,OC,OH,OH), weight, dinp), conv.bwd.dweight (dout, inp, dweight): N
 * the shard's batch; a sum over every image for dweight. */
static int shape_conv(const blk_rec *r, blk_shape *s, int which)
{
    uint64_t N = shard_batch(r->cfg), d[6] = {0};
    bool ok = N && r->ninputs >= 2;
    if (ok && which == 0) /* fwd */
        ok = r->S[0] % N == 0 && r->n % N == 0 && conv_dims(r->S[0] / N, r->S[1], r->n / N, d);
    else if (ok && which == 1) /* dinp */
        ok = r->S[0] % N == 0 && r->n % N == 0 && conv_dims(r->n / N, r->S[1], r->S[0] / N, d);
    else if (ok) /* dweight */
        ok = r->S[0] % N == 0 && r->S[1] % N == 0 && conv_dims(r->S[1] / N, r->n, r->S[0] / N, d);
    if (!ok)
        return misfit(r, "a ResNet convolution (k 1 or 3, stride 1 or 2) at the config's batch");
    *s = (blk_shape){.R = N, .whole = which == 2, .whole_inputs = which == 2 ? 0 : 1u << 1};
    memcpy(s->d, d, sizeof d);
    return 0;
}

static int shape_conv_fwd(const blk_rec *r, blk_shape *s)
{
    return shape_conv(r, s, 0);
}

static int shape_conv_dinp(const blk_rec *r, blk_shape *s)
{
    return shape_conv(r, s, 1);
}

static int shape_conv_dweight(const blk_rec *r, blk_shape *s)
{
    return shape_conv(r, s, 2);
}

static int call_conv(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg, bool fwd)
{
    (void)cfg;
    uint64_t C = s->d[0], H = s->d[1], OC = s->d[2], k = s->d[3], stride = s->d[4], pad = k / 2;
    uint64_t OH = (H + 2 * pad - k) / stride + 1, nin = rows * C * H * H, nout = rows * OC * OH * OH;
    float *a[5]; /* fwd: out, inp, weight; bwd: dinp, dweight, dout, inp, weight */
    bufs b;
    int rc = fwd ? bufs_alloc(&b, "conv", 3, (uint64_t[]){nout, nin, OC * C * k * k}, a)
                 : bufs_alloc(&b, "conv.bwd", 5, (uint64_t[]){nin, OC * C * k * k, nout, nin, OC * C * k * k}, a);
    if (rc == 0)
        rc = fwd ? krn_conv2d_forward(ctx, a[0], a[1], a[2], NULL, rows, C, H, H, OC, k, k, stride, pad)
                 : krn_conv2d_backward(ctx, s->whole ? NULL : a[0], a[1], NULL, a[2], a[3], a[4], rows, C, H, H, OC,
                                       k, k, stride, pad);
    bufs_free(&b);
    return rc;
}

static int call_conv_fwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_conv(ctx, s, rows, cfg, true);
}

static int call_conv_bwd(krn_ctx *ctx, const blk_shape *s, uint64_t rows, const trn_run_config *cfg)
{
    return call_conv(ctx, s, rows, cfg, false);
}

/* ---- the table ---- */

static const blk_op ops[] = {
    {"matmul.fwd", 0, shape_mm_fwd, call_mm_fwd},
    {"matmul.fwd.bias", 0, shape_bias, call_bias},
    {"bias.fwd", 0, shape_bias, call_bias},
    {"residual.fwd", 0, shape_add, call_bias},
    {"residual.bwd1", 0, shape_add, call_bias},
    {"residual.bwd2", 0, shape_add, call_bias},
    {"accumulate", 0, shape_add, call_bias},
    {"matmul.bwd.dinp", 0, shape_mm_dinp, call_mm_dinp},
    {"matmul.bwd.dweight", 0, shape_mm_dweight, call_mm_dweight},
    {"matmul.bwd.dbias", 0, shape_colsum, call_colsum},
    {"bias.bwd", 0, shape_colsum, call_colsum},
    {"gelu.tanh", 0, shape_elementwise, call_gelu_fwd},
    {"gelu.fwd", 1, shape_elementwise, call_gelu_fwd},
    {"gelu.bwd", 1, shape_elementwise, call_gelu_bwd},
    {"relu.fwd", 0, shape_elementwise, call_relu_fwd},
    {"relu.bwd", 0, shape_elementwise, call_relu_bwd},
    {"swiglu.exp", 0, shape_elementwise, call_swiglu_fwd},
    {"swiglu.fwd", 1, shape_elementwise, call_swiglu_fwd},
    {"swiglu.bwd.da", 1, shape_elementwise, call_swiglu_bwd},
    {"swiglu.bwd.db", 2, shape_elementwise, call_swiglu_bwd},
    {"layernorm.mean", 0, shape_norm_row, call_ln_fwd},
    {"layernorm.var", 1, shape_norm_row, call_ln_fwd},
    {"layernorm.rstd", 2, shape_norm_rstd, call_ln_fwd},
    {"layernorm.fwd", 3, shape_norm_elem, call_ln_fwd},
    {"layernorm.bwd.dmean", 0, shape_norm_row, call_ln_bwd},
    {"layernorm.bwd.dnmean", 1, shape_norm_row, call_ln_bwd},
    {"layernorm.bwd.dbias", 2, shape_norm_col, call_ln_bwd},
    {"layernorm.bwd.dweight", 3, shape_norm_col, call_ln_bwd},
    {"layernorm.bwd.dinp", 4, shape_norm_elem, call_ln_bwd},
    {"rmsnorm.ms", 0, shape_norm_row, call_rms_fwd},
    {"rmsnorm.rstd", 1, shape_norm_rstd, call_rms_fwd},
    {"rmsnorm.fwd", 2, shape_norm_elem, call_rms_fwd},
    {"rmsnorm.bwd.dnmean", 0, shape_norm_row, call_rms_bwd},
    {"rmsnorm.bwd.dweight", 1, shape_norm_col, call_rms_bwd},
    {"rmsnorm.bwd.dinp", 2, shape_norm_elem, call_rms_bwd},
    {"attn.qk", 0, shape_attn_tt, call_attn_fwd},
    {"attn.exp", 1, shape_attn_tt, call_attn_fwd},
    {"attn.sum", 2, shape_attn_row, call_attn_fwd},
    {"attn.softmax", 3, shape_attn_tt, call_attn_fwd},
    {"attn.out", 4, shape_attn_out, call_attn_fwd},
    {"attn.bwd.datt", 0, shape_attn_tt, call_attn_bwd},
    {"attn.bwd.dv", 1, shape_attn_kv, call_attn_bwd},
    {"attn.bwd.r", 2, shape_attn_row, call_attn_bwd},
    {"attn.bwd.dpreatt", 3, shape_attn_tt, call_attn_bwd},
    {"attn.bwd.dq", 4, shape_attn_out, call_attn_bwd},
    {"attn.bwd.dk", 5, shape_attn_kv, call_attn_bwd},
    {"rope.fwd", 0, shape_rope, call_rope_fwd},
    {"rope.bwd", 0, shape_rope, call_rope_bwd},
    {"encoder.fwd", 0, shape_encoder, call_encoder},
    {"xent.exp", 0, shape_xent_elem, call_xent_fwd},
    {"xent.sum", 1, shape_xent_row, call_xent_fwd},
    {"xent.probs", 2, shape_xent_elem, call_xent_fwd},
    {"xent.logsum", 3, shape_xent_row, call_xent_fwd},
    {"xent.losses", 4, shape_xent_row, call_xent_fwd},
    {"xent.loss", 5, shape_xent_loss, call_xent_fwd},
    {"xent.bwd", 0, shape_xent_bwd, call_xent_bwd},
    {"adamw.m", 0, shape_adamw, call_adamw},
    {"adamw.v", 1, shape_adamw, call_adamw},
    {"adamw.param", 2, shape_adamw, call_adamw},
    {"gradnorm.sumsq", 0, shape_sumsq, call_grad_norm},
    {"gradnorm.sqrt", 1, shape_scalar, call_grad_norm},
    {"clip.factor", 0, shape_scalar, call_clip},
    {"schedule.lr", 0, shape_scalar, call_lr},
    {"adamw.pow1", 0, shape_scalar, call_corrections},
    {"adamw.pow2", 1, shape_scalar, call_corrections},
    {"adamw.bc1", 2, shape_scalar, call_corrections},
    {"adamw.bc2", 3, shape_scalar, call_corrections},
    {"encoder.bwd.dwte", 0, shape_encoder_bwd, call_encoder_bwd},
    {"encoder.bwd.dwpe", 1, shape_encoder_bwd, call_encoder_bwd},
    {"rope.freq", 0, shape_rope_table, call_rope_table},
    {"rope.cos", 1, shape_rope_table, call_rope_table},
    {"rope.sin", 2, shape_rope_table, call_rope_table},
    {"bn.mean", 0, shape_bn_sum, call_bn_fwd},
    {"bn.var", 1, shape_bn_sum, call_bn_fwd},
    {"bn.rstd", 2, shape_bn_channel, call_bn_fwd},
    {"bn.running_mean", 4, shape_bn_channel, call_bn_fwd},
    {"bn.fwd", 3, shape_bn_image, call_bn_fwd},
    {"bn.bwd.dmean", 0, shape_bn_sum, call_bn_bwd},
    {"bn.bwd.dnmean", 1, shape_bn_sum, call_bn_bwd},
    {"bn.bwd.dbias", 2, shape_bn_sum, call_bn_bwd},
    {"bn.bwd.dweight", 3, shape_bn_sum, call_bn_bwd},
    {"bn.bwd.dinp", 4, shape_bn_image, call_bn_bwd},
    {"avgpool.fwd", 0, shape_avgpool, call_avgpool_fwd},
    {"avgpool.bwd", 0, shape_avgpool, call_avgpool_bwd},
    {"conv.fwd", 0, shape_conv_fwd, call_conv_fwd},
    {"conv.bwd.dinp", 0, shape_conv_dinp, call_conv_bwd},
    {"conv.bwd.dweight", 0, shape_conv_dweight, call_conv_bwd},
};

const blk_op *blk_op_find(const char *name)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(ops[i].name, name) == 0)
            return &ops[i];
    return NULL;
}

size_t blk_op_count(void)
{
    return sizeof ops / sizeof ops[0];
}

const char *blk_op_name(size_t i)
{
    return i < blk_op_count() ? ops[i].name : NULL;
}
