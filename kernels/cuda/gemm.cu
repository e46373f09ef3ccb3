/* The contract's chunked GEMM in a few launches (gemm_plan.h: strided
 * batched DGEMM over the chunks, one in-order reduction), the switch to the
 * per-chunk path (reduce.cu) and the probe tests and benchmarks use. */
#include "kernels/cuda/device.cuh"

#include <stdlib.h>

/* out[i] for i < count = (from_out ? out[i] : slice 0's) + each further
 * slice in increasing order, + old[i] when old is not NULL: the same FP64
 * additions, in the same order, as the per-chunk path. */
static __global__ void chunk_sum_kernel(double *out, const double *s, size_t slice, size_t count, size_t nslices,
                                        bool from_out, const float *old)
{
    KRN_GRID_LOOP(i, count) {
        size_t j = 0;
        double v = from_out ? out[i] : s[i];
        if (!from_out)
            j = 1;
        for (; j < nslices; j++)
            v = __dadd_rn(v, s[j * slice + i]);
        if (old)
            v = __dadd_rn(v, (double)old[i]);
        out[i] = v;
    }
}

/* out = 0 + old (or 0): the per-chunk path's zero product plus old, so
 * that an old -0 gives +0 on both paths. */
static __global__ void fill_kernel(double *out, const float *old, size_t n)
{
    KRN_GRID_LOOP(i, n)
    out[i] = old ? __dadd_rn(0.0, (double)old[i]) : 0.0;
}

/* count products of kc terms, row-major c_j (rows x n, row stride ldc,
 * stride_c doubles apart) = op(a_j) op(b_j), a_j and b_j stride_a and
 * stride_b elements apart, beta = 0: one plain DGEMM for one product, one
 * strided-batched DGEMM for more (column-major view as in reduce.cu). */
static int dgemm_chunks(krn_dev *d, double *c, size_t ldc, long long stride_c, bool ta, const double *a, size_t lda,
                        long long stride_a, bool tb, const double *b, size_t ldb, long long stride_b, size_t rows,
                        size_t n, size_t kc, size_t count)
{
    const double one = 1.0, zero = 0.0;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    if (count == 1)
        s = cublasDgemm(d->blas, opb, opa, (int)n, (int)rows, (int)kc, &one, b, (int)ldb, a, (int)lda, &zero, c,
                        (int)ldc);
    else
        s = cublasDgemmStridedBatched(d->blas, opb, opa, (int)n, (int)rows, (int)kc, &one, b, (int)ldb, stride_b, a,
                                      (int)lda, stride_a, &zero, c, (int)ldc, stride_c, (int)count);
    return krn_dev_blas_check(s, count == 1 ? "DGEMM of one chunk" : "strided-batched DGEMM of a group of chunks");
}

/* What the launches of one product run on. */
typedef struct {
    krn_dev *d;
    const krn_cuda_gemm_plan *p;
    double *out, *scratch;
    const double *a, *b;
    const float *old;
} gemm_run;

/* One launch of the plan (gemm_plan.h describes each kind). */
static int run_launch(void *arg, const krn_cuda_gemm_launch *l)
{
    const gemm_run *r = (const gemm_run *)arg;
    const krn_cuda_gemm_plan *p = r->p;
    size_t count = l->rows * p->n;
    switch (l->kind) {
    case KRN_CUDA_GEMM_FILL:
        fill_kernel KRN_LAUNCH(count)(r->out + l->c_off, l->with_old ? r->old + l->c_off : NULL, count);
        return krn_dev_check(cudaGetLastError(), "chunked GEMM over no terms");
    case KRN_CUDA_GEMM_DGEMM:
        return dgemm_chunks(r->d, (l->into_out ? r->out : r->scratch) + l->c_off, p->n, (long long)p->slice, p->ta,
                            r->a + l->a_off, p->lda, p->stride_a, p->tb, r->b + l->b_off, p->ldb, p->stride_b,
                            l->rows, p->n, l->kc, l->count);
    case KRN_CUDA_GEMM_SUM:
        chunk_sum_kernel KRN_LAUNCH(count)(r->out + l->c_off, r->scratch, p->slice, count, l->nslices, l->from_out,
                                           l->with_old ? r->old + l->c_off : NULL);
        return krn_dev_check(cudaGetLastError(), "in-order sum of a group of chunks");
    }
    return ovt_fail(OVT_EINVAL, "chunked GEMM: unknown launch kind %d", (int)l->kind);
}

int krn_cuda_gemm_batched(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb, const double *b,
                          size_t ldb, const float *old, size_t m, size_t n, size_t k, size_t budget)
{
    krn_cuda_gemm_plan p;
    int rc = krn_cuda_gemm_plan_make(&p, ta, lda, tb, ldb, m, n, k, budget);
    if (rc || p.tiles == 0)
        return rc;
    double *scratch = p.scratch ? dev_array<double>(d, DEV_TILE, p.scratch) : NULL;
    if (p.scratch && !scratch)
        return OVT_ENOMEM;
    gemm_run r = {d, &p, out, scratch, a, b, old};
    if ((rc = krn_cuda_gemm_plan_walk(&p, old != NULL, run_launch, &r)))
        return rc;
    return krn_dev_launched("chunked GEMM (batched)");
}

static __global__ void add_old_kernel(double *out, const float *old, size_t n)
{
    KRN_GRID_LOOP(i, n)
    out[i] = __dadd_rn(out[i], (double)old[i]);
}

int krn_cuda_gemm_path_run(krn_dev *d, krn_cuda_gemm_path path, size_t budget, double *out, bool ta, const double *a,
                           size_t lda, bool tb, const double *b, size_t ldb, const float *old, size_t m, size_t n,
                           size_t k)
{
    if (path == KRN_CUDA_GEMM_BATCHED)
        return krn_cuda_gemm_batched(d, out, ta, a, lda, tb, b, ldb, old, m, n, k, budget);
    int rc = krn_cuda_gemm_per_chunk(d, out, ta, a, lda, tb, b, ldb, m, n, k);
    if (rc || !old || m * n == 0)
        return rc;
    add_old_kernel KRN_LAUNCH(m * n)(out, old, m * n);
    return krn_dev_launched("accumulate into the old values");
}

int krn_cuda_chunked_gemm_old(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb,
                              const double *b, size_t ldb, const float *old, size_t m, size_t n, size_t k)
{
    krn_cuda_gemm_path path;
    int rc = krn_cuda_gemm_path_parse(getenv("OVT_CUDA_GEMM"), &path);
    if (rc)
        return rc;
    return krn_cuda_gemm_path_run(d, path, 0, out, ta, a, lda, tb, b, ldb, old, m, n, k);
}

int krn_cuda_chunked_gemm(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb, const double *b,
                          size_t ldb, size_t m, size_t n, size_t k)
{
    return krn_cuda_chunked_gemm_old(d, out, ta, a, lda, tb, b, ldb, NULL, m, n, k);
}

/* Device copies of the probe's operands. */
typedef struct {
    double *a, *b, *out;
    float *old;
} probe_bufs;

static void probe_free(probe_bufs *p)
{
    cudaFree(p->a);
    cudaFree(p->b);
    cudaFree(p->out);
    cudaFree(p->old);
}

static int probe_upload(probe_bufs *p, const krn_gemm_in *in, size_t m, size_t n, size_t k)
{
    size_t na = (in->ta ? k : m) * in->lda, nb = (in->tb ? n : k) * in->ldb, no = m * n;
    int rc;
    if ((rc = krn_dev_check(cudaMalloc(&p->a, (na ? na : 1) * sizeof(double)), "probe: a")) ||
        (rc = krn_dev_check(cudaMalloc(&p->b, (nb ? nb : 1) * sizeof(double)), "probe: b")) ||
        (rc = krn_dev_check(cudaMalloc(&p->out, (no ? no : 1) * sizeof(double)), "probe: out")) ||
        (in->old && (rc = krn_dev_check(cudaMalloc(&p->old, (no ? no : 1) * sizeof(float)), "probe: old"))))
        return rc;
    if ((rc = krn_dev_put(p->a, in->a, na * sizeof(double))) || (rc = krn_dev_put(p->b, in->b, nb * sizeof(double))))
        return rc;
    return in->old ? krn_dev_put(p->old, in->old, no * sizeof(float)) : 0;
}

extern "C" int krn_cuda_gemm_probe(krn_ctx *ctx, krn_cuda_gemm_path path, size_t budget, const krn_gemm_in *in,
                                   size_t m, size_t n, size_t k, double *out, int reps, double *seconds)
{
    krn_dev *d = krn_dev_of(ctx);
    if (!d)
        return ovt_fail(OVT_EINVAL, "gemm probe: the ctx is not a cuda ctx");
    if (in->bf || in->bnorms || !in->b)
        return ovt_fail(OVT_EINVAL, "gemm probe: FP64 operands only (b set, bf and bnorms NULL)");
    probe_bufs p = {NULL, NULL, NULL, NULL};
    cudaEvent_t e0 = NULL, e1 = NULL;
    float best = 0;
    int rc = probe_upload(&p, in, m, n, k);
    if (!rc)
        rc = krn_dev_check(cudaEventCreate(&e0), "probe: event");
    if (!rc)
        rc = krn_dev_check(cudaEventCreate(&e1), "probe: event");
    for (int r = 0; r < (reps > 0 ? reps : 1) && !rc; r++) {
        float ms = 0;
        if ((rc = krn_dev_check(cudaEventRecord(e0), "probe: event")) ||
            (rc = krn_cuda_gemm_path_run(d, path, budget, p.out, in->ta, p.a, in->lda, in->tb, p.b, in->ldb, p.old,
                                         m, n, k)) ||
            (rc = krn_dev_check(cudaEventRecord(e1), "probe: event")) ||
            (rc = krn_dev_check(cudaEventSynchronize(e1), "probe: event")) ||
            (rc = krn_dev_check(cudaEventElapsedTime(&ms, e0, e1), "probe: timing")))
            break;
        best = r == 0 || ms < best ? ms : best;
    }
    if (!rc)
        rc = krn_dev_get(out, p.out, m * n * sizeof(double));
    if (seconds)
        *seconds = rc ? 0 : best / 1e3;
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    probe_free(&p);
    return rc;
}
