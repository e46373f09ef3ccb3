#ifndef OVT_CHAIN_TXM_H
#define OVT_CHAIN_TXM_H

/* The transaction manager: the one component that owns an account's key,
 * its nonces and its fees. A send goes:
 *   eth_call first (a revert becomes OVT_EREVERT with the reason, nothing is
 *   sent) -> eth_estimateGas plus a margin -> fees (EIP-1559 from
 *   eth_feeHistory and eth_maxPriorityFeePerGas; a legacy EIP-155 gas price
 *   from eth_gasPrice on a node without EIP-1559: no baseFeePerGas in the
 *   latest block or no eth_feeHistory) -> nonce from the `pending` count ->
 *   sign and send -> wait until it is mined, then confirmed.
 *
 * A transaction is sent, then mined, then confirmed. Only an unmined one is
 * replaced (same nonce, both fees raised by at least 12.5%, never above the
 * caps); once any version has a receipt it is only waited on. Whenever a send
 * fails (refused, or the answer lost) the manager looks at the chain instead
 * of trusting the wording: the receipts of every version sent for the nonce,
 * whether the node holds the transaction, the account's `latest` nonce. The
 * wording ("already known", "known transaction", "nonce too low", "the tx
 * doesn't have the correct nonce", "underpriced") is only a hint.
 *
 * Waits follow the chain rather than a fixed clock: a mined transaction waits
 * for its confirmations as long as blocks keep coming (it fails when the node
 * produced no block for max(60 s, 10 block intervals)); an unmined one is
 * bumped every max(bump_after_ms, 3 block intervals) up to max_bumps times
 * (or until a cap stops it) and given up after 3 more such periods. The block
 * interval is measured from the timestamps of the last blocks. A transaction
 * mined with status 0 is OVT_EREVERT, with the reason from replaying it with
 * eth_call at its block. */

#include "chain/keys.h"
#include "chain/rpc.h"
#include "chain/tx.h"

typedef struct {
    unsigned confirmations;    /* blocks including the receipt's, default 1 */
    long receipt_timeout_ms;   /* hard bound on one wait; default 0: follow the chain (see above) */
    long poll_ms;              /* default 250 */
    long bump_after_ms;        /* replace if unmined this long (at least 3 block intervals), default
                                  20000; 0 never */
    unsigned max_bumps;        /* default 5 */
    unsigned gas_margin_pct;   /* added to eth_estimateGas, default 25 */
    uint64_t max_fee_cap;      /* wei per gas never exceeded (max fee, or gas price); 0: no cap */
    uint64_t max_tip_cap;      /* priority fee never exceeded, wei per gas; 0: no cap */
    uint64_t min_priority_fee; /* floor for the tip, wei; default 0 */
    long min_stall_ms;         /* a node without a new block this long (at least 10 block
                                  intervals) is stalled; default 60000 */
} chain_txm_opts;

void chain_txm_opts_default(chain_txm_opts *opts);

typedef struct {
    chain_rpc *rpc;            /* borrowed */
    chain_privkey key;         /* wiped by chain_txm_free */
    chain_address from;
    uint64_t chain_id;
    chain_txm_opts opts;
    uint64_t next_nonce;       /* lowest nonce not yet used by this manager */
    int legacy;                /* -1 not yet known, 0 EIP-1559, 1 legacy gas price (type 0) */
    long block_interval_ms;    /* measured at the first wait; 0 not yet */
    /* Called with each signed version just before it is sent (for a
     * command's journal); may be NULL. */
    void (*on_send)(void *ctx, const chain_tx *tx, const ovt_hash *hash);
    void *on_send_ctx;
    unsigned sends;            /* versions handed to the node so far */
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
    int capped;                /* a replacement would have exceeded a fee cap: no more bumps */
    char cap_note[160];        /* what the cap stopped */
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
 * to opts.max_bumps in all. A refused replacement is looked into: when an
 * earlier version was mined it returns 0 and the wait finds it. A raise the
 * caps do not allow sends nothing: p->capped is set (p->cap_note says why)
 * and 0 is returned, the wait then only waits. On failure p keeps the last
 * version the node accepted. */
int chain_txm_bump(chain_txm *m, chain_txm_pending *p) OVT_MUST_USE;

/* Waits for any version's receipt and the confirmations, bumping while no
 * version is mined. *out is filled (caller frees) when a receipt was found,
 * also on revert. After a failure (node unreachable, timeout) it may be
 * called again: it never sends anything except fee bumps. */
int chain_txm_wait(chain_txm *m, chain_txm_pending *p, chain_receipt *out) OVT_MUST_USE;

/* Waits for the receipt of a transaction sent earlier (by hash, e.g. found
 * in a command's journal or an event) and its confirmations; nothing is sent.
 * OVT_ENOTFOUND when the node knows no such transaction. */
int chain_txm_wait_hash(chain_txm *m, const ovt_hash *hash, chain_receipt *out) OVT_MUST_USE;

/* Waits until every transaction this account has pending at the node is
 * mined (the `latest` nonce reaches the `pending` one), so what an earlier,
 * interrupted run sent has landed before a command looks at the chain.
 * Bounded like an unmined wait. */
int chain_txm_settle(chain_txm *m) OVT_MUST_USE;

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
