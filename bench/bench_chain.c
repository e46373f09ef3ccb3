/* bench_chain: chain/ throughput on this machine.
 *   - keccak-256 over 1 MiB buffers, MB/s, against OpenSSL's SHA3-256 (the
 *     same Keccak-f[1600] permutation, different padding) in the same run;
 *   - secp256k1 recoverable signatures: signs/s, recoveries/s, and the pair;
 *   - EIP-1559 transactions built, signed and encoded per second.
 * usage: bench_chain [SECONDS_PER_ITEM] (default 1.0) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "chain/keccak.h"
#include "chain/keys.h"
#include "chain/tx.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile uint8_t sink;

static double keccak_mbps(const uint8_t *buf, size_t len, double secs)
{
    double t0 = now_s(), t;
    size_t bytes = 0;
    ovt_hash h;
    do {
        chain_keccak256(&h, buf, len);
        sink ^= h.b[0];
        bytes += len;
    } while ((t = now_s()) - t0 < secs);
    return (double)bytes / (t - t0) / 1e6;
}

static double sha3_mbps(const uint8_t *buf, size_t len, double secs)
{
    double t0 = now_s(), t;
    size_t bytes = 0;
    uint8_t out[32];
    unsigned outlen;
    do {
        EVP_Digest(buf, len, out, &outlen, EVP_sha3_256(), NULL);
        sink ^= out[0];
        bytes += len;
    } while ((t = now_s()) - t0 < secs);
    return (double)bytes / (t - t0) / 1e6;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    if (secs <= 0)
        secs = 1.0;
    size_t len = 1 << 20;
    uint8_t *buf = malloc(len);
    if (!buf)
        return 1;
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    double k = keccak_mbps(buf, len, secs), s = sha3_mbps(buf, len, secs);
    printf("keccak256 (ovt)        %8.1f MB/s\n", k);
    printf("SHA3-256 (OpenSSL)     %8.1f MB/s\n", s);
    printf("ratio ovt/OpenSSL      %8.2f\n", k / s);
    double t0 = now_s(), t;
    size_t small = 0;
    ovt_hash h;
    do {
        chain_keccak256(&h, buf, 64);
        small++;
    } while ((t = now_s()) - t0 < secs);
    printf("keccak256 of 64 bytes  %8.0f hashes/s\n", (double)small / (t - t0));

    chain_privkey key;
    chain_address addr, rec;
    if (chain_key_from_hex(&key, "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80") != 0 ||
        chain_key_address(&addr, &key) != 0)
        return 1;
    chain_sig sig;
    size_t n = 0;
    t0 = now_s();
    do {
        h.b[0] = (uint8_t)n;
        h.b[1] = (uint8_t)(n >> 8);
        if (chain_sign_hash(&sig, &key, &h) != 0)
            return 1;
        n++;
    } while ((t = now_s()) - t0 < secs);
    double sign_rate = (double)n / (t - t0);
    n = 0;
    t0 = now_s();
    do {
        if (chain_recover_address(&rec, &sig, &h) != 0 || !chain_address_eq(&rec, &addr))
            return 1;
        n++;
    } while ((t = now_s()) - t0 < secs);
    double rec_rate = (double)n / (t - t0);
    n = 0;
    t0 = now_s();
    do {
        h.b[2] = (uint8_t)n;
        if (chain_sign_hash(&sig, &key, &h) != 0 || chain_recover_address(&rec, &sig, &h) != 0)
            return 1;
        n++;
    } while ((t = now_s()) - t0 < secs);
    printf("sign                   %8.0f /s\n", sign_rate);
    printf("recover                %8.0f /s\n", rec_rate);
    printf("sign + recover         %8.0f pairs/s\n", (double)n / (t - t0));

    chain_tx tx = {0};
    tx.type = CHAIN_TX_EIP1559;
    tx.chain_id = 31337;
    tx.max_priority_fee_per_gas = 1000000000;
    tx.max_fee_per_gas = 2000000000;
    tx.gas_limit = 100000;
    tx.has_to = 1;
    tx.to = addr;
    tx.data = buf;
    tx.data_len = 100;
    n = 0;
    t0 = now_s();
    do {
        chain_buf raw;
        chain_buf_init(&raw);
        tx.nonce = n;
        if (chain_tx_sign(&raw, &h, &tx, &key) != 0)
            return 1;
        chain_buf_free(&raw);
        n++;
    } while ((t = now_s()) - t0 < secs);
    printf("EIP-1559 tx signed     %8.0f /s (100 bytes of calldata)\n", (double)n / (t - t0));
    ovt_wipe(&key, sizeof key);
    free(buf);
    return 0;
}
