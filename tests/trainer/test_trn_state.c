/* Tests of the trainer's foundations: run config encoding and configHash,
 * parameter layouts, stateHash, checkpoints (round trip, every flipped bit
 * and every truncation rejected), token and sample data, the batch schedule,
 * and the hashes cross-checked against an independent Python implementation
 * (tests/trainer/ref_hashes.py). */
#include <math.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "kernels/grid.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "data/dataset.h"
#include "kernels/site.h"
#include "trainer/layout.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"
#include "trainer/state_proof.h"

static trn_run_config tiny_mlp_config(void)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 1, .width = 2, .in_dim = 3, .n_class = 2};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.lr = 0.01;
    rc.lr_min = 0.001;
    rc.weight_decay = 0.1;
    rc.warmup_steps = 3;
    rc.decay_steps = 17;
    rc.batch_size = 4;
    rc.seed = 0x0123456789abcdefull;
    rc.head_shift = 5;
    rc.state_hash = TRN_STATE_HASH_V1; /* the encodings as every run before the tree had them */
    for (int i = 0; i < 32; i++)
        rc.dataset_hash.b[i] = (uint8_t)(0xa0 + i);
    return rc;
}

/* The tree stateHash: a trailing u32 (3) after whichever version the rest
 * of the config needs, none for v1; a new run's default; decoded back; no
 * second encoding of a config (a trailing 1, 0 or 2 is refused). */
static void test_config_tree(void)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 1, .width = 2, .in_dim = 3, .n_class = 2};
    trn_run_config rc, back;
    trn_config_default(&rc, &m);
    CHECK_EQ_U64(rc.state_hash, TRN_STATE_HASH_TREE);
    uint8_t enc[TRN_CONFIG_ENC_MAX], old[TRN_CONFIG_ENC_MAX];
    size_t len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, TRN_CONFIG_ENC_V1_LEN + 4);
    CHECK_EQ_U64(ovt_get_le32(enc + 8), 1);
    CHECK_EQ_U64(ovt_get_le32(enc + TRN_CONFIG_ENC_V1_LEN), 3);
    CHECK(trn_config_decode(&back, enc, len) == 0 && trn_config_state_hash(&back) == TRN_STATE_HASH_TREE);
    rc.state_hash = TRN_STATE_HASH_V1;
    CHECK_EQ_U64(trn_config_encode(old, &rc), TRN_CONFIG_ENC_V1_LEN);
    CHECK_MEM(old, enc, TRN_CONFIG_ENC_V1_LEN); /* the rest is the same bytes */
    CHECK(trn_config_decode(&back, old, TRN_CONFIG_ENC_V1_LEN) == 0 && trn_config_state_hash(&back) == 1);
    rc.state_hash = 0; /* 0 reads as v1, the same bytes */
    CHECK_EQ_U64(trn_config_encode(old, &rc), TRN_CONFIG_ENC_V1_LEN);
    ovt_hash h1, h3;
    trn_config_hash(&h1, &rc);
    rc.state_hash = TRN_STATE_HASH_TREE;
    trn_config_hash(&h3, &rc);
    CHECK(memcmp(h1.b, h3.b, 32) != 0);
    for (uint32_t bad = 0; bad < 3; bad++) {
        ovt_put_le32(enc + TRN_CONFIG_ENC_V1_LEN, bad);
        CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
        CHECK(strstr(ovt_errmsg(), "stateHash version") != NULL);
    }
    ovt_put_le32(enc + TRN_CONFIG_ENC_V1_LEN, 3);
    CHECK(trn_config_decode(&back, enc, len + 1) == OVT_EFORMAT);
    CHECK(trn_config_decode(&back, enc, len - 1) == OVT_EFORMAT);
    /* on top of version 2 (a cosine schedule) */
    rc.schedule = TRN_SCHEDULE_COSINE;
    len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, TRN_CONFIG_ENC_V2_LEN + 4);
    CHECK(trn_config_decode(&back, enc, len) == 0 && back.schedule == TRN_SCHEDULE_COSINE &&
          trn_config_state_hash(&back) == TRN_STATE_HASH_TREE);
    rc.state_hash = 2;
    CHECK(trn_config_check(&rc) == OVT_EINVAL);
}

/* The tiny config with what only version 2 holds: a cosine schedule and a
 * starting point (init_hash). */
static trn_run_config tiny_v2_config(void)
{
    trn_run_config rc = tiny_mlp_config();
    rc.schedule = TRN_SCHEDULE_COSINE;
    for (int i = 0; i < 32; i++)
        rc.init_hash.b[i] = (uint8_t)(0x31 * i + 7);
    return rc;
}

/* Version 2: round trip, every new field read back and checked, the
 * canonical rule (version 1 when it can hold the config). */
static void test_config_v2(void)
{
    trn_run_config rc = tiny_v2_config(), back;
    uint8_t enc[TRN_CONFIG_ENC_MAX], enc2[TRN_CONFIG_ENC_MAX];
    size_t len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, 204);
    CHECK_EQ_U64(ovt_get_le32(enc + 8), 2);
    CHECK_EQ_U64(ovt_get_le32(enc + 168), 1); /* cosine */
    CHECK_MEM(enc + 172, rc.init_hash.b, 32);
    CHECK(trn_config_decode(&back, enc, len) == 0);
    CHECK(back.schedule == TRN_SCHEDULE_COSINE && trn_config_has_init(&back));
    CHECK_MEM(back.init_hash.b, rc.init_hash.b, 32);
    CHECK(back.seed == rc.seed && back.head_shift == 5 && back.decay_steps == 17);
    CHECK_EQ_U64(trn_config_encode(enc2, &back), len);
    CHECK_MEM(enc, enc2, len);
    /* Each new field alone needs version 2 and changes the hash. */
    trn_run_config only = tiny_mlp_config();
    ovt_hash h0, h1, h2;
    trn_config_hash(&h0, &only);
    only.schedule = TRN_SCHEDULE_COSINE;
    CHECK_EQ_U64(trn_config_encode(enc2, &only), 204);
    trn_config_hash(&h1, &only);
    only.schedule = TRN_SCHEDULE_LINEAR;
    only.init_hash.b[31] = 1;
    CHECK_EQ_U64(trn_config_encode(enc2, &only), 204);
    CHECK(trn_config_decode(&back, enc2, 204) == 0 && back.schedule == TRN_SCHEDULE_LINEAR && back.init_hash.b[31] == 1);
    trn_config_hash(&h2, &only);
    CHECK(memcmp(h0.b, h1.b, 32) != 0 && memcmp(h0.b, h2.b, 32) != 0 && memcmp(h1.b, h2.b, 32) != 0);
    /* The decoder checks the new fields: an unknown schedule kind, a length
     * that is not version 2's, a version 2 encoding of a version 1 config. */
    ovt_put_le32(enc + 168, 2);
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "schedule") != NULL);
    ovt_put_le32(enc + 168, 1);
    CHECK(trn_config_decode(&back, enc, len - 1) == OVT_EFORMAT);
    CHECK(trn_config_decode(&back, enc, TRN_CONFIG_ENC_V1_LEN) == OVT_EFORMAT);
    ovt_put_le32(enc + 168, 0);
    memset(enc + 172, 0, 32);
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "canonical") != NULL);
    /* Version 1 still decodes, as a linear schedule from the seed, and a
     * 204-byte buffer with version 1 in it does not. */
    rc = tiny_mlp_config();
    CHECK_EQ_U64(trn_config_encode(enc, &rc), 168);
    CHECK(trn_config_decode(&back, enc, 168) == 0);
    CHECK(back.schedule == TRN_SCHEDULE_LINEAR && !trn_config_has_init(&back));
    CHECK(trn_config_decode(&back, enc, 204) == OVT_EFORMAT);
}

/* Version 3 (S > 1 shards): the shard count after version 2's fields, the
 * canonical rule both ways (S = 1 never encodes as version 3, whatever the
 * schedule), and S must divide the batch. */
static void test_config_v3(void)
{
    trn_run_config rc = tiny_mlp_config(), back;
    uint8_t enc[TRN_CONFIG_ENC_MAX], one[TRN_CONFIG_ENC_MAX];
    size_t one_len = trn_config_encode(one, &rc);
    CHECK_EQ_U64(one_len, 168);
    rc.shards = 1; /* 1 and 0 are the same config, byte for byte */
    CHECK_EQ_U64(trn_config_encode(enc, &rc), 168);
    CHECK_MEM(enc, one, 168);
    rc.batch_size = 8;
    rc.shards = 4;
    size_t len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(len, 208);
    CHECK_EQ_U64(ovt_get_le32(enc + 8), 3);
    CHECK_EQ_U64(ovt_get_le32(enc + 168), 0); /* linear: version 2's fields are there, zero */
    CHECK_EQ_U64(ovt_get_le32(enc + 204), 4);
    CHECK(trn_config_decode(&back, enc, len) == 0 && back.shards == 4 && back.batch_size == 8);
    ovt_hash h4, h2;
    trn_config_hash(&h4, &rc);
    rc.shards = 2;
    trn_config_hash(&h2, &rc);
    CHECK(memcmp(h4.b, h2.b, 32) != 0);
    /* not canonical: version 3 with one shard; a wrong length; version 1 or 2
     * decoded from a 208-byte buffer */
    ovt_put_le32(enc + 204, 1);
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "canonical") != NULL);
    ovt_put_le32(enc + 204, 4);
    CHECK(trn_config_decode(&back, enc, len - 1) == OVT_EFORMAT);
    CHECK(trn_config_decode(&back, one, 208) == OVT_EFORMAT);
    /* a count that does not divide the batch, or above the limit */
    ovt_put_le32(enc + 204, 3);
    CHECK(trn_config_decode(&back, enc, len) == OVT_EFORMAT);
    rc.shards = 3;
    CHECK(trn_config_check(&rc) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "divide the batch size") != NULL);
    rc.batch_size = 2048;
    rc.shards = 2048;
    CHECK(trn_config_check(&rc) == OVT_EINVAL);
    /* the decoder reads one shard from versions 1 and 2 */
    CHECK(trn_config_decode(&back, one, one_len) == 0 && trn_config_shards(&back) == 1);
}

static void test_config(void)
{
    trn_run_config rc = tiny_mlp_config();
    CHECK(trn_config_check(&rc) == 0);
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    const size_t enc_len = TRN_CONFIG_ENC_V1_LEN;
    CHECK_EQ_U64(trn_config_encode(enc, &rc), enc_len);
    trn_run_config back;
    CHECK(trn_config_decode(&back, enc, enc_len) == 0);
    uint8_t enc2[TRN_CONFIG_ENC_MAX];
    trn_config_encode(enc2, &back);
    CHECK_MEM(enc, enc2, enc_len);
    CHECK(back.seed == rc.seed && back.lr == rc.lr && back.model.in_dim == 3);

    /* Every field matters to the hash. */
    ovt_hash h1, h2;
    trn_config_hash(&h1, &rc);
    rc.grid_bits = 31;
    trn_config_hash(&h2, &rc);
    CHECK(memcmp(h1.b, h2.b, 32) != 0);
    rc.grid_bits = 32;

    CHECK(trn_config_decode(&back, enc, enc_len - 1) == OVT_EFORMAT);
    enc[0] ^= 1;
    CHECK(trn_config_decode(&back, enc, enc_len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "magic") != NULL);
    enc[0] ^= 1;
    enc[8] = 9; /* version */
    CHECK(trn_config_decode(&back, enc, enc_len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "version") != NULL);
    enc[8] = 1;
    enc[124] = 23; /* b = 23 is outside 24..32 */
    CHECK(trn_config_decode(&back, enc, enc_len) == OVT_EFORMAT);

    trn_run_config bad = tiny_mlp_config();
    bad.beta2 = 1.0;
    CHECK(trn_config_check(&bad) == OVT_EINVAL);
    bad = tiny_mlp_config();
    bad.lr = NAN;
    CHECK(trn_config_check(&bad) == OVT_EINVAL);

    trn_model_config m;
    CHECK(trn_model_preset(&m, "gpt2-5t") == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "gpt2-small") != NULL);
    CHECK(trn_model_preset(&m, "gpt2-small") == 0);
    m.n_head = 7; /* 768 is not a multiple of 7 */
    CHECK(trn_model_check(&m) == OVT_EINVAL);
}

static void test_layout(void)
{
    trn_model_config m;
    trn_layout l;
    CHECK(trn_model_preset(&m, "gpt2-small") == 0);
    CHECK(trn_layout_build(&l, &m) == 0);
    /* GPT-2 124M with the unpadded vocabulary: the figure Hugging Face's
     * GPT2LMHeadModel reports (tied head counted once). */
    CHECK_EQ_U64(l.nparams, 124439808);
    CHECK_EQ_U64(l.count, 16);
    CHECK(strcmp(l.t[4].name, "qkvw") == 0 && l.t[4].shape[1] == 2304 && l.t[4].shape[2] == 768);
    size_t sum = 0;
    for (size_t k = 0; k < l.count; k++) {
        CHECK(l.t[k].offset == sum);
        sum += l.t[k].size;
    }
    CHECK(sum == l.nparams);

    CHECK(trn_model_preset(&m, "mlp-demo") == 0);
    CHECK(trn_layout_build(&l, &m) == 0);
    CHECK_EQ_U64(l.nparams, 128 * 128 + 128 + 128 * 128 + 128 + 32 * 128 + 32);
    float *base = calloc(l.nparams, sizeof(float));
    trn_mlp_tensors t;
    trn_mlp_slice(&t, &l, base);
    CHECK(t.n_linear == 3 && t.w[0] == base && t.b[2] == base + l.nparams - 32);
    free(base);
}

static void fill_tiny_state(trn_state *st)
{
    size_t n = st->layout.nparams;
    for (size_t i = 0; i < n; i++) {
        st->params[i] = (float)((double)i - 7.0) * 0.125f;
        st->m[i] = (float)i * 0x1p-10f;
        st->v[i] = (float)(i * i) * 0x1p-20f;
    }
    st->step = 5;
}

static void write_floats(FILE *f, const char *name, const float *v, size_t n)
{
    fprintf(f, "\"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%.9e", i ? ", " : "", (double)v[i]); /* %e keeps -0 a float in JSON */
    fprintf(f, "]");
}

static void write_i32s(FILE *f, const char *name, const int32_t *v, size_t n)
{
    fprintf(f, "\"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? ", " : "", v[i]);
    fprintf(f, "]");
}

/* Runs ref_hashes.py with args and returns the hex value of `name`. */
static int python_value(const char *json_path, const char *name, char *out, size_t cap)
{
    const char *src = getenv("OVT_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s/tests/trainer/ref_hashes.py %s", src ? src : ".", json_path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[4096];
    int found = -1;
    while (fgets(line, sizeof line, p)) {
        char key[64], val[2048];
        if (sscanf(line, "%63s %2047s", key, val) == 2 && strcmp(key, name) == 0 && strlen(val) < cap) {
            strcpy(out, val);
            found = 0;
        }
    }
    if (pclose(p) != 0)
        return -1;
    return found;
}

/* v2: the version 2 config; 2: version 1 with the tree stateHash. */
static void test_hashes_against_python(const char *dir, int v2)
{
    trn_run_config rc = v2 == 1 ? tiny_v2_config() : tiny_mlp_config();
    if (v2 == 2)
        rc.state_hash = TRN_STATE_HASH_TREE;
    trn_state *st;
    CHECK(trn_state_new(&st, &rc) == 0);
    if (!st)
        return;
    CHECK_EQ_U64(st->layout.nparams, 14);
    fill_tiny_state(st);

    data_tokens data = {0};
    uint32_t toks[40];
    for (int i = 0; i < 40; i++)
        toks[i] = (uint32_t)(i * 7 % 256);
    uint8_t *tbuf;
    size_t tlen;
    CHECK(data_tokens_encode(toks, 40, 256, &tbuf, &tlen) == 0);
    CHECK(data_tokens_parse(&data, tbuf, tlen) == 0);
    free(tbuf);
    data_token_batch tb;
    CHECK(data_token_batch_get(&tb, &data, 42, 3, 2, 5) == 0);
    data_samples smp = {.count = 3, .dim = 2, .n_class = 2};
    float sx[6] = {0.5f, -1.25f, 3.0f, 0.1f, -0.0f, 1e-3f};
    uint32_t sy[3] = {1, 0, 1};
    smp.x = sx;
    smp.y = sy;
    data_sample_batch sb;
    CHECK(data_sample_batch_get(&sb, &smp, 9, 1, 4) == 0);

    char json[512];
    snprintf(json, sizeof json, "%s/state.json", dir);
    FILE *f = fopen(json, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    char dh[65], ih[65];
    ovt_hex_encode(dh, rc.dataset_hash.b, 32);
    ovt_hex_encode(ih, rc.init_hash.b, 32);
    const trn_model_config *m = &rc.model;
    fprintf(f,
            "{\"config\": {\"kind\": %d, \"n_layer\": %u, \"width\": %u, \"n_head\": %u, \"vocab\": %u, "
            "\"max_seq\": %u, \"in_dim\": %u, \"n_class\": %u, \"lr\": %.17g, \"lr_min\": %.17g, "
            "\"beta1\": %.17g, \"beta2\": %.17g, \"eps\": %.17g, \"weight_decay\": %.17g, "
            "\"grad_clip\": %.17g, \"warmup_steps\": %u, \"decay_steps\": %u, \"batch_size\": %u, "
            "\"seq_len\": %u, \"seed\": %llu, \"grid_bits\": %u, \"band_rules\": %u, \"head_shift\": %u, \"dataset_hash\": \"%s\", "
            "\"schedule\": %d, \"init_hash\": \"%s\", \"state_hash\": %u},\n",
            (int)m->kind, m->n_layer, m->width, m->n_head, m->vocab, m->max_seq, m->in_dim, m->n_class, rc.lr,
            rc.lr_min, rc.beta1, rc.beta2, rc.eps, rc.weight_decay, rc.grad_clip, rc.warmup_steps,
            rc.decay_steps, rc.batch_size, rc.seq_len, (unsigned long long)rc.seed, rc.grid_bits, rc.band_rules,
            rc.head_shift, dh, (int)rc.schedule, ih, trn_config_state_hash(&rc));
    fprintf(f, "\"state\": {\"step\": %llu, \"sizes\": [", (unsigned long long)st->step);
    for (size_t k = 0; k < st->layout.count; k++)
        fprintf(f, "%s%zu", k ? ", " : "", st->layout.t[k].size);
    fprintf(f, "], ");
    write_floats(f, "params", st->params, 14);
    fprintf(f, ", ");
    write_floats(f, "m", st->m, 14);
    fprintf(f, ", ");
    write_floats(f, "v", st->v, 14);
    fprintf(f, "},\n\"token_batches\": [{\"B\": %u, \"T\": %u, ", tb.B, tb.T);
    write_i32s(f, "inputs", tb.inputs, 10);
    fprintf(f, ", ");
    write_i32s(f, "targets", tb.targets, 10);
    fprintf(f, "}],\n\"sample_batches\": [{\"B\": %u, \"dim\": %u, ", sb.B, sb.dim);
    write_floats(f, "x", sb.x, 8);
    fprintf(f, ", ");
    write_i32s(f, "y", sb.y, 4);
    fprintf(f, "}]}\n");
    fclose(f);

    char hex[600];
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t enc_len = trn_config_encode(enc, &rc);
    CHECK_EQ_U64(enc_len, v2 == 1 ? 204 : v2 == 2 ? 172 : 168);
    char enc_hex[2 * TRN_CONFIG_ENC_MAX + 1];
    ovt_hex_encode(enc_hex, enc, enc_len);
    CHECK(python_value(json, "config_encoding", hex, sizeof hex) == 0);
    CHECK_MSG(strcmp(hex, enc_hex) == 0, "config encoding\n C:  %s\n py: %s", enc_hex, hex);

    ovt_hash h;
    char hh[65];
    trn_config_hash(&h, &rc);
    ovt_hex_encode(hh, h.b, 32);
    CHECK(python_value(json, "config_hash", hex, sizeof hex) == 0);
    CHECK_MSG(strcmp(hex, hh) == 0, "configHash C %s py %s", hh, hex);

    trn_state_hash(&h, st);
    ovt_hex_encode(hh, h.b, 32);
    CHECK(python_value(json, "state_hash", hex, sizeof hex) == 0);
    CHECK_MSG(strcmp(hex, hh) == 0, "stateHash C %s py %s", hh, hex);

    data_token_batch_hash(&h, &tb);
    ovt_hex_encode(hh, h.b, 32);
    CHECK(python_value(json, "token_batch_0", hex, sizeof hex) == 0);
    CHECK_MSG(strcmp(hex, hh) == 0, "token batchHash C %s py %s", hh, hex);

    data_sample_batch_hash(&h, &sb);
    ovt_hex_encode(hh, h.b, 32);
    CHECK(python_value(json, "sample_batch_0", hex, sizeof hex) == 0);
    CHECK_MSG(strcmp(hex, hh) == 0, "sample batchHash C %s py %s", hh, hex);

    /* Any change of state changes the hash: one bit of one moment. */
    ovt_hash before, after;
    trn_state_hash(&before, st);
    uint32_t bits;
    memcpy(&bits, &st->v[13], 4);
    bits ^= 1u << 8;
    memcpy(&st->v[13], &bits, 4);
    trn_state_hash(&after, st);
    CHECK(memcmp(before.b, after.b, 32) != 0);

    data_token_batch_free(&tb);
    data_sample_batch_free(&sb);
    data_tokens_free(&data);
    trn_state_free(st);
}

/* A GPT-2 whose tensors span several leaves (wte 1300 x 64: six, the last
 * short; the odd node of a level moves up), its parameters drawn from the
 * seed, m and v filled, checkpointed: the Python reference rebuilds the
 * tree stateHash from the file with hashlib alone. One bit changed in any
 * leaf of wte changes its root; a proof of a leaf range checks, and fails
 * with the changed leaf's hash. */
static void test_tree_checkpoint(const char *dir)
{
    trn_model_config m;
    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    m.vocab = 1300;
    trn_run_config rc;
    trn_config_default(&rc, &m);
    trn_state *st;
    CHECK(trn_state_new(&st, &rc) == 0);
    if (!st)
        return;
    trn_state_init(st);
    for (size_t i = 0; i < st->layout.nparams; i++) {
        st->m[i] = (float)(i % 977) * 0x1p-12f;
        st->v[i] = (float)(i % 61) * 0x1p-20f;
    }
    st->step = 11;
    char path[512], arg[600], hex[80], mine[65];
    snprintf(path, sizeof path, "%s/tree.ckpt", dir);
    CHECK(trn_checkpoint_write(st, path) == 0);
    ovt_hash h, h_back;
    trn_state_hash(&h, st);
    trn_state *back = NULL;
    CHECK(trn_checkpoint_read(&back, path) == 0);
    if (back) {
        CHECK(trn_config_state_hash(&back->config) == TRN_STATE_HASH_TREE);
        trn_state_hash(&h_back, back);
        CHECK_MEM(h.b, h_back.b, 32);
        trn_state_free(back);
    }
    snprintf(arg, sizeof arg, "--checkpoint %s", path);
    CHECK(python_value(arg, "checkpoint_state_hash", hex, sizeof hex) == 0);
    ovt_hex_encode(mine, h.b, 32);
    CHECK_MSG(strcmp(hex, mine) == 0, "tree checkpoint stateHash C %s py %s", mine, hex);

    /* the same state under v1 is another hash (another config and domain) */
    trn_state *v1;
    trn_run_config rc1 = rc;
    rc1.state_hash = TRN_STATE_HASH_V1;
    CHECK(trn_state_new(&v1, &rc1) == 0);
    if (v1) {
        trn_state_copy(v1, st);
        ovt_hash hv1;
        trn_state_hash(&hv1, v1);
        CHECK(memcmp(hv1.b, h.b, 32) != 0);
        trn_state_free(v1);
    }

    const trn_tensor_info *wte = trn_layout_find(&st->layout, "wte");
    CHECK(wte != NULL && ovt_tree_leaves(wte->size * 4) == 6);
    ovt_hash roots[3 * TRN_MAX_TENSORS], root;
    trn_state_digests(roots, st);
    size_t d = (size_t)(wte - st->layout.t); /* params of wte */
    int changed = 0;
    for (size_t leaf = 0; leaf < 6; leaf++) {
        size_t word = (leaf * 16384 + leaf * 997) % wte->size;
        uint32_t bits;
        memcpy(&bits, &st->params[wte->offset + word], 4);
        bits ^= 1u << (leaf * 5 % 32);
        memcpy(&st->params[wte->offset + word], &bits, 4);
        CHECK(trn_state_tensor_digest(&root, TRN_STATE_HASH_TREE, st->params + wte->offset, wte->size) == 0);
        changed += memcmp(root.b, roots[d].b, 32) != 0;
        bits ^= 1u << (leaf * 5 % 32);
        memcpy(&st->params[wte->offset + word], &bits, 4);
    }
    CHECK_EQ_U64(changed, 6);

    trn_state_proof p, q;
    CHECK(trn_state_proof_make(&p, st, d, 3, 2) == 0);
    CHECK(p.proof_len > 0 && p.leaves_total == 6);
    CHECK_MEM(p.state_hash.b, h.b, 32);
    CHECK_MEM(p.roots[d].b, roots[d].b, 32);
    CHECK(trn_state_proof_check(&p) == 0);
    st->params[wte->offset + 4 * 16384 + 1] += 1.0f; /* leaf 4, inside the range */
    CHECK(trn_state_proof_make(&q, st, d, 3, 2) == 0);
    CHECK(memcmp(q.leaves[1].b, p.leaves[1].b, 32) != 0 && memcmp(q.roots[d].b, p.roots[d].b, 32) != 0);
    CHECK(trn_state_proof_check(&q) == 0); /* a proof of the new state */
    p.leaves[1] = q.leaves[1];            /* the changed leaf against the old root */
    CHECK(trn_state_proof_check(&p) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "climb") != NULL);
    q.roots[d + 1].b[0] ^= 1; /* another tensor's root: not the stated stateHash */
    CHECK(trn_state_proof_check(&q) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "combine") != NULL);
    trn_state_proof_free(&q);
    trn_state_proof_free(&p);
    CHECK(trn_state_proof_make(&p, st, d, 5, 2) == OVT_EINVAL); /* past the last leaf */
    CHECK(trn_state_proof_make(&p, st, 3 * st->layout.count, 0, 1) == OVT_EINVAL);
    trn_state_free(st);
}

static void test_checkpoint(const char *dir, int v2)
{
    trn_run_config rc = v2 ? tiny_v2_config() : tiny_mlp_config();
    rc.grid_bits = 24;
    trn_state *st;
    CHECK(trn_state_new(&st, &rc) == 0);
    if (!st)
        return;
    fill_tiny_state(st);
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.ckpt", dir);
    CHECK(trn_checkpoint_write(st, path) == 0);
    trn_state *back = NULL;
    CHECK(trn_checkpoint_read(&back, path) == 0);
    ovt_hash h1, h2;
    trn_state_hash(&h1, st);
    if (back) {
        trn_state_hash(&h2, back);
        CHECK_MEM(h1.b, h2.b, 32);
        CHECK(back->step == 5);
        trn_state_free(back);
    }

    /* The documented layout, read by the Python reference: same stateHash. */
    char arg[600], hex[80], mine[65];
    snprintf(arg, sizeof arg, "--checkpoint %s", path);
    CHECK(python_value(arg, "checkpoint_state_hash", hex, sizeof hex) == 0);
    ovt_hex_encode(mine, h1.b, 32);
    CHECK_MSG(strcmp(hex, mine) == 0, "checkpoint stateHash C %s py %s", mine, hex);

    uint8_t *buf;
    size_t len;
    CHECK(trn_checkpoint_encode(st, &buf, &len) == 0);
    /* Every single flipped bit is rejected (one bit per byte, cycling the
     * bit position), and so is every truncation. */
    int flips_rejected = 0, cuts_rejected = 0;
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= (uint8_t)(1u << (i % 8));
        back = NULL;
        if (trn_checkpoint_decode(&back, buf, len) == OVT_EFORMAT && back == NULL)
            flips_rejected++;
        trn_state_free(back);
        buf[i] ^= (uint8_t)(1u << (i % 8));
    }
    CHECK_EQ_U64(flips_rejected, len);
    for (size_t cut = 0; cut < len; cut++) {
        back = NULL;
        if (trn_checkpoint_decode(&back, buf, cut) == OVT_EFORMAT && back == NULL)
            cuts_rejected++;
        trn_state_free(back);
    }
    CHECK_EQ_U64(cuts_rejected, len);
    CHECK(trn_checkpoint_decode(&back, buf, len - 100) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "truncated") != NULL);

    /* A value off the b = 24 grid, with the checksum made consistent, is
     * still rejected: the checksum is not the only line of defence. */
    size_t first_value = len - 32 - 3 * 14 * 4;
    float off_grid = 1.0f + 0x1p-23f; /* needs 24 mantissa bits, b = 24 keeps 16 */
    memcpy(buf + first_value, &off_grid, 4);
    ovt_sha256((ovt_hash *)(buf + len - 32), buf, len - 32);
    CHECK(trn_checkpoint_decode(&back, buf, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "grid value") != NULL);
    free(buf);

    /* A missing file and garbage are clear errors, not crashes. */
    snprintf(path, sizeof path, "%s/nope.ckpt", dir);
    CHECK(trn_checkpoint_read(&back, path) == OVT_ENOTFOUND);
    CHECK(trn_checkpoint_decode(&back, (const uint8_t *)"OVTCKPT", 7) == OVT_EFORMAT);
    trn_state_free(st);
}

static void test_init(void)
{
    trn_model_config m;
    CHECK(trn_model_preset(&m, "mlp-demo") == 0);
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.grid_bits = 26;
    trn_state *a, *b;
    CHECK(trn_state_new(&a, &rc) == 0 && trn_state_new(&b, &rc) == 0);
    if (!a || !b)
        return;
    trn_state_init(a);
    trn_state_init(b);
    CHECK_MEM(a->mem, b->mem, 3 * a->layout.nparams * sizeof(float));
    trn_mlp_tensors t;
    trn_mlp_slice(&t, &a->layout, a->params);
    /* w0 is (128, 128) drawn N(0, 1/128): check its moments loosely. */
    double sum = 0, sq = 0;
    size_t n = 128 * 128, off_grid = 0;
    for (size_t i = 0; i < n; i++) {
        sum += t.w[0][i];
        sq += (double)t.w[0][i] * t.w[0][i];
    }
    for (size_t i = 0; i < a->layout.nparams; i++)
        off_grid += !krn_grid_contains(a->params[i], 26);
    CHECK_EQ_U64(off_grid, 0);
    double mean = sum / n, var = sq / n - mean * mean;
    CHECK_MSG(fabs(mean) < 0.003, "mean %g", mean);
    CHECK_MSG(fabs(var * 128 - 1) < 0.05, "var*128 %g", var * 128);
    CHECK(t.b[0][0] == 0 && t.b[2][31] == 0);
    /* A different seed gives different parameters. */
    rc.seed = 2;
    trn_state *c;
    CHECK(trn_state_new(&c, &rc) == 0);
    trn_state_init(c);
    CHECK(memcmp(a->params, c->params, 64) != 0);
    trn_state_free(a);
    trn_state_free(b);
    trn_state_free(c);

    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    trn_config_default(&rc, &m);
    CHECK(trn_state_new(&a, &rc) == 0);
    trn_state_init(a);
    trn_gpt2_tensors g;
    trn_gpt2_slice(&g, &a->layout, a->params);
    CHECK(g.ln1w[0] == 1.0f && g.lnfw[63] == 1.0f && g.qkvb[5] == 0.0f && g.wte[0] != 0.0f);
    trn_state_free(a);
}

/* trn_state_hash_begin: the hash of the state as it was at begin, whatever
 * happens to the state after trn_state_settle, on a state small enough to
 * hash on the caller alone and on one large enough for a pool (4M
 * parameters and more).
 * Variants: a small and a large state (8.4M parameters, hashed on a pool),
 * each without threads of a ctx, then with a 2-thread ctx lent (the tree's
 * leaves as background jobs of its worker), then that with the v1 hash.
 * Each begin and end hashes the large state's 100 MB: under emulation
 * (OVT_EMULATED, tests/CMakeLists.txt), where that costs tens of times
 * more, the pauses are each taken once instead of three times. */
static void test_hash_background(void)
{
    const char *emulated = getenv("OVT_EMULATED");
    int hurries = emulated && strcmp(emulated, "1") == 0 ? 8 : 24;
    for (int variant = 0; variant < 6; variant++) {
        int big = variant % 2, lend = variant >= 2, v1 = variant >= 4;
        trn_model_config m;
        CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
        if (big) {
            m.width = 512; /* 2 layers of 12 * 512^2 plus 4096 x 512 embeddings: 8.4M parameters */
            m.n_layer = 2;
            m.n_head = 8;
            m.vocab = 4096;
        }
        trn_run_config rc;
        trn_config_default(&rc, &m);
        if (v1)
            rc.state_hash = TRN_STATE_HASH_V1;
        trn_state *st;
        CHECK(trn_state_new(&st, &rc) == 0);
        if (!st)
            return;
        CHECK(!big || st->layout.nparams >= ((size_t)1 << 22));
        trn_state_init(st);
        st->step = 7;
        krn_ctx *ctx = NULL;
        krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32, .threads = 2};
        if (lend) {
            CHECK(krn_ctx_new(&ctx, &kc) == 0);
            trn_state_hash_threads(st, ctx);
        }
        ovt_hash want, got, changed;
        uint64_t at = 0;
        trn_state_hash(&want, st);
        CHECK(!trn_state_hash_end(st, &got, &at)); /* none begun */
        CHECK(trn_state_hash_begin(st) == 0);
        st->step = 8; /* the step counter moves on before the optimizer writes */
        trn_state_settle(st);
        st->params[0] += 1.0f; /* writes after the settle */
        st->v[st->layout.nparams - 1] = 2.0f;
        CHECK(trn_state_hash_end(st, &got, &at));
        CHECK_EQ_U64(at, 7);
        CHECK_MEM(got.b, want.b, 32);
        CHECK(!trn_state_hash_end(st, &got, &at)); /* taken */
        trn_state_hash(&changed, st);
        CHECK(memcmp(changed.b, want.b, 32) != 0);
        /* a second begin replaces the first; freeing a state with a hash
         * running waits for it */
        CHECK(trn_state_hash_begin(st) == 0 && trn_state_hash_begin(st) == 0);
        CHECK(trn_state_hash_end(st, &got, &at) && at == 8);
        CHECK_MEM(got.b, changed.b, 32);
        /* the caller wanting the hash at once, or after the pool's worker
         * got some way into the leaves: the wait runs the rest on every
         * thread */
        for (int k = 0; big && variant < 4 && k < hurries; k++) {
            CHECK(trn_state_hash_begin(st) == 0);
            struct timespec pause = {0, (long)(k % 8) * 2000000}; /* 0 to 14 ms */
            nanosleep(&pause, NULL);
            CHECK(trn_state_hash_end(st, &got, &at) && at == 8);
            CHECK_MEM(got.b, changed.b, 32);
        }
        CHECK(trn_state_hash_begin(st) == 0);
        trn_state_free(st);
        krn_ctx_free(ctx);
    }
}

static void test_data(const char *dir)
{
    data_tokens t;
    /* Raw bytes: one token per byte. */
    CHECK(data_tokens_parse(&t, (const uint8_t *)"hello world", 11) == 0);
    CHECK(t.count == 11 && t.vocab == 256 && t.tokens[4] == 'o');
    ovt_hash h;
    ovt_sha256(&h, "hello world", 11);
    CHECK_MEM(h.b, t.hash.b, 32);

    data_token_batch b1, b2, b3;
    CHECK(data_token_batch_get(&b1, &t, 7, 1, 3, 4) == 0);
    CHECK(data_token_batch_get(&b2, &t, 7, 1, 3, 4) == 0);
    CHECK(data_token_batch_get(&b3, &t, 7, 2, 3, 4) == 0);
    CHECK_MEM(b1.inputs, b2.inputs, 12 * 4);
    for (int j = 0; j < 3; j++) {
        /* Each row is a window of the text and its targets are shifted by one. */
        char row[5] = {0};
        for (int k = 0; k < 4; k++) {
            row[k] = (char)b1.inputs[j * 4 + k];
            if (k < 3)
                CHECK(b1.targets[j * 4 + k] == b1.inputs[j * 4 + k + 1]);
        }
        CHECK(strstr("hello world", row) != NULL);
    }
    ovt_hash h1, h3;
    data_token_batch_hash(&h1, &b1);
    data_token_batch_hash(&h3, &b3);
    CHECK(memcmp(h1.b, h3.b, 32) != 0 || memcmp(b1.inputs, b3.inputs, 48) == 0);
    data_token_batch_free(&b1);
    data_token_batch_free(&b2);
    data_token_batch_free(&b3);
    CHECK(data_token_batch_get(&b1, &t, 7, 1, 3, 11) == OVT_EINVAL);
    data_tokens_free(&t);

    uint32_t toks[5] = {1, 500, 2, 65535, 0};
    uint8_t *buf;
    size_t len;
    CHECK(data_tokens_encode(toks, 5, 65536, &buf, &len) == 0);
    CHECK(data_tokens_parse(&t, buf, len) == 0);
    CHECK(t.count == 5 && t.tokens[3] == 65535 && t.vocab == 65536);
    data_tokens_free(&t);
    for (size_t cut = 8; cut < len; cut++)
        CHECK(data_tokens_parse(&t, buf, cut) == OVT_EFORMAT);
    buf[12] = 100; /* vocab 100: token 500 is out of range */
    buf[13] = 0;
    buf[14] = 0;
    CHECK(data_tokens_parse(&t, buf, len) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "vocab") != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/toks.bin", dir);
    CHECK(ovt_write_atomic(path, buf, len - 1, 0644) == 0);
    CHECK(data_tokens_load(&t, path) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), path) != NULL);
    free(buf);

    /* Samples: round trip, off-grid feature and bad label rejected. */
    float x[4] = {1.0f, 2.0f, 1.0f + 0x1p-23f, 4.0f};
    uint32_t y[2] = {0, 1};
    data_samples s = {.count = 2, .dim = 2, .n_class = 2, .x = x, .y = y}, back;
    CHECK(data_samples_encode(&s, &buf, &len) == 0);
    CHECK(data_samples_parse(&back, buf, len, 32) == 0);
    CHECK(back.x[2] == x[2] && back.y[1] == 1);
    data_samples_free(&back);
    CHECK(data_samples_parse(&back, buf, len, 24) == OVT_EFORMAT);
    buf[len - 4] = 2;
    CHECK(data_samples_parse(&back, buf, len, 32) == OVT_EFORMAT);
    CHECK(data_samples_parse(&back, buf, len - 1, 32) == OVT_EFORMAT);
    free(buf);
}

int main(void)
{
    char dir[] = "/tmp/ovt-trn-state-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    CHECK_RUN(test_config());
    CHECK_RUN(test_config_v2());
    CHECK_RUN(test_config_v3());
    CHECK_RUN(test_config_tree());
    CHECK_RUN(test_layout());
    CHECK_RUN(test_hashes_against_python(dir, 0));
    CHECK_RUN(test_hashes_against_python(dir, 1));
    CHECK_RUN(test_hashes_against_python(dir, 2));
    CHECK_RUN(test_tree_checkpoint(dir));
    CHECK_RUN(test_checkpoint(dir, 0));
    CHECK_RUN(test_checkpoint(dir, 1));
    CHECK_RUN(test_init());
    CHECK_RUN(test_hash_background());
    CHECK_RUN(test_data(dir));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done();
}
