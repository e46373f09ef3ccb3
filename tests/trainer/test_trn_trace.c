/* The step's trace (kernels/trace.h, trainer/trace.h) on gpt2-tiny,
 * llama-tiny, resnet-mini and an MLP (also in two shards):
 *   - tracing changes no bit: the traced step's stateHash and rounding log
 *     are the untraced step's;
 *   - the trainer's trace (RECORD, cpu) is the one every verifier replaying
 *     its log computes on cpu, ref and shuffle, as the arbiter and as an
 *     auditor: the same records, root;
 *     also when the trainer steers every free direction up (the records
 *     hold the outputs after the log's entries);
 *   - every read is resolved, and (check mode) to bytes its named source
 *     really wrote; every site but the config's constants reads something,
 *     and a few reads are the ones the step's order (docs/training-step.md)
 *     says;
 *   - a record is proved against the root;
 *   - one bit flipped in one site's output (a testing fault) makes the
 *     trace differ first exactly at that site. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "common/tree.h"
#include "data/dataset.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/state.h"
#include "trainer/trace.h"
#include "support/cli_fixture.h"

/* One step's inputs for a preset (seed 3, batch 4, sequences of 8, 400
 * generated tokens or 64 samples): its data and the batch of step 1. */
typedef trn_test_step_data fixture;

static void fixture_open(fixture *f, const char *preset, uint32_t shards)
{
    CHECK(trn_test_step_data_open(f, preset, 3, 4, 8, shards, 400, 64) == 0);
}

static void fixture_close(fixture *f)
{
    trn_test_step_data_close(f);
}

/* One step of a copy of st0 on ctx (log: RECORD's or REPLAY's), traced
 * (check mode) unless t_out is NULL; the new stateHash. A trace that failed
 * fails the test with its message. */
static void run_step(krn_ctx *ctx, const fixture *f, const trn_state *st0, krn_rlog *log, krn_trace **t_out,
                     ovt_hash *root, ovt_hash *state_hash)
{
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_clone(&st, st0) == 0 && trn_workspace_new(&w, &f->rc) == 0);
    trn_step_info info;
    if (t_out) {
        int trace_rc;
        CHECK(krn_trace_new(t_out, true) == 0);
        CHECK_MSG(trn_train_step_traced(ctx, w, st, &f->b, log, *t_out, &info, &trace_rc, root) == 0, "%s",
                  ovt_errmsg());
        CHECK_MSG(trace_rc == 0, "%s", ovt_errmsg());
    } else {
        CHECK_MSG(trn_train_step(ctx, w, st, &f->b, log, &info) == 0, "%s", ovt_errmsg());
    }
    trn_state_hash(state_hash, st);
    trn_workspace_free(w);
    trn_state_free(st);
}

/* The first record where a and b differ; the common count when none does. */
static size_t first_difference(const krn_trace *a, const krn_trace *b)
{
    size_t n = krn_trace_count(a) < krn_trace_count(b) ? krn_trace_count(a) : krn_trace_count(b);
    for (size_t i = 0; i < n; i++)
        if (memcmp(krn_trace_record_at(a, i)->hash.b, krn_trace_record_at(b, i)->hash.b, 32) != 0)
            return i;
    return n;
}

static bool same_log(const krn_rlog *a, const krn_rlog *b)
{
    uint8_t *ea, *eb;
    size_t la, lb;
    CHECK(krn_rlog_encode(a, &ea, &la) == 0 && krn_rlog_encode(b, &eb, &lb) == 0);
    bool same = la == lb && memcmp(ea, eb, la) == 0;
    free(ea);
    free(eb);
    return same;
}

/* Sites that read nothing: functions of the config and the step number. */
static bool reads_nothing(const char *op)
{
    return !strcmp(op, "rope.freq") || !strcmp(op, "schedule.lr") || !strcmp(op, "adamw.pow1") ||
           !strcmp(op, "adamw.pow2");
}

/* Whether record i reads the region `name` (or, name NULL, site `site`). */
static bool reads(const krn_trace *t, size_t i, const char *name, uint32_t site)
{
    const krn_trace_src *r = krn_trace_reads_of(t, i);
    for (size_t k = 0; k < krn_trace_record_at(t, i)->nreads; k++) {
        if (name && r[k].kind != KRN_TRACE_SITE && r[k].kind != KRN_TRACE_ZERO &&
            !strcmp(krn_trace_region_name(t, r[k].region), name))
            return true;
        if (!name && r[k].kind == KRN_TRACE_SITE && r[k].site == site)
            return true;
    }
    return false;
}

static int cmp_run(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The runs of each input of record i tile it: positions 0, 1, ... once each. */
static bool inputs_tiled(const krn_trace *t, size_t i)
{
    const krn_trace_record *r = krn_trace_record_at(t, i);
    const krn_trace_src *s = krn_trace_reads_of(t, i);
    bool ok = true;
    for (uint32_t in = 0; ok; in++) {
        size_t nruns = 0;
        for (size_t k = 0; k < r->nreads; k++)
            nruns += s[k].input == in ? s[k].rows : 0;
        if (nruns == 0)
            break;
        uint64_t(*runs)[2] = malloc(nruns * sizeof *runs);
        if (!runs)
            return false;
        size_t m = 0;
        for (size_t k = 0; k < r->nreads; k++)
            for (uint32_t row = 0; s[k].input == in && row < s[k].rows; row++) {
                runs[m][0] = s[k].dst + row * s[k].dst_step;
                runs[m++][1] = s[k].count;
            }
        qsort(runs, m, sizeof *runs, cmp_run);
        uint64_t at = 0;
        for (size_t j = 0; j < m && ok; j++) {
            ok = runs[j][0] == at && runs[j][1] > 0;
            at += runs[j][1];
        }
        free(runs);
    }
    return ok;
}

/* Every record is its site's, every site but the constants reads, the
 * parts of each input tile it, and record i is proved against the root. */
static void check_shape(const krn_trace *t, const ovt_hash *root)
{
    size_t n = krn_trace_count(t);
    for (size_t i = 0; i < n; i++) {
        const krn_trace_record *r = krn_trace_record_at(t, i);
        CHECK_EQ_U64(r->site, i);
        CHECK_MSG(r->nreads > 0 || reads_nothing(r->op), "site %zu (%s) declares no read", i, r->op);
        const krn_trace_src *s = krn_trace_reads_of(t, i);
        for (size_t k = 0; k < r->nreads; k++)
            CHECK_MSG(s[k].kind != KRN_TRACE_SITE || s[k].site < i, "site %zu reads a later site", i);
        CHECK_MSG(inputs_tiled(t, i), "site %zu (%s): the parts of an input do not tile it", i, r->op);
    }
    ovt_hash *leaves = malloc(n * sizeof *leaves), proof[OVT_TREE_MAX_PROOF];
    CHECK(leaves != NULL);
    for (size_t i = 0; i < n; i++)
        leaves[i] = krn_trace_record_at(t, i)->hash;
    size_t at = n / 3, plen;
    CHECK(ovt_tree_proof(proof, &plen, leaves, n, at, 1) == 0);
    CHECK(ovt_tree_verify(root, n, at, 1, &leaves[at], proof, plen));
    leaves[at].b[0] ^= 1;
    CHECK(!ovt_tree_verify(root, n, at, 1, &leaves[at], proof, plen));
    free(leaves);
}

/* The first sites of the GPT-2 step read what docs/training-step.md says. */
static void check_gpt2_reads(const krn_trace *t)
{
    const krn_trace_record *r0 = krn_trace_record_at(t, 0), *r1 = krn_trace_record_at(t, 1);
    CHECK(!strcmp(r0->op, "encoder.fwd"));
    CHECK(reads(t, 0, "batch.inputs", 0) && reads(t, 0, "params/wte", 0) && reads(t, 0, "params/wpe", 0));
    CHECK(!strcmp(r1->op, "layernorm.mean") && reads(t, 1, NULL, 0)); /* ln1 of the encoding */
    size_t last = krn_trace_count(t) - 1;
    CHECK(!strcmp(krn_trace_record_at(t, last)->op, "adamw.param"));
    CHECK(reads(t, last, NULL, (uint32_t)last - 2) && reads(t, last, NULL, (uint32_t)last - 1)); /* new m, v */
    CHECK(reads(t, last, "params/wte", 0));
}

static void test_preset(const char *preset, uint32_t shards)
{
    fixture f;
    fixture_open(&f, preset, shards);
    trn_state *st0;
    CHECK(trn_state_new(&st0, &f.rc) == 0);
    trn_state_init(st0);

    /* the untraced step, then the traced one: the same bits */
    krn_ctx *rec = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 9);
    krn_rlog *log = krn_rlog_new(), *log2 = krn_rlog_new();
    ovt_hash off, on, root;
    krn_trace *t;
    run_step(rec, &f, st0, log, NULL, NULL, &off);
    run_step(rec, &f, st0, log2, &t, &root, &on);
    CHECK_MEM(off.b, on.b, 32);
    CHECK(same_log(log, log2));
    check_shape(t, &root);
    if (!strcmp(preset, "gpt2-tiny"))
        check_gpt2_reads(t);
    printf("%s (%u shards): %zu sites, %zu bytes of records\n", preset, shards, krn_trace_count(t), krn_trace_bytes(t));

    /* every verifier's trace of the trainer's log is the trainer's: the
     * arbiter's (strict rule) and an auditor's (the run's rule), on each
     * backend */
    const krn_backend_kind backends[] = {KRN_BACKEND_CPU, KRN_BACKEND_REF, KRN_BACKEND_SHUFFLE};
    for (size_t k = 0; k < 6; k++) {
        krn_config kc = {.backend = backends[k % 3], .mode = KRN_REPLAY, .grid_bits = 32, .shuffle_seed = 9,
                         .threads = 1, .verifier = k < 3 ? KRN_VERIFY_ARBITER : KRN_VERIFY_AUDITOR,
                         .rule = k < 3 ? 0 : trn_config_rule(&f.rc)};
        krn_ctx *rep;
        CHECK(krn_ctx_new(&rep, &kc) == 0);
        krn_trace *tv;
        ovt_hash rv, hv;
        run_step(rep, &f, st0, log, &tv, &rv, &hv);
        CHECK_MEM(hv.b, off.b, 32);
        CHECK_EQ_U64(krn_trace_count(tv), krn_trace_count(t));
        CHECK_MSG(first_difference(t, tv) == krn_trace_count(t), "%s: backend %zu differs at site %zu", preset, k,
                  first_difference(t, tv));
        CHECK_MEM(rv.b, root.b, 32);
        krn_trace_free(tv);
        krn_ctx_free(rep);
    }

    /* a trainer that steers every free direction up (its right under rule
     * 3): the records hold the outputs after the log's entries, so every
     * verifier still computes the trainer's trace */
    krn_rlog *ls = krn_rlog_new();
    krn_trace *ts;
    ovt_hash rs, hs;
    krn_ctx_steer(rec, 1);
    run_step(rec, &f, st0, ls, &ts, &rs, &hs);
    krn_ctx_steer(rec, 0);
    CHECK(memcmp(rs.b, root.b, 32) != 0); /* steering changed some output */
    for (size_t k = 0; k < 3; k++) {
        krn_ctx *rep = trn_test_ctx(backends[k], KRN_REPLAY, 9);
        krn_trace *tv;
        ovt_hash rv, hv;
        run_step(rep, &f, st0, ls, &tv, &rv, &hv);
        CHECK_MEM(hv.b, hs.b, 32);
        CHECK_MSG(first_difference(ts, tv) == krn_trace_count(ts), "%s, steered: backend %zu differs at site %zu",
                  preset, k, first_difference(ts, tv));
        krn_trace_free(tv);
        krn_ctx_free(rep);
    }
    krn_trace_free(ts);
    krn_rlog_free(ls);

    /* one bit of one site's output flipped: the trace differs there first */
    size_t n = krn_trace_count(t);
    const size_t at[] = {1, n / 2, n - 1};
    for (size_t k = 0; k < 3; k++) {
        krn_rlog *lf = krn_rlog_new();
        krn_trace *tf;
        ovt_hash rf, hf;
        krn_ctx_flip_output_bit(rec, (uint32_t)at[k], 0, 3);
        run_step(rec, &f, st0, lf, &tf, &rf, &hf);
        CHECK(krn_ctx_output_flipped(rec));
        CHECK_MSG(first_difference(t, tf) == at[k], "%s: the flip at site %zu shows first at %zu", preset, at[k],
                  first_difference(t, tf));
        CHECK(memcmp(rf.b, root.b, 32) != 0);
        krn_trace_free(tf);
        krn_rlog_free(lf);
    }
    krn_trace_free(t);
    krn_rlog_free(log);
    krn_rlog_free(log2);
    krn_ctx_free(rec);
    trn_state_free(st0);
    fixture_close(&f);
}

/* A trace that cannot name a read fails, and the step still succeeds. */
static void test_unresolved_read_fails(void)
{
    fixture f;
    fixture_open(&f, "mlp-demo", 1);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &f.rc) == 0 && trn_workspace_new(&w, &f.rc) == 0);
    trn_state_init(st);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_CPU, KRN_NEAREST, 9);
    krn_trace *t;
    CHECK(krn_trace_new(&t, false) == 0);
    /* the batch left unregistered: the first matmul's input is nobody's */
    CHECK(krn_ctx_set_trace(ctx, t) == 0);
    trn_step_info info;
    CHECK(trn_train_step(ctx, w, st, &f.b, NULL, &info) == 0);
    CHECK(krn_ctx_set_trace(ctx, NULL) == 0);
    ovt_hash root;
    CHECK(krn_trace_finish(t, &root) == OVT_EINVAL);
    CHECK(strstr(ovt_errmsg(), "site 0 (matmul.fwd)") != NULL);
    krn_trace_free(t);
    krn_ctx_free(ctx);
    trn_workspace_free(w);
    trn_state_free(st);
    fixture_close(&f);
}

/* Proof of replay's outputs-only mode (krn_trace_outputs_only): the same
 * sites, and every site's output root the full trace's (all sites), or one
 * site's alone with the others zero; no reads, no trace root. */
static void test_outputs_only(const char *preset)
{
    fixture f;
    fixture_open(&f, preset, 1);
    trn_state *st0;
    CHECK(trn_state_new(&st0, &f.rc) == 0);
    trn_state_init(st0);
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 9);
    krn_rlog *log = krn_rlog_new();
    krn_trace *full;
    ovt_hash root, h;
    run_step(ctx, &f, st0, log, &full, &root, &h);
    size_t n = krn_trace_count(full);
    static const ovt_hash zero;
    for (int mode = 0; mode < 2; mode++) {
        uint32_t only = mode == 0 ? KRN_TRACE_ALL_SITES : (uint32_t)(n / 2);
        trn_state *st;
        trn_workspace *w;
        krn_trace *t;
        CHECK(trn_state_clone(&st, st0) == 0 && trn_workspace_new(&w, &f.rc) == 0 && krn_trace_new(&t, false) == 0);
        krn_trace_outputs_only(t, only);
        trn_step_info info;
        int trace_rc;
        ovt_hash r2, h2;
        krn_rlog *log2 = krn_rlog_new();
        CHECK(trn_train_step_traced(ctx, w, st, &f.b, log2, t, &info, &trace_rc, &r2) == 0 && trace_rc == 0);
        trn_state_hash(&h2, st);
        CHECK_MEM(h.b, h2.b, 32); /* the same bits */
        CHECK(!memcmp(r2.b, zero.b, 32));
        CHECK_EQ_U64(krn_trace_count(t), n);
        for (size_t i = 0; i < n && krn_trace_count(t) == n; i++) {
            const krn_trace_record *a = krn_trace_record_at(full, i), *b = krn_trace_record_at(t, i);
            CHECK(a->site == b->site && a->n == b->n && !strcmp(a->op, b->op) && b->nreads == 0);
            if (only == KRN_TRACE_ALL_SITES || i == only)
                CHECK_MSG(!memcmp(a->root.b, b->root.b, 32), "site %zu", i);
            else
                CHECK(!memcmp(b->root.b, zero.b, 32));
        }
        krn_rlog_free(log2);
        krn_trace_free(t);
        trn_workspace_free(w);
        trn_state_free(st);
    }
    krn_trace_free(full);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    trn_state_free(st0);
    fixture_close(&f);
}

/* `ovt step --trace` on cpu, ref and shuffle: the same trace file, which
 * holds the root the command prints; --backend ref alone is a usage error. */
static void test_cli(void)
{
    char tok[512], run[512], file[3][512], line[160];
    snprintf(tok, sizeof tok, "%s/t.tok", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    CHECK(cli_fox_tokens(tok, 200) == 0);
    CHECK(run_ovt("train --model gpt2-tiny --data %s --out %s --steps 3 --batch 2 --seq 16 --every 0 "
                  "--checkpoint-every 3",
                  tok, run) == 0);
    const char *backends[3] = {"cpu", "ref", "shuffle"};
    uint8_t *bytes[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
        snprintf(file[k], sizeof file[k], "%s/trace.%s", dir, backends[k]);
        CHECK(run_ovt("step --run %s --step 2 --data %s --trace --backend %s --trace-out %s", run, tok,
                      backends[k], file[k]) == 0);
        CHECK(output_has("matches the step table") && output_has("(151 sites,"));
        CHECK(ovt_read_file(file[k], &bytes[k], &len[k], 1 << 24) == 0);
    }
    CHECK(len[0] > 60 && len[0] == len[1] && len[0] == len[2]);
    CHECK(bytes[1] && bytes[2] && !memcmp(bytes[0], bytes[1], len[0]) && !memcmp(bytes[0], bytes[2], len[0]));
    CHECK(bytes[0] && !memcmp(bytes[0], "OVTTRACE", 8));
    /* the root printed is the file's (after magic, version, step and count) */
    char hex[67] = "0x";
    for (int i = 0; bytes[0] && i < 32; i++)
        snprintf(hex + 2 + 2 * i, 3, "%02x", bytes[0][24 + i]);
    snprintf(line, sizeof line, "trace     %s", hex);
    CHECK(output_has(line));
    for (int k = 0; k < 3; k++)
        free(bytes[k]);
    CHECK(run_ovt("step --run %s --step 2 --data %s --backend ref", run, tok) == 2);
    CHECK(run_ovt("step --run %s --step 2 --data %s --trace --json", run, tok) == 0);
    CHECK(output_has("\"records\"") && output_has("\"kind\": \"state\"") && output_has("\"name\": \"params/wte\""));
}

int main(void)
{
    if (cli_setup("trn-trace"))
        return 1;
    CHECK_RUN(test_cli());
    CHECK_RUN(test_preset("gpt2-tiny", 1));
    CHECK_RUN(test_preset("llama-tiny", 1));
    CHECK_RUN(test_preset("mlp-demo", 1));
    CHECK_RUN(test_preset("mlp-demo", 2)); /* two shards in one process: grad.sum, loss.mean */
    CHECK_RUN(test_preset("resnet-mini", 1));
    CHECK_RUN(test_unresolved_read_fails());
    CHECK_RUN(test_outputs_only("gpt2-tiny"));
    CHECK_RUN(test_outputs_only("mlp-demo"));
    cli_cleanup();
    return check_done();
}
