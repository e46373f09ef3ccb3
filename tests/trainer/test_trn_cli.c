/* `ovt train` end to end, through the built binary: a run directory that a
 * verifier on another backend replays from its own files (config.bin, the
 * step-0 checkpoint, the rounding logs) to the same stateHashes as
 * steps.bin; --resume from a mid-run checkpoint ends at the same root as an
 * uninterrupted run; bad invocations fail with a clear message. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "kernels/rlog.h"
#include "data/dataset.h"
#include "trainer/checkpoint.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"
#include "trainer/train.h"
#include "support/cli_fixture.h"
#include "trn_helpers.h"

/* The same run with the tree stateHash (the default, on 2 threads: the
 * leaves hashed in the pool's background): every stateHash differs from
 * the v1 run's; the final checkpoint's stateHash rebuilt from the file by
 * the Python reference (hashlib alone) is the one steps.bin holds; a proof
 * of a leaf range of fcw (two leaves) checks in C and in Python, and fails
 * once one leaf hash has a bit changed. */
static int run_cmd_output(const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof full, "%s > %s/out.txt 2>&1", cmd, dir);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_tree_run(const char *tok)
{
    CHECK(run_ovt("train --data %s --out %s/tree-gpt2 --steps 3 --batch 4 --seq 16 --every 0 --threads 2", tok,
                  dir) == 0);
    char sp[512], cmd[1536];
    trn_step_table v1 = {0}, tree = {0};
    snprintf(sp, sizeof sp, "%s/pin-gpt2-r2/steps.bin", dir);
    CHECK(trn_step_table_read(&v1, sp) == 0);
    snprintf(sp, sizeof sp, "%s/tree-gpt2/steps.bin", dir);
    CHECK(trn_step_table_read(&tree, sp) == 0);
    CHECK(v1.count == 4 && tree.count == 4);
    for (size_t i = 0; i < 4 && i < v1.count && i < tree.count; i++) {
        CHECK(memcmp(v1.steps[i].state_hash.b, tree.steps[i].state_hash.b, 32) != 0);
        CHECK_MEM(v1.steps[i].log_hash.b, tree.steps[i].log_hash.b, 32); /* the same training */
    }
    char want[65] = "";
    if (tree.count == 4)
        ovt_hex_encode(want, tree.steps[3].state_hash.b, 32);
    const char *src = getenv("OVT_SOURCE_DIR");
    snprintf(cmd, sizeof cmd, "python3 %s/tests/trainer/ref_hashes.py --checkpoint %s/tree-gpt2/ckpt/step-00000003.ckpt",
             src ? src : ".", dir);
    CHECK(run_cmd_output(cmd) == 0);
    CHECK_MSG(output_has(want), "the Python reference's stateHash of the tree checkpoint is not steps.bin's %s", want);

    char proof[512];
    snprintf(proof, sizeof proof, "%s/fcw.proof.json", dir);
    CHECK(run_ovt("state-proof %s/tree-gpt2 --step 3 --tensor fcw --leaves 1 --out %s", dir, proof) == 0);
    CHECK(output_has("steps.bin holds it"));
    CHECK(run_ovt("state-proof --verify %s --state-hash %s", proof, want) == 0);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/trainer/ref_hashes.py --proof %s", src ? src : ".", proof);
    CHECK(run_cmd_output(cmd) == 0 && output_has(want));
    CHECK(run_ovt("state-proof %s/tree-gpt2 --step 3 --tensor fcw --leaves 2", dir) == 1); /* fcw has 2 leaves */
    CHECK(run_ovt("state-proof %s/pin-gpt2 --step 3 --tensor fcw --leaves 0", dir) == 1);  /* a v1 run */
    CHECK(output_has("only the tree"));
    /* a v1 run resumes as v1 without --state-hash (the run's own config.bin) */
    CHECK(run_ovt("train --data %s --out %s/pin-gpt2 --steps 3 --batch 4 --seq 16 --every 0 --threads 1 "
                  "--band-rules 1 --resume", tok, dir) == 0);

    /* one bit of the leaf hash changed: C and Python refuse the proof */
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(ovt_read_file(proof, &buf, &len, 1 << 20) == 0);
    char *leaf = buf ? strstr((char *)buf, "\"leaves\"") : NULL;
    char *hex = leaf ? strchr(leaf + 8, '"') : NULL; /* the first leaf's opening quote */
    CHECK(hex != NULL);
    if (hex) {
        hex[1] = hex[1] == '0' ? '1' : '0';
        CHECK(ovt_write_atomic(proof, buf, len, 0644) == 0);
        CHECK(run_ovt("state-proof --verify %s", proof) == 1);
        CHECK(output_has("do not climb"));
        CHECK(run_cmd_output(cmd) != 0);
    }
    free(buf);
    trn_step_table_free(&v1);
    trn_step_table_free(&tree);
}

static const char *train_flags = "--model gpt2-tiny --steps 8 --batch 2 --seq 16 --lr 0.003 --every 0";

static void replay_run_dir(const char *run, const char *data)
{
    char path[512];
    trn_step_table table;
    snprintf(path, sizeof path, "%s/steps.bin", run);
    CHECK(trn_step_table_read(&table, path) == 0);
    CHECK_EQ_U64(table.count, 9);
    trn_state *st = NULL;
    snprintf(path, sizeof path, "%s/ckpt/step-00000000.ckpt", run);
    CHECK(trn_checkpoint_read(&st, path) == 0);
    if (!st || table.count != 9)
        return;
    /* config.bin is the config the checkpoint carries. */
    uint8_t *cfg, enc[TRN_CONFIG_ENC_MAX];
    size_t len;
    snprintf(path, sizeof path, "%s/config.bin", run);
    CHECK(ovt_read_file(path, &cfg, &len, 4096) == 0);
    size_t enc_len = trn_config_encode(enc, &st->config);
    CHECK(len == enc_len && memcmp(cfg, enc, len) == 0);
    free(cfg);
    data_tokens tokens;
    CHECK(data_tokens_load(&tokens, data) == 0);
    CHECK_MEM(tokens.hash.b, st->config.dataset_hash.b, 32);

    trn_workspace *w;
    CHECK(trn_workspace_new(&w, &st->config) == 0);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_REF, KRN_REPLAY, 1);
    krn_rlog *log = krn_rlog_new();
    int same = 0;
    for (uint64_t i = 1; i <= 8; i++) {
        snprintf(path, sizeof path, "%s/logs/step-%08llu.rlog", run, (unsigned long long)i);
        uint8_t *bytes;
        CHECK(ovt_read_file(path, &bytes, &len, 1 << 26) == 0);
        ovt_hash lh;
        ovt_sha256(&lh, bytes, len);
        CHECK_MEM(lh.b, table.steps[i].log_hash.b, 32);
        CHECK(krn_rlog_decode(log, bytes, len) == 0);
        free(bytes);
        data_token_batch tb;
        CHECK(data_token_batch_get(&tb, &tokens, st->config.seed, i, st->config.batch_size, st->config.seq_len) == 0);
        ovt_hash bh;
        data_token_batch_hash(&bh, &tb);
        CHECK_MEM(bh.b, table.steps[i].batch_hash.b, 32);
        trn_batch b = {.B = tb.B, .T = tb.T, .inputs = tb.inputs, .targets = tb.targets};
        trn_step_info info;
        CHECK_MSG(trn_train_step(ctx, w, st, &b, log, &info) == 0, "%s", ovt_errmsg());
        ovt_hash sh;
        trn_state_hash(&sh, st);
        same += memcmp(sh.b, table.steps[i].state_hash.b, 32) == 0;
        data_token_batch_free(&tb);
    }
    CHECK_EQ_U64(same, 8);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    data_tokens_free(&tokens);
    trn_state_free(st);
    trn_step_table_free(&table);
}

static void read_root(const char *run, char out[65])
{
    char path[512];
    snprintf(path, sizeof path, "%s/run.json", run);
    uint8_t *buf;
    size_t len;
    out[0] = 0;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return;
    const char *p = strstr((char *)buf, "\"root\": \"");
    if (p)
        snprintf(out, 65, "%s", p + 9);
    free(buf);
}

int main(void)
{
    if (cli_setup("trn-cli"))
        return 1;
    /* The data: a few hundred bytes of text, byte-level tokens. */
    char data[256], args[2048], run_a[256], run_b[256];
    snprintf(data, sizeof data, "%s/text.txt", dir);
    const char *text = "the grid is fp32 with the low bits zero; every value is computed in fp64 and rounded, "
                       "and the few that sit near a midpoint are logged so any machine can replay the step. ";
    CHECK(ovt_write_atomic(data, text, strlen(text), 0644) == 0);
    snprintf(run_a, sizeof run_a, "%s/a", dir);
    snprintf(run_b, sizeof run_b, "%s/b", dir);

    snprintf(args, sizeof args, "train %s --data %s --out %s --checkpoint-every 0", train_flags, data, run_a);
    CHECK(run_ovt("%s", args) == 0);
    CHECK(output_has("step Merkle root"));
    CHECK_RUN(replay_run_dir(run_a, data));

    /* Interrupted run: checkpoints at 3 and 6, the last one lost; resume. */
    snprintf(args, sizeof args, "train %s --data %s --out %s --checkpoint-every 3", train_flags, data, run_b);
    CHECK(run_ovt("%s", args) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/ckpt/step-00000008.ckpt", run_b);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/ckpt/step-00000006.ckpt", run_b);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/run.json", run_b);
    CHECK(unlink(path) == 0);
    snprintf(args, sizeof args, "train %s --data %s --out %s --checkpoint-every 3 --resume", train_flags, data, run_b);
    CHECK(run_ovt("%s", args) == 0);
    CHECK(output_has("steps 4..8"));
    char root_a[65], root_b[65];
    CHECK_RUN(read_root(run_a, root_a));
    CHECK_RUN(read_root(run_b, root_b));
    CHECK(strlen(root_a) > 60 && strcmp(root_a, root_b) == 0);

    /* The MLP path: a samples file, replayed by nobody here but trained,
     * checkpointed and summarised; a samples file of the wrong shape is
     * refused. */
    data_samples smp;
    CHECK(data_samples_synthetic(&smp, 4, 300, 128, 32, 32) == 0);
    uint8_t *sbuf;
    size_t slen;
    CHECK(data_samples_encode(&smp, &sbuf, &slen) == 0);
    char samples[256];
    snprintf(samples, sizeof samples, "%s/samples.bin", dir);
    CHECK(ovt_write_atomic(samples, sbuf, slen, 0644) == 0);
    free(sbuf);
    data_samples_free(&smp);
    snprintf(args, sizeof args, "train --model mlp-demo --data %s --out %s/m --steps 5 --batch 16 --json", samples, dir);
    CHECK(run_ovt("%s", args) == 0);
    CHECK(output_has("\"steps\": 5"));
    snprintf(path, sizeof path, "%s/m/ckpt/step-00000005.ckpt", dir);
    CHECK(access(path, F_OK) == 0);
    CHECK(data_samples_synthetic(&smp, 4, 10, 64, 32, 32) == 0);
    CHECK(data_samples_encode(&smp, &sbuf, &slen) == 0);
    CHECK(ovt_write_atomic(samples, sbuf, slen, 0644) == 0);
    free(sbuf);
    data_samples_free(&smp);
    snprintf(args, sizeof args, "train --model mlp-demo --data %s --out %s/m2", samples, dir);
    CHECK(run_ovt("%s", args) == 1);
    CHECK(output_has("64 features"));

    /* Refusals: an existing run without --resume, another config on
     * --resume, a corrupt checkpoint, missing flags, bad values. */
    snprintf(args, sizeof args, "train %s --data %s --out %s", train_flags, data, run_a);
    CHECK(run_ovt("%s", args) == 1);
    CHECK(output_has("already holds a run"));
    snprintf(args, sizeof args, "train %s --data %s --out %s --resume --seed 2", train_flags, data, run_a);
    CHECK(run_ovt("%s", args) == 1);
    CHECK(output_has("another config"));
    CHECK(output_has("--seed: 1 there, 2 here")); /* names the flag and both values */
    snprintf(path, sizeof path, "%s/ckpt/step-00000008.ckpt", run_a);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 300, SEEK_SET);
        fputc(0x5a, f);
        fclose(f);
    }
    snprintf(args, sizeof args, "train %s --data %s --out %s --resume", train_flags, data, run_a);
    CHECK(run_ovt("%s", args) == 1);
    CHECK(output_has("checksum"));
    CHECK(run_ovt("train --out /tmp/nowhere") == 2);
    CHECK(output_has("--data and --out are required"));
    CHECK(run_ovt("train --data x --out y --grid-bits 40") == 2);
    CHECK(output_has("--grid-bits expects an integer in 24..32"));
    CHECK(run_ovt("train --model gpt3 --data x --out y") == 2);
    CHECK(output_has("unknown model"));
    snprintf(args, sizeof args, "train --data %s/missing --out %s/c", dir, dir);
    CHECK(run_ovt("%s", args) == 1);
    CHECK(output_has("does not exist"));
    CHECK(run_ovt("train --help") == 0);
    CHECK(output_has("usage: ovt train"));
    CHECK(run_ovt("demo --help") == 0);
    CHECK(output_has("usage: ovt demo"));
    CHECK(run_ovt("demo --steps 0") == 2);

    /* One-shard runs keep their bits: steps.bin (every stateHash and logHash)
     * of two short runs, pinned from the build before sharded steps existed
     * (2854c18), for gpt2-tiny on a generated text and mlp-demo on ovt's
     * synthetic samples. */
    {
        char pin[256], tok[256], mlp[256], sp[512];
        snprintf(pin, sizeof pin, "%s/pin.txt", dir);
        snprintf(tok, sizeof tok, "%s/pin.bin", dir);
        snprintf(mlp, sizeof mlp, "%s/mlp.bin", dir);
        FILE *pf = fopen(pin, "w");
        CHECK(pf != NULL);
        for (int i = 0; pf && i < 400; i++)
            fprintf(pf, "line %d: the quick brown fox jumps over the lazy dog %d times.\n", i, i * 7 % 13);
        if (pf)
            fclose(pf);
        CHECK(run_ovt("data text %s --out %s", pin, tok) == 0);
        CHECK(run_ovt("data mlp --seed 1 --samples 256 --out %s", mlp) == 0);
        /* band rules 1 and the v1 stateHash: the pins predate band rules 2
         * and the tree, each of which changes configHash and so every
         * stateHash */
        CHECK(run_ovt("train --data %s --out %s/pin-gpt2 --steps 3 --batch 4 --seq 16 --every 0 --threads 1 "
                      "--band-rules 1 --state-hash 1", tok, dir) == 0);
        CHECK(run_ovt("train --model mlp-demo --data %s --out %s/pin-mlp --steps 3 --batch 16 --every 0 "
                      "--band-rules 1 --state-hash 1", mlp, dir) == 0);
        const char *runs[2] = {"pin-gpt2", "pin-mlp"};
        const char *want[2] = {"91d2ea5f7503564915f77574c6938c849cb7b1ab5e7500632a898b7f0e65a9ca",
                               "a7beabe2799a09771181e27e487756cb2b07b08e07b34b7dfeebbc5f76c43ecb"};
        for (int k = 0; k < 2; k++) {
            uint8_t *buf = NULL;
            size_t len = 0;
            snprintf(sp, sizeof sp, "%s/%s/steps.bin", dir, runs[k]);
            CHECK(ovt_read_file(sp, &buf, &len, 1 << 20) == 0);
            ovt_hash h;
            ovt_sha256(&h, buf, len);
            char hx[65];
            ovt_hex_encode(hx, h.b, 32);
            CHECK_MSG(!strcmp(hx, want[k]), "%s: steps.bin %s, before shards %s", runs[k], hx, want[k]);
            free(buf);
        }
        /* Band rules 2 (the default) changes what a verifier demands, not the
         * trainer's arithmetic: the same run's final checkpoint differs from
         * the pinned one in the band rules field of its config (one byte) and
         * in the checksum after it, and its logs are the same bytes. */
        CHECK(run_ovt("train --data %s --out %s/pin-gpt2-r2 --steps 3 --batch 4 --seq 16 --every 0 --threads 1 "
                      "--state-hash 1", tok, dir) == 0);
        uint8_t *c1 = NULL, *c2 = NULL;
        size_t n1 = 0, n2 = 0, differ = 0;
        snprintf(sp, sizeof sp, "%s/pin-gpt2/ckpt/step-00000003.ckpt", dir);
        CHECK(ovt_read_file(sp, &c1, &n1, 1 << 26) == 0);
        snprintf(sp, sizeof sp, "%s/pin-gpt2-r2/ckpt/step-00000003.ckpt", dir);
        CHECK(ovt_read_file(sp, &c2, &n2, 1 << 26) == 0);
        CHECK(n1 == n2 && n1 > 32);
        for (size_t i = 0; c1 && c2 && n1 == n2 && i + 32 < n1; i++)
            differ += c1[i] != c2[i];
        CHECK_MSG(differ == 1, "band rules 1 and 2: %zu bytes of the checkpoints differ before the checksum", differ);
        free(c1);
        free(c2);
        for (int k = 1; k <= 3; k++) {
            snprintf(sp, sizeof sp, "%s/pin-gpt2/logs/step-%08d.rlog", dir, k);
            CHECK(ovt_read_file(sp, &c1, &n1, 1 << 26) == 0);
            snprintf(sp, sizeof sp, "%s/pin-gpt2-r2/logs/step-%08d.rlog", dir, k);
            CHECK(ovt_read_file(sp, &c2, &n2, 1 << 26) == 0);
            CHECK_MSG(n1 == n2 && c1 && c2 && memcmp(c1, c2, n1) == 0, "step %d: the logs differ", k);
            free(c1);
            free(c2);
        }
        check_tree_run(tok);
    }

    cli_cleanup();
    return check_done();
}
