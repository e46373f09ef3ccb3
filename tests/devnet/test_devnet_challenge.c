/* `ovt devnet` with outside challengers (issue 43) on a real anvil, an mlp
 * run of 16 steps with the fault at step 5; one scenario per argument, each
 * its own ctest entry:
 *   lying      --fault lying-challenger --challengers 2: an honest run
 *              settles verified; the honest challenger's replay agrees and
 *              it sends nothing; the liar challenges, the trainer's agent
 *              defends, the arbiter's watcher alone rules trainer-right at
 *              step 5; the trainer's credit is its own bond plus the liar's,
 *              the run is not refuted.
 *   colluding  --fault colluding-auditor: a bitflip at 5, the named auditor
 *              commits the trainer's root: verified; the honest outside
 *              challenger wins its challenge at step 5 (auditor-right, from
 *              the watcher alone) and the run is refuted by that game; the
 *              trainer's bond came back with the verified run (not yet
 *              forfeited to a winning challenger, docs/contract.md).
 *   colluding-committee  the same with a committee of three bonded
 *              arbiters: each watcher takes its seat in the challenge too
 *              (accept) and the challenge is settled by sealed and revealed
 *              ballots.
 * The devnet waits on chain events, not sleeps. Expected outcomes come
 * from the contract's rules (docs/contract.md "Open challenges"). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devnet_result.h"
#include "support/proc.h"

#define ETH "1000000000000000000"

static char ovt[4096];

/* ovt devnet --json with the scenario's arguments (arbiters: --arbiters,
 * NULL for the default one); the parsed result. */
static int devnet(json_t **out, const char *fault, const char *arbiters)
{
    char *argv[] = {ovt, "devnet", "--json", "--fault", (char *)fault, "--model", "mlp", "--steps", "16", "--at", "5",
                    "--timeout", "400", arbiters ? "--arbiters" : NULL, (char *)arbiters, NULL};
    char *text = NULL;
    int st = tsup_run(argv, &text);
    *out = text ? json_loads(text, 0, NULL) : NULL;
    if (!*out)
        fprintf(stderr, "ovt devnet printed no JSON: %s\n", text ? text : "(nothing)");
    free(text);
    return st;
}

static const json_t *challenger(const json_t *j, size_t k)
{
    return json_array_get(json_object_get(j, "challengers"), k);
}

static void test_lying(void)
{
    json_t *j = NULL;
    CHECK(devnet(&j, "lying-challenger", NULL) == 0);
    if (!j)
        return;
    CHECK(!strcmp(str(j, "outcome"), "verified") && json_is_true(json_object_get(j, "as_expected")));
    CHECK_MSG(!strcmp(str(j, "challengers_check"), ""), "%s", str(j, "challengers_check"));
    CHECK_EQ_U64(json_array_size(json_object_get(j, "challengers")), 2);
    const json_t *honest = challenger(j, 0), *liar = challenger(j, 1);
    CHECK(json_is_false(json_object_get(honest, "lies")) && json_is_true(json_object_get(honest, "agreed")));
    CHECK(json_is_false(json_object_get(honest, "challenged")));
    CHECK(json_is_true(json_object_get(liar, "lies")) && json_is_true(json_object_get(liar, "challenged")));
    CHECK_MSG(!strcmp(str(liar, "outcome"), "trainer-right"), "the liar's challenge: %s", str(liar, "outcome"));
    CHECK_EQ_U64(count_calls(j, "challenge", "challenger-1"), 0);
    CHECK_EQ_U64(count_calls(j, "challenge", "challenger-2"), 1);
    CHECK_EQ_U64(count_calls(j, "verdict", "arbiter"), 1); /* the challenge's, from the watcher */
    CHECK(json_is_null(json_object_get(j, "refuted_by")));
    /* the trainer's 1 ETH back from the verified run, and the liar's 1 ETH */
    CHECK_MSG(!strcmp(str(j, "trainer_credit"), "2000000000000000000"), "trainer credit %s",
              str(j, "trainer_credit"));
    json_decref(j);
}

static void test_colluding(const char *arbiters)
{
    json_t *j = NULL;
    CHECK(devnet(&j, "colluding-auditor", arbiters) == 0);
    if (!j)
        return;
    CHECK(!strcmp(str(j, "outcome"), "verified") && json_is_true(json_object_get(j, "as_expected")));
    CHECK_MSG(!strcmp(str(j, "challengers_check"), ""), "%s", str(j, "challengers_check"));
    CHECK_EQ_U64(json_array_size(json_object_get(j, "challengers")), 1);
    const json_t *c = challenger(j, 0);
    CHECK(json_is_true(json_object_get(c, "challenged")));
    CHECK_MSG(!strcmp(str(c, "outcome"), "auditor-right"), "the challenge: %s", str(c, "outcome"));
    CHECK_MSG(!strcmp(str(j, "refuted_by"), str(c, "challenge_id")) && str(c, "challenge_id")[0],
              "refuted by %s, challenge %s", str(j, "refuted_by"), str(c, "challenge_id"));
    CHECK_EQ_U64(count_calls(j, "challenge", "challenger-1"), 1);
    CHECK_EQ_U64(count_calls(j, "bisect", "auditor"), 0); /* the named auditor never disputed */
    if (!arbiters) {
        CHECK_EQ_U64(count_calls(j, "verdict", "arbiter"), 1);
    } else { /* each seat takes the run's and the challenge's (both bonded), then votes on the challenge */
        static const char *const seat[3] = {"arbiter", "arbiter-2", "arbiter-3"};
        CHECK_EQ_U64(count_calls(j, "verdict", NULL), 0);
        for (int k = 0; k < 3; k++) {
            CHECK_EQ_U64(count_calls(j, "accept", seat[k]), 2);
            CHECK_EQ_U64(count_calls(j, "commitVerdict", seat[k]), 1);
            CHECK_EQ_U64(count_calls(j, "revealVerdict", seat[k]), 1);
        }
    }
    CHECK_MSG(!strcmp(str(j, "trainer_credit"), ETH), "trainer credit %s", str(j, "trainer_credit"));
    json_decref(j);
}

int main(int argc, char **argv)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin || argc != 2) {
        fprintf(stderr, "usage: OVT_BINARY_DIR=... %s lying|colluding|colluding-committee\n", argv[0]);
        return 2;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    if (!strcmp(argv[1], "lying"))
        CHECK_RUN(test_lying());
    else if (!strcmp(argv[1], "colluding"))
        CHECK_RUN(test_colluding(NULL));
    else if (!strcmp(argv[1], "colluding-committee"))
        CHECK_RUN(test_colluding("3"));
    else
        return 2;
    return check_done();
}
