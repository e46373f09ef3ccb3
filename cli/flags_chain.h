#ifndef OVT_CLI_FLAGS_CHAIN_H
#define OVT_CLI_FLAGS_CHAIN_H

/* The chain flags the party commands share (`ovt commit`, `ovt audit`,
 * `ovt agent`, `ovt arbiter watch`; `ovt keys address` takes the key
 * sources): --rpc-url (or $ETH_RPC_URL), --contract, one key source
 * (--keystore [--password-file], --private-key-file, --private-key-env,
 * --private-key) and the fee caps, into a chain_session_args
 * (chain/session.h), which chain_session_open checks and opens.
 *
 * Put CLI_CHAIN_LONGOPTS in a command's option table and pass every code
 * getopt_long returns to cli_chain_take, which returns 1 when it took it. */

#include <getopt.h>

#include "chain/session.h"

enum { CLI_CHAIN_RPC_URL = 1000, CLI_CHAIN_CONTRACT, CLI_CHAIN_KEYSTORE, CLI_CHAIN_PASSWORD_FILE,
       CLI_CHAIN_PRIVATE_KEY, CLI_CHAIN_CONFIRMATIONS, CLI_CHAIN_PRIVATE_KEY_FILE, CLI_CHAIN_PRIVATE_KEY_ENV,
       CLI_CHAIN_MAX_FEE, CLI_CHAIN_PRIORITY_FEE };
#define CLI_CHAIN_LONGOPTS                                                                                       \
    {"rpc-url", required_argument, NULL, CLI_CHAIN_RPC_URL},                                                     \
        {"contract", required_argument, NULL, CLI_CHAIN_CONTRACT},                                               \
        {"keystore", required_argument, NULL, CLI_CHAIN_KEYSTORE},                                               \
        {"password-file", required_argument, NULL, CLI_CHAIN_PASSWORD_FILE},                                     \
        {"private-key", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY},                                         \
        {"private-key-file", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY_FILE},                               \
        {"private-key-env", required_argument, NULL, CLI_CHAIN_PRIVATE_KEY_ENV},                                 \
        {"max-fee-per-gas", required_argument, NULL, CLI_CHAIN_MAX_FEE},                                         \
        {"priority-fee", required_argument, NULL, CLI_CHAIN_PRIORITY_FEE}

/* An optional entry for commands whose transactions should wait for
 * confirmations (cli_chain_take stores it, chain_session_open checks it).
 * Not part of CLI_CHAIN_LONGOPTS: the arbiter's --confirmations means
 * something else (how deep a block must be before it acts). */
#define CLI_CHAIN_CONFIRMATIONS_LONGOPT {"confirmations", required_argument, NULL, CLI_CHAIN_CONFIRMATIONS}
#define CLI_CHAIN_CONFIRMATIONS_HELP                                                                              \
    "  --confirmations N    blocks each transaction waits for, including its own (default 1)\n"

/* Help text of those flags, for usage messages. */
#define CLI_CHAIN_HELP                                                                                           \
    "  --rpc-url URL        the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"                              \
    "  --contract ADDR      the arbitration contract\n"                                                          \
    "  --keystore FILE      the party's Web3 v3 keystore (password: --password-file,\n"                         \
    "                       else $OVT_PASSWORD, else a prompt)\n"                                                 \
    "  --private-key-file F a file holding a raw hex key (mode 0600)\n"                                          \
    "  --private-key-env V  the environment variable V holds a raw hex key (e.g. ETH_PRIVATE_KEY)\n"          \
    "  --private-key KEY    a raw hex key on the command line, for throwaway devnet accounts\n"                  \
    "                       only (other users' ps may see it before ovt overwrites it)\n"                      \
    CLI_CHAIN_FEE_HELP

/* The fee caps (also in `ovt deploy`). */
#define CLI_CHAIN_FEE_HELP                                                                                       \
    "  --max-fee-per-gas F  never pay more than F per gas (wei, or e.g. 30gwei): the\n"                          \
    "                       max fee, or the gas price on a node without EIP-1559\n"                              \
    "  --priority-fee F     never tip more than F per gas (wei or gwei)\n"

/* No flag given yet; rpc_url from $ETH_RPC_URL. */
void cli_chain_init(chain_session_args *a);

/* Stores the value of chain flag `code` and returns 1, or returns 0 for any
 * other code. A --private-key is kept as a copy and its argv text
 * overwritten with x's, so that ps and /proc/PID/cmdline show x's for the
 * rest of the process's life. */
int cli_chain_take(chain_session_args *a, int code, const char *arg);

#endif
