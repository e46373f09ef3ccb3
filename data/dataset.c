#include "data/dataset.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/grid.h"
#include "kernels/rng.h"

static const uint8_t tok_magic[8] = {'O', 'V', 'T', 'T', 'O', 'K', '1', '6'};
static const uint8_t smp_magic[8] = {'O', 'V', 'T', 'S', 'M', 'P', 'L', '1'};
#define DATA_VERSION 1u
#define TOK_HEADER 24  /* magic, version, vocab, count (u64) */
#define SMP_HEADER 24  /* magic, version, count, dim, n_class */
#define MAX_DATA_FILE ((size_t)1 << 36)

void data_tokens_free(data_tokens *t)
{
    if (!t)
        return;
    free(t->tokens);
    memset(t, 0, sizeof *t);
}

int data_tokens_parse(data_tokens *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    int uint16_format = len >= 8 && memcmp(buf, tok_magic, 8) == 0;
    size_t count = len;
    uint32_t vocab = 256;
    const uint8_t *body = buf;
    if (uint16_format) {
        if (len < TOK_HEADER)
            return ovt_fail(OVT_EFORMAT, "token file is truncated inside its %d-byte header", TOK_HEADER);
        if (ovt_get_le32(buf + 8) != DATA_VERSION)
            return ovt_fail(OVT_EFORMAT, "token file version %u is not supported (expected %u)",
                            ovt_get_le32(buf + 8), DATA_VERSION);
        vocab = ovt_get_le32(buf + 12);
        uint64_t n = ovt_get_le64(buf + 16);
        if (vocab < 2 || vocab > 65536)
            return ovt_fail(OVT_EFORMAT, "token file states vocab %u, outside 2..65536", vocab);
        if (n > (len - TOK_HEADER) / 2 || TOK_HEADER + 2 * n != len)
            return ovt_fail(OVT_EFORMAT, "token file states %llu tokens but holds %zu bytes of tokens (%s)",
                            (unsigned long long)n, len - TOK_HEADER,
                            TOK_HEADER + 2 * n > len ? "truncated" : "trailing bytes");
        count = (size_t)n;
        body = buf + TOK_HEADER;
    }
    if (count == 0)
        return ovt_fail(OVT_EFORMAT, "token file holds no tokens");
    uint32_t *tokens = malloc(count * sizeof *tokens);
    if (!tokens)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu tokens", count);
    for (size_t i = 0; i < count; i++) {
        tokens[i] = uint16_format ? (uint32_t)body[2 * i] | (uint32_t)body[2 * i + 1] << 8 : body[i];
        if (tokens[i] >= vocab) {
            uint32_t bad = tokens[i];
            free(tokens);
            return ovt_fail(OVT_EFORMAT, "token %zu is %u, not below the vocab size %u", i, bad, vocab);
        }
    }
    out->vocab = vocab;
    out->count = count;
    out->tokens = tokens;
    ovt_sha256(&out->hash, buf, len);
    return 0;
}

int data_tokens_load(data_tokens *out, const char *path)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, MAX_DATA_FILE);
    if (rv)
        return rv;
    rv = data_tokens_parse(out, buf, len);
    free(buf);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}

int data_tokens_encode(const uint32_t *tokens, size_t count, uint32_t vocab, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (vocab < 2 || vocab > 65536)
        return ovt_fail(OVT_EINVAL, "vocab %u outside 2..65536 for the uint16 token format", vocab);
    uint8_t *p = malloc(TOK_HEADER + 2 * count);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory encoding %zu tokens", count);
    memcpy(p, tok_magic, 8);
    ovt_put_le32(p + 8, DATA_VERSION);
    ovt_put_le32(p + 12, vocab);
    ovt_put_le64(p + 16, count);
    for (size_t i = 0; i < count; i++) {
        if (tokens[i] >= vocab) {
            free(p);
            return ovt_fail(OVT_EINVAL, "token %zu is %u, not below vocab %u", i, tokens[i], vocab);
        }
        p[TOK_HEADER + 2 * i] = (uint8_t)tokens[i];
        p[TOK_HEADER + 2 * i + 1] = (uint8_t)(tokens[i] >> 8);
    }
    *buf = p;
    *len = TOK_HEADER + 2 * count;
    return 0;
}

void data_token_batch_free(data_token_batch *b)
{
    if (!b)
        return;
    free(b->inputs);
    free(b->targets);
    memset(b, 0, sizeof *b);
}

int data_token_batch_get(data_token_batch *out, const data_tokens *data, uint64_t seed, uint64_t step, uint32_t B,
                        uint32_t T)
{
    memset(out, 0, sizeof *out);
    if (B == 0 || T == 0)
        return ovt_fail(OVT_EINVAL, "batch size and sequence length must be positive");
    if (data->count < (size_t)T + 1)
        return ovt_fail(OVT_EINVAL, "dataset has %zu tokens, fewer than one sequence of %u plus its target",
                        data->count, T);
    size_t n = (size_t)B * T;
    out->inputs = malloc(n * sizeof(int32_t));
    out->targets = malloc(n * sizeof(int32_t));
    if (!out->inputs || !out->targets) {
        data_token_batch_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for a batch of %zu tokens", n);
    }
    out->B = B;
    out->T = T;
    uint64_t starts = data->count - T; /* start positions 0 .. count-T-1 */
    for (uint32_t j = 0; j < B; j++) {
        uint64_t pos = krn_rng_below(seed, step, KRN_RNG_BATCH, j, starts);
        for (uint32_t t = 0; t < T; t++) {
            out->inputs[(size_t)j * T + t] = (int32_t)data->tokens[pos + t];
            out->targets[(size_t)j * T + t] = (int32_t)data->tokens[pos + t + 1];
        }
    }
    return 0;
}

/* Tokens and labels are non-negative: hashed as u32le. */
static void hash_u32s(ovt_sha256_ctx *h, const int32_t *v, size_t n)
{
    uint8_t chunk[4 * 256];
    for (size_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < 256 && i < n; k++, i++)
            ovt_put_le32(chunk + 4 * k, (uint32_t)v[i]);
        ovt_sha256_update(h, chunk, 4 * k);
    }
}

static ovt_sha256_ctx *sha_new_or_die(void)
{
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (!h)
        abort(); /* OpenSSL could not allocate a digest context */
    return h;
}

void data_token_batch_hash(ovt_hash *out, const data_token_batch *b)
{
    ovt_sha256_ctx *h = sha_new_or_die();
    uint8_t head[8];
    ovt_put_le32(head, b->B);
    ovt_put_le32(head + 4, b->T);
    ovt_sha256_update(h, head, 8);
    hash_u32s(h, b->inputs, (size_t)b->B * b->T);
    hash_u32s(h, b->targets, (size_t)b->B * b->T);
    ovt_sha256_final(h, out);
}

void data_samples_free(data_samples *s)
{
    if (!s)
        return;
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

int data_samples_encode(const data_samples *s, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    size_t nx = (size_t)s->count * s->dim;
    size_t total = SMP_HEADER + 4 * nx + 4 * (size_t)s->count;
    uint8_t *p = malloc(total);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory encoding %u samples", s->count);
    memcpy(p, smp_magic, 8);
    ovt_put_le32(p + 8, DATA_VERSION);
    ovt_put_le32(p + 12, s->count);
    ovt_put_le32(p + 16, s->dim);
    ovt_put_le32(p + 20, s->n_class);
    ovt_copy_le32(p + SMP_HEADER, s->x, nx);
    for (size_t i = 0; i < s->count; i++)
        ovt_put_le32(p + SMP_HEADER + 4 * nx + 4 * i, s->y[i]);
    *buf = p;
    *len = total;
    return 0;
}

int data_samples_rehash(data_samples *s)
{
    uint8_t *buf;
    size_t len;
    int rv = data_samples_encode(s, &buf, &len);
    if (rv)
        return rv;
    ovt_sha256(&s->hash, buf, len);
    free(buf);
    return 0;
}

int data_samples_parse(data_samples *out, const uint8_t *buf, size_t len, int grid_bits)
{
    memset(out, 0, sizeof *out);
    if (len < SMP_HEADER)
        return ovt_fail(OVT_EFORMAT, "samples file is truncated inside its %d-byte header", SMP_HEADER);
    if (memcmp(buf, smp_magic, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "not an ovt samples file (wrong magic)");
    if (ovt_get_le32(buf + 8) != DATA_VERSION)
        return ovt_fail(OVT_EFORMAT, "samples file version %u is not supported", ovt_get_le32(buf + 8));
    uint32_t count = ovt_get_le32(buf + 12), dim = ovt_get_le32(buf + 16), n_class = ovt_get_le32(buf + 20);
    if (!count || !dim || n_class < 2)
        return ovt_fail(OVT_EFORMAT, "samples file states count %u, dim %u, %u classes", count, dim, n_class);
    uint64_t expect = SMP_HEADER + 4ull * count * dim + 4ull * count;
    if (len != expect)
        return ovt_fail(OVT_EFORMAT, "samples file is %zu bytes, its header implies %llu (%s)", len,
                        (unsigned long long)expect, len < expect ? "truncated" : "trailing bytes");
    size_t nx = (size_t)count * dim;
    out->x = malloc(4 * nx);
    out->y = malloc(4 * (size_t)count);
    if (!out->x || !out->y) {
        data_samples_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for %u samples", count);
    }
    ovt_copy_le32(out->x, buf + SMP_HEADER, nx);
    for (size_t i = 0; i < nx; i++) {
        if (!krn_grid_contains(out->x[i], grid_bits)) {
            data_samples_free(out);
            return ovt_fail(OVT_EFORMAT, "sample feature %zu is not a finite grid value for b = %d", i,
                            grid_bits);
        }
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t label = ovt_get_le32(buf + SMP_HEADER + 4 * nx + 4 * i);
        if (label >= n_class) {
            data_samples_free(out);
            return ovt_fail(OVT_EFORMAT, "label %zu is %u, not below %u classes", i, label, n_class);
        }
        out->y[i] = label;
    }
    out->count = count;
    out->dim = dim;
    out->n_class = n_class;
    ovt_sha256(&out->hash, buf, len);
    return 0;
}

void data_sample_batch_free(data_sample_batch *b)
{
    if (!b)
        return;
    free(b->x);
    free(b->y);
    memset(b, 0, sizeof *b);
}

int data_sample_batch_get(data_sample_batch *out, const data_samples *data, uint64_t seed, uint64_t step, uint32_t B)
{
    memset(out, 0, sizeof *out);
    if (B == 0 || data->count == 0)
        return ovt_fail(OVT_EINVAL, "empty batch or dataset");
    out->x = malloc((size_t)B * data->dim * sizeof(float));
    out->y = malloc((size_t)B * sizeof(int32_t));
    if (!out->x || !out->y) {
        data_sample_batch_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for a batch of %u samples", B);
    }
    out->B = B;
    out->dim = data->dim;
    for (uint32_t j = 0; j < B; j++) {
        uint64_t k = krn_rng_below(seed, step, KRN_RNG_BATCH, j, data->count);
        memcpy(out->x + (size_t)j * data->dim, data->x + k * data->dim, data->dim * sizeof(float));
        out->y[j] = (int32_t)data->y[k];
    }
    return 0;
}

void data_sample_batch_hash(ovt_hash *out, const data_sample_batch *b)
{
    ovt_sha256_ctx *h = sha_new_or_die();
    uint8_t head[8];
    ovt_put_le32(head, b->B);
    ovt_put_le32(head + 4, b->dim);
    ovt_sha256_update(h, head, 8);
    ovt_sha256_update_le32(h, b->x, (size_t)b->B * b->dim * sizeof(float));
    hash_u32s(h, b->y, b->B);
    ovt_sha256_final(h, out);
}

int data_samples_synthetic(data_samples *out, uint64_t seed, uint32_t count, uint32_t dim, uint32_t n_class,
                          int grid_bits)
{
    memset(out, 0, sizeof *out);
    if (!count || !dim || n_class < 2)
        return ovt_fail(OVT_EINVAL, "synthetic set needs count, dim > 0 and 2+ classes");
    size_t nx = (size_t)count * dim;
    out->x = malloc(nx * sizeof(float));
    out->y = malloc((size_t)count * sizeof(uint32_t));
    double *teacher = malloc((size_t)n_class * dim * sizeof(double));
    int rv = 0;
    if (!out->x || !out->y || !teacher) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %u synthetic samples", count);
        goto fail;
    }
    for (size_t j = 0; j < (size_t)n_class * dim; j++)
        teacher[j] = krn_rng_normal(seed, 1, DATA_RNG_SAMPLES, j);
    for (size_t i = 0; i < count; i++) {
        float *x = out->x + i * dim;
        for (size_t k = 0; k < dim; k++)
            x[k] = krn_grid_round(krn_rng_normal(seed, 0, DATA_RNG_SAMPLES, i * dim + k), grid_bits);
        uint32_t best = 0;
        double best_score = 0;
        for (uint32_t c = 0; c < n_class; c++) {
            double score = 0;
            for (size_t k = 0; k < dim; k++)
                score += (double)x[k] * teacher[(size_t)c * dim + k];
            if (c == 0 || score > best_score) {
                best = c;
                best_score = score;
            }
        }
        out->y[i] = best;
    }
    out->count = count;
    out->dim = dim;
    out->n_class = n_class;
    if ((rv = data_samples_rehash(out)))
        goto fail;
    free(teacher);
    return 0;
fail:
    free(teacher);
    data_samples_free(out);
    return rv;
}
