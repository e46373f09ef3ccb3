#ifndef OVT_CHAIN_POLICY_H
#define OVT_CHAIN_POLICY_H

/* A party's policy: the run terms it accepts before any of its bond moves.
 * Anyone can open a run naming anyone as auditor, with any arbiter, bonds and
 * timeouts; the arbiter named at open decides who is paid. So `ovt audit`,
 * `ovt commit --run-id` and `ovt agent` read the run's terms on chain and
 * compare them with this policy first; a term outside it refuses the run
 * before any transaction. docs/agent.md describes each term.
 *
 * The policy comes from a JSON file (--policy FILE) and flags; a flag
 * overrides the file's value (--accept-arbiter flags replace the file's
 * list). There is no default arbiter: with none named every run is refused.
 * Defaults: own bond at most 1 ETH, commit and move timeouts at least 60 s,
 * verdict timeout at least 600 s; nothing else is limited unless set. */

#include <stdint.h>

#include "chain/arbitration.h"

#define PARTY_POLICY_MAX_ARBITERS 16

typedef struct {
    chain_address arbiters[PARTY_POLICY_MAX_ARBITERS];
    unsigned n_arbiters;
    chain_u256 max_bond;       /* this party's own bond, wei */
    chain_u256 max_other_bond; /* the other side's, if have_max_other_bond */
    chain_u256 min_other_bond; /* the other side's, at least (default 0) */
    int have_max_other_bond;
    uint32_t min_commit_timeout, min_move_timeout, min_verdict_timeout; /* seconds */
    uint64_t max_steps;        /* 0: any */
    uint64_t chain_id;         /* 0: any */
    int have_contract, have_config, have_dataset;
    chain_address contract;
    ovt_hash config_hash, dataset_hash;
} party_policy;

/* What the command line gave, before it is resolved into a party_policy. */
typedef struct {
    const char *file;
    const char *arbiters[PARTY_POLICY_MAX_ARBITERS];
    unsigned n_arbiters;
    const char *max_bond, *max_other_bond, *min_other_bond;
    const char *min_commit_timeout, *min_move_timeout, *min_verdict_timeout;
    const char *max_steps, *chain_id, *contract, *config_hash, *dataset_hash;
    int too_many_arbiters;
} party_policy_args;

enum { PARTY_OPT_POLICY = 1100, PARTY_OPT_ACCEPT_ARBITER, PARTY_OPT_MAX_BOND, PARTY_OPT_MAX_OTHER_BOND,
       PARTY_OPT_MIN_OTHER_BOND, PARTY_OPT_MIN_COMMIT_TIMEOUT, PARTY_OPT_MIN_MOVE_TIMEOUT,
       PARTY_OPT_MIN_VERDICT_TIMEOUT, PARTY_OPT_MAX_STEPS, PARTY_OPT_EXPECT_CHAIN_ID, PARTY_OPT_EXPECT_CONFIG,
       PARTY_OPT_EXPECT_DATASET };

#define PARTY_POLICY_LONGOPTS                                                                                    \
    {"policy", required_argument, NULL, PARTY_OPT_POLICY},                                                       \
        {"accept-arbiter", required_argument, NULL, PARTY_OPT_ACCEPT_ARBITER},                                   \
        {"max-bond", required_argument, NULL, PARTY_OPT_MAX_BOND},                                               \
        {"max-other-bond", required_argument, NULL, PARTY_OPT_MAX_OTHER_BOND},                                   \
        {"min-other-bond", required_argument, NULL, PARTY_OPT_MIN_OTHER_BOND},                                   \
        {"min-commit-timeout", required_argument, NULL, PARTY_OPT_MIN_COMMIT_TIMEOUT},                           \
        {"min-move-timeout", required_argument, NULL, PARTY_OPT_MIN_MOVE_TIMEOUT},                               \
        {"min-verdict-timeout", required_argument, NULL, PARTY_OPT_MIN_VERDICT_TIMEOUT},                         \
        {"max-steps", required_argument, NULL, PARTY_OPT_MAX_STEPS},                                             \
        {"expect-chain-id", required_argument, NULL, PARTY_OPT_EXPECT_CHAIN_ID},                                 \
        {"expect-config", required_argument, NULL, PARTY_OPT_EXPECT_CONFIG},                                     \
        {"expect-dataset", required_argument, NULL, PARTY_OPT_EXPECT_DATASET}

#define PARTY_POLICY_HELP                                                                                        \
    "Policy (checked against the run's terms on chain before any bond moves; docs/agent.md):\n"                  \
    "  --policy FILE        a JSON policy file; the flags below override its values\n"                          \
    "  --accept-arbiter A   an arbiter this party trusts (repeatable; required: no arbiter\n"                   \
    "                       is accepted by default)\n"                                                            \
    "  --max-bond WEI       most this party bonds (default 1000000000000000000, 1 ETH)\n"                        \
    "  --max-other-bond WEI most the other side may bond (default: no limit)\n"                                 \
    "  --min-other-bond WEI least the other side must bond (default 0)\n"                                       \
    "  --min-commit-timeout S, --min-move-timeout S   floors (default 60 each)\n"                                \
    "  --min-verdict-timeout S  the arbiter's deadline at least (default 600)\n"                                 \
    "  --max-steps N        most steps (default: no limit)\n"                                                     \
    "  --expect-chain-id N, --expect-config HASH, --expect-dataset HASH   (default: any)\n"

void party_policy_args_init(party_policy_args *a);

/* Takes a policy flag (returns 1), or returns 0 for any other code. */
int party_policy_take(party_policy_args *a, int code, const char *arg);

/* Resolves the file (if any) and the flags into *out. Fails (OVT_EINVAL)
 * on a malformed value or file, and when no arbiter is accepted, with a
 * message that says how to name one. */
int party_policy_resolve(party_policy *out, const party_policy_args *a) OVT_MUST_USE;

/* Checks a run's terms p (as getRun returns them) on chain (chain_id,
 * contract) against the policy for the party is_trainer (else the
 * auditor). Returns 0 if every term is inside it; else OVT_EINVAL with a
 * message naming every term outside it, its value and the limit. */
int party_policy_check(const party_policy *pol, const chain_arb_params *p, uint64_t chain_id,
                       const chain_address *contract, int is_trainer) OVT_MUST_USE;

#endif
