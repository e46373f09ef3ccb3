#include "trainer/run.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"

static const uint8_t steps_magic[8] = {'O', 'V', 'T', 'S', 'T', 'E', 'P', 'S'};
#define STEPS_VERSION 1u
#define STEPS_HEADER 56
#define STEP_BYTES 96

void trn_step_table_free(trn_step_table *t)
{
    if (!t)
        return;
    free(t->steps);
    memset(t, 0, sizeof *t);
}

int trn_step_table_encode(const trn_step_table *t, uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    size_t total = STEPS_HEADER + STEP_BYTES * t->count;
    uint8_t *p = malloc(total);
    if (!p)
        return ovt_fail(OVT_ENOMEM, "out of memory for a step table of %zu steps", t->count);
    memcpy(p, steps_magic, 8);
    ovt_put_le32(p + 8, STEPS_VERSION);
    ovt_put_le32(p + 12, 0);
    memcpy(p + 16, t->config_hash.b, 32);
    ovt_put_le64(p + 48, t->count);
    for (size_t i = 0; i < t->count; i++) {
        uint8_t *e = p + STEPS_HEADER + STEP_BYTES * i;
        memcpy(e, t->steps[i].state_hash.b, 32);
        memcpy(e + 32, t->steps[i].batch_hash.b, 32);
        memcpy(e + 64, t->steps[i].log_hash.b, 32);
    }
    *buf = p;
    *len = total;
    return 0;
}

int trn_step_table_decode(trn_step_table *out, const uint8_t *buf, size_t len)
{
    memset(out, 0, sizeof *out);
    if (len < STEPS_HEADER)
        return ovt_fail(OVT_EFORMAT, "step table is truncated inside its %d-byte header", STEPS_HEADER);
    if (memcmp(buf, steps_magic, 8) != 0)
        return ovt_fail(OVT_EFORMAT, "not an ovt step table (wrong magic)");
    if (ovt_get_le32(buf + 8) != STEPS_VERSION || ovt_get_le32(buf + 12) != 0)
        return ovt_fail(OVT_EFORMAT, "step table version %u is not supported", ovt_get_le32(buf + 8));
    uint64_t count = ovt_get_le64(buf + 48);
    if (count == 0 || count > (len - STEPS_HEADER) / STEP_BYTES || STEPS_HEADER + STEP_BYTES * count != len)
        return ovt_fail(OVT_EFORMAT, "step table states %llu steps but is %zu bytes", (unsigned long long)count,
                        len);
    out->steps = malloc(count * sizeof *out->steps);
    if (!out->steps)
        return ovt_fail(OVT_ENOMEM, "out of memory for a step table");
    memcpy(out->config_hash.b, buf + 16, 32);
    out->count = count;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *e = buf + STEPS_HEADER + STEP_BYTES * i;
        memcpy(out->steps[i].state_hash.b, e, 32);
        memcpy(out->steps[i].batch_hash.b, e + 32, 32);
        memcpy(out->steps[i].log_hash.b, e + 64, 32);
    }
    return 0;
}

int trn_step_table_write(const trn_step_table *t, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = trn_step_table_encode(t, &buf, &len);
    if (rv)
        return rv;
    rv = ovt_write_atomic(path, buf, len, 0644);
    free(buf);
    return rv;
}

int trn_step_table_read(trn_step_table *out, const char *path)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, (size_t)1 << 34);
    if (rv)
        return rv;
    rv = trn_step_table_decode(out, buf, len);
    free(buf);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}

int trn_step_table_root(ovt_hash *root, const trn_step_table *t, const ovt_hash *run_id)
{
    memset(root, 0, sizeof *root);
    if (t->count < 2)
        return ovt_fail(OVT_EINVAL, "a root needs at least one step (two leaves)");
    ovt_hash *leaves = malloc(t->count * sizeof *leaves);
    if (!leaves)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu leaves", t->count);
    for (size_t i = 0; i < t->count; i++)
        chain_merkle_leaf_hash(&leaves[i], run_id, i, &t->steps[i]);
    chain_merkle *tree;
    int rv = chain_merkle_build(&tree, leaves, t->count);
    free(leaves);
    if (rv)
        return rv;
    *root = *chain_merkle_root(tree);
    chain_merkle_free(tree);
    return 0;
}
