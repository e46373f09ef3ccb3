/* `ovt train`: a training run with controlled rounding, written to a run
 * directory (trainer/run.h) that an auditor or arbiter can replay. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "cli/args.h"
#include "data/dataset.h"
#include "dp/dp.h"
#include "trainer/fault.h"
#include "dp/ranks.h"
#include "trainer/init.h"
#include "trainer/plot.h"
#include "trainer/rundata.h"
#include "trainer/run.h"
#include "trainer/schedule.h"
#include "trainer/state.h"
#include "trainer/train.h"

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
            "options:\n"
            "  --model NAME         gpt2-tiny (default), gpt2-small, or mlp-demo\n"
            "  --config FILE        start from the run config of another run (its config.bin: model,\n"
            "                       optimizer, schedule, batch, seed, b); later flags change it and\n"
            "                       the datasetHash comes from --data\n"
            "  --data FILE          GPT-2: a token file (ovt uint16 format, or raw bytes as\n"
            "                       byte-level tokens); MLP: an ovt samples file. Make them with\n"
            "                       `ovt data text YOUR.txt --out tokens.bin` (byte-level, for gpt2-tiny;\n"
            "                       with --bpe DIR GPT-2's BPE tokens, for gpt2-small)\n"
            "                       and `ovt data mlp --seed 1 --samples 1024 --out samples.bin`\n"
            "                       (mlp-demo's sizes); see `ovt data --help`\n"
            "  --out DIR            the run directory (created; must not hold a run unless --resume)\n"
            "  --steps N            training steps (default 100)\n"
            "  --batch B            sequences or samples per step (default 8)\n"
            "  --seq T              GPT-2 sequence length (default min(64, context))\n"
            "  --lr X               peak learning rate (default 0.001)\n"
            "  --lr-min X           learning rate at the last step (default --lr / 10; = --lr: constant)\n"
            "  --schedule KIND      the fall from --lr to --lr-min over the steps after warmup: cosine\n"
            "                       (default; lr_min + (lr - lr_min)(1 + cos(pi p))/2) or linear\n"
            "  --warmup N           linear warmup steps (default 0)\n"
            "  --weight-decay X     AdamW weight decay (default 0)\n"
            "  --clip X             global gradient-norm clip, 0 = off (default 1.0)\n"
            "  --seed N             seed of init and batch schedule (default 1)\n"
            "  --init-from FILE     fine-tune: start from the parameters in FILE instead of the seed's\n"
            "                       init (AdamW moments 0, step 0): an ovt checkpoint of a run with\n"
            "                       the same model shape, or an llm.c GPT-2 float32 weight file\n"
            "                       (gpt2_124M.bin); rounded to the grid; the config commits to them\n"
            "                       (init_hash), so --resume and --replay need the same FILE\n"
            "  --grid-bits B        grid width b, 24..32 (default 32: FP32)\n"
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
            "                       stops answering, as step K begins)\n"
            "  --fault-step K       the faulty step, 1..--steps (required with --inject-fault)\n"
            "  --fault-shard J      bitflip-shard: the shard, 0..S-1 (default 0)\n"
            "  --fault-rank r       kill-rank, hang-rank: the rank (default 0)\n");
}

struct train_args {
    const char *model, *data, *out, *backend, *replay, *init_from;
    krn_backend_kind backend_kind; /* parsed from backend */
    uint64_t steps;
    uint32_t every, ckpt_every;
    int threads;
    bool resume, json, nearest, print_state;
    ovt_hash run_id;
    trn_fault fault; /* testing only */
    trn_run_config rc;
    const float *init_params; /* --init-from, nparams floats; NULL: from the seed */
    size_t init_len;          /* bytes */
    double rank_timeout;      /* seconds, under mpirun */
    dp_ctx *dp;               /* under mpirun; NULL: one process */
    bool writer;              /* this process writes the run directory and prints (rank 0) */
};

/* Opens the run: a fresh one (config.bin, step-0 checkpoint) or, with
 * --resume, the latest checkpoint of the same config. */
static int open_run(const struct train_args *a, trn_state **st, trn_step_table *table)
{
    char path[4096];
    int rv;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t enc_len = trn_config_encode(enc, &a->rc);
    if ((rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "config.bin")))
        return rv;
    bool exists = access(path, F_OK) == 0;
    table->count = 0;
    if (!a->resume && !a->writer) {
        /* another rank of this job: rank 0 writes config.bin and the first checkpoint */
        if ((rv = trn_state_start(st, &a->rc, (const uint8_t *)a->init_params, a->init_len)))
            return rv;
        trn_state_hash(&table->steps[0].state_hash, *st);
        table->count = 1;
        return 0;
    }
    if (!a->resume) {
        if (exists)
            return ovt_fail(OVT_EINVAL, "%s already holds a run: pass --resume to continue it, or another --out",
                            a->out);
        if ((rv = ovt_write_atomic(path, enc, enc_len, 0644)) ||
            (rv = trn_state_start(st, &a->rc, (const uint8_t *)a->init_params, a->init_len)))
            return rv;
        trn_state_hash(&table->steps[0].state_hash, *st);
        table->count = 1;
        if ((rv = trn_run_path(path, sizeof path, a->out, "ckpt", 0, "ckpt")))
            return rv;
        return trn_checkpoint_write(*st, path);
    }
    uint8_t *old;
    size_t len;
    if ((rv = ovt_read_file(path, &old, &len, 4096)))
        return ovt_fail_wrap(rv, "--resume");
    bool same = len == enc_len && memcmp(old, enc, len) == 0;
    trn_run_config there;
    char diff[1024] = "";
    if (!same && trn_config_decode(&there, old, len) == 0)
        trn_config_diff(diff, sizeof diff, &there, &a->rc);
    free(old);
    if (!same)
        return ovt_fail(OVT_EINVAL,
                        "the run in %s was made with another config; pass the options it was made with "
                        "(%s)",
                        a->out, diff[0] ? diff : "its config.bin does not decode");
    uint64_t step = 0;
    if ((rv = trn_run_latest_checkpoint(a->out, UINT64_MAX, &step)) || (rv = trn_run_path(path, sizeof path, a->out, "ckpt", step, "ckpt")) ||
        (rv = trn_checkpoint_read(st, path)))
        return rv;
    if (memcmp((*st)->config_hash.b, table->config_hash.b, 32) != 0 || (*st)->step != step)
        return ovt_fail(OVT_EFORMAT, "%s does not belong to this run", path);
    trn_step_table old_table;
    if ((rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&old_table, path)))
        return rv;
    ovt_hash h;
    trn_state_hash(&h, *st);
    if (old_table.count < step + 1 || memcmp(old_table.config_hash.b, table->config_hash.b, 32) != 0 ||
        memcmp(old_table.steps[step].state_hash.b, h.b, 32) != 0) {
        trn_step_table_free(&old_table);
        return ovt_fail(OVT_EFORMAT, "%s disagrees with the checkpoint of step %llu", path,
                        (unsigned long long)step);
    }
    memcpy(table->steps, old_table.steps, (step + 1) * sizeof *table->steps);
    table->count = step + 1;
    trn_step_table_free(&old_table);
    return 0;
}

/* What this session's steps cost: wall time computing them and in the
 * exchanges with other processes, this process's peak memory. */
typedef struct {
    double step_seconds, comm_seconds;
} session_cost;

static int write_summary(const struct train_args *a, const trn_state *st, const trn_step_table *table,
                         const ovt_hash *root, uint64_t entries, uint64_t log_bytes, double first_loss,
                         double last_loss, uint64_t steps_now, const session_cost *cost)
{
    char ch[65], dh[65], sh[65], rh[65], rid[65];
    ovt_hex_encode(ch, st->config_hash.b, 32);
    ovt_hex_encode(dh, st->config.dataset_hash.b, 32);
    ovt_hex_encode(sh, table->steps[table->count - 1].state_hash.b, 32);
    ovt_hex_encode(rh, root->b, 32);
    ovt_hex_encode(rid, a->run_id.b, 32);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:f}", "model",
                          a->model, "config_hash", ch, "dataset_hash", dh, "steps", (json_int_t)st->step,
                          "grid_bits", (json_int_t)st->config.grid_bits, "backend", a->backend,
                          "final_state_hash", sh, "run_id", rid, "root", rh, "steps_this_session",
                          (json_int_t)steps_now, "log_entries_this_session", (json_int_t)entries,
                          "log_bytes_this_session", (json_int_t)log_bytes, "first_loss", first_loss,
                          "last_loss", last_loss);
    json_object_set_new(j, "schedule", json_string(trn_schedule_name(st->config.schedule)));
    json_object_set_new(j, "shards", json_integer(trn_config_shards(&st->config)));
    json_object_set_new(j, "processes", json_integer(dp_size(a->dp)));
    json_object_set_new(j, "step_seconds_this_session", json_real(cost->step_seconds));
    json_object_set_new(j, "comm_seconds_this_session", json_real(cost->comm_seconds));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    json_object_set_new(j, "max_rss_bytes_rank0", json_integer((json_int_t)ru.ru_maxrss * 1024));
    if (trn_config_has_init(&st->config)) {
        char ih[65];
        ovt_hex_encode(ih, st->config.init_hash.b, 32);
        json_object_set_new(j, "init_hash", json_string(ih));
    } else {
        json_object_set_new(j, "init_hash", json_null());
    }
    char *text = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    if (!text)
        return ovt_fail(OVT_ENOMEM, "out of memory for run.json");
    char path[4096];
    int rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "run.json");
    if (!rv)
        rv = ovt_write_atomic(path, text, strlen(text), 0644);
    if (!rv && a->json)
        printf("%s\n", text);
    else if (!rv)
        printf("\nrun %s: %llu steps, configHash %s\nfinal stateHash %s\nstep Merkle root %s (runId %s)\n",
               a->out, (unsigned long long)st->step, ch, sh, rh, rid);
    free(text);
    return rv;
}

/* Writes loss.csv and loss.svg of the run from its rows so far. */
static int write_loss(const struct train_args *a, const trn_loss_row *rows, size_t n)
{
    char path[4096], title[256];
    snprintf(title, sizeof title, "ovt train %s: loss per step", a->model);
    int rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "loss.csv");
    if (!rv)
        rv = trn_loss_csv_write(path, rows, n);
    if (!rv)
        rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "loss.svg");
    return rv ? rv : trn_loss_svg_write(path, rows, n, title);
}

/* The rows of steps 1..upto kept from an earlier session (--resume). */
static int resume_loss(const struct train_args *a, trn_loss_row *rows, size_t *n, uint64_t upto)
{
    char path[4096];
    trn_loss_row *old;
    size_t count;
    *n = 0;
    int rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "loss.csv");
    if (rv || access(path, F_OK) != 0)
        return rv;
    if ((rv = trn_loss_csv_read(path, &old, &count)))
        return rv;
    for (size_t i = 0; i < count && old[i].step <= upto && *n < upto; i++)
        rows[(*n)++] = old[i];
    free(old);
    return 0;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Under mpirun every rank learns whether any rank failed (dp_agree):
 * a failure is then every rank's (*together), and they stop together. */
static int agree(const struct train_args *a, int rv, uint64_t step, bool *together)
{
    if (a->dp == NULL)
        return rv;
    rv = dp_agree(a->dp, rv, step);
    if (rv)
        *together = true;
    return rv;
}

/* ranks.json (dp/ranks.h): which process computes which shard from
 * step `from` on. Written by rank 0; every rank returns its result. */
static int record_ranks(const struct train_args *a, const trn_run_config *rc, uint64_t from)
{
    if (!a->writer)
        return 0;
    int R = dp_size(a->dp);
    char(*hosts)[DP_HOST_MAX] = calloc((size_t)R, sizeof *hosts);
    if (!hosts)
        return ovt_fail(OVT_ENOMEM, "out of memory for %d host names", R);
    int rv = dp_hosts(a->dp, hosts);
    if (!rv)
        rv = dp_ranks_record(a->out, trn_config_shards(rc), from, R, (const char(*)[DP_HOST_MAX])hosts);
    free(hosts);
    return rv;
}

/* The stateHash of the state st holds, begun after its step
 * (trn_state_hash_begin), into the step table, which then counts the step;
 * then every rank checks it and --print-state prints it. Nothing to do when
 * no hash is running. Steps are hashed in order, so the table's count is
 * the hashed step's successor. */
static int step_hashed(const struct train_args *a, trn_state *st, trn_step_table *table, session_cost *cost,
                       bool *together)
{
    ovt_hash h;
    uint64_t i;
    if (!trn_state_hash_end(st, &h, &i))
        return 0;
    table->steps[i].state_hash = h;
    table->count = i + 1;
    struct timespec c0;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    int rv;
    if (a->dp && (rv = dp_check_state(a->dp, &table->steps[i].state_hash, i))) {
        *together = true; /* every rank holds the same answer */
        return rv;
    }
    cost->comm_seconds += seconds_since(&c0);
    if (a->print_state && a->writer) {
        char hx[65];
        ovt_hex_encode(hx, table->steps[i].state_hash.b, 32);
        printf("state %llu %s\n", (unsigned long long)i, hx);
    }
    return 0;
}

/* The run. Under mpirun (a->dp) every rank computes; only the writer (rank
 * 0) writes the run directory and prints. A failure that every rank shares
 * sets *together; any other is this rank's alone (the caller then ends the
 * job). */
static int train(const struct train_args *a, bool *together)
{
    trn_run_config rc = a->rc;
    trn_run_data data;
    trn_state *st = NULL;
    trn_workspace *w = NULL;
    krn_ctx *ctx = NULL;
    krn_rlog *log = krn_rlog_new();
    trn_step_table table = {0};
    trn_loss_row *rows = NULL;
    size_t nrows = 0;
    char path[4096];
    int rv;
    if (!log)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    float *init_params = NULL;
    size_t init_n = 0;
    if ((rv = trn_run_data_load(&data, a->data, &rc, 1)) || (rv = trn_config_check(&rc)))
        goto done;
    if (a->init_from) {
        if ((rv = trn_init_load(&init_params, &init_n, &rc, a->init_from)))
            goto done;
        ovt_sha256(&rc.init_hash, init_params, init_n * sizeof(float));
    } else if (trn_config_has_init(&rc)) {
        rv = ovt_fail(OVT_EINVAL, "the run config (--config) starts from given parameters (init_hash set): pass "
                                  "them with --init-from FILE");
        goto done;
    }
    struct train_args args = *a;
    args.rc = rc;
    args.init_params = init_params;
    args.init_len = init_n * sizeof(float);
    trn_config_hash(&table.config_hash, &rc);
    table.steps = calloc(a->steps + 1, sizeof *table.steps);
    rows = calloc(a->steps + 1, sizeof *rows);
    if (!table.steps || !rows) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %llu steps", (unsigned long long)a->steps);
        goto done;
    }
    if (a->writer) {
        if ((rv = ovt_mkdirs(a->out, 0755)))
            goto done;
        snprintf(path, sizeof path, "%s/logs", a->out);
        if ((rv = ovt_mkdirs(path, 0755)))
            goto done;
        snprintf(path, sizeof path, "%s/ckpt", a->out);
        if ((rv = ovt_mkdirs(path, 0755)))
            goto done;
    }
    if ((rv = agree(a, open_run(&args, &st, &table), 0, together)))
        goto done;
    if (st->step > a->steps) {
        rv = ovt_fail(OVT_EINVAL, "the run is already at step %llu, past --steps %llu",
                      (unsigned long long)st->step, (unsigned long long)a->steps);
        goto done;
    }
    krn_mode mode = a->replay ? KRN_REPLAY : a->nearest ? KRN_NEAREST : KRN_RECORD;
    krn_config kc = {.backend = a->backend_kind, .mode = mode, .grid_bits = (int)rc.grid_bits,
                     .shuffle_seed = rc.seed, .threads = a->threads};
    if ((rv = krn_ctx_new(&ctx, &kc)) || (rv = trn_workspace_new(&w, &rc)))
        goto done;
    if (a->fault.kind == TRN_FAULT_BITFLIP_SHARD)
        trn_workspace_fault_shard(w, a->fault.step, a->fault.shard);
    if (!a->json && a->writer && a->dp)
        printf("ovt train: %d processes (mpirun), this one rank 0 on %s, rank timeout %g s\n", dp_size(a->dp),
               dp_host(a->dp), a->rank_timeout);
    char shards_note[32];
    snprintf(shards_note, sizeof shards_note, " in %u shards", trn_config_shards(&rc));
    if (!a->json && a->writer)
        printf("ovt train: %s, %zu parameters, batch %u x %u%s, b = %u, backend %s, steps %llu..%llu -> %s\n"
               "  lr %g -> %g (%s after %u warmup steps)%s%s\n",
               a->model, st->layout.nparams, rc.batch_size, rc.seq_len ? rc.seq_len : 1,
               trn_config_shards(&rc) > 1 ? shards_note : "", rc.grid_bits, a->backend,
               (unsigned long long)st->step + 1, (unsigned long long)a->steps, a->out, rc.lr, rc.lr_min,
               trn_schedule_name(rc.schedule), rc.warmup_steps, a->init_from ? ", starting from " : "",
               a->init_from ? a->init_from : "");
    uint64_t entries = 0, log_bytes = 0, start = st->step;
    if (trn_config_shards(&rc) > 1 && (rv = agree(a, record_ranks(a, &rc, start + 1), start, together)))
        goto done;
    double first_loss = 0, last_loss = 0;
    if (a->writer && (rv = resume_loss(&args, rows, &nrows, start)))
        goto done;
    struct timespec session_t0;
    clock_gettime(CLOCK_MONOTONIC, &session_t0);
    session_cost cost = {0};
    while (st->step < a->steps) {
        uint64_t i = st->step + 1;
        trn_step_batch batch;
        if ((rv = trn_step_batch_get(&batch, &data, &rc, i)))
            goto done;
        if (a->dp && (int)a->fault.rank == dp_rank(a->dp) && trn_fault_at(&a->fault, TRN_FAULT_KILL_RANK, i))
            raise(SIGKILL);
        while (a->dp && (int)a->fault.rank == dp_rank(a->dp) && trn_fault_at(&a->fault, TRN_FAULT_HANG_RANK, i))
            sleep(1); /* until mpirun ends the job */
        trn_step_info info = {0};
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (a->replay && !(rv = trn_run_path(path, sizeof path, a->replay, "logs", i, "rlog")))
            rv = krn_rlog_read_file(log, path);
        if (mode == KRN_NEAREST)
            krn_rlog_reset(log, i);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_POISONED_BATCH, i))
            trn_fault_poison(&batch.tb, &batch.sb, rc.model.vocab, rc.model.n_class);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_FORGED_LOG, i))
            krn_ctx_forge_next_site(ctx);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_SKIPPED_STEP, i)) {
            /* the log is the one step K writes (an empty one would be a
             * log with missing entries, fraud under contract version 2:
             * this fault is about the state); the update is discarded */
            size_t bytes = 3 * st->layout.nparams * sizeof(float);
            float *keep = malloc(bytes);
            if (!keep)
                rv = ovt_fail(OVT_ENOMEM, "out of memory for a copy of state %llu", (unsigned long long)(i - 1));
            if (!rv) {
                memcpy(keep, st->mem, bytes);
                rv = trn_train_step_dp(ctx, w, st, &batch.view, log, a->dp, &info);
                memcpy(st->mem, keep, bytes);
                free(keep);
                st->step = i;
            }
        } else if (!rv) {
            rv = trn_train_step_dp(ctx, w, st, &batch.view, mode == KRN_NEAREST ? NULL : log, a->dp, &info);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (!rv && !isfinite(info.loss))
            rv = ovt_fail(OVT_ENUMERIC, "the loss is %g", (double)info.loss);
        if (rv == OVT_ENUMERIC)
            rv = ovt_fail_wrap(rv, "step %llu diverged (lower --lr or keep --clip on); nothing of step %llu was "
                                   "written, the run's files stop at its last checkpoint",
                               (unsigned long long)i, (unsigned long long)i);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_FORGED_LOG, i) && !krn_ctx_forged(ctx))
            rv = ovt_fail(OVT_EINVAL, "--inject-fault forged-log: no element of step %llu could be forged",
                          (unsigned long long)i);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_BITFLIP, i))
            trn_fault_bitflip(st);
        if (!rv && trn_fault_at(&a->fault, TRN_FAULT_OMITTED_LOG, i))
            krn_rlog_drop_sites_from(log, 0); /* the entries go; a sharded step's shard table stays */
        cost.step_seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        cost.comm_seconds += info.comm_seconds;
        struct timespec c0;
        clock_gettime(CLOCK_MONOTONIC, &c0);
        rv = agree(a, rv, i, together);
        table.steps[i].batch_hash = batch.hash;
        trn_step_batch_free(&batch);
        if (rv)
            goto done;
        /* rank 0's log becomes the whole step's (every rank's entries) */
        if (a->dp && (rv = agree(a, dp_merge_log(a->dp, log, i), i, together)))
            goto done;
        cost.comm_seconds += seconds_since(&c0);
        size_t len = 0;
        if (a->writer) {
            uint8_t *bytes;
            if ((rv = krn_rlog_encode(log, &bytes, &len)))
                goto done;
            ovt_sha256(&table.steps[i].log_hash, bytes, len);
            rv = trn_run_path(path, sizeof path, a->out, "logs", i, "rlog");
            if (!rv)
                rv = ovt_write_atomic(path, bytes, len, 0644);
            free(bytes);
            if (rv)
                goto done;
        }
        /* step i's stateHash runs in the background during step i + 1's
         * forward and backward; the optimizer step waits for it */
        if ((rv = step_hashed(a, st, &table, &cost, together)) || (rv = trn_state_hash_begin(st)))
            goto done;
        entries += krn_rlog_nentries(log);
        log_bytes += len;
        if (i == start + 1)
            first_loss = info.loss;
        last_loss = info.loss;
        rows[nrows++] = (trn_loss_row){.step = i, .loss = info.loss, .lr = info.lr, .grad_norm = info.grad_norm,
                                       .log_entries = krn_rlog_nentries(log)};
        bool ckpt = (a->ckpt_every && i % a->ckpt_every == 0) || i == a->steps;
        if (ckpt && (rv = step_hashed(a, st, &table, &cost, together))) /* every rank: it checks */
            goto done;
        if (a->writer && ckpt) {
            if ((rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "steps.bin")) ||
                (rv = trn_step_table_write(&table, path)) ||
                (rv = trn_run_path(path, sizeof path, a->out, "ckpt", i, "ckpt")) || (rv = trn_checkpoint_write(st, path)) ||
                (rv = write_loss(a, rows, nrows)))
                goto done;
        }
        if (!a->json && a->writer && a->every && (i % a->every == 0 || i == a->steps)) {
            printf("step %6llu/%llu  loss %.4f  lr %.3g  grad norm %.3g  %.2f steps/s  log %llu entries "
                   "(%.0f per step so far), %zu bytes  step %.3f s\n",
                   (unsigned long long)i, (unsigned long long)a->steps, (double)info.loss, (double)info.lr,
                   (double)info.grad_norm, (double)(i - start) / seconds_since(&session_t0),
                   (unsigned long long)krn_rlog_nentries(log), (double)entries / (double)(i - start), len,
                   (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
            fflush(stdout);
        }
    }
    if ((rv = step_hashed(a, st, &table, &cost, together)))
        goto done;
    if (!a->writer) {
        rv = 0; /* rank 0 writes the rest */
        goto done;
    }
    if ((rv = trn_run_path(path, sizeof path, a->out, NULL, 0, "steps.bin")) || (rv = trn_step_table_write(&table, path)))
        goto done;
    ovt_hash root;
    if ((rv = trn_step_table_root(&root, &table, &a->run_id)))
        goto done;
    rv = write_summary(&args, st, &table, &root, entries, log_bytes, first_loss, last_loss, st->step - start, &cost);
done:
    free(init_params);
    free(rows);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    trn_state_free(st);
    trn_step_table_free(&table);
    trn_run_data_free(&data);
    return rv;
}

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
    if (rv) {
        fprintf(stderr, "ovt train: --config %s: %s\n", path, ovt_errmsg());
        return rv;
    }
    a->rc = rc;
    a->model = rc.model.kind == TRN_MODEL_MLP ? "mlp (--config)" : "gpt2 (--config)";
    return 0;
}

enum { O_MODEL = 256, O_DATA, O_OUT, O_STEPS, O_BATCH, O_SEQ, O_LR, O_LR_MIN, O_WARMUP, O_WD, O_CLIP, O_SEED,
       O_GRID, O_BACKEND, O_THREADS, O_CKPT, O_RESUME, O_RUN_ID, O_EVERY, O_JSON, O_REPLAY, O_NEAREST,
       O_PRINT_STATE, O_FAULT, O_FAULT_STEP, O_CONFIG, O_SCHEDULE, O_INIT_FROM, O_RANK_TIMEOUT, O_SHARDS,
       O_FAULT_SHARD, O_FAULT_RANK };

int cmd_train(int argc, char **argv)
{
    static const struct option longopts[] = {
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
        {"config", required_argument, NULL, O_CONFIG},   {"inject-fault", required_argument, NULL, O_FAULT}, {"fault-step", required_argument, NULL, O_FAULT_STEP},
        {"shards", required_argument, NULL, O_SHARDS},   {"fault-shard", required_argument, NULL, O_FAULT_SHARD},
        {"fault-rank", required_argument, NULL, O_FAULT_RANK},
        {"help", no_argument, NULL, 'h'},                {NULL, 0, NULL, 0}};
    struct train_args a = {.model = "gpt2-tiny", .backend = "cpu", .steps = 100, .every = 10, .ckpt_every = 50,
                           .rank_timeout = 600, .writer = true};
    /* First pass: the model, which sets the defaults the other flags change. */
    for (int k = 1; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--model"))
            a.model = argv[k + 1];
    trn_model_config m;
    if (trn_model_preset(&m, a.model)) {
        fprintf(stderr, "ovt train: %s\n", ovt_errmsg());
        return 2;
    }
    trn_config_default(&a.rc, &m);
    a.rc.schedule = TRN_SCHEDULE_COSINE; /* new runs: warmup then cosine (a --config keeps its own) */
    bool have_config = false;
    for (int k = 1; k + 1 < argc; k++)
        if (!strcmp(argv[k], "--config")) {
            if (load_config_file(&a, argv[k + 1]))
                return 2;
            have_config = true;
        }
    bool lr_min_set = have_config; /* the config's own lr_min */
    uint64_t v;
    double x;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        const char *flag = cli_arg_name(longopts, c);
        switch (c) {
        case 'h': train_usage(stdout); return 0;
        case O_MODEL:
        case O_CONFIG: break;
        case O_DATA: a.data = optarg; break;
        case O_INIT_FROM: a.init_from = optarg; break;
        case O_SCHEDULE:
            if (trn_schedule_parse(&a.rc.schedule, optarg)) {
                fprintf(stderr, "ovt train: --schedule: %s\n", ovt_errmsg());
                return 2;
            }
            break;
        case O_OUT: a.out = optarg; break;
        case O_STEPS:
            if (cli_arg_u64("train", flag, optarg, 1, 100000000, &a.steps)) return 2;
            break;
        case O_BATCH:
            if (cli_arg_u64("train", flag, optarg, 1, 1u << 20, &v)) return 2;
            a.rc.batch_size = (uint32_t)v;
            break;
        case O_SEQ:
            if (cli_arg_u64("train", flag, optarg, 1, 1u << 16, &v)) return 2;
            a.rc.seq_len = (uint32_t)v;
            break;
        case O_LR:
            if (cli_arg_real("train", flag, optarg, 0, 10, &a.rc.lr)) return 2;
            break;
        case O_LR_MIN:
            if (cli_arg_real("train", flag, optarg, 0, 10, &a.rc.lr_min)) return 2;
            lr_min_set = true;
            break;
        case O_WARMUP:
            if (cli_arg_u64("train", flag, optarg, 0, UINT32_MAX, &v)) return 2;
            a.rc.warmup_steps = (uint32_t)v;
            break;
        case O_WD:
            if (cli_arg_real("train", flag, optarg, 0, 1, &a.rc.weight_decay)) return 2;
            break;
        case O_CLIP:
            if (cli_arg_real("train", flag, optarg, 0, 1e30, &x)) return 2;
            a.rc.grad_clip = x;
            break;
        case O_SEED:
            if (cli_arg_u64("train", flag, optarg, 0, UINT64_MAX, &a.rc.seed)) return 2;
            break;
        case O_GRID:
            if (cli_arg_u64("train", flag, optarg, 24, 32, &v)) return 2;
            a.rc.grid_bits = (uint32_t)v;
            break;
        case O_BACKEND:
            if (krn_backend_parse(&a.backend_kind, optarg)) {
                fprintf(stderr, "ovt train: --backend must be cpu, ref, shuffle or cuda, got '%s'\n", optarg);
                return 2;
            }
            a.backend = optarg;
            break;
        case O_THREADS:
            if (cli_arg_u64("train", flag, optarg, 0, 256, &v)) return 2;
            a.threads = (int)v;
            break;
        case O_CKPT:
            if (cli_arg_u64("train", flag, optarg, 0, UINT32_MAX, &v)) return 2;
            a.ckpt_every = (uint32_t)v;
            break;
        case O_RESUME: a.resume = true; break;
        case O_RUN_ID:
            if (ovt_hex_decode(a.run_id.b, 32, optarg)) {
                fprintf(stderr, "ovt train: --run-id expects 32 bytes of hex: %s\n", ovt_errmsg());
                return 2;
            }
            break;
        case O_EVERY:
            if (cli_arg_u64("train", flag, optarg, 0, UINT32_MAX, &v)) return 2;
            a.every = (uint32_t)v;
            break;
        case O_JSON: a.json = true; break;
        case O_REPLAY: a.replay = optarg; break;
        case O_NEAREST: a.nearest = true; break;
        case O_PRINT_STATE: a.print_state = true; break;
        case O_RANK_TIMEOUT:
            if (cli_arg_real("train", flag, optarg, 0.001, 1e6, &a.rank_timeout)) return 2;
            break;
        case O_FAULT:
            if (trn_fault_parse(&a.fault.kind, optarg)) {
                fprintf(stderr, "ovt train: --inject-fault: %s\n", ovt_errmsg());
                return 2;
            }
            break;
        case O_FAULT_STEP:
            if (cli_arg_u64("train", flag, optarg, 1, 100000000, &a.fault.step)) return 2;
            break;
        case O_SHARDS:
            if (cli_arg_u64("train", flag, optarg, 1, TRN_MAX_SHARDS, &v)) return 2;
            a.rc.shards = (uint32_t)v;
            break;
        case O_FAULT_SHARD:
            if (cli_arg_u64("train", flag, optarg, 0, TRN_MAX_SHARDS - 1, &v)) return 2;
            a.fault.shard = (uint32_t)v;
            break;
        case O_FAULT_RANK:
            if (cli_arg_u64("train", flag, optarg, 0, 65535, &v)) return 2;
            a.fault.rank = (uint32_t)v;
            break;
        default:
            return cli_arg_unknown("train", argv[optind - 1]);
        }
    }
    if (cli_arg_none_left("train", argc, argv))
        return 2;
    if (!a.data || !a.out) {
        fprintf(stderr, "ovt train: --data and --out are required; see `ovt train --help`\n");
        return 2;
    }
    if (a.replay && a.nearest) {
        fprintf(stderr, "ovt train: --replay and --nearest exclude each other\n");
        return 2;
    }
    if ((a.fault.kind != TRN_FAULT_NONE) != (a.fault.step != 0) || a.fault.step > a.steps) {
        fprintf(stderr, "ovt train: --inject-fault KIND and --fault-step K (1..--steps) go together\n");
        return 2;
    }
    if (a.rc.batch_size % trn_config_shards(&a.rc) != 0) {
        fprintf(stderr, "ovt train: --shards %u must divide --batch %u\n", trn_config_shards(&a.rc), a.rc.batch_size);
        return 2;
    }
    if (a.fault.kind == TRN_FAULT_BITFLIP_SHARD && a.fault.shard >= trn_config_shards(&a.rc)) {
        fprintf(stderr, "ovt train: --fault-shard %u: the run has %u shard(s) (--shards S, J in 0..S-1)\n",
                a.fault.shard, trn_config_shards(&a.rc));
        return 2;
    }
    if (!lr_min_set)
        a.rc.lr_min = a.rc.lr / 10;
    a.rc.decay_steps = a.rc.lr_min != a.rc.lr ? (uint32_t)a.steps : 0;
    if (dp_launched()) {
        if (a.replay) {
            fprintf(stderr, "ovt train: --replay runs in one process: start it without mpirun\n");
            return 2;
        }
        if (dp_open(&a.dp, a.rank_timeout)) {
            fprintf(stderr, "ovt train: %s\n", ovt_errmsg());
            return 1;
        }
        a.writer = dp_rank(a.dp) == 0;
        if (trn_config_shards(&a.rc) % (uint32_t)dp_size(a.dp) != 0) {
            if (a.writer)
                fprintf(stderr, "ovt train: %u shard(s) cannot be split evenly over %d processes: the number of "
                                "processes (mpirun -np) must divide --shards\n",
                        trn_config_shards(&a.rc), dp_size(a.dp));
            dp_close(a.dp);
            return 2;
        }
    }
    bool together = false;
    int rv = train(&a, &together);
    if (rv && a.dp && !together) {
        /* only this rank knows: the others would wait for it until the timeout */
        fprintf(stderr, "ovt train: rank %d (host %s): %s\n", dp_rank(a.dp), dp_host(a.dp), ovt_errmsg());
        dp_abort(a.dp, 1);
    }
    if (rv && a.writer)
        fprintf(stderr, "ovt train: %s\n", ovt_errmsg());
    dp_close(a.dp);
    return rv ? 1 : 0;
}
