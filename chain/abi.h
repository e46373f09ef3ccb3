#ifndef OVT_CHAIN_ABI_H
#define OVT_CHAIN_ABI_H

/* Solidity ABI encoding and decoding for the types ovt's contract uses:
 * static words (uint, int, address, bool, bytes32), dynamic `bytes`/`string`
 * and dynamic `bytes32[]`; selectors and event topics; log data; revert data.
 *
 * Encoding: append arguments in order to a chain_abi_enc, then
 * chain_abi_enc_finish writes selector + head + tail into a chain_buf.
 * Decoding: a chain_abi_dec views a byte range (calldata without its
 * selector, return data, or log data); argument i is the i-th head word.
 * Every offset and length is bounds-checked; decoded byte ranges point into
 * the caller's data. */

#include "chain/types.h"
#include "common/bytes.h"

/* First four bytes of keccak256(signature), e.g. "commit(bytes32,uint64,bytes32)". */
void chain_abi_selector(uint8_t out[4], const char *signature);
/* topic0 of an event: keccak256 of its signature. */
void chain_abi_event_topic(ovt_hash *out, const char *signature);

typedef struct {
    chain_buf head;  /* one 32-byte word per argument */
    chain_buf tail;  /* dynamic data */
    size_t *dyn;     /* indexes of head words holding a tail offset */
    size_t ndyn, capdyn;
    int failed;
} chain_abi_enc;

void chain_abi_enc_init(chain_abi_enc *enc);
void chain_abi_enc_free(chain_abi_enc *enc);
void chain_abi_put_word(chain_abi_enc *enc, const uint8_t word[32]);
void chain_abi_put_uint(chain_abi_enc *enc, uint64_t v);
void chain_abi_put_u256(chain_abi_enc *enc, const chain_u256 *v);
void chain_abi_put_int(chain_abi_enc *enc, int64_t v); /* sign-extended */
void chain_abi_put_address(chain_abi_enc *enc, const chain_address *a);
void chain_abi_put_bool(chain_abi_enc *enc, int v);
void chain_abi_put_bytes32(chain_abi_enc *enc, const ovt_hash *h);
void chain_abi_put_bytes(chain_abi_enc *enc, const void *data, size_t len); /* bytes or string */
void chain_abi_put_bytes32_array(chain_abi_enc *enc, const ovt_hash *items, size_t n);
/* Appends selector (4 bytes, or NULL for none) + the encoding to out. */
int chain_abi_enc_finish(chain_abi_enc *enc, chain_buf *out, const uint8_t *selector) OVT_MUST_USE;
/* The same with the selector of signature ("accept(bytes32)"), then frees
 * enc: the calldata of a call. */
int chain_abi_enc_call(chain_abi_enc *enc, chain_buf *out, const char *signature) OVT_MUST_USE;
/* The calldata of a call whose one argument is a bytes32 (an id). */
int chain_abi_call_bytes32(chain_buf *out, const char *signature, const ovt_hash *arg) OVT_MUST_USE;

typedef struct {
    const uint8_t *data;
    size_t len;
} chain_abi_dec;

void chain_abi_dec_init(chain_abi_dec *dec, const void *data, size_t len);
int chain_abi_get_word(const chain_abi_dec *dec, size_t index, uint8_t out[32]) OVT_MUST_USE;
/* Fails if the word does not fit in 64 bits (uint) or int64 (int). */
int chain_abi_get_uint(const chain_abi_dec *dec, size_t index, uint64_t *out) OVT_MUST_USE;
int chain_abi_get_u256(const chain_abi_dec *dec, size_t index, chain_u256 *out) OVT_MUST_USE;
int chain_abi_get_int(const chain_abi_dec *dec, size_t index, int64_t *out) OVT_MUST_USE;
/* Fails unless the 12 high bytes are zero. */
int chain_abi_get_address(const chain_abi_dec *dec, size_t index, chain_address *out) OVT_MUST_USE;
/* Fails unless the word is 0 or 1. */
int chain_abi_get_bool(const chain_abi_dec *dec, size_t index, int *out) OVT_MUST_USE;
int chain_abi_get_bytes32(const chain_abi_dec *dec, size_t index, ovt_hash *out) OVT_MUST_USE;
/* A dynamic bytes/string argument: *data points into dec's data. */
int chain_abi_get_bytes(const chain_abi_dec *dec, size_t index, const uint8_t **data, size_t *len) OVT_MUST_USE;
/* A dynamic bytes32[] argument: *items points at n consecutive 32-byte words
 * inside dec's data. */
int chain_abi_get_bytes32_array(const chain_abi_dec *dec, size_t index, const uint8_t **items, size_t *n) OVT_MUST_USE;

/* An event log as eth_getLogs and receipts return it. */
typedef struct {
    chain_address address;
    ovt_hash topics[4];
    size_t ntopics;
    uint8_t *data; /* owned (malloc) */
    size_t data_len;
    uint64_t block_number;
    ovt_hash block_hash;
    ovt_hash tx_hash;
    uint64_t log_index;
    int removed;
} chain_log;

void chain_log_free(chain_log *log);
void chain_logs_free(chain_log *logs, size_t n);

/* Checks that log is the event `signature` (topic0 matches and it has
 * 1 + nindexed topics) and sets dec over its data (the non-indexed fields). */
int chain_abi_decode_log(chain_abi_dec *dec, const chain_log *log, const char *signature,
                         size_t nindexed) OVT_MUST_USE;

/* Turns revert data into a readable reason in out (cap bytes): Error(string)
 * gives its text, Panic(uint256) its code, a custom error the name of the
 * matching signature in custom_errors (NULL-terminated list, may be NULL) and
 * its argument words, anything else its selector. Never fails: malformed
 * data is described as such. */
void chain_abi_decode_revert(char *out, size_t cap, const uint8_t *data, size_t len,
                             const char *const *custom_errors);

/* The name (up to its '(') of the custom error in custom_errors (a
 * NULL-terminated list of signatures) whose selector starts data; "" when
 * none matches. */
void chain_abi_revert_name(char *out, size_t cap, const uint8_t *data, size_t len, const char *const *custom_errors);

#endif
