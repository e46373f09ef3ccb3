#ifndef OVT_CHAIN_KEYSTORE_H
#define OVT_CHAIN_KEYSTORE_H

/* Web3 Secret Storage v3 keystores, as geth and cast write them.
 *
 * Reading accepts the scrypt and pbkdf2 (hmac-sha256) KDFs with aes-128-ctr;
 * KDF parameters are bounded (scrypt n a power of two up to 2^20, at most
 * 1 GiB of memory; pbkdf2 at most 2^24 rounds) so a hostile file cannot make
 * the reader run for hours. A wrong password and a corrupted file both show
 * as a MAC mismatch (OVT_ECRYPTO). Writing uses scrypt, a fresh salt and IV
 * and a random UUID, and goes through ovt_write_atomic with mode 0600.
 * Passwords and derived keys are wiped after use and never printed. */

#include "chain/keys.h"

typedef struct {
    uint64_t n; /* power of two, >= 2 */
    uint32_t r;
    uint32_t p;
} chain_scrypt_params;

/* geth's "standard" parameters: n = 2^18, r = 8, p = 1 (256 MiB, ~1 s). */
extern const chain_scrypt_params chain_scrypt_standard;
/* geth's "light" parameters: n = 2^12, r = 8, p = 6. */
extern const chain_scrypt_params chain_scrypt_light;

/* Decrypts a keystore's JSON text. *address is the address of the decrypted
 * key (also checked against the file's "address" field when present). */
int chain_keystore_decrypt(chain_privkey *out, chain_address *address, const char *json, size_t len,
                           const char *password, size_t password_len) OVT_MUST_USE;

/* Reads and decrypts the keystore file at path. */
int chain_keystore_read(chain_privkey *out, chain_address *address, const char *path, const char *password,
                        size_t password_len) OVT_MUST_USE;

/* Encrypts key into a new keystore JSON text (*json malloc'd). params NULL:
 * chain_scrypt_standard. */
int chain_keystore_encrypt(char **json, const chain_privkey *key, const char *password, size_t password_len,
                           const chain_scrypt_params *params) OVT_MUST_USE;

/* Encrypts key and writes it to path atomically with mode 0600. */
int chain_keystore_write(const char *path, const chain_privkey *key, const char *password, size_t password_len,
                         const chain_scrypt_params *params) OVT_MUST_USE;

/* geth's file name for a key: "UTC--2026-01-02T03-04-05.000000000Z--<address hex>" (out: 128 bytes). */
void chain_keystore_filename(char *out, size_t cap, const chain_address *address);

#endif
