/* hash.h -- the 64-bit key hash used by the memory store (and its baseline
 * benchmark). Not for anything that must resist an attacker who can see the
 * table; each table's seed is random, so keys cannot be aimed at one chain
 * offline.
 *
 * Built on one step, the folded multiply: the 128-bit product of two words,
 * its halves xored. A key of up to 16 bytes is two (overlapping) words
 * folded together with the seed, a longer one is folded 16 bytes at a time
 * into the seed first; one more fold with the length spreads every input
 * bit over the result. Two multiplications deep for the short keys of the
 * common case, so a check that waits on its hash waits little.
 * fg__hash_inline is the same function, for a caller that hashes on every
 * check and should not pay a call for it. */
#ifndef FG_HASH_H
#define FG_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FG__HASH_K0 0x9e3779b97f4a7c15ull
#define FG__HASH_K1 0xbf58476d1ce4e5b9ull
#define FG__HASH_K2 0x94d049bb133111ebull

uint64_t fg__hash(const void *key, size_t len, uint64_t seed);
/* A table's seed: from the kernel's random source, else from the clock
 * and 'salt' (an address of the table's). */
uint64_t fg__hash_seed(const void *salt);

static inline uint64_t fg__hash_fold(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t fg__hash_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t fg__hash_load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t fg__hash_inline(const void *key, size_t len,
                                       uint64_t seed)
{
    const unsigned char *p = key;
    uint64_t a, b;
    seed ^= FG__HASH_K0;
    if (len <= 16) {
        /* Two words that together cover the key: overlapping loads rather
         * than a copy of a variable length. */
        if (len >= 8) {
            a = fg__hash_load64(p);
            b = fg__hash_load64(p + len - 8);
        } else if (len >= 4) {
            a = fg__hash_load32(p);
            b = fg__hash_load32(p + len - 4);
        } else if (len) {
            a = (uint64_t)p[0] << 16 | (uint64_t)p[len / 2] << 8 | p[len - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t n = len;
        for (; n > 16; p += 16, n -= 16)
            seed = fg__hash_fold(fg__hash_load64(p) ^ seed ^ FG__HASH_K1,
                                 fg__hash_load64(p + 8) ^ seed);
        a = fg__hash_load64(p + n - 16);
        b = fg__hash_load64(p + n - 8);
    }
    /* The seed enters both factors of every fold, so that no key made in
     * advance can zero one of them (and so lose the seed). */
    uint64_t h = fg__hash_fold(a ^ seed ^ FG__HASH_K1, b ^ seed);
    return fg__hash_fold(h ^ FG__HASH_K2, len ^ FG__HASH_K0);
}

#endif
