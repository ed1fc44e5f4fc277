/* hash.c -- a small 64-bit hash: 8 bytes at a time, multiply-xorshift mixing,
 * and the splitmix64 finalizer so every input bit reaches every output bit. */
#include <string.h>

#include "hash.h"

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t fg__hash(const void *key, size_t len, uint64_t seed)
{
    const unsigned char *p = key;
    uint64_t h = seed ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 32;
        p += 8;
        len -= 8;
    }
    uint64_t w = 0;
    if (len)
        memcpy(&w, p, len);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return mix(h);
}
