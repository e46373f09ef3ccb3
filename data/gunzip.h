#ifndef OVT_DATA_GUNZIP_H
#define OVT_DATA_GUNZIP_H

/* The input files of `ovt data` as their publishers ship them: MNIST and
 * Fashion-MNIST (Debian's dataset-fashion-mnist too) are gzip-compressed,
 * so a file that starts with gzip's magic is decompressed on reading
 * (zlib), whatever its name. */

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Whether buf starts with gzip's magic (1f 8b). */
int data_is_gzip(const uint8_t *buf, size_t len);

/* The decompressed bytes of the gzip stream buf[0..len) (one member or
 * several, concatenated as gzip -c a b writes them), malloc'd *out of
 * *out_len bytes, at most max_len. A corrupt or truncated stream, or one
 * that inflates past max_len, is OVT_EFORMAT naming `what`; *out is NULL
 * on failure. */
int data_gunzip(uint8_t **out, size_t *out_len, const uint8_t *buf, size_t len, size_t max_len,
                const char *what) OVT_MUST_USE;

/* Reads the file at path (at most max_len bytes, after decompression when
 * it is gzip-compressed) into malloc'd *buf; *was_gzip (may be NULL) says
 * whether it was. */
int data_read_input(const char *path, uint8_t **buf, size_t *len, size_t max_len, int *was_gzip) OVT_MUST_USE;

#endif
