#ifndef OVT_DATA_MAKE_H
#define OVT_DATA_MAKE_H

/* Making the input files of a run (`ovt data`, docs/trainer.md): an MLP
 * samples file from a seed and sizes, and a token file from text,
 * byte-level, with GPT-2's BPE (data/bpe.h) or with Llama 2's SentencePiece
 * BPE (data/sptok.h). Each is written to a
 * temporary name, fsynced and renamed (ovt_write_atomic). */

#include <stdbool.h>
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

/* The tokenizer of a token file made from text. */
typedef enum { DATA_TOK_BYTES, DATA_TOK_GPT2, DATA_TOK_LLAMA2 } data_tok_kind;

/* The names `ovt data text --tokenizer` takes ("bytes", "gpt2", "llama2",
 * "mistral": Llama 2's algorithm with Mistral's vocabulary), and the kinds
 * of file `ovt data` makes ("mlp", "text", "idx", "cifar"), in order; NULL
 * past the last. The command parses by them and its help, `ovt --help` and
 * the README name them all (a test holds them to these lists). */
const char *data_tokenizer_name(size_t i);
const char *data_make_kind_name(size_t i);

typedef struct {
    data_tok_kind kind;
    const char *source; /* GPT2: the directory of encoder.json and vocab.bpe; LLAMA2: tokenizer.json */
    bool bos;           /* LLAMA2: "<s>" first */
} data_tokenizer;

/* Writes the tokens of the text file text_path to path (the ovt uint16
 * format): one byte-level token per byte, GPT-2's BPE tokens (data/bpe.h)
 * or SentencePiece BPE tokens (data/sptok.h). The text must make at least
 * 2 tokens. */
int data_make_text_tokens(data_made *out, const char *path, const char *text_path,
                          const data_tokenizer *tok) OVT_MUST_USE;

/* The largest IDX file data_make_images reads (MNIST's training images are
 * 47 MB). */
#define DATA_MAX_IDX ((size_t)1 << 32)

/* Writes the ovt image file (data/images.h) of an IDX image file and its IDX
 * label file to path: the first `limit` images (0: all), labels below
 * n_class. Either file may be gzip-compressed, as MNIST and Fashion-MNIST
 * ship them (data/gunzip.h: decompressed on reading). */
int data_make_images(data_made *out, const char *path, const char *images_path, const char *labels_path,
                     uint32_t n_class, uint32_t limit) OVT_MUST_USE;

/* Writes the ovt image file of CIFAR-10's binary batch files (n paths, in
 * order; data_cifar_parse) to path: the first `limit` images (0: all). A
 * gzip-compressed batch file is decompressed on reading (the tar.gz
 * archive itself becomes a tar file, which data_cifar_parse refuses). */
int data_make_cifar(data_made *out, const char *path, const char *const *paths, size_t n,
                    uint32_t limit) OVT_MUST_USE;

#endif
