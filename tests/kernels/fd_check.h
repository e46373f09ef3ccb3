#ifndef OVT_TESTS_KERNELS_FD_CHECK_H
#define OVT_TESTS_KERNELS_FD_CHECK_H

/* Shared by test_ops_grad and test_ops_llama: a backward op's gradient
 * against central finite differences of its forward's scalar loss
 * (loss = sum out*R for a random R, which is then the backward's dout).
 * Tolerances are loose (FP32 outputs, step h = 2^-7). Include check.h
 * first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* One op's forward as a function of its current inputs: the scalar loss. */
typedef double (*loss_fn)(void *ud);

static double dot_r(const float *out, const float *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)out[i] * (double)r[i];
    return s;
}

/* Compares grad (analytic) with central differences of loss in up to 10
 * elements of x spread over the tensor. */
static void fd_check(const char *what, float *x, size_t n, const float *grad, loss_fn loss, void *ud)
{
    size_t step = n > 10 ? n / 10 : 1;
    for (size_t j = (n > 10 ? 3 % n : 0); j < n; j += step) {
        float x0 = x[j];
        float h = 0x1p-7f * fmaxf(1.0f, fabsf(x0));
        x[j] = x0 + h;
        double lp = loss(ud);
        float xp = x[j];
        x[j] = x0 - h;
        double lm = loss(ud);
        float xm = x[j];
        x[j] = x0;
        double num = (lp - lm) / ((double)xp - (double)xm), ana = grad[j];
        double tol = 2e-2 * (fabs(ana) + fabs(num)) + 2e-3;
        CHECK_MSG(fabs(num - ana) <= tol, "%s[%zu]: analytic %.6g, finite difference %.6g", what, j,
                  ana, num);
    }
}

#define RUN(call)                                                   \
    do {                                                            \
        int rc_ = (call);                                           \
        if (rc_ != 0) {                                             \
            fprintf(stderr, "%s: %s\n", #call, ovt_errmsg());       \
            exit(1);                                                \
        }                                                           \
    } while (0)

#endif
