#ifndef OVT_CHAIN_RPC_H
#define OVT_CHAIN_RPC_H

/* JSON-RPC client for an Ethereum node over HTTP (libcurl + jansson).
 *
 * One chain_rpc is one connection to one node; use it from one thread at a
 * time. Each request has a timeout; transport failures (no connection, reset,
 * timeout, truncated body) and HTTP 429/502/503/504 are retried with exponential
 * backoff a bounded number of times. Everything else fails at once with a
 * clear message: HTTP errors with their status, JSON-RPC error objects with
 * the node's code and message, reverts (code 3 or a message with
 * "revert" and hex data) as OVT_EREVERT with the decoded reason. Responses
 * are checked for shape and size; numbers must be canonical hex quantities
 * that fit their type. The URL's path and query (where providers put API
 * keys) never appear in messages. */

#include <jansson.h>

#include "chain/abi.h"
#include "chain/types.h"
#include "common/bytes.h"

typedef struct chain_rpc chain_rpc;

typedef struct {
    long timeout_ms;         /* whole request, default 15000 */
    long connect_timeout_ms; /* default 3000 */
    int max_retries;         /* transport errors and HTTP 429/502/503/504, default 3 */
    long backoff_ms;         /* first wait, doubled each retry, default 100 */
    long backoff_max_ms;     /* default 2000 */
    size_t max_response;     /* bytes, default 64 MiB */
    const char *const *custom_errors; /* error signatures for revert reasons (NULL-terminated), may be NULL */
} chain_rpc_opts;

void chain_rpc_opts_default(chain_rpc_opts *opts);

/* Opens a client for url (http:// or https://); opts may be NULL for the
 * defaults. Nothing is sent until the first call. */
int chain_rpc_open(chain_rpc **out, const char *url, const chain_rpc_opts *opts) OVT_MUST_USE;
void chain_rpc_close(chain_rpc *rpc);

/* What the node said in its last error object (valid until the next call). */
typedef struct {
    int is_node_error;  /* 1 if the last failure was a JSON-RPC error object */
    long long code;
    char message[256];
    uint8_t *data;      /* revert data, when the error carried hex data */
    size_t data_len;
} chain_rpc_error;

const chain_rpc_error *chain_rpc_last_error(const chain_rpc *rpc);

/* Calls method with params (a JSON array; this call takes the reference, so
 * pass json_pack("[...]") directly; NULL means []). On success *result is a
 * new reference the caller json_decref's (JSON null is returned as json_null()). */
int chain_rpc_call(chain_rpc *rpc, json_t **result, const char *method, json_t *params) OVT_MUST_USE;

/* The response parser chain_rpc_call uses, exposed for tests and fuzzing:
 * parses body (len bytes) as the response to request id. err may be NULL. */
int chain_rpc_parse_response(json_t **result, chain_rpc_error *err, const char *body, size_t len,
                             long long id, const char *const *custom_errors) OVT_MUST_USE;
void chain_rpc_error_clear(chain_rpc_error *err);

/* Hex quantities ("0x1a"): "0x" then 1 to 16 (u64) or 64 (u256) hex digits;
 * no sign, no spaces, no empty "0x". Leading zeros are accepted. */
int chain_hexq_u64(uint64_t *out, const char *s) OVT_MUST_USE;
int chain_hexq_u256(chain_u256 *out, const char *s) OVT_MUST_USE;
/* JSON helpers: field key of object obj as quantity / data / address / hash. */
int chain_json_u64(uint64_t *out, const json_t *obj, const char *key) OVT_MUST_USE;
int chain_json_hash(ovt_hash *out, const json_t *obj, const char *key) OVT_MUST_USE;
int chain_json_address(chain_address *out, const json_t *obj, const char *key) OVT_MUST_USE;
/* A log object as eth_getLogs and receipts return it (out->data malloc'd). */
int chain_json_log(chain_log *out, const json_t *obj) OVT_MUST_USE;

/* Typed helpers. `block` is "latest", "pending", "safe", "finalized" or a
 * hex quantity; NULL means "latest". */
int chain_rpc_chain_id(chain_rpc *rpc, uint64_t *out) OVT_MUST_USE;
int chain_rpc_block_number(chain_rpc *rpc, uint64_t *out) OVT_MUST_USE;
int chain_rpc_nonce(chain_rpc *rpc, uint64_t *out, const chain_address *addr, const char *block) OVT_MUST_USE;
int chain_rpc_balance(chain_rpc *rpc, chain_u256 *out, const chain_address *addr, const char *block) OVT_MUST_USE;
int chain_rpc_max_priority_fee(chain_rpc *rpc, uint64_t *out) OVT_MUST_USE;

/* Base fee of the next block and the median of the given reward percentile
 * over the last `blocks` blocks (0 when the node reports no rewards). */
int chain_rpc_fee_history(chain_rpc *rpc, uint64_t *next_base_fee, uint64_t *priority_fee,
                          unsigned blocks, double percentile) OVT_MUST_USE;

/* The parts of a block header a watcher needs: its number and hash (to
 * notice reorgs: compare parent_hash with the hash seen before), timestamp
 * (contract deadlines) and base fee (0 before London). */
typedef struct {
    uint64_t number;
    ovt_hash hash;
    ovt_hash parent_hash;
    uint64_t timestamp;
    uint64_t base_fee;
    int has_base_fee; /* the block has baseFeePerGas (EIP-1559) */
} chain_block_header;

/* eth_getBlockByNumber(block, false). block as above; *found = 0 when the
 * node has no such block (yet). */
int chain_rpc_block_header(chain_rpc *rpc, chain_block_header *out, int *found, const char *block) OVT_MUST_USE;

/* A message for eth_call / eth_estimateGas. */
typedef struct {
    const chain_address *from; /* NULL: omitted */
    const chain_address *to;   /* NULL: contract creation */
    const chain_u256 *value;   /* NULL: omitted */
    const uint8_t *data;
    size_t data_len;
    uint64_t gas;              /* 0: omitted */
} chain_call_msg;

/* eth_call; appends the return data to out. A revert is OVT_EREVERT with
 * the reason in the message. */
int chain_rpc_eth_call(chain_rpc *rpc, chain_buf *out, const chain_call_msg *msg, const char *block) OVT_MUST_USE;
int chain_rpc_estimate_gas(chain_rpc *rpc, uint64_t *gas, const chain_call_msg *msg) OVT_MUST_USE;
int chain_rpc_send_raw(chain_rpc *rpc, ovt_hash *tx_hash, const uint8_t *raw, size_t len) OVT_MUST_USE;

typedef struct {
    ovt_hash tx_hash;
    ovt_hash block_hash;
    uint64_t block_number;
    int status;              /* 1 success, 0 reverted */
    uint64_t gas_used;
    uint64_t effective_gas_price;
    chain_address from;
    int has_contract_address;
    chain_address contract_address;
    chain_log *logs;         /* owned */
    size_t nlogs;
} chain_receipt;

void chain_receipt_free(chain_receipt *r);

/* eth_getTransactionReceipt: *found = 0 (and out zeroed) while not mined. */
int chain_rpc_receipt(chain_rpc *rpc, chain_receipt *out, int *found, const ovt_hash *tx_hash) OVT_MUST_USE;

typedef struct {
    const chain_address *address;  /* NULL: any */
    const ovt_hash *topics[4];     /* topics[i] NULL: any value at position i */
    size_t ntopics;
    uint64_t from_block, to_block; /* inclusive */
    uint64_t chunk;                /* first range size, default (0) 2000 blocks */
    uint64_t *chunk_taken;         /* not NULL: set, on success, to the range size the node last took (below
                                      chunk when it refused wider ones) */
} chain_log_filter;

/* eth_getLogs over [from_block, to_block] in chunks; a chunk the node
 * refuses (an error object) is halved and retried, down to one block, and
 * the smaller size kept for the rest of the range.
 * *logs is malloc'd (chain_logs_free), in the node's order. */
int chain_rpc_get_logs(chain_rpc *rpc, chain_log **logs, size_t *n, const chain_log_filter *f) OVT_MUST_USE;

/* A watcher's poll: the logs matching f (address, topics; its block range
 * is ignored) from block *cursor up to the newest block that has
 * `confirmations` confirmations (1 = the head itself), then *cursor moves
 * past that block. Nothing new confirmed: 0 with *n = 0 and *cursor as it
 * was. On failure *cursor is unchanged, so the poll can simply be repeated.
 * Keep *cursor on disk to resume after a restart. */
int chain_rpc_poll_logs(chain_rpc *rpc, chain_log **logs, size_t *n, const chain_log_filter *f, uint64_t *cursor,
                        unsigned confirmations) OVT_MUST_USE;

#endif
