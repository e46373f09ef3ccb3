#ifndef OVT_TESTS_CHECK_H
#define OVT_TESTS_CHECK_H

/* A minimal test harness. A test program's main runs its tests with
 * CHECK_RUN(test_name(args)); CHECK records a pass or a failure with the
 * file, the line and the test it failed in; check_done() prints "N passed,
 * N failed" and the names of the tests that failed, and returns the exit
 * status, so a failing check always fails the ctest case.
 *
 * One test by name: OVT_CHECK_ONLY=test_name (or a comma-separated list)
 * runs only those tests of a program, e.g.
 *   OVT_CHECK_ONLY=test_random build/tests/kernels/test_grid
 * A name that matches no test of the program fails it (a typo is not a pass). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passes, check_failures;
static const char *check_current = "main"; /* the test running now */
static char check_failed_names[512];       /* the tests that failed, comma-separated */
static int check_selected_count;           /* tests run under OVT_CHECK_ONLY */

static inline void check_failed_in_current(void)
{
    check_failures++;
    size_t n = strlen(check_failed_names), k = strlen(check_current);
    const char *p = check_failed_names;
    while ((p = strstr(p, check_current)) != NULL) { /* listed once */
        if ((p == check_failed_names || p[-1] == ' ') && (p[k] == ',' || p[k] == '\0'))
            return;
        p += k;
    }
    if (n + k + 3 < sizeof check_failed_names)
        snprintf(check_failed_names + n, sizeof check_failed_names - n, "%s%s", n ? ", " : "", check_current);
}

#define CHECK(cond)                                                                                         \
    do {                                                                                                    \
        if (cond) {                                                                                         \
            check_passes++;                                                                                 \
        } else {                                                                                            \
            check_failed_in_current();                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed in %s: %s\n", __FILE__, __LINE__, check_current, #cond); \
        }                                                                                                   \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                             \
    do {                                                                                                 \
        if (cond) {                                                                                      \
            check_passes++;                                                                              \
        } else {                                                                                         \
            check_failed_in_current();                                                                   \
            fprintf(stderr, "%s:%d: CHECK failed in %s: %s: ", __FILE__, __LINE__, check_current, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                                \
            fputc('\n', stderr);                                                                         \
        }                                                                                                \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                               \
    CHECK_MSG((uint64_t)(a) == (uint64_t)(b), "%" PRIu64 " != %" PRIu64, (uint64_t)(a), \
              (uint64_t)(b))

#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

/* Whether the test called name (the text of a CHECK_RUN call up to its
 * parenthesis) runs: always, or when OVT_CHECK_ONLY lists it. */
static inline int check_selected(const char *call)
{
    const char *only = getenv("OVT_CHECK_ONLY");
    size_t k = strcspn(call, "(");
    if (!only || !only[0])
        return 1;
    for (const char *p = only; *p;) {
        size_t n = strcspn(p, ",");
        if (n == k && strncmp(p, call, k) == 0) {
            check_selected_count++;
            return 1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Runs one test: the call, with check_current naming it meanwhile. */
#define CHECK_RUN(call)                                                       \
    do {                                                                      \
        if (check_selected(#call)) {                                          \
            static char check_name_[96];                                      \
            snprintf(check_name_, sizeof check_name_, "%.*s", (int)strcspn(#call, "("), #call); \
            check_current = check_name_;                                      \
            call;                                                             \
            check_current = "main";                                           \
        }                                                                     \
    } while (0)

static inline int check_done(void)
{
    const char *only = getenv("OVT_CHECK_ONLY");
    if (only && only[0] && check_selected_count == 0) {
        fprintf(stderr, "OVT_CHECK_ONLY=%s names no test of this program\n", only);
        check_failures++;
    }
    printf("%d passed, %d failed\n", check_passes, check_failures);
    if (check_failed_names[0])
        printf("failed: %s\n", check_failed_names);
    return check_failures == 0 && check_passes > 0 ? 0 : 1;
}

#endif
