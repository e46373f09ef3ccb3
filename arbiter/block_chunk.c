/* The reduction's chunks: the canonical chain of a leaf of a sum over the
 * batch and one step of it (arbiter/block_chunk.h). */
#include "arbiter/block_chunk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block_ops.h"
#include "arbiter/xsum.h"
#include "common/tree.h"
#include "kernels/ops.h"
#include "kernels/reduce.h"
#include "kernels/site.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

bool arb_chunk_supported(const char *op)
{
    static const char *const ops[] = {"matmul.bwd.dweight", "matmul.bwd.dbias", "bias.bwd", "gradnorm.sumsq",
                                      "conv.bwd.dweight", "layernorm.bwd.dbias", "layernorm.bwd.dweight",
                                      "rmsnorm.bwd.dweight", "encoder.bwd.dwpe", "encoder.bwd.dwte"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op, ops[i]) == 0)
            return true;
    return false;
}

/* What the site sums: dout^T @ inp (its row and column norms for the
 * band; a convolution's: dout (OC, N*P) @ im2col(inp)^T, a row being an
 * (image, output position) pair in that order), dout's columns (and their
 * magnitudes), or the squares of one array (their sum is their
 * magnitude), or the token embedding's gradient (CHUNK_SCATTER: dout's
 * row r added to the table's row tokens[r]; its magnitudes and each
 * table row's count of tokens). */
typedef enum { CHUNK_DWEIGHT, CHUNK_COLSUM, CHUNK_SUMSQ, CHUNK_NORM, CHUNK_SCATTER } chunk_kind;

/* A norm's weight gradient (CHUNK_NORM): a column sum whose term is the
 * FP64 expression ((inp - mean) * rstd) * dout of float32 grid values,
 * rounded as the kernel rounds it (kernels/ops_norm.c norm_rows and
 * normdout_rows; RMSNorm's mean 0.0), the same double on every IEEE
 * machine; the inputs' indices in the record. */
typedef struct {
    int mean; /* -1: none (RMSNorm) */
    int rstd, dout;
} norm_inputs;

/* The exact state of one leaf: its elements' sums (and, for the column
 * sums, magnitudes); the weight gradient's sums of squares of the leaf's
 * dout columns [o0, o1) and inp columns [c0, c1). */
typedef struct {
    chunk_kind kind;
    int old_input;          /* the input that is the old gradient; -1: none */
    uint64_t N, C, OC;      /* the column sums: C their count; a convolution: N*P rows, C = Cin*k*k;
                               the scatter: C the table's width, OC its rows (the vocabulary) */
    uint64_t G;             /* rows per group of the inputs (a convolution: an image's P positions; else 1) */
    unsigned nsum;          /* the inputs summed: 0 .. nsum - 1 */
    uint64_t w[ARB_CHUNK_MAX_SUMMED]; /* elements per group of each */
    norm_inputs norm;       /* CHUNK_NORM's */
    bool conv;
    uint64_t cin, H, k, stride, OH; /* a convolution's (square, padding k / 2) */
    uint64_t first, count;
    uint64_t o0, o1, c0, c1;
    xsum *sum, *abs, *rsq, *csq;
    xsum *cnt;              /* CHUNK_SCATTER: the tokens naming table rows o0 .. o1 - 1 */
    size_t nx;              /* xsums in all, one allocation from sum on */
    krn_ctx *par;           /* the threads the adds run on (task->threads > 1), or NULL */
} chunk_acc;

static void acc_free(chunk_acc *a)
{
    free(a->sum);
    krn_ctx_free(a->par);
    memset(a, 0, sizeof *a);
}

/* A ctx for the task's threads (its pool; it rounds nothing), when more
 * than one. */
static int acc_threads(chunk_acc *a, const arb_block_task *task)
{
    if (task->threads <= 1)
        return 0;
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = (int)task->config->grid_bits,
                     .threads = task->threads};
    return krn_ctx_new(&a->par, &kc);
}

static size_t acc_bytes(const chunk_acc *a)
{
    return a->nx * XSUM_BYTES;
}

/* A convolution's dimensions: the block engine's reading of its record. */
static int conv_dims(chunk_acc *a, const arb_block_task *task, const uint64_t *S, size_t ninputs)
{
    blk_rec rec = {.n = task->n, .ninputs = ninputs, .cfg = task->config, .step = task->step};
    memcpy(rec.S, S, sizeof rec.S);
    blk_shape sh;
    int rc = blk_op_find(task->op)->shape(&rec, &sh);
    if (rc < 0)
        return rc;
    a->cin = sh.d[0];
    a->H = sh.d[1];
    a->k = sh.d[3];
    a->stride = sh.d[4];
    a->OH = (a->H + 2 * (a->k / 2) - a->k) / a->stride + 1;
    *a = (chunk_acc){.kind = CHUNK_DWEIGHT, .conv = true, .old_input = 2, .N = sh.R * a->OH * a->OH,
                     .C = a->cin * a->k * a->k, .OC = sh.d[2], .G = a->OH * a->OH, .cin = a->cin, .H = a->H,
                     .k = a->k, .stride = a->stride, .OH = a->OH};
    a->nsum = 2;
    a->w[0] = a->OC * a->G;
    a->w[1] = a->cin * a->H * a->H;
    return 0;
}

/* A norm's weight gradient: layernorm's record reads (inp, mean, rstd,
 * dout, dweight), RMSNorm's (inp, rstd, dout, dweight). */
static int norm_dims(chunk_acc *a, const arb_block_task *task, const uint64_t *S, size_t ninputs)
{
    bool ln = strcmp(task->op, "layernorm.bwd.dweight") == 0;
    uint64_t N = a->N, C = task->n;
    *a = (chunk_acc){.kind = CHUNK_NORM, .old_input = ln ? 4 : 3, .N = N, .C = C, .OC = 1, .G = 1,
                     .nsum = ln ? 4 : 3, .norm = {.mean = ln ? 1 : -1, .rstd = ln ? 2 : 1, .dout = ln ? 3 : 2}};
    a->w[0] = C;
    a->w[a->norm.rstd] = 1;
    a->w[a->norm.dout] = C;
    if (ln)
        a->w[a->norm.mean] = 1;
    if (ninputs != a->nsum + 1 || S[0] != N * C || S[a->norm.rstd] != N || S[a->norm.dout] != N * C ||
        (ln && S[a->norm.mean] != N) || S[a->old_input] != C)
        return ovt_fail(OVT_EINVAL, "chunk: site %u (%s)'s record does not read (inp, %srstd, dout, dweight) of "
                                    "%llu rows x %llu columns",
                        task->site, task->op, ln ? "mean, " : "", (unsigned long long)N, (unsigned long long)C);
    return 0;
}

/* The token embedding's gradient: its record reads (dout, tokens, dwte);
 * a row is a position of the batch (B*T of them), not a sequence. */
static int scatter_dims(chunk_acc *a, const arb_block_task *task, const uint64_t *S, size_t ninputs)
{
    if (ninputs != 3 || S[1] == 0 || S[0] % S[1] || S[0] / S[1] == 0 || S[2] % (S[0] / S[1]) ||
        S[2] != task->n)
        return ovt_fail(OVT_EINVAL, "chunk: site %u (%s)'s record does not read (dout, tokens, dwte) of one "
                                    "row of dout per token and a table as wide as dout",
                        task->site, task->op);
    uint64_t N = S[1], W = S[0] / N;
    *a = (chunk_acc){.kind = CHUNK_SCATTER, .old_input = 2, .N = N, .C = W, .OC = S[2] / W, .G = 1, .nsum = 2};
    a->w[0] = W;
    a->w[1] = 1;
    return 0;
}

/* The kind's dimensions from the rows and the inputs' sizes. */
static int acc_dims(chunk_acc *a, const arb_block_task *task, const uint64_t *S, size_t ninputs)
{
    if (strcmp(task->op, "conv.bwd.dweight") == 0)
        return conv_dims(a, task, S, ninputs);
    if (strcmp(task->op, "encoder.bwd.dwte") == 0)
        return scatter_dims(a, task, S, ninputs);
    if (strcmp(task->op, "matmul.bwd.dweight") == 0)
        *a = (chunk_acc){.kind = CHUNK_DWEIGHT, .old_input = 2, .N = a->N, .C = S[1] / a->N, .OC = S[0] / a->N};
    else if (strcmp(task->op, "layernorm.bwd.dweight") == 0 || strcmp(task->op, "rmsnorm.bwd.dweight") == 0)
        return norm_dims(a, task, S, ninputs);
    else if (strcmp(task->op, "gradnorm.sumsq") == 0)
        *a = (chunk_acc){.kind = CHUNK_SUMSQ, .old_input = -1, .N = a->N, .C = 1, .OC = 1};
    else
        *a = (chunk_acc){.kind = CHUNK_COLSUM, .old_input = 1, .N = a->N, .C = task->n, .OC = 1};
    a->nsum = a->kind == CHUNK_DWEIGHT ? 2 : 1;
    a->w[0] = a->kind == CHUNK_DWEIGHT ? a->OC : a->C;
    a->w[1] = a->kind == CHUNK_DWEIGHT ? a->C : 0;
    a->G = 1;
    return 0;
}

/* The accumulator of the task's leaf, zero; OVT_EINVAL as arb_chunk_info_of. */
static int acc_new(chunk_acc *a, const arb_block_task *task)
{
    memset(a, 0, sizeof *a);
    if (!arb_chunk_supported(task->op))
        return ovt_fail(OVT_EINVAL, "chunk: site %u's op '%s' is not a sum over the batch the chain covers "
                                    "(matmul.bwd.dweight, conv.bwd.dweight, matmul.bwd.dbias, bias.bwd, "
                                    "gradnorm.sumsq, layernorm.bwd.dbias, layernorm.bwd.dweight, "
                                    "rmsnorm.bwd.dweight, encoder.bwd.dwpe, encoder.bwd.dwte)",
                        task->site, task->op);
    arb_block_plan plan;
    uint64_t S[ARB_BLOCK_MAX_INPUTS];
    size_t ninputs;
    int rc = arb_block_plan_make(task, &plan); /* checks the sizes fit the op */
    if (rc < 0)
        return rc;
    a->N = plan.rows;
    arb_block_plan_free(&plan);
    if ((rc = arb_block_input_sizes(task, S, &ninputs)) < 0 || (rc = acc_dims(a, task, S, ninputs)) < 0)
        return rc;
    a->first = task->leaf * LEAF_ELEMS;
    if (a->first >= task->n)
        return ovt_fail(OVT_EINVAL, "chunk: leaf %llu is outside site %u's output of %llu elements",
                        (unsigned long long)task->leaf, task->site, (unsigned long long)task->n);
    a->count = task->n - a->first < LEAF_ELEMS ? task->n - a->first : LEAF_ELEMS;
    bool mags = a->kind == CHUNK_COLSUM || a->kind == CHUNK_NORM || a->kind == CHUNK_SCATTER;
    a->nx = a->count * (mags ? 2 : 1);
    if (a->kind == CHUNK_DWEIGHT || a->kind == CHUNK_SCATTER) {
        uint64_t last = a->first + a->count - 1;
        a->o0 = a->first / a->C;
        a->o1 = last / a->C + 1;
        a->c0 = a->o1 - a->o0 > 1 ? 0 : a->first % a->C;
        a->c1 = a->o1 - a->o0 > 1 ? a->C : last % a->C + 1;
        a->nx += a->kind == CHUNK_DWEIGHT ? (a->o1 - a->o0) + (a->c1 - a->c0) : a->o1 - a->o0;
    }
    if ((a->sum = calloc(a->nx, sizeof(xsum))) == NULL)
        return ovt_fail(OVT_ENOMEM, "chunk: out of memory for leaf %llu's exact sums", (unsigned long long)task->leaf);
    a->abs = mags ? a->sum + a->count : NULL;
    a->cnt = a->kind == CHUNK_SCATTER ? a->abs + a->count : NULL;
    a->rsq = a->kind == CHUNK_DWEIGHT ? a->sum + a->count : NULL;
    a->csq = a->kind == CHUNK_DWEIGHT ? a->rsq + (a->o1 - a->o0) : NULL;
    return 0;
}

int arb_chunk_info_of(const arb_block_task *task, arb_chunk_info *info)
{
    memset(info, 0, sizeof *info);
    chunk_acc a;
    int rc = acc_new(&a, task);
    if (rc == 0) {
        *info = (arb_chunk_info){.rows = a.N, .chunks = (a.N + ARB_CHUNK_ROWS - 1) / ARB_CHUNK_ROWS,
                                 .first = a.first, .count = a.count, .partial_len = acc_bytes(&a),
                                 .summed_inputs = a.nsum, .old_input = a.old_input, .group_rows = a.G};
        memcpy(info->group_width, a.w, sizeof a.w);
    }
    acc_free(&a);
    return rc;
}

/* ---- adding a chunk's rows ---- */

/* Splits rows x width values (row-major, from column col0 on, cols
 * columns) transposed into out[col][row]; false on a non-finite value. */
static bool split_cols(xsum_f32 *out, const float *m, uint64_t rows, uint64_t width, uint64_t col0, uint64_t cols)
{
    bool ok = true;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t j = 0; j < cols; j++)
            ok &= xsum_split(m[r * width + col0 + j], &out[j * rows + r]);
    return ok;
}

/* Sums of squares of the split columns into sq. */
static void add_squares(xsum *sq, const xsum_f32 *cols, uint64_t ncols, uint64_t rows)
{
    for (uint64_t j = 0; j < ncols; j++)
        for (uint64_t r = 0; r < rows; r++)
            xsum_add_abs_product(&sq[j], cols[j * rows + r], cols[j * rows + r]);
}

/* The weight gradient's elements [i0, i1) of the leaf. */
static void add_dweight(chunk_acc *a, const xsum_f32 *dm, const xsum_f32 *im, uint64_t rows, uint64_t i0,
                        uint64_t i1)
{
    for (uint64_t i = i0; i < i1; i++) {
        uint64_t e = a->first + i, o = e / a->C - a->o0, c = e % a->C - a->c0;
        const xsum_f32 *g = dm + o * rows, *x = im + c * rows;
        xsum *s = &a->sum[i];
        for (uint64_t r = 0; r < rows; r++)
            xsum_add_product(s, g[r], x[r]);
    }
}

/* The column sums' elements [i0, i1) and their magnitudes. */
static void add_colsum(chunk_acc *a, const xsum_f32 *dm, uint64_t rows, uint64_t i0, uint64_t i1)
{
    for (uint64_t i = i0; i < i1; i++) {
        const xsum_f32 *g = dm + i * rows;
        for (uint64_t r = 0; r < rows; r++) {
            xsum_add_f32(&a->sum[i], g[r]);
            xsum_add(&a->abs[i], g[r].m, g[r].e, 0);
        }
    }
}

/* A norm's column sums' elements [i0, i1) and their magnitudes, from the
 * split FP64 terms (tm[i * rows + r]: element i's term of row r). */
static void add_norm(chunk_acc *a, const xsum_f64 *tm, uint64_t rows, uint64_t i0, uint64_t i1)
{
    for (uint64_t i = i0; i < i1; i++) {
        const xsum_f64 *t = tm + i * rows;
        for (uint64_t r = 0; r < rows; r++) {
            xsum_add_f64(&a->sum[i], t[r]);
            xsum_add_abs_f64(&a->abs[i], t[r]);
        }
    }
}

/* The scatter's elements [i0, i1): a row's dout value where the row's
 * token names the element's table row (dm: the leaf's columns c0 .. c1 - 1
 * split as split_cols does). */
static void add_scatter(chunk_acc *a, const xsum_f32 *dm, const uint32_t *tok, uint64_t rows, uint64_t i0,
                        uint64_t i1)
{
    for (uint64_t i = i0; i < i1; i++) {
        uint64_t e = a->first + i, v = e / a->C;
        const xsum_f32 *g = dm + (e % a->C - a->c0) * rows;
        for (uint64_t r = 0; r < rows; r++)
            if (tok[r] == v) {
                xsum_add_f32(&a->sum[i], g[r]);
                xsum_add(&a->abs[i], g[r].m, g[r].e, 0);
            }
    }
}

/* The scatter's counts of the tokens naming the leaf's table rows. */
static void add_counts(chunk_acc *a, const uint32_t *tok, uint64_t rows)
{
    for (uint64_t r = 0; r < rows; r++)
        if (tok[r] >= a->o0 && tok[r] < a->o1)
            xsum_add(&a->cnt[tok[r] - a->o0], 1, 0, 0);
    for (uint64_t v = 0; v < a->o1 - a->o0; v++)
        xsum_normalize(&a->cnt[v]);
}

/* One chunk's split rows, added part by part on the ctx's threads: each
 * part owns its elements' sums (and magnitudes), the last one the weight
 * gradient's sums of squares, so the result is the same whatever thread
 * runs which part. */
typedef struct {
    chunk_acc *a;
    const xsum_f32 *dm, *im;
    const xsum_f64 *tm; /* CHUNK_NORM's terms */
    const uint32_t *tok; /* CHUNK_SCATTER's tokens */
    uint64_t rows;
} add_job;

#define ADD_PART 256 /* elements per part */

static uint64_t add_parts(const chunk_acc *a)
{
    return (a->count + ADD_PART - 1) / ADD_PART + (a->kind == CHUNK_DWEIGHT || a->kind == CHUNK_SCATTER);
}

static void add_part(void *arg, size_t part)
{
    const add_job *j = arg;
    chunk_acc *a = j->a;
    uint64_t i0 = (uint64_t)part * ADD_PART, i1 = i0 + ADD_PART < a->count ? i0 + ADD_PART : a->count;
    if (i0 >= a->count && a->kind == CHUNK_SCATTER) { /* the table rows' counts */
        add_counts(a, j->tok, j->rows);
        return;
    }
    if (i0 >= a->count) { /* the weight gradient's norms */
        add_squares(a->rsq, j->dm, a->o1 - a->o0, j->rows);
        add_squares(a->csq, j->im, a->c1 - a->c0, j->rows);
        for (xsum *s = a->rsq; s < a->sum + a->nx; s++)
            xsum_normalize(s);
        return;
    }
    if (a->kind == CHUNK_DWEIGHT)
        add_dweight(a, j->dm, j->im, j->rows, i0, i1);
    else if (a->kind == CHUNK_COLSUM)
        add_colsum(a, j->dm, j->rows, i0, i1);
    else if (a->kind == CHUNK_NORM)
        add_norm(a, j->tm, j->rows, i0, i1);
    else if (a->kind == CHUNK_SCATTER)
        add_scatter(a, j->dm, j->tok, j->rows, i0, i1);
    else
        add_squares(a->sum, j->dm, 1, j->rows);
    for (uint64_t i = i0; i < i1; i++) {
        xsum_normalize(&a->sum[i]);
        if (a->abs)
            xsum_normalize(&a->abs[i]);
    }
}

/* The groups of rows [r0, r1) of the inputs summed, read from the task's
 * slices. */
typedef struct {
    uint64_t g0, g1; /* groups [g0, g1) */
    float *v[ARB_CHUNK_MAX_SUMMED]; /* input m's groups (w[m] elements each; NULL past nsum) */
} chunk_rows;

static void rows_free(chunk_rows *b)
{
    for (unsigned m = 0; m < ARB_CHUNK_MAX_SUMMED; m++)
        free(b->v[m]);
    memset(b, 0, sizeof *b);
}

static int rows_read(const chunk_acc *a, const arb_block_task *task, uint64_t r0, uint64_t r1, chunk_rows *b)
{
    uint64_t g0 = r0 / a->G, g1 = (r1 + a->G - 1) / a->G, groups = g1 - g0;
    *b = (chunk_rows){.g0 = g0, .g1 = g1};
    int rc = 0;
    for (unsigned m = 0; m < a->nsum && rc == 0; m++)
        if ((b->v[m] = malloc(groups * a->w[m] * sizeof(float))) == NULL)
            rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for rows %llu..%llu", (unsigned long long)r0,
                          (unsigned long long)r1);
        else
            rc = arb_block_read_input(task, m, g0 * a->w[m], groups * a->w[m], b->v[m]);
    if (rc < 0)
        rows_free(b);
    return rc;
}

/* A convolution's rows [r0, r1) split as split_cols does: dout's values
 * of channels [o0, o1) into dm, the im2col values of taps [c0, c1) into
 * im (zero outside the image); false on a non-finite value. */
static bool split_conv(const chunk_acc *a, const chunk_rows *b, uint64_t r0, uint64_t r1, xsum_f32 *dm,
                       xsum_f32 *im)
{
    uint64_t rows = r1 - r0, P = a->G, pad = a->k / 2, kk2 = a->k * a->k;
    bool ok = true;
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t n = r / P - b->g0, p = r % P, oy = p / a->OH, ox = p % a->OH;
        const float *d = b->v[0] + n * a->w[0], *img = b->v[1] + n * a->w[1];
        for (uint64_t o = a->o0; o < a->o1; o++)
            ok &= xsum_split(d[o * P + p], &dm[(o - a->o0) * rows + (r - r0)]);
        for (uint64_t t = a->c0; t < a->c1; t++) {
            uint64_t c = t / kk2, ky = t / a->k % a->k, kx = t % a->k;
            uint64_t iy = oy * a->stride + ky, ix = ox * a->stride + kx; /* + pad */
            bool in = iy >= pad && ix >= pad && iy - pad < a->H && ix - pad < a->H;
            float v = in ? img[c * a->H * a->H + (iy - pad) * a->H + (ix - pad)] : 0.0f;
            ok &= xsum_split(v, &im[(t - a->c0) * rows + (r - r0)]);
        }
    }
    return ok;
}

/* A norm's FP64 terms of rows [r0, r1) (within b), the kernel's
 * expression, split into tm[i * rows + r]; OVT_EINVAL for a term that is
 * not finite, or that the fixed point cannot hold exactly (a set bit below
 * 2^-320 or a magnitude of 2^256: no chain applies). */
static int split_norm(const chunk_acc *a, const arb_block_task *task, const chunk_rows *b, uint64_t r0, uint64_t r1,
                      xsum_f64 *tm)
{
    uint64_t rows = r1 - r0, C = a->C;
    const float *inp = b->v[0] + (r0 - b->g0) * C, *dout = b->v[a->norm.dout] + (r0 - b->g0) * C;
    const float *rstd = b->v[a->norm.rstd] + (r0 - b->g0), *mean = a->norm.mean < 0 ? NULL : b->v[a->norm.mean] + (r0 - b->g0);
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t i = 0; i < a->count; i++) {
            uint64_t k = r * C + a->first + i;
            double norm = ((double)inp[k] - (mean ? (double)mean[r] : 0.0)) * (double)rstd[r];
            double t = norm * (double)dout[k];
            if (!xsum_split64(t, &tm[i * rows + r]))
                return ovt_fail(OVT_EINVAL, "chunk: site %u (%s) row %llu column %llu: the term %a is %s, no chain "
                                            "applies",
                                task->site, task->op, (unsigned long long)(r0 + r),
                                (unsigned long long)(a->first + i), t,
                                isfinite(t) ? "not a multiple of 2^-320 below 2^256 (the exact sum's range)"
                                            : "not finite: the step itself fails there");
        }
    return 0;
}

/* The scatter's tokens of rows [r0, r0 + rows): the record's int32 words
 * (read as float32 bits); OVT_EINVAL for one outside the vocabulary (the
 * kernel refuses it: the step itself fails, no chain applies). */
static int read_tokens(const chunk_acc *a, const arb_block_task *task, const float *words, uint64_t r0,
                       uint64_t rows, uint32_t *tok)
{
    for (uint64_t r = 0; r < rows; r++) {
        int32_t t;
        memcpy(&t, &words[r], sizeof t);
        if (t < 0 || (uint64_t)t >= a->OC)
            return ovt_fail(OVT_EINVAL, "chunk: site %u (%s) row %llu reads token %d, outside the vocabulary "
                                        "[0, %llu): the step itself fails there, no chain applies",
                            task->site, task->op, (unsigned long long)(r0 + r), (int)t,
                            (unsigned long long)a->OC);
        tok[r] = (uint32_t)t;
    }
    return 0;
}

/* Adds the terms of rows [r0, r1) (within b), then carries. */
static int acc_add(chunk_acc *a, const arb_block_task *task, const chunk_rows *b, uint64_t r0, uint64_t r1)
{
    bool norm = a->kind == CHUNK_NORM, scatter = a->kind == CHUNK_SCATTER, two = !norm && !scatter && a->nsum > 1;
    uint64_t rows = r1 - r0, n1 = a->c1 - a->c0;
    uint64_t n0 = a->kind == CHUNK_DWEIGHT ? a->o1 - a->o0 : scatter ? n1 : a->count;
    const float *g = b->v[0] + (r0 - b->g0) * a->w[0], *x = two ? b->v[1] + (r0 - b->g0) * a->w[1] : NULL; /* G = 1 */
    xsum_f32 *dm = norm ? NULL : malloc(rows * n0 * sizeof *dm), *im = x ? malloc(rows * n1 * sizeof *im) : NULL;
    xsum_f64 *tm = norm ? malloc(rows * a->count * sizeof *tm) : NULL;
    uint32_t *tok = scatter ? malloc(rows * sizeof *tok) : NULL;
    int rc = 0;
    if ((!norm && dm == NULL) || (x && im == NULL) || (norm && tm == NULL) || (scatter && tok == NULL)) {
        rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for rows %llu..%llu", (unsigned long long)r0,
                      (unsigned long long)r1);
        goto done;
    }
    bool finite = true;
    if (norm) {
        if ((rc = split_norm(a, task, b, r0, r1, tm)) < 0)
            goto done;
    } else if (a->conv) {
        finite = split_conv(a, b, r0, r1, dm, im);
    } else if (scatter) {
        if ((rc = read_tokens(a, task, b->v[1] + (r0 - b->g0), r0, rows, tok)) < 0)
            goto done;
        finite = split_cols(dm, g, rows, a->w[0], a->c0, n1);
    } else {
        finite = split_cols(dm, g, rows, a->w[0], a->kind == CHUNK_DWEIGHT ? a->o0 : a->first, n0);
        if (x)
            finite &= split_cols(im, x, rows, a->w[1], a->c0, n1);
    }
    if (!finite) {
        rc = ovt_fail(OVT_EINVAL, "chunk: site %u (%s) reads a non-finite value in rows %llu..%llu: the step "
                                  "itself fails there (its site is non-finite), no chain applies",
                      task->site, task->op, (unsigned long long)r0, (unsigned long long)r1);
        goto done;
    }
    add_job job = {.a = a, .dm = dm, .im = im, .tm = tm, .tok = tok, .rows = rows};
    if (a->par)
        rc = krn_ctx_parallel(a->par, add_parts(a), add_part, &job);
    else
        for (uint64_t part = 0; part < add_parts(a); part++)
            add_part(&job, part);
done:
    free(dm);
    free(im);
    free(tm);
    free(tok);
    return rc;
}

static uint64_t chunk_end(const chunk_acc *a, uint64_t c)
{
    uint64_t r1 = (c + 1) * ARB_CHUNK_ROWS;
    return r1 < a->N ? r1 : a->N;
}

/* Adds chunk c's rows, read from the task's slices (the arbiter's step). */
static int acc_add_chunk(chunk_acc *a, const arb_block_task *task, uint64_t c)
{
    chunk_rows b;
    uint64_t r0 = c * ARB_CHUNK_ROWS, r1 = chunk_end(a, c);
    int rc = rows_read(a, task, r0, r1, &b);
    if (rc == 0)
        rc = acc_add(a, task, &b, r0, r1);
    rows_free(&b);
    return rc;
}

/* The input floats read at once by acc_walk (64 MB; testing: fewer). */
static uint64_t walk_floats = (uint64_t)1 << 24;

void arb_chunk_walk_floats(uint64_t n)
{
    walk_floats = n ? n : (uint64_t)1 << 24;
}

static int acc_leaf(chunk_acc *a, ovt_hash *leaf);

/* The party's walk: adds chunks 0 .. upto - 1, reading many chunks' rows
 * at once, and puts chain leaf c into leaves[c] (leaves may be NULL). */
static int acc_walk(chunk_acc *a, const arb_block_task *task, uint64_t upto, ovt_hash *leaves)
{
    uint64_t width = 0;
    for (unsigned m = 0; m < a->nsum; m++)
        width += a->w[m];
    uint64_t per = walk_floats / width / ARB_CHUNK_ROWS; /* chunks per read */
    per = per ? per : 1;
    int rc = 0;
    for (uint64_t c0 = 0; c0 < upto && rc == 0; c0 += per) {
        uint64_t c1 = c0 + per < upto ? c0 + per : upto;
        chunk_rows b;
        if ((rc = rows_read(a, task, c0 * ARB_CHUNK_ROWS, chunk_end(a, c1 - 1), &b)) < 0)
            break;
        for (uint64_t c = c0; c < c1 && rc == 0; c++)
            if ((rc = acc_add(a, task, &b, c * ARB_CHUNK_ROWS, chunk_end(a, c))) == 0 && leaves)
                rc = acc_leaf(a, &leaves[c]);
        rows_free(&b);
    }
    return rc;
}

/* ---- P_c, its leaf, and the last step ---- */

static int acc_put(chunk_acc *a, uint8_t **bytes)
{
    if ((*bytes = malloc(acc_bytes(a))) == NULL)
        return ovt_fail(OVT_ENOMEM, "chunk: out of memory for a chain state");
    for (size_t k = 0; k < a->nx; k++)
        xsum_put(&a->sum[k], *bytes + k * XSUM_BYTES);
    return 0;
}

int arb_chunk_state_leaf(ovt_hash *leaf, const uint8_t *state, size_t len)
{
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (h == NULL)
        return ovt_fail(OVT_ENOMEM, "chunk: out of memory for a hash");
    uint8_t zero = 0;
    ovt_sha256_update(h, &zero, 1);
    ovt_sha256_update(h, state, len);
    ovt_sha256_final(h, leaf);
    return 0;
}

/* Chain leaf of the current state. */
static int acc_leaf(chunk_acc *a, ovt_hash *leaf)
{
    uint8_t *p;
    int rc = acc_put(a, &p);
    if (rc == 0)
        rc = arb_chunk_state_leaf(leaf, p, acc_bytes(a));
    free(p);
    return rc;
}

/* The leaf's FP64 values (old + exact sum, rounded once) and band
 * magnitudes; OVT_EINVAL for a non-finite old value (the step failed
 * before) or a negative magnitude (not a chain state). */
static int final_values(chunk_acc *a, const float *old, double *y, double *mag)
{
    for (uint64_t i = 0; i < a->count; i++) {
        xsum s = a->sum[i];
        xsum_f32 f;
        if (!xsum_split(old[i], &f))
            return ovt_fail(OVT_EINVAL, "chunk: the old value of element %llu is not finite: the step failed "
                                        "before this site",
                            (unsigned long long)(a->first + i));
        xsum_add_f32(&s, f);
        y[i] = xsum_to_double(&s);
        if (a->kind == CHUNK_DWEIGHT) {
            uint64_t e = a->first + i;
            xsum r = a->rsq[e / a->C - a->o0], c = a->csq[e % a->C - a->c0];
            mag[i] = sqrt(xsum_to_double(&r)) * sqrt(xsum_to_double(&c));
        } else if (a->kind == CHUNK_SCATTER) {
            /* krn_encoder_backward's band: the row's count of tokens sets gamma */
            xsum m = a->abs[i], k = a->cnt[(a->first + i) / a->C - a->o0];
            double cnt = xsum_to_double(&k);
            if (!(cnt >= 0 && cnt <= (double)a->N && cnt == floor(cnt)))
                return ovt_fail(OVT_EINVAL, "chunk: the chain state's token count of element %llu is not a count "
                                            "of 0 .. %llu rows: not a state of the chain",
                                (unsigned long long)(a->first + i), (unsigned long long)a->N);
            mag[i] = krn_chunked_gamma((size_t)cnt) * xsum_to_double(&m);
        } else if (a->kind == CHUNK_COLSUM || a->kind == CHUNK_NORM) {
            xsum m = a->abs[i];
            mag[i] = xsum_to_double(&m);
        } else {
            mag[i] = y[i]; /* squares: the sum is the magnitude */
        }
        if (!(mag[i] >= 0))
            return ovt_fail(OVT_EINVAL, "chunk: the chain state's magnitude of element %llu is negative: not a "
                                        "state of the chain",
                            (unsigned long long)(a->first + i));
    }
    return 0;
}

/* Chain leaf C: the leaf's float32 values rounded by the site's rule from
 * the state, the old gradient and the task's entries (a REPLAY ctx, the
 * arbiter's strict verifier). */
static int acc_final(chunk_acc *a, const arb_block_task *task, ovt_hash *leaf, float *values)
{
    float *old = malloc(a->count * sizeof *old), *out = malloc(a->count * sizeof *out);
    double *y = malloc(a->count * sizeof *y), *mag = malloc(a->count * sizeof *mag);
    krn_ctx *ctx = NULL;
    krn_rlog *log = NULL;
    int rc = 0;
    if (!old || !out || !y || !mag) {
        rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for the last step");
        goto done;
    }
    if (a->old_input < 0)
        memset(old, 0, a->count * sizeof *old); /* nothing accumulated into (+0 changes no sum) */
    else if ((rc = arb_block_read_input(task, (unsigned)a->old_input, a->first, a->count, old)) < 0)
        goto done;
    if ((rc = final_values(a, old, y, mag)) < 0)
        goto done;
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .verifier = KRN_VERIFY_ARBITER,
                     .grid_bits = (int)task->config->grid_bits, .threads = 1, .rule = trn_config_rule(task->config)};
    if ((rc = krn_ctx_new(&ctx, &kc)) < 0 || (rc = arb_block_sub_log(task, a->first, a->first + a->count, 0, &log)) < 0 ||
        (rc = krn_step_begin(ctx, task->step, log)) < 0)
        goto done;
    rc = krn_batch_sum_round(ctx, task->op, out, y, mag, a->count, a->N);
    krn_stats st;
    int end = krn_step_end(ctx, &st);
    if (rc == 0)
        rc = end;
    if (rc < 0) {
        rc = ovt_fail_wrap(rc, "chunk: step %llu site %u (%s) leaf %llu, the chain's last step",
                           (unsigned long long)task->step, task->site, task->op, (unsigned long long)task->leaf);
        goto done;
    }
    ovt_tree_leaf_le32(leaf, out, a->count * 4);
    if (values)
        memcpy(values, out, a->count * 4);
done:
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    free(old);
    free(out);
    free(y);
    free(mag);
    return rc;
}

/* ---- the chain ---- */

void arb_chunk_chain_free(arb_chunk_chain *c)
{
    free(c->leaves);
    memset(c, 0, sizeof *c);
}

static int verify_slices(const arb_block_task *task)
{
    int rc = 0;
    for (size_t i = 0; i < task->nslices && rc == 0; i++)
        rc = arb_block_slice_verify(&task->slices[i]);
    return rc;
}

int arb_chunk_chain_make(const arb_block_task *task, arb_chunk_chain *out)
{
    memset(out, 0, sizeof *out);
    chunk_acc a;
    int rc = arb_chunk_info_of(task, &out->info);
    if (rc == 0)
        rc = acc_new(&a, task);
    if (rc < 0)
        return rc;
    uint64_t C = out->info.chunks;
    if ((rc = acc_threads(&a, task)) < 0 || (rc = verify_slices(task)) < 0)
        goto done;
    if ((out->leaves = malloc((C + 1) * sizeof *out->leaves)) == NULL) {
        rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for the chain's leaves");
        goto done;
    }
    rc = acc_walk(&a, task, C, out->leaves);
    if (rc == 0 && (rc = acc_final(&a, task, &out->leaves[C], NULL)) == 0) {
        ovt_hash *tmp = malloc((C + 1) * sizeof *tmp);
        if (tmp == NULL) {
            rc = ovt_fail(OVT_ENOMEM, "chunk: out of memory for the chain's root");
            goto done;
        }
        memcpy(tmp, out->leaves, (C + 1) * sizeof *tmp);
        ovt_tree_root_of_leaves(&out->root, tmp, C + 1);
        free(tmp);
    }
done:
    acc_free(&a);
    if (rc < 0)
        arb_chunk_chain_free(out);
    return rc;
}

int arb_chunk_partial(const arb_block_task *task, uint64_t c, uint8_t **bytes, size_t *len)
{
    *bytes = NULL;
    *len = 0;
    chunk_acc a;
    int rc = acc_new(&a, task);
    if (rc < 0)
        return rc;
    uint64_t C = (a.N + ARB_CHUNK_ROWS - 1) / ARB_CHUNK_ROWS;
    if (c >= C)
        rc = ovt_fail(OVT_EINVAL, "chunk: the chain of site %u has states P_0..P_%llu; P_%llu is none",
                      task->site, (unsigned long long)(C - 1), (unsigned long long)c);
    else if ((rc = acc_threads(&a, task)) == 0)
        rc = verify_slices(task);
    if (rc == 0)
        rc = acc_walk(&a, task, c + 1, NULL);
    if (rc == 0 && (rc = acc_put(&a, bytes)) == 0)
        *len = acc_bytes(&a);
    acc_free(&a);
    return rc;
}

int arb_chunk_step(const arb_block_task *task, uint64_t c, const uint8_t *prev, size_t prev_len, ovt_hash *leaf,
                   float *values)
{
    memset(leaf, 0, sizeof *leaf);
    chunk_acc a;
    int rc = acc_new(&a, task);
    if (rc < 0)
        return rc;
    uint64_t C = (a.N + ARB_CHUNK_ROWS - 1) / ARB_CHUNK_ROWS;
    if (c > C)
        rc = ovt_fail(OVT_EINVAL, "chunk: the chain of site %u leaf %llu has leaves 0..%llu; %llu is none",
                      task->site, (unsigned long long)task->leaf, (unsigned long long)C, (unsigned long long)c);
    else if (c == 0 && prev_len != 0)
        rc = ovt_fail(OVT_EINVAL, "chunk: chunk 0 starts from the zero state; a previous state was given");
    else if (c > 0 && (prev == NULL || prev_len != acc_bytes(&a)))
        rc = ovt_fail(OVT_EINVAL, "chunk: the state before chunk %llu is %zu bytes; the chain's states are %zu",
                      (unsigned long long)c, prev ? prev_len : 0, acc_bytes(&a));
    else if ((rc = acc_threads(&a, task)) == 0)
        rc = verify_slices(task);
    for (size_t k = 0; k < a.nx && rc == 0 && c > 0; k++)
        xsum_get(&a.sum[k], prev + k * XSUM_BYTES);
    if (rc == 0 && c < C && (rc = acc_add_chunk(&a, task, c)) == 0)
        rc = acc_leaf(&a, leaf);
    else if (rc == 0 && c == C)
        rc = acc_final(&a, task, leaf, values);
    acc_free(&a);
    return rc;
}
