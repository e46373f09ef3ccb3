/* The tensor tree root of device memory (cuda.h, common/tree.h): one
 * thread per leaf, then one launch per level, one thread per node, between
 * two device buffers; only the root comes back. The hashing itself is
 * common/sha256_hd.h, the code tests/common/test_sha256_hd.c runs on the
 * host against OpenSSL and ovt_tree_root_le32. */
#include "kernels/cuda/device.cuh"

#include "common/sha256_hd.h"

static __global__ void leaf_kernel(uint8_t *hashes, const uint8_t *bytes, size_t len, size_t leaves)
{
    KRN_GRID_LOOP(i, leaves)
    ovt_tree_leaf_at_hd(hashes + 32 * i, bytes, len, i);
}

static __global__ void level_kernel(uint8_t *up, const uint8_t *level, size_t n)
{
    KRN_GRID_LOOP(i, (n + 1) / 2)
    ovt_tree_up_hd(up, level, n, i);
}

extern "C" int krn_cuda_tree_root(krn_ctx *ctx, ovt_hash *root, const void *bytes, size_t len)
{
    memset(root, 0, sizeof *root);
    krn_dev *d = krn_dev_of(ctx);
    if (!d)
        return ovt_fail(OVT_EINVAL, "tree root on the device: the ctx is not a cuda ctx");
    if (len > 0 && bytes == NULL)
        return ovt_fail(OVT_EINVAL, "tree root on the device: no buffer for %zu bytes", len);
    size_t n = ovt_tree_leaves_hd(len);
    uint8_t *cur = dev_array<uint8_t>(d, DEV_TREE_A, 32 * n);
    uint8_t *next = dev_array<uint8_t>(d, DEV_TREE_B, 32 * ((n + 1) / 2));
    if (!cur || !next)
        return OVT_ENOMEM;
    leaf_kernel<<<krn_cuda_tree_blocks(n), KRN_CUDA_TREE_THREADS>>>(cur, (const uint8_t *)bytes, len, n);
    int rc = krn_dev_check(cudaGetLastError(), "tree leaves");
    for (; rc == 0 && n > 1; n = (n + 1) / 2) {
        level_kernel<<<krn_cuda_tree_blocks((n + 1) / 2), KRN_CUDA_TREE_THREADS>>>(next, cur, n);
        rc = krn_dev_check(cudaGetLastError(), "tree level");
        uint8_t *t = cur;
        cur = next;
        next = t;
    }
    if (rc == 0)
        rc = krn_dev_launched("tree root");
    uint8_t out[32];
    if (rc == 0 && (rc = krn_dev_get(out, cur, sizeof out)) == 0)
        memcpy(root->b, out, sizeof out);
    return rc;
}
