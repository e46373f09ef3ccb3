/* chain/ against a real anvil started by this test on a free loopback port:
 * typed RPC helpers, transfers and a contract deployment confirmed through
 * the transaction manager, an event read back with eth_getLogs and decoded,
 * revert reasons (string and custom error, before sending and after mining),
 * a stuck transaction replaced with raised fees, "nonce too low" recovery,
 * confirmations, and anvil killed during a receipt wait. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain/abi.h"
#include "chain/keccak.h"
#include "chain/rlp.h"
#include "chain/rpc.h"
#include "chain/txm.h"
#include "check.h"
#include "common/fileio.h"
#include "support/anvil.h"
#include "support/proc.h"

static const char *KEY0 = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
static const char *KEY1 = "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
static const char *const custom_errors[] = {"WrongValue(uint64)", NULL};

static tsup_anvil node;
static chain_rpc *rpc;

/* A raw call whose result the test ignores (anvil_* / evm_* helpers). */
static int raw(const char *method, json_t *params)
{
    json_t *res;
    int rc = chain_rpc_call(rpc, &res, method, params);
    json_decref(res);
    if (rc)
        fprintf(stderr, "%s: %s\n", method, ovt_errmsg());
    return rc;
}

/* Automine mines a transaction, though not necessarily before the send
 * returns: polls for its receipt for up to 5 s. Returns 1 when found. */
static int wait_mined(const ovt_hash *tx, chain_receipt *r)
{
    int found = 0;
    for (int tries = 0; tries < 100 && !found; tries++) {
        if (chain_rpc_receipt(rpc, r, &found, tx) != 0)
            return 0;
        if (!found)
            usleep(50 * 1000);
    }
    return found;
}

static void calldata_store(chain_buf *out, const ovt_hash *value, const char *note)
{
    uint8_t sel[4];
    chain_abi_enc enc;
    chain_abi_selector(sel, "store(bytes32,bytes)");
    chain_abi_enc_init(&enc);
    chain_abi_put_bytes32(&enc, value);
    chain_abi_put_bytes(&enc, note, strlen(note));
    if (chain_abi_enc_finish(&enc, out, sel) != 0)
        abort();
    chain_abi_enc_free(&enc);
}

static void calldata_fail(chain_buf *out, uint64_t x)
{
    uint8_t sel[4];
    chain_abi_enc enc;
    chain_abi_selector(sel, "fail(uint64)");
    chain_abi_enc_init(&enc);
    chain_abi_put_uint(&enc, x);
    if (chain_abi_enc_finish(&enc, out, sel) != 0)
        abort();
    chain_abi_enc_free(&enc);
}

static void test_basics(const chain_address *a0)
{
    uint64_t id, block, nonce;
    chain_u256 bal;
    char dec[80];
    CHECK(chain_rpc_chain_id(rpc, &id) == 0 && id == 31337);
    CHECK(chain_rpc_block_number(rpc, &block) == 0 && block == 0);
    CHECK(chain_rpc_nonce(rpc, &nonce, a0, NULL) == 0 && nonce == 0);
    CHECK(chain_rpc_nonce(rpc, &nonce, a0, "pending") == 0 && nonce == 0);
    CHECK(chain_rpc_balance(rpc, &bal, a0, NULL) == 0);
    chain_u256_to_dec(dec, &bal);
    CHECK_MSG(strcmp(dec, "10000000000000000000000") == 0, "balance %s", dec); /* anvil's 10000 ETH */
    uint64_t base, tip, prio;
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 4, 50.0) == 0 && base > 0);
    CHECK(chain_rpc_max_priority_fee(rpc, &prio) == 0);
    /* Block headers: genesis, then time moved on by evm_increaseTime. */
    chain_block_header h0, h1;
    int found;
    CHECK(chain_rpc_block_header(rpc, &h0, &found, "0x0") == 0 && found && h0.number == 0 && h0.base_fee > 0);
    CHECK(raw("evm_increaseTime", json_pack("[i]", 3600)) == 0 && raw("evm_mine", NULL) == 0);
    CHECK(chain_rpc_block_header(rpc, &h1, &found, NULL) == 0 && found && h1.number == 1);
    CHECK(memcmp(h1.parent_hash.b, h0.hash.b, 32) == 0 && h1.timestamp >= h0.timestamp + 3600);
    CHECK(chain_rpc_block_header(rpc, &h1, &found, "0x100") == 0 && !found);
    /* An unknown method is a node error with the node's words. */
    json_t *res;
    CHECK(chain_rpc_call(rpc, &res, "eth_noSuchMethod", NULL) == OVT_ERPC);
    CHECK(chain_rpc_last_error(rpc)->is_node_error);
}

static void test_transfer(chain_txm *m, const chain_address *a1)
{
    chain_u256 before, after, value = chain_u256_from_u64(1234567890123ULL);
    chain_receipt r;
    CHECK(chain_rpc_balance(rpc, &before, a1, NULL) == 0);
    int rc = chain_txm_send(m, &r, a1, &value, NULL, 0);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(r.status == 1 && r.gas_used == 21000 && chain_address_eq(&r.from, &m->from));
    CHECK(chain_rpc_balance(rpc, &after, a1, NULL) == 0);
    /* after - before == value, checked on the low 64 bits (the high ones match). */
    uint64_t lo_b = 0, lo_a = 0;
    for (int i = 24; i < 32; i++) {
        lo_b = lo_b << 8 | before.b[i];
        lo_a = lo_a << 8 | after.b[i];
    }
    CHECK(memcmp(before.b, after.b, 16) == 0 && lo_a - lo_b == 1234567890123ULL);
    chain_receipt_free(&r);
}

/* Deploys ChainTest; checks the address against `cast compute-address`. */
static int deploy(chain_txm *m, chain_address *contract)
{
    uint8_t *file, *code;
    size_t flen, clen;
    if (ovt_read_file(CHAIN_TEST_BIN, &file, &flen, 1 << 20) != 0) {
        fprintf(stderr, "%s\n", ovt_errmsg());
        return -1;
    }
    while (flen && (file[flen - 1] == '\n' || file[flen - 1] == ' '))
        file[--flen] = '\0';
    int rc = ovt_hex_decode_alloc(&code, &clen, (char *)file);
    free(file);
    if (rc)
        return rc;
    uint64_t nonce;
    CHECK(chain_rpc_nonce(rpc, &nonce, &m->from, "pending") == 0);
    chain_receipt r;
    rc = chain_txm_send(m, &r, NULL, NULL, code, clen);
    free(code);
    CHECK_MSG(rc == 0, "deploy: %s", ovt_errmsg());
    if (rc)
        return rc;
    CHECK(r.status == 1 && r.has_contract_address);
    *contract = r.contract_address;
    char from_s[43], nonce_s[24], addr_s[43], *out = NULL;
    chain_address_to_string(from_s, &m->from);
    snprintf(nonce_s, sizeof nonce_s, "%llu", (unsigned long long)nonce);
    chain_address_to_string(addr_s, contract);
    CHECK(tsup_runl(&out, getenv("OVT_CAST"), "compute-address", "--nonce", nonce_s, from_s, NULL) == 0);
    CHECK_MSG(out && strstr(out, addr_s) != NULL, "cast: %s ours: %s", out, addr_s);
    free(out);
    chain_receipt_free(&r);
    return 0;
}

static void test_events(chain_txm *m, const chain_address *contract)
{
    ovt_hash value;
    chain_keccak256(&value, "state", 5);
    chain_buf cd;
    chain_buf_init(&cd);
    calldata_store(&cd, &value, "first note");
    chain_receipt r;
    uint64_t from_block;
    CHECK(chain_rpc_block_number(rpc, &from_block) == 0);
    CHECK(chain_txm_send(m, &r, contract, NULL, cd.data, cd.len) == 0);
    CHECK(r.nlogs == 1);
    chain_buf_free(&cd);
    calldata_store(&cd, &value, "second");
    chain_receipt r2;
    CHECK(chain_txm_send(m, &r2, contract, NULL, cd.data, cd.len) == 0);
    chain_buf_free(&cd);
    /* A few empty blocks, then read the range back in chunks of 2 blocks. */
    CHECK(raw("anvil_mine", json_pack("[s]", "0x3")) == 0);
    uint64_t head;
    CHECK(chain_rpc_block_number(rpc, &head) == 0);
    ovt_hash topic0;
    chain_abi_event_topic(&topic0, "Stored(address,uint64,bytes32,bytes)");
    chain_log_filter f = {0};
    f.address = contract;
    f.topics[0] = &topic0;
    f.ntopics = 1;
    f.from_block = from_block;
    f.to_block = head;
    f.chunk = 2;
    chain_log *logs;
    size_t n;
    int rc = chain_rpc_get_logs(rpc, &logs, &n, &f);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK_EQ_U64(n, 2);
    if (rc == 0 && n == 2) {
        chain_abi_dec dec;
        ovt_hash v;
        const uint8_t *note;
        size_t len;
        CHECK(chain_abi_decode_log(&dec, &logs[1], "Stored(address,uint64,bytes32,bytes)", 2) == 0);
        CHECK(chain_abi_get_bytes32(&dec, 0, &v) == 0 && memcmp(v.b, value.b, 32) == 0);
        CHECK(chain_abi_get_bytes(&dec, 1, &note, &len) == 0 && len == 6 && memcmp(note, "second", 6) == 0);
        /* Indexed: who (topic 1) and seq (topic 2). */
        chain_abi_dec tdec;
        chain_address who;
        uint64_t seq;
        chain_abi_dec_init(&tdec, logs[1].topics[1].b, 64);
        CHECK(chain_abi_get_address(&tdec, 0, &who) == 0 && chain_address_eq(&who, &m->from));
        CHECK(chain_abi_get_uint(&tdec, 1, &seq) == 0 && seq == 2);
        CHECK(memcmp(logs[0].tx_hash.b, r.tx_hash.b, 32) == 0 && logs[1].block_number == r2.block_number);
        CHECK(chain_abi_decode_log(&dec, &logs[1], "Other(uint64)", 0) == OVT_EFORMAT);
    }
    chain_logs_free(logs, n);

    /* Polling with a cursor: everything so far once, then nothing, then a new
     * event only once it has 2 confirmations. */
    uint64_t cursor = from_block;
    CHECK(chain_rpc_poll_logs(rpc, &logs, &n, &f, &cursor, 1) == 0 && n == 2 && cursor == head + 1);
    chain_logs_free(logs, n);
    CHECK(chain_rpc_poll_logs(rpc, &logs, &n, &f, &cursor, 1) == 0 && n == 0 && cursor == head + 1);
    calldata_store(&cd, &value, "third");
    chain_receipt r3;
    CHECK(chain_txm_send(m, &r3, contract, NULL, cd.data, cd.len) == 0);
    chain_buf_free(&cd);
    CHECK(chain_rpc_poll_logs(rpc, &logs, &n, &f, &cursor, 2) == 0 && n == 0 && cursor == head + 1);
    CHECK(raw("evm_mine", NULL) == 0);
    CHECK(chain_rpc_poll_logs(rpc, &logs, &n, &f, &cursor, 2) == 0 && n == 1 && cursor == r3.block_number + 1);
    if (n == 1)
        CHECK(memcmp(logs[0].tx_hash.b, r3.tx_hash.b, 32) == 0);
    chain_logs_free(logs, n);
    chain_receipt_free(&r3);
    chain_receipt_free(&r);
    chain_receipt_free(&r2);
}

static void test_reverts(chain_txm *m, const chain_address *contract)
{
    chain_buf cd, out;
    chain_buf_init(&cd);
    chain_buf_init(&out);
    calldata_fail(&cd, 0);
    chain_call_msg msg = {&m->from, contract, NULL, cd.data, cd.len, 0};
    int rc = chain_rpc_eth_call(rpc, &out, &msg, NULL);
    CHECK(rc == OVT_EREVERT);
    CHECK_MSG(strstr(ovt_errmsg(), "x must not be zero") != NULL, "%s", ovt_errmsg());
    chain_buf_free(&cd);
    calldata_fail(&cd, 5);
    msg.data = cd.data;
    rc = chain_rpc_eth_call(rpc, &out, &msg, NULL);
    CHECK(rc == OVT_EREVERT);
    CHECK_MSG(strstr(ovt_errmsg(), "WrongValue(uint64)") != NULL, "%s", ovt_errmsg());
    /* The manager refuses to send what eth_call says reverts. */
    uint64_t nonce_before, nonce_after;
    CHECK(chain_rpc_nonce(rpc, &nonce_before, &m->from, "pending") == 0);
    chain_receipt r;
    rc = chain_txm_send(m, &r, contract, NULL, cd.data, cd.len);
    CHECK(rc == OVT_EREVERT && strstr(ovt_errmsg(), "WrongValue") != NULL);
    CHECK(chain_rpc_nonce(rpc, &nonce_after, &m->from, "pending") == 0 && nonce_after == nonce_before);
    chain_buf_free(&cd);

    /* Mined revert: storeIfEven passes eth_call while seq is even, but a
     * store() from another account with a higher tip is mined first in the
     * same block and makes seq odd. */
    uint8_t sel[4];
    /* seq must be even to start with: read it with the public getter. */
    chain_abi_selector(sel, "seq()");
    chain_call_msg get = {NULL, contract, NULL, sel, 4, 0};
    chain_abi_dec dec;
    uint64_t seq = 1;
    chain_buf_free(&out);
    CHECK(chain_rpc_eth_call(rpc, &out, &get, NULL) == 0);
    chain_abi_dec_init(&dec, out.data, out.len);
    CHECK(chain_abi_get_uint(&dec, 0, &seq) == 0);
    if (seq % 2) {
        ovt_hash zero = {{0}};
        calldata_store(&cd, &zero, "make seq even");
        CHECK(chain_txm_send(m, &r, contract, NULL, cd.data, cd.len) == 0);
        chain_receipt_free(&r);
        chain_buf_free(&cd);
    }
    chain_abi_selector(sel, "storeIfEven()");
    chain_txm_pending p, q;
    chain_txm m1;
    chain_privkey k1;
    CHECK(chain_key_from_hex(&k1, KEY1) == 0);
    CHECK(chain_txm_init(&m1, rpc, &k1, NULL) == 0);
    CHECK(raw("evm_setAutomine", json_pack("[b]", 0)) == 0);
    CHECK(chain_txm_prepare(m, &p, contract, NULL, sel, 4) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    ovt_hash value = {{0}};
    calldata_store(&cd, &value, "x");
    m1.opts.min_priority_fee = p.tx.max_priority_fee_per_gas * 10 + 1000000000;
    CHECK(chain_txm_prepare(&m1, &q, contract, NULL, cd.data, cd.len) == 0);
    CHECK(chain_txm_submit(&m1, &q) == 0);
    CHECK(raw("evm_mine", NULL) == 0);
    CHECK(raw("evm_setAutomine", json_pack("[b]", 1)) == 0);
    CHECK(chain_txm_wait(&m1, &q, &r) == 0);
    chain_receipt_free(&r);
    rc = chain_txm_wait(m, &p, &r);
    CHECK(rc == OVT_EREVERT && r.status == 0);
    CHECK_MSG(strstr(ovt_errmsg(), "seq is odd") != NULL, "%s", ovt_errmsg());
    chain_txm_free(&m1);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
    chain_txm_pending_free(&q);
    chain_buf_free(&cd);
    chain_buf_free(&out);
}

static void test_replacement(chain_txm *m, const chain_address *a1)
{
    chain_u256 value = chain_u256_from_u64(1000);
    chain_txm_pending p;
    chain_receipt r;
    CHECK(raw("evm_setAutomine", json_pack("[b]", 0)) == 0);
    CHECK(chain_txm_prepare(m, &p, a1, &value, NULL, 0) == 0);
    /* Sending the same version twice is fine ("already known"). */
    CHECK(chain_txm_submit(m, &p) == 0);
    uint64_t tip0 = p.tx.max_priority_fee_per_gas, max0 = p.tx.max_fee_per_gas;
    int found = 1;
    CHECK(chain_rpc_receipt(rpc, &r, &found, &p.hashes[0]) == 0 && !found);
    /* Stuck: replace it with raised fees. */
    int rc = chain_txm_bump(m, &p);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(p.nversions == 2 && memcmp(p.hashes[0].b, p.hashes[1].b, 32) != 0);
    CHECK(p.tx.max_priority_fee_per_gas * 8 >= tip0 * 9 && p.tx.max_fee_per_gas * 8 >= max0 * 9);
    CHECK(raw("evm_mine", NULL) == 0);
    CHECK(chain_txm_wait(m, &p, &r) == 0);
    CHECK(memcmp(r.tx_hash.b, p.hashes[1].b, 32) == 0); /* the replacement was mined */
    chain_receipt_free(&r);
    CHECK(chain_rpc_receipt(rpc, &r, &found, &p.hashes[0]) == 0 && !found);
    chain_txm_pending_free(&p);

    /* Automatic bump inside the wait: bump_after 200 ms, mined by a later evm_mine. */
    m->opts.bump_after_ms = 200;
    m->opts.receipt_timeout_ms = 1500;
    long interval = m->block_interval_ms;
    m->block_interval_ms = 1; /* as if blocks came fast: the bump is not held back to 3 block intervals */
    CHECK(chain_txm_prepare(m, &p, a1, &value, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    rc = chain_txm_wait(m, &p, &r); /* nothing mines: times out after bumping */
    CHECK(rc == OVT_ETIMEOUT && p.nversions >= 2);
    CHECK_MSG(strstr(ovt_errmsg(), "not confirmed within") != NULL || strstr(ovt_errmsg(), "fee bumps") != NULL,
              "%s", ovt_errmsg());
    CHECK(raw("evm_mine", NULL) == 0);
    m->opts.receipt_timeout_ms = 10000;
    CHECK(chain_txm_wait(m, &p, &r) == 0 && memcmp(r.tx_hash.b, p.hashes[p.nversions - 1].b, 32) == 0);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
    m->opts.bump_after_ms = 20000;
    m->block_interval_ms = interval;
    CHECK(raw("evm_setAutomine", json_pack("[b]", 1)) == 0);
}

static void test_nonce_too_low(chain_txm *m, const chain_address *a1)
{
    /* Another manager with the same key uses the nonce p was prepared with. */
    chain_txm other;
    chain_privkey k;
    chain_u256 value = chain_u256_from_u64(7);
    chain_txm_pending p;
    chain_receipt r;
    CHECK(chain_key_from_hex(&k, KEY0) == 0);
    CHECK(chain_txm_init(&other, rpc, &k, NULL) == 0);
    CHECK(chain_txm_prepare(m, &p, a1, &value, NULL, 0) == 0);
    uint64_t planned = p.tx.nonce;
    /* (a different value: the same fields would sign to the very same transaction) */
    chain_u256 other_value = chain_u256_from_u64(8);
    CHECK(chain_txm_send(&other, &r, a1, &other_value, NULL, 0) == 0);
    chain_receipt_free(&r);
    int rc = chain_txm_submit(m, &p);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(p.tx.nonce == planned + 1);
    CHECK(chain_txm_wait(m, &p, &r) == 0);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
    chain_txm_free(&other);
    ovt_wipe(&k, sizeof k);
}

static void test_confirmations(chain_txm *m, const chain_address *a1)
{
    chain_u256 value = chain_u256_from_u64(1);
    chain_txm_pending p;
    chain_receipt r;
    m->opts.confirmations = 3;
    m->opts.receipt_timeout_ms = 600;
    CHECK(chain_txm_prepare(m, &p, a1, &value, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    CHECK(wait_mined(&p.hashes[0], &r));
    chain_receipt_free(&r);
    /* Mined (automine) but only 1 deep: times out, clearly. */
    CHECK(chain_txm_wait(m, &p, &r) == OVT_ETIMEOUT);
    CHECK(strstr(ovt_errmsg(), "not confirmed") != NULL);
    CHECK(raw("anvil_mine", json_pack("[s]", "0x2")) == 0);
    CHECK(chain_txm_wait(m, &p, &r) == 0 && r.status == 1);
    chain_receipt_free(&r);
    chain_txm_pending_free(&p);
    m->opts.confirmations = 1;
    m->opts.receipt_timeout_ms = 120000;
}

/* A legacy EIP-155 transaction signed by chain_tx_sign is accepted and mined,
 * and anvil reports the hash we computed. */
static void test_legacy_raw(chain_txm *m, const chain_address *a1)
{
    uint64_t nonce, base, tip;
    CHECK(chain_rpc_nonce(rpc, &nonce, &m->from, "pending") == 0);
    CHECK(chain_rpc_fee_history(rpc, &base, &tip, 1, 50) == 0);
    chain_tx tx = {0};
    tx.type = CHAIN_TX_LEGACY;
    tx.chain_id = 31337;
    tx.nonce = nonce;
    tx.gas_price = 2 * base + 1000000000;
    tx.gas_limit = 21000;
    tx.has_to = 1;
    tx.to = *a1;
    tx.value = chain_u256_from_u64(5);
    chain_buf raw;
    ovt_hash ours, theirs;
    chain_buf_init(&raw);
    CHECK(chain_tx_sign(&raw, &ours, &tx, &m->key) == 0);
    int rc = chain_rpc_send_raw(rpc, &theirs, raw.data, raw.len);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    CHECK(memcmp(ours.b, theirs.b, 32) == 0);
    chain_receipt r;
    CHECK(wait_mined(&ours, &r) && r.status == 1);
    chain_receipt_free(&r);
    /* The same bytes again: the nonce is used now. */
    CHECK(chain_rpc_send_raw(rpc, &theirs, raw.data, raw.len) == OVT_ERPC);
    CHECK(chain_rpc_last_error(rpc)->is_node_error);
    chain_buf_free(&raw);
}

static void *kill_later(void *arg)
{
    usleep(400 * 1000);
    tsup_anvil_kill(arg);
    return NULL;
}

static void test_node_dies(chain_txm *m, const chain_address *a1)
{
    chain_u256 value = chain_u256_from_u64(1);
    chain_txm_pending p;
    chain_receipt r;
    CHECK(raw("evm_setAutomine", json_pack("[b]", 0)) == 0);
    CHECK(chain_txm_prepare(m, &p, a1, &value, NULL, 0) == 0);
    CHECK(chain_txm_submit(m, &p) == 0);
    pthread_t t;
    pthread_create(&t, NULL, kill_later, &node);
    m->opts.receipt_timeout_ms = 60000; /* the node's death must end the wait, not this */
    int rc = chain_txm_wait(m, &p, &r);
    pthread_join(t, NULL);
    CHECK(rc == OVT_EIO || rc == OVT_ETIMEOUT);
    CHECK_MSG(strstr(ovt_errmsg(), "cannot reach node http://127.0.0.1:") != NULL &&
                  strstr(ovt_errmsg(), "waiting for transaction 0x") != NULL,
              "%s", ovt_errmsg());
    printf("node killed during wait: %s\n", ovt_errmsg());
    chain_txm_pending_free(&p);
}

int main(void)
{
    if (tsup_anvil_start(&node, NULL) != 0)
        return 1;
    chain_rpc_opts o;
    chain_rpc_opts_default(&o);
    o.custom_errors = custom_errors;
    o.timeout_ms = 10000;
    if (chain_rpc_open(&rpc, node.url, &o) != 0) {
        tsup_anvil_stop(&node);
        return 1;
    }
    chain_privkey k0, k1;
    chain_address a0, a1, contract;
    CHECK(chain_key_from_hex(&k0, KEY0) == 0 && chain_key_address(&a0, &k0) == 0);
    CHECK(chain_key_from_hex(&k1, KEY1) == 0 && chain_key_address(&a1, &k1) == 0);
    CHECK_RUN(test_basics(&a0));
    chain_txm m;
    if (chain_txm_init(&m, rpc, &k0, NULL) == 0) {
        CHECK_RUN(test_transfer(&m, &a1));
        if (deploy(&m, &contract) == 0) {
            CHECK_RUN(test_events(&m, &contract));
            CHECK_RUN(test_reverts(&m, &contract));
        }
        CHECK_RUN(test_replacement(&m, &a1));
        CHECK_RUN(test_nonce_too_low(&m, &a1));
        CHECK_RUN(test_confirmations(&m, &a1));
        CHECK_RUN(test_legacy_raw(&m, &a1));
        CHECK_RUN(test_node_dies(&m, &a1));
        chain_txm_free(&m);
    } else {
        CHECK_MSG(0, "txm init: %s", ovt_errmsg());
    }
    ovt_wipe(&k0, sizeof k0);
    chain_rpc_close(rpc);
    tsup_anvil_stop(&node);
    return check_done();
}
