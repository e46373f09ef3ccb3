/* Tests of the step runner (trainer/runner.h): a RECORD runner's steps
 * give the same batchHash and stateHash as trn_train_step on a ctx and
 * workspace of one's own; a REPLAY runner on another backend, fed the
 * trainer's log bytes, reaches the same stateHashes, also prepared in
 * advance and lent a state it hands back; a log of another step is fraud;
 * a state of another config is refused; an evaluation runner takes no
 * steps and evaluates the last, shorter batch in a workspace of its own. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trainer/state_hash.h"
#include "trn_helpers.h"
#include "kernels/rlog.h"
#include "kernels/site.h"
#include "data/dataset.h"
#include "trainer/rundata.h"
#include "trainer/runner.h"
#include "trainer/state.h"
#include "trainer/train.h"

#define STEPS 4

static trn_run_config small_config(trn_run_data *d)
{
    trn_model_config m = {.kind = TRN_MODEL_MLP, .n_layer = 2, .width = 16, .in_dim = 12, .n_class = 4};
    trn_run_config rc;
    trn_config_default(&rc, &m);
    rc.batch_size = 8;
    rc.seed = 5;
    rc.grid_bits = 32;
    rc.head_shift = 4;
    memset(d, 0, sizeof *d);
    if (data_samples_synthetic(&d->samples, rc.seed, 128, m.in_dim, m.n_class, 32) != 0)
        abort();
    rc.dataset_hash = d->samples.hash;
    return rc;
}

static void test_record_replay(void)
{
    trn_run_data d;
    trn_run_config rc = small_config(&d);
    /* the yardstick: trn_train_step on a ctx, workspace and state of its own */
    trn_state *st;
    trn_workspace *w;
    krn_ctx *ctx = trn_test_ctx(KRN_BACKEND_CPU, KRN_RECORD, 2);
    krn_rlog *log = krn_rlog_new();
    CHECK(ctx && log && trn_state_new(&st, &rc) == 0 && trn_workspace_new(&w, &rc) == 0);
    trn_state_init(st);
    ovt_hash want[STEPS + 1], batch[STEPS + 1];
    for (int i = 1; i <= STEPS; i++) {
        trn_step_batch b;
        trn_step_info info;
        CHECK(trn_step_batch_get(&b, &d, &rc, (uint64_t)i) == 0);
        CHECK_MSG(trn_train_step(ctx, w, st, &b.view, log, &info) == 0, "%s", ovt_errmsg());
        trn_state_hash(&want[i], st);
        batch[i] = b.hash;
        trn_step_batch_free(&b);
    }

    trn_runner *rec = NULL, *rep = NULL, *prep = NULL, *other = NULL;
    trn_runner_opts ro = {.backend = KRN_BACKEND_CPU, .mode = KRN_RECORD, .threads = 2};
    trn_runner_opts po = {.backend = KRN_BACKEND_REF, .mode = KRN_REPLAY, .threads = 1};
    trn_runner_opts pp = {.backend = KRN_BACKEND_CPU, .mode = KRN_REPLAY, .threads = 1, .prefault = true};
    CHECK(trn_runner_open(&rec, &rc, &d, &ro) == 0 && trn_runner_start(rec, NULL, 0) == 0);
    CHECK(trn_runner_open(&rep, &rc, &d, &po) == 0 && trn_runner_start(rep, NULL, 0) == 0);
    CHECK(trn_runner_open(&prep, &rc, NULL, &pp) == 0);
    for (int i = 1; rec && rep && prep && i <= STEPS; i++) {
        trn_runner_result r, p, q;
        CHECK_MSG(trn_runner_step(rec, &r) == 0, "%s", ovt_errmsg());
        CHECK(memcmp(r.state_hash.b, want[i].b, 32) == 0 && memcmp(r.batch_hash.b, batch[i].b, 32) == 0);
        uint8_t *bytes;
        size_t len;
        CHECK(krn_rlog_encode(trn_runner_log(rec), &bytes, &len) == 0);
        /* the state before step i, lent to the prepared runner */
        trn_state *before = NULL;
        CHECK(trn_state_clone(&before, trn_runner_state(rep)) == 0);
        CHECK(krn_rlog_decode(trn_runner_log(rep), bytes, len) == 0);
        CHECK_MSG(trn_runner_step(rep, &p) == 0, "%s", ovt_errmsg());
        CHECK(memcmp(p.state_hash.b, want[i].b, 32) == 0);
        trn_runner_set_data(prep, &d);
        CHECK(trn_runner_adopt(prep, &before) == 0 && before == NULL);
        CHECK(krn_rlog_decode(trn_runner_log(prep), bytes, len) == 0);
        CHECK_MSG(trn_runner_step(prep, &q) == 0, "%s", ovt_errmsg());
        CHECK(memcmp(q.state_hash.b, want[i].b, 32) == 0);
        trn_state_free(trn_runner_release(prep));
        CHECK(trn_runner_state(prep) == NULL);
        free(bytes);
    }
    /* the log of step STEPS replayed as step STEPS + 1 */
    trn_runner_result r;
    CHECK(trn_runner_step(rep, &r) == OVT_EFRAUD);
    CHECK_MSG(strstr(ovt_errmsg(), "not step"), "%s", ovt_errmsg());
    /* a state of another config */
    trn_run_config rc2 = rc;
    rc2.seed++;
    CHECK(trn_runner_open(&other, &rc2, &d, &ro) == 0 && trn_runner_start(other, NULL, 0) == 0);
    trn_state *foreign = other ? trn_runner_release(other) : NULL;
    CHECK(foreign && trn_runner_adopt(prep, &foreign) == OVT_EINVAL && foreign != NULL);
    trn_state_free(foreign);
    trn_runner_free(other);
    trn_runner_free(prep);
    trn_runner_free(rep);
    trn_runner_free(rec);
    trn_workspace_free(w);
    trn_state_free(st);
    krn_rlog_free(log);
    krn_ctx_free(ctx);
    trn_run_data_free(&d);
}

static void test_eval(void)
{
    trn_run_data d;
    trn_run_config rc = small_config(&d);
    trn_runner *ev = NULL;
    trn_runner_opts eo = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .threads = 1, .eval_batch = 8};
    CHECK(trn_runner_open(&ev, &rc, &d, &eo) == 0 && trn_runner_start(ev, NULL, 0) == 0);
    trn_runner_result r;
    CHECK(ev && trn_runner_step(ev, &r) == OVT_EINVAL);
    int32_t labels[8];
    for (int j = 0; j < 8; j++)
        labels[j] = (int32_t)d.samples.y[j];
    float full = 0, part = 0, again = 0;
    trn_batch b8 = {.B = 8, .x = d.samples.x, .labels = labels};
    trn_batch b3 = {.B = 3, .x = d.samples.x, .labels = labels};
    CHECK(trn_runner_eval(ev, NULL, &b8, 1, &full) == 0 && trn_runner_logits(ev) != NULL);
    CHECK(trn_runner_eval(ev, NULL, &b3, 2, &part) == 0 && trn_runner_logits(ev) != NULL);
    CHECK(trn_runner_eval(ev, NULL, &b8, 3, &again) == 0 && again == full && part > 0);
    trn_batch b9 = {.B = 9, .x = d.samples.x, .labels = labels};
    CHECK(trn_runner_eval(ev, NULL, &b9, 4, &part) == OVT_EINVAL);
    trn_runner_free(ev);
    trn_run_data_free(&d);
}

int main(void)
{
    CHECK_RUN(test_record_replay());
    CHECK_RUN(test_eval());
    return check_done();
}
