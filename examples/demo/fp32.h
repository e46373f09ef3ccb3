#ifndef OVT_DEMO_FP32_H
#define OVT_DEMO_FP32_H

/* Plain FP32 training of the MLP, for contrast in the demo: float
 * arithmetic throughout (float sums, tanhf, expf, logf, powf, sqrtf), no
 * FP64, no rounding sites, no log: what ordinary training does. The only
 * freedom taken is the order of every sum (increasing or decreasing index),
 * as two machines or two BLAS builds would differ. Same model, loss, AdamW
 * and schedule as trainer/train.c. */

#include <stdbool.h>

#include "trainer/state.h"
#include "trainer/train.h"

typedef struct demo_fp32 demo_fp32;

int demo_fp32_new(demo_fp32 **out, const trn_run_config *rc) OVT_MUST_USE;
void demo_fp32_free(demo_fp32 *w);

/* One step of st (an MLP state) on batch; reversed selects the order of
 * every sum. Fails with OVT_ENUMERIC on a non-finite loss. */
int demo_fp32_step(demo_fp32 *w, trn_state *st, const trn_batch *batch, bool reversed, float *loss) OVT_MUST_USE;

#endif
