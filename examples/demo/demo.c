/* The exactness demo: one trainer (cpu, RECORD) and four followers stepping
 * in lock step on the same batches: two replaying the trainer's rounding
 * logs (ref and shuffle backends) and two rounding to nearest without them
 * (the ablation). After every step each follower's stateHash is compared
 * with the trainer's. */
#include "examples/demo/demo.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain/merkle.h"
#include "common/fileio.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "examples/demo/fp32.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

static const struct {
    krn_backend_kind backend;
    krn_mode mode;
    const char *name;
} demo_runs[DEMO_RUNS] = {
    {KRN_BACKEND_CPU, KRN_RECORD, "trainer (cpu, record)"},
    {KRN_BACKEND_REF, KRN_REPLAY, "replay with log (ref)"},
    {KRN_BACKEND_SHUFFLE, KRN_REPLAY, "replay with log (shuffle)"},
    {KRN_BACKEND_REF, KRN_NEAREST, "no log, nearest (ref)"},
    {KRN_BACKEND_SHUFFLE, KRN_NEAREST, "no log, nearest (shuffle)"},
};

void demo_defaults(demo_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    trn_model_config m;
    if (trn_model_preset(&m, "mlp-demo") != 0)
        abort(); /* the preset table lost its own entry: programming error */
    trn_config_default(&opts->config, &m);
    opts->config.batch_size = 32;
    opts->config.lr = 3e-3;
    opts->config.lr_min = 3e-4;
    opts->config.warmup_steps = 10;
    opts->config.decay_steps = 200;
    opts->config.weight_decay = 0.0;
    opts->config.head_shift = 12;
    opts->steps = 200;
    opts->n_samples = 8192;
    opts->every = 20;
    opts->ablation = true;
    opts->shuffle = true;
    opts->fp32 = true;
}

bool demo_enabled(const demo_opts *opts, int run)
{
    if ((run == DEMO_NEAREST_REF || run == DEMO_NEAREST_SHUFFLE) && !opts->ablation)
        return false;
    if ((run == DEMO_REPLAY_SHUFFLE || run == DEMO_NEAREST_SHUFFLE) && !opts->shuffle)
        return false;
    return true;
}

bool demo_replay_exact(const demo_opts *opts, const demo_result *res)
{
    if (res->steps == 0 || res->steps != opts->steps)
        return false;
    for (int r = DEMO_REPLAY_REF; r <= DEMO_REPLAY_SHUFFLE; r++)
        if (demo_enabled(opts, r) && (res->first_mismatch[r] != 0 || res->steps_run[r] != res->steps))
            return false;
    return true;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct demo_run {
    trn_runner *runner; /* its ctx, workspace, log and state */
    bool active;
};

struct demo {
    const demo_opts *opts;
    demo_result *res;
    data_samples data;     /* n_samples training samples + one held-out batch */
    data_samples train;    /* a view of the first n_samples */
    data_samples heldout;  /* a view of the last batch_size */
    trn_run_data train_data; /* the training samples as the runners take their batches (a view of data) */
    struct demo_run run[DEMO_RUNS];
    trn_runner *eval;     /* the held-out loss of the trainer's state */
    float *losses;        /* per step */
    ovt_hash *leaves[DEMO_RUNS]; /* steps + 1 leaves per run */
    trn_state *fp32_state[2];        /* forward-order and reversed-order sums */
    demo_fp32 *fp32;
    bool fp32_active;
    chain_merkle_preimage step;      /* batchHash and logHash of the current step */
};

/* Leaf i of run r from that run's own stateHash. */
static void set_leaf(struct demo *d, int r, uint64_t i, const ovt_hash *state_hash)
{
    chain_merkle_preimage pre = d->step;
    pre.state_hash = *state_hash;
    if (i == 0)
        memset(&pre.batch_hash, 0, 2 * sizeof(ovt_hash));
    chain_merkle_leaf_hash(&d->leaves[r][i], &d->res->config_hash, i, &pre);
}

static int demo_setup(struct demo *d)
{
    const demo_opts *o = d->opts;
    trn_run_config rc = o->config;
    if (rc.model.kind != TRN_MODEL_MLP)
        return ovt_fail(OVT_EINVAL, "the demo trains an MLP");
    if (o->steps < 1 || o->n_samples < 1)
        return ovt_fail(OVT_EINVAL, "the demo needs at least one step and one sample");
    int rv = trn_config_check(&rc);
    if (rv)
        return rv;
    uint32_t B = rc.batch_size;
    rv = data_samples_synthetic(&d->data, rc.seed, o->n_samples + B, rc.model.in_dim, rc.model.n_class,
                                   (int)rc.grid_bits);
    if (rv)
        return rv;
    rc.dataset_hash = d->data.hash;
    d->train = d->data;
    d->train.count = o->n_samples;
    d->heldout = d->data;
    d->heldout.count = B;
    d->heldout.x = d->data.x + (size_t)o->n_samples * rc.model.in_dim;
    d->heldout.y = d->data.y + o->n_samples;
    d->train_data.samples = d->train;

    trn_state *init = NULL;
    if ((rv = trn_state_new(&init, &rc)))
        return rv;
    trn_state_init(init);
    d->res->dataset_hash = d->data.hash;
    d->res->config_hash = init->config_hash;
    for (int r = 0; r < DEMO_RUNS; r++) {
        struct demo_run *run = &d->run[r];
        if (!demo_enabled(o, r))
            continue;
        trn_runner_opts ro = {.backend = demo_runs[r].backend,
                              .mode = demo_runs[r].mode,
                              .shuffle_seed = rc.seed + 1000 + (uint64_t)r,
                              .threads = demo_runs[r].backend == KRN_BACKEND_CPU ? o->threads : 1};
        if ((rv = trn_runner_open(&run->runner, &rc, &d->train_data, &ro)) ||
            (rv = trn_runner_copy_state(run->runner, init)))
            goto done;
        run->active = true;
        d->leaves[r] = calloc(o->steps + 1, sizeof(ovt_hash));
        if (!d->leaves[r]) {
            rv = ovt_fail(OVT_ENOMEM, "out of memory for the leaves");
            goto done;
        }
        ovt_hash h0;
        trn_state_hash(&h0, trn_runner_state(run->runner));
        set_leaf(d, r, 0, &h0);
    }
    if (o->fp32) {
        if ((rv = demo_fp32_new(&d->fp32, &rc)) || (rv = trn_state_clone(&d->fp32_state[0], init)) ||
            (rv = trn_state_clone(&d->fp32_state[1], init)))
            goto done;
        d->fp32_active = true;
    }
    trn_runner_opts eo = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .threads = o->threads, .eval_batch = B};
    if ((rv = trn_runner_open(&d->eval, &rc, NULL, &eo)))
        goto done;
    d->losses = calloc(o->steps, sizeof(float));
    if (!d->losses)
        rv = ovt_fail(OVT_ENOMEM, "out of memory for the demo");
done:
    trn_state_free(init);
    return rv;
}

static void demo_teardown(struct demo *d)
{
    for (int r = 0; r < DEMO_RUNS; r++) {
        trn_runner_free(d->run[r].runner);
        free(d->leaves[r]);
    }
    trn_runner_free(d->eval);
    demo_fp32_free(d->fp32);
    trn_state_free(d->fp32_state[0]);
    trn_state_free(d->fp32_state[1]);
    free(d->losses);
    data_samples_free(&d->data);
}

/* The loss of the trainer's parameters on the held-out samples, in order. */
static int heldout_loss(struct demo *d, const trn_state *st, uint64_t step, float *loss)
{
    uint32_t B = d->opts->config.batch_size;
    int32_t *labels = malloc(B * sizeof *labels);
    if (!labels)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    for (uint32_t j = 0; j < B; j++)
        labels[j] = (int32_t)d->heldout.y[j];
    trn_batch view = {.B = B, .x = d->heldout.x, .labels = labels};
    int rv = trn_runner_eval(d->eval, st, &view, step, loss);
    free(labels);
    return rv;
}

/* The trainer's step: RECORD, then the log to file bytes (and to disk);
 * *out gets its result. */
static int trainer_step(struct demo *d, trn_runner_result *out, uint8_t **log_bytes, size_t *log_len)
{
    trn_runner *runner = d->run[DEMO_RECORD_CPU].runner;
    demo_result *res = d->res;
    int rv = trn_runner_step(runner, out);
    if (rv)
        return ovt_fail_wrap(rv, "trainer");
    const trn_step_info info = out->info;
    krn_rlog *log = trn_runner_log(runner);
    if ((rv = krn_rlog_encode(log, log_bytes, log_len)))
        return rv;
    uint64_t step = trn_runner_state(runner)->step, entries = krn_rlog_nentries(log);
    d->losses[step - 1] = info.loss;
    res->entries_total += entries;
    res->entries_max = entries > res->entries_max ? entries : res->entries_max;
    res->log_bytes_total += *log_len;
    res->log_bytes_max = *log_len > res->log_bytes_max ? *log_len : res->log_bytes_max;
    res->outputs_total += info.stats.outputs;
    res->wide_total += info.stats.wide;
    if (d->opts->log_dir) {
        char name[64], path[4096];
        snprintf(name, sizeof name, "step-%06llu.rlog", (unsigned long long)step);
        if ((rv = ovt_path_join(path, sizeof path, d->opts->log_dir, name)) ||
            (rv = ovt_write_atomic(path, *log_bytes, *log_len, 0644)))
            return rv;
    }
    return 0;
}

/* A follower's step, a REPLAY one with the trainer's log read back from
 * its file bytes, as an auditor would; deactivates it at its first
 * mismatch with the trainer. */
static int follower_step(struct demo *d, int r, const uint8_t *log_bytes, size_t log_len,
                         const ovt_hash *trainer_hash)
{
    struct demo_run *run = &d->run[r];
    trn_runner_result res;
    int rv = 0;
    if (demo_runs[r].mode == KRN_REPLAY && (rv = krn_rlog_decode(trn_runner_log(run->runner), log_bytes, log_len)))
        return rv;
    if ((rv = trn_runner_step(run->runner, &res)))
        return ovt_fail_wrap(rv, "%s", demo_runs[r].name);
    if (demo_runs[r].mode == KRN_REPLAY && res.info.stats.max_dist_over_tau > d->res->replay_max_dist_over_tau)
        d->res->replay_max_dist_over_tau = res.info.stats.max_dist_over_tau;
    uint64_t step = trn_runner_state(run->runner)->step;
    d->res->steps_run[r] = step;
    set_leaf(d, r, step, &res.state_hash);
    if (memcmp(res.state_hash.b, trainer_hash->b, 32) != 0) {
        d->res->first_mismatch[r] = step;
        run->active = false;
    }
    return 0;
}

/* Both plain FP32 runs take the step; they stop at their first difference. */
static int fp32_step(struct demo *d, const trn_batch *batch)
{
    float loss[2];
    int rv;
    for (int k = 0; k < 2; k++)
        if ((rv = demo_fp32_step(d->fp32, d->fp32_state[k], batch, k == 1, &loss[k])))
            return rv;
    d->res->fp32_loss_end = loss[0];
    const trn_state *a = d->fp32_state[0], *b = d->fp32_state[1];
    size_t n = 3 * a->layout.nparams, differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a->mem[i], &b->mem[i], sizeof(float)) != 0;
    ovt_hash ha, hb;
    trn_state_hash(&ha, a);
    trn_state_hash(&hb, b);
    if (memcmp(ha.b, hb.b, 32) != 0) {
        d->res->fp32_first_mismatch = a->step;
        d->res->fp32_params_differing = (double)differ / (double)n;
        d->fp32_active = false;
    }
    return 0;
}

static const char *verdict(const struct demo *d, int r, char *buf, size_t cap)
{
    if (!demo_enabled(d->opts, r))
        return "-";
    if (d->res->first_mismatch[r])
        snprintf(buf, cap, "differs@%llu", (unsigned long long)d->res->first_mismatch[r]);
    else
        snprintf(buf, cap, "same");
    return buf;
}

static void progress_line(const struct demo *d, uint64_t step, uint64_t entries, size_t log_len)
{
    FILE *f = d->opts->progress;
    if (!f)
        return;
    char v[DEMO_RUNS][32];
    fprintf(f, "step %5llu  loss %.4f  log %4llu entries %6zu B  | with log: ref %-12s shuffle %-12s",
            (unsigned long long)step, (double)d->losses[step - 1], (unsigned long long)entries, log_len,
            verdict(d, 1, v[1], 32), verdict(d, 2, v[2], 32));
    if (d->opts->ablation)
        fprintf(f, " | no log: ref %-12s shuffle %s", verdict(d, 3, v[3], 32), verdict(d, 4, v[4], 32));
    fputc('\n', f);
    fflush(f);
}

static float mean_loss(const float *losses, uint64_t from, uint64_t to)
{
    double s = 0;
    for (uint64_t i = from; i < to; i++)
        s += losses[i];
    return (float)(s / (double)(to - from));
}

int demo_run(const demo_opts *opts, demo_result *res)
{
    memset(res, 0, sizeof *res);
    struct demo d = {.opts = opts, .res = res};
    int rv = demo_setup(&d);
    if (rv)
        goto done;
    if (opts->log_dir && (rv = ovt_mkdirs(opts->log_dir, 0755)))
        goto done;
    if ((rv = heldout_loss(&d, trn_runner_state(d.run[0].runner), 0, &res->eval_start)))
        goto done;
    for (uint64_t i = 1; i <= opts->steps; i++) {
        data_sample_batch sb;
        if ((rv = data_sample_batch_get(&sb, &d.train, opts->config.seed, i, opts->config.batch_size)))
            goto done;
        trn_batch batch = {.B = sb.B, .x = sb.x, .labels = sb.y};
        uint8_t *log_bytes = NULL;
        size_t log_len = 0;
        double t0 = now_seconds();
        trn_runner_result tr;
        rv = trainer_step(&d, &tr, &log_bytes, &log_len);
        res->seconds[0] += now_seconds() - t0;
        if (!rv) {
            res->steps = i;
            d.step.batch_hash = tr.batch_hash;
            ovt_sha256(&d.step.log_hash, log_bytes, log_len);
            set_leaf(&d, 0, i, &tr.state_hash);
        }
        for (int r = 1; r < DEMO_RUNS && !rv; r++) {
            if (!d.run[r].active)
                continue;
            t0 = now_seconds();
            rv = follower_step(&d, r, log_bytes, log_len, &tr.state_hash);
            res->seconds[r] += now_seconds() - t0;
        }
        if (!rv && d.fp32_active)
            rv = fp32_step(&d, &batch);
        free(log_bytes);
        data_sample_batch_free(&sb);
        if (rv)
            goto done;
        if ((opts->every && i % opts->every == 0) || i == opts->steps || i == 1)
            progress_line(&d, i, krn_rlog_nentries(trn_runner_log(d.run[0].runner)), log_len);
    }
    uint64_t tenth = opts->steps >= 10 ? opts->steps / 10 : 1;
    res->loss_start = mean_loss(d.losses, 0, tenth);
    res->loss_end = mean_loss(d.losses, opts->steps - tenth, opts->steps);
    trn_state_hash(&res->final_state_hash, trn_runner_state(d.run[0].runner));
    for (int r = 0; r < DEMO_RUNS; r++) {
        if (!d.leaves[r] || (r > 0 && res->steps_run[r] != opts->steps))
            continue;
        chain_merkle *tree;
        if ((rv = chain_merkle_build(&tree, d.leaves[r], opts->steps + 1)))
            goto done;
        res->root[r] = *chain_merkle_root(tree);
        res->has_root[r] = true;
        chain_merkle_free(tree);
    }
    rv = heldout_loss(&d, trn_runner_state(d.run[0].runner), opts->steps + 1, &res->eval_end);
done:
    demo_teardown(&d);
    return rv;
}
