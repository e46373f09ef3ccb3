#include "trainer/step.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/site.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "trainer/trace.h"
#include "trainer/train.h"

/* trn_step_replay; with rows != NULL it also counts per site (krn_ctx_collect_sites)
 * and hands back a copy of the rows, *rows (malloc'd) and *nrows, including
 * when the step fails after some sites ran (a fraud finding). */
struct trn_replayer {
    ovt_hash config_hash;
    krn_ctx *ctx;
    trn_workspace *w;
};

/* A replay on the cpu backend is the arbiter's; on another (a traced
 * `ovt step --backend`) it follows the log as an auditor does. */
static int replayer_open(trn_replayer *r, const trn_run_config *rc, krn_backend_kind backend, int threads)
{
    memset(r, 0, sizeof *r);
    trn_config_hash(&r->config_hash, rc);
    krn_config kc = {.backend = backend, .mode = KRN_REPLAY, .grid_bits = (int)rc->grid_bits,
                     .threads = threads, .rule = trn_config_rule(rc), .shuffle_seed = 1,
                     .verifier = backend == KRN_BACKEND_CPU ? KRN_VERIFY_ARBITER : KRN_VERIFY_AUDITOR};
    int rv = krn_ctx_new(&r->ctx, &kc);
    if (!rv)
        rv = trn_workspace_new(&r->w, rc);
    return rv;
}

static void replayer_close(trn_replayer *r)
{
    trn_workspace_free(r->w);
    krn_ctx_free(r->ctx);
    memset(r, 0, sizeof *r);
}

int trn_replayer_new(trn_replayer **out, const trn_run_config *rc, int threads)
{
    *out = NULL;
    trn_replayer *r = malloc(sizeof *r);
    if (!r)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    int rv = replayer_open(r, rc, KRN_BACKEND_CPU, threads);
    if (!rv)
        rv = trn_workspace_prefault(r->w, r->ctx);
    if (rv) {
        replayer_close(r);
        free(r);
        return rv;
    }
    *out = r;
    return 0;
}

void trn_replayer_free(trn_replayer *r)
{
    if (!r)
        return;
    replayer_close(r);
    free(r);
}

bool trn_replayer_fits(const trn_replayer *r, const trn_state *st)
{
    return memcmp(r->config_hash.b, st->config_hash.b, 32) == 0;
}

/* trn_step_replay on prep's ctx and workspace, or on fresh ones (prep
 * NULL); with rows != NULL it also counts per site (krn_ctx_collect_sites)
 * and hands back a copy of the rows, *rows (malloc'd) and *nrows, including
 * when the step fails after some sites ran (a fraud finding). */
static int replay_step_in(trn_replayer *prep, trn_state *st, const trn_run_data *d, krn_rlog *log, int threads,
                          ovt_hash *batch_hash, krn_site_stats **rows, size_t *nrows, trn_replay_result *res,
                          trn_step_trace *how)
{
    memset(batch_hash, 0, sizeof *batch_hash);
    uint64_t i = st->step + 1;
    if (krn_rlog_step(log) != i)
        return ovt_fail(OVT_EFRAUD, "the rounding log is for step %llu, not step %llu",
                        (unsigned long long)krn_rlog_step(log), (unsigned long long)i);
    trn_replayer fresh = {0};
    trn_step_batch b;
    memset(&b, 0, sizeof b);
    int rv = 0;
    if (prep && !trn_replayer_fits(prep, st))
        return ovt_fail(OVT_EINVAL, "the prepared replay is for another run config than the state's");
    if (!prep && (rv = replayer_open(&fresh, &st->config, how ? how->backend : KRN_BACKEND_CPU, threads)))
        goto done;
    krn_ctx *ctx = prep ? prep->ctx : fresh.ctx;
    trn_workspace *w = prep ? prep->w : fresh.w;
    if ((rv = trn_step_batch_get(&b, d, &st->config, i)))
        goto done;
    *batch_hash = b.hash;
    krn_ctx_collect_sites(ctx, rows != NULL);
    trn_step_info info;
    if (how && how->trace)
        rv = trn_train_step_traced(ctx, w, st, &b.view, log, how->trace, &info, &how->trace_rc, &how->root);
    else
        rv = trn_train_step(ctx, w, st, &b.view, log, &info);
    if (res) {
        res->shards = info.shards;
        res->shard_differs = info.shard_differs;
    }
    if (rows) {
        size_t n;
        const krn_site_stats *r = krn_ctx_site_stats(ctx, &n);
        if (n > 0 && (*rows = malloc(n * sizeof **rows)) == NULL) {
            rv = rv ? rv : ovt_fail(OVT_ENOMEM, "out of memory for %zu per-site counts", n);
        } else if (n > 0) {
            memcpy(*rows, r, n * sizeof **rows);
            *nrows = n;
        }
    }
done:
    trn_step_batch_free(&b);
    replayer_close(&fresh);
    return rv;
}

static int replay_step(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads, ovt_hash *batch_hash,
                       krn_site_stats **rows, size_t *nrows, trn_replay_result *res)
{
    return replay_step_in(NULL, st, d, log, threads, batch_hash, rows, nrows, res, NULL);
}

int trn_step_replay(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads, ovt_hash *batch_hash)
{
    return replay_step(st, d, log, threads, batch_hash, NULL, NULL, NULL);
}

/* One step's replay with its shard finding in *res (on prep, or fresh). */
static int replay_shards(trn_replayer *prep, trn_state *st, const trn_run_data *d, krn_rlog *log, int threads,
                         ovt_hash *batch_hash, trn_replay_result *res)
{
    memset(res, 0, sizeof *res);
    res->shards = trn_config_shards(&st->config);
    res->shard_differs = -1;
    return replay_step_in(prep, st, d, log, threads, batch_hash, NULL, NULL, res, NULL);
}

int trn_step_replay_prepared(trn_replayer *prep, trn_state *st, const trn_run_data *d, krn_rlog *log,
                             ovt_hash *batch_hash, trn_replay_result *res)
{
    return replay_shards(prep, st, d, log, 0, batch_hash, res);
}

int trn_step_replay_shards(trn_state *st, const trn_run_data *d, krn_rlog *log, int threads, ovt_hash *batch_hash,
                           trn_replay_result *res)
{
    return replay_shards(NULL, st, d, log, threads, batch_hash, res);
}

/* Reads logs/step-i.rlog of dir into log and hashes its bytes. */
static int read_step_log(const char *dir, uint64_t i, krn_rlog *log, ovt_hash *hash)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    int rv = trn_run_path(path, sizeof path, dir, "logs", i, "rlog");
    if (rv || (rv = ovt_read_file(path, &buf, &len, (size_t)1 << 32)))
        return rv;
    ovt_sha256(hash, buf, len);
    rv = krn_rlog_decode(log, buf, len);
    free(buf);
    return rv ? ovt_fail_wrap(rv, "%s", path) : 0;
}

/* State 0 of a run that starts from given parameters (config init_hash):
 * the run's step-0 checkpoint, which must be state 0 of this config and
 * hold parameters whose paramsHash is init_hash. */
static int start_from_init(trn_state **out, const char *dir, const ovt_hash *config_hash)
{
    char path[4096];
    int rv = trn_run_path(path, sizeof path, dir, "ckpt", 0, "ckpt");
    if (rv || (rv = trn_checkpoint_read(out, path)))
        return ovt_fail_wrap(rv, "the run starts from given parameters (init_hash) and needs its state 0");
    if (memcmp((*out)->config_hash.b, config_hash->b, 32) != 0)
        rv = ovt_fail(OVT_EFORMAT, "%s belongs to another run config", path);
    else if ((rv = trn_state_check_start(*out)))
        rv = ovt_fail_wrap(rv, "%s is not the state 0 the run config commits to", path);
    if (rv) {
        trn_state_free(*out);
        *out = NULL;
    }
    return rv;
}

int trn_run_start_state(trn_state **out, uint64_t *at, const char *dir, const trn_run_config *rc,
                        const ovt_hash *config_hash, const trn_step_table *table, uint64_t step)
{
    *out = NULL;
    *at = 0;
    int rv;
    if (memcmp(table->config_hash.b, config_hash->b, 32) != 0)
        return ovt_fail(OVT_EFORMAT, "the step table of %s belongs to another run config than %s/config.bin", dir,
                        dir);
    if (step == 0 && trn_config_has_init(rc))
        return start_from_init(out, dir, config_hash);
    if (step == 0) {
        if ((rv = trn_state_new(out, rc)))
            return rv;
        trn_state_init(*out);
        return 0;
    }
    char path[4096];
    if ((rv = trn_run_latest_checkpoint(dir, step, at)) ||
        (rv = trn_run_path(path, sizeof path, dir, "ckpt", *at, "ckpt")))
        return rv;
    if ((rv = trn_checkpoint_read(out, path)))
        return ovt_fail_wrap(rv, "checkpoint %s", path);
    ovt_hash h;
    trn_state_hash(&h, *out);
    if ((*out)->step != *at || *at >= table->count || memcmp(h.b, table->steps[*at].state_hash.b, 32) != 0 ||
        memcmp((*out)->config_hash.b, config_hash->b, 32) != 0) {
        trn_state_free(*out);
        *out = NULL;
        return ovt_fail(OVT_EFORMAT, "%s is not the state the step table claims for step %llu", path,
                        (unsigned long long)*at);
    }
    if (*at == 0 && trn_config_has_init(rc) && (rv = trn_state_check_start(*out))) {
        trn_state_free(*out);
        *out = NULL;
        return ovt_fail_wrap(rv, "%s is not the state 0 the run config commits to", path);
    }
    return 0;
}

int trn_step_replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out)
{
    return trn_step_replay_sites(dir, d, k, threads, out, NULL, NULL);
}

/* trn_step_replay_sites, step k the way `how` says (NULL: the arbiter's). */
static int replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out,
                      krn_site_stats **rows, size_t *nrows, trn_step_trace *how)
{
    memset(out, 0, sizeof *out);
    out->shards = 1;
    out->shard_differs = -1;
    if (rows) {
        *rows = NULL;
        *nrows = 0;
    }
    if (k == 0)
        return ovt_fail(OVT_EINVAL, "step 0 is the initial state: there is no step to re-execute");
    trn_run_config rc;
    ovt_hash config_hash;
    char path[4096];
    trn_state *st = NULL;
    trn_step_table table = {0};
    krn_rlog *log = krn_rlog_new();
    int rv;
    if (!log)
        return ovt_fail(OVT_ENOMEM, "out of memory");
    if ((rv = trn_run_load_config(dir, &rc, &config_hash)) ||
        (rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&table, path)) ||
        (rv = trn_run_start_state(&st, &out->from_checkpoint, dir, &rc, &config_hash, &table, k - 1)))
        goto done;
    for (uint64_t i = st->step + 1; i <= k; i++) {
        if ((rv = read_step_log(dir, i, log, &out->log_hash)))
            goto done;
        bool last = i == k;
        if ((rv = replay_step_in(NULL, st, d, log, threads, &out->batch_hash, last ? rows : NULL,
                                 last ? nrows : NULL, last ? out : NULL, last ? how : NULL))) {
            rv = ovt_fail_wrap(rv, "re-executing step %llu", (unsigned long long)i);
            goto done;
        }
    }
    trn_state_hash(&out->state_hash, st);
done:
    trn_state_free(st);
    trn_step_table_free(&table);
    krn_rlog_free(log);
    return rv;
}

int trn_step_replay_sites(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out,
                          krn_site_stats **rows, size_t *nrows)
{
    return replay_run(dir, d, k, threads, out, rows, nrows, NULL);
}

int trn_step_replay_traced(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_step_trace *tr,
                           trn_replay_result *out)
{
    tr->trace_rc = OVT_EINVAL; /* until the traced step ran */
    memset(&tr->root, 0, sizeof tr->root);
    return replay_run(dir, d, k, threads, out, NULL, NULL, tr);
}
