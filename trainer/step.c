#include "trainer/state_hash.h"
#include "trainer/step.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/site.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "trainer/runner.h"

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

/* A copy of the per-site rows of the runner's last step into *rows
 * (malloc'd) and *nrows. */
static int copy_sites(const trn_runner *r, krn_site_stats **rows, size_t *nrows)
{
    size_t n;
    const krn_site_stats *got = trn_runner_site_stats(r, &n);
    if (n == 0)
        return 0;
    if ((*rows = malloc(n * sizeof **rows)) == NULL)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu per-site counts", n);
    memcpy(*rows, got, n * sizeof **rows);
    *nrows = n;
    return 0;
}

/* Steps st's successor .. k on runner r, each with its log from dir; the
 * last one's findings into out (and its per-site rows, and its trace when
 * tr is given). */
static int replay_to(trn_runner *r, const char *dir, uint64_t k, trn_replay_result *out, krn_site_stats **rows,
                     size_t *nrows, trn_step_trace *tr)
{
    for (uint64_t i = trn_runner_state(r)->step + 1; i <= k; i++) {
        int rv = read_step_log(dir, i, trn_runner_log(r), &out->log_hash);
        if (rv)
            return rv;
        bool last = i == k;
        trn_runner_collect_sites(r, last && rows);
        if (last && tr && (rv = trn_runner_trace_next(r, tr->trace)))
            return rv;
        if (last && tr && tr->roots_before)
            trn_state_digests(tr->roots_before, trn_runner_state(r));
        trn_runner_result res;
        rv = trn_runner_step(r, &res);
        out->batch_hash = res.batch_hash;
        if (last && tr) {
            tr->trace_rc = res.trace_rc;
            tr->root = res.trace_root;
        }
        if (last) {
            out->shards = res.info.shards;
            out->shard_differs = res.info.shard_differs;
        }
        if (last && rows) {
            int copied = copy_sites(r, rows, nrows);
            rv = rv ? rv : copied;
        }
        /* tolerant (tr->tolerant): only step k goes past a violation; the
         * steps before it fail as the strict replay does, with its message */
        const krn_finding *v = trn_runner_violation(r);
        if (!rv && v->rule != KRN_RULE_NONE) {
            if (!last)
                rv = ovt_fail(OVT_EFRAUD, "%s", v->message);
            else if (tr)
                tr->violation = *v;
        }
        if (rv)
            return ovt_fail_wrap(rv, "re-executing step %llu", (unsigned long long)i);
    }
    return 0;
}

/* trn_step_replay_run, step k traced as tr says (NULL: untraced). */
static int replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out,
                      krn_site_stats **rows, size_t *nrows, trn_step_trace *tr)
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
    trn_runner *r = NULL;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = threads, .hash_later = true,
                          .fault = tr ? tr->fault : NULL, .tolerant = tr && tr->tolerant};
    if (tr && tr->fault && tr->fault->kind == TRN_FAULT_FORGED_LOG) {
        /* the forging trainer's own re-execution: its forged entries
         * followed, as its machine computed the step (the forgery itself
         * is a RECORD hook, not run here) */
        ro.fault = NULL;
        ro.tolerant = ro.follow_log = true;
    }
    int rv;
    if ((rv = trn_run_load_config(dir, &rc, &config_hash)) ||
        (rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")) ||
        (rv = trn_step_table_read(&table, path)) ||
        (rv = trn_run_start_state(&st, &out->from_checkpoint, dir, &rc, &config_hash, &table, k - 1)) ||
        (rv = trn_runner_open(&r, &st->config, d, &ro)) || (rv = trn_runner_adopt(r, &st)))
        goto done;
    if (tr && tr->backend != KRN_BACKEND_CPU) {
        /* the steps before k as the arbiter replays them, step k on the
         * asked backend, following the log as an auditor does */
        if ((rv = replay_to(r, dir, k - 1, out, NULL, NULL, NULL)))
            goto done;
        st = trn_runner_release(r);
        trn_runner_free(r);
        r = NULL;
        ro.backend = tr->backend;
        ro.verifier = KRN_VERIFY_AUDITOR;
        if ((rv = trn_runner_open(&r, &st->config, d, &ro)) || (rv = trn_runner_adopt(r, &st)))
            goto done;
    }
    if ((rv = replay_to(r, dir, k, out, rows, nrows, tr)))
        goto done;
    trn_state_hash(&out->state_hash, trn_runner_state(r));
    if (tr && tr->after)
        rv = trn_state_clone(tr->after, trn_runner_state(r));
done:
    trn_runner_free(r);
    trn_state_free(st);
    trn_step_table_free(&table);
    return rv;
}

int trn_step_replay_run(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_replay_result *out,
                        krn_site_stats **rows, size_t *nrows)
{
    return replay_run(dir, d, k, threads, out, rows, nrows, NULL);
}

int trn_step_replay_traced(const char *dir, const trn_run_data *d, uint64_t k, int threads, trn_step_trace *tr,
                           trn_replay_result *out)
{
    tr->trace_rc = OVT_EINVAL; /* until the traced step ran */
    memset(&tr->violation, 0, sizeof tr->violation);
    memset(&tr->root, 0, sizeof tr->root);
    return replay_run(dir, d, k, threads, out, NULL, NULL, tr);
}
