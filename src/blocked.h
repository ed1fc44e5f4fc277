/* blocked.h -- the blocked-key cache of one event loop (pure, not shared):
 * fg_cache of floodgate.h, consulted by fg_check_set_async (check_set.c).
 *
 * When the store says 'cost' units of a key are refused until time T (a
 * refusal, or an allowed request that left nothing), every request for that
 * key with a cost at least as large would be refused until T too (others
 * can only consume more), so it is answered here without a round trip. T is
 * the decision's exact wait (retry_after_us, reset_us) counted from when the
 * store decided: the send itself for a decision on the caller's clock, else
 * the middle of the round trip (see fg__blocked_from_decision), so that the
 * probe sent when the block ends reaches the store once the unit is back.
 *
 * When a block ends, one request (the probe) goes to the store; requests
 * for the same key that arrive meanwhile wait for its answer instead of
 * stampeding the store: if the answer blocks the key again they are refused
 * from the new block; if it left room, that many units go to the store
 * unqueued and the request that takes the last one probes again. How many
 * requests are allowed does not change, only how many round trips it
 * takes. On Redis TIME the middle of the round trip is an estimate: with
 * uneven delays a block may end up to half a round trip after the unit
 * returned (a request in that gap is refused from the cache; the unit goes
 * to the probe that follows) or before it (the probe is refused: one more
 * round trip).
 *
 * Bounded: a fixed number of entries in 4-way sets; an entry evicted early
 * only costs a store round trip. Entries with a probe in flight are never
 * evicted (their waiters would be lost). */
#ifndef FG_BLOCKED_H
#define FG_BLOCKED_H

#include <stddef.h>
#include <stdint.h>

#include "floodgate.h"

typedef struct fg_cache fg__blocked;

/* A limiter's name in the cache, made by fg__blocked_ident_of: its low 32
 * bits are the limiter's own number (an entry answers only the limiter
 * that made it), its high 32 bits the hash of the limit's name, which
 * picks the entry's set together with the key. A reload makes new
 * limiters of the same limits: their keys go to the sets the old ones
 * used (the reload cleared them), so the table's pages in use stay the
 * same. Picked by the limiter's number, every reload would scatter the
 * same keys over fresh sets, and a large table (calloc'd: its pages are
 * resident only once written) would grow resident towards its whole size
 * however few keys it holds. */
typedef uint64_t fg__blocked_ident;

static inline fg__blocked_ident fg__blocked_ident_of(uint32_t name_hash,
                                                     uint32_t id)
{
    return (uint64_t)name_hash << 32 | id;
}

typedef struct fg__blocked_hit {
    uint64_t until_us; /* refused at least until then */
    uint64_t retry_us; /* what to tell clients: never earlier than true */
    uint64_t reset_us; /* fully available again then */
    uint64_t limit;
    uint64_t remaining; /* what the refusal that made the block said */
} fg__blocked_hit;

/* A request that can wait for a probe: a set's fg__node (floodgate.h);
 * 'next' links waiters. */
typedef struct fg__set_node fg__blocked_waiter;

enum {
    FG_BLOCKED_MISS = 0,  /* ask the store */
    FG_BLOCKED_HIT = 1,   /* refused: '*hit' filled */
    FG_BLOCKED_PROBE = 2, /* ask the store, then fg__blocked_resolve() */
    FG_BLOCKED_WAIT = 3   /* queued behind a probe: wait to be handed back */
};

/* A cache of at most 'entries' keys (rounded up to a multiple of 4);
 * 'seed' randomises the hash. NULL when out of memory. */
fg__blocked *fg__blocked_new(uint32_t entries, uint64_t seed);
void fg__blocked_free(fg__blocked *c);

/* Look 'key' of limit 'lim' up for 'cost' at 'now_us'. 'self' identifies
 * the request: it may become the probe, or (when 'may_wait') be queued. */
int fg__blocked_lookup(fg__blocked *c, fg__blocked_ident lim, const char *key,
                       size_t len, uint64_t cost, uint64_t now_us,
                       fg__blocked_waiter *self, int may_wait,
                       fg__blocked_hit *hit);

/* 1 and '*hit' filled when 'key' is known to be refused for 'cost' at
 * 'now_us'; else 0. Never probes nor waits. */
int fg__blocked_get(fg__blocked *c, fg__blocked_ident lim, const char *key,
                    size_t len, uint64_t cost, uint64_t now_us,
                    fg__blocked_hit *hit);

/* Remember that 'cost' units of 'key' are refused until 'hit->until_us'.
 * FG_OK, or FG_ENOMEM / FG_EBUSY (every way of its set has a probe in
 * flight): the cache is then unchanged. */
int fg__blocked_put(fg__blocked *c, fg__blocked_ident lim, const char *key,
                    size_t len, uint64_t cost, uint64_t now_us,
                    const fg__blocked_hit *hit);

/* 'room' of fg__blocked_resolve when the answer says nothing of it. */
#define FG_BLOCKED_NO_ROOM UINT64_MAX

/* The probe 'self' of 'key' has its answer: 'block' for 'cost', or NULL
 * when it gives no usable block; then 'refused' keeps the key's entry (the
 * next lookup probes again: one request at a time, no stampede), and 0
 * means the key has room: 'room' units (an allowed store decision's
 * 'remaining') go to the store unqueued and the request that takes the
 * last one probes again; with FG_BLOCKED_NO_ROOM the entry is forgotten
 * (everyone may ask). Returns the waiters, to be looked up again. */
fg__blocked_waiter *fg__blocked_resolve(fg__blocked *c, fg__blocked_ident lim,
                                        const char *key, size_t len,
                                        fg__blocked_waiter *self, uint64_t cost,
                                        uint64_t now_us,
                                        const fg__blocked_hit *block,
                                        int refused, uint64_t room);

/* Forget 'key' (it was reset in the store). An entry with a probe in
 * flight stays for its probe and waiters, but blocks nothing any more. */
void fg__blocked_forget(fg__blocked *c, fg__blocked_ident lim, const char *key,
                        size_t len);

/* Forget everything (the limits changed). Returns every waiter. */
fg__blocked_waiter *fg__blocked_clear(fg__blocked *c);

/* The block a store decision implies, if any: a refusal blocks 'cost' and
 * more until its retry time; an allowed decision that left nothing of a
 * fixed_window or token_bucket limit 'lim' blocks any cost until the next
 * unit frees up. 'sent_us' is when the check was sent, 'now_us' when the
 * answer came; the block runs from the instant the store decided (the send
 * for a decision on the caller's clock, else the middle of the round trip)
 * for the decision's exact microseconds. 1 with '*out' and '*block_cost'
 * filled, else 0. */
int fg__blocked_from_decision(const fg_limit *lim, const fg_decision *d,
                              uint64_t cost, uint64_t sent_us, uint64_t now_us,
                              fg__blocked_hit *out, uint64_t *block_cost);

/* The cache fg_limiter_set_cache gave 'l', or NULL (limiter.c). */
fg__blocked *fg__limiter_cache(const fg_limiter *l);

/* Entries that hold a key: blocking now, or blocked lately and not yet
 * dropped (a key's entry goes when the key is allowed again, forgotten or
 * cleared, or its way is taken for another key). Kept as entries come and
 * go, so reading it costs nothing. */
uint64_t fg__blocked_count(const fg__blocked *c);

#endif
