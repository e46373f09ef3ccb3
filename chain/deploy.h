#ifndef OVT_CHAIN_DEPLOY_H
#define OVT_CHAIN_DEPLOY_H

/* A deployment of the arbitration contract (`ovt deploy`), with its
 * record. With a record file, every version of the creation transaction is
 * written there (temp + fsync + rename) before the node sees it, and the
 * finished deployment after it: run again with the same file, chain_deploy
 * finishes that deployment (one of its transactions was mined) instead of
 * making another, or reports a finished one again (docs/chain-client.md). */

#include "chain/arbitration.h"

typedef struct {
    const char *rpc_url;
    const char *keystore;      /* exactly one of keystore and private_key (chain_load_key) */
    const char *password_file;
    const char *private_key;
    chain_txm_opts txm;        /* confirmations and fee caps */
    const char *record;        /* the record file (--out), or NULL */
} chain_deploy_opts;

typedef struct {
    chain_address address;     /* the contract */
    uint64_t chain_id;
    chain_address deployer;
    chain_receipt receipt;     /* the creation transaction's */
} chain_deployment;

/* Unlocks the key, deploys (or finishes or reports the deployment the
 * record names) and checks that the contract is there. On failure *out
 * holds nothing to free. */
int chain_deploy(const chain_deploy_opts *o, chain_deployment *out) OVT_MUST_USE;
void chain_deployment_free(chain_deployment *d);

#endif
