/* Sending calls to the arbitration contract, reading its views and events,
 * and one party's moves (see arbitration.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain/arbitration.h"

int chain_arb_attach(chain_arb *arb, chain_rpc *rpc, const chain_address *address)
{
    memset(arb, 0, sizeof *arb);
    uint64_t chain_id;
    int rc = chain_rpc_chain_id(rpc, &chain_id);
    if (rc != 0)
        return rc;
    char addr[43];
    chain_address_to_string(addr, address);
    json_t *code = NULL;
    rc = chain_rpc_call(rpc, &code, "eth_getCode", json_pack("[s,s]", addr, "latest"));
    if (rc != 0)
        return ovt_fail_wrap(rc, "reading the code at %s", addr);
    const char *hex = json_string_value(code);
    int empty = !hex || strlen(hex) <= 2;
    json_decref(code);
    if (empty)
        return ovt_fail(OVT_ENOTFOUND, "no contract at %s on chain %llu: deploy it first (ovt deploy)", addr,
                        (unsigned long long)chain_id);
    arb->rpc = rpc;
    arb->address = *address;
    arb->chain_id = chain_id;
    return 0;
}

/* Sends data (to NULL: creation) and waits; the receipt goes to *receipt or
 * is freed. */
static int send_tx(chain_txm *m, const chain_address *to, const chain_u256 *value, const uint8_t *data,
                   size_t len, uint64_t extra_gas, chain_receipt *receipt)
{
    chain_receipt local;
    chain_receipt *r = receipt ? receipt : &local;
    memset(r, 0, sizeof *r);
    int rc = chain_txm_send_extra(m, r, to, value, data, len, extra_gas);
    if (!receipt)
        chain_receipt_free(&local);
    return rc;
}

/* What nodes answer when the creation code runs an opcode their EVM does
 * not have: anvil "NotActivated", geth "invalid opcode: PUSH0", others
 * "opcode 0x5f not defined". */
static int before_shanghai(const char *msg)
{
    return strstr(msg, "NotActivated") || strstr(msg, "PUSH0") || strstr(msg, "opcode 0x5f");
}

int chain_arb_deploy(chain_arb *arb, chain_txm *m, const chain_address *narrow, chain_receipt *receipt)
{
    uint8_t args[32] = {0}; /* constructor(address narrow) */
    if (narrow)
        memcpy(args + 12, narrow->b, 20);
    return chain_arb_deploy_code(arb, m, chain_arb_bytecode_hex, args, sizeof args, "the arbitration contract",
                                 receipt);
}

int chain_arb_deploy_code(chain_arb *arb, chain_txm *m, const char *bytecode_hex, const uint8_t *args,
                          size_t args_len, const char *what, chain_receipt *receipt)
{
    memset(arb, 0, sizeof *arb);
    uint8_t *code = NULL;
    size_t len = 0;
    int rc = ovt_hex_decode_alloc(&code, &len, bytecode_hex);
    if (rc != 0)
        return ovt_fail_wrap(rc, "embedded bytecode of %s", what);
    uint8_t *init = realloc(code, len + args_len + 1);
    if (!init) {
        free(code);
        return ovt_fail(OVT_ENOMEM, "out of memory for the creation code of %s", what);
    }
    if (args_len)
        memcpy(init + len, args, args_len);
    chain_receipt local;
    memset(&local, 0, sizeof local);
    rc = chain_txm_send(m, &local, NULL, NULL, init, len + args_len);
    free(init);
    if (rc == 0 && !local.has_contract_address)
        rc = ovt_fail(OVT_EFORMAT, "the deployment receipt names no contract address");
    if (rc == 0) {
        arb->rpc = m->rpc;
        arb->address = local.contract_address;
        arb->chain_id = m->chain_id;
    }
    if (receipt)
        *receipt = local;
    else
        chain_receipt_free(&local);
    if (rc != 0 && before_shanghai(ovt_errmsg()))
        return ovt_fail_wrap(rc, "deploying %s: the node's EVM predates the Shanghai "
                                 "upgrade and lacks PUSH0 (EIP-3855), which the contract's bytecode uses "
                                 "(solc 0.8 targets Shanghai); deploy on a node or chain at Shanghai or later "
                                 "(anvil and ganache by default; not anvil --hardfork berlin..paris)",
                             what);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "deploying %s", what);
}

int chain_arb_send(const chain_arb *arb, chain_txm *m, const chain_u256 *value, const chain_buf *calldata,
                   chain_receipt *receipt)
{
    return send_tx(m, &arb->address, value, calldata->data, calldata->len, 0, receipt);
}

/* Encodes with the given result code, sends (extra_gas added to the
 * estimate), frees the calldata. */
static int send_encoded(const chain_arb *arb, chain_txm *m, const chain_u256 *value, chain_buf *calldata, int rc,
                        uint64_t extra_gas, chain_receipt *receipt, const char *what)
{
    if (rc == 0)
        rc = send_tx(m, &arb->address, value, calldata->data, calldata->len, extra_gas, receipt);
    chain_buf_free(calldata);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "%s", what);
}

int chain_arb_open(const chain_arb *arb, chain_txm *m, const chain_arb_params *p, ovt_hash *run_id,
                   chain_receipt *receipt)
{
    ovt_hash id;
    chain_arb_run_id(&id, arb->chain_id, &arb->address, p);
    if (run_id)
        memset(run_id, 0, sizeof *run_id);
    chain_receipt local;
    chain_receipt *r = receipt ? receipt : &local;
    chain_buf data;
    chain_buf_init(&data);
    int rc = send_encoded(arb, m, NULL, &data, chain_arb_encode_open(&data, p), 0, r, "open");
    if (rc != 0)
        goto out;
    chain_arb_event *events = NULL;
    size_t n = 0;
    rc = chain_arb_receipt_events(arb, r, &events, &n);
    if (rc == 0) {
        int found = 0;
        for (size_t i = 0; i < n; i++)
            if (events[i].kind == CHAIN_ARB_EV_RUN_OPENED && memcmp(events[i].run_id.b, id.b, 32) == 0)
                found = 1;
        if (!found)
            rc = ovt_fail(OVT_EFORMAT, "open: the receipt has no RunOpened event for the runId computed here");
    }
    free(events);
    if (rc == 0 && run_id)
        *run_id = id;
out:
    if (!receipt)
        chain_receipt_free(&local);
    return rc;
}

/* commit, or commitReplay when replay (sites: the auditor's site root). */
static int commit_root(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root, int replay,
                       const ovt_hash *sites, const uint8_t sig[65], uint8_t sig_out[65], chain_receipt *receipt)
{
    if (sig_out)
        memset(sig_out, 0, 65);
    chain_arb_params p;
    int rc = chain_arb_get_run(arb, run_id, NULL, &p);
    if (rc != 0)
        return ovt_fail_wrap(rc, "commit: reading the run");
    const chain_u256 *bond = chain_address_eq(&m->from, &p.trainer)   ? &p.trainer_bond
                             : chain_address_eq(&m->from, &p.auditor) ? &p.auditor_bond
                                                                      : NULL;
    uint8_t own[65];
    if (!sig) {
        rc = chain_arb_sign_commitment(own, &m->key, arb->chain_id, &arb->address, run_id, root, &p);
        if (rc != 0)
            return rc;
        sig = own;
    }
    chain_buf data;
    chain_buf_init(&data);
    rc = replay ? chain_arb_encode_commit_replay(&data, run_id, root, sites, sig)
                : chain_arb_encode_commit(&data, run_id, root, sig);
    rc = send_encoded(arb, m, bond, &data, rc, CHAIN_ARB_RACE_GAS, receipt, replay ? "commitReplay" : "commit");
    if (rc == 0 && sig_out)
        memcpy(sig_out, sig, 65);
    return rc;
}

int chain_arb_commit(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                     const uint8_t sig[65], uint8_t sig_out[65], chain_receipt *receipt)
{
    return commit_root(arb, m, run_id, root, 0, NULL, sig, sig_out, receipt);
}

int chain_arb_commit_replay(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                            const ovt_hash *sites, uint8_t sig_out[65], chain_receipt *receipt)
{
    return commit_root(arb, m, run_id, root, 1, sites, NULL, sig_out, receipt);
}

int chain_arb_reveal_sites(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *sites,
                           chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_reveal_sites(&data, run_id, sites), 0, receipt,
                        "revealSites");
}

int chain_arb_reveal_site(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                          const ovt_hash *site_hash, const chain_merkle_preimage *leaf,
                          const chain_merkle_preimage *previous, const ovt_hash *proof, size_t nproof,
                          chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    int rc = chain_arb_encode_reveal_site(&data, run_id, round, site_hash, leaf, previous, proof, nproof);
    return send_encoded(arb, m, NULL, &data, rc, CHAIN_ARB_RACE_GAS, receipt, "revealSite");
}

int chain_arb_bisect(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                     const ovt_hash *left, const ovt_hash *right, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_bisect(&data, run_id, round, left, right), CHAIN_ARB_RACE_GAS,
                        receipt, "bisect");
}

int chain_arb_reveal_leaf(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, unsigned round,
                          const chain_merkle_preimage *leaf, const chain_merkle_preimage *previous,
                          const ovt_hash *proof, size_t nproof, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    int rc = chain_arb_encode_reveal_leaf(&data, run_id, round, leaf, previous, proof, nproof);
    return send_encoded(arb, m, NULL, &data, rc, CHAIN_ARB_RACE_GAS, receipt, "revealLeaf");
}

int chain_arb_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, uint64_t step,
                      chain_arb_outcome outcome, const ovt_hash *evidence, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_verdict(&data, run_id, step, outcome, evidence), 0,
                        receipt, "verdict");
}

int chain_arb_timeout(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_timeout(&data, run_id), 0, receipt, "timeout");
}

int chain_arb_accept(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, chain_receipt *receipt)
{
    chain_arb_params p;
    int rc = chain_arb_get_run(arb, run_id, NULL, &p);
    if (rc != 0)
        return ovt_fail_wrap(rc, "accept: reading the run");
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, &p.arbiter_bond, &data, chain_arb_encode_accept(&data, run_id), 0, receipt, "accept");
}

int chain_arb_challenge(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *root,
                        ovt_hash *challenge_id, chain_receipt *receipt)
{
    chain_arb_params p;
    int rc = chain_arb_get_run(arb, run_id, NULL, &p);
    if (rc != 0)
        return ovt_fail_wrap(rc, "challenge: reading the run");
    if (challenge_id)
        chain_arb_challenge_id(challenge_id, run_id, &m->from);
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, &p.auditor_bond, &data, chain_arb_encode_challenge(&data, run_id, root), 0, receipt,
                        "challenge");
}

int chain_arb_commit_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const ovt_hash *ballot,
                             chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_commit_verdict(&data, run_id, ballot), 0, receipt,
                        "commitVerdict");
}

int chain_arb_reveal_verdict(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, uint64_t step,
                             chain_arb_outcome outcome, const ovt_hash *evidence, const ovt_hash *salt,
                             chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data,
                        chain_arb_encode_reveal_verdict(&data, run_id, step, outcome, evidence, salt),
                        CHAIN_ARB_REVEAL_GAS, receipt, "revealVerdict");
}

int chain_arb_withdraw(const chain_arb *arb, chain_txm *m, chain_receipt *receipt)
{
    chain_buf data;
    chain_buf_init(&data);
    return send_encoded(arb, m, NULL, &data, chain_arb_encode_withdraw(&data), 0, receipt, "withdraw");
}

/* --- views */

/* eth_call of calldata (built with result code rc) at block; the return
 * data goes to out. */
static int view(const chain_arb *arb, chain_buf *calldata, int rc, const char *block, chain_buf *out,
                const char *what)
{
    if (rc == 0) {
        chain_call_msg msg = {.to = &arb->address, .data = calldata->data, .data_len = calldata->len};
        rc = chain_rpc_eth_call(arb->rpc, out, &msg, block);
    }
    chain_buf_free(calldata);
    return rc == 0 ? 0 : ovt_fail_wrap(rc, "%s", what);
}

int chain_arb_get_run(const chain_arb *arb, const ovt_hash *run_id, const char *block, chain_arb_params *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_get_run(&data, run_id), block, &ret, "getRun");
    if (rc == 0)
        rc = chain_arb_decode_run(out, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

int chain_arb_get_game(const chain_arb *arb, const ovt_hash *run_id, const char *block, chain_arb_game *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_get_game(&data, run_id), block, &ret, "getGame");
    if (rc == 0)
        rc = chain_arb_decode_game(out, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

int chain_arb_get_committee(const chain_arb *arb, const ovt_hash *run_id, const char *block,
                            chain_arb_committee *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_get_committee(&data, run_id), block, &ret, "getCommittee");
    if (rc == 0)
        rc = chain_arb_decode_committee(out, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

int chain_arb_refuted_by(const chain_arb *arb, const ovt_hash *run_id, const char *block, ovt_hash *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_refuted_by(&data, run_id), block, &ret, "refutedBy");
    if (rc == 0)
        rc = chain_arb_decode_word(out->b, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

int chain_arb_get_replay(const chain_arb *arb, const ovt_hash *run_id, const char *block, chain_arb_replay *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_replays(&data, run_id), block, &ret, "replays");
    if (rc == 0)
        rc = chain_arb_decode_replay(out, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

int chain_arb_read_at_head(const chain_arb *arb, const ovt_hash *run_id, uint64_t *block, chain_arb_params *p,
                           chain_arb_game *g, chain_arb_committee *c)
{
    char at[24];
    int rc = chain_rpc_block_number(arb->rpc, block);
    if (rc == 0) {
        snprintf(at, sizeof at, "0x%llx", (unsigned long long)*block);
        rc = chain_arb_get_run(arb, run_id, at, p);
    }
    if (rc == 0)
        rc = chain_arb_get_game(arb, run_id, at, g);
    if (rc == 0 && c)
        rc = chain_arb_get_committee(arb, run_id, at, c);
    return rc;
}

int chain_arb_credit(const chain_arb *arb, const chain_address *account, const char *block, chain_u256 *out)
{
    memset(out, 0, sizeof *out);
    chain_buf data, ret;
    chain_buf_init(&data);
    chain_buf_init(&ret);
    int rc = view(arb, &data, chain_arb_encode_credit(&data, account), block, &ret, "credit");
    if (rc == 0)
        rc = chain_arb_decode_word(out->b, ret.data, ret.len);
    chain_buf_free(&ret);
    return rc;
}

/* --- events */

/* Decodes the logs that belong to this contract into a malloc'd array. */
static int decode_logs(const chain_arb *arb, const chain_log *logs, size_t nlogs, chain_arb_event **events,
                       size_t *n)
{
    *events = NULL;
    *n = 0;
    if (nlogs == 0)
        return 0;
    chain_arb_event *out = calloc(nlogs, sizeof *out);
    if (!out)
        return ovt_fail(OVT_ENOMEM, "out of memory for %zu events", nlogs);
    size_t k = 0;
    for (size_t i = 0; i < nlogs; i++) {
        if (!chain_address_eq(&logs[i].address, &arb->address) || logs[i].removed)
            continue;
        int rc = chain_arb_decode_event(&out[k], &logs[i]);
        if (rc != 0) {
            free(out);
            return rc;
        }
        k++;
    }
    *events = out;
    *n = k;
    return 0;
}

int chain_arb_receipt_events(const chain_arb *arb, const chain_receipt *receipt, chain_arb_event **events,
                             size_t *n)
{
    return decode_logs(arb, receipt->logs, receipt->nlogs, events, n);
}

int chain_arb_get_events(const chain_arb *arb, const ovt_hash *run_id, uint64_t from_block, uint64_t to_block,
                         chain_arb_event **events, size_t *n)
{
    *events = NULL;
    *n = 0;
    chain_log_filter f;
    memset(&f, 0, sizeof f);
    f.address = &arb->address;
    f.from_block = from_block;
    f.to_block = to_block;
    if (run_id) {
        f.topics[1] = run_id;
        f.ntopics = 2;
    }
    chain_log *logs = NULL;
    size_t nlogs = 0;
    int rc = chain_rpc_get_logs(arb->rpc, &logs, &nlogs, &f);
    if (rc != 0)
        return ovt_fail_wrap(rc, "reading arbitration events");
    rc = decode_logs(arb, logs, nlogs, events, n);
    chain_logs_free(logs, nlogs);
    return rc;
}

/* --- one party's moves */

int chain_arb_plan_move(chain_arb_move *out, const ovt_hash *run_id, const chain_arb_game *g, int is_trainer,
                        const chain_merkle *tree, chain_arb_preimage_fn preimage, void *ctx)
{
    memset(out, 0, sizeof *out);
    unsigned bit = is_trainer ? CHAIN_ARB_FLAG_TRAINER : CHAIN_ARB_FLAG_AUDITOR;
    if ((g->phase != CHAIN_ARB_PHASE_BISECTING && g->phase != CHAIN_ARB_PHASE_REVEALING) || (g->flags & bit))
        return 0;
    const char *who = is_trainer ? "trainer" : "auditor";
    const ovt_hash *root = is_trainer ? &g->trainer_root : &g->auditor_root;
    const ovt_hash *node = is_trainer ? &g->trainer_node : &g->auditor_node;
    if (chain_merkle_tree_depth(tree) != g->depth || memcmp(chain_merkle_root(tree)->b, root->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the %s's tree is not the one it committed to", who);
    ovt_hash mine;
    int rc = chain_merkle_node(tree, &mine, g->round, g->index);
    if (rc != 0)
        return rc;
    if (memcmp(mine.b, node->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the %s's node at round %u, index %llu differs from its tree", who, g->round,
                        (unsigned long long)g->index);
    out->round = g->round;
    if (g->phase == CHAIN_ARB_PHASE_BISECTING) {
        out->kind = CHAIN_ARB_MOVE_BISECT;
        return chain_merkle_children(tree, &out->left, &out->right, g->round, g->index);
    }

    uint64_t j = g->index;
    out->kind = CHAIN_ARB_MOVE_REVEAL;
    out->step = j;
    rc = preimage(ctx, j, &out->leaf);
    if (rc != 0)
        return ovt_fail_wrap(rc, "preimage of leaf %llu", (unsigned long long)j);
    ovt_hash leaf;
    chain_merkle_leaf_hash(&leaf, run_id, j, &out->leaf);
    if (memcmp(leaf.b, node->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the preimage of leaf %llu does not hash to the %s's leaf",
                        (unsigned long long)j, who);
    if (j > 0 && !(g->flags & CHAIN_ARB_FLAG_PREVIOUS)) {
        rc = preimage(ctx, j - 1, &out->previous);
        if (rc != 0)
            return ovt_fail_wrap(rc, "preimage of leaf %llu", (unsigned long long)(j - 1));
        rc = chain_merkle_proof(tree, out->proof, j - 1);
        if (rc != 0)
            return rc;
        out->nproof = g->depth;
    }
    return 0;
}

int chain_arb_plan_site_move(chain_arb_move *out, const ovt_hash *run_id, const chain_arb_game *g,
                             const chain_arb_replay *r, int is_trainer, const chain_merkle *sites,
                             const ovt_hash *site_hashes, const chain_merkle *tree, chain_arb_preimage_fn preimage,
                             void *ctx)
{
    memset(out, 0, sizeof *out);
    if (!chain_arb_is_replay_dispute(g))
        return 0;
    /* The bisection is the root game's over the site trees. */
    chain_arb_game sg = *g;
    sg.trainer_root = r->trainer_sites;
    sg.auditor_root = r->auditor_sites;
    if (g->phase == CHAIN_ARB_PHASE_BISECTING)
        return chain_arb_plan_move(out, run_id, &sg, is_trainer, sites, preimage, ctx);
    unsigned bit = is_trainer ? CHAIN_ARB_FLAG_TRAINER : CHAIN_ARB_FLAG_AUDITOR;
    if (g->phase != CHAIN_ARB_PHASE_REVEALING || (g->flags & bit))
        return 0;
    const char *who = is_trainer ? "trainer" : "auditor";
    const ovt_hash *root = is_trainer ? &r->trainer_sites : &r->auditor_sites;
    if (chain_merkle_tree_depth(sites) != g->depth || memcmp(chain_merkle_root(sites)->b, root->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the %s's site tree is not the one it committed to", who);
    uint64_t j = g->index;
    int rc;
    out->kind = CHAIN_ARB_MOVE_REVEAL_SITE;
    out->round = g->round;
    out->step = j;
    out->site_hash = site_hashes[j];
    ovt_hash leaf;
    chain_merkle_site_leaf_hash(&leaf, run_id, j, &out->site_hash);
    if (memcmp(leaf.b, (is_trainer ? &g->trainer_node : &g->auditor_node)->b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the %s's site hash of step %llu does not hash to its site leaf", who,
                        (unsigned long long)j);
    if (g->flags & CHAIN_ARB_FLAG_PREVIOUS)
        return 0;
    if (chain_merkle_tree_depth(tree) != g->depth || memcmp(chain_merkle_root(tree)->b, g->trainer_root.b, 32) != 0)
        return ovt_fail(OVT_EINVAL, "the %s's run tree is not the run's root", who);
    if ((rc = preimage(ctx, j, &out->leaf)) != 0)
        return ovt_fail_wrap(rc, "preimage of leaf %llu", (unsigned long long)j);
    if ((rc = chain_merkle_proof(tree, out->proof, j)) != 0)
        return rc;
    out->nproof = g->depth;
    if (j > 0) {
        if ((rc = preimage(ctx, j - 1, &out->previous)) != 0)
            return ovt_fail_wrap(rc, "preimage of leaf %llu", (unsigned long long)(j - 1));
        if ((rc = chain_merkle_proof(tree, out->proof + g->depth, j - 1)) != 0)
            return rc;
        out->nproof = 2 * g->depth;
    }
    return 0;
}

int chain_arb_send_move(const chain_arb *arb, chain_txm *m, const ovt_hash *run_id, const chain_arb_move *move,
                        chain_receipt *receipt)
{
    switch (move->kind) {
    case CHAIN_ARB_MOVE_NONE:
        return 0;
    case CHAIN_ARB_MOVE_BISECT:
        return chain_arb_bisect(arb, m, run_id, move->round, &move->left, &move->right, receipt);
    case CHAIN_ARB_MOVE_REVEAL:
        return chain_arb_reveal_leaf(arb, m, run_id, move->round, &move->leaf,
                                     move->nproof ? &move->previous : NULL, move->proof, move->nproof, receipt);
    case CHAIN_ARB_MOVE_REVEAL_SITE:
        return chain_arb_reveal_site(arb, m, run_id, move->round, &move->site_hash, &move->leaf, &move->previous,
                                     move->proof, move->nproof, receipt);
    }
    return ovt_fail(OVT_EINVAL, "unknown move kind %d", (int)move->kind);
}

/* --- the nonce of an opened run */

int chain_arb_find_nonce(const chain_arb *arb, const ovt_hash *run_id, chain_arb_params *p)
{
    enum { WINDOW = 5000, MAX_BLOCKS = 2000000 };
    uint64_t latest;
    int rc = chain_rpc_block_number(arb->rpc, &latest);
    if (rc != 0)
        return rc;
    for (uint64_t hi = latest, scanned = 0; scanned < MAX_BLOCKS; scanned += WINDOW) {
        uint64_t lo = hi >= WINDOW - 1 ? hi - (WINDOW - 1) : 0;
        chain_arb_event *ev;
        size_t n;
        if ((rc = chain_arb_get_events(arb, run_id, lo, hi, &ev, &n)) != 0)
            return rc;
        int found = 0;
        for (size_t i = 0; i < n && !found; i++) {
            if (ev[i].kind != CHAIN_ARB_EV_RUN_OPENED)
                continue;
            chain_arb_params q = *p;
            ovt_hash id;
            q.nonce = ev[i].u.run_opened.nonce;
            chain_arb_run_id(&id, arb->chain_id, &arb->address, &q);
            if (memcmp(id.b, run_id->b, 32) == 0) {
                p->nonce = q.nonce;
                found = 1;
            }
        }
        free(ev);
        if (found)
            return 0;
        if (lo == 0)
            break;
        hi = lo - 1;
    }
    return ovt_fail(OVT_ENOTFOUND,
                    "no RunOpened event of this run whose nonce derives its runId in the last %llu blocks; "
                    "check --run-id and --contract",
                    (unsigned long long)(latest < MAX_BLOCKS ? latest + 1 : MAX_BLOCKS));
}
