#ifndef OVT_TRAINER_WORKSPACE_H
#define OVT_TRAINER_WORKSPACE_H

/* Internal to trainer/: the layout of a trn_workspace (trainer/train.h). */

#include "trainer/train.h"

struct trn_workspace {
    trn_run_config config;
    trn_layout layout;
    float *grads; /* nparams, the parameter layout */

    /* MLP, linear layer l = 0..n_linear-1 with o_l outputs:
     * pre[l] (B, o_l) = in_l @ w[l]^T + b[l]; act[l] = gelu(pre[l]) for the
     * hidden layers; in_0 = x, in_l = act[l-1]; pre[n_linear-1] = logits.
     * dpre, dact: the gradients of the same shapes. */
    float *mem; /* one allocation for everything below */
    float *pre[TRN_MAX_LAYERS + 1];
    float *dpre[TRN_MAX_LAYERS + 1];
    float *act[TRN_MAX_LAYERS];
    float *dact[TRN_MAX_LAYERS];
    float *probs;  /* (B, n_class) */
    float *losses; /* (B) */
    size_t mem_floats;
};

#endif
