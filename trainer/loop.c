/* The training loop (trainer/loop.h). */
#include "trainer/loop.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "dp/dp.h"
#include "dp/ranks.h"
#include "trainer/init.h"
#include "trainer/plot.h"
#include "trainer/run.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

/* One session of a run: what trn_loop_run holds while it steps. */
typedef struct {
    const trn_loop_opts *o;
    trn_run_config rc;         /* o->config with the dataset's hash and init_hash */
    float *init_params;        /* the starting parameters as their blob, nparams little-endian floats; NULL: from the seed */
    size_t init_len;           /* bytes */
    bool writer;               /* this process writes the run directory and reports (rank 0) */
    bool together;             /* a failure every rank shares */
    trn_run_data data;
    trn_runner *run;           /* the steps: their ctx, workspace, log and state */
    trn_step_table table;
    trn_loss_row *rows;        /* steps 1..: the loss curve */
    size_t nrows;
    uint64_t start;            /* the step this session started from */
    uint64_t entries, log_bytes; /* of this session's logs */
    double first_loss, last_loss;
    double step_seconds, comm_seconds; /* computing the steps; in the exchanges with other processes */
    struct timespec t0;        /* the session's first step began */
} loop;

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* Under processes every rank learns whether any rank failed (dp_agree):
 * a failure is then every rank's (l->together), and they stop together. */
static int agree(loop *l, int rv, uint64_t step)
{
    if (l->o->dp == NULL)
        return rv;
    rv = dp_agree(l->o->dp, rv, step);
    if (rv)
        l->together = true;
    return rv;
}

/* A fresh run: config.bin, state 0 and its checkpoint. Another rank of the
 * job only starts state 0: rank 0 writes the files. */
static int open_new(loop *l, const char *config_path, const uint8_t *enc, size_t enc_len)
{
    char path[4096];
    int rv;
    if (l->writer && access(config_path, F_OK) == 0)
        return ovt_fail(OVT_EINVAL, "%s already holds a run: pass --resume to continue it, or another --out",
                        l->o->out);
    if ((l->writer && (rv = ovt_write_atomic(config_path, enc, enc_len, 0644))) ||
        (rv = trn_runner_start(l->run, (const uint8_t *)l->init_params, l->init_len)))
        return rv;
    trn_state_hash(&l->table.steps[0].state_hash, trn_runner_state(l->run));
    l->table.count = 1;
    if (!l->writer)
        return 0;
    if ((rv = trn_run_path(path, sizeof path, l->o->out, "ckpt", 0, "ckpt")))
        return rv;
    return trn_runner_save_checkpoint(l->run, path);
}

/* Opens the run: a fresh one, or (resume) the latest checkpoint of the
 * same config, with the step table up to it. */
static int open_run(loop *l)
{
    const char *out = l->o->out;
    char path[4096];
    int rv;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    size_t enc_len = trn_config_encode(enc, &l->rc);
    if ((rv = trn_run_path(path, sizeof path, out, NULL, 0, "config.bin")))
        return rv;
    l->table.count = 0;
    if (!l->o->resume)
        return open_new(l, path, enc, enc_len);
    uint8_t *old;
    size_t len;
    if ((rv = ovt_read_file(path, &old, &len, 4096)))
        return ovt_fail_wrap(rv, "--resume");
    bool same = len == enc_len && memcmp(old, enc, len) == 0;
    trn_run_config there;
    char diff[1024] = "";
    if (!same && trn_config_decode(&there, old, len) == 0)
        trn_config_diff(diff, sizeof diff, &there, &l->rc);
    free(old);
    if (!same)
        return ovt_fail(OVT_EINVAL,
                        "the run in %s was made with another config; pass the options it was made with "
                        "(%s)",
                        out, diff[0] ? diff : "its config.bin does not decode");
    uint64_t step = 0;
    if ((rv = trn_run_latest_checkpoint(out, UINT64_MAX, &step)) ||
        (rv = trn_run_path(path, sizeof path, out, "ckpt", step, "ckpt")) || (rv = trn_runner_load_checkpoint(l->run, path)))
        return rv;
    const trn_state *st = trn_runner_state(l->run);
    if (st->step != step)
        return ovt_fail(OVT_EFORMAT, "%s does not belong to this run", path);
    trn_step_table old_table;
    if ((rv = trn_run_path(path, sizeof path, out, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&old_table, path)))
        return rv;
    ovt_hash h;
    trn_state_hash(&h, st);
    if (old_table.count < step + 1 || memcmp(old_table.config_hash.b, l->table.config_hash.b, 32) != 0 ||
        memcmp(old_table.steps[step].state_hash.b, h.b, 32) != 0) {
        trn_step_table_free(&old_table);
        return ovt_fail(OVT_EFORMAT, "%s disagrees with the checkpoint of step %llu", path,
                        (unsigned long long)step);
    }
    memcpy(l->table.steps, old_table.steps, (step + 1) * sizeof *l->table.steps);
    l->table.count = step + 1;
    trn_step_table_free(&old_table);
    return 0;
}

/* The run config the session trains: the dataset's hash, and init_hash
 * from the given starting parameters. */
static int load_inputs(loop *l)
{
    const trn_loop_opts *o = l->o;
    int rv;
    if ((rv = trn_run_data_load(&l->data, o->data, &l->rc, 1)) || (rv = trn_config_check(&l->rc)))
        return rv;
    if (o->init_params) {
        size_t n = o->init_nparams;
        if (!(l->init_params = malloc(n * sizeof(float))))
            return ovt_fail(OVT_ENOMEM, "out of memory for %zu starting parameters", n);
        memcpy(l->init_params, o->init_params, n * sizeof(float));
        l->init_len = n * sizeof(float);
        ovt_swap_le32(l->init_params, n);
        ovt_sha256(&l->rc.init_hash, l->init_params, l->init_len);
    } else if (trn_config_has_init(&l->rc)) {
        return ovt_fail(OVT_EINVAL, "the run config (--config) starts from given parameters (init_hash set): pass "
                                    "them with --init-from FILE");
    }
    if (!o->force_vocab && (rv = trn_run_data_vocab_check(&l->data, &l->rc, o->model)))
        return ovt_fail_wrap(rv, "%s", o->data);
    return 0;
}

/* Everything the steps need: inputs, the run directory, the runner, the
 * opened run. */
static int loop_open(loop *l)
{
    const trn_loop_opts *o = l->o;
    char path[4096];
    int rv;
    if ((rv = load_inputs(l)))
        return rv;
    trn_config_hash(&l->table.config_hash, &l->rc);
    l->table.steps = calloc(o->steps + 1, sizeof *l->table.steps);
    l->rows = calloc(o->steps + 1, sizeof *l->rows);
    if (!l->table.steps || !l->rows)
        return ovt_fail(OVT_ENOMEM, "out of memory for %llu steps", (unsigned long long)o->steps);
    if (l->writer) {
        if ((rv = ovt_mkdirs(o->out, 0755)))
            return rv;
        snprintf(path, sizeof path, "%s/logs", o->out);
        if ((rv = ovt_mkdirs(path, 0755)))
            return rv;
        snprintf(path, sizeof path, "%s/ckpt", o->out);
        if ((rv = ovt_mkdirs(path, 0755)))
            return rv;
    }
    trn_runner_opts ro = {.backend = o->backend_kind,
                          .mode = o->replay ? KRN_REPLAY : o->nearest ? KRN_NEAREST : KRN_RECORD,
                          .threads = o->threads, .replay_dir = o->replay, .dp = o->dp, .fault = &o->fault,
                          .hash_later = true, .mem_guard = o->mem_guard};
    if ((rv = trn_runner_open(&l->run, &l->rc, &l->data, &ro)) || (rv = agree(l, open_run(l), 0)))
        return rv;
    uint64_t at = trn_runner_state(l->run)->step;
    if (at > o->steps)
        return ovt_fail(OVT_EINVAL, "the run is already at step %llu, past --steps %llu", (unsigned long long)at,
                        (unsigned long long)o->steps);
    l->start = at;
    return 0;
}

/* ranks.json (dp/ranks.h): which process computes which shard from step
 * `from` on. Written by rank 0; every rank returns its result. */
static int record_ranks(const loop *l, uint64_t from)
{
    if (!l->writer)
        return 0;
    int R = dp_size(l->o->dp);
    char(*hosts)[DP_HOST_MAX] = calloc((size_t)R, sizeof *hosts);
    if (!hosts)
        return ovt_fail(OVT_ENOMEM, "out of memory for %d host names", R);
    int rv = dp_hosts(l->o->dp, hosts);
    if (!rv)
        rv = dp_ranks_record(l->o->out, trn_config_shards(&l->rc), from, R, (const char(*)[DP_HOST_MAX])hosts);
    free(hosts);
    return rv;
}

/* The loss rows of steps 1..start kept from an earlier session (resume). */
static int resume_loss(loop *l)
{
    char path[4096];
    trn_loss_row *old;
    size_t count;
    l->nrows = 0;
    int rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "loss.csv");
    if (rv || access(path, F_OK) != 0)
        return rv;
    if ((rv = trn_loss_csv_read(path, &old, &count)))
        return rv;
    for (size_t i = 0; i < count && old[i].step <= l->start && l->nrows < l->start; i++)
        l->rows[l->nrows++] = old[i];
    free(old);
    return 0;
}

/* Writes loss.csv and loss.svg of the run from its rows so far. */
static int write_loss(const loop *l)
{
    char path[4096], title[256];
    snprintf(title, sizeof title, "ovt train %s: loss per step", l->o->model);
    int rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "loss.csv");
    if (!rv)
        rv = trn_loss_csv_write(path, l->rows, l->nrows);
    if (!rv)
        rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "loss.svg");
    return rv ? rv : trn_loss_svg_write(path, l->rows, l->nrows, title);
}

/* The stateHash of the state st holds, begun after its step
 * (trn_state_hash_begin), into the step table, which then counts the step;
 * then every rank checks it and the report gets it. Nothing to do when no
 * hash is running. Steps are hashed in order, so the table's count is the
 * hashed step's successor. */
static int step_hashed(loop *l)
{
    ovt_hash h;
    uint64_t i;
    if (!trn_runner_hash_end(l->run, &h, &i))
        return 0;
    l->table.steps[i].state_hash = h;
    l->table.count = i + 1;
    struct timespec c0;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    int rv;
    if (l->o->dp && (rv = dp_check_state(l->o->dp, &l->table.steps[i].state_hash, i))) {
        l->together = true; /* every rank holds the same answer */
        return rv;
    }
    l->comm_seconds += seconds_since(&c0);
    if (l->writer && l->o->report.state)
        l->o->report.state(l->o->report.arg, i, &l->table.steps[i].state_hash);
    return 0;
}

/* Step i on the runner (the fault's hooks, the replayed run's log, the
 * step); a non-finite loss fails it naming the step. */
static int compute_step(loop *l, uint64_t i, trn_runner_result *res)
{
    int rv = trn_runner_step(l->run, res);
    if (!rv && !isfinite(res->info.loss))
        rv = ovt_fail(OVT_ENUMERIC, "the loss is %g", (double)res->info.loss);
    if (rv == OVT_ENUMERIC)
        rv = ovt_fail_wrap(rv, "step %llu diverged (lower --lr or keep --clip on); nothing of step %llu was "
                               "written, the run's files stop at its last checkpoint",
                           (unsigned long long)i, (unsigned long long)i);
    l->step_seconds += res->seconds;
    l->comm_seconds += res->info.comm_seconds;
    return rv;
}

/* Writes step i's log (the writer) and its logHash into the step table;
 * *len gets the file's size. */
static int write_log(loop *l, uint64_t i, size_t *len)
{
    char path[4096];
    uint8_t *bytes;
    int rv = krn_rlog_encode(trn_runner_log(l->run), &bytes, len);
    if (rv)
        return rv;
    ovt_sha256(&l->table.steps[i].log_hash, bytes, *len);
    rv = trn_run_path(path, sizeof path, l->o->out, "logs", i, "rlog");
    if (!rv)
        rv = ovt_write_atomic(path, bytes, *len, 0644);
    free(bytes);
    return rv;
}

/* The files of a checkpoint at step i: steps.bin, the state, the loss curve. */
static int write_checkpoint(const loop *l, uint64_t i)
{
    char path[4096];
    int rv;
    if ((rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_write(&l->table, path)) ||
        (rv = trn_run_path(path, sizeof path, l->o->out, "ckpt", i, "ckpt")) ||
        (rv = trn_runner_save_checkpoint(l->run, path)))
        return rv;
    return write_loss(l);
}

static void report_step(loop *l, uint64_t i, const trn_step_info *info, size_t len, double seconds)
{
    if (!l->writer || !l->o->report.step)
        return;
    trn_loop_step s = {.step = i, .start = l->start, .loss = info->loss, .lr = info->lr,
                       .grad_norm = info->grad_norm, .log_entries = krn_rlog_nentries(trn_runner_log(l->run)),
                       .log_bytes = len, .session_entries = l->entries, .step_seconds = seconds,
                       .session_seconds = seconds_since(&l->t0)};
    l->o->report.step(l->o->report.arg, &s);
}

/* Step i: the batch, the step, its log, the hash of the step before, a
 * checkpoint when one is due, the report. */
static int loop_step(loop *l, uint64_t i)
{
    const trn_loop_opts *o = l->o;
    trn_runner_result res;
    int rv = compute_step(l, i, &res);
    const trn_step_info info = res.info;
    krn_rlog *log = trn_runner_log(l->run);
    struct timespec c0;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    rv = agree(l, rv, i);
    l->table.steps[i].batch_hash = res.batch_hash;
    if (rv)
        return rv;
    /* rank 0's log becomes the whole step's (every rank's entries) */
    if (o->dp && (rv = agree(l, dp_merge_log(o->dp, log, i), i)))
        return rv;
    l->comm_seconds += seconds_since(&c0);
    size_t len = 0;
    if (l->writer && (rv = write_log(l, i, &len)))
        return rv;
    /* step i's stateHash runs in the background during step i + 1's
     * forward and backward; the optimizer step waits for it */
    if ((rv = step_hashed(l)) || (rv = trn_runner_hash_begin(l->run)))
        return rv;
    l->entries += krn_rlog_nentries(log);
    l->log_bytes += len;
    if (i == l->start + 1)
        l->first_loss = info.loss;
    l->last_loss = info.loss;
    l->rows[l->nrows++] = (trn_loss_row){.step = i, .loss = info.loss, .lr = info.lr, .grad_norm = info.grad_norm,
                                         .log_entries = krn_rlog_nentries(log)};
    bool ckpt = (o->ckpt_every && i % o->ckpt_every == 0) || i == o->steps;
    if (ckpt && (rv = step_hashed(l))) /* every rank: it checks */
        return rv;
    if (l->writer && ckpt && (rv = write_checkpoint(l, i)))
        return rv;
    report_step(l, i, &info, len, res.seconds);
    return 0;
}

/* run.json: the run's hashes and root, and what this session did and cost;
 * its text into *text (malloc'd). */
static int write_summary(const loop *l, const ovt_hash *root, char **text)
{
    const trn_state *st = trn_runner_state(l->run);
    char ch[65], dh[65], sh[65], rh[65], rid[65];
    ovt_hex_encode(ch, st->config_hash.b, 32);
    ovt_hex_encode(dh, st->config.dataset_hash.b, 32);
    ovt_hex_encode(sh, l->table.steps[l->table.count - 1].state_hash.b, 32);
    ovt_hex_encode(rh, root->b, 32);
    ovt_hex_encode(rid, l->o->run_id.b, 32);
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:f, s:f}", "model",
                          l->o->model, "config_hash", ch, "dataset_hash", dh, "steps", (json_int_t)st->step,
                          "grid_bits", (json_int_t)st->config.grid_bits, "backend", l->o->backend,
                          "final_state_hash", sh, "run_id", rid, "root", rh, "steps_this_session",
                          (json_int_t)(st->step - l->start), "log_entries_this_session", (json_int_t)l->entries,
                          "log_bytes_this_session", (json_int_t)l->log_bytes, "first_loss", l->first_loss,
                          "last_loss", l->last_loss);
    json_object_set_new(j, "schedule", json_string(trn_schedule_name(st->config.schedule)));
    json_object_set_new(j, "shards", json_integer(trn_config_shards(&st->config)));
    if (st->config.model.kind == TRN_MODEL_RESNET) {
        json_object_set_new(j, "augment_crop", json_integer(st->config.augment_crop));
        json_object_set_new(j, "augment_flip", json_integer(st->config.augment_flip));
    }
    json_object_set_new(j, "processes", json_integer(dp_size(l->o->dp)));
    /* where the steps' tensors were (trainer/runner.h, docs/gpu.md "Memory") */
    json_object_set_new(j, "tensors", json_string(trn_runner_resident(l->run) ? "backend" : "host"));
    json_object_set_new(j, "step_seconds_this_session", json_real(l->step_seconds));
    json_object_set_new(j, "comm_seconds_this_session", json_real(l->comm_seconds));
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
    *text = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    if (!*text)
        return ovt_fail(OVT_ENOMEM, "out of memory for run.json");
    char path[4096];
    int rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "run.json");
    if (!rv)
        rv = ovt_write_atomic(path, *text, strlen(*text), 0644);
    if (rv) {
        free(*text);
        *text = NULL;
    }
    return rv;
}

/* The end of the session (the writer): steps.bin, the root, run.json. */
static int loop_finish(const loop *l, trn_loop_result *res)
{
    char path[4096];
    int rv;
    if ((rv = trn_run_path(path, sizeof path, l->o->out, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_write(&l->table, path)) || (rv = trn_step_table_root(&res->root, &l->table, &l->o->run_id)) ||
        (rv = trn_runner_sync(l->run)))
        return rv;
    const trn_state *st = trn_runner_state(l->run);
    res->steps = st->step;
    res->config_hash = st->config_hash;
    res->final_state_hash = l->table.steps[l->table.count - 1].state_hash;
    return write_summary(l, &res->root, &res->summary);
}

int trn_loop_run(const trn_loop_opts *o, trn_loop_result *res)
{
    memset(res, 0, sizeof *res);
    loop l;
    memset(&l, 0, sizeof l);
    l.o = o;
    l.rc = o->config;
    l.writer = o->dp == NULL || dp_rank(o->dp) == 0;
    int rv = loop_open(&l);
    if (!rv && l.writer && o->report.begin) {
        trn_loop_begin b = {.config = &l.rc, .nparams = trn_runner_state(l.run)->layout.nparams, .start = l.start,
                            .data_vocab = l.data.tokens.vocab};
        o->report.begin(o->report.arg, &b);
    }
    if (!rv && trn_config_shards(&l.rc) > 1)
        rv = agree(&l, record_ranks(&l, l.start + 1), l.start);
    if (!rv && l.writer)
        rv = resume_loss(&l);
    clock_gettime(CLOCK_MONOTONIC, &l.t0);
    while (!rv && trn_runner_step_no(l.run) < o->steps) /* the state stays where the steps run */
        rv = loop_step(&l, trn_runner_step_no(l.run) + 1);
    if (!rv)
        rv = step_hashed(&l);
    if (!rv && l.writer)
        rv = loop_finish(&l, res); /* rank 0 writes the rest */
    res->together = l.together;
    free(l.init_params);
    free(l.rows);
    trn_runner_free(l.run);
    trn_step_table_free(&l.table);
    trn_run_data_free(&l.data);
    return rv;
}

void trn_loop_result_free(trn_loop_result *res)
{
    free(res->summary);
    res->summary = NULL;
}
