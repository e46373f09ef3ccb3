#ifndef OVT_CHAIN_SESSION_H
#define OVT_CHAIN_SESSION_H

/* What the party commands (`ovt commit`, `ovt audit`, `ovt agent`) share: a
 * node, the party's key in a transaction manager, and the arbitration
 * contract, from the usual flags --rpc-url (or $ETH_RPC_URL), --contract,
 * --keystore [--password-file] or --private-key. */

#include "chain/arbitration.h"
#include "chain/parse.h"

typedef struct {
    const char *rpc_url;
    const char *contract;
    const char *keystore;
    const char *password_file;
    const char *private_key;      /* a copy: the argv text is overwritten (ps shows x's) */
    const char *private_key_file; /* a file holding the hex key (mode 0600 or stricter) */
    const char *private_key_env;  /* the name of an environment variable holding it */
    const char *confirmations; /* blocks to wait for, including the receipt's (NULL: 1) */
    const char *max_fee;       /* --max-fee-per-gas: wei or "Ngwei" (NULL: no cap) */
    const char *priority_fee;  /* --priority-fee: the tip's cap (NULL: no cap) */
} chain_session_args;

typedef struct {
    chain_rpc *rpc;
    chain_txm txm; /* txm.rpc is NULL when no key was given */
    chain_arb arb;
} chain_session;

/* getopt_long codes and entries of the shared flags: put
 * CHAIN_SESSION_LONGOPTS in a command's option table and pass every code to
 * chain_session_take, which returns 1 when it consumed it. */
enum { CHAIN_OPT_RPC_URL = 1000, CHAIN_OPT_CONTRACT, CHAIN_OPT_KEYSTORE, CHAIN_OPT_PASSWORD_FILE, CHAIN_OPT_PRIVATE_KEY,
       CHAIN_OPT_CONFIRMATIONS, CHAIN_OPT_PRIVATE_KEY_FILE, CHAIN_OPT_PRIVATE_KEY_ENV, CHAIN_OPT_MAX_FEE,
       CHAIN_OPT_PRIORITY_FEE };
#define CHAIN_SESSION_LONGOPTS                                                                                   \
    {"rpc-url", required_argument, NULL, CHAIN_OPT_RPC_URL},                                                     \
        {"contract", required_argument, NULL, CHAIN_OPT_CONTRACT},                                               \
        {"keystore", required_argument, NULL, CHAIN_OPT_KEYSTORE},                                               \
        {"password-file", required_argument, NULL, CHAIN_OPT_PASSWORD_FILE},                                     \
        {"private-key", required_argument, NULL, CHAIN_OPT_PRIVATE_KEY},                                         \
        {"private-key-file", required_argument, NULL, CHAIN_OPT_PRIVATE_KEY_FILE},                               \
        {"private-key-env", required_argument, NULL, CHAIN_OPT_PRIVATE_KEY_ENV},                                 \
        {"max-fee-per-gas", required_argument, NULL, CHAIN_OPT_MAX_FEE},                                         \
        {"priority-fee", required_argument, NULL, CHAIN_OPT_PRIORITY_FEE}

/* An optional entry for commands whose transactions should wait for
 * confirmations (chain_session_take stores it, chain_session_open checks it).
 * Not part of CHAIN_SESSION_LONGOPTS: the arbiter's --confirmations means
 * something else (how deep a block must be before it acts). */
#define CHAIN_SESSION_CONFIRMATIONS_LONGOPT {"confirmations", required_argument, NULL, CHAIN_OPT_CONFIRMATIONS}
#define CHAIN_SESSION_CONFIRMATIONS_HELP                                                                          \
    "  --confirmations N    blocks each transaction waits for, including its own (default 1)\n"

/* Help text of those flags, for usage messages. */
#define CHAIN_SESSION_HELP                                                                                       \
    "  --rpc-url URL        the node's JSON-RPC endpoint (default: $ETH_RPC_URL)\n"                              \
    "  --contract ADDR      the arbitration contract\n"                                                          \
    "  --keystore FILE      the party's Web3 v3 keystore (password: --password-file,\n"                         \
    "                       else $OVT_PASSWORD, else a prompt)\n"                                                 \
    "  --private-key-file F a file holding a raw hex key (mode 0600)\n"                                          \
    "  --private-key-env V  the environment variable V holds a raw hex key (e.g. ETH_PRIVATE_KEY)\n"          \
    "  --private-key KEY    a raw hex key on the command line, for throwaway devnet accounts\n"                  \
    "                       only (other users' ps may see it before ovt overwrites it)\n"                      \
    CHAIN_SESSION_FEE_HELP

/* The fee caps (also in `ovt deploy`). */
#define CHAIN_SESSION_FEE_HELP                                                                                   \
    "  --max-fee-per-gas F  never pay more than F per gas (wei, or e.g. 30gwei): the\n"                          \
    "                       max fee, or the gas price on a node without EIP-1559\n"                              \
    "  --priority-fee F     never tip more than F per gas (wei or gwei)\n"

/* Applies --max-fee-per-gas / --priority-fee (either may be NULL) to opts. */
int chain_session_fee_caps(chain_txm_opts *opts, const char *max_fee, const char *priority_fee) OVT_MUST_USE;

int chain_session_take(chain_session_args *a, int code, const char *arg);

/* Sets rpc_url from $ETH_RPC_URL. */
void chain_session_args_init(chain_session_args *a);

/* Whether any chain flag was given. */
int chain_session_args_any(const chain_session_args *a);

/* How many key sources (keystore, raw key, key file, key variable) were
 * given: exactly one is needed to send. */
int chain_session_key_sources(const chain_session_args *a);

/* Unlocks exactly one of --keystore (with --password-file, $OVT_PASSWORD or
 * a prompt), --private-key, --private-key-file and --private-key-env; the
 * error names the flag, never the key. */
int chain_session_load_key(chain_privkey *key, const chain_session_args *a) OVT_MUST_USE;

/* Opens the node and attaches to the contract (a --confirmations outside
 * 1..1000 is OVT_EINVAL); with need_key, also unlocks exactly one of
 * --keystore, --private-key, --private-key-file and --private-key-env into
 * the transaction manager (the key is wiped from every other place). */
int chain_session_open(chain_session *s, const chain_session_args *a, int need_key) OVT_MUST_USE;
void chain_session_close(chain_session *s);

/* "0x" + 64 hex digits. */
void chain_hash_hex(char out[67], const ovt_hash *h);

#endif
