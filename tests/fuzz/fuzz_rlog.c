/* libFuzzer target for the rounding-log reader (cmake -DOVT_FUZZ=ON with
 * clang): any input is either rejected with OVT_EFORMAT, leaving the log
 * empty, or decoded to a log that encodes and decodes back to itself.
 * An input starting with 'B' is a raw body instead (then a site count byte
 * and a 16-bit entry count), which the harness compresses and wraps in a
 * header, so the body parser is reached past zstd's checksum. */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/bytes.h"
#include "kernels/rlog.h"

static int check(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || data[0] != 'B')
        return check(data, size);
    const uint8_t *body = data + 4;
    size_t body_len = size - 4;
    size_t bound = ZSTD_compressBound(body_len);
    uint8_t *file = malloc(56 + bound);
    size_t zlen = body_len ? ZSTD_compress(file + 56, bound, body, body_len, 1) : 0;
    if (ZSTD_isError(zlen))
        abort();
    memcpy(file, "OVTRLOG", 8);
    ovt_put_le32(file + 8, 1);
    ovt_put_le32(file + 12, 0);
    ovt_put_le64(file + 16, 5);
    ovt_put_le64(file + 24, data[1]);
    ovt_put_le64(file + 32, (uint64_t)data[2] | (uint64_t)data[3] << 8);
    ovt_put_le64(file + 40, body_len);
    ovt_put_le64(file + 48, zlen);
    check(file, 56 + zlen);
    free(file);
    return 0;
}

static int check(const uint8_t *data, size_t size)
{
    krn_rlog *log = krn_rlog_new(), *again = krn_rlog_new();
    int rc = krn_rlog_decode(log, data, size);
    if (rc != 0) {
        if (rc != OVT_EFORMAT || krn_rlog_nentries(log) != 0 || krn_rlog_nsites(log) != 0)
            abort();
    } else {
        uint8_t *buf;
        size_t len;
        if (krn_rlog_encode(log, &buf, &len) != 0 || krn_rlog_decode(again, buf, len) != 0)
            abort();
        if (krn_rlog_nentries(again) != krn_rlog_nentries(log) ||
            krn_rlog_nsites(again) != krn_rlog_nsites(log) ||
            krn_rlog_step(again) != krn_rlog_step(log))
            abort();
        for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
            const krn_rlog_site *a = krn_rlog_site_at(log, i), *b = krn_rlog_site_at(again, i);
            if (a->site != b->site || a->n != b->n || a->count != b->count ||
                memcmp(a->entries, b->entries, a->count * sizeof *a->entries) != 0)
                abort();
        }
        free(buf);
    }
    krn_rlog_free(log);
    krn_rlog_free(again);
    return 0;
}
