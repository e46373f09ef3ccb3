#include "trainer/state.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
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
    ovt_hash ignored;
    uint64_t at;
    (void)trn_state_hash_end(st, &ignored, &at);
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

static const char state_domain[12] = {'o', 'v', 't', '.', 's', 't', 'a', 't', 'e', '.', 'v', '1'};

/* The per-tensor digests D(section, t), in the order they are combined:
 * index j = s * count + k for section s (params, m, v) and tensor k; the
 * bytes of digest j. */
static const uint8_t *digest_bytes(const trn_state *st, size_t j, size_t *len)
{
    const float *sections[3] = {st->params, st->m, st->v};
    const trn_tensor_info *t = &st->layout.t[j % st->layout.count];
    *len = t->size * sizeof(float);
    return (const uint8_t *)(sections[j / st->layout.count] + t->offset);
}

#define HASH_THREADS 4
#define HASH_PARALLEL_MIN ((size_t)1 << 22) /* parameters; below this one thread is quicker */

/* Helper threads for a state of this size: the CPUs less the caller's, at
 * most HASH_THREADS - 1; none for a small state. */
static int hash_helpers(const trn_state *st)
{
    if (st->layout.nparams < HASH_PARALLEL_MIN)
        return 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return (cpus > HASH_THREADS ? HASH_THREADS : (int)cpus) - 1;
}

void trn_state_hash_combine(ovt_hash *out, const ovt_hash *config_hash, uint64_t step, size_t ntensors,
                            const ovt_hash *digests)
{
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (!h)
        abort(); /* OpenSSL could not allocate a digest context */
    uint8_t head[32 + 8 + 4];
    memcpy(head, config_hash->b, 32);
    ovt_put_le64(head + 32, step);
    ovt_put_le32(head + 40, (uint32_t)(3 * ntensors));
    ovt_sha256_update(h, state_domain, sizeof state_domain);
    ovt_sha256_update(h, head, sizeof head);
    ovt_sha256_update(h, digests, 3 * ntensors * sizeof(ovt_hash));
    ovt_sha256_final(h, out);
}

/* The stateHash from the per-tensor digests and the step they were taken at. */
static void combine(ovt_hash *out, const trn_state *st, uint64_t step, const ovt_hash *digests)
{
    trn_state_hash_combine(out, &st->config_hash, step, st->layout.count, digests);
}

/* The job that computes the digests: for trn_state_hash (no helpers, the
 * finishers do it all at once) and in the background (trn_state_hash_begin).
 * Helpers claim digests in order and hash each in pieces of HASH_PIECE
 * bytes; once the caller needs the hash (hurry), a helper parks the digest
 * it holds (its context and how far it got) at the end of its piece and
 * leaves, and the finishers (the caller and threads at normal priority) do
 * the rest. So the caller never waits for more than one piece of a helper
 * that the scheduler keeps off the CPU (SCHED_IDLE threads only run on CPU
 * time nothing else wants). */
#define HASH_PIECE ((size_t)256 << 10)

/* A claimed slot is its claimer's until it parks it or is done; a parked
 * one goes to the first finisher that takes it. */
enum { SLOT_CLAIMED, SLOT_PARKED, SLOT_FINISHING, SLOT_DONE };

struct trn_state_hashing {
    const trn_state *st;
    size_t total;
    size_t next; /* atomic: the next unclaimed digest */
    int hurry;   /* atomic: the caller wants the hash now */
    int slot[3 * TRN_MAX_TENSORS]; /* atomic: SLOT_* of each claimed digest */
    ovt_sha256_ctx *parked[3 * TRN_MAX_TENSORS];
    size_t parked_at[3 * TRN_MAX_TENSORS];
    ovt_hash digests[3 * TRN_MAX_TENSORS];
    pthread_mutex_t mu; /* with cv: a helper parked or finished a digest */
    pthread_cond_t cv;
    pthread_t threads[HASH_THREADS];
    int started;
    uint64_t step;
    bool settled;
    ovt_hash result;
};

static void slot_set(struct trn_state_hashing *hs, size_t j, int state)
{
    pthread_mutex_lock(&hs->mu);
    __atomic_store_n(&hs->slot[j], state, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&hs->cv);
    pthread_mutex_unlock(&hs->mu);
}

static void *idle_helper(void *arg)
{
    struct trn_state_hashing *hs = arg;
    /* Linux: SCHED_IDLE for this thread alone; where refused, the thread
     * competes with the step at normal priority, which is only slower */
    const struct sched_param none = {.sched_priority = 0};
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
    while (!__atomic_load_n(&hs->hurry, __ATOMIC_ACQUIRE)) {
        size_t j = __atomic_fetch_add(&hs->next, 1, __ATOMIC_RELAXED);
        if (j >= hs->total)
            break;
        size_t len, off = 0;
        const uint8_t *p = digest_bytes(hs->st, j, &len);
        ovt_sha256_ctx *h = ovt_sha256_new();
        if (!h)
            abort(); /* OpenSSL could not allocate a digest context */
        for (; off < len && !__atomic_load_n(&hs->hurry, __ATOMIC_ACQUIRE); off += HASH_PIECE)
            ovt_sha256_update_le32(h, p + off, len - off < HASH_PIECE ? len - off : HASH_PIECE);
        if (off < len) {
            hs->parked[j] = h;
            hs->parked_at[j] = off;
            slot_set(hs, j, SLOT_PARKED);
            break;
        }
        ovt_sha256_final(h, &hs->digests[j]);
        slot_set(hs, j, SLOT_DONE);
    }
    return NULL;
}

static void job_init(struct trn_state_hashing *hs, const trn_state *st)
{
    hs->st = st;
    hs->total = 3 * st->layout.count;
    hs->step = st->step;
    pthread_mutex_init(&hs->mu, NULL);
    pthread_cond_init(&hs->cv, NULL);
}

int trn_state_hash_begin(trn_state *st)
{
    ovt_hash ignored;
    uint64_t at;
    (void)trn_state_hash_end(st, &ignored, &at);
    struct trn_state_hashing *hs = calloc(1, sizeof *hs);
    if (!hs)
        return ovt_fail(OVT_ENOMEM, "out of memory for the stateHash of step %llu", (unsigned long long)st->step);
    st->hashing = hs;
    job_init(hs, st);
    /* every CPU, the caller's too: it is busy with the step, whose idle
     * moments the helpers fill */
    int want = hash_helpers(st) + (st->layout.nparams >= HASH_PARALLEL_MIN);
    for (; hs->started < want; hs->started++)
        if (pthread_create(&hs->threads[hs->started], NULL, idle_helper, hs) != 0)
            break;
    return 0;
}

/* The caller's side once it wants the hash, on the caller and on fresh
 * threads at normal priority (the helpers may get no CPU at all while other
 * processes want it): the digests no helper claimed, then the ones the
 * helpers parked, each taken by one finisher. */
static void *finisher(void *arg)
{
    struct trn_state_hashing *hs = arg;
    for (;;) {
        size_t j = __atomic_fetch_add(&hs->next, 1, __ATOMIC_RELAXED);
        if (j >= hs->total)
            break;
        size_t len;
        const uint8_t *p = digest_bytes(hs->st, j, &len);
        ovt_sha256_le32(&hs->digests[j], p, len);
        slot_set(hs, j, SLOT_DONE); /* another finisher may be waiting for it */
    }
    for (size_t j = 0; j < hs->total; j++) {
        pthread_mutex_lock(&hs->mu);
        while (__atomic_load_n(&hs->slot[j], __ATOMIC_ACQUIRE) == SLOT_CLAIMED)
            pthread_cond_wait(&hs->cv, &hs->mu); /* a helper is within a piece of it */
        int parked = SLOT_PARKED;
        bool take = __atomic_compare_exchange_n(&hs->slot[j], &parked, SLOT_FINISHING, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&hs->mu);
        if (!take)
            continue;
        size_t len;
        const uint8_t *p = digest_bytes(hs->st, j, &len);
        ovt_sha256_update_le32(hs->parked[j], p + hs->parked_at[j], len - hs->parked_at[j]);
        ovt_sha256_final(hs->parked[j], &hs->digests[j]);
        hs->parked[j] = NULL;
    }
    return NULL;
}

/* The hash, now: the finishers on the caller and on fresh threads (a
 * large state's; fewer threads is only slower), then the helpers joined. */
static void job_finish(struct trn_state_hashing *hs)
{
    __atomic_store_n(&hs->hurry, 1, __ATOMIC_RELEASE);
    pthread_t threads[HASH_THREADS];
    int started = 0, want = hash_helpers(hs->st);
    for (; started < want; started++)
        if (pthread_create(&threads[started], NULL, finisher, hs) != 0)
            break;
    finisher(hs);
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < hs->started; i++)
        pthread_join(hs->threads[i], NULL);
    pthread_mutex_destroy(&hs->mu);
    pthread_cond_destroy(&hs->cv);
    combine(&hs->result, hs->st, hs->step, hs->digests);
}

void trn_state_hash(ovt_hash *out, const trn_state *st)
{
    struct trn_state_hashing hs = {0};
    job_init(&hs, st);
    job_finish(&hs);
    *out = hs.result;
}

void trn_state_digests(ovt_hash *out, const trn_state *st)
{
    struct trn_state_hashing hs = {0};
    job_init(&hs, st);
    job_finish(&hs);
    memcpy(out, hs.digests, 3 * st->layout.count * sizeof(ovt_hash));
}

void trn_state_settle(trn_state *st)
{
    struct trn_state_hashing *hs = st->hashing;
    if (!hs || hs->settled)
        return;
    job_finish(hs);
    hs->settled = true;
}

bool trn_state_hash_end(trn_state *st, ovt_hash *out, uint64_t *step)
{
    if (!st->hashing)
        return false;
    trn_state_settle(st);
    *out = st->hashing->result;
    *step = st->hashing->step;
    free(st->hashing);
    st->hashing = NULL;
    return true;
}
