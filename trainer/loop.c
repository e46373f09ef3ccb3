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
#include "trainer/state.h"
#include "trainer/train.h"

/* One session of a run: what trn_loop_run holds while it steps. */
typedef struct {
    const trn_loop_opts *o;
    trn_run_config rc;         /* o->config with the dataset's hash and init_hash */
    float *init_params;        /* init_from as its blob, nparams little-endian floats; NULL: from the seed */
    size_t init_len;           /* bytes */
    bool writer;               /* this process writes the run directory and reports (rank 0) */
    bool together;             /* a failure every rank shares */
    krn_mode mode;
    trn_run_data data;
    trn_state *st;
    trn_workspace *w;
    krn_ctx *ctx;
    krn_rlog *log;
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
        (rv = trn_state_start(&l->st, &l->rc, (const uint8_t *)l->init_params, l->init_len)))
        return rv;
    trn_state_hash(&l->table.steps[0].state_hash, l->st);
    l->table.count = 1;
    if (!l->writer)
        return 0;
    if ((rv = trn_run_path(path, sizeof path, l->o->out, "ckpt", 0, "ckpt")))
        return rv;
    return trn_checkpoint_write(l->st, path);
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
        (rv = trn_run_path(path, sizeof path, out, "ckpt", step, "ckpt")) || (rv = trn_checkpoint_read(&l->st, path)))
        return rv;
    if (memcmp(l->st->config_hash.b, l->table.config_hash.b, 32) != 0 || l->st->step != step)
        return ovt_fail(OVT_EFORMAT, "%s does not belong to this run", path);
    trn_step_table old_table;
    if ((rv = trn_run_path(path, sizeof path, out, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&old_table, path)))
        return rv;
    ovt_hash h;
    trn_state_hash(&h, l->st);
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
 * from init_from's parameters. */
static int load_inputs(loop *l)
{
    const trn_loop_opts *o = l->o;
    int rv;
    if ((rv = trn_run_data_load(&l->data, o->data, &l->rc, 1)) || (rv = trn_config_check(&l->rc)))
        return rv;
    if (o->init_from) {
        size_t n = 0;
        if ((rv = trn_init_load(&l->init_params, &n, &l->rc, o->init_from)))
            return rv;
        l->init_len = n * sizeof(float);
        ovt_swap_le32(l->init_params, n);
        ovt_sha256(&l->rc.init_hash, l->init_params, l->init_len);
    } else if (trn_config_has_init(&l->rc)) {
        return ovt_fail(OVT_EINVAL, "the run config (--config) starts from given parameters (init_hash set): pass "
                                    "them with --init-from FILE");
    }
    return 0;
}

/* Everything the steps need: inputs, the run directory, the opened run, the
 * backend's ctx and a workspace. */
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
    if ((rv = agree(l, open_run(l), 0)))
        return rv;
    if (l->st->step > o->steps)
        return ovt_fail(OVT_EINVAL, "the run is already at step %llu, past --steps %llu",
                        (unsigned long long)l->st->step, (unsigned long long)o->steps);
    l->start = l->st->step;
    l->mode = o->replay ? KRN_REPLAY : o->nearest ? KRN_NEAREST : KRN_RECORD;
    krn_config kc = {.backend = o->backend_kind, .mode = l->mode, .grid_bits = (int)l->rc.grid_bits,
                     .shuffle_seed = l->rc.seed, .threads = o->threads, .rule = trn_config_rule(&l->rc)};
    if ((rv = krn_ctx_new(&l->ctx, &kc)) || (rv = trn_workspace_new(&l->w, &l->rc)))
        return rv;
    trn_state_hash_threads(l->st, l->ctx); /* the stateHash's leaves on the step's pool */
    trn_workspace_fault_shard(l->w, trn_fault_shard_step(&o->fault), o->fault.shard);
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
    if (!trn_state_hash_end(l->st, &h, &i))
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

/* Step i's computation, between the fault hooks: the replayed run's log
 * read first (REPLAY), then the step. *seconds gets its wall time. */
static int compute_step(loop *l, trn_step_batch *b, uint64_t i, trn_step_info *info, double *seconds)
{
    const trn_loop_opts *o = l->o;
    char path[4096];
    float *kept;
    int rv = trn_fault_before_step(&o->fault, i, o->dp, l->ctx, l->st, &b->tb, &b->sb, &kept);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rv && o->replay && !(rv = trn_run_path(path, sizeof path, o->replay, "logs", i, "rlog")))
        rv = krn_rlog_read_file(l->log, path);
    if (l->mode == KRN_NEAREST)
        krn_rlog_reset(l->log, i);
    if (!rv)
        rv = trn_train_step_dp(l->ctx, l->w, l->st, &b->view, l->mode == KRN_NEAREST ? NULL : l->log, o->dp, info);
    *seconds = seconds_since(&t0);
    if (!rv && !isfinite(info->loss))
        rv = ovt_fail(OVT_ENUMERIC, "the loss is %g", (double)info->loss);
    if (rv == OVT_ENUMERIC)
        rv = ovt_fail_wrap(rv, "step %llu diverged (lower --lr or keep --clip on); nothing of step %llu was "
                               "written, the run's files stop at its last checkpoint",
                           (unsigned long long)i, (unsigned long long)i);
    rv = trn_fault_after_step(&o->fault, i, rv, l->ctx, l->st, &kept);
    if (!rv)
        trn_fault_on_log(&o->fault, i, l->log);
    l->step_seconds += *seconds;
    l->comm_seconds += info->comm_seconds;
    return rv;
}

/* Writes step i's log (the writer) and its logHash into the step table;
 * *len gets the file's size. */
static int write_log(loop *l, uint64_t i, size_t *len)
{
    char path[4096];
    uint8_t *bytes;
    int rv = krn_rlog_encode(l->log, &bytes, len);
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
        (rv = trn_checkpoint_write(l->st, path)))
        return rv;
    return write_loss(l);
}

static void report_step(loop *l, uint64_t i, const trn_step_info *info, size_t len, double seconds)
{
    if (!l->writer || !l->o->report.step)
        return;
    trn_loop_step s = {.step = i, .start = l->start, .loss = info->loss, .lr = info->lr,
                       .grad_norm = info->grad_norm, .log_entries = krn_rlog_nentries(l->log), .log_bytes = len,
                       .session_entries = l->entries, .step_seconds = seconds,
                       .session_seconds = seconds_since(&l->t0)};
    l->o->report.step(l->o->report.arg, &s);
}

/* Step i: the batch, the step, its log, the hash of the step before, a
 * checkpoint when one is due, the report. */
static int loop_step(loop *l, uint64_t i)
{
    const trn_loop_opts *o = l->o;
    trn_step_batch batch;
    trn_step_info info = {0};
    double seconds = 0;
    int rv = trn_step_batch_get(&batch, &l->data, &l->rc, i);
    if (rv)
        return rv;
    rv = compute_step(l, &batch, i, &info, &seconds);
    struct timespec c0;
    clock_gettime(CLOCK_MONOTONIC, &c0);
    rv = agree(l, rv, i);
    l->table.steps[i].batch_hash = batch.hash;
    trn_step_batch_free(&batch);
    if (rv)
        return rv;
    /* rank 0's log becomes the whole step's (every rank's entries) */
    if (o->dp && (rv = agree(l, dp_merge_log(o->dp, l->log, i), i)))
        return rv;
    l->comm_seconds += seconds_since(&c0);
    size_t len = 0;
    if (l->writer && (rv = write_log(l, i, &len)))
        return rv;
    /* step i's stateHash runs in the background during step i + 1's
     * forward and backward; the optimizer step waits for it */
    if ((rv = step_hashed(l)) || (rv = trn_state_hash_begin(l->st)))
        return rv;
    l->entries += krn_rlog_nentries(l->log);
    l->log_bytes += len;
    if (i == l->start + 1)
        l->first_loss = info.loss;
    l->last_loss = info.loss;
    l->rows[l->nrows++] = (trn_loss_row){.step = i, .loss = info.loss, .lr = info.lr, .grad_norm = info.grad_norm,
                                         .log_entries = krn_rlog_nentries(l->log)};
    bool ckpt = (o->ckpt_every && i % o->ckpt_every == 0) || i == o->steps;
    if (ckpt && (rv = step_hashed(l))) /* every rank: it checks */
        return rv;
    if (l->writer && ckpt && (rv = write_checkpoint(l, i)))
        return rv;
    report_step(l, i, &info, len, seconds);
    return 0;
}

/* run.json: the run's hashes and root, and what this session did and cost;
 * its text into *text (malloc'd). */
static int write_summary(const loop *l, const ovt_hash *root, char **text)
{
    const trn_state *st = l->st;
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
        (rv = trn_step_table_write(&l->table, path)) || (rv = trn_step_table_root(&res->root, &l->table, &l->o->run_id)))
        return rv;
    res->steps = l->st->step;
    res->config_hash = l->st->config_hash;
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
    if ((l.log = krn_rlog_new()) == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rv = loop_open(&l);
    if (!rv && l.writer && o->report.begin) {
        trn_loop_begin b = {.config = &l.rc, .nparams = l.st->layout.nparams, .start = l.start};
        o->report.begin(o->report.arg, &b);
    }
    if (!rv && trn_config_shards(&l.rc) > 1)
        rv = agree(&l, record_ranks(&l, l.start + 1), l.start);
    if (!rv && l.writer)
        rv = resume_loss(&l);
    clock_gettime(CLOCK_MONOTONIC, &l.t0);
    while (!rv && l.st->step < o->steps)
        rv = loop_step(&l, l.st->step + 1);
    if (!rv)
        rv = step_hashed(&l);
    if (!rv && l.writer)
        rv = loop_finish(&l, res); /* rank 0 writes the rest */
    res->together = l.together;
    free(l.init_params);
    free(l.rows);
    krn_rlog_free(l.log);
    if (l.st)
        trn_state_hash_threads(l.st, NULL); /* settles the hash on the ctx before it goes */
    krn_ctx_free(l.ctx);
    trn_workspace_free(l.w);
    trn_state_free(l.st);
    trn_step_table_free(&l.table);
    trn_run_data_free(&l.data);
    return rv;
}

void trn_loop_result_free(trn_loop_result *res)
{
    free(res->summary);
    res->summary = NULL;
}
