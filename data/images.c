/* The IDX reader and the ovt image file (data/images.h). */
#include "data/images.h"

#include <stdlib.h>
#include <string.h>

static const uint8_t img_magic[8] = {'O', 'V', 'T', 'I', 'M', 'G', 'S', '1'};
#define IMG_VERSION 1u
#define IMG_HEADER 32 /* magic, version, count, channels, height, width, n_class */
#define IDX_LABELS 0x00000801u
#define IDX_IMAGES 0x00000803u

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void data_images_free(data_images *im)
{
    if (!im)
        return;
    free(im->pixels);
    free(im->labels);
    memset(im, 0, sizeof *im);
}

/* The IDX header of one file: its magic and `ndim` big-endian dimensions,
 * and a length that is exactly header plus the product of the dimensions
 * (one byte each). */
static int idx_header(uint32_t *dims, const uint8_t *buf, size_t len, uint32_t magic, int ndim, const char *what)
{
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b)
        return ovt_fail(OVT_EFORMAT, "%s is still gzip-compressed: decompress it first (data_read_input, "
                        "data/gunzip.h, does)", what);
    size_t head = 4 + 4 * (size_t)ndim;
    if (len < head)
        return ovt_fail(OVT_EFORMAT, "%s is %zu bytes, truncated inside its %zu-byte IDX header", what, len, head);
    if (get_be32(buf) != magic)
        return ovt_fail(OVT_EFORMAT, "%s has IDX magic 0x%08x, not 0x%08x (unsigned bytes, %d dimension%s: %s)",
                        what, get_be32(buf), magic, ndim, ndim > 1 ? "s" : "", ndim > 1 ? "images" : "labels");
    uint64_t body = 1;
    for (int k = 0; k < ndim; k++) {
        dims[k] = get_be32(buf + 4 + 4 * k);
        if (!dims[k])
            return ovt_fail(OVT_EFORMAT, "%s states dimension %d as 0", what, k);
        if (dims[k] > ((uint64_t)1 << 40) / body) /* before the product can overflow */
            return ovt_fail(OVT_EFORMAT, "%s states dimensions too large to be a data set", what);
        body *= dims[k];
    }
    if (len != head + body)
        return ovt_fail(OVT_EFORMAT, "%s is %zu bytes, its IDX header implies %llu (%s)", what, len,
                        (unsigned long long)(head + body), len < head + body ? "truncated" : "trailing bytes");
    return 0;
}

/* The first count labels, each below n_class. */
static int idx_labels(data_images *out, const uint8_t *lab, const char *what, uint32_t n_class)
{
    for (uint32_t i = 0; i < out->count; i++)
        if (lab[i] >= n_class)
            return ovt_fail(OVT_EFORMAT, "%s: label %u is %u, not below %u classes (--classes)", what, i, lab[i],
                            n_class);
    memcpy(out->labels, lab, out->count);
    return 0;
}

int data_idx_parse(data_images *out, const uint8_t *img, size_t img_len, const char *what_images,
                   const uint8_t *lab, size_t lab_len, const char *what_labels, uint32_t n_class, uint32_t limit)
{
    memset(out, 0, sizeof *out);
    if (n_class < 2 || n_class > DATA_IMG_MAX_CLASSES)
        return ovt_fail(OVT_EINVAL, "%u classes: an image file holds 2..%u", n_class, DATA_IMG_MAX_CLASSES);
    uint32_t di[3] = {0}, dl[1] = {0};
    int rv;
    if ((rv = idx_header(di, img, img_len, IDX_IMAGES, 3, what_images)) ||
        (rv = idx_header(dl, lab, lab_len, IDX_LABELS, 1, what_labels)))
        return rv;
    if (di[0] != dl[0])
        return ovt_fail(OVT_EFORMAT, "%s holds %u images but %s holds %u labels; they are not a pair", what_images,
                        di[0], what_labels, dl[0]);
    out->count = limit && limit < di[0] ? limit : di[0];
    out->channels = 1;
    out->height = di[1];
    out->width = di[2];
    out->n_class = n_class;
    size_t npix = (size_t)out->count * di[1] * di[2];
    out->pixels = malloc(npix);
    out->labels = malloc(out->count);
    if (!out->pixels || !out->labels) {
        data_images_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for %u images", out->count);
    }
    memcpy(out->pixels, img + 16, npix);
    if ((rv = idx_labels(out, lab + 8, what_labels, n_class)))
        data_images_free(out);
    return rv;
}

/* Why buf cannot be CIFAR-10's binary records, or NULL. */
static const char *cifar_refusal(const uint8_t *buf, size_t len)
{
    if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b)
        return "is still gzip-compressed: decompress it first (data_read_input, data/gunzip.h, does)";
    if (len >= 262 && memcmp(buf + 257, "ustar", 5) == 0)
        return "is a tar archive (cifar-10-binary.tar.gz is one): extract it (`tar xzf cifar-10-binary.tar.gz`) "
               "and name the data_batch_N.bin files it holds";
    if (len == 0 || len % DATA_CIFAR_RECORD)
        return "is not whole 3,073-byte records (a label byte and 3 x 32 x 32 pixels): not CIFAR-10's binary "
               "version (the Python version's pickles are not read)";
    return NULL;
}

int data_cifar_parse(data_images *out, const uint8_t *const *bufs, const size_t *lens, const char *const *whats,
                     size_t n, uint32_t limit)
{
    memset(out, 0, sizeof *out);
    uint64_t total = 0;
    for (size_t f = 0; f < n; f++) {
        const char *why = cifar_refusal(bufs[f], lens[f]);
        if (why)
            return ovt_fail(OVT_EFORMAT, "%s (%zu bytes) %s", whats[f], lens[f], why);
        total += lens[f] / DATA_CIFAR_RECORD;
    }
    if (total == 0 || total > UINT32_MAX)
        return ovt_fail(OVT_EINVAL, "%llu CIFAR-10 records: an image file holds 1 to 2^32 - 1",
                        (unsigned long long)total);
    out->count = limit && limit < total ? limit : (uint32_t)total;
    out->channels = 3;
    out->height = out->width = 32;
    out->n_class = 10;
    out->pixels = malloc((size_t)out->count * (DATA_CIFAR_RECORD - 1));
    out->labels = malloc(out->count);
    if (!out->pixels || !out->labels) {
        data_images_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for %u images", out->count);
    }
    uint32_t k = 0;
    for (size_t f = 0; f < n && k < out->count; f++)
        for (size_t r = 0; r < lens[f] / DATA_CIFAR_RECORD && k < out->count; r++, k++) {
            const uint8_t *rec = bufs[f] + r * DATA_CIFAR_RECORD;
            if (rec[0] >= 10) {
                data_images_free(out);
                return ovt_fail(OVT_EFORMAT, "%s: record %zu has label %u; CIFAR-10's are 0..9 (CIFAR-100's "
                                "binary, two label bytes, is not read)", whats[f], r, rec[0]);
            }
            out->labels[k] = rec[0];
            memcpy(out->pixels + (size_t)k * (DATA_CIFAR_RECORD - 1), rec + 1, DATA_CIFAR_RECORD - 1);
        }
    return 0;
}

static size_t pixels_of(const data_images *im)
{
    return (size_t)im->count * im->channels * im->height * im->width;
}

int data_images_encode(data_images *im, uint8_t **buf, size_t *len)
{
    size_t npix = pixels_of(im);
    size_t total = IMG_HEADER + npix + im->count;
    uint8_t *p = malloc(total);
    *buf = NULL;
    *len = 0;
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory encoding %u images", im->count);
    memcpy(p, img_magic, 8);
    const uint32_t head[] = {IMG_VERSION, im->count, im->channels, im->height, im->width, im->n_class};
    for (size_t k = 0; k < 6; k++)
        ovt_put_le32(p + 8 + 4 * k, head[k]);
    memcpy(p + IMG_HEADER, im->pixels, npix);
    memcpy(p + IMG_HEADER + npix, im->labels, im->count);
    ovt_sha256(&im->hash, p, total);
    *buf = p;
    *len = total;
    return 0;
}

int data_images_is(const uint8_t *buf, size_t len)
{
    return len >= 8 && memcmp(buf, img_magic, 8) == 0;
}

/* The header's sizes: each non-zero, the classes 2..256, and the file's
 * length exactly header + pixels + labels. */
static int img_header(data_images *out, const uint8_t *buf, size_t len)
{
    if (len < IMG_HEADER)
        return ovt_fail(OVT_EFORMAT, "image file is truncated inside its %d-byte header", IMG_HEADER);
    if (!data_images_is(buf, len))
        return ovt_fail(OVT_EFORMAT, "not an ovt image file (wrong magic)");
    if (ovt_get_le32(buf + 8) != IMG_VERSION)
        return ovt_fail(OVT_EFORMAT, "image file version %u is not supported", ovt_get_le32(buf + 8));
    out->count = ovt_get_le32(buf + 12);
    out->channels = ovt_get_le32(buf + 16);
    out->height = ovt_get_le32(buf + 20);
    out->width = ovt_get_le32(buf + 24);
    out->n_class = ovt_get_le32(buf + 28);
    if (!out->count || !out->channels || !out->height || !out->width || out->n_class < 2 ||
        out->n_class > DATA_IMG_MAX_CLASSES)
        return ovt_fail(OVT_EFORMAT, "image file states %u images of %u x %u x %u and %u classes", out->count,
                        out->channels, out->height, out->width, out->n_class);
    uint64_t per = (uint64_t)out->channels * out->height * out->width;
    if (per > (1u << 24))
        return ovt_fail(OVT_EFORMAT, "image file states %llu pixels per image, above 2^24", (unsigned long long)per);
    uint64_t expect = IMG_HEADER + (per + 1) * out->count;
    if (len != expect)
        return ovt_fail(OVT_EFORMAT, "image file is %zu bytes, its header implies %llu (%s)", len,
                        (unsigned long long)expect, len < expect ? "truncated" : "trailing bytes");
    return 0;
}

int data_images_parse(data_images *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    int rv = img_header(out, buf, len);
    if (rv) {
        memset(out, 0, sizeof *out);
        return rv;
    }
    size_t npix = pixels_of(out);
    out->pixels = malloc(npix);
    out->labels = malloc(out->count);
    if (!out->pixels || !out->labels) {
        data_images_free(out);
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu pixels", npix);
    }
    memcpy(out->pixels, buf + IMG_HEADER, npix);
    for (uint32_t i = 0; i < out->count; i++) {
        out->labels[i] = buf[IMG_HEADER + npix + i];
        if (out->labels[i] >= out->n_class) {
            rv = ovt_fail(OVT_EFORMAT, "image file: label %u is %u, not below %u classes", i, out->labels[i],
                          out->n_class);
            data_images_free(out);
            return rv;
        }
    }
    ovt_sha256(&out->hash, buf, len);
    return 0;
}

int data_images_to_samples(data_samples *s, const data_images *im)
{
    memset(s, 0, sizeof *s);
    uint64_t dim = (uint64_t)im->channels * im->height * im->width;
    if (dim > (1u << 16))
        return ovt_fail(OVT_EINVAL, "images of %llu pixels are wider than an MLP's input (65536 at most)",
                        (unsigned long long)dim);
    size_t n = pixels_of(im);
    s->x = malloc(n * sizeof *s->x);
    s->y = malloc((size_t)im->count * sizeof *s->y);
    if (!s->x || !s->y) {
        data_samples_free(s);
        return ovt_fail(OVT_ENOMEM, "out of memory for %u images as features", im->count);
    }
    for (size_t i = 0; i < n; i++)
        s->x[i] = (float)im->pixels[i] * 0x1p-8f; /* exact: p has 8 bits */
    for (uint32_t i = 0; i < im->count; i++)
        s->y[i] = im->labels[i];
    s->count = im->count;
    s->dim = (uint32_t)dim;
    s->n_class = im->n_class;
    s->hash = im->hash;
    return 0;
}

int data_images_parse_samples(data_samples *s, const uint8_t *buf, size_t len)
{
    data_images im;
    memset(s, 0, sizeof *s);
    int rv = data_images_parse(&im, buf, len);
    if (rv)
        return rv;
    rv = data_images_to_samples(s, &im);
    data_images_free(&im);
    return rv;
}
