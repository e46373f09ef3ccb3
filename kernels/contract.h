#ifndef OVT_KERNELS_CONTRACT_H
#define OVT_KERNELS_CONTRACT_H

/* The numbers the numeric contract fixes (docs/numeric-contract.md,
 * docs/op-bounds.md): every party computes its bands and its reductions
 * with these, so changing one changes which logs verify. A leaf header:
 * it includes nothing and anything in kernels/ may include it. */

/* Reduction chunk length (docs/op-bounds.md, "the chunked order"): a sum
 * of K terms is split into ceil(K / KRN_GEMM_CHUNK) consecutive chunks.
 * 128 keeps the log under 2 bytes per 1,000 outputs up to K = 3072
 * (docs/bench-kernels.md). */
#define KRN_GEMM_CHUNK 128

/* The safety factor on every band: covers the rounding of the band's own
 * computation (norms, products) and the (1-u) denominators of the
 * propagation terms. */
#define KRN_BAND_MARGIN 1.0625

/* Contract version 2: every band is twice the margined bound,
 * tau = 2*M*delta, so that tau'/2 = M*delta' bounds the pairwise difference
 * delta with the margin's slack (docs/numeric-contract.md section 6). */
#define KRN_BAND_WIDTH (2.0 * KRN_BAND_MARGIN)

/* u = 2^-53, the FP64 unit roundoff. */
#define KRN_U 0x1p-53

/* The documented worst-case error of every libm the contract admits, in
 * ulps of the result (docs/op-bounds.md, section libm). */
#define KRN_LIBM_ULP 4

#endif
