/* Rounding sites on the device (device.cuh, kernels/site_sparse.h).
 *
 * Every element is rounded on the device by the same fast path as the CPU
 * (krn_round_fast_device: krn_round_fast, plus exact ties of zero-band
 * elements and zeros far inside their interval); the elements it cannot settle are flagged, the flags are
 * prefix-summed (cub::DeviceScan) and the flagged elements compacted, in
 * index order, into (index, x, tau) triples. Only those come back to the
 * host, which settles them with the CPU code (krn_sparse_finish: the same
 * log entries and fraud checks); the settled values are scattered back over
 * the fast-path results. REPLAY also gathers the verifier's x and tau at the
 * logged indices. A typical site sends back a few elements per thousand. */
#include "kernels/cuda/device.cuh"

#include <cub/device/device_scan.cuh>

#include "kernels/grid_bits.h"

/* The band of element i, evaluated in the contract's order
 * (docs/numeric-contract.md section 3). block != 0 (KRN_BAND_OUTER only):
 * the band repeats every block elements, block / cols rows of a, with the
 * next cols values of b for each block (krn_cuda_site_blocks). */
__device__ static inline double band_tau(const krn_band band, size_t block, const double *x, size_t i)
{
    double base = 0.0;
    switch (band.kind) {
    case KRN_BAND_ZERO:
        break;
    case KRN_BAND_CONST:
        base = band.scale;
        break;
    case KRN_BAND_ARRAY:
        base = __dmul_rn(band.scale, band.a[i]);
        break;
    case KRN_BAND_OUTER:
        if (block != 0)
            base = __dmul_rn(__dmul_rn(band.scale, band.a[i % block / band.cols]),
                             band.b[i / block * band.cols + i % band.cols]);
        else
            base = __dmul_rn(__dmul_rn(band.scale, band.a[i / band.cols]), band.b[i % band.cols]);
        break;
    }
    if (band.rel != 0.0)
        base = __dadd_rn(base, __dmul_rn(band.rel, fabs(x[i])));
    return base;
}

static __global__ void round_kernel(float *out, uint32_t *flag, const double *x, size_t n,
                                    krn_band band, size_t block, int use_tau, int b)
{
    KRN_GRID_LOOP(i, n) {
        double t = use_tau ? band_tau(band, block, x, i) : 0.0;
        flag[i] = krn_round_fast_device(x[i], t, &out[i], b);
    }
}

static __global__ void compact_kernel(uint64_t *idx, double *cx, double *ctau, const uint32_t *flag,
                                      const uint32_t *offs, const double *x, size_t n,
                                      krn_band band, size_t block, int use_tau)
{
    KRN_GRID_LOOP(i, n) {
        if (flag[i]) {
            uint32_t o = offs[i];
            idx[o] = i;
            cx[o] = x[i];
            ctau[o] = use_tau ? band_tau(band, block, x, i) : 0.0;
        }
    }
}

static __global__ void gather_kernel(double *lx, double *ltau, const uint64_t *lidx, size_t count,
                                     const double *x, size_t n, krn_band band, size_t block)
{
    KRN_GRID_LOOP(k, count) {
        size_t i = lidx[k] < n ? (size_t)lidx[k] : 0; /* out of range: the host rejects it first */
        lx[k] = x[i];
        ltau[k] = band_tau(band, block, x, i);
    }
}

static __global__ void scatter_kernel(float *out, const uint64_t *idx, const float *val, size_t count,
                                      size_t n)
{
    KRN_GRID_LOOP(k, count) {
        if (idx[k] < n)
            out[idx[k]] = val[k];
    }
}

static bool band_is_zero(const krn_band *band)
{
    return band == NULL || (band->kind == KRN_BAND_ZERO && band->rel == 0.0);
}

static int band_check(const krn_band *band, size_t n, const char *name)
{
    if (band_is_zero(band))
        return 0;
    if (band->kind == KRN_BAND_ARRAY && band->a == NULL)
        return ovt_fail(OVT_EINVAL, "site %s: KRN_BAND_ARRAY without an array", name);
    if (band->kind == KRN_BAND_OUTER &&
        (band->a == NULL || band->b == NULL || band->cols == 0 || n % band->cols != 0))
        return ovt_fail(OVT_EINVAL, "site %s: KRN_BAND_OUTER needs row and column arrays and cols "
                                    "dividing n (n = %zu, cols = %zu)", name, n, band->cols);
    if (band->kind < KRN_BAND_ZERO || band->kind > KRN_BAND_OUTER)
        return ovt_fail(OVT_EINVAL, "site %s: unknown band kind %d", name, (int)band->kind);
    return 0;
}

/* Flags, scan and compaction: the candidates to *count and the device
 * arrays of slots DEV_SITE_IDX/X/TAU. */
static int flag_and_compact(krn_dev *d, float *out, const double *x, size_t n, const krn_band *band,
                            size_t block, int use_tau, int b, size_t *count)
{
    uint32_t *flag = dev_array<uint32_t>(d, DEV_SITE_FLAG, n);
    uint32_t *offs = dev_array<uint32_t>(d, DEV_SITE_OFFS, n);
    if (!flag || !offs)
        return OVT_ENOMEM;
    round_kernel KRN_LAUNCH(n)(out, flag, x, n, *band, block, use_tau, b);
    int rc = krn_dev_launched("site rounding");
    if (rc)
        return rc;
    size_t temp_bytes = 0;
    if ((rc = krn_dev_check(cub::DeviceScan::ExclusiveSum(NULL, temp_bytes, flag, offs, n), "scan size")))
        return rc;
    void *temp = krn_dev_slot(d, DEV_SITE_SCAN, temp_bytes ? temp_bytes : 1);
    if (!temp)
        return OVT_ENOMEM;
    if ((rc = krn_dev_check(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, flag, offs, n), "flag scan")))
        return rc;
    uint32_t last[2];
    if ((rc = krn_dev_get(&last[0], offs + n - 1, sizeof last[0])) ||
        (rc = krn_dev_get(&last[1], flag + n - 1, sizeof last[1])))
        return rc;
    *count = (size_t)last[0] + last[1];
    if (*count == 0)
        return 0;
    uint64_t *idx = dev_array<uint64_t>(d, DEV_SITE_IDX, *count);
    double *cx = dev_array<double>(d, DEV_SITE_X, *count);
    double *ctau = dev_array<double>(d, DEV_SITE_TAU, *count);
    if (!idx || !cx || !ctau)
        return OVT_ENOMEM;
    compact_kernel KRN_LAUNCH(n)(idx, cx, ctau, flag, offs, x, n, *band, block, use_tau);
    return krn_dev_launched("site compaction");
}

int krn_cuda_site(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *x,
                  size_t n, const krn_band *band)
{
    return krn_cuda_site_blocks(ctx, name, out, host_out, x, n, band, 0);
}

int krn_cuda_site_blocks(krn_ctx *ctx, const char *name, float *out, float *host_out, const double *x,
                         size_t n, const krn_band *band, size_t block)
{
    krn_dev *d = krn_dev_of(ctx);
    krn_band zero = krn_band_exact();
    bool banded = !band_is_zero(band);
    if (!banded)
        band = &zero;
    int rc = band_check(band, n, name);
    if (rc == 0 && block != 0 &&
        (band->kind != KRN_BAND_OUTER || block % band->cols != 0 || n % block != 0))
        rc = ovt_fail(OVT_EINVAL, "site %s: a band in blocks of %zu elements needs KRN_BAND_OUTER with cols "
                                  "dividing the block and the block dividing n (n = %zu)", name, block, n);
    if (rc == 0 && n > KRN_CUDA_SITE_MAX)
        rc = ovt_fail(OVT_EINVAL, "site %s: %zu elements, more than a device site takes", name, n);
    if (rc)
        return krn_cuda_fail(ctx, rc);
    krn_sparse_site s;
    if ((rc = krn_sparse_begin(ctx, name, n, banded, &s)))
        return rc;
    int b = krn_ctx_config(ctx)->grid_bits;
    size_t ncand = 0, nlog = s.logged ? s.logged->count : 0;
    if ((rc = flag_and_compact(d, out, x, n, band, block, s.flag_band, b, &ncand)))
        return krn_cuda_fail(ctx, rc);

    krn_sparse_values cand = {ncand, NULL, NULL, NULL, NULL}, logged = {nlog, NULL, NULL, NULL, NULL};
    uint64_t *hidx = host_array<uint64_t>(d, HOST_IDX, ncand), *hlidx = host_array<uint64_t>(d, HOST_LIDX, nlog);
    double *hx = host_array<double>(d, HOST_X, ncand), *htau = host_array<double>(d, HOST_TAU, ncand);
    float *hval = host_array<float>(d, HOST_VAL, ncand), *hlval = host_array<float>(d, HOST_LVAL, nlog);
    double *hlx = host_array<double>(d, HOST_LX, nlog), *hltau = host_array<double>(d, HOST_LTAU, nlog);
    uint64_t *lidx = dev_array<uint64_t>(d, DEV_SITE_LIDX, nlog);
    double *lx = dev_array<double>(d, DEV_SITE_LX, nlog), *ltau = dev_array<double>(d, DEV_SITE_LTAU, nlog);
    float *val = dev_array<float>(d, DEV_SITE_VAL, ncand > nlog ? ncand : nlog);
    if (!hidx || !hlidx || !hx || !htau || !hval || !hlval || !hlx || !hltau || !lidx || !lx || !ltau || !val)
        return krn_cuda_fail(ctx, OVT_ENOMEM);
    if (ncand > 0 && ((rc = krn_dev_get(hidx, d->buf[DEV_SITE_IDX], ncand * sizeof *hidx)) ||
                      (rc = krn_dev_get(hx, d->buf[DEV_SITE_X], ncand * sizeof *hx)) ||
                      (rc = krn_dev_get(htau, d->buf[DEV_SITE_TAU], ncand * sizeof *htau))))
        return krn_cuda_fail(ctx, rc);
    if (nlog > 0) {
        for (size_t k = 0; k < nlog; k++)
            hlidx[k] = s.logged->entries[k].index;
        if ((rc = krn_dev_put(lidx, hlidx, nlog * sizeof *hlidx)))
            return krn_cuda_fail(ctx, rc);
        gather_kernel KRN_LAUNCH(nlog)(lx, ltau, lidx, nlog, x, n, *band, block);
        if ((rc = krn_dev_launched("log gather")) || (rc = krn_dev_get(hlx, lx, nlog * sizeof *hlx)) ||
            (rc = krn_dev_get(hltau, ltau, nlog * sizeof *hltau)))
            return krn_cuda_fail(ctx, rc);
    }
    cand.index = hidx;
    cand.x = hx;
    cand.tau = htau;
    cand.out = hval;
    logged.x = hlx;
    logged.tau = hltau;
    logged.out = hlval;
    if ((rc = krn_sparse_finish(ctx, &s, &cand, &logged)))
        return rc;
    /* settled candidates first, then the logged elements (REPLAY's order) */
    if (ncand > 0) {
        if ((rc = krn_dev_put(val, hval, ncand * sizeof *hval)))
            return krn_cuda_fail(ctx, rc);
        scatter_kernel KRN_LAUNCH(ncand)(out, (const uint64_t *)d->buf[DEV_SITE_IDX], val, ncand, n);
        if ((rc = krn_dev_launched("candidate scatter")))
            return krn_cuda_fail(ctx, rc);
    }
    if (nlog > 0) {
        if ((rc = krn_dev_put(val, hlval, nlog * sizeof *hlval)))
            return krn_cuda_fail(ctx, rc);
        scatter_kernel KRN_LAUNCH(nlog)(out, lidx, val, nlog, n);
        if ((rc = krn_dev_launched("log scatter")))
            return krn_cuda_fail(ctx, rc);
    }
    if (host_out && (rc = krn_dev_get(host_out, out, n * sizeof *out)))
        return krn_cuda_fail(ctx, rc);
    return 0;
}
