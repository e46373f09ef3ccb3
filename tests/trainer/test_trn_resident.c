/* A resident runner (trainer/runner.h, "Where the tensors are") on the
 * guard (krn_config.mem_guard): the state and workspace in memory that is
 * PROT_NONE between the runner's steps, so that any host access to them
 * outside kernels/mem.h (a stray read of the parameters in the step loop,
 * a hash that reads the state on the host) faults. For gpt2-tiny,
 * llama-tiny, resnet-mini and an MLP:
 *   - every step's stateHash and rounding log are those of a plain cpu
 *     runner, with the hash computed per step and in the background
 *     (hash_later);
 *   - nothing crosses between host and backend memory during the steps
 *     but what a step must (a ResNet's running statistics), never the
 *     state;
 *   - the host's copy, brought up to date on request, is the plain run's
 *     state, and a state given on the host goes down before the next step;
 *   - a traced step (run on the host's copy) has the plain run's trace
 *     root and stateHash, and the resident steps after it go on from it;
 *   - a run in two shards is resident too: the same stateHashes, each
 *     shard's gradient up once a step and their mean down;
 *   - the training loop (ovt train's) on the guard writes the plain run's
 *     step table, checkpoints and root, also resumed.
 *
 * Built as test_cuda_resident (OVT_TEST_CUDA), the same families on the
 * device, where nothing has run this path yet: a cuda runner with the run
 * in device memory against one with OVT_CUDA_HOST_TENSORS=1 (the path
 * verified on 2026-12-04), stateHash for stateHash and log for log, and
 * the cpu backend replaying the resident run's logs to the same
 * stateHashes; no state crossing per step (gpt2-tiny also in two shards,
 * whose gradients come up and their mean goes down). Skipped (exit 77) where ovt has
 * no CUDA or the machine no device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trn_helpers.h"
#include "data/dataset.h"
#include "kernels/mem.h"
#include "kernels/trace.h"
#include "common/fileio.h"
#include "trainer/loop.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/state_hash.h"

#define STEPS 3

typedef struct {
    trn_run_config rc;
    trn_run_data d;
} fixture;

static void fixture_open(fixture *f, const char *preset, uint32_t shards)
{
    memset(f, 0, sizeof *f);
    CHECK(trn_test_preset_run(&f->rc, &f->d.tokens, &f->d.samples, preset, 11, 4, shards, 41, 3) == 0);
}

#ifndef OVT_TEST_CUDA
static trn_runner *runner(const fixture *f, bool guard, bool hash_later)
{
    trn_runner_opts o = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .threads = 2, .mem_guard = guard,
                         .hash_later = hash_later};
    trn_runner *r = NULL;
    CHECK_MSG(trn_runner_open(&r, &f->rc, &f->d, &o) == 0, "%s", ovt_errmsg());
    CHECK(r && trn_runner_start(r, NULL, 0) == 0);
    return r;
}
#endif

/* The rounding log's bytes of r's last step. */
static uint8_t *log_bytes(trn_runner *r, size_t *len)
{
    uint8_t *b = NULL;
    CHECK(krn_rlog_encode(trn_runner_log(r), &b, len) == 0);
    return b;
}

static void same_log(trn_runner *a, trn_runner *b)
{
    size_t la = 0, lb = 0;
    uint8_t *x = log_bytes(a, &la), *y = log_bytes(b, &lb);
    CHECK(x && y && la == lb && memcmp(x, y, la) == 0);
    free(x);
    free(y);
}

#ifndef OVT_TEST_CUDA
static void family(const char *preset)
{
    fixture f;
    fixture_open(&f, preset, 1);
    bool resnet = f.rc.model.kind == TRN_MODEL_RESNET;
    trn_runner *plain = runner(&f, false, false), *guarded = runner(&f, true, false), *later = runner(&f, true, true);
    CHECK(!trn_runner_resident(plain) && trn_runner_resident(guarded) && trn_runner_resident(later));
    size_t state_bytes = 3 * trn_runner_state(plain)->layout.nparams * sizeof(float);
    for (int i = 1; i <= STEPS; i++) {
        trn_runner_result a, b, c;
        krn_mem_stats before = trn_runner_mem_stats(guarded);
        CHECK_MSG(trn_runner_step(plain, &a) == 0, "%s", ovt_errmsg());
        CHECK_MSG(trn_runner_step(guarded, &b) == 0, "%s: %s", preset, ovt_errmsg());
        CHECK_MSG(trn_runner_step(later, &c) == 0, "%s", ovt_errmsg());
        krn_mem_stats after = trn_runner_mem_stats(guarded);
        CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
        ovt_hash h;
        uint64_t at = 0;
        CHECK(trn_runner_hash_begin(later) == 0 && trn_runner_hash_end(later, &h, &at) && at == (uint64_t)i);
        CHECK_MEM(a.state_hash.b, h.b, 32);
        same_log(plain, guarded);
        CHECK(trn_runner_step_no(guarded) == (uint64_t)i);
        /* step 1 uploads the state once; after it only a ResNet's running
         * statistics move (down, and their new values up) */
        uint64_t down = after.download_bytes - before.download_bytes, up = after.upload_bytes - before.upload_bytes;
        if (i == 1)
            up -= state_bytes;
        CHECK_MSG(resnet ? down > 0 && down < state_bytes / 3 && up < state_bytes / 3 : down == 0 && up == 0,
                  "%s step %d: %llu bytes down, %llu up", preset, i, (unsigned long long)down, (unsigned long long)up);
    }
    /* the host's copy on request */
    ovt_hash hp, hg;
    CHECK(trn_runner_sync(guarded) == 0);
    trn_state_hash(&hp, trn_runner_state(plain));
    trn_state_hash(&hg, trn_runner_state(guarded));
    CHECK_MEM(hp.b, hg.b, 32);
    CHECK(trn_runner_state(guarded)->step == STEPS);
    CHECK(memcmp(trn_runner_state(plain)->mem, trn_runner_state(guarded)->mem, 3 * trn_runner_state(plain)->layout.nparams * sizeof(float)) == 0);
    /* a state given on the host goes down before the next step: the plain
     * runner's state after one more step */
    trn_runner_result a, b;
    CHECK(trn_runner_step(plain, &a) == 0);
    CHECK(trn_runner_copy_state(guarded, trn_runner_state(plain)) == 0 && trn_runner_step_no(guarded) == STEPS + 1);
    CHECK(trn_runner_step(plain, &a) == 0 && trn_runner_step(guarded, &b) == 0);
    CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
    /* a traced step, then a resident one */
    krn_trace *ta = NULL, *tb = NULL;
    CHECK(krn_trace_new(&ta, false) == 0 && krn_trace_new(&tb, false) == 0);
    CHECK(trn_runner_trace_next(plain, ta) == 0 && trn_runner_trace_next(guarded, tb) == 0);
    CHECK(trn_runner_step(plain, &a) == 0);
    CHECK_MSG(trn_runner_step(guarded, &b) == 0, "%s", ovt_errmsg());
    CHECK(a.trace_rc == 0 && b.trace_rc == 0);
    CHECK_MEM(a.trace_root.b, b.trace_root.b, 32);
    CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
    krn_trace_free(ta);
    krn_trace_free(tb);
    CHECK(trn_runner_step(plain, &a) == 0 && trn_runner_step(guarded, &b) == 0);
    CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
    CHECK(trn_runner_step_no(guarded) == STEPS + 4);
    trn_runner_free(plain);
    trn_runner_free(guarded);
    trn_runner_free(later);
    trn_run_data_free(&f.d);
}

/* Shards are hashed and summed on the host: their gradients come up, the
 * mean goes down, and nothing else. */
static void shards(const char *preset)
{
    fixture f;
    fixture_open(&f, preset, 2);
    trn_runner *plain = runner(&f, false, false), *guarded = runner(&f, true, false);
    CHECK(trn_runner_resident(guarded));
    size_t grad_bytes = trn_runner_state(plain)->layout.nparams * sizeof(float);
    for (int i = 1; i <= 3; i++) {
        trn_runner_result a, b;
        krn_mem_stats before = trn_runner_mem_stats(guarded);
        CHECK(trn_runner_step(plain, &a) == 0);
        CHECK_MSG(trn_runner_step(guarded, &b) == 0, "%s", ovt_errmsg());
        krn_mem_stats after = trn_runner_mem_stats(guarded);
        CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
        CHECK(a.info.shards == 2 && b.info.shards == 2 && a.info.shard_hashes && b.info.shard_hashes);
        CHECK(memcmp(a.info.shard_hashes, b.info.shard_hashes, 2 * sizeof(ovt_hash)) == 0);
        same_log(plain, guarded);
        uint64_t down = after.download_bytes - before.download_bytes, up = after.upload_bytes - before.upload_bytes;
        if (i == 1)
            up -= 3 * grad_bytes; /* the state, once */
        CHECK_MSG(down == 2 * grad_bytes && up == grad_bytes, "%s step %d: %llu bytes down, %llu up", preset, i,
                  (unsigned long long)down, (unsigned long long)up);
    }
    trn_runner_free(plain);
    trn_runner_free(guarded);
    trn_run_data_free(&f.d);
}

#endif

#ifdef OVT_TEST_CUDA
/* A runner of mode on cuda (REPLAY: on cpu), its tensors in host memory
 * when host_tensors is "1"; the resident one hashes on request
 * (hash_later), so that a step's own transfers can be counted. */
static trn_runner *cuda_runner(const fixture *f, krn_mode mode, const char *host_tensors)
{
    if (host_tensors)
        setenv("OVT_CUDA_HOST_TENSORS", host_tensors, 1);
    else
        unsetenv("OVT_CUDA_HOST_TENSORS");
    trn_runner_opts o = {.backend = mode == KRN_REPLAY ? KRN_BACKEND_CPU : KRN_BACKEND_CUDA, .mode = mode,
                         .threads = 2, .hash_later = mode == KRN_RECORD && !host_tensors};
    trn_runner *r = NULL;
    CHECK_MSG(trn_runner_open(&r, &f->rc, &f->d, &o) == 0, "%s", ovt_errmsg());
    unsetenv("OVT_CUDA_HOST_TENSORS");
    CHECK(r && trn_runner_start(r, NULL, 0) == 0);
    return r;
}

static void cuda_family(const char *preset, uint32_t shards)
{
    fixture f;
    fixture_open(&f, preset, shards);
    bool resnet = f.rc.model.kind == TRN_MODEL_RESNET;
    trn_runner *dev = cuda_runner(&f, KRN_RECORD, NULL), *host = cuda_runner(&f, KRN_RECORD, "1");
    trn_runner *cpu = cuda_runner(&f, KRN_REPLAY, NULL);
    CHECK(trn_runner_resident(dev) && !trn_runner_resident(host) && !trn_runner_resident(cpu));
    /* a sharded step's gradients come up and their mean goes down */
    uint64_t grad_bytes = shards > 1 ? trn_runner_state(cpu)->layout.nparams * sizeof(float) : 0;
    for (int i = 1; dev && host && cpu && i <= 5; i++) {
        trn_runner_result a, b, c;
        krn_mem_stats before = trn_runner_mem_stats(dev);
        CHECK_MSG(trn_runner_step(dev, &a) == 0, "%s step %d, device memory: %s", preset, i, ovt_errmsg());
        krn_mem_stats after = trn_runner_mem_stats(dev);
        uint64_t at = 0;
        CHECK(trn_runner_hash_begin(dev) == 0 && trn_runner_hash_end(dev, &a.state_hash, &at) && at == (uint64_t)i);
        CHECK_MSG(trn_runner_step(host, &b) == 0, "%s step %d, host memory: %s", preset, i, ovt_errmsg());
        CHECK_MSG(memcmp(a.state_hash.b, b.state_hash.b, 32) == 0, "%s step %d: device and host memory differ",
                  preset, i);
        same_log(dev, host);
        size_t len = 0;
        uint8_t *bytes = log_bytes(dev, &len);
        CHECK(bytes && krn_rlog_decode(trn_runner_log(cpu), bytes, len) == 0);
        free(bytes);
        CHECK_MSG(trn_runner_step(cpu, &c) == 0, "%s step %d, cpu replay: %s", preset, i, ovt_errmsg());
        CHECK_MSG(memcmp(a.state_hash.b, c.state_hash.b, 32) == 0, "%s step %d: the cpu replay differs", preset, i);
        if (i > 1)
            CHECK_MSG(resnet || (after.download_bytes - before.download_bytes == shards * grad_bytes &&
                                 after.upload_bytes - before.upload_bytes == grad_bytes),
                      "%s step %d: %llu bytes down", preset, i,
                      (unsigned long long)(after.download_bytes - before.download_bytes));
    }
    CHECK(trn_runner_sync(dev) == 0);
    CHECK(trn_runner_state(dev)->step == 5 &&
          memcmp(trn_runner_state(dev)->mem, trn_runner_state(cpu)->mem,
                 3 * trn_runner_state(cpu)->layout.nparams * sizeof(float)) == 0);
    trn_runner_free(dev);
    trn_runner_free(host);
    trn_runner_free(cpu);
    trn_run_data_free(&f.d);
}

static void cuda_env_checked(void)
{
    fixture f;
    fixture_open(&f, "mlp-demo", 1);
    setenv("OVT_CUDA_HOST_TENSORS", "yes", 1);
    trn_runner_opts o = {.backend = KRN_BACKEND_CUDA, .mode = KRN_RECORD, .threads = 1};
    trn_runner *r = NULL;
    CHECK(trn_runner_open(&r, &f.rc, &f.d, &o) == OVT_EINVAL && r == NULL);
    CHECK(strstr(ovt_errmsg(), "OVT_CUDA_HOST_TENSORS expects 0") != NULL);
    unsetenv("OVT_CUDA_HOST_TENSORS");
    trn_run_data_free(&f.d);
}

int main(void)
{
    krn_config kc = {.backend = KRN_BACKEND_CUDA, .mode = KRN_RECORD, .grid_bits = 32};
    krn_ctx *probe = NULL;
    if (krn_ctx_new(&probe, &kc) != 0) {
        printf("skipped: %s\n", ovt_errmsg());
        return 77;
    }
    krn_ctx_free(probe);
    CHECK_RUN(cuda_env_checked());
    CHECK_RUN(cuda_family("mlp-demo", 1));
    CHECK_RUN(cuda_family("gpt2-tiny", 1));
    CHECK_RUN(cuda_family("llama-tiny", 1));
    CHECK_RUN(cuda_family("resnet-mini", 1));
    CHECK_RUN(cuda_family("gpt2-tiny", 2));
    return check_done();
}
#else
/* The bytes of file `name` of run directory out (kind, step, ext as
 * trn_run_path). */
static uint8_t *run_file(const char *out, const char *kind, uint64_t step, const char *ext, size_t *len)
{
    char path[4096];
    uint8_t *b = NULL;
    *len = 0;
    CHECK(trn_run_path(path, sizeof path, out, kind, step, ext) == 0);
    CHECK_MSG(ovt_read_file(path, &b, len, (size_t)1 << 30) == 0, "%s", ovt_errmsg());
    return b;
}

static void same_file(const char *a, const char *b, const char *kind, uint64_t step, const char *ext)
{
    size_t la, lb;
    uint8_t *x = run_file(a, kind, step, ext, &la), *y = run_file(b, kind, step, ext, &lb);
    CHECK_MSG(x && y && la == lb && memcmp(x, y, la) == 0, "%s %s differ", kind ? kind : "", ext);
    free(x);
    free(y);
}

static void loop_on_the_guard(void)
{
    char tmp[] = "/tmp/ovt-resident-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    fixture f;
    fixture_open(&f, "gpt2-tiny", 1);
    uint8_t *bytes;
    size_t len;
    char data[256], out[2][256];
    snprintf(data, sizeof data, "%s/tokens.bin", tmp);
    CHECK(data_tokens_encode(f.d.tokens.tokens, f.d.tokens.count, f.rc.model.vocab, &bytes, &len) == 0 &&
          ovt_write_atomic(data, bytes, len, 0644) == 0);
    free(bytes);
    trn_loop_result res[2][2];
    for (int g = 0; g < 2; g++) {
        snprintf(out[g], sizeof out[g], "%s/run%d", tmp, g);
        for (int resume = 0; resume < 2; resume++) {
            trn_loop_opts o;
            memset(&o, 0, sizeof o);
            o.model = "gpt2-tiny";
            o.data = data;
            o.out = out[g];
            o.backend = "cpu";
            o.backend_kind = KRN_BACKEND_CPU;
            o.threads = 2;
            o.steps = resume ? 6 : 4;
            o.resume = resume;
            o.ckpt_every = 2;
            o.config = f.rc;
            o.mem_guard = g == 1;
            CHECK_MSG(trn_loop_run(&o, &res[g][resume]) == 0, "%s", ovt_errmsg());
        }
    }
    for (int resume = 0; resume < 2; resume++) {
        CHECK(res[0][resume].steps == (resume ? 6u : 4u) && res[1][resume].steps == res[0][resume].steps);
        CHECK_MEM(res[0][resume].final_state_hash.b, res[1][resume].final_state_hash.b, 32);
        CHECK_MEM(res[0][resume].root.b, res[1][resume].root.b, 32);
        /* run.json says where the tensors were */
        CHECK(res[0][resume].summary && strstr(res[0][resume].summary, "\"tensors\": \"host\""));
        CHECK(res[1][resume].summary && strstr(res[1][resume].summary, "\"tensors\": \"backend\""));
        trn_loop_result_free(&res[0][resume]);
        trn_loop_result_free(&res[1][resume]);
    }
    same_file(out[0], out[1], NULL, 0, "steps.bin");
    for (uint64_t k = 2; k <= 6; k += 2)
        same_file(out[0], out[1], "ckpt", k, "ckpt");
    trn_run_data_free(&f.d);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    CHECK_RUN(loop_on_the_guard());
    CHECK_RUN(family("mlp-demo"));
    CHECK_RUN(family("gpt2-tiny"));
    CHECK_RUN(family("llama-tiny"));
    CHECK_RUN(family("resnet-mini"));
    CHECK_RUN(shards("mlp-demo"));
    CHECK_RUN(shards("gpt2-tiny"));
    return check_done();
}
#endif
