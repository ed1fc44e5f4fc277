/* blocked.h -- the blocked-key cache of one worker (pure, not shared).
 *
 * When the store refuses 'cost' units of a key until time T, every request
 * for that key with a cost at least as large would be refused until T too
 * (others can only consume more), so it is answered here without a round
 * trip. T is computed from the time the check was sent, minus the rounding
 * of retry_after_ms, so the cache never refuses a request the store would
 * have allowed. Bounded: a fixed number of entries in 4-way sets; an entry
 * evicted early only costs a store round trip. */
#ifndef FG_SERVE_BLOCKED_H
#define FG_SERVE_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

typedef struct fg__blocked fg__blocked;

typedef struct fg__blocked_hit {
    uint64_t until_us; /* refused at least until then */
    uint64_t retry_us; /* what to tell clients: never earlier than true */
    uint64_t reset_us; /* fully available again then */
    uint64_t limit;
} fg__blocked_hit;

/* A cache of at most 'entries' keys (rounded up to a multiple of 4);
 * 'seed' randomises the hash. NULL when out of memory. */
fg__blocked *fg__blocked_new(uint32_t entries, uint64_t seed);
void fg__blocked_free(fg__blocked *c);

/* 1 and '*hit' filled when 'key' of limit 'lim' is known to be refused for
 * 'cost' at 'now_us'; else 0. */
int fg__blocked_get(fg__blocked *c, uint32_t lim, const char *key, size_t len,
                    uint64_t cost, uint64_t now_us, fg__blocked_hit *hit);

/* Remember that 'cost' units of 'key' are refused until 'hit->until_us'.
 * FG_OK, or FG_ENOMEM (the cache is unchanged). */
int fg__blocked_put(fg__blocked *c, uint32_t lim, const char *key, size_t len,
                    uint64_t cost, uint64_t now_us, const fg__blocked_hit *hit);

/* Forget everything (the limits changed). */
void fg__blocked_clear(fg__blocked *c);

/* Entries that are still blocking at 'now_us'. */
uint64_t fg__blocked_count(const fg__blocked *c, uint64_t now_us);

#endif
