#ifndef OVT_MODELIO_SAFETENSORS_H
#define OVT_MODELIO_SAFETENSORS_H

/* The safetensors container (docs/formats.md, "Model export"), as its own
 * specification defines it: an 8-byte little-endian header length N, N
 * bytes of JSON header, then the tensors' raw little-endian bytes. The
 * header is one object: for each tensor name {"dtype", "shape",
 * "data_offsets": [begin, end]} (byte offsets into the data that follows
 * the header), and optionally "__metadata__", an object of string values.
 *
 * The reader is strict: a header that is not one such object, a duplicate
 * or unknown key, an unknown dtype, a shape whose size disagrees with its
 * offsets, offsets that overlap, leave a hole or pass the end of the file,
 * bytes after the last tensor, and metadata values that are not strings are
 * each OVT_EFORMAT with a message naming the tensor or key. */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define TRN_ST_MAX_HEADER ((size_t)100 << 20) /* the specification's limit on N */
#define TRN_ST_MAX_DIMS 8

typedef enum {
    TRN_ST_BOOL, TRN_ST_U8, TRN_ST_I8, TRN_ST_F8_E5M2, TRN_ST_F8_E4M3, TRN_ST_I16, TRN_ST_U16, TRN_ST_F16,
    TRN_ST_BF16, TRN_ST_I32, TRN_ST_U32, TRN_ST_F32, TRN_ST_F64, TRN_ST_I64, TRN_ST_U64
} trn_st_dtype;

/* "F32", ... */
const char *trn_st_dtype_name(trn_st_dtype d);

typedef struct {
    char *name;
    trn_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[TRN_ST_MAX_DIMS];
    uint64_t elements;   /* product of the shape (1 for a scalar) */
    uint64_t begin, end; /* byte offsets into the data section */
    const uint8_t *data; /* begin's byte in the file's buffer */
} trn_st_tensor;

typedef struct {
    char *key;
    char *value;
} trn_st_meta;

/* A parsed file. Tensors are in the order of their data (increasing
 * begin); data points into buf, which the file owns. */
typedef struct {
    uint8_t *buf;
    size_t len;
    size_t ntensors;
    trn_st_tensor *t;
    size_t nmeta;
    trn_st_meta *meta;
} trn_st_file;

/* Whether the first bytes of a file (n of them, n >= 9 to say yes) look
 * like safetensors: a header length that fits the specification's limit and
 * a header that opens with '{'. A guess by content, for `--init-from`. */
int trn_st_sniff(const uint8_t *head, size_t n);

/* Parses buf (len bytes), taking ownership of it (freed by trn_st_free, also
 * on failure). what names the file in messages. */
int trn_st_parse(trn_st_file *out, uint8_t *buf, size_t len, const char *what) OVT_MUST_USE;

/* Reads and parses the file at path (at most max_len bytes). */
int trn_st_read(trn_st_file *out, const char *path, size_t max_len) OVT_MUST_USE;
void trn_st_free(trn_st_file *f);

/* The tensor called name, or NULL. */
const trn_st_tensor *trn_st_find(const trn_st_file *f, const char *name);

/* The metadata value of key, or NULL. */
const char *trn_st_meta_get(const trn_st_file *f, const char *key);

/* One tensor to write: its bytes (already little-endian), dtype and shape. */
typedef struct {
    const char *name;
    trn_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[TRN_ST_MAX_DIMS];
    const void *data;
} trn_st_out;

/* Writes a safetensors file to path atomically (temporary file, fsync,
 * rename, directory fsync) straight from the tensors' memory: "__metadata__"
 * first (nmeta pairs, in their order), then the tensors in the order given,
 * their data in that order; the header padded with spaces so that the data
 * starts 8-byte aligned, as the reference writer does. Names must be
 * distinct and not "__metadata__". */
int trn_st_write(const char *path, const trn_st_out *t, size_t n, const trn_st_meta *meta,
                 size_t nmeta) OVT_MUST_USE;

#endif
