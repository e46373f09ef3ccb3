#ifndef OVT_DATA_DATASET_H
#define OVT_DATA_DATASET_H

/* Training data and the batch schedule (docs/formats.md, "Data").
 *
 * Two kinds of dataset:
 *   tokens  (GPT-2): a token file, either the ovt uint16 format (magic
 *           "OVTTOK16", header of sizes) or any other file read as raw bytes,
 *           one byte-level token per byte (vocab 256);
 *   samples (MLP classifier): feature vectors (grid values) with labels, in
 *           the ovt samples format (magic "OVTSMPL1"); the demo makes one
 *           synthetically with krn_rng.
 * datasetHash is SHA-256 of the file bytes (for a synthetic sample set, of
 * the bytes its file would have).
 *
 * The batch of step i (i >= 1) is a pure function of (seed, i): element j of
 * the batch is krn_rng_below(seed, i, KRN_RNG_BATCH, j, n) for n possible
 * picks (sequence start positions or sample indices), so any party can
 * rebuild any step's batch without replaying the schedule. */

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"
#include "common/err.h"

typedef struct {
    uint32_t vocab;
    size_t count;
    uint32_t *tokens; /* count tokens, each < vocab */
    ovt_hash hash;    /* datasetHash */
} data_tokens;

/* Loads a token file (uint16 format, or raw bytes). The uint16 reader
 * rejects a bad header, a size that disagrees with the file length, or a
 * token >= vocab, with OVT_EFORMAT. */
int data_tokens_load(data_tokens *out, const char *path) OVT_MUST_USE;
int data_tokens_parse(data_tokens *out, const uint8_t *buf, size_t len) OVT_MUST_USE;
void data_tokens_free(data_tokens *t);

/* Encodes tokens in the uint16 format (vocab <= 65536), malloc'd *buf. */
int data_tokens_encode(const uint32_t *tokens, size_t count, uint32_t vocab, uint8_t **buf,
                      size_t *len) OVT_MUST_USE;

typedef struct {
    uint32_t B, T;
    int32_t *inputs;  /* (B, T) */
    int32_t *targets; /* (B, T) */
} data_token_batch;

/* The batch of step `step`: B sequences of T inputs and the next T tokens as
 * targets. Needs count >= T + 1. Caller frees with data_token_batch_free. */
int data_token_batch_get(data_token_batch *out, const data_tokens *data, uint64_t seed, uint64_t step,
                        uint32_t B, uint32_t T) OVT_MUST_USE;
void data_token_batch_free(data_token_batch *b);

/* batchHash: SHA-256(u32le(B) || u32le(T) || inputs as u32le || targets as u32le). */
void data_token_batch_hash(ovt_hash *out, const data_token_batch *b);

typedef struct {
    uint32_t count, dim, n_class;
    float *x;       /* (count, dim) grid values */
    uint32_t *y;    /* (count) labels < n_class */
    ovt_hash hash;  /* datasetHash */
} data_samples;

/* The samples file: magic, version, count, dim, n_class, then x as float32
 * LE and y as u32 LE. Parse rejects malformed files with OVT_EFORMAT. */
int data_samples_encode(const data_samples *s, uint8_t **buf, size_t *len) OVT_MUST_USE;
int data_samples_parse(data_samples *out, const uint8_t *buf, size_t len, int grid_bits) OVT_MUST_USE;
void data_samples_free(data_samples *s);

/* Sets s->hash from the encoding. */
int data_samples_rehash(data_samples *s) OVT_MUST_USE;

typedef struct {
    uint32_t B, dim;
    float *x;    /* (B, dim) */
    int32_t *y; /* (B) labels */
} data_sample_batch;

int data_sample_batch_get(data_sample_batch *out, const data_samples *data, uint64_t seed, uint64_t step,
                         uint32_t B) OVT_MUST_USE;
void data_sample_batch_free(data_sample_batch *b);

/* batchHash: SHA-256(u32le(B) || u32le(dim) || x as float32 LE || y as u32le). */
void data_sample_batch_hash(ovt_hash *out, const data_sample_batch *b);



/* A synthetic classification set for the demo and tests: features
 * x[i][k] = the grid value of krn_rng_normal(seed, 0, DATA_RNG_SAMPLES, i*dim+k),
 * labels from a random linear teacher: y[i] = argmax_c sum_k x[i][k]*t[c][k]
 * with t[c][k] = krn_rng_normal(seed, 1, DATA_RNG_SAMPLES, c*dim+k), summed in
 * FP64 in increasing k (a fixed order, so the set is the same everywhere;
 * its hash pins it anyway). Sets s->hash. */
#define DATA_RNG_SAMPLES 16u /* krn_rng purpose of synthetic data */
int data_samples_synthetic(data_samples *out, uint64_t seed, uint32_t count, uint32_t dim, uint32_t n_class,
                          int grid_bits) OVT_MUST_USE;

#endif
