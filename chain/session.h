#ifndef OVT_CHAIN_SESSION_H
#define OVT_CHAIN_SESSION_H

/* What the parties (`ovt commit`, `ovt audit`, `ovt agent`, `ovt arbiter
 * watch`) share: a node, the party's key in a transaction manager, and the
 * arbitration contract. chain_session_args holds the flags' text as given
 * (cli/flags_chain.h fills it); chain_session_open checks and opens it, and
 * names the flag in its messages. */

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
    const char *max_fee;       /* --max-fee-per-gas: wei, gwei or ether (NULL: no cap) */
    const char *priority_fee;  /* --priority-fee: the tip's cap (NULL: no cap) */
} chain_session_args;

typedef struct {
    chain_rpc *rpc;
    chain_txm txm; /* txm.rpc is NULL when no key was given */
    chain_arb arb;
} chain_session;

/* Applies --max-fee-per-gas / --priority-fee (either may be NULL; wei, gwei
 * or ether below 2^64, chain_parse_wei) to opts. */
int chain_session_fee_caps(chain_txm_opts *opts, const char *max_fee, const char *priority_fee) OVT_MUST_USE;

/* Whether any chain flag was given. */
int chain_session_args_any(const chain_session_args *a);

/* How many key sources (keystore, raw key, key file, key variable) were
 * given: exactly one is needed to send. */
int chain_session_key_sources(const chain_session_args *a);

/* Unlocks exactly one of --keystore (with --password-file, $OVT_PASSWORD or
 * a prompt), --private-key, --private-key-file and --private-key-env; the
 * error names the flag, never the key. */
int chain_session_load_key(chain_privkey *key, const chain_session_args *a) OVT_MUST_USE;

/* The address of the one key source given (`ovt keys address`): a keystore,
 * decrypted (its address checked against its "address" field), or a raw
 * key; the key itself is wiped. */
int chain_session_key_address(chain_address *address, const chain_session_args *a) OVT_MUST_USE;

/* Opens the node and attaches to the contract (a --confirmations outside
 * 1..1000 is OVT_EINVAL); with need_key, also unlocks exactly one of
 * --keystore, --private-key, --private-key-file and --private-key-env into
 * the transaction manager (the key is wiped from every other place). */
int chain_session_open(chain_session *s, const chain_session_args *a, int need_key) OVT_MUST_USE;
void chain_session_close(chain_session *s);

/* "0x" + 64 hex digits. */
void chain_hash_hex(char out[67], const ovt_hash *h);

#endif
