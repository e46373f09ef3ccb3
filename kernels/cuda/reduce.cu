/* The contract's chunked GEMM on cuBLAS one chunk at a time (the path
 * verified on a device; gemm.cu has the default and the switch), norms, column-sum and row-mean
 * sites, products and exact additions shared by the ops (device.cuh). */
#include "kernels/cuda/device.cuh"

static __global__ void add_kernel(double *out, const double *part, size_t n)
{
    KRN_GRID_LOOP(i, n)
    out[i] = __dadd_rn(out[i], part[i]);
}

/* Row-major c (m x n) = op(a) op(b) is column-major c^T = op(b)^T op(a)^T:
 * the row-major storage of a (m x k, or k x m with ta) read column-major is
 * a^T, so b goes first and each operand is transposed iff it was. */
static int dgemm_chunk(krn_dev *d, double *c, bool ta, const double *a, size_t lda, bool tb,
                       const double *b, size_t ldb, size_t m, size_t n, size_t kc)
{
    const double one = 1.0, zero = 0.0;
    cublasStatus_t s = cublasDgemm(d->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   (int)n, (int)m, (int)kc, &one, b, (int)ldb, a, (int)lda, &zero, c, (int)n);
    return krn_dev_blas_check(s, "DGEMM of one chunk");
}

static __global__ void zero_kernel(double *out, size_t n)
{
    KRN_GRID_LOOP(i, n)
    out[i] = 0.0;
}

int krn_cuda_gemm_per_chunk(krn_dev *d, double *out, bool ta, const double *a, size_t lda, bool tb,
                            const double *b, size_t ldb, size_t m, size_t n, size_t k)
{
    size_t mn = m * n;
    if (m > INT32_MAX || n > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX)
        return ovt_fail(OVT_EINVAL, "chunked GEMM: %zu x %zu is too large for cuBLAS", m, n);
    if (k == 0) {
        zero_kernel KRN_LAUNCH(mn)(out, mn);
        return krn_dev_launched("zero");
    }
    double *part = k > KRN_GEMM_CHUNK ? dev_array<double>(d, DEV_TILE, mn) : NULL;
    if (k > KRN_GEMM_CHUNK && !part)
        return OVT_ENOMEM;
    size_t nch = krn_cuda_nchunks(k, KRN_GEMM_CHUNK);
    for (size_t j = 0; j < nch; j++) {
        size_t k0 = j * KRN_GEMM_CHUNK, kc = krn_cuda_chunk_len(k, KRN_GEMM_CHUNK, j);
        const double *ab = ta ? a + k0 * lda : a + k0;
        const double *bb = tb ? b + k0 : b + k0 * ldb;
        int rc = dgemm_chunk(d, j == 0 ? out : part, ta, ab, lda, tb, bb, ldb, m, n, kc);
        if (rc)
            return rc;
        if (j > 0) {
            add_kernel KRN_LAUNCH(mn)(out, part, mn);
            if ((rc = krn_dev_check(cudaGetLastError(), "chunk add")))
                return rc;
        }
    }
    return krn_dev_launched("chunked GEMM");
}

static __global__ void row_norms_kernel(double *norms, const double *m, size_t rows, size_t cols)
{
    KRN_GRID_LOOP(i, rows) {
        const double *r = m + i * cols;
        double s = 0;
        for (size_t j = 0; j < cols; j++)
            s += r[j] * r[j];
        norms[i] = sqrt(s);
    }
}

static __global__ void col_norms_kernel(double *norms, const double *m, size_t rows, size_t cols)
{
    KRN_GRID_LOOP(j, cols) {
        double s = 0;
        for (size_t i = 0; i < rows; i++)
            s += m[i * cols + j] * m[i * cols + j];
        norms[j] = sqrt(s);
    }
}

int krn_cuda_row_norms(double *norms, const double *m, size_t rows, size_t cols)
{
    row_norms_kernel KRN_LAUNCH(rows)(norms, m, rows, cols);
    return krn_dev_launched("row norms");
}

int krn_cuda_col_norms(double *norms, const double *m, size_t rows, size_t cols)
{
    col_norms_kernel KRN_LAUNCH(cols)(norms, m, rows, cols);
    return krn_dev_launched("column norms");
}

static __global__ void colsum_kernel(double *x, double *mag, const double *m, const float *acc,
                                     size_t N, size_t C)
{
    KRN_GRID_LOOP(j, C) {
        x[j] = __dadd_rn(krn_dchunked_dot(m + j, (ptrdiff_t)C, NULL, 0, N), (double)acc[j]);
        mag[j] = krn_dmagnitude(m + j, (ptrdiff_t)C, NULL, 0, N);
    }
}

int krn_cuda_colsum_site(krn_ctx *ctx, const char *name, float *acc, const double *m, size_t N,
                         size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    float *dacc = krn_dev_upload(d, DEV_OUT3, acc, C);
    double *x = dev_array<double>(d, DEV_N1, C), *mag = dev_array<double>(d, DEV_N2, C);
    if (!dacc || !x || !mag)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    colsum_kernel KRN_LAUNCH(C)(x, mag, m, dacc, N, C);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, N, 1.0, 1);
    band.a = mag;
    return krn_cuda_site(ctx, name, dacc, acc, x, C, &band);
}

/* acc NULL: the row means; otherwise the row sums + acc. */
static __global__ void row_kernel(double *x, double *mag, const double *a, const double *b, const float *acc,
                                  size_t N, size_t C)
{
    KRN_GRID_LOOP(i, N) {
        const double *ai = a + i * C, *bi = b ? b + i * C : NULL;
        double s = krn_dchunked_dot(ai, 1, bi, 1, C);
        x[i] = acc ? __dadd_rn(s, (double)acc[i]) : __ddiv_rn(s, (double)C);
        mag[i] = krn_dmagnitude(ai, 1, bi, 1, C);
    }
}

/* The row site of kernels/reduce.c (row_site): a mean (acc NULL, band
 * scale 1/C) or a sum + acc (acc on the device). */
static int row_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *a,
                    const double *b, const float *acc, size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    double *x = dev_array<double>(d, DEV_H, N), *mag = dev_array<double>(d, DEV_I, N);
    if (!x || !mag)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    row_kernel KRN_LAUNCH(N)(x, mag, a, b, acc, N, C);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_band band = krn_band_reduction(KRN_BAND_ARRAY, C, acc ? 1.0 : 1.0 / (double)C, 1);
    band.a = mag;
    return krn_cuda_site(ctx, name, out, host_out, x, N, &band);
}

int krn_cuda_row_mean_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *a,
                           const double *b, size_t N, size_t C)
{
    return row_site(ctx, name, out, host_out, a, b, NULL, N, C);
}

int krn_cuda_row_sum_site(krn_ctx *ctx, const char *name, float *acc, const double *a, const double *b,
                          size_t N, size_t C)
{
    krn_dev *d = krn_dev_of(ctx);
    float *dacc = krn_dev_upload(d, DEV_OUT3, acc, N);
    if (!dacc)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    return row_site(ctx, name, dacc, acc, a, b, dacc, N, C);
}

static __global__ void mul_kernel(double *x, const double *a, const double *b, size_t n)
{
    KRN_GRID_LOOP(k, n)
    x[k] = __dmul_rn(a[k], b[k]);
}

int krn_cuda_mul(const char *what, double *x, const double *a, const double *b, size_t n)
{
    mul_kernel KRN_LAUNCH(n)(x, a, b, n);
    return krn_dev_launched(what);
}

static __global__ void exact_add_kernel(double *x, const float *a, const float *b, size_t n)
{
    KRN_GRID_LOOP(i, n)
    x[i] = __dadd_rn((double)a[i], (double)b[i]);
}

int krn_cuda_exact_add(krn_ctx *ctx, const char *name, float *out, const float *a, const float *b,
                       size_t n)
{
    krn_dev *d = krn_dev_of(ctx);
    float *da = krn_dev_upload(d, DEV_A, a, n), *db = krn_dev_upload(d, DEV_B, b, n);
    float *dout = dev_array<float>(d, DEV_OUT, n);
    double *x = dev_array<double>(d, DEV_X, n);
    if (!da || !db || !dout || !x)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    exact_add_kernel KRN_LAUNCH(n)(x, da, db, n);
    int rc = krn_dev_launched(name);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    return krn_cuda_site(ctx, name, dout, out, x, n, NULL);
}
