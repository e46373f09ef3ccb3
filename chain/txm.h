#ifndef OVT_CHAIN_TXM_H
#define OVT_CHAIN_TXM_H

/* The transaction manager: the one component that owns an account's key,
 * its nonces and its fees. A send goes:
 *   eth_call first (a revert becomes OVT_EREVERT with the reason, nothing is
 *   sent) -> eth_estimateGas plus a margin -> fees from eth_feeHistory and
 *   eth_maxPriorityFeePerGas -> nonce from the `pending` count -> sign and
 *   send an EIP-1559 transaction -> poll for the receipt and N confirmations.
 * A transaction still unmined after bump_after_ms is replaced (same nonce)
 * with both fees raised by at least 12.5%. "already known" counts as sent;
 * so does "nonce too low" when the node has this very transaction (an
 * earlier attempt whose answer was lost); otherwise "nonce too low" on a
 * replacement means an earlier version was mined, and on a first send
 * re-reads the nonce. Waits are bounded (OVT_ETIMEOUT); a node
 * that stops answering during a wait is a clear OVT_EIO/OVT_ETIMEOUT error.
 * A transaction mined with status 0 is OVT_EREVERT, with the reason from
 * replaying it with eth_call at its block. */

#include "chain/keys.h"
#include "chain/rpc.h"
#include "chain/tx.h"

typedef struct {
    unsigned confirmations;    /* blocks including the receipt's, default 1 */
    long receipt_timeout_ms;   /* whole wait, default 120000 */
    long poll_ms;              /* default 250 */
    long bump_after_ms;        /* replace if unmined this long, default 20000; 0 never */
    unsigned max_bumps;        /* default 5 */
    unsigned gas_margin_pct;   /* added to eth_estimateGas, default 25 */
    uint64_t max_fee_cap;      /* wei per gas never exceeded; 0: no cap */
    uint64_t min_priority_fee; /* floor for the tip, wei; default 0 */
} chain_txm_opts;

void chain_txm_opts_default(chain_txm_opts *opts);

typedef struct {
    chain_rpc *rpc;            /* borrowed */
    chain_privkey key;         /* wiped by chain_txm_free */
    chain_address from;
    uint64_t chain_id;
    chain_txm_opts opts;
    uint64_t next_nonce;       /* lowest nonce not yet used by this manager */
} chain_txm;

/* Reads the chain id from the node. key is copied. opts may be NULL. */
int chain_txm_init(chain_txm *m, chain_rpc *rpc, const chain_privkey *key, const chain_txm_opts *opts) OVT_MUST_USE;
void chain_txm_free(chain_txm *m);

#define CHAIN_TXM_MAX_VERSIONS 16

/* A transaction in flight: its fields (data owned) and the hash of every
 * version sent with this nonce. */
typedef struct {
    chain_tx tx;
    uint8_t *data;
    ovt_hash hashes[CHAIN_TXM_MAX_VERSIONS];
    size_t nversions;
    unsigned bumps;
    long long last_send_ms;
} chain_txm_pending;

void chain_txm_pending_free(chain_txm_pending *p);

/* Checks the call with eth_call, estimates gas, picks fees and a nonce; fills
 * p (nothing sent). to NULL: contract creation; value NULL: 0. */
int chain_txm_prepare(chain_txm *m, chain_txm_pending *p, const chain_address *to, const chain_u256 *value,
                      const uint8_t *data, size_t len) OVT_MUST_USE;

/* Signs and sends p's current version. */
int chain_txm_submit(chain_txm *m, chain_txm_pending *p) OVT_MUST_USE;

/* Raises both fees by at least 12.5% (and to the current market) and sends
 * the replacement; a node that calls it underpriced gets another raise, up
 * to opts.max_bumps in all. A "nonce too low" answer means an earlier
 * version was mined: returns 0 and the wait finds it. On failure p keeps the
 * last version the node accepted. */
int chain_txm_bump(chain_txm *m, chain_txm_pending *p) OVT_MUST_USE;

/* Waits for any version's receipt and the confirmations, bumping when due.
 * *out is filled (caller frees) when a receipt was found, also on revert.
 * After a failure (node unreachable, timeout) it may be called again: it
 * never sends anything except fee bumps. */
int chain_txm_wait(chain_txm *m, chain_txm_pending *p, chain_receipt *out) OVT_MUST_USE;

/* prepare + submit + wait. */
int chain_txm_send(chain_txm *m, chain_receipt *out, const chain_address *to, const chain_u256 *value,
                   const uint8_t *data, size_t len) OVT_MUST_USE;

/* chain_txm_send with extra_gas added to the gas limit after the margin: for a
 * call whose cost depends on what lands before it (eth_estimateGas prices the
 * chain as it is now; the other party's move mined first can make the same call
 * take a costlier path). Unused gas is not paid for. */
int chain_txm_send_extra(chain_txm *m, chain_receipt *out, const chain_address *to, const chain_u256 *value,
                         const uint8_t *data, size_t len, uint64_t extra_gas) OVT_MUST_USE;

#endif
