#ifndef OVT_CHAIN_DEPLOY_H
#define OVT_CHAIN_DEPLOY_H

/* A deployment of the arbitration contract (`ovt deploy`) and, unless
 * `alone`, of the narrowing contract (OvtNarrow) bound to it, with its
 * record. The pair's nonces are fixed before anything is sent: the
 * arbitration contract at the deployer's next nonce N, constructed with the
 * address OvtNarrow gets at N + 1, then OvtNarrow at N + 1 (docs/contract.md,
 * "Narrowing a step"). With a record file, the plan and every version of
 * each creation transaction are written there (temp + fsync + rename)
 * before the node sees it, and the finished deployment after: run again
 * with the same file, chain_deploy finishes that deployment (sending
 * OvtNarrow at N + 1 if the run stopped between the two) instead of making
 * another, or reports a finished one again (docs/chain-client.md). When
 * another transaction of the account took N + 1, no OvtNarrow can ever be
 * bound to that arbitration contract: it fails and says to deploy again. */

#include "chain/arbitration.h"

typedef struct {
    const char *rpc_url;
    const char *keystore;      /* exactly one of keystore and private_key (chain_load_key) */
    const char *password_file;
    const char *private_key;
    chain_txm_opts txm;        /* confirmations and fee caps */
    const char *record;        /* the record file (--out), or NULL */
    int alone;                 /* 1: the arbitration contract alone, bound to no narrowing (--no-narrow) */
} chain_deploy_opts;

typedef struct {
    chain_address address;     /* the arbitration contract */
    uint64_t chain_id;
    chain_address deployer;
    uint64_t nonce;            /* the arbitration contract's creation nonce */
    chain_receipt receipt;     /* its creation transaction's */
    int has_narrow;            /* 0: deployed alone, the fields below are zero */
    chain_address narrow;      /* OvtNarrow, bound to address */
    uint64_t narrow_nonce;
    chain_receipt narrow_receipt;
} chain_deployment;

/* Unlocks the key, deploys (or finishes or reports the deployment the
 * record names) and checks that the contracts are there. On failure *out
 * holds nothing to free. */
int chain_deploy(const chain_deploy_opts *o, chain_deployment *out) OVT_MUST_USE;
void chain_deployment_free(chain_deployment *d);

/* What `ovt deploy --json` prints: address, chain_id, deployer, tx_hash,
 * block_number, gas_used and, for a pair, narrow: {address, tx_hash,
 * block_number, gas_used}; with_nonce adds each contract's nonce (the
 * record). NULL when out of memory. */
json_t *chain_deployment_json(const chain_deployment *d, int with_nonce);

#endif
