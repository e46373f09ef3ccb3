/* `ovt game`: reads a run's parameters and game state from the contract at
 * one block and prints them (text, or JSON with --json). Read-only. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/arbitration.h"
#include "cli/commands.h"

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

static void hex32(char out[67], const ovt_hash *h)
{
    out[0] = '0';
    out[1] = 'x';
    ovt_hex_encode(out + 2, h->b, 32);
}

static json_t *to_json(const ovt_hash *run_id, uint64_t block, const chain_arb_params *p, const chain_arb_game *g)
{
    char t[43], a[43], r[43], id[67], ch[67], dh[67], tb[80], ab[80];
    char troot[67], aroot[67], tnode[67], anode[67];
    chain_address_to_string(t, &p->trainer);
    chain_address_to_string(a, &p->auditor);
    chain_address_to_string(r, &p->arbiter);
    hex32(id, run_id);
    hex32(ch, &p->config_hash);
    hex32(dh, &p->dataset_hash);
    chain_u256_to_dec(tb, &p->trainer_bond);
    chain_u256_to_dec(ab, &p->auditor_bond);
    hex32(troot, &g->trainer_root);
    hex32(aroot, &g->auditor_root);
    hex32(tnode, &g->trainer_node);
    hex32(anode, &g->auditor_node);
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
                                            "trainer_root", "auditor_root", "trainer_node", "auditor_node", NULL};
    printf("run       %s (at block %lld)\n", json_string_value(json_object_get(o, "run_id")),
           (long long)json_integer_value(json_object_get(o, "block")));
    print_fields(json_object_get(o, "run"), run_keys);
    printf("game\n");
    print_fields(json_object_get(o, "game"), game_keys);
}

int cmd_game(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rpc-url", required_argument, NULL, 'r'}, {"contract", required_argument, NULL, 'c'},
        {"run-id", required_argument, NULL, 'i'},  {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    const char *rpc_url = getenv("ETH_RPC_URL"), *contract = NULL, *run_hex = NULL;
    int json = 0, c;
    optind = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': rpc_url = optarg; break;
        case 'c': contract = optarg; break;
        case 'i': run_hex = optarg; break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ovt game: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!rpc_url || !*rpc_url || !contract || !run_hex) {
        fprintf(stderr, "ovt game: --rpc-url (or ETH_RPC_URL), --contract and --run-id are required\n");
        return 2;
    }
    chain_address addr;
    ovt_hash run_id;
    if (chain_address_from_string(&addr, contract) != 0) {
        fprintf(stderr, "ovt game: --contract: %s\n", ovt_errmsg());
        return 2;
    }
    if (strlen(run_hex) != 66 || ovt_hex_decode(run_id.b, 32, run_hex) != 0) {
        fprintf(stderr, "ovt game: --run-id must be 0x followed by 64 hex digits\n");
        return 2;
    }

    chain_rpc *rpc = NULL;
    chain_rpc_opts ro;
    chain_rpc_opts_default(&ro);
    ro.custom_errors = chain_arb_errors;
    chain_arb arb;
    chain_arb_params p;
    chain_arb_game g;
    uint64_t block = 0;
    char at[24];
    int rc = chain_rpc_open(&rpc, rpc_url, &ro);
    if (rc == 0)
        rc = chain_arb_attach(&arb, rpc, &addr);
    if (rc == 0)
        rc = chain_rpc_block_number(rpc, &block);
    if (rc == 0) {
        snprintf(at, sizeof at, "0x%llx", (unsigned long long)block);
        rc = chain_arb_get_run(&arb, &run_id, at, &p);
    }
    if (rc == 0)
        rc = chain_arb_get_game(&arb, &run_id, at, &g);
    json_t *o = rc == 0 ? to_json(&run_id, block, &p, &g) : NULL;
    if (rc == 0 && !o)
        rc = ovt_fail(OVT_ENOMEM, "out of memory");
    if (rc == 0 && json) {
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else if (rc == 0) {
        print_text(o);
    } else {
        fprintf(stderr, "ovt game: %s\n", ovt_errmsg());
    }
    json_decref(o);
    chain_rpc_close(rpc);
    return rc == 0 ? 0 : 1;
}
