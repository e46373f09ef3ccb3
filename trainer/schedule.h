#ifndef OVT_TRAINER_SCHEDULE_H
#define OVT_TRAINER_SCHEDULE_H

/* The learning-rate schedule (docs/trainer.md, "Schedule"): linear warmup,
 * then a linear or cosine fall from lr to lr_min between warmup_steps and
 * decay_steps. Shared by the controlled-rounding step (trainer/train.c, the
 * "schedule.lr" site) and plain FP32 training (examples/demo/fp32.c). */

#include <stdint.h>

#include "trainer/config.h"

/* cos(pi * p) for p in [0, 1] (p is clamped to it), computed from + - * /
 * only, in a fixed order: the same double on every machine, unlike libm's
 * cos. Within 2 ulps of the true value (tests/trainer/test_trn_schedule);
 * exactly 1, 0 and -1 at p = 0, 1/2 and 1. */
double trn_cospi(double p);

/* The learning rate of step i (1-based) in FP64, from basic operations in
 * a fixed order, so the "schedule.lr" site needs no band:
 *   i <= warmup_steps (warmup > 0):  lr * i / warmup_steps
 *   decay_steps > warmup_steps, i >= decay_steps:  lr_min
 *   decay_steps > warmup_steps, else, with p = (i - warmup) / (decay - warmup):
 *     linear:  lr - (lr - lr_min) * p
 *     cosine:  lr_min + (lr - lr_min) * (0.5 * (1 + trn_cospi(p)))
 *   otherwise lr. */
double trn_schedule_lr(const trn_run_config *rc, uint64_t i);

#endif
