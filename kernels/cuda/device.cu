/* The cuda backend's per-ctx state: cuBLAS handle, device and host staging
 * buffers, copies and error reporting (device.cuh). */
#include "kernels/cuda/device.cuh"

#include <stdlib.h>

static void dev_free(void *p)
{
    krn_dev *d = (krn_dev *)p;
    for (int i = 0; i < DEV_NSLOTS; i++)
        cudaFree(d->buf[i]);
    for (int i = 0; i < HOST_NSLOTS; i++)
        free(d->host[i]);
    if (d->blas)
        cublasDestroy(d->blas);
    free(d);
}

extern "C" int krn_cuda_attach(krn_ctx *ctx)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        return ovt_fail(OVT_EINVAL, "backend cuda: no usable CUDA device (%s)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    krn_dev *d = (krn_dev *)calloc(1, sizeof *d);
    if (!d)
        return ovt_fail(OVT_ENOMEM, "backend cuda: out of memory");
    cublasStatus_t s = cublasCreate(&d->blas);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(d);
        return ovt_fail(OVT_EIO, "backend cuda: cublasCreate failed (%s)", cublasGetStatusString(s));
    }
    /* Pedantic math: standard IEEE FP64 in every phase, never an emulated
     * or reduced-precision DGEMM (the band assumes one rounding per product
     * and per addition inside a chunk). */
    s = cublasSetMathMode(d->blas, CUBLAS_PEDANTIC_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        dev_free(d);
        return ovt_fail(OVT_EIO, "backend cuda: cublasSetMathMode failed (%s)", cublasGetStatusString(s));
    }
    krn_ctx_set_device(ctx, d, dev_free);
    return 0;
}

krn_dev *krn_dev_of(krn_ctx *ctx)
{
    return (krn_dev *)krn_ctx_device(ctx);
}

int krn_dev_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return ovt_fail(OVT_EIO, "cuda: %s: %s", what, cudaGetErrorString(e));
}

int krn_dev_blas_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    return ovt_fail(OVT_EIO, "cublas: %s: %s", what, cublasGetStatusString(s));
}

int krn_dev_launched(const char *what)
{
    int rc = krn_dev_check(cudaGetLastError(), what);
    return rc ? rc : krn_dev_check(cudaDeviceSynchronize(), what);
}

void *krn_dev_slot(krn_dev *d, int slot, size_t bytes)
{
    if (d->cap[slot] >= bytes)
        return d->buf[slot];
    cudaFree(d->buf[slot]);
    d->buf[slot] = NULL;
    d->cap[slot] = 0;
    cudaError_t e = cudaMalloc(&d->buf[slot], bytes);
    if (e != cudaSuccess) {
        d->buf[slot] = NULL;
        ovt_fail(OVT_ENOMEM, "cuda: no device memory for %zu bytes (%s)", bytes, cudaGetErrorString(e));
        return NULL;
    }
    d->cap[slot] = bytes;
    return d->buf[slot];
}

void *krn_dev_host(krn_dev *d, int slot, size_t bytes)
{
    if (d->host_cap[slot] >= bytes)
        return d->host[slot];
    void *p = realloc(d->host[slot], bytes);
    if (!p) {
        ovt_fail(OVT_ENOMEM, "cuda: out of host memory for %zu bytes", bytes);
        return NULL;
    }
    d->host[slot] = p;
    d->host_cap[slot] = bytes;
    return p;
}

bool krn_dev_is_device(const void *p)
{
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* an unknown pointer is host memory; the error is not sticky */
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* A caller's tensor (src of put, dst of get) is host memory (the path
 * verified on 2026-12-04: over PCIe) or device memory (a resident run: a
 * copy on the device); the other side is always a device buffer. */
int krn_dev_put(void *dst, const void *src, size_t bytes)
{
    cudaMemcpyKind kind = krn_dev_is_device(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
    return krn_dev_check(cudaMemcpy(dst, src, bytes, kind), "copy to the device");
}

int krn_dev_get(void *dst, const void *src, size_t bytes)
{
    cudaMemcpyKind kind = krn_dev_is_device(dst) ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
    return krn_dev_check(cudaMemcpy(dst, src, bytes, kind), "copy from the device");
}

float *krn_dev_upload(krn_dev *d, int slot, const float *src, size_t n)
{
    float *p = dev_array<float>(d, slot, n);
    if (!p || krn_dev_put(p, src, n * sizeof *src))
        return NULL;
    return p;
}

static __global__ void widen_kernel(double *dst, const float *src, size_t n)
{
    KRN_GRID_LOOP(i, n)
    dst[i] = (double)src[i];
}

double *krn_dev_upload_wide(krn_dev *d, int slot, int slot64, const float *src, size_t n)
{
    float *f = krn_dev_upload(d, slot, src, n);
    double *w = dev_array<double>(d, slot64, n);
    if (!f || !w)
        return NULL;
    widen_kernel KRN_LAUNCH(n)(w, f, n);
    return krn_dev_launched("widen") ? NULL : w;
}

int krn_cuda_fail(krn_ctx *ctx, int rc)
{
    krn_sparse_fail(ctx, rc);
    return rc;
}
