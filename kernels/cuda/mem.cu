/* Device memory for kernels/mem.c (kernels/cuda/cuda.h): the tensors of a
 * resident run. */
#include "kernels/cuda/device.cuh"

extern "C" int krn_cuda_mem_alloc(void **out, size_t bytes)
{
    *out = NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
        return ovt_fail(OVT_ENOMEM, "cuda: no device memory for %zu bytes (%s)", bytes, cudaGetErrorString(e));
    int rc = krn_dev_check(cudaMemset(p, 0, bytes), "zeroing new device memory");
    if (rc == 0)
        rc = krn_dev_check(cudaDeviceSynchronize(), "zeroing new device memory");
    if (rc) {
        cudaFree(p);
        return rc;
    }
    *out = p;
    return 0;
}

extern "C" void krn_cuda_mem_free(void *p)
{
    cudaFree(p);
}

extern "C" int krn_cuda_mem_copy(void *dst, const void *src, size_t bytes)
{
    /* cudaMemcpy returns once the copy is done, whatever the direction */
    return krn_dev_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "copying tensor memory");
}

extern "C" int krn_cuda_mem_zero(void *p, size_t bytes)
{
    int rc = krn_dev_check(cudaMemset(p, 0, bytes), "zeroing tensor memory");
    return rc ? rc : krn_dev_check(cudaDeviceSynchronize(), "zeroing tensor memory");
}
