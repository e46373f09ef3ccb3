/* The exactness demo as a test (a shorter run than `ovt demo`): replaying
 * the trainer's rounding logs on the ref and shuffle backends reproduces the
 * trainer's stateHash at every step; without the logs the runs diverge;
 * plain FP32 training in two summation orders diverges at once; and,
 * independently of the hashes, the model learns (the loss falls) and the
 * head shift that makes the ablation diverge leaves the loss unchanged. */
#include <math.h>

#include "check.h"
#include "examples/demo/demo.h"

static void test_demo(void)
{
    demo_opts o;
    demo_defaults(&o);
    o.steps = 60;
    o.n_samples = 2048;
    o.every = 0;
    o.config.head_shift = 13;
    o.config.decay_steps = 60;
    demo_result r;
    int rv = demo_run(&o, &r);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK_EQ_U64(r.steps, 60);
    CHECK(demo_replay_exact(&o, &r));
    CHECK_EQ_U64(r.first_mismatch[DEMO_REPLAY_REF], 0);
    CHECK_EQ_U64(r.first_mismatch[DEMO_REPLAY_SHUFFLE], 0);
    CHECK_EQ_U64(r.steps_run[DEMO_REPLAY_REF], 60);
    CHECK_EQ_U64(r.steps_run[DEMO_REPLAY_SHUFFLE], 60);
    /* Each replay's step Merkle root, built from its own stateHashes, is the
     * trainer's; a run that stopped early has none. */
    CHECK(r.has_root[DEMO_RECORD_CPU] && r.has_root[DEMO_REPLAY_REF] && r.has_root[DEMO_REPLAY_SHUFFLE]);
    CHECK_MEM(r.root[DEMO_REPLAY_REF].b, r.root[DEMO_RECORD_CPU].b, 32);
    CHECK_MEM(r.root[DEMO_REPLAY_SHUFFLE].b, r.root[DEMO_RECORD_CPU].b, 32);
    for (int k = DEMO_NEAREST_REF; k <= DEMO_NEAREST_SHUFFLE; k++) {
        CHECK(r.has_root[k] == (r.steps_run[k] == r.steps));
        if (r.has_root[k]) /* equal roots exactly when no step differed */
            CHECK((memcmp(r.root[k].b, r.root[0].b, 32) == 0) == (r.first_mismatch[k] == 0));
    }
    /* The ablation: at least one of the runs without the log parts from the
     * trainer within the run (each stops at its first mismatch). */
    bool diverged = r.first_mismatch[DEMO_NEAREST_REF] || r.first_mismatch[DEMO_NEAREST_SHUFFLE];
    CHECK_MSG(diverged, "no-log runs matched the trainer for all %llu steps", (unsigned long long)r.steps);
    /* The contrast: plain FP32 training, the same run summed in two orders,
     * parts at the first step, in most of the state. */
    CHECK_EQ_U64(r.fp32_first_mismatch, 1);
    CHECK(r.fp32_params_differing > 0.1);
    /* The log was used: entries were recorded and replays saw logged values
     * within the band. */
    CHECK(r.entries_total > 0);
    CHECK(r.replay_max_dist_over_tau > 0 && r.replay_max_dist_over_tau <= 2.0);
    /* Learning, judged by the loss, not by hashes. */
    CHECK_MSG(r.loss_end < r.loss_start - 0.2f, "loss %g -> %g", (double)r.loss_start, (double)r.loss_end);
    CHECK_MSG(r.eval_end < r.eval_start, "held-out loss %g -> %g", (double)r.eval_start, (double)r.eval_end);
    float shifted_eval = r.eval_start;

    /* Without the head shift the model computes the same function at step 0:
     * the held-out loss agrees to rounding. A short run, no ablation. */
    o.config.head_shift = 0;
    o.steps = 2;
    o.ablation = false;
    o.shuffle = false;
    rv = demo_run(&o, &r);
    CHECK_MSG(rv == 0, "%s", ovt_errmsg());
    CHECK_MSG(fabsf(r.eval_start - shifted_eval) < 1e-3f, "held-out loss %g with the shift, %g without",
              (double)shifted_eval, (double)r.eval_start);
    CHECK(demo_replay_exact(&o, &r));
}

static void test_bad_options(void)
{
    demo_opts o;
    demo_defaults(&o);
    demo_result r;
    o.steps = 0;
    CHECK(demo_run(&o, &r) == OVT_EINVAL);
    demo_defaults(&o);
    o.config.grid_bits = 33;
    CHECK(demo_run(&o, &r) == OVT_EINVAL);
    demo_defaults(&o);
    o.config.head_shift = 21;
    CHECK(demo_run(&o, &r) == OVT_EINVAL);
}

int main(void)
{
    CHECK_RUN(test_bad_options());
    CHECK_RUN(test_demo());
    return check_done();
}
