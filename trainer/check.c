/* A run directory's step re-executed and compared (trainer/check.h). */
#include "trainer/check.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "chain/parse.h"
#include "common/fileio.h"
#include "trainer/run.h"

/* A JSON file of the run directory, or NULL (no error) when it is absent. */
static json_t *load_json(const char *dir, const char *name)
{
    char path[4096];
    uint8_t *buf;
    size_t len;
    if (ovt_path_join(path, sizeof path, dir, name) || ovt_read_file(path, &buf, &len, 1 << 24))
        return NULL;
    json_t *j = json_loadb((const char *)buf, len, 0, NULL);
    free(buf);
    return j;
}

/* The run's runId: run.json's when not zero, else receipt.json's. */
static bool run_id_of(const char *dir, ovt_hash *id)
{
    static const ovt_hash zero;
    const char *files[] = {"run.json", "receipt.json"};
    for (int f = 0; f < 2; f++) {
        json_t *j = load_json(dir, files[f]);
        const char *s = json_string_value(json_object_get(j, "run_id"));
        bool ok = s && chain_parse_hash(id, "run_id", s) == 0 && memcmp(id->b, zero.b, 32) != 0;
        json_decref(j);
        if (ok)
            return true;
    }
    return false;
}

int trn_run_dataset(trn_run_data *d, trn_run_config *rc, const char *dir, const char *data)
{
    char path[4096] = "";
    if (data) {
        snprintf(path, sizeof path, "%s", data);
    } else {
        json_t *j = load_json(dir, "receipt.json");
        const char *s = json_string_value(json_object_get(j, "data"));
        if (s)
            snprintf(path, sizeof path, "%s", s);
        json_decref(j);
        if (!path[0])
            return ovt_fail(OVT_EINVAL, "no dataset: pass --data FILE (the run's receipt.json names none)");
    }
    ovt_hash ch;
    int rv = trn_run_load_config(dir, rc, &ch);
    if (!rv && (rv = trn_run_data_load(d, path, rc, 0)))
        rv = ovt_fail_wrap(rv, "dataset %s", path);
    return rv;
}

/* The dataset, and the step table (*table), which must hold step k. */
static int open_step(trn_run_data *d, trn_step_table *table, const char *dir, const char *data, uint64_t k)
{
    trn_run_config rc;
    char path[4096];
    int rv = trn_run_dataset(d, &rc, dir, data);
    if (!rv && !(rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")))
        rv = trn_step_table_read(table, path);
    if (!rv && k >= table->count)
        rv = ovt_fail(OVT_EINVAL, "the run in %s has steps 1..%zu, not step %llu", dir,
                      table->count ? table->count - 1 : 0, (unsigned long long)k);
    return rv;
}

int trn_step_check_run(trn_step_check *out, const char *dir, const char *data, uint64_t k, int threads)
{
    return trn_step_check_traced(out, dir, data, k, threads, NULL);
}

int trn_step_check_traced(trn_step_check *out, const char *dir, const char *data, uint64_t k, int threads,
                          trn_step_trace *tr)
{
    memset(out, 0, sizeof *out);
    trn_run_data d;
    memset(&d, 0, sizeof d);
    trn_step_table table = {0};
    int rv = open_step(&d, &table, dir, data, k);
    if (!rv && tr)
        rv = trn_step_replay_traced(dir, &d, k, threads, tr, &out->replay);
    else if (!rv)
        rv = trn_step_replay_run(dir, &d, k, threads, &out->replay, NULL, NULL);
    trn_run_data_free(&d);
    if (rv == OVT_EFRAUD) {
        snprintf(out->fraud, sizeof out->fraud, "%s", ovt_errmsg());
        rv = 0;
        out->verdict = TRN_CHECK_FRAUD;
    }
    if (rv) {
        trn_step_table_free(&table);
        return rv;
    }
    const trn_replay_result *r = &out->replay;
    out->want = table.steps[k];
    trn_step_table_free(&table);
    out->got = (chain_merkle_preimage){.state_hash = r->state_hash, .batch_hash = r->batch_hash,
                                       .log_hash = r->log_hash};
    ovt_hash run_id;
    out->has_run_id = run_id_of(dir, &run_id);
    if (out->has_run_id) {
        chain_merkle_leaf_hash(&out->leaf, &run_id, k, &out->got);
        chain_merkle_leaf_hash(&out->table_leaf, &run_id, k, &out->want);
    }
    out->state_matches = !memcmp(out->got.state_hash.b, out->want.state_hash.b, 32);
    out->batch_matches = !memcmp(out->got.batch_hash.b, out->want.batch_hash.b, 32);
    out->log_matches = !memcmp(out->got.log_hash.b, out->want.log_hash.b, 32);
    if (out->verdict != TRN_CHECK_FRAUD &&
        trn_false_shard_table(k, r->shard_differs, out->state_matches && out->batch_matches && out->log_matches)) {
        snprintf(out->fraud, sizeof out->fraud, "%s", ovt_errmsg());
        ovt_err_clear();
        out->verdict = TRN_CHECK_FRAUD;
        out->replay.shard_differs = -1; /* the false table blames nobody */
    } else if (r->shard_differs >= 0) {
        out->has_owner = dp_ranks_owner_in(&out->owner, dir, k, (uint32_t)r->shard_differs) == 0;
        if (!out->has_owner)
            snprintf(out->owner_note, sizeof out->owner_note, "%s", ovt_errmsg());
        ovt_err_clear();
    }
    if (out->verdict != TRN_CHECK_FRAUD)
        out->verdict = out->state_matches && out->batch_matches && out->log_matches ? TRN_CHECK_MATCH
                                                                                    : TRN_CHECK_MISMATCH;
    return 0;
}

int trn_step_sites(krn_site_stats **rows, size_t *nrows, const char *dir, const char *data, uint64_t k, int threads)
{
    *rows = NULL;
    *nrows = 0;
    trn_run_data d;
    memset(&d, 0, sizeof d);
    trn_step_table table = {0};
    int rv = open_step(&d, &table, dir, data, k);
    trn_step_table_free(&table);
    trn_replay_result r;
    if (!rv)
        rv = trn_step_replay_run(dir, &d, k, threads, &r, rows, nrows);
    trn_run_data_free(&d);
    return rv;
}

void trn_site_totals(krn_site_stats *total, const krn_site_stats *rows, size_t n)
{
    memset(total, 0, sizeof *total);
    for (size_t i = 0; i < n; i++) {
        total->n += rows[i].n;
        total->entries += rows[i].entries;
        total->within_half += rows[i].within_half;
        total->within_tau += rows[i].within_tau;
        total->free_v2 += rows[i].free_v2;
        total->free_v3 += rows[i].free_v3;
    }
}
