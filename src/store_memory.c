/* store_memory.c -- counters in this process's memory.
 *
 * The shape is nginx's limit_req zone, scaled to threads. The keys are
 * split into stripes by their hash (up to 256, each holding at least a
 * thousand keys' share of 'max_keys'). A stripe is one spinlock and its
 * own open-addressing table: an array of 64-byte slots, each holding a
 * key's whole state and, when the key is at most 24 bytes, the key
 * itself, and an array of one-byte tags (7 bits of the key's hash, 0 for
 * an empty slot) that a probe scans before it reads any slot.
 *
 * Everything a check does to a stripe happens under the stripe's lock:
 * the lookup, the algorithm's decision on the key's state, an insert, an
 * eviction, a growth. Nothing is read without the lock, so there is no
 * lock-free path to reason about: two threads never see a table change
 * under them. Keys of different limiters never meet, because a slot
 * records its limiter's id beside the key's length and both are compared.
 *
 * Memory is bounded by 'max_keys', shared evenly among the stripes. A
 * stripe's table is allocated with its first key (a store of few keys, as
 * a local fallback's usually is, costs little more than its stripes),
 * starts small and grows by half before it would be more than 80% full, up
 * to its share; a growth copies the keys and frees the old table at once.
 * When a stripe holds its share, a new key takes the place of an
 * expired one among the 16 from its home slot on, or else of the least
 * recently used of them (as Redis approximates LRU), and the key removed
 * leaves no tombstone: the keys after it in its probe run shift back. */
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "hash.h"
#include "process.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

#define STRIPES_MAX      256
#define STRIPE_MIN_KEYS  1024
#define EVICT_SAMPLE     16
#define DEFAULT_MAX_KEYS 1000000u
#define INLINE_KEY       24
#define MIN_SLOTS        16
/* Coarse times in a slot are kept in binary units, so that no check
 * divides: expiry in units of 2^20 us (about a second, rounded up), last
 * use in units of 2^10 us (about a millisecond). */
#define EXPIRES_SHIFT 20
#define TOUCHED_SHIFT 10
/* A thread reads the clock before it takes the lock, so another may have
 * stamped the key with a later time meanwhile: a stamp up to this many
 * units ahead (about 67 s) is kept; one further ahead is a clock that was
 * set back, and is replaced. */
#define AHEAD_TICKS (1u << 16)
/* A slot's 'ident': the limiter's id above the key's length. */
#define IDENT_LEN_BITS 16

/* One key. Expiry and last use are coarse: they only choose what to
 * evict. */
typedef struct mem_slot {
    fg__algo_state state;
    char key[INLINE_KEY]; /* the key, or a pointer to it when longer */
    uint32_t expires;     /* in 2^20 us, rounded up */
    uint32_t touched;     /* in 2^10 us; compared as an age, may wrap */
    uint64_t ident;       /* limiter id << 16 | key length */
} mem_slot;

_Static_assert(sizeof(mem_slot) == 64, "a slot is one cache line");

/* A stripe: its lock, and the table it guards. The fields a check reads
 * come first, on the stripe's first cache line; stripes never share a
 * line, so threads in two stripes do not trade lines. */
typedef struct mem_stripe {
    atomic_int lock;
    size_t size;      /* slots, not a power of two */
    mem_slot *slots;  /* on cache lines, within 'mem' */
    uint8_t *tags;    /* 'size' bytes after the slots */
    uint64_t count;   /* keys held */
    uint64_t evicted; /* keys dropped before they expired */
    uint64_t cap;     /* this stripe's share of max_keys */
    uint64_t max_size;
    void *mem; /* the table's one allocation */
} __attribute__((aligned(64))) mem_stripe;

typedef struct mem_store {
    fg_store base;
    fg_clock_fn clock;
    void *clock_ctx;
    fg__gettime_fn gettime; /* for the default clock */
    uint64_t wall_offset;   /* the default clock's: wall less monotonic */
    uint64_t seed;
    uint64_t stripe_mask; /* the stripes' count, a power of two, less 1 */
    mem_stripe *stripes;  /* aligned to a cache line within 'stripes_mem' */
    void *stripes_mem;
    uint64_t max_keys;
} mem_store;

/* ---- the stripe lock ---------------------------------------------------
 * A spinlock: it is held for a lookup and a few arithmetic operations,
 * far shorter than a sleep and a wake-up would take. A waiter reads the
 * lock until it looks free before it tries to take it, so that waiting
 * does not keep the line moving between cores, and gives the CPU away
 * after a while, since on a busy machine the holder may be waiting for
 * it. */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static __attribute__((noinline)) void stripe_lock_wait(mem_stripe *s)
{
    for (unsigned spins = 0;;) {
        if (!atomic_load_explicit(&s->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
            return;
        if (++spins >= 64) {
            sched_yield();
            spins = 0;
        } else {
            cpu_relax();
        }
    }
}

static inline void stripe_lock(mem_stripe *s)
{
    if (__builtin_expect(
            atomic_exchange_explicit(&s->lock, 1, memory_order_acquire), 0))
        stripe_lock_wait(s);
}

static inline void stripe_unlock(mem_stripe *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* ---- the clock ---------------------------------------------------------
 * The default is read here rather than through the pointer: the same
 * CLOCK_MONOTONIC as fg__mono_us, straight from the vDSO, without the C
 * library's wrapper, made to read as the wall clock did at open, so that
 * windows fall on the Unix epoch's seconds, minutes and days as a Redis
 * store's do (a later step of the wall clock does not move them). */

static inline __attribute__((always_inline)) uint64_t
store_now_as(int own_clock, const mem_store *m)
{
    if (own_clock)
        return m->clock(m->clock_ctx);
    struct timespec ts;
    if (__builtin_expect(m->gettime(CLOCK_MONOTONIC, &ts) != 0, 0))
        return fg__mono_us(NULL) + m->wall_offset;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u +
           m->wall_offset;
}

/* 1 when the store reads a caller's clock. */
static inline int store_own_clock(const mem_store *m)
{
    return m->clock != fg__mono_us;
}

static inline uint64_t store_now(const mem_store *m)
{
    return store_now_as(store_own_clock(m), m);
}

/* ---- keys and the table ------------------------------------------------ */

/* The limiter's id enters the seed, so that the same key of two limiters
 * lands in unrelated places. */
static inline uint64_t key_hash(const mem_store *m, uint64_t id,
                                const char *key, size_t keylen)
{
    return fg__hash_inline(key, keylen, m->seed ^ id);
}

static inline uint64_t ident_of(uint64_t id, size_t keylen)
{
    return id << IDENT_LEN_BITS | keylen;
}

/* The stripe of a key's hash: bits apart from those that pick its home
 * slot (the top ones) and its tag (the low seven). */
static inline mem_stripe *stripe_of(const mem_store *m, uint64_t h)
{
    return &m->stripes[(h >> 8) & m->stripe_mask];
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

static inline size_t slot_keylen(const mem_slot *sl)
{
    return (size_t)(sl->ident & ((1u << IDENT_LEN_BITS) - 1));
}

static inline const char *slot_key(const mem_slot *sl)
{
    if (slot_keylen(sl) <= INLINE_KEY)
        return sl->key;
    const char *p;
    memcpy(&p, sl->key, sizeof(p));
    return p;
}

static void slot_free_key(mem_slot *sl)
{
    if (slot_keylen(sl) > INLINE_KEY)
        fg__free((void *)slot_key(sl));
}

/* The hash of the key in 'sl', to find its home again. */
static uint64_t slot_hash(const mem_store *m, const mem_slot *sl)
{
    return key_hash(m, sl->ident >> IDENT_LEN_BITS, slot_key(sl),
                    slot_keylen(sl));
}

/* Find the key whose hash is 'h' and ident 'ident' in the table of 's':
 * its index with '*found' set, or the index of the empty slot that ends
 * its probe run. */
static inline __attribute__((always_inline)) size_t
table_find(const mem_stripe *s, uint64_t h, uint64_t ident, const char *key,
           size_t keylen, int *found)
{
    const uint8_t tag = tag_of(h);
    size_t i = home(h, s->size);
    /* The key is most often at home: fetch its slot while its tag loads
     * (in a large table both miss the cache). */
    __builtin_prefetch(&s->slots[i]);
    for (uint8_t x; (x = s->tags[i]) != 0; i = next(i, s->size)) {
        const mem_slot *sl = &s->slots[i];
        /* The empty key may come as NULL, which memcmp may not see. */
        if (x == tag && sl->ident == ident &&
            (keylen == 0 || memcmp(slot_key(sl), key, keylen) == 0)) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}

/* The table of every stripe that has held no key yet: one empty slot,
 * never written (a probe in it finds nothing, and the stripe's first insert
 * puts a table of its own in its place). */
static _Alignas(64) mem_slot no_slots[1];
static uint8_t no_tags[1];

static void stripe_table_none(mem_stripe *s)
{
    s->mem = NULL;
    s->size = 1;
    s->slots = no_slots;
    s->tags = no_tags;
}

/* Point the stripe at a new empty table of 'size' slots (zeroed: every
 * tag empty). The slots start on a cache line, so that a key's state is
 * one line. FG_ENOMEM leaves the stripe as it was. */
static int stripe_table_new(mem_stripe *s, size_t size)
{
    if (size > (SIZE_MAX - 64) / (sizeof(mem_slot) + 1))
        return FG_ENOMEM;
    void *mem = fg__calloc(1, 63 + size * (sizeof(mem_slot) + 1));
    if (!mem)
        return FG_ENOMEM;
    s->mem = mem;
    s->size = size;
    s->slots = (mem_slot *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    s->tags = (uint8_t *)(s->slots + size);
    return FG_OK;
}

/* Grow the table of 's' by half (at most to its full size), moving every
 * key to its place in the new one and freeing the old. The lock is held:
 * no other thread can be reading the old table. */
static int stripe_grow(mem_store *m, mem_stripe *s)
{
    const mem_slot *old_slots = s->slots;
    const uint8_t *old_tags = s->tags;
    size_t old_size = s->size;
    void *old_mem = s->mem;
    size_t size = old_size + old_size / 2;
    if (size <= old_size)
        size = old_size + 1;
    if (size > s->max_size)
        size = s->max_size;
    if (stripe_table_new(s, size) != FG_OK)
        return FG_ENOMEM;
    for (size_t j = 0; j < old_size; j++) {
        if (!old_tags[j])
            continue;
        size_t i = home(slot_hash(m, &old_slots[j]), size);
        while (s->tags[i])
            i = next(i, size);
        s->slots[i] = old_slots[j];
        s->tags[i] = old_tags[j];
    }
    fg__free(old_mem);
    return FG_OK;
}

/* Remove the key at 'i' by shifting back the keys of its probe run that
 * may move closer to their home, so that no probe ever meets a tombstone
 * and runs stay short under churn. */
static void stripe_remove(mem_store *m, mem_stripe *s, size_t i)
{
    slot_free_key(&s->slots[i]);
    s->tags[i] = 0;
    s->count--;
    for (size_t j = next(i, s->size); s->tags[j]; j = next(j, s->size)) {
        size_t k = home(slot_hash(m, &s->slots[j]), s->size);
        /* The key at 'j' stays if its home lies cyclically in (i, j]:
         * moved to 'i', it would sit before its home and not be found. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        s->slots[i] = s->slots[j];
        s->tags[i] = s->tags[j];
        s->tags[j] = 0;
        i = j;
    }
}

/* Make room for a key whose hash is 'h': reclaim an expired key among the
 * next few from its home slot on, or else the least recently used of
 * them. Taken where the new key goes, a key's place keeps the table as
 * evenly full as it was: a sweep in one direction would empty the slots
 * behind it and crowd those ahead into one long run, which every removal
 * there shifts back and every insert probes. */
static void stripe_evict(mem_store *m, mem_stripe *s, uint64_t h,
                         uint64_t now_us)
{
    size_t victim = SIZE_MAX, seen = 0, i = home(h, s->size);
    uint32_t now_e = (uint32_t)(now_us >> EXPIRES_SHIFT);
    uint32_t now_t = (uint32_t)(now_us >> TOUCHED_SHIFT);
    int32_t oldest = 0;
    int live = 1;
    for (size_t step = 0; step < s->size && seen < EVICT_SAMPLE; step++) {
        if (s->tags[i]) {
            const mem_slot *sl = &s->slots[i];
            seen++;
            if (sl->expires <= now_e) {
                victim = i;
                live = 0;
                break;
            }
            /* Signed: a key stamped a little after this thread read the
             * clock has a small negative age, and stays young. */
            int32_t age = (int32_t)(now_t - sl->touched);
            if (victim == SIZE_MAX || age > oldest) {
                oldest = age;
                victim = i;
            }
        }
        i = next(i, s->size);
    }
    if (victim != SIZE_MAX) {
        s->evicted += live;
        stripe_remove(m, s, victim);
    }
}

/* Insert a new key into 's' (locked), whose probe for it missed: make
 * room first when the stripe holds its share or its table is crowded.
 * The new slot's index in '*at'. FG_ENOMEM (a long key's copy or a
 * growth failed) leaves the stripe as it was. Out of line: most checks
 * find their key. */
static __attribute__((noinline)) int
stripe_insert(mem_store *m, mem_stripe *s, uint64_t h, uint64_t ident,
              const char *key, size_t keylen, uint64_t now_us, size_t *at)
{
    char *copy = NULL;
    if (keylen > INLINE_KEY) {
        copy = fg__malloc(keylen);
        if (!copy)
            return FG_ENOMEM;
        memcpy(copy, key, keylen);
    }
    if (!s->mem) {
        /* The stripe's first key: its first table of its own. */
        if (stripe_table_new(s, s->max_size < MIN_SLOTS ? s->max_size
                                                        : MIN_SLOTS) != FG_OK) {
            fg__free(copy);
            return FG_ENOMEM;
        }
    } else if (s->count >= s->cap) {
        stripe_evict(m, s, h, now_us);
    } else if ((s->count + 1) * 5 > s->size * 4 && s->size < s->max_size) {
        if (stripe_grow(m, s) != FG_OK) {
            fg__free(copy);
            return FG_ENOMEM;
        }
    }
    /* The table may have changed: find the end of the key's run again. */
    size_t i = home(h, s->size);
    while (s->tags[i])
        i = next(i, s->size);
    mem_slot *sl = &s->slots[i];
    memset(sl, 0, sizeof(*sl));
    sl->touched = (uint32_t)(now_us >> TOUCHED_SHIFT);
    sl->ident = ident;
    if (copy)
        memcpy(sl->key, &copy, sizeof(copy));
    else if (keylen)
        memcpy(sl->key, key, keylen);
    s->tags[i] = tag_of(h);
    s->count++;
    *at = i;
    return FG_OK;
}

/* ---- checks ------------------------------------------------------------ */

/* Decide for the slot 'sl' by 'algorithm' (the limiter's) and stamp its
 * expiry and last use. The stripe lock is held. */
static inline __attribute__((always_inline)) int
slot_decide(const fg_limiter *l, fg_algorithm algorithm, mem_slot *sl,
            uint64_t now, uint64_t cost, uint64_t age_us, fg_decision *d)
{
    uint64_t expires;
    int rc = __builtin_expect(cost & FG__COST_ADD, 0)
                 ? fg__algo_add(&l->p, &sl->state, now, cost & ~FG__COST_ADD,
                                age_us, d, &expires)
                 : fg__algo_decide_as(algorithm, &l->p, &sl->state, now, cost,
                                      d, &expires);
    if (__builtin_expect(rc != FG_OK, 0))
        return rc;
    /* Rounded up, and held at the top of the range rather than wrapped
     * (an expiry 142 years away). */
    uint64_t e = (expires >> EXPIRES_SHIFT) +
                 ((expires & ((1u << EXPIRES_SHIFT) - 1)) != 0);
    sl->expires = e > UINT32_MAX ? UINT32_MAX : (uint32_t)e;
    /* Never back in time by a little (see AHEAD_TICKS). */
    uint32_t now_t = (uint32_t)(now >> TOUCHED_SHIFT);
    if (sl->touched - now_t > AHEAD_TICKS)
        sl->touched = now_t;
    return FG_OK;
}

/* Note that a key of a limiter entered stripe 'i' (mem_limiter_free looks
 * there): written once, so that threads inserting keys of one limiter do
 * not trade its line once every stripe is marked. */
static inline void mark_entered(_Atomic uint64_t *entered, size_t i)
{
    uint64_t bit = 1ull << (i & 63);
    if (!(atomic_load_explicit(&entered[i >> 6], memory_order_relaxed) & bit))
        atomic_fetch_or_explicit(&entered[i >> 6], bit, memory_order_relaxed);
}

/* The store's decision for 'key' at 'now' by 'algorithm': FG_OK with 'd'
 * filled but its source, or a failure. Lookup, insert and decision under
 * the key's stripe lock. */
static inline __attribute__((always_inline)) int
mem_decide_as(fg_algorithm algorithm, mem_store *m, const fg_limiter *l,
              const char *key, size_t keylen, uint64_t cost, uint64_t age_us,
              fg_decision *d, uint64_t now)
{
    uint64_t ident = ident_of(l->id, keylen);
    uint64_t h = key_hash(m, l->id, key, keylen);
    mem_stripe *s = stripe_of(m, h);
    int found, rc = FG_OK;
    stripe_lock(s);
    size_t i = table_find(s, h, ident, key, keylen, &found);
    if (__builtin_expect(!found, 0)) {
        rc = stripe_insert(m, s, h, ident, key, keylen, now, &i);
        if (rc == FG_OK && l->store_data)
            mark_entered(l->store_data, (size_t)(s - m->stripes));
    }
    if (__builtin_expect(rc == FG_OK, 1))
        rc = slot_decide(l, algorithm, &s->slots[i], now, cost, age_us, d);
    stripe_unlock(s);
    return rc;
}

/* fg_check's result from the store's: the source, or the limit's policy
 * for a failure. */
static inline int mem_settle(fg_limiter *l, int rc, const char *key,
                             size_t keylen, uint64_t cost, fg_decision *d)
{
    if (__builtin_expect(rc == FG_OK, 1)) {
        d->source = FG_SOURCE_STORE;
        return FG_OK;
    }
    return fg__settle_failure(l, rc, key, keylen, cost, d);
}

/* fg_check's whole work for this store (the store settles its own result,
 * past the breaker: its only failures are this process's own), made for
 * one algorithm and one kind of clock (the default, or the caller's), so
 * that a check dispatches on nothing. The clock is read before the lock is
 * taken, to keep the lock's hold short. */
static inline __attribute__((always_inline)) int
mem_check_as(fg_algorithm algorithm, int own_clock, fg_limiter *l,
             const char *key, size_t keylen, uint64_t cost, fg_decision *d)
{
    mem_store *m = (mem_store *)l->st;
    uint64_t now = store_now_as(own_clock, m);
    int rc = mem_decide_as(algorithm, m, l, key, keylen, cost, 0, d, now);
    return mem_settle(l, rc, key, keylen, cost, d);
}

/* Fixed window (and naive_get_set, the same here), token bucket and
 * sliding window; each with the default clock and with a caller's. */
#define MEM_CHECK(name, algorithm, own_clock)                                  \
    static int name(fg_limiter *l, const char *key, size_t keylen,             \
                    uint64_t cost, fg_decision *d)                             \
    {                                                                          \
        return mem_check_as(algorithm, own_clock, l, key, keylen, cost, d);    \
    }
MEM_CHECK(mem_check_fixed, FG_FIXED_WINDOW, 0)
MEM_CHECK(mem_check_token, FG_TOKEN_BUCKET, 0)
MEM_CHECK(mem_check_sliding, FG_SLIDING_WINDOW, 0)
MEM_CHECK(mem_check_fixed_clock, FG_FIXED_WINDOW, 1)
MEM_CHECK(mem_check_token_clock, FG_TOKEN_BUCKET, 1)
MEM_CHECK(mem_check_sliding_clock, FG_SLIDING_WINDOW, 1)

/* The store interface's check, unsettled: for a limit's local fallback,
 * which sets the source itself (fg_check takes the limiter's own check). */
static int mem_check(fg_store *st, fg_limiter *l, const char *key,
                     size_t keylen, uint64_t cost, uint64_t age_us,
                     fg_decision *d)
{
    mem_store *m = (mem_store *)st;
    return mem_decide_as(l->p.algorithm, m, l, key, keylen, cost, age_us, d,
                         store_now(m));
}

static void mem_check_async(fg_store *st, fg__req *req)
{
    fg_decision d;
    int rc = mem_check(st, req->l, req->key, req->keylen, req->cost,
                       req->age_us, &d);
    fg__req_done(req, rc, &d);
}

static uint64_t mem_now(fg_store *st)
{
    return store_now((mem_store *)st);
}

/* Give back 'cost' units of a key that is there; a key that is not (never
 * seen, or evicted) has nothing to give back. */
static int mem_refund(fg_store *st, fg_limiter *l, const char *key,
                      size_t keylen, uint64_t cost, const fg__taken *t)
{
    mem_store *m = (mem_store *)st;
    uint64_t now = store_now(m);
    uint64_t h = key_hash(m, l->id, key, keylen);
    mem_stripe *s = stripe_of(m, h);
    int found;
    stripe_lock(s);
    size_t i = table_find(s, h, ident_of(l->id, keylen), key, keylen, &found);
    if (found)
        fg__algo_refund(&l->p, &s->slots[i].state, now, cost, t);
    stripe_unlock(s);
    return FG_OK;
}

/* The state of a key without touching it (no insert, no stamp), decided
 * as a check of one unit on a copy. */
static int mem_peek(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                    fg_decision *d)
{
    mem_store *m = (mem_store *)st;
    uint64_t now = store_now(m);
    uint64_t h = key_hash(m, l->id, key, keylen);
    mem_stripe *s = stripe_of(m, h);
    fg__algo_state state = {0, 0, 0};
    int found;
    stripe_lock(s);
    size_t i = table_find(s, h, ident_of(l->id, keylen), key, keylen, &found);
    if (found)
        state = s->slots[i].state;
    stripe_unlock(s);
    return fg__algo_peek(&l->p, &state, now, d);
}

/* Drop the key: its next check finds a key never seen. */
static int mem_reset(fg_store *st, fg_limiter *l, const char *key,
                     size_t keylen)
{
    mem_store *m = (mem_store *)st;
    uint64_t h = key_hash(m, l->id, key, keylen);
    mem_stripe *s = stripe_of(m, h);
    int found;
    stripe_lock(s);
    size_t i = table_find(s, h, ident_of(l->id, keylen), key, keylen, &found);
    if (found)
        stripe_remove(m, s, i);
    stripe_unlock(s);
    return FG_OK;
}

/* ---- the store --------------------------------------------------------- */

/* The keys the stripes hold, and those they evicted while they still
 * counted, each stripe read under its lock. */
static void totals(fg_store *st, uint64_t *keys, uint64_t *evicted)
{
    mem_store *m = (mem_store *)st;
    *keys = *evicted = 0;
    for (uint64_t i = 0; i <= m->stripe_mask; i++) {
        stripe_lock(&m->stripes[i]);
        *keys += m->stripes[i].count;
        *evicted += m->stripes[i].evicted;
        stripe_unlock(&m->stripes[i]);
    }
}

static uint64_t mem_keys(fg_store *st)
{
    uint64_t keys, evicted;
    totals(st, &keys, &evicted);
    return keys;
}

static uint64_t mem_evicted(fg_store *st)
{
    uint64_t keys, evicted;
    totals(st, &keys, &evicted);
    return evicted;
}

/* A limiter's keys are found by its id, which no later limiter has: at
 * its free they go, not waiting to be evicted as the table fills (a
 * reload that changes a limit would leave its keys behind). One pass over
 * each stripe its keys entered (its store_data: a bit a stripe; all of
 * them when it could not be allocated), under the stripe's lock. */
static void mem_limiter_free(fg_store *st, fg_limiter *l)
{
    mem_store *m = (mem_store *)st;
    _Atomic uint64_t *entered = l->store_data;
    for (uint64_t i = 0; i <= m->stripe_mask; i++) {
        if (entered &&
            !(atomic_load_explicit(&entered[i >> 6], memory_order_relaxed) >>
                  (i & 63) &
              1))
            continue;
        mem_stripe *s = &m->stripes[i];
        stripe_lock(s);
        for (size_t j = 0; s->count && j < s->size;) {
            /* A removal shifts later keys back into 'j': look again. */
            if (s->tags[j] && s->slots[j].ident >> IDENT_LEN_BITS == l->id)
                stripe_remove(m, s, j);
            else
                j++;
        }
        stripe_unlock(s);
    }
}

static void mem_close(fg_store *st)
{
    mem_store *m = (mem_store *)st;
    if (!m)
        return;
    for (uint64_t i = 0; m->stripes && i <= m->stripe_mask; i++) {
        mem_stripe *s = &m->stripes[i];
        for (size_t j = 0; s->mem && j < s->size; j++)
            if (s->tags[j])
                slot_free_key(&s->slots[j]);
        fg__free(s->mem);
    }
    fg__free(m->stripes_mem);
    fg__free(m);
}

static int mem_limiter_init(fg_store *st, fg_limiter *l, void **out, char *err,
                            size_t errlen)
{
    int own = store_own_clock((mem_store *)st);
    *out = NULL;
    switch (l->p.algorithm) {
    case FG_FIXED_WINDOW:
    case FG_NAIVE_GET_SET:
        l->check = own ? mem_check_fixed_clock : mem_check_fixed;
        break;
    case FG_TOKEN_BUCKET:
        l->check = own ? mem_check_token_clock : mem_check_token;
        break;
    case FG_SLIDING_WINDOW:
        l->check = own ? mem_check_sliding_clock : mem_check_sliding;
        break;
    default:
        return fg__seterr(err, errlen, FG_EINVAL,
                          "memory store: unknown algorithm %d",
                          (int)l->p.algorithm);
    }
    /* The stripes its keys entered (mem_limiter_free): NULL, when out of
     * memory, has it look in every stripe. */
    *out = fg__calloc(1, STRIPES_MAX / 8);
    return FG_OK;
}

static const fg__store_ops mem_ops = {
    .scheme = "memory",
    .limiter_init = mem_limiter_init,
    .check = mem_check,
    .check_async = mem_check_async,
    .refund = mem_refund,
    .peek = mem_peek,
    .reset = mem_reset,
    .keys = mem_keys,
    .evicted = mem_evicted,
    .limiter_free = mem_limiter_free,
    .close = mem_close,
    .now = mem_now,
};

uint64_t fg__store_memory_max_keys(fg_store *st)
{
    return st && st->ops == &mem_ops ? ((mem_store *)st)->max_keys : 0;
}

/* The mean distance of the keys from their home slots, in hundredths of a
 * slot: how long lookups probe. For tests. */
uint64_t fg__store_memory_probe_length(fg_store *st)
{
    if (!st || st->ops != &mem_ops)
        return 0;
    mem_store *m = (mem_store *)st;
    uint64_t keys = 0, dist = 0;
    for (uint64_t i = 0; i <= m->stripe_mask; i++) {
        mem_stripe *s = &m->stripes[i];
        stripe_lock(s);
        for (size_t j = 0; j < s->size; j++) {
            if (!s->tags[j])
                continue;
            size_t k = home(slot_hash(m, &s->slots[j]), s->size);
            dist += j >= k ? j - k : j + s->size - k;
            keys++;
        }
        stripe_unlock(s);
    }
    return keys ? dist * 100 / keys : 0;
}

fg_store *fg__store_memory_open(const fg_memory_options *opt, char *err,
                                size_t errlen)
{
    uint64_t max_keys = opt && opt->max_keys ? opt->max_keys : DEFAULT_MAX_KEYS;
    if (max_keys > FG__MEMORY_MAX_KEYS) {
        fg__seterr(err, errlen, FG_ERANGE,
                   "memory store: max_keys must be at most %llu",
                   (unsigned long long)FG__MEMORY_MAX_KEYS);
        return NULL;
    }
    mem_store *m = fg__calloc(1, sizeof(*m));
    if (!m)
        goto nomem;
    m->base.ops = &mem_ops;
    m->base.nodes = 1;
    m->base.process = fg__process_mark();
    m->max_keys = max_keys;
    m->clock = opt && opt->clock ? opt->clock : fg__mono_us;
    m->clock_ctx = opt ? opt->clock_ctx : NULL;
    m->gettime = fg__clock_gettime_fn();
    uint64_t wall = fg__wall_us(), mono = fg__mono_us(NULL);
    m->wall_offset = wall > mono ? wall - mono : 0;
    m->seed = fg__hash_seed(m);

    /* Enough stripes that two threads rarely meet, few enough that each
     * holds its share of at least a thousand keys. */
    unsigned n = 1;
    while (n < STRIPES_MAX && max_keys / (n * 2) >= STRIPE_MIN_KEYS)
        n *= 2;
    m->stripe_mask = n - 1;
    /* Each stripe on its own cache lines; the allocator promises only 16
     * bytes of alignment. */
    m->stripes_mem = fg__calloc(1, sizeof(mem_stripe) * n + 63);
    if (!m->stripes_mem)
        goto nomem;
    m->stripes =
        (mem_stripe *)(((uintptr_t)m->stripes_mem + 63) & ~(uintptr_t)63);
    for (unsigned i = 0; i < n; i++) {
        mem_stripe *s = &m->stripes[i];
        atomic_init(&s->lock, 0);
        s->cap = max_keys / n + (i < max_keys % n);
        /* Full, the table is 80% occupied; +1 keeps an empty slot. */
        s->max_size = s->cap + s->cap / 4 + 1;
        stripe_table_none(s);
    }
    return &m->base;
nomem:
    mem_close(m ? &m->base : NULL);
    fg__seterr(err, errlen, FG_ENOMEM, "memory store: out of memory");
    return NULL;
}
