/* The exact mean of S shard values (kernels/shard.h), without MPI: the keys
 * and quanta at their edges, the terms' ties to even, invariance under
 * permutation and regrouping of the shards on adversarial data
 * (tests/support/shard_data.h), exactness within 29 - c binades against an
 * independently checked exact sum, and the bits lost just below. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/grid.h"
#include "kernels/shard.h"
#include "support/shard_data.h"

static bool same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Knuth's TwoSum: s + e == a + b exactly. */
static double two_sum(double a, double b, double *e)
{
    double s = a + b, bb = s - a;
    *e = (a - (s - bb)) + (b - bb);
    return s;
}

static void test_keys(void)
{
    CHECK(krn_shard_key(0.0f) == 1);
    CHECK(krn_shard_key(-0.0f) == 1);
    CHECK(krn_shard_key(0x1p-149f) == 1);
    CHECK(krn_shard_key(-0x1.fffffcp-127f) == 1); /* largest subnormal */
    CHECK(krn_shard_key(FLT_MIN) == 1);           /* 2^-126: exponent field 1 */
    CHECK(krn_shard_key(0x1.fffffep-126f) == 1);
    CHECK(krn_shard_key(0x1p-125f) == 2);
    CHECK(krn_shard_key(1.0f) == 127);
    CHECK(krn_shard_key(-1.5f) == 127);
    CHECK(krn_shard_key(FLT_MAX) == 254);
    CHECK(krn_shard_key(INFINITY) == 255);
    CHECK(krn_shard_key(-INFINITY) == 255);
    CHECK(krn_shard_key(NAN) == 255);
    /* |g| < 2^(key - 126) and, for normal g, |g| >= 2^(key - 127) */
    size_t bad = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        uint64_t r = tsd_rand(7, 1, i);
        uint32_t u = (uint32_t)r;
        float g;
        memcpy(&g, &u, sizeof g);
        if (!isfinite(g))
            continue;
        int k = krn_shard_key(g);
        if (!(fabs((double)g) < ldexp(1.0, k - 126)) || (k > 1 && !(fabs((double)g) >= ldexp(1.0, k - 127))))
            bad++;
    }
    CHECK_EQ_U64(bad, 0);
}

static void test_quanta(void)
{
    /* c = ceil(log2 S): 1 -> 0, 2 -> 1, 3 and 4 -> 2, 5 .. 8 -> 3 */
    static const struct {
        uint32_t S;
        int c;
    } cs[] = {{1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {6, 3}, {7, 3}, {8, 3}, {9, 4}, {1024, 10}, {1025, 11}};
    for (size_t j = 0; j < sizeof cs / sizeof cs[0]; j++)
        for (int k = 1; k <= 254; k++)
            CHECK_MSG(krn_shard_quantum((uint8_t)k, cs[j].S) == ldexp(1.0, k - 179 + cs[j].c), "key %d, S %u", k,
                      cs[j].S);
    CHECK(krn_shard_quantum(1, 1) == 0x1p-178);  /* zeros and subnormals, one shard */
    CHECK(krn_shard_quantum(1, 3) == 0x1p-176);  /* S = 3 rounds up to 4 */
    CHECK(krn_shard_quantum(1, 6) == 0x1p-175);  /* S = 6 rounds up to 8 */
    CHECK(krn_shard_quantum(254, 6) == 0x1p78);
    CHECK(krn_shard_quantum(3, 6) == krn_shard_quantum(3, 8));
    CHECK(krn_shard_quantum(3, 3) == krn_shard_quantum(3, 4));
    CHECK(krn_shard_quantum(3, 3) == 2 * krn_shard_quantum(3, 2));
    /* every FP32 subnormal is a multiple of key 1's quantum: kept exactly */
    for (uint32_t S = 1; S <= 8; S++) {
        double q = krn_shard_quantum(1, S);
        CHECK(krn_shard_term(0x1p-149f, q) == 0x1p-149);
        CHECK(krn_shard_term(-0x1.fffffcp-127f, q) == -0x1.fffffcp-127);
    }
}

static void test_terms(void)
{
    double q = 0x1p-10;
    /* ties to even, in units of q */
    CHECK(krn_shard_term(0x1.8p-10f, q) == 2 * q);  /* 1.5 -> 2 */
    CHECK(krn_shard_term(0x1.4p-9f, q) == 2 * q);   /* 2.5 -> 2 */
    CHECK(krn_shard_term(0x1.cp-9f, q) == 4 * q);   /* 3.5 -> 4 */
    CHECK(krn_shard_term(-0x1.8p-10f, q) == -2 * q);
    CHECK(krn_shard_term(0x1p-11f, q) == 0);        /* 0.5 -> 0 */
    CHECK(krn_shard_term(0x1.8p-11f, q) == q);      /* 0.75 -> 1 */
    CHECK(krn_shard_term(0x1.0p-8f, q) == 4 * q);   /* multiples stay */
    /* a small negative value becomes -0, which adds to +0 as +0 */
    double t = krn_shard_term(-0x1p-30f, q);
    CHECK(t == 0 && signbit(t));
    CHECK(!signbit(0.0 + t));
}

/* Shards of the adversarial data: g[s] for s < S, n elements each. */
static float **make_shards(uint64_t seed, uint32_t S, size_t n)
{
    float **g = calloc(S, sizeof *g);
    for (uint32_t s = 0; s < S; s++) {
        g[s] = malloc(n * sizeof *g[s]);
        for (size_t i = 0; i < n; i++)
            g[s][i] = tsd_value(seed, S, s, i);
    }
    return g;
}

static void free_shards(float **g, uint32_t S)
{
    for (uint32_t s = 0; s < S; s++)
        free(g[s]);
    free(g);
}

/* The terms of element i added as a balanced tree over shards lo .. hi-1. */
static double tree_sum(const float *const *g, uint32_t lo, uint32_t hi, size_t i, double q)
{
    if (hi - lo == 1)
        return krn_shard_term(g[lo][i], q);
    uint32_t mid = lo + (hi - lo) / 2;
    return tree_sum(g, lo, mid, i, q) + tree_sum(g, mid, hi, i, q);
}

static void test_order(uint32_t S)
{
    size_t n = 20000;
    float **g = make_shards(11, S, n);
    const float **perm = calloc(S, sizeof *perm);
    size_t moved = 0, regrouped = 0, lost_bits = 0, ties = 0, zeros = 0, bad_zero = 0, bad_tie = 0;
    for (size_t i = 0; i < n; i++) {
        double mean = krn_shard_mean((const float *const *)g, S, i);
        CHECK(isfinite(mean));
        /* 8 permutations: Fisher-Yates from the element's own stream */
        for (int p = 0; p < 8; p++) {
            for (uint32_t s = 0; s < S; s++)
                perm[s] = g[s];
            for (uint32_t s = S - 1; s > 0; s--) {
                uint32_t j = (uint32_t)(tsd_rand(99, (uint64_t)p, i * 64 + s) % (s + 1));
                const float *x = perm[s];
                perm[s] = perm[j];
                perm[j] = x;
            }
            if (!same_bits(krn_shard_mean(perm, S, i), mean))
                moved++;
        }
        /* regrouping: the same terms added as a tree (pairs first), in
         * reverse, and as two halves summed apart (two ranks) */
        uint8_t key = 1;
        for (uint32_t s = 0; s < S; s++)
            key = krn_shard_key(g[s][i]) > key ? krn_shard_key(g[s][i]) : key;
        double q = krn_shard_quantum(key, S);
        double rev = 0, half[2] = {0, 0};
        for (uint32_t s = S; s-- > 0;)
            rev += krn_shard_term(g[s][i], q);
        for (uint32_t s = 0; s < S; s++)
            half[s >= S / 2] += krn_shard_term(g[s][i], q);
        double tree = 0.0 + tree_sum((const float *const *)g, 0, S, i, q);
        if (!same_bits(tree / (double)S, mean) || !same_bits(rev / (double)S, mean) ||
            !same_bits((half[1] + half[0]) / (double)S, mean))
            regrouped++;
        for (uint32_t s = 0; s < S; s++)
            if (krn_shard_term(g[s][i], q) != (double)g[s][i])
                lost_bits++;
        if (i % TSD_KINDS == TSD_TIE && S > 1) {
            /* the mean is exactly an FP32 midpoint, and rounds to the even side */
            krn_grid_pos pos;
            CHECK(krn_grid_locate(mean, 32, &pos) == 0);
            if (pos.dist != 0)
                bad_tie++;
            else {
                ties++;
                uint32_t u;
                float r = krn_grid_round(mean, 32);
                memcpy(&u, &r, sizeof u);
                if ((u & 1) != 0 || (r != pos.below && r != pos.above))
                    bad_tie++;
            }
        }
        if (mean == 0) {
            zeros++;
            if (signbit(mean))
                bad_zero++; /* a zero mean is +0 whatever the zeros' signs */
        }
    }
    CHECK_MSG(moved == 0, "S %u: %zu permuted means differ", S, moved);
    CHECK_MSG(regrouped == 0, "S %u: %zu regrouped means differ", S, regrouped);
    CHECK_MSG(bad_tie == 0, "S %u: %zu tie elements are not ties", S, bad_tie);
    CHECK_EQ_U64(bad_zero, 0);
    CHECK_MSG(S == 1 || ties > 1000, "S %u: %zu ties", S, ties);
    CHECK_MSG(zeros > 1000, "S %u: %zu zero means", S, zeros);
    /* the data does make the quantum drop bits (WIDE, CANCEL, EDGE) */
    CHECK_MSG(S == 1 || lost_bits > 1000, "S %u: %zu terms lost bits", S, lost_bits);
    free(perm);
    free_shards(g, S);
}

/* Exponents within 29 - c binades of the largest: every term is its value,
 * the FP64 sum is exact (each addition's TwoSum error is zero, and the long
 * double sum agrees where long double holds 64 bits), and the mean is that
 * exact sum divided once, correctly rounded. One binade further, an odd
 * mantissa is rounded to a multiple of q (bits are lost). */
static void test_exact(uint32_t S)
{
    int c = tsd_ceil_log2(S);
    size_t n = 20000, inexact = 0, wrong = 0, kept = 0, not_lost = 0;
    float *v = malloc(S * sizeof *v);
    const float **g = malloc(S * sizeof *g);
    for (size_t i = 0; i < n; i++) {
        uint64_t re = tsd_rand(5, S, i);
        bool subnormal = i % 16 == 0;
        int emax = (int)(re % 200) - 100;
        for (uint32_t s = 0; s < S; s++) {
            uint64_t r = tsd_rand(6, S * 1000 + s, i);
            if (subnormal)
                v[s] = (float)ldexp((double)((r >> 8) % (1u << 23)) * ((r >> 63) ? -1 : 1), -149);
            else if (s == i % S)
                v[s] = tsd_normal(r, emax, emax); /* the largest */
            else
                v[s] = (r >> 50) % 8 == 0 ? ((r >> 3) & 1 ? -0.0f : 0.0f) : tsd_normal(r, emax - (29 - c), emax);
            g[s] = &v[s];
        }
        double mean = krn_shard_mean(g, S, 0);
        uint8_t key = 1;
        for (uint32_t s = 0; s < S; s++)
            key = krn_shard_key(v[s]) > key ? krn_shard_key(v[s]) : key;
        double q = krn_shard_quantum(key, S), sum = 0, err;
        long double lsum = 0;
        for (uint32_t s = 0; s < S; s++) {
            if (krn_shard_term(v[s], q) != (double)v[s])
                wrong++;
            sum = two_sum(sum, (double)v[s], &err);
            if (err != 0)
                inexact++;
            lsum += (long double)v[s];
        }
        if (LDBL_MANT_DIG >= 64 && (long double)sum != lsum)
            inexact++;
        if (!same_bits(mean, sum / (double)S) && !(mean == 0 && sum == 0))
            wrong++;
        if ((S & (S - 1)) == 0 && mean * (double)S != sum)
            wrong++;
        kept++;
        /* one binade lower, with the last mantissa bit set: not a multiple
         * of q, so the term differs from the value (by q/2 at most) */
        int e = ilogb(v[i % S]);
        if (!subnormal && e - (30 - c) >= -126) {
            double odd = 1.0 + ldexp((double)(((re >> 30) & 0x7fffff) | 1), -23);
            float low = (float)ldexp(odd, e - (30 - c));
            double t = krn_shard_term(low, q);
            if (t == (double)low || fabs(t - (double)low) > q / 2 || fmod(t, q) != 0)
                not_lost++;
        }
    }
    CHECK_MSG(wrong == 0 && inexact == 0, "S %u: %zu wrong, %zu inexact of %zu", S, wrong, inexact, kept);
    CHECK_EQ_U64(not_lost, 0);
    free(g);
    free(v);
}

int main(void)
{
    CHECK_RUN(test_keys());
    CHECK_RUN(test_quanta());
    CHECK_RUN(test_terms());
    static const uint32_t Ss[] = {1, 2, 3, 4, 6, 8};
    for (size_t j = 0; j < sizeof Ss / sizeof Ss[0]; j++) {
        CHECK_RUN(test_order(Ss[j]));
        CHECK_RUN(test_exact(Ss[j]));
    }
    return check_done();
}
