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
    /* The last 0..7 bytes, as a little-endian load of them would give, by
     * two overlapping 4-byte loads (or three single bytes): a memcpy of a
     * variable length compiles to a byte loop and a reload that stalls. */
    uint64_t w = 0;
    if (len >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + len - 4, 4);
        w = lo | (uint64_t)hi << (8 * (len - 4));
    } else if (len) {
        w = (uint64_t)p[0] | (uint64_t)p[len / 2] << (8 * (len / 2)) |
            (uint64_t)p[len - 1] << (8 * (len - 1));
    }
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    return mix(h);
}
