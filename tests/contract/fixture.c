/* Shared setup for the contract suites (see fixture.h). */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const dev_keys[FX_NACCOUNTS] = {
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "dbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
};

int fx_start(fx_env *env)
{
    return fx_start_with(env, NULL);
}

int fx_start_with(fx_env *env, const char *const *anvil_args)
{
    memset(env, 0, sizeof *env);
    tc_seed(0x5eed);
    if (tsup_anvil_start(&env->node, anvil_args) != 0)
        return -1;
    chain_rpc_opts o;
    chain_rpc_opts_default(&o);
    o.custom_errors = chain_arb_errors;
    o.timeout_ms = 20000;
    if (chain_rpc_open(&env->rpc, env->node.url, &o) != 0)
        goto fail;
    chain_txm_opts t;
    chain_txm_opts_default(&t);
    t.poll_ms = 5;
    for (int i = 0; i < FX_NACCOUNTS; i++) {
        if (chain_key_from_hex(&env->key[i], dev_keys[i]) != 0 || chain_key_address(&env->addr[i], &env->key[i]) != 0 ||
            chain_txm_init(&env->txm[i], env->rpc, &env->key[i], &t) != 0)
            goto fail;
    }
    chain_receipt r, nr;
    if (chain_narrow_deploy_pair(&env->arb, &env->narrow, &env->txm[FX_OPENER], &r, &nr) != 0)
        goto fail;
    printf("deployed at block %llu, gas %llu (OvtNarrow, bound to it: gas %llu)\n", (unsigned long long)r.block_number,
           (unsigned long long)r.gas_used, (unsigned long long)nr.gas_used);
    chain_receipt_free(&r);
    chain_receipt_free(&nr);
    env->next_nonce = 1;
    return 0;
fail:
    fprintf(stderr, "fixture: %s\n", ovt_errmsg());
    fx_stop(env);
    return -1;
}

void fx_stop(fx_env *env)
{
    for (int i = 0; i < FX_NACCOUNTS; i++) {
        if (env->txm[i].rpc)
            chain_txm_free(&env->txm[i]);
        ovt_wipe(&env->key[i], sizeof env->key[i]);
    }
    if (env->rpc)
        chain_rpc_close(env->rpc);
    env->rpc = NULL;
    tsup_anvil_stop(&env->node);
}

void fx_seed(uint64_t seed)
{
    tc_seed(seed);
}

void fx_params(fx_env *env, chain_arb_params *p, uint64_t steps, uint32_t move_timeout, uint64_t trainer_bond,
               uint64_t auditor_bond)
{
    memset(p, 0, sizeof *p);
    p->trainer = env->addr[FX_TRAINER];
    p->auditor = env->addr[FX_AUDITOR];
    p->arbiters[0] = env->addr[FX_ARBITER];
    tc_rnd_hash(&p->config_hash);
    tc_rnd_hash(&p->dataset_hash);
    p->steps = steps;
    p->commit_timeout = 3600;
    p->move_timeout = move_timeout;
    p->arbiter_timeout = 7200;
    p->trainer_bond = chain_u256_from_u64(trainer_bond);
    p->auditor_bond = chain_u256_from_u64(auditor_bond);
    p->nonce = env->next_nonce++;
}

int fx_open(fx_env *env, fx_run *run, const chain_arb_params *p, uint64_t *gas_used)
{
    memset(run, 0, sizeof *run);
    run->params = *p;
    chain_receipt r;
    int rc = chain_arb_open(&env->arb, &env->txm[FX_OPENER], p, &run->run_id, &r);
    if (rc == 0 && gas_used)
        *gas_used = r.gas_used;
    if (rc == 0)
        chain_receipt_free(&r);
    return rc;
}

int fx_build_tree(fx_history *h, size_t nleaves)
{
    chain_merkle_free(h->tree);
    h->tree = NULL;
    return chain_merkle_build(&h->tree, h->leaves, nleaves);
}

static int alloc_history(fx_history *h, uint64_t steps)
{
    memset(h, 0, sizeof *h);
    h->steps = steps;
    h->pre = calloc(steps + 1, sizeof *h->pre);
    h->leaves = calloc(steps + 2, sizeof *h->leaves); /* room for one forged padding leaf */
    return h->pre && h->leaves ? 0 : ovt_fail(OVT_ENOMEM, "history of %llu steps", (unsigned long long)steps);
}

static void hash_leaves(fx_history *h, const ovt_hash *run_id)
{
    for (uint64_t i = 0; i <= h->steps; i++)
        chain_merkle_leaf_hash(&h->leaves[i], run_id, i, &h->pre[i]);
}

int fx_histories(fx_run *run, uint64_t first_diff)
{
    uint64_t n = run->params.steps;
    if (alloc_history(&run->trainer, n) != 0 || alloc_history(&run->auditor, n) != 0)
        return OVT_ENOMEM;
    for (uint64_t i = 0; i <= n; i++) {
        chain_merkle_preimage *p = &run->trainer.pre[i];
        tc_rnd_hash(&p->state_hash);
        if (i > 0) {
            tc_rnd_hash(&p->batch_hash);
            tc_rnd_hash(&p->log_hash);
        }
    }
    memcpy(run->auditor.pre, run->trainer.pre, (n + 1) * sizeof *run->trainer.pre);
    if (first_diff <= n) {
        run->auditor.pre[first_diff].state_hash.b[tc_rnd() % 32] ^= (uint8_t)(1u << (tc_rnd() % 8));
        /* later histories part further; they must not move the fixed step */
        for (int k = 0; k < 3 && first_diff < n; k++)
            run->auditor.pre[first_diff + 1 + tc_rnd() % (n - first_diff)].state_hash.b[0] ^= 0x80;
    }
    hash_leaves(&run->trainer, &run->run_id);
    hash_leaves(&run->auditor, &run->run_id);
    int rc = fx_build_tree(&run->trainer, n + 1);
    return rc != 0 ? rc : fx_build_tree(&run->auditor, n + 1);
}

void fx_history_free(fx_history *h)
{
    free(h->pre);
    free(h->leaves);
    chain_merkle_free(h->tree);
    memset(h, 0, sizeof *h);
}

void fx_run_free(fx_run *run)
{
    fx_history_free(&run->trainer);
    fx_history_free(&run->auditor);
}

static int copy_history(fx_history *to, const fx_history *from)
{
    memset(to, 0, sizeof *to);
    to->steps = from->steps;
    to->pre = malloc((from->steps + 1) * sizeof *to->pre);
    to->leaves = calloc(from->steps + 2, sizeof *to->leaves);
    if (!to->pre || !to->leaves)
        return ovt_fail(OVT_ENOMEM, "history of %llu steps", (unsigned long long)from->steps);
    memcpy(to->pre, from->pre, (from->steps + 1) * sizeof *to->pre);
    memcpy(to->leaves, from->leaves, (from->steps + 1) * sizeof *to->leaves);
    return fx_build_tree(to, from->steps + 1);
}

int fx_challenge(fx_env *env, fx_run *c, const fx_run *run, int who, const fx_history *hist, uint64_t *gas)
{
    memset(c, 0, sizeof *c);
    chain_receipt r;
    int rc = chain_arb_challenge(&env->arb, &env->txm[who], &run->run_id, chain_merkle_root(hist->tree), &c->run_id, &r);
    if (rc != 0)
        return rc;
    if (gas)
        *gas = r.gas_used;
    chain_receipt_free(&r);
    c->tree_id = run->run_id;
    c->challenger = who;
    rc = chain_arb_get_run(&env->arb, &c->run_id, NULL, &c->params);
    if (rc == 0)
        rc = copy_history(&c->trainer, &run->trainer);
    if (rc == 0)
        rc = copy_history(&c->auditor, hist);
    return rc;
}

int fx_commit_both(fx_env *env, fx_run *run, uint64_t gas[2])
{
    int order = (int)(tc_rnd() & 1);
    for (int k = 0; k < 2; k++) {
        int party = (k ^ order) == 0 ? FX_TRAINER : FX_AUDITOR;
        fx_history *h = party == FX_TRAINER ? &run->trainer : &run->auditor;
        chain_receipt r;
        int rc = chain_arb_commit(&env->arb, &env->txm[party], &run->run_id, chain_merkle_root(h->tree), NULL,
                                  NULL, &r);
        if (rc != 0)
            return rc;
        if (gas)
            gas[k] = r.gas_used;
        chain_receipt_free(&r);
    }
    return 0;
}

int fx_preimage(void *ctx, uint64_t index, chain_merkle_preimage *out)
{
    const fx_history *h = ctx;
    if (index > h->steps)
        return ovt_fail(OVT_EINVAL, "no leaf %llu in a history of %llu steps", (unsigned long long)index,
                        (unsigned long long)h->steps);
    *out = h->pre[index];
    return 0;
}

int fx_plan(fx_env *env, fx_run *run, int party, chain_arb_move *mv)
{
    chain_arb_game g;
    int rc = chain_arb_get_game(&env->arb, &run->run_id, NULL, &g);
    if (rc != 0)
        return rc;
    fx_history *h = party == FX_TRAINER ? &run->trainer : &run->auditor;
    static const ovt_hash zero;
    const ovt_hash *tree_id = memcmp(run->tree_id.b, zero.b, 32) ? &run->tree_id : &run->run_id;
    return chain_arb_plan_move(mv, tree_id, &g, party == FX_TRAINER, h->tree, fx_preimage, h);
}

int fx_move(fx_env *env, fx_run *run, int party, int *moved, uint64_t *gas)
{
    *moved = 0;
    chain_arb_move mv;
    int rc = fx_plan(env, run, party, &mv);
    if (rc != 0 || mv.kind == CHAIN_ARB_MOVE_NONE)
        return rc;
    chain_receipt r;
    rc = chain_arb_send_move(&env->arb, &env->txm[party], &run->run_id, &mv, &r);
    if (rc != 0)
        return rc;
    *moved = 1;
    if (gas)
        *gas = r.gas_used;
    chain_receipt_free(&r);
    return 0;
}

int fx_play(fx_env *env, fx_run *run, fx_gas_fn gas_log, void *ctx)
{
    for (;;) {
        chain_arb_game g;
        int rc = chain_arb_get_game(&env->arb, &run->run_id, NULL, &g);
        if (rc != 0)
            return rc;
        if (g.phase != CHAIN_ARB_PHASE_BISECTING && g.phase != CHAIN_ARB_PHASE_REVEALING)
            return 0;
        int order = (int)(tc_rnd() & 1);
        for (int k = 0; k < 2; k++) {
            int party = (k ^ order) == 0 ? FX_TRAINER : run->challenger ? run->challenger : FX_AUDITOR;
            int moved;
            uint64_t gas = 0;
            chain_arb_move_kind kind = g.phase == CHAIN_ARB_PHASE_BISECTING ? CHAIN_ARB_MOVE_BISECT
                                                                            : CHAIN_ARB_MOVE_REVEAL;
            rc = fx_move(env, run, party, &moved, &gas);
            if (rc != 0)
                return rc;
            if (moved && gas_log) {
                chain_arb_move mv = {.kind = kind, .round = g.round};
                gas_log(ctx, &mv, k == 0, gas);
            }
        }
    }
}

const char *fx_revert_name(fx_env *env, int who, const chain_u256 *value, const chain_buf *calldata)
{
    return fx_revert_name_at(env, who, &env->arb.address, value, calldata, chain_arb_revert_name);
}

const char *fx_revert_name_at(fx_env *env, int who, const chain_address *to, const chain_u256 *value,
                              const chain_buf *calldata, fx_revert_namer namer)
{
    static char name[64];
    chain_buf out;
    chain_buf_init(&out);
    chain_call_msg msg = {.from = &env->addr[who], .to = to, .value = value, .data = calldata->data,
                          .data_len = calldata->len};
    int rc = chain_rpc_eth_call(env->rpc, &out, &msg, NULL);
    chain_buf_free(&out);
    if (rc == 0)
        return "";
    if (rc != OVT_EREVERT) {
        snprintf(name, sizeof name, "(error: %s)", ovt_errname(rc));
        return name;
    }
    const chain_rpc_error *e = chain_rpc_last_error(env->rpc);
    namer(name, sizeof name, e->data, e->data_len);
    if (!name[0])
        snprintf(name, sizeof name, "(unknown revert)");
    return name;
}

chain_arb_game fx_game(fx_env *env, const fx_run *run)
{
    chain_arb_game g;
    if (chain_arb_get_game(&env->arb, &run->run_id, NULL, &g) != 0) {
        fprintf(stderr, "getGame: %s\n", ovt_errmsg());
        memset(&g, 0, sizeof g);
    }
    return g;
}

int fx_raw(fx_env *env, const char *method, json_t *params)
{
    json_t *res = NULL;
    int rc = chain_rpc_call(env->rpc, &res, method, params);
    json_decref(res);
    if (rc)
        fprintf(stderr, "%s: %s\n", method, ovt_errmsg());
    return rc;
}

int fx_warp(fx_env *env, uint64_t seconds)
{
    int rc = fx_raw(env, "evm_increaseTime", json_pack("[I]", (json_int_t)seconds));
    return rc != 0 ? rc : fx_raw(env, "evm_mine", NULL);
}

uint64_t fx_now(fx_env *env)
{
    chain_block_header h;
    int found = 0;
    if (chain_rpc_block_header(env->rpc, &h, &found, "latest") != 0 || !found) {
        fprintf(stderr, "latest block: %s\n", ovt_errmsg());
        return 0;
    }
    return h.timestamp;
}

uint64_t fx_balance(fx_env *env)
{
    chain_u256 b;
    uint64_t v = UINT64_MAX;
    if (chain_rpc_balance(env->rpc, &b, &env->arb.address, NULL) != 0 || chain_u256_to_u64(&v, &b) != 0)
        fprintf(stderr, "balance: %s\n", ovt_errmsg());
    return v;
}

uint64_t fx_credit(fx_env *env, int who)
{
    chain_u256 c;
    uint64_t v = UINT64_MAX;
    if (chain_arb_credit(&env->arb, &env->addr[who], NULL, &c) != 0 || chain_u256_to_u64(&v, &c) != 0)
        fprintf(stderr, "credit: %s\n", ovt_errmsg());
    return v;
}
