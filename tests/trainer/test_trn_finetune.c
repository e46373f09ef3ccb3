/* Fine-tuning and the cosine schedule end to end, through the built `ovt`:
 *   a cosine gpt2-tiny run recorded on cpu replays on ref and on shuffle with
 *     identical state hashes, and its logged lr follows the schedule; a
 *     linear run keeps the version 1 config;
 *   --init-from a checkpoint of that run: state 0 holds exactly its
 *     parameters with zero moments, the config (version 2) carries
 *     init_hash = SHA-256 of those parameter bytes, training goes on, and
 *     replay and audit of the run directory give the same hashes; a step-0
 *     checkpoint swapped for another state is a clear audit error;
 *   --init-from an llm.c weight file written here (gpt2-tiny shape, padded
 *     vocabulary): state 0 read back float by float against what was
 *     written (and, at b = 24, against a rounding done here on the bits);
 *     truncated, wrong-magic, wrong-version, non-finite and wrong-shape
 *     files are clear errors;
 *   the init run published to a store: the auditor fetches and verifies it,
 *     the arbiter recomputes leaf 0 (from the blob init_hash names) and step
 *     1 (from state 0), and reports the blob missing when it is. */
#include <math.h>
#include <unistd.h>

#include "arbiter/evaluate.h"
#include "auditor/replay.h"
#include "check.h"
#include "kernels/grid.h"
#include "party/commit.h"
#include "support/proc.h"
#include "trainer/checkpoint.h"
#include "trainer/plot.h"
#include "trainer/rundata.h"
#include "trainer/schedule.h"
#include "support/cli_fixture.h"
#include "trn_helpers.h"

#define TRAIN "train --model gpt2-tiny --batch 2 --seq 16 --every 0 --print-state --data %s"

static char data[128];

/* The output of the last run_ovt. */
static char *last_output(void)
{
    char path[256];
    uint8_t *buf = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/out.txt", dir);
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return NULL;
    char *text = realloc(buf, len + 1);
    if (text)
        text[len] = 0;
    return text;
}

/* The "state N HASH" lines of the last run into dst. */
static void last_states(char *dst, size_t cap)
{
    char *text = last_output();
    trn_test_state_lines(dst, cap, text);
    free(text);
}

static trn_state *read_ckpt(const char *run, uint64_t step)
{
    char path[512];
    trn_state *st = NULL;
    snprintf(path, sizeof path, "%s/ckpt/step-%08llu.ckpt", run, (unsigned long long)step);
    CHECK_MSG(trn_checkpoint_read(&st, path) == 0, "%s", ovt_errmsg());
    return st;
}

static int all_zero(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != 0.0f || signbit(v[i]))
            return 0;
    return 1;
}

static aud_finding audit(const char *run, krn_backend_kind backend, uint64_t *replayed)
{
    aud_replay_opts o = {.run_dir = run, .data_path = data, .backend = backend};
    aud_report r;
    int rv = aud_replay(&o, &r);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    if (rv)
        return AUD_FRAUD;
    *replayed = r.replayed;
    aud_finding f = r.finding;
    aud_report_free(&r);
    return f;
}

/* A cosine run on cpu, replayed on ref and shuffle. Leaves dir/A. */
static void test_cosine_replays(void)
{
    static char rec[2048], rep[2048];
    CHECK(run_ovt(TRAIN " --steps 4 --warmup 1 --lr 0.002 --backend cpu --out %s/A", data, dir) == 0);
    last_states(rec, sizeof rec);
    CHECK(strlen(rec) > 4 * 70);
    const char *backends[2] = {"ref", "shuffle"};
    for (int b = 0; b < 2; b++) {
        CHECK(run_ovt(TRAIN " --steps 4 --warmup 1 --lr 0.002 --backend %s --replay %s/A --out %s/A-%s", data,
                      backends[b], dir, dir, backends[b]) == 0);
        last_states(rep, sizeof rep);
        CHECK_MSG(strcmp(rec, rep) == 0, "record:\n%s\nreplay on %s:\n%s", rec, backends[b], rep);
    }
    /* The config: version 2, cosine, lr_min = lr / 10 decayed over the run. */
    char path[512];
    trn_run_config rc;
    ovt_hash ch;
    snprintf(path, sizeof path, "%s/A", dir);
    CHECK(trn_run_load_config(path, &rc, &ch) == 0);
    CHECK(rc.schedule == TRN_SCHEDULE_COSINE && !trn_config_has_init(&rc));
    CHECK(rc.lr == 0.002 && rc.lr_min == 0.002 / 10 && rc.warmup_steps == 1 && rc.decay_steps == 4);
    /* The lr each step used (loss.csv) is the textbook cosine rounded to
     * FP32: step 1 ends warmup (lr), step 4 is the end (lr_min). */
    trn_loss_row *rows = NULL;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/A/loss.csv", dir);
    CHECK(trn_loss_csv_read(path, &rows, &n) == 0 && n == 4);
    for (size_t k = 0; rows && k < n; k++) {
        double p = ((double)rows[k].step - 1) / 3, want = 0.0002 + 0.0018 * (1 + cos(M_PI * p)) / 2;
        CHECK_MSG(fabs(rows[k].lr - want) <= 2e-7 * want, "step %llu lr %.9g want %.9g",
                  (unsigned long long)rows[k].step, rows[k].lr, want);
    }
    /* loss.csv writes 9 digits: enough to give back the FP32 value exactly. */
    CHECK(rows && (float)rows[0].lr == (float)0.002 && (float)rows[3].lr == (float)0.0002);
    free(rows);
}

/* --schedule linear with no init keeps the version 1 config (the hashes of
 * runs made before version 2); a bad kind or a missing file are errors. */
static void test_linear_and_usage(void)
{
    CHECK(run_ovt(TRAIN " --steps 2 --schedule linear --lr-min 0.0005 --out %s/Lin", data, dir) == 0);
    char path[512];
    uint8_t *cfg = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/Lin/config.bin", dir);
    CHECK(ovt_read_file(path, &cfg, &len, 4096) == 0 && len == 168 && cfg && ovt_get_le32(cfg + 8) == 1);
    free(cfg);
    CHECK(run_ovt(TRAIN " --steps 2 --schedule cos --out %s/X", data, dir) == 2);
    CHECK(output_has("linear, cosine"));
    CHECK(run_ovt(TRAIN " --steps 2 --init-from %s/no-such-file --out %s/X", data, dir, dir) == 1);
    CHECK(output_has("no-such-file"));
}

/* --init-from A's last checkpoint. Leaves dir/B. */
static void test_init_from_checkpoint(void)
{
    char a[256], b[256], src[300];
    snprintf(a, sizeof a, "%s/A", dir);
    snprintf(b, sizeof b, "%s/B", dir);
    snprintf(src, sizeof src, "%s/ckpt/step-00000004.ckpt", a);
    CHECK(run_ovt(TRAIN " --steps 3 --seed 9 --backend cpu --init-from %s --out %s", data, src, b) == 0);
    static char rec[2048], rep[2048];
    last_states(rec, sizeof rec);
    trn_state *from = read_ckpt(a, 4), *s0 = read_ckpt(b, 0);
    if (!from || !s0)
        return;
    size_t n = s0->layout.nparams;
    CHECK(s0->step == 0 && n == from->layout.nparams);
    CHECK_MEM(s0->params, from->params, n * sizeof(float));
    CHECK(all_zero(s0->m, n) && all_zero(s0->v, n));
    CHECK(!all_zero(from->m, n)); /* the source's moments were not zero: they were reset */
    ovt_hash want;
    ovt_sha256(&want, from->params, n * sizeof(float));
    CHECK_MEM(s0->config.init_hash.b, want.b, 32);
    CHECK(s0->config.seed == 9 && s0->config.schedule == TRN_SCHEDULE_COSINE);
    uint8_t *cfg;
    size_t len;
    char path[512];
    snprintf(path, sizeof path, "%s/config.bin", b);
    CHECK(ovt_read_file(path, &cfg, &len, 4096) == 0 && len == 204 && ovt_get_le32(cfg + 8) == 2);
    CHECK(memcmp(cfg + 172, want.b, 32) == 0);
    free(cfg);
    /* Training went on: state 3 differs from state 0. */
    trn_state *s3 = read_ckpt(b, 3);
    CHECK(s3 && memcmp(s3->params, s0->params, n * sizeof(float)) != 0);
    trn_state_free(s3);

    /* Replay on shuffle (the same --init-from) and audit on ref: same hashes. */
    CHECK(run_ovt(TRAIN " --steps 3 --seed 9 --backend shuffle --init-from %s --replay %s --out %s/B-rep", data, src,
                  b, dir) == 0);
    last_states(rep, sizeof rep);
    CHECK_MSG(strcmp(rec, rep) == 0, "record:\n%s\nreplay:\n%s", rec, rep);
    uint64_t replayed = 0;
    CHECK(audit(b, KRN_BACKEND_REF, &replayed) == AUD_VERIFIED && replayed == 3);
    CHECK(run_ovt("audit %s --data %s --backend shuffle", b, data) == 0 && output_has("verified"));
    /* --resume needs the same --init-from: without it the config differs. */
    CHECK(run_ovt(TRAIN " --steps 4 --seed 9 --backend cpu --resume --out %s", data, b) == 1);
    CHECK(output_has("--init-from: "));
    CHECK(output_has("there, none (the seed's init) here"));

    /* An auditor whose state 0 differs: ckpt 0 replaced by a well-formed
     * state 0 of the same config with one parameter changed. */
    char t[300];
    snprintf(t, sizeof t, "%s/B-tampered", dir);
    CHECK(tsup_runl(NULL, "/bin/cp", "-r", b, t, NULL) == 0);
    s0->params[100] = krn_grid_round((double)s0->params[100] * 0.5 + 0.25, 32);
    snprintf(path, sizeof path, "%s/ckpt/step-00000000.ckpt", t);
    CHECK(trn_checkpoint_write(s0, path) == 0);
    aud_replay_opts o = {.run_dir = t, .data_path = data, .backend = KRN_BACKEND_REF};
    aud_report r;
    CHECK(aud_replay(&o, &r) == OVT_EFORMAT);
    CHECK(strstr(ovt_errmsg(), "init_hash") != NULL && strstr(ovt_errmsg(), "step-00000000.ckpt") != NULL);
    CHECK(run_ovt("audit %s --data %s --backend ref", t, data) == 1 && output_has("init_hash"));
    unlink(path); /* no state 0 at all: also a clear error */
    CHECK(aud_replay(&o, &r) == OVT_ENOTFOUND && strstr(ovt_errmsg(), "state 0") != NULL);

    /* A checkpoint of another model shape names both shapes. */
    CHECK(run_ovt("train --model gpt2-small --batch 1 --seq 8 --steps 1 --data %s --init-from %s --out %s/S", data,
                  src, dir) == 1);
    CHECK(output_has("gpt2 L2 C64 NH4 V256 maxT64") && output_has("gpt2 L12 C768 NH12 V50257 maxT1024"));
    trn_state_free(from);
    trn_state_free(s0);
}

/* llm.c's layout for gpt2-tiny with a padded vocabulary. */
enum { MAXT = 64, V = 256, VP = 320, L = 2, NH = 4, C = 64 };

static size_t llmc_count(void)
{
    size_t sizes[16] = {(size_t)VP * C, (size_t)MAXT * C, L * C,         L * C, (size_t)L * 3 * C * C, L * 3 * C,
                        (size_t)L * C * C, L * C,        L * C,         L * C, (size_t)L * 4 * C * C, L * 4 * C,
                        (size_t)L * 4 * C * C, L * C,    C,             C};
    size_t n = 0;
    for (int k = 0; k < 16; k++)
        n += sizes[k];
    return n;
}

/* Writes header + values (count floats) to path; hdr overrides. */
static void write_llmc(const char *path, const float *values, size_t count, const int32_t hdr[8], size_t cut)
{
    size_t len = 1024 + 4 * count;
    uint8_t *buf = calloc(1, len);
    for (int k = 0; k < 8; k++)
        ovt_put_le32(buf + 4 * k, (uint32_t)hdr[k]);
    memcpy(buf + 1024, values, 4 * count);
    CHECK(ovt_write_atomic(path, buf, len - cut, 0644) == 0);
    free(buf);
}

/* b = 24 rounding done on the bits: nearest, ties to even, 8 low mantissa
 * bits cleared (finite values well inside the range). */
static float round_b24(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fu + ((u >> 8) & 1u)) & ~0xffu;
    memcpy(&x, &u, 4);
    return x;
}

static void test_init_from_llmc(void)
{
    size_t count = llmc_count();
    float *w = malloc(count * sizeof(float));
    uint64_t x = 42;
    for (size_t i = 0; i < count; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (float)((double)(int64_t)(x >> 11) * 0x1p-53 * 0.08 - 0.02); /* full 24-bit mantissas */
    }
    for (size_t i = (size_t)V * C; i < (size_t)VP * C; i++)
        w[i] = 7.0f; /* padding rows: never read */
    const int32_t hdr[8] = {20240326, 3, MAXT, V, L, NH, C, VP};
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/tiny_llmc.bin", dir);
    write_llmc(path, w, count, hdr, 0);

    const int bits[2] = {32, 24};
    for (int k = 0; k < 2; k++) {
        char run[300];
        snprintf(run, sizeof run, "%s/C%d", dir, bits[k]);
        CHECK(run_ovt(TRAIN " --steps 2 --grid-bits %d --init-from %s --out %s", data, bits[k], path, run) == 0);
        trn_state *s0 = read_ckpt(run, 0);
        if (!s0)
            continue;
        /* Every value back: wte's first V rows, then everything after the
         * padded rows, in order. */
        size_t n = s0->layout.nparams, same = 0, wte = (size_t)V * C, pad = (size_t)(VP - V) * C;
        CHECK_EQ_U64(n, count - pad);
        for (size_t i = 0; i < n; i++) {
            float want = w[i < wte ? i : i + pad];
            if (bits[k] == 24)
                want = round_b24(want);
            same += memcmp(&s0->params[i], &want, 4) == 0;
        }
        CHECK_EQ_U64(same, n);
        CHECK(all_zero(s0->m, n) && all_zero(s0->v, n));
        uint64_t replayed = 0;
        CHECK(audit(run, KRN_BACKEND_SHUFFLE, &replayed) == AUD_VERIFIED && replayed == 2);
        trn_state_free(s0);
    }
    /* b = 24 really rounded something (the check above is not vacuous). */
    size_t changed = 0;
    for (size_t i = 0; i < 1000; i++)
        changed += round_b24(w[i]) != w[i];
    CHECK(changed > 900);

    /* Bad files: each a clear error, exit status 1. */
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    struct {
        const char *what, *needle;
        int32_t hdr[8];
        size_t cut;
        int nan_at;
    } cases[] = {
        {"truncated", "truncated", {20240326, 3, MAXT, V, L, NH, C, VP}, 100, -1},
        {"header only, cut", "truncated", {20240326, 3, MAXT, V, L, NH, C, VP}, 4 * count + 24, -1},
        {"wrong magic", "neither an ovt checkpoint", {20240327, 3, MAXT, V, L, NH, C, VP}, 0, -1},
        {"bf16 version", "version 5 is not supported", {20240326, 5, MAXT, V, L, NH, C, VP}, 0, -1},
        {"another shape", "gpt2 L3 C64 NH4 V256 maxT64", {20240326, 3, MAXT, V, 3, NH, C, VP}, 0, -1},
        {"padded below V", "padded vocabulary", {20240326, 3, MAXT, V, L, NH, C, 200}, 0, -1},
        {"a NaN", "not finite", {20240326, 3, MAXT, V, L, NH, C, VP}, 0, (int)(VP * C + 5)},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float keep = 0;
        if (cases[c].nan_at >= 0) {
            keep = w[cases[c].nan_at];
            w[cases[c].nan_at] = NAN;
        }
        write_llmc(bad, w, count, cases[c].hdr, cases[c].cut);
        if (cases[c].nan_at >= 0)
            w[cases[c].nan_at] = keep;
        CHECK_MSG(run_ovt(TRAIN " --steps 1 --init-from %s --out %s/bad%zu", data, bad, dir, c) == 1, "%s",
                  cases[c].what);
        CHECK_MSG(output_has(cases[c].needle), "%s", cases[c].what);
    }
    free(w);
}

/* B published: fetched and audited from the store; the arbiter's leaf 0 and
 * step 1. */
static void test_store_and_arbiter(void)
{
    char b[256], url[300], path[512], fetched[300];
    snprintf(b, sizeof b, "%s/B", dir);
    snprintf(url, sizeof url, "file://%s/store", dir);
    trn_step_table t;
    trn_run_config rc;
    ovt_hash ch, run_id;
    store_manifest m;
    store_ctx *s;
    ovt_sha256(&run_id, "finetune run", 12);
    snprintf(path, sizeof path, "%s/steps.bin", b);
    CHECK(trn_step_table_read(&t, path) == 0 && trn_run_load_config(b, &rc, &ch) == 0);
    CHECK(store_open(&s, url) == 0);
    CHECK_MSG(party_publish_run(s, b, &t, data, &rc.dataset_hash, &run_id, &m) == 0, "%s", ovt_errmsg());
    CHECK(store_has(s, &rc.init_hash) == 1);
    snprintf(fetched, sizeof fetched, "%s/fetched", dir);
    CHECK_MSG(aud_fetch_run(s, &run_id, fetched, NULL) == 0, "%s", ovt_errmsg());
    snprintf(path, sizeof path, "%s/ckpt/step-00000000.ckpt", fetched);
    CHECK(access(path, F_OK) == 0);
    uint64_t replayed = 0;
    CHECK(audit(fetched, KRN_BACKEND_REF, &replayed) == AUD_VERIFIED && replayed == 3);

    chain_arb_params run = {.config_hash = ch, .dataset_hash = rc.dataset_hash, .steps = 3};
    chain_arb_game g = {.phase = CHAIN_ARB_PHASE_AWAITING_VERDICT, .index = 0};
    arb_eval e;
    char note[512];
    CHECK(arb_evaluate(&e, s, &run_id, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.exec == ARB_EXEC_OK, "%s", note);
    CHECK_MEM(e.state_hash.b, t.steps[0].state_hash.b, 32);
    /* Step 1 from state 0 (named by stateHash_0 in the store). */
    trn_state *s0 = read_ckpt(b, 0);
    uint8_t *ckpt = NULL;
    size_t ckpt_len = 0;
    CHECK(s0 && trn_checkpoint_encode(s0, &ckpt, &ckpt_len) == 0);
    CHECK(store_put_state(s, &t.steps[0].state_hash, ckpt, ckpt_len) == 0);
    free(ckpt);
    trn_state_free(s0);
    g.index = 1;
    g.previous_state = t.steps[0].state_hash;
    g.trainer_batch = t.steps[1].batch_hash;
    g.trainer_log = t.steps[1].log_hash;
    CHECK(arb_evaluate(&e, s, &run_id, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK_MSG(e.exec == ARB_EXEC_OK, "%s", note);
    CHECK_MEM(e.state_hash.b, t.steps[1].state_hash.b, 32);
    CHECK(!e.traced);
    /* The arbiter's trace of step 1 (docs/formats.md, "Step trace") changes
     * no bit of its evaluation, and is the trace `ovt step --trace` gives
     * and the auditor's replay records on ref and shuffle. */
    krn_trace *tr;
    CHECK(krn_trace_new(&tr, false) == 0);
    CHECK(arb_evaluate(&e, s, &run_id, &run, &g, 1, NULL, tr, note, sizeof note) == 0);
    CHECK_MSG(e.exec == ARB_EXEC_OK && e.traced && e.trace_rc == 0, "%s %s", note, krn_trace_error(tr));
    CHECK_MEM(e.state_hash.b, t.steps[1].state_hash.b, 32);
    krn_trace_free(tr);
    char root[67] = "0x";
    ovt_hex_encode(root + 2, e.trace_root.b, 32);
    CHECK(run_ovt("step --run %s --step 1 --data %s --trace", b, data) == 0 && output_has(root));
    CHECK(run_ovt("audit %s --data %s --backend ref --trace-step 1", b, data) == 0 && output_has(root));
    CHECK(run_ovt("audit %s --data %s --backend shuffle --trace-step 1 --json", b, data) == 0 && output_has(root));
    /* Without the blob init_hash names, leaf 0 cannot be rebuilt. */
    char hex[65];
    ovt_hex_encode(hex, rc.init_hash.b, 32);
    snprintf(path, sizeof path, "%s/store/blob/%s", dir, hex);
    CHECK(unlink(path) == 0);
    g = (chain_arb_game){.phase = CHAIN_ARB_PHASE_AWAITING_VERDICT, .index = 0};
    CHECK(arb_evaluate(&e, s, &run_id, &run, &g, 1, NULL, NULL, note, sizeof note) == 0);
    CHECK(e.input[ARB_IN_STATE] == ARB_INPUT_MISSING && e.exec == ARB_EXEC_NOT_RUN);
    CHECK(strstr(note, "init_hash") != NULL);
    store_close(s);
    trn_step_table_free(&t);
}

int main(void)
{
    if (cli_setup("finetune"))
        return 1;
    snprintf(data, sizeof data, "%s/text", dir);
    char text[6000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + (i * 7 + i / 13) % 26);
    CHECK(ovt_write_atomic(data, text, sizeof text, 0644) == 0);
    CHECK_RUN(test_cosine_replays());
    CHECK_RUN(test_linear_and_usage());
    CHECK_RUN(test_init_from_checkpoint());
    CHECK_RUN(test_init_from_llmc());
    CHECK_RUN(test_store_and_arbiter());
    if (!getenv("OVT_KEEP_TMP"))
        cli_cleanup();
    return check_done();
}
