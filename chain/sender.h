#ifndef OVT_CHAIN_SENDER_H
#define OVT_CHAIN_SENDER_H

/* What every command that sends transactions to the arbitration contract
 * opens: the node's RPC client (reverts decoded with the contract's custom
 * errors) and the transaction manager of the account given by exactly one
 * of --keystore/--password-file and --private-key. The key lives only in
 * the manager (wiped by chain_sender_close) and is never printed. */

#include "chain/rpc.h"
#include "chain/txm.h"

typedef struct {
    chain_rpc *rpc;
    chain_txm txm;
} chain_sender;

/* opts may be NULL for the manager's defaults. On failure everything
 * opened is closed again. */
int chain_sender_open(chain_sender *s, const char *rpc_url, const char *keystore, const char *password_file,
                      const char *private_key, const chain_txm_opts *opts) OVT_MUST_USE;
void chain_sender_close(chain_sender *s);

#endif
