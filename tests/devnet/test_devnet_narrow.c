/* `ovt devnet --fault flip-output` on a real anvil (issue 42): a dispute
 * through all three levels with a committee of three. The trainer flips
 * bit 22 of element 40000 of its step-5 output of the last adamw.param
 * site (a deep fault: one element of one late site); the step game fixes
 * step 5, the parties' agents narrow it on OvtNarrow to that site's trace
 * record (level 2) and to the 64 KiB block of its output holding the
 * element (level 3), publish their block packages to the store, and each
 * arbiter re-executes that block alone and reveals auditor-right. One
 * model per argument (each its own ctest entry): gpt2-tiny, llama-tiny,
 * resnet-mini; and gpt2-tiny-withheld: one arbiter, and the honest auditor
 * withholds its block package (--withhold-block), so the arbiter computes
 * the block from the faulty trainer's package alone, whose proven inputs
 * still give the auditor's leaf. Asserted from chain state (`ovt devnet --json` reads it
 * back: getNarrow after the settlement, the Settled credits, every
 * transaction and the revealed ballots); the devnet waits on chain events,
 * not sleeps. Prints the figures of docs/bench-chain.md ("A whole
 * three-level dispute").
 *
 * Level 4 (the chunk chain of a batch sum's leaf, docs/contract.md "Level
 * 4"): chunk-gpt2-tiny, chunk-llama-tiny flip the last matmul.bwd.dweight
 * site's output instead (--fault-op) on a batch of N = 8 x 64 = 512 rows
 * (C = 4 chunks): the parties' chains differ only at their last leaf (the
 * final rounding), the narrowing ends in stage Chunks at chunk C and each
 * seat recomputes that chain leaf; chunk-forged: the trainer forges its
 * chain from chunk C/2 = 2 on (--fault forged-chain), the narrowing ends at
 * chunk 2, the trainer's package is refused (its chain is not the one it
 * posted) and the auditor's decides; chunk-no-chain: the trainer posts no
 * chain and loses the narrowing by silence, which is no verdict: the
 * arbiter rules on the whole step (see test_lost); chunk-count: the trainer posts
 * a chain of C + 2 leaves, the narrowing ends CountsDiffer in stage Chunks
 * and the arbiter rules from the counts (C + 1 from the record's N);
 * chunk-withheld: the honest auditor withholds its chunk package
 * (--withhold-block) and the arbiter recomputes chain leaf C from the
 * trainer's, whose canonical final step is the auditor's leaf. Prints the
 * figures of docs/bench-chain.md ("A four-level dispute").
 *
 * Also: mlp-demo (its site 39, element 35000); gpt2-tiny-forged:
 * one arbiter, and the faulty trainer's package carries log entries that
 * are not its log's (--forge-block-entries), which the arbiter replaces by
 * the log's (logHash_K) and still rules auditor-right from both packages;
 * gpt2-tiny-sharded: a run of 4 shards whose flip is in shard 2's last site
 * (419, `--flip-site`): a sharded step narrows, its block re-executes like
 * any other, and the arbiter names shard 2 from the site (docs/arbiter.md,
 * "Which shard"); gpt2-tiny-early: the flip at site 76 (gelu.bwd), an early
 * site, so that the trainer's log, recorded from the flipped values, is
 * fraud at a later site: the honest auditor commits and traces the
 * tolerant replay's state (its leaf would be zero, and its trace
 * impossible, otherwise) and the narrowing still ends on site 76, where
 * every seat rules auditor-right from the block (before: lost by timeout,
 * the whole step re-executed); gpt2-tiny-element: the same at site 57
 * (xent.sum, one value per row), which narrows on through the element
 * stage; forged-log: see test_forged_log; lost: see test_lost. */
#include <jansson.h>
#include <stdbool.h>
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
    static const char *const calls[] = {"startNarrow", "postTrace", "descend", "revealRecord", "compareStates",
                                        "postChunks"};
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

/* `ovt devnet` run with argv: its --json, NULL (with a failed check)
 * when it printed none; its exit status is checked to be 0. */
static json_t *devnet_json(char **argv)
{
    char *text = NULL;
    int st = tsup_run(argv, &text);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    if (!j)
        fprintf(stderr, "ovt devnet printed no JSON: %s\n", text ? text : "(nothing)");
    free(text);
    CHECK_EQ_U64(st, 0);
    CHECK(j != NULL);
    return j;
}

/* The trainer wrong at step 5, its root refuted; the honest auditor's bond
 * back, with the trainer's; *end and *fault: the narrowing's end state and
 * the flip-output fault (false, with a failed check, when either is
 * missing). */
static bool check_auditor_won(const json_t *j, const json_t **end, const json_t **fault)
{
    CHECK_MSG(!strcmp(str(j, "outcome"), "auditor-right"), "outcome %s", str(j, "outcome"));
    CHECK(json_is_true(json_object_get(j, "as_expected")));
    CHECK_EQ_U64(num(j, "step"), 5);
    CHECK(!strcmp(str(j, "wrong_party"), "trainer"));
    CHECK(!json_is_null(json_object_get(j, "refuted_by")));
    const json_t *credits = json_object_get(j, "settled_credits");
    CHECK_MSG(!strcmp(str(credits, "auditor"), TWO_ETH), "auditor credited %s", str(credits, "auditor"));
    CHECK_MSG(!strcmp(str(credits, "trainer"), "0"), "trainer credited %s", str(credits, "trainer"));
    const json_t *n = json_object_get(j, "narrow");
    *end = json_object_get(n, "end");
    *fault = json_object_get(n, "fault");
    CHECK(*end && *fault);
    if (!*end || !*fault)
        return false;
    /* ended (phase 4) on step 5, at the fault's site and the leaf holding the flipped element */
    CHECK_EQ_U64(num(*end, "phase"), 4);
    CHECK_EQ_U64(num(*end, "step"), 5);
    CHECK_EQ_U64(num(*end, "site"), num(*fault, "site"));
    CHECK_EQ_U64(num(*end, "block"), num(*fault, "block"));
    return true;
}

/* devnet_json, then check_auditor_won: the result, or NULL (freed, with a
 * failed check) when it has no narrowing end state or fault. */
static json_t *devnet_won(char **argv, const json_t **end, const json_t **fault)
{
    json_t *j = devnet_json(argv);
    if (j && !check_auditor_won(j, end, fault)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* Seat k of the committee arbs (of n seats; n > 1: sealed and revealed)
 * revealed auditor-right with seat 0's evidence, ruling from the narrowing:
 * its "block" object (a failed check when it has none). */
static const json_t *seat_block(const json_t *j, const json_t *arbs, size_t k)
{
    const json_t *a = json_array_get(arbs, k);
    int committee = json_array_size(arbs) > 1;
    CHECK_MSG(!strcmp(str(a, "verdict"), "auditor-right"), "%s revealed %s", str(a, "name"), str(a, "verdict"));
    CHECK(!strcmp(str(a, "evidence"), str(json_array_get(arbs, 0), "evidence")));
    CHECK_EQ_U64(count_calls(j, "commitVerdict", str(a, "name")), committee ? 1 : 0);
    CHECK_EQ_U64(count_calls(j, "revealVerdict", str(a, "name")), committee ? 1 : 0);
    const json_t *b = json_object_get(a, "block");
    CHECK_MSG(json_is_object(b), "%s did not rule from the narrowing", str(a, "name"));
    return b;
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
    /* the narrowing's end state (getNarrow): Narrowed (1) in stage Trace (1)
     * on the fault's site, at the leaf holding the flipped element */
    const json_t *end, *fault;
    json_t *j = devnet_won(argv, &end, &fault);
    if (!j)
        return;
    CHECK_EQ_U64(num(end, "outcome"), 1);
    CHECK_EQ_U64(num(end, "item_stage"), 1);
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
        /* ... from the narrowed block alone, from both parties' packages */
        const json_t *b = seat_block(j, arbs, k);
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

/* Level 4's moves and gas: the chain posts and the descents after the
 * first of them (the ledger is in chain order). */
static void chunk_figures(const json_t *j, const char *name)
{
    json_int_t moves = 0, gas = 0;
    int level4 = 0;
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(j, "transactions"), i, t)
    {
        const char *call = str(t, "call");
        level4 |= !strcmp(call, "postChunks");
        if (level4 && (!strcmp(call, "postChunks") || !strcmp(call, "descend"))) {
            moves++;
            gas += num(t, "gas_used");
        }
    }
    printf("figures %s: level 4 (chunk chain) %lld moves, %lld gas\n", name, (long long)moves, (long long)gas);
}

/* --fault-op's usage errors (exit 2, the message naming what to do), before
 * anvil starts. */
static void test_fault_op_usage(void)
{
    static const struct {
        const char *fault, *op, *model, *says;
    } bad[] = {
        {"bitflip", "matmul.bwd.dweight", "gpt2-tiny", "--fault-op goes with"},
        {"forged-chain", "adamw.param", "gpt2-tiny", "must be a batch sum"},
        {"flip-output", "matmul.bwd.dbias", "llama-tiny", "no site of op matmul.bwd.dbias"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"/bin/sh", "-c", "\"$0\" devnet --fault \"$1\" --fault-op \"$2\" --model \"$3\" 2>&1",
                        ovt, (char *)bad[i].fault, (char *)bad[i].op, (char *)bad[i].model, NULL};
        char *out = NULL;
        CHECK_EQ_U64(tsup_run(argv, &out), 2);
        CHECK_MSG(out && strstr(out, bad[i].says), "--fault %s --fault-op %s: %s", bad[i].fault, bad[i].op,
                  out ? out : "-");
        free(out);
    }
}

/* kind: gpt2-tiny, llama-tiny (flip-output at the last matmul.bwd.dweight
 * site), forged (forged-chain) or no-chain (see the top). */
static void test_chunk(const char *kind)
{
    int forged = !strcmp(kind, "forged"), silent = !strcmp(kind, "no-chain"), count = !strcmp(kind, "count"),
        withheld = !strcmp(kind, "withheld");
    const char *model = forged || silent || count || withheld ? "gpt2-tiny" : kind;
    const char *fault_name = forged ? "forged-chain" : silent ? "no-chain" : count ? "chain-count" : "flip-output";
    char *argv[] = {ovt, "devnet", "--json", "--fault", (char *)fault_name, "--fault-op", "matmul.bwd.dweight", "--model",
                    (char *)model, "--batch", "8", "--seq", "64", "--steps", "8", "--at", "5", "--arbiters",
                    silent || count || withheld ? "1" : "3", "--timeout", "600",
                    withheld ? "--withhold-block" : NULL, NULL};
    const json_t *end, *fault;
    json_t *j = devnet_won(argv, &end, &fault);
    if (!j)
        return;
    /* level 3 ended on the flipped site's leaf, a batch sum: stage Chunks (4) */
    json_int_t outcome = silent ? 5 : count ? 3 : 1; /* TrainerLost, CountsDiffer, Narrowed */
    CHECK_EQ_U64(num(end, "outcome"), outcome);
    CHECK_EQ_U64(num(end, "stage"), 4);
    CHECK_MSG(!strcmp(str(end, "op"), "matmul.bwd.dweight"), "op %s", str(end, "op"));
    /* N = 512 rows: C = 4 chunks, chains of C + 1 = 5 leaves */
    CHECK_EQ_U64(num(end, "auditor_chunks"), 5);
    CHECK_EQ_U64(num(end, "trainer_chunks"), silent ? 0 : count ? 6 : 5);
    json_int_t chunk = forged ? 2 : 4; /* the forged middle, or the final step (leaf C) */
    if (silent || count)
        CHECK(json_is_null(json_object_get(end, "chunk")));
    else
        CHECK_EQ_U64(num(end, "chunk"), chunk);
    CHECK_EQ_U64(count_calls(j, "postChunks", "auditor"), 1);
    CHECK_EQ_U64(count_calls(j, "postChunks", "trainer"), silent ? 0 : 1);
    CHECK_EQ_U64(count_calls(j, "timeout", "auditor"), silent ? 1 : 0); /* claimed by the party that posted */
    CHECK_EQ_U64(count_calls(j, "timeout", "trainer"), 0);
    CHECK(!strcmp(str(j, "committee_check"), ""));
    const json_t *arbs = json_object_get(j, "arbiters");
    CHECK_EQ_U64(json_array_size(arbs), silent || count || withheld ? 1 : 3);
    for (size_t k = 0; k < json_array_size(arbs); k++) {
        const json_t *a = json_array_get(arbs, k);
        if (silent) { /* a narrowing lost by timeout is no verdict: the arbiter rules on the whole step */
            CHECK_MSG(!strcmp(str(a, "verdict"), "auditor-right"), "%s revealed %s", str(a, "name"),
                      str(a, "verdict"));
            CHECK_MSG(json_is_null(json_object_get(a, "block")), "the arbiter ruled from a narrowing lost by timeout");
            continue;
        }
        const json_t *b = seat_block(j, arbs, k);
        CHECK_EQ_U64(num(b, "narrow_outcome"), outcome); /* CountsDiffer: ruled from the counts, not the step */
        if (count)
            continue;
        /* ... from chain leaf `chunk` recomputed: both packages, or the auditor's alone when the trainer's
           chain is not the one it posted */
        CHECK_EQ_U64(num(b, "site"), num(fault, "site"));
        CHECK_EQ_U64(num(b, "block"), num(fault, "block"));
        CHECK_EQ_U64(num(b, "chunk"), chunk);
        CHECK_EQ_U64(num(b, "packages"), forged || withheld ? 1 : 2);
        /* the trainer's log replaces chunk C's entries, equal to the honest packer's; below C a chunk has none */
        CHECK_EQ_U64(num(b, "entries_replaced"), 0);
        printf("figures chunk-%s: %s recomputed chunk %lld in %.3f s\n", kind, str(a, "name"), (long long)chunk,
               json_real_value(json_object_get(b, "seconds")));
    }
    char name[64];
    snprintf(name, sizeof name, "chunk-%s", kind);
    narrowing_figures(j, name);
    chunk_figures(j, name);
    json_decref(j);
}

/* Level 4 of the chunk ops reached by `--flip-site` on gpt2-tiny's default
 * batch (4 x 32 = 128 rows): gradnorm.sumsq (site 140, a chain of one chunk
 * per 128 squared gradient elements) and layernorm.bwd.dweight (site 136,
 * one chunk of rows): the faulty trainer's chain differs only at its last
 * leaf, so the narrowing ends in stage Chunks at chunk C (the final
 * rounding) and every seat of three rules auditor-right from that chain
 * leaf recomputed, from both packages. */
static void test_chunk_site(const char *site, const char *op)
{
    char *argv[] = {ovt, "devnet", "--json", "--fault", "flip-output", "--flip-site", (char *)site, "--flip-element",
                    "0", "--steps", "8", "--at", "5", "--arbiters", "3", "--timeout", "600", NULL};
    const json_t *end, *fault;
    json_t *j = devnet_won(argv, &end, &fault);
    if (!j)
        return;
    CHECK_EQ_U64(num(end, "outcome"), 1); /* Narrowed */
    CHECK_EQ_U64(num(end, "stage"), 4);   /* Chunks */
    CHECK_EQ_U64(num(end, "site"), strtoull(site, NULL, 10));
    CHECK_MSG(!strcmp(str(end, "op"), op), "op %s, not %s", str(end, "op"), op);
    json_int_t leaves = num(end, "auditor_chunks");
    CHECK(leaves >= 2);
    CHECK_EQ_U64(num(end, "trainer_chunks"), leaves);
    CHECK_EQ_U64(num(end, "chunk"), leaves - 1); /* the last chain leaf: the rounding of the agreed sums */
    const json_t *arbs = json_object_get(j, "arbiters");
    CHECK_EQ_U64(json_array_size(arbs), 3);
    for (size_t k = 0; k < json_array_size(arbs); k++) {
        const json_t *b = seat_block(j, arbs, k);
        CHECK_EQ_U64(num(b, "chunk"), leaves - 1);
        CHECK_EQ_U64(num(b, "packages"), 2);
    }
    printf("figures chunk-%s: chain of %lld leaves, ended at %lld\n", op, (long long)leaves,
           (long long)num(end, "chunk"));
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
         strcmp(argv[1], "forged-log") && strcmp(argv[1], "lost") && strncmp(argv[1], "chunk-", 6))) {
        fprintf(stderr,
                "usage: OVT_BINARY_DIR=... %s "
                "gpt2-tiny|llama-tiny|resnet-mini|mlp-demo|gpt2-tiny-withheld|gpt2-tiny-sharded|gpt2-tiny-forged|"
                "gpt2-tiny-early|gpt2-tiny-element|forged-log|lost|chunk-gpt2-tiny|chunk-llama-tiny|chunk-forged|"
                "chunk-no-chain|chunk-count|chunk-withheld|chunk-gradnorm|chunk-layernorm\n",
                argv[0]);
        return 2;
    }
    snprintf(ovt, sizeof ovt, "%s/ovt", bin);
    if (!strncmp(argv[1], "chunk-", 6)) {
        const char *kind = argv[1] + 6;
        if (!strcmp(kind, "gradnorm") || !strcmp(kind, "layernorm")) {
            int gn = !strcmp(kind, "gradnorm");
            CHECK_RUN(test_chunk_site(gn ? "140" : "136", gn ? "gradnorm.sumsq" : "layernorm.bwd.dweight"));
            return check_done();
        }
        if (strcmp(kind, "gpt2-tiny") && strcmp(kind, "llama-tiny") && strcmp(kind, "forged") &&
            strcmp(kind, "no-chain") && strcmp(kind, "count") && strcmp(kind, "withheld")) {
            fprintf(stderr, "unknown level-4 test %s\n", argv[1]);
            return 2;
        }
        if (!strcmp(kind, "gpt2-tiny"))
            CHECK_RUN(test_fault_op_usage());
        CHECK_RUN(test_chunk(kind));
        return check_done();
    }
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
