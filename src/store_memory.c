/* store_memory.c -- counters in this process's memory.
 *
 * The table is split into stripes, each with its own spinlock, slot array
 * (open addressing, linear probing, at most three quarters full) and share of
 * 'max_keys'. A check locks one stripe, probes for the key, runs the
 * algorithm on the entry in place and unlocks: O(1), no allocation unless
 * the key is new. When a stripe is full, a clock hand samples the next few
 * entries and reclaims an expired one, or else the least recently used of
 * the sample (as Redis approximates LRU), so memory stays bounded. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "store.h"

#define STRIPES_MAX      64
#define EVICT_SAMPLE     16
#define DEFAULT_MAX_KEYS 1000000u

/* What a probe compares comes first, so that a short key is matched and
 * counted within one cache line. */
typedef struct mem_entry {
    uint64_t owner; /* the limiter's id: limiters never share counters */
    uint32_t keylen;
    uint32_t pad;
    fg__algo_state state;
    uint64_t expires_us;
    uint64_t touched_us;
    char key[];
} mem_entry;

typedef struct mem_slot {
    uint64_t hash;
    mem_entry *e; /* NULL: empty */
} mem_slot;

typedef struct mem_stripe {
    atomic_int lock;
    uint32_t hand;
    size_t mask;
    uint64_t count, cap;
    mem_slot *slots;
} __attribute__((aligned(64))) mem_stripe;

typedef struct mem_store {
    fg_store base;
    fg_clock_fn clock;
    void *clock_ctx;
    uint64_t seed;
    unsigned nstripes, shift;
    mem_stripe *stripes; /* aligned to a cache line within 'stripes_mem' */
    void *stripes_mem;
} mem_store;

static void stripe_lock(mem_stripe *s)
{
    for (unsigned spins = 0;; spins++) {
        if (!atomic_load_explicit(&s->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
            return;
        if (spins >= 64) {
            sched_yield();
            spins = 0;
        } else {
            __builtin_ia32_pause();
        }
    }
}

static void stripe_unlock(mem_stripe *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* Remove the entry at 'i' by shifting back the entries of its probe run
 * (no tombstones, so probes stay short). */
static void slot_remove(mem_stripe *s, size_t i)
{
    fg__free(s->slots[i].e);
    s->slots[i].e = NULL;
    s->count--;
    for (size_t j = (i + 1) & s->mask; s->slots[j].e; j = (j + 1) & s->mask) {
        size_t k = s->slots[j].hash & s->mask;
        /* Leave the entry if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            s->slots[i] = s->slots[j];
            s->slots[j].e = NULL;
            i = j;
        }
    }
}

/* Double the slot array of 's' (it starts small and grows as keys arrive,
 * so that a store sized for a million keys but holding a thousand stays
 * compact in cache). */
static int stripe_grow(mem_stripe *s)
{
    size_t size = (s->mask + 1) * 2;
    mem_slot *slots = fg__calloc(size, sizeof(mem_slot));
    if (!slots)
        return FG_ENOMEM;
    for (size_t j = 0; j <= s->mask; j++) {
        if (!s->slots[j].e)
            continue;
        size_t i = s->slots[j].hash & (size - 1);
        while (slots[i].e)
            i = (i + 1) & (size - 1);
        slots[i] = s->slots[j];
    }
    fg__free(s->slots);
    s->slots = slots;
    s->mask = size - 1;
    return FG_OK;
}

/* Make room for one entry: reclaim an expired entry among the next few the
 * clock hand passes, or else the least recently touched of them. */
static void stripe_evict(mem_stripe *s, uint64_t now_us)
{
    size_t victim = SIZE_MAX, seen = 0;
    uint64_t oldest = UINT64_MAX;
    size_t i = s->hand & s->mask;
    for (size_t step = 0; step <= s->mask && seen < EVICT_SAMPLE; step++) {
        mem_entry *e = s->slots[i].e;
        if (e) {
            seen++;
            if (e->expires_us <= now_us) {
                victim = i;
                break;
            }
            if (e->touched_us < oldest) {
                oldest = e->touched_us;
                victim = i;
            }
        }
        i = (i + 1) & s->mask;
    }
    s->hand = (uint32_t)i;
    if (victim != SIZE_MAX)
        slot_remove(s, victim);
}

static int mem_check(fg_store *st, fg_limiter *l, const char *key,
                     size_t keylen, uint64_t cost, fg_decision *d)
{
    mem_store *m = (mem_store *)st;
    uint64_t owner = l->id;
    uint64_t h = fg__hash(key, keylen, m->seed ^ owner);
    mem_stripe *s = &m->stripes[m->shift < 64 ? h >> m->shift : 0];
    /* Start fetching the key's slot before the lock's fence: the slot array
     * may be swapped meanwhile, but a prefetch of any address is harmless
     * and this one is nearly always right. */
    __builtin_prefetch(&s->slots[h & s->mask]);
    uint64_t now = m->clock(m->clock_ctx);
    int rc = FG_OK;

    stripe_lock(s);
    size_t i = h & s->mask;
    mem_entry *e;
    while ((e = s->slots[i].e) != NULL) {
        if (s->slots[i].hash == h && e->owner == owner && e->keylen == keylen &&
            (keylen == 0 || memcmp(e->key, key, keylen) == 0))
            break;
        i = (i + 1) & s->mask;
    }
    if (!e) {
        if (s->count >= s->cap) {
            stripe_evict(s, now);
        } else if ((s->count + 1) * 4 > (s->mask + 1) * 3) {
            if (stripe_grow(s) != FG_OK) {
                rc = FG_ENOMEM;
                goto out;
            }
        }
        for (i = h & s->mask; s->slots[i].e; i = (i + 1) & s->mask)
            ;
        e = fg__malloc(sizeof(*e) + keylen);
        if (!e) {
            rc = FG_ENOMEM;
            goto out;
        }
        memset(e, 0, sizeof(*e));
        e->owner = owner;
        e->keylen = (uint32_t)keylen;
        if (keylen)
            memcpy(e->key, key, keylen);
        s->slots[i].hash = h;
        s->slots[i].e = e;
        s->count++;
    }
    rc = fg__algo_check(&l->p, &e->state, now, cost, d, &e->expires_us);
    e->touched_us = now;
out:
    stripe_unlock(s);
    return rc;
}

static void mem_check_async(fg_store *st, fg__req *req)
{
    fg_decision d;
    int rc = mem_check(st, req->l, req->key, req->keylen, req->cost, &d);
    fg__req_done(req, rc, &d);
}

static uint64_t mem_keys(fg_store *st)
{
    mem_store *m = (mem_store *)st;
    uint64_t n = 0;
    for (unsigned i = 0; i < m->nstripes; i++) {
        stripe_lock(&m->stripes[i]);
        n += m->stripes[i].count;
        stripe_unlock(&m->stripes[i]);
    }
    return n;
}

static void mem_close(fg_store *st)
{
    mem_store *m = (mem_store *)st;
    if (!m)
        return;
    for (unsigned i = 0; m->stripes && i < m->nstripes; i++) {
        mem_stripe *s = &m->stripes[i];
        for (size_t j = 0; s->slots && j <= s->mask; j++)
            fg__free(s->slots[j].e);
        fg__free(s->slots);
    }
    fg__free(m->stripes_mem);
    fg__free(m);
}

static int mem_limiter_init(fg_store *st, fg_limiter *l, void **out, char *err,
                            size_t errlen)
{
    (void)st;
    (void)l;
    (void)err;
    (void)errlen;
    *out = NULL;
    return FG_OK;
}

static void mem_limiter_free(fg_store *st, fg_limiter *l, void *data)
{
    (void)st;
    (void)l;
    (void)data;
}

static const fg__store_ops mem_ops = {
    .scheme = "memory",
    .limiter_init = mem_limiter_init,
    .limiter_free = mem_limiter_free,
    .check = mem_check,
    .check_async = mem_check_async,
    .keys = mem_keys,
    .close = mem_close,
};

fg_store *fg__store_memory_open(const fg_memory_options *opt, char *err,
                                size_t errlen)
{
    uint64_t max_keys = opt && opt->max_keys ? opt->max_keys : DEFAULT_MAX_KEYS;
    if (max_keys > ((uint64_t)1 << 40)) {
        fg__seterr(err, errlen, FG_ERANGE, "memory store: max_keys too large");
        return NULL;
    }
    mem_store *m = fg__calloc(1, sizeof(*m));
    if (!m)
        goto nomem;
    m->base.ops = &mem_ops;
    m->clock = opt && opt->clock ? opt->clock : fg__mono_us;
    m->clock_ctx = opt ? opt->clock_ctx : NULL;
    m->seed = (uint64_t)(uintptr_t)m ^ fg__wall_us() ^ 0x6a09e667f3bcc909ull;

    /* Enough stripes that two threads rarely meet, few enough that each
     * holds at least a thousand keys. */
    unsigned n = 1;
    while (n < STRIPES_MAX && max_keys / (n * 2) >= 1024)
        n *= 2;
    m->nstripes = n;
    m->shift = 64;
    for (unsigned b = n; b > 1; b >>= 1)
        m->shift--;
    /* Each stripe on its own cache line, so that two threads locking two
     * stripes never share one; the allocator promises only 16 bytes. */
    m->stripes_mem = fg__malloc(sizeof(mem_stripe) * n + 63);
    if (!m->stripes_mem)
        goto nomem;
    m->stripes =
        (mem_stripe *)(((uintptr_t)m->stripes_mem + 63) & ~(uintptr_t)63);
    memset(m->stripes, 0, sizeof(mem_stripe) * n);
    for (unsigned i = 0; i < n; i++) {
        mem_stripe *s = &m->stripes[i];
        s->cap = max_keys / n + (i < max_keys % n);
        s->mask = 15;
        s->slots = fg__calloc(s->mask + 1, sizeof(mem_slot));
        if (!s->slots)
            goto nomem;
    }
    return &m->base;
nomem:
    mem_close(m ? &m->base : NULL);
    fg__seterr(err, errlen, FG_ENOMEM, "memory store: out of memory");
    return NULL;
}
