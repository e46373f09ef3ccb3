#ifndef OVT_CHAIN_TX_H
#define OVT_CHAIN_TX_H

/* Ethereum transactions: EIP-1559 (type 2) and legacy EIP-155. A chain_tx
 * holds the fields; chain_tx_sign produces the signed raw bytes that
 * eth_sendRawTransaction takes and the transaction hash nodes report.
 * Contract creation: has_to = 0 (the `to` field is encoded empty). */

#include "chain/keys.h"
#include "chain/types.h"

enum { CHAIN_TX_LEGACY = 0, CHAIN_TX_EIP1559 = 2 };

typedef struct {
    int type;             /* CHAIN_TX_EIP1559 or CHAIN_TX_LEGACY */
    uint64_t chain_id;    /* legacy: below 2^62 (v = 2*chain_id + 35 + recid) */
    uint64_t nonce;
    uint64_t max_priority_fee_per_gas; /* EIP-1559 */
    uint64_t max_fee_per_gas;          /* EIP-1559 */
    uint64_t gas_price;                /* legacy */
    uint64_t gas_limit;
    int has_to;           /* 0: contract creation */
    chain_address to;
    chain_u256 value;
    const uint8_t *data;  /* calldata or init code (borrowed) */
    size_t data_len;
} chain_tx;

/* The hash the sender signs: keccak(0x02 || rlp(fields)) for EIP-1559,
 * keccak(rlp(fields, chain_id, 0, 0)) for legacy EIP-155. */
int chain_tx_signing_hash(ovt_hash *out, const chain_tx *tx) OVT_MUST_USE;

/* Appends the signed encoding of tx with sig to raw. */
int chain_tx_encode_signed(chain_buf *raw, const chain_tx *tx, const chain_sig *sig) OVT_MUST_USE;

/* Signs tx with key: appends the signed raw bytes to raw and sets *tx_hash
 * (keccak of the raw bytes). */
int chain_tx_sign(chain_buf *raw, ovt_hash *tx_hash, const chain_tx *tx, const chain_privkey *key) OVT_MUST_USE;

/* Decodes signed raw bytes (either type) strictly, recovers the sender and
 * checks the signature. tx->data points into raw. */
int chain_tx_decode_signed(chain_tx *tx, chain_sig *sig, chain_address *sender, const uint8_t *raw,
                           size_t len) OVT_MUST_USE;

/* The address of the contract that account `from` creates with its
 * transaction of nonce `nonce` (CREATE): the last 20 bytes of
 * keccak256(rlp([from, nonce])). OVT_ENOMEM only. */
int chain_create_address(chain_address *out, const chain_address *from, uint64_t nonce) OVT_MUST_USE;

#endif
