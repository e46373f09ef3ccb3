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
 *   - a run in two shards is not resident, and still the same. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trn_helpers.h"
#include "data/dataset.h"
#include "kernels/mem.h"
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
    trn_model_config m;
    CHECK(trn_model_preset(&m, preset) == 0);
    trn_config_default(&f->rc, &m);
    f->rc.seed = 11;
    f->rc.warmup_steps = 0;
    f->rc.batch_size = 4;
    f->rc.shards = shards;
    if (trn_model_is_lm(&m)) {
        enum { N = 400 };
        uint32_t toks[N];
        for (int i = 0; i < N; i++)
            toks[i] = (uint32_t)((i * 41 + i / 3) % m.vocab);
        uint8_t *buf;
        size_t len;
        CHECK(data_tokens_encode(toks, N, m.vocab, &buf, &len) == 0 && data_tokens_parse(&f->d.tokens, buf, len) == 0);
        free(buf);
        f->rc.seq_len = 8;
        f->rc.dataset_hash = f->d.tokens.hash;
    } else {
        CHECK(data_samples_synthetic(&f->d.samples, 11, 64, m.in_dim, m.n_class, 32) == 0);
        f->rc.dataset_hash = f->d.samples.hash;
    }
}

static trn_runner *runner(const fixture *f, bool guard, bool hash_later)
{
    trn_runner_opts o = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .threads = 2, .mem_guard = guard,
                         .hash_later = hash_later};
    trn_runner *r = NULL;
    CHECK_MSG(trn_runner_open(&r, &f->rc, &f->d, &o) == 0, "%s", ovt_errmsg());
    CHECK(r && trn_runner_start(r, NULL, 0) == 0);
    return r;
}

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
    trn_runner_free(plain);
    trn_runner_free(guarded);
    trn_runner_free(later);
    trn_run_data_free(&f.d);
}

/* Two shards are summed on the host: such a runner keeps host tensors. */
static void shards_stay_on_the_host(void)
{
    fixture f;
    fixture_open(&f, "mlp-demo", 2);
    trn_runner *plain = runner(&f, false, false), *guarded = runner(&f, true, false);
    CHECK(!trn_runner_resident(guarded));
    for (int i = 1; i <= 2; i++) {
        trn_runner_result a, b;
        CHECK(trn_runner_step(plain, &a) == 0 && trn_runner_step(guarded, &b) == 0);
        CHECK_MEM(a.state_hash.b, b.state_hash.b, 32);
    }
    CHECK(trn_runner_mem_stats(guarded).allocated_bytes == 0);
    trn_runner_free(plain);
    trn_runner_free(guarded);
    trn_run_data_free(&f.d);
}

int main(void)
{
    CHECK_RUN(family("mlp-demo"));
    CHECK_RUN(family("gpt2-tiny"));
    CHECK_RUN(family("llama-tiny"));
    CHECK_RUN(family("resnet-mini"));
    CHECK_RUN(shards_stay_on_the_host());
    return check_done();
}
