/* `ovt train`: a training run with controlled rounding, written to a run
 * directory (trainer/run.h) that an auditor or arbiter can replay. The
 * command reads its flags, opens the processes under mpirun and prints;
 * the run itself is trn_loop_run (trainer/loop.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/fileio.h"
#include "dp/dp.h"
#include "modelio/import.h"
#include "trainer/loop.h"
#include "trainer/rundata.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: ovt train --data FILE --out DIR [OPTIONS]\n"
            "\n"
            "Trains a model with controlled rounding (FP64 compute, every result rounded to the\n"
            "grid, near-midpoint decisions written to a rounding log per step) and writes the run\n"
            "to DIR: config.bin, logs/step-N.rlog, ckpt/step-N.ckpt, steps.bin (stateHash,\n"
            "batchHash, logHash of every step), run.json with the step Merkle root, and the\n"
            "loss curve as loss.csv and loss.svg (written at every checkpoint and at the end).\n"
            "\n"
            "options:\n");
    /* the presets as the table holds them (trainer/config.c), by family */
    static const char *const family[] = {"MLP", "GPT-2", "Llama", "ResNet"};
    static const trn_model_kind kinds[] = {TRN_MODEL_MLP, TRN_MODEL_GPT2, TRN_MODEL_LLAMA, TRN_MODEL_RESNET};
    fprintf(f, "  --model NAME         the model (default gpt2-tiny):\n");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        char names[256];
        trn_model_preset_list(names, sizeof names, (int)kinds[k], 0);
        fprintf(f, "                         %-7s %s\n", family[k], names);
    }
    fprintf(f,
            "                       (a language model trains on tokens of its own vocabulary: gpt2-small's\n"
            "                       50257 from `ovt data text --tokenizer gpt2`, llama-15m's and\n"
            "                       llama-110m's 32000 (llama2.c's stories shapes) from --tokenizer llama2,\n"
            "                       the tiny ones' 256 from plain `ovt data text`; resnet-mini and\n"
            "                       resnet-50-block: 1x28x28 images, resnet-18 and resnet-50: CIFAR's\n"
            "                       3x32x32, `ovt data cifar`)\n"
            "  --force              train a language model on a token file of another vocabulary\n"
            "                       (refused otherwise: byte tokens for gpt2-small train 256 of its\n"
            "                       50257 embeddings); the run then says so as it starts\n"
            "  --config FILE        start from the run config of another run (its config.bin: model,\n"
            "                       optimizer, schedule, batch, seed, b); later flags change it and\n"
            "                       the datasetHash comes from --data\n"
            "  --data FILE          GPT-2, Llama: a token file (ovt uint16 format, or raw bytes as\n"
            "                       byte-level tokens); MLP: an ovt samples or image file; ResNet: an\n"
            "                       image file. Make them with\n"
            "                       `ovt data text YOUR.txt --out tokens.bin` (byte-level, for gpt2-tiny\n"
            "                       and llama-tiny; with --tokenizer gpt2 GPT-2's BPE tokens, for\n"
            "                       gpt2-small; --tokenizer llama2 for llama-15m and llama-110m)\n"
            "                       and `ovt data mlp --seed 1 --samples 1024 --out samples.bin`\n"
            "                       (mlp-demo's sizes); mlp-mnist and resnet-mini: an ovt image file\n"
            "                       of 28x28 images, 10 classes (`ovt data idx`); see `ovt data --help`\n"
            "  --out DIR            the run directory (created; must not hold a run unless --resume)\n"
            "  --steps N            training steps (default 100)\n"
            "  --batch B            sequences or samples per step (default 8)\n"
            "  --seq T              GPT-2 and Llama sequence length (default min(64, context))\n"
            "  --lr X               peak learning rate (default 0.001)\n"
            "  --lr-min X           learning rate at the last step (default --lr / 10; = --lr: constant)\n"
            "  --schedule KIND      the fall from --lr to --lr-min over the steps after warmup: cosine\n"
            "                       (default; lr_min + (lr - lr_min)(1 + cos(pi p))/2) or linear\n"
            "  --warmup N           linear warmup steps (default 0)\n"
            "  --weight-decay X     AdamW weight decay (default 0)\n"
            "  --clip X             global gradient-norm clip, 0 = off (default 1.0)\n"
            "  --seed N             seed of init, batch schedule and augmentation (default 1)\n"
            "  --augment-crop P     ResNet only: each image of a step's batch shifted by dx, dy drawn\n"
            "                       in -P..P (a random crop of the image zero-padded by P), P 1..8 and\n"
            "                       below the image side (default 0: off)\n"
            "  --augment-flip       ResNet only: each image flipped left to right with probability 1/2\n"
            "                       (the crops and flips from the seed: every party draws the same;\n"
            "                       docs/trainer.md, \"Data augmentation\")\n"
            "  --no-augment-flip    no flip, where --config's run had one (--augment-crop 0: no crop)\n"
            "  --init-from FILE     fine-tune: start from the parameters in FILE instead of the seed's\n"
            "                       init (AdamW moments 0, step 0): an ovt checkpoint of a run with\n"
            "                       the same model shape, or an llm.c GPT-2 float32 weight file\n"
            "                       (gpt2_124M.bin); rounded to the grid; the config commits to them\n"
            "                       (init_hash), so --resume and --replay need the same FILE\n"
            "  --grid-bits B        grid width b, 24..32 (default 32: FP32)\n"
            "  --band-rules N       what verifiers demand of the log (default 2: the canonical\n"
            "                       re-execution and rule 3; 1: rule 2, as every run before it;\n"
            "                       docs/numeric-contract.md section 10)\n"
            "  --state-hash N       how the stateHash covers a tensor (default 3: the root of its\n"
            "                       tree of 64 KiB leaves, hashed on every thread, a leaf range\n"
            "                       provable with `ovt state-proof`; 1: one SHA-256 per tensor, as\n"
            "                       every run before it; docs/formats.md \"State and stateHash\")\n"
            "  --shards S           split each step's batch into S shards (S divides --batch; default\n"
            "                       1): each shard's gradient computed on its own, the exact mean of\n"
            "                       the S of them one site, their hashes in the log; under\n"
            "                       `mpirun -np R` (R divides S) each process computes S/R shards\n"
            "  --backend NAME       cpu (default), ref, shuffle, or cuda (a GPU; ovt built with CUDA);\n"
            "                       cpu computes its GEMMs with its own kernel (AVX-512, AVX2 or C,\n"
            "                       the best this CPU runs, the same bits on every one); env\n"
            "                       OVT_GEMM=blas uses OpenBLAS instead, with the same bits where it\n"
            "                       runs its Haswell kernel (OVT_GEMM=avx2 or c: a slower own path)\n"
            "  --threads N          cpu backend threads (default: the backend's)\n"
            "  --checkpoint-every K write a checkpoint every K steps (default 50; step 0 and the\n"
            "                       last step always)\n"
            "  --resume             continue the run in DIR from its latest checkpoint (the\n"
            "                       options must describe the same run)\n"
            "  --run-id HEX         32-byte runId for the root (default: zero; the contract assigns\n"
            "                       the real one when the run is opened)\n"
            "  --every N            a progress line every N steps (default 10; 0: none)\n"
            "  --replay DIR         replay the run in DIR instead of recording: every step applies\n"
            "                       DIR/logs/step-NNNNNNNN.rlog (REPLAY, a fraudulent entry fails the step);\n"
            "                       the state hashes must then equal DIR's (bench/gpu-check.sh)\n"
            "  --nearest            round to nearest without any log (the ablation; no entries)\n"
            "  --print-state        print \"state STEP HASH\" with the stateHash after every step\n"
            "  --json               print the summary as JSON (no progress lines)\n"
            "  --rank-timeout S     under mpirun: how long, in seconds, a process waits for the others\n"
            "                       at each exchange before it ends the job naming the ones missing\n"
            "                       (default 600; docs/data-parallel.md)\n"
            "  -h, --help           this help\n"
            "\n"
            "Data-parallel: `mpirun -np R ovt train --shards S ...` runs R processes that share each\n"
            "step's shards (the same bits for every R); every process reads the same --data, only\n"
            "rank 0 writes DIR (and DIR/ranks.json: who computed which shard) and prints, and every\n"
            "process checks after each step that all hold the same stateHash (docs/data-parallel.md).\n"
            "\n"
            "testing only (fault injection for `ovt devnet` and the tests; the run is then wrong\n"
            "at step K on purpose, see docs/devnet.md):\n"
            "  --inject-fault KIND  bitflip (a parameter bit flipped after step K), poisoned-batch\n"
            "                       (step K trained on changed targets, the schedule's batchHash\n"
            "                       kept), skipped-step (state K = state K-1, log K the step's) or\n"
            "                       forged-log (log K has a wrong-direction entry for an element\n"
            "                       1.25..1.5 tau from its midpoint, and the state follows it) or\n"
            "                       omitted-log (the logs of steps K.. are written empty; the\n"
            "                       states are the honest ones) or bitflip-shard (a bit of shard J's\n"
            "                       gradient flipped in step K, on the process computing it) or,\n"
            "                       under mpirun, kill-rank or hang-rank (rank r kills itself, or\n"
            "                       stops answering, as step K begins) or flip-entry (step K's\n"
            "                       direction entry for element E of site S names the other side,\n"
            "                       and the state follows it) or steer-up, steer-down (from step K\n"
            "                       on, every element rule 3 leaves free is rounded up, or down) or\n"
            "                       hidden-flip (log K turns a direction whose value lies tau/2 to\n"
            "                       tau/2 + delta from its midpoint, and the state follows it) or\n"
            "                       flip-output (bit 22 of element E of site S's output flipped in\n"
            "                       step K, every later site computing from it: a deep fault) or\n"
            "                       false-table (step K's log carries a false gradient hash for\n"
            "                       shard J in its shard table; the step itself is honest)\n"
            "  --fault-step K       the faulty step, 1..--steps (required with --inject-fault)\n"
            "  --fault-shard J      bitflip-shard, false-table: the shard, 0..S-1 (default 0)\n"
            "  --fault-rank r       kill-rank, hang-rank: the rank (default 0)\n"
            "  --fault-site S       flip-entry, flip-output: the site (`ovt rlog RUNDIR --step K --entries`)\n"
            "  --fault-element E    flip-entry, flip-output: the element (flip-output: modulo the site's size)\n"
            "  --fault-timeout S    hang-rank: every rank's rank timeout from step K on (default\n"
            "                       --rank-timeout), so that only the wait for the hung rank is short\n");
}

struct train_args {
    trn_loop_opts o;
    uint32_t every;     /* a progress line every N steps (0: none) */
    bool json, print_state;
    bool lr_min_set;    /* --lr-min, or a --config's own */
    bool state_hash_set; /* --state-hash, or a --config's own */
    double rank_timeout; /* seconds, under mpirun */
};

/* --config FILE: another run's config.bin as the starting config. */
static int load_config_file(struct train_args *a, const char *path)
{
    uint8_t *buf;
    size_t len;
    trn_run_config rc;
    int rv = ovt_read_file(path, &buf, &len, 4096);
    if (!rv) {
        rv = trn_config_decode(&rc, buf, len);
        free(buf);
    }
    if (rv)
        return ovt_fail_wrap(rv, "--config %s", path);
    a->o.config = rc;
    a->o.model = rc.model.kind == TRN_MODEL_MLP     ? "mlp (--config)"
                 : rc.model.kind == TRN_MODEL_LLAMA  ? "llama (--config)"
                 : rc.model.kind == TRN_MODEL_RESNET ? "resnet (--config)"
                                                     : "gpt2 (--config)";
    a->lr_min_set = true; /* the config's own lr_min */
    a->state_hash_set = true;
    return 0;
}

/* The flags that set the defaults the others change, before those: the
 * model (its preset), then --config. */
static int train_defaults(struct train_args *a, int argc, char **argv)
{
    for (int k = 1; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--model"))
            a->o.model = argv[k + 1];
    trn_model_config m;
    int rv = trn_model_preset(&m, a->o.model);
    if (rv)
        return rv;
    trn_config_default(&a->o.config, &m);
    a->o.config.schedule = TRN_SCHEDULE_COSINE; /* new runs: warmup then cosine (a --config keeps its own) */
    for (int k = 1; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--config") && (rv = load_config_file(a, argv[k + 1])))
            return rv;
    return 0;
}

enum { O_MODEL = 256, O_DATA, O_OUT, O_STEPS, O_BATCH, O_SEQ, O_LR, O_LR_MIN, O_WARMUP, O_WD, O_CLIP, O_SEED,
       O_GRID, O_BACKEND, O_THREADS, O_CKPT, O_RESUME, O_RUN_ID, O_EVERY, O_JSON, O_REPLAY, O_NEAREST,
       O_PRINT_STATE, O_FAULT, O_FAULT_STEP, O_CONFIG, O_SCHEDULE, O_INIT_FROM, O_RANK_TIMEOUT, O_SHARDS,
       O_FAULT_SHARD, O_FAULT_RANK, O_FAULT_TIMEOUT, O_BAND_RULES, O_STATE_HASH, O_FAULT_SITE,
       O_FAULT_ELEMENT, O_AUGMENT_CROP, O_AUGMENT_FLIP, O_NO_AUGMENT_FLIP, O_FORCE };

static const struct option train_longopts[] = {
    {"model", required_argument, NULL, O_MODEL},     {"data", required_argument, NULL, O_DATA},
    {"out", required_argument, NULL, O_OUT},         {"steps", required_argument, NULL, O_STEPS},
    {"batch", required_argument, NULL, O_BATCH},     {"seq", required_argument, NULL, O_SEQ},
    {"lr", required_argument, NULL, O_LR},           {"lr-min", required_argument, NULL, O_LR_MIN},
    {"warmup", required_argument, NULL, O_WARMUP},   {"weight-decay", required_argument, NULL, O_WD},
    {"clip", required_argument, NULL, O_CLIP},       {"seed", required_argument, NULL, O_SEED},
    {"grid-bits", required_argument, NULL, O_GRID},  {"backend", required_argument, NULL, O_BACKEND},
    {"threads", required_argument, NULL, O_THREADS}, {"checkpoint-every", required_argument, NULL, O_CKPT},
    {"resume", no_argument, NULL, O_RESUME},         {"run-id", required_argument, NULL, O_RUN_ID},
    {"every", required_argument, NULL, O_EVERY},     {"json", no_argument, NULL, O_JSON},
    {"replay", required_argument, NULL, O_REPLAY},   {"nearest", no_argument, NULL, O_NEAREST},
    {"print-state", no_argument, NULL, O_PRINT_STATE}, {"schedule", required_argument, NULL, O_SCHEDULE},
    {"init-from", required_argument, NULL, O_INIT_FROM}, {"rank-timeout", required_argument, NULL, O_RANK_TIMEOUT},
    {"config", required_argument, NULL, O_CONFIG},   {"inject-fault", required_argument, NULL, O_FAULT},
    {"fault-step", required_argument, NULL, O_FAULT_STEP}, {"shards", required_argument, NULL, O_SHARDS},
    {"fault-shard", required_argument, NULL, O_FAULT_SHARD}, {"fault-rank", required_argument, NULL, O_FAULT_RANK},
    {"fault-timeout", required_argument, NULL, O_FAULT_TIMEOUT}, {"band-rules", required_argument, NULL, O_BAND_RULES},
    {"state-hash", required_argument, NULL, O_STATE_HASH},
    {"fault-site", required_argument, NULL, O_FAULT_SITE}, {"fault-element", required_argument, NULL, O_FAULT_ELEMENT},
    {"augment-crop", required_argument, NULL, O_AUGMENT_CROP}, {"augment-flip", no_argument, NULL, O_AUGMENT_FLIP},
    {"no-augment-flip", no_argument, NULL, O_NO_AUGMENT_FLIP}, {"force", no_argument, NULL, O_FORCE},
    {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};

/* Flag c (named flag) with its value v; OVT_EINVAL with the parser's
 * message for a bad value. */
static int train_flag(struct train_args *a, int c, const char *flag, const char *v)
{
    trn_loop_opts *o = &a->o;
    trn_run_config *rc = &o->config;
    switch (c) {
    case O_MODEL:
    case O_CONFIG: return 0; /* train_defaults' */
    case O_DATA: o->data = v; return 0;
    case O_OUT: o->out = v; return 0;
    case O_INIT_FROM: o->init_from = v; return 0;
    case O_REPLAY: o->replay = v; return 0;
    case O_RESUME: o->resume = true; return 0;
    case O_FORCE: o->force_vocab = true; return 0;
    case O_NEAREST: o->nearest = true; return 0;
    case O_JSON: a->json = true; return 0;
    case O_PRINT_STATE: a->print_state = true; return 0;
    case O_SCHEDULE: return trn_schedule_parse(&rc->schedule, v) ? ovt_fail_wrap(OVT_EINVAL, "%s", flag) : 0;
    case O_STEPS: return ovt_parse_u64(&o->steps, flag, v, 1, 100000000);
    case O_BATCH: return ovt_parse_u32(&rc->batch_size, flag, v, 1, 1u << 20);
    case O_SEQ: return ovt_parse_u32(&rc->seq_len, flag, v, 1, 1u << 16);
    case O_LR: return ovt_parse_real(&rc->lr, flag, v, 0, 10);
    case O_LR_MIN: a->lr_min_set = true; return ovt_parse_real(&rc->lr_min, flag, v, 0, 10);
    case O_WARMUP: return ovt_parse_u32(&rc->warmup_steps, flag, v, 0, UINT32_MAX);
    case O_WD: return ovt_parse_real(&rc->weight_decay, flag, v, 0, 1);
    case O_CLIP: return ovt_parse_real(&rc->grad_clip, flag, v, 0, 1e30);
    case O_SEED: return ovt_parse_u64(&rc->seed, flag, v, 0, UINT64_MAX);
    case O_GRID: return ovt_parse_u32(&rc->grid_bits, flag, v, 24, 32);
    case O_BAND_RULES: return ovt_parse_u32(&rc->band_rules, flag, v, TRN_BAND_RULES_V1, TRN_BAND_RULES_CANONICAL);
    case O_STATE_HASH:
        a->state_hash_set = true;
        if (ovt_parse_u32(&rc->state_hash, flag, v, TRN_STATE_HASH_V1, TRN_STATE_HASH_TREE))
            return OVT_EINVAL;
        if (rc->state_hash != TRN_STATE_HASH_V1 && rc->state_hash != TRN_STATE_HASH_TREE)
            return ovt_fail(OVT_EINVAL, "--state-hash %u: 1 (a SHA-256 per tensor) or 3 (a tree per tensor)",
                            rc->state_hash);
        return 0;
    case O_SHARDS: return ovt_parse_u32(&rc->shards, flag, v, 1, TRN_MAX_SHARDS);
    case O_AUGMENT_CROP: return ovt_parse_u32(&rc->augment_crop, flag, v, 0, TRN_MAX_AUGMENT_CROP);
    case O_AUGMENT_FLIP: rc->augment_flip = 1; return 0;
    case O_NO_AUGMENT_FLIP: rc->augment_flip = 0; return 0;
    case O_BACKEND:
        o->backend = v;
        return krn_backend_parse(&o->backend_kind, v)
                   ? ovt_fail(OVT_EINVAL, "--backend must be cpu, ref, shuffle or cuda, got '%s'", v)
                   : 0;
    case O_THREADS: return ovt_parse_int(&o->threads, flag, v, 0, 256);
    case O_CKPT: return ovt_parse_u32(&o->ckpt_every, flag, v, 0, UINT32_MAX);
    case O_RUN_ID: return chain_parse_hash(&o->run_id, flag, v);
    case O_EVERY: return ovt_parse_u32(&a->every, flag, v, 0, UINT32_MAX);
    case O_RANK_TIMEOUT: return ovt_parse_real(&a->rank_timeout, flag, v, 0.001, 1e6);
    case O_FAULT: return trn_fault_parse(&o->fault.kind, v) ? ovt_fail_wrap(OVT_EINVAL, "%s", flag) : 0;
    case O_FAULT_STEP: return ovt_parse_u64(&o->fault.step, flag, v, 1, 100000000);
    case O_FAULT_SITE: return ovt_parse_u32(&o->fault.site, flag, v, 0, UINT32_MAX);
    case O_FAULT_ELEMENT: return ovt_parse_u64(&o->fault.element, flag, v, 0, UINT64_MAX);
    case O_FAULT_SHARD: return ovt_parse_u32(&o->fault.shard, flag, v, 0, TRN_MAX_SHARDS - 1);
    case O_FAULT_RANK: return ovt_parse_u32(&o->fault.rank, flag, v, 0, 65535);
    case O_FAULT_TIMEOUT: return ovt_parse_real(&o->fault.timeout_s, flag, v, 0.001, 1e6);
    default: return ovt_fail(OVT_EINVAL, "internal: no flag %d", c);
    }
}

/* What the flags ask for that no single flag can refuse; the schedule's
 * fall, which depends on --steps. */
static int train_check(struct train_args *a)
{
    trn_loop_opts *o = &a->o;
    trn_run_config *rc = &o->config;
    uint32_t S = trn_config_shards(rc);
    if (!o->data || !o->out)
        return ovt_fail(OVT_EINVAL, "--data and --out are required");
    if (o->replay && o->nearest)
        return ovt_fail(OVT_EINVAL, "--replay and --nearest exclude each other");
    if ((o->fault.kind != TRN_FAULT_NONE) != (o->fault.step != 0) || o->fault.step > o->steps)
        return ovt_fail(OVT_EINVAL, "--inject-fault KIND and --fault-step K (1..--steps) go together");
    if (o->fault.timeout_s > 0 && o->fault.kind != TRN_FAULT_HANG_RANK)
        return ovt_fail(OVT_EINVAL, "--fault-timeout goes with --inject-fault hang-rank");
    if (rc->batch_size % S != 0)
        return ovt_fail(OVT_EINVAL, "--shards %u must divide --batch %u", S, rc->batch_size);
    if ((rc->augment_crop || rc->augment_flip) && rc->model.kind != TRN_MODEL_RESNET)
        return ovt_fail(OVT_EINVAL, "--augment-crop and --augment-flip transform a ResNet's images (--model "
                                    "resnet-mini, resnet-18 or resnet-50); %s takes none", o->model);
    if ((o->fault.kind == TRN_FAULT_BITFLIP_SHARD || o->fault.kind == TRN_FAULT_FALSE_TABLE) && o->fault.shard >= S)
        return ovt_fail(OVT_EINVAL, "--fault-shard %u: the run has %u shard(s) (--shards S, J in 0..S-1)",
                        o->fault.shard, S);
    if (o->fault.kind == TRN_FAULT_FALSE_TABLE && S < 2)
        return ovt_fail(OVT_EINVAL, "--inject-fault false-table needs a sharded run (--shards S >= 2): "
                                    "a run of one shard has no shard table");
    if (!a->lr_min_set)
        rc->lr_min = rc->lr / 10;
    rc->decay_steps = rc->lr_min != rc->lr ? (uint32_t)o->steps : 0;
    return 0;
}

/* The report callbacks (trainer/loop.h): what the run prints on rank 0. */
static void report_begin(void *arg, const trn_loop_begin *b)
{
    const struct train_args *a = arg;
    const trn_loop_opts *o = &a->o;
    const trn_run_config *rc = b->config;
    if (b->data_vocab && b->data_vocab != rc->model.vocab)
        fprintf(stderr, "ovt train: warning: --force: %s's vocabulary is %u tokens, %s's are of %u symbols; %u of "
                        "its embeddings are never trained\n",
                o->model, rc->model.vocab, o->data, b->data_vocab,
                rc->model.vocab > b->data_vocab ? rc->model.vocab - b->data_vocab : 0);
    if (a->json)
        return;
    if (o->dp)
        printf("ovt train: %d processes (mpirun), this one rank 0 on %s, rank timeout %g s\n", dp_size(o->dp),
               dp_host(o->dp), a->rank_timeout);
    char shards_note[32], augment_note[64] = "";
    snprintf(shards_note, sizeof shards_note, " in %u shards", trn_config_shards(rc));
    if (rc->augment_crop || rc->augment_flip)
        snprintf(augment_note, sizeof augment_note, ", augmented (crop %u, flip %s)", rc->augment_crop,
                 rc->augment_flip ? "on" : "off");
    printf("ovt train: %s, %zu parameters, batch %u x %u%s%s, b = %u, backend %s, steps %llu..%llu -> %s\n"
           "  lr %g -> %g (%s after %u warmup steps)%s%s\n",
           o->model, b->nparams, rc->batch_size, rc->seq_len ? rc->seq_len : 1,
           trn_config_shards(rc) > 1 ? shards_note : "", augment_note, rc->grid_bits, o->backend,
           (unsigned long long)b->start + 1, (unsigned long long)o->steps, o->out, rc->lr, rc->lr_min,
           trn_schedule_name(rc->schedule), rc->warmup_steps, o->init_from ? ", starting from " : "",
           o->init_from ? o->init_from : "");
}

static void report_step(void *arg, const trn_loop_step *s)
{
    const struct train_args *a = arg;
    uint64_t i = s->step, steps = a->o.steps, done = s->step - s->start;
    if (a->json || !a->every || (i % a->every != 0 && i != steps))
        return;
    printf("step %6llu/%llu  loss %.4f  lr %.3g  grad norm %.3g  %.2f steps/s  log %llu entries "
           "(%.0f per step so far), %zu bytes  step %.3f s\n",
           (unsigned long long)i, (unsigned long long)steps, (double)s->loss, (double)s->lr, (double)s->grad_norm,
           (double)done / s->session_seconds, (unsigned long long)s->log_entries,
           (double)s->session_entries / (double)done, s->log_bytes, s->step_seconds);
    fflush(stdout);
}

static void report_state(void *arg, uint64_t step, const ovt_hash *state_hash)
{
    (void)arg;
    char hx[65];
    ovt_hex_encode(hx, state_hash->b, 32);
    printf("state %llu %s\n", (unsigned long long)step, hx);
}

/* One flag (given: the argument as typed): 0, or the exit status. */
static int train_take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    if (c < O_MODEL)
        return cli_arg_unknown("train", given);
    return train_flag(ctx, c, flag, arg) ? cli_usage_fail("train") : 0;
}

/* The flags into *a: 0, or the exit status of a usage error (or of --help). */
static int train_parse(struct train_args *a, int argc, char **argv, bool *help)
{
    if (train_defaults(a, argc, argv))
        return cli_usage_fail("train");
    int rv = cli_getopt(argc, argv, train_longopts, train_usage, train_take, a);
    if (rv >= 0) {
        *help = rv == 0;
        return rv;
    }
    if (cli_arg_none_left("train", argc, argv))
        return 2;
    return train_check(a) ? cli_usage_fail("train") : 0;
}

/* Under mpirun: the processes, and whether this one writes (rank 0). A
 * usage error is reported by rank 0 only. */
static int train_processes(struct train_args *a, bool *writer)
{
    *writer = true;
    if (!dp_launched())
        return 0;
    if (a->o.replay)
        return cli_usage_error("train", "--replay runs in one process: start it without mpirun");
    if (dp_open(&a->o.dp, a->rank_timeout))
        return cli_fail("train");
    *writer = dp_rank(a->o.dp) == 0;
    uint32_t S = trn_config_shards(&a->o.config);
    if (S % (uint32_t)dp_size(a->o.dp) == 0)
        return 0;
    ovt_fail(OVT_EINVAL, "%u shard(s) cannot be split evenly over %d processes: the number of processes "
                         "(mpirun -np) must divide --shards", S, dp_size(a->o.dp));
    if (*writer)
        cli_usage_fail("train");
    dp_close(a->o.dp);
    return 2;
}

/* --resume without --state-hash: the run's own stateHash version (a run
 * made before the tree resumes as v1), read from DIR/config.bin; a missing
 * or bad file is left for the resume to report. */
static void inherit_state_hash(trn_run_config *rc, const char *dir)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    trn_run_config there;
    if (!dir || trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin") ||
        ovt_read_file(path, &buf, &len, 4096))
        return;
    if (trn_config_decode(&there, buf, len) == 0)
        rc->state_hash = trn_config_state_hash(&there);
    free(buf);
}

int cmd_train(int argc, char **argv)
{
    struct train_args a = {.o = {.model = "gpt2-tiny", .backend = "cpu", .steps = 100, .ckpt_every = 50},
                           .every = 10, .rank_timeout = 600};
    bool help = false, writer;
    int rv = train_parse(&a, argc, argv, &help);
    if (rv || help)
        return rv;
    if (a.o.resume && !a.state_hash_set)
        inherit_state_hash(&a.o.config, a.o.out);
    if ((rv = train_processes(&a, &writer)))
        return rv;
    a.o.report = (trn_loop_report){.begin = report_begin, .step = report_step,
                                   .state = a.print_state ? report_state : NULL, .arg = &a};
    trn_loop_result res = {0};
    float *init_params = NULL;
    if (a.o.init_from) /* the file's format is modelio's; the loop takes the parameters */
        rv = trn_init_load(&init_params, &a.o.init_nparams, &a.o.config, a.o.init_from);
    a.o.init_params = init_params;
    if (!rv)
        rv = trn_loop_run(&a.o, &res);
    if (rv && a.o.dp && !res.together) {
        /* only this rank knows: the others would wait for it until the timeout */
        ovt_fail_wrap(rv, "rank %d (host %s)", dp_rank(a.o.dp), dp_host(a.o.dp));
        cli_fail("train");
        dp_abort(a.o.dp, 1);
    }
    if (rv && writer)
        cli_fail("train");
    if (!rv && res.summary && a.json) {
        printf("%s\n", res.summary);
    } else if (!rv && res.summary) {
        char ch[65], sh[65], rh[65], rid[65];
        ovt_hex_encode(ch, res.config_hash.b, 32);
        ovt_hex_encode(sh, res.final_state_hash.b, 32);
        ovt_hex_encode(rh, res.root.b, 32);
        ovt_hex_encode(rid, a.o.run_id.b, 32);
        printf("\nrun %s: %llu steps, configHash %s\nfinal stateHash %s\nstep Merkle root %s (runId %s)\n", a.o.out,
               (unsigned long long)res.steps, ch, sh, rh, rid);
    }
    trn_loop_result_free(&res);
    free(init_params);
    dp_close(a.o.dp);
    return rv ? 1 : 0;
}
