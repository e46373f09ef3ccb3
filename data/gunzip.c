/* gzip-compressed input files, decompressed with zlib (data/gunzip.h). */
#include "data/gunzip.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/fileio.h"

int data_is_gzip(const uint8_t *buf, size_t len)
{
    return len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b;
}

/* Room for at least one more byte in *out (capacity *cap, *used bytes in
 * use), doubling up to max_len + 1 (the one byte past max_len tells a
 * stream that is too long). */
static int grow(uint8_t **out, size_t *cap, size_t used, size_t max_len)
{
    if (used < *cap)
        return 0;
    size_t want = *cap < max_len / 2 ? 2 * *cap : max_len + 1;
    uint8_t *p = realloc(*out, want);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory decompressing (%zu bytes so far)", used);
    *out = p;
    *cap = want;
    return 0;
}

/* Inflates the members of buf one after the other into *out; zlib's
 * windowBits 16 + 15 reads the gzip wrapper and checks its CRC and length. */
static int inflate_all(z_stream *z, uint8_t **out, size_t *cap, size_t *used, size_t max_len, const char *what)
{
    for (;;) {
        int rv = grow(out, cap, *used, max_len);
        if (rv)
            return rv;
        z->next_out = *out + *used;
        z->avail_out = (uInt)(*cap - *used > UINT32_MAX ? UINT32_MAX : *cap - *used);
        uInt before = z->avail_out;
        int zr = inflate(z, Z_NO_FLUSH);
        *used += before - z->avail_out;
        if (*used > max_len)
            return ovt_fail(OVT_EFORMAT, "%s decompresses to more than %zu bytes: too large for an input file", what,
                            max_len);
        if (zr == Z_STREAM_END) {
            if (z->avail_in == 0 || !data_is_gzip(z->next_in, z->avail_in))
                return z->avail_in == 0 ? 0
                                        : ovt_fail(OVT_EFORMAT, "%s has %u bytes after its gzip stream that are not "
                                                   "another gzip member", what, z->avail_in);
            if (inflateReset(z) != Z_OK)
                return ovt_fail(OVT_EFORMAT, "%s: zlib could not start the next gzip member", what);
            continue;
        }
        if (zr == Z_BUF_ERROR && z->avail_in == 0)
            return ovt_fail(OVT_EFORMAT, "%s is a truncated gzip file (it ends inside the compressed data): "
                            "download it again", what);
        if (zr != Z_OK && zr != Z_BUF_ERROR)
            return ovt_fail(OVT_EFORMAT, "%s is not a valid gzip file (zlib: %s): download it again", what,
                            z->msg ? z->msg : "corrupt data");
    }
}

int data_gunzip(uint8_t **out, size_t *out_len, const uint8_t *buf, size_t len, size_t max_len, const char *what)
{
    *out = NULL;
    *out_len = 0;
    if (len > UINT32_MAX)
        return ovt_fail(OVT_EINVAL, "%s: a gzip file above 4 GiB is not read; decompress it first (gunzip -c)",
                        what);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return ovt_fail(OVT_ENOMEM, "zlib could not start inflating %s", what);
    z.next_in = (Bytef *)(uintptr_t)buf; /* zlib's API is not const; it does not write the input */
    z.avail_in = (uInt)len;
    size_t cap = len < max_len / 4 ? 4 * len + 64 : max_len + 1, used = 0;
    uint8_t *o = malloc(cap);
    int rv = o ? inflate_all(&z, &o, &cap, &used, max_len, what)
               : ovt_fail(OVT_ENOMEM, "out of memory decompressing %s", what);
    inflateEnd(&z);
    if (rv) {
        free(o);
        return rv;
    }
    *out = o;
    *out_len = used;
    return 0;
}

int data_read_input(const char *path, uint8_t **buf, size_t *len, size_t max_len, int *was_gzip)
{
    uint8_t *raw;
    size_t n;
    if (was_gzip)
        *was_gzip = 0;
    int rv = ovt_read_file(path, &raw, &n, max_len);
    if (rv)
        return rv;
    if (!data_is_gzip(raw, n)) {
        *buf = raw;
        *len = n;
        return 0;
    }
    rv = data_gunzip(buf, len, raw, n, max_len, path);
    free(raw);
    if (!rv && was_gzip)
        *was_gzip = 1;
    return rv;
}
