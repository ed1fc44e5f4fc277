/* hash.c -- the out-of-line form of the key hash (see hash.h). */
#include "hash.h"

uint64_t fg__hash(const void *key, size_t len, uint64_t seed)
{
    return fg__hash_inline(key, len, seed);
}
