#ifndef OVT_EXAMPLES_DEVNET_LEDGER_H
#define OVT_EXAMPLES_DEVNET_LEDGER_H

/* What the devnet's chain recorded: every transaction of a block range with
 * its sender (named as a party), the contract call it made and the gas it
 * used, read back from the node (eth_getBlockByNumber and receipts), so the
 * figures do not depend on what the parties report about themselves. */

#include <stddef.h>
#include <stdint.h>

#include "chain/rpc.h"
#include "chain/types.h"
#include "common/bytes.h"

typedef struct {
    ovt_hash hash;
    uint64_t block;
    const char *party; /* one of the names given, or "other" */
    const char *call;  /* "deploy", "open", "commit", ... or "other" */
    uint64_t gas_used;
    int status;        /* 1 success, 0 reverted */
} devnet_tx;

typedef struct {
    devnet_tx *tx;
    size_t n;
} devnet_ledger;

/* The parties: address i is called names[i]. */
typedef struct {
    const chain_address *addrs;
    const char *const *names;
    size_t n;
} devnet_parties;

/* Reads every transaction in blocks [from, to]. */
int devnet_ledger_read(devnet_ledger *out, chain_rpc *rpc, uint64_t from, uint64_t to,
                       const devnet_parties *parties) OVT_MUST_USE;
void devnet_ledger_free(devnet_ledger *l);

/* Gas used by the transactions one party sent (party compared by pointer
 * identity with the names given, or by strcmp). */
uint64_t devnet_ledger_gas(const devnet_ledger *l, const char *party);

/* The contract function a calldata selector names ("other" if none). */
const char *devnet_call_name(const uint8_t *input, size_t len, int creates);

#endif
