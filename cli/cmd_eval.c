/* `ovt eval`: a checkpoint's mean loss and perplexity on held-out tokens
 * (modelio/eval.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/merkle.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "data/images.h"
#include "modelio/eval.h"
#include "trainer/snapshot.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: ovt eval RUNDIR [--step K] --data FILE [--backend B] [--threads N] [--windows N] [--json]\n"
               "\n"
               "The mean cross-entropy (nats per predicted token) and perplexity of the run's language\n"
               "model checkpoint (GPT-2 or Llama) at step K (default: the latest) on the held-out token\n"
               "file FILE (as `ovt data text` writes it, or raw bytes as byte tokens). Forward only: the\n"
               "file is cut into non-overlapping windows of T + 1 tokens (T the run's sequence\n"
               "length; a shorter rest is left out), each predicting its last T tokens from the T\n"
               "before; they go through the model in batches of the run's batch size, in file order,\n"
               "each batch rounded to nearest on the grid without a log, and the batch means are\n"
               "combined in FP64 in that order (docs/trainer.md, \"ovt eval\").\n"
               "\n"
               "An image model's checkpoint (MLP or ResNet) takes an ovt image file (`ovt data idx`\n"
               "or `ovt data cifar`, e.g. the test set): its mean cross-entropy per image and its\n"
               "accuracy (the label is the first largest logit), the images in file order in batches\n"
               "of the run's batch size (a ResNet's batch norms from their running statistics).\n"
               "\n"
               "The models, as `ovt train --model` names them:\n");
    static const char *const family[] = {"GPT-2", "Llama", "MLP", "ResNet"};
    static const trn_model_kind kinds[] = {TRN_MODEL_GPT2, TRN_MODEL_LLAMA, TRN_MODEL_MLP, TRN_MODEL_RESNET};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char names[256];
        trn_model_preset_list(names, sizeof names, (int)kinds[k], 0);
        fprintf(f, "  %-7s %s (%s)\n", family[k], names, k < 2 ? "held-out tokens" : "an image file");
    }
    fprintf(f, "\n"
               "options:\n"
               "  --step K       the checkpoint's step (0, every --checkpoint-every, the last)\n"
               "  --data FILE    the held-out tokens, or an image file for an MLP or ResNet\n"
               "  --backend B    cpu (default), ref, shuffle or cuda\n"
               "  --threads N    cpu backend threads (default: the backend's)\n"
               "  --windows N    only the first N windows, or images (default: all)\n"
               "  --json         the result as JSON\n"
               "  -h, --help     this help\n");
}

enum { O_STEP = 256, O_DATA, O_BACKEND, O_THREADS, O_WINDOWS, O_JSON };

static void report(const char *dir, const char *data, const char *backend, const trn_state *st,
                   const trn_eval_result *r, bool json)
{
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}", "run", dir, "step",
                              (json_int_t)st->step, "data", data, "backend", backend, "windows",
                              (json_int_t)r->windows, "seq_len", (json_int_t)r->T, "batch", (json_int_t)r->B,
                              "batches", (json_int_t)r->batches, "tokens", (json_int_t)r->tokens, "loss", r->loss,
                              "perplexity", r->perplexity);
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        json_decref(o);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    printf("ovt eval: step %llu of %s on %s, backend %s: %llu windows of %u + 1 tokens (%llu predicted, %llu "
           "batches of up to %u)\n",
           (unsigned long long)st->step, dir, data, backend, (unsigned long long)r->windows, r->T,
           (unsigned long long)r->tokens, (unsigned long long)r->batches, r->B);
    printf("  loss %.17g nats/token, perplexity %.9g\n", r->loss, r->perplexity);
}

static void report_class(const char *dir, const char *data, const char *backend, const trn_state *st,
                         const trn_eval_class_result *r, bool json)
{
    if (json) {
        json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:f}", "run", dir, "step",
                              (json_int_t)st->step, "data", data, "backend", backend, "samples",
                              (json_int_t)r->samples, "correct", (json_int_t)r->correct, "batch", (json_int_t)r->B,
                              "batches", (json_int_t)r->batches, "loss", r->loss, "accuracy", r->accuracy);
        char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        json_decref(o);
        printf("%s\n", text ? text : "{}");
        free(text);
        return;
    }
    printf("ovt eval: step %llu of %s on %s, backend %s: %llu samples (%llu batches of up to %u)\n",
           (unsigned long long)st->step, dir, data, backend, (unsigned long long)r->samples,
           (unsigned long long)r->batches, r->B);
    printf("  loss %.17g nats/sample, accuracy %.4f (%llu correct)\n", r->loss, r->accuracy,
           (unsigned long long)r->correct);
}

/* The held-out file: an image file as samples (*images set), or tokens. */
static int load_held_out(const char *path, data_tokens *tokens, data_samples *samples, bool *images)
{
    uint8_t *buf;
    size_t len;
    int rv = ovt_read_file(path, &buf, &len, (size_t)1 << 36);
    if (rv)
        return rv;
    *images = data_images_is(buf, len);
    rv = *images ? data_images_parse_samples(samples, buf, len) : data_tokens_parse(tokens, buf, len);
    free(buf);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}

/* The checkpoint of dir evaluated on the held-out file, reported. */
static int eval_checkpoint(const char *dir, const char *data, const char *backend, krn_backend_kind kind,
                           int threads, uint64_t limit, bool has_step, uint64_t step, bool json)
{
    /* the data first: a wrong --data fails before the checkpoint is read */
    data_tokens tokens = {0};
    data_samples samples = {0};
    bool images = false;
    trn_state *st = NULL;
    int rv = load_held_out(data, &tokens, &samples, &images);
    if (rv)
        return ovt_fail_wrap(rv, "--data %s", data);
    trn_step_table table;
    if (!(rv = trn_snapshot_load(&st, &table, dir, has_step, step))) {
        trn_step_table_free(&table);
        trn_eval_result r;
        trn_eval_class_result cr;
        if (images && !(rv = trn_eval_samples(st, &samples, kind, threads, limit, &cr)))
            report_class(dir, data, backend, st, &cr, json);
        if (!images && !(rv = trn_eval_run(st, &tokens, kind, threads, limit, &r)))
            report(dir, data, backend, st, &r, json);
    }
    data_tokens_free(&tokens);
    data_samples_free(&samples);
    trn_state_free(st);
    return rv;
}

int cmd_eval(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"step", required_argument, NULL, O_STEP},       {"data", required_argument, NULL, O_DATA},
        {"backend", required_argument, NULL, O_BACKEND}, {"threads", required_argument, NULL, O_THREADS},
        {"windows", required_argument, NULL, O_WINDOWS}, {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    const char *data = NULL, *backend = "cpu";
    krn_backend_kind kind = KRN_BACKEND_CPU;
    uint64_t step = 0, windows = 0;
    int threads = 0, c, bad = 0;
    bool has_step = false, json = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1 && !bad) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case O_STEP:
            bad = ovt_parse_u64(&step, "--step", optarg, 0, CHAIN_MERKLE_MAX_STEPS);
            has_step = true;
            break;
        case O_DATA: data = optarg; break;
        case O_BACKEND:
            bad = krn_backend_parse(&kind, optarg);
            backend = optarg;
            break;
        case O_THREADS: bad = ovt_parse_int(&threads, "--threads", optarg, 0, 256); break;
        case O_WINDOWS: bad = ovt_parse_u64(&windows, "--windows", optarg, 1, UINT64_MAX); break;
        case O_JSON: json = true; break;
        default: return cli_arg_unknown("eval", argv[optind - 1]);
        }
    }
    if (bad)
        return cli_usage_fail("eval");
    if (!data || optind != argc - 1)
        return cli_usage_error("eval", data ? "expects one RUNDIR" : "--data FILE (the held-out tokens) is required");
    int rv = eval_checkpoint(argv[optind], data, backend, kind, threads, windows, has_step, step, json);
    return rv ? cli_fail("eval") : 0;
}
