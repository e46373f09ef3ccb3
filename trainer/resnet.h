#ifndef OVT_TRAINER_RESNET_H
#define OVT_TRAINER_RESNET_H

/* Internal to trainer/: a ResNet's plan for batches of B (trainer/resnet.c,
 * issue 29 in progress): its conv + batch norm units and residual blocks in
 * layout order, with their activations and activation gradients in one
 * allocation. */

#include <stddef.h>

#include "common/err.h"
#include "trainer/layout.h"

typedef struct trn_resnet_plan trn_resnet_plan;

int trn_resnet_plan_new(trn_resnet_plan **out, const trn_layout *l, size_t B) OVT_MUST_USE;
void trn_resnet_plan_free(trn_resnet_plan *p);
size_t trn_resnet_plan_floats(const trn_resnet_plan *p);

#endif
