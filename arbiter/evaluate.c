#include "arbiter/evaluate.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rlog.h"
#include "trainer/checkpoint.h"
#include "trainer/config.h"
#include "trainer/init.h"
#include "dp/ranks.h"
#include "trainer/state.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state_hash.h"
#include "trainer/train.h"

_Static_assert(ARB_HOST_MAX == DP_HOST_MAX, "arb_eval holds a ranks.json host name");

#define MAX_CONFIG_OBJECT 4096
#define MAX_OBJECT ((size_t)1 << 36)

static void add_note(char *note, size_t cap, const char *fmt, ...) OVT_PRINTF(3, 4);
static void add_note(char *note, size_t cap, const char *fmt, ...)
{
    if (!note || !cap)
        return;
    size_t used = strlen(note);
    if (used + 3 >= cap)
        return;
    if (used) {
        strcpy(note + used, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + used, cap - used, fmt, ap);
    va_end(ap);
}

/* What a store failure means for an input: not there (or not reachable:
 * look again later), or there but not what its name says. A local failure
 * (memory) stays an error, in *err. */
static arb_input store_status(int rv, int *err, const char *what, char *note, size_t cap)
{
    if (rv == 0)
        return ARB_INPUT_OK;
    add_note(note, cap, "%s: %s", what, ovt_errmsg());
    if (rv == OVT_ENOMEM && !*err)
        *err = rv;
    return rv == OVT_ENOTFOUND || rv == OVT_EIO || rv == OVT_ENOMEM ? ARB_INPUT_MISSING : ARB_INPUT_MISMATCH;
}

static int step_zero(arb_eval *out, store_ctx *store, const ovt_hash *run_id, const chain_arb_params *run,
                     char *note, size_t cap)
{
    uint8_t *buf = NULL;
    size_t len;
    int err = 0;
    out->input[ARB_IN_STATE] =
        store_status(store_get(store, &run->config_hash, MAX_CONFIG_OBJECT, &buf, &len), &err, "run config",
                     note, cap);
    if (out->input[ARB_IN_STATE] != ARB_INPUT_OK)
        return err;
    trn_run_config rc;
    int rv = trn_config_decode(&rc, buf, len);
    free(buf);
    if (rv || memcmp(rc.dataset_hash.b, run->dataset_hash.b, 32) != 0) {
        add_note(note, cap, "the run config named by configHash is not a valid config of this run: %s",
                 rv ? ovt_errmsg() : "another datasetHash");
        out->exec = ARB_EXEC_FAILED;
        return 0;
    }
    /* A run that starts from given parameters names them by init_hash
     * (their paramsHash, the blob's SHA-256); otherwise the seed draws them. */
    uint8_t *params = NULL;
    size_t params_len = 0;
    if (trn_config_has_init(&rc)) {
        /* Exactly 4 bytes a parameter of the config's model. */
        size_t want = 0;
        if (trn_init_blob_len(&rc, &want)) {
            add_note(note, cap, "the run config's model has no valid shape: %s", ovt_errmsg());
            out->exec = ARB_EXEC_FAILED;
            return 0;
        }
        char what[96];
        snprintf(what, sizeof what, "starting parameters (init_hash, %zu bytes for the config's model)", want);
        out->input[ARB_IN_STATE] = store_status(store_get(store, &rc.init_hash, want, &params, &params_len),
                                                &err, what, note, cap);
        if (out->input[ARB_IN_STATE] != ARB_INPUT_OK)
            return err;
    }
    trn_state *st;
    rv = trn_state_start(&st, &rc, params, params_len);
    free(params);
    if (rv == OVT_EFORMAT) {
        add_note(note, cap, "the starting parameters the config names are not a state 0 of it: %s", ovt_errmsg());
        out->exec = ARB_EXEC_FAILED;
        return 0;
    }
    if (rv)
        return rv;
    trn_state_hash(&out->state_hash, st);
    trn_state_free(st);
    chain_merkle_preimage pre = {.state_hash = out->state_hash};
    chain_merkle_leaf_hash(&out->leaf, run_id, 0, &pre);
    out->exec = ARB_EXEC_OK;
    return 0;
}

/* The exact length of a checkpoint of the run's config (the config blob
 * that configHash names): what a get of state j-1 may take. */
static arb_input state_cap(size_t *max_len, int *err, store_ctx *store, const chain_arb_params *run, char *note,
                           size_t cap)
{
    uint8_t *buf = NULL;
    size_t len;
    arb_input in = store_status(store_get(store, &run->config_hash, MAX_CONFIG_OBJECT, &buf, &len), err,
                                "state j-1: the run config", note, cap);
    if (in != ARB_INPUT_OK)
        return in;
    trn_run_config rc;
    int rv = trn_config_decode(&rc, buf, len);
    free(buf);
    if (!rv)
        rv = trn_checkpoint_size(max_len, &rc);
    return store_status(rv, err, "state j-1: the run config", note, cap);
}

/* The state j-1: its checkpoint's bytes from the store, within the size of
 * one of the run's config, decoded here; it must hash to stateHash_{j-1}
 * and be of this run at step j-1. */
static arb_input get_state(trn_state **st, int *err, store_ctx *store, const chain_arb_params *run,
                           const chain_arb_game *g, char *note, size_t cap)
{
    uint8_t *buf = NULL;
    size_t len, max_len;
    arb_input in = state_cap(&max_len, err, store, run, note, cap);
    if (in == ARB_INPUT_OK)
        in = store_status(store_get_state(store, &g->previous_state, max_len, &buf, &len), err, "state j-1", note,
                          cap);
    if (in != ARB_INPUT_OK)
        return in;
    in = store_status(trn_checkpoint_decode(st, buf, len), err, "state j-1", note, cap);
    free(buf);
    if (in != ARB_INPUT_OK)
        return in;
    ovt_hash h;
    trn_state_hash(&h, *st);
    const char *wrong = memcmp(h.b, g->previous_state.b, 32) != 0 ? "it holds a state of another stateHash"
                        : memcmp((*st)->config_hash.b, run->config_hash.b, 32) != 0 ? "its config is not the run's"
                        : (*st)->step + 1 != g->index ? "it is not the state before the disputed step"
                                                      : NULL;
    if (!wrong)
        return ARB_INPUT_OK;
    add_note(note, cap, "state j-1: %s", wrong);
    trn_state_free(*st);
    *st = NULL;
    return ARB_INPUT_MISMATCH;
}

int arb_log_bytes(uint8_t **buf, size_t *len, store_ctx *store, const ovt_hash *log_hash, uint64_t step)
{
    *buf = NULL;
    *len = 0;
    krn_rlog *empty = krn_rlog_new();
    if (empty) {
        krn_rlog_reset(empty, step);
        if (krn_rlog_encode(empty, buf, len) == 0) {
            ovt_hash h;
            ovt_sha256(&h, *buf, *len);
            if (memcmp(h.b, log_hash->b, 32) == 0) {
                krn_rlog_free(empty);
                return 0;
            }
            free(*buf);
            *buf = NULL;
            *len = 0;
        }
        krn_rlog_free(empty);
    }
    /* At most what the log format allows (kernels/rlog.h). */
    return store_get(store, log_hash, KRN_RLOG_MAX_FILE, buf, len);
}

/* The trainer's log j, checked against logHash_j (arb_log_bytes). */
static arb_input get_log(uint8_t **buf, size_t *len, int *err, store_ctx *store, const chain_arb_game *g,
                         char *note, size_t cap)
{
    return store_status(arb_log_bytes(buf, len, store, &g->trainer_log, g->index), err, "rounding log j", note,
                        cap);
}

/* Which process computed shard out->shard_differs of step j (evaluate.h), from the
 * trainer's ranks.json: the blob the run's manifest names as "ranks". Its
 * record is the trainer's own, committed nowhere, so nothing here changes
 * the verdict: a manifest or ranks.json that is missing, unreachable,
 * forged or malformed leaves out->has_owner false and says why in the note.
 * Both fetches are bounded like every other (the manifest by the store,
 * ranks.json at DP_RANKS_MAX_FILE). */
void arb_eval_find_owner(arb_eval *out, store_ctx *store, const ovt_hash *run_id, uint64_t j, char *note, size_t cap)
{
    store_manifest m;
    uint8_t *buf = NULL;
    size_t len = 0;
    dp_shard_owner owner;
    if (store_get_manifest(store, run_id, &m)) {
        add_note(note, cap, "shard %lld's rank and host are not known: the run manifest: %s",
                 (long long)out->shard_differs, ovt_errmsg());
    } else if (!m.has_ranks) {
        add_note(note, cap, "shard %lld's rank and host are not known: the run manifest names no ranks.json",
                 (long long)out->shard_differs);
    } else if (store_get(store, &m.ranks_hash, DP_RANKS_MAX_FILE, &buf, &len)) {
        add_note(note, cap, "shard %lld's rank and host are not known: ranks.json: %s", (long long)out->shard_differs,
                 ovt_errmsg());
    } else if (dp_ranks_owner(&owner, (const char *)buf, len, j, (uint32_t)out->shard_differs)) {
        add_note(note, cap, "shard %lld's rank and host are not known: %s", (long long)out->shard_differs,
                 ovt_errmsg());
    } else {
        out->has_owner = true;
        out->owner_rank = owner.rank;
        snprintf(out->owner_host, sizeof out->owner_host, "%s", owner.host);
    }
    ovt_err_clear();
    free(buf);
}

void arb_eval_site_leaf(arb_eval *e, const ovt_hash *beacon, const krn_trace *t, const ovt_hash *run_id,
                        uint64_t step, char *note, size_t cap)
{
    static const ovt_hash zero;
    if (e->exec != ARB_EXEC_OK)
        return;
    if (step == 0) {
        chain_merkle_site_leaf_hash(&e->leaf, run_id, 0, &zero);
        return;
    }
    size_t n = t ? krn_trace_count(t) : 0;
    if (!e->traced || e->trace_rc || n == 0) {
        add_note(note, cap, "the step's trace, which names its site hash, failed: %s", t ? krn_trace_error(t) : "none");
        e->exec = ARB_EXEC_FAILED;
        return;
    }
    uint32_t s = chain_arb_site_index(beacon, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n);
    chain_merkle_site_leaf_hash(&e->leaf, run_id, step, &krn_trace_record_at(t, s)->root);
}

int arb_evaluate(arb_eval *out, store_ctx *store, const ovt_hash *run_id, const chain_arb_params *run,
                 const chain_arb_game *g, int threads, trn_runner *prep, krn_trace *trace, char *note,
                 size_t cap)
{
    memset(out, 0, sizeof *out);
    out->shard_differs = -1;
    if (note && cap)
        note[0] = 0;
    arb_basis_of(&out->basis, g);
    if (g->index == 0)
        return step_zero(out, store, run_id, run, note, cap);

    trn_state *st = NULL;
    uint8_t *data = NULL, *logbytes = NULL;
    size_t data_len = 0, log_len = 0;
    trn_run_data ds;
    memset(&ds, 0, sizeof ds);
    trn_runner *own = NULL, *runner = NULL;
    int rv = 0;
    out->input[ARB_IN_STATE] = get_state(&st, &rv, store, run, g, note, cap);
    out->input[ARB_IN_DATASET] = store_status(store_get(store, &run->dataset_hash, MAX_OBJECT, &data, &data_len),
                                              &rv, "dataset", note, cap);
    out->input[ARB_IN_LOG] = get_log(&logbytes, &log_len, &rv, store, g, note, cap);
    for (int k = 0; k < ARB_NINPUTS; k++)
        if (rv || out->input[k] != ARB_INPUT_OK)
            goto done;

    if (memcmp(st->config.dataset_hash.b, run->dataset_hash.b, 32) != 0 ||
        trn_run_data_parse(&ds, data, data_len, &st->config, 0, "the dataset")) {
        add_note(note, cap, "the dataset does not fit the run's config");
        out->exec = ARB_EXEC_FAILED;
        goto done;
    }
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = threads};
    if (prep && trn_runner_fits(prep, st))
        runner = prep;
    else if ((rv = trn_runner_open(&own, &st->config, NULL, &ro)))
        goto done;
    else
        runner = own;
    if (krn_rlog_decode(trn_runner_log(runner), logbytes, log_len)) {
        add_note(note, cap, "the trainer's rounding log is malformed: %s", ovt_errmsg());
        out->exec = ARB_EXEC_FRAUD;
        goto done;
    }
    trn_runner_result res = {.info.shard_differs = -1};
    trn_runner_set_data(runner, &ds);
    if (!(rv = trn_runner_adopt(runner, &st)) && (!trace || !(rv = trn_runner_trace_next(runner, trace))))
        rv = trn_runner_step(runner, &res);
    out->batch_hash = res.batch_hash;
    if (trace && !rv) {
        out->traced = true;
        out->trace_rc = res.trace_rc;
        out->trace_root = res.trace_root;
    }
    if (rv == OVT_EFRAUD || rv == OVT_ENUMERIC) {
        add_note(note, cap, "%s", ovt_errmsg());
        out->exec = rv == OVT_EFRAUD ? ARB_EXEC_FRAUD : ARB_EXEC_FAILED;
        rv = 0;
        goto done;
    }
    if (rv)
        goto done;
    out->state_hash = res.state_hash;
    chain_merkle_preimage pre = {.state_hash = out->state_hash, .batch_hash = out->batch_hash,
                                 .log_hash = g->trainer_log};
    chain_merkle_leaf_hash(&out->leaf, run_id, g->index, &pre);
    out->exec = ARB_EXEC_OK;
    out->shards = res.info.shards;
    out->shard_differs = res.info.shard_differs;
    /* the trainer's own leaf recomputed, yet its shard table disagrees: the
     * table is false (fraud), and it names no shard */
    if (trn_false_shard_table(g->index, out->shard_differs, !memcmp(out->leaf.b, g->trainer_node.b, 32))) {
        add_note(note, cap, "%s", ovt_errmsg());
        ovt_err_clear();
        out->exec = ARB_EXEC_FRAUD;
        out->shard_differs = -1;
    } else if (out->shard_differs >= 0)
        arb_eval_find_owner(out, store, run_id, g->index, note, cap);
done:
    if (runner) { /* the prepared runner keeps its memory, not the state or the data */
        trn_state_free(trn_runner_release(runner));
        trn_runner_set_data(runner, NULL);
    }
    trn_runner_free(own);
    trn_run_data_free(&ds);
    free(data);
    free(logbytes);
    trn_state_free(st);
    return rv;
}
