#ifndef OVT_CLI_FLAGS_POLICY_H
#define OVT_CLI_FLAGS_POLICY_H

/* The policy flags of the parties that accept a run's terms (`ovt commit
 * --run-id`, `ovt audit`, `ovt agent`): --policy FILE, --accept-arbiter
 * (repeatable) and one flag per term of party/policy.h. A flag overrides the
 * file's value; --accept-arbiter flags replace the file's list.
 *
 * Put CLI_POLICY_LONGOPTS in a command's option table and pass every code
 * getopt_long returns to cli_policy_take; cli_policy_resolve then builds the
 * party_policy when the command needs it. */

#include <getopt.h>
#include <stdbool.h>

#include "party/policy.h"

typedef struct {
    const char *file;
    const char *arbiters[PARTY_POLICY_MAX_ARBITERS];
    unsigned n_arbiters;
    bool too_many_arbiters;
    const char *terms[PARTY_TERM_COUNT]; /* each term's flag value, NULL if not given */
} cli_policy_args;

/* A term's code is CLI_POLICY_TERM + its party_policy_term. */
enum { CLI_POLICY_FILE = 1100, CLI_POLICY_ACCEPT_ARBITER, CLI_POLICY_TERM };

#define CLI_POLICY_LONGOPTS                                                                                      \
    {"policy", required_argument, NULL, CLI_POLICY_FILE},                                                        \
        {"accept-arbiter", required_argument, NULL, CLI_POLICY_ACCEPT_ARBITER},                                  \
        {"max-bond", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MAX_BOND},                            \
        {"max-other-bond", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MAX_OTHER_BOND},                \
        {"min-other-bond", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MIN_OTHER_BOND},                \
        {"min-commit-timeout", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MIN_COMMIT_TIMEOUT},        \
        {"min-move-timeout", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MIN_MOVE_TIMEOUT},            \
        {"min-verdict-timeout", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MIN_VERDICT_TIMEOUT},      \
        {"max-steps", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MAX_STEPS},                          \
        {"expect-chain-id", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_CHAIN_ID},                     \
        {"expect-config", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_CONFIG_HASH},                    \
        {"expect-dataset", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_DATASET_HASH},                  \
        {"max-verdict-timeout", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MAX_VERDICT_TIMEOUT},      \
        {"min-arbiter-bond", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MIN_ARBITER_BOND},            \
        {"max-arbiter-bond", required_argument, NULL, CLI_POLICY_TERM + PARTY_TERM_MAX_ARBITER_BOND}

#define CLI_POLICY_HELP                                                                                          \
    "Policy (checked against the run's terms on chain before any bond moves; docs/agent.md):\n"                  \
    "  --policy FILE        a JSON policy file; the flags below override its values\n"                          \
    "  --accept-arbiter A   an arbiter this party trusts (repeatable; required: no arbiter\n"                   \
    "                       is accepted by default); a committee of n is accepted when at\n"                     \
    "                       least its threshold m of them are\n"                                                 \
    "  --max-bond WEI       most this party bonds (default 1000000000000000000, 1 ETH)\n"                        \
    "  --max-other-bond WEI most the other side may bond (default: no limit)\n"                                 \
    "  --min-other-bond WEI least the other side must bond (default 0)\n"                                       \
    "  --min-commit-timeout S, --min-move-timeout S   floors (default 60 each)\n"                                \
    "  --min-verdict-timeout S  the arbiter's deadline at least (default 600)\n"                                 \
    "  --max-verdict-timeout S  ... at most (default: no limit; a committee takes up to twice it)\n"            \
    "  --min-arbiter-bond WEI, --max-arbiter-bond WEI   what each arbiter puts at stake\n"                     \
    "                       (default: at least 0, no limit)\n"                                                   \
    "  --max-steps N        most steps (default: no limit)\n"                                                     \
    "  --expect-chain-id N, --expect-config HASH, --expect-dataset HASH   (default: any)\n"

void cli_policy_init(cli_policy_args *a);

/* Stores the value of policy flag `code` and returns 1, or returns 0 for
 * any other code. */
int cli_policy_take(cli_policy_args *a, int code, const char *arg);

/* The policy: the defaults, then the --policy file, then the flags over it.
 * Fails (OVT_EINVAL or OVT_EFORMAT) on a malformed value or file, and when
 * no arbiter is accepted, with a message that says how to name one. */
int cli_policy_resolve(party_policy *out, const cli_policy_args *a) OVT_MUST_USE;

#endif
