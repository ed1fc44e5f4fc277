/* hash.h -- the 64-bit key hash used by the memory store (and its baseline
 * benchmark). Not for anything that must resist an attacker who can see the
 * table; seeded per process so keys cannot be aimed at one chain offline. */
#ifndef FG_HASH_H
#define FG_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t fg__hash(const void *key, size_t len, uint64_t seed);

#endif
