/* The checkpoint file (see checkpoint.h). */
#include "trainer/checkpoint.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bigmem.h"
#include "common/fileio.h"
#include "kernels/grid.h"

/* Checkpoint layout; every offset below is fixed by docs/formats.md. The
 * run config's encoding is 168, 204, 208, 236 or 260 bytes (versions 1 to 5),
 * 4 more with a tree stateHash, stated at offset 12; the fields after it move
 * with it. */
static const uint8_t ckpt_magic[8] = {'O', 'V', 'T', 'C', 'K', 'P', 'T', 0};
#define CKPT_VERSION 1u

/* The header's length for a config encoding of cfg_len bytes. */
static size_t ckpt_fixed(size_t cfg_len)
{
    return 8 + 4 + 4 + cfg_len + 8 + 4 + 8;
}

/* The longest header: the version 2 config encoding and TRN_MAX_TENSORS
 * tensor sizes. */
#define CKPT_HEAD_MAX (16 + TRN_CONFIG_ENC_MAX + 20 + 8 * TRN_MAX_TENSORS)

/* Writes the checkpoint's header (everything before the tensors) into
 * head; returns its length. */
static size_t ckpt_head_encode(uint8_t head[CKPT_HEAD_MAX], const trn_state *st)
{
    const trn_layout *l = &st->layout;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t cfg_len = trn_config_encode(enc, &st->config);
    memcpy(head, ckpt_magic, 8);
    ovt_put_le32(head + 8, CKPT_VERSION);
    ovt_put_le32(head + 12, (uint32_t)cfg_len);
    memcpy(head + 16, enc, cfg_len);
    size_t o = 16 + cfg_len;
    ovt_put_le64(head + o, st->step);
    ovt_put_le32(head + o + 8, (uint32_t)l->count);
    ovt_put_le64(head + o + 12, l->nparams);
    o = ckpt_fixed(cfg_len);
    for (size_t k = 0; k < l->count; k++, o += 8)
        ovt_put_le64(head + o, l->t[k].size);
    return o;
}

/* The checksum of a checkpoint: SHA-256 of its header and tensor bytes. */
static void ckpt_checksum(ovt_hash *out, const uint8_t *head, size_t head_len, const float *mem, size_t body)
{
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (!h)
        abort(); /* OpenSSL could not allocate a digest context */
    ovt_sha256_update(h, head, head_len);
    ovt_sha256_update_le32(h, mem, body);
    ovt_sha256_final(h, out);
}

int trn_checkpoint_encode(const trn_state *st, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    uint8_t head[CKPT_HEAD_MAX];
    size_t head_len = ckpt_head_encode(head, st);
    size_t body = 3 * st->layout.nparams * sizeof(float);
    size_t total = head_len + body + 32;
    uint8_t *p = malloc(total);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory encoding a %zu-byte checkpoint", total);
    memcpy(p, head, head_len);
    ovt_copy_le32(p + head_len, st->mem, body / 4);
    ovt_hash sum;
    ovt_sha256(&sum, p, head_len + body);
    memcpy(p + head_len + body, sum.b, 32);
    *buf = p;
    *len = total;
    return 0;
}

int trn_checkpoint_size(size_t *len, const trn_run_config *rc)
{
    *len = 0;
    trn_layout l;
    int rv = trn_layout_build(&l, &rc->model);
    if (rv)
        return rv;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    *len = ckpt_fixed(trn_config_encode(enc, rc)) + 8 * l.count + 3 * l.nparams * sizeof(float) + 32;
    return 0;
}

/* What a checkpoint's header states, checked against the file's length. */
typedef struct {
    size_t cfg_len;
    size_t head_len; /* header bytes, the tensor sizes included */
    uint64_t step;
    uint32_t count;
    uint64_t nparams;
} ckpt_head;

/* Parses and checks the header at buf (at least min(len, CKPT_HEAD_MAX)
 * bytes of it present) of a checkpoint of len bytes. */
static int ckpt_head_parse(ckpt_head *h, const uint8_t *buf, size_t len)
{
    memset(h, 0, sizeof *h);
    if (len < ckpt_fixed(TRN_CONFIG_ENC_V1_LEN) + 32)
        return ovt_fail(OVT_EFORMAT, "checkpoint is truncated: %zu bytes, shorter than its header", len);
    if (memcmp(buf, ckpt_magic, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "not an ovt checkpoint (wrong magic)");
    uint32_t version = ovt_get_le32(buf + 8);
    if (version != CKPT_VERSION)
        return ovt_fail(OVT_EFORMAT, "checkpoint version %u is not supported (expected %u)", version,
                        CKPT_VERSION);
    size_t cfg_len = ovt_get_le32(buf + 12);
    static const size_t cfg_lens[5] = {TRN_CONFIG_ENC_V1_LEN, TRN_CONFIG_ENC_V2_LEN, TRN_CONFIG_ENC_V3_LEN,
                                       TRN_CONFIG_ENC_V4_LEN, TRN_CONFIG_ENC_V5_LEN};
    bool known = false; /* a version's length, or that and the tree stateHash's field */
    for (int k = 0; k < 5; k++)
        known |= cfg_len == cfg_lens[k] || cfg_len == cfg_lens[k] + TRN_CONFIG_ENC_TAIL;
    if (!known)
        return ovt_fail(OVT_EFORMAT, "checkpoint states a run config of %zu bytes, expected %d, %d, %d, %d or %d "
                                     "(each %d more with a tree stateHash)",
                        cfg_len, TRN_CONFIG_ENC_V1_LEN, TRN_CONFIG_ENC_V2_LEN, TRN_CONFIG_ENC_V3_LEN,
                        TRN_CONFIG_ENC_V4_LEN, TRN_CONFIG_ENC_V5_LEN, TRN_CONFIG_ENC_TAIL);
    size_t fixed = ckpt_fixed(cfg_len);
    if (len < fixed + 32)
        return ovt_fail(OVT_EFORMAT, "checkpoint is truncated: %zu bytes, shorter than its header", len);
    /* The checksum comes next (the caller's): a flipped bit anywhere is
     * reported as such rather than as whatever field it happened to land
     * in. Its position depends on the sizes, so check them against the
     * length before trusting it. */
    size_t o = 16 + cfg_len;
    uint64_t step = ovt_get_le64(buf + o);
    uint32_t count = ovt_get_le32(buf + o + 8);
    uint64_t nparams = ovt_get_le64(buf + o + 12);
    if (count == 0 || count > TRN_MAX_TENSORS || nparams == 0 || nparams > ((uint64_t)1 << 40))
        return ovt_fail(OVT_EFORMAT, "checkpoint header states %u tensors and %llu parameters: corrupt", count,
                        (unsigned long long)nparams);
    uint64_t expect = (uint64_t)fixed + 8ull * count + 12ull * nparams + 32;
    if (len != expect)
        return ovt_fail(OVT_EFORMAT, "checkpoint is %zu bytes but its header implies %llu (%s)", len,
                        (unsigned long long)expect, len < expect ? "truncated" : "trailing bytes");
    h->cfg_len = cfg_len;
    h->head_len = fixed + 8 * (size_t)count;
    h->step = step;
    h->count = count;
    h->nparams = nparams;
    return 0;
}

/* The rest of a checkpoint whose checksum matched: its config, the sizes
 * against the config's model, every value a finite grid value. Takes
 * ownership of mem (3 * nparams floats, the file's tensor bytes) either
 * way. */
static int ckpt_finish(trn_state **out, const ckpt_head *h, const uint8_t *head, float *mem)
{
    trn_run_config rc;
    trn_state *st = NULL;
    int rv = trn_config_decode(&rc, head + 16, h->cfg_len);
    if (rv) {
        free(mem);
        return ovt_fail_wrap(OVT_EFORMAT, "checkpoint");
    }
    if ((rv = trn_state_from_mem(&st, &rc, mem)))
        return ovt_fail_wrap(OVT_EFORMAT, "checkpoint");
    const trn_layout *l = &st->layout;
    if (h->count != l->count || h->nparams != l->nparams) {
        rv = ovt_fail(OVT_EFORMAT, "checkpoint sizes (%u tensors, %llu parameters) disagree with its model "
                                   "config (%zu, %zu)",
                      h->count, (unsigned long long)h->nparams, l->count, l->nparams);
        goto fail;
    }
    size_t o = ckpt_fixed(h->cfg_len);
    for (size_t k = 0; k < l->count; k++, o += 8) {
        if (ovt_get_le64(head + o) != l->t[k].size) {
            rv = ovt_fail(OVT_EFORMAT, "checkpoint tensor %zu (%s) has %llu elements, the config says %zu", k,
                          l->t[k].name, (unsigned long long)ovt_get_le64(head + o), l->t[k].size);
            goto fail;
        }
    }
    int b = (int)rc.grid_bits;
    for (size_t i = 0; i < 3 * l->nparams; i++) {
        if (!krn_grid_contains(st->mem[i], b)) {
            rv = ovt_fail(OVT_EFORMAT, "checkpoint value %zu (section %s) is not a finite grid value for b = %d",
                          i % l->nparams, i < l->nparams ? "params" : i < 2 * l->nparams ? "m" : "v", b);
            goto fail;
        }
    }
    st->step = h->step;
    *out = st;
    return 0;
fail:
    trn_state_free(st);
    return rv;
}

int trn_checkpoint_decode(trn_state **out, const uint8_t *buf, size_t len)
{
    *out = NULL;
    ckpt_head h;
    int rv = ckpt_head_parse(&h, buf, len);
    if (rv)
        return rv;
    ovt_hash sum;
    ovt_sha256(&sum, buf, len - 32);
    if (memcmp(sum.b, buf + len - 32, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "checkpoint checksum mismatch: the file is corrupt");
    float *mem = ovt_big_alloc(3 * h.nparams, sizeof(float));
    if (!mem)
        return ovt_fail(OVT_ENOMEM, "out of memory for a checkpoint of %llu parameters",
                        (unsigned long long)h.nparams);
    ovt_copy_le32(mem, buf + h.head_len, 3 * h.nparams);
    return ckpt_finish(out, &h, buf, mem);
}

/* The header, the state's own tensor memory and the checksum, written one
 * after the other: no copy of the state is made where the memory is the
 * little-endian encoding; a big-endian host writes an encoded copy. */
int trn_checkpoint_write(const trn_state *st, const char *path)
{
    if (OVT_HOST_BIG_ENDIAN) {
        uint8_t *buf;
        size_t len;
        int rv = trn_checkpoint_encode(st, &buf, &len);
        if (rv)
            return rv;
        ovt_span whole = {buf, len};
        rv = ovt_write_atomic_parts(path, &whole, 1, 0644);
        free(buf);
        return rv;
    }
    uint8_t head[CKPT_HEAD_MAX];
    size_t head_len = ckpt_head_encode(head, st);
    size_t body = 3 * st->layout.nparams * sizeof(float);
    ovt_hash sum;
    ckpt_checksum(&sum, head, head_len, st->mem, body);
    ovt_span parts[3] = {{head, head_len}, {st->mem, body}, {sum.b, 32}};
    return ovt_write_atomic_parts(path, parts, 3, 0644);
}

/* Reads len bytes at offset off of fd into buf. */
static int read_at(int fd, void *buf, size_t len, off_t off, const char *path)
{
    uint8_t *p = buf;
    while (len > 0) {
        size_t want = len < ((size_t)64 << 20) ? len : ((size_t)64 << 20);
        ssize_t got = pread(fd, p, want, off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return ovt_fail_errno(OVT_EIO, "cannot read %s", path);
        if (got == 0)
            return ovt_fail(OVT_EIO, "short read on %s (the file shrank while it was read)", path);
        p += got;
        off += got;
        len -= (size_t)got;
    }
    return 0;
}

/* The header is read and checked first, then the tensor bytes go straight
 * from the file into the new state's memory: no whole-file buffer. */
int trn_checkpoint_read(trn_state **out, const char *path)
{
    *out = NULL;
    int fd;
    struct stat sb;
    int rv = ovt_open_regular(path, &fd, &sb);
    if (rv)
        return rv;
    size_t len = (size_t)sb.st_size;
    uint8_t head[CKPT_HEAD_MAX];
    size_t want = len < sizeof head ? len : sizeof head;
    ckpt_head h;
    float *mem = NULL;
    uint8_t trailer[32];
    if ((uint64_t)sb.st_size > ((uint64_t)1 << 40)) {
        rv = ovt_fail(OVT_EFORMAT, "%s is %lld bytes, more than the %zu allowed", path, (long long)sb.st_size,
                      (size_t)1 << 40);
        goto done;
    }
    if ((rv = read_at(fd, head, want, 0, path)))
        goto done;
    if ((rv = ckpt_head_parse(&h, head, len)))
        goto fail_wrap;
    if (!(mem = ovt_big_alloc(3 * h.nparams, sizeof(float)))) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for a checkpoint of %llu parameters", (unsigned long long)h.nparams);
        goto done;
    }
    if ((rv = read_at(fd, mem, 12 * h.nparams, (off_t)h.head_len, path)) ||
        (rv = read_at(fd, trailer, 32, (off_t)(len - 32), path)))
        goto done;
    ovt_swap_le32(mem, 3 * h.nparams); /* the file's words in host order */
    ovt_hash sum;
    ckpt_checksum(&sum, head, h.head_len, mem, 12 * h.nparams);
    if (memcmp(sum.b, trailer, 32) != 0) {
        rv = ovt_fail(OVT_EFORMAT, "checkpoint checksum mismatch: the file is corrupt");
        goto fail_wrap;
    }
    close(fd);
    rv = ckpt_finish(out, &h, head, mem);
    if (rv)
        return ovt_fail_wrap(rv, "%s", path);
    return 0;
fail_wrap:
    rv = ovt_fail_wrap(rv, "%s", path);
done:
    free(mem);
    close(fd);
    return rv;
}
