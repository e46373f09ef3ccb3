/* The auditor's replay (see replay.h). */
#include "auditor/replay.h"

#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "kernels/rlog.h"
#include "trainer/checkpoint.h"
#include "trainer/init.h"
#include "dp/ranks.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state_hash.h"
#include "trainer/step.h"
#include "trainer/train.h"

/* Objects with no cap of their own here: the store's blob cap and the
 * caps ovt audit gives by name (store_expect) bound them. */
#define MAX_OBJECT ((size_t)1 << 36)

/* What a replay of one run directory needs: the trainer's files and the
 * runner that re-executes its steps. */
struct session {
    const char *dir;
    trn_run_config rc;
    ovt_hash config_hash;
    trn_run_data data;
    trn_step_table trainer;
    trn_runner *run;     /* the auditor's backend, REPLAY */
    uint64_t suspect_step; /* the first uncertain finding, 0: none */
    char suspect[512];
    uint64_t shard_step; /* the first step with a shard that differs from the table, 0: none */
    uint32_t shard;
    /* Band rules 2 on a backend other than cpu (canonical_step): the state
     * before the step, the arbiter's re-execution (a cpu runner, made when
     * first needed), and the steps it ran. */
    bool canon_check;
    int threads;
    trn_state *pre;
    trn_runner *canon;
    uint64_t canonical_steps;
    /* The step to trace (0: none), its recorder, and what came of it. */
    uint64_t trace_step;
    krn_trace *trace;
    bool traced;
    int trace_rc;
    ovt_hash trace_root;
    /* Proof of replay: every step traced, its sites' output roots kept. */
    bool sites;
    const ovt_hash *site_beacon;
    uint32_t nsites, site_stride, site;
    ovt_hash *site_roots;
};

static void session_close(struct session *r)
{
    trn_run_data_free(&r->data);
    trn_step_table_free(&r->trainer);
    trn_runner_free(r->run);
    trn_state_free(r->pre);
    trn_runner_free(r->canon);
    free(r->site_roots);
    memset(r, 0, sizeof *r);
}

static int session_open(struct session *r, const char *dir, const char *data_path, krn_backend_kind backend,
                        int threads)
{
    memset(r, 0, sizeof *r);
    r->dir = dir;
    char path[4096];
    int rv;
    if ((rv = trn_run_load_config(dir, &r->rc, &r->config_hash)) || (rv = trn_run_path(path, sizeof path, dir, NULL, 0,
                                                                                 "steps.bin")) ||
        (rv = trn_step_table_read(&r->trainer, path)))
        goto fail;
    if (memcmp(r->trainer.config_hash.b, r->config_hash.b, 32) != 0) {
        rv = ovt_fail(OVT_EFORMAT, "%s belongs to another run config than %s/config.bin", path, dir);
        goto fail;
    }
    if (r->trainer.count < 2) {
        rv = ovt_fail(OVT_EFORMAT, "%s holds no steps", path);
        goto fail;
    }
    if ((rv = trn_run_data_load(&r->data, data_path, &r->rc, 0)))
        goto fail;
    /* Band rules 2: on the cpu backend the auditor's values are the
     * arbiter's, so it applies the arbiter's rule itself; elsewhere it
     * re-executes canonically where its own view is uncertain. */
    bool canonical = r->rc.band_rules == TRN_BAND_RULES_CANONICAL;
    r->canon_check = canonical && backend != KRN_BACKEND_CPU;
    r->threads = threads;
    trn_runner_opts ro = {.backend = backend, .mode = KRN_REPLAY,
                          .verifier = canonical && !r->canon_check ? KRN_VERIFY_ARBITER : KRN_VERIFY_AUDITOR,
                          .threads = threads, .hash_later = true, .tolerant = !r->canon_check};
    if ((rv = trn_runner_open(&r->run, &r->rc, &r->data, &ro)))
        goto fail;
    return 0;
fail:
    session_close(r);
    return rv;
}

/* The runner's state: the one at or before `step` (trn_run_start_state). */
static int session_start(struct session *r, uint64_t step)
{
    uint64_t at;
    trn_state *st = NULL;
    int rv = trn_run_start_state(&st, &at, r->dir, &r->rc, &r->config_hash, &r->trainer, step);
    if (!rv)
        rv = trn_runner_adopt(r->run, &st);
    trn_state_free(st);
    return rv;
}

/* The stateHash of our own at fraudulent step i (docs/numeric-contract.md,
 * "The tolerant replay"): the tolerant replay's state st, so that the
 * narrowing can find the fault in the step; zero where there is none (st
 * NULL: the log failed otherwise, as a malformed one) or where it is the
 * trainer's: a log that lies only about decisions the trainer did not take
 * would otherwise leave the leaves equal and the fraud undisputed. */
static void fraud_state(const struct session *r, uint64_t i, const trn_state *st, chain_merkle_preimage *leaf)
{
    memset(&leaf->state_hash, 0, sizeof leaf->state_hash);
    if (!st)
        return;
    ovt_hash h;
    trn_state_hash(&h, st);
    if (i < r->trainer.count && memcmp(h.b, r->trainer.steps[i].state_hash.b, 32) != 0)
        leaf->state_hash = h;
}

/* Band rules 2, the auditor on another backend than cpu: step i had a
 * finding that a canonical view within the op's bound of the auditor's
 * could make (rule 3 as an auditor, kernels/site.h), or a certain violation
 * (*fraud already 1, detail said), so the step is re-executed as the
 * arbiter will, on the cpu backend from the state before it (r->pre) with
 * its log (the file's bytes), tolerantly, and that view decides: a log it
 * rejects is fraud (the dispute is then won; leaf's stateHash: fraud_state
 * of the canonical tolerant replay), and otherwise its state is the
 * auditor's. */
static int canonical_step(struct session *r, const uint8_t *log, size_t log_len, int *fraud, char *detail,
                          size_t cap, chain_merkle_preimage *leaf)
{
    int rv = 0;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = r->threads, .prefault = true,
                          .hash_later = true, .tolerant = true};
    if (!r->canon && (rv = trn_runner_open(&r->canon, &r->rc, &r->data, &ro)))
        return ovt_fail_wrap(rv, "preparing the canonical re-execution (the cpu backend)");
    uint64_t i = r->pre->step + 1;
    trn_runner_result res;
    if ((rv = trn_runner_copy_state(r->canon, r->pre)) || (rv = krn_rlog_decode(trn_runner_log(r->canon), log,
                                                                                 log_len)))
        return rv;
    rv = trn_runner_step(r->canon, &res);
    r->canonical_steps++;
    const krn_finding *v = trn_runner_violation(r->canon);
    if (rv == OVT_EFRAUD || (!rv && (v->rule != KRN_RULE_NONE || *fraud))) {
        if (!*fraud)
            snprintf(detail, cap, "the rounding log of step %llu is fraudulent by the canonical re-execution (the "
                     "arbiter's computation, rule 3): %s", (unsigned long long)i, rv ? ovt_errmsg() : v->message);
        *fraud = 1;
        fraud_state(r, i, rv ? NULL : trn_runner_state(r->canon), leaf);
        return 0;
    }
    if (!rv)
        rv = trn_runner_copy_state(r->run, trn_runner_state(r->canon));
    return rv ? ovt_fail_wrap(rv, "step %llu re-executed canonically", (unsigned long long)i) : 0;
}

/* Keeps the state before the step for canonical_step. */
static int keep_pre(struct session *r)
{
    const trn_state *st = trn_runner_state(r->run);
    if (!r->canon_check)
        return 0;
    if (r->pre) {
        trn_state_copy(r->pre, st);
        return 0;
    }
    return trn_state_clone(&r->pre, st);
}

/* Step i of the trainer's log, its bytes into *bytes (malloc'd) and their
 * hash into leaf, decoded into the runner's log. A malformed log, or one of
 * another step, is *fraud = 1 with the reason in detail. */
static int read_log(struct session *r, uint64_t i, uint8_t **bytes, size_t *len, chain_merkle_preimage *leaf,
                    int *fraud, char *detail, size_t cap)
{
    char path[4096];
    krn_rlog *log = trn_runner_log(r->run);
    int rv = trn_run_path(path, sizeof path, r->dir, "logs", i, "rlog");
    if (rv || (rv = ovt_read_file(path, bytes, len, (size_t)1 << 31)))
        return rv ? ovt_fail_wrap(rv, "the rounding log of step %llu", (unsigned long long)i) : rv;
    ovt_sha256(&leaf->log_hash, *bytes, *len);
    rv = krn_rlog_decode(log, *bytes, *len);
    if (!rv && krn_rlog_step(log) != i)
        rv = ovt_fail(OVT_EFORMAT, "it is the log of step %llu", (unsigned long long)krn_rlog_step(log));
    if (rv == OVT_EFORMAT) {
        *fraud = 1;
        snprintf(detail, cap, "the rounding log of step %llu is malformed: %s", (unsigned long long)i, ovt_errmsg());
        return 0;
    }
    return rv;
}

/* Keeps the output roots of step i's sites, traced into t. */
static int keep_sites(struct session *r, uint64_t i, const krn_trace *t, int trace_rc)
{
    if (trace_rc)
        return ovt_fail(trace_rc, "the trace of step %llu, needed for proof of replay, failed: %s",
                        (unsigned long long)i, krn_trace_error(t));
    size_t n = krn_trace_count(t);
    if (!r->site_roots) {
        if (n == 0 || n > UINT32_MAX)
            return ovt_fail(OVT_EFORMAT, "step %llu ran %zu rounding sites", (unsigned long long)i, n);
        r->nsites = (uint32_t)n;
        r->site_stride = r->site_beacon ? 1 : r->nsites;
        r->site = r->site_beacon ? ovt_hash_mod(r->site_beacon, r->nsites) : 0; /* chain_arb_site_index */
        if (!(r->site_roots = calloc(r->trainer.count * r->site_stride, sizeof *r->site_roots)))
            return ovt_fail(OVT_ENOMEM, "site roots of %zu steps", r->trainer.count);
    } else if (n != r->nsites) {
        return ovt_fail(OVT_EFORMAT, "step %llu ran %zu rounding sites, the steps before it %u",
                        (unsigned long long)i, n, r->nsites);
    }
    if (r->site_beacon)
        r->site_roots[i] = krn_trace_record_at(t, r->site)->root;
    else
        for (size_t k = 0; k < n; k++)
            r->site_roots[i * n + k] = krn_trace_record_at(t, k)->root;
    return 0;
}

/* Runs the runner's next step with the trainer's log. *leaf gets the
 * auditor's preimage; a log the verifier rejects (malformed, or an entry too
 * far from a midpoint) is *fraud = 1 with the reason in detail, and the
 * step's state is then unusable. Other failures are returned. */
static int session_step(struct session *r, chain_merkle_preimage *leaf, int *fraud, char *detail, size_t cap)
{
    uint64_t i = trn_runner_state(r->run)->step + 1;
    memset(leaf, 0, sizeof *leaf);
    *fraud = 0;
    uint8_t *bytes = NULL;
    size_t len = 0;
    trn_runner_result res;
    krn_trace *own = NULL, *t = i == r->trace_step ? r->trace : NULL;
    int rv = read_log(r, i, &bytes, &len, leaf, fraud, detail, cap);
    if (rv || *fraud || (rv = keep_pre(r)))
        goto done;
    if (!t && r->sites) {
        if ((rv = krn_trace_new(&own, false)))
            goto done;
        /* only the outputs' roots: the beacon's site's once the step's site
         * count is known, every site's before (and without a beacon) */
        krn_trace_outputs_only(own, r->site_beacon && r->site_roots ? r->site : KRN_TRACE_ALL_SITES);
        t = own;
    }
    if (t && (rv = trn_runner_trace_next(r->run, t)))
        goto done;
    rv = trn_runner_step(r->run, &res);
    leaf->batch_hash = res.batch_hash;
    if (i == r->trace_step && r->trace) {
        r->traced = true;
        r->trace_rc = res.trace_rc;
        r->trace_root = res.trace_root;
    }
    if (rv == OVT_EFRAUD) {
        *fraud = 1;
        snprintf(detail, cap, "the rounding log of step %llu is fraudulent: %s", (unsigned long long)i, ovt_errmsg());
        /* on another backend, a certain violation of our own view: the
         * state of our own is the canonical tolerant replay's */
        rv = r->canon_check ? canonical_step(r, bytes, len, fraud, detail, cap, leaf) : 0;
        goto done;
    }
    if (rv) {
        rv = ovt_fail_wrap(rv, "step %llu", (unsigned long long)i);
        goto done;
    }
    /* The tolerant replay went past a violation of the log: fraud, with the
     * strict replay's message (fraud_state says which state is ours). */
    const krn_finding *v = trn_runner_violation(r->run);
    if (v->rule != KRN_RULE_NONE) {
        *fraud = 1;
        snprintf(detail, cap, "the rounding log of step %llu is fraudulent: %s", (unsigned long long)i, v->message);
        fraud_state(r, i, trn_runner_state(r->run), leaf);
        goto done;
    }
    if (res.info.shard_differs >= 0 && r->shard_step == 0) {
        r->shard_step = i;
        r->shard = (uint32_t)res.info.shard_differs;
    }
    const krn_finding *f = trn_runner_finding(r->run);
    if (f->rule != KRN_RULE_NONE && r->canon_check) {
        if ((rv = canonical_step(r, bytes, len, fraud, detail, cap, leaf)) || *fraud)
            goto done;
    } else if (f->rule != KRN_RULE_NONE && r->suspect_step == 0) {
        r->suspect_step = i;
        snprintf(r->suspect, sizeof r->suspect, "%s", f->message);
    }
    trn_state_hash(&leaf->state_hash, trn_runner_state(r->run));
    /* a shard table that differs from the recomputed shards while the
     * state is the trainer's is a false table: fraud, no shard named */
    if (res.info.shard_differs >= 0 && i < r->trainer.count &&
        trn_false_shard_table(i, res.info.shard_differs,
                              !memcmp(leaf->state_hash.b, r->trainer.steps[i].state_hash.b, 32))) {
        *fraud = 1;
        snprintf(detail, cap, "%s", ovt_errmsg());
        ovt_err_clear();
        if (r->shard_step == i) /* the table named that shard, falsely */
            r->shard_step = 0;
        memset(&leaf->state_hash, 0, sizeof leaf->state_hash); /* as every fraud: no state of our own at i */
        goto done;
    }
    if (r->sites)
        rv = keep_sites(r, i, t, res.trace_rc);
done:
    krn_trace_free(own);
    free(bytes);
    return rv;
}

void aud_report_free(aud_report *r)
{
    trn_step_table_free(&r->own);
    trn_step_table_free(&r->trainer);
    free(r->site_roots);
    r->site_roots = NULL;
}

/* A wrong stateHash for the lying auditor: SHA-256("ovt.lie" || honest). */
static void lie(ovt_hash *h)
{
    uint8_t buf[7 + 32];
    memcpy(buf, "ovt.lie", 7);
    memcpy(buf + 7, h->b, 32);
    ovt_sha256(h, buf, sizeof buf);
}

static void compare(aud_report *out, uint64_t i, const chain_merkle_preimage *own, const chain_merkle_preimage *theirs)
{
    out->state_differs = memcmp(own->state_hash.b, theirs->state_hash.b, 32) != 0;
    out->batch_differs = memcmp(own->batch_hash.b, theirs->batch_hash.b, 32) != 0;
    out->log_differs = memcmp(own->log_hash.b, theirs->log_hash.b, 32) != 0;
    if (out->state_differs || out->batch_differs || out->log_differs) {
        out->finding = AUD_DIVERGED;
        out->step = i;
    }
}

int aud_replay(const aud_replay_opts *opts, aud_report *out)
{
    memset(out, 0, sizeof *out);
    struct session r;
    const trn_state *st = NULL;
    int rv = session_open(&r, opts->run_dir, opts->data_path, opts->backend, opts->threads);
    if (rv)
        return rv;
    r.trace_step = opts->trace_step;
    r.trace = opts->trace;
    r.sites = opts->sites;
    r.site_beacon = opts->site_beacon;
    uint64_t n = r.trainer.count - 1;
    uint64_t from = opts->from ? opts->from : 1, to = opts->to ? opts->to : n;
    if (from > to || to > n) {
        rv = ovt_fail(OVT_EINVAL, "steps %llu..%llu are not within the run's 1..%llu", (unsigned long long)from,
                      (unsigned long long)to, (unsigned long long)n);
        goto done;
    }
    out->steps = n;
    out->partial = from > 1 || to < n;
    out->own.config_hash = r.config_hash;
    out->own.count = n + 1;
    if (!(out->own.steps = calloc(n + 1, sizeof *out->own.steps))) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %llu steps", (unsigned long long)n);
        goto done;
    }
    if ((rv = session_start(&r, from - 1)))
        goto done;
    st = trn_runner_state(r.run);
    memcpy(out->own.steps, r.trainer.steps, (st->step + 1) * sizeof *out->own.steps);
    if (st->step == 0) {
        trn_state_hash(&out->own.steps[0].state_hash, st);
        compare(out, 0, &out->own.steps[0], &r.trainer.steps[0]);
    }
    while (out->finding == AUD_VERIFIED && st->step < to) {
        uint64_t i = st->step + 1;
        int fraud;
        if ((rv = session_step(&r, &out->own.steps[i], &fraud, out->detail, sizeof out->detail)))
            goto done;
        out->replayed++;
        if (fraud) {
            out->finding = AUD_FRAUD;
            out->step = i;
            out->state_differs = true;
            break;
        }
        if (i < from)
            out->own.steps[i] = r.trainer.steps[i];
        else
            compare(out, i, &out->own.steps[i], &r.trainer.steps[i]);
        if (opts->progress && opts->every && (i % opts->every == 0 || i == to))
            fprintf(opts->progress, "replayed step %llu of %llu\n", (unsigned long long)i, (unsigned long long)to);
    }
    for (uint64_t i = st->step + 1; out->finding == AUD_VERIFIED && i <= n; i++)
        out->own.steps[i] = r.trainer.steps[i]; /* not replayed (to < N): the trainer's claim */
    if (opts->lie_at && out->finding == AUD_VERIFIED)
        for (uint64_t i = opts->lie_at; i <= n; i++)
            lie(&out->own.steps[i].state_hash);
    out->suspect_step = r.suspect_step;
    snprintf(out->suspect, sizeof out->suspect, "%s", r.suspect);
    out->shard_step = r.shard_step;
    out->shard = r.shard;
    out->canonical_steps = r.canonical_steps;
    out->trace_step = r.trace_step;
    out->traced = r.traced;
    out->trace_rc = r.trace_rc;
    out->trace_root = r.trace_root;
    out->nsites = r.nsites;
    out->site_stride = r.site_stride;
    out->site = r.site;
    if (r.site_beacon)
        out->site_beacon = *r.site_beacon;
    out->site_roots = r.site_roots;
    r.site_roots = NULL;
    out->rule = trn_config_rule(&r.rc);
    out->canonical_view = out->rule == KRN_RULE_V3 && !r.canon_check;
    dp_shard_owner owner;
    if (r.shard_step && dp_ranks_owner_in(&owner, r.dir, r.shard_step, r.shard) == 0) {
        out->shard_owner_known = true;
        out->shard_owner_bound = owner.bound;
        out->shard_rank = owner.rank;
        snprintf(out->shard_host, sizeof out->shard_host, "%s", owner.host);
    } else if (r.shard_step) {
        snprintf(out->shard_owner_note, sizeof out->shard_owner_note, "%s", ovt_errmsg());
    }
    ovt_err_clear();
    out->trainer = r.trainer;
    memset(&r.trainer, 0, sizeof r.trainer);
done:
    session_close(&r);
    if (rv)
        aud_report_free(out);
    return rv;
}

int aud_rebuild_state(trn_state **out, const char *run_dir, const char *data_path, uint64_t step)
{
    *out = NULL;
    struct session r;
    int rv = session_open(&r, run_dir, data_path, KRN_BACKEND_CPU, 0);
    if (rv)
        return rv;
    if (step >= r.trainer.count) {
        rv = ovt_fail(OVT_EINVAL, "the run has no step %llu", (unsigned long long)step);
        goto done;
    }
    if ((rv = session_start(&r, step)))
        goto done;
    const trn_state *st = trn_runner_state(r.run);
    while (st->step < step) {
        chain_merkle_preimage leaf;
        int fraud;
        char detail[512];
        if ((rv = session_step(&r, &leaf, &fraud, detail, sizeof detail)))
            goto done;
        if (fraud || memcmp(leaf.state_hash.b, r.trainer.steps[st->step].state_hash.b, 32) != 0) {
            rv = ovt_fail(OVT_EFORMAT, "replaying step %llu of %s does not give the state its step table claims%s%s",
                          (unsigned long long)st->step, run_dir, fraud ? ": " : "", fraud ? detail : "");
            goto done;
        }
    }
    *out = trn_runner_release(r.run);
done:
    session_close(&r);
    return rv;
}

/* Fetches blob name (at most max_len bytes, and within the store's caps)
 * into path. */
static int fetch_blob(store_ctx *store, const ovt_hash *name, size_t max_len, const char *path)
{
    uint8_t *buf;
    size_t len;
    int rv = store_get(store, name, max_len, &buf, &len);
    if (rv)
        return rv;
    rv = ovt_write_atomic(path, buf, len, 0644);
    free(buf);
    return rv;
}

/* A run that starts from given parameters: the blob named init_hash (the
 * store checks its SHA-256), written as the run's step-0 checkpoint. */
static int fetch_init(store_ctx *store, const trn_run_config *rc, const char *dir)
{
    if (!trn_config_has_init(rc))
        return 0;
    uint8_t *buf;
    size_t len;
    trn_state *st;
    char path[4096];
    /* Exactly 4 bytes a parameter of the config's model: nothing longer is
     * taken from the store. */
    size_t want;
    int rv = trn_init_blob_len(rc, &want);
    if (!rv)
        rv = store_get(store, &rc->init_hash, want, &buf, &len);
    if (rv)
        return ovt_fail_wrap(rv, "the run's starting parameters (init_hash, %zu bytes for the config's model)", want);
    rv = trn_state_start(&st, rc, buf, len);
    free(buf);
    if (rv)
        return ovt_fail_wrap(rv, "the run's starting parameters (init_hash)");
    if (!(rv = trn_run_path(path, sizeof path, dir, "ckpt", 0, "ckpt")))
        *strrchr(path, '/') = '\0';
    if (!rv && !(rv = ovt_mkdirs(path, 0755)) && !(rv = trn_run_path(path, sizeof path, dir, "ckpt", 0, "ckpt")))
        rv = trn_checkpoint_write(st, path);
    trn_state_free(st);
    return rv;
}

int aud_fetch_run(store_ctx *store, const ovt_hash *run_id, const char *dir, store_manifest *manifest)
{
    store_manifest m;
    trn_step_table table = {0};
    trn_run_config rc;
    ovt_hash ch;
    char path[4096];
    int rv = store_get_manifest(store, run_id, &m);
    if (rv)
        return rv;
    if ((rv = trn_run_path(path, sizeof path, dir, "logs", 0, "rlog")))
        return rv;
    *strrchr(path, '/') = '\0';
    if ((rv = ovt_mkdirs(path, 0755)) || (rv = trn_run_path(path, sizeof path, dir, NULL, 0, "config.bin")) ||
        (rv = fetch_blob(store, &m.config_hash, STORE_MAX_CONFIG, path)) || (rv = trn_run_load_config(dir, &rc, &ch)) ||
        (rv = trn_run_path(path, sizeof path, dir, NULL, 0, "steps.bin")) ||
        (rv = fetch_blob(store, &m.steps_hash, MAX_OBJECT, path)) || (rv = trn_step_table_read(&table, path)))
        goto done;
    if (memcmp(rc.dataset_hash.b, m.dataset_hash.b, 32) != 0 || memcmp(table.config_hash.b, ch.b, 32) != 0 ||
        table.count != m.steps + 1) {
        rv = ovt_fail(OVT_EFORMAT, "the run published in %s does not hang together (config, dataset and step "
                      "table disagree)", store_url_of(store));
        goto done;
    }
    if ((rv = trn_run_path(path, sizeof path, dir, NULL, 0, "dataset.bin")) ||
        (rv = fetch_blob(store, &m.dataset_hash, MAX_OBJECT, path)) || (rv = fetch_init(store, &rc, dir)))
        goto done;
    for (size_t i = 1; i < table.count; i++) {
        if ((rv = trn_run_path(path, sizeof path, dir, "logs", i, "rlog")))
            goto done;
        /* A log is at most what its format allows (kernels/rlog.h). */
        rv = fetch_blob(store, &table.steps[i].log_hash, KRN_RLOG_MAX_FILE, path);
        if (rv == OVT_ENOTFOUND)
            rv = 0;
        if (rv) {
            rv = ovt_fail_wrap(rv, "the rounding log of step %zu (at most %zu bytes)", i, (size_t)KRN_RLOG_MAX_FILE);
            goto done;
        }
    }
    if (manifest)
        *manifest = m;
done:
    trn_step_table_free(&table);
    return rv;
}
