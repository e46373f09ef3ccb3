/* The chunk engine (arbiter/block_chunk.h), level 4 of the arbiter.
 * First the exact accumulator (arbiter/xsum.h) against sums computed
 * without it: random products exact in a 128-bit integer, and hand-picked
 * extremes (the smallest and largest float32 products, cancellation, ties
 * of the final rounding). Then real steps of gpt2-tiny, llama-tiny and
 * mlp-demo: for every leaf of every site the chain covers, the chain's last
 * leaf is the whole step's traced output leaf, bit for bit, and stepping
 * the chain chunk by chunk from proven slices of only the chunk's rows and
 * the previous state gives the same leaves. Then what must fail: a changed
 * slice (refused), a changed or wrong-sized previous state (another leaf,
 * or refused), the slices of another chunk (refused), a dropped log entry
 * at the last step (another leaf, or refused). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbiter/block.h"
#include "arbiter/block_chunk.h"
#include "arbiter/block_file.h"
#include "arbiter/xsum.h"
#include "block_fixture.h"
#include "check.h"
#include "common/tree.h"
#include "kernels/ops.h"

#define LEAF_ELEMS (OVT_TREE_LEAF_BYTES / 4)

/* ---- the accumulator against a 128-bit integer ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The canonical bytes of I * 2^-40 (I * 2^280 as a 640-bit two's
 * complement integer), from I alone. */
static void bytes_of_int128(__int128 I, uint8_t out[XSUM_BYTES])
{
    memset(out, 0, 35);
    memset(out + 51, I < 0 ? 0xff : 0, XSUM_BYTES - 51);
    unsigned __int128 u = (unsigned __int128)I;
    for (int b = 0; b < 16; b++)
        out[35 + b] = (uint8_t)(u >> (8 * b));
}

static xsum_f32 split(float f)
{
    xsum_f32 s;
    CHECK(xsum_split(f, &s));
    return s;
}

static void test_xsum_random(void)
{
    int trials = 0, same_bytes = 0, same_double = 0;
    for (int t = 0; t < 200; t++) {
        xsum s;
        memset(&s, 0, sizeof s);
        __int128 I = 0; /* units of 2^-40 */
        int n = 1 + (int)(rnd() % 2000);
        for (int k = 0; k < n; k++) {
            int64_t ma = (int64_t)(rnd() % 4096) - 2048, mb = (int64_t)(rnd() % 4096) - 2048;
            int ea = (int)(rnd() % 41) - 20, eb = (int)(rnd() % 41) - 20;
            if (t % 3 == 0) /* long cancellations: the same magnitudes, alternating signs */
                ma = (k & 1) ? -1000 : 1000;
            float a = ldexpf((float)ma, ea), b = ldexpf((float)mb, eb);
            xsum_add_product(&s, split(a), split(b));
            I += (__int128)(ma * mb) * ((__int128)1 << (ea + eb + 40));
            if (k % 97 == 0)
                xsum_normalize(&s);
        }
        uint8_t got[XSUM_BYTES], want[XSUM_BYTES];
        xsum_put(&s, got);
        bytes_of_int128(I, want);
        same_bytes += memcmp(got, want, sizeof got) == 0;
        xsum back;
        xsum_get(&back, got);
        same_double += xsum_to_double(&back) == ldexp((double)I, -40); /* libgcc's conversion rounds to nearest */
        trials++;
    }
    printf("xsum: %d of %d random sums the 128-bit integer's bytes, %d its double\n", same_bytes, trials,
           same_double);
    CHECK(same_bytes == trials && same_double == trials);
}

/* The sum of the products a[k] * b[k]. */
static double sum_of(const float *a, const float *b, int n, uint8_t *bytes)
{
    xsum s;
    memset(&s, 0, sizeof s);
    for (int k = 0; k < n; k++)
        xsum_add_product(&s, split(a[k]), split(b[k]));
    uint8_t tmp[XSUM_BYTES];
    xsum_put(&s, bytes ? bytes : tmp);
    return xsum_to_double(&s);
}

/* The norms' FP64 terms: held exactly when every set bit is at or above
 * 2^-320 and the value below 2^256, refused otherwise. */
static void test_xsum_f64(void)
{
    static const double ok[] = {0.0, -0.0, 1.0, -0x1.fffffffffffffp+255, 0x1p-320, -0x1.8p-319,
                                0x1.0000000000001p-268, 0x1p-1074 * 0x1p754, 3.0e-60, -7.25e60, 0x1.8p-299};
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        xsum s = {{0}}, t = {{0}};
        xsum_f64 f;
        CHECK_MSG(xsum_split64(ok[k], &f), "%a", ok[k]);
        xsum_add_f64(&s, f);
        xsum_add_f64(&s, f);
        xsum_add_abs_f64(&t, f);
        xsum_normalize(&s);
        xsum_normalize(&t);
        CHECK_MSG(xsum_to_double(&s) == 2 * ok[k] && xsum_to_double(&t) == fabs(ok[k]), "%a", ok[k]);
    }
    static const double refused[] = {0x1p-321, 0x1.0000000000001p-269, 3.0e-90, 0x1p256, -0x1p300, INFINITY, NAN,
                                     0x1p-1074};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        xsum_f64 f;
        CHECK_MSG(!xsum_split64(refused[k], &f), "%a", refused[k]);
    }
}

static void test_xsum_extremes(void)
{
    float tiny = ldexpf(1.0f, -149);
    uint8_t b[XSUM_BYTES], zero[XSUM_BYTES] = {0};
    /* the smallest product: 2^-298 = 2^22 units, bit 6 of byte 2 */
    CHECK(sum_of((float[]){tiny}, (float[]){tiny}, 1, b) == ldexp(1.0, -298));
    CHECK(b[2] == 0x40 && b[0] == 0 && b[1] == 0 && b[3] == 0 && b[79] == 0);
    /* the largest, cancelled */
    CHECK(sum_of((float[]){FLT_MAX, -FLT_MAX}, (float[]){FLT_MAX, FLT_MAX}, 2, b) == 0.0);
    CHECK(memcmp(b, zero, sizeof b) == 0);
    /* four of the largest: 2^258 and more, exact */
    double big = (double)FLT_MAX * (double)FLT_MAX;
    CHECK(sum_of((float[]){FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX}, (float[]){FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX}, 4,
                 NULL) == 4 * big);
    /* the largest and the smallest: the smallest is kept exactly (the
     * bytes differ from the largest alone), the double rounds it away */
    uint8_t b2[XSUM_BYTES];
    CHECK(sum_of((float[]){FLT_MAX, tiny}, (float[]){FLT_MAX, tiny}, 2, b2) == big);
    sum_of((float[]){FLT_MAX}, (float[]){FLT_MAX}, 1, b);
    CHECK(memcmp(b, b2, sizeof b) != 0);
    /* ties: 1 + 2^-53 rounds to even (1), 1 + 3*2^-53 up to 1 + 2^-51, a
     * tie with anything below it up; negative the same */
    float h = ldexpf(1.0f, -27), g = ldexpf(1.0f, -26);
    CHECK(sum_of((float[]){1, h}, (float[]){1, g}, 2, NULL) == 1.0);
    CHECK(sum_of((float[]){1, 3 * h}, (float[]){1, g}, 2, NULL) == 1.0 + ldexp(1.0, -51));
    CHECK(sum_of((float[]){1, h, tiny}, (float[]){1, g, tiny}, 3, NULL) == 1.0 + ldexp(1.0, -52));
    CHECK(sum_of((float[]){-1, -h}, (float[]){1, g}, 2, NULL) == -1.0);
    CHECK(sum_of((float[]){-1, -h, -tiny}, (float[]){1, g, tiny}, 3, NULL) == -(1.0 + ldexp(1.0, -52)));
    /* a negative value's bytes: -2^-298 is all ones from bit 22 up */
    sum_of((float[]){-tiny}, (float[]){tiny}, 1, b);
    CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0xc0 && b[3] == 0xff && b[79] == 0xff);
    CHECK(!xsum_split(INFINITY, &(xsum_f32){0}) && !xsum_split(NAN, &(xsum_f32){0}));
}

/* ---- the chain on real steps ---- */

/* The traced output leaf of record i's leaf L. */
static ovt_hash traced_leaf(const step_fixture *f, size_t i, uint64_t L)
{
    size_t n;
    const float *out = krn_trace_written(f->t, KRN_TRACE_SITE, (uint32_t)i, &n);
    uint64_t e0 = L * LEAF_ELEMS, e1 = e0 + LEAF_ELEMS < n ? e0 + LEAF_ELEMS : n;
    ovt_hash h;
    ovt_tree_leaf_le32(&h, out + e0, (e1 - e0) * 4);
    return h;
}

/* Chain leaf c of record i's leaf L stepped from the proven slices of
 * chunk c alone and P_{c-1}: 0 and *leaf, or the engine's failure. */
static int step_of(const step_fixture *f, size_t i, uint64_t L, uint64_t c, ovt_hash *leaf, float *values)
{
    arb_block_task whole = {.config = &f->rc, .step = 1, .threads = 1}, task = whole;
    arb_block_owned all, own;
    uint8_t *prev = NULL;
    size_t prev_len = 0;
    int rc = arb_block_from_trace(&whole, &all, f->t, i, f->log, L);
    if (rc == 0 && c > 0)
        rc = arb_chunk_partial(&whole, c - 1, &prev, &prev_len);
    if (rc == 0 && (rc = arb_chunk_from_trace(&task, &own, f->t, i, f->log, L, c)) == 0) {
        rc = arb_chunk_step(&task, c, prev, prev_len, leaf, values);
        arb_block_owned_free(&own);
    }
    arb_block_owned_free(&all); /* zeroed by a failed arb_block_from_trace */
    free(prev);
    return rc;
}

static void test_chain(const char *preset, uint32_t batch, uint32_t seq, bool every_step, int steer)
{
    step_fixture f;
    step_open_steered(&f, preset, batch, seq, steer);
    int sites = 0, leaves = 0, same = 0, stepped = 0, step_same = 0, multi_chunk = 0;
    uint64_t sumsq_chunks = 0;
    int conv_leaves = 0, norm_leaves = 0, dwpe_leaves = 0, dwte_leaves = 0;
    for (size_t i = 0; i < krn_trace_count(f.t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(f.t, i);
        if (!arb_chunk_supported(rec->op))
            continue;
        sites++;
        uint64_t nleaves = ovt_tree_leaves(rec->n * 4);
        for (uint64_t L = 0; L < nleaves; L++) {
            arb_block_task task = {.config = &f.rc, .step = 1, .threads = 1};
            arb_block_owned own;
            arb_chunk_chain ch;
            CHECK(arb_block_from_trace(&task, &own, f.t, i, f.log, L) == 0);
            int rc = arb_chunk_chain_make(&task, &ch);
            CHECK_MSG(rc == 0, "%s site %zu (%s) leaf %llu: %s", preset, i, rec->op, (unsigned long long)L,
                      ovt_errmsg());
            if (rc < 0) {
                arb_block_owned_free(&own);
                continue;
            }
            leaves++;
            multi_chunk += ch.info.chunks > 1;
            sumsq_chunks += strcmp(rec->op, "gradnorm.sumsq") == 0 ? ch.info.chunks : 0;
            conv_leaves += strcmp(rec->op, "conv.bwd.dweight") == 0;
            norm_leaves += strncmp(rec->op, "layernorm.bwd.", 14) == 0 || strncmp(rec->op, "rmsnorm.bwd.", 12) == 0;
            dwpe_leaves += strcmp(rec->op, "encoder.bwd.dwpe") == 0;
            dwte_leaves += strcmp(rec->op, "encoder.bwd.dwte") == 0;
            arb_chunk_chain again; /* read a chunk or three at a time, on 3 threads: the same chain */
            arb_chunk_walk_floats(3 * ARB_CHUNK_ROWS * (rec->n > 1 ? 200 : 1));
            task.threads = 3;
            CHECK(arb_chunk_chain_make(&task, &again) == 0);
            task.threads = 1;
            arb_chunk_walk_floats(0);
            CHECK(memcmp(again.root.b, ch.root.b, 32) == 0);
            arb_chunk_chain_free(&again);
            ovt_hash want = traced_leaf(&f, i, L);
            bool ok = memcmp(ch.leaves[ch.info.chunks].b, want.b, 32) == 0;
            CHECK_MSG(ok, "%s site %zu (%s) leaf %llu: the chain's last leaf is not the step's output leaf", preset,
                      i, rec->op, (unsigned long long)L);
            same += ok;
            bool all_chunks = every_step || L == 0 || L == nleaves - 1;
            uint64_t C = ch.info.chunks;
            for (uint64_t c = 0; all_chunks && c <= C; c = c < 1 || c + 1 >= C || C <= 8 ? c + 1
                                                           : c < C / 2 ? C / 2 : C - 1) {
                /* every chunk of a short chain; of a long one (gradnorm.sumsq) 0, 1, C/2, C-1, C */
                ovt_hash got;
                rc = step_of(&f, i, L, c, &got, NULL);
                CHECK_MSG(rc == 0, "%s site %zu (%s) leaf %llu chunk %llu: %s", preset, i, rec->op,
                          (unsigned long long)L, (unsigned long long)c, ovt_errmsg());
                stepped++;
                step_same += rc == 0 && memcmp(got.b, ch.leaves[c].b, 32) == 0;
            }
            arb_chunk_chain_free(&ch);
            arb_block_owned_free(&own);
        }
    }
    printf("%s%s: %d sites the chain covers, %d leaves (%d of several chunks): %d last leaves the step's; %d chunk "
           "steps from their rows, %d the chain's; gradnorm.sumsq's chain %llu chunks; %d conv.bwd.dweight leaves; %d "
           "norm column-sum leaves; %d encoder.bwd.dwpe, %d encoder.bwd.dwte leaves\n",
           preset, steer > 0 ? " (steered up)" : steer < 0 ? " (steered down)" : "", sites, leaves, multi_chunk, same, stepped, step_same, (unsigned long long)sumsq_chunks,
           conv_leaves, norm_leaves, dwpe_leaves, dwte_leaves);
    /* the norms' column sums (FP64 terms): gpt2-tiny's layernorms, llama-tiny's RMSNorms */
    CHECK(norm_leaves > 0 || (strncmp(preset, "gpt2", 4) != 0 && strncmp(preset, "llama", 5) != 0));
    CHECK(sites > 0 && leaves >= sites && same == leaves);
    CHECK(dwpe_leaves > 0 || strncmp(preset, "gpt2", 4) != 0); /* GPT-2's position table (Llama has none) */
    CHECK(dwte_leaves > 0 || (strncmp(preset, "gpt2", 4) != 0 && strncmp(preset, "llama", 5) != 0));
    CHECK(stepped > leaves && step_same == stepped);
    CHECK(multi_chunk > 0);
    CHECK(sumsq_chunks > 8); /* every preset clips its gradient: gradnorm.sumsq is there */
    CHECK(conv_leaves > 0 || strncmp(preset, "resnet", 6) != 0);
    step_close(&f);
}

/* Values with 12-bit mantissas (bits 24: full float32 ones) over a few
 * binades, signed. */
static int fill_bits = 12;
static void fill_grid(float *v, size_t n, float scale)
{
    int64_t span = (int64_t)1 << fill_bits;
    for (size_t i = 0; i < n; i++)
        v[i] = ldexpf((float)((int64_t)(rnd() % (uint64_t)span) - span / 2), -(int)(rnd() % 6) - fill_bits + 1) *
               scale;
}

/* The ops' sites with old gradients that are not zero (every model step
 * starts its gradients from zero): matmul's dweight and dbias and
 * bias.bwd, recorded with a check-mode trace of the ops alone; every leaf's
 * chain ends at the site's traced output leaf. 300 rows (3 chunks), a
 * 200 x 100 weight gradient (2 leaves, the second from mid-row). */
static void old_gradients(int steer);
static void test_old_gradients(void)
{
    old_gradients(0);
}

/* Steered both ways; then 20 times each on full float32 values, whose
 * sums are not exact in FP64 (the trainer's chunked value is not the
 * chain's y): the strict rule 3 still accepts every steered entry. */
static void test_steered(void)
{
    old_gradients(1);
    old_gradients(-1);
    fill_bits = 24;
    for (int k = 0; k < 20; k++) {
        old_gradients(1);
        old_gradients(-1);
    }
    fill_bits = 12;
}

static void old_gradients(int steer)
{
    enum { N = 300, C = 100, OC = 200 };
    trn_model_config mc;
    trn_run_config rc;
    CHECK(trn_model_preset(&mc, "mlp-demo") == 0);
    trn_config_default(&rc, &mc);
    float *dout = malloc(N * OC * 4), *inp = malloc(N * C * 4), *w = malloc(OC * C * 4), *dw = malloc(OC * C * 4);
    float *db = malloc(OC * 4), *db2 = malloc(OC * 4);
    fill_grid(dout, N * OC, 1.0f);
    fill_grid(inp, N * C, 4.0f);
    fill_grid(w, OC * C, 1.0f);
    fill_grid(dw, OC * C, 64.0f);
    fill_grid(db, OC, 16.0f);
    fill_grid(db2, OC, 16.0f);
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = (int)rc.grid_bits, .threads = 1};
    krn_ctx *ctx;
    krn_trace *t;
    krn_rlog *log = krn_rlog_new();
    CHECK(krn_ctx_new(&ctx, &kc) == 0 && krn_trace_new(&t, true) == 0 && krn_ctx_set_trace(ctx, t) == 0);
    const char *names[6] = {"dout", "inp", "w", "dw", "db", "db2"};
    float *regions[6] = {dout, inp, w, dw, db, db2};
    size_t sizes[6] = {N * OC, N * C, OC * C, OC * C, OC, OC};
    for (int k = 0; k < 6; k++)
        CHECK(krn_trace_region(t, KRN_TRACE_STATE, names[k], regions[k], sizes[k]) == 0);
    krn_ctx_steer(ctx, steer);
    CHECK(krn_step_begin(ctx, 1, log) == 0);
    CHECK(krn_matmul_backward(ctx, NULL, dw, db, dout, inp, w, N, C, OC) == 0);
    CHECK(krn_bias_backward(ctx, db2, dout, N, OC) == 0);
    krn_stats st;
    ovt_hash root;
    CHECK(krn_step_end(ctx, &st) == 0 && krn_trace_finish(t, &root) == 0);
    int leaves = 0, same = 0;
    for (size_t i = 0; i < krn_trace_count(t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(t, i);
        CHECK(arb_chunk_supported(rec->op));
        size_t n;
        const float *out = krn_trace_written(t, KRN_TRACE_SITE, (uint32_t)i, &n);
        for (uint64_t L = 0; L < ovt_tree_leaves(rec->n * 4); L++) {
            arb_block_task task = {.config = &rc, .step = 1, .threads = 1};
            arb_block_owned own;
            arb_chunk_chain ch;
            CHECK(arb_block_from_trace(&task, &own, t, i, log, L) == 0);
            int r = arb_chunk_chain_make(&task, &ch);
            CHECK_MSG(r == 0, "%s leaf %llu: %s", rec->op, (unsigned long long)L, ovt_errmsg());
            if (r == 0) {
                ovt_hash want;
                uint64_t e0 = L * LEAF_ELEMS, e1 = e0 + LEAF_ELEMS < n ? e0 + LEAF_ELEMS : n;
                ovt_tree_leaf_le32(&want, out + e0, (e1 - e0) * 4);
                same += ch.info.chunks == 3 && memcmp(ch.leaves[3].b, want.b, 32) == 0;
                arb_chunk_chain_free(&ch);
            }
            arb_block_owned_free(&own);
            leaves++;
        }
    }
    printf("old gradients not zero%s: %zu sites, %d leaves, %d the step's (%llu log entries, %llu elements the "
           "trainer's choice, rule %d)\n",
           steer > 0 ? ", steered up" : steer < 0 ? ", steered down" : "", krn_trace_count(t), leaves, same,
           (unsigned long long)krn_rlog_nentries(log), (unsigned long long)st.ambiguous, trn_config_rule(&rc));
    CHECK(krn_trace_count(t) == 3 && leaves == 4 && same == leaves);
    krn_trace_free(t);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    free(dout), free(inp), free(w), free(dw), free(db), free(db2);
}

/* A gpt2-tiny matmul.bwd.dweight leaf with a log entry and chunks >= 2. */
static bool find_dweight(const step_fixture *f, size_t *site, uint64_t *leaf)
{
    for (size_t i = 0; i < krn_trace_count(f->t); i++) {
        const krn_trace_record *rec = krn_trace_record_at(f->t, i);
        const krn_rlog_site *ls = krn_rlog_find(f->log, rec->site);
        if (strcmp(rec->op, "matmul.bwd.dweight") || ls == NULL || ls->count == 0)
            continue;
        *site = i;
        *leaf = ls->entries[0].index / LEAF_ELEMS;
        return true;
    }
    return false;
}

/* encoder.bwd.dwte (the token embedding's gradient, a scatter by token):
 * gpt2-tiny's 512 positions are 4 chunks; chunk 1's tokens come from the
 * batch's slice, proven against its root: a changed token is refused, a
 * changed state gives another leaf, and the last step is the step's. */
static void test_dwte_tokens(void)
{
    step_fixture f;
    step_open(&f, "gpt2-tiny", 8, 64);
    size_t i = krn_trace_count(f.t);
    for (size_t k = 0; k < krn_trace_count(f.t) && i == krn_trace_count(f.t); k++)
        if (strcmp(krn_trace_record_at(f.t, k)->op, "encoder.bwd.dwte") == 0)
            i = k;
    CHECK(i < krn_trace_count(f.t));
    if (i == krn_trace_count(f.t)) {
        step_close(&f);
        return;
    }
    arb_block_task whole = {.config = &f.rc, .step = 1, .threads = 1}, t1 = whole;
    arb_block_owned all, o1;
    arb_chunk_chain ch;
    CHECK(arb_block_from_trace(&whole, &all, f.t, i, f.log, 0) == 0);
    int rc = arb_chunk_chain_make(&whole, &ch);
    CHECK_MSG(rc == 0, "encoder.bwd.dwte leaf 0: %s", ovt_errmsg());
    if (rc < 0) {
        arb_block_owned_free(&all);
        step_close(&f);
        return;
    }
    CHECK(ch.info.rows == 512 && ch.info.chunks == 4 && ch.info.summed_inputs == 2 && ch.info.old_input == 2);
    uint8_t *p0 = NULL;
    size_t len0 = 0;
    CHECK(arb_chunk_partial(&whole, 0, &p0, &len0) == 0 && len0 == ch.info.partial_len);
    CHECK(arb_chunk_from_trace(&t1, &o1, f.t, i, f.log, 0, 1) == 0);
    ovt_hash h;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0 && memcmp(h.b, ch.leaves[1].b, 32) == 0);
    arb_block_slice *tok = NULL; /* the batch's tokens: the slice that is not a site's output */
    for (size_t k = 0; k < o1.nslices; k++)
        if (o1.slices[k].kind == KRN_TRACE_BATCH)
            tok = &o1.slices[k];
    CHECK(tok != NULL);
    if (tok) { /* row 128 (chunk 1's first) names the next token: its proof fails */
        int32_t v, w;
        uint64_t at = 128 - tok->first_leaf * LEAF_ELEMS;
        memcpy(&v, &tok->data[at], 4);
        w = v + 1;
        memcpy(&tok->data[at], &w, 4);
        CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == OVT_EFRAUD);
        CHECK(strstr(ovt_errmsg(), "does not prove against its root") != NULL);
        memcpy(&tok->data[at], &v, 4);
        CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0 && memcmp(h.b, ch.leaves[1].b, 32) == 0);
    }
    /* another state before chunk 1 (one byte of an element's sum): another leaf */
    p0[7] ^= 0x10;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0 && memcmp(h.b, ch.leaves[1].b, 32) != 0);
    printf("encoder.bwd.dwte: %llu rows in %llu chunks, states of %zu bytes; a changed token refused: %s\n",
           (unsigned long long)ch.info.rows, (unsigned long long)ch.info.chunks, len0,
           tok ? "yes" : "no slice");
    free(p0);
    arb_chunk_chain_free(&ch);
    arb_block_owned_free(&o1);
    arb_block_owned_free(&all);
    step_close(&f);
}

/* A gpt2-tiny step (512 rows: 4 chunks), and a matmul.bwd.dweight site
 * and leaf with a log entry. */
static void open_dweight(step_fixture *f, size_t *i, uint64_t *L)
{
    step_open(f, "gpt2-tiny", 8, 64);
    CHECK(find_dweight(f, i, L));
}

static void test_refusals(void)
{
    step_fixture f;
    size_t i = 0;
    uint64_t L = 0;
    open_dweight(&f, &i, &L);
    arb_block_task whole = {.config = &f.rc, .step = 1, .threads = 1};
    arb_block_owned all;
    arb_chunk_chain ch;
    CHECK(arb_block_from_trace(&whole, &all, f.t, i, f.log, L) == 0);
    int rc = arb_chunk_chain_make(&whole, &ch);
    CHECK_MSG(rc == 0, "%s", ovt_errmsg());
    uint64_t C = ch.info.chunks;
    CHECK(C >= 2);
    if (rc < 0 || C < 2) { /* nothing to step */
        arb_block_owned_free(&all);
        step_close(&f);
        return;
    }
    uint8_t *p0 = NULL, *pl = NULL;
    size_t len0 = 0, lenl = 0;
    CHECK(arb_chunk_partial(&whole, 0, &p0, &len0) == 0 && len0 == ch.info.partial_len);
    CHECK(arb_chunk_partial(&whole, C - 1, &pl, &lenl) == 0);

    arb_block_task t1 = {.config = &f.rc, .step = 1, .threads = 1}, t0 = t1, tl = t1;
    arb_block_owned o1, o0, ol;
    CHECK(arb_chunk_from_trace(&t1, &o1, f.t, i, f.log, L, 1) == 0);
    CHECK(arb_chunk_from_trace(&t0, &o0, f.t, i, f.log, L, 0) == 0);
    CHECK(arb_chunk_from_trace(&tl, &ol, f.t, i, f.log, L, C) == 0);
    ovt_hash h;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0 && memcmp(h.b, ch.leaves[1].b, 32) == 0);

    /* a slice value changed: its proof fails */
    float saved = o1.slices[0].data[5];
    o1.slices[0].data[5] = -saved + 1.0f;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == OVT_EFRAUD);
    CHECK(strstr(ovt_errmsg(), "does not prove against its root") != NULL);
    o1.slices[0].data[5] = saved;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0);

    /* a wrong previous state: one byte of an element's sum, or its size */
    p0[len0 / 2] ^= 0x04;
    CHECK(arb_chunk_step(&t1, 1, p0, len0, &h, NULL) == 0 && memcmp(h.b, ch.leaves[1].b, 32) != 0);
    p0[len0 / 2] ^= 0x04;
    CHECK(arb_chunk_step(&t1, 1, p0, len0 - 1, &h, NULL) == OVT_EINVAL);
    CHECK(arb_chunk_step(&t1, 0, p0, len0, &h, NULL) == OVT_EINVAL);
    CHECK(arb_chunk_step(&t1, C + 1, p0, len0, &h, NULL) == OVT_EINVAL);

    /* the slices of chunk 0's rows for chunk 1: not its rows */
    rc = arb_chunk_step(&t0, 1, p0, len0, &h, NULL);
    CHECK_MSG(rc == OVT_ENOTFOUND, "rc %d: %s", rc, ovt_errmsg());

    /* the last step: the step's leaf; without the leaf's entries another
     * leaf or a missing entry; from a changed state another leaf */
    CHECK(arb_chunk_step(&tl, C, pl, lenl, &h, NULL) == 0 && memcmp(h.b, ch.leaves[C].b, 32) == 0);
    CHECK(tl.nentries > 0);
    size_t ne = tl.nentries;
    tl.nentries = 0;
    rc = arb_chunk_step(&tl, C, pl, lenl, &h, NULL);
    CHECK_MSG(rc == OVT_EFRAUD || (rc == 0 && memcmp(h.b, ch.leaves[C].b, 32) != 0), "rc %d: %s", rc, ovt_errmsg());
    printf("the last step without its %zu entries: %s\n", ne, rc ? ovt_errmsg() : "another leaf");
    tl.nentries = ne;
    pl[3 * XSUM_BYTES + 40] ^= 0x01; /* element 3's sum by 2^-6: about a unit of its float32 value or more */
    rc = arb_chunk_step(&tl, C, pl, lenl, &h, NULL);
    CHECK(rc < 0 || memcmp(h.b, ch.leaves[C].b, 32) != 0);

    /* ops the chain does not cover */
    arb_block_task other = whole;
    snprintf(other.op, sizeof other.op, "matmul.bwd.dinp");
    arb_chunk_info info;
    CHECK(arb_chunk_info_of(&other, &info) == OVT_EINVAL);
    CHECK(!arb_chunk_supported("encoder.fwd") && !arb_chunk_supported("layernorm.bwd.dinp") &&
          arb_chunk_supported("bias.bwd") && arb_chunk_supported("rmsnorm.bwd.dweight"));

    free(p0);
    free(pl);
    arb_block_owned_free(&o1);
    arb_block_owned_free(&o0);
    arb_block_owned_free(&ol);
    arb_block_owned_free(&all);
    arb_chunk_chain_free(&ch);
    step_close(&f);
}

/* A chunk package made from a trace and read back: its chunk recomputes
 * to the packing party's node; a chain of another count, a package cut
 * short, a node's path changed are refused. */
static void test_package(void)
{
    step_fixture f;
    size_t i = 0;
    uint64_t L = 0;
    open_dweight(&f, &i, &L);
    ovt_hash root;
    CHECK(krn_trace_finish(f.t, &root) == 0);
    for (uint64_t c = 0; c <= 4; c += 2) {
        uint8_t *buf = NULL;
        size_t len = 0;
        CHECK(arb_chunk_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, L, f.log, c) == 0);
        arb_block_package p;
        ovt_hash h;
        CHECK(arb_block_package_read(&p, buf, len) == 0);
        CHECK(p.version == ARB_BLOCK_VERSION_CHUNK && p.chunk.chunk == c && p.chunk.leaves == 5);
        CHECK(arb_chunk_package_run(&p, &h, NULL) == 0 && memcmp(h.b, p.chunk.node.b, 32) == 0);
        p.chunk.leaves++;
        CHECK(arb_chunk_package_run(&p, &h, NULL) == OVT_EFRAUD);
        CHECK(strstr(ovt_errmsg(), "the packing party's count is wrong") != NULL);
        p.chunk.leaves--;
        p.chunk.node.b[0] ^= 1;
        CHECK(arb_chunk_package_run(&p, &h, NULL) == OVT_EFRAUD);
        arb_block_package_free(&p);
        int cuts = 0, refused = 0;
        for (size_t cut = 0; cut < len; cut += cut < 4096 ? 13 : 65537, cuts++)
            refused += arb_block_package_read(&p, buf, cut) < 0;
        CHECK(refused == cuts);
        /* one byte changed anywhere: refused, or the same node (a byte the
         * chunk does not use), or, in the run config the package carries
         * unbound (--config-hash binds it), another */
        size_t cfg_hi = 16 + (size_t)ovt_get_le32(buf + 12);
        int flips = 0, bad = 0, same = 0, other = 0;
        for (size_t at = 0; at < len; at += at < 4096 ? 5 : 4099, flips++) {
            buf[at] ^= 0x08;
            int rc = arb_block_package_read(&p, buf, len);
            if (rc == 0) {
                ovt_hash node = p.chunk.node;
                rc = arb_chunk_package_run(&p, &h, NULL);
                same += rc == 0 && memcmp(h.b, node.b, 32) == 0 && at >= cfg_hi;
                other += rc == 0 && memcmp(h.b, node.b, 32) != 0 && at >= cfg_hi;
                arb_block_package_free(&p);
            }
            bad += rc < 0;
            buf[at] ^= 0x08;
        }
        printf("chunk %llu package of %zu bytes: of %d one-byte changes %d refused, %d the same node, %d another "
               "outside the config\n",
               (unsigned long long)c, len, flips, bad, same, other);
        CHECK(other == 0 && bad > flips / 2);
        free(buf);
    }
    step_close(&f);
}

/* A norm's column sum (several summed inputs: layernorm's four, RMSNorm's
 * three) through the chunk package: a middle chunk and the last step
 * recompute the packing party's node; another node is refused. */
static void test_norm_package(const char *preset, const char *op)
{
    step_fixture f;
    step_open(&f, preset, 8, 64);
    ovt_hash root;
    CHECK(krn_trace_finish(f.t, &root) == 0);
    size_t i = 0;
    while (i < krn_trace_count(f.t) && strcmp(krn_trace_record_at(f.t, i)->op, op) != 0)
        i++;
    CHECK_MSG(i < krn_trace_count(f.t), "%s has no %s site", preset, op);
    int checked = 0;
    for (uint64_t c = 1; i < krn_trace_count(f.t) && c <= 4; c += 3) { /* 512 rows: chunks 0..3, the last step 4 */
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = arb_chunk_package_make(&buf, &len, &f.rc, f.t, &root, 1, i, 0, f.log, c);
        CHECK_MSG(rc == 0, "%s %s chunk %llu: %s", preset, op, (unsigned long long)c, ovt_errmsg());
        arb_block_package p;
        ovt_hash h;
        if (rc == 0 && arb_block_package_read(&p, buf, len) == 0) {
            CHECK(p.chunk.chunk == c && p.chunk.leaves == 5);
            CHECK(arb_chunk_package_run(&p, &h, NULL) == 0 && memcmp(h.b, p.chunk.node.b, 32) == 0);
            p.chunk.node.b[3] ^= 1;
            CHECK(arb_chunk_package_run(&p, &h, NULL) == OVT_EFRAUD);
            arb_block_package_free(&p);
            checked++;
        }
        free(buf);
    }
    CHECK(checked == 2);
    step_close(&f);
}

/* Line k (0-based) of a chain's leaves file, into out (67 bytes). */
static bool leaf_line(const char *path, int k, char *out)
{
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return false;
    bool ok = len >= (size_t)(k + 1) * 67;
    if (ok)
        snprintf(out, 67, "%s", (const char *)buf + 67 * k);
    free(buf);
    return ok;
}

/* The commands on a gpt2-tiny run whose step 2 flipped bit 22 of element
 * 100 of site 131 (matmul.bwd.dweight, 192 x 64, 512 rows: 4 chunks): the
 * faulty party's chain differs from the honest one's only at its last
 * leaf; the packages of that leaf name the auditor right; a middle chunk's
 * package checks against the honest chain root and is refused against
 * another root or with its state changed. */
static void test_cli(void)
{
    char tok[512], run[512], hl[512], fl[512], h4[512], f4[512], h2[512], bad[512];
    snprintf(tok, sizeof tok, "%s/t.tok", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(hl, sizeof hl, "%s/honest.leaves", dir);
    snprintf(fl, sizeof fl, "%s/faulty.leaves", dir);
    snprintf(h4, sizeof h4, "%s/h4.blk", dir);
    snprintf(f4, sizeof f4, "%s/f4.blk", dir);
    snprintf(h2, sizeof h2, "%s/h2.blk", dir);
    snprintf(bad, sizeof bad, "%s/bad.blk", dir);
    const char *fault = "--inject-fault flip-output --fault-element 100";
    CHECK(cli_fox_tokens(tok, 300) == 0);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps 3 --batch 8 --seq 64 --every 0 "
                  "--checkpoint-every 1 --inject-fault flip-output --fault-step 2 --fault-site 131 "
                  "--fault-element 100",
                  tok, run) == 0);
    const char *at = "--step 2 --site 131 --leaf 0";

    /* the two chains: 5 leaves each, the same but the last */
    char honest_root[67], faulty_root[67];
    CHECK(run_ovt("block chain %s %s --data %s --out %s --json", run, at, tok, hl) == 0);
    CHECK(output_has("\"leaves\": 5,") && output_has("\"rows\": 512,") && output_has("\"output_recomputed\": true"));
    CHECK(output_hex("chain_root", honest_root));
    CHECK(run_ovt("block chain %s %s --data %s --out %s %s --json", run, at, tok, fl, fault) == 0);
    CHECK(output_has("\"output_recomputed\": false"));
    CHECK(output_hex("chain_root", faulty_root));
    CHECK(strcmp(honest_root, faulty_root) != 0);
    char a[67], b[67];
    for (int k = 0; k < 5; k++) {
        CHECK(leaf_line(hl, k, a) && leaf_line(fl, k, b));
        CHECK_MSG((strcmp(a, b) == 0) == (k < 4), "chain leaf %d: %s / %s", k, a, b);
    }
    char trainer_node[67], auditor_node[67];
    CHECK(leaf_line(fl, 4, trainer_node) && leaf_line(hl, 4, auditor_node));
    CHECK(run_ovt("block chain %s %s --data %s", run, at, tok) == 0);
    CHECK(output_has("512 rows in 4 chunks, a chain of 5 leaves"));

    /* the last leaf: the faulty party's package differs from what it
     * recomputes; the verdict names the auditor */
    CHECK(run_ovt("block pack %s %s --data %s --chunk 4 --out %s", run, at, tok, h4) == 0);
    CHECK(output_has("chunk 4;"));
    CHECK(run_ovt("block pack %s %s --data %s --chunk 4 --out %s %s", run, at, tok, f4, fault) == 0);
    CHECK(run_ovt("block check %s --trainer-node %s --auditor-node %s", f4, trainer_node, auditor_node) == 0);
    CHECK(output_has("verdict: auditor-right") && output_has("DIFFERS: the packing party's chain is wrong"));
    char line[96];
    snprintf(line, sizeof line, "recomputed node %s", auditor_node);
    CHECK(output_has(line));
    CHECK(run_ovt("block check %s --chain-root %s --json", h4, honest_root) == 0);
    CHECK(output_has("\"claim_matches\": true") && output_has("\"chunk\": 4"));

    /* a middle chunk: from its rows and P_1 */
    CHECK(run_ovt("block pack %s %s --data %s --chunk 2 --out %s", run, at, tok, h2) == 0);
    CHECK(run_ovt("block check %s --chain-root %s --trainer-node %s --auditor-node %s", h2, honest_root,
                  trainer_node, auditor_node) == 0);
    CHECK(output_has("chunk 2 of a chain of 5 leaves") && output_has("matches") && output_has("verdict: neither"));
    CHECK(run_ovt("block check %s --chain-root %s", h2, faulty_root) == 1);
    CHECK(output_has("not the one --chain-root names"));
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(ovt_read_file(h2, &buf, &len, 1 << 26) == 0 && len > 600000);
    if (buf == NULL || len <= 600000)
        return;
    buf[500000] ^= 0x20; /* inside P_1 (about a megabyte from byte ~1400 on) */
    CHECK(ovt_write_atomic(bad, buf, len, 0644) == 0);
    CHECK(run_ovt("block check %s", bad) == 1);
    CHECK(output_has("refused") && output_has("does not climb to its chain root"));
    buf[500000] ^= 0x20;
    buf[len - 100] ^= 0x01; /* a slice's value */
    CHECK(ovt_write_atomic(bad, buf, len, 0644) == 0);
    CHECK(run_ovt("block check %s", bad) == 1);
    CHECK(output_has("does not prove against its root"));
    free(buf);

    /* what has no chain */
    CHECK(run_ovt("block pack %s %s --data %s --chunk 9 --out %s", run, at, tok, bad) == 1);
    CHECK(output_has("has leaves 0..4; 9 is none"));
    CHECK(run_ovt("block chain %s --step 2 --site 150 --leaf 0 --data %s", run, tok) == 1);
    CHECK(output_has("not a sum over the batch"));
}

int main(void)
{
    if (cli_setup("arb-chunk"))
        return 1;
    CHECK_RUN(test_cli());
    CHECK_RUN(test_xsum_random());
    CHECK_RUN(test_xsum_extremes());
    CHECK_RUN(test_xsum_f64());
    CHECK_RUN(test_old_gradients());
    CHECK_RUN(test_steered());
    CHECK_RUN(test_refusals());
    CHECK_RUN(test_package());
    CHECK_RUN(test_norm_package("gpt2-tiny", "layernorm.bwd.dweight"));
    CHECK_RUN(test_norm_package("gpt2-tiny", "layernorm.bwd.dbias"));
    CHECK_RUN(test_norm_package("llama-tiny", "rmsnorm.bwd.dweight"));
    CHECK_RUN(test_dwte_tokens());
    CHECK_RUN(test_chain("gpt2-tiny", 8, 64, true, 0));
    CHECK_RUN(test_chain("llama-tiny", 8, 64, false, 0));
    CHECK_RUN(test_chain("mlp-demo", 320, 0, true, 0));
    CHECK_RUN(test_chain("mlp-mnist", 200, 0, false, 0));
    CHECK_RUN(test_chain("resnet-mini", 4, 0, false, 0));
    CHECK_RUN(test_chain("gpt2-tiny", 8, 64, false, 1)); /* a trainer that uses rule 3's freedom */
    CHECK_RUN(test_chain("llama-tiny", 8, 64, false, -1));
    cli_cleanup();
    return check_done();
}
