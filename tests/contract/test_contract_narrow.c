/* The narrowing contract (chain/contracts/OvtNarrow.sol, issue 42) against a
 * real anvil: after the step game fixes step K, the parties bisect the
 * step's trace to one site and that site's output tree to one 64 KiB block.
 *
 * Every tree is built here with common/tree.h and every stateHash with
 * trainer/'s v3 combination (the C code the trainer uses, not the
 * contract's), over synthetic step data in the real encodings: 13 trace
 * records (docs/formats.md, "Step trace") whose outputs are float tensors,
 * the largest 6 leaves long, and a state of 16 tensors (gpt2's count),
 * one of them 3 leaves long. The trainer is the liar throughout.
 *
 * - The honest path: one element of site 7's output flipped (and so the
 *   later records changed) ends Narrowed on site 7, block 4, with both
 *   claimed leaf hashes equal to the tree leaves computed here.
 * - Traces that agree while the state K differs: narrowed on the state
 *   entry and the block of that tensor that differs.
 * - Each adversarial move loses at once: a leaf preimage that is not the
 *   committed leaf, previous roots that do not make the agreed stateHash
 *   K-1, state roots that do not make the party's stateHash K (a trace root
 *   inconsistent with the committed leaf), a record that is not the one its
 *   trace root holds (a wrong proof of a record), children that do not hash
 *   to the party's block-tree node (a block claim contradicting the trace).
 * - Withholding: a party that misses a round loses at timeout; nobody
 *   posting is BothSilent. Records that differ apart from their output root
 *   end ItemsDiffer; site counts that differ, CountsDiffer.
 * - Refusals by name: start before the verdict is due, a stale round, an
 *   outsider, a second move, an early timeout.
 * - A real gpt2-tiny step traced by the step runner (krn_trace_encode's
 *   records, the tree stateHash of the real state): a bit flipped in a late
 *   site's output is narrowed to that site, its op and its one block.
 * - Level 4 (a site that sums over the batch: matmul.bwd.dweight,
 *   bias.bwd, matmul.bwd.dbias, conv.bwd.dweight, gradnorm.sumsq, the
 *   norms' column sums; the
 *   contract's set equal to the engine's arb_chunk_supported over every op
 *   of the block engine's table): synthetic chunk chains of C + 1 leaves (stand-ins for the
 *   prefix sums' hashes, the block's output leaf last) played by the
 *   planner for both sides, the chains first differing at chunk 0, a
 *   middle chunk and C (only the final step), at C = 1, 8, 1024 and 8192;
 *   the trainer losing on a chain its level-3 leaf contradicts (a proof
 *   one bit off, another leaf's proof, the other party's chain, one leaf,
 *   count 0); CountsDiffer; bad children in the chain descent; silence at
 *   the chain posting (a party without chunk_leaves plans no move). A
 *   matmul.fwd site still ends at level 3.
 * - Level 4 of an element op (one value per row: xent.sum, layernorm.mean,
 *   ...): both parties' element trees over the leaf's values, played by
 *   the planner, the liar's value differing at element 0, in the middle
 *   and at the last of a full leaf, and in the output's short last leaf
 *   (100 elements); every one of the 13 element ops enters the stage and
 *   layernorm.fwd (one value per element) does not; equal roots (the liar
 *   posting the honest tree, which its planner refuses to build) end
 *   ElementsAgree; bad children lose; silence at the element posting loses
 *   (a party without element_values plans no move). And real: gpt2-tiny
 *   steps whose liar flips bit 3 of element 17 of the xent.sum site, and of
 *   the first layernorm.bwd.dmean site, narrowed through the element stage
 *   to element 17, the nodes those of the two real values.
 * - The gas of every call, and of a whole narrowing at gpt2-small's size
 *   (741 sites, a 64 MiB output of 1024 leaves), of a chunk stage at 8,
 *   1024 and 8192 chunks and of an element stage of 16384 elements, and
 *   OvtNarrow's runtime size, for docs/contract.md. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block_chunk.h"
#include "arbiter/block_ops.h"
#include "chain/abi.h"
#include "chain/narrow.h"
#include "check.h"
#include "support/rpcproxy.h"
#include "common/tree.h"
#include "fixture.h"
#include "data/dataset.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/config.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"
#include "trainer/trace.h"
#include "trainer/train.h"
#include "util.h"

#define SYN_SITES 13
#define MAX_SITES 1024
#define MAX_NT 64
#define SYN_NT 16
#define BIG_TENSOR 3
#define BIG_TENSOR_N (2u * 16384u + 7u) /* 3 leaves */
#define MOVE_TIMEOUT 600
#define NARROW_GAS_GPT2_SMALL 3573967u /* a whole narrowing, 741 sites, 1024 leaves (docs/contract.md) */
#define CHUNK_GAS_8192 2080912u        /* a whole chunk stage, 8192 chunks (docs/contract.md) */
#define ELEMENT_GAS_16384 2041360u     /* a whole element stage, 16384 elements, the last differing (docs/contract.md) */
#define EIP170_LIMIT 24576u            /* the most runtime code a contract may have */

static fx_env env;
static chain_narrow narrow;

/* The scenario: the trace's site count, the state's tensors, step K, the
 * agreed state K-1 and the run's configHash. */
static struct {
    size_t nsites, nt;
    size_t fault_site;                  /* synthetic: the site whose output the liar changes */
    uint64_t big_n, fault_element;      /* synthetic: that site's output elements, the one changed */
    const char *fault_op;               /* synthetic: that site's op (a chunk op: level 4 follows) */
    size_t chunks;                      /* synthetic, level 4: C, the chunks of the block's chain */
    uint64_t step;
    uint64_t sizes[MAX_NT];
    ovt_hash prev_roots[3 * MAX_NT], prev_state_hash, config_hash;
} sc;

/* One party's step K: its trace and its state K. */
typedef struct {
    float *out[MAX_SITES]; /* NULL for a real trace: its outputs are single leaves, out_root */
    uint64_t n[MAX_SITES];
    ovt_hash out_root[MAX_SITES];
    uint8_t *rec[MAX_SITES];
    size_t rec_len[MAX_SITES];
    ovt_hash rec_hash[MAX_SITES], trace_root;
    float *state[3 * MAX_NT];
    ovt_hash roots[3 * MAX_NT], state_hash;
    uint64_t sizes[MAX_NT]; /* as it posts them */
    size_t chain_diff;      /* level 4: its chunk chain's leaves from this one on are its own (honest: none) */
    size_t chain_extra;     /* level 4: chain leaves beyond C + 1 */
} party_step;

static void put_le(uint8_t *p, size_t *at, uint64_t v, int bytes)
{
    for (int k = 0; k < bytes; k++)
        p[(*at)++] = (uint8_t)(v >> (8 * k));
}

/* Record i in the trace encoding (kernels/trace.c's krn_trace_encode): the
 * site, op, n, root, and one read of the previous site's output (site 0
 * reads the state tensor params/wte). */
static void encode_record(party_step *p, size_t i, const char *op)
{
    free(p->rec[i]);
    uint8_t *r = p->rec[i] = malloc(160);
    size_t at = 0;
    put_le(r, &at, i, 4);
    size_t oplen = strlen(op);
    r[at++] = (uint8_t)oplen;
    memcpy(r + at, op, oplen);
    at += oplen;
    put_le(r, &at, p->n[i], 8);
    if (ovt_tree_root_le32(&p->out_root[i], p->out[i], p->n[i] * 4) != 0)
        abort();
    memcpy(r + at, p->out_root[i].b, 32);
    at += 32;
    put_le(r, &at, 1, 4); /* one read */
    if (i == 0) {
        r[at++] = 1; /* state */
        r[at++] = 11;
        memcpy(r + at, "params/wte", 11);
        at += 11;
    } else {
        r[at++] = 0; /* site */
        put_le(r, &at, i - 1, 4);
    }
    put_le(r, &at, 0, 4);                          /* input */
    put_le(r, &at, 0, 8);                          /* dst */
    put_le(r, &at, 0, 8);                          /* offset */
    put_le(r, &at, i ? p->n[i - 1] : sc.sizes[0], 8); /* count */
    put_le(r, &at, 1, 4);                          /* rows */
    put_le(r, &at, 0, 8);
    put_le(r, &at, 0, 8);
    p->rec_len[i] = at;
    ovt_tree_leaf(&p->rec_hash[i], r, at);
}

/* The two steps the parties post (run_to_verdict sets them). */
static const party_step *posted[2];

static float value(uint64_t seed, uint64_t k)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + k;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
    return (float)(z >> 40) / 65536.0f;
}

/* The trace root over the records' hashes. */
static void hash_trace(party_step *p)
{
    ovt_hash tmp[MAX_SITES];
    memcpy(tmp, p->rec_hash, sc.nsites * sizeof *tmp);
    ovt_tree_root_of_leaves(&p->trace_root, tmp, sc.nsites);
}

static void hash_all(party_step *p, const char *op7)
{
    for (size_t i = 0; i < sc.nsites; i++)
        encode_record(p, i, i == sc.fault_site ? op7 : "matmul.fwd");
    hash_trace(p);
    for (size_t j = 0; j < 3 * sc.nt; j++)
        if (trn_state_tensor_digest(&p->roots[j], TRN_STATE_HASH_TREE, p->state[j], sc.sizes[j % sc.nt]) != 0)
            abort();
    trn_state_hash_combine(&p->state_hash, TRN_STATE_HASH_TREE, &sc.config_hash, sc.step, sc.nt, p->roots);
}

/* The honest step: every output and tensor drawn from fixed seeds. */
static void honest_step(party_step *p)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < sc.nsites; i++) {
        p->n[i] = i == sc.fault_site ? sc.big_n : 3 + i;
        p->out[i] = malloc(p->n[i] * sizeof(float));
        for (uint64_t k = 0; k < p->n[i]; k++)
            p->out[i][k] = value(100 + i, k);
    }
    memcpy(p->sizes, sc.sizes, sizeof p->sizes);
    for (size_t j = 0; j < 3 * sc.nt; j++) {
        p->state[j] = malloc(sc.sizes[j % sc.nt] * sizeof(float));
        for (uint64_t k = 0; k < sc.sizes[j % sc.nt]; k++)
            p->state[j][k] = value(1000 + j, k);
    }
    p->chain_diff = SIZE_MAX;
    hash_all(p, sc.fault_op);
}

static void free_step(party_step *p)
{
    for (size_t i = 0; i < MAX_SITES; i++) {
        free(p->out[i]);
        free(p->rec[i]);
    }
    for (size_t j = 0; j < 3 * MAX_NT; j++)
        free(p->state[j]);
    memset(p, 0, sizeof *p);
}

/* The liar's trace: one element of site 7's output flipped, and every later
 * site computed from it (their outputs change too). */
static void fault_trace(party_step *p)
{
    p->out[sc.fault_site][sc.fault_element] += 1.0f;
    for (size_t i = sc.fault_site + 1; i < sc.nsites; i++)
        p->out[i][0] += 1.0f;
    p->state[0][1] += 1.0f; /* and its state K */
    hash_all(p, sc.fault_op);
}

/* Set: the auditor's leaf K has another batchHash than the trainer's. */
static bool auditor_batch_differs;
/* The arbiterTimeout the next run_to_verdict opens with (0: fx_params'). */
static uint32_t verdict_window;

/* A run whose leaves K-1 and K carry these stateHashes (the trainer's and
 * the auditor's at K), played to AwaitingVerdict. */
static int run_to_verdict(fx_run *run, const party_step *trainer, const party_step *auditor)
{
    memset(run, 0, sizeof *run);
    posted[0] = trainer;
    posted[1] = auditor;
    chain_arb_params p;
    fx_params(&env, &p, 5, MOVE_TIMEOUT, 1000, 2000);
    p.config_hash = sc.config_hash;
    if (verdict_window)
        p.arbiter_timeout = verdict_window;
    if (fx_open(&env, run, &p, NULL) != 0 || fx_histories(run, sc.step) != 0)
        return -1;
    fx_history *h[2] = {&run->trainer, &run->auditor};
    for (int s = 0; s < 2; s++) {
        h[s]->pre[sc.step - 1].state_hash = sc.prev_state_hash;
        h[s]->pre[sc.step].state_hash = (s ? auditor : trainer)->state_hash;
        if (s && auditor_batch_differs)
            h[s]->pre[sc.step].batch_hash.b[0] ^= 1;
        for (uint64_t i = sc.step - 1; i <= sc.step; i++)
            chain_merkle_leaf_hash(&h[s]->leaves[i], &run->run_id, i, &h[s]->pre[i]);
        if (fx_build_tree(h[s], 6) != 0)
            return -1;
    }
    if (fx_commit_both(&env, run, NULL) != 0 || fx_play(&env, run, NULL, NULL) != 0)
        return -1;
    chain_arb_game g = fx_game(&env, run);
    return g.phase == CHAIN_ARB_PHASE_AWAITING_VERDICT && g.index == sc.step ? 0 : -1;
}

static chain_narrow_game game_of(const fx_run *run)
{
    chain_narrow_game g;
    if (chain_narrow_get(&narrow, &run->run_id, NULL, &g) != 0) {
        fprintf(stderr, "getNarrow: %s\n", ovt_errmsg());
        memset(&g, 0, sizeof g);
    }
    return g;
}

static chain_narrow_post post_of(const fx_run *run, const party_step *p, int who)
{
    chain_narrow_post post = {.trace_root = p->trace_root, .sites = sc.nsites, .previous_roots = sc.prev_roots,
                              .nprevious = 3 * sc.nt, .roots = p->roots, .nroots = 3 * sc.nt, .sizes = p->sizes,
                              .nsizes = sc.nt};
    post.leaf = (who == FX_TRAINER ? run->trainer : run->auditor).pre[sc.step];
    return post;
}

/* Gas of every kind of call, summed over a game (docs/contract.md). */
typedef struct {
    uint64_t post[2], descend_first, descend_second, ndescend, reveal[2], descend_total;
    uint64_t chunk_post[2], chunk_total, nchunk; /* level 4: postChunks (postElements), and every move of
                                                    stage Chunks (Elements) */
} gas_log;

static int post(const fx_run *run, const chain_narrow_post *p, int who, uint64_t *gas)
{
    chain_receipt r;
    int rc = chain_narrow_post_trace(&narrow, &env.txm[who], &run->run_id, p, &r);
    if (rc == 0 && gas)
        *gas = r.gas_used;
    if (rc == 0)
        chain_receipt_free(&r);
    else
        fprintf(stderr, "postTrace: %s\n", ovt_errmsg());
    return rc;
}

/* The leaf hashes of a float tensor's tree (v NULL: a single leaf, root). */
static ovt_hash *tensor_leaves(const float *v, uint64_t n, const ovt_hash *root, size_t *count)
{
    if (!v) {
        ovt_hash *h = malloc(sizeof *h);
        *h = *root;
        *count = 1;
        return h;
    }
    size_t bytes = n * 4, nl = ovt_tree_leaves(bytes);
    ovt_hash *h = malloc(nl * sizeof *h);
    for (size_t i = 0; i < nl; i++) {
        size_t len = bytes - i * OVT_TREE_LEAF_BYTES;
        ovt_tree_leaf_le32(&h[i], (const uint8_t *)v + i * OVT_TREE_LEAF_BYTES,
                           len > OVT_TREE_LEAF_BYTES ? OVT_TREE_LEAF_BYTES : len);
    }
    *count = nl;
    return h;
}

/* The party's output trees for level 3 (the planner's callback). */
static int leaves_of(void *ctx, chain_narrow_stage stage, uint64_t item, ovt_hash **leaves, size_t *n)
{
    const party_step *p = ctx;
    if (stage == CHAIN_NARROW_STAGE_TRACE)
        *leaves = tensor_leaves(p->out[item], p->n[item], &p->out_root[item], n);
    else
        *leaves = tensor_leaves(p->state[item], p->sizes[item % sc.nt], &p->roots[item], n);
    return 0;
}

/* Level 4: the party's chunk chain of (site, block), synthetic: leaf c < C
 * the leaf hash of a stand-in for P_c, the same in every party's chain
 * before its chain_diff and its own from there on; leaf C the block's own
 * output leaf (the planner's callback). */
static int chain_of(void *ctx, uint64_t site, uint64_t block, ovt_hash **leaves, size_t *n)
{
    const party_step *p = ctx;
    size_t nl, count = sc.chunks + 1 + p->chain_extra;
    ovt_hash *out = tensor_leaves(p->out[site], p->n[site], &p->out_root[site], &nl);
    if (block >= nl) {
        free(out);
        return ovt_fail(OVT_EINVAL, "block %llu is outside site %llu's %zu leaves", (unsigned long long)block,
                        (unsigned long long)site, nl);
    }
    *leaves = malloc(count * sizeof **leaves);
    for (size_t c = 0; c + 1 < count; c++) {
        uint64_t prefix[4] = {site, block, c, c >= p->chain_diff};
        ovt_tree_leaf(&(*leaves)[c], prefix, sizeof prefix);
    }
    (*leaves)[count - 1] = out[block];
    free(out);
    *n = count;
    return 0;
}

/* Level 4 of an element op: the party's values of (site, block), a
 * copy of its output's leaf (the planner's callback). */
static int values_of(void *ctx, uint64_t site, uint64_t block, float **values, size_t *n)
{
    const party_step *p = ctx;
    uint64_t first = block * CHAIN_NARROW_LEAF_ELEMENTS;
    if (!p->out[site] || first >= p->n[site])
        return ovt_fail(OVT_EINVAL, "block %llu is outside site %llu's output", (unsigned long long)block,
                        (unsigned long long)site);
    uint64_t rest = p->n[site] - first;
    *n = rest < CHAIN_NARROW_LEAF_ELEMENTS ? (size_t)rest : CHAIN_NARROW_LEAF_ELEMENTS;
    *values = malloc(*n * sizeof **values);
    memcpy(*values, p->out[site] + first, *n * sizeof **values);
    return 0;
}

/* The party that plays p, for chain_narrow_plan_move; posts[0] and [1]
 * are the trainer's and the auditor's posts. */
static chain_narrow_party party_of(const party_step *p, int who, const chain_narrow_post posts[2])
{
    int t = who == FX_TRAINER;
    chain_narrow_party party = {.is_trainer = t, .post = &posts[t ? 0 : 1], .other = &posts[t ? 1 : 0],
                                .nsites = sc.nsites, .record_hashes = p->rec_hash,
                                .records = (const uint8_t *const *)p->rec, .record_lens = p->rec_len,
                                .output_leaves = leaves_of, .chunk_leaves = chain_of,
                                .element_values = values_of, .ctx = (void *)p};
    return party;
}

/* Party who's honest move in the game's current phase, planned by
 * chain_narrow_plan_move from its own step (*moved 0: none was due). The
 * trainer posts the previous roots, so it must post first. */
static int move(const fx_run *run, const party_step *p, int who, gas_log *gl, int *moved)
{
    chain_narrow_game g = game_of(run);
    *moved = 0;
    chain_narrow_post posts[2] = {post_of(run, posted[0], FX_TRAINER), post_of(run, posted[1], FX_AUDITOR)};
    posts[1].nprevious = 0; /* the agreed previous roots: posted once, by the first */
    chain_narrow_party party = party_of(p, who, posts);
    chain_narrow_move mv;
    chain_receipt r;
    if (chain_narrow_plan_move(&mv, &g, &party) != 0 ||
        chain_narrow_send_move(&narrow, &env.txm[who], &run->run_id, &party, &mv, &r) != 0) {
        fprintf(stderr, "narrow move: %s\n", ovt_errmsg());
        return -1;
    }
    if (mv.kind == CHAIN_NARROW_MOVE_NONE)
        return 0;
    int second = g.moved != 0;
    if (gl && (g.stage == CHAIN_NARROW_STAGE_CHUNKS || g.stage == CHAIN_NARROW_STAGE_ELEMENTS)) {
        gl->chunk_total += r.gas_used;
        gl->nchunk++;
        if (mv.kind == CHAIN_NARROW_MOVE_POST_CHUNKS || mv.kind == CHAIN_NARROW_MOVE_POST_ELEMENTS)
            gl->chunk_post[second] = r.gas_used;
    }
    if (gl && mv.kind == CHAIN_NARROW_MOVE_POST)
        gl->post[second] = r.gas_used;
    if (gl && mv.kind == CHAIN_NARROW_MOVE_DESCEND) {
        *(second ? &gl->descend_second : &gl->descend_first) += r.gas_used;
        gl->descend_total += r.gas_used;
        gl->ndescend++;
    }
    if (gl && mv.kind == CHAIN_NARROW_MOVE_REVEAL)
        gl->reveal[second] = r.gas_used;
    if (mv.kind == CHAIN_NARROW_MOVE_COMPARE)
        printf("gas: compareStates %" PRIu64 "\n", r.gas_used);
    chain_receipt_free(&r);
    *moved = 1;
    return 0;
}

/* Both parties post and play honestly (each from its own step) until the
 * game ends. */
static int play(const fx_run *run, const party_step *t, const party_step *a, gas_log *gl)
{
    for (int guard = 0; guard < 200; guard++) {
        int m1, m2;
        if (move(run, t, FX_TRAINER, gl, &m1) != 0 || move(run, a, FX_AUDITOR, gl, &m2) != 0)
            return -1;
        if (!m1 && !m2)
            return 0;
    }
    return -1;
}

static const char *revert_of(int who, const chain_buf *calldata)
{
    return fx_revert_name_at(&env, who, &narrow.address, NULL, calldata, chain_narrow_revert_name);
}

#define CHECK_REVERT(who, buf, want)                                                          \
    do {                                                                                      \
        const char *got_ = revert_of((who), (buf));                                           \
        CHECK_MSG(strcmp(got_, (want)) == 0, "expected %s, got '%s'", (want), got_);           \
    } while (0)

static party_step honest, liar;

/* Mines `blocks` empty blocks (anvil_mine; anvil slows down as its chain
 * grows, to seconds per thousand blocks past 10,000, so the test scales
 * the window down rather than the chain up). */
static void mine(uint64_t blocks)
{
    char count[24];
    snprintf(count, sizeof count, "0x%llx", (unsigned long long)blocks);
    CHECK(fx_raw(&env, "anvil_mine", json_pack("[s]", count)) == 0);
}

/* The evidence's window in the test: 100 blocks (CHAIN_NARROW_LOG_WINDOW's
 * 10,000 scaled down with the chain). */
#define WINDOW 100u

/* The evidence of game g read again over blocks [0, head]: the same as ev0,
 * read back in windows down to the NarrowStarted block, not to block 0
 * (the first window is WINDOW blocks, the others the size the node took). */
static void same_evidence(const chain_narrow *n, const fx_run *run, const chain_narrow_game *g,
                          const chain_narrow_evidence *ev0, uint64_t head, chain_narrow_evidence *ev)
{
    CHECK(chain_narrow_get_evidence(n, &run->run_id, g, 0, head, WINDOW, ev) == 0);
    CHECK_EQ_U64(ev->nprevious, ev0->nprevious);
    CHECK(ev->previous_roots && memcmp(ev->previous_roots, ev0->previous_roots, ev0->nprevious * 32) == 0);
    for (int k = 0; k < 2; k++)
        CHECK(ev->record[k] && ev->record_len[k] == ev0->record_len[k] &&
              memcmp(ev->record[k], ev0->record[k], ev0->record_len[k]) == 0);
    CHECK(ev->start_block != UINT64_MAX && ev->start_block <= head);
    CHECK(ev->windows <= (head - ev->start_block) / ev->window + 1);
}

/* A narrowing whose events lie far behind the block read: its evidence is
 * found in windows of WINDOW blocks back to its start (250 empty blocks
 * mined after it, 120 before the scenarios), and through a node that
 * refuses eth_getLogs over 30 blocks in the windows the node takes, saying
 * so (window). */
static void long_history(const fx_run *run, const chain_narrow_game *g, const chain_narrow_evidence *ev0)
{
    uint64_t before = 0, head = 0;
    CHECK(chain_rpc_block_number(env.rpc, &before) == 0);
    mine(250);
    CHECK(chain_rpc_block_number(env.rpc, &head) == 0);
    CHECK(head >= before + 250);
    chain_narrow_evidence ev;
    same_evidence(&narrow, run, g, ev0, head, &ev);
    CHECK_EQ_U64(ev.window, WINDOW);
    CHECK_EQ_U64(ev.windows, (head - ev.start_block) / WINDOW + 1); /* not those down to block 0 */
    CHECK(ev.windows >= 3 && ev.windows < head / WINDOW + 1 && ev.start_block >= 120 && ev.start_block <= before);
    printf("evidence of a narrowing started at block %llu read at block %llu: %u windows of %llu blocks\n",
           (unsigned long long)ev.start_block, (unsigned long long)head, ev.windows, (unsigned long long)ev.window);
    chain_narrow_evidence_free(&ev);
    tsup_rpcproxy proxy;
    memset(&proxy, 0, sizeof proxy);
    chain_rpc *capped = NULL;
    CHECK(tsup_rpcproxy_start(&proxy, env.node.url) == 0);
    proxy.logs_cap = 30;
    CHECK(chain_rpc_open(&capped, proxy.httpd.url, NULL) == 0);
    chain_narrow through = narrow;
    through.rpc = capped;
    same_evidence(&through, run, g, ev0, head, &ev);
    CHECK(ev.window <= 30 && ev.window >= 15);
    CHECK(proxy.logs_refused > 0 && proxy.widest_logs_range <= 30);
    printf("through a node capping eth_getLogs at 30 blocks: %u windows of %llu blocks, %d refused\n", ev.windows,
           (unsigned long long)ev.window, proxy.logs_refused);
    chain_narrow_evidence_free(&ev);
    chain_rpc_close(capped);
    tsup_rpcproxy_stop(&proxy);
}

/* The liar's and the honest party's game played to its end by the
 * planner: Narrowed in `stage` on the fault's site, op and block. */
static chain_narrow_game play_narrowed(fx_run *run, gas_log *gl, chain_narrow_stage stage)
{
    CHECK(run_to_verdict(run, &liar, &honest) == 0);
    CHECK(play(run, &liar, &honest, gl) == 0);
    chain_narrow_game g = game_of(run);
    CHECK_EQ_U64(g.phase, CHAIN_NARROW_PHASE_ENDED);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_NARROWED);
    CHECK_EQ_U64(g.stage, stage);
    CHECK_EQ_U64(g.step, sc.step);
    CHECK_EQ_U64(g.item_stage, CHAIN_NARROW_STAGE_TRACE);
    CHECK_EQ_U64(g.item, sc.fault_site);
    CHECK_EQ_U64(g.block, sc.fault_element / 16384); /* at level 4 too */
    CHECK(memcmp(g.op.b, sc.fault_op, strlen(sc.fault_op) + 1) == 0);
    return g;
}

static void test_honest_path(bool far_behind)
{
    fx_run run;
    gas_log gl = {0};
    /* matmul.fwd sums over no batch: no level 4 */
    chain_narrow_game g = play_narrowed(&run, &gl, CHAIN_NARROW_STAGE_OUTPUT);
    size_t n;
    ovt_hash *lt = tensor_leaves(liar.out[sc.fault_site], sc.big_n, NULL, &n);
    ovt_hash *lh = tensor_leaves(honest.out[sc.fault_site], sc.big_n, NULL, &n);
    CHECK_EQ_U64(n, ovt_tree_leaves(sc.big_n * 4));
    CHECK_MEM(g.trainer_side.node.b, lt[g.block].b, 32);
    CHECK_MEM(g.auditor_side.node.b, lh[g.block].b, 32);
    CHECK(memcmp(lt[g.block].b, lh[g.block].b, 32) != 0);
    free(lt);
    free(lh);
    CHECK_MEM(g.previous_state.b, sc.prev_state_hash.b, 32);
    CHECK_MEM(g.batch_hash.b, run.trainer.pre[sc.step].batch_hash.b, 32);
    CHECK_MEM(g.trainer_side.trace_root.b, liar.trace_root.b, 32);
    CHECK_MEM(g.auditor_side.trace_root.b, honest.trace_root.b, 32);
    CHECK(memcmp(g.last_mover.b, env.addr[FX_AUDITOR].b, 20) == 0);
    /* what the arbiter reads from the events: state K-1's roots, both records */
    chain_narrow_evidence ev;
    uint64_t head = 0;
    CHECK(chain_rpc_block_number(env.rpc, &head) == 0);
    CHECK(chain_narrow_get_evidence(&narrow, &run.run_id, &g, 0, head, 0, &ev) == 0);
    CHECK_EQ_U64(ev.nprevious, 3 * sc.nt);
    CHECK(ev.previous_roots && memcmp(ev.previous_roots, sc.prev_roots, 3 * sc.nt * sizeof(ovt_hash)) == 0);
    CHECK(ev.record[0] && ev.record_len[0] == liar.rec_len[g.item] &&
          memcmp(ev.record[0], liar.rec[g.item], ev.record_len[0]) == 0);
    CHECK(ev.record[1] && ev.record_len[1] == honest.rec_len[g.item] &&
          memcmp(ev.record[1], honest.rec[g.item], ev.record_len[1]) == 0);
    if (far_behind)
        long_history(&run, &g, &ev);
    chain_narrow_evidence_free(&ev);
    printf("gas: postTrace first %" PRIu64 ", second %" PRIu64 "; descend %" PRIu64 " moves, %" PRIu64
           " total (first movers %" PRIu64 ", second %" PRIu64 "); reveal first %" PRIu64 ", second %" PRIu64 "\n",
           gl.post[0], gl.post[1], gl.ndescend, gl.descend_total, gl.descend_first, gl.descend_second, gl.reveal[0],
           gl.reveal[1]);
    uint64_t total = gl.post[0] + gl.post[1] + gl.descend_total + gl.reveal[0] + gl.reveal[1];
    printf("gas: whole narrowing, %zu sites and %zu output leaves: %" PRIu64 " in %" PRIu64 " moves\n", sc.nsites, n,
           total, gl.ndescend + 4);
    if (sc.nsites == 741) /* docs/contract.md's figure: a bound, not a timing, so a change that costs more shows */
        CHECK_MSG(total <= NARROW_GAS_GPT2_SMALL * 105 / 100, "%" PRIu64 " gas, more than 5%% over %u", total,
                  NARROW_GAS_GPT2_SMALL);
    fx_run_free(&run);
}

/* A narrowing far longer than the run's verdict window (arbiterTimeout 100
 * s, each round played 550 s into its 600): every round moves the verdict
 * deadline to the round's deadline plus arbiterTimeout (OvtNarrow calls
 * extendVerdict), never earlier; the verdict's timeout cannot be claimed
 * while the narrowing runs; once it ends the arbiter still has its window
 * and rules, long after the first deadline. Nobody else may extend it, and
 * an OvtNarrow deployed against an arbitration contract not bound to it is
 * refused. */
static void test_verdict_follows_narrowing(void)
{
    fx_run run;
    verdict_window = 100;
    int rc = run_to_verdict(&run, &liar, &honest);
    verdict_window = 0;
    CHECK(rc == 0);
    uint64_t first = fx_game(&env, &run).deadline, last = first;
    chain_buf claim, extend;
    chain_buf_init(&claim);
    chain_buf_init(&extend);
    CHECK(chain_arb_encode_timeout(&claim, &run.run_id) == 0);
    CHECK(chain_arb_encode_extend_verdict(&extend, &run.run_id, first + 100000) == 0);
    int rounds = 0, m1 = 1, m2 = 1;
    for (int guard = 0; guard < 100 && (m1 || m2); guard++) {
        CHECK(move(&run, &liar, FX_TRAINER, NULL, &m1) == 0 && move(&run, &honest, FX_AUDITOR, NULL, &m2) == 0);
        chain_narrow_game ng = game_of(&run);
        chain_arb_game g = fx_game(&env, &run);
        CHECK_EQ_U64(g.phase, CHAIN_ARB_PHASE_AWAITING_VERDICT);
        CHECK_MSG(g.deadline >= last, "the verdict deadline moved earlier: %" PRIu64 " after %" PRIu64, g.deadline,
                  last);
        last = g.deadline;
        if (ng.phase != CHAIN_NARROW_PHASE_ENDED) {
            CHECK_EQ_U64(g.deadline, ng.deadline + 100);
            rounds++;
        }
        FX_CHECK_REVERT(&env, FX_OUTSIDER, NULL, &claim, "NotExpired");
        FX_CHECK_REVERT(&env, FX_OUTSIDER, NULL, &extend, "NotNarrow");
        FX_CHECK_REVERT(&env, FX_ARBITER, NULL, &extend, "NotNarrow");
        if (ng.phase != CHAIN_NARROW_PHASE_ENDED)
            CHECK(fx_warp(&env, MOVE_TIMEOUT - 50) == 0); /* a slow narrowing: late in every round */
    }
    chain_narrow_game ng = game_of(&run);
    CHECK_EQ_U64(ng.outcome, CHAIN_NARROW_NARROWED);
    uint64_t now = fx_now(&env);
    CHECK_MSG(rounds >= 6 && now > first + 5 * MOVE_TIMEOUT, "%d rounds, ended at %" PRIu64
              " against the first deadline %" PRIu64, rounds, now, first);
    CHECK_MSG(last >= now + 100, "the arbiter has %" PRIu64 " s left, less than its window",
              last > now ? last - now : 0);
    CHECK(chain_arb_verdict(&env.arb, &env.txm[FX_ARBITER], &run.run_id, sc.step, CHAIN_ARB_AUDITOR_RIGHT,
                            &run.auditor.leaves[sc.step], NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK_EQ_U64(g.phase, CHAIN_ARB_PHASE_SETTLED);
    CHECK_EQ_U64(g.outcome, CHAIN_ARB_AUDITOR_RIGHT);
    printf("verdict window: %d narrowing rounds over %" PRIu64 " s, the verdict %" PRIu64
           " s after its first deadline\n", rounds, now - (first - 100), now - first);
    chain_buf_free(&claim);
    chain_buf_free(&extend);
    fx_run_free(&run);
    /* a second OvtNarrow: env.arb is bound to the first */
    chain_narrow other;
    CHECK(chain_narrow_deploy(&other, &env.txm[FX_OUTSIDER], &env.arb.address, NULL) != 0);
    CHECK_MSG(strstr(ovt_errmsg(), "NotNarrow") != NULL, "deploy refused with: %s", ovt_errmsg());
}

/* extendVerdict(gameId, until) from an account the deadline of env.arb's run
 * is read back after. */
static uint64_t extend_to(const fx_run *run, uint64_t until, uint64_t *now)
{
    chain_buf b;
    chain_buf_init(&b);
    chain_receipt r;
    if (chain_arb_encode_extend_verdict(&b, &run->run_id, until) != 0 ||
        chain_txm_send(&env.txm[FX_OUTSIDER], &r, &env.arb.address, NULL, b.data, b.len) != 0) {
        fprintf(stderr, "extendVerdict: %s\n", ovt_errmsg());
        chain_buf_free(&b);
        return 0;
    }
    chain_receipt_free(&r);
    chain_buf_free(&b);
    *now = fx_now(&env);
    return fx_game(&env, run).deadline;
}

/* extendVerdict's rules, on an arbitration contract bound to an account
 * (FX_OUTSIDER) instead of an OvtNarrow, so that the test picks `until`:
 * nothing before the verdict is due; then the deadline becomes until +
 * arbiterTimeout, never earlier than it was, with until capped at now +
 * moveTimeout; nothing once the deadline has passed (the arbiter's timeout
 * is claimed). A committee's deadline becomes until + 2 x arbiterTimeout
 * and its commit deadline until + arbiterTimeout. */
static void test_extend_rules(void)
{
    chain_arb saved = env.arb;
    CHECK(chain_arb_deploy(&env.arb, &env.txm[FX_OPENER], &env.addr[FX_OUTSIDER], NULL) == 0);
    fx_run run;
    chain_arb_params p;
    fx_params(&env, &p, 5, MOVE_TIMEOUT, 1000, 2000);
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 3) == 0 && fx_commit_both(&env, &run, NULL) == 0);
    uint64_t now, bisecting = fx_game(&env, &run).deadline;
    CHECK_EQ_U64(extend_to(&run, UINT64_MAX / 2, &now), bisecting); /* not awaiting the verdict: no change */
    CHECK(fx_play(&env, &run, NULL, NULL) == 0);
    chain_arb_game g = fx_game(&env, &run);
    CHECK_EQ_U64(g.phase, CHAIN_ARB_PHASE_AWAITING_VERDICT);
    uint64_t due = g.deadline, window = p.arbiter_timeout;
    CHECK_EQ_U64(extend_to(&run, due - window, &now), due); /* until + window is the deadline: no change */
    CHECK_EQ_U64(extend_to(&run, 1, &now), due);             /* earlier: no change */
    uint64_t until = now + 20; /* under the cap: the next block's now + moveTimeout */
    uint64_t d = extend_to(&run, until, &now);
    CHECK(until <= now + MOVE_TIMEOUT);
    CHECK_EQ_U64(d, until + window);
    uint64_t d2 = extend_to(&run, UINT64_MAX / 2, &now); /* capped at now + moveTimeout */
    CHECK_EQ_U64(d2, now + MOVE_TIMEOUT + window);
    CHECK(d2 > d);
    CHECK_EQ_U64(extend_to(&run, now, &now), d2); /* a later now, an earlier until: no change */
    CHECK(fx_warp(&env, d2 - now + 1) == 0);
    CHECK_EQ_U64(extend_to(&run, now + 10, &now), d2); /* past the deadline: no revival */
    CHECK(chain_arb_timeout(&env.arb, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    CHECK_EQ_U64(fx_game(&env, &run).outcome, CHAIN_ARB_ARBITER_TIMED_OUT);
    fx_run_free(&run);

    /* a committee of three: two windows, ballots until one window before the deadline; both move */
    fx_params(&env, &p, 5, MOVE_TIMEOUT, 1000, 2000);
    p.arbiters[1] = env.addr[FX_ARBITER2];
    p.arbiters[2] = env.addr[FX_ARBITER3];
    CHECK(fx_open(&env, &run, &p, NULL) == 0 && fx_histories(&run, 3) == 0 && fx_commit_both(&env, &run, NULL) == 0 &&
          fx_play(&env, &run, NULL, NULL) == 0);
    chain_arb_committee c;
    CHECK(chain_arb_get_committee(&env.arb, &run.run_id, NULL, &c) == 0);
    due = fx_game(&env, &run).deadline;
    CHECK_EQ_U64(c.commit_deadline, due - window);
    until = now + 30;
    d = extend_to(&run, until, &now);
    CHECK(until <= now + MOVE_TIMEOUT);
    CHECK_EQ_U64(d, until + 2 * window);
    CHECK(d > due);
    CHECK(chain_arb_get_committee(&env.arb, &run.run_id, NULL, &c) == 0);
    CHECK_EQ_U64(c.commit_deadline, until + window);
    fx_run_free(&run);
    env.arb = saved;
}

/* Why the game's Lost event says a party lost (chain_narrow_get_evidence). */
static chain_narrow_reason lost_reason(const fx_run *run)
{
    chain_narrow_game g = game_of(run);
    chain_narrow_evidence ev;
    uint64_t head = 0;
    if (chain_rpc_block_number(env.rpc, &head) != 0 || chain_narrow_get_evidence(&narrow, &run->run_id, &g, 0, head,
                                                                                  0, &ev) != 0) {
        fprintf(stderr, "evidence: %s\n", ovt_errmsg());
        return CHAIN_NARROW_REASON_NONE;
    }
    chain_narrow_reason why = ev.lost;
    chain_narrow_evidence_free(&ev);
    return why;
}

/* The traces agree; the liar's state K differs in one leaf of the big tensor. */
static void test_state_path(void)
{
    static party_step liar2;
    honest_step(&liar2);
    liar2.state[SYN_NT + BIG_TENSOR][2 * 16384 + 1] += 1.0f; /* m of tensor 3, its last leaf */
    hash_all(&liar2, sc.fault_op);
    fx_run run;
    CHECK(run_to_verdict(&run, &liar2, &honest) == 0);
    chain_narrow_post pt = post_of(&run, &liar2, FX_TRAINER), pa = post_of(&run, &honest, FX_AUDITOR);
    CHECK(post(&run, &pt, FX_TRAINER, NULL) == 0 && post(&run, &pa, FX_AUDITOR, NULL) == 0);
    chain_narrow_game g = game_of(&run);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_STATES);
    chain_buf data; /* lists other than those posted; a record reveal in this stage */
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_compare_states(&data, &run.run_id, g.round, &pa, &pa) == 0);
    CHECK_REVERT(FX_OUTSIDER, &data, "NotPosted");
    chain_buf_free(&data);
    /* the same packed bytes split otherwise: the roots and one size word, the other sizes */
    ovt_hash shifted[3 * MAX_NT + 1];
    memcpy(shifted, pt.roots, 3 * sc.nt * sizeof *shifted);
    memset(&shifted[3 * sc.nt], 0, sizeof shifted[0]);
    for (int k = 0; k < 8; k++)
        shifted[3 * sc.nt].b[31 - k] = (uint8_t)(pt.sizes[0] >> (8 * k));
    chain_narrow_post ps = pt;
    ps.roots = shifted;
    ps.nroots = 3 * sc.nt + 1;
    ps.sizes = pt.sizes + 1;
    ps.nsizes = sc.nt - 1;
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_compare_states(&data, &run.run_id, g.round, &ps, &pa) == 0);
    CHECK_REVERT(FX_OUTSIDER, &data, "NotPosted");
    chain_buf_free(&data);
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_reveal(&data, &run.run_id, g.round, honest.rec[0], honest.rec_len[0]) == 0);
    CHECK_REVERT(FX_AUDITOR, &data, "WrongStage");
    chain_buf_free(&data);
    for (int guard = 0, m1 = 1, m2 = 1; guard < 100 && (m1 || m2); guard++)
        CHECK(move(&run, &liar2, FX_TRAINER, NULL, &m1) == 0 && move(&run, &honest, FX_AUDITOR, NULL, &m2) == 0);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_NARROWED);
    CHECK_EQ_U64(g.item_stage, CHAIN_NARROW_STAGE_STATES);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_OUTPUT); /* a state entry is a copy: no level 4 */
    CHECK_EQ_U64(g.item, SYN_NT + BIG_TENSOR);
    CHECK_EQ_U64(g.block, 2);
    CHECK_EQ_U64(g.trainer_side.elements, BIG_TENSOR_N);
    fx_run_free(&run);

    /* the liar gives that tensor another size: ItemsDiffer on it */
    liar2.sizes[BIG_TENSOR] += 1;
    CHECK(run_to_verdict(&run, &liar2, &honest) == 0);
    CHECK(play(&run, &liar2, &honest, NULL) == 0);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_ITEMS_DIFFER);
    CHECK_EQ_U64(g.item, SYN_NT + BIG_TENSOR);
    fx_run_free(&run);
    free_step(&liar2);
}

/* A post its commitments contradict loses at once. what: 0 leaf preimage,
 * 1 previous roots, 2 state K roots. */
static void test_bad_post(int what)
{
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pa = post_of(&run, &honest, FX_AUDITOR), pt = post_of(&run, &liar, FX_TRAINER);
    CHECK(post(&run, &pa, FX_AUDITOR, NULL) == 0);
    ovt_hash wrong[3 * MAX_NT];
    memcpy(wrong, liar.roots, sizeof wrong);
    if (what == 0)
        pt.leaf.state_hash = honest.state_hash; /* not the trainer's committed leaf */
    if (what == 2) {
        wrong[5].b[0] ^= 1; /* roots that do not make its stateHash K */
        pt.roots = wrong;
    }
    if (what == 1) { /* the trainer posts first with wrong previous roots */
        fx_run_free(&run);
        CHECK(run_to_verdict(&run, &liar, &honest) == 0);
        pt = post_of(&run, &liar, FX_TRAINER);
        memcpy(wrong, sc.prev_roots, sizeof wrong);
        wrong[0].b[31] ^= 1;
        pt.previous_roots = wrong;
    }
    CHECK(post(&run, &pt, FX_TRAINER, NULL) == 0); /* mined: it loses, it does not revert */
    chain_narrow_game g = game_of(&run);
    CHECK_EQ_U64(g.phase, CHAIN_NARROW_PHASE_ENDED);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    static const chain_narrow_reason why[3] = {CHAIN_NARROW_REASON_BAD_LEAF, CHAIN_NARROW_REASON_BAD_PREVIOUS,
                                               CHAIN_NARROW_REASON_BAD_ROOTS};
    CHECK_EQ_U64(lost_reason(&run), why[what]); /* what the arbiter reads: a contradiction decides */
    fx_run_free(&run);
}

/* A game of the liar and the honest party played honestly (from the
 * posts on) until it reaches `stage` in `phase`; *pt, *pa their posts. */
static chain_narrow_game reach(const fx_run *run, chain_narrow_stage stage, chain_narrow_phase phase,
                               chain_narrow_post *pt, chain_narrow_post *pa)
{
    *pt = post_of(run, &liar, FX_TRAINER);
    *pa = post_of(run, &honest, FX_AUDITOR);
    CHECK(post(run, pt, FX_TRAINER, NULL) == 0 && post(run, pa, FX_AUDITOR, NULL) == 0);
    chain_narrow_game g = game_of(run);
    for (int guard = 0; guard < 100 && !(g.stage == stage && g.phase == phase); guard++) {
        int m;
        CHECK(move(run, &liar, FX_TRAINER, NULL, &m) == 0 && move(run, &honest, FX_AUDITOR, NULL, &m) == 0);
        g = game_of(run);
    }
    CHECK_EQ_U64(g.stage, stage);
    CHECK_EQ_U64(g.phase, phase);
    return g;
}

/* Plays honestly until the game reaches `stage` in `phase`, then the
 * trainer makes a move its commitments contradict. */
static void test_bad_move(chain_narrow_stage stage, chain_narrow_phase phase)
{
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pt, pa;
    chain_narrow_game g = reach(&run, stage, phase, &pt, &pa);
    chain_narrow_post posts[2] = {pt, pa};
    chain_narrow_party party = party_of(&liar, FX_TRAINER, posts);
    chain_narrow_move mv;
    CHECK(chain_narrow_plan_move(&mv, &g, &party) == 0);
    if (phase == CHAIN_NARROW_PHASE_REVEALING) { /* the honest record: not the one the liar's trace root holds */
        CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_REVEAL);
        mv.record = honest.rec[g.index];
        mv.record_len = honest.rec_len[g.index];
    } else { /* children of its block-tree node, one bit off */
        CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_DESCEND);
        mv.right.b[7] ^= 4;
    }
    chain_receipt r;
    CHECK(chain_narrow_send_move(&narrow, &env.txm[FX_TRAINER], &run.run_id, &party, &mv, &r) == 0);
    chain_receipt_free(&r);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    fx_run_free(&run);
}

/* The trainer stops answering in the middle of level 2; nobody posting at
 * all; the refusals by name on the way. */
static void test_withholding(void)
{
    fx_run run;
    chain_buf data;
    chain_buf_init(&data);
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pt = post_of(&run, &liar, FX_TRAINER), pa = post_of(&run, &honest, FX_AUDITOR);
    CHECK(chain_narrow_encode_post(&data, &run.run_id, &pt) == 0);
    CHECK_REVERT(FX_OUTSIDER, &data, "NotParty");
    CHECK(post(&run, &pt, FX_TRAINER, NULL) == 0);
    CHECK_REVERT(FX_TRAINER, &data, "AlreadyMoved");
    chain_buf_free(&data);
    CHECK(post(&run, &pa, FX_AUDITOR, NULL) == 0);
    int m;
    CHECK(move(&run, &honest, FX_AUDITOR, NULL, &m) == 0 && m); /* the trainer is silent */
    chain_narrow_game g = game_of(&run);
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_descend(&data, &run.run_id, g.round + 1, &honest.trace_root, &honest.trace_root) == 0);
    CHECK_REVERT(FX_TRAINER, &data, "WrongRound");
    chain_buf_free(&data);
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_timeout(&data, &run.run_id) == 0);
    CHECK_REVERT(FX_OUTSIDER, &data, "NotExpired");
    CHECK(fx_warp(&env, MOVE_TIMEOUT + 1) == 0);
    chain_receipt r;
    CHECK(chain_narrow_timeout(&narrow, &env.txm[FX_OUTSIDER], &run.run_id, &r) == 0);
    printf("gas: timeout (a party lost) %" PRIu64 "\n", r.gas_used);
    chain_receipt_free(&r);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    CHECK_EQ_U64(lost_reason(&run), CHAIN_NARROW_REASON_TIMEOUT); /* the arbiter then rules on the whole step */
    CHECK_REVERT(FX_OUTSIDER, &data, "NotExpired"); /* ended */
    chain_buf_free(&data);
    fx_run_free(&run);

    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    CHECK(chain_narrow_start(&narrow, &env.txm[FX_OUTSIDER], &run.run_id, &r) == 0);
    printf("gas: start %" PRIu64 "\n", r.gas_used);
    chain_receipt_free(&r);
    CHECK(fx_warp(&env, MOVE_TIMEOUT + 1) == 0);
    CHECK(chain_narrow_timeout(&narrow, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    CHECK_EQ_U64(game_of(&run).outcome, CHAIN_NARROW_BOTH_SILENT);
    fx_run_free(&run);
}

/* Start before the step game's verdict is due; records that differ apart
 * from their root; site counts that differ; leaves K with different batch
 * hashes; a record that names another site than its place. */
static void test_other_ends(void)
{
    fx_run run;
    memset(&run, 0, sizeof run);
    chain_arb_params p;
    fx_params(&env, &p, 5, MOVE_TIMEOUT, 1000, 2000);
    CHECK(fx_open(&env, &run, &p, NULL) == 0);
    chain_buf data;
    chain_buf_init(&data);
    CHECK(chain_narrow_encode_start(&data, &run.run_id) == 0);
    CHECK_REVERT(FX_OUTSIDER, &data, "NotAwaitingVerdict");
    chain_buf_free(&data);

    static party_step other;
    honest_step(&other);
    other.out[sc.fault_site][sc.fault_element] += 1.0f;
    other.state[0][1] += 1.0f;
    hash_all(&other, "matmul.bwd"); /* site 7's record names another op */
    CHECK(run_to_verdict(&run, &other, &honest) == 0);
    CHECK(play(&run, &other, &honest, NULL) == 0);
    chain_narrow_game g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_ITEMS_DIFFER);
    CHECK_EQ_U64(g.index, sc.fault_site);
    CHECK_EQ_U64(g.block, CHAIN_NARROW_NO_BLOCK);
    fx_run_free(&run);
    free_step(&other);

    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pt = post_of(&run, &liar, FX_TRAINER), pa = post_of(&run, &honest, FX_AUDITOR);
    pt.sites = sc.nsites + 1;
    CHECK(post(&run, &pt, FX_TRAINER, NULL) == 0 && post(&run, &pa, FX_AUDITOR, NULL) == 0);
    CHECK_EQ_U64(game_of(&run).outcome, CHAIN_NARROW_COUNTS_DIFFER);
    fx_run_free(&run);

    /* the leaves K disagree on the batch: the auditor posts its preimage
     * alone and the narrowing ends InputsDiffer, nobody losing */
    auditor_batch_differs = true;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    auditor_batch_differs = false;
    pt = post_of(&run, &liar, FX_TRAINER);
    pa = (chain_narrow_post){.leaf = run.auditor.pre[sc.step]};
    CHECK(post(&run, &pt, FX_TRAINER, NULL) == 0 && post(&run, &pa, FX_AUDITOR, NULL) == 0);
    CHECK_EQ_U64(game_of(&run).outcome, CHAIN_NARROW_INPUTS_DIFFER);
    fx_run_free(&run);

    /* a trace whose record at the differing site names another site: the
     * record is under the liar's root, and still loses (BadItem) */
    static party_step misnumbered;
    honest_step(&misnumbered);
    fault_trace(&misnumbered);
    misnumbered.rec[sc.fault_site][0] = (uint8_t)(sc.fault_site + 1);
    ovt_tree_leaf(&misnumbered.rec_hash[sc.fault_site], misnumbered.rec[sc.fault_site],
                  misnumbered.rec_len[sc.fault_site]);
    hash_trace(&misnumbered);
    CHECK(run_to_verdict(&run, &misnumbered, &honest) == 0);
    CHECK(play(&run, &misnumbered, &honest, NULL) == 0);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_TRACE);
    CHECK_EQ_U64(g.index, sc.fault_site);
    fx_run_free(&run);
    free_step(&misnumbered);
}

/* A synthetic step: nsites sites, 16 tensors, K = 3; site fault_site's
 * output is big_n elements, the liar's differs at fault_element; the
 * honest party's and the liar's steps. */
static void synthetic_scenario(size_t nsites, size_t fault_site, uint64_t big_n, uint64_t fault_element,
                               const char *fault_op)
{
    free_step(&honest);
    free_step(&liar);
    memset(&sc, 0, sizeof sc);
    sc.fault_op = fault_op;
    sc.nsites = nsites;
    sc.fault_site = fault_site;
    sc.big_n = big_n;
    sc.fault_element = fault_element;
    sc.nt = SYN_NT;
    sc.step = 3;
    tc_rnd_hash(&sc.config_hash);
    for (size_t t = 0; t < sc.nt; t++)
        sc.sizes[t] = t == BIG_TENSOR ? BIG_TENSOR_N : 10 + t;
    static party_step prev;
    honest_step(&prev); /* state K-1: the honest draws, each tensor's first element moved */
    for (size_t j = 0; j < 3 * sc.nt; j++) {
        prev.state[j][0] -= 1.0f;
        if (trn_state_tensor_digest(&sc.prev_roots[j], TRN_STATE_HASH_TREE, prev.state[j], sc.sizes[j % sc.nt]) != 0)
            abort();
    }
    trn_state_hash_combine(&sc.prev_state_hash, TRN_STATE_HASH_TREE, &sc.config_hash, sc.step - 1, sc.nt,
                           sc.prev_roots);
    free_step(&prev);
    honest_step(&honest);
    honest_step(&liar);
    fault_trace(&liar);
}

/* A real step's trace into p: its records in the trace encoding, the output
 * roots, and the state after it. */
static void real_step(party_step *p, const krn_trace *t, const trn_state *st)
{
    memset(p, 0, sizeof *p);
    for (size_t i = 0; i < sc.nsites; i++) {
        const krn_trace_record *r = krn_trace_record_at(t, i);
        size_t len = krn_trace_encode(t, i, NULL, 0);
        p->rec[i] = malloc(len);
        p->rec_len[i] = krn_trace_encode(t, i, p->rec[i], len);
        p->rec_hash[i] = r->hash;
        p->out_root[i] = r->root;
        p->n[i] = r->n;
    }
    hash_trace(p);
    memcpy(p->sizes, sc.sizes, sizeof p->sizes);
    trn_state_digests(p->roots, st);
    trn_state_hash(&p->state_hash, st);
}

/* traced_step's element flip: the element of flip_site whose bit 3 flips,
 * and a site whose output values the party keeps (for the element stage;
 * SIZE_MAX: none). */
static uint64_t flip_element;
static size_t keep_site = SIZE_MAX;

/* One traced gpt2-tiny step of a copy of st0 (flip_site >= 0: one bit of
 * that site's output flipped, every later site computing from it). */
static int traced_step(party_step *p, const trn_state *st0, const trn_batch *b, long flip_site)
{
    krn_ctx *ctx = NULL;
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = 32, .threads = 1};
    trn_state *st = NULL;
    trn_workspace *w = NULL;
    krn_trace *t = NULL;
    krn_rlog *log = krn_rlog_new();
    int trace_rc = 0, rc = -1;
    ovt_hash root;
    trn_step_info info;
    if (!log || krn_ctx_new(&ctx, &kc) != 0 || trn_state_clone(&st, st0) != 0 ||
        trn_workspace_new(&w, &st0->config) != 0 || krn_trace_new(&t, keep_site != SIZE_MAX) != 0)
        goto out;
    if (flip_site >= 0)
        krn_ctx_flip_output_bit(ctx, (uint32_t)flip_site, flip_element, 3);
    if (trn_train_step_traced(ctx, w, st, b, log, t, &info, &trace_rc, &root) != 0 || trace_rc != 0)
        goto out;
    sc.nsites = krn_trace_count(t);
    if (sc.nsites > MAX_SITES)
        goto out;
    real_step(p, t, st);
    size_t kept = 0;
    const float *v = keep_site < sc.nsites ? krn_trace_written(t, KRN_TRACE_SITE, (uint32_t)keep_site, &kept) : NULL;
    if (v && kept == p->n[keep_site] && (p->out[keep_site] = malloc(kept * sizeof(float))))
        memcpy(p->out[keep_site], v, kept * sizeof(float));
    rc = memcmp(root.b, p->trace_root.b, 32) == 0 ? 0 : -1; /* the trace's own root is the tree here */
out:
    if (rc)
        fprintf(stderr, "traced step: %s\n", ovt_errmsg());
    krn_trace_free(t);
    krn_rlog_free(log);
    trn_workspace_free(w);
    trn_state_free(st);
    krn_ctx_free(ctx);
    return rc;
}

/* A real gpt2-tiny step (B 4, T 8, the tree stateHash): the liar flips one
 * bit of a late site's output whose tree is one leaf; the narrowing ends on
 * that site and its block 0, the claims being the records' output roots,
 * and the op named by the real record. op (not NULL): the liar flips bit 3
 * of element 17 of the first site of op (an element op), and the narrowing
 * goes on to the element stage and ends on element 17, the two nodes the
 * element leaves of the two real values. */
static void test_gpt2_tiny(const char *op)
{
    trn_model_config m;
    trn_run_config rc;
    CHECK(trn_model_preset(&m, "gpt2-tiny") == 0);
    trn_config_default(&rc, &m);
    rc.seed = 3;
    rc.warmup_steps = 0;
    rc.batch_size = 4;
    rc.seq_len = 8;
    rc.state_hash = TRN_STATE_HASH_TREE;
    enum { N = 400 };
    uint32_t toks[N];
    for (int i = 0; i < N; i++)
        toks[i] = (uint32_t)((i * 37 + i / 5) % m.vocab);
    uint8_t *buf;
    size_t len;
    data_tokens tokens;
    data_token_batch tb;
    CHECK(data_tokens_encode(toks, N, m.vocab, &buf, &len) == 0 && data_tokens_parse(&tokens, buf, len) == 0);
    free(buf);
    rc.dataset_hash = tokens.hash;
    CHECK(data_token_batch_get(&tb, &tokens, rc.seed, 1, rc.batch_size, rc.seq_len) == 0);
    trn_batch b = {.B = tb.B, .T = tb.T, .inputs = tb.inputs, .targets = tb.targets};
    trn_state *st0;
    CHECK(trn_state_new(&st0, &rc) == 0);
    trn_state_init(st0);

    memset(&sc, 0, sizeof sc);
    sc.step = 1;
    sc.config_hash = st0->config_hash;
    sc.nt = st0->layout.count;
    CHECK(sc.nt <= MAX_NT);
    for (size_t i = 0; i < sc.nt; i++)
        sc.sizes[i] = st0->layout.t[i].size;
    trn_state_digests(sc.prev_roots, st0);
    trn_state_hash(&sc.prev_state_hash, st0);

    static party_step real_honest, real_liar;
    CHECK(traced_step(&real_honest, st0, &b, -1) == 0);
    /* the last site past the middle whose output is one leaf of 64 or more and that level 3 ends
     * (not a chunk op: encoder.bwd.dwpe would be it) */
    size_t site = sc.nsites;
    for (size_t i = sc.nsites - 2; !op && i >= sc.nsites / 2 && site == sc.nsites; i--) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)real_honest.rec[i][4], (const char *)real_honest.rec[i] + 5);
        if (real_honest.n[i] >= 64 && real_honest.n[i] * 4 <= OVT_TREE_LEAF_BYTES && !arb_chunk_supported(name))
            site = i;
    }
    for (size_t i = 0; op && i < sc.nsites && site == sc.nsites; i++) /* the first site of op */
        if (real_honest.rec[i][4] == strlen(op) && !memcmp(real_honest.rec[i] + 5, op, strlen(op)))
            site = i;
    CHECK(site < sc.nsites);
    flip_element = op ? 17 : 0;
    keep_site = op ? site : SIZE_MAX;
    free_step(&real_honest);
    CHECK(traced_step(&real_honest, st0, &b, -1) == 0);
    CHECK(traced_step(&real_liar, st0, &b, (long)site) == 0);
    keep_site = SIZE_MAX;
    printf("gpt2-tiny: %zu sites, %zu tensors; the liar flips site %zu (%.*s, %" PRIu64 " elements)\n", sc.nsites,
           sc.nt, site, (int)real_honest.rec[site][4], (const char *)real_honest.rec[site] + 5, real_honest.n[site]);

    fx_run run;
    CHECK(run_to_verdict(&run, &real_liar, &real_honest) == 0);
    CHECK(play(&run, &real_liar, &real_honest, NULL) == 0);
    chain_narrow_game g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_NARROWED);
    CHECK_EQ_U64(g.item_stage, CHAIN_NARROW_STAGE_TRACE);
    CHECK_EQ_U64(g.item, site);
    CHECK_EQ_U64(g.block, 0);
    CHECK_EQ_U64(g.stage, op ? CHAIN_NARROW_STAGE_ELEMENTS : CHAIN_NARROW_STAGE_OUTPUT);
    const ovt_hash *leaf_t = op ? &g.trainer_side.block_leaf : &g.trainer_side.node;
    const ovt_hash *leaf_a = op ? &g.auditor_side.block_leaf : &g.auditor_side.node;
    CHECK_MEM(leaf_t->b, real_liar.out_root[site].b, 32);
    CHECK_MEM(leaf_a->b, real_honest.out_root[site].b, 32);
    if (op && real_liar.out[site] && real_honest.out[site]) {
        CHECK_EQ_U64(g.chunk, 17);
        CHECK_EQ_U64(g.count, real_honest.n[site]);
        ovt_hash et, eh;
        chain_narrow_element_leaves(&et, &real_liar.out[site][17], 1);
        chain_narrow_element_leaves(&eh, &real_honest.out[site][17], 1);
        CHECK(memcmp(et.b, eh.b, 32) != 0);
        CHECK_MEM(g.trainer_side.node.b, et.b, 32);
        CHECK_MEM(g.auditor_side.node.b, eh.b, 32);
        printf("gpt2-tiny: %s site %zu narrowed to element 17 of %" PRIu64 "\n", op, site, real_honest.n[site]);
    }
    CHECK_EQ_U64(g.auditor_side.elements, real_honest.n[site]);
    const uint8_t *rec = real_honest.rec[site]; /* u32 site, u8 length, the op's name */
    CHECK(rec[4] <= 32 && memcmp(g.op.b, rec + 5, rec[4]) == 0);
    fx_run_free(&run);
    free_step(&real_honest);
    free_step(&real_liar);
    trn_state_free(st0);
    data_token_batch_free(&tb);
    data_tokens_free(&tokens);
}

/* --- level 4: the chunk chains of a chunk op's block */

/* The root of a chain's leaves. */
static ovt_hash chain_root_of(const ovt_hash *leaves, size_t n)
{
    ovt_hash root, *copy = malloc(n * sizeof *copy);
    memcpy(copy, leaves, n * sizeof *copy);
    ovt_tree_root_of_leaves(&root, copy, n);
    free(copy);
    return root;
}

/* A whole chunk stage played by the planner for both sides: level 3 ends
 * on the block, both post their chains of C + 1 leaves, and the descent
 * ends on chunk diff, the first leaf where the liar's chain differs (diff
 * = C: only the final step's leaf, the block's output leaf, differs). */
static void test_chunks(size_t chunks, size_t diff)
{
    sc.chunks = chunks;
    liar.chain_diff = diff;
    fx_run run;
    gas_log gl = {0};
    chain_narrow_game g = play_narrowed(&run, &gl, CHAIN_NARROW_STAGE_CHUNKS);
    CHECK_EQ_U64(g.chunk, diff);
    ovt_hash *lt = NULL, *lh = NULL;
    size_t nt = 0, nh = 0;
    CHECK(chain_of(&liar, g.item, g.block, &lt, &nt) == 0 && chain_of(&honest, g.item, g.block, &lh, &nh) == 0);
    CHECK_EQ_U64(nt, chunks + 1);
    CHECK_EQ_U64(g.trainer_side.chunks, chunks + 1);
    CHECK_EQ_U64(g.auditor_side.chunks, chunks + 1);
    if (lt && lh && nt == nh && diff < nt) {
        CHECK(memcmp(lt, lh, diff * sizeof *lt) == 0 && memcmp(lt[diff].b, lh[diff].b, 32) != 0);
        CHECK_MEM(g.trainer_side.node.b, lt[diff].b, 32);
        CHECK_MEM(g.auditor_side.node.b, lh[diff].b, 32);
        CHECK_MEM(g.trainer_side.block_leaf.b, lt[nt - 1].b, 32); /* the level-3 leaves */
        CHECK_MEM(g.auditor_side.block_leaf.b, lh[nh - 1].b, 32);
        ovt_hash rt = chain_root_of(lt, nt), rh = chain_root_of(lh, nh);
        CHECK_MEM(g.trainer_side.chain_root.b, rt.b, 32);
        CHECK_MEM(g.auditor_side.chain_root.b, rh.b, 32);
    }
    free(lt);
    free(lh);
    printf("gas: chunk stage, %zu chunks (first difference at %zu): postChunks first %" PRIu64 ", second %" PRIu64
           "; %" PRIu64 " moves, %" PRIu64 " in all\n",
           chunks, diff, gl.chunk_post[0], gl.chunk_post[1], gl.nchunk, gl.chunk_total);
    if (chunks == 8192) /* docs/contract.md's figure: a bound, so a change that costs more shows */
        CHECK_MSG(gl.chunk_total <= CHUNK_GAS_8192 * 105 / 100, "%" PRIu64 " gas, more than 5%% over %u",
                  gl.chunk_total, CHUNK_GAS_8192);
    fx_run_free(&run);
}

/* At the chunk posting the trainer posts a chain its level-3 leaf
 * contradicts, and loses: what 0 its proof one bit off, 1 the proof of
 * another leaf (the one before the last), 2 the honest party's chain (its
 * last leaf is not the trainer's), 3 a one-leaf chain, its level-3 leaf
 * alone (a valid tree, but no chunk), 4 count 0. */
static void test_chunk_bad_post(int what)
{
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pt, pa;
    chain_narrow_game g = reach(&run, CHAIN_NARROW_STAGE_CHUNKS, CHAIN_NARROW_PHASE_POSTING, &pt, &pa);
    chain_narrow_post posts[2] = {pt, pa};
    chain_narrow_party party = party_of(what == 2 ? &honest : &liar, FX_TRAINER, posts);
    chain_narrow_move mv;
    if (what == 2) { /* the planner refuses to post a chain that is not its own */
        CHECK(chain_narrow_plan_move(&mv, &g, &party) != 0);
        CHECK_MSG(strstr(ovt_errmsg(), "level-3 leaf") != NULL, "%s", ovt_errmsg());
        party = party_of(&honest, FX_AUDITOR, posts);
        g.moved = 0;
    }
    CHECK(chain_narrow_plan_move(&mv, &g, &party) == 0);
    CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_POST_CHUNKS);
    if (what == 0) {
        CHECK(mv.nproof > 0);
        mv.proof[0].b[3] ^= 1;
    } else if (what == 1) {
        ovt_hash *leaves;
        size_t n;
        CHECK(chain_of(&liar, g.item, g.block, &leaves, &n) == 0);
        CHECK(ovt_tree_proof(mv.proof, &mv.nproof, leaves, n, n - 2, 1) == 0);
        free(leaves);
    } else if (what == 3) {
        mv.chain_root = g.trainer_side.block_leaf;
        mv.chain_count = 1;
        mv.nproof = 0;
    } else if (what == 4) {
        mv.chain_count = 0;
    }
    chain_receipt r;
    CHECK(chain_narrow_send_move(&narrow, &env.txm[FX_TRAINER], &run.run_id, &party, &mv, &r) == 0);
    chain_receipt_free(&r);
    g = game_of(&run);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_CHUNKS);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    fx_run_free(&run);
}

/* Chains of different lengths, each proved: CountsDiffer in stage Chunks
 * (the arbiter rules on the count from the record's rows). */
static void test_chunk_counts(void)
{
    liar.chain_extra = 1;
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    CHECK(play(&run, &liar, &honest, NULL) == 0);
    chain_narrow_game g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_COUNTS_DIFFER);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_CHUNKS);
    CHECK_EQ_U64(g.trainer_side.chunks, sc.chunks + 2);
    CHECK_EQ_U64(g.auditor_side.chunks, sc.chunks + 1);
    fx_run_free(&run);
    liar.chain_extra = 0;
}

/* Silence at level 4's posting (stage CHUNKS or ELEMENTS): an old party
 * (no chunk_leaves, no element_values) plans no move, and the party that
 * posted nothing loses at timeout. Before: a postChunks (postElements) at
 * the trace posting (phase Posting, round 0 too) reverts WrongStage. */
static void test_level4_silence(chain_narrow_stage stage)
{
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    CHECK(chain_narrow_start(&narrow, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0); /* posting, round 0 */
    chain_buf data;
    chain_buf_init(&data);
    ovt_hash zero = {{0}};
    CHECK((stage == CHAIN_NARROW_STAGE_CHUNKS ? chain_narrow_encode_post_chunks(&data, &run.run_id, 0, &zero, 2, NULL, 0)
                                              : chain_narrow_encode_post_elements(&data, &run.run_id, 0, &zero)) == 0);
    CHECK_REVERT(FX_TRAINER, &data, "WrongStage");
    chain_buf_free(&data);
    chain_narrow_post pt, pa;
    chain_narrow_game g = reach(&run, stage, CHAIN_NARROW_PHASE_POSTING, &pt, &pa);
    chain_narrow_post posts[2] = {pt, pa};
    chain_narrow_party old = party_of(&liar, FX_TRAINER, posts);
    old.chunk_leaves = NULL;
    old.element_values = NULL;
    chain_narrow_move mv;
    CHECK(chain_narrow_plan_move(&mv, &g, &old) == 0);
    CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_NONE);
    int m;
    CHECK(move(&run, &honest, FX_AUDITOR, NULL, &m) == 0 && m);
    CHECK(fx_warp(&env, MOVE_TIMEOUT + 1) == 0);
    CHECK(chain_narrow_timeout(&narrow, &env.txm[FX_OUTSIDER], &run.run_id, NULL) == 0);
    g = game_of(&run);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_TRAINER_LOST);
    CHECK_EQ_U64(g.stage, stage);
    fx_run_free(&run);
}

/* --- level 4: the elements of an element op's block (one value per row) */

/* The element leaves of p's leaf `block` of the fault site (*n of them). */
static ovt_hash *element_leaves_of(const party_step *p, uint64_t block, size_t *n)
{
    float *v = NULL;
    if (values_of((void *)p, sc.fault_site, block, &v, n) != 0)
        return NULL;
    ovt_hash *h = malloc(*n * sizeof *h);
    chain_narrow_element_leaves(h, v, *n);
    free(v);
    return h;
}

/* A whole element stage played by the planner for both sides, over the
 * scenario's op: level 3 ends on the fault's block, both post their
 * element roots and the descent ends on the fault's element in that leaf,
 * the two nodes the two values' element leaves. */
static void test_elements(void)
{
    fx_run run;
    gas_log gl = {0};
    chain_narrow_game g = play_narrowed(&run, &gl, CHAIN_NARROW_STAGE_ELEMENTS);
    uint64_t e = sc.fault_element % CHAIN_NARROW_LEAF_ELEMENTS;
    CHECK_EQ_U64(g.chunk, e);
    size_t nt = 0, nh = 0;
    ovt_hash *lt = element_leaves_of(&liar, g.block, &nt), *lh = element_leaves_of(&honest, g.block, &nh);
    uint64_t rest = sc.big_n - g.block * CHAIN_NARROW_LEAF_ELEMENTS;
    CHECK_EQ_U64(nt, rest < CHAIN_NARROW_LEAF_ELEMENTS ? rest : CHAIN_NARROW_LEAF_ELEMENTS);
    CHECK_EQ_U64(g.count, nt); /* the contract's count: the record's elements past the leaf's first */
    if (lt && lh && nt == nh && e < nt) {
        CHECK(memcmp(lt, lh, e * sizeof *lt) == 0 && memcmp(lt[e].b, lh[e].b, 32) != 0);
        CHECK_MEM(g.trainer_side.node.b, lt[e].b, 32);
        CHECK_MEM(g.auditor_side.node.b, lh[e].b, 32);
        ovt_hash rt = chain_root_of(lt, nt), rh = chain_root_of(lh, nh);
        CHECK_MEM(g.trainer_side.chain_root.b, rt.b, 32);
        CHECK_MEM(g.auditor_side.chain_root.b, rh.b, 32);
        /* the value at e, as a block package would carry it, hashes to the node */
        ovt_hash one;
        chain_narrow_element_leaves(&one, &honest.out[sc.fault_site][sc.fault_element], 1);
        CHECK_MEM(one.b, g.auditor_side.node.b, 32);
    }
    size_t nl;
    ovt_hash *out_t = tensor_leaves(liar.out[sc.fault_site], sc.big_n, NULL, &nl);
    ovt_hash *out_h = tensor_leaves(honest.out[sc.fault_site], sc.big_n, NULL, &nl);
    CHECK_MEM(g.trainer_side.block_leaf.b, out_t[g.block].b, 32); /* the level-3 leaves */
    CHECK_MEM(g.auditor_side.block_leaf.b, out_h[g.block].b, 32);
    free(out_t);
    free(out_h);
    free(lt);
    free(lh);
    printf("gas: element stage (%s), %zu elements (first difference at %" PRIu64 "): postElements first %" PRIu64
           ", second %" PRIu64 "; %" PRIu64 " moves, %" PRIu64 " in all\n",
           sc.fault_op, nt, e, gl.chunk_post[0], gl.chunk_post[1], gl.nchunk, gl.chunk_total);
    if (nt == CHAIN_NARROW_LEAF_ELEMENTS) /* docs/contract.md's figure: a bound, so a change that costs more shows */
        CHECK_MSG(gl.chunk_total <= ELEMENT_GAS_16384 * 105 / 100, "%" PRIu64 " gas, more than 5%% over %u",
                  gl.chunk_total, ELEMENT_GAS_16384);
    fx_run_free(&run);
}

/* The scenario with the liar's value of site 7 (op) differing at element
 * `element` of its 6-leaf output (the last leaf 100 elements). */
static void element_scenario(const char *op, uint64_t element)
{
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, element, op);
}

/* The liar posts the honest party's element root (its planner refuses to
 * build a tree of values that are not its level-3 leaf's): equal roots end
 * ElementsAgree in stage Elements, the arbiter ruling from the block
 * packages; both roots stay in getNarrow. */
static void test_elements_agree(void)
{
    fx_run run;
    CHECK(run_to_verdict(&run, &liar, &honest) == 0);
    chain_narrow_post pt, pa;
    chain_narrow_game g = reach(&run, CHAIN_NARROW_STAGE_ELEMENTS, CHAIN_NARROW_PHASE_POSTING, &pt, &pa);
    CHECK_EQ_U64(g.count, CHAIN_NARROW_LEAF_ELEMENTS);
    chain_narrow_post posts[2] = {pt, pa};
    chain_narrow_party party = party_of(&honest, FX_TRAINER, posts);
    chain_narrow_move mv;
    CHECK(chain_narrow_plan_move(&mv, &g, &party) != 0);
    CHECK_MSG(strstr(ovt_errmsg(), "level-3 leaf") != NULL, "%s", ovt_errmsg());
    party = party_of(&honest, FX_AUDITOR, posts);
    CHECK(chain_narrow_plan_move(&mv, &g, &party) == 0);
    CHECK_EQ_U64(mv.kind, CHAIN_NARROW_MOVE_POST_ELEMENTS);
    CHECK(chain_narrow_post_elements(&narrow, &env.txm[FX_TRAINER], &run.run_id, g.round, &mv.chain_root, NULL) == 0);
    int m;
    CHECK(move(&run, &honest, FX_AUDITOR, NULL, &m) == 0 && m);
    g = game_of(&run);
    CHECK_EQ_U64(g.phase, CHAIN_NARROW_PHASE_ENDED);
    CHECK_EQ_U64(g.outcome, CHAIN_NARROW_ELEMENTS_AGREE);
    CHECK_EQ_U64(g.stage, CHAIN_NARROW_STAGE_ELEMENTS);
    CHECK_MEM(g.trainer_side.chain_root.b, mv.chain_root.b, 32);
    CHECK_MEM(g.auditor_side.chain_root.b, mv.chain_root.b, 32);
    CHECK(memcmp(g.trainer_side.block_leaf.b, g.auditor_side.block_leaf.b, 32) != 0);
    /* the nodes stay the level-3 leaves: the leaf packages are named by them */
    CHECK_MEM(g.trainer_side.node.b, g.trainer_side.block_leaf.b, 32);
    CHECK_MEM(g.auditor_side.node.b, g.auditor_side.block_leaf.b, 32);
    fx_run_free(&run);
}

/* OvtNarrow's isChunkOp(op), by eth_call on the deployed contract. */
static int contract_chunk_op(const char *op, bool *yes)
{
    uint8_t data[4 + 32] = {0};
    chain_abi_selector(data, "isChunkOp(bytes32)");
    size_t len = strlen(op);
    if (len > 32)
        return -1;
    memcpy(data + 4, op, len); /* the name zero padded to 32 bytes, as the records' op */
    chain_call_msg msg = {.to = &narrow.address, .data = data, .data_len = sizeof data};
    chain_buf out;
    chain_buf_init(&out);
    int rc = chain_rpc_eth_call(env.rpc, &out, &msg, NULL);
    if (rc == 0 && out.len != 32)
        rc = -1;
    if (rc == 0)
        *yes = out.data[31] != 0;
    chain_buf_free(&out);
    return rc;
}

/* The contract's chunk op set is the chunk engine's (arb_chunk_supported),
 * for every op the block engine's table knows: a site the engine can chain
 * goes on to stage Chunks, and no other does, so the two never drift. */
static void test_chunk_op_sets(void)
{
    size_t n = blk_op_count(), chunk_ops = 0;
    CHECK(n > 0);
    for (size_t i = 0; i < n; i++) {
        const char *op = blk_op_name(i);
        bool on_chain = false;
        CHECK_MSG(contract_chunk_op(op, &on_chain) == 0, "isChunkOp('%s'): %s", op, ovt_errmsg());
        CHECK_MSG(on_chain == arb_chunk_supported(op), "op '%s': the contract's isChunkOp says %d, the engine's "
                  "arb_chunk_supported %d", op, on_chain, arb_chunk_supported(op));
        chunk_ops += on_chain;
    }
    CHECK(blk_op_name(n) == NULL);
    printf("chunk ops: %zu of the engine's %zu ops on chain\n", chunk_ops, n);
    CHECK(chunk_ops >= 10);
}

/* OvtNarrow's runtime code size (eth_getCode), under EIP-170's limit. */
static void test_code_size(void)
{
    char addr[43];
    chain_address_to_string(addr, &narrow.address);
    json_t *code = NULL;
    CHECK(chain_rpc_call(env.rpc, &code, "eth_getCode", json_pack("[s,s]", addr, "latest")) == 0);
    const char *hex = json_string_value(code);
    size_t bytes = hex && strlen(hex) > 2 ? (strlen(hex) - 2) / 2 : 0;
    printf("OvtNarrow runtime code: %zu bytes (EIP-170: %u)\n", bytes, EIP170_LIMIT);
    CHECK(bytes > 0 && bytes <= EIP170_LIMIT);
    json_decref(code);
}

int main(void)
{
    if (fx_start(&env) != 0)
        return 1;
    fx_seed(42);
    narrow = env.narrow; /* deployed bound to env.arb by the fixture */
    /* site 7's output 6 leaves, the liar's differs in leaf 4 */
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "matmul.fwd");
    mine(120); /* a chain with a past: the narrowing's events are not near block 0 */
    CHECK_RUN(test_honest_path(true));
    CHECK_RUN(test_verdict_follows_narrowing());
    CHECK_RUN(test_extend_rules());
    CHECK_RUN(test_state_path());
    CHECK_RUN(test_bad_post(0));
    CHECK_RUN(test_bad_post(1));
    CHECK_RUN(test_bad_post(2));
    CHECK_RUN(test_bad_move(CHAIN_NARROW_STAGE_TRACE, CHAIN_NARROW_PHASE_REVEALING));
    CHECK_RUN(test_bad_move(CHAIN_NARROW_STAGE_OUTPUT, CHAIN_NARROW_PHASE_DESCENDING));
    CHECK_RUN(test_withholding());
    CHECK_RUN(test_other_ends());
    /* level 4: site 7 is a weight gradient (sums over the batch), the same block, 8 chunks */
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "matmul.bwd.dweight");
    CHECK_RUN(test_chunks(8, 0));
    CHECK_RUN(test_chunks(8, 5));
    CHECK_RUN(test_chunks(8, 8));
    CHECK_RUN(test_chunks(1, 1));
    sc.chunks = 8;
    liar.chain_diff = 5;
    for (int what = 0; what <= 4; what++)
        CHECK_RUN(test_chunk_bad_post(what));
    CHECK_RUN(test_chunk_counts());
    CHECK_RUN(test_bad_move(CHAIN_NARROW_STAGE_CHUNKS, CHAIN_NARROW_PHASE_DESCENDING));
    CHECK_RUN(test_level4_silence(CHAIN_NARROW_STAGE_CHUNKS));
    CHECK_RUN(test_chunks(1024, 777));
    CHECK_RUN(test_chunks(8192, 4321));
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "bias.bwd");
    CHECK_RUN(test_chunks(8, 3));
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "matmul.bwd.dbias");
    CHECK_RUN(test_chunks(8, 6));
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "conv.bwd.dweight");
    CHECK_RUN(test_chunks(8, 2));
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "gradnorm.sumsq");
    CHECK_RUN(test_chunks(8, 7));
    synthetic_scenario(SYN_SITES, 7, 5u * 16384u + 100u, 4u * 16384u + 9u, "rmsnorm.bwd.dweight");
    CHECK_RUN(test_chunks(8, 4));
    CHECK_RUN(test_chunk_op_sets());
    /* level 4 of an element op: site 7 is xent.sum, its leaf 4 full, its leaf 5 (the last) 100 elements */
    static const uint64_t element_faults[] = {4u * 16384u, 4u * 16384u + 9u, 4u * 16384u + 16383u, 5u * 16384u,
                                              5u * 16384u + 99u};
    for (size_t k = 0; k < sizeof element_faults / sizeof element_faults[0]; k++) {
        element_scenario("xent.sum", element_faults[k]);
        CHECK_RUN(test_elements());
    }
    static const char *const element_ops[] = {"xent.logsum", "xent.losses", "layernorm.mean", "layernorm.var",
                                              "layernorm.rstd", "layernorm.bwd.dmean", "layernorm.bwd.dnmean",
                                              "rmsnorm.ms", "rmsnorm.rstd", "rmsnorm.bwd.dnmean", "attn.sum",
                                              "attn.bwd.r"};
    for (size_t k = 0; k < sizeof element_ops / sizeof element_ops[0]; k++) {
        element_scenario(element_ops[k], 4u * 16384u + 9u);
        CHECK_RUN(test_elements());
    }
    element_scenario("layernorm.fwd", 4u * 16384u + 9u); /* one value per element: level 3 is the end */
    CHECK_RUN(test_honest_path(false));
    element_scenario("xent.sum", 4u * 16384u + 777u);
    CHECK_RUN(test_elements_agree());
    CHECK_RUN(test_bad_move(CHAIN_NARROW_STAGE_ELEMENTS, CHAIN_NARROW_PHASE_DESCENDING));
    CHECK_RUN(test_level4_silence(CHAIN_NARROW_STAGE_ELEMENTS));
    CHECK_RUN(test_code_size());
    free_step(&honest);
    free_step(&liar);
    CHECK_RUN(test_gpt2_tiny(NULL));
    CHECK_RUN(test_gpt2_tiny("xent.sum"));
    CHECK_RUN(test_gpt2_tiny("layernorm.bwd.dmean"));
    /* gpt2-small's 741 sites; a 64 MiB output (1024 leaves) at site 600, the liar's leaf 777 */
    synthetic_scenario(741, 600, 1024u * 16384u, 777u * 16384u + 5u, "matmul.fwd");
    CHECK_RUN(test_honest_path(false));
    free_step(&honest);
    free_step(&liar);
    fx_stop(&env);
    return check_done();
}
