#ifndef OVT_KERNELS_CUDA_DISPATCH_H
#define OVT_KERNELS_CUDA_DISPATCH_H

/* Internal to kernels/: each op of kernels/ops.h, once its arguments are
 * checked, hands over to its cuda twin (kernels/cuda/cuda.h) when the ctx's
 * backend is cuda. Without CUDA no cuda ctx can exist (krn_ctx_new refuses
 * it with "built without CUDA"), so the hand-over compiles away. */

#include "kernels/site.h"

#ifdef OVT_HAVE_CUDA
#include "kernels/cuda/cuda.h"
#define KRN_CUDA_DISPATCH(ctx, call)                                                               \
    do {                                                                                           \
        if (krn_ctx_config(ctx)->backend == KRN_BACKEND_CUDA)                                      \
            return call;                                                                           \
    } while (0)
#else
#define KRN_CUDA_DISPATCH(ctx, call) ((void)0)
#endif

#endif
