#ifndef OVT_TRAINER_WORKSPACE_H
#define OVT_TRAINER_WORKSPACE_H

/* Internal to trainer/: the layout of a trn_workspace (trainer/train.h
 * declares the type and its functions). */

#include "common/bytes.h"
#include "kernels/mem.h"
#include "trainer/config.h"
#include "trainer/layout.h"

/* GPT-2 activations (llm.c's ActivationTensors); per-layer ones stacked
 * over L. The gradient workspace has the same layout (its mean, rstd
 * and losses slots are unused; its preatt and att slots are the attention
 * backward's scratch dpreatt and datt), less logits and probs
 * (trn_gpt2_dacts_slice). */
#define TRN_GPT2_NACTS 23
typedef struct {
    float *encoded;   /* (B,T,C) */
    float *ln1;       /* (L,B,T,C) */
    float *ln1_mean;  /* (L,B,T) */
    float *ln1_rstd;  /* (L,B,T) */
    float *qkv;       /* (L,B,T,3C) */
    float *atty;      /* (L,B,T,C) */
    float *preatt;    /* (L,B,NH,T,T) */
    float *att;       /* (L,B,NH,T,T) */
    float *attproj;   /* (L,B,T,C) */
    float *residual2; /* (L,B,T,C) */
    float *ln2;       /* (L,B,T,C) */
    float *ln2_mean;  /* (L,B,T) */
    float *ln2_rstd;  /* (L,B,T) */
    float *fch;       /* (L,B,T,4C) */
    float *fch_gelu;  /* (L,B,T,4C) */
    float *fcproj;    /* (L,B,T,C) */
    float *residual3; /* (L,B,T,C) */
    float *lnf;       /* (B,T,C) */
    float *lnf_mean;  /* (B,T) */
    float *lnf_rstd;  /* (B,T) */
    float *logits;    /* (B,T,V) */
    float *probs;     /* (B,T,V) */
    float *losses;    /* (B,T) */
} trn_gpt2_acts;

/* Llama activations (trainer/llama.c), per-layer ones stacked over L;
 * KV = n_kv_head * hs, H = hidden. q and k before (q, k) and after (qr,
 * kr) the rotation. The gradient set has the same layout less logits and
 * probs, as GPT-2's (its rope and rstd slots unused; preatt and att are the
 * attention backward's scratch). */
#define TRN_LLAMA_NACTS 27
typedef struct {
    float *encoded;   /* (B,T,C) */
    float *rope_cos;  /* (T, hs/2) */
    float *rope_sin;  /* (T, hs/2) */
    float *ln1;       /* (L,B,T,C) */
    float *ln1_rstd;  /* (L,B,T) */
    float *q;         /* (L,B,T,C) */
    float *qr;        /* (L,B,T,C) */
    float *k;         /* (L,B,T,KV) */
    float *kr;        /* (L,B,T,KV) */
    float *v;         /* (L,B,T,KV) */
    float *preatt;    /* (L,B,NH,T,T) */
    float *att;       /* (L,B,NH,T,T) */
    float *atty;      /* (L,B,T,C) */
    float *attproj;   /* (L,B,T,C) */
    float *residual2; /* (L,B,T,C) */
    float *ln2;       /* (L,B,T,C) */
    float *ln2_rstd;  /* (L,B,T) */
    float *h1;        /* (L,B,T,H) gate */
    float *h3;        /* (L,B,T,H) up */
    float *hg;        /* (L,B,T,H) silu(h1) * h3 */
    float *fcproj;    /* (L,B,T,C) */
    float *residual3; /* (L,B,T,C) */
    float *lnf;       /* (B,T,C) */
    float *lnf_rstd;  /* (B,T) */
    float *logits;    /* (B,T,V) */
    float *probs;     /* (B,T,V) */
    float *losses;    /* (B,T) */
} trn_llama_acts;

/* n zeroed floats of tensor memory named `what`: backend memory of
 * mem_ctx (kernels/mem.h: a resident runner's workspace), or the host's
 * when mem_ctx is NULL; and its release. */
int trn_tensor_alloc(krn_ctx *mem_ctx, float **out, size_t n, const char *what) OVT_MUST_USE;
void trn_tensor_free(krn_ctx *mem_ctx, float *p);

struct trn_workspace {
    trn_run_config config;
    trn_layout layout;
    /* Whose backend memory holds grads, mem and the ResNet plan's
     * activations (trn_workspace_new_on, kernels/mem.h); NULL: the host's.
     * Host code then touches them only through kernels/mem.h. */
    krn_ctx *mem_ctx;
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

    /* GPT-2: activations and their gradients, both in `mem`. */
    trn_gpt2_acts acts, dacts;
    /* Llama: the same. */
    trn_llama_acts lacts, ldacts;
    /* ResNet: its plan, activations and their gradients (below). */
    struct trn_resnet_plan *resnet;
    /* Evaluation (trainer/eval.c): batch norm from the running statistics
     * (krn_batchnorm_eval) instead of the batch's; set on an evaluation's
     * own workspace only, whose steps are never trained. */
    int eval_mode;

    /* A sharded step (config shards S > 1): activations are for one shard
     * of B/S; shard_grads[k] is the gradient of the k-th shard this
     * process computes (grown on first use to as many as it computes),
     * shard_hashes[s] the SHA-256 of shard s's gradient (all S, once the
     * step has them), shard_loss[s] its mean loss. */
    float **shard_grads;
    uint32_t nshard_grads;
    /* The same in backend memory (mem_ctx): shard_host[k] the host's copy
     * of shard_grads[k], which the hashes and the shard mean read, and
     * sum_host the mean, uploaded into grads; NULL otherwise. */
    float **shard_host;
    float *sum_host;
    ovt_hash *shard_hashes;
    float *shard_loss;
    uint32_t sites_per_shard; /* learnt from the first shard a step ran */
    /* Testing only (--inject-fault bitflip-shard): flip a bit of shard
     * fault_shard's gradient in step fault_step (0: off). */
    uint64_t fault_step;
    uint32_t fault_shard;
};

/* Points *ptrs[i] at consecutive pieces of base, sizes[i] floats each
 * (both models' activation tables). */
static inline void trn_acts_slice_by(float **const *ptrs, const size_t *sizes, int n, float *base)
{
    for (int i = 0; i < n; i++) {
        *ptrs[i] = base;
        base += sizes[i];
    }
}

/* GPT-2 (trainer/gpt2.c): the number of floats of one activation set for
 * batches of B x T, and the slicing of such a set. */
size_t trn_gpt2_acts_size(const trn_model_config *m, size_t B, size_t T);
void trn_gpt2_acts_slice(trn_gpt2_acts *out, const trn_model_config *m, size_t B, size_t T, float *base);
/* The gradient set's floats and slicing: the same slots without logits
 * and probs of its own; its logits (dlogits) are the forward set's acts
 * logits, its probs NULL. */
size_t trn_gpt2_dacts_size(const trn_model_config *m, size_t B, size_t T);
void trn_gpt2_dacts_slice(trn_gpt2_acts *out, const trn_model_config *m, size_t B, size_t T, float *base,
                          const trn_gpt2_acts *acts);

/* ResNet (trainer/resnet.c): a plan for batches of
 * B, its conv + batch norm units and residual blocks in layout order, with
 * their activations and activation gradients in one allocation. */
typedef struct trn_resnet_plan trn_resnet_plan;
int trn_resnet_plan_new(trn_resnet_plan **out, const trn_layout *l, size_t B, krn_ctx *mem_ctx) OVT_MUST_USE;
void trn_resnet_plan_free(trn_resnet_plan *p);
/* The logits (B, n_class) the last forward of a ResNet left. */
const float *trn_resnet_logits(const trn_resnet_plan *p);

/* Llama (trainer/llama.c): the same four for its activations. */
size_t trn_llama_acts_size(const trn_model_config *m, size_t B, size_t T);
size_t trn_llama_dacts_size(const trn_model_config *m, size_t B, size_t T);
void trn_llama_acts_slice(trn_llama_acts *out, const trn_model_config *m, size_t B, size_t T, float *base);
void trn_llama_dacts_slice(trn_llama_acts *out, const trn_model_config *m, size_t B, size_t T, float *base,
                           const trn_llama_acts *acts);

#endif
