/* Web3 Secret Storage v3 (see keystore.h): KDF with OpenSSL (EVP_PBE_scrypt,
 * PKCS5_PBKDF2_HMAC), aes-128-ctr with EVP, MAC keccak256(DK[16..31] || ct). */
#include "chain/keystore.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "chain/keccak.h"
#include "common/fileio.h"

const chain_scrypt_params chain_scrypt_standard = {1u << 18, 8, 1};
const chain_scrypt_params chain_scrypt_light = {1u << 12, 8, 6};

#define SCRYPT_MAX_N (1u << 20)
#define SCRYPT_MAX_MEM (1ull << 30)
#define PBKDF2_MAX_C (1u << 24)

static int scrypt_check(const chain_scrypt_params *sp, uint64_t *maxmem)
{
    if (sp->n < 2 || (sp->n & (sp->n - 1)) != 0 || sp->n > SCRYPT_MAX_N)
        return ovt_fail(OVT_EFORMAT, "keystore: scrypt n=%llu is not a power of two in 2..2^20",
                        (unsigned long long)sp->n);
    if (sp->r == 0 || sp->p == 0 || (uint64_t)sp->r * sp->p > 1024)
        return ovt_fail(OVT_EFORMAT, "keystore: scrypt r=%u p=%u out of range", sp->r, sp->p);
    /* OpenSSL needs about 128*r*(n + p + 2) bytes; its default cap is 32 MiB,
     * too small for geth's standard parameters, so the cap is passed here. */
    uint64_t need = 128ull * sp->r * (sp->n + sp->p + 2) + (1u << 20);
    if (need > SCRYPT_MAX_MEM)
        return ovt_fail(OVT_EFORMAT, "keystore: scrypt parameters need %llu MiB (limit 1024)",
                        (unsigned long long)(need >> 20));
    *maxmem = need;
    return 0;
}

static int derive_scrypt(uint8_t dk[32], const char *pw, size_t pwlen, const uint8_t *salt, size_t saltlen,
                         const chain_scrypt_params *sp)
{
    uint64_t maxmem = 0;
    int rc = scrypt_check(sp, &maxmem);
    if (rc)
        return rc;
    if (EVP_PBE_scrypt(pw, pwlen, salt, saltlen, sp->n, sp->r, sp->p, maxmem, dk, 32) != 1)
        return ovt_fail(OVT_ECRYPTO, "keystore: scrypt failed (n=%llu r=%u p=%u)", (unsigned long long)sp->n,
                        sp->r, sp->p);
    return 0;
}

/* AES-128-CTR with key dk[0..15]; encryption and decryption are the same. */
static int aes128ctr(uint8_t *out, const uint8_t *in, size_t len, const uint8_t key[16], const uint8_t iv[16])
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int outl = 0, fin = 0, ok = c && EVP_EncryptInit_ex(c, EVP_aes_128_ctr(), NULL, key, iv) == 1 &&
                                EVP_EncryptUpdate(c, out, &outl, in, (int)len) == 1 &&
                                EVP_EncryptFinal_ex(c, out + outl, &fin) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : ovt_fail(OVT_ECRYPTO, "keystore: AES-128-CTR failed");
}

static void keystore_mac(ovt_hash *mac, const uint8_t dk[32], const uint8_t *ct, size_t len)
{
    chain_keccak_ctx k;
    chain_keccak_init(&k);
    chain_keccak_update(&k, dk + 16, 16);
    chain_keccak_update(&k, ct, len);
    chain_keccak_final(&k, mac);
}

static int hex_field(uint8_t *out, size_t len, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || ovt_hex_decode(out, len, json_string_value(v)) != 0)
        return ovt_fail(OVT_EFORMAT, "keystore: %s is not %zu bytes of hex", key, len);
    return 0;
}

static int uint_field(uint64_t *out, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return ovt_fail(OVT_EFORMAT, "keystore: kdfparams.%s is not a non-negative integer", key);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* Derives the 32-byte key from kdf / kdfparams. */
static int derive(uint8_t dk[32], const json_t *crypto, const char *pw, size_t pwlen)
{
    const char *kdf = json_string_value(json_object_get(crypto, "kdf"));
    json_t *kp = json_object_get(crypto, "kdfparams");
    if (!kdf || !json_is_object(kp))
        return ovt_fail(OVT_EFORMAT, "keystore: kdf or kdfparams missing");
    uint64_t dklen;
    int rc = uint_field(&dklen, kp, "dklen");
    if (rc)
        return rc;
    if (dklen != 32)
        return ovt_fail(OVT_EFORMAT, "keystore: dklen %llu is not 32", (unsigned long long)dklen);
    json_t *salt_j = json_object_get(kp, "salt");
    uint8_t *salt = NULL;
    size_t saltlen = 0;
    if (!json_is_string(salt_j) || ovt_hex_decode_alloc(&salt, &saltlen, json_string_value(salt_j)) != 0 ||
        saltlen > 1024) {
        free(salt);
        return ovt_fail(OVT_EFORMAT, "keystore: kdfparams.salt is not hex (at most 1024 bytes)");
    }
    if (strcmp(kdf, "scrypt") == 0) {
        uint64_t n, r, p;
        if ((rc = uint_field(&n, kp, "n")) || (rc = uint_field(&r, kp, "r")) || (rc = uint_field(&p, kp, "p")))
            goto done;
        if (r > UINT32_MAX || p > UINT32_MAX) {
            rc = ovt_fail(OVT_EFORMAT, "keystore: scrypt r or p out of range");
            goto done;
        }
        chain_scrypt_params sp = {n, (uint32_t)r, (uint32_t)p};
        rc = derive_scrypt(dk, pw, pwlen, salt, saltlen, &sp);
    } else if (strcmp(kdf, "pbkdf2") == 0) {
        uint64_t c;
        const char *prf = json_string_value(json_object_get(kp, "prf"));
        if ((rc = uint_field(&c, kp, "c")))
            goto done;
        if (!prf || strcmp(prf, "hmac-sha256") != 0) {
            rc = ovt_fail(OVT_EFORMAT, "keystore: pbkdf2 prf must be hmac-sha256");
        } else if (c == 0 || c > PBKDF2_MAX_C) {
            rc = ovt_fail(OVT_EFORMAT, "keystore: pbkdf2 c=%llu not in 1..2^24", (unsigned long long)c);
        } else if (PKCS5_PBKDF2_HMAC(pw, (int)pwlen, salt, (int)saltlen, (int)c, EVP_sha256(), 32, dk) != 1) {
            rc = ovt_fail(OVT_ECRYPTO, "keystore: pbkdf2 failed");
        }
    } else {
        rc = ovt_fail(OVT_EFORMAT, "keystore: unsupported kdf '%.20s' (scrypt or pbkdf2)", kdf);
    }
done:
    free(salt);
    return rc;
}

int chain_keystore_decrypt(chain_privkey *out, chain_address *address, const char *json, size_t len,
                           const char *password, size_t password_len)
{
    memset(out, 0, sizeof *out);
    memset(address, 0, sizeof *address);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ovt_fail(OVT_EFORMAT, "keystore: invalid JSON (%s, line %d)", jerr.text, jerr.line);
    uint8_t dk[32], iv[16], ct[32], plain[32];
    ovt_hash mac, want;
    size_t ctlen = 0;
    uint8_t *ctp = NULL;
    int rc;
    json_t *version = json_object_get(root, "version");
    json_t *crypto = json_object_get(root, "crypto");
    if (!crypto)
        crypto = json_object_get(root, "Crypto");
    if (!json_is_integer(version) || json_integer_value(version) != 3) {
        rc = ovt_fail(OVT_EFORMAT, "keystore: not a version 3 keystore");
        goto done;
    }
    if (!json_is_object(crypto)) {
        rc = ovt_fail(OVT_EFORMAT, "keystore: crypto section missing");
        goto done;
    }
    const char *cipher = json_string_value(json_object_get(crypto, "cipher"));
    if (!cipher || strcmp(cipher, "aes-128-ctr") != 0) {
        rc = ovt_fail(OVT_EFORMAT, "keystore: cipher must be aes-128-ctr");
        goto done;
    }
    json_t *ctj = json_object_get(crypto, "ciphertext");
    if ((rc = hex_field(iv, 16, json_object_get(crypto, "cipherparams"), "iv")) ||
        (rc = hex_field(want.b, 32, crypto, "mac")))
        goto done;
    if (!json_is_string(ctj) || ovt_hex_decode_alloc(&ctp, &ctlen, json_string_value(ctj)) != 0 ||
        ctlen != 32) {
        rc = ovt_fail(OVT_EFORMAT, "keystore: ciphertext is not 32 bytes of hex");
        goto done;
    }
    memcpy(ct, ctp, ctlen);
    if ((rc = derive(dk, crypto, password, password_len)))
        goto done;
    keystore_mac(&mac, dk, ct, ctlen);
    if (CRYPTO_memcmp(mac.b, want.b, 32) != 0) {
        rc = ovt_fail(OVT_ECRYPTO, "keystore: MAC mismatch: wrong password or corrupted file");
        goto done;
    }
    if ((rc = aes128ctr(plain, ct, ctlen, dk, iv)))
        goto done;
    memcpy(out->b, plain, 32);
    if ((rc = chain_key_address(address, out)))
        goto done;
    json_t *addr_j = json_object_get(root, "address");
    if (json_is_string(addr_j)) {
        chain_address stated;
        if (ovt_hex_decode(stated.b, 20, json_string_value(addr_j)) != 0 || !chain_address_eq(&stated, address)) {
            rc = ovt_fail(OVT_ECRYPTO, "keystore: the decrypted key does not match the file's address");
            goto done;
        }
    }
done:
    if (rc) {
        ovt_wipe(out, sizeof *out);
        memset(address, 0, sizeof *address);
    }
    ovt_wipe(dk, sizeof dk);
    ovt_wipe(plain, sizeof plain);
    free(ctp);
    json_decref(root);
    return rc;
}

int chain_keystore_read(chain_privkey *out, chain_address *address, const char *path, const char *password,
                        size_t password_len)
{
    uint8_t *data;
    size_t len;
    memset(out, 0, sizeof *out);
    memset(address, 0, sizeof *address);
    int rc = ovt_read_file(path, &data, &len, 1 << 16);
    if (rc)
        return rc;
    rc = chain_keystore_decrypt(out, address, (const char *)data, len, password, password_len);
    free(data);
    return rc ? ovt_fail_wrap(rc, "%s", path) : 0;
}

int chain_keystore_encrypt(char **json, const chain_privkey *key, const char *password, size_t password_len,
                           const chain_scrypt_params *params)
{
    *json = NULL;
    if (!params)
        params = &chain_scrypt_standard;
    uint8_t salt[32], iv[16], uuid[16], dk[32], ct[32];
    chain_address addr;
    int rc = chain_key_address(&addr, key);
    if (rc)
        return rc;
    if (RAND_bytes(salt, sizeof salt) != 1 || RAND_bytes(iv, sizeof iv) != 1 || RAND_bytes(uuid, sizeof uuid) != 1)
        return ovt_fail(OVT_ECRYPTO, "the OS random source failed");
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80); /* variant 1 */
    if ((rc = derive_scrypt(dk, password, password_len, salt, sizeof salt, params)) ||
        (rc = aes128ctr(ct, key->b, 32, dk, iv))) {
        ovt_wipe(dk, sizeof dk);
        return rc;
    }
    ovt_hash mac;
    keystore_mac(&mac, dk, ct, 32);
    ovt_wipe(dk, sizeof dk);
    char salt_s[65], iv_s[33], ct_s[65], mac_s[65], addr_s[41], u[33], id[37];
    ovt_hex_encode(salt_s, salt, 32);
    ovt_hex_encode(iv_s, iv, 16);
    ovt_hex_encode(ct_s, ct, 32);
    ovt_hex_encode(mac_s, mac.b, 32);
    ovt_hex_encode(addr_s, addr.b, 20);
    ovt_hex_encode(u, uuid, 16);
    snprintf(id, sizeof id, "%.8s-%.4s-%.4s-%.4s-%.12s", u, u + 8, u + 12, u + 16, u + 20);
    json_t *root = json_pack("{s:s, s:{s:s, s:{s:s}, s:s, s:s, s:{s:i, s:I, s:i, s:i, s:s}, s:s}, s:s, s:i}",
                             "address", addr_s, "crypto", "cipher", "aes-128-ctr", "cipherparams", "iv", iv_s,
                             "ciphertext", ct_s, "kdf", "scrypt", "kdfparams", "dklen", 32, "n",
                             (json_int_t)params->n, "p", (int)params->p, "r", (int)params->r, "salt", salt_s,
                             "mac", mac_s, "id", id, "version", 3);
    *json = root ? json_dumps(root, JSON_SORT_KEYS) : NULL;
    json_decref(root);
    return *json ? 0 : ovt_fail(OVT_ENOMEM, "out of memory writing a keystore");
}

int chain_keystore_write(const char *path, const chain_privkey *key, const char *password, size_t password_len,
                         const chain_scrypt_params *params)
{
    char *json;
    int rc = chain_keystore_encrypt(&json, key, password, password_len, params);
    if (rc)
        return rc;
    rc = ovt_write_atomic(path, json, strlen(json), 0600);
    free(json);
    return rc;
}

void chain_keystore_filename(char *out, size_t cap, const chain_address *address)
{
    struct timespec ts;
    struct tm tm;
    char hex[41];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    ovt_hex_encode(hex, address->b, 20);
    snprintf(out, cap, "UTC--%04d-%02d-%02dT%02d-%02d-%02d.%09ldZ--%s", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec, hex);
}
