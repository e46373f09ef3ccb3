#ifndef OVT_DATA_IMAGES_H
#define OVT_DATA_IMAGES_H

/* Real images (docs/formats.md, "Image file"): the IDX files MNIST and
 * Fashion-MNIST ship in, and the ovt image file `ovt data idx` makes from
 * them. The image file holds uint8 pixels (NCHW, one sample after another)
 * and uint8 labels with its shape; its SHA-256 is the datasetHash.
 *
 * An MLP reads an image file as a samples set (data_images_to_samples):
 * each image flattened in (channel, row, column) order, pixel p becoming
 * p / 256. That is p * 2^-8, exact in binary32 and on every grid of 9 or
 * more bits, so no rounding stands between the file and the features
 * (p / 255 would have to be rounded to the grid, a choice every party would
 * have to make alike). The features lie in [0, 255/256]. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"
#include "data/dataset.h"

#define DATA_IMG_MAX_CLASSES 256u /* labels are one byte */

typedef struct {
    uint32_t count, channels, height, width, n_class;
    uint8_t *pixels; /* (count, channels, height, width) */
    uint8_t *labels; /* (count), each < n_class */
    ovt_hash hash;   /* datasetHash: SHA-256 of the image file's bytes */
} data_images;

void data_images_free(data_images *im);

/* Reads an IDX image file (magic 0x00000803: unsigned bytes, 3 dimensions
 * n, rows, columns, big-endian) and an IDX label file (0x00000801, n) into
 * *out: one channel, n_class classes (every label must be below it), the
 * first `limit` images (0: all). `what_images` and `what_labels` name the
 * files in messages. Every malformation (bytes still gzip-compressed:
 * data/gunzip.h decompresses them first; a wrong magic, a
 * length that disagrees with the dimensions, counts that differ, a label
 * too large) is OVT_EFORMAT naming the file and what is wrong. out->hash is
 * left zero (the encoding sets it: data_images_encode). */
int data_idx_parse(data_images *out, const uint8_t *img, size_t img_len, const char *what_images,
                   const uint8_t *lab, size_t lab_len, const char *what_labels, uint32_t n_class,
                   uint32_t limit) OVT_MUST_USE;

/* CIFAR-10's binary version (data_batch_1.bin .. data_batch_5.bin,
 * test_batch.bin): records of 3,073 bytes, a label 0..9 and 3 x 32 x 32
 * pixels (red, green, blue planes, each row-major): already NCHW. Reads the
 * records of the n buffers in order into *out (3 channels, 32 x 32, 10
 * classes), the first `limit` (0: all). A buffer that is not whole records,
 * a label above 9, a tar archive (the download is
 * cifar-10-binary.tar.gz: extract it) or bytes still gzip-compressed
 * (data/gunzip.h decompresses them) is OVT_EFORMAT naming whats[i].
 * out->hash is left zero. */
#define DATA_CIFAR_RECORD 3073u
int data_cifar_parse(data_images *out, const uint8_t *const *bufs, const size_t *lens, const char *const *whats,
                     size_t n, uint32_t limit) OVT_MUST_USE;

/* The image file's bytes (malloc'd *buf); sets im->hash. */
int data_images_encode(data_images *im, uint8_t **buf, size_t *len) OVT_MUST_USE;

/* True if buf starts with the image file's magic (the loader's switch
 * between an image file and a samples file). */
int data_images_is(const uint8_t *buf, size_t len);

/* Parses an image file; every malformation is OVT_EFORMAT. Sets out->hash. */
int data_images_parse(data_images *out, const uint8_t *buf, size_t len) OVT_MUST_USE;

/* The samples set an MLP trains on: dim = channels x height x width, x =
 * pixel / 256, y = the labels; s->hash = im->hash (the image file is the
 * dataset). */
int data_images_to_samples(data_samples *s, const data_images *im) OVT_MUST_USE;

/* An image file in buf read as samples (data_images_parse, then
 * data_images_to_samples). */
int data_images_parse_samples(data_samples *s, const uint8_t *buf, size_t len) OVT_MUST_USE;

#endif
