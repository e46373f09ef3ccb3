#ifndef OVT_COMMON_FILEIO_H
#define OVT_COMMON_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Writes len bytes to path so that path holds either its old content or the
 * complete new content, never a mix: the data goes to "path.tmp.PID", is
 * fsynced, renamed over path, and the directory is fsynced. mode is the file
 * mode of the new file (0600 for secrets, 0644 otherwise). */
int ovt_write_atomic(const char *path, const void *data, size_t len, unsigned mode) OVT_MUST_USE;

/* ovt_write_atomic of the concatenation of nparts byte ranges, written one
 * after the other without joining them in memory first (a checkpoint's
 * header, the state's own memory, its checksum). */
typedef struct {
    const void *data;
    size_t len;
} ovt_span;
int ovt_write_atomic_parts(const char *path, const ovt_span *parts, size_t nparts, unsigned mode) OVT_MUST_USE;

struct stat;

/* Opens path for reading only if it is a regular file: opened non-blocking
 * and checked with fstat before any read, so a FIFO or device is refused at
 * once instead of blocking (then made blocking again). *fd (O_CLOEXEC) is the
 * caller's to close; st gets the fstat. */
int ovt_open_regular(const char *path, int *fd, struct stat *st) OVT_MUST_USE;

/* Reads a whole file into a malloc'd buffer (*data, *len; a NUL byte is
 * appended but not counted). Files larger than max_len are rejected, as are files
 * that are not regular (ovt_open_regular). */
int ovt_read_file(const char *path, uint8_t **data, size_t *len, size_t max_len) OVT_MUST_USE;

/* Creates a directory and its parents (like mkdir -p). */
int ovt_mkdirs(const char *path, unsigned mode) OVT_MUST_USE;

/* Joins dir and name into out (cap bytes); fails if it does not fit. */
int ovt_path_join(char *out, size_t cap, const char *dir, const char *name) OVT_MUST_USE;

#endif
