#ifndef OVT_DATA_AUGMENT_H
#define OVT_DATA_AUGMENT_H

/* Data augmentation of a step's image batch (docs/trainer.md, "Data
 * augmentation"): a random crop with zero padding and a random horizontal
 * flip, drawn from the counter-based generator, so every party that
 * rebuilds the batch of step i (trainer, `ovt step`, auditor, arbiter)
 * draws the same crops and flips.
 *
 * Sample j of step i, with padding P and flip on or off, draws
 *   dx   = krn_rng_below(seed, i, KRN_RNG_AUGMENT, 3j,     2P + 1) - P
 *   dy   = krn_rng_below(seed, i, KRN_RNG_AUGMENT, 3j + 1, 2P + 1) - P
 *   flip = krn_rng_below(seed, i, KRN_RNG_AUGMENT, 3j + 2, 2)
 * (dx = dy = 0 when P = 0, flip = 0 when flip is off; those draws are not
 * made), and its image becomes, for every channel c, row y and column x,
 *   out(c, y, x) = in(c, y + dy, x' + dx),  x' = flip ? W-1-x : x,
 * or 0 where (y + dy, x' + dx) lies outside the H x W image: torchvision's
 * RandomCrop(padding=P) at offset (P + dy, P + dx) of the zero-padded
 * image, then RandomHorizontalFlip. Values are only moved, never
 * computed, so the transform is exact on every grid. */

#include <stdint.h>

#include "common/err.h"
#include "data/dataset.h"

/* One sample's draw. */
typedef struct {
    int32_t dx, dy; /* in [-P, P] */
    uint32_t flip;  /* 0 or 1 */
} data_augment_draw;

/* The draw of sample j of step `step` (the formulas above). */
data_augment_draw data_augment_draw_of(uint64_t seed, uint64_t step, uint32_t j, uint32_t crop, uint32_t flip);

/* out (C, H, W) = the transform of in (C, H, W) by d (the formula above);
 * out and in do not overlap. */
void data_augment_image(float *out, const float *in, uint32_t C, uint32_t H, uint32_t W, data_augment_draw d);

/* Transforms every sample of b in place, sample j by its draw for step
 * `step`; b->dim must be C x H x W. Nothing happens when crop and flip are
 * both 0. OVT_EINVAL for a dim that is not C x H x W, OVT_ENOMEM. */
int data_sample_batch_augment(data_sample_batch *b, uint64_t seed, uint64_t step, uint32_t C, uint32_t H,
                              uint32_t W, uint32_t crop, uint32_t flip) OVT_MUST_USE;

#endif
