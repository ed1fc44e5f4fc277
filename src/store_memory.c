/* store_memory.c -- counters in this process's memory.
 *
 * The table is split into stripes, each with its own spinlock and share of
 * 'max_keys'. A stripe is an open-addressing table with linear probing:
 * an array of one-byte tags (7 bits of the key's hash, 0 for empty) beside
 * an array of 64-byte slots, each holding a key's whole state and, when the
 * key is at most 24 bytes, the key itself. A check locks one stripe, scans
 * the tags (a few bytes, usually cached), touches the one slot whose tag
 * matches, runs the algorithm on it in place and unlocks: one cache line of
 * the table per check, no allocation unless the key is new.
 *
 * Tables start small and grow by half as keys arrive, up to 80% full at
 * 'max_keys'. When a stripe is full, a clock hand samples the next 16 slots
 * and reclaims an expired one, or else the least recently used of the
 * sample (as Redis approximates LRU), so memory stays bounded. */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "store.h"

#define STRIPES_MAX      64
#define EVICT_SAMPLE     16
#define DEFAULT_MAX_KEYS 1000000u
#define INLINE_KEY       24
#define MIN_SLOTS        16

/* One key. Expiry and last use are kept coarse (seconds, milliseconds):
 * they only choose what to evict. */
typedef struct mem_slot {
    fg__algo_state state;
    char key[INLINE_KEY]; /* the key, or a pointer to it when longer */
    uint32_t expires_s;   /* rounded up */
    uint32_t touched_ms;  /* compared as an age, so it may wrap */
    uint32_t owner;       /* the limiter's id: limiters never share */
    uint16_t keylen;
    uint16_t pad;
} mem_slot;

_Static_assert(sizeof(mem_slot) == 64, "a slot is one cache line");

typedef struct mem_stripe {
    atomic_int lock;
    uint32_t hand;
    size_t size; /* slots, not a power of two */
    uint64_t count, cap, max_size;
    uint8_t *tags;
    mem_slot *slots; /* cache-line aligned within 'slots_mem' */
    void *slots_mem;
} __attribute__((aligned(64))) mem_stripe;

typedef struct mem_store {
    fg_store base;
    fg_clock_fn clock;
    void *clock_ctx;
    uint64_t seed;
    unsigned nstripes;
    mem_stripe *stripes; /* aligned to a cache line within 'stripes_mem' */
    void *stripes_mem;
} mem_store;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

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
            cpu_relax();
        }
    }
}

static void stripe_unlock(mem_stripe *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

static inline uint64_t key_hash(const mem_store *m, uint32_t owner,
                                const char *key, size_t keylen)
{
    return fg__hash(key, keylen, m->seed ^ owner);
}

/* The key's home slot among 'size': the hash scaled to the range (no
 * modulo, and any table size works). */
static inline size_t home(uint64_t h, size_t size)
{
    return (size_t)(((unsigned __int128)h * size) >> 64);
}

/* Seven low bits of the hash, and the high bit so that 0 means empty. */
static inline uint8_t tag_of(uint64_t h)
{
    return (uint8_t)(h | 0x80);
}

static inline size_t next(size_t i, size_t size)
{
    return i + 1 == size ? 0 : i + 1;
}

static inline const char *slot_key(const mem_slot *sl)
{
    if (sl->keylen <= INLINE_KEY)
        return sl->key;
    const char *p;
    memcpy(&p, sl->key, sizeof(p));
    return p;
}

static inline uint32_t coarse_s(uint64_t us)
{
    return (uint32_t)(us / 1000000u + (us % 1000000u != 0));
}

static void slot_free_key(mem_slot *sl)
{
    if (sl->keylen > INLINE_KEY)
        fg__free((void *)slot_key(sl));
}

/* Allocate an empty table of 'size' slots; all three NULL on failure. */
static int table_alloc(size_t size, uint8_t **tags, mem_slot **slots,
                       void **mem)
{
    *tags = fg__calloc(size, 1);
    *mem = fg__malloc(size * sizeof(mem_slot) + 63);
    if (!*tags || !*mem) {
        fg__free(*tags);
        fg__free(*mem);
        *tags = NULL;
        *mem = NULL;
        return FG_ENOMEM;
    }
    *slots = (mem_slot *)(((uintptr_t)*mem + 63) & ~(uintptr_t)63);
    return FG_OK;
}

/* Grow the table of 's' by half (at most to its final size), moving every
 * key to its place in the new one. */
static int stripe_grow(const mem_store *m, mem_stripe *s)
{
    size_t size = s->size + s->size / 2;
    if (size > s->max_size)
        size = s->max_size;
    uint8_t *tags;
    mem_slot *slots;
    void *mem;
    if (table_alloc(size, &tags, &slots, &mem) != FG_OK)
        return FG_ENOMEM;
    for (size_t j = 0; j < s->size; j++) {
        if (!s->tags[j])
            continue;
        const mem_slot *sl = &s->slots[j];
        uint64_t h = key_hash(m, sl->owner, slot_key(sl), sl->keylen);
        size_t i = home(h, size);
        while (tags[i])
            i = next(i, size);
        tags[i] = s->tags[j];
        slots[i] = *sl;
    }
    fg__free(s->tags);
    fg__free(s->slots_mem);
    s->tags = tags;
    s->slots = slots;
    s->slots_mem = mem;
    s->size = size;
    return FG_OK;
}

/* Remove the key at 'i' by shifting back the keys of its probe run (no
 * tombstones, so probes stay short under churn). */
static void slot_remove(const mem_store *m, mem_stripe *s, size_t i)
{
    slot_free_key(&s->slots[i]);
    s->tags[i] = 0;
    s->count--;
    for (size_t j = next(i, s->size); s->tags[j]; j = next(j, s->size)) {
        const mem_slot *sl = &s->slots[j];
        size_t k =
            home(key_hash(m, sl->owner, slot_key(sl), sl->keylen), s->size);
        /* Leave the key if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            s->slots[i] = *sl;
            s->tags[i] = s->tags[j];
            s->tags[j] = 0;
            i = j;
        }
    }
}

/* Make room for one key: reclaim an expired key among the next few the
 * clock hand passes, or else the least recently used of them. */
static void stripe_evict(const mem_store *m, mem_stripe *s, uint64_t now_us)
{
    size_t victim = SIZE_MAX, seen = 0, i = s->hand % s->size;
    uint32_t now_s = (uint32_t)(now_us / 1000000u);
    uint32_t now_ms = (uint32_t)(now_us / 1000u), oldest = 0;
    for (size_t step = 0; step < s->size && seen < EVICT_SAMPLE; step++) {
        if (s->tags[i]) {
            const mem_slot *sl = &s->slots[i];
            seen++;
            if (sl->expires_s <= now_s) {
                victim = i;
                break;
            }
            uint32_t age = now_ms - sl->touched_ms;
            if (victim == SIZE_MAX || age > oldest) {
                oldest = age;
                victim = i;
            }
        }
        i = next(i, s->size);
    }
    s->hand = (uint32_t)i;
    if (victim != SIZE_MAX)
        slot_remove(m, s, victim);
}

/* Find the slot of ('owner', 'key') in 's', or the empty slot where it
 * would go: returns its index and sets '*found'. */
static size_t stripe_find(const mem_stripe *s, uint64_t h, uint32_t owner,
                          const char *key, size_t keylen, int *found)
{
    uint8_t tag = tag_of(h);
    size_t i = home(h, s->size);
    for (uint8_t t; (t = s->tags[i]) != 0; i = next(i, s->size)) {
        const mem_slot *sl = &s->slots[i];
        if (t == tag && sl->owner == owner && sl->keylen == keylen &&
            (keylen == 0 || memcmp(slot_key(sl), key, keylen) == 0)) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}

/* Insert a new key whose probe ended at 'i': make room first when the
 * stripe is full or its table is crowded. */
static int stripe_insert(const mem_store *m, mem_stripe *s, uint64_t h,
                         uint32_t owner, const char *key, size_t keylen,
                         uint64_t now_us, size_t *at)
{
    char *copy = NULL;
    if (keylen > INLINE_KEY) {
        copy = fg__malloc(keylen);
        if (!copy)
            return FG_ENOMEM;
        memcpy(copy, key, keylen);
    }
    int moved = 0;
    if (s->count >= s->cap) {
        stripe_evict(m, s, now_us);
        moved = 1;
    } else if ((s->count + 1) * 5 > s->size * 4 && s->size < s->max_size) {
        if (stripe_grow(m, s) != FG_OK) {
            fg__free(copy);
            return FG_ENOMEM;
        }
        moved = 1;
    }
    size_t i = *at;
    if (moved)
        for (i = home(h, s->size); s->tags[i]; i = next(i, s->size))
            ;
    mem_slot *sl = &s->slots[i];
    memset(sl, 0, sizeof(*sl));
    sl->owner = owner;
    sl->keylen = (uint16_t)keylen;
    if (copy)
        memcpy(sl->key, &copy, sizeof(copy));
    else if (keylen)
        memcpy(sl->key, key, keylen);
    s->tags[i] = tag_of(h);
    s->count++;
    *at = i;
    return FG_OK;
}

static int mem_check(fg_store *st, fg_limiter *l, const char *key,
                     size_t keylen, uint64_t cost, fg_decision *d)
{
    mem_store *m = (mem_store *)st;
    uint32_t owner = (uint32_t)l->id;
    uint64_t h = key_hash(m, owner, key, keylen);
    mem_stripe *s = &m->stripes[(h >> 8) & (m->nstripes - 1)];
    uint64_t now = m->clock(m->clock_ctx), expires;
    int found, rc = FG_OK;

    stripe_lock(s);
    size_t i = stripe_find(s, h, owner, key, keylen, &found);
    if (!found)
        rc = stripe_insert(m, s, h, owner, key, keylen, now, &i);
    if (rc == FG_OK) {
        mem_slot *sl = &s->slots[i];
        rc = fg__algo_check(&l->p, &sl->state, now, cost, d, &expires);
        sl->expires_s = coarse_s(expires);
        sl->touched_ms = (uint32_t)(now / 1000u);
    }
    stripe_unlock(s);
    return rc;
}

static int mem_refund(fg_store *st, fg_limiter *l, const char *key,
                      size_t keylen, uint64_t cost)
{
    mem_store *m = (mem_store *)st;
    uint32_t owner = (uint32_t)l->id;
    uint64_t h = key_hash(m, owner, key, keylen);
    mem_stripe *s = &m->stripes[(h >> 8) & (m->nstripes - 1)];
    uint64_t now = m->clock(m->clock_ctx);
    int found;

    stripe_lock(s);
    size_t i = stripe_find(s, h, owner, key, keylen, &found);
    if (found)
        fg__algo_refund(&l->p, &s->slots[i].state, now, cost);
    stripe_unlock(s);
    return FG_OK;
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
        for (size_t j = 0; s->tags && j < s->size; j++)
            if (s->tags[j])
                slot_free_key(&s->slots[j]);
        fg__free(s->tags);
        fg__free(s->slots_mem);
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
    .refund = mem_refund,
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
        /* Full, the table is 80% occupied; +1 keeps an empty slot. */
        s->max_size = s->cap + s->cap / 4 + 1;
        s->size = s->max_size < MIN_SLOTS ? s->max_size : MIN_SLOTS;
        if (table_alloc(s->size, &s->tags, &s->slots, &s->slots_mem) != FG_OK)
            goto nomem;
    }
    return &m->base;
nomem:
    mem_close(m ? &m->base : NULL);
    fg__seterr(err, errlen, FG_ENOMEM, "memory store: out of memory");
    return NULL;
}
