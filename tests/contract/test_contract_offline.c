/* The contract's C side without a chain: the Merkle helper against trees
 * written out by hand and against cast's keccak, calldata against
 * `cast calldata`, runId and the EIP-712 commitment against cast, event
 * decoding against `cast abi-encode-event`, and the C signatures against the
 * ABI JSON that solcjs produced from the Solidity source. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chain/arbitration.h"
#include "chain/keccak.h"
#include "chain/narrow.h"
#include "check.h"
#include "common/fileio.h"
#include "support/proc.h"
#include "util.h"

static const char *cast;

static void node(ovt_hash *out, const ovt_hash *l, const ovt_hash *r)
{
    chain_merkle_node_hash(out, l, r);
}

/* Trees of 2, 3 and 5 leaves, written out level by level. */
static void test_small_trees(void)
{
    ovt_hash leaf[5], zero = {{0}};
    for (int i = 0; i < 5; i++)
        tc_rnd_hash(&leaf[i]);
    chain_merkle *t;

    CHECK(chain_merkle_build(&t, leaf, 2) == 0);
    ovt_hash want;
    node(&want, &leaf[0], &leaf[1]);
    CHECK_MEM(chain_merkle_root(t)->b, want.b, 32);
    CHECK(chain_merkle_tree_depth(t) == 1);
    chain_merkle_free(t);

    /* 3 leaves: depth 2, leaf 3 is the zero word. */
    CHECK(chain_merkle_build(&t, leaf, 3) == 0);
    ovt_hash a, b;
    node(&a, &leaf[0], &leaf[1]);
    node(&b, &leaf[2], &zero);
    node(&want, &a, &b);
    CHECK_MEM(chain_merkle_root(t)->b, want.b, 32);
    CHECK(chain_merkle_tree_depth(t) == 2);
    ovt_hash l, r;
    CHECK(chain_merkle_children(t, &l, &r, 0, 0) == 0);
    CHECK_MEM(l.b, a.b, 32);
    CHECK_MEM(r.b, b.b, 32);
    CHECK(chain_merkle_children(t, &l, &r, 1, 1) == 0);
    CHECK_MEM(l.b, leaf[2].b, 32);
    CHECK_MEM(r.b, zero.b, 32);
    CHECK(chain_merkle_children(t, &l, &r, 2, 0) == OVT_EINVAL); /* leaves have no children */
    CHECK(chain_merkle_children(t, &l, &r, 1, 2) == OVT_EINVAL); /* no node 2 at depth 1 */
    chain_merkle_free(t);

    /* 5 leaves: depth 3, leaves 5..7 padding; the right half is one real
     * leaf and three zero words. */
    CHECK(chain_merkle_build(&t, leaf, 5) == 0);
    ovt_hash n01, n23, n45, z2, left, right, z1;
    node(&n01, &leaf[0], &leaf[1]);
    node(&n23, &leaf[2], &leaf[3]);
    node(&n45, &leaf[4], &zero);
    node(&z1, &zero, &zero);
    node(&z2, &n45, &z1);
    node(&left, &n01, &n23);
    right = z2;
    node(&want, &left, &right);
    CHECK_MEM(chain_merkle_root(t)->b, want.b, 32);
    CHECK(chain_merkle_tree_depth(t) == 3);
    ovt_hash got;
    CHECK(chain_merkle_node(t, &got, 2, 3) == 0); /* wholly padding */
    CHECK_MEM(got.b, z1.b, 32);
    CHECK(chain_merkle_node(t, &got, 3, 7) == 0);
    CHECK_MEM(got.b, zero.b, 32);
    CHECK(chain_merkle_node(t, &got, 3, 8) == OVT_EINVAL);
    CHECK(chain_merkle_node(t, &got, 4, 0) == OVT_EINVAL);
    ovt_hash proof[3];
    CHECK(chain_merkle_proof(t, proof, 4) == 0);
    CHECK_MEM(proof[0].b, zero.b, 32);
    CHECK_MEM(proof[1].b, z1.b, 32);
    CHECK_MEM(proof[2].b, left.b, 32);
    CHECK(chain_merkle_proof(t, proof, 5) == OVT_EINVAL); /* padding has no proof */
    chain_merkle_free(t);

    CHECK(chain_merkle_build(&t, leaf, 1) == OVT_EINVAL);
    CHECK(t == NULL);
    CHECK(chain_merkle_build(&t, leaf, 0) == OVT_EINVAL);

    CHECK(chain_merkle_depth(1) == 1);
    CHECK(chain_merkle_depth(2) == 2);
    CHECK(chain_merkle_depth(3) == 2);
    CHECK(chain_merkle_depth(4) == 3);
    CHECK(chain_merkle_depth(7) == 3);
    CHECK(chain_merkle_depth(8) == 4);
    CHECK(chain_merkle_depth(65540) == 17);
    CHECK(chain_merkle_depth(1u << 20) == 21);
    CHECK(chain_merkle_depth((1u << 20) - 1) == 20);
}

/* Every proof of a random tree verifies, a tampered one does not, and every
 * revealed pair of children hashes to its parent. */
static void test_proofs_and_children(size_t nleaves)
{
    ovt_hash *leaves = malloc(nleaves * sizeof *leaves);
    for (size_t i = 0; i < nleaves; i++)
        tc_rnd_hash(&leaves[i]);
    chain_merkle *t;
    CHECK(chain_merkle_build(&t, leaves, nleaves) == 0);
    unsigned depth = chain_merkle_tree_depth(t);
    ovt_hash proof[64];
    int ok = 1;
    for (size_t i = 0; i < nleaves; i++) {
        if (chain_merkle_proof(t, proof, i) != 0 ||
            chain_merkle_verify(chain_merkle_root(t), &leaves[i], i, proof, depth) != 0)
            ok = 0;
    }
    CHECK_MSG(ok, "a proof of a %zu-leaf tree failed", nleaves);
    size_t i = nleaves / 2;
    CHECK(chain_merkle_proof(t, proof, i) == 0);
    proof[depth - 1].b[5] ^= 1;
    CHECK(chain_merkle_verify(chain_merkle_root(t), &leaves[i], i, proof, depth) == OVT_ECRYPTO);
    proof[depth - 1].b[5] ^= 1;
    CHECK(chain_merkle_verify(chain_merkle_root(t), &leaves[i], i ^ 1, proof, depth) == OVT_ECRYPTO);

    /* children(round r, index k) hash to node(depth r, k) along a random path */
    uint64_t index = 0;
    for (unsigned r = 0; r < depth; r++) {
        ovt_hash parent, l, rr, h;
        CHECK(chain_merkle_node(t, &parent, r, index) == 0);
        CHECK(chain_merkle_children(t, &l, &rr, r, index) == 0);
        node(&h, &l, &rr);
        CHECK_MEM(h.b, parent.b, 32);
        index = 2 * index + (tc_rnd() & 1);
    }
    chain_merkle_free(t);
    free(leaves);
}

/* Leaf and node hashes against cast keccak over the bytes written out here. */
static void test_hashes_against_cast(void)
{
    ovt_hash run_id, l, r;
    chain_merkle_preimage pre;
    tc_rnd_hash(&run_id);
    tc_rnd_hash(&pre.state_hash);
    tc_rnd_hash(&pre.batch_hash);
    tc_rnd_hash(&pre.log_hash);
    tc_rnd_hash(&l);
    tc_rnd_hash(&r);
    uint64_t index = 0x0102030405060708ULL;

    char hx[3][70], rid[70], arg[600], *out = NULL;
    tc_hex0x(rid, run_id.b, 32);
    tc_hex0x(hx[0], pre.state_hash.b, 32);
    tc_hex0x(hx[1], pre.batch_hash.b, 32);
    tc_hex0x(hx[2], pre.log_hash.b, 32);
    snprintf(arg, sizeof arg, "0x00%s0102030405060708%s%s%s", rid + 2, hx[0] + 2, hx[1] + 2, hx[2] + 2);
    ovt_hash mine;
    chain_merkle_leaf_hash(&mine, &run_id, index, &pre);
    CHECK(tsup_runl(&out, cast, "keccak", arg, NULL) == 0);
    CHECK_MSG(tc_hex_eq(out, mine.b, 32), "leaf hash: cast %s", out ? out : "-");
    free(out);

    char lh[70], rh[70];
    tc_hex0x(lh, l.b, 32);
    tc_hex0x(rh, r.b, 32);
    snprintf(arg, sizeof arg, "0x01%s%s", lh + 2, rh + 2);
    chain_merkle_node_hash(&mine, &l, &r);
    CHECK(tsup_runl(&out, cast, "keccak", arg, NULL) == 0);
    CHECK_MSG(tc_hex_eq(out, mine.b, 32), "node hash: cast %s", out ? out : "-");
    free(out);

    /* a site tree's leaf (proof of replay) */
    snprintf(arg, sizeof arg, "0x02%s0102030405060708%s", rid + 2, lh + 2);
    chain_merkle_site_leaf_hash(&mine, &run_id, index, &l);
    CHECK(tsup_runl(&out, cast, "keccak", arg, NULL) == 0);
    CHECK_MSG(tc_hex_eq(out, mine.b, 32), "site leaf hash: cast %s", out ? out : "-");
    free(out);
}

static void random_params(chain_arb_params *p)
{
    memset(p, 0, sizeof *p);
    ovt_hash h;
    tc_rnd_hash(&h);
    memcpy(p->trainer.b, h.b, 20);
    tc_rnd_hash(&h);
    memcpy(p->auditor.b, h.b, 20);
    unsigned n = 1 + (unsigned)(tc_rnd() % CHAIN_ARB_MAX_ARBITERS);
    for (unsigned k = 0; k < n; k++) {
        tc_rnd_hash(&h);
        memcpy(p->arbiters[k].b, h.b, 20);
    }
    p->threshold = (unsigned)(tc_rnd() % 256);
    tc_rnd_hash(&h);
    memcpy(p->arbiter_bond.b + 20, h.b, 12);
    tc_rnd_hash(&p->config_hash);
    tc_rnd_hash(&p->dataset_hash);
    p->steps = tc_rnd() >> 16;
    p->commit_timeout = (uint32_t)tc_rnd();
    p->move_timeout = (uint32_t)tc_rnd();
    p->arbiter_timeout = (uint32_t)tc_rnd();
    tc_rnd_hash(&h);
    memcpy(p->trainer_bond.b + 20, h.b, 12);
    memcpy(p->auditor_bond.b + 20, h.b + 12, 12);
    p->nonce = tc_rnd();
}

/* The params tuple as cast writes it on the command line. */
static void params_arg(char *out, size_t cap, const chain_arb_params *p)
{
    char a[2][50], arb[5][50], c[70], d[70], tb[80], ab[80], bb[80];
    chain_address_to_string(a[0], &p->trainer);
    chain_address_to_string(a[1], &p->auditor);
    for (int k = 0; k < CHAIN_ARB_MAX_ARBITERS; k++)
        chain_address_to_string(arb[k], &p->arbiters[k]);
    tc_hex0x(c, p->config_hash.b, 32);
    tc_hex0x(d, p->dataset_hash.b, 32);
    chain_u256_to_dec(tb, &p->trainer_bond);
    chain_u256_to_dec(ab, &p->auditor_bond);
    chain_u256_to_dec(bb, &p->arbiter_bond);
    snprintf(out, cap, "(%s,%s,[%s,%s,%s,%s,%s],%s,%s,%llu,%u,%u,%u,%s,%s,%u,%s,%llu)", a[0], a[1], arb[0], arb[1],
             arb[2], arb[3], arb[4], c, d, (unsigned long long)p->steps, p->commit_timeout, p->move_timeout,
             p->arbiter_timeout, tb, ab, p->threshold, bb, (unsigned long long)p->nonce);
}

#define PARAMS_SIG                                                                                                   \
    "(address,address,address[5],bytes32,bytes32,uint64,uint32,uint32,uint32,uint96,uint96,uint8,uint96,uint64)"

static int same_calldata(const chain_buf *mine, const char *cast_out, const char *what)
{
    int ok = tc_hex_eq(cast_out, mine->data, mine->len);
    if (!ok)
        fprintf(stderr, "%s: cast %.200s\n", what, cast_out ? cast_out : "(none)");
    return ok;
}

static void test_calldata_against_cast(void)
{
    chain_arb_params p;
    random_params(&p);
    char params[1200], rid[70], root[70], l[70], r[70], e[70], *out = NULL;
    params_arg(params, sizeof params, &p);
    ovt_hash run_id, h_root, left, right, evidence;
    tc_rnd_hash(&run_id);
    tc_rnd_hash(&h_root);
    tc_rnd_hash(&left);
    tc_rnd_hash(&right);
    tc_rnd_hash(&evidence);
    tc_hex0x(rid, run_id.b, 32);
    tc_hex0x(root, h_root.b, 32);
    tc_hex0x(l, left.b, 32);
    tc_hex0x(r, right.b, 32);
    tc_hex0x(e, evidence.b, 32);
    chain_buf buf;

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_open(&buf, &p) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "open(" PARAMS_SIG ")", params, NULL) == 0);
    CHECK(same_calldata(&buf, out, "open"));
    free(out);
    chain_buf_free(&buf);

    uint8_t sig[65];
    for (int i = 0; i < 65; i++)
        sig[i] = (uint8_t)tc_rnd();
    char sighex[140];
    tc_hex0x(sighex, sig, 65);
    chain_buf_init(&buf);
    CHECK(chain_arb_encode_commit(&buf, &run_id, &h_root, sig) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "commit(bytes32,bytes32,bytes)", rid, root, sighex, NULL) == 0);
    CHECK(same_calldata(&buf, out, "commit"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_bisect(&buf, &run_id, 17, &left, &right) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "bisect(bytes32,uint8,bytes32,bytes32)", rid, "17", l, r, NULL) == 0);
    CHECK(same_calldata(&buf, out, "bisect"));
    free(out);
    chain_buf_free(&buf);
    chain_buf_init(&buf);
    CHECK(chain_arb_encode_bisect(&buf, &run_id, 256, &left, &right) == OVT_EINVAL);
    chain_buf_free(&buf);

    chain_merkle_preimage leaf = {left, right, evidence}, prev = {evidence, left, h_root};
    ovt_hash proof[3] = {left, right, run_id};
    char leafarg[300], prevarg[300], proofarg[300];
    snprintf(leafarg, sizeof leafarg, "(%s,%s,%s)", l, r, e);
    snprintf(prevarg, sizeof prevarg, "(%s,%s,%s)", e, l, root);
    snprintf(proofarg, sizeof proofarg, "[%s,%s,%s]", l, r, rid);
    chain_buf_init(&buf);
    CHECK(chain_arb_encode_reveal_leaf(&buf, &run_id, 3, &leaf, &prev, proof, 3) == 0);
    CHECK(tsup_runl(&out, cast, "calldata",
                    "revealLeaf(bytes32,uint8,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])", rid,
                    "3", leafarg, prevarg, proofarg, NULL) == 0);
    CHECK(same_calldata(&buf, out, "revealLeaf"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_reveal_site(&buf, &run_id, 3, &left, &leaf, &prev, proof, 3) == 0);
    CHECK(tsup_runl(&out, cast, "calldata",
                    "revealSite(bytes32,uint8,bytes32,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])",
                    rid, "3", l, leafarg, prevarg, proofarg, NULL) == 0);
    CHECK(same_calldata(&buf, out, "revealSite"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_commit_replay(&buf, &run_id, &h_root, &left, sig) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "commitReplay(bytes32,bytes32,bytes32,bytes)", rid, root, l, sighex,
                    NULL) == 0);
    CHECK(same_calldata(&buf, out, "commitReplay"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_reveal_sites(&buf, &run_id, &right) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "revealSites(bytes32,bytes32)", rid, r, NULL) == 0);
    CHECK(same_calldata(&buf, out, "revealSites"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_replays(&buf, &run_id) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "replays(bytes32)", rid, NULL) == 0);
    CHECK(same_calldata(&buf, out, "replays"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_verdict(&buf, &run_id, 1234567, CHAIN_ARB_FRAUDULENT_LOG, &evidence) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "verdict(bytes32,uint64,uint8,bytes32)", rid, "1234567", "5", e,
                    NULL) == 0);
    CHECK(same_calldata(&buf, out, "verdict"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_accept(&buf, &run_id) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "accept(bytes32)", rid, NULL) == 0);
    CHECK(same_calldata(&buf, out, "accept"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_commit_verdict(&buf, &run_id, &left) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "commitVerdict(bytes32,bytes32)", rid, l, NULL) == 0);
    CHECK(same_calldata(&buf, out, "commitVerdict"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_reveal_verdict(&buf, &run_id, 99, CHAIN_ARB_AUDITOR_RIGHT, &evidence, &right) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "revealVerdict(bytes32,uint64,uint8,bytes32,bytes32)", rid, "99", "3", e,
                    r, NULL) == 0);
    CHECK(same_calldata(&buf, out, "revealVerdict"));
    free(out);
    chain_buf_free(&buf);

    /* ballotHash: keccak of abi.encode(runId, arbiter, step, outcome, evidence, salt) */
    {
        char who[50], *enc = NULL, *hashed = NULL;
        chain_address_to_string(who, &p.arbiters[0]);
        CHECK(tsup_runl(&enc, cast, "abi-encode", "f(bytes32,address,uint64,uint8,bytes32,bytes32)", rid, who, "99",
                        "3", e, r, NULL) == 0);
        CHECK(tsup_runl(&hashed, cast, "keccak", enc ? enc : "0x", NULL) == 0);
        ovt_hash ballot;
        chain_arb_ballot_hash(&ballot, &run_id, &p.arbiters[0], 99, CHAIN_ARB_AUDITOR_RIGHT, &evidence, &right);
        CHECK_MSG(tc_hex_eq(hashed, ballot.b, 32), "ballotHash: cast %s", hashed ? hashed : "-");
        free(enc);
        free(hashed);
    }

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_timeout(&buf, &run_id) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "timeout(bytes32)", rid, NULL) == 0);
    CHECK(same_calldata(&buf, out, "timeout"));
    free(out);
    chain_buf_free(&buf);

    chain_buf_init(&buf);
    CHECK(chain_arb_encode_withdraw(&buf) == 0);
    CHECK(tsup_runl(&out, cast, "calldata", "withdraw()", NULL) == 0);
    CHECK(same_calldata(&buf, out, "withdraw"));
    free(out);
    chain_buf_free(&buf);

    /* runId: keccak of abi.encode(chainId, contract, params) */
    chain_address contract;
    memcpy(contract.b, h_root.b, 20);
    char caddr[50], tuple_sig[300];
    chain_address_to_string(caddr, &contract);
    snprintf(tuple_sig, sizeof tuple_sig, "f(uint256,address,%s)", PARAMS_SIG);
    CHECK(tsup_runl(&out, cast, "abi-encode", tuple_sig, "31337", caddr, params, NULL) == 0);
    char *hashed = NULL;
    CHECK(tsup_runl(&hashed, cast, "keccak", out ? out : "0x", NULL) == 0);
    ovt_hash mine;
    chain_arb_run_id(&mine, 31337, &contract, &p);
    CHECK_MSG(tc_hex_eq(hashed, mine.b, 32), "runId: cast %s", hashed ? hashed : "-");
    free(out);
    free(hashed);
}

/* The commitment signature equals what cast's EIP-712 signer produces for
 * the same typed data (both sign deterministically, RFC 6979). */
static void test_commitment_against_cast(void)
{
    chain_arb_params p;
    random_params(&p);
    p.steps = 1000;
    ovt_hash run_id, root;
    tc_rnd_hash(&run_id);
    tc_rnd_hash(&root);
    chain_address contract;
    memcpy(contract.b, run_id.b + 3, 20);
    chain_privkey key;
    CHECK(chain_key_from_hex(&key, "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d") == 0);
    uint8_t sig[65];
    CHECK(chain_arb_sign_commitment(sig, &key, 31337, &contract, &run_id, &root, &p) == 0);

    char caddr[50], rid[70], rt[70], ch[70], dh[70];
    chain_address_to_string(caddr, &contract);
    tc_hex0x(rid, run_id.b, 32);
    tc_hex0x(rt, root.b, 32);
    tc_hex0x(ch, p.config_hash.b, 32);
    tc_hex0x(dh, p.dataset_hash.b, 32);
    char path[] = "/tmp/ovt_typed_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f,
            "{\"types\":{\"EIP712Domain\":[{\"name\":\"name\",\"type\":\"string\"},{\"name\":\"version\",\"type\":"
            "\"string\"},{\"name\":\"chainId\",\"type\":\"uint256\"},{\"name\":\"verifyingContract\",\"type\":"
            "\"address\"}],\"Commitment\":[{\"name\":\"runId\",\"type\":\"bytes32\"},{\"name\":\"root\",\"type\":"
            "\"bytes32\"},{\"name\":\"steps\",\"type\":\"uint64\"},{\"name\":\"configHash\",\"type\":\"bytes32\"},"
            "{\"name\":\"datasetHash\",\"type\":\"bytes32\"}]},\"primaryType\":\"Commitment\",\"domain\":{\"name\":"
            "\"ovt\",\"version\":\"1\",\"chainId\":31337,\"verifyingContract\":\"%s\"},\"message\":{\"runId\":\"%s\","
            "\"root\":\"%s\",\"steps\":1000,\"configHash\":\"%s\",\"datasetHash\":\"%s\"}}",
            caddr, rid, rt, ch, dh);
    fclose(f);
    char *out = NULL;
    CHECK(tsup_runl(&out, cast, "wallet", "sign", "--private-key",
                    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", "--data", "--from-file", path,
                    NULL) == 0);
    CHECK_MSG(tc_hex_eq(out, sig, 65), "EIP-712 commitment signature: cast %s", out ? out : "-");
    free(out);
    unlink(path);
    ovt_wipe(&key, sizeof key);
}

/* Events written by cast decode to the same fields. */
static int parse_cast_event(const char *text, chain_log *log)
{
    memset(log, 0, sizeof *log);
    const char *p = text;
    while ((p = strstr(p, "[topic")) != NULL) {
        const char *hx = strstr(p, "0x");
        if (!hx || log->ntopics == 4 || strlen(hx) < 66)
            return -1;
        char word[67];
        memcpy(word, hx, 66);
        word[66] = '\0';
        if (ovt_hex_decode(log->topics[log->ntopics].b, 32, word) != 0)
            return -1;
        log->ntopics++;
        p = hx + 66;
    }
    const char *d = strstr(text, "[data]: ");
    if (!d)
        return -1;
    d += 8;
    size_t n = strcspn(d, "\n");
    char *hex = strndup(d, n);
    int rc = ovt_hex_decode_alloc(&log->data, &log->data_len, hex);
    free(hex);
    return rc;
}

static void test_events_against_cast(void)
{
    ovt_hash run_id, a, b, c;
    tc_rnd_hash(&run_id);
    tc_rnd_hash(&a);
    tc_rnd_hash(&b);
    tc_rnd_hash(&c);
    char rid[70], ah[70], bh[70], ch[70], party[50];
    tc_hex0x(rid, run_id.b, 32);
    tc_hex0x(ah, a.b, 32);
    tc_hex0x(bh, b.b, 32);
    tc_hex0x(ch, c.b, 32);
    chain_address who;
    memcpy(who.b, c.b + 7, 20);
    chain_address_to_string(party, &who);
    char *out = NULL;
    chain_log log;
    chain_arb_event ev;

    CHECK(tsup_runl(&out, cast, "abi-encode-event",
                    "LeafRevealed(bytes32 indexed,address indexed,uint64,bytes32,bytes32,bytes32)", rid, party,
                    "65541", ah, bh, ch, NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == 0);
    CHECK(ev.kind == CHAIN_ARB_EV_LEAF_REVEALED);
    CHECK_MEM(ev.run_id.b, run_id.b, 32);
    CHECK(chain_address_eq(&ev.u.leaf_revealed.party, &who));
    CHECK_EQ_U64(ev.u.leaf_revealed.step, 65541);
    CHECK_MEM(ev.u.leaf_revealed.leaf.state_hash.b, a.b, 32);
    CHECK_MEM(ev.u.leaf_revealed.leaf.batch_hash.b, b.b, 32);
    CHECK_MEM(ev.u.leaf_revealed.leaf.log_hash.b, c.b, 32);
    /* a log with one topic too few is malformed, not silently accepted */
    log.ntopics--;
    CHECK(chain_arb_decode_event(&ev, &log) == OVT_EFORMAT);
    chain_log_free(&log);
    free(out);

    CHECK(tsup_runl(&out, cast, "abi-encode-event", "Settled(bytes32 indexed,uint8,uint256,uint256)", rid, "8",
                    "1000000000000000000", "0", NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == 0);
    CHECK(ev.kind == CHAIN_ARB_EV_SETTLED && ev.u.settled.outcome == CHAIN_ARB_AUDITOR_TIMED_OUT);
    chain_u256 eth;
    CHECK(chain_u256_from_dec(&eth, "1000000000000000000") == 0);
    CHECK(chain_u256_cmp(&ev.u.settled.trainer_credit, &eth) == 0);
    CHECK(chain_u256_is_zero(&ev.u.settled.auditor_credit));
    chain_log_free(&log);
    free(out);

    /* an outcome beyond the enum is rejected */
    CHECK(tsup_runl(&out, cast, "abi-encode-event", "Settled(bytes32 indexed,uint8,uint256,uint256)", rid, "15",
                    "1", "2", NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == OVT_EFORMAT);
    chain_log_free(&log);
    free(out);

    CHECK(tsup_runl(&out, cast, "abi-encode-event",
                    "Descended(bytes32 indexed,uint8,uint64,bytes32,bytes32,uint64)", rid, "16", "65535", ah, bh,
                    "1700000000", NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == 0);
    CHECK(ev.kind == CHAIN_ARB_EV_DESCENDED && ev.u.descended.round == 16);
    CHECK_EQ_U64(ev.u.descended.index, 65535);
    CHECK_MEM(ev.u.descended.trainer_node.b, a.b, 32);
    CHECK_MEM(ev.u.descended.auditor_node.b, b.b, 32);
    CHECK_EQ_U64(ev.u.descended.deadline, 1700000000);
    chain_log_free(&log);
    free(out);

    /* RunOpened with its committee (address[5] inline) */
    {
        char arbs[300], a2[50];
        chain_address second;
        memcpy(second.b, a.b + 3, 20);
        chain_address_to_string(a2, &second);
        snprintf(arbs, sizeof arbs, "[%s,%s,0x0000000000000000000000000000000000000000,"
                 "0x0000000000000000000000000000000000000000,0x0000000000000000000000000000000000000000]", a2, party);
        CHECK(tsup_runl(&out, cast, "abi-encode-event",
                        "RunOpened(bytes32 indexed,address indexed,address indexed,address[5],uint8,uint96,bytes32,"
                        "bytes32,uint64,uint8,uint64)",
                        rid, party, a2, arbs, "2", "77000000000000000", ah, bh, "1000", "10", "4242", NULL) == 0);
        CHECK(out && parse_cast_event(out, &log) == 0);
        CHECK(chain_arb_decode_event(&ev, &log) == 0);
        CHECK(ev.kind == CHAIN_ARB_EV_RUN_OPENED);
        CHECK(chain_address_eq(&ev.u.run_opened.trainer, &who) && chain_address_eq(&ev.u.run_opened.auditor, &second));
        CHECK(chain_address_eq(&ev.u.run_opened.arbiters[0], &second));
        CHECK(chain_address_eq(&ev.u.run_opened.arbiters[1], &who));
        CHECK(chain_address_eq(&ev.u.run_opened.arbiters[2], &(chain_address){{0}}));
        CHECK(ev.u.run_opened.threshold == 2 && ev.u.run_opened.depth == 10);
        CHECK_EQ_U64(ev.u.run_opened.steps, 1000);
        CHECK_EQ_U64(ev.u.run_opened.nonce, 4242);
        chain_u256 bond;
        CHECK(chain_u256_from_dec(&bond, "77000000000000000") == 0);
        CHECK(chain_u256_cmp(&ev.u.run_opened.arbiter_bond, &bond) == 0);
        CHECK_MEM(ev.u.run_opened.config_hash.b, a.b, 32);
        CHECK_MEM(ev.u.run_opened.dataset_hash.b, b.b, 32);
        chain_log_free(&log);
        free(out);
    }
    CHECK(tsup_runl(&out, cast, "abi-encode-event", "ArbiterSettled(bytes32 indexed,address indexed,uint8,uint256,uint256)",
                    rid, party, "3", "5000", "2500", NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == 0);
    CHECK(ev.kind == CHAIN_ARB_EV_ARBITER_SETTLED && ev.u.arbiter_settled.verdict == CHAIN_ARB_AUDITOR_RIGHT);
    CHECK(chain_address_eq(&ev.u.arbiter_settled.arbiter, &who));
    CHECK(ev.u.arbiter_settled.forfeited.b[30] == 0x13 && ev.u.arbiter_settled.forfeited.b[31] == 0x88);
    CHECK(ev.u.arbiter_settled.reward.b[30] == 0x09 && ev.u.arbiter_settled.reward.b[31] == 0xc4);
    chain_log_free(&log);
    free(out);
    CHECK(tsup_runl(&out, cast, "abi-encode-event",
                    "VerdictRevealed(bytes32 indexed,address indexed,uint64,uint8,bytes32)", rid, party, "77", "5", ch,
                    NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == 0);
    CHECK(ev.kind == CHAIN_ARB_EV_VERDICT_REVEALED && ev.u.verdict_revealed.outcome == CHAIN_ARB_FRAUDULENT_LOG);
    CHECK_EQ_U64(ev.u.verdict_revealed.step, 77);
    CHECK_MEM(ev.u.verdict_revealed.evidence.b, c.b, 32);
    chain_log_free(&log);
    free(out);

    /* a log of some other contract's event */
    CHECK(tsup_runl(&out, cast, "abi-encode-event", "Transfer(address indexed,address indexed,uint256)", party,
                    party, "5", NULL) == 0);
    CHECK(out && parse_cast_event(out, &log) == 0);
    CHECK(chain_arb_decode_event(&ev, &log) == OVT_ENOTFOUND);
    chain_log_free(&log);
    free(out);
}

/* "name(type,...)" of an ABI entry, tuples expanded, as Solidity hashes it. */
static void abi_type(char *out, size_t cap, json_t *param);

static void abi_params(char *out, size_t cap, json_t *params)
{
    size_t i;
    json_t *p;
    strncat(out, "(", cap - strlen(out) - 1);
    json_array_foreach(params, i, p)
    {
        if (i)
            strncat(out, ",", cap - strlen(out) - 1);
        abi_type(out, cap, p);
    }
    strncat(out, ")", cap - strlen(out) - 1);
}

static void abi_type(char *out, size_t cap, json_t *param)
{
    const char *type = json_string_value(json_object_get(param, "type"));
    if (strncmp(type, "tuple", 5) == 0) {
        abi_params(out, cap, json_object_get(param, "components"));
        strncat(out, type + 5, cap - strlen(out) - 1); /* "[]" of tuple[] */
    } else {
        strncat(out, type, cap - strlen(out) - 1);
    }
}

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

static void test_abi_json(void)
{
    CHECK(strlen(chain_arb_abi_json) == chain_arb_abi_json_len);
    CHECK(strlen(chain_arb_bytecode_hex) == chain_arb_bytecode_hex_len);
    CHECK(chain_arb_bytecode_hex_len > 1000 && chain_arb_bytecode_hex_len % 2 == 0);
    json_error_t jerr;
    json_t *abi = json_loads(chain_arb_abi_json, 0, &jerr);
    CHECK_MSG(abi && json_is_array(abi), "embedded ABI JSON: %s", jerr.text);
    if (!abi)
        return;

    const char *events[CHAIN_ARB_EV_COUNT];
    for (int k = 0; k < CHAIN_ARB_EV_COUNT; k++)
        events[k] = chain_arb_event_signature((chain_arb_event_kind)k);
    size_t nerrors = 0;
    while (chain_arb_errors[nerrors])
        nerrors++;
    static const char *const functions[] = {
        "open(" PARAMS_SIG ")",
        "computeRunId(" PARAMS_SIG ")",
        "accept(bytes32)",
        "commitVerdict(bytes32,bytes32)",
        "revealVerdict(bytes32,uint64,uint8,bytes32,bytes32)",
        "getCommittee(bytes32)",
        "ballotHash(bytes32,address,uint64,uint8,bytes32,bytes32)",
        "commit(bytes32,bytes32,bytes)",
        "bisect(bytes32,uint8,bytes32,bytes32)",
        "revealLeaf(bytes32,uint8,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])",
        "verdict(bytes32,uint64,uint8,bytes32)",
        "timeout(bytes32)",
        "withdraw()",
        "getRun(bytes32)",
        "getGame(bytes32)",
        "credit(address)",
        "commitmentDigest(bytes32,bytes32)",
        "leafHash(bytes32,uint64,(bytes32,bytes32,bytes32))",
        "nodeHash(bytes32,bytes32)",
        "commitReplay(bytes32,bytes32,bytes32,bytes)",
        "revealSites(bytes32,bytes32)",
        "revealSite(bytes32,uint8,bytes32,(bytes32,bytes32,bytes32),(bytes32,bytes32,bytes32),bytes32[])",
        "replays(bytes32)",
        "siteLeafHash(bytes32,uint64,bytes32)",
        "extendVerdict(bytes32,uint64)",
    };
    size_t nfunctions = sizeof functions / sizeof functions[0];
    size_t seen_events = 0, seen_errors = 0, seen_functions = 0, i;
    json_t *entry;
    json_array_foreach(abi, i, entry)
    {
        const char *kind = json_string_value(json_object_get(entry, "type"));
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (!kind || !name)
            continue;
        char sig[512];
        snprintf(sig, sizeof sig, "%s", name);
        abi_params(sig, sizeof sig, json_object_get(entry, "inputs"));
        if (strcmp(kind, "event") == 0) {
            CHECK_MSG(in_list(sig, events, CHAIN_ARB_EV_COUNT), "event %s has no C binding", sig);
            seen_events++;
        } else if (strcmp(kind, "error") == 0) {
            CHECK_MSG(in_list(sig, chain_arb_errors, nerrors), "error %s is unknown to C", sig);
            seen_errors++;
        } else if (strcmp(kind, "function") == 0 && in_list(sig, functions, nfunctions)) {
            seen_functions++;
        }
    }
    CHECK_EQ_U64(seen_events, CHAIN_ARB_EV_COUNT);
    CHECK_EQ_U64(seen_errors, nerrors);
    CHECK_EQ_U64(seen_functions, nfunctions);
    json_decref(abi);
}

/* Words of a static ABI type: a tuple's, summed over its components. */
static size_t static_words(json_t *param)
{
    json_t *components = json_object_get(param, "components");
    if (!components)
        return 1;
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(components, i, c)
    {
        n += static_words(c);
    }
    return n;
}

/* The narrowing contract's ABI (issue 42) against chain/narrow.c: every
 * error known to C, every call C encodes present with that signature, and
 * getNarrow's game as many words as chain_narrow_decode_game reads. */
static void test_narrow_abi_json(void)
{
    CHECK(strlen(chain_narrow_abi_json) == chain_narrow_abi_json_len);
    json_error_t jerr;
    json_t *abi = json_loads(chain_narrow_abi_json, 0, &jerr);
    CHECK_MSG(abi && json_is_array(abi), "embedded narrowing ABI JSON: %s", jerr.text);
    if (!abi)
        return;
    size_t nerrors = 0;
    while (chain_narrow_errors[nerrors])
        nerrors++;
    static const char *const functions[] = {
        "start(bytes32)",
        "postTrace(bytes32,(bytes32,bytes32,bytes32),bytes32,uint64,bytes32[],bytes32[],uint64[])",
        "descend(bytes32,uint32,bytes32,bytes32)",
        "reveal(bytes32,uint32,bytes)",
        "compareStates(bytes32,uint32,bytes32[],uint64[],bytes32[],uint64[])",
        "postChunks(bytes32,uint32,bytes32,uint64,bytes32[])",
        "postElements(bytes32,uint32,bytes32)",
        "timeout(bytes32)",
        "getNarrow(bytes32)",
    };
    size_t nfunctions = sizeof functions / sizeof functions[0], seen_errors = 0, seen_functions = 0, i;
    json_t *entry;
    json_array_foreach(abi, i, entry)
    {
        const char *kind = json_string_value(json_object_get(entry, "type"));
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (!kind || !name)
            continue;
        char sig[512];
        snprintf(sig, sizeof sig, "%s", name);
        abi_params(sig, sizeof sig, json_object_get(entry, "inputs"));
        if (strcmp(kind, "error") == 0) {
            CHECK_MSG(in_list(sig, chain_narrow_errors, nerrors), "error %s is unknown to C", sig);
            seen_errors++;
        } else if (strcmp(kind, "function") == 0 && in_list(sig, functions, nfunctions)) {
            seen_functions++;
            if (strcmp(name, "getNarrow") == 0)
                CHECK_EQ_U64(static_words(json_array_get(json_object_get(entry, "outputs"), 0)), 51);
        }
    }
    CHECK_EQ_U64(seen_errors, nerrors);
    CHECK_EQ_U64(seen_functions, nfunctions);
    json_decref(abi);
}

static void test_names(void)
{
    CHECK(strcmp(chain_arb_outcome_name(CHAIN_ARB_TRAINER_ABSENT), "trainer-absent") == 0);
    CHECK(strcmp(chain_arb_outcome_name((chain_arb_outcome)99), "?") == 0);
    CHECK(strcmp(chain_arb_phase_name(CHAIN_ARB_PHASE_SETTLED), "settled") == 0);
    uint8_t data[4 + 64];
    chain_abi_selector(data, "BadChildren(bytes32,bytes32)");
    memset(data + 4, 0x11, 64);
    char name[64], text[300];
    chain_arb_revert_name(name, sizeof name, data, sizeof data);
    CHECK(strcmp(name, "BadChildren") == 0);
    chain_arb_describe_revert(text, sizeof text, data, sizeof data);
    CHECK_MSG(strstr(text, "BadChildren") != NULL, "%s", text);
    chain_arb_revert_name(name, sizeof name, data, 3);
    CHECK(name[0] == '\0');
    /* the beacon's site: the beacon as a big-endian integer, modulo the site count */
    ovt_hash beacon = {{0}};
    beacon.b[30] = 1;
    CHECK_EQ_U64(chain_arb_site_index(&beacon, 7), 256 % 7);
    memset(beacon.b, 0xff, 32);
    CHECK_EQ_U64(chain_arb_site_index(&beacon, 1000), 935); /* (2^256 - 1) mod 1000 */
    CHECK_EQ_U64(chain_arb_site_index(&beacon, 741), 15);   /* gpt2-small's 741 sites */
    CHECK_EQ_U64(chain_arb_site_index(&beacon, 1), 0);
    chain_arb_replay rp;
    CHECK(chain_arb_decode_replay(&rp, data, 64) == OVT_EFORMAT);
}

/* View results and moves with bad input: clear errors, zeroed outputs. */
static void test_malformed(void)
{
    uint8_t words[17 * 32];
    memset(words, 0, sizeof words);
    chain_arb_game g;
    CHECK(chain_arb_decode_game(&g, words, 14 * 32) == 0);
    CHECK(chain_arb_decode_game(&g, words, 14 * 32 - 1) == OVT_EFORMAT);
    words[31] = 6; /* phase beyond Settled */
    CHECK(chain_arb_decode_game(&g, words, 14 * 32) == OVT_EFORMAT);
    CHECK(g.phase == CHAIN_ARB_PHASE_NONE);
    words[31] = 2;
    words[63] = 15; /* outcome beyond Cancelled */
    CHECK(chain_arb_decode_game(&g, words, 14 * 32) == OVT_EFORMAT);
    words[63] = 14; /* Cancelled */
    CHECK(chain_arb_decode_game(&g, words, 14 * 32) == 0 && g.outcome == CHAIN_ARB_CANCELLED);
    words[63] = 0;
    words[2 * 32 + 30] = 1; /* round 256 does not fit uint8 */
    CHECK(chain_arb_decode_game(&g, words, 14 * 32) == OVT_EFORMAT);
    words[2 * 32 + 30] = 0;

    chain_arb_params p;
    memset(words, 0, sizeof words);
    CHECK(chain_arb_decode_run(&p, words, 17 * 32) == 0);
    words[13 * 32 + 11] = 1; /* trainer bond above 2^96 */
    CHECK(chain_arb_decode_run(&p, words, 17 * 32) == OVT_EFORMAT);
    words[13 * 32 + 11] = 0;
    words[16 * 32 + 11] = 1; /* arbiter bond above 2^96 */
    CHECK(chain_arb_decode_run(&p, words, 17 * 32) == OVT_EFORMAT);
    words[16 * 32 + 11] = 0;
    words[15 * 32 + 30] = 1; /* threshold 256 */
    CHECK(chain_arb_decode_run(&p, words, 17 * 32) == OVT_EFORMAT);
    words[15 * 32 + 30] = 0;
    words[0] = 1; /* an address word with high bytes set */
    CHECK(chain_arb_decode_run(&p, words, 17 * 32) == OVT_EFORMAT);
    CHECK(chain_arb_decode_run(&p, words, 16 * 32) == OVT_EFORMAT);
    chain_arb_committee cv;
    memset(words, 0, sizeof words);
    CHECK(chain_arb_decode_committee(&cv, words, 16 * 32) == OVT_EFORMAT); /* no arbiter at all */
    words[31] = 3;
    CHECK(chain_arb_decode_committee(&cv, words, 16 * 32) == 0 && cv.count == 3);
    words[6 * 32 + 31] = 15; /* an outcome beyond the enum */
    CHECK(chain_arb_decode_committee(&cv, words, 16 * 32) == OVT_EFORMAT);
    uint8_t w[32];
    CHECK(chain_arb_decode_word(w, words, 31) == OVT_EFORMAT);
    CHECK(chain_arb_decode_word(w, words, 64) == OVT_EFORMAT);

    /* plan_move: a tree that is not the party's committed one is refused */
    ovt_hash leaves[5];
    for (int i = 0; i < 5; i++)
        tc_rnd_hash(&leaves[i]);
    chain_merkle *t;
    CHECK(chain_merkle_build(&t, leaves, 5) == 0);
    memset(&g, 0, sizeof g);
    g.phase = CHAIN_ARB_PHASE_BISECTING;
    g.depth = 3;
    g.round = 1;
    g.index = 1;
    g.trainer_root = *chain_merkle_root(t);
    CHECK(chain_merkle_node(t, &g.trainer_node, 1, 1) == 0);
    ovt_hash run_id;
    tc_rnd_hash(&run_id);
    chain_arb_move mv;
    CHECK(chain_arb_plan_move(&mv, &run_id, &g, 1, t, NULL, NULL) == 0);
    CHECK(mv.kind == CHAIN_ARB_MOVE_BISECT && mv.round == 1);
    ovt_hash parent;
    chain_merkle_node_hash(&parent, &mv.left, &mv.right);
    CHECK_MEM(parent.b, g.trainer_node.b, 32);
    CHECK(chain_arb_plan_move(&mv, &run_id, &g, 0, t, NULL, NULL) == OVT_EINVAL); /* not the auditor's root */
    g.flags = CHAIN_ARB_FLAG_TRAINER;
    CHECK(chain_arb_plan_move(&mv, &run_id, &g, 1, t, NULL, NULL) == 0 && mv.kind == CHAIN_ARB_MOVE_NONE);
    g.flags = 0;
    g.trainer_node.b[0] ^= 1;
    CHECK(chain_arb_plan_move(&mv, &run_id, &g, 1, t, NULL, NULL) == OVT_EINVAL);
    g.trainer_node.b[0] ^= 1;
    g.depth = 4;
    CHECK(chain_arb_plan_move(&mv, &run_id, &g, 1, t, NULL, NULL) == OVT_EINVAL);
    chain_merkle_free(t);
}

/* The embedded strings are byte for byte what solcjs wrote at build time. */
static void test_embedding(void)
{
    const char *bin = getenv("OVT_BINARY_DIR");
    if (!bin) {
        fprintf(stderr, "OVT_BINARY_DIR not set; embedding check skipped\n");
        return;
    }
    static const char stem[] = "solc/chain_contracts_OvtArbitration_sol_OvtArbitration";
    const char *ext[2] = {"bin", "abi"};
    const char *embedded[2] = {chain_arb_bytecode_hex, chain_arb_abi_json};
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s", bin, stem, ext[k]);
        uint8_t *data = NULL;
        size_t len = 0;
        CHECK_MSG(ovt_read_file(path, &data, &len, 1 << 22) == 0, "%s", ovt_errmsg());
        while (len && (data[len - 1] == '\n' || data[len - 1] == ' '))
            len--;
        CHECK_MSG(data && len == strlen(embedded[k]) && memcmp(data, embedded[k], len) == 0,
                  "embedded %s differs from %s", ext[k], path);
        free(data);
    }
}

int main(void)
{
    tc_seed(1);
    cast = getenv("OVT_CAST");
    CHECK_RUN(test_small_trees());
    size_t sizes[] = {2, 3, 4, 5, 8, 9, 1001, 65542};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        CHECK_RUN(test_proofs_and_children(sizes[k]));
    CHECK_RUN(test_abi_json());
    CHECK_RUN(test_narrow_abi_json());
    CHECK_RUN(test_names());
    CHECK_RUN(test_malformed());
    CHECK_RUN(test_embedding());
    if (!cast || !*cast) {
        fprintf(stderr, "OVT_CAST not set: run `npm ci`; cast cross-checks skipped\n");
        return check_done();
    }
    CHECK_RUN(test_hashes_against_cast());
    CHECK_RUN(test_calldata_against_cast());
    CHECK_RUN(test_commitment_against_cast());
    CHECK_RUN(test_events_against_cast());
    return check_done();
}
