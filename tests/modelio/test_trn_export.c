/* The model's ways out of ovt and back in (modelio/safetensors.h,
 * modelio/export.h, modelio/eval.h), as libraries and through the built
 * `ovt`:
 *   the safetensors reader accepts well-formed files (scalars, empty
 *     tensors, a padded header) and refuses each malformation the
 *     specification rules out, naming it; the writer's files read back and
 *     start their data 8-byte aligned;
 *   the export's tensors for gpt2-small are Hugging Face GPT-2's names and
 *     shapes, written out here from GPT2LMHeadModel's state_dict (124M
 *     parameters, lm_head tied and not stored), Conv1D weights transposed;
 *     import(export(params)) is the identity, and an element lands where
 *     Hugging Face reads it;
 *   llm.c's file with a padded vocabulary reads back through --init-from's
 *     loader; the llmc round trip through the CLI: `ovt train --init-from`
 *     an exported file starts from exactly the checkpoint's parameters
 *     (init_hash = SHA-256 of those parameter bytes, as a run from the
 *     checkpoint itself), the two runs' step-0 stateHashes are equal, and
 *     exporting the new run's step 0 again gives the same bytes;
 *   --init-from a safetensors file: ovt's export, and a Hugging Face style
 *     file (no "transformer." prefix, attention mask buffers, a stored
 *     lm_head equal to wte) give the same init_hash; an untied head, a
 *     float16 tensor, a missing tensor are clear errors;
 *   `ovt eval` prints the same loss (all 17 digits) on cpu, ref and
 *     shuffle, honours --windows, and refuses an MLP run; `ovt export
 *     --format llmc` refuses an MLP. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "common/fileio.h"
#include "modelio/export.h"
#include "modelio/import.h"
#include "modelio/safetensors.h"
#include "trainer/init.h"
#include "trainer/run.h"
#include "trainer/state.h"
#include "support/cli_fixture.h"
#include "export_helpers.h"

static char data[128];

/* 8-byte length, header, data: a file for the reader (malloc'd). */
static uint8_t *st_file(size_t *len, const char *header, size_t data_len)
{
    size_t n = strlen(header);
    uint8_t *buf = calloc(8 + n + data_len + 1, 1);
    ovt_put_le64(buf, n);
    memcpy(buf + 8, header, n);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + n + i] = (uint8_t)i;
    *len = 8 + n + data_len;
    return buf;
}

/* Parses header + data_len bytes: 0 and the file, or the failure's code
 * with its message containing `why`. */
static int st_try(const char *header, size_t data_len, const char *why)
{
    size_t len;
    uint8_t *buf = st_file(&len, header, data_len);
    trn_st_file f;
    int rv = trn_st_parse(&f, buf, len, "t.safetensors");
    if (rv == 0)
        trn_st_free(&f);
    else if (why)
        CHECK_MSG(strstr(ovt_errmsg(), why) != NULL, "'%s' lacks '%s'", ovt_errmsg(), why);
    return rv;
}

#define T1(name, off) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" off "]}"

static void test_reader(void)
{
    size_t len;
    uint8_t *buf = st_file(&len, "{" T1("a", "4,8") "," T1("b", "0,4") ",\"__metadata__\":{\"k\":\"v\"}}   ", 8);
    trn_st_file f;
    CHECK(trn_st_parse(&f, buf, len, "t") == 0);
    CHECK_EQ_U64(f.ntensors, 2);
    CHECK(f.ntensors == 2 && strcmp(f.t[0].name, "b") == 0 && f.t[1].data[0] == 4); /* data order */
    CHECK(trn_st_find(&f, "a") == &f.t[1] && trn_st_find(&f, "c") == NULL);
    CHECK(trn_st_meta_get(&f, "k") && strcmp(trn_st_meta_get(&f, "k"), "v") == 0);
    trn_st_free(&f);
    CHECK(st_try("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                 "\"e\":{\"dtype\":\"U8\",\"shape\":[0,3],\"data_offsets\":[8,8]}}",
                 8, NULL) == 0);
    CHECK(st_try("{}", 0, NULL) == 0);
    /* each malformation, named */
    CHECK(st_try("{" T1("a", "0,4") "," T1("b", "2,6") "}", 6, "") == OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," T1("b", "4,8") "}", 8,
                 "overlaps") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") "," T1("b", "8,12") "}", 12, "belong to no tensor") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") "}", 2, "past the data") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") "}", 5, "after the last tensor") == OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype F33") ==
          OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "its shape and dtype need 12") ==
          OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "begin <= end") ==
          OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, "shape[0]") ==
          OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "exactly") ==
          OVT_EFORMAT);
    CHECK(st_try("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "exactly") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") ",\"__metadata__\":{\"k\":1}}", 4, "not a string") == OVT_EFORMAT);
    CHECK(st_try("{\"__metadata__\":[]}", 0, "not an object") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") "," T1("a", "0,4") "}", 4, "not a JSON object") == OVT_EFORMAT);
    CHECK(st_try("[]", 0, "open with") == OVT_EFORMAT);
    CHECK(st_try("{\"a\":", 0, "not a JSON object") == OVT_EFORMAT);
    CHECK(st_try("{" T1("a", "0,4") "}x", 4, "not a JSON object") == OVT_EFORMAT);
    buf = st_file(&len, "{}", 0);
    ovt_put_le64(buf, 3); /* the header length past the file */
    CHECK(trn_st_parse(&f, buf, len, "t") == OVT_EFORMAT && strstr(ovt_errmsg(), "header length"));
    CHECK(trn_st_parse(&f, calloc(1, 4), 4, "t") == OVT_EFORMAT && strstr(ovt_errmsg(), "shorter"));
}

static void test_writer(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    float a[6] = {1, 2, 3, 4, 5, 6};
    double s = 0.5;
    trn_st_out t[2] = {{.name = "a", .dtype = TRN_ST_F32, .ndim = 2, .shape = {2, 3}, .data = a},
                       {.name = "s", .dtype = TRN_ST_F64, .ndim = 0, .data = &s}};
    trn_st_meta m[2] = {{"format", "pt"}, {"x", "y"}};
    CHECK(trn_st_write(path, t, 2, m, 2) == 0);
    trn_st_file f;
    CHECK(trn_st_read(&f, path, 1 << 20) == 0);
    CHECK((8 + ovt_get_le64(f.buf)) % 8 == 0 && trn_st_sniff(f.buf, f.len));
    const trn_st_tensor *ta = trn_st_find(&f, "a"), *ts = trn_st_find(&f, "s");
    CHECK(ta && ta->ndim == 2 && ta->shape[1] == 3 && memcmp(ta->data, a, sizeof a) == 0);
    CHECK(ts && ts->ndim == 0 && ts->dtype == TRN_ST_F64 && memcmp(ts->data, &s, 8) == 0);
    CHECK(f.nmeta == 2 && strcmp(trn_st_meta_get(&f, "x"), "y") == 0);
    CHECK(memcmp(f.buf + 8, "{\"__metadata__\":", 16) == 0);
    trn_st_free(&f);
    t[1].name = "a";
    CHECK(trn_st_write(path, t, 2, m, 2) == OVT_EINVAL);
    t[1].name = "__metadata__";
    CHECK(trn_st_write(path, t, 2, NULL, 0) == OVT_EINVAL);
}

/* Hugging Face GPT-2 124M (GPT2LMHeadModel.state_dict(), the attention
 * mask buffers and the tied lm_head left out), written out by hand. */
static void test_hf_names(void)
{
    static const struct {
        const char *name;
        uint64_t d0, d1;
    } block[12] = {{"ln_1.weight", 768, 0},        {"ln_1.bias", 768, 0},       {"attn.c_attn.weight", 768, 2304},
                   {"attn.c_attn.bias", 2304, 0},  {"attn.c_proj.weight", 768, 768}, {"attn.c_proj.bias", 768, 0},
                   {"ln_2.weight", 768, 0},        {"ln_2.bias", 768, 0},       {"mlp.c_fc.weight", 768, 3072},
                   {"mlp.c_fc.bias", 3072, 0},     {"mlp.c_proj.weight", 3072, 768}, {"mlp.c_proj.bias", 768, 0}};
    trn_model_config m;
    trn_layout l;
    CHECK(trn_model_preset(&m, "gpt2-small") == 0 && trn_layout_build(&l, &m) == 0);
    trn_export_tensor *e;
    size_t n, total = 0;
    CHECK(trn_export_tensors(&e, &n, &l) == 0);
    CHECK_EQ_U64(n, 4 + 12 * 12);
    char want[64];
    for (size_t i = 0; i < n; i++) {
        uint64_t d0, d1;
        if (i < 2 || i >= n - 2) {
            const char *names[4] = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                                    "transformer.ln_f.bias"};
            uint64_t d[4][2] = {{50257, 768}, {1024, 768}, {768, 0}, {768, 0}};
            size_t k = i < 2 ? i : i - (n - 4);
            snprintf(want, sizeof want, "%s", names[k]);
            d0 = d[k][0], d1 = d[k][1];
        } else {
            snprintf(want, sizeof want, "transformer.h.%zu.%s", (i - 2) / 12, block[(i - 2) % 12].name);
            d0 = block[(i - 2) % 12].d0, d1 = block[(i - 2) % 12].d1;
        }
        CHECK_MSG(strcmp(e[i].name, want) == 0, "tensor %zu is %s, not %s", i, e[i].name, want);
        CHECK(e[i].ndim == (d1 ? 2u : 1u) && e[i].shape[0] == d0 && e[i].shape[1] == d1);
        total += d0 * (d1 ? d1 : 1);
    }
    CHECK_EQ_U64(total, 124439808);
    free(e);
}

/* A small GPT-2 state with params[i] = i / 4096 (exact floats). */
static trn_state *counting_state(uint32_t vocab)
{
    trn_model_config m = {.kind = TRN_MODEL_GPT2, .n_layer = 2, .width = 8, .n_head = 2, .vocab = vocab, .max_seq = 16};
    return counting_params(&m, 4096.0f);
}

static void test_layouts(void)
{
    trn_state *st = counting_state(200);
    if (!st)
        return;
    char path[256];
    snprintf(path, sizeof path, "%s/c.safetensors", dir);
    CHECK(trn_export_safetensors(path, st, NULL, 0) == 0);
    trn_st_file f;
    CHECK(trn_st_read(&f, path, 1 << 24) == 0);
    /* Hugging Face: c_attn(x) = x @ W + b, W (in, out); ovt: qkvw[l] (out, in) */
    const trn_st_tensor *w = trn_st_find(&f, "transformer.h.1.attn.c_attn.weight");
    trn_gpt2_tensors p;
    trn_gpt2_slice(&p, &st->layout, st->params);
    CHECK(w && w->shape[0] == 8 && w->shape[1] == 24);
    size_t in = 5, out = 17;
    float x;
    memcpy(&x, w->data + 4 * (in * 24 + out), 4);
    CHECK(x == p.qkvw[1 * 24 * 8 + out * 8 + in]);
    float *back = calloc(st->layout.nparams, sizeof(float));
    CHECK(trn_export_import(back, &st->layout, &f, 0, path) == 0);
    CHECK(memcmp(back, st->params, st->layout.nparams * sizeof(float)) == 0);
    free(back);
    trn_st_free(&f);
    /* llm.c, vocabulary 200 padded to 256 with zero rows, back through --init-from's reader */
    snprintf(path, sizeof path, "%s/c.bin", dir);
    CHECK(trn_export_llmc(path, st) == 0);
    uint8_t *buf;
    size_t len;
    CHECK(ovt_read_file(path, &buf, &len, 1 << 24) == 0);
    size_t C = 8, V = 200, Vp = 256;
    CHECK_EQ_U64(len, 1024 + 4 * (st->layout.nparams + (Vp - V) * C));
    CHECK(ovt_get_le32(buf) == 20240326 && ovt_get_le32(buf + 4) == 3 && ovt_get_le32(buf + 28) == Vp);
    float pad;
    memcpy(&pad, buf + 1024 + 4 * (V * C + 3), 4);
    CHECK(pad == 0.0f);
    free(buf);
    float *loaded;
    size_t np;
    CHECK(trn_init_load(&loaded, &np, &st->config, path) == 0);
    CHECK(np == st->layout.nparams && memcmp(loaded, st->params, np * sizeof(float)) == 0);
    free(loaded);
    trn_state_free(st);
}

#define TINY "train --model gpt2-tiny --batch 4 --seq 32 --every 0 --data %s"

static void test_llmc_round_trip(const char *run)
{
    char a[256], b[256], from_ckpt[256], from_file[256], want[65], got[65], s1[80], s2[80];
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    snprintf(from_ckpt, sizeof from_ckpt, "%s/from-ckpt", dir);
    snprintf(from_file, sizeof from_file, "%s/from-llmc", dir);
    CHECK(run_ovt("export %s --step 10 --format llmc --out %s", run, a) == 0);
    CHECK(output_has("step 10 of"));
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, from_file, a) == 0);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s/ckpt/step-00000010.ckpt", data, from_ckpt, run) == 0);
    params_hash_hex(want, run, 10);
    init_hash_of(got, from_file);
    CHECK_MSG(strcmp(got, want) == 0, "init_hash %s, the checkpoint's paramsHash %s", got, want);
    state0_of(s1, from_file);
    state0_of(s2, from_ckpt);
    CHECK(s1[0] && strcmp(s1, s2) == 0);
    CHECK(run_ovt("export %s --step 0 --format llmc --out %s", from_file, b) == 0);
    CHECK_MSG(same_files(a, b), "exporting the imported parameters again gave other bytes");
    CHECK(run_ovt("export %s --step 5 --format llmc --out %s", run, b) == 1);
    CHECK(output_has("no checkpoint of step 5"));
    CHECK(run_ovt("export %s --format onnx --out %s", run, b) == 2);
}

/* Rewrites the export at src as a Hugging Face style file at dst: names
 * without "transformer.", mask buffers, lm_head = wte (or differing, or
 * with one tensor left out or stored as float16). */
enum { HF_TIED, HF_UNTIED, HF_MISSING, HF_F16 };
static void write_hf_style(const char *src, const char *dst, int variant)
{
    trn_st_file f;
    CHECK(trn_st_read(&f, src, 1 << 26) == 0);
    trn_st_out *t = calloc(f.ntensors + 3, sizeof *t);
    char (*names)[64] = calloc(f.ntensors, 64);
    static float mask[64 * 64], head_changed[256 * 64];
    size_t n = 0;
    for (size_t i = 0; i < f.ntensors; i++) {
        if (variant == HF_MISSING && strcmp(f.t[i].name, "transformer.h.1.ln_2.bias") == 0)
            continue;
        snprintf(names[i], 64, "%s", f.t[i].name + 12);
        t[n] = (trn_st_out){.name = names[i], .dtype = f.t[i].dtype, .ndim = f.t[i].ndim, .data = f.t[i].data};
        memcpy(t[n].shape, f.t[i].shape, sizeof t[n].shape);
        if (variant == HF_F16 && strcmp(names[i], "ln_f.bias") == 0)
            t[n].dtype = TRN_ST_F16, t[n].shape[0] *= 2;
        n++;
    }
    t[n++] = (trn_st_out){.name = "h.0.attn.bias", .dtype = TRN_ST_F32, .ndim = 2, .shape = {64, 64}, .data = mask};
    const trn_st_tensor *wte = trn_st_find(&f, "transformer.wte.weight");
    memcpy(head_changed, wte->data, sizeof head_changed);
    head_changed[77] += 1.0f;
    t[n++] = (trn_st_out){.name = "lm_head.weight", .dtype = TRN_ST_F32, .ndim = 2, .shape = {256, 64},
                          .data = variant == HF_UNTIED ? head_changed : (const void *)wte->data};
    CHECK(trn_st_write(dst, t, n, NULL, 0) == 0);
    free(names);
    free(t);
    trn_st_free(&f);
}

static void test_init_from_safetensors(const char *run)
{
    char st[256], hf[256], out[256], want[65], got[65];
    snprintf(st, sizeof st, "%s/m.safetensors", dir);
    snprintf(hf, sizeof hf, "%s/hf.safetensors", dir);
    CHECK(run_ovt("export %s --format safetensors --out %s", run, st) == 0);
    params_hash_hex(want, run, 20);
    snprintf(out, sizeof out, "%s/from-st", dir);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, st) == 0);
    init_hash_of(got, out);
    CHECK_MSG(strcmp(got, want) == 0, "init_hash %s, the checkpoint's paramsHash %s", got, want);
    write_hf_style(st, hf, HF_TIED);
    snprintf(out, sizeof out, "%s/from-hf", dir);
    CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, hf) == 0);
    init_hash_of(got, out);
    CHECK_MSG(strcmp(got, want) == 0, "init_hash %s from the Hugging Face style file, want %s", got, want);
    const char *why[] = {NULL, "output head is tied to it", "h.1.ln_2.bias\" is missing", "is F16"};
    for (int v = HF_UNTIED; v <= HF_F16; v++) {
        write_hf_style(st, hf, v);
        snprintf(out, sizeof out, "%s/from-hf-%d", dir, v);
        CHECK(run_ovt(TINY " --steps 1 --out %s --init-from %s", data, out, hf) == 1);
        CHECK(output_has(why[v]));
    }
    CHECK(run_ovt("train --model gpt2-small --batch 1 --seq 8 --steps 1 --every 0 --data %s --out %s/small "
                  "--init-from %s",
                  data, dir, st) == 1);
    CHECK(output_has("the model's is F32 (50257, 768)"));
}

/* The "loss" value of the last `ovt eval --json`. */
static void eval_loss(char *out, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    file_value(out, cap, path, "\"loss\": ");
}

static void test_eval(const char *run)
{
    const char *backends[] = {"cpu", "ref", "shuffle"};
    char first[128] = "", got[128];
    CHECK(run_ovt("eval %s --data %s --json", run, data) == 0);
    CHECK(output_has("\"windows\": 1065") && output_has("\"batches\": 267")); /* 35149 tokens / 33 */
    /* the shuffle backend takes 0.8 s a batch here: 15 batches, the last of 3 windows */
    for (int b = 0; b < 3; b++) {
        CHECK(run_ovt("eval %s --data %s --backend %s --windows 59 --json", run, data, backends[b]) == 0);
        CHECK(output_has("\"windows\": 59") && output_has("\"batches\": 15"));
        eval_loss(got, sizeof got);
        if (b == 0)
            snprintf(first, sizeof first, "%s", got);
        CHECK_MSG(got[0] && strcmp(got, first) == 0, "%s: %s, cpu %s", backends[b], got, first);
    }
    printf("eval on cpu, ref, shuffle: %s\n", first);
    CHECK(run_ovt("eval %s --step 0 --data %s --windows 3 --json", run, data) == 0);
    CHECK(output_has("\"windows\": 3") && output_has("\"batches\": 1"));
    eval_loss(got, sizeof got);
    double l0 = atof(got);
    CHECK_MSG(fabs(l0 - log(256.0)) < 0.3, "step-0 loss %g is not near ln 256", l0);
    CHECK(run_ovt("eval %s --data %s --backend gpu", run, data) == 2);
    CHECK(run_ovt("eval %s", run) == 2);
}

static void test_mlp(void)
{
    char samples[256], run[256], out[256];
    snprintf(samples, sizeof samples, "%s/samples.bin", dir);
    snprintf(run, sizeof run, "%s/mlp", dir);
    snprintf(out, sizeof out, "%s/mlp.out", dir);
    CHECK(run_ovt("data mlp --out %s", samples) == 0);
    CHECK(run_ovt("train --model mlp-demo --data %s --out %s --steps 2 --batch 8 --every 0", samples, run) == 0);
    CHECK(run_ovt("export %s --format llmc --out %s", run, out) == 1);
    CHECK(output_has("GPT-2 models only"));
    CHECK(run_ovt("eval %s --data %s", run, data) == 1);
    CHECK(output_has("for GPT-2 and Llama models"));
    CHECK(run_ovt("export %s --format safetensors --out %s", run, out) == 0);
    trn_st_file f;
    CHECK(trn_st_read(&f, out, 1 << 26) == 0);
    const trn_st_tensor *w0 = trn_st_find(&f, "w0");
    CHECK(f.ntensors == 6 && w0 && w0->shape[0] == 128 && w0->shape[1] == 128);
    CHECK(trn_st_meta_get(&f, "ovt.model") && strcmp(trn_st_meta_get(&f, "ovt.model"), "mlp") == 0);
    trn_st_free(&f);
}

int main(void)
{
    if (cli_setup("export"))
        return 1;
    CHECK_RUN(test_reader());
    CHECK_RUN(test_writer());
    CHECK_RUN(test_hf_names());
    CHECK_RUN(test_layouts());
    if (gpl_tokens(data, sizeof data)) {
        char run[256];
        snprintf(run, sizeof run, "%s/run", dir);
        CHECK(run_ovt(TINY " --steps 20 --checkpoint-every 10 --out %s", data, run) == 0);
        CHECK_RUN(test_llmc_round_trip(run));
        CHECK_RUN(test_init_from_safetensors(run));
        CHECK_RUN(test_eval(run));
        CHECK_RUN(test_mlp());
    }
    cli_cleanup();
    return check_done();
}
