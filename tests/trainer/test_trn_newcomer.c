/* What a newcomer trips over, through the built binary (issue 44):
 *   - `ovt train --model gpt2-small` (or llama-15m) on the byte-level token
 *     file the first command of docs/trainer.md makes trained silently; now
 *     refused, naming the tokenizer to use, unless --force (which warns);
 *   - `ovt verify` before `ovt commit` said only "receipt.json does not
 *     exist", `ovt verify RUNDIR` "is not a regular file", and `--model` of
 *     an export made before the commit the same: now each says the run is
 *     not committed and what to run;
 *   - `ovt export --step K` without a checkpoint at K: now names the steps
 *     that have one;
 *   - help lagged the features: every model preset (trainer/config.c), every
 *     export format (modelio/export.h), every tokenizer and every kind of data
 *     file (data/make.h) must appear in the help texts that name them, and
 *     the README's `ovt data a|b|c` must list every kind.
 * The gzip inputs of `ovt data idx|cifar`: test_data_images, test_data_idx. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "data/make.h"
#include "support/cli_fixture.h"
#include "trainer/config.h"
#include "modelio/export.h"

/* out.txt of the last run, NUL-terminated (malloc'd), or NULL. */
static char *output_text(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return NULL;
    char *t = realloc(buf, len + 1);
    if (!t) {
        free(buf);
        return NULL;
    }
    t[len] = '\0';
    return t;
}

/* Whether word occurs in text as a word of its own: not inside a longer
 * name (resnet-50 in resnet-50-block, gpt2 in gpt2-tiny). */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; (p = strstr(p, word)) != NULL; p++) {
        char before = p == text ? ' ' : p[-1], after = p[n];
        if (!strchr("-_.abcdefghijklmnopqrstuvwxyz0123456789", before) &&
            !strchr("-_abcdefghijklmnopqrstuvwxyz0123456789", after ? after : ' '))
            return 1;
    }
    return 0;
}

/* The line of text that starts with prefix, copied to out[cap] ("" if none). */
static void line_starting(char *out, size_t cap, const char *text, const char *prefix)
{
    out[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            size_t n = strcspn(p, "\n");
            snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
            return;
        }
    }
}

static void wrong_vocabulary(void)
{
    char text[300], tokens[300];
    snprintf(text, sizeof text, "%s/my.txt", dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.bin", dir);
    char words[2000] = "";
    for (int k = 0; k < 40; k++)
        strcat(words, "A newcomer trains a model on text. ");
    CHECK(ovt_write_atomic(text, words, strlen(words), 0644) == 0);
    /* the first command of docs/trainer.md: byte-level tokens */
    CHECK(run_ovt("data text %s --out %s", text, tokens) == 0);
    CHECK(run_ovt("train --model gpt2-small --data %s --out %s/small --steps 1 --batch 1 --seq 8", tokens, dir) == 1);
    CHECK(output_has("256-symbol vocabulary") && output_has("gpt2-small's vocabulary is 50257 tokens"));
    CHECK(output_has("`ovt data text FILE --tokenizer gpt2 --out TOKENS`") && output_has("--model gpt2-tiny"));
    CHECK(output_has("--force"));
    char small[300];
    snprintf(small, sizeof small, "%s/small", dir);
    CHECK(access(small, F_OK) != 0);
    CHECK(run_ovt("train --model llama-15m --data %s --out %s/l15 --steps 1 --batch 1 --seq 8", tokens, dir) == 1);
    CHECK(output_has("llama-15m's vocabulary is 32000 tokens") && output_has("--tokenizer llama2 --out TOKENS"));
    CHECK(output_has("--model llama-tiny"));
    /* --force trains it, and says so */
    CHECK(run_ovt("train --model llama-15m --data %s --out %s/l15 --steps 1 --batch 1 --seq 8 --every 0 "
                  "--checkpoint-every 0 --force",
                  tokens, dir) == 0);
    CHECK(output_has("warning: --force: llama-15m's vocabulary is 32000 tokens") && output_has("31744"));
    /* the byte-level models take the file without a word */
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s/tiny --steps 1 --batch 1 --seq 8 --every 0", tokens,
                  dir) == 0);
    char *out = output_text();
    CHECK(out && !strstr(out, "warning") && !strstr(out, "vocabulary"));
    free(out);
}

/* A 12-step gpt2-tiny run with checkpoints every 5 (0, 5, 10, 12): export
 * at a step without one; verify before any commit. */
static void before_commit(void)
{
    char tokens[300], run[300], model[300];
    snprintf(tokens, sizeof tokens, "%s/tokens.bin", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps 12 --batch 1 --seq 8 --every 0 "
                  "--checkpoint-every 5",
                  tokens, run) == 0);
    CHECK(run_ovt("export %s --step 7 --format safetensors --out %s", run, model) == 1);
    CHECK(output_has("no checkpoint of step 7") && output_has("checkpoints of steps 0, 5, 10, 12"));
    CHECK(access(model, F_OK) != 0);
    CHECK(run_ovt("export %s --step 13 --format safetensors --out %s", run, model) == 1);
    CHECK(output_has("no step 13") && output_has("0, 5, 10, 12"));
    CHECK(run_ovt("export %s --step 10 --format safetensors --out %s", run, model) == 0);
    CHECK(output_has("no runId yet"));
    /* verify before `ovt commit`: the receipt, its run directory, a model */
    CHECK(run_ovt("verify %s/receipt.json", run) == 1);
    CHECK(output_has("has no receipt.json: the run is not committed yet") && output_has("`ovt commit` writes it"));
    CHECK(run_ovt("verify %s", run) == 1);
    CHECK(output_has("has no receipt.json: the run is not committed yet"));
    CHECK(run_ovt("verify --model %s %s", model, run) == 1);
    CHECK(output_has("exported before the run had a runId") && output_has("export it again"));
}

/* Every name in names (NULL-ended by its function) in the help text of
 * `ovt ARGS` (as a word), or in the line starting `line` when set. */
static void help_names(const char *args, const char *line, const char *(*name)(size_t))
{
    CHECK(run_ovt("%s", args) == 0);
    char *out = output_text(), where[1024];
    CHECK(out != NULL);
    if (!out)
        return;
    if (line)
        line_starting(where, sizeof where, out, line);
    for (size_t i = 0; name(i); i++)
        CHECK_MSG(has_word(line ? where : out, name(i)), "`ovt %s`%s%s%s does not name %s", args,
                  line ? " (its line \"" : "", line ? line : "", line ? "\")" : "", name(i));
    free(out);
}

static void help_matches_features(void)
{
    size_t presets = 0;
    while (trn_model_preset_name(presets))
        presets++;
    CHECK(presets >= 11); /* mlp-demo .. llama-110m as of issue 44 */
    help_names("train --help", NULL, trn_model_preset_name);
    help_names("eval --help", NULL, trn_model_preset_name);
    help_names("export --help", NULL, trn_export_format_name);
    help_names("--help", "  export ", trn_export_format_name);
    help_names("data --help", NULL, data_tokenizer_name);
    help_names("--help", "  data ", data_tokenizer_name);
    help_names("data --help", NULL, data_make_kind_name);
    help_names("--help", "  data ", data_make_kind_name);
    /* the README's `ovt data a|b|...` lists every kind */
    const char *src = getenv("OVT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/README.md", src ? src : ".");
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(path, &buf, &len, 1 << 20) == 0);
    char *readme = realloc(buf, len + 1), *at;
    readme[len] = '\0';
    CHECK((at = strstr(readme, "`ovt data ")) != NULL);
    if (at) {
        char kinds[128];
        snprintf(kinds, sizeof kinds, "%.*s", (int)strcspn(at + 10, "`"), at + 10);
        for (char *p = kinds; *p; p++)
            *p = *p == '|' ? ' ' : *p;
        for (size_t i = 0; data_make_kind_name(i); i++)
            CHECK_MSG(has_word(kinds, data_make_kind_name(i)), "README's `ovt data %s` lacks %s", kinds,
                      data_make_kind_name(i));
    }
    free(readme);
}

int main(void)
{
    if (cli_setup("newcomer"))
        return 1;
    CHECK_RUN(help_matches_features());
    CHECK_RUN(wrong_vocabulary());
    CHECK_RUN(before_commit());
    int rv = check_done();
    if (rv == 0)
        cli_cleanup();
    return rv;
}
