/* Random crop with padding and horizontal flip of a step's images (see
 * augment.h). */
#include "data/augment.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/rng.h"

data_augment_draw data_augment_draw_of(uint64_t seed, uint64_t step, uint32_t j, uint32_t crop, uint32_t flip)
{
    data_augment_draw d = {0, 0, 0};
    uint64_t k = 3 * (uint64_t)j;
    if (crop) {
        d.dx = (int32_t)krn_rng_below(seed, step, KRN_RNG_AUGMENT, k, 2 * (uint64_t)crop + 1) - (int32_t)crop;
        d.dy = (int32_t)krn_rng_below(seed, step, KRN_RNG_AUGMENT, k + 1, 2 * (uint64_t)crop + 1) - (int32_t)crop;
    }
    if (flip)
        d.flip = (uint32_t)krn_rng_below(seed, step, KRN_RNG_AUGMENT, k + 2, 2);
    return d;
}

void data_augment_image(float *out, const float *in, uint32_t C, uint32_t H, uint32_t W, data_augment_draw d)
{
    for (uint32_t c = 0; c < C; c++) {
        const float *src = in + (size_t)c * H * W;
        float *dst = out + (size_t)c * H * W;
        for (uint32_t y = 0; y < H; y++) {
            int64_t sy = (int64_t)y + d.dy;
            for (uint32_t x = 0; x < W; x++) {
                int64_t sx = (int64_t)(d.flip ? W - 1 - x : x) + d.dx;
                int inside = sy >= 0 && sy < (int64_t)H && sx >= 0 && sx < (int64_t)W;
                dst[(size_t)y * W + x] = inside ? src[(size_t)sy * W + (size_t)sx] : 0.0f;
            }
        }
    }
}

int data_sample_batch_augment(data_sample_batch *b, uint64_t seed, uint64_t step, uint32_t C, uint32_t H,
                              uint32_t W, uint32_t crop, uint32_t flip)
{
    if (!crop && !flip)
        return 0;
    if ((uint64_t)C * H * W != b->dim)
        return ovt_fail(OVT_EINVAL, "augmentation of %u features as images of %u x %u x %u: the sizes differ",
                        b->dim, C, H, W);
    float *img = malloc((size_t)b->dim * sizeof(float));
    if (!img)
        return ovt_fail(OVT_ENOMEM, "out of memory for an image of %u features", b->dim);
    for (uint32_t j = 0; j < b->B; j++) {
        float *x = b->x + (size_t)j * b->dim;
        memcpy(img, x, (size_t)b->dim * sizeof(float));
        data_augment_image(x, img, C, H, W, data_augment_draw_of(seed, step, j, crop, flip));
    }
    free(img);
    return 0;
}
