/* Tensor tree roots of device memory (cuda.h, common/tree.h), many tensors
 * at once (tree_plan.h): one thread per leaf of every tensor, then one
 * launch per level, one thread per node, between two device buffers; only
 * the roots come back. The hashing and the walk are common/sha256_hd.h and
 * tree_plan.h, the code the host tests run (test_sha256_hd against OpenSSL
 * and ovt_tree_root_le32, test_cuda_host the walk over many tensors). */
#include "kernels/cuda/device.cuh"

#include <stdlib.h>

#define TREE_LAUNCH(n) <<<krn_cuda_blocks_of(n, KRN_CUDA_TREE_THREADS), KRN_CUDA_TREE_THREADS>>>

static __global__ void leaf_kernel(uint8_t *hashes, const uint8_t *const *bytes, const size_t *lens,
                                   const size_t *row0, size_t count)
{
    KRN_GRID_LOOP(j, row0[count])
    krn_cuda_tree_leaf(hashes, bytes, lens, row0, count, j);
}

static __global__ void level_kernel(uint8_t *out, const uint8_t *in, const size_t *down, const size_t *up,
                                    size_t count)
{
    KRN_GRID_LOOP(j, up[count])
    krn_cuda_tree_node(out, in, down, up, count, j);
}

/* The plan's tables on the device, in slot DEV_TREE_META: the tensors'
 * pointers, their lengths, the level rows. */
static int upload_meta(krn_dev *d, const krn_cuda_tree_plan *p, const void *const *bytes, const size_t *lens,
                       const uint8_t *const **dbytes, const size_t **dlens, const size_t **doffs)
{
    size_t n = p->count, rows = (p->levels + 1) * (n + 1);
    size_t words = 2 * n + rows;
    uint64_t *host = (uint64_t *)malloc(words * sizeof *host);
    uint64_t *dev = dev_array<uint64_t>(d, DEV_TREE_META, words);
    if (!host || !dev) {
        free(host);
        return host ? OVT_ENOMEM : ovt_fail(OVT_ENOMEM, "tree roots: out of host memory");
    }
    for (size_t t = 0; t < n; t++) {
        host[t] = (uint64_t)(uintptr_t)bytes[t];
        host[n + t] = lens[t];
    }
    for (size_t i = 0; i < rows; i++)
        host[2 * n + i] = p->offs[i];
    int rc = krn_dev_put(dev, host, words * sizeof *host);
    free(host);
    *dbytes = (const uint8_t *const *)dev;
    *dlens = (const size_t *)(dev + n);
    *doffs = (const size_t *)(dev + 2 * n);
    return rc;
}

static int hash_levels(krn_dev *d, const krn_cuda_tree_plan *p, const void *const *bytes, const size_t *lens,
                       uint8_t **root_level)
{
    const uint8_t *const *dbytes = NULL;
    const size_t *dlens = NULL, *doffs = NULL;
    int rc = upload_meta(d, p, bytes, lens, &dbytes, &dlens, &doffs);
    if (rc)
        return rc;
    size_t leaves = krn_cuda_tree_level(p, 0)[p->count];
    size_t above = p->levels ? krn_cuda_tree_level(p, 1)[p->count] : 1;
    uint8_t *cur = dev_array<uint8_t>(d, DEV_TREE_A, 32 * leaves), *next = dev_array<uint8_t>(d, DEV_TREE_B, 32 * above);
    if (!cur || !next)
        return OVT_ENOMEM;
    leaf_kernel TREE_LAUNCH(leaves)(cur, dbytes, dlens, doffs, p->count);
    rc = krn_dev_check(cudaGetLastError(), "tree leaves");
    const size_t row = p->count + 1;
    for (size_t l = 1; rc == 0 && l <= p->levels; l++) {
        size_t nodes = krn_cuda_tree_level(p, l)[p->count];
        level_kernel TREE_LAUNCH(nodes)(next, cur, doffs + (l - 1) * row, doffs + l * row, p->count);
        rc = krn_dev_check(cudaGetLastError(), "tree level");
        uint8_t *t = cur;
        cur = next;
        next = t;
    }
    *root_level = cur;
    return rc ? rc : krn_dev_launched("tree roots");
}

extern "C" int krn_cuda_tree_roots(krn_ctx *ctx, ovt_hash *roots, const void *const *bytes, const size_t *lens,
                                   size_t count)
{
    memset(roots, 0, count * sizeof *roots);
    krn_dev *d = krn_dev_of(ctx);
    if (!d)
        return ovt_fail(OVT_EINVAL, "tree roots on the device: the ctx is not a cuda ctx");
    for (size_t t = 0; t < count; t++)
        if (lens[t] > 0 && bytes[t] == NULL)
            return ovt_fail(OVT_EINVAL, "tree roots on the device: tensor %zu has no buffer for %zu bytes", t, lens[t]);
    krn_cuda_tree_plan p;
    int rc = krn_cuda_tree_plan_make(&p, lens, count);
    if (rc)
        return rc;
    uint8_t *top = NULL;
    if ((rc = hash_levels(d, &p, bytes, lens, &top)) == 0) {
        uint8_t *out = (uint8_t *)malloc(32 * count);
        rc = out ? krn_dev_get(out, top, 32 * count) : ovt_fail(OVT_ENOMEM, "tree roots: out of host memory");
        for (size_t t = 0; rc == 0 && t < count; t++)
            memcpy(roots[t].b, out + 32 * t, 32);
        free(out);
    }
    krn_cuda_tree_plan_free(&p);
    return rc;
}

extern "C" int krn_cuda_tree_root(krn_ctx *ctx, ovt_hash *root, const void *bytes, size_t len)
{
    return krn_cuda_tree_roots(ctx, root, &bytes, &len, 1);
}
