#ifndef OVT_DATA_MAKE_H
#define OVT_DATA_MAKE_H

/* Making the input files of a run (`ovt data`, docs/trainer.md): an MLP
 * samples file from a seed and sizes, and a GPT-2 token file from text,
 * byte-level or with GPT-2's BPE (data/bpe.h). Each is written to a
 * temporary name, fsynced and renamed (ovt_write_atomic). */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

/* The largest text data_make_text_tokens reads: the uint16 token file holds
 * two bytes per byte of text, so this keeps the output under 8 GiB. */
#define DATA_MAX_TEXT ((size_t)1 << 32)

/* What a file made holds. */
typedef struct {
    ovt_hash hash;   /* datasetHash: the SHA-256 of the file's bytes */
    size_t bytes;    /* the file's length */
    size_t tokens;   /* a token file: the tokens */
    uint32_t vocab;  /* a token file: the vocabulary (256 for bytes) */
    uint32_t images, height, width, classes; /* an image file: its shape */
} data_made;

/* Writes the synthetic samples set data_samples_synthetic makes from these
 * to path (the ovt samples format). */
int data_make_samples(data_made *out, const char *path, uint64_t seed, uint32_t count, uint32_t dim,
                      uint32_t n_class, int grid_bits) OVT_MUST_USE;

/* Writes the tokens of the text file text_path to path (the ovt uint16
 * format): GPT-2's BPE tokens with the vocabulary in bpe_dir (encoder.json
 * and vocab.bpe), or one byte-level token per byte when bpe_dir is NULL.
 * The text must make at least 2 tokens. */
int data_make_text_tokens(data_made *out, const char *path, const char *text_path,
                          const char *bpe_dir) OVT_MUST_USE;

/* The largest IDX file data_make_images reads (MNIST's training images are
 * 47 MB). */
#define DATA_MAX_IDX ((size_t)1 << 32)

/* Writes the ovt image file (data/images.h) of an IDX image file and its IDX
 * label file to path: the first `limit` images (0: all), labels below
 * n_class. Raw IDX only (gzip is refused by name: ovt links no zlib). */
int data_make_images(data_made *out, const char *path, const char *images_path, const char *labels_path,
                     uint32_t n_class, uint32_t limit) OVT_MUST_USE;

#endif
