/* The IDX reader and the ovt image file (data/images.h) on small files built
 * here: the pixels and labels pass through unchanged, an MLP reads pixel p
 * as exactly p / 256, and every truncation, a wrong magic or version, counts
 * that differ and a label too large are OVT_EFORMAT. The real MNIST and
 * Fashion-MNIST files: test_data_idx.py. CIFAR-10's binary records likewise.
 * gzip-compressed inputs (as MNIST ships) are read through zlib: the same
 * image file as from the raw files; a cut or corrupt stream refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "common/fileio.h"
#include "data/gunzip.h"
#include "data/images.h"
#include "data/make.h"

/* An IDX image file of n images of 16 x 16, pixel k of image i = (k + i) % 256,
 * and its label file, label i = i % 10. */
static size_t idx_pair(uint8_t **img, uint8_t **lab, size_t *lab_len, uint32_t n)
{
    size_t img_len = 16 + (size_t)n * 256;
    *img = malloc(img_len);
    *lab = malloc(8 + n);
    *lab_len = 8 + n;
    const uint8_t head[16] = {0, 0, 8, 3, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n,
                              0, 0, 0, 16, 0, 0, 0, 16};
    memcpy(*img, head, 16);
    memcpy(*lab, head, 8);
    (*lab)[3] = 1;
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 256; k++)
            (*img)[16 + 256 * i + k] = (uint8_t)((k + i) % 256);
        (*lab)[8 + i] = (uint8_t)(i % 10);
    }
    return img_len;
}

static void test_round_trip(void)
{
    uint8_t *img, *lab, *buf;
    size_t lab_len, len, img_len = idx_pair(&img, &lab, &lab_len, 3);
    data_images im, back;
    data_samples s;
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len, "l", 10, 0) == 0);
    CHECK(im.count == 3 && im.channels == 1 && im.height == 16 && im.width == 16 && im.n_class == 10);
    CHECK_MEM(im.pixels, img + 16, 3 * 256);
    CHECK(data_images_encode(&im, &buf, &len) == 0);
    CHECK(len == 32 + 3 * 257);
    CHECK(data_images_is(buf, len));
    CHECK(data_images_parse(&back, buf, len) == 0);
    CHECK_MEM(back.pixels, img + 16, 3 * 256);
    CHECK(back.labels[0] == 0 && back.labels[1] == 1 && back.labels[2] == 2);
    CHECK_MEM(back.hash.b, im.hash.b, 32);
    CHECK(data_images_to_samples(&s, &back) == 0);
    CHECK(s.count == 3 && s.dim == 256 && s.n_class == 10 && s.y[2] == 2);
    /* image 0 holds every pixel value once: p / 256, exactly */
    for (int p = 0; p < 256; p++)
        CHECK_MSG(s.x[p] == (float)p / 256.0f, "pixel %d reads as %a", p, (double)s.x[p]);
    CHECK(s.x[255] == 0.99609375f && s.x[256 + 255] == 0.0f);
    CHECK_MEM(s.hash.b, back.hash.b, 32);
    data_samples_free(&s);
    data_images_free(&back);
    /* every truncation of the image file, and a trailing byte */
    int all = 1;
    for (size_t k = 0; k < len; k++)
        all &= data_images_parse(&back, buf, k) == OVT_EFORMAT;
    CHECK(all);
    uint8_t *more = malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    CHECK(data_images_parse(&back, more, len + 1) == OVT_EFORMAT);
    buf[8] = 2; /* version */
    CHECK(data_images_parse(&back, buf, len) == OVT_EFORMAT);
    buf[8] = 1;
    buf[len - 1] = 10; /* the last label, past 10 classes */
    CHECK(data_images_parse(&back, buf, len) == OVT_EFORMAT);
    buf[0] = 'X';
    CHECK(data_images_parse(&back, buf, len) == OVT_EFORMAT);
    free(more);
    free(buf);
    data_images_free(&im);
    free(img);
    free(lab);
}

static void test_idx_malformed(void)
{
    uint8_t *img, *lab;
    size_t lab_len, img_len = idx_pair(&img, &lab, &lab_len, 4);
    data_images im;
    int all = 1;
    for (size_t k = 0; k < img_len; k++)
        all &= data_idx_parse(&im, img, k, "i", lab, lab_len, "l", 10, 0) == OVT_EFORMAT;
    for (size_t k = 0; k < lab_len; k++)
        all &= data_idx_parse(&im, img, img_len, "i", lab, k, "l", 10, 0) == OVT_EFORMAT;
    CHECK(all);
    CHECK(data_idx_parse(&im, lab, lab_len, "i", lab, lab_len, "l", 10, 0) == OVT_EFORMAT); /* magic */
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len, "l", 3, 0) == OVT_EFORMAT);  /* label 3 */
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len, "l", 4, 0) == 0);
    data_images_free(&im);
    /* 3 labels for 4 images: the counts differ even though --limit 3 */
    lab[7] = 3;
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len - 1, "l", 10, 3) == OVT_EFORMAT);
    lab[7] = 4;
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len, "l", 10, 2) == 0);
    CHECK(im.count == 2 && im.pixels[256] == 1);
    data_images_free(&im);
    img[0] = 0x1f, img[1] = 0x8b; /* gzip */
    CHECK(data_idx_parse(&im, img, img_len, "i", lab, lab_len, "l", 10, 0) == OVT_EFORMAT);
    free(img);
    free(lab);
}

/* CIFAR-10's binary records: n records, label of record i = (i * 3) % 10,
 * pixel k = (k * 5 + i) % 251. */
static uint8_t *cifar_records(uint32_t n, uint32_t first)
{
    uint8_t *b = malloc((size_t)n * DATA_CIFAR_RECORD);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *r = b + (size_t)i * DATA_CIFAR_RECORD;
        r[0] = (uint8_t)(((first + i) * 3) % 10);
        for (uint32_t k = 0; k < 3072; k++)
            r[1 + k] = (uint8_t)((k * 5 + first + i) % 251);
    }
    return b;
}

/* Two batch files read in order; --limit; the refusals. The expected image
 * is the record as the format defines it: label byte, then the red, green
 * and blue 32 x 32 planes, which is (channel, row, column) already. */
static void test_cifar(void)
{
    uint8_t *a = cifar_records(3, 0), *b = cifar_records(2, 3);
    const uint8_t *bufs[2] = {a, b};
    size_t lens[2] = {3 * DATA_CIFAR_RECORD, 2 * DATA_CIFAR_RECORD};
    const char *whats[2] = {"data_batch_1.bin", "data_batch_2.bin"};
    data_images im;
    CHECK(data_cifar_parse(&im, bufs, lens, whats, 2, 0) == 0);
    CHECK(im.count == 5 && im.channels == 3 && im.height == 32 && im.width == 32 && im.n_class == 10);
    /* image 4 (the second file's second record): label 12 % 10, the green
     * plane's row 1, column 2 is pixel 1024 + 32 + 2 */
    CHECK(im.labels[4] == 2 && im.labels[3] == 9);
    CHECK(im.pixels[4 * 3072 + 1024 + 32 + 2] == (uint8_t)((1058 * 5 + 4) % 251));
    CHECK_MEM(im.pixels + 3 * 3072, b + 1, 3072);
    data_images_free(&im);
    CHECK(data_cifar_parse(&im, bufs, lens, whats, 2, 4) == 0 && im.count == 4);
    data_images_free(&im);
    lens[1] -= 1;
    CHECK(data_cifar_parse(&im, bufs, lens, whats, 2, 0) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "data_batch_2.bin") && strstr(ovt_errmsg(), "3,073-byte records"));
    lens[1] += 1;
    b[DATA_CIFAR_RECORD] = 10;
    CHECK(data_cifar_parse(&im, bufs, lens, whats, 2, 0) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "record 1 has label 10"));
    b[0] = 0x1f, b[1] = 0x8b;
    CHECK(data_cifar_parse(&im, bufs, lens, whats, 2, 0) == OVT_EFORMAT && strstr(ovt_errmsg(), "gzip"));
    free(a);
    free(b);
}

/* buf as one gzip member (zlib's deflate with the gzip wrapper), appended
 * to out at *len. */
static void gzip_member(uint8_t *out, size_t *len, size_t cap, const uint8_t *buf, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (Bytef *)(uintptr_t)buf;
    z.avail_in = (uInt)n;
    z.next_out = out + *len;
    z.avail_out = (uInt)(cap - *len);
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *len = cap - z.avail_out;
    deflateEnd(&z);
}

static void put_file(const char *path, const uint8_t *buf, size_t n)
{
    CHECK(ovt_write_atomic(path, buf, n, 0644) == 0);
}

/* data_make_images and data_make_cifar name .gz files directly (`ovt data
 * idx` refused them once, advising a gunzip that fails in a root-owned
 * folder): the same image file, byte for byte, as from the raw files. Two
 * concatenated members read as one file; a cut stream, a flipped byte and
 * one past the size limit are refused by name. */
static void test_gzip_inputs(void)
{
    uint8_t *img, *lab;
    size_t lab_len, img_len = idx_pair(&img, &lab, &lab_len, 40);
    size_t cap = 2 * img_len + 1024, gz_len = 0, lgz_len = 0;
    uint8_t *gz = malloc(cap), *lgz = malloc(cap);
    gzip_member(gz, &gz_len, cap, img, 1000); /* two members: gzip -c a b */
    gzip_member(gz, &gz_len, cap, img + 1000, img_len - 1000);
    gzip_member(lgz, &lgz_len, cap, lab, lab_len);
    CHECK(data_is_gzip(gz, gz_len) && !data_is_gzip(img, img_len));
    char dir[] = "/tmp/ovt-gz-XXXXXX", p[6][300];
    CHECK(mkdtemp(dir) != NULL);
    const char *names[6] = {"i", "l", "i.gz", "l.gz", "raw.img", "gz.img"};
    for (int k = 0; k < 6; k++)
        snprintf(p[k], sizeof p[k], "%s/%s", dir, names[k]);
    put_file(p[0], img, img_len);
    put_file(p[1], lab, lab_len);
    put_file(p[2], gz, gz_len);
    put_file(p[3], lgz, lgz_len);
    data_made raw, got;
    CHECK(data_make_images(&raw, p[4], p[0], p[1], 10, 0) == 0);
    CHECK(data_make_images(&got, p[5], p[2], p[3], 10, 0) == 0);
    CHECK(got.images == 40 && got.bytes == raw.bytes);
    CHECK_MEM(got.hash.b, raw.hash.b, 32);
    uint8_t *out;
    size_t out_len;
    CHECK(data_gunzip(&out, &out_len, gz, gz_len, img_len, "i.gz") == 0 && out_len == img_len);
    CHECK_MEM(out, img, img_len);
    free(out);
    CHECK(data_gunzip(&out, &out_len, gz, gz_len, img_len - 1, "i.gz") == OVT_EFORMAT && out == NULL);
    CHECK(strstr(ovt_errmsg(), "more than") != NULL);
    CHECK(data_gunzip(&out, &out_len, gz, gz_len - 5, img_len, "i.gz") == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "i.gz is a truncated gzip file") != NULL);
    gz[gz_len - 3] ^= 0x40; /* the last member's length field */
    CHECK(data_gunzip(&out, &out_len, gz, gz_len, img_len, "i.gz") == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "not a valid gzip file") != NULL);
    gz[gz_len - 3] ^= 0x40;
    gz[gz_len] = 7; /* a byte after the last member */
    CHECK(data_gunzip(&out, &out_len, gz, gz_len + 1, img_len, "i.gz") == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "after its gzip stream") != NULL);
    /* a CIFAR batch file gzip-compressed on its own */
    uint8_t *rec = cifar_records(3, 0);
    size_t rgz_len = 0, rcap = 3 * DATA_CIFAR_RECORD + 1024;
    uint8_t *rgz = malloc(rcap);
    gzip_member(rgz, &rgz_len, rcap, rec, 3 * DATA_CIFAR_RECORD);
    put_file(p[0], rec, 3 * DATA_CIFAR_RECORD);
    put_file(p[2], rgz, rgz_len);
    const char *one[1] = {p[0]}, *onegz[1] = {p[2]};
    CHECK(data_make_cifar(&raw, p[4], one, 1, 0) == 0 && data_make_cifar(&got, p[5], onegz, 1, 0) == 0);
    CHECK(got.images == 3);
    CHECK_MEM(got.hash.b, raw.hash.b, 32);
    for (int k = 0; k < 6; k++)
        unlink(p[k]);
    rmdir(dir);
    free(rec);
    free(rgz);
    free(gz);
    free(lgz);
    free(img);
    free(lab);
}

int main(void)
{
    CHECK_RUN(test_round_trip());
    CHECK_RUN(test_idx_malformed());
    CHECK_RUN(test_cifar());
    CHECK_RUN(test_gzip_inputs());
    return check_done();
}
