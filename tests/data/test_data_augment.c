/* Random crop and flip of a step's images (data/augment.h): the transform
 * on small images against outputs written out by hand, the draws against
 * known answers of tests/kernels/rng_reference.py (an independent
 * implementation of krn_rng), and a batch transformed sample by sample.
 * The batches of whole runs against Python: test_trn_augment.py. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data/augment.h"

/* The 1 x 4 x 4 image with pixel (y, x) = 4y + x + 1 (1..16), transformed
 * by d, against want (row by row). */
static void check_4x4(data_augment_draw d, const float want[16])
{
    float in[16], out[16];
    for (int k = 0; k < 16; k++)
        in[k] = (float)(k + 1);
    memset(out, 0xff, sizeof out);
    data_augment_image(out, in, 1, 4, 4, d);
    CHECK_MSG(!memcmp(out, want, sizeof out), "dx %d dy %d flip %u: row 0 %g %g %g %g", d.dx, d.dy, d.flip,
              (double)out[0], (double)out[1], (double)out[2], (double)out[3]);
}

static void test_by_hand(void)
{
    /* no shift, no flip: the image itself */
    const float same[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    check_4x4((data_augment_draw){0, 0, 0}, same);
    /* dx = 1: out(y, x) = in(y, x + 1), the last column outside */
    const float right[16] = {2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12, 0, 14, 15, 16, 0};
    check_4x4((data_augment_draw){1, 0, 0}, right);
    /* dy = -1: out(y, x) = in(y - 1, x), the first row outside */
    const float down[16] = {0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    check_4x4((data_augment_draw){0, -1, 0}, down);
    /* the flip alone: every row reversed */
    const float mirror[16] = {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9, 16, 15, 14, 13};
    check_4x4((data_augment_draw){0, 0, 1}, mirror);
    /* dx = dy = 1 and the flip: out(y, x) = in(y + 1, 4 - x); torchvision's
     * crop of the image padded by 1 at offset (2, 2) is rows 1..3 and
     * columns 1..3 with a zero row and column after them, then flipped */
    const float both[16] = {0, 8, 7, 6, 0, 12, 11, 10, 0, 16, 15, 14, 0, 0, 0, 0};
    check_4x4((data_augment_draw){1, 1, 1}, both);
    /* dx = -2, dy = 2: out(y, x) = in(y + 2, x - 2) */
    const float corner[16] = {0, 0, 9, 10, 0, 0, 13, 14, 0, 0, 0, 0, 0, 0, 0, 0};
    check_4x4((data_augment_draw){-2, 2, 0}, corner);
    /* a shift of the whole side leaves nothing */
    const float none[16] = {0};
    check_4x4((data_augment_draw){0, 4, 0}, none);

    /* two channels of 2 x 3 (H != W), dx = -1 and the flip: out(c, y, x) =
     * in(c, y, 1 - x), column 2 outside; both channels alike */
    const float in[12] = {1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16};
    const float want[12] = {2, 1, 0, 5, 4, 0, 12, 11, 0, 15, 14, 0};
    float out[12];
    data_augment_image(out, in, 2, 2, 3, (data_augment_draw){-1, 0, 1});
    CHECK_MEM(out, want, sizeof out);
    /* values pass unchanged, whatever their bits (no arithmetic) */
    const float odd[4] = {0x1.fffffep-9f, -0.0f, 1e-45f, 3.0f};
    float moved[4];
    data_augment_image(moved, odd, 1, 2, 2, (data_augment_draw){0, 0, 1});
    CHECK_MEM(&moved[0], &odd[1], 4);
    CHECK_MEM(&moved[1], &odd[0], 4);
    CHECK_MEM(&moved[2], &odd[3], 4);
    CHECK_MEM(&moved[3], &odd[2], 4);
}

/* The draws of seed 7, step 3, padding 2: (dx, dy, flip) of samples 0..5
 * from rng_reference.py's below(7, 3, 4, 3j + k, n) (purpose 4 =
 * KRN_RNG_AUGMENT; n = 5 for k = 0, 1 less 2, n = 2 for k = 2). */
static void test_draws(void)
{
    const int32_t want[6][3] = {{0, 1, 0}, {2, 1, 0}, {-2, 0, 1}, {-2, 2, 0}, {-2, -1, 0}, {-2, 0, 0}};
    for (uint32_t j = 0; j < 6; j++) {
        data_augment_draw d = data_augment_draw_of(7, 3, j, 2, 1);
        CHECK_MSG(d.dx == want[j][0] && d.dy == want[j][1] && (int32_t)d.flip == want[j][2],
                  "sample %u: (%d, %d, %u), the reference (%d, %d, %d)", j, d.dx, d.dy, d.flip, want[j][0],
                  want[j][1], want[j][2]);
        /* off means no draw: crop 0 keeps dx = dy = 0, flip off keeps 0 */
        data_augment_draw c = data_augment_draw_of(7, 3, j, 2, 0), f = data_augment_draw_of(7, 3, j, 0, 1);
        CHECK(c.dx == d.dx && c.dy == d.dy && c.flip == 0);
        CHECK(f.dx == 0 && f.dy == 0 && f.flip == d.flip);
    }
    /* over many samples every offset in -P..P and both flips occur, no other */
    uint32_t seen[2][9] = {{0}}, flips = 0;
    for (uint32_t j = 0; j < 4000; j++) {
        data_augment_draw d = data_augment_draw_of(1, 5, j, 4, 1);
        CHECK(d.dx >= -4 && d.dx <= 4 && d.dy >= -4 && d.dy <= 4 && d.flip <= 1);
        seen[0][d.dx + 4]++;
        seen[1][d.dy + 4]++;
        flips += d.flip;
    }
    for (int k = 0; k < 9; k++)
        CHECK_MSG(seen[0][k] > 300 && seen[1][k] > 300, "offset %d: %u and %u of 4000", k - 4, seen[0][k],
                  seen[1][k]);
    CHECK_MSG(flips > 1800 && flips < 2200, "%u flips of 4000", flips);
}

/* A batch is transformed sample by sample, each by its own draw; crop and
 * flip both 0 leave it alone; a dim that is not C x H x W is refused. */
static void test_batch(void)
{
    enum { B = 5, C = 2, H = 3, W = 4, D = C * H * W };
    float x[B * D], before[B * D];
    int32_t y[B] = {0, 1, 2, 3, 4};
    for (int k = 0; k < B * D; k++)
        x[k] = (float)(k % 251) / 256.0f;
    memcpy(before, x, sizeof x);
    data_sample_batch b = {.B = B, .dim = D, .x = x, .y = y};
    CHECK(data_sample_batch_augment(&b, 9, 2, C, H, W, 0, 0) == 0);
    CHECK_MEM(x, before, sizeof x);
    CHECK(data_sample_batch_augment(&b, 9, 2, C, H, W, 1, 1) == 0);
    int changed = 0;
    for (uint32_t j = 0; j < B; j++) {
        float want[D];
        data_augment_image(want, before + j * D, C, H, W, data_augment_draw_of(9, 2, j, 1, 1));
        CHECK_MEM(x + j * D, want, sizeof want);
        changed += memcmp(want, before + j * D, sizeof want) != 0;
    }
    CHECK(changed > 0);
    CHECK(data_sample_batch_augment(&b, 9, 2, C, W, W, 1, 0) == OVT_EINVAL);
}

int main(void)
{
    CHECK_RUN(test_by_hand());
    CHECK_RUN(test_draws());
    CHECK_RUN(test_batch());
    return check_done();
}
