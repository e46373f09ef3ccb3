/* A new user's path through the built binary, with only commands that
 * `ovt train --help` names: `ovt data mlp` then `ovt train --model mlp-demo`,
 * `ovt data text` (their own text) then `ovt train --model gpt2-tiny`, and a
 * replay of each run (`ovt step` on the arbiter's CPU backend, and
 * `ovt train --replay` on another backend reaching the same stateHashes).
 * Also: `ovt data mlp` is a pure function of its flags, its datasetHash is
 * the one the run commits to, the token file holds the text's bytes, and bad
 * invocations fail with a usage status and a message. And `ovt data cifar`
 * then `ovt train --model resnet-18` and `ovt step` on files in CIFAR-10's
 * binary format. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/fileio.h"
#include "data/dataset.h"
#include "support/cli_fixture.h"
#include "trn_helpers.h"

/* The value of "key": "..." in the out.txt of the last run. */
static int output_json_string(const char *key, char *out, size_t cap)
{
    char path[256], pat[128];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return -1;
    const char *p = strstr((char *)buf, pat);
    int rv = -1;
    if (p) {
        p += strlen(pat);
        const char *q = strchr(p, '"');
        if (q && (size_t)(q - p) < cap) {
            memcpy(out, p, (size_t)(q - p));
            out[q - p] = '\0';
            rv = 0;
        }
    }
    free(buf);
    return rv;
}

/* The "state N HASH" lines of out.txt. */
static void output_states(char *out, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    uint8_t *buf;
    size_t len;
    out[0] = '\0';
    if (ovt_read_file(path, &buf, &len, 1 << 20) == 0) {
        trn_test_state_lines(out, cap, (char *)buf);
        free(buf);
    }
}

static void mlp_path(void)
{
    char h1[80], h2[80], h3[80], run_hash[80];
    CHECK(run_ovt("data mlp --seed 7 --samples 256 --out %s/s1.bin --json", dir) == 0);
    CHECK(output_json_string("dataset_hash", h1, sizeof h1) == 0);
    CHECK(run_ovt("data mlp --seed 7 --samples 256 --out %s/s2.bin --json", dir) == 0);
    CHECK(output_json_string("dataset_hash", h2, sizeof h2) == 0);
    CHECK(run_ovt("data mlp --seed 8 --samples 256 --out %s/s3.bin --json", dir) == 0);
    CHECK(output_json_string("dataset_hash", h3, sizeof h3) == 0);
    CHECK_MSG(strcmp(h1, h2) == 0, "same flags, different files: %s %s", h1, h2);
    CHECK_MSG(strcmp(h1, h3) != 0, "another seed, the same file: %s", h1);

    /* the file parses as the samples mlp-demo takes, and its hash is the one printed */
    char path[256];
    snprintf(path, sizeof path, "%s/s1.bin", dir);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(path, &buf, &len, 1 << 26) == 0);
    data_samples s;
    CHECK(data_samples_parse(&s, buf, len, 32) == 0);
    CHECK_EQ_U64(s.count, 256);
    CHECK_EQ_U64(s.dim, 128);
    CHECK_EQ_U64(s.n_class, 32);
    char hex[65];
    ovt_hex_encode(hex, s.hash.b, 32);
    CHECK(strcmp(hex, h1) == 0);
    data_samples_free(&s);
    free(buf);

    CHECK(run_ovt("train --model mlp-demo --data %s/s1.bin --steps 4 --batch 8 --every 0 --checkpoint-every 1 "
                  "--backend cpu --print-state --out %s/mlp --json",
                  dir, dir) == 0);
    CHECK(output_json_string("dataset_hash", run_hash, sizeof run_hash) == 0);
    CHECK_MSG(strcmp(run_hash, h1) == 0, "the run commits to %s, ovt data printed %s", run_hash, h1);
    static char rec[4096], rep[4096];
    output_states(rec, sizeof rec);
    CHECK(strlen(rec) > 4 * 70);
    CHECK(run_ovt("step --run %s/mlp --step 3 --data %s/s1.bin", dir, dir) == 0);
    CHECK(run_ovt("train --model mlp-demo --data %s/s1.bin --steps 4 --batch 8 --every 0 --backend ref "
                  "--print-state --replay %s/mlp --out %s/mlp-replay --json",
                  dir, dir, dir) == 0);
    output_states(rep, sizeof rep);
    CHECK_MSG(strcmp(rec, rep) == 0, "record:\n%s\nreplay:\n%s", rec, rep);

    /* a set made for another width is refused by mlp-demo with the sizes named */
    CHECK(run_ovt("data mlp --dim 16 --samples 64 --out %s/narrow.bin", dir) == 0);
    CHECK(run_ovt("train --model mlp-demo --data %s/narrow.bin --steps 1 --out %s/bad", dir, dir) == 1);
    CHECK(output_has("16 features"));
}

static void text_path(void)
{
    char path[256], hash[80], run_hash[80];
    snprintf(path, sizeof path, "%s/my.txt", dir);
    char text[5000];
    size_t n = 0;
    while (n < sizeof text) {
        static const char line[] = "It was the best of times, it was the worst of times; \xc3\xa9t\xc3\xa9.\n";
        size_t k = strlen(line) < sizeof text - n ? strlen(line) : sizeof text - n;
        memcpy(text + n, line, k);
        n += k;
    }
    CHECK(ovt_write_atomic(path, text, n, 0644) == 0);
    CHECK(run_ovt("data text %s --out %s/tokens.bin --json", path, dir) == 0);
    CHECK(output_has("\"tokens\": 5000"));
    CHECK(output_json_string("dataset_hash", hash, sizeof hash) == 0);

    /* one token per byte, in order, vocab 256 */
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    data_tokens t;
    CHECK(data_tokens_load(&t, path) == 0);
    CHECK_EQ_U64(t.count, n);
    CHECK_EQ_U64(t.vocab, 256);
    int same = t.count == n;
    for (size_t i = 0; same && i < n; i++)
        same = t.tokens[i] == (uint8_t)text[i];
    CHECK(same);
    data_tokens_free(&t);

    CHECK(run_ovt("train --model gpt2-tiny --data %s/tokens.bin --steps 3 --batch 2 --seq 16 --every 0 "
                  "--checkpoint-every 1 --print-state --out %s/gpt --json",
                  dir, dir) == 0);
    CHECK(output_json_string("dataset_hash", run_hash, sizeof run_hash) == 0);
    CHECK(strcmp(run_hash, hash) == 0);
    static char rec[4096], rep[4096];
    output_states(rec, sizeof rec);
    CHECK(strlen(rec) > 3 * 70);
    CHECK(run_ovt("step --run %s/gpt --step 2 --data %s/tokens.bin", dir, dir) == 0);
    CHECK(run_ovt("train --model gpt2-tiny --data %s/tokens.bin --steps 3 --batch 2 --seq 16 --every 0 "
                  "--backend ref --print-state --replay %s/gpt --out %s/gpt-replay --json",
                  dir, dir, dir) == 0);
    output_states(rep, sizeof rep);
    CHECK_MSG(strcmp(rec, rep) == 0, "record:\n%s\nreplay:\n%s", rec, rep);
}

/* `ovt data cifar` on two batch files in CIFAR-10's binary format (made
 * here: 6 and 4 records), then resnet-18 trains a step on them and `ovt
 * step` re-executes it; a partial record and a tar archive are refused. */
static void cifar_path(void)
{
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/data_batch_1.bin", dir);
    snprintf(b, sizeof b, "%s/data_batch_2.bin", dir);
    uint8_t *rec = malloc(10 * 3073);
    for (int i = 0; i < 10; i++) {
        rec[i * 3073] = (uint8_t)(9 - i);
        for (int k = 0; k < 3072; k++)
            rec[i * 3073 + 1 + k] = (uint8_t)(k * 13 + i);
    }
    CHECK(ovt_write_atomic(a, rec, 6 * 3073, 0644) == 0);
    CHECK(ovt_write_atomic(b, rec + 6 * 3073, 4 * 3073, 0644) == 0);
    CHECK(run_ovt("data cifar %s %s --out %s/cifar.img --json", a, b, dir) == 0);
    CHECK(output_has("\"count\": 10") && output_has("\"channels\": 3"));
    /* the image file: a 32-byte header, then the pixels as they were, then the labels */
    char path[300];
    snprintf(path, sizeof path, "%s/cifar.img", dir);
    uint8_t *img;
    size_t len;
    CHECK(ovt_read_file(path, &img, &len, 1 << 20) == 0);
    CHECK_EQ_U64(len, 32 + 10 * 3073);
    if (len == 32 + 10 * 3073) {
        CHECK(img[32 + 7 * 3072 + 100] == (uint8_t)(100 * 13 + 7));
        CHECK(img[32 + 10 * 3072 + 7] == 2);
    }
    free(img);
    CHECK(run_ovt("train --model resnet-18 --data %s/cifar.img --steps 1 --batch 2 --every 0 --threads 2 --out %s/r18",
                  dir, dir) == 0);
    CHECK(run_ovt("step --run %s/r18 --step 1 --data %s/cifar.img --threads 2", dir, dir) == 0);
    CHECK(ovt_write_atomic(b, rec, 3072, 0644) == 0);
    CHECK(run_ovt("data cifar %s --out %s/x.img", b, dir) == 1 && output_has("3,073-byte records"));
    memset(rec, 0, 512);
    memcpy(rec + 257, "ustar", 5);
    CHECK(ovt_write_atomic(b, rec, 3073, 0644) == 0);
    CHECK(run_ovt("data cifar %s --out %s/x.img", b, dir) == 1 && output_has("tar archive"));
    CHECK(run_ovt("data cifar --out %s/x.img", dir) == 2 && output_has("batch files"));
    free(rec);
}

static void misuse(void)
{
    CHECK(run_ovt("data") == 2);
    CHECK(output_has("ovt data mlp"));
    CHECK(run_ovt("data mlp") == 2);
    CHECK(output_has("--out"));
    CHECK(run_ovt("data text --out %s/x.bin", dir) == 2);
    CHECK(output_has("text file"));
    CHECK(run_ovt("data text %s/nonexistent.txt --out %s/x.bin", dir, dir) == 1);
    CHECK(output_has("nonexistent.txt"));
    CHECK(run_ovt("data mlp --classes 1 --out %s/x.bin", dir) == 2);
    CHECK(run_ovt("data text a b --out %s/x.bin", dir) == 2);
    CHECK(run_ovt("data text %s/my.txt --seed 3 --out %s/x.bin", dir, dir) == 2);
    CHECK(run_ovt("data --help") == 0);
    CHECK(output_has("BPE"));
    CHECK(run_ovt("train --help") == 0);
    CHECK(output_has("ovt data text"));
    CHECK(output_has("ovt data mlp"));
}

int main(void)
{
    if (cli_setup("data-cli"))
        return 1;
    CHECK_RUN(mlp_path());
    CHECK_RUN(text_path());
    CHECK_RUN(cifar_path());
    CHECK_RUN(misuse());
    int rv = check_done();
    if (rv == 0)
        cli_cleanup();
    return rv;
}
