/* `ovt game`: reads a run's parameters and game state from the contract at
 * one block and prints them (text, or JSON with --json). Read-only. */
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags_chain.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ovt game --rpc-url URL --contract ADDRESS --run-id ID [--json]\n"
            "\n"
            "Shows a run of the arbitration contract: its parties, hashes, steps,\n"
            "timeouts and bonds, and the game: phase, round, the node index (the\n"
            "disputed step once fixed), both parties' roots and current nodes, the\n"
            "deadline and the outcome. Everything is read at one block.\n"
            "\n"
            "  --rpc-url URL       the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"
            "  --contract ADDRESS  the arbitration contract (from `ovt deploy`)\n"
            "  --run-id ID         the run's id (0x + 64 hex digits)\n"
            "  --json              print one JSON object\n");
}

static json_t *to_json(const ovt_hash *run_id, uint64_t block, const chain_arb_params *p, const chain_arb_game *g)
{
    char t[43], a[43], r[43], id[67], ch[67], dh[67], tb[80], ab[80];
    char troot[67], aroot[67], tnode[67], anode[67];
    chain_address_to_string(t, &p->trainer);
    chain_address_to_string(a, &p->auditor);
    chain_address_to_string(r, &p->arbiters[0]);
    chain_hash_hex(id, run_id);
    chain_hash_hex(ch, &p->config_hash);
    chain_hash_hex(dh, &p->dataset_hash);
    chain_u256_to_dec(tb, &p->trainer_bond);
    chain_u256_to_dec(ab, &p->auditor_bond);
    chain_hash_hex(troot, &g->trainer_root);
    chain_hash_hex(aroot, &g->auditor_root);
    chain_hash_hex(tnode, &g->trainer_node);
    chain_hash_hex(anode, &g->auditor_node);
    return json_pack("{s:s, s:I, s:{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:s},"
                     " s:{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:s, s:s, s:s, s:s}}",
                     "run_id", id, "block", (json_int_t)block, "run", "trainer", t, "auditor", a, "arbiter", r,
                     "config_hash", ch, "dataset_hash", dh, "steps", (json_int_t)p->steps, "commit_timeout",
                     (json_int_t)p->commit_timeout, "move_timeout", (json_int_t)p->move_timeout, "arbiter_timeout",
                     (json_int_t)p->arbiter_timeout, "trainer_bond", tb, "auditor_bond", ab, "game", "phase",
                     chain_arb_phase_name(g->phase), "outcome", chain_arb_outcome_name(g->outcome), "round",
                     (int)g->round, "depth", (int)g->depth, "flags", (int)g->flags, "deadline",
                     (json_int_t)g->deadline, "index", (json_int_t)g->index, "trainer_root", troot, "auditor_root",
                     aroot, "trainer_node", tnode, "auditor_node", anode);
}

/* The committee: who sits, sealed, revealed and what (docs/contract.md). */
static json_t *committee_json(const chain_arb_params *p, const chain_arb_committee *c)
{
    char bond[80];
    chain_u256_to_dec(bond, &p->arbiter_bond);
    json_t *seats = json_array();
    for (unsigned k = 0; k < c->count; k++) { /* count <= CHAIN_ARB_MAX_ARBITERS (chain_arb_decode_committee) */
        char who[43], ballot[67];
        chain_address_to_string(who, &p->arbiters[k]);
        chain_hash_hex(ballot, &c->ballots[k]);
        unsigned bit = 1u << k;
        json_array_append_new(seats, json_pack("{s:s, s:b, s:b, s:b, s:s, s:s}", "arbiter", who, "seated",
                                               (c->seated & bit) != 0, "committed", (c->committed & bit) != 0,
                                               "revealed", (c->revealed & bit) != 0, "verdict",
                                               chain_arb_outcome_name(c->outcomes[k]), "ballot", ballot));
    }
    return json_pack("{s:i, s:i, s:s, s:I, s:o}", "count", (int)c->count, "threshold", (int)c->threshold,
                     "arbiter_bond", bond, "commit_deadline", (json_int_t)c->commit_deadline, "seats", seats);
}

/* Proof of replay: the beacon, both site roots, and whether the dispute is
 * over the site trees (docs/contract.md, "Proof of replay"). */
static json_t *replay_json(const chain_arb_replay *rp, const chain_arb_game *g)
{
    char beacon[67], ts[67], as[67];
    chain_hash_hex(beacon, &rp->beacon);
    chain_hash_hex(ts, &rp->trainer_sites);
    chain_hash_hex(as, &rp->auditor_sites);
    return json_pack("{s:s, s:s, s:s, s:b}", "beacon", beacon, "trainer_sites", ts, "auditor_sites", as,
                     "replay_dispute", chain_arb_is_replay_dispute(g));
}

/* One line per key: strings as they are, numbers in decimal. */
static void print_fields(const json_t *obj, const char *const *keys)
{
    for (int i = 0; keys[i]; i++) {
        const json_t *v = json_object_get(obj, keys[i]);
        if (json_is_string(v))
            printf("  %-16s %s\n", keys[i], json_string_value(v));
        else
            printf("  %-16s %lld\n", keys[i], (long long)json_integer_value(v));
    }
}

static void print_text(const json_t *o)
{
    static const char *const run_keys[] = {"trainer", "auditor", "arbiter", "config_hash", "dataset_hash", "steps",
                                           "commit_timeout", "move_timeout", "arbiter_timeout", "trainer_bond",
                                           "auditor_bond", NULL};
    static const char *const game_keys[] = {"phase", "outcome", "round", "depth", "flags", "deadline", "index",
                                            "trainer_root", "auditor_root", "trainer_node", "auditor_node",
                                            "refuted_by", NULL};
    printf("run       %s (at block %lld)\n", json_string_value(json_object_get(o, "run_id")),
           (long long)json_integer_value(json_object_get(o, "block")));
    print_fields(json_object_get(o, "run"), run_keys);
    printf("game\n");
    print_fields(json_object_get(o, "game"), game_keys);
    const json_t *rp = json_object_get(o, "replay");
    if (rp) {
        static const char *const replay_keys[] = {"beacon", "trainer_sites", "auditor_sites", NULL};
        printf("proof of replay%s\n", json_is_true(json_object_get(rp, "replay_dispute")) ? " (a replay dispute: "
                                                                                          "the nodes are site-tree "
                                                                                          "nodes)" : "");
        print_fields(rp, replay_keys);
    }
    const json_t *c = json_object_get(o, "committee");
    printf("committee %lld of %lld settle, arbiter bond %s wei\n",
           (long long)json_integer_value(json_object_get(c, "threshold")),
           (long long)json_integer_value(json_object_get(c, "count")),
           json_string_value(json_object_get(c, "arbiter_bond")));
    size_t i;
    const json_t *seat;
    json_array_foreach(json_object_get(c, "seats"), i, seat)
    {
        printf("  seat %zu %s %s%s%s%s\n", i, json_string_value(json_object_get(seat, "arbiter")),
               json_is_true(json_object_get(seat, "seated")) ? "seated" : "not seated",
               json_is_true(json_object_get(seat, "committed")) ? ", sealed" : "",
               json_is_true(json_object_get(seat, "revealed")) ? ", revealed " : "",
               json_is_true(json_object_get(seat, "revealed")) ? json_string_value(json_object_get(seat, "verdict"))
                                                                : "");
    }
}

struct game_args {
    chain_session_args chain;
    const char *run_hex;
    int json;
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct game_args *a = ctx;
    (void)flag;
    switch (c) {
    case 'i': a->run_hex = arg; break;
    case 'j': a->json = 1; break;
    default: return cli_chain_take(&a->chain, c, arg) ? 0 : cli_arg_unknown("game", given);
    }
    return 0;
}

int cmd_game(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rpc-url", required_argument, NULL, CLI_CHAIN_RPC_URL},
        {"contract", required_argument, NULL, CLI_CHAIN_CONTRACT},
        {"run-id", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct game_args a;
    memset(&a, 0, sizeof a);
    cli_chain_init(&a.chain);
    int rv = cli_getopt(argc, argv, opts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("game", argc, argv))
        return 2;
    const chain_session_args *sa = &a.chain;
    if (!sa->rpc_url || !*sa->rpc_url || !sa->contract || !a.run_hex)
        return cli_usage_error("game", "--rpc-url (or ETH_RPC_URL), --contract and --run-id are required");
    chain_address addr;
    ovt_hash run_id;
    if (chain_parse_address(&addr, "--contract", sa->contract) || chain_parse_hash(&run_id, "--run-id", a.run_hex))
        return cli_usage_fail("game");

    chain_session s;
    chain_arb_params p;
    chain_arb_game g;
    uint64_t block = 0;
    json_t *o = NULL;
    int rc = chain_session_open(&s, sa, 0);
    chain_arb_committee c;
    chain_arb_replay rp;
    ovt_hash refuted;
    char at[24], refuted_hex[67];
    if (rc == 0)
        rc = chain_arb_read_at_head(&s.arb, &run_id, &block, &p, &g, &c);
    snprintf(at, sizeof at, "0x%llx", (unsigned long long)block);
    if (rc == 0)
        rc = chain_arb_refuted_by(&s.arb, &run_id, at, &refuted);
    chain_hash_hex(refuted_hex, &refuted);
    bool replay = rc == 0 && (g.flags & CHAIN_ARB_FLAG_REPLAY);
    if (replay)
        rc = chain_arb_get_replay(&s.arb, &run_id, at, &rp);
    if (rc == 0 && (!(o = to_json(&run_id, block, &p, &g)) ||
                    json_object_set_new(o, "committee", committee_json(&p, &c)) ||
                    json_object_set_new(json_object_get(o, "game"), "refuted_by", json_string(refuted_hex)) ||
                    (replay && json_object_set_new(o, "replay", replay_json(&rp, &g)))))
        rc = ovt_fail(OVT_ENOMEM, "out of memory");
    chain_session_close(&s);
    if (rc)
        return cli_fail("game");
    if (a.json) {
        char *text = json_dumps(o, JSON_COMPACT);
        printf("%s\n", text ? text : "{}");
        free(text);
    } else {
        print_text(o);
    }
    json_decref(o);
    return 0;
}
