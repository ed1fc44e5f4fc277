/* harness.h -- the in-tree test harness.
 *
 * CHECK* macros print the file, line and both values on failure and count
 * passes and failures; TEST_DONE() prints "N passed, N failed" as the last
 * line and returns the exit status. */
#ifndef FG_HARNESS_H
#define FG_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static unsigned long th_passed, th_failed;

/* 1 when built with AddressSanitizer, which makes each check about four
 * times slower: tests bounded in time do less work then. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#ifndef TEST_UNDER_ASAN
#define TEST_UNDER_ASAN 0
#endif

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            th_passed++;                                                       \
        } else {                                                               \
            th_failed++;                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long th_a = (long long)(a), th_b = (long long)(b);                \
        if (th_a == th_b) {                                                    \
            th_passed++;                                                       \
        } else {                                                               \
            th_failed++;                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n",          \
                    __FILE__, __LINE__, #a, #b, th_a, th_b);                   \
        }                                                                      \
    } while (0)

#define CHECK_STR(a, b)                                                        \
    do {                                                                       \
        const char *th_a = (a), *th_b = (b);                                   \
        if (th_a && th_b && strcmp(th_a, th_b) == 0) {                         \
            th_passed++;                                                       \
        } else {                                                               \
            th_failed++;                                                       \
            fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",      \
                    __FILE__, __LINE__, #a, #b, th_a ? th_a : "(null)",        \
                    th_b ? th_b : "(null)");                                   \
        }                                                                      \
    } while (0)

#define TEST_DONE()                                                            \
    (printf("%lu passed, %lu failed\n", th_passed, th_failed),                 \
     th_failed ? 1 : 0)

#endif
