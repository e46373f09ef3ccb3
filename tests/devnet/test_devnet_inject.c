/* The trainer's fault injection (`ovt train --inject-fault`, trainer/fault.h)
 * checked against a clean run of the same config, through the ovt binary, and
 * against the auditor's replay on the ref backend: every fault leaves steps
 * before K untouched and makes step K the first one no honest replay gives;
 * each fault is the one it claims to be (one bit of one parameter, the
 * schedule's batchHash kept, state K = state K-1 with an empty log, a log the
 * verifier rejects as fraud, the honest states with logs emptied from K on). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auditor/replay.h"
#include "check.h"
#include "common/fileio.h"
#include "kernels/rlog.h"
#include "support/proc.h"
#include "trainer/checkpoint.h"
#include "trainer/run.h"
#include "trainer/state.h"

#define STEPS 10
#define K 5

static char ovt[4096], dir[4096], data[4200];

static int train(const char *name, const char *fault)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    char *argv[32] = {ovt, "train", "--data", data, "--out", out, "--steps", "10", "--batch", "2", "--seq", "16",
                      "--every", "0", "--checkpoint-every", "1", "--threads", "1"};
    int n = 18;
    if (fault) {
        argv[n++] = "--inject-fault";
        argv[n++] = (char *)fault;
        argv[n++] = "--fault-step";
        argv[n++] = "5";
    }
    argv[n] = NULL;
    char *text = NULL;
    int st = tsup_run(argv, &text);
    free(text);
    return st;
}

static void table_of(trn_step_table *t, const char *name)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/steps.bin", dir, name);
    int rv = trn_step_table_read(t, p);
    CHECK_MSG(rv == 0, "%s: %s", p, ovt_errmsg());
}

static trn_state *ckpt_of(const char *name, uint64_t step)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/ckpt/step-%08llu.ckpt", dir, name, (unsigned long long)step);
    trn_state *st = NULL;
    int rv = trn_checkpoint_read(&st, p);
    CHECK_MSG(rv == 0, "%s: %s", p, ovt_errmsg());
    return st;
}

/* The rounding log of step `step` of run `name` (NULL if unreadable). */
static krn_rlog *log_of(const char *name, uint64_t step)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/logs/step-%08llu.rlog", dir, name, (unsigned long long)step);
    krn_rlog *log = krn_rlog_new();
    int rv = krn_rlog_read_file(log, p);
    CHECK_MSG(rv == 0, "%s: %s", p, ovt_errmsg());
    if (rv) {
        krn_rlog_free(log);
        return NULL;
    }
    return log;
}

static int same(const ovt_hash *a, const ovt_hash *b)
{
    return memcmp(a->b, b->b, 32) == 0;
}

/* Steps before K agree with the clean run, step K's state does not (or, for
 * a fault in the log, its state or its log does not). */
static void check_prefix_log(const char *name, const trn_step_table *clean, const trn_step_table *t, bool log_fault)
{
    CHECK_EQ_U64(t->count, STEPS + 1);
    if (t->count != STEPS + 1 || clean->count != STEPS + 1)
        return;
    CHECK_MSG(same(&clean->config_hash, &t->config_hash), "%s: config differs", name);
    for (int i = 0; i < K; i++)
        CHECK_MSG(same(&clean->steps[i].state_hash, &t->steps[i].state_hash) &&
                      same(&clean->steps[i].batch_hash, &t->steps[i].batch_hash) &&
                      same(&clean->steps[i].log_hash, &t->steps[i].log_hash),
                  "%s: leaf %d differs from the clean run", name, i);
    CHECK_MSG(!same(&clean->steps[K].state_hash, &t->steps[K].state_hash) ||
                  (log_fault && !same(&clean->steps[K].log_hash, &t->steps[K].log_hash)),
              "%s: state %d is the clean one", name, K);
    CHECK_MSG(same(&clean->steps[K].batch_hash, &t->steps[K].batch_hash),
              "%s: batchHash %d is not the schedule's", name, K);
}

static void check_prefix(const char *name, const trn_step_table *clean, const trn_step_table *t)
{
    check_prefix_log(name, clean, t, false);
}

/* The auditor's replay of run `name` on the ref backend: finding want (or
 * also_ok, when not negative). */
static void check_replay2(const char *name, aud_finding want, int also_ok)
{
    char run[4300];
    snprintf(run, sizeof run, "%s/%s", dir, name);
    aud_replay_opts o = {.run_dir = run, .data_path = data, .backend = KRN_BACKEND_REF, .threads = 1};
    aud_report r;
    int rv = aud_replay(&o, &r);
    CHECK_MSG(rv == 0, "%s: replay failed: %s", name, ovt_errmsg());
    if (rv)
        return;
    CHECK_MSG(r.finding == want || (int)r.finding == also_ok, "%s: finding %d, want %d (%s)", name, (int)r.finding,
              (int)want, r.detail);
    if (want != AUD_VERIFIED)
        CHECK_MSG(r.step == K, "%s: first divergent step %llu, want %d", name, (unsigned long long)r.step, K);
    aud_report_free(&r);
}

static void check_replay(const char *name, aud_finding want)
{
    check_replay2(name, want, -1);
}

static void test_bitflip(const trn_step_table *clean)
{
    trn_step_table t;
    table_of(&t, "bitflip");
    check_prefix("bitflip", clean, &t);
    /* the flip comes after the step: the step's log is the clean one */
    CHECK(same(&clean->steps[K].log_hash, &t.steps[K].log_hash));
    trn_step_table_free(&t);
    trn_state *a = ckpt_of("clean", K), *b = ckpt_of("bitflip", K);
    if (a && b) {
        size_t diffs = 0, n = 3 * a->layout.nparams;
        uint32_t x = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t u, v;
            memcpy(&u, &a->mem[i], 4);
            memcpy(&v, &b->mem[i], 4);
            if (u != v) {
                diffs++;
                x = u ^ v;
                CHECK_MSG(i < a->layout.nparams, "a moment changed, element %zu", i);
            }
        }
        CHECK_EQ_U64(diffs, 1);
        CHECK_EQ_U64(x, 1u << 22);
    }
    trn_state_free(a);
    trn_state_free(b);
    check_replay("bitflip", AUD_DIVERGED);
}

static void test_skipped(const trn_step_table *clean)
{
    trn_step_table t;
    table_of(&t, "skipped-step");
    check_prefix("skipped-step", clean, &t);
    trn_step_table_free(&t);
    trn_state *prev = ckpt_of("skipped-step", K - 1), *cur = ckpt_of("skipped-step", K);
    if (prev && cur) {
        CHECK_EQ_U64(cur->step, K);
        CHECK(memcmp(prev->mem, cur->mem, 3 * prev->layout.nparams * sizeof(float)) == 0);
    }
    trn_state_free(prev);
    trn_state_free(cur);
    /* log K is the one the clean run wrote at K */
    krn_rlog *log = log_of("skipped-step", K);
    if (log)
        CHECK_EQ_U64(krn_rlog_step(log), K);
    krn_rlog_free(log);
    table_of(&t, "skipped-step");
    CHECK(same(&clean->steps[K].log_hash, &t.steps[K].log_hash));
    trn_step_table_free(&t);
    check_replay("skipped-step", AUD_DIVERGED);
}

static void test_poisoned(const trn_step_table *clean)
{
    trn_step_table t;
    table_of(&t, "poisoned-batch");
    check_prefix("poisoned-batch", clean, &t);
    trn_step_table_free(&t);
    /* the log was recorded on other targets: the replay either computes a
     * different state or meets an entry its own values do not support */
    check_replay2("poisoned-batch", AUD_DIVERGED, AUD_FRAUD);
}

static void test_forged(const trn_step_table *clean)
{
    trn_step_table t;
    table_of(&t, "forged-log");
    /* one element rounded to the other side may leave every parameter as
     * it was: the log is what differs for sure */
    check_prefix_log("forged-log", clean, &t, true);
    CHECK(!same(&clean->steps[K].log_hash, &t.steps[K].log_hash));
    trn_step_table_free(&t);
    /* the forged entry is in the log (it is the one the replay rejects) */
    krn_rlog *forged = log_of("forged-log", K);
    CHECK(forged && krn_rlog_nentries(forged) >= 1);
    krn_rlog_free(forged);
    check_replay("forged-log", AUD_FRAUD);
}

/* omitted-log: the states are the clean run's, the logs from K on are
 * empty while the clean run logs hundreds of entries at K (so some of them
 * are certain omissions for any honest verifier), and the auditor calls step
 * K fraud naming a missing entry. */
static void test_omitted(const trn_step_table *clean)
{
    trn_step_table t;
    table_of(&t, "omitted-log");
    check_prefix_log("omitted-log", clean, &t, true);
    for (size_t i = 0; i < t.count && i < clean->count; i++)
        CHECK(same(&clean->steps[i].state_hash, &t.steps[i].state_hash));
    trn_step_table_free(&t);
    krn_rlog *honest = log_of("clean", K);
    CHECK_MSG(honest && krn_rlog_nentries(honest) >= 100, "the clean log of step %d has %zu entries", K,
              honest ? krn_rlog_nentries(honest) : 0);
    krn_rlog_free(honest);
    for (uint64_t i = K; i <= STEPS; i++) {
        krn_rlog *log = log_of("omitted-log", i);
        CHECK(log && krn_rlog_nentries(log) == 0 && krn_rlog_step(log) == i);
        krn_rlog_free(log);
    }
    char run[4300];
    snprintf(run, sizeof run, "%s/omitted-log", dir);
    aud_replay_opts o = {.run_dir = run, .data_path = data, .backend = KRN_BACKEND_REF, .threads = 1};
    aud_report r;
    CHECK(aud_replay(&o, &r) == 0);
    CHECK_MSG(r.finding == AUD_FRAUD && r.step == K && strstr(r.detail, "missing entry") &&
                  strstr(r.detail, "(certain"),
              "finding %d at %llu: %s", (int)r.finding, (unsigned long long)r.step, r.detail);
    aud_report_free(&r);
}

int main(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin) {
        fprintf(stderr, "OVT_BINARY_DIR is not set\n");
        return 1;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    snprintf(dir, sizeof dir, "%s/test_devnet_inject.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    /* a small byte-level text, the same for every run */
    snprintf(data, sizeof data, "%s/text.txt", dir);
    char text[6000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "the quick brown fox jumps over the lazy dog\n"[(i * 7 + i / 44) % 44];
    CHECK(ovt_write_atomic(data, text, sizeof text, 0644) == 0);

    CHECK_EQ_U64(train("clean", NULL), 0);
    const char *kinds[] = {"bitflip", "skipped-step", "poisoned-batch", "forged-log", "omitted-log"};
    for (int i = 0; i < 5; i++)
        CHECK_MSG(train(kinds[i], kinds[i]) == 0, "ovt train --inject-fault %s failed", kinds[i]);
    /* usage errors */
    char *argv_bad[] = {ovt, "train", "--data", data, "--out", dir, "--inject-fault", "melt", "--fault-step", "3", NULL};
    char *out = NULL;
    CHECK_EQ_U64(tsup_run(argv_bad, &out), 2);
    free(out);
    char *argv_nostep[] = {ovt, "train", "--data", data, "--out", dir, "--inject-fault", "bitflip", NULL};
    CHECK_EQ_U64(tsup_run(argv_nostep, &out), 2);
    free(out);

    trn_step_table clean;
    CHECK_RUN(table_of(&clean, "clean"));
    CHECK_RUN(check_replay("clean", AUD_VERIFIED));
    CHECK_RUN(test_bitflip(&clean));
    CHECK_RUN(test_skipped(&clean));
    CHECK_RUN(test_poisoned(&clean));
    CHECK_RUN(test_forged(&clean));
    CHECK_RUN(test_omitted(&clean));
    trn_step_table_free(&clean);

    char *rm[] = {"/bin/rm", "-rf", dir, NULL};
    tsup_run(rm, NULL);
    return check_done();
}
