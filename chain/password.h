#ifndef OVT_CHAIN_PASSWORD_H
#define OVT_CHAIN_PASSWORD_H

/* Getting a keystore password the way Foundry's tools do: from a file
 * (--password-file; one trailing newline removed), else from the environment
 * variable OVT_PASSWORD, else by prompting on the terminal without echo.
 * The buffer is the caller's; wipe it with ovt_wipe when done. */

#include <stddef.h>

#include "chain/keys.h"
#include "common/err.h"

#define CHAIN_PASSWORD_MAX 1024

/* confirm: prompt twice and require the same answer (for new keystores). */
int chain_password_get(char *buf, size_t cap, size_t *len, const char *password_file, int confirm) OVT_MUST_USE;

/* Unlocks a keystore file with a password obtained as above. */
int chain_unlock_keystore(chain_privkey *key, chain_address *address, const char *keystore_path,
                          const char *password_file) OVT_MUST_USE;

/* A sender's key from exactly one of a keystore (unlocked as above) and a
 * raw hex key (--private-key), as the commands that send transactions take
 * them. The key is never echoed in messages. */
int chain_load_key(chain_privkey *key, const char *keystore, const char *password_file,
                   const char *private_key) OVT_MUST_USE;

/* A new random key, written as a keystore (scrypt with N = scrypt_n, the
 * password obtained as above and asked twice): the new file `keystore`, or,
 * when keystore names a directory (one that exists, or a path ending in /;
 * created with mode 0700), a file in it named as geth names it
 * (chain_keystore_filename). path (cap bytes) gets the file's path. An
 * existing file is never overwritten. */
int chain_keystore_create(char *path, size_t cap, chain_address *address, const char *keystore,
                          const char *password_file, uint64_t scrypt_n) OVT_MUST_USE;

#endif
