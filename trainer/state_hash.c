/* The stateHash (state_hash.h): the per-tensor digests as independent jobs
 * on a krn_ctx's pool, v1 one job per tensor, the tree one job per leaf. */
#include "trainer/state_hash.h"

#include <stdlib.h>
#include <string.h>

#include "common/tree.h"
#include "kernels/site.h"
#include "trainer/state.h"

static const char domain_v1[12] = {'o', 'v', 't', '.', 's', 't', 'a', 't', 'e', '.', 'v', '1'};
static const char domain_tree[12] = {'o', 'v', 't', '.', 's', 't', 'a', 't', 'e', '.', 'v', '3'};

/* Below this many parameters a state is hashed on the caller alone: a
 * pool's start costs more than it saves. */
#define HASH_PARALLEL_MIN ((size_t)1 << 22)

void trn_state_hash_threads(trn_state *st, krn_ctx *ctx)
{
    trn_state_settle(st);
    st->hash_ctx = ctx;
}

const float *trn_state_digest_words(const trn_state *st, size_t d, size_t *bytes)
{
    const float *sections[3] = {st->params, st->m, st->v};
    const trn_tensor_info *t = &st->layout.t[d % st->layout.count];
    *bytes = t->size * sizeof(float);
    return sections[d / st->layout.count] + t->offset;
}

void trn_state_hash_combine(ovt_hash *out, uint32_t version, const ovt_hash *config_hash, uint64_t step,
                            size_t ntensors, const ovt_hash *digests)
{
    ovt_sha256_ctx *h = ovt_sha256_new();
    if (!h)
        abort(); /* OpenSSL could not allocate a digest context */
    uint8_t head[32 + 8 + 4];
    memcpy(head, config_hash->b, 32);
    ovt_put_le64(head + 32, step);
    ovt_put_le32(head + 40, (uint32_t)(3 * ntensors));
    ovt_sha256_update(h, version == TRN_STATE_HASH_TREE ? domain_tree : domain_v1, 12);
    ovt_sha256_update(h, head, sizeof head);
    ovt_sha256_update(h, digests, 3 * ntensors * sizeof(ovt_hash));
    ovt_sha256_final(h, out);
}

int trn_state_tensor_digest(ovt_hash *out, uint32_t version, const float *values, size_t n)
{
    if (version == TRN_STATE_HASH_TREE)
        return ovt_tree_root_le32(out, values, n * sizeof(float));
    ovt_sha256_le32(out, values, n * sizeof(float));
    return 0;
}

/* One computation of the digests: the jobs (v1: digest d is job d; tree:
 * leaf j of every digest's leaves laid end to end, digest d's leaves
 * [first[d], first[d + 1])), then the tree's roots, then the combination. */
struct trn_state_hashing {
    const trn_state *st;
    uint32_t version;
    size_t ndigests;
    size_t first[3 * TRN_MAX_TENSORS + 1];
    ovt_hash *leaves; /* tree: first[ndigests] leaf hashes */
    ovt_hash digests[3 * TRN_MAX_TENSORS];
    bool background; /* the jobs were started on hash_ctx's workers */
    bool settled;
    uint64_t step;
    ovt_hash result;
};

static void tensor_job(void *arg, size_t d)
{
    struct trn_state_hashing *hs = arg;
    size_t bytes;
    const float *p = trn_state_digest_words(hs->st, d, &bytes);
    ovt_sha256_le32(&hs->digests[d], p, bytes);
}

static void leaf_job(void *arg, size_t j)
{
    struct trn_state_hashing *hs = arg;
    size_t lo = 0, hi = hs->ndigests; /* the digest d with first[d] <= j < first[d + 1] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (hs->first[mid] <= j)
            lo = mid;
        else
            hi = mid;
    }
    size_t bytes, off = (j - hs->first[lo]) * OVT_TREE_LEAF_BYTES;
    const uint8_t *p = (const uint8_t *)trn_state_digest_words(hs->st, lo, &bytes);
    size_t len = bytes - off < OVT_TREE_LEAF_BYTES ? bytes - off : OVT_TREE_LEAF_BYTES;
    ovt_tree_leaf_le32(&hs->leaves[j], p + off, len);
}

static size_t job_count(const struct trn_state_hashing *hs)
{
    return hs->version == TRN_STATE_HASH_TREE ? hs->first[hs->ndigests] : hs->ndigests;
}

static void (*job_fn(const struct trn_state_hashing *hs))(void *, size_t)
{
    return hs->version == TRN_STATE_HASH_TREE ? leaf_job : tensor_job;
}

static int job_init(struct trn_state_hashing *hs, const trn_state *st)
{
    hs->st = st;
    hs->step = st->step;
    hs->version = trn_config_state_hash(&st->config);
    hs->ndigests = 3 * st->layout.count;
    if (hs->version != TRN_STATE_HASH_TREE)
        return 0;
    for (size_t d = 0; d < hs->ndigests; d++) {
        size_t bytes;
        (void)trn_state_digest_words(st, d, &bytes);
        hs->first[d + 1] = hs->first[d] + ovt_tree_leaves(bytes);
    }
    hs->leaves = malloc(hs->first[hs->ndigests] * sizeof(ovt_hash));
    if (!hs->leaves)
        return ovt_fail(OVT_ENOMEM, "out of memory for the %zu leaf hashes of a stateHash", hs->first[hs->ndigests]);
    return 0;
}

/* The jobs not yet run, on the lent ctx, a pool made for a large state, or
 * the caller. */
static void run_jobs(struct trn_state_hashing *hs)
{
    krn_ctx *ctx = hs->st->hash_ctx, *own = NULL;
    if (hs->background) {
        krn_ctx_background_wait(ctx);
        return;
    }
    if (!ctx && hs->st->layout.nparams >= HASH_PARALLEL_MIN) {
        krn_config kc = {.backend = KRN_BACKEND_CPU, .mode = KRN_NEAREST, .grid_bits = (int)hs->st->config.grid_bits};
        if (krn_ctx_new(&own, &kc) == 0)
            ctx = own;
    }
    size_t n = job_count(hs);
    if (!ctx || krn_ctx_parallel(ctx, n, job_fn(hs), hs) != 0) /* no pool: slower, the same digests */
        for (size_t j = 0; j < n; j++)
            job_fn(hs)(hs, j);
    krn_ctx_free(own);
}

/* The jobs done: the roots, the stateHash. */
static void job_finish(struct trn_state_hashing *hs)
{
    run_jobs(hs);
    if (hs->version == TRN_STATE_HASH_TREE)
        for (size_t d = 0; d < hs->ndigests; d++)
            ovt_tree_root_of_leaves(&hs->digests[d], hs->leaves + hs->first[d], hs->first[d + 1] - hs->first[d]);
    free(hs->leaves);
    hs->leaves = NULL;
    trn_state_hash_combine(&hs->result, hs->version, &hs->st->config_hash, hs->step, hs->st->layout.count,
                           hs->digests);
}

/* A synchronous hash; its struct is large (3 * TRN_MAX_TENSORS digests),
 * so it lives on the heap. */
static struct trn_state_hashing *hash_now(const trn_state *st)
{
    struct trn_state_hashing *hs = calloc(1, sizeof *hs);
    if (!hs || job_init(hs, st))
        abort(); /* out of memory: stateHash has no error return */
    job_finish(hs);
    return hs;
}

void trn_state_hash(ovt_hash *out, const trn_state *st)
{
    struct trn_state_hashing *hs = hash_now(st);
    *out = hs->result;
    free(hs);
}

void trn_state_digests(ovt_hash *out, const trn_state *st)
{
    struct trn_state_hashing *hs = hash_now(st);
    memcpy(out, hs->digests, hs->ndigests * sizeof(ovt_hash));
    free(hs);
}

/* trn_state_free's way to end a hash in flight (state.h's hashing_end). */
static void end_discarding(trn_state *st)
{
    ovt_hash ignored;
    uint64_t at;
    (void)trn_state_hash_end(st, &ignored, &at);
}

int trn_state_hash_begin(trn_state *st)
{
    ovt_hash ignored;
    uint64_t at;
    (void)trn_state_hash_end(st, &ignored, &at);
    struct trn_state_hashing *hs = calloc(1, sizeof *hs);
    if (!hs)
        return ovt_fail(OVT_ENOMEM, "out of memory for the stateHash of step %llu", (unsigned long long)st->step);
    int rv = job_init(hs, st);
    if (!rv && st->hash_ctx && hs->version == TRN_STATE_HASH_TREE) {
        rv = krn_ctx_background(st->hash_ctx, job_count(hs), leaf_job, hs);
        hs->background = rv == 1;
        rv = rv < 0 ? rv : 0;
    }
    if (rv) {
        free(hs->leaves);
        free(hs);
        return rv;
    }
    st->hashing = hs;
    st->hashing_end = end_discarding;
    return 0;
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
