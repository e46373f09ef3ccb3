#ifndef OVT_CHAIN_KEYS_H
#define OVT_CHAIN_KEYS_H

/* secp256k1 keys, Ethereum addresses and recoverable signatures (through
 * libsecp256k1 with its recovery module). A private key is a secret: wipe it
 * with ovt_wipe when done; no function here prints or logs one. Signing is
 * constant-time (libsecp256k1); address formatting and parsing are not, and
 * deal with public data only. */

#include "chain/types.h"
#include "common/bytes.h"

typedef struct {
    uint8_t b[32];
} chain_privkey;

/* A recoverable ECDSA signature: r, s (low-s) and the recovery id (0 or 1). */
typedef struct {
    uint8_t r[32];
    uint8_t s[32];
    uint8_t recid;
} chain_sig;

/* A fresh random key from the OS random source (OpenSSL RAND_bytes). */
int chain_key_generate(chain_privkey *out) OVT_MUST_USE;
/* Parses 64 hex digits (optional 0x); fails if not a valid secp256k1 key.
 * The error message never repeats the input. */
int chain_key_from_hex(chain_privkey *out, const char *hex) OVT_MUST_USE;
/* The address of a private key: last 20 bytes of keccak(pubkey x || y). */
int chain_key_address(chain_address *out, const chain_privkey *key) OVT_MUST_USE;

/* Signs a 32-byte hash (no further hashing). */
int chain_sign_hash(chain_sig *out, const chain_privkey *key, const ovt_hash *hash) OVT_MUST_USE;
/* Recovers the signer's address from a hash and signature; fails
 * (OVT_ECRYPTO) on an invalid signature. High-s signatures are rejected. */
int chain_recover_address(chain_address *out, const chain_sig *sig, const ovt_hash *hash) OVT_MUST_USE;

/* The 65-byte r || s || v form with v = 27 + recid (what personal_sign,
 * EIP-712 signers and ecrecover use). */
void chain_sig_to_rsv(uint8_t out[65], const chain_sig *sig);
/* Accepts v in {0, 1, 27, 28}. */
int chain_sig_from_rsv(chain_sig *out, const uint8_t in[65]) OVT_MUST_USE;

/* EIP-55 mixed-case checksummed "0x..." form (out: 43 bytes). */
void chain_address_to_string(char *out, const chain_address *a);
/* Parses "0x" + 40 hex digits. All-lower or all-upper case is accepted as is;
 * mixed case must be a correct EIP-55 checksum. */
int chain_address_from_string(chain_address *out, const char *s) OVT_MUST_USE;
int chain_address_eq(const chain_address *a, const chain_address *b);

/* EIP-191 personal_sign: keccak256("\x19Ethereum Signed Message:\n" || len || msg). */
void chain_personal_hash(ovt_hash *out, const void *msg, size_t len);
int chain_personal_sign(chain_sig *out, const chain_privkey *key, const void *msg, size_t len) OVT_MUST_USE;

#endif
