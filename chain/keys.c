/* Keys, addresses and signatures on top of libsecp256k1 (see keys.h). The
 * library's own convention (1 = ok) stays inside this file. */
#include "chain/keys.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>
#include <secp256k1.h>
#include <secp256k1_recovery.h>

#include "chain/keccak.h"

static secp256k1_context *secp_ctx;
static pthread_once_t secp_once = PTHREAD_ONCE_INIT;

static void secp_create(void)
{
    secp_ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    unsigned char seed[32];
    /* Randomization is side-channel hardening; signing stays correct without it. */
    if (secp_ctx && RAND_bytes(seed, sizeof seed) == 1 &&
        secp256k1_context_randomize(secp_ctx, seed) != 1) {
        /* Randomizing a fresh context cannot fail; if it did, keep it unrandomized. */
    }
    ovt_wipe(seed, sizeof seed);
}

static const secp256k1_context *secp(void)
{
    pthread_once(&secp_once, secp_create);
    return secp_ctx;
}

int chain_key_generate(chain_privkey *out)
{
    memset(out, 0, sizeof *out);
    if (!secp())
        return ovt_fail(OVT_ENOMEM, "cannot create a secp256k1 context");
    for (int tries = 0; tries < 16; tries++) {
        if (RAND_bytes(out->b, sizeof out->b) != 1)
            return ovt_fail(OVT_ECRYPTO, "the OS random source failed");
        if (secp256k1_ec_seckey_verify(secp(), out->b) == 1)
            return 0;
    }
    ovt_wipe(out, sizeof *out);
    return ovt_fail(OVT_ECRYPTO, "could not draw a valid private key");
}

int chain_key_from_hex(chain_privkey *out, const char *hex)
{
    memset(out, 0, sizeof *out);
    if (ovt_hex_decode(out->b, sizeof out->b, hex) != 0) {
        ovt_wipe(out, sizeof *out);
        return ovt_fail(OVT_EINVAL, "a private key must be 64 hex digits (32 bytes)");
    }
    if (!secp() || secp256k1_ec_seckey_verify(secp(), out->b) != 1) {
        ovt_wipe(out, sizeof *out);
        return ovt_fail(OVT_ECRYPTO, "not a valid secp256k1 private key (zero or above the group order)");
    }
    return 0;
}

/* Address of a public key: keccak of the 64-byte uncompressed point. */
static void address_of_pubkey(chain_address *out, const secp256k1_pubkey *pub)
{
    uint8_t ser[65];
    size_t n = sizeof ser;
    secp256k1_ec_pubkey_serialize(secp(), ser, &n, pub, SECP256K1_EC_UNCOMPRESSED);
    ovt_hash h;
    chain_keccak256(&h, ser + 1, 64);
    memcpy(out->b, h.b + 12, 20);
}

int chain_key_address(chain_address *out, const chain_privkey *key)
{
    memset(out, 0, sizeof *out);
    secp256k1_pubkey pub;
    if (!secp() || secp256k1_ec_pubkey_create(secp(), &pub, key->b) != 1)
        return ovt_fail(OVT_ECRYPTO, "not a valid secp256k1 private key");
    address_of_pubkey(out, &pub);
    return 0;
}

int chain_sign_hash(chain_sig *out, const chain_privkey *key, const ovt_hash *hash)
{
    memset(out, 0, sizeof *out);
    secp256k1_ecdsa_recoverable_signature rsig;
    if (!secp() || secp256k1_ecdsa_sign_recoverable(secp(), &rsig, hash->b, key->b, NULL, NULL) != 1)
        return ovt_fail(OVT_ECRYPTO, "signing failed: not a valid secp256k1 private key");
    uint8_t rs[64];
    int recid;
    secp256k1_ecdsa_recoverable_signature_serialize_compact(secp(), rs, &recid, &rsig);
    memcpy(out->r, rs, 32);
    memcpy(out->s, rs + 32, 32);
    out->recid = (uint8_t)recid;
    return 0;
}

int chain_recover_address(chain_address *out, const chain_sig *sig, const ovt_hash *hash)
{
    memset(out, 0, sizeof *out);
    if (sig->recid > 1)
        return ovt_fail(OVT_ECRYPTO, "signature recovery id %u is not 0 or 1", sig->recid);
    uint8_t rs[64];
    memcpy(rs, sig->r, 32);
    memcpy(rs + 32, sig->s, 32);
    secp256k1_ecdsa_recoverable_signature rsig;
    secp256k1_ecdsa_signature plain;
    secp256k1_pubkey pub;
    if (!secp() || secp256k1_ecdsa_recoverable_signature_parse_compact(secp(), &rsig, rs, sig->recid) != 1)
        return ovt_fail(OVT_ECRYPTO, "malformed signature (r or s out of range)");
    /* Ethereum (EIP-2) accepts only low-s signatures. */
    secp256k1_ecdsa_recoverable_signature_convert(secp(), &plain, &rsig);
    if (secp256k1_ecdsa_signature_normalize(secp(), NULL, &plain) == 1)
        return ovt_fail(OVT_ECRYPTO, "signature has a high s value (not canonical)");
    if (secp256k1_ecdsa_recover(secp(), &pub, &rsig, hash->b) != 1)
        return ovt_fail(OVT_ECRYPTO, "no public key recovers from this signature");
    address_of_pubkey(out, &pub);
    return 0;
}

void chain_sig_to_rsv(uint8_t out[65], const chain_sig *sig)
{
    memcpy(out, sig->r, 32);
    memcpy(out + 32, sig->s, 32);
    out[64] = (uint8_t)(27 + sig->recid);
}

int chain_sig_from_rsv(chain_sig *out, const uint8_t in[65])
{
    memset(out, 0, sizeof *out);
    uint8_t v = in[64];
    if (v >= 27)
        v = (uint8_t)(v - 27);
    if (v > 1)
        return ovt_fail(OVT_ECRYPTO, "signature v byte %u is not 0, 1, 27 or 28", in[64]);
    memcpy(out->r, in, 32);
    memcpy(out->s, in + 32, 32);
    out->recid = v;
    return 0;
}

void chain_address_to_string(char *out, const chain_address *a)
{
    char lower[41];
    ovt_hex_encode(lower, a->b, 20);
    ovt_hash h;
    chain_keccak256(&h, lower, 40);
    out[0] = '0';
    out[1] = 'x';
    for (int i = 0; i < 40; i++) {
        unsigned nibble = (i % 2 == 0) ? h.b[i / 2] >> 4 : h.b[i / 2] & 0x0f;
        char c = lower[i];
        out[2 + i] = (c >= 'a' && nibble >= 8) ? (char)toupper((unsigned char)c) : c;
    }
    out[42] = '\0';
}

int chain_address_from_string(chain_address *out, const char *s)
{
    memset(out, 0, sizeof *out);
    if (strncmp(s, "0x", 2) != 0 && strncmp(s, "0X", 2) != 0)
        return ovt_fail(OVT_EINVAL, "address '%.60s' must start with 0x", s);
    if (strlen(s) != 42)
        return ovt_fail(OVT_EINVAL, "address '%.60s' must be 0x and 40 hex digits", s);
    int has_lower = 0, has_upper = 0;
    for (int i = 2; i < 42; i++) {
        has_lower |= s[i] >= 'a' && s[i] <= 'f';
        has_upper |= s[i] >= 'A' && s[i] <= 'F';
    }
    chain_address a;
    if (ovt_hex_decode(a.b, 20, s + 2) != 0)
        return ovt_fail(OVT_EINVAL, "address '%.60s' is not hex", s);
    if (has_lower && has_upper) {
        char want[43];
        chain_address_to_string(want, &a);
        if (strcmp(want + 2, s + 2) != 0)
            return ovt_fail(OVT_EINVAL, "address %s has a wrong EIP-55 checksum (expected %s)", s, want);
    }
    *out = a;
    return 0;
}

int chain_address_eq(const chain_address *a, const chain_address *b)
{
    return memcmp(a->b, b->b, 20) == 0;
}

void chain_personal_hash(ovt_hash *out, const void *msg, size_t len)
{
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "\x19" "Ethereum Signed Message:\n%zu", len);
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    chain_keccak_update(&ctx, prefix, (size_t)n);
    chain_keccak_update(&ctx, msg, len);
    chain_keccak_final(&ctx, out);
}

int chain_personal_sign(chain_sig *out, const chain_privkey *key, const void *msg, size_t len)
{
    ovt_hash h;
    chain_personal_hash(&h, msg, len);
    return chain_sign_hash(out, key, &h);
}
