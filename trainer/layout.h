#ifndef OVT_TRAINER_LAYOUT_H
#define OVT_TRAINER_LAYOUT_H

/* The parameter layout of a model (llm.c style): every parameter tensor is a
 * named slice of one flat float array, in a fixed order given by a sizes
 * table. Gradients and the AdamW moments m and v use the same layout, so the
 * optimizer update is one loop over nparams and the state has one canonical
 * byte order to hash (docs/formats.md, "State"). */

#include <stddef.h>
#include <stdint.h>

#include "trainer/config.h"

/* Tensors of one layout: ResNet-50's 161 convolution, batch-norm and head
 * tensors (and its running statistics) with room to spare. */
#define TRN_MAX_TENSORS 320
#define TRN_TENSOR_NAME_MAX 48
#define TRN_TENSOR_MAX_DIMS 4

typedef struct {
    char name[TRN_TENSOR_NAME_MAX]; /* "wte", "w0", "layer1.0.conv1.weight", ... */
    uint32_t ndim;
    uint64_t shape[TRN_TENSOR_MAX_DIMS];
    size_t size;   /* elements */
    size_t offset; /* elements from the start of the flat array */
} trn_tensor_info;

/* The first ntrain of the nparams elements are trainable parameters (the
 * optimizer's); the rest are buffers the model updates itself (a ResNet's
 * running statistics: docs/decisions.md), 0 of them for the other models.
 * Every element is state: hashed, checkpointed, exported. */
typedef struct {
    trn_model_config model;
    size_t count;
    trn_tensor_info t[TRN_MAX_TENSORS];
    size_t nparams;
    size_t ntrain;
} trn_layout;

/* Builds the sizes table of model m (checked with trn_model_check). */
int trn_layout_build(trn_layout *out, const trn_model_config *m) OVT_MUST_USE;

/* The tensor of l named name, or NULL. */
const trn_tensor_info *trn_layout_find(const trn_layout *l, const char *name);

/* MLP: layer l (0..n_layer) maps its input to its output, y = x @ w[l]^T + b[l],
 * w[l] is (out, in): in_dim -> width -> ... -> width -> n_class. */
typedef struct {
    uint32_t n_linear; /* n_layer + 1 */
    float *w[TRN_MAX_LAYERS + 1];
    float *b[TRN_MAX_LAYERS + 1];
} trn_mlp_tensors;

/* GPT-2 (llm.c's ParameterTensors): per-layer tensors are stacked over L. */
typedef struct {
    float *wte;      /* (V, C) token embedding, also the output head */
    float *wpe;      /* (maxT, C) */
    float *ln1w;     /* (L, C) */
    float *ln1b;     /* (L, C) */
    float *qkvw;     /* (L, 3C, C) */
    float *qkvb;     /* (L, 3C) */
    float *attprojw; /* (L, C, C) */
    float *attprojb; /* (L, C) */
    float *ln2w;     /* (L, C) */
    float *ln2b;     /* (L, C) */
    float *fcw;      /* (L, 4C, C) */
    float *fcb;      /* (L, 4C) */
    float *fcprojw;  /* (L, C, 4C) */
    float *fcprojb;  /* (L, C) */
    float *lnfw;     /* (C) */
    float *lnfb;     /* (C) */
} trn_gpt2_tensors;

/* Llama (llama2.c's TransformerWeights, in its order; per-layer tensors
 * stacked over L; KV = n_kv_head * head size, H = hidden). No biases. */
typedef struct {
    float *wte;     /* (V, C) token embedding (and the output head when tied) */
    float *rms_att; /* (L, C) */
    float *wq;      /* (L, C, C) */
    float *wk;      /* (L, KV, C) */
    float *wv;      /* (L, KV, C) */
    float *wo;      /* (L, C, C) */
    float *rms_ffn; /* (L, C) */
    float *w1;      /* (L, H, C) gate */
    float *w2;      /* (L, C, H) down */
    float *w3;      /* (L, H, C) up */
    float *rms_final; /* (C) */
    float *wcls;    /* (V, C) the output head: its own tensor, or wte when tied */
} trn_llama_tensors;

/* Slices a flat array of layout->nparams floats into named pointers. The
 * layout must be of the matching kind (a programming error otherwise). */
void trn_mlp_slice(trn_mlp_tensors *out, const trn_layout *layout, float *base);
void trn_gpt2_slice(trn_gpt2_tensors *out, const trn_layout *layout, float *base);
void trn_llama_slice(trn_llama_tensors *out, const trn_layout *layout, float *base);

#endif
