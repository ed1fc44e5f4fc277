/* hash.c -- the out-of-line form of the key hash (see hash.h), and the
 * seeds of the tables that use it. */
#include <sys/random.h>
#include <time.h>

#include "hash.h"

uint64_t fg__hash_seed(const void *salt)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    /* The kernel's pool not ready yet (early boot): the best at hand. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return fg__hash_fold(seed ^ FG__HASH_K1,
                         (uint64_t)(uintptr_t)salt ^ FG__HASH_K0);
}

uint64_t fg__hash(const void *key, size_t len, uint64_t seed)
{
    return fg__hash_inline(key, len, seed);
}
