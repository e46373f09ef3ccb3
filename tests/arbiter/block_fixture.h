#ifndef OVT_TESTS_ARBITER_BLOCK_FIXTURE_H
#define OVT_TESTS_ARBITER_BLOCK_FIXTURE_H

/* One real training step traced in check mode with its rounding log, and a
 * hash from the `ovt` commands' JSON output: the fixtures of the block
 * engine's tests (test_arb_block.c) and the chunk engine's
 * (test_arb_chunk.c). */

#include <string.h>

#include "check.h"
#include "kernels/rlog.h"
#include "kernels/trace.h"
#include "trainer/state.h"
#include "trainer/trace.h"
#include "trainer/trn_helpers.h"
#include "support/cli_fixture.h"

typedef struct {
    trn_test_step_data d;
    trn_run_config rc; /* d's, with a gradient clip (AdamW's scale read from clip.factor) */
    krn_trace *t;
    krn_rlog *log;
    int steer; /* the trainer rounds the elements rule 3 leaves free up (> 0) or down (< 0): krn_ctx_steer */
} step_fixture;

/* Step 1 of f's run recorded into log, traced into t. */
static void run_traced(const step_fixture *f, krn_trace *t, krn_rlog *log)
{
    krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .grid_bits = (int)f->rc.grid_bits,
                     .threads = 2};
    krn_ctx *ctx;
    CHECK(krn_ctx_new(&ctx, &kc) == 0);
    krn_ctx_steer(ctx, f->steer);
    trn_state *st;
    trn_workspace *w;
    CHECK(trn_state_new(&st, &f->rc) == 0 && trn_workspace_new(&w, &f->rc) == 0);
    trn_state_init(st);
    trn_step_info info;
    int trace_rc;
    ovt_hash root;
    CHECK_MSG(trn_train_step_traced(ctx, w, st, &f->d.b, log, t, &info, &trace_rc, &root) == 0, "%s",
              ovt_errmsg());
    CHECK_MSG(trace_rc == 0, "%s", ovt_errmsg());
    trn_workspace_free(w);
    trn_state_free(st);
    krn_ctx_free(ctx);
}

/* Step 1 of preset, recorded with a check-mode trace. */
static void step_open_steered(step_fixture *f, const char *preset, uint32_t batch, uint32_t seq, int steer)
{
    memset(f, 0, sizeof *f);
    f->steer = steer;
    CHECK(trn_test_step_data_open(&f->d, preset, 5, batch, seq, 1, (size_t)batch * seq * 4 + 16, 256) == 0);
    f->d.rc.grad_clip = 1.0;
    f->rc = f->d.rc;
    f->log = krn_rlog_new();
    CHECK(krn_trace_new(&f->t, true) == 0);
    run_traced(f, f->t, f->log);
}

/* Step 1 of preset, recorded with a check-mode trace. */
static void step_open(step_fixture *f, const char *preset, uint32_t batch, uint32_t seq)
{
    step_open_steered(f, preset, batch, seq, 0);
}

static void step_close(step_fixture *f)
{
    krn_trace_free(f->t);
    krn_rlog_free(f->log);
    trn_test_step_data_close(&f->d);
}

/* The value of "key": "VALUE" in the last output, into out (67 bytes). */
static bool output_hex(const char *key, char *out)
{
    char path[256], pat[64];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    uint8_t *buf;
    size_t len;
    if (ovt_read_file(path, &buf, &len, 1 << 20))
        return false;
    const char *at = strstr((const char *)buf, pat);
    bool ok = at && strlen(at + strlen(pat)) >= 66;
    if (ok)
        snprintf(out, 67, "%s", at + strlen(pat));
    free(buf);
    return ok;
}

#endif
