/* Cross-checks chain/ against the pinned cast (OVT_CAST) on random fields:
 * every encoding and signature must match cast byte for byte. The fields come
 * from a seeded generator (OVT_TEST_SEED, default 1) and include the edge
 * cases RLP and ABI get wrong most often: nonces 0, 127, 128, 2^32; empty,
 * 55/56-byte and large calldata; contract creation; values from 0 to 2^256-1. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/keys.h"
#include "chain/rlp.h"
#include "chain/tx.h"
#include "check.h"
#include "support/proc.h"

static const char *cast;
static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A value of a random byte width 0..8, so small and large numbers both occur. */
static uint64_t rnd_sized(void)
{
    unsigned bytes = (unsigned)(rnd() % 9);
    return bytes == 8 ? rnd() : rnd() & ((1ULL << (8 * bytes)) - 1);
}

static void rnd_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

/* "0x" + hex of data (malloc'd). */
static char *hex0x(const void *data, size_t len)
{
    char *s = malloc(2 * len + 3);
    s[0] = '0';
    s[1] = 'x';
    ovt_hex_encode(s + 2, data, len);
    return s;
}

/* Compares cast's output (with or without 0x) to our bytes. */
static int same_hex(const char *cast_out, const void *ours, size_t len, const char *what)
{
    char *mine = hex0x(ours, len);
    const char *theirs = cast_out ? cast_out : "(no output)";
    int ok = strcmp(theirs, mine) == 0 || strcmp(theirs, mine + 2) == 0;
    if (!ok)
        fprintf(stderr, "%s mismatch:\n  cast %.300s\n  ours %.300s\n", what, theirs, mine);
    free(mine);
    return ok;
}

static void test_keccak(void)
{
    size_t lens[] = {0, 1, 31, 32, 135, 136, 137, 271, 272, 1000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t buf[1000];
        rnd_bytes(buf, lens[i]);
        char *arg = hex0x(buf, lens[i]), *out;
        CHECK(tsup_runl(&out, cast, "keccak", arg, NULL) == 0);
        ovt_hash h;
        chain_keccak256(&h, buf, lens[i]);
        CHECK_MSG(same_hex(out, h.b, 32, "keccak"), "len %zu", lens[i]);
        free(arg);
        free(out);
    }
}

static void random_key(chain_privkey *k, char hex[65])
{
    do
        rnd_bytes(k->b, 32);
    while (chain_key_from_hex(k, (ovt_hex_encode(hex, k->b, 32), hex)) != 0);
}

static void test_addresses_and_signatures(void)
{
    for (int i = 0; i < 6; i++) {
        chain_privkey k;
        char khex[65], addr[43], *out;
        random_key(&k, khex);
        chain_address a;
        CHECK(chain_key_address(&a, &k) == 0);
        chain_address_to_string(addr, &a);
        CHECK(tsup_runl(&out, cast, "wallet", "address", "--private-key", khex, NULL) == 0);
        CHECK_MSG(out && strcmp(out, addr) == 0, "cast %s ours %s", out, addr);
        free(out);

        /* personal_sign of random bytes (cast hex-decodes a 0x message). */
        uint8_t msg[80];
        size_t mlen = (size_t)(rnd() % sizeof msg) + 1;
        rnd_bytes(msg, mlen);
        char *marg = hex0x(msg, mlen);
        chain_sig sig;
        uint8_t rsv[65];
        CHECK(chain_personal_sign(&sig, &k, msg, mlen) == 0);
        chain_sig_to_rsv(rsv, &sig);
        CHECK(tsup_runl(&out, cast, "wallet", "sign", "--private-key", khex, marg, NULL) == 0);
        CHECK(same_hex(out, rsv, 65, "personal_sign"));
        free(out);
        free(marg);

        /* A raw 32-byte hash signed with --no-hash, recovered back. */
        ovt_hash h;
        rnd_bytes(h.b, 32);
        char *harg = hex0x(h.b, 32);
        CHECK(chain_sign_hash(&sig, &k, &h) == 0);
        chain_sig_to_rsv(rsv, &sig);
        CHECK(tsup_runl(&out, cast, "wallet", "sign", "--no-hash", "--private-key", khex, harg, NULL) == 0);
        CHECK(same_hex(out, rsv, 65, "sign --no-hash"));
        chain_address rec;
        CHECK(chain_recover_address(&rec, &sig, &h) == 0 && chain_address_eq(&rec, &a));
        free(out);
        free(harg);
        ovt_wipe(&k, sizeof k);
    }
}

static const uint64_t special_nonces[] = {0, 1, 127, 128, 255, 256, 0xffffffffULL, 0x100000000ULL,
                                          0x100000001ULL, UINT64_MAX - 1};

static void test_transactions(void)
{
    size_t data_lens[] = {0, 1, 55, 56, 300, 24576};
    int ncases = 30;
    for (int i = 0; i < ncases; i++) {
        chain_privkey k;
        char khex[65];
        random_key(&k, khex);
        chain_tx tx = {0};
        tx.type = (i % 3 == 2) ? CHAIN_TX_LEGACY : CHAIN_TX_EIP1559;
        tx.chain_id = (i % 5 == 0) ? 1 : (i % 5 == 1) ? 31337 : rnd() % 100000 + 1;
        tx.nonce = i < 10 ? special_nonces[i] : rnd_sized();
        if (tx.nonce == UINT64_MAX)
            tx.nonce--;
        tx.gas_limit = rnd_sized() | 21000;
        uint64_t a = rnd_sized(), b = rnd_sized();
        tx.max_priority_fee_per_gas = a < b ? a : b;
        tx.max_fee_per_gas = a < b ? b : a;
        tx.gas_price = rnd_sized();
        tx.has_to = i % 7 != 3;
        rnd_bytes(tx.to.b, 20);
        /* Values: 0, small, 64-bit, full 256-bit. */
        memset(tx.value.b, 0, 32);
        unsigned vbytes = (unsigned)(i % 4 == 0 ? 0 : i % 4 == 1 ? 3 : i % 4 == 2 ? 8 : 32);
        rnd_bytes(tx.value.b + 32 - vbytes, vbytes);
        size_t dlen = data_lens[i % 6] == 300 ? (size_t)(rnd() % 600) : data_lens[i % 6];
        uint8_t *data = malloc(dlen + 1);
        rnd_bytes(data, dlen);
        tx.data = data;
        tx.data_len = dlen;

        char chain_s[24], nonce_s[24], gas_s[24], fee_s[24], prio_s[24], value_s[80], to_s[43];
        snprintf(chain_s, sizeof chain_s, "%" PRIu64, tx.chain_id);
        snprintf(nonce_s, sizeof nonce_s, "%" PRIu64, tx.nonce);
        snprintf(gas_s, sizeof gas_s, "%" PRIu64, tx.gas_limit);
        snprintf(fee_s, sizeof fee_s, "%" PRIu64,
                 tx.type == CHAIN_TX_LEGACY ? tx.gas_price : tx.max_fee_per_gas);
        snprintf(prio_s, sizeof prio_s, "%" PRIu64, tx.max_priority_fee_per_gas);
        chain_u256_to_dec(value_s, &tx.value);
        chain_address_to_string(to_s, &tx.to);
        char *data_s = hex0x(data, dlen);
        char *argv[32];
        int n = 0;
        argv[n++] = (char *)cast;
        argv[n++] = "mktx";
        argv[n++] = "--private-key";
        argv[n++] = khex;
        argv[n++] = "--chain";
        argv[n++] = chain_s;
        argv[n++] = "--nonce";
        argv[n++] = nonce_s;
        argv[n++] = "--gas-limit";
        argv[n++] = gas_s;
        argv[n++] = "--gas-price";
        argv[n++] = fee_s;
        if (tx.type == CHAIN_TX_LEGACY) {
            argv[n++] = "--legacy";
        } else {
            argv[n++] = "--priority-gas-price";
            argv[n++] = prio_s;
        }
        argv[n++] = "--value";
        argv[n++] = value_s;
        if (tx.has_to) {
            argv[n++] = to_s;
            argv[n++] = data_s;
        } else {
            argv[n++] = "--create";
            argv[n++] = data_s;
        }
        argv[n] = NULL;
        char *out;
        CHECK(tsup_run(argv, &out) == 0);
        chain_buf raw;
        ovt_hash txh;
        chain_buf_init(&raw);
        CHECK(chain_tx_sign(&raw, &txh, &tx, &k) == 0);
        CHECK_MSG(same_hex(out, raw.data, raw.len, "mktx"),
                  "case %d type %d nonce %s data %zu create %d", i, tx.type, nonce_s, dlen, !tx.has_to);
        free(out);
        /* The tx hash is keccak of the raw bytes: check with cast keccak. */
        char *raw_s = hex0x(raw.data, raw.len);
        if (raw.len < 2000) {
            CHECK(tsup_runl(&out, cast, "keccak", raw_s, NULL) == 0);
            CHECK(same_hex(out, txh.b, 32, "tx hash"));
            free(out);
        }
        /* Our strict decoder reads it back, sender included. */
        chain_tx back;
        chain_sig sig;
        chain_address sender, me;
        CHECK(chain_tx_decode_signed(&back, &sig, &sender, raw.data, raw.len) == 0);
        CHECK(chain_key_address(&me, &k) == 0 && chain_address_eq(&sender, &me));
        CHECK(back.nonce == tx.nonce && back.chain_id == tx.chain_id && back.data_len == dlen &&
              chain_u256_cmp(&back.value, &tx.value) == 0 && back.has_to == tx.has_to);
        free(raw_s);
        free(data_s);
        chain_buf_free(&raw);
        free(data);
        ovt_wipe(&k, sizeof k);
    }
}

static void test_calldata(void)
{
    const char *sig = "f(uint64,bytes32,address,bool,bytes,bytes32[],int64,uint256)";
    uint8_t sel[4];
    chain_abi_selector(sel, sig);
    for (int i = 0; i < 10; i++) {
        uint64_t u = rnd_sized();
        ovt_hash h;
        chain_address a;
        rnd_bytes(h.b, 32);
        rnd_bytes(a.b, 20);
        int b = (int)(rnd() & 1);
        size_t blen = (size_t)(i == 0 ? 0 : rnd() % 100);
        uint8_t bytes[100];
        rnd_bytes(bytes, blen);
        size_t nitems = (size_t)(i == 1 ? 0 : rnd() % 4);
        ovt_hash items[4];
        for (size_t k = 0; k < nitems; k++)
            rnd_bytes(items[k].b, 32);
        int64_t s = (int64_t)rnd_sized() * ((rnd() & 1) ? -1 : 1);
        chain_u256 big;
        rnd_bytes(big.b, 32);

        chain_abi_enc enc;
        chain_buf out;
        chain_abi_enc_init(&enc);
        chain_buf_init(&out);
        chain_abi_put_uint(&enc, u);
        chain_abi_put_bytes32(&enc, &h);
        chain_abi_put_address(&enc, &a);
        chain_abi_put_bool(&enc, b);
        chain_abi_put_bytes(&enc, bytes, blen);
        chain_abi_put_bytes32_array(&enc, items, nitems);
        chain_abi_put_int(&enc, s);
        chain_abi_put_u256(&enc, &big);
        CHECK(chain_abi_enc_finish(&enc, &out, sel) == 0);

        char u_s[24], a_s[43], s_s[24], big_s[80], arr[4 * 67 + 3];
        snprintf(u_s, sizeof u_s, "%" PRIu64, u);
        chain_address_to_string(a_s, &a);
        snprintf(s_s, sizeof s_s, "%" PRId64, s);
        chain_u256_to_dec(big_s, &big);
        char *h_s = hex0x(h.b, 32), *bytes_s = hex0x(bytes, blen);
        size_t pos = 0;
        arr[pos++] = '[';
        for (size_t k = 0; k < nitems; k++) {
            if (k)
                arr[pos++] = ',';
            arr[pos++] = '0';
            arr[pos++] = 'x';
            ovt_hex_encode(arr + pos, items[k].b, 32);
            pos += 64;
        }
        arr[pos++] = ']';
        arr[pos] = '\0';
        char *cout;
        CHECK(tsup_runl(&cout, cast, "calldata", sig, u_s, h_s, a_s, b ? "true" : "false", bytes_s, arr,
                        s_s, big_s, NULL) == 0);
        CHECK_MSG(same_hex(cout, out.data, out.len, "calldata"), "case %d", i);

        /* Decode our encoding back. */
        chain_abi_dec dec;
        uint64_t u2;
        int64_t s2;
        int b2;
        chain_address a2;
        const uint8_t *p;
        size_t n;
        chain_abi_dec_init(&dec, out.data + 4, out.len - 4);
        CHECK(chain_abi_get_uint(&dec, 0, &u2) == 0 && u2 == u);
        CHECK(chain_abi_get_address(&dec, 2, &a2) == 0 && chain_address_eq(&a, &a2));
        CHECK(chain_abi_get_bool(&dec, 3, &b2) == 0 && b2 == b);
        CHECK(chain_abi_get_bytes(&dec, 4, &p, &n) == 0 && n == blen && memcmp(p, bytes, blen) == 0);
        CHECK(chain_abi_get_bytes32_array(&dec, 5, &p, &n) == 0 && n == nitems);
        CHECK(chain_abi_get_int(&dec, 6, &s2) == 0 && s2 == s);
        free(cout);
        free(h_s);
        free(bytes_s);
        chain_abi_enc_free(&enc);
        chain_buf_free(&out);
    }
}

/* A random nested RLP value: appended to both our encoder and a JSON text
 * for `cast to-rlp`. */
static void random_rlp(chain_buf *b, chain_buf *json, int depth)
{
    if (depth < 3 && rnd() % 3 == 0) {
        size_t l = chain_rlp_list_begin(b);
        chain_buf_push(json, '[');
        int n = (int)(rnd() % 4);
        for (int i = 0; i < n; i++) {
            if (i)
                chain_buf_push(json, ',');
            random_rlp(b, json, depth + 1);
        }
        chain_rlp_list_end(b, l);
        chain_buf_push(json, ']');
        return;
    }
    size_t lens[] = {0, 1, 1, 2, 55, 56, 70, 300};
    size_t n = lens[rnd() % 8];
    uint8_t data[300];
    rnd_bytes(data, n);
    if (n == 1 && rnd() % 2)
        data[0] &= 0x7f;
    chain_rlp_put_bytes(b, data, n);
    char *h = hex0x(data, n);
    chain_buf_push(json, '"');
    chain_buf_append(json, h, strlen(h));
    chain_buf_push(json, '"');
    free(h);
}

static void test_rlp(void)
{
    for (int i = 0; i < 12; i++) {
        chain_buf b, json;
        chain_buf_init(&b);
        chain_buf_init(&json);
        chain_buf_push(&json, '[');
        size_t l = chain_rlp_list_begin(&b);
        int n = (int)(rnd() % 5) + 1;
        for (int k = 0; k < n; k++) {
            if (k)
                chain_buf_push(&json, ',');
            random_rlp(&b, &json, 1);
        }
        chain_rlp_list_end(&b, l);
        chain_buf_push(&json, ']');
        chain_buf_push(&json, '\0');
        char *out;
        CHECK(tsup_runl(&out, cast, "to-rlp", (char *)json.data, NULL) == 0);
        CHECK_MSG(same_hex(out, b.data, b.len, "to-rlp"), "input %.200s", (char *)json.data);
        chain_rlp_item item;
        CHECK(chain_rlp_decode_whole(&item, b.data, b.len) == 0);
        free(out);
        /* And back: cast from-rlp of our bytes prints the same structure. */
        char *ours = hex0x(b.data, b.len);
        CHECK(tsup_runl(&out, cast, "from-rlp", ours, NULL) == 0);
        CHECK_MSG(out && strcmp(out, (char *)json.data) == 0, "from-rlp %.200s\n  ours %.200s", out, (char *)json.data);
        free(ours);
        free(out);
        chain_buf_free(&b);
        chain_buf_free(&json);
    }
}


/* EIP-712 typed data with every member kind the commitment may use, signed
 * by cast from the JSON form and by us from the hashes. */
static void test_eip712(void)
{
    static const char type_string[] =
        "Commitment(bytes32 runId,uint64 step,address party,bool final,uint256 amount,string note,bytes extra)";
    for (int i = 0; i < 6; i++) {
        chain_privkey k;
        char khex[65];
        random_key(&k, khex);
        char name[16], version[8], note[24];
        snprintf(name, sizeof name, "ovt%llu", (unsigned long long)(rnd() % 100000));
        snprintf(version, sizeof version, "%u", (unsigned)(rnd() % 9 + 1));
        snprintf(note, sizeof note, "note-%llx", (unsigned long long)rnd_sized());
        uint64_t chain_id = i == 0 ? 1 : rnd() % 1000000 + 1, step = rnd_sized();
        chain_address verifying, party;
        ovt_hash run_id;
        chain_u256 amount;
        uint8_t extra[40];
        size_t extra_len = (size_t)(rnd() % sizeof extra);
        rnd_bytes(verifying.b, 20);
        rnd_bytes(party.b, 20);
        rnd_bytes(run_id.b, 32);
        rnd_bytes(amount.b, 32);
        rnd_bytes(extra, extra_len);
        int final = (int)(rnd() & 1);

        ovt_hash dom, st, dig, note_hash, extra_hash;
        chain_eip712_domain_separator(&dom, name, version, chain_id, &verifying);
        chain_keccak256(&note_hash, note, strlen(note));
        chain_keccak256(&extra_hash, extra, extra_len);
        chain_abi_enc enc;
        chain_buf fields;
        chain_abi_enc_init(&enc);
        chain_buf_init(&fields);
        chain_abi_put_bytes32(&enc, &run_id);
        chain_abi_put_uint(&enc, step);
        chain_abi_put_address(&enc, &party);
        chain_abi_put_bool(&enc, final);
        chain_abi_put_u256(&enc, &amount);
        chain_abi_put_bytes32(&enc, &note_hash);
        chain_abi_put_bytes32(&enc, &extra_hash);
        CHECK(chain_abi_enc_finish(&enc, &fields, NULL) == 0);
        CHECK(chain_eip712_hash_struct(&st, type_string, fields.data, fields.len) == 0);
        chain_eip712_digest(&dig, &dom, &st);
        chain_sig sig;
        uint8_t rsv[65];
        CHECK(chain_sign_hash(&sig, &k, &dig) == 0);
        chain_sig_to_rsv(rsv, &sig);

        char verifying_s[43], party_s[43], amount_s[80], *run_s = hex0x(run_id.b, 32), *extra_s = hex0x(extra, extra_len);
        chain_address_to_string(verifying_s, &verifying);
        chain_address_to_string(party_s, &party);
        chain_u256_to_dec(amount_s, &amount);
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"types\":{\"EIP712Domain\":[{\"name\":\"name\",\"type\":\"string\"},"
                 "{\"name\":\"version\",\"type\":\"string\"},{\"name\":\"chainId\",\"type\":\"uint256\"},"
                 "{\"name\":\"verifyingContract\",\"type\":\"address\"}],"
                 "\"Commitment\":[{\"name\":\"runId\",\"type\":\"bytes32\"},{\"name\":\"step\",\"type\":\"uint64\"},"
                 "{\"name\":\"party\",\"type\":\"address\"},{\"name\":\"final\",\"type\":\"bool\"},"
                 "{\"name\":\"amount\",\"type\":\"uint256\"},{\"name\":\"note\",\"type\":\"string\"},"
                 "{\"name\":\"extra\",\"type\":\"bytes\"}]},"
                 "\"primaryType\":\"Commitment\","
                 "\"domain\":{\"name\":\"%s\",\"version\":\"%s\",\"chainId\":%llu,\"verifyingContract\":\"%s\"},"
                 "\"message\":{\"runId\":\"%s\",\"step\":\"%llu\",\"party\":\"%s\",\"final\":%s,"
                 "\"amount\":\"%s\",\"note\":\"%s\",\"extra\":\"%s\"}}",
                 name, version, (unsigned long long)chain_id, verifying_s, run_s, (unsigned long long)step, party_s,
                 final ? "true" : "false", amount_s, note, extra_s);
        char *out;
        CHECK(tsup_runl(&out, cast, "wallet", "sign", "--private-key", khex, "--data", json, NULL) == 0);
        CHECK_MSG(same_hex(out, rsv, 65, "EIP-712 signature"), "case %d", i);
        free(out);
        free(run_s);
        free(extra_s);
        chain_abi_enc_free(&enc);
        chain_buf_free(&fields);
        ovt_wipe(&k, sizeof k);
    }
}

int main(void)
{
    cast = getenv("OVT_CAST");
    if (!cast || !*cast) {
        fprintf(stderr, "OVT_CAST is not set (run `npm ci` and reconfigure)\n");
        return 1;
    }
    const char *seed = getenv("OVT_TEST_SEED");
    rng_state = seed ? strtoull(seed, NULL, 0) : 1;
    printf("seed %" PRIu64 " (set OVT_TEST_SEED to vary)\n", rng_state);
    CHECK_RUN(test_keccak());
    CHECK_RUN(test_addresses_and_signatures());
    CHECK_RUN(test_transactions());
    CHECK_RUN(test_calldata());
    CHECK_RUN(test_rlp());
    CHECK_RUN(test_eip712());
    return check_done();
}
