/* hash.h -- the 64-bit key hash used by the memory store (and its baseline
 * benchmark). Not for anything that must resist an attacker who can see the
 * table; seeded per process so keys cannot be aimed at one chain offline.
 *
 * 8 bytes at a time, multiply-xorshift mixing, and the splitmix64 finalizer
 * so every input bit reaches every output bit. fg__hash_inline is the same
 * function, for a caller that hashes on every check and should not pay a
 * call for it. */
#ifndef FG_HASH_H
#define FG_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

uint64_t fg__hash(const void *key, size_t len, uint64_t seed);

static inline uint64_t fg__hash_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t fg__hash_inline(const void *key, size_t len,
                                       uint64_t seed)
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
    return fg__hash_mix(h);
}

#endif
