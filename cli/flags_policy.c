/* The policy flags (see flags_policy.h). */
#include "cli/flags_policy.h"

#include <string.h>

#include "chain/parse.h"

/* Each term's flag, for the parsers' messages (the names of
 * CLI_POLICY_LONGOPTS). */
static const char *const term_flags[PARTY_TERM_COUNT] = {
    [PARTY_TERM_MAX_BOND] = "--max-bond",
    [PARTY_TERM_MAX_OTHER_BOND] = "--max-other-bond",
    [PARTY_TERM_MIN_OTHER_BOND] = "--min-other-bond",
    [PARTY_TERM_MIN_COMMIT_TIMEOUT] = "--min-commit-timeout",
    [PARTY_TERM_MIN_MOVE_TIMEOUT] = "--min-move-timeout",
    [PARTY_TERM_MIN_VERDICT_TIMEOUT] = "--min-verdict-timeout",
    [PARTY_TERM_MAX_STEPS] = "--max-steps",
    [PARTY_TERM_CHAIN_ID] = "--expect-chain-id",
    [PARTY_TERM_CONFIG_HASH] = "--expect-config",
    [PARTY_TERM_DATASET_HASH] = "--expect-dataset",
    [PARTY_TERM_MAX_VERDICT_TIMEOUT] = "--max-verdict-timeout",
    [PARTY_TERM_MIN_ARBITER_BOND] = "--min-arbiter-bond",
    [PARTY_TERM_MAX_ARBITER_BOND] = "--max-arbiter-bond",
};

void cli_policy_init(cli_policy_args *a)
{
    memset(a, 0, sizeof *a);
}

int cli_policy_take(cli_policy_args *a, int code, const char *arg)
{
    if (code == CLI_POLICY_FILE) {
        a->file = arg;
    } else if (code == CLI_POLICY_ACCEPT_ARBITER) {
        if (a->n_arbiters < PARTY_POLICY_MAX_ARBITERS)
            a->arbiters[a->n_arbiters++] = arg;
        else
            a->too_many_arbiters = true;
    } else if (code >= CLI_POLICY_TERM && code < CLI_POLICY_TERM + PARTY_TERM_COUNT) {
        a->terms[code - CLI_POLICY_TERM] = arg;
    } else {
        return 0;
    }
    return 1;
}

int cli_policy_resolve(party_policy *out, const cli_policy_args *a)
{
    int rv;
    party_policy_init(out);
    if (a->too_many_arbiters)
        return ovt_fail(OVT_EINVAL, "at most %d --accept-arbiter flags", PARTY_POLICY_MAX_ARBITERS);
    if (a->file && (rv = party_policy_load(out, a->file)))
        return rv;
    if (a->n_arbiters)
        out->n_arbiters = 0;
    for (unsigned i = 0; i < a->n_arbiters; i++)
        if ((rv = chain_parse_address(&out->arbiters[out->n_arbiters++], "--accept-arbiter", a->arbiters[i])))
            return rv;
    for (int t = 0; t < PARTY_TERM_COUNT; t++)
        if (a->terms[t] && (rv = party_policy_set(out, (party_policy_term)t, term_flags[t], a->terms[t])))
            return rv;
    if (out->n_arbiters == 0)
        return ovt_fail(OVT_EINVAL,
                        "no arbiter is accepted: name the arbiters this party trusts with --accept-arbiter ADDR "
                        "(repeatable) or \"accept_arbiters\" in a --policy file; the arbiter named in a run "
                        "decides who keeps the bonds, so no arbiter is accepted by default");
    return 0;
}
