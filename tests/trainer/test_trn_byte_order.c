/* The formats' little-endian words, checked against bytes computed here
 * without the code under test: a checkpoint (encoded, written and read
 * back), the paramsHash, a samples file and a sample batch's hash. Each
 * expected byte comes from a value's bits by shifts, or is written out by
 * hand, so a conversion missing on a big-endian host, or one made twice on
 * a little-endian one, shows as a mismatch on either (docs/formats.md). */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "common/bytes.h"
#include "common/fileio.h"
#include "data/dataset.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "trainer/state.h"

/* v's little-endian encoding, from its bits by shifts. */
static void le_bytes(uint8_t out[4], float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(u >> (8 * i));
}

static void test_checkpoint_words(const char *dir)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 1, .width = 2, .in_dim = 3, .n_class = 2};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    trn_state *st;
    CHECK(trn_state_new(&st, &rc) == 0);
    size_t n = 3 * st->layout.nparams;
    for (size_t i = 0; i < n; i++)
        st->mem[i] = (float)((double)i - 7.0) * 0.25f; /* exact grid values */
    st->mem[0] = 1.0f; /* 00 00 80 3f */
    st->mem[1] = -2.0f; /* 00 00 00 c0 */
    uint8_t *buf;
    size_t len;
    CHECK(trn_checkpoint_encode(st, &buf, &len) == 0);
    size_t body = len - 32 - 4 * n;
    static const uint8_t first[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    CHECK_MEM(buf + body, first, 8);
    uint8_t *want = malloc(4 * n);
    for (size_t i = 0; i < n; i++)
        le_bytes(want + 4 * i, st->mem[i]);
    CHECK_MEM(buf + body, want, 4 * n);

    /* the paramsHash is the SHA-256 of the params' encoding */
    ovt_hash ph, wh;
    trn_params_hash(&ph, st);
    ovt_sha256(&wh, want, 4 * st->layout.nparams);
    CHECK_MEM(ph.b, wh.b, 32);

    /* written and read back: the same bytes, the same values */
    char path[512];
    snprintf(path, sizeof path, "%s/s.ckpt", dir);
    CHECK(trn_checkpoint_write(st, path) == 0);
    uint8_t *file;
    size_t flen;
    CHECK(ovt_read_file(path, &file, &flen, 1 << 20) == 0);
    CHECK(flen == len);
    CHECK_MEM(file, buf, len);
    trn_state *back;
    CHECK(trn_checkpoint_read(&back, path) == 0);
    CHECK_MEM(back->mem, st->mem, 4 * n);
    trn_state_free(back);
    CHECK(trn_checkpoint_decode(&back, buf, len) == 0);
    CHECK_MEM(back->mem, st->mem, 4 * n);
    trn_state_free(back);
    free(file);
    free(want);
    free(buf);
    trn_state_free(st);
}

static void test_samples_words(void)
{
    float x[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    uint32_t y[2] = {1, 0x0302};
    data_samples s = {.count = 2, .dim = 2, .n_class = 0x10000, .x = x, .y = y};
    uint8_t *buf;
    size_t len;
    CHECK(data_samples_encode(&s, &buf, &len) == 0);
    CHECK(len == 24 + 16 + 8);
    CHECK_MEM(buf, "OVTSMPL1\x01\x00\x00\x00", 12); /* magic, version 1 */
    /* count, dim, n_class at 12, 16, 20; the features; the labels */
    static const uint8_t tail[] = {0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                                   0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x3f,
                                   0x00, 0x00, 0x40, 0x40, 0x01, 0x00, 0x00, 0x00, 0x02, 0x03, 0x00, 0x00};
    CHECK_MEM(buf + 12, tail, sizeof tail);
    data_samples back;
    CHECK(data_samples_parse(&back, buf, len, 24) == 0);
    CHECK_MEM(back.x, x, sizeof x);
    CHECK(back.y[1] == 0x0302);
    data_samples_free(&back);

    /* a batch's hash: u32le(B) || u32le(dim) || x as f32le || y as u32le */
    data_sample_batch b = {.B = 2, .dim = 2, .x = x, .y = (int32_t[]){1, 0x0302}};
    ovt_hash got, expect;
    data_sample_batch_hash(&got, &b);
    uint8_t pre[8 + 24];
    memcpy(pre, (const uint8_t[]){2, 0, 0, 0, 2, 0, 0, 0}, 8);
    memcpy(pre + 8, tail + 12, 24);
    ovt_sha256(&expect, pre, sizeof pre);
    CHECK_MEM(got.b, expect.b, 32);
    free(buf);
}

int main(void)
{
    char dir[] = "/tmp/ovt-byte-order-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK_RUN(test_checkpoint_words(dir));
    CHECK_RUN(test_samples_words());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
