#ifndef OVT_TESTS_CHECK_H
#define OVT_TESTS_CHECK_H

/* A minimal test harness: CHECK records a pass or a failure (with file and
 * line), check_done() prints "N passed, N failed" and returns the exit
 * status, so a failing check always fails the ctest case. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_passes, check_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            check_passes++;                                                         \
        } else {                                                                    \
            check_failures++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                 \
    do {                                                                     \
        if (cond) {                                                          \
            check_passes++;                                                  \
        } else {                                                             \
            check_failures++;                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                               \
    CHECK_MSG((uint64_t)(a) == (uint64_t)(b), "%" PRIu64 " != %" PRIu64, (uint64_t)(a), \
              (uint64_t)(b))

#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_passes, check_failures);
    return check_failures == 0 && check_passes > 0 ? 0 : 1;
}

#endif
