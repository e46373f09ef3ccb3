/* `ovt demo`: flags, the progress lines and the final table (or JSON); the
 * demo itself is demo_run (examples/demo/demo.h). */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "examples/demo/demo.h"

static void demo_usage(FILE *f)
{
    fprintf(f,
            "usage: ovt demo [OPTIONS]\n"
            "\n"
            "The exactness demo. Trains a small MLP classifier on a synthetic data set with\n"
            "controlled rounding on the cpu backend (OpenBLAS, the trainer, RECORD), and in lock\n"
            "step replays every step on the ref (plain loops) and shuffle (random summation\n"
            "orders) backends with the trainer's rounding logs: their state hashes must equal\n"
            "the trainer's at every step. As the ablation, the same run on ref and shuffle\n"
            "without the logs (round to nearest) is compared too, and the first step where its\n"
            "state differs is reported. Exits 0 only if both replays matched at every step.\n"
            "\n"
            "options:\n"
            "  --steps N          training steps (default 200)\n"
            "  --every N          a progress line every N steps (default 20; 0: none)\n"
            "  --batch N          samples per step (default 32)\n"
            "  --width N          hidden layer width (default 128)\n"
            "  --layers N         hidden layers, 1..8 (default 2)\n"
            "  --in-dim N         input features (default 128)\n"
            "  --classes N        classes (default 32)\n"
            "  --samples N        training samples (default 8192)\n"
            "  --grid-bits B      grid width b, 24..32 (default 32: FP32)\n"
            "  --head-shift K     output-layer shift 2^K/16, 0..20 (default 12; 0: off): invisible\n"
            "                     to the loss, it makes the backward pass cancel so that values\n"
            "                     near rounding midpoints are frequent (see docs/demo.md)\n"
            "  --seed N           seed of data, init and batches (default 1)\n"
            "  --lr X             peak learning rate (default 0.003)\n"
            "  --threads N        cpu backend threads (default: the backend's)\n"
            "  --no-ablation      skip the runs without the log\n"
            "  --no-shuffle       skip the runs on the shuffle backend (the slowest)\n"
            "  --no-fp32          skip the contrast: plain FP32 training summed in two orders\n"
            "  --log-dir DIR      also write the trainer's rounding logs there\n"
            "  --json             print the result as JSON (no progress lines)\n"
            "  -h, --help         this help\n");
}

static const char *run_names[DEMO_RUNS] = {"trainer_cpu", "replay_ref", "replay_shuffle", "nearest_ref",
                                               "nearest_shuffle"};

static void hex32(char out[65], const ovt_hash *h)
{
    ovt_hex_encode(out, h->b, 32);
}

static void print_json(const demo_opts *o, const demo_result *r)
{
    char dh[65], ch[65], sh[65];
    hex32(dh, &r->dataset_hash);
    hex32(ch, &r->config_hash);
    hex32(sh, &r->final_state_hash);
    json_t *runs = json_object();
    for (int k = 1; k < DEMO_RUNS; k++) {
        if (!demo_enabled(o, k))
            continue;
        json_object_set_new(runs, run_names[k],
                            json_pack("{s:I, s:I, s:f}", "steps_run", (json_int_t)r->steps_run[k],
                                      "first_mismatch", (json_int_t)r->first_mismatch[k], "seconds",
                                      r->seconds[k]));
    }
    double steps = r->steps ? (double)r->steps : 1;
    json_t *root = json_pack(
        "{s:b, s:I, s:I, s:f, s:I, s:f, s:I, s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:s, s:s, s:o}",
        "replay_exact", demo_replay_exact(o, r), "steps", (json_int_t)r->steps, "grid_bits",
        (json_int_t)o->config.grid_bits, "entries_per_step", (double)r->entries_total / steps, "entries_max",
        (json_int_t)r->entries_max, "log_bytes_per_step", (double)r->log_bytes_total / steps, "log_bytes_max",
        (json_int_t)r->log_bytes_max, "outputs_per_step", (double)r->outputs_total / steps, "wide_entries",
        (json_int_t)r->wide_total, "fraction_logged",
        r->outputs_total ? (double)r->entries_total / (double)r->outputs_total : 0.0, "replay_max_dist_over_tau",
        r->replay_max_dist_over_tau, "loss_start", (double)r->loss_start, "loss_end", (double)r->loss_end,
        "heldout_loss_start", (double)r->eval_start, "heldout_loss_end", (double)r->eval_end, "dataset_hash", dh,
        "config_hash", ch, "final_state_hash", sh, "runs", runs);
    json_object_set_new(root, "trainer_seconds", json_real(r->seconds[0]));
    if (o->fp32)
        json_object_set_new(root, "plain_fp32",
                            json_pack("{s:I, s:f, s:f}", "first_mismatch", (json_int_t)r->fp32_first_mismatch,
                                      "params_differing", r->fp32_params_differing, "loss_at_stop",
                                      (double)r->fp32_loss_end));
    char rh[65];
    hex32(rh, &r->root[0]);
    json_object_set_new(root, "root", json_string(rh));
    for (int k = 1; k < DEMO_RUNS; k++) {
        json_t *run = json_object_get(runs, run_names[k]);
        if (!run)
            continue;
        if (r->has_root[k]) {
            hex32(rh, &r->root[k]);
            json_object_set_new(run, "root", json_string(rh));
        } else {
            json_object_set_new(run, "root", json_null());
        }
    }
    char *text = json_dumps(root, JSON_INDENT(2));
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(root);
}

static void print_table(const demo_opts *o, const demo_result *r)
{
    double steps = r->steps ? (double)r->steps : 1;
    char sh[65];
    hex32(sh, &r->final_state_hash);
    printf("\n%-38s %llu\n", "steps", (unsigned long long)r->steps);
    printf("%-38s %.1f (max %llu)\n", "rounding-log entries per step", (double)r->entries_total / steps,
           (unsigned long long)r->entries_max);
    printf("%-38s %.0f (max %llu)\n", "rounding-log bytes per step", (double)r->log_bytes_total / steps,
           (unsigned long long)r->log_bytes_max);
    printf("%-38s %.0f\n", "values rounded per step", (double)r->outputs_total / steps);
    printf("%-38s %.2e\n", "fraction of values logged",
           r->outputs_total ? (double)r->entries_total / (double)r->outputs_total : 0.0);
    printf("%-38s %.3g\n", "largest d/tau seen by a replay", r->replay_max_dist_over_tau);
    for (int k = 1; k < DEMO_RUNS; k++) {
        if (!demo_enabled(o, k))
            continue;
        static const char *labels[DEMO_RUNS] = {"", "replay with log, ref", "replay with log, shuffle",
                                                    "no log (nearest), ref", "no log (nearest), shuffle"};
        if (r->first_mismatch[k])
            printf("%-38s first differs at step %llu\n", labels[k], (unsigned long long)r->first_mismatch[k]);
        else
            printf("%-38s identical at all %llu steps\n", labels[k], (unsigned long long)r->steps_run[k]);
    }
    if (o->fp32 && r->fp32_first_mismatch)
        printf("%-38s first differs at step %llu (%.0f%% of state values differ)\n",
               "plain FP32, sums forward vs backward", (unsigned long long)r->fp32_first_mismatch,
               100.0 * r->fp32_params_differing);
    else if (o->fp32)
        printf("%-38s identical at all %llu steps\n", "plain FP32, sums forward vs backward",
               (unsigned long long)r->steps);
    printf("%-38s %.4f -> %.4f (held-out %.4f -> %.4f)\n", "training loss (first/last 10%)",
           (double)r->loss_start, (double)r->loss_end, (double)r->eval_start, (double)r->eval_end);
    printf("%-38s %s\n", "final stateHash", sh);
    char root[65];
    hex32(root, &r->root[0]);
    printf("%-38s %s\n", "step Merkle root, trainer", root);
    for (int k = 1; k < DEMO_RUNS; k++) {
        if (!r->has_root[k])
            continue;
        static const char *labels[DEMO_RUNS] = {"", "step Merkle root, replay ref", "step Merkle root, replay shuffle",
                                                    "step Merkle root, no log ref", "step Merkle root, no log shuffle"};
        printf("%-38s %s\n", labels[k], memcmp(r->root[k].b, r->root[0].b, 32) == 0 ? "equal" : "DIFFERENT");
    }
    printf("%-38s trainer %.2f, replays %.2f + %.2f, no-log %.2f + %.2f\n", "seconds", r->seconds[0],
           r->seconds[1], r->seconds[2], r->seconds[3], r->seconds[4]);
    if (demo_replay_exact(o, r))
        printf("\nOK: replay with the trainer's rounding logs reproduced its state bit for bit at every step\n"
               "on %s.\n", o->shuffle ? "both other backends" : "the ref backend");
    else
        printf("\nFAILED: a replay with the trainer's rounding logs did not reproduce its state.\n");
    if (o->ablation && !r->first_mismatch[3] && !r->first_mismatch[4])
        printf("Without the logs the runs did not diverge within %llu steps (rounding flips are rare:\n"
               "try more steps, a wider model or a larger --head-shift).\n",
               (unsigned long long)r->steps);
}

enum { OPT_STEPS = 256, OPT_EVERY, OPT_BATCH, OPT_WIDTH, OPT_LAYERS, OPT_IN_DIM, OPT_CLASSES, OPT_SAMPLES,
       OPT_GRID, OPT_SHIFT, OPT_SEED, OPT_LR, OPT_THREADS, OPT_NO_ABLATION, OPT_NO_SHUFFLE, OPT_NO_FP32, OPT_LOG_DIR, OPT_JSON };

static const struct option demo_longopts[] = {
    {"steps", required_argument, NULL, OPT_STEPS},     {"every", required_argument, NULL, OPT_EVERY},
    {"batch", required_argument, NULL, OPT_BATCH},     {"width", required_argument, NULL, OPT_WIDTH},
    {"layers", required_argument, NULL, OPT_LAYERS},   {"in-dim", required_argument, NULL, OPT_IN_DIM},
    {"classes", required_argument, NULL, OPT_CLASSES}, {"samples", required_argument, NULL, OPT_SAMPLES},
    {"grid-bits", required_argument, NULL, OPT_GRID},  {"head-shift", required_argument, NULL, OPT_SHIFT},
    {"seed", required_argument, NULL, OPT_SEED},
    {"lr", required_argument, NULL, OPT_LR},           {"threads", required_argument, NULL, OPT_THREADS},
    {"no-ablation", no_argument, NULL, OPT_NO_ABLATION}, {"no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE},
    {"no-fp32", no_argument, NULL, OPT_NO_FP32},
    {"log-dir", required_argument, NULL, OPT_LOG_DIR},
    {"json", no_argument, NULL, OPT_JSON},             {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* Flag c (named flag) with its value v; OVT_EINVAL with the parser's
 * message for a bad value. */
static int demo_flag(demo_opts *o, bool *json, int c, const char *flag, const char *v)
{
    trn_run_config *rc = &o->config;
    int rv = 0;
    switch (c) {
    case OPT_STEPS:
        rv = ovt_parse_u64(&o->steps, flag, v, 1, 1000000);
        rc->decay_steps = (uint32_t)o->steps;
        return rv;
    case OPT_EVERY: return ovt_parse_u32(&o->every, flag, v, 0, 1000000);
    case OPT_BATCH: return ovt_parse_u32(&rc->batch_size, flag, v, 1, 65536);
    case OPT_WIDTH: return ovt_parse_u32(&rc->model.width, flag, v, 1, 65536);
    case OPT_LAYERS: return ovt_parse_u32(&rc->model.n_layer, flag, v, 1, 8);
    case OPT_IN_DIM: return ovt_parse_u32(&rc->model.in_dim, flag, v, 1, 65536);
    case OPT_CLASSES: return ovt_parse_u32(&rc->model.n_class, flag, v, 2, 65536);
    case OPT_SAMPLES: return ovt_parse_u32(&o->n_samples, flag, v, 1, 1u << 24);
    case OPT_GRID: return ovt_parse_u32(&rc->grid_bits, flag, v, 24, 32);
    case OPT_SHIFT: return ovt_parse_u32(&rc->head_shift, flag, v, 0, 20);
    case OPT_SEED: return ovt_parse_u64(&rc->seed, flag, v, 0, UINT64_MAX);
    case OPT_LR:
        rv = ovt_parse_real(&rc->lr, flag, v, 1e-9, 10);
        rc->lr_min = rc->lr / 10;
        return rv;
    case OPT_THREADS: return ovt_parse_int(&o->threads, flag, v, 0, 256);
    case OPT_NO_ABLATION: o->ablation = false; return 0;
    case OPT_NO_SHUFFLE: o->shuffle = false; return 0;
    case OPT_NO_FP32: o->fp32 = false; return 0;
    case OPT_LOG_DIR: o->log_dir = v; return 0;
    case OPT_JSON: *json = true; return 0;
    default: return ovt_fail(OVT_EINVAL, "internal: no flag %d", c);
    }
}

/* What the demo is about to run, before its progress lines. */
static void print_intro(const demo_opts *o)
{
    const trn_run_config *rc = &o->config;
    printf("ovt demo: MLP %u -> %u x %u (GELU) -> %u classes, batch %u, b = %u, %llu steps, seed %llu\n",
           rc->model.in_dim, rc->model.n_layer, rc->model.width, rc->model.n_class, rc->batch_size, rc->grid_bits,
           (unsigned long long)o->steps, (unsigned long long)rc->seed);
    printf("trainer: cpu backend, RECORD; followers: %s with the log (REPLAY)%s\n",
           o->shuffle ? "ref and shuffle" : "ref", o->ablation ? " and without it (NEAREST)" : "");
    if (rc->head_shift)
        printf("output layer shifted by +-2^%u/16 per column: softmax ignores it, the backward pass\n"
               "cancels it, so values near rounding midpoints are frequent (docs/demo.md)\n",
               rc->head_shift);
    printf("\n");
}

struct demo_args {
    demo_opts o;
    bool json;
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct demo_args *a = ctx;
    if (c < OPT_STEPS)
        return cli_arg_unknown("demo", given);
    return demo_flag(&a->o, &a->json, c, flag, arg) ? cli_usage_fail("demo") : 0;
}

int cmd_demo(int argc, char **argv)
{
    struct demo_args a = {.json = false};
    demo_defaults(&a.o);
    a.o.progress = stdout;
    int rv = cli_getopt(argc, argv, demo_longopts, demo_usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("demo", argc, argv))
        return 2;
    if (a.o.config.warmup_steps >= a.o.steps)
        a.o.config.warmup_steps = 0;
    if (a.json)
        a.o.progress = NULL;
    else
        print_intro(&a.o);
    demo_result r;
    if (demo_run(&a.o, &r))
        return cli_fail("demo");
    if (a.json)
        print_json(&a.o, &r);
    else
        print_table(&a.o, &r);
    return demo_replay_exact(&a.o, &r) ? 0 : 1;
}
