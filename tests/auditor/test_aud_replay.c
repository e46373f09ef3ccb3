/* The auditor's replay against runs made by the built `ovt train`:
 * an honest run verifies on ref and shuffle; a run resumed from a tampered
 * checkpoint diverges exactly at that step; a log changed after the fact is
 * found at its step (logHash differs); a forged log entry, committed by the
 * trainer, is reported as fraud at its step; missing files and a wrong
 * dataset are clear errors; the run published to a store and fetched over
 * http:// verifies, and a swapped log in the store is refused. The expected steps are the ones the test
 * tampered with. */
#include <unistd.h>

#include "support/ovt_fixture.h"
#include "auditor/replay.h"
#include "check.h"
#include "kernels/rlog.h"
#include "party/commit.h"
#include "party/sites.h"
#include "trainer/checkpoint.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state_hash.h"
#include "trainer/step.h"

#define STEPS 20

static aud_report replay(const char *run, krn_backend_kind backend, int *rv)
{
    aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = backend};
    aud_report r;
    *rv = aud_replay(&o, &r);
    return r;
}

static void copy_run(const char *from, const char *name, char *to, size_t cap)
{
    snprintf(to, cap, "%s/%s", af_dir, name);
    CHECK(tsup_runl(NULL, "/bin/cp", "-r", from, to, NULL) == 0);
}

/* Replaces entry k of the step table in run/steps.bin. */
static void patch_table(const char *run, uint64_t k, const ovt_hash *state, const ovt_hash *log)
{
    char path[512];
    trn_step_table t;
    snprintf(path, sizeof path, "%s/steps.bin", run);
    CHECK(trn_step_table_read(&t, path) == 0);
    if (state)
        t.steps[k].state_hash = *state;
    if (log)
        t.steps[k].log_hash = *log;
    CHECK(trn_step_table_write(&t, path) == 0);
    trn_step_table_free(&t);
}

/* The first step >= 2 whose log has an entry, and that log. */
static uint64_t step_with_entries(const char *run, krn_rlog *log)
{
    char path[512];
    for (uint64_t i = 2; i <= STEPS; i++) {
        CHECK(trn_run_path(path, sizeof path, run, "logs", i, "rlog") == 0);
        CHECK(krn_rlog_read_file(log, path) == 0);
        if (krn_rlog_nentries(log) > 0)
            return i;
    }
    return 0;
}

static void test_tampered_checkpoint(const char *honest)
{
    char run[512], path[512];
    copy_run(honest, "ckpt", run, sizeof run);
    /* Flip the lowest mantissa bit of one parameter in the step-8 checkpoint
     * (still a finite FP32 grid value), record its hash as the trainer's
     * claim for step 8, and let the trainer go on from it. */
    trn_state *st;
    CHECK(trn_run_path(path, sizeof path, run, "ckpt", 8, "ckpt") == 0);
    CHECK(trn_checkpoint_read(&st, path) == 0);
    uint32_t bits;
    memcpy(&bits, &st->params[3], 4);
    bits ^= 1;
    memcpy(&st->params[3], &bits, 4);
    CHECK(trn_checkpoint_write(st, path) == 0);
    ovt_hash h;
    trn_state_hash(&h, st);
    trn_state_free(st);
    patch_table(run, 8, &h, NULL);
    CHECK(trn_run_path(path, sizeof path, run, "ckpt", 16, "ckpt") == 0 && unlink(path) == 0);
    CHECK(trn_run_path(path, sizeof path, run, "ckpt", STEPS, "ckpt") == 0 && unlink(path) == 0);
    snprintf(path, sizeof path, "%d", STEPS);
    char *out = NULL;
    CHECK(af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", run, "--steps", path,
                     "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--json", "--resume",
                     NULL) == 0);
    CHECK(out && strstr(out, "\"steps_this_session\": 12"));
    free(out);
    int rv;
    aud_report r = replay(run, KRN_BACKEND_REF, &rv);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK(r.finding == AUD_DIVERGED && r.step == 8);
    CHECK(r.state_differs && !r.batch_differs && !r.log_differs);
    CHECK(r.replayed == 8);
    /* Leaves before the divergence are the trainer's; leaf 8 is not. */
    CHECK(memcmp(r.own.steps[7].state_hash.b, r.trainer.steps[7].state_hash.b, 32) == 0);
    CHECK(memcmp(r.own.steps[8].state_hash.b, r.trainer.steps[8].state_hash.b, 32) != 0);
    aud_report_free(&r);
    /* Starting after the tampered step from the trainer's own (tampered)
     * checkpoint: the rest of its history is consistent. */
    aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = KRN_BACKEND_REF, .from = 9};
    CHECK(aud_replay(&o, &r) == 0);
    CHECK(r.finding == AUD_VERIFIED && r.partial && r.replayed == STEPS - 8);
    aud_report_free(&r);
}

static void test_tampered_log(const char *honest)
{
    char run[512], path[512];
    copy_run(honest, "log", run, sizeof run);
    krn_rlog *log = krn_rlog_new(), *changed = krn_rlog_new();
    uint64_t k = step_with_entries(run, log);
    CHECK_MSG(k > 0, "no step of the run has a log entry");
    /* The same log with the first entry's direction flipped. */
    krn_rlog_reset(changed, k);
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        for (size_t e = 0; e < s->count; e++) {
            krn_rlog_entry x = s->entries[e];
            if (i == 0 && e == 0 && x.dir != KRN_DIR_VALUE)
                x.dir = x.dir == KRN_DIR_UP ? KRN_DIR_DOWN : KRN_DIR_UP;
            CHECK(krn_rlog_add(changed, s->site, s->n, x.index, x.dir, x.value) == 0);
        }
    }
    CHECK(trn_run_path(path, sizeof path, run, "logs", k, "rlog") == 0);
    CHECK(krn_rlog_write_file(changed, path) == 0);
    int rv;
    aud_report r = replay(run, KRN_BACKEND_REF, &rv);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK_MSG(r.finding != AUD_VERIFIED && r.step == k, "finding %d at %llu, tampered %llu", (int)r.finding,
              (unsigned long long)r.step, (unsigned long long)k);
    CHECK(r.finding == AUD_FRAUD || r.log_differs);
    aud_report_free(&r);

    /* A forged entry: an element the log does not name, claimed UP, in a log
     * the trainer commits to (its hash goes into the step table). */
    copy_run(honest, "forged", run, sizeof run);
    krn_rlog_reset(changed, k);
    const krn_rlog_site *s0 = krn_rlog_site_at(log, 0);
    uint64_t forged = s0->entries[s0->count - 1].index + 1;
    if (forged >= s0->n)
        forged = s0->entries[0].index - 1;
    for (size_t i = 0; i < krn_rlog_nsites(log); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(log, i);
        for (size_t e = 0; e < s->count; e++) {
            if (i == 0 && forged < s->entries[e].index && (e == 0 || forged > s->entries[e - 1].index))
                CHECK(krn_rlog_add(changed, s->site, s->n, forged, KRN_DIR_UP, 0) == 0);
            CHECK(krn_rlog_add(changed, s->site, s->n, s->entries[e].index, s->entries[e].dir, s->entries[e].value) == 0);
            if (i == 0 && e == s->count - 1 && forged > s->entries[e].index)
                CHECK(krn_rlog_add(changed, s->site, s->n, forged, KRN_DIR_UP, 0) == 0);
        }
    }
    CHECK(krn_rlog_nentries(changed) == krn_rlog_nentries(log) + 1);
    CHECK(trn_run_path(path, sizeof path, run, "logs", k, "rlog") == 0);
    CHECK(krn_rlog_write_file(changed, path) == 0);
    uint8_t *bytes;
    size_t len;
    ovt_hash lh;
    CHECK(ovt_read_file(path, &bytes, &len, 1 << 30) == 0);
    ovt_sha256(&lh, bytes, len);
    free(bytes);
    patch_table(run, k, NULL, &lh);
    r = replay(run, KRN_BACKEND_REF, &rv);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK_MSG(r.finding == AUD_FRAUD && r.step == k, "finding %d at %llu", (int)r.finding, (unsigned long long)r.step);
    CHECK(strstr(r.detail, "fraudulent") != NULL);
    /* The auditor's leaf k keeps the log it was given and no state. */
    CHECK(memcmp(r.own.steps[k].log_hash.b, lh.b, 32) == 0);
    aud_report_free(&r);

    /* The CLI says so, with exit status 3. */
    char *out = NULL;
    CHECK(af_ovt_run(&out, "audit", run, "--data", af_text, "--backend", "ref", "--json", NULL) == 3);
    char want[64];
    snprintf(want, sizeof want, "\"step\":%llu", (unsigned long long)k);
    CHECK(out && strstr(out, "\"finding\":\"fraud\"") && strstr(out, want));
    free(out);
    krn_rlog_free(log);
    krn_rlog_free(changed);
}

/* Replays step k of run three ways a verifier does and checks each calls it
 * fraud naming the step, an element and `rule`: ovt audit on cpu, ref and
 * shuffle (the auditor's certain violation), ovt step (the arbiter's path on
 * the command line) and a cpu REPLAY runner from the state before k (the
 * arbiter's evaluation). */
static void expect_fraud_everywhere(const char *run, uint64_t k, const char *rule)
{
    char want_step[32], want_json[32];
    snprintf(want_step, sizeof want_step, "step %llu site ", (unsigned long long)k);
    snprintf(want_json, sizeof want_json, "\"step\":%llu", (unsigned long long)k);
    krn_backend_kind backends[] = {KRN_BACKEND_CPU, KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE};
    for (int b = 0; b < 3; b++) {
        aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = backends[b], .to = k};
        if (backends[b] == KRN_BACKEND_SHUFFLE)
            o.from = k; /* shuffle is slow: from the checkpoint before k */
        aud_report r;
        CHECK_MSG(aud_replay(&o, &r) == 0, "%s", ovt_errmsg());
        CHECK_MSG(r.finding == AUD_FRAUD && r.step == k, "backend %d: finding %d at %llu (want fraud at %llu)", b,
                  (int)r.finding, (unsigned long long)r.step, (unsigned long long)k);
        /* the auditor's certain violation; on cpu under rule 3 the
         * auditor's view is the arbiter's, and every violation is one */
        CHECK_MSG(strstr(r.detail, rule) && strstr(r.detail, want_step) && strstr(r.detail, " element ") &&
                      (strstr(r.detail, "(certain") || (r.canonical_view && b == 0)),
                  "backend %d: %s", b, r.detail);
        aud_report_free(&r);
    }
    char *out = NULL;
    CHECK(af_ovt_run(&out, "audit", run, "--data", af_text, "--backend", "ref", "--json", NULL) == 3);
    CHECK_MSG(out && strstr(out, "\"finding\":\"fraud\"") && strstr(out, want_json) && strstr(out, rule), "%s",
              out ? out : "");
    free(out);
    char ks[24];
    snprintf(ks, sizeof ks, "%llu", (unsigned long long)k);
    out = NULL;
    CHECK(af_ovt_run(&out, "step", "--run", run, "--step", ks, "--data", af_text, NULL) == 1);
    CHECK_MSG(out && strstr(out, "FRAUD") && strstr(out, rule) && strstr(out, want_step), "%s", out ? out : "");
    free(out);
    /* the arbiter's evaluation: a cpu REPLAY runner from state k-1 */
    trn_state *st = NULL;
    trn_run_data d;
    trn_run_config rc;
    ovt_hash ch;
    trn_runner *r = NULL;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY};
    char path[512];
    CHECK(aud_rebuild_state(&st, run, af_text, k - 1) == 0);
    CHECK(trn_run_load_config(run, &rc, &ch) == 0 && trn_run_data_load(&d, af_text, &rc, 0) == 0);
    CHECK(trn_runner_open(&r, &rc, &d, &ro) == 0);
    CHECK(trn_run_path(path, sizeof path, run, "logs", k, "rlog") == 0 && krn_rlog_read_file(trn_runner_log(r), path) == 0);
    trn_runner_result res;
    if (st && trn_runner_adopt(r, &st) == 0) {
        CHECK(trn_runner_step(r, &res) == OVT_EFRAUD);
        CHECK_MSG(strstr(ovt_errmsg(), rule) && strstr(ovt_errmsg(), want_step), "%s", ovt_errmsg());
    }
    trn_runner_free(r);
    trn_state_free(st);
    trn_run_data_free(&d);
}

/* Writes log `orig` (of step k) into run as the trainer would commit it
 * (its hash in the step table): without any entry (flip SIZE_MAX) or with
 * the flip-th entry of the log (counting all sites) flipped if it is a
 * direction. */
static void rewrite_log(const char *run, uint64_t k, const krn_rlog *orig, size_t flip)
{
    char path[512];
    krn_rlog *changed = krn_rlog_new();
    krn_rlog_reset(changed, k);
    size_t ordinal = 0;
    for (size_t i = 0; flip != SIZE_MAX && i < krn_rlog_nsites(orig); i++) {
        const krn_rlog_site *s = krn_rlog_site_at(orig, i);
        for (size_t e = 0; e < s->count; e++, ordinal++) {
            krn_rlog_entry x = s->entries[e];
            if (x.dir != KRN_DIR_VALUE && ordinal == flip)
                x.dir = x.dir == KRN_DIR_UP ? KRN_DIR_DOWN : KRN_DIR_UP;
            CHECK(krn_rlog_add(changed, s->site, s->n, x.index, x.dir, x.value) == 0);
        }
    }
    CHECK(trn_run_path(path, sizeof path, run, "logs", k, "rlog") == 0);
    CHECK(krn_rlog_write_file(changed, path) == 0);
    uint8_t *bytes;
    size_t len;
    ovt_hash lh;
    CHECK(ovt_read_file(path, &bytes, &len, 1 << 30) == 0);
    ovt_sha256(&lh, bytes, len);
    free(bytes);
    patch_table(run, k, NULL, &lh);
    krn_rlog_free(changed);
}

/* Rule 2 (band rules 1): a flipped direction beyond tau'/2 is the
 * arbiter's impossible direction; the auditor reports it, as fraud where
 * certain (d' > tau'/2 + delta', rare among honest entries), else as a note
 * while its replay follows the entry. Finds such a flip among log's first
 * 400 entries and checks both roles. */
static void flips_rule2(const char *run, uint64_t k, const krn_rlog *log)
{
    bool noted = false;
    for (size_t j = 0; j < krn_rlog_nentries(log) && j < 400 && !noted; j++) {
        rewrite_log(run, k, log, j);
        aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = KRN_BACKEND_CPU, .to = k};
        aud_report r;
        CHECK(aud_replay(&o, &r) == 0);
        if (r.suspect_step && strstr(r.suspect, "impossible direction")) {
            noted = true;
            CHECK_MSG(r.suspect_step == k && strstr(r.suspect, "(not certain"), "%s", r.suspect);
            char ks[24], *sout = NULL;
            snprintf(ks, sizeof ks, "%llu", (unsigned long long)k);
            CHECK(af_ovt_run(&sout, "step", "--run", run, "--step", ks, "--data", af_text, NULL) == 1);
            CHECK_MSG(sout && strstr(sout, "FRAUD") && strstr(sout, "impossible direction"), "%s", sout ? sout : "");
            free(sout);
            sout = NULL;
            CHECK(af_ovt_run(&sout, "audit", run, "--data", af_text, "--backend", "cpu", NULL) != 1);
            CHECK_MSG(sout && strstr(sout, "note: the log of step") && strstr(sout, "impossible direction"), "%s",
                      sout ? sout : "");
            free(sout);
        }
        aud_report_free(&r);
    }
    CHECK_MSG(noted, "step %llu: no flipped direction lies beyond tau'/2", (unsigned long long)k);
}

/* Rule 3 (band rules 2): the auditor on cpu holds the arbiter's values, so
 * it never notes and follows: a flip is either free (d <= delta': the
 * replay follows it and the state then differs from the table's, which
 * keeps the honest one), or fraud at step k as `ovt step` rules it (the
 * flipped entry's impossible direction, or an entry further on that the
 * changed values no longer fit), and the auditor on ref, whose own view is
 * uncertain there, re-executes the step canonically and finds fraud at k
 * too. Goes through log's first 400 entries until it has seen a free flip
 * and an impossible direction, checking the first frauds in all three. */
static void flips_rule3(const char *run, uint64_t k, const krn_rlog *log)
{
    bool impossible = false;
    size_t free_flips = 0, frauds = 0;
    char ks[24];
    snprintf(ks, sizeof ks, "%llu", (unsigned long long)k);
    for (size_t j = 0; j < krn_rlog_nentries(log) && j < 400 && !(impossible && free_flips); j++) {
        rewrite_log(run, k, log, j);
        aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = KRN_BACKEND_CPU, .to = k};
        aud_report r;
        CHECK(aud_replay(&o, &r) == 0);
        CHECK_MSG(r.suspect_step == 0 && r.rule == 3 && r.canonical_view, "entry %zu: %s", j, r.suspect);
        free_flips += r.finding == AUD_DIVERGED;
        bool imp = r.finding == AUD_FRAUD && strstr(r.detail, "impossible direction") != NULL;
        if (r.finding == AUD_FRAUD && (imp ? !impossible : frauds < 2)) {
            frauds++;
            impossible |= imp;
            CHECK_MSG(r.step == k, "%s", r.detail);
            char *sout = NULL;
            CHECK(af_ovt_run(&sout, "step", "--run", run, "--step", ks, "--data", af_text, NULL) == 1);
            CHECK_MSG(sout && strstr(sout, "FRAUD") && (!imp || strstr(sout, "impossible direction")), "%s",
                      sout ? sout : "");
            free(sout);
            aud_report rr;
            o.backend = KRN_BACKEND_REF;
            CHECK(aud_replay(&o, &rr) == 0);
            CHECK_MSG(rr.finding == AUD_FRAUD && rr.step == k, "ref, entry %zu: finding %d: %s", j, (int)rr.finding,
                      rr.detail);
            aud_report_free(&rr);
        }
        aud_report_free(&r);
    }
    CHECK_MSG(impossible, "step %llu: no flipped direction lies beyond delta'", (unsigned long long)k);
    CHECK(free_flips > 0);
}

/* An incomplete log is fraud (contract version 2, and rule 3 alike). A
 * --nearest run (every log empty, the states equal to the honest run's) and
 * a run whose log k lost its entries are refused on every backend and by the
 * arbiter's path, naming a missing entry; flipped directions as the rule
 * says (flips_rule2, flips_rule3); the forged-log fault everywhere. honest
 * was made under band rules `rules`. */
static void test_incomplete_logs(const char *honest, const char *rules)
{
    char nearest[512], run[512];
    snprintf(nearest, sizeof nearest, "%s/nearest-r%s", af_dir, rules);
    char *out = NULL;
    CHECK(af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", nearest, "--steps", "20",
                     "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--nearest", "--json",
                     "--band-rules", rules, NULL) == 0);
    free(out);
    trn_step_table a, b;
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/steps.bin", honest);
    snprintf(pb, sizeof pb, "%s/steps.bin", nearest);
    CHECK(trn_step_table_read(&a, pa) == 0 && trn_step_table_read(&b, pb) == 0);
    /* the states are the honest run's: only the logs tell them apart */
    CHECK(a.count == b.count && memcmp(a.steps[1].state_hash.b, b.steps[1].state_hash.b, 32) == 0);
    trn_step_table_free(&a);
    trn_step_table_free(&b);
    expect_fraud_everywhere(nearest, 1, "missing entry");

    krn_rlog *log = krn_rlog_new();
    char name[32];
    snprintf(name, sizeof name, "dropped-r%s", rules);
    copy_run(honest, name, run, sizeof run);
    uint64_t k = step_with_entries(run, log);
    CHECK(k > 0 && krn_rlog_nentries(log) > 100);
    rewrite_log(run, k, log, SIZE_MAX);
    expect_fraud_everywhere(run, k, "missing entry");

    snprintf(name, sizeof name, "flipped-r%s", rules);
    copy_run(honest, name, run, sizeof run);
    if (strcmp(rules, "1") == 0)
        flips_rule2(run, k, log);
    else
        flips_rule3(run, k, log);

    /* A certain impossible direction: the trainer's forged-log fault logs
     * the wrong side of an element 1.25..1.5 tau from its midpoint. */
    char forged[512];
    snprintf(forged, sizeof forged, "%s/forged-r%s", af_dir, rules);
    out = NULL;
    CHECK(af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", forged, "--steps", "4",
                     "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--inject-fault",
                     "forged-log", "--fault-step", "3", "--json", "--band-rules", rules, NULL) == 0);
    free(out);
    expect_fraud_everywhere(forged, 3, "impossible direction");
    krn_rlog_free(log);
}

static void test_bad_input(const char *honest)
{
    char run[512], path[512];
    copy_run(honest, "missing", run, sizeof run);
    CHECK(trn_run_path(path, sizeof path, run, "logs", 5, "rlog") == 0 && unlink(path) == 0);
    int rv;
    aud_report r = replay(run, KRN_BACKEND_REF, &rv);
    CHECK(rv == OVT_ENOTFOUND && strstr(ovt_errmsg(), "step 5"));
    aud_replay_opts o = {.run_dir = honest, .data_path = path, .backend = KRN_BACKEND_REF};
    snprintf(path, sizeof path, "%s/other.txt", af_dir);
    CHECK(ovt_write_atomic(path, "some other text, long enough for a sequence of sixteen", 54, 0644) == 0);
    CHECK(aud_replay(&o, &r) == OVT_ECRYPTO && strstr(ovt_errmsg(), "not the run's dataset"));
    o.data_path = af_text;
    o.from = 5;
    o.to = 3;
    CHECK(aud_replay(&o, &r) == OVT_EINVAL);
    char *out = NULL;
    CHECK(af_ovt_run(&out, "audit", honest, "--backend", "gpu", NULL) == 2);
    free(out);
    CHECK(af_ovt_run(&out, "audit", honest, NULL) == 2); /* no --data */
    free(out);
}

/* The run published to a file:// store and fetched back over http:// (the
 * test's server serves the store's directory): verified, and a log that
 * changed in the store is refused on fetch. */
static void test_from_http_store(const char *honest)
{
    char dir[512], url[600], path[600], fetched[512];
    snprintf(dir, sizeof dir, "%s/store", af_dir);
    snprintf(url, sizeof url, "file://%s", dir);
    store_ctx *s;
    trn_step_table t;
    store_manifest m;
    ovt_hash run_id;
    ovt_sha256(&run_id, "some run", 8);
    snprintf(path, sizeof path, "%s/steps.bin", honest);
    CHECK(trn_step_table_read(&t, path) == 0);
    trn_run_config rc;
    ovt_hash ch;
    CHECK(trn_run_load_config(honest, &rc, &ch) == 0);
    CHECK(store_open(&s, url) == 0);
    CHECK(party_publish_run(s, honest, &t, af_text, &rc.dataset_hash, &run_id, &m) == 0);
    store_close(s);
    static af_server srv;
    srv.root = dir;
    CHECK(tsup_httpd_start(&srv.httpd, af_serve, &srv) == 0);
    snprintf(url, sizeof url, "%s/s", srv.httpd.url);
    CHECK(store_open(&s, url) == 0);
    snprintf(fetched, sizeof fetched, "%s/fetched", af_dir);
    CHECK_MSG(aud_fetch_run(s, &run_id, fetched, NULL) == 0, "%s", ovt_errmsg());
    snprintf(path, sizeof path, "%s/dataset.bin", fetched);
    aud_replay_opts o = {.run_dir = fetched, .data_path = path, .backend = KRN_BACKEND_REF};
    aud_report r;
    CHECK(aud_replay(&o, &r) == 0);
    CHECK(r.finding == AUD_VERIFIED && r.replayed == STEPS);
    aud_report_free(&r);
    /* Log 4 replaced in the store by log 5's bytes: its name no longer fits. */
    char a[700], b[700], hex[65];
    ovt_hex_encode(hex, t.steps[4].log_hash.b, 32);
    snprintf(a, sizeof a, "%s/blob/%s", dir, hex);
    ovt_hex_encode(hex, t.steps[5].log_hash.b, 32);
    snprintf(b, sizeof b, "%s/blob/%s", dir, hex);
    CHECK(memcmp(t.steps[4].log_hash.b, t.steps[5].log_hash.b, 32) != 0);
    CHECK(tsup_runl(NULL, "/bin/cp", b, a, NULL) == 0);
    snprintf(fetched, sizeof fetched, "%s/fetched2", af_dir);
    CHECK(aud_fetch_run(s, &run_id, fetched, NULL) == OVT_ECRYPTO);
    store_close(s);
    tsup_httpd_stop(&srv.httpd);
    trn_step_table_free(&t);
}

/* Proof of replay's site roots: every step traced; the same roots on ref
 * and cpu (the trace is the same on every backend); with a beacon only its
 * site is kept, the column of the full table; the party's site hashes saved
 * and read back, another beacon's file refused. */
static void test_site_roots(const char *honest)
{
    aud_replay_opts o = {.run_dir = honest, .data_path = af_text, .backend = KRN_BACKEND_REF, .sites = true};
    aud_report full, cpu, one;
    CHECK_MSG(aud_replay(&o, &full) == 0, "%s", ovt_errmsg());
    CHECK(full.finding == AUD_VERIFIED && full.nsites > 1 && full.site_stride == full.nsites && full.site_roots);
    if (!full.site_roots)
        return;
    static const ovt_hash zero;
    uint32_t n = full.nsites;
    for (uint32_t k = 0; k < n; k++)
        CHECK(!memcmp(full.site_roots[k].b, zero.b, 32)); /* step 0 runs no site */
    for (uint64_t i = 1; i <= STEPS; i++)
        CHECK(memcmp(full.site_roots[i * n].b, zero.b, 32) != 0);
    CHECK(memcmp(full.site_roots[1 * n + 1].b, full.site_roots[2 * n + 1].b, 32) != 0);
    o.backend = KRN_BACKEND_CPU;
    CHECK(aud_replay(&o, &cpu) == 0 && cpu.nsites == n);
    CHECK(cpu.site_roots && !memcmp(cpu.site_roots, full.site_roots, (STEPS + 1) * n * sizeof(ovt_hash)));
    aud_report_free(&cpu);
    ovt_hash beacon, run_id;
    ovt_sha256(&beacon, "beacon", 6);
    ovt_sha256(&run_id, "run", 3);
    o.site_beacon = &beacon;
    CHECK(aud_replay(&o, &one) == 0 && one.site_stride == 1 && one.site == ovt_hash_mod(&beacon, n));
    for (uint64_t i = 1; i <= STEPS && one.site_roots; i++)
        CHECK(!memcmp(one.site_roots[i].b, full.site_roots[i * n + one.site].b, 32));
    party_sites a, b, c;
    CHECK(party_sites_from_report(&a, &full, &beacon, &run_id) == 0);
    CHECK(party_sites_from_report(&b, &one, &beacon, &run_id) == 0);
    CHECK(!memcmp(chain_merkle_root(a.tree)->b, chain_merkle_root(b.tree)->b, 32));
    char dir[600];
    snprintf(dir, sizeof dir, "%s/sites", af_dir);
    CHECK(ovt_mkdirs(dir, 0755) == 0 && party_sites_save(&a, dir) == 0);
    CHECK(party_sites_load(&c, dir, &beacon, &run_id) == 0);
    CHECK(c.count == STEPS + 1 && !memcmp(chain_merkle_root(c.tree)->b, chain_merkle_root(a.tree)->b, 32));
    party_sites_free(&c);
    CHECK(party_sites_load(&c, dir, &run_id, &run_id) == OVT_EFORMAT && strstr(ovt_errmsg(), "another beacon"));
    ovt_hash other;
    ovt_sha256(&other, "other", 5);
    CHECK(party_sites_from_report(&c, &one, &other, &run_id) == OVT_EINVAL); /* the kept site is another's */
    party_sites_free(&a);
    party_sites_free(&b);
    aud_report_free(&one);
    aud_report_free(&full);
}

int main(void)
{
    CHECK(af_init("aud-replay") == 0);
    char honest[512];
    CHECK(af_train("honest", STEPS, honest, sizeof honest) == 0);

    /* Honest: verified on ref (every step) and shuffle (first 6 steps: it
     * draws a random summation order per element and is slow). */
    int rv;
    aud_report r = replay(honest, KRN_BACKEND_REF, &rv);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK(r.finding == AUD_VERIFIED && r.replayed == STEPS && !r.partial && r.steps == STEPS);
    CHECK(r.own.count == STEPS + 1 &&
          memcmp(r.own.steps, r.trainer.steps, (STEPS + 1) * sizeof *r.own.steps) == 0);
    aud_report_free(&r);
    aud_replay_opts o = {.run_dir = honest, .data_path = af_text, .backend = KRN_BACKEND_SHUFFLE, .to = 6};
    CHECK(aud_replay(&o, &r) == 0);
    CHECK(r.finding == AUD_VERIFIED && r.replayed == 6 && r.partial);
    aud_report_free(&r);
    char *out = NULL, aud_dir[512];
    snprintf(aud_dir, sizeof aud_dir, "%s/aud", af_dir);
    CHECK(af_ovt_run(&out, "audit", honest, "--data", af_text, "--backend", "ref", "--out", aud_dir, NULL) == 0);
    CHECK(out && strstr(out, "verified"));
    free(out);
    /* Its history is the trainer's, and a lying auditor's differs from the
     * step it lies at. */
    char a_path[600], t_path[600];
    trn_step_table mine, theirs;
    snprintf(a_path, sizeof a_path, "%s/steps.bin", aud_dir);
    snprintf(t_path, sizeof t_path, "%s/steps.bin", honest);
    CHECK(trn_step_table_read(&mine, a_path) == 0 && trn_step_table_read(&theirs, t_path) == 0);
    CHECK(mine.count == theirs.count && memcmp(mine.steps, theirs.steps, mine.count * sizeof *mine.steps) == 0);
    trn_step_table_free(&mine);
    o.backend = KRN_BACKEND_REF;
    o.to = 0;
    o.lie_at = 13;
    CHECK(aud_replay(&o, &r) == 0);
    CHECK(r.finding == AUD_VERIFIED);
    for (uint64_t i = 0; i <= STEPS; i++)
        CHECK((memcmp(r.own.steps[i].state_hash.b, theirs.steps[i].state_hash.b, 32) == 0) == (i < 13));
    aud_report_free(&r);
    trn_step_table_free(&theirs);

    CHECK_RUN(test_site_roots(honest));
    CHECK_RUN(test_tampered_checkpoint(honest));
    CHECK_RUN(test_tampered_log(honest));
    CHECK_RUN(test_bad_input(honest));
    CHECK_RUN(test_incomplete_logs(honest, "2"));
    char honest_r1[512];
    snprintf(honest_r1, sizeof honest_r1, "%s/honest-r1", af_dir);
    char *r1out = NULL;
    CHECK(af_ovt_run(&r1out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", honest_r1, "--steps", "20",
                     "--batch", "2", "--seq", "16", "--checkpoint-every", "8", "--every", "0", "--json",
                     "--band-rules", "1", NULL) == 0);
    free(r1out);
    CHECK_RUN(test_incomplete_logs(honest_r1, "1"));
    CHECK_RUN(test_from_http_store(honest));
    af_cleanup();
    return check_done();
}
