/* The devnet's faults, what each must end in, and the checks of a
 * scenario's options (see devnet.h). */
#include <string.h>

#include "dp/dp.h"
#include "examples/devnet/devnet.h"

static const struct {
    const char *name;
    chain_arb_outcome expected;
    const char *what;
} faults[DEVNET_FAULT_COUNT] = {
    [DEVNET_NONE] = {"none", CHAIN_ARB_VERIFIED, "an honest run: equal roots, verified"},
    [DEVNET_BITFLIP] = {"bitflip", CHAIN_ARB_AUDITOR_RIGHT, "the trainer flips a bit of a parameter after step K"},
    [DEVNET_POISONED_BATCH] = {"poisoned-batch", CHAIN_ARB_AUDITOR_RIGHT,
                               "the trainer trains step K on changed targets (or fraudulent-log: its log\n"
                               "                      may not fit the schedule's batch)"},
    [DEVNET_SKIPPED_STEP] = {"skipped-step", CHAIN_ARB_AUDITOR_RIGHT, "the trainer skips step K (state K = K-1)"},
    [DEVNET_FORGED_LOG] = {"forged-log", CHAIN_ARB_FRAUDULENT_LOG,
                           "log K carries a wrong direction for an element 1.25..1.5 tau from its\n"
                           "                      midpoint (an impossible direction)"},
    [DEVNET_WITHHELD_INPUTS] = {"withheld-inputs", CHAIN_ARB_INPUTS_UNAVAILABLE,
                                "a bitflip at K, and the trainer withholds step K's inputs"},
    [DEVNET_LYING_AUDITOR] = {"lying-auditor", CHAIN_ARB_TRAINER_RIGHT,
                              "the auditor claims wrong states from step K on"},
    [DEVNET_OMITTED_LOG] = {"omitted-log", CHAIN_ARB_FRAUDULENT_LOG,
                            "the trainer writes its logs from step K on without their entries"},
    [DEVNET_BITFLIP_SHARD] = {"bitflip-shard", CHAIN_ARB_AUDITOR_RIGHT,
                              "a sharded run (--shards S >= 2): one bit of shard J's gradient flips in\n"
                              "                      step K; the arbiter names shard J (and its rank and host)"},
    [DEVNET_HIDDEN_FLIP] = {"hidden-flip", CHAIN_ARB_FRAUDULENT_LOG,
                            "log K turns a direction whose value lies tau/2..tau/2+delta from its\n"
                            "                      midpoint (rule 3 rejects it; under --band-rules 1 it settles\n"
                            "                      verified, issue 32's hole)"},
    [DEVNET_LYING_ARBITER] = {"lying-arbiter", CHAIN_ARB_AUDITOR_RIGHT,
                              "a bitflip at K, and one arbiter of the committee (--arbiters, default 3)\n"
                              "                      reveals a wrong verdict: it loses its bond"},
    [DEVNET_SILENT_ARBITER] = {"silent-arbiter", CHAIN_ARB_AUDITOR_RIGHT,
                               "a bitflip at K, and one arbiter takes its seat but never answers: it loses\n"
                               "                      its bond"},
    [DEVNET_COLLUDING_ARBITERS] = {"colluding-arbiters", CHAIN_ARB_AUDITOR_RIGHT,
                                   "a bitflip at K, and m - 1 arbiters reveal the same wrong verdict: the\n"
                                   "                      honest m settle it, the colluders lose their bonds"},
    [DEVNET_LYING_CHALLENGER] = {"lying-challenger", CHAIN_ARB_VERIFIED,
                                 "an honest run, and the last outside challenger (--challengers, default\n"
                                 "                      2) challenges it with states wrong from step K: it loses its\n"
                                 "                      bond to the trainer, whose own bond is untouched"},
    [DEVNET_COLLUDING_AUDITOR] = {"colluding-auditor", CHAIN_ARB_VERIFIED,
                                  "a bitflip at K; the named auditor commits the trainer's root (Verified);\n"
                                  "                      an honest outside challenger (--challengers, default 1)\n"
                                  "                      wins its challenge at K: the run is refuted"},
    [DEVNET_LAZY_AUDITOR] = {"lazy-auditor", CHAIN_ARB_TRAINER_RIGHT,
                             "an honest run with proof of replay (--replay-proof); the named auditor\n"
                             "                      copies the trainer's root and guesses its site hashes from step\n"
                             "                      K on (it replayed only the steps before): the replay dispute\n"
                             "                      ends at K and it loses its bond"},
    [DEVNET_FALSE_TABLE] = {"false-table", CHAIN_ARB_FRAUDULENT_LOG,
                            "a sharded run (--shards S >= 2) computed honestly whose log K gives shard J\n"
                            "                      a false gradient hash: the table blames a shard that did\n"
                            "                      nothing wrong; fraudulent-log, and no shard is named"},
    [DEVNET_FLIP_OUTPUT] = {"flip-output", CHAIN_ARB_AUDITOR_RIGHT,
                            "a deep fault: bit 22 of one element of the last adamw.param site's output\n"
                            "                      (the parameter update) flips in step K, and training goes on;\n"
                            "                      the dispute narrows to that site and block (--narrow); --fault-op\n"
                            "                      matmul.bwd.dweight (or matmul.bwd.dbias) flips the last site of that\n"
                            "                      batch sum instead, and the narrowing goes on to its chunk chain"},
    [DEVNET_FORGED_CHAIN] = {"forged-chain", CHAIN_ARB_AUDITOR_RIGHT,
                             "flip-output at the last matmul.bwd.dweight site (--fault-op), and at level 4\n"
                             "                      the trainer posts a chunk chain forged from its middle chunk on:\n"
                             "                      the arbiters recompute that chunk (needs C >= 2 chunks: e.g.\n"
                             "                      --batch 8 --seq 64)"},
    [DEVNET_NO_CHAIN] = {"no-chain", CHAIN_ARB_AUDITOR_RIGHT,
                         "flip-output at the last matmul.bwd.dweight site (--fault-op), and at level 4\n"
                         "                      the trainer posts no chunk chain: the devnet moves anvil's clock past\n"
                         "                      the move deadline and the trainer loses the narrowing by silence,\n"
                         "                      which is no verdict: the arbiters rule on the whole step"},
    [DEVNET_CHAIN_COUNT] = {"chain-count", CHAIN_ARB_AUDITOR_RIGHT,
                            "flip-output at the last matmul.bwd.dweight site (--fault-op), and at level 4\n"
                            "                      the trainer posts a chunk chain of C + 2 leaves: the narrowing ends\n"
                            "                      CountsDiffer and the arbiters rule the count that is not\n"
                            "                      ceil(N / 128) + 1 wrong"},
};

bool devnet_flips_output(const devnet_opts *o)
{
    return o->fault == DEVNET_FLIP_OUTPUT || o->fault == DEVNET_FORGED_CHAIN || o->fault == DEVNET_NO_CHAIN ||
           o->fault == DEVNET_CHAIN_COUNT;
}

const char *devnet_fault_op(const devnet_opts *o)
{
    return o->fault_op                   ? o->fault_op
           : o->fault == DEVNET_FLIP_OUTPUT ? "adamw.param"
                                            : "matmul.bwd.dweight"; /* forged-chain, ...: level 4 */
}

int devnet_flip_site(const devnet_opts *o, uint32_t *site, uint64_t *element)
{
    if (o->has_flip_site) {
        *site = o->flip_site;
        *element = o->flip_element;
        return 0;
    }
    /* each model's last site of the op (`ovt step --trace --json`; the
     * site indices do not depend on --batch or --seq). adamw.param: an
     * element of its leaf 2: 40000 of outputs over 40000 elements, 35000
     * of the MLP's 37152 (its whole parameter vector; resnet-mini's last
     * site, bn.running, is one the block engine leaves to the whole step);
     * the batch sums' outputs fit one leaf: their middle element */
    static const struct {
        const char *model, *op;
        uint32_t site;
        uint64_t element;
    } sites[] = {{"gpt2-tiny", "adamw.param", 150, 40000},        {"llama-tiny", "adamw.param", 149, 40000},
                 {"resnet-mini", "adamw.param", 172, 40000},      {"mlp-demo", "adamw.param", 39, 35000},
                 {"gpt2-tiny", "matmul.bwd.dweight", 131, 6144},  {"gpt2-tiny", "matmul.bwd.dbias", 132, 96},
                 {"llama-tiny", "matmul.bwd.dweight", 134, 1024}};
    const char *model = DEVNET_MODEL(o), *op = devnet_fault_op(o);
    for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++)
        if (!strcmp(model, sites[i].model) && !strcmp(op, sites[i].op)) {
            *site = sites[i].site;
            *element = sites[i].element;
            return 0;
        }
    return ovt_fail(OVT_EINVAL, "--fault %s: no site of op %s known for --model %s (adamw.param: gpt2-tiny, "
                                "llama-tiny, resnet-mini, mlp-demo; matmul.bwd.dweight: gpt2-tiny, llama-tiny; "
                                "matmul.bwd.dbias: gpt2-tiny), and no --flip-site",
                    faults[o->fault].name, op, model);
}

static bool challenger_fault(devnet_fault f)
{
    return f == DEVNET_LYING_CHALLENGER || f == DEVNET_COLLUDING_AUDITOR;
}

bool devnet_challenger_lies(const devnet_opts *o, unsigned k)
{
    return o->fault == DEVNET_LYING_CHALLENGER && k + 1 == o->challengers;
}

/* Low 64 bits of a u256 whose higher bytes are zero (else UINT64_MAX). */
static uint64_t low64(const chain_u256 *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 24; i++)
        if (v->b[i])
            return UINT64_MAX;
    for (int i = 24; i < 32; i++)
        x = x << 8 | v->b[i];
    return x;
}

/* Whether the trainer's committed root is wrong under the fault. */
static bool faulty_trainer(const devnet_opts *o)
{
    return o->fault != DEVNET_NONE && o->fault != DEVNET_LYING_CHALLENGER && o->fault != DEVNET_LYING_AUDITOR &&
           o->fault != DEVNET_LAZY_AUDITOR && !(o->fault == DEVNET_HIDDEN_FLIP && o->band_rules == 1);
}

bool devnet_challenger_challenges(const devnet_opts *o, unsigned k)
{
    return devnet_challenger_lies(o, k) || faulty_trainer(o);
}

const char *devnet_challengers_check(const devnet_opts *o, const devnet_result *r)
{
    bool faulty = faulty_trainer(o);
    unsigned lost = 0;
    for (unsigned k = 0; k < r->n_challengers; k++) {
        const devnet_challenger *c = &r->challengers[k];
        if (devnet_challenger_challenges(o, k)) {
            if (!c->challenged || !c->settled)
                return c->lies ? "the lying challenger's challenge was not played to its end"
                               : "an honest challenger did not challenge the faulty run to its end";
            if (c->lies && c->outcome != CHAIN_ARB_TRAINER_RIGHT)
                return "the lying challenger's challenge did not end trainer-right";
            if (!c->lies && c->outcome != CHAIN_ARB_AUDITOR_RIGHT)
                return "an honest challenger's challenge of the faulty run did not end auditor-right";
            lost += c->lies;
        } else if (c->challenged) {
            return "an honest challenger challenged an honest run";
        } else if (!c->agreed) {
            return "an honest challenger never said its replay agrees";
        }
    }
    if (faulty && r->n_challengers && !r->refuted)
        return "the faulty run is not marked refuted";
    if (!faulty && r->refuted)
        return "an honest run is marked refuted";
    if (r->n_challengers && r->outcome == CHAIN_ARB_VERIFIED) {
        /* Verified returns the trainer's bond; each lost challenge adds the challenger's bond */
        uint64_t tb = low64(&r->trainer_bond), ab = low64(&r->auditor_bond), got = low64(&r->trainer_credit);
        if (tb == UINT64_MAX || ab == UINT64_MAX || got != tb + lost * ab)
            return "the trainer's credit is not its bond plus the lost challengers' bonds";
    }
    return "";
}

static bool arbiter_fault(devnet_fault f)
{
    return f == DEVNET_LYING_ARBITER || f == DEVNET_SILENT_ARBITER || f == DEVNET_COLLUDING_ARBITERS;
}

const char *devnet_misbehave(const devnet_opts *o, unsigned seat)
{
    unsigned n = o->arbiters, m = chain_arb_majority(n);
    switch (o->fault) {
    case DEVNET_LYING_ARBITER: return seat == n - 1 ? "lie" : NULL;
    case DEVNET_SILENT_ARBITER: return seat == n - 1 ? "silent" : NULL;
    case DEVNET_COLLUDING_ARBITERS: return seat >= n - (m - 1) ? "lie" : NULL;
    default: return NULL;
    }
}

const char *devnet_committee_check(const devnet_opts *o, const devnet_result *r)
{
    const devnet_arbiter *first = NULL;
    bool bonded = !chain_u256_is_zero(&r->arbiter_bond);
    for (unsigned k = 0; k < r->n_arbiters; k++) {
        const devnet_arbiter *a = &r->arbiters[k];
        if (bonded && !a->settled)
            return "an arbiter never took its seat (no ArbiterSettled event names it)";
        bool lost = a->settled && !chain_u256_is_zero(&a->forfeited);
        if (a->misbehave) {
            if (bonded && !lost)
                return "an arbiter that misbehaved kept its bond";
            continue;
        }
        if (lost)
            return "an honest arbiter lost its bond";
        if (r->outcome == CHAIN_ARB_VERIFIED || devnet_expected(o) == CHAIN_ARB_VERIFIED || o->silent)
            continue;
        if (!a->revealed)
            return "an honest arbiter gave no verdict";
        if (a->verdict != r->outcome)
            return "an honest arbiter's verdict is not the settled outcome";
        if (first && memcmp(first->evidence.b, a->evidence.b, 32) != 0)
            return "two honest arbiters revealed different evidence";
        first = a;
    }
    return "";
}

const char *devnet_fault_name(devnet_fault f)
{
    return (unsigned)f < DEVNET_FAULT_COUNT ? faults[f].name : "?";
}

const char *devnet_fault_what(devnet_fault f)
{
    return (unsigned)f < DEVNET_FAULT_COUNT ? faults[f].what : "?";
}

chain_arb_outcome devnet_fault_outcome(devnet_fault f)
{
    return (unsigned)f < DEVNET_FAULT_COUNT ? faults[f].expected : CHAIN_ARB_NONE;
}

int devnet_fault_parse(devnet_fault *out, const char *name)
{
    for (int i = 0; i < DEVNET_FAULT_COUNT; i++)
        if (strcmp(name, faults[i].name) == 0) {
            *out = (devnet_fault)i;
            return 0;
        }
    return ovt_fail(OVT_EINVAL, "unknown fault '%s' (none, bitflip, poisoned-batch, skipped-step, forged-log, "
                                "withheld-inputs, lying-auditor, omitted-log, bitflip-shard, hidden-flip, "
                                "lying-arbiter, silent-arbiter, colluding-arbiters, lying-challenger, "
                                "colluding-auditor, lazy-auditor, false-table, flip-output, forged-chain, no-chain, chain-count)",
                    name);
}

const char *devnet_party_name(devnet_party p)
{
    return p == DEVNET_PARTY_TRAINER ? "trainer" : p == DEVNET_PARTY_AUDITOR ? "auditor" : "none";
}

chain_arb_outcome devnet_expected(const devnet_opts *o)
{
    if (o->silent == DEVNET_PARTY_TRAINER)
        return CHAIN_ARB_TRAINER_TIMED_OUT;
    if (o->silent == DEVNET_PARTY_AUDITOR)
        return CHAIN_ARB_AUDITOR_TIMED_OUT;
    /* band rules 1 (rule 2): no auditor can tell the hidden flip from an
     * honest choice, and the run settles verified (docs/numeric-contract.md
     * section 10) */
    if (o->fault == DEVNET_HIDDEN_FLIP && o->band_rules == 1)
        return CHAIN_ARB_VERIFIED;
    return faults[o->fault].expected;
}

bool devnet_outcome_ok(const devnet_opts *o, chain_arb_outcome out)
{
    if (out == devnet_expected(o))
        return true;
    /* a log recorded on a poisoned batch may hold entries the schedule's
     * batch does not support: the trainer is then caught by its log */
    if (!o->silent && o->fault == DEVNET_FLIP_OUTPUT && o->has_flip_site && out == CHAIN_ARB_FRAUDULENT_LOG)
        return true; /* an early flip: the trainer's log, recorded from the flipped values, is fraud later */
    return !o->silent && o->fault == DEVNET_POISONED_BATCH && out == CHAIN_ARB_FRAUDULENT_LOG;
}

bool devnet_as_expected(const devnet_opts *o, const devnet_result *r)
{
    /* bitflip-shard also expects the arbiter to have named the flipped shard;
     * false-table, that it named none (the table's word blames nobody) */
    return devnet_outcome_ok(o, r->outcome) && !devnet_committee_check(o, r)[0] && !devnet_challengers_check(o, r)[0] &&
           (devnet_expected(o) == CHAIN_ARB_VERIFIED || o->silent || (r->has_step && r->step == o->at)) &&
           (o->fault != DEVNET_BITFLIP_SHARD || o->silent ||
            (r->arbiter_named_shard && r->arbiter_shard == (int64_t)o->fault_shard)) &&
           (o->fault != DEVNET_FALSE_TABLE || !r->arbiter_named_shard);
}

int devnet_opts_check(devnet_opts *o, bool have_at, bool have_fault_shard)
{
    if (!have_at)
        o->at = o->steps >= 17 * 2 ? 17 : o->steps / 2;
    if (o->fault != DEVNET_NONE && o->at > o->steps)
        return ovt_fail(OVT_EINVAL, "--at %llu is past --steps %llu", (unsigned long long)o->at,
                        (unsigned long long)o->steps);
    if (o->batch % o->shards != 0)
        return ovt_fail(OVT_EINVAL, "--shards %u must divide --batch %u", o->shards, o->batch);
    if (o->shards % o->ranks != 0)
        return ovt_fail(OVT_EINVAL, "--ranks %u must divide --shards %u (each process computes S/R shards)",
                        o->ranks, o->shards);
    uint32_t flip_site;
    uint64_t flip_element;
    if (o->fault_op && !devnet_flips_output(o))
        return ovt_fail(OVT_EINVAL, "--fault-op goes with --fault flip-output or forged-chain");
    if (o->has_flip_site && o->fault != DEVNET_FLIP_OUTPUT)
        return ovt_fail(OVT_EINVAL, "--flip-site goes with --fault flip-output");
    if (o->has_flip_site && o->fault_op)
        return ovt_fail(OVT_EINVAL, "--flip-site and --fault-op both name the flipped site: give one");
    if (devnet_flips_output(o) && devnet_flip_site(o, &flip_site, &flip_element))
        return -1;
    if ((o->fault == DEVNET_FORGED_CHAIN || o->fault == DEVNET_NO_CHAIN || o->fault == DEVNET_CHAIN_COUNT) &&
        strcmp(devnet_fault_op(o), "adamw.param") == 0)
        return ovt_fail(OVT_EINVAL, "--fault %s plays level 4, a chunk chain: its --fault-op must be a batch sum "
                                    "(matmul.bwd.dweight, matmul.bwd.dbias)",
                        faults[o->fault].name);
    if (devnet_flips_output(o))
        o->narrow = true; /* the deep fault is what the narrowing is for */
    if (o->withhold_block && !o->narrow)
        return ovt_fail(OVT_EINVAL, "--withhold-block goes with --narrow (or --fault flip-output)");
    if (o->forge_block_entries && !o->narrow)
        return ovt_fail(OVT_EINVAL, "--forge-block-entries goes with --narrow (or --fault flip-output)");
    if (o->narrow && o->replay_proof)
        return ovt_fail(OVT_EINVAL, "--narrow plays without --replay-proof (a replay dispute is about a site "
                                    "hash, not a step)");
    if (o->fault == DEVNET_FLIP_OUTPUT && o->shards > 1 && !o->has_flip_site)
        return ovt_fail(OVT_EINVAL, "--fault flip-output on a sharded run needs --flip-site S --flip-element E, a "
                                    "site of one shard's range (the model's late site lies after the shards)");
    if (devnet_flips_output(o) && o->fault != DEVNET_FLIP_OUTPUT && o->shards > 1)
        return ovt_fail(OVT_EINVAL, "--fault %s plays on an unsharded run (no --shards)", faults[o->fault].name);
    bool shard_fault = o->fault == DEVNET_BITFLIP_SHARD || o->fault == DEVNET_FALSE_TABLE;
    if (shard_fault && o->shards < 2)
        return ovt_fail(OVT_EINVAL, "--fault %s needs a sharded run: --shards S >= 2", faults[o->fault].name);
    if (have_fault_shard && !shard_fault)
        return ovt_fail(OVT_EINVAL, "--fault-shard goes with --fault bitflip-shard or false-table");
    if (!have_fault_shard)
        o->fault_shard = o->shards / 2;
    if (o->fault_shard >= o->shards)
        return ovt_fail(OVT_EINVAL, "--fault-shard %u: the run has %u shards (J in 0..%u)", o->fault_shard,
                        o->shards, o->shards - 1);
    if (o->ranks > 1 && !dp_available())
        return ovt_fail(OVT_EINVAL, "--ranks %u needs a build with MPI (this one has none: install "
                                    "libopenmpi-dev and rebuild; docs/data-parallel.md)", o->ranks);
    if (o->arbiter_cmd) {
        int words = 0;
        for (const char *c = o->arbiter_cmd; *c; c++)
            words += *c != ' ' && (c == o->arbiter_cmd || c[-1] == ' ');
        if (words == 0 || words > DEVNET_ARBITER_CMD_WORDS)
            return ovt_fail(OVT_EINVAL,
                            "--arbiter-cmd needs 1 to %d words (split on spaces, no shell), e.g. "
                            "'qemu-aarch64-static build-cross-aarch64/ovt'; got %d",
                            DEVNET_ARBITER_CMD_WORDS, words);
    }
    if (o->arbiters == 0)
        o->arbiters = arbiter_fault(o->fault) ? 3 : 1;
    if (o->arbiters > CHAIN_ARB_MAX_ARBITERS)
        return ovt_fail(OVT_EINVAL, "--arbiters %u: a run names 1 to %d arbiters", o->arbiters,
                        CHAIN_ARB_MAX_ARBITERS);
    if (arbiter_fault(o->fault) && o->arbiters < 3)
        return ovt_fail(OVT_EINVAL, "--fault %s needs a committee that outvotes it: --arbiters 3 or more (got %u)",
                        devnet_fault_name(o->fault), o->arbiters);
    if (challenger_fault(o->fault) && o->challengers == 0)
        o->challengers = o->fault == DEVNET_LYING_CHALLENGER ? 2 : 1;
    if (o->fault == DEVNET_LAZY_AUDITOR)
        o->replay_proof = true;
    if (o->replay_proof && o->shards > 1)
        return ovt_fail(OVT_EINVAL, "--replay-proof needs an unsharded run (a sharded step cannot be traced yet)");
    if (o->replay_proof && o->fault != DEVNET_NONE && o->fault != DEVNET_LAZY_AUDITOR)
        return ovt_fail(OVT_EINVAL, "--replay-proof plays with --fault none or lazy-auditor");
    if (o->arbiters + o->challengers > CHAIN_ARB_MAX_ARBITERS)
        return ovt_fail(OVT_EINVAL, "--arbiters %u and --challengers %u: together at most %d (anvil's dev accounts "
                                    "after the trainer and the auditor)",
                        o->arbiters, o->challengers, CHAIN_ARB_MAX_ARBITERS);
    if (challenger_fault(o->fault) && o->silent)
        return ovt_fail(OVT_EINVAL, "--fault %s plays with no --silent party", devnet_fault_name(o->fault));
    if (o->silent && o->fault == DEVNET_NONE)
        return ovt_fail(OVT_EINVAL, "--silent needs a dispute: combine it with a fault other than none");
    return 0;
}
