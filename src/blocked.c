/* blocked.c -- the blocked-key cache (pure; one per event loop, no locks). */
#include <string.h>

#include "blocked.h"
#include "store.h"
#include "alloc.h"

#define WAYS 4

typedef struct entry {
    uint64_t hash;
    uint64_t cost;
    uint64_t room; /* units that may still go to the store unqueued */
    fg__blocked_hit hit;
    uint32_t lim; /* the limiter's own half of its fg__blocked_ident; the
                   * name's half is in 'hash' */
    uint32_t len;
    char *key;                 /* NULL: free slot */
    fg__blocked_waiter *probe; /* the request asking the store, or NULL */
    int forgot; /* forgotten while 'probe' was out: its answer is older */
    fg__blocked_waiter *waiters, **tail;
} entry;

struct fg_cache {
    uint64_t seed;
    uint64_t used; /* entries holding a key */
    uint32_t nsets;
    entry *e;
    /* Bit s: set s holds a key. A clear (each reload) visits only those
     * sets: the whole table would stall the loop and make every page of it
     * resident (1.8 GB at the largest size). */
    uint64_t *busy;
};

/* FNV-1a over the limit's name (its hash, the high half of 'lim') and the
 * key, then a final mix so that the low bits used for the set index depend
 * on every byte. The limiter's own number is left out: a key's set must
 * not change when a reload makes its limiter anew (fg__blocked_ident says
 * why); in a set, entries of two limiters are told apart by it. */
static uint64_t hash(uint64_t seed, fg__blocked_ident lim, const char *key,
                     size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (int i = 4; i < 8; i++) {
        h ^= (lim >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

fg__blocked *fg__blocked_new(uint32_t entries, uint64_t seed)
{
    fg__blocked *c = fg__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->seed = seed;
    c->nsets = entries / WAYS + (entries % WAYS != 0);
    if (c->nsets == 0)
        c->nsets = 1;
    c->e = fg__calloc((size_t)c->nsets * WAYS, sizeof(entry));
    c->busy = fg__calloc(c->nsets / 64 + 1, sizeof(uint64_t));
    if (!c->e || !c->busy) {
        fg__free(c->e);
        fg__free(c->busy);
        fg__free(c);
        return NULL;
    }
    return c;
}

static void drop(fg__blocked *c, entry *e)
{
    int held = e->key != NULL;
    fg__free(e->key);
    memset(e, 0, sizeof(*e));
    if (!held)
        return;
    c->used--;
    size_t s = (size_t)(e - c->e) / WAYS;
    entry *set = &c->e[s * WAYS];
    int empty = 1;
    for (int i = 0; i < WAYS; i++)
        empty &= set[i].key == NULL;
    if (empty)
        c->busy[s / 64] &= ~(1ull << (s % 64));
}

/* Append the waiters of 'e' to '*list'. */
static void take_waiters(entry *e, fg__blocked_waiter **list)
{
    if (!e->waiters)
        return;
    *e->tail = *list;
    *list = e->waiters;
    e->waiters = NULL;
    e->tail = &e->waiters;
}

fg__blocked_waiter *fg__blocked_clear(fg__blocked *c)
{
    fg__blocked_waiter *all = NULL;
    for (size_t w = 0; w <= c->nsets / 64; w++)
        while (c->busy[w]) {
            size_t s = w * 64 + (size_t)__builtin_ctzll(c->busy[w]);
            for (int i = 0; i < WAYS; i++) {
                take_waiters(&c->e[s * WAYS + i], &all);
                drop(c, &c->e[s * WAYS + i]);
            }
        }
    return all;
}

void fg__blocked_free(fg__blocked *c)
{
    if (!c)
        return;
    fg__blocked_clear(c);
    fg__free(c->e);
    fg__free(c->busy);
    fg__free(c);
}

static entry *find(fg__blocked *c, uint64_t h, fg__blocked_ident lim,
                   const char *key, size_t len)
{
    entry *set = &c->e[(h % c->nsets) * WAYS];
    for (int i = 0; i < WAYS; i++) {
        entry *e = &set[i];
        if (e->key && e->hash == h && e->lim == (uint32_t)lim &&
            e->len == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

void fg__blocked_forget(fg__blocked *c, fg__blocked_ident lim, const char *key,
                        size_t len)
{
    entry *e = find(c, hash(c->seed, lim, key, len), lim, key, len);
    if (!e)
        return;
    if (e->probe) {
        /* Dropped, the entry would lose the waiters the probe's answer
         * hands back. That answer was asked before the forget (before a
         * refund, say): it must not block the key again. */
        e->hit.until_us = 0;
        e->room = 0;
        e->forgot = 1;
        return;
    }
    drop(c, e);
}

int fg__blocked_lookup(fg__blocked *c, fg__blocked_ident lim, const char *key,
                       size_t len, uint64_t cost, uint64_t now_us,
                       fg__blocked_waiter *self, int may_wait,
                       fg__blocked_hit *hit)
{
    entry *e = find(c, hash(c->seed, lim, key, len), lim, key, len);
    if (!e)
        return FG_BLOCKED_MISS;
    if (e->probe) {
        if (e->probe == self)
            return FG_BLOCKED_PROBE;
        if (!may_wait)
            return FG_BLOCKED_MISS;
        self->next = NULL;
        *e->tail = self;
        e->tail = &self->next;
        return FG_BLOCKED_WAIT;
    }
    if (now_us >= e->hit.until_us) {
        /* The last probe found room: that much goes to the store at once,
         * unqueued. */
        if (e->room > cost) {
            e->room -= cost;
            return FG_BLOCKED_MISS;
        }
        /* The block is over, or this request takes the last of the room:
         * it asks the store for everyone (its answer, likely a block,
         * settles the requests that come meanwhile). */
        e->room = 0;
        e->probe = self;
        e->waiters = NULL;
        e->tail = &e->waiters;
        return FG_BLOCKED_PROBE;
    }
    if (cost < e->cost)
        return FG_BLOCKED_MISS;
    *hit = e->hit;
    return FG_BLOCKED_HIT;
}

int fg__blocked_get(fg__blocked *c, fg__blocked_ident lim, const char *key,
                    size_t len, uint64_t cost, uint64_t now_us,
                    fg__blocked_hit *hit)
{
    entry *e = find(c, hash(c->seed, lim, key, len), lim, key, len);
    if (!e || now_us >= e->hit.until_us || cost < e->cost)
        return 0;
    *hit = e->hit;
    return 1;
}

int fg__blocked_put(fg__blocked *c, fg__blocked_ident lim, const char *key,
                    size_t len, uint64_t cost, uint64_t now_us,
                    const fg__blocked_hit *hit)
{
    if (hit->until_us <= now_us)
        return 0;
    uint64_t h = hash(c->seed, lim, key, len);
    entry *e = find(c, h, lim, key, len);
    if (!e) {
        /* A free or expired way, else the one that expires first; never
         * one with a probe in flight. */
        entry *set = &c->e[(h % c->nsets) * WAYS];
        e = NULL;
        for (int i = 0; i < WAYS; i++) {
            entry *s = &set[i];
            if (!s->key) {
                e = s;
                break;
            }
            if (s->probe)
                continue;
            if (s->hit.until_us <= now_us) {
                e = s;
                break;
            }
            if (!e || s->hit.until_us < e->hit.until_us)
                e = s;
        }
        if (!e)
            return FG_EBUSY;
        char *k = fg__malloc(len ? len : 1);
        if (!k)
            return FG_ENOMEM;
        memcpy(k, key, len);
        drop(c, e);
        c->used++;
        size_t s = (size_t)(e - c->e) / WAYS;
        c->busy[s / 64] |= 1ull << (s % 64);
        e->key = k;
        e->hash = h;
        e->lim = (uint32_t)lim;
        e->len = (uint32_t)len;
        e->tail = &e->waiters;
    }
    e->cost = cost;
    e->hit = *hit;
    e->room = 0;
    return 0;
}

fg__blocked_waiter *fg__blocked_resolve(fg__blocked *c, fg__blocked_ident lim,
                                        const char *key, size_t len,
                                        fg__blocked_waiter *self, uint64_t cost,
                                        uint64_t now_us,
                                        const fg__blocked_hit *block,
                                        int refused, uint64_t room)
{
    entry *e = find(c, hash(c->seed, lim, key, len), lim, key, len);
    if (!e || e->probe != self)
        return NULL;
    fg__blocked_waiter *w = NULL;
    take_waiters(e, &w);
    e->probe = NULL;
    e->room = 0;
    if (e->forgot) {
        drop(c, e);
    } else if (block && block->until_us > now_us) {
        e->cost = cost;
        e->hit = *block;
    } else if (refused) {
        e->hit.until_us = 0; /* over: the next request probes */
    } else if (room != FG_BLOCKED_NO_ROOM) {
        /* Allowed with 'room' units left. Forgetting the key would let the
         * waiters, and any burst of requests that follows (a flood that
         * paused and resumed), all go to the store at once, and all but
         * 'room' of them be refused there. The room goes unqueued; the
         * request that takes its last unit probes again. */
        e->hit.until_us = 0;
        e->room = room;
    } else {
        drop(c, e);
    }
    return w;
}

uint64_t fg__blocked_count(const fg__blocked *c)
{
    return c->used;
}

/* The instant the store decided, on the caller's clock. A decision made on
 * the caller's clock (fixed windows, naive_get_set and clock_client limits
 * read it just after 'sent_us') counts its times from the send itself. One
 * made on Redis TIME (the scripts) happened somewhere in the round trip: a
 * block measured from 'sent_us' would end a one-way delay early, so its
 * probe would reach the store just before the unit returns and be refused
 * about half the time (a wasted round trip, and the key blocked nothing
 * meanwhile). The middle of the round trip is the best estimate; when the
 * delays are uneven it is off by at most half the round trip either way: a
 * request arriving that much after the unit returned may be answered from
 * the cache, and the unit then goes to the next request, the probe. */
static uint64_t decided_at(const fg_limit *lim, uint64_t sent_us,
                           uint64_t now_us)
{
    if (lim->algorithm == FG_FIXED_WINDOW ||
        lim->algorithm == FG_NAIVE_GET_SET || lim->clock_client)
        return sent_us;
    return sent_us + (now_us - sent_us) / 2;
}

int fg__blocked_from_decision(const fg_limit *lim, const fg_decision *d,
                              uint64_t cost, uint64_t sent_us, uint64_t now_us,
                              fg__blocked_hit *out, uint64_t *block_cost)
{
    if (d->source != FG_SOURCE_STORE || now_us < sent_us)
        return 0;
    /* 'wait': from the decision until the store would allow; 'retry': what
     * clients are told, counted from 'now_us' (after the decision) so that
     * it is never early. The _us times are exact. */
    uint64_t wait, retry;
    if (!d->allowed) {
        if (d->retry_after_us == 0)
            return 0;
        wait = retry = d->retry_after_us;
        *block_cost = cost;
    } else if (d->remaining == 0 && d->reset_us > 0 &&
               lim->algorithm == FG_FIXED_WINDOW) {
        /* Nothing left until the window ends. */
        wait = retry = d->reset_us;
        *block_cost = 1;
    } else if (d->remaining == 0 && d->reset_us > 0 &&
               lim->algorithm == FG_TOKEN_BUCKET && lim->limit > 0) {
        /* The bucket is full again after reset_us (the drain time rounded
         * up to a microsecond); the first token comes back (burst - 1)
         * emission intervals q before that: at the first whole microsecond
         * at or after reset - q, which is at least reset_us - ceil(q) and
         * at most reset_us - floor(q). */
        uint64_t burst = lim->burst ? lim->burst : lim->limit;
        unsigned __int128 num = (unsigned __int128)(burst - 1) * lim->period_us;
        unsigned __int128 hi = (num + lim->limit - 1) / lim->limit;
        unsigned __int128 lo = num / lim->limit;
        if (hi >= d->reset_us)
            return 0;
        wait = d->reset_us - (uint64_t)hi;
        retry = d->reset_us - (uint64_t)lo;
        *block_cost = 1;
    } else {
        return 0;
    }
    uint64_t until = decided_at(lim, sent_us, now_us) + wait;
    if (until <= now_us)
        return 0;
    out->until_us = until;
    out->retry_us = now_us + retry > until ? now_us + retry : until;
    out->reset_us = now_us + d->reset_us;
    out->limit = d->limit;
    out->remaining = d->allowed ? 0 : d->remaining;
    return 1;
}
