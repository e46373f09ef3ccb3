#include "trainer/state.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bigmem.h"
#include "common/fileio.h"
#include "kernels/grid.h"
#include "kernels/rng.h"

static void slice(trn_state *st)
{
    size_t n = st->layout.nparams;
    st->params = st->mem;
    st->m = st->mem + n;
    st->v = st->mem + 2 * n;
}

/* A state for a checked run config with its layout but no tensor memory
 * yet (st->mem NULL): trn_state_new allocates it, a checkpoint read puts
 * the file's bytes straight into a buffer of its own. */
static int state_shell(trn_state **out, const trn_run_config *rc)
{
    *out = NULL;
    int rv = trn_config_check(rc);
    if (rv)
        return rv;
    trn_state *st = calloc(1, sizeof *st);
    if (!st)
        return ovt_fail(OVT_ENOMEM, "out of memory for the training state");
    st->config = *rc;
    trn_config_hash(&st->config_hash, rc);
    rv = trn_layout_build(&st->layout, &rc->model);
    if (rv) {
        free(st);
        return rv;
    }
    *out = st;
    return 0;
}

int trn_state_new(trn_state **out, const trn_run_config *rc)
{
    trn_state *st;
    int rv = state_shell(&st, rc);
    if (rv)
        return rv;
    st->mem = ovt_big_calloc(3 * st->layout.nparams, sizeof(float));
    if (!st->mem) {
        rv = ovt_fail(OVT_ENOMEM, "out of memory for %zu parameters and their AdamW moments",
                      st->layout.nparams);
        free(st);
        return rv;
    }
    slice(st);
    *out = st;
    return 0;
}

int trn_state_from_mem(trn_state **out, const trn_run_config *rc, float *mem)
{
    int rv = state_shell(out, rc);
    if (rv) {
        free(mem);
        return rv;
    }
    (*out)->mem = mem;
    slice(*out);
    return 0;
}

void trn_state_free(trn_state *st)
{
    if (!st)
        return;
    if (st->hashing && st->hashing_end)
        st->hashing_end(st);
    free(st->mem);
    free(st);
}

int trn_state_clone(trn_state **out, const trn_state *src)
{
    int rv = trn_state_new(out, &src->config);
    if (rv)
        return rv;
    (*out)->step = src->step;
    memcpy((*out)->mem, src->mem, 3 * src->layout.nparams * sizeof(float));
    return 0;
}

void trn_state_copy(trn_state *dst, const trn_state *src)
{
    dst->step = src->step;
    memcpy(dst->mem, src->mem, 3 * src->layout.nparams * sizeof(float));
}

static void init_normal(const trn_state *st, const trn_tensor_info *t, double std)
{
    int b = (int)st->config.grid_bits;
    for (size_t i = 0; i < t->size; i++) {
        double z = krn_rng_normal(st->config.seed, 0, KRN_RNG_INIT, t->offset + i);
        st->params[t->offset + i] = krn_grid_round(z * std, b);
    }
}

static void init_const(const trn_state *st, const trn_tensor_info *t, float value)
{
    for (size_t i = 0; i < t->size; i++)
        st->params[t->offset + i] = value;
}

/* The optional head shift (trainer/config.h) of an MLP, a ResNet or a
 * Llama with its own output head: column h of the output layer (MLP: w[L],
 * ResNet: fc.weight, Llama: wcls; rows the classes or tokens) gets
 * +-2^head_shift/16, the sign from krn_rng (seed, 0, KRN_RNG_INIT,
 * nparams + h), added in FP64 (exact) and rounded to the grid. */
static void init_head_shift(const trn_state *st)
{
    const trn_run_config *rc = &st->config;
    if (rc->head_shift == 0)
        return;
    float *head;
    uint32_t H, C;
    if (rc->model.kind == TRN_MODEL_MLP) {
        trn_mlp_tensors t;
        trn_mlp_slice(&t, &st->layout, st->params);
        head = t.w[rc->model.n_layer];
        H = rc->model.width;
        C = rc->model.n_class;
    } else if (rc->model.kind == TRN_MODEL_RESNET) {
        const trn_tensor_info *fc = trn_layout_find(&st->layout, "fc.weight");
        head = st->params + fc->offset;
        H = (uint32_t)fc->shape[1];
        C = (uint32_t)fc->shape[0];
    } else {
        trn_llama_tensors t;
        trn_llama_slice(&t, &st->layout, st->params);
        head = t.wcls;
        H = rc->model.width;
        C = rc->model.vocab;
    }
    double shift = 1.0 / 16;
    for (uint32_t k = 0; k < rc->head_shift; k++)
        shift *= 2;
    for (uint32_t h = 0; h < H; h++) {
        double a = krn_rng_u64(rc->seed, 0, KRN_RNG_INIT, st->layout.nparams + h) & 1 ? shift : -shift;
        for (uint32_t c = 0; c < C; c++) {
            float *w = &head[(size_t)c * H + h];
            *w = krn_grid_round((double)*w + a, (int)rc->grid_bits);
        }
    }
}

/* sqrt and division are correctly rounded IEEE operations, so every scale
 * below is the same double on every machine. */
void trn_state_init(trn_state *st)
{
    const trn_model_config *m = &st->config.model;
    memset(st->mem, 0, 3 * st->layout.nparams * sizeof(float));
    st->step = 0;
    for (size_t k = 0; k < st->layout.count; k++) {
        const trn_tensor_info *t = &st->layout.t[k];
        if (m->kind == TRN_MODEL_MLP) {
            if (t->ndim == 2)
                init_normal(st, t, sqrt(1.0 / (double)t->shape[1]));
            continue;
        }
        const char *n = t->name;
        if (m->kind == TRN_MODEL_RESNET) {
            /* torchvision's: convolutions N(0, 2/fan_out) (He, fan out),
             * batch norms weight 1 and bias 0, running mean 0 and variance
             * 1, the head N(0, 1/fan_in) */
            size_t len = strlen(n);
            if (t->ndim == 4)
                init_normal(st, t, sqrt(2.0 / (double)(t->shape[0] * t->shape[2] * t->shape[3])));
            else if (t->ndim == 2)
                init_normal(st, t, sqrt(1.0 / (double)t->shape[1]));
            else if ((len > 7 && !strcmp(n + len - 7, ".weight") && strncmp(n, "fc.", 3)) ||
                     (len > 12 && !strcmp(n + len - 12, ".running_var")))
                init_const(st, t, 1.0f);
            continue;
        }
        if (m->kind == TRN_MODEL_LLAMA) {
            /* llama2.c's model.py: norms 1, every matrix N(0, 0.02), the
             * projections into the residual (wo, w3) scaled by 1/sqrt(2L) */
            if (t->ndim == 1 || !strncmp(n, "rms_", 4))
                init_const(st, t, 1.0f);
            else if (!strcmp(n, "wo") || !strcmp(n, "w3"))
                init_normal(st, t, 0.02 / sqrt(2.0 * m->n_layer));
            else
                init_normal(st, t, 0.02);
            continue;
        }
        if (!strcmp(n, "ln1w") || !strcmp(n, "ln2w") || !strcmp(n, "lnfw"))
            init_const(st, t, 1.0f);
        else if (!strcmp(n, "attprojw") || !strcmp(n, "fcprojw"))
            init_normal(st, t, 0.02 / sqrt(2.0 * m->n_layer));
        else if (!strcmp(n, "wte") || !strcmp(n, "wpe") || !strcmp(n, "qkvw") || !strcmp(n, "fcw"))
            init_normal(st, t, 0.02);
    }
    init_head_shift(st);
}
