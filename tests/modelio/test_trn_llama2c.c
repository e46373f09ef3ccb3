/* llama2.c's checkpoint files, out and back in (modelio/llama2c.h,
 * `ovt export --format llama2c`, `ovt train --init-from`):
 *   a small tied Llama with params[i] = i / 8192: the file sizes, header
 *     words, rotary table entries and tensor positions of both versions,
 *     computed here by hand; both read back through --init-from's loader to
 *     the same parameters and export again to the same bytes; a tied file
 *     for an untied run, a truncated one and one with trailing bytes are
 *     refused, naming what differs;
 *   through the CLI with llama-tiny (untied, grouped-query): for each
 *     version, `--init-from` the export of step 5 starts from exactly the
 *     checkpoint's parameters (init_hash = its paramsHash; the two versions'
 *     runs have the same step-0 stateHash) and exporting the new run's step
 *     0 gives the same bytes;
 *   tests/modelio/llama2c_check.py, a reader written from llama2.c's
 *     export.py, finds each file's header equal to the run config and its
 *     tensors equal to the safetensors export's (q and k rows mapped back
 *     from Hugging Face's order), and fails on a file with one byte changed;
 *   a truncated file, another model shape (both named), a version-1 file
 *     of version 2: clear errors, no run directory written; a GPT-2 run and
 *     an MLP are refused by the export. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "modelio/export.h"
#include "modelio/import.h"
#include "modelio/llama2c.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "support/cli_fixture.h"
#include "export_helpers.h"

static char data[128];
static int have_python;

/* L 2, C 16, 2 heads of 8 sharing 1 key/value head, V 40, maxT 8, SwiGLU
 * of 64 (4*16*2/3 = 42 rounded up to 32's multiple), tied: 8400 parameters
 * (wte 640, rms_att 32, wq 512, wk 256, wv 256, wo 512, rms_ffn 32, w1, w2,
 * w3 2048 each, rms_final 16). */
static trn_state *tied_state(void)
{
    trn_model_config m = {.kind = TRN_MODEL_LLAMA, .n_layer = 2, .width = 16, .n_head = 2, .n_kv_head = 1,
                          .vocab = 40, .max_seq = 8, .hidden = 64, .tied = 1, .rope_theta = 10000.0,
                          .norm_eps = 1e-5};
    return counting_params(&m, 8192.0f);
}

static float float_at(const uint8_t *buf, size_t off)
{
    float x;
    memcpy(&x, buf + off, 4);
    return x;
}

static int32_t int_at(const uint8_t *buf, size_t off)
{
    return (int32_t)ovt_get_le32(buf + off);
}

/* Loads path for config rc: 0 and the parameters equal to want, or the
 * failure's code with its message containing why. */
static int load_try(const trn_run_config *rc, const char *path, const float *want, size_t n, const char *why)
{
    float *v = NULL;
    size_t np = 0;
    int rv = trn_init_load(&v, &np, rc, path);
    if (rv == 0)
        CHECK_MSG(np == n && memcmp(v, want, n * sizeof(float)) == 0, "%s loads other parameters", path);
    else if (why)
        CHECK_MSG(strstr(ovt_errmsg(), why) != NULL, "'%s' lacks '%s'", ovt_errmsg(), why);
    free(v);
    return rv;
}

/* Writes the first len bytes of src (plus `extra` zero bytes) to dst. */
static void cut_file(const char *src, const char *dst, size_t len, size_t extra)
{
    uint8_t *buf;
    size_t n;
    CHECK(ovt_read_file(src, &buf, &n, 1 << 26) == 0);
    uint8_t *out = calloc(len + extra + 1, 1);
    memcpy(out, buf, len < n ? len : n);
    CHECK(ovt_write_atomic(dst, out, len + extra, 0644) == 0);
    free(out);
    free(buf);
}

static void test_tied_files(void)
{
    trn_state *st = tied_state();
    if (!st)
        return;
    CHECK_EQ_U64(st->layout.nparams, 8400);
    char p0[256], p1[256], again[256], bad[256];
    snprintf(p0, sizeof p0, "%s/tied0.bin", dir);
    snprintf(p1, sizeof p1, "%s/tied1.bin", dir);
    snprintf(again, sizeof again, "%s/again.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    CHECK(trn_export_llama2c(p0, st, 0) == 0 && trn_export_llama2c(p1, st, 1) == 0);
    uint8_t *b0, *b1;
    size_t n0, n1;
    CHECK(ovt_read_file(p0, &b0, &n0, 1 << 20) == 0 && ovt_read_file(p1, &b1, &n1, 1 << 20) == 0);
    /* version 0: 28 + 4 * (8400 + two tables of 8 positions x 4 frequencies) */
    CHECK_EQ_U64(n0, 28 + 4 * (8400 + 64));
    const int32_t head[7] = {16, 64, 2, 2, 1, 40, 8}; /* vocab positive: tied */
    for (int k = 0; k < 7; k++)
        CHECK_MSG(int_at(b0, 4 * k) == head[k], "v0 header word %d is %d, not %d", k, int_at(b0, 4 * k), head[k]);
    CHECK(float_at(b0, 28 + 4 * 640) == 640.0f / 8192); /* rms_att[0] after wte */
    CHECK(float_at(b0, 28 + 4 * 8399) == 8399.0f / 8192); /* rms_final's last */
    /* freq_i = 10000^(-2i/8): cos(1 * 0.1) at t 1, i 1; sin(3 * 0.01) at t 3, i 2 */
    CHECK(float_at(b0, 28 + 4 * (8400 + 5)) == (float)0.9950041652780258);
    CHECK(float_at(b0, 28 + 4 * (8400 + 32 + 14)) == (float)0.02999550020249566);
    CHECK(float_at(b0, 28 + 4 * (8400 + 32 + 1)) == 0.0f); /* sin at t 0 */
    /* version 1: 256 + 4 * 8400; rms_att, rms_ffn, rms_final, wte, wq ... */
    CHECK_EQ_U64(n1, 256 + 4 * 8400);
    CHECK(ovt_get_le32(b1) == 0x616b3432 && memcmp(b1, "24ka", 4) == 0 && int_at(b1, 4) == 1);
    for (int k = 0; k < 7; k++)
        CHECK(int_at(b1, 8 + 4 * k) == head[k]);
    CHECK(b1[36] == 1 && b1[37] == 0 && b1[255] == 0);
    CHECK(float_at(b1, 256) == 640.0f / 8192);                 /* rms_att[0] */
    CHECK(float_at(b1, 256 + 4 * 32) == 2208.0f / 8192);       /* rms_ffn[0] */
    CHECK(float_at(b1, 256 + 4 * 64) == 8384.0f / 8192);       /* rms_final[0] */
    CHECK(float_at(b1, 256 + 4 * 81) == 1.0f / 8192);          /* wte[1] */
    CHECK(float_at(b1, 256 + 4 * (80 + 640)) == 672.0f / 8192); /* wq[0] */
    CHECK(float_at(b1, n1 - 4) == 8383.0f / 8192);             /* w3's last */
    free(b0);
    free(b1);
    /* both read back and write the same bytes again */
    const char *paths[2] = {p0, p1};
    for (uint32_t v = 0; v < 2; v++) {
        trn_state *back = NULL;
        float *loaded = NULL;
        size_t np;
        CHECK(load_try(&st->config, paths[v], st->params, 8400, NULL) == 0);
        CHECK(trn_state_new(&back, &st->config) == 0 && trn_init_load(&loaded, &np, &st->config, paths[v]) == 0);
        if (back && loaded) {
            memcpy(back->params, loaded, np * sizeof(float));
            CHECK(trn_export_llama2c(again, back, v) == 0);
            CHECK_MSG(same_files(paths[v], again), "version %u: the loaded parameters export to other bytes", v);
        }
        free(loaded);
        trn_state_free(back);
    }
    /* a tied file for an untied run; cut or lengthened files */
    trn_run_config untied = st->config;
    untied.model.tied = 0;
    CHECK(load_try(&untied, p1, NULL, 0, "V40 maxT8 H64 tied theta10000 eps1e-05, the run's model is llama L2 C16 "
                                         "NH2 KV1 V40 maxT8 H64 untied") == OVT_EINVAL);
    CHECK(load_try(&untied, p0, NULL, 0, "the legacy llama2.c file holds a model of shape") == OVT_EINVAL);
    cut_file(p0, bad, 28 + 4 * 8464 - 4, 0);
    CHECK(load_try(&st->config, bad, NULL, 0, "implies a file of 33884 bytes, not 33880 (truncated); the run's model "
                                              "as one is 33884 bytes") == OVT_EFORMAT);
    cut_file(p1, bad, 256 + 4 * 8400, 4);
    CHECK(load_try(&st->config, bad, NULL, 0, "(version 1) is 33860 bytes, its header implies 33856 (trailing "
                                              "bytes)") == OVT_EFORMAT);
    cut_file(p0, bad, 20, 0);
    CHECK(load_try(&st->config, bad, NULL, 0, "20 bytes, shorter than a llama2.c header (28)") == OVT_EFORMAT);
    /* an MLP has no llama2.c file */
    trn_model_config mlp;
    trn_run_config rc;
    trn_state *m = NULL;
    CHECK(trn_model_preset(&mlp, "mlp-demo") == 0);
    trn_config_default(&rc, &mlp);
    rc.batch_size = 1;
    CHECK(trn_state_new(&m, &rc) == 0);
    CHECK(m && trn_export_llama2c(bad, m, 0) == OVT_EINVAL && strstr(ovt_errmsg(), "Llama models only"));
    CHECK(trn_export_llama2c(bad, st, 2) == OVT_EINVAL);
    trn_state_free(m);
    trn_state_free(st);
}

/* python3 llama2c_check.py bin st: its exit status (-1 when it did not
 * run; 0 without python3, which main reports). */
static int py_check(const char *bin, const char *st)
{
    if (!have_python)
        return 0;
    const char *src = getenv("OVT_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 %s/tests/modelio/llama2c_check.py %s %s > %s/py.txt 2>&1", src ? src : ".",
             bin, st, dir);
    int rv = system(cmd);
    snprintf(cmd, sizeof cmd, "cat %s/py.txt", dir);
    if (system(cmd) != 0)
        return -1;
    return WIFEXITED(rv) ? WEXITSTATUS(rv) : -1;
}

/* The tied files against a safetensors export carrying the run config. */
static void test_tied_python(void)
{
    trn_state *st = tied_state();
    if (!st)
        return;
    uint8_t enc[TRN_CONFIG_ENC_MAX];
    char hex[2 * TRN_CONFIG_ENC_MAX + 1], stp[256], bin[256];
    ovt_hex_encode(hex, enc, trn_config_encode(enc, &st->config));
    trn_st_meta meta[1] = {{"ovt.config", hex}};
    snprintf(stp, sizeof stp, "%s/tied.safetensors", dir);
    CHECK(trn_export_safetensors(stp, st, meta, 1) == 0);
    for (uint32_t v = 0; v < 2; v++) {
        snprintf(bin, sizeof bin, "%s/tied-py%u.bin", dir, v);
        CHECK(trn_export_llama2c(bin, st, v) == 0);
        CHECK_MSG(py_check(bin, stp) == 0, "llama2c_check.py refuses the tied version-%u file", v);
    }
    trn_state_free(st);
}

#define TINY "train --model llama-tiny --batch 4 --seq 32 --every 0 --data %s"

static void test_round_trip(const char *run)
{
    char a[256], b[256], from[256], want[65], got[65], stp[256], s0[80], first[80] = "";
    snprintf(stp, sizeof stp, "%s/run.safetensors", dir);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, stp) == 0);
    params_hash_hex(want, run, 5);
    for (int v = 0; v < 2; v++) {
        snprintf(a, sizeof a, "%s/a%d.bin", dir, v);
        snprintf(b, sizeof b, "%s/b%d.bin", dir, v);
        snprintf(from, sizeof from, "%s/from%d", dir, v);
        CHECK(run_ovt("export %s --format llama2c --llama2c-version %d --out %s", run, v, a) == 0);
        CHECK(output_has("step 5 of") && output_has("(llama2c)"));
        CHECK_MSG(py_check(a, stp) == 0, "llama2c_check.py refuses the version-%d export", v);
        CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, from, a) == 0);
        init_hash_of(got, from);
        CHECK_MSG(strcmp(got, want) == 0, "version %d: init_hash %s, the checkpoint's paramsHash %s", v, got, want);
        state0_of(s0, from);
        if (v == 0)
            snprintf(first, sizeof first, "%s", s0);
        CHECK_MSG(s0[0] && strcmp(s0, first) == 0, "the two versions' runs start from other states");
        CHECK(run_ovt("export %s --step 0 --format llama2c --llama2c-version %d --out %s", from, v, b) == 0);
        CHECK_MSG(same_files(a, b), "version %d: exporting the imported parameters again gave other bytes", v);
    }
    /* the default is version 0, what run.c reads */
    CHECK(run_ovt("export %s --format llama2c --out %s", run, b) == 0);
    snprintf(a, sizeof a, "%s/a0.bin", dir);
    CHECK(same_files(a, b));
    /* the checker can fail: one byte of w2 changed */
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(a, &buf, &len, 1 << 26) == 0);
    buf[len / 2] ^= 0x01;
    CHECK(ovt_write_atomic(b, buf, len, 0644) == 0);
    free(buf);
    CHECK(!have_python || py_check(b, stp) == 1);
}

static void test_bad_input(const char *run)
{
    char a0[256], a1[256], bad[256], out[256];
    snprintf(a0, sizeof a0, "%s/a0.bin", dir);
    snprintf(a1, sizeof a1, "%s/a1.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);
    snprintf(out, sizeof out, "%s/never", dir);
    /* llama-tiny: 131392 parameters; v0 adds two tables of 64 x 8 */
    cut_file(a0, bad, 100000, 0);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, bad) == 1);
    CHECK(output_has("as a legacy llama2.c file (no magic) its header implies a file of 529692 bytes, not 100000 "
                     "(truncated)"));
    CHECK(access(out, F_OK) != 0);
    cut_file(a1, bad, 100000, 0);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, bad) == 1);
    CHECK(output_has("llama2.c file (version 1) is 100000 bytes, its header implies 525824 (truncated)"));
    CHECK(access(out, F_OK) != 0);
    const char *files[2] = {a0, a1};
    for (int v = 0; v < 2; v++) {
        CHECK(run_ovt("train --model llama-15m --batch 1 --seq 8 --steps 1 --every 0 --data %s --out %s "
                      "--init-from %s",
                      data, out, files[v]) == 1);
        CHECK(output_has("holds a model of shape llama L2 C64 NH4 KV2 V256 maxT64 H192 untied"));
        CHECK(output_has("the run's model is llama L6 C288 NH6 KV6 V32000 maxT256 H768 tied"));
        CHECK(access(out, F_OK) != 0);
    }
    /* llama-15m's legacy file is as long as llama2.c's stories15M.bin */
    cut_file(a0, bad, 100000, 0);
    CHECK(run_ovt("train --model llama-15m --batch 1 --seq 8 --steps 1 --every 0 --data %s --out %s --init-from %s",
                  data, out, bad) == 1);
    CHECK(output_has("not 100000 (truncated); the run's model as one is 60816028 bytes"));
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(a1, &buf, &len, 1 << 26) == 0);
    ovt_put_le32(buf + 4, 2);
    CHECK(ovt_write_atomic(bad, buf, len, 0644) == 0);
    free(buf);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, bad) == 1);
    CHECK(output_has("llama2.c file version 2 is not supported"));
    CHECK(access(out, F_OK) != 0);
    /* the export's own errors */
    CHECK(run_ovt("export %s --format llama2c --llama2c-version 2 --out %s", run, bad) == 2);
    CHECK(run_ovt("export %s --format llmc --llama2c-version 1 --out %s", run, bad) == 2);
    CHECK(run_ovt("export %s --format llmc --out %s", run, out) == 1);
    CHECK(output_has("export a Llama as safetensors or llama2c") && access(out, F_OK) != 0);
    snprintf(bad, sizeof bad, "%s/gpt2", dir);
    CHECK(run_ovt("train --model gpt2-tiny --batch 4 --seq 32 --every 0 --steps 1 --data %s --out %s", data, bad) == 0);
    CHECK(run_ovt("export %s --format llama2c --out %s", bad, out) == 1);
    CHECK(output_has("the llama2c format holds Llama models only; export a GPT-2 as safetensors or llmc"));
    CHECK(access(out, F_OK) != 0);
}

int main(void)
{
    if (cli_setup("llama2c"))
        return 1;
    CHECK_RUN(test_tied_files());
    have_python = system("python3 -c 'pass' 2>/dev/null") == 0;
    if (have_python)
        CHECK_RUN(test_tied_python());
    else
        printf("python3 absent: llama2c_check.py not run\n");
    if (gpl_tokens(data, sizeof data)) {
        char run[256];
        snprintf(run, sizeof run, "%s/run", dir);
        CHECK(run_ovt(TINY " --steps 5 --checkpoint-every 5 --out %s", data, run) == 0);
        CHECK_RUN(test_round_trip(run));
        CHECK_RUN(test_bad_input(run));
    }
    cli_cleanup();
    return check_done();
}
