/* Known-answer tests for chain/: every vector in shared/vectors/ethereum.md
 * (made with cast 1.7.1), plus RLP canonical-form rejections and ABI/revert
 * decoding checked against hand-built encodings. */
#include <stdlib.h>
#include <string.h>

#include "chain/abi.h"
#include "chain/eip712.h"
#include "chain/keccak.h"
#include "chain/keys.h"
#include "chain/rlp.h"
#include "chain/tx.h"
#include "check.h"

static const char *KEY0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
static const char *D_HEX = "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45";
static const char *COMMIT_CALLDATA =
    "d49f43e7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa0000000000000000000000"
    "0000000000000000000000000000000000000000074e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44"
    "f58fa12d6c45";

static int hex_eq(const void *data, size_t len, const char *hex)
{
    char *s = malloc(2 * len + 1);
    ovt_hex_encode(s, data, len);
    int ok = strcmp(s, hex) == 0;
    if (!ok)
        fprintf(stderr, "  got      %s\n  expected %s\n", s, hex);
    free(s);
    return ok;
}

static void test_keccak(void)
{
    ovt_hash h;
    chain_keccak256(&h, "", 0);
    CHECK(hex_eq(h.b, 32, "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"));
    chain_keccak256(&h, "abc", 3);
    CHECK(hex_eq(h.b, 32, D_HEX));
    uint8_t seq[200], as[200];
    for (int i = 0; i < 200; i++) {
        seq[i] = (uint8_t)i;
        as[i] = 'a';
    }
    chain_keccak256(&h, seq, 200);
    CHECK(hex_eq(h.b, 32, "bfb0aa97863e797943cf7c33bb7e880bb4543f3d2703c0923c6901c2af57b890"));
    chain_keccak256(&h, as, 200);
    CHECK(hex_eq(h.b, 32, "96ea54061def936c4be90b518992fdc6f12f535068a256229aca54267b4d084d"));
    /* Incremental in odd-sized pieces (crossing the 136-byte rate) equals one shot. */
    chain_keccak_ctx ctx;
    chain_keccak_init(&ctx);
    size_t pieces[] = {1, 7, 9, 64, 55, 64};
    size_t off = 0;
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        chain_keccak_update(&ctx, seq + off, pieces[i]);
        off += pieces[i];
    }
    ovt_hash h2;
    chain_keccak_final(&ctx, &h2);
    chain_keccak256(&h, seq, 200);
    CHECK_MEM(h.b, h2.b, 32);
}

static void test_addresses(void)
{
    const char *keys[3][2] = {
        {KEY0, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"},
        {"59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
         "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"},
        {"5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
         "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"},
    };
    for (int i = 0; i < 3; i++) {
        chain_privkey k;
        chain_address a, parsed;
        char s[43];
        CHECK(chain_key_from_hex(&k, keys[i][0]) == 0);
        CHECK(chain_key_address(&a, &k) == 0);
        chain_address_to_string(s, &a);
        CHECK_MSG(strcmp(s, keys[i][1]) == 0, "%s", s);
        CHECK(chain_address_from_string(&parsed, keys[i][1]) == 0);
        CHECK(chain_address_eq(&parsed, &a));
    }
    chain_address a;
    /* A flipped case in a checksummed address is rejected; all-lower is accepted. */
    CHECK(chain_address_from_string(&a, "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266") == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "checksum") != NULL);
    CHECK(chain_address_from_string(&a, "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266") == 0);
    CHECK(chain_address_from_string(&a, "f39fd6e51aad88f6f4ce6ab8827279cfffb92266") == OVT_EINVAL);
    CHECK(chain_address_from_string(&a, "0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226") == OVT_EINVAL);
    CHECK(chain_address_from_string(&a, "0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266") == OVT_EINVAL);
    chain_privkey k;
    /* Zero and the group order are not keys; the error does not echo the input. */
    CHECK(chain_key_from_hex(&k, "0000000000000000000000000000000000000000000000000000000000000000") ==
          OVT_ECRYPTO);
    CHECK(chain_key_from_hex(&k, "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141") ==
          OVT_ECRYPTO);
    CHECK(chain_key_from_hex(&k, "ac0974bec39a17e36ba4a6b4d2") == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "ac0974") == NULL);
}

static void test_abi_vectors(void)
{
    uint8_t sel[4];
    chain_abi_selector(sel, "commit(bytes32,uint64,bytes32)");
    CHECK(hex_eq(sel, 4, "d49f43e7"));
    ovt_hash A, D, topic;
    memset(A.b, 0xaa, 32);
    chain_keccak256(&D, "abc", 3);
    chain_abi_event_topic(&topic, "Committed(address,uint64,bytes32,bytes32)");
    CHECK(hex_eq(topic.b, 32, "e309a2caa8a49a3678afb62aec2366ec14ca0b36a22d809e0118c124718bc804"));

    chain_abi_enc enc;
    chain_buf out;
    chain_abi_enc_init(&enc);
    chain_buf_init(&out);
    chain_abi_put_bytes32(&enc, &A);
    chain_abi_put_uint(&enc, 7);
    chain_abi_put_bytes32(&enc, &D);
    CHECK(chain_abi_enc_finish(&enc, &out, sel) == 0);
    CHECK(hex_eq(out.data, out.len, COMMIT_CALLDATA));
    chain_abi_enc_free(&enc);

    /* post(uint64,bytes) 7 0xdeadbeef */
    chain_buf_free(&out);
    chain_abi_enc_init(&enc);
    chain_abi_selector(sel, "post(uint64,bytes)");
    chain_abi_put_uint(&enc, 7);
    const uint8_t dead[4] = {0xde, 0xad, 0xbe, 0xef};
    chain_abi_put_bytes(&enc, dead, 4);
    CHECK(chain_abi_enc_finish(&enc, &out, sel) == 0);
    CHECK(hex_eq(out.data, out.len,
                 "5f27421100000000000000000000000000000000000000000000000000000000000000070000000000"
                 "000000000000000000000000000000000000000000000000000040000000000000000000000000000000"
                 "0000000000000000000000000000000004deadbeef000000000000000000000000000000000000000000"
                 "00000000000000"));
    chain_abi_enc_free(&enc);

    /* Decoding it back. */
    chain_abi_dec dec;
    uint64_t v;
    const uint8_t *p;
    size_t n;
    chain_abi_dec_init(&dec, out.data + 4, out.len - 4);
    CHECK(chain_abi_get_uint(&dec, 0, &v) == 0 && v == 7);
    CHECK(chain_abi_get_bytes(&dec, 1, &p, &n) == 0 && n == 4 && memcmp(p, dead, 4) == 0);
    uint8_t word[32];
    CHECK(chain_abi_get_word(&dec, 3, word) == 0);
    CHECK(chain_abi_get_word(&dec, 4, word) == OVT_EFORMAT);
    /* A length that runs past the data. */
    out.data[4 + 64 + 31] = 0x40;
    CHECK(chain_abi_get_bytes(&dec, 1, &p, &n) == OVT_EFORMAT);
    /* An offset past the data. */
    out.data[4 + 32 + 31] = 0xff;
    CHECK(chain_abi_get_bytes(&dec, 1, &p, &n) == OVT_EFORMAT);
    chain_buf_free(&out);
}

static void test_abi_dynamic_arrays(void)
{
    /* f(bytes32[],uint64,bytes): head = [off0, 5, off2]; tail = [2, h0, h1, 3, "xyz" padded].
     * Built by hand from the ABI spec: off0 = 96, off2 = 96 + 32*3 = 192. */
    ovt_hash items[2];
    memset(items[0].b, 0x11, 32);
    memset(items[1].b, 0x22, 32);
    chain_abi_enc enc;
    chain_buf out;
    chain_abi_enc_init(&enc);
    chain_buf_init(&out);
    chain_abi_put_bytes32_array(&enc, items, 2);
    chain_abi_put_uint(&enc, 5);
    chain_abi_put_bytes(&enc, "xyz", 3);
    CHECK(chain_abi_enc_finish(&enc, &out, NULL) == 0);
    CHECK_EQ_U64(out.len, 32 * 8);
    uint8_t want[32 * 8] = {0};
    want[31] = 96;
    want[63] = 5;
    want[95] = 192;
    want[127] = 2;
    memset(want + 128, 0x11, 32);
    memset(want + 160, 0x22, 32);
    want[223] = 3;
    memcpy(want + 224, "xyz", 3);
    CHECK_MEM(out.data, want, sizeof want);
    chain_abi_dec dec;
    const uint8_t *p;
    size_t n;
    chain_abi_dec_init(&dec, out.data, out.len);
    CHECK(chain_abi_get_bytes32_array(&dec, 0, &p, &n) == 0 && n == 2 && memcmp(p + 32, items[1].b, 32) == 0);
    want[127] = 3; /* claims 3 items, 2 present before the next length word... still inside */
    chain_abi_dec_init(&dec, want, sizeof want);
    CHECK(chain_abi_get_bytes32_array(&dec, 0, &p, &n) == 0 && n == 3);
    want[127] = 5; /* 5 words: runs past the end */
    CHECK(chain_abi_get_bytes32_array(&dec, 0, &p, &n) == OVT_EFORMAT);
    int b;
    chain_address a;
    int64_t i64;
    CHECK(chain_abi_get_bool(&dec, 1, &b) == OVT_EFORMAT); /* 5 is not a bool */
    CHECK(chain_abi_get_address(&dec, 1, &a) == 0);
    chain_abi_enc_free(&enc);
    chain_buf_free(&out);

    chain_abi_enc_init(&enc);
    chain_abi_put_int(&enc, -2);
    chain_abi_put_bool(&enc, 1);
    CHECK(chain_abi_enc_finish(&enc, &out, NULL) == 0);
    chain_abi_dec_init(&dec, out.data, out.len);
    CHECK(out.data[0] == 0xff && out.data[31] == 0xfe);
    CHECK(chain_abi_get_int(&dec, 0, &i64) == 0 && i64 == -2);
    CHECK(chain_abi_get_bool(&dec, 1, &b) == 0 && b == 1);
    CHECK(chain_abi_get_address(&dec, 0, &a) == OVT_EFORMAT);
    chain_abi_enc_free(&enc);
    chain_buf_free(&out);
}

static void test_revert(void)
{
    char reason[200];
    uint8_t *data;
    size_t n;
    /* Error("not arbiter"): selector 08c379a0, offset 0x20, length 11, text. */
    CHECK(ovt_hex_decode_alloc(&data, &n,
                               "08c379a0"
                               "0000000000000000000000000000000000000000000000000000000000000020"
                               "000000000000000000000000000000000000000000000000000000000000000b"
                               "6e6f746172626974657200000000000000000000000000000000000000000000") == 0);
    /* "notarbiter" is 10 bytes but the length says 11: still inside the padding. */
    chain_abi_decode_revert(reason, sizeof reason, data, n, NULL);
    CHECK_MSG(strncmp(reason, "reverted: notarbiter", 20) == 0, "%s", reason);
    data[4 + 63] = 0x60; /* length beyond the data */
    chain_abi_decode_revert(reason, sizeof reason, data, n, NULL);
    CHECK_MSG(strstr(reason, "malformed") != NULL, "%s", reason);
    free(data);
    /* Panic(0x11) */
    CHECK(ovt_hex_decode_alloc(&data, &n, "4e487b71"
                                          "0000000000000000000000000000000000000000000000000000000000000011") == 0);
    chain_abi_decode_revert(reason, sizeof reason, data, n, NULL);
    CHECK_MSG(strstr(reason, "overflow") != NULL, "%s", reason);
    free(data);
    /* A custom error WrongRound(uint64) with selector from keccak. */
    uint8_t custom[36] = {0};
    chain_abi_selector(custom, "WrongRound(uint64)");
    custom[35] = 3;
    const char *errors[] = {"NotParty()", "WrongRound(uint64)", NULL};
    chain_abi_decode_revert(reason, sizeof reason, custom, 36, errors);
    CHECK_MSG(strstr(reason, "WrongRound(uint64)") != NULL && strstr(reason, "03") != NULL, "%s", reason);
    chain_abi_decode_revert(reason, sizeof reason, custom, 36, NULL);
    CHECK_MSG(strstr(reason, "custom error 0x") != NULL, "%s", reason);
    chain_abi_decode_revert(reason, sizeof reason, custom, 0, NULL);
    CHECK(strcmp(reason, "reverted without a reason") == 0);
}

static void test_rlp(void)
{
    chain_buf b;
    chain_buf_init(&b);
    chain_rlp_put_uint(&b, 0);
    chain_rlp_put_uint(&b, 127);
    chain_rlp_put_uint(&b, 128);
    chain_rlp_put_uint(&b, 0x100);
    CHECK(hex_eq(b.data, b.len, "807f81808201" "00"));
    chain_buf_free(&b);
    /* 56-byte string takes the long form b8 38. */
    uint8_t s56[56];
    memset(s56, 'x', 56);
    chain_rlp_put_bytes(&b, s56, 56);
    CHECK(b.len == 58 && b.data[0] == 0xb8 && b.data[1] == 56);
    chain_buf_free(&b);
    /* ["cat","dog"] = c8 83 636174 83 646f67 */
    size_t l = chain_rlp_list_begin(&b);
    chain_rlp_put_bytes(&b, "cat", 3);
    chain_rlp_put_bytes(&b, "dog", 3);
    chain_rlp_list_end(&b, l);
    CHECK(hex_eq(b.data, b.len, "c88363617483646f67"));
    chain_rlp_item item, child;
    size_t pos = 0;
    CHECK(chain_rlp_decode_whole(&item, b.data, b.len) == 0 && item.is_list);
    CHECK(chain_rlp_list_next(&item, &pos, &child) == 1 && child.len == 3 && memcmp(child.payload, "cat", 3) == 0);
    CHECK(chain_rlp_list_next(&item, &pos, &child) == 1);
    CHECK(chain_rlp_list_next(&item, &pos, &child) == 0);
    chain_buf_free(&b);

    /* Non-canonical forms are rejected. */
    struct {
        const char *hex;
        const char *why;
    } bad[] = {
        {"8100", "single byte below 0x80 as a string"},
        {"817f", "single byte below 0x80 as a string"},
        {"b80161", "long form for a short string"},
        {"b9000161", "length with a leading zero"},
        {"f80100", "long list form for a short list"},
        {"83636174ff", "trailing bytes"},
        {"846361", "truncated payload"},
        {"c3836361", "list payload overruns"},
        {"c2c5", "nested item overruns its list"},
        {"", "empty input"},
        {"bf", "truncated length"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *d;
        size_t n;
        CHECK(ovt_hex_decode_alloc(&d, &n, bad[i].hex) == 0);
        CHECK_MSG(chain_rlp_decode_whole(&item, d, n) == OVT_EFORMAT, "accepted %s (%s)", bad[i].hex, bad[i].why);
        free(d);
    }
    /* Integers: leading zeros and oversize are rejected. */
    uint64_t v;
    const uint8_t lead0[] = {0x82, 0x00, 0x80};
    CHECK(chain_rlp_decode_whole(&item, lead0, 3) == 0);
    CHECK(chain_rlp_get_uint(&v, &item) == OVT_EFORMAT);
    const uint8_t nine[] = {0x89, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(chain_rlp_decode_whole(&item, nine, sizeof nine) == 0);
    CHECK(chain_rlp_get_uint(&v, &item) == OVT_EFORMAT);
    const uint8_t ok[] = {0x82, 0x01, 0x00};
    CHECK(chain_rlp_decode_whole(&item, ok, 3) == 0 && chain_rlp_get_uint(&v, &item) == 0 && v == 256);
    /* Deep nesting is bounded. */
    uint8_t deep[100];
    memset(deep, 0xc1, 99);
    deep[99] = 0xc0;
    CHECK(chain_rlp_decode_whole(&item, deep, 100) == OVT_EFORMAT);
}

static void test_tx_vector(void)
{
    chain_privkey k;
    CHECK(chain_key_from_hex(&k, KEY0) == 0);
    uint8_t *calldata;
    size_t n;
    CHECK(ovt_hex_decode_alloc(&calldata, &n, COMMIT_CALLDATA) == 0);
    chain_tx tx = {0};
    tx.type = CHAIN_TX_EIP1559;
    tx.chain_id = 31337;
    tx.nonce = 0;
    tx.max_priority_fee_per_gas = 1000000000;
    tx.max_fee_per_gas = 2000000000;
    tx.gas_limit = 100000;
    tx.has_to = 1;
    CHECK(chain_address_from_string(&tx.to, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8") == 0);
    tx.value = chain_u256_from_u64(1000000000000000ULL);
    tx.data = calldata;
    tx.data_len = n;
    ovt_hash h;
    CHECK(chain_tx_signing_hash(&h, &tx) == 0);
    CHECK(hex_eq(h.b, 32, "783c155bf90efc9a42174ec9cef1c260f1f23173f652e30f9e7f7f758cd3de02"));
    chain_buf raw;
    chain_buf_init(&raw);
    CHECK(chain_tx_sign(&raw, &h, &tx, &k) == 0);
    CHECK(hex_eq(raw.data, raw.len,
                 "02f8d9827a6980843b9aca008477359400830186a09470997970c51812dc3a010c7d01b50e0d17dc79c8870"
                 "38d7ea4c68000b864d49f43e7aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "00000000000000000000000000000000000000000000000000000000000000074e03657aea45a94fc7d47ba8"
                 "26c8d667c0d1e6e33a64a036ec44f58fa12d6c45c080a065e7a0bb3c100cc6927e9c3235dfb407628d8e514e"
                 "865246abc2c9f0ddb39922a06224abfb7ebd129b0f93ad82669bfd70d3826dfd950152ca185186dca4b8bec9"));
    CHECK(hex_eq(h.b, 32, "184e8b69a6f438926ffe37df07b17b6c5f0e70bceaa6a206a1d4bcc83b588813"));
    /* Decoding the raw bytes gives the fields and the sender back. */
    chain_tx back;
    chain_sig sig;
    chain_address sender, me;
    CHECK(chain_tx_decode_signed(&back, &sig, &sender, raw.data, raw.len) == 0);
    CHECK(chain_key_address(&me, &k) == 0 && chain_address_eq(&sender, &me));
    CHECK(back.nonce == 0 && back.gas_limit == 100000 && back.data_len == n && back.has_to);
    /* One flipped byte in the signature recovers someone else or fails. */
    raw.data[raw.len - 1] ^= 1;
    int rc = chain_tx_decode_signed(&back, &sig, &sender, raw.data, raw.len);
    CHECK(rc != 0 || !chain_address_eq(&sender, &me));
    chain_buf_free(&raw);
    free(calldata);
}

static void test_personal_sign(void)
{
    chain_privkey k;
    CHECK(chain_key_from_hex(&k, KEY0) == 0);
    ovt_hash h;
    chain_personal_hash(&h, "hello", 5);
    CHECK(hex_eq(h.b, 32, "50b2c43fd39106bafbba0da34fc430e1f91e3c96ea2acee2bc34119f92b37750"));
    chain_sig sig;
    uint8_t rsv[65];
    CHECK(chain_personal_sign(&sig, &k, "hello", 5) == 0);
    chain_sig_to_rsv(rsv, &sig);
    CHECK(hex_eq(rsv, 65,
                 "f16ea9a3478698f695fd1401bfe27e9e4a7e8e3da94aa72b021125e31fa899cc573c48ea3fe1d4ab61a9db"
                 "10c19032026e3ed2dbccba5a178235ac27f94504311c"));
    chain_address rec, me;
    chain_sig parsed;
    CHECK(chain_sig_from_rsv(&parsed, rsv) == 0);
    CHECK(chain_recover_address(&rec, &parsed, &h) == 0);
    CHECK(chain_key_address(&me, &k) == 0 && chain_address_eq(&rec, &me));
    rsv[64] = 29;
    CHECK(chain_sig_from_rsv(&parsed, rsv) == OVT_ECRYPTO);
    /* High-s form of the same signature (s' = n - s) is rejected. */
    static const uint8_t order[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xfe, 0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48,
                                      0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41};
    chain_sig high = sig;
    int borrow = 0;
    for (int i = 31; i >= 0; i--) {
        int d = order[i] - sig.s[i] - borrow;
        borrow = d < 0;
        high.s[i] = (uint8_t)(d + (borrow ? 256 : 0));
    }
    high.recid ^= 1;
    CHECK(chain_recover_address(&rec, &high, &h) == OVT_ECRYPTO);
}

static void test_eip712(void)
{
    chain_privkey k;
    chain_address verifying;
    CHECK(chain_key_from_hex(&k, KEY0) == 0);
    CHECK(chain_address_from_string(&verifying, "0x5FbDB2315678afecb367f032d93F642f64180aa3") == 0);
    ovt_hash dom, st, dig, A, D;
    chain_eip712_domain_separator(&dom, "Commit", "1", 31337, &verifying);
    CHECK(hex_eq(dom.b, 32, "16968d3b043c0f1d63ecc1a87c82e01ed0c6eed6a28427117b057e9509414716"));
    memset(A.b, 0xaa, 32);
    chain_keccak256(&D, "abc", 3);
    chain_abi_enc enc;
    chain_buf fields;
    chain_abi_enc_init(&enc);
    chain_buf_init(&fields);
    chain_abi_put_bytes32(&enc, &A);
    chain_abi_put_uint(&enc, 7);
    chain_abi_put_bytes32(&enc, &D);
    CHECK(chain_abi_enc_finish(&enc, &fields, NULL) == 0);
    CHECK(chain_eip712_hash_struct(&st, "Commitment(bytes32 root,uint64 seq,bytes32 digest)", fields.data,
                                   fields.len) == 0);
    CHECK(hex_eq(st.b, 32, "3fa06f5b26d0a7a8c1f28c486b908614d6fa01a82320bb5cfe669c9e6ca2f4a0"));
    chain_eip712_digest(&dig, &dom, &st);
    CHECK(hex_eq(dig.b, 32, "689e19360cfb77e4e2cffbae783ffedf86b64c75bc20697861291d148c99f60d"));
    chain_sig sig;
    uint8_t rsv[65];
    CHECK(chain_sign_hash(&sig, &k, &dig) == 0);
    chain_sig_to_rsv(rsv, &sig);
    CHECK(hex_eq(rsv, 65,
                 "f3dd6e4d724ad1d28f080e14d08f1d55089d6e51fe54349da1331fd434fc01c75b54f30cf12429c65cfb87"
                 "a1518a9617d8461989656632ca070c2ff787ee17561c"));
    CHECK(chain_eip712_hash_struct(&st, "X(uint8 a)", fields.data, 33) == OVT_EINVAL);
    chain_abi_enc_free(&enc);
    chain_buf_free(&fields);
}

static void test_u256(void)
{
    chain_u256 v;
    char s[80];
    CHECK(chain_u256_from_dec(&v, "115792089237316195423570985008687907853269984665640564039457584007913129639935") == 0);
    for (int i = 0; i < 32; i++)
        CHECK(v.b[i] == 0xff);
    chain_u256_to_dec(s, &v);
    CHECK(strcmp(s, "115792089237316195423570985008687907853269984665640564039457584007913129639935") == 0);
    CHECK(chain_u256_from_dec(&v, "115792089237316195423570985008687907853269984665640564039457584007913129639936") ==
          OVT_EINVAL);
    CHECK(chain_u256_from_dec(&v, "12a") == OVT_EINVAL);
    CHECK(chain_u256_from_dec(&v, "") == OVT_EINVAL);
    CHECK(chain_u256_from_dec(&v, "18446744073709551616") == 0);
    uint64_t u;
    CHECK(chain_u256_to_u64(&u, &v) == OVT_EINVAL);
    CHECK(chain_u256_from_dec(&v, "0") == 0 && chain_u256_is_zero(&v));
    chain_u256_to_dec(s, &v);
    CHECK(strcmp(s, "0") == 0);
}

int main(void)
{
    CHECK_RUN(test_keccak());
    CHECK_RUN(test_addresses());
    CHECK_RUN(test_abi_vectors());
    CHECK_RUN(test_abi_dynamic_arrays());
    CHECK_RUN(test_revert());
    CHECK_RUN(test_rlp());
    CHECK_RUN(test_tx_vector());
    CHECK_RUN(test_personal_sign());
    CHECK_RUN(test_eip712());
    CHECK_RUN(test_u256());
    return check_done();
}
