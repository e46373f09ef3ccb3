#ifndef OVT_PARTY_POLICY_H
#define OVT_PARTY_POLICY_H

/* A party's policy: the run terms it accepts before any of its bond moves.
 * Anyone can open a run naming anyone as auditor, with any arbiter, bonds and
 * timeouts; the arbiter named at open decides who is paid. So `ovt audit`,
 * `ovt commit --run-id` and `ovt agent` read the run's terms on chain and
 * compare them with this policy first; a term outside it refuses the run
 * before any transaction. docs/agent.md describes each term.
 *
 * A policy starts from the defaults (party_policy_init: own bond at most
 * 1 ETH, commit and move timeouts at least 60 s, verdict timeout at least
 * 600 s, nothing else limited, no arbiter accepted), then takes a JSON file
 * (party_policy_load) and single terms (party_policy_set) over it; the
 * commands do that from --policy FILE and their flags (cli/flags_policy.h).
 * With no arbiter named every run is refused.
 *
 * A committee (docs/contract.md): the run's m matching verdicts decide, so
 * the run is accepted only if at least m of its n arbiters are on the
 * allow-list: then the arbiters this party trusts can settle it alone, and
 * the others cannot without them. */

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
    uint32_t max_verdict_timeout;  /* seconds; 0: any */
    chain_u256 min_arbiter_bond;   /* what each arbiter must put at stake, at least (default 0) */
    chain_u256 max_arbiter_bond;   /* at most, if have_max_arbiter_bond */
    int have_max_arbiter_bond;
    uint64_t max_steps;        /* 0: any */
    uint64_t chain_id;         /* 0: any */
    int have_contract, have_config, have_dataset;
    chain_address contract;
    ovt_hash config_hash, dataset_hash;
} party_policy;

/* The terms a file key or a flag sets, in the order the flags apply. */
typedef enum {
    PARTY_TERM_MAX_BOND = 0,
    PARTY_TERM_MAX_OTHER_BOND,
    PARTY_TERM_MIN_OTHER_BOND,
    PARTY_TERM_MIN_COMMIT_TIMEOUT,
    PARTY_TERM_MIN_MOVE_TIMEOUT,
    PARTY_TERM_MIN_VERDICT_TIMEOUT,
    PARTY_TERM_MAX_STEPS,
    PARTY_TERM_CHAIN_ID,
    PARTY_TERM_CONFIG_HASH,
    PARTY_TERM_DATASET_HASH,
    PARTY_TERM_MAX_VERDICT_TIMEOUT,
    PARTY_TERM_MIN_ARBITER_BOND,
    PARTY_TERM_MAX_ARBITER_BOND,
    PARTY_TERM_COUNT
} party_policy_term;

/* The defaults above. */
void party_policy_init(party_policy *p);

/* Sets one term from its text: a bond in wei (chain_parse_wei below 2^96),
 * a timeout in seconds, a step count or chain id, a hash. what names where
 * the text came from in the message ("--max-bond", or a file's key). */
int party_policy_set(party_policy *p, party_policy_term term, const char *what, const char *text) OVT_MUST_USE;

/* Reads the JSON policy file at path over p: a key per term (docs/agent.md),
 * "accept_arbiters" replacing the list of arbiters, "contract". An unknown
 * key or a malformed value is OVT_EFORMAT or OVT_EINVAL, naming the file
 * and the key. */
int party_policy_load(party_policy *p, const char *path) OVT_MUST_USE;

/* Checks a run's terms p (as getRun returns them) on chain (chain_id,
 * contract) against the policy for the party is_trainer (else the
 * auditor). Returns 0 if every term is inside it; else OVT_EINVAL with a
 * message naming every term outside it, its value and the limit. */
int party_policy_check(const party_policy *pol, const chain_arb_params *p, uint64_t chain_id,
                       const chain_address *contract, int is_trainer) OVT_MUST_USE;

#endif
