/* `ovt devnet` with proof of replay (issue 43) on a real anvil, an mlp run
 * of 16 steps; one scenario per argument, each its own ctest entry:
 *   lazy    --fault lazy-auditor --at 5: the trainer commits with
 *           commitReplay; the named auditor copies the trainer's root and
 *           guesses its site hashes from step 5 on (it replayed steps 1..4);
 *           the trainer's agent replays its own run for its site root and
 *           reveals it; the replay dispute ends at step 5, where the
 *           arbiter's watcher, tracing the step, rules trainer-right: the
 *           Settled event credits the trainer both bonds and the auditor
 *           nothing; the run's root is not refuted.
 *   lazy-committee  the same with a committee of three bonded arbiters:
 *           each watcher traces the step and the three sealed ballots agree.
 *   honest  --fault none --replay-proof: both site roots agree and the run
 *           settles verified, each bond back; no bisection.
 * (lazy also checks the usage errors: --replay-proof with another fault or
 * a sharded run, --guess-sites-from off chain.)
 * The devnet waits on chain events, not sleeps. */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devnet_result.h"
#include "support/proc.h"

#define ETH "1000000000000000000"

static char ovt[4096];

static int devnet(json_t **out, const char *fault, bool replay_flag, const char *arbiters)
{
    char *argv[] = {ovt, "devnet", "--json", "--fault", (char *)fault, "--model", "mlp", "--steps", "16", "--at", "5",
                    "--timeout", "400", "--arbiters", arbiters ? (char *)arbiters : "1",
                    replay_flag ? "--replay-proof" : NULL, NULL};
    char *text = NULL;
    int st = tsup_run(argv, &text);
    *out = text ? json_loads(text, 0, NULL) : NULL;
    if (!*out)
        fprintf(stderr, "ovt devnet printed no JSON: %s\n", text ? text : "(nothing)");
    free(text);
    return st;
}

static const char *credited(const json_t *j, const char *party)
{
    return str(json_object_get(j, "settled_credits"), party);
}

static void test_lazy(const char *arbiters)
{
    json_t *j = NULL;
    CHECK(devnet(&j, "lazy-auditor", false, arbiters) == 0);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(j, "outcome"), "trainer-right"), "outcome %s", str(j, "outcome"));
    CHECK(json_is_true(json_object_get(j, "as_expected")) && json_is_true(json_object_get(j, "replay_proof")));
    CHECK_EQ_U64(json_integer_value(json_object_get(j, "step")), 5);
    CHECK(!strcmp(str(j, "wrong_party"), "auditor"));
    /* the copied root lost the auditor's bond to the trainer */
    CHECK_MSG(!strcmp(credited(j, "trainer"), "2000000000000000000"), "trainer credited %s", credited(j, "trainer"));
    CHECK_MSG(!strcmp(credited(j, "auditor"), "0"), "auditor credited %s", credited(j, "auditor"));
    CHECK(json_is_null(json_object_get(j, "refuted_by")));
    CHECK_EQ_U64(count_calls(j, "commitReplay", "trainer"), 1);
    CHECK_EQ_U64(count_calls(j, "commitReplay", "auditor"), 1);
    CHECK_EQ_U64(count_calls(j, "commit", NULL), 0);
    CHECK_EQ_U64(count_calls(j, "revealSites", "trainer"), 1);
    CHECK_EQ_U64(count_calls(j, "revealSite", "trainer"), 1);
    CHECK_EQ_U64(count_calls(j, "revealSite", "auditor"), 1);
    CHECK_EQ_U64(count_calls(j, "revealLeaf", NULL), 0);
    if (!arbiters) {
        CHECK_EQ_U64(count_calls(j, "verdict", "arbiter"), 1);
    } else { /* each seat traces the step and votes the same site leaf */
        static const char *const seat[3] = {"arbiter", "arbiter-2", "arbiter-3"};
        CHECK(!strcmp(str(j, "committee_check"), ""));
        for (int k = 0; k < 3; k++) {
            CHECK_EQ_U64(count_calls(j, "commitVerdict", seat[k]), 1);
            CHECK_EQ_U64(count_calls(j, "revealVerdict", seat[k]), 1);
        }
    }
    json_decref(j);
}

static void test_honest(void)
{
    json_t *j = NULL;
    CHECK(devnet(&j, "none", true, NULL) == 0);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(j, "outcome"), "verified"), "outcome %s", str(j, "outcome"));
    CHECK(json_is_true(json_object_get(j, "as_expected")) && json_is_true(json_object_get(j, "replay_proof")));
    CHECK(!strcmp(credited(j, "trainer"), ETH) && !strcmp(credited(j, "auditor"), ETH));
    CHECK_EQ_U64(count_calls(j, "commitReplay", NULL), 2);
    CHECK_EQ_U64(count_calls(j, "revealSites", "trainer"), 1);
    CHECK_EQ_U64(count_calls(j, "bisect", NULL), 0);
    json_decref(j);
}

/* Bad combinations are usage errors (exit 2) with the reason. */
static void test_errors(void)
{
    char *out = NULL;
    char *with_fault[] = {ovt, "devnet", "--fault", "bitflip", "--replay-proof", NULL};
    CHECK_EQ_U64(tsup_run(with_fault, &out), 2);
    free(out);
    char *sharded[] = {ovt, "devnet", "--fault", "none", "--replay-proof", "--shards", "2", NULL};
    CHECK_EQ_U64(tsup_run(sharded, &out), 2);
    free(out);
    char *guess_off_chain[] = {"/bin/sh", "-c", "\"$0\" audit /nonexistent --data /dev/null --guess-sites-from 3 2>&1",
                               ovt, NULL};
    CHECK_EQ_U64(tsup_run(guess_off_chain, &out), 2);
    CHECK_MSG(out && strstr(out, "--guess-sites-from"), "%s", out ? out : "-");
    free(out);
    char *help[] = {ovt, "devnet", "--help", NULL};
    CHECK_EQ_U64(tsup_run(help, &out), 0);
    CHECK(out && strstr(out, "lazy-auditor") && strstr(out, "--replay-proof"));
    free(out);
}

int main(int argc, char **argv)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin || argc != 2) {
        fprintf(stderr, "usage: OVT_BINARY_DIR=... %s lazy|lazy-committee|honest\n", argv[0]);
        return 2;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    if (!strcmp(argv[1], "lazy")) {
        CHECK_RUN(test_errors());
        CHECK_RUN(test_lazy(NULL));
    } else if (!strcmp(argv[1], "lazy-committee")) {
        CHECK_RUN(test_lazy("3"));
    }
    else if (!strcmp(argv[1], "honest"))
        CHECK_RUN(test_honest());
    else
        return 2;
    return check_done();
}
