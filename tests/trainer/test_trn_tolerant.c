/* The tolerant replay (trn_step_trace.tolerant, krn_config.tolerant;
 * docs/numeric-contract.md, "The tolerant replay"), on gpt2-tiny runs made
 * by the built `ovt train`:
 * - a step whose log is fraudulent at site j (flip-output at site 76, an
 *   early deep fault; forged-log): the strict replay fails with OVT_EFRAUD,
 *   the tolerant one completes, keeps the strict replay's violation (its
 *   message is the strict failure's), and its sites before j are the strict
 *   replay's bit for bit (the same trace records); its state is not the
 *   trainer's;
 * - an honest step: tolerant == strict (same stateHash, same trace root, no
 *   violation);
 * - a violation at a step before the traced one still fails the replay;
 * - the auditor (cpu) rules fraud at the step with the same message and
 *   commits the tolerant replay's stateHash, or zero where that is the
 *   trainer's (forged-log here: a log that lies about a choice the update
 *   absorbed). */
#include <stdlib.h>
#include <string.h>

#include "support/ovt_fixture.h"
#include "check.h"
#include "auditor/replay.h"
#include "kernels/trace.h"
#include "trainer/check.h"
#include "trainer/run.h"
#include "trainer/step.h"

#define STEPS 4
#define FAULT_STEP 3

/* Step k of run replayed strict and tolerant; fraud: the step's log is
 * fraudulent (else honest). *state gets the tolerant replay's stateHash,
 * *same whether it is the trainer's. */
static void compare(const char *run, uint64_t k, bool fraud, ovt_hash *state, bool *same, char *msg, size_t cap)
{
    trn_run_data d;
    trn_run_config rc;
    memset(&d, 0, sizeof d);
    CHECK_MSG(trn_run_dataset(&d, &rc, run, af_text) == 0, "%s", ovt_errmsg());
    krn_trace *ts = NULL, *tt = NULL;
    CHECK(krn_trace_new(&ts, true) == 0 && krn_trace_new(&tt, true) == 0);
    if (!ts || !tt)
        return;
    trn_step_trace strict = {.backend = KRN_BACKEND_CPU, .trace = ts};
    trn_step_trace tol = {.backend = KRN_BACKEND_CPU, .trace = tt, .tolerant = true};
    trn_replay_result rs, rt;
    int rv = trn_step_replay_traced(run, &d, k, 1, &strict, &rs);
    char strict_msg[1024];
    snprintf(strict_msg, sizeof strict_msg, "%s", ovt_errmsg());
    int rvt = trn_step_replay_traced(run, &d, k, 1, &tol, &rt);
    CHECK_MSG(rvt == 0 && tol.trace_rc == 0, "tolerant step %llu: %s", (unsigned long long)k, ovt_errmsg());
    size_t ns = krn_trace_count(ts), nt = krn_trace_count(tt);
    if (!fraud) {
        CHECK_MSG(rv == 0, "%s", strict_msg);
        CHECK(tol.violation.rule == KRN_RULE_NONE);
        CHECK(memcmp(rs.state_hash.b, rt.state_hash.b, 32) == 0);
        CHECK(memcmp(strict.root.b, tol.root.b, 32) == 0 && ns == nt);
    } else {
        CHECK_MSG(rv == OVT_EFRAUD, "step %llu: rv %d: %s", (unsigned long long)k, rv, strict_msg);
        CHECK(tol.violation.rule != KRN_RULE_NONE && tol.violation.step == k);
        CHECK_MSG(tol.violation.message[0] && strstr(strict_msg, tol.violation.message), "strict: %s; tolerant: %s",
                  strict_msg, tol.violation.message);
        uint32_t j = tol.violation.site;
        CHECK_MSG(ns >= j && nt > j, "site %u: %zu strict records, %zu tolerant", j, ns, nt);
        for (size_t i = 0; i < j && i < ns && i < nt; i++)
            CHECK_MSG(memcmp(krn_trace_record_at(ts, i)->hash.b, krn_trace_record_at(tt, i)->hash.b, 32) == 0,
                      "site %zu before the violation at %u differs", i, j);
        trn_step_table table = {0};
        char path[512];
        CHECK(trn_run_path(path, sizeof path, run, NULL, 0, "steps.bin") == 0 && trn_step_table_read(&table, path) == 0);
        CHECK(table.count > k);
        *same = table.count > k && memcmp(table.steps[k].state_hash.b, rt.state_hash.b, 32) == 0;
        trn_step_table_free(&table);
        snprintf(msg, cap, "%s", tol.violation.message);
        printf("step %llu: violation at site %u (%s) element %llu, %zu sites traced tolerantly, %zu strictly\n",
               (unsigned long long)k, j, tol.violation.op, (unsigned long long)tol.violation.element, nt, ns);
    }
    *state = rt.state_hash;
    krn_trace_free(ts);
    krn_trace_free(tt);
    trn_run_data_free(&d);
}

/* The auditor's replay of run (cpu): fraud at step k with the strict
 * replay's message, its leaf's stateHash the tolerant replay's, or zero
 * where that is the trainer's (same). */
static void audit(const char *run, uint64_t k, const ovt_hash *tolerant, bool same, const char *msg)
{
    static const ovt_hash zero;
    aud_replay_opts o = {.run_dir = run, .data_path = af_text, .backend = KRN_BACKEND_CPU};
    aud_report r;
    CHECK_MSG(aud_replay(&o, &r) == 0, "%s", ovt_errmsg());
    CHECK_MSG(r.finding == AUD_FRAUD && r.step == k, "finding %d at %llu", (int)r.finding, (unsigned long long)r.step);
    CHECK_MSG(msg[0] && strstr(r.detail, msg) && strstr(r.detail, "is fraudulent"), "%s", r.detail);
    if (r.own.count > k)
        CHECK_MSG(memcmp(r.own.steps[k].state_hash.b, (same ? &zero : tolerant)->b, 32) == 0,
                  "%s: the auditor's stateHash at the fraud is not the %s", run,
                  same ? "zero (the tolerant state is the trainer's)" : "tolerant replay's");
    aud_report_free(&r);
}

static void train(const char *name, char *run, size_t cap, const char *fault, const char *site)
{
    snprintf(run, cap, "%s/%s", af_dir, name);
    char steps[16], fs[16];
    snprintf(steps, sizeof steps, "%d", STEPS);
    snprintf(fs, sizeof fs, "%d", FAULT_STEP);
    char *out = NULL;
    int rv = site ? af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", run, "--steps", steps,
                               "--batch", "2", "--seq", "16", "--checkpoint-every", "2", "--every", "0",
                               "--inject-fault", fault, "--fault-step", fs, "--fault-site", site,
                               "--fault-element", "1000", NULL)
                  : af_ovt_run(&out, "train", "--model", "gpt2-tiny", "--data", af_text, "--out", run, "--steps", steps,
                               "--batch", "2", "--seq", "16", "--checkpoint-every", "2", "--every", "0",
                               "--inject-fault", fault, "--fault-step", fs, NULL);
    CHECK_MSG(rv == 0, "ovt train --inject-fault %s: %s", fault, out ? out : "");
    free(out);
}

int main(void)
{
    CHECK(af_init("trn-tolerant") == 0);
    char run[512], msg[512] = "";
    ovt_hash state;
    bool same = false;
    train("flip76", run, sizeof run, "flip-output", "76");
    compare(run, FAULT_STEP - 1, false, &state, &same, msg, sizeof msg); /* honest */
    compare(run, FAULT_STEP, true, &state, &same, msg, sizeof msg);
    CHECK(!same); /* the flipped trainer's state is not the tolerant replay's */
    audit(run, FAULT_STEP, &state, same, msg);
    /* a violation before the traced step fails the replay as the strict one */
    trn_run_data d;
    trn_run_config rc;
    memset(&d, 0, sizeof d);
    CHECK(trn_run_dataset(&d, &rc, run, af_text) == 0);
    krn_trace *t = NULL;
    CHECK(krn_trace_new(&t, true) == 0);
    trn_step_trace tr = {.backend = KRN_BACKEND_CPU, .trace = t, .tolerant = true};
    trn_replay_result r;
    CHECK(trn_step_replay_traced(run, &d, FAULT_STEP + 1, 1, &tr, &r) == OVT_EFRAUD);
    CHECK_MSG(strstr(ovt_errmsg(), "re-executing step 3"), "%s", ovt_errmsg());
    krn_trace_free(t);
    trn_run_data_free(&d);

    /* forged-log: one element rounded to the wrong side and logged so; the
     * update absorbs it here (the tolerant state is the trainer's), so the
     * auditor keeps a zero stateHash: the log lies about a decision that
     * changed nothing the leaf shows */
    train("forged", run, sizeof run, "forged-log", NULL);
    compare(run, FAULT_STEP, true, &state, &same, msg, sizeof msg);
    printf("forged-log: the tolerant state is %sthe trainer's\n", same ? "" : "not ");
    audit(run, FAULT_STEP, &state, same, msg);
    af_cleanup();
    return check_done();
}
