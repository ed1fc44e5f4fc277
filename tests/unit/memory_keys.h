/* memory_keys.h -- helpers that the memory store's thread tests share. */
#ifndef FG_TEST_MEMORY_KEYS_H
#define FG_TEST_MEMORY_KEYS_H

#include <stdint.h>
#include <stdio.h>

/* A clock that reads the time *ctx and never moves by itself. */
static inline uint64_t still_clock(void *ctx)
{
    return *(const uint64_t *)ctx;
}

/* Key 'i': short keys live in the slot, every fifth is longer than 24 bytes
 * and lives in its own allocation, which moves and is freed with it. */
static inline size_t key_of(const char *prefix, uint64_t i, char *buf,
                            size_t len)
{
    int n = i % 5 == 0
                ? snprintf(buf, len, "%s:a-rather-long-key:%llu", prefix,
                           (unsigned long long)i)
                : snprintf(buf, len, "%s:%llu", prefix, (unsigned long long)i);
    return (size_t)n;
}

#endif
