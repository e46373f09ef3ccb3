/* `ovt devnet --fault flip-output` on a real anvil (issue 42): a dispute
 * through all three levels with a committee of three. The trainer flips bit
 * 22 of element 40000 of its step-5 output of the last adamw.param site (a
 * deep fault: one element of one late site); the step game fixes step 5,
 * the parties' agents narrow it on OvtNarrow to that site's trace record
 * (level 2) and to the 64 KiB block of its output holding the element
 * (level 3), publish their block packages to the store, and each arbiter
 * re-executes that block alone and reveals auditor-right. One model per
 * argument (each its own ctest entry): gpt2-tiny, llama-tiny, resnet-mini,
 * mlp-demo (its site 39, element 35000); and gpt2-tiny-withheld: one
 * arbiter, and the honest auditor withholds its block package
 * (--withhold-block), so the arbiter computes the block from the faulty
 * trainer's package alone, whose proven inputs still give the auditor's
 * leaf; gpt2-tiny-forged: one arbiter, and the faulty trainer's package
 * carries log entries that are not its log's (--forge-block-entries), which
 * the arbiter replaces by the log's (logHash_K) and still rules
 * auditor-right from both packages; gpt2-tiny-sharded: a run of 4 shards
 * whose flip is in shard 2's last site (419, `--flip-site`): a sharded
 * step narrows, its block re-executes like any other, and the arbiter names
 * shard 2 from the site (docs/arbiter.md, "Which shard"); gpt2-tiny-early: the
 * flip at site 76 (gelu.bwd), an early site, so that the trainer's log,
 * recorded from the flipped values, is fraud at a later site: the honest
 * auditor commits and traces the tolerant replay's state (its leaf would
 * be zero, and its trace impossible, otherwise) and the narrowing still
 * ends on site 76, where every seat rules auditor-right from the block
 * (before: lost by timeout, the whole step re-executed); gpt2-tiny-element:
 * the same at site 57 (xent.sum, one value per row), which narrows on
 * through the element stage. Asserted from chain state (`ovt devnet
 * --json` reads it back: getNarrow after the settlement, the Settled
 * credits, every transaction and the revealed ballots); the devnet waits on
 * chain events, not sleeps. Prints the figures of docs/bench-chain.md ("A
 * whole three-level dispute"). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "devnet_result.h"
#include "support/proc.h"

#define TWO_ETH "2000000000000000000"

static char ovt[4096];

static json_int_t num(const json_t *j, const char *key)
{
    return json_integer_value(json_object_get(j, key));
}

/* Gas and count of the narrowing's transactions (OvtNarrow's calls). */
static void narrowing_figures(const json_t *j, const char *model)
{
    static const char *const calls[] = {"startNarrow", "postTrace", "descend", "revealRecord", "compareStates"};
    json_int_t gas = 0, moves = 0, all_gas = 0, all = 0;
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(j, "transactions"), i, t)
    {
        const char *call = str(t, "call");
        if (!strcmp(call, "deploy"))
            continue;
        all++;
        all_gas += num(t, "gas_used");
        for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
            if (!strcmp(call, calls[k])) {
                moves++;
                gas += num(t, "gas_used");
            }
    }
    printf("figures %s: narrowing %lld moves, %lld gas; whole dispute (deploys aside) %lld transactions, %lld gas; "
           "commit to verdict %.1f s, total %.1f s\n",
           model, (long long)moves, (long long)gas, (long long)all, (long long)all_gas,
           json_real_value(json_object_get(j, "commit_to_verdict_s")), json_real_value(json_object_get(j, "total_s")));
}

/* An early flip (gpt2-tiny-early, gpt2-tiny-element): the site, element and op. */
typedef struct {
    char *site, *element;
    const char *op;
} early_flip;

static void test_model(const char *model, int withheld, int sharded, int forged, const early_flip *early)
{
    int single = withheld || forged; /* one arbiter, which sends the verdict itself */
    char *argv[24] = {ovt, "devnet", "--json", "--fault", "flip-output", "--model", (char *)model, "--steps", "8",
                      "--at", "5", "--arbiters", single ? "1" : "3", "--timeout", "600"};
    int argc = 15;
    if (withheld)
        argv[argc++] = "--withhold-block";
    if (forged)
        argv[argc++] = "--forge-block-entries";
    if (sharded) { /* 4 shards of 140 sites: site 419 is shard 2's last (encoder.bwd.dwpe), element 1000 in leaf 0 */
        static char *more[] = {"--shards", "4", "--flip-site", "419", "--flip-element", "1000"};
        for (size_t k = 0; k < 6; k++)
            argv[argc++] = more[k];
    }
    if (early) {
        argv[argc++] = "--flip-site";
        argv[argc++] = early->site;
        argv[argc++] = "--flip-element";
        argv[argc++] = early->element;
    }
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    if (!j)
        fprintf(stderr, "ovt devnet printed no JSON: %s\n", text ? text : "(nothing)");
    free(text);
    CHECK_EQ_U64(st, 0);
    if (!j)
        return;
    /* the outcome: the trainer wrong at step 5, its root refuted */
    CHECK_MSG(!strcmp(str(j, "outcome"), "auditor-right"), "outcome %s", str(j, "outcome"));
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    CHECK_EQ_U64(num(j, "step"), 5);
    CHECK(!strcmp(str(j, "wrong_party"), "trainer"));
    CHECK(!json_is_null(json_object_get(j, "refuted_by")));
    /* the honest auditor's bond back, with the trainer's */
    const json_t *credits = json_object_get(j, "settled_credits");
    CHECK_MSG(!strcmp(str(credits, "auditor"), TWO_ETH), "auditor credited %s", str(credits, "auditor"));
    CHECK_MSG(!strcmp(str(credits, "trainer"), "0"), "trainer credited %s", str(credits, "trainer"));
    /* the narrowing's end state (getNarrow): Narrowed (1) in stage Trace (1)
     * on the fault's site, at the leaf holding the flipped element */
    const json_t *n = json_object_get(j, "narrow"), *end = json_object_get(n, "end"),
                 *fault = json_object_get(n, "fault");
    CHECK(end && fault);
    if (!end || !fault) {
        json_decref(j);
        return;
    }
    CHECK_EQ_U64(num(end, "phase"), 4);
    CHECK_EQ_U64(num(end, "outcome"), 1);
    CHECK_EQ_U64(num(end, "item_stage"), 1);
    CHECK_EQ_U64(num(end, "step"), 5);
    CHECK_EQ_U64(num(end, "site"), num(fault, "site"));
    CHECK_EQ_U64(num(end, "block"), num(fault, "block"));
    CHECK_EQ_U64(num(fault, "block"), num(fault, "element") * 4 / 65536);
    const char *op = sharded ? "encoder.bwd.dwpe" : early ? early->op : "adamw.param";
    CHECK_MSG(!strcmp(str(end, "op"), op), "op %s", str(end, "op"));
    if (sharded) /* the site lies in shard 2's range (4 x 140 sites, then grad.sum) */
        CHECK_EQ_U64(num(end, "site"), 2 * 140 + 139);
    if (early) /* the honest auditor traced the step tolerantly past the trainer's fraudulent log */
        CHECK_EQ_U64(num(end, "site"), strtoull(early->site, NULL, 10));
    /* an element op's leaf is bisected further, over its elements (level 4:
     * postElements, then 7 more rounds of descent over xent.sum's 128) */
    if (early && !strcmp(early->op, "xent.sum"))
        CHECK_MSG(count_calls(j, "descend", NULL) > 2 * 12, "%lld descents", (long long)count_calls(j, "descend", NULL));
    /* the arbiter names the shard from the narrowed site (trn_shard_sites: site / P), none unsharded */
    const json_t *named = json_object_get(j, "arbiter_shard");
    CHECK_MSG(sharded ? json_is_object(named) : !json_is_object(named), "arbiter_shard: %s",
              json_is_object(named) ? "named" : "none");
    if (sharded && json_is_object(named)) {
        CHECK_EQ_U64(num(named, "shard"), 2);
        CHECK_EQ_U64(num(named, "shards"), 4);
        /* one process computed every shard: rank 0, by the trainer's ranks.json */
        CHECK_MSG(json_is_integer(json_object_get(named, "rank")) && num(named, "rank") == 0 &&
                      json_is_string(json_object_get(named, "host")) && str(named, "host")[0],
                  "rank and host of the named shard: %s", json_is_integer(json_object_get(named, "rank")) ? "ok" : "none");
    }
    CHECK(strcmp(str(end, "trainer_leaf"), str(end, "auditor_leaf")) != 0);
    /* both parties played every level */
    static const char *const party[2] = {"trainer", "auditor"};
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_U64(count_calls(j, "postTrace", party[k]), 1);
        CHECK_EQ_U64(count_calls(j, "revealRecord", party[k]), 1);
        CHECK(count_calls(j, "descend", party[k]) >= 2);
    }
    CHECK_EQ_U64(count_calls(j, "verdict", NULL), single ? 1 : 0);
    /* each seat sealed and revealed auditor-right, with the same evidence */
    CHECK(!strcmp(str(j, "committee_check"), ""));
    const json_t *arbs = json_object_get(j, "arbiters");
    CHECK_EQ_U64(json_array_size(arbs), single ? 1 : 3);
    for (size_t k = 0; k < json_array_size(arbs); k++) {
        const json_t *a = json_array_get(arbs, k);
        CHECK_MSG(!strcmp(str(a, "verdict"), "auditor-right"), "%s revealed %s", str(a, "name"), str(a, "verdict"));
        CHECK(!strcmp(str(a, "evidence"), str(json_array_get(arbs, 0), "evidence")));
        CHECK_EQ_U64(count_calls(j, "commitVerdict", str(a, "name")), single ? 0 : 1);
        CHECK_EQ_U64(count_calls(j, "revealVerdict", str(a, "name")), single ? 0 : 1);
        /* ... from the narrowed block alone, from both parties' packages */
        const json_t *b = json_object_get(a, "block");
        CHECK_MSG(json_is_object(b), "%s did not rule from the narrowed block", str(a, "name"));
        CHECK_EQ_U64(num(b, "narrow_outcome"), 1);
        CHECK_EQ_U64(num(b, "site"), num(fault, "site"));
        CHECK_EQ_U64(num(b, "block"), num(fault, "block"));
        CHECK_EQ_U64(num(b, "packages"), withheld ? 1 : 2);
        /* forged: the trainer's package's entries were not its log's; the
         * block was computed with the log's from both packages (taking them
         * as given would have made two different blocks: the whole step) */
        CHECK_EQ_U64(num(b, "entries_replaced"), forged ? 1 : 0);
        printf("figures %s: %s re-executed the block in %.3f s\n", model, str(a, "name"),
               json_real_value(json_object_get(b, "seconds")));
    }
    narrowing_figures(j, model);
    json_decref(j);
}

/* A party that cannot play the narrowing (its committed state K is not
 * what its step re-executes to: bitflip's trainer, whose bit flips after
 * the step; the lying auditor, whose stateHashes are made up) never moves
 * there; the devnet moves anvil's clock past the narrowing's deadline once
 * its agent says so, the other party claims the timeout, and the narrowing
 * ends TrainerLost (5) / AuditorLost (6). */
/* A narrowing one party cannot play, so that it loses it by timeout: the
 * arbiter does not take that loss as its verdict (an honest party that
 * cannot trace step K because the other's log is fraudulent there loses
 * so too) and rules on the whole step (its `block` is null). flip_site:
 * NULL, or a flip-output site (`--flip-site`). */
/* `ovt devnet --json --fault FAULT --narrow` (steps 8, K = 5; flip_site:
 * NULL, or `--flip-site` with element 20000): its JSON, once the run
 * exited 0 with `outcome` and `as_expected`; NULL otherwise. */
static json_t *narrow_devnet(const char *fault, const char *flip_site, const char *outcome)
{
    char *argv[] = {ovt, "devnet", "--json", "--fault", (char *)fault, "--narrow", "--steps", "8", "--at", "5",
                    "--timeout", "600", NULL, NULL, NULL, NULL, NULL};
    if (flip_site) {
        argv[12] = "--flip-site";
        argv[13] = (char *)flip_site;
        argv[14] = "--flip-element";
        argv[15] = "20000";
    }
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    CHECK_EQ_U64(st, 0);
    if (j) {
        CHECK_MSG(!strcmp(str(j, "outcome"), outcome), "%s: outcome %s", fault, str(j, "outcome"));
        CHECK(json_is_true(json_object_get(j, "as_expected")));
    }
    return j;
}

static void test_lost(const char *fault, const char *flip_site, const char *outcome, const char *winner,
                      const char *claimer, json_int_t narrow_outcome)
{
    json_t *j = narrow_devnet(fault, flip_site, outcome);
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(json_object_get(j, "settled_credits"), winner), TWO_ETH), "%s credited %s", winner,
              str(json_object_get(j, "settled_credits"), winner));
    const json_t *end = json_object_get(json_object_get(j, "narrow"), "end");
    CHECK_EQ_U64(num(end, "phase"), 4);
    CHECK_EQ_U64(num(end, "outcome"), narrow_outcome);
    CHECK_EQ_U64(count_calls(j, "timeout", claimer), 1); /* the narrowing's, claimed by the party that played */
    const json_t *b = json_object_get(json_array_get(json_object_get(j, "arbiters"), 0), "block");
    CHECK_MSG(json_is_null(b), "the arbiter ruled from a narrowing lost by timeout");
    json_decref(j);
}

/* forged-log with --narrow (one arbiter): the trainer rounds one element
 * of an early site to the wrong side and logs it so; its agent traces the
 * step following its own log (--narrow-forged), the honest auditor
 * tolerantly (rounding that element to nearest), so the narrowing ends on
 * the forged site's block, whose re-execution with the trainer's log fails
 * the strict rule: the arbiter rules fraudulent-log from the block (before:
 * the auditor could not trace, whole step). */
static void test_forged_log(void)
{
    json_t *j = narrow_devnet("forged-log", NULL, "fraudulent-log");
    if (!j)
        return;
    CHECK_MSG(!strcmp(str(json_object_get(j, "settled_credits"), "auditor"), TWO_ETH), "auditor credited %s",
              str(json_object_get(j, "settled_credits"), "auditor"));
    const json_t *end = json_object_get(json_object_get(j, "narrow"), "end");
    CHECK_EQ_U64(num(end, "phase"), 4);
    CHECK_EQ_U64(num(end, "outcome"), 1); /* Narrowed: both parties traced the step */
    CHECK_EQ_U64(num(end, "item_stage"), 1);
    CHECK_EQ_U64(num(end, "step"), 5);
    for (int k = 0; k < 2; k++)
        CHECK_EQ_U64(count_calls(j, "postTrace", k ? "auditor" : "trainer"), 1);
    const json_t *a = json_array_get(json_object_get(j, "arbiters"), 0);
    CHECK_MSG(!strcmp(str(a, "verdict"), "fraudulent-log"), "verdict %s", str(a, "verdict"));
    const json_t *b = json_object_get(a, "block");
    CHECK_MSG(json_is_object(b), "the arbiter did not rule from the narrowed block");
    CHECK_EQ_U64(num(b, "narrow_outcome"), 1);
    CHECK_EQ_U64(num(b, "site"), num(end, "site"));
    CHECK_EQ_U64(num(b, "block"), num(end, "block"));
    CHECK(num(b, "packages") >= 1);
    printf("forged-log: narrowed to site %lld (%s) block %lld, ruled %s from the block\n", (long long)num(end, "site"),
           str(end, "op"), (long long)num(end, "block"), str(a, "verdict"));
    json_decref(j);
}

int main(int argc, char **argv)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin || argc != 2 ||
        (strcmp(argv[1], "gpt2-tiny") && strcmp(argv[1], "llama-tiny") && strcmp(argv[1], "resnet-mini") &&
         strcmp(argv[1], "mlp-demo") && strcmp(argv[1], "gpt2-tiny-withheld") && strcmp(argv[1], "gpt2-tiny-sharded") &&
         strcmp(argv[1], "gpt2-tiny-forged") && strcmp(argv[1], "gpt2-tiny-early") && strcmp(argv[1], "gpt2-tiny-element") &&
         strcmp(argv[1], "forged-log") && strcmp(argv[1], "lost"))) {
        fprintf(stderr,
                "usage: OVT_BINARY_DIR=... %s "
                "gpt2-tiny|llama-tiny|resnet-mini|mlp-demo|gpt2-tiny-withheld|gpt2-tiny-sharded|gpt2-tiny-forged|"
                "gpt2-tiny-early|gpt2-tiny-element|forged-log|lost\n",
                argv[0]);
        return 2;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    if (!strcmp(argv[1], "forged-log")) {
        CHECK_RUN(test_forged_log());
        return check_done();
    }
    if (!strcmp(argv[1], "lost")) {
        CHECK_RUN(test_lost("bitflip", NULL, "auditor-right", "auditor", "auditor", 5));
        CHECK_RUN(test_lost("lying-auditor", NULL, "trainer-right", "trainer", "trainer", 6));
        return check_done();
    }
    int withheld = !strcmp(argv[1], "gpt2-tiny-withheld"), sharded = !strcmp(argv[1], "gpt2-tiny-sharded"),
        forged = !strcmp(argv[1], "gpt2-tiny-forged");
    /* gpt2-tiny's site 76 (gelu.bwd), far before the step's end: element
     * 20000 in block 1; its site 57 (xent.sum, one value per row): element 3 */
    static const early_flip gelu = {"76", "20000", "gelu.bwd"}, xent = {"57", "3", "xent.sum"};
    const early_flip *early = !strcmp(argv[1], "gpt2-tiny-early")     ? &gelu
                              : !strcmp(argv[1], "gpt2-tiny-element") ? &xent
                                                                      : NULL;
    CHECK_RUN(test_model(withheld || sharded || forged || early ? "gpt2-tiny" : argv[1], withheld, sharded, forged,
                         early));
    return check_done();
}
