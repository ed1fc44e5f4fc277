/* store_memory.c -- counters in this process's memory.
 *
 * The keys are split into stripes, each with its own share of 'max_keys'.
 * A stripe is an open-addressing table with linear probing: an array of
 * 64-byte slots, each holding a key's whole state and, when the key is at
 * most 24 bytes, the key itself, followed by an array of one-byte tags (7
 * bits of the key's hash, 0 for empty).
 *
 * A check finds its stripe's table in one word, its view: the slots'
 * address and the table's size packed together, in a dense array of the
 * store (eight views to a cache line, so that they stay in the nearest
 * cache while keys stream through it). From the view alone it computes
 * the key's home and the tags' address: no load waits on another before
 * the key's tag and slot are fetched.
 *
 * Locking. Each slot has its own lock word; the stripe's spinlock is taken
 * only for structural change (insert, evict, remove, grow, count). A check
 * of a known key loads its stripe's view, scans the tags from the
 * key's home, holds the one slot whose tag matches, confirms the key while
 * holding it, runs the algorithm in place and lets go: the only shared line
 * it writes is the key's own slot, so threads checking different keys do
 * not trade cache lines. A check that does not find its key that way (a
 * new key, or one moving under a removal or a growth) takes the slow path:
 * the stripe lock, an exact probe (every structural change holds that
 * lock), an insert if the key is still absent.
 *
 * Every writer of a slot's contents or tag holds the slot, so a slot
 * seen held is consistent: its tag and key say whether it is the key's
 * one live copy. A slot's lock word is:
 *   SLOT_DEAD   0  not a live slot (a retired table's released memory)
 *   SLOT_OPEN   1  live and unlocked
 *   SLOT_HELD   2  locked
 *   SLOT_MOVED  3  its table was retired by a growth
 *   4 to 195       biased to the thread of that mark (see "biased slots")
 * Dead and moved mean "look again, in the current table" (the slow path).
 * A new key's slot is biased to the thread that inserted it, which then
 * holds it with plain stores and loads, without the lock's atomic
 * instruction; another thread takes it back, once, at the cost of a
 * membarrier(2).
 *
 * Tables start small and grow by half as keys arrive, up to 80% full at
 * 'max_keys'. A growth locks every slot of the old table for good (MOVED),
 * copies the keys and publishes the new table's view. The old one cannot be
 * freed while a check may still be scanning it, so it is kept until the store
 * closes, but its pages are given back to the kernel: a late reader then
 * sees zeros (an empty tag, a dead slot) and looks again. When a stripe is
 * full, a clock hand samples the next 16 slots and reclaims an expired
 * one, or else the least recently used of the sample (as Redis
 * approximates LRU), so memory stays bounded. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "store.h"

#define STRIPES_MAX      64
#define EVICT_SAMPLE     16
#define DEFAULT_MAX_KEYS 1000000u
#define INLINE_KEY       24
#define MIN_SLOTS        16
/* Coarse times in a slot are kept in binary units, so that no check
 * divides: expiry in units of 2^20 us (about a second, rounded up), last
 * use in units of 2^10 us (about a millisecond). */
#define EXPIRES_SHIFT 20
#define TOUCHED_SHIFT 10
/* Threads read the clock before they lock: another may have stamped a key
 * with a later time, up to this many units (about 67 s, as long as a
 * thread may wait for a slot). */
#define AHEAD_TICKS (1u << 16)
/* Growths per stripe: a stripe holds at most 2^34 keys (2^40 among 64),
 * and from 16 slots by half each time that is at most 53 growths. */
#define RETIRED_MAX 64
/* Slots a growth retires at a time: a barrier, if one is needed, for each
 * chunk. */
#define GROW_CHUNK 1024

enum { SLOT_DEAD = 0, SLOT_OPEN = 1, SLOT_HELD = 2, SLOT_MOVED = 3 };
/* A lock word from BIAS_FIRST up is a slot biased to the thread of that
 * mark: open, and its owner enters without an atomic instruction. Marks
 * are lent to at most BIAS_MARKS threads at a time; a thread without one
 * (BIAS_NONE) is never an owner. */
#define BIAS_FIRST 4u
#define BIAS_MARKS 192u
#define BIAS_NONE  255u
/* Biased slots taken back after which a store biases no new key: its
 * keys are shared between threads. */
#define BIAS_REVOKED_MAX 1024u

/* How a slot is held: by its lock, by its owner (without the lock), or
 * by its lock until it is let go biased to this thread (a new key). Not
 * held: HOLD_NONE, or HOLD_SKIP for a slot biased to another thread that
 * a probe passes by rather than take it for a key that may not be its. */
enum { HOLD_NONE = 0, HOLD_LOCK, HOLD_OWNER, HOLD_GRANT, HOLD_SKIP };

/* One key. Expiry and last use are kept coarse: they only choose what to
 * evict. */
typedef struct mem_slot {
    fg__algo_state state;
    char key[INLINE_KEY]; /* the key, or a pointer to it when longer */
    uint32_t expires;     /* in 2^20 us, rounded up */
    uint32_t touched;     /* in 2^10 us; compared as an age, may wrap */
    uint32_t owner;       /* the limiter's id: limiters never share */
    uint16_t keylen;
    _Atomic uint8_t
        lock;           /* SLOT_*, or the mark of the thread it is biased to */
    _Atomic uint8_t in; /* 1 while its owner is in it without the lock */
} mem_slot;

_Static_assert(sizeof(mem_slot) == 64, "a slot is one cache line");

/* The bytes of a slot but its lock word and its owner's flag. */
#define SLOT_BODY offsetof(mem_slot, lock)

/* One allocation: this header, then the slots on a cache line, then the
 * tags. */
typedef struct mem_table {
    size_t size; /* slots, not a power of two */
    _Atomic uint8_t *tags;
    mem_slot *slots;
} mem_table;

/* A view packs a table's slots address (a multiple of 64, below 2^48) with
 * its size as a 16-bit mantissa (the top bits) shifted left by the low 6
 * bits: sizes below 65,536 are exact, larger ones are rounded up to fit. */
#define VIEW_ADDR  0x0000ffffffffffc0ull
#define VIEW_SHIFT 0x3fu

/* Written by slow paths only: each on its own cache lines. */
typedef struct mem_stripe {
    atomic_int lock;
    mem_table *table; /* the current one, under the lock */
    uint32_t hand;
    uint64_t count, cap, max_size;
    uint64_t slow; /* lookups that took the slow path */
    unsigned nretired;
    mem_table *retired[RETIRED_MAX]; /* kept until close */
} __attribute__((aligned(64))) mem_stripe;

typedef struct mem_store {
    fg_store base;
    fg_clock_fn clock;
    void *clock_ctx;
    fg__gettime_fn gettime; /* for the default clock */
    uint64_t seed;
    size_t page;
    uint64_t stripe_mask; /* the stripes' count, a power of two, less 1 */
    /* Each stripe's current view, read by every check and written only
     * when a growth publishes; then the stripes. Both aligned to a cache
     * line within 'stripes_mem'. */
    _Atomic uint64_t *views;
    mem_stripe *stripes;
    void *stripes_mem;
    /* Written only when a thread takes a slot biased to another: a line
     * away from what every check reads (the store is allocated without
     * alignment to 64). */
    char apart[64];
    atomic_int bias_on;    /* new keys are biased to their thread */
    atomic_ullong revoked; /* biased slots taken back */
} mem_store;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait a little; after a while give the CPU away, since on a busy machine
 * the holder may be waiting for it. */
static inline void backoff(unsigned *spins)
{
    if (++*spins >= 64) {
        sched_yield();
        *spins = 0;
    } else {
        cpu_relax();
    }
}

static void stripe_lock(mem_stripe *s)
{
    for (unsigned spins = 0;; backoff(&spins))
        if (!atomic_load_explicit(&s->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
            return;
}

static void stripe_unlock(mem_stripe *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* ---- biased slots -----------------------------------------------------
 * A key is most often checked by the thread that inserted it, and the
 * lock's compare-and-swap is then the dearest part of a check: it waits
 * for the slot's line and holds back every load after it. So a new key's
 * slot is biased to its thread: the lock word holds the thread's mark, and
 * the owner enters by raising the slot's 'in' flag and seeing its mark
 * still there, with a plain store and load. Another thread takes the slot
 * by swapping the mark for SLOT_HELD, then waits for 'in' to fall; the
 * slot is unbiased from then on. The owner's store of 'in' and its load of
 * the lock word may pass each other in the processor; the taker's
 * membarrier(2) makes every running thread of the process order its memory
 * accesses before it returns, so either the owner sees SLOT_HELD or the
 * taker sees 'in' (Dekker's pattern, one side's fence made by the other).
 * Without the expedited membarrier no slot is biased. */

#ifndef MEMBARRIER_CMD_QUERY
#define MEMBARRIER_CMD_QUERY                      0
#define MEMBARRIER_CMD_GLOBAL                     1
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED          8
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED 16
#endif

static long membarrier(int cmd)
{
#ifdef SYS_membarrier
    return syscall(SYS_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    return -1;
#endif
}

/* 1 when this process may bias slots: the expedited barrier is there and
 * registered (once, for every store). */
static int bias_supported(void)
{
    static atomic_int supported = -1;
    int v = atomic_load_explicit(&supported, memory_order_acquire);
    if (v >= 0)
        return v;
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    v = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        (cmds & MEMBARRIER_CMD_GLOBAL) &&
        membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    atomic_store_explicit(&supported, v, memory_order_release);
    return v;
}

/* Order every running thread's memory accesses. The expedited barrier
 * needs the process registered, which a child of fork(2) may not be: then
 * register again, and as a last resort take the global barrier (slower,
 * but it needs nothing). */
static void bias_barrier(void)
{
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return;
    if (membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
        return;
    /* Not reached on a kernel that answered the query: going on without
     * exclusion would corrupt counts without a trace. */
    fputs("floodgate: membarrier failed; cannot take a biased slot\n", stderr);
    abort();
}

/* The marks lent out, one bit each; a thread gives its mark back when it
 * exits. A mark lent again makes its new thread the owner of the slots
 * still biased to it, which is safe: their old owner is in none of them. */
static _Atomic uint64_t marks_lent[BIAS_MARKS / 64];
static pthread_key_t mark_key;
static int mark_key_made;
static pthread_once_t mark_once = PTHREAD_ONCE_INIT;
static _Thread_local uint8_t self_mark; /* 0 until this thread asks */

static void mark_return(void *v)
{
    unsigned i = (unsigned)(uintptr_t)v - BIAS_FIRST;
    atomic_fetch_and_explicit(&marks_lent[i / 64], ~(1ull << (i % 64)),
                              memory_order_release);
    /* A later check in this exiting thread (another destructor's) owns
     * nothing. */
    self_mark = BIAS_NONE;
}

static void mark_key_make(void)
{
    mark_key_made = pthread_key_create(&mark_key, mark_return) == 0;
}

/* Lend this thread a free mark, or BIAS_NONE when there is none. */
static __attribute__((noinline, cold)) uint8_t mark_take(void)
{
    unsigned v = BIAS_NONE;
    pthread_once(&mark_once, mark_key_make);
    for (unsigned w = 0; mark_key_made && w < BIAS_MARKS / 64; w++) {
        uint64_t lent =
            atomic_load_explicit(&marks_lent[w], memory_order_relaxed);
        while (~lent) {
            unsigned b = (unsigned)__builtin_ctzll(~lent);
            if (atomic_compare_exchange_weak_explicit(
                    &marks_lent[w], &lent, lent | 1ull << b,
                    memory_order_acquire, memory_order_relaxed)) {
                v = BIAS_FIRST + w * 64 + b;
                break;
            }
        }
        if (v != BIAS_NONE)
            break;
    }
    if (v != BIAS_NONE &&
        pthread_setspecific(mark_key, (void *)(uintptr_t)v) != 0) {
        mark_return((void *)(uintptr_t)v);
        v = BIAS_NONE;
    }
    self_mark = (uint8_t)v;
    return self_mark;
}

static inline uint8_t mark_self(void)
{
    uint8_t v = self_mark;
    return __builtin_expect(v != 0, 1) ? v : mark_take();
}

/* After taking 'sl' from its owner: wait until the owner is out. */
static __attribute__((noinline)) void slot_revoke(mem_store *m, mem_slot *sl)
{
    bias_barrier();
    for (unsigned spins = 0;
         atomic_load_explicit(&sl->in, memory_order_acquire); backoff(&spins))
        ;
    unsigned long long n =
        atomic_fetch_add_explicit(&m->revoked, 1, memory_order_relaxed) + 1;
    if (n >= BIAS_REVOKED_MAX)
        atomic_store_explicit(&m->bias_on, 0, memory_order_relaxed);
}

/* The owner's way into 'sl', biased to 'self': 1 when in, 0 when the
 * slot was taken meanwhile. */
static inline __attribute__((always_inline)) int slot_enter(mem_slot *sl,
                                                            uint8_t self)
{
    atomic_store_explicit(&sl->in, 1, memory_order_relaxed);
    /* The compiler keeps the order; a taker's barrier orders the
     * processor. */
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(
            atomic_load_explicit(&sl->lock, memory_order_acquire) == self, 1))
        return 1;
    atomic_store_explicit(&sl->in, 0, memory_order_release);
    return 0;
}

/* Hold 'sl' if that needs no waiting: biased to this thread, or open (it
 * must be seen open first: a failed compare-and-swap still writes its
 * line, and a retired table's released pages must stay released). Returns
 * how it is held, or, without writing, HOLD_SKIP when it is biased to
 * another thread and HOLD_NONE when it is dead, moved or held. */
static inline __attribute__((always_inline)) int slot_try(mem_slot *sl)
{
    const uint8_t self = mark_self();
    uint8_t w = atomic_load_explicit(&sl->lock, memory_order_relaxed);
    if (w == self)
        return slot_enter(sl, self) ? HOLD_OWNER : HOLD_NONE;
    if (w == SLOT_OPEN && atomic_compare_exchange_strong_explicit(
                              &sl->lock, &w, SLOT_HELD, memory_order_acquire,
                              memory_order_relaxed))
        return HOLD_LOCK;
    return w >= BIAS_FIRST ? HOLD_SKIP : HOLD_NONE;
}

/* Hold 'sl', waiting for its holder, and taking it from the thread it is
 * biased to when 'take' is set (else HOLD_SKIP). Returns how it is held,
 * or HOLD_NONE, without writing, when it is dead or moved. */
static int slot_lock_take(mem_store *m, mem_slot *sl, int take)
{
    const uint8_t self = mark_self();
    for (unsigned spins = 0;;) {
        uint8_t w = atomic_load_explicit(&sl->lock, memory_order_relaxed);
        if (w == self) {
            if (slot_enter(sl, self))
                return HOLD_OWNER;
            continue;
        }
        if (w >= BIAS_FIRST && !take)
            return HOLD_SKIP;
        if (w == SLOT_OPEN || w >= BIAS_FIRST) {
            if (atomic_compare_exchange_weak_explicit(&sl->lock, &w, SLOT_HELD,
                                                      memory_order_acquire,
                                                      memory_order_relaxed)) {
                if (w != SLOT_OPEN)
                    slot_revoke(m, sl);
                return HOLD_LOCK;
            }
            continue;
        }
        if (w != SLOT_HELD)
            return HOLD_NONE;
        backoff(&spins);
    }
}

/* Hold 'sl', the one slot of a key, found under the stripe lock. */
static int slot_lock(mem_store *m, mem_slot *sl)
{
    return slot_lock_take(m, sl, 1);
}

/* Let go of 'sl', held as 'how'. */
static inline void slot_unlock(mem_slot *sl, int how)
{
    if (how == HOLD_OWNER)
        atomic_store_explicit(&sl->in, 0, memory_order_release);
    else
        atomic_store_explicit(&sl->lock,
                              how == HOLD_GRANT ? self_mark : SLOT_OPEN,
                              memory_order_release);
}

/* Let go of 'sl', emptied while held as 'how': open, unbiased, for the
 * next key of whichever thread. */
static void slot_release_empty(mem_slot *sl, int how)
{
    if (how == HOLD_OWNER) {
        /* A taker that swapped the mark first waits for 'in' instead. */
        uint8_t w = self_mark;
        atomic_compare_exchange_strong_explicit(&sl->lock, &w, SLOT_OPEN,
                                                memory_order_release,
                                                memory_order_relaxed);
    }
    slot_unlock(sl, how);
}

/* Lock 'sl' of a retiring table for good, once its holder lets go.
 * Returns the lock word it had: open, or the mark of the thread it was
 * biased to (an owner who may still be in it, until a barrier and its 'in'
 * flag say otherwise). */
static uint8_t slot_retire(mem_slot *sl)
{
    for (unsigned spins = 0;; backoff(&spins)) {
        uint8_t w = atomic_load_explicit(&sl->lock, memory_order_relaxed);
        if (w == SLOT_HELD)
            continue;
        if (atomic_compare_exchange_weak_explicit(&sl->lock, &w, SLOT_MOVED,
                                                  memory_order_acquire,
                                                  memory_order_relaxed))
            return w;
    }
}

/* 1 when a lock word is a bias to another thread than 'self'. */
static inline int biased_elsewhere(uint8_t w, uint8_t self)
{
    return w >= BIAS_FIRST && w != self;
}

static inline uint8_t tag_get(const mem_table *t, size_t i)
{
    return atomic_load_explicit(&t->tags[i], memory_order_relaxed);
}

static inline void tag_set(mem_table *t, size_t i, uint8_t tag)
{
    atomic_store_explicit(&t->tags[i], tag, memory_order_relaxed);
}

/* The store's clock. The default is read here rather than through the
 * pointer: the same CLOCK_MONOTONIC as fg__mono_us, straight from the
 * vDSO, without the C library's wrapper. */
static inline __attribute__((always_inline)) uint64_t
store_now_as(int own_clock, const mem_store *m)
{
    if (own_clock)
        return m->clock(m->clock_ctx);
    struct timespec ts;
    if (__builtin_expect(m->gettime(CLOCK_MONOTONIC, &ts) != 0, 0))
        return fg__mono_us(NULL);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
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

static inline uint64_t key_hash(const mem_store *m, uint32_t owner,
                                const char *key, size_t keylen)
{
    return fg__hash_inline(key, keylen, m->seed ^ owner);
}

/* The stripe of a key's hash: bits apart from those that pick its home
 * slot and its tag. */
static inline size_t stripe_index(const mem_store *m, uint64_t h)
{
    return (size_t)(h >> 8) & m->stripe_mask;
}

static inline mem_stripe *stripe_of(const mem_store *m, uint64_t h)
{
    return &m->stripes[stripe_index(m, h)];
}

/* The least shift that brings 'n', rounded up, within a 16-bit mantissa. */
static unsigned view_shift(size_t n)
{
    unsigned shift = 0;
    while ((n + ((size_t)1 << shift) - 1) >> shift > 0xffff)
        shift++;
    return shift;
}

/* The smallest size at least 'n' that a view can hold. */
static size_t view_round(size_t n)
{
    unsigned shift = view_shift(n);
    return ((n + ((size_t)1 << shift) - 1) >> shift) << shift;
}

static inline mem_slot *view_slots(uint64_t v)
{
    return (mem_slot *)(uintptr_t)(v & VIEW_ADDR);
}

static inline size_t view_size(uint64_t v)
{
    return (size_t)(v >> 48) << (v & VIEW_SHIFT);
}

/* The view of 't', whose size view_round() gave and whose address
 * table_new() checked. */
static uint64_t view_of(const mem_table *t)
{
    unsigned shift = view_shift(t->size);
    return (uint64_t)(uintptr_t)t->slots | (uint64_t)(t->size >> shift) << 48 |
           shift;
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

static inline uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static inline uint32_t load32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* 'n' bytes of 'a' and 'b' equal: short keys (the usual, and inline in
 * their slot) by a few overlapping word loads rather than a call. */
static inline int key_eq(const char *a, const char *b, size_t n)
{
    if (n > INLINE_KEY)
        return memcmp(a, b, n) == 0;
    if (n >= 8) {
        uint64_t d =
            (load64(a) ^ load64(b)) | (load64(a + n - 8) ^ load64(b + n - 8));
        if (n > 16)
            d |= load64(a + 8) ^ load64(b + 8);
        return d == 0;
    }
    if (n >= 4)
        return ((load32(a) ^ load32(b)) |
                (load32(a + n - 4) ^ load32(b + n - 4))) == 0;
    return n == 0 ||
           (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1]);
}

/* Owner and length are compared apart: a word across them and the lock
 * word would wait for the lock's store to reach the cache. Once the
 * lengths are equal, a short key is in the slot (a constant test when the
 * caller knows the length). */
static inline int slot_is(const mem_slot *sl, uint32_t owner, const char *key,
                          size_t keylen)
{
    return sl->owner == owner && sl->keylen == keylen &&
           key_eq(keylen <= INLINE_KEY ? sl->key : slot_key(sl), key, keylen);
}

static void slot_free_key(mem_slot *sl)
{
    if (sl->keylen > INLINE_KEY)
        fg__free((void *)slot_key(sl));
}

/* An empty table of 'size' slots (a size view_round() gave), every slot
 * open; NULL on failure. */
static mem_table *table_new(size_t size)
{
    if (size > (SIZE_MAX - sizeof(mem_table) - 64) / (sizeof(mem_slot) + 1))
        return NULL;
    mem_table *t = fg__malloc(sizeof(*t) + 63 + size * sizeof(mem_slot) + size);
    if (!t)
        return NULL;
    t->size = size;
    t->slots = (mem_slot *)(((uintptr_t)(t + 1) + 63) & ~(uintptr_t)63);
    t->tags = (_Atomic uint8_t *)(t->slots + size);
    /* A view has 48 bits for the address: every address a process gets
     * from malloc on today's 64-bit systems. */
    if ((uintptr_t)t->slots & ~(uintptr_t)VIEW_ADDR) {
        fg__free(t);
        return NULL;
    }
    for (size_t i = 0; i < size; i++) {
        atomic_init(&t->tags[i], 0);
        atomic_init(&t->slots[i].lock, SLOT_OPEN);
        atomic_init(&t->slots[i].in, 0);
    }
    return t;
}

/* Give a retired table's whole pages back to the kernel, all but the
 * header that late readers still use: they read zeros after this, or the
 * old contents (dead or moved either way), and write nothing. */
static void table_release(const mem_store *m, mem_table *t)
{
#ifdef MADV_DONTNEED
    uintptr_t from = ((uintptr_t)(t + 1) + m->page - 1) & ~(m->page - 1);
    uintptr_t to = (uintptr_t)(t->tags + t->size) & ~(m->page - 1);
    if (from < to)
        (void)madvise((void *)from, to - from, MADV_DONTNEED);
#else
    (void)m;
    (void)t;
#endif
}

/* Grow the table of 's' by half (at most to its final size), moving every
 * key to its place in the new one. The stripe lock is held. */
static int stripe_grow(mem_store *m, mem_stripe *s)
{
    mem_table *old = s->table;
    size_t size = view_round(old->size + old->size / 2);
    if (size > s->max_size)
        size = s->max_size;
    if (s->nretired == RETIRED_MAX)
        return FG_ENOMEM; /* unreachable by the bound above */
    mem_table *t = table_new(size);
    if (!t)
        return FG_ENOMEM;
    const uint8_t self = mark_self();
    for (size_t from = 0; from < old->size; from += GROW_CHUNK) {
        size_t n =
            old->size - from < GROW_CHUNK ? old->size - from : GROW_CHUNK;
        mem_slot *sl = &old->slots[from];
        /* From here on a check that finds one of these slots looks again
         * (in the new table once published); one that holds it finishes
         * first and its update is copied. The owners of slots biased to
         * other threads are waited for after one barrier for the chunk. */
        uint8_t was[GROW_CHUNK];
        int barrier = 0;
        for (size_t j = 0; j < n; j++)
            barrier |= biased_elsewhere(was[j] = slot_retire(&sl[j]), self);
        if (barrier)
            bias_barrier();
        for (size_t j = 0; j < n; j++) {
            for (unsigned spins = 0;
                 biased_elsewhere(was[j], self) &&
                 atomic_load_explicit(&sl[j].in, memory_order_acquire);
                 backoff(&spins))
                ;
            uint8_t tag = tag_get(old, from + j);
            if (!tag)
                continue;
            uint64_t h =
                key_hash(m, sl[j].owner, slot_key(&sl[j]), sl[j].keylen);
            size_t i = home(h, size);
            while (tag_get(t, i))
                i = next(i, size);
            /* The key keeps its bias: the new table is not yet seen. */
            memcpy(&t->slots[i], &sl[j], SLOT_BODY);
            atomic_store_explicit(&t->slots[i].lock, was[j],
                                  memory_order_relaxed);
            tag_set(t, i, tag);
        }
    }
    s->table = t;
    atomic_store_explicit(&m->views[s - m->stripes], view_of(t),
                          memory_order_release);
    s->retired[s->nretired++] = old;
    table_release(m, old);
    return FG_OK;
}

/* Remove the key at 'i' of the current table 't' by shifting back the keys
 * of its probe run (no tombstones, so probes stay short under churn). The
 * stripe lock is held; each slot written is locked, the hole always. A
 * check that misses a key while it moves takes the slow path. */
static void slot_remove(mem_store *m, mem_stripe *s, mem_table *t, size_t i)
{
    int how = slot_lock(m, &t->slots[i]);
    slot_free_key(&t->slots[i]);
    tag_set(t, i, 0);
    s->count--;
    for (size_t j = next(i, t->size); tag_get(t, j); j = next(j, t->size)) {
        mem_slot *sl = &t->slots[j];
        size_t k =
            home(key_hash(m, sl->owner, slot_key(sl), sl->keylen), t->size);
        /* Leave the key if its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            int held = slot_lock(m, sl);
            memcpy(&t->slots[i], sl, SLOT_BODY);
            tag_set(t, i, tag_get(t, j));
            tag_set(t, j, 0);
            slot_unlock(&t->slots[i], how);
            i = j;
            how = held;
        }
    }
    slot_release_empty(&t->slots[i], how);
}

/* Make room for one key: reclaim an expired key among the next few the
 * clock hand passes, or else the least recently used of them. */
static void stripe_evict(mem_store *m, mem_stripe *s, uint64_t now_us)
{
    mem_table *t = s->table;
    size_t victim = SIZE_MAX, seen = 0, i = s->hand % t->size;
    uint32_t now_e = (uint32_t)(now_us >> EXPIRES_SHIFT);
    uint32_t now_t = (uint32_t)(now_us >> TOUCHED_SHIFT);
    int32_t oldest = 0;
    for (size_t step = 0; step < t->size && seen < EVICT_SAMPLE; step++) {
        if (tag_get(t, i)) {
            mem_slot *sl = &t->slots[i];
            seen++;
            /* A check may be updating these two right now: each is read
             * whole, without the slot's lock (taking it would take a
             * biased slot from its owner). */
            uint32_t expires = __atomic_load_n(&sl->expires, __ATOMIC_RELAXED);
            /* Signed: keys touched after this thread read the clock
             * (it may have waited for the stripe lock) keep their order. */
            int32_t age = (int32_t)(now_t - __atomic_load_n(&sl->touched,
                                                            __ATOMIC_RELAXED));
            if (expires <= now_e) {
                victim = i;
                break;
            }
            if (victim == SIZE_MAX || age > oldest) {
                oldest = age;
                victim = i;
            }
        }
        i = next(i, t->size);
    }
    s->hand = (uint32_t)i;
    if (victim != SIZE_MAX)
        slot_remove(m, s, t, victim);
}

/* Find ('owner', 'key') in 't' under the stripe lock, where the tags and
 * keys stand still: returns the slot's index, or that of the empty slot
 * where it would go, and sets '*found'. */
static size_t table_find(const mem_table *t, uint64_t h, uint32_t owner,
                         const char *key, size_t keylen, int *found)
{
    uint8_t tag = tag_of(h);
    size_t i = home(h, t->size);
    for (uint8_t x; (x = tag_get(t, i)) != 0; i = next(i, t->size)) {
        if (x == tag && slot_is(&t->slots[i], owner, key, keylen)) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}

/* Insert a new key (the stripe lock held): make room first when the
 * stripe is full or its table is crowded. The new slot is returned held,
 * as '*how'. */
static int stripe_insert(mem_store *m, mem_stripe *s, uint64_t h,
                         uint32_t owner, const char *key, size_t keylen,
                         uint64_t now_us, mem_slot **out, int *how)
{
    char *copy = NULL;
    if (keylen > INLINE_KEY) {
        copy = fg__malloc(keylen);
        if (!copy)
            return FG_ENOMEM;
        memcpy(copy, key, keylen);
    }
    mem_table *t = s->table;
    if (s->count >= s->cap) {
        stripe_evict(m, s, now_us);
    } else if ((s->count + 1) * 5 > t->size * 4 && t->size < s->max_size) {
        if (stripe_grow(m, s) != FG_OK) {
            fg__free(copy);
            return FG_ENOMEM;
        }
        t = s->table;
    }
    size_t i = home(h, t->size);
    while (tag_get(t, i))
        i = next(i, t->size);
    mem_slot *sl = &t->slots[i];
    /* An empty slot, but a check may hold it after reading a stale tag.
     * Locked, the new key is biased to this thread when it is let go. */
    *how = slot_lock(m, sl);
    if (*how == HOLD_LOCK &&
        atomic_load_explicit(&m->bias_on, memory_order_relaxed) &&
        self_mark != BIAS_NONE)
        *how = HOLD_GRANT;
    memset(sl, 0, SLOT_BODY);
    sl->touched = (uint32_t)(now_us >> TOUCHED_SHIFT);
    sl->owner = owner;
    sl->keylen = (uint16_t)keylen;
    if (copy)
        memcpy(sl->key, &copy, sizeof(copy));
    else if (keylen)
        memcpy(sl->key, key, keylen);
    tag_set(t, i, tag_of(h));
    s->count++;
    *out = sl;
    return FG_OK;
}

/* The fast path: the slot of ('owner', 'key') in the current table, held
 * as '*how', or NULL when it is not found that way (absent, moving, its
 * table retired, biased to another thread, or held by another and 'wait'
 * not set). Writes nothing shared but the slot it holds. */
static inline __attribute__((always_inline)) mem_slot *
fast_find(mem_store *m, uint64_t h, uint32_t owner, const char *key,
          size_t keylen, int wait, int *how)
{
    uint64_t v = atomic_load_explicit(&m->views[stripe_index(m, h)],
                                      memory_order_acquire);
    mem_slot *slots = view_slots(v);
    size_t size = view_size(v), i = home(h, size);
    _Atomic uint8_t *tags = (_Atomic uint8_t *)(slots + size);
    uint8_t tag = tag_of(h);
    /* The key is most often at home: fetch its slot while its tag loads
     * (in a large table both miss the cache). */
    __builtin_prefetch(&slots[i], 1);
    /* Bounded, since keys may move ahead of the scan. */
    for (size_t n = 0; n < size; n++, i = next(i, size)) {
        uint8_t x = atomic_load_explicit(&tags[i], memory_order_relaxed);
        if (x == 0)
            return NULL;
        if (x != tag)
            continue;
        mem_slot *sl = &slots[i];
        /* A slot biased to another thread may hold another key with the
         * same tag: passed by, so that only the slow path, which knows,
         * takes it. */
        *how = wait ? slot_lock_take(m, sl, 0) : slot_try(sl);
        if (*how == HOLD_SKIP)
            continue;
        if (*how == HOLD_NONE)
            return NULL;
        if (atomic_load_explicit(&tags[i], memory_order_relaxed) == tag &&
            slot_is(sl, owner, key, keylen))
            return sl;
        slot_unlock(sl, *how);
    }
    return NULL;
}

/* The slow path, under the stripe lock: the key's slot, held as '*how',
 * inserted when absent and 'insert' is set; '*out' NULL when absent
 * otherwise. */
static int slow_find(mem_store *m, mem_stripe *s, uint64_t h, uint32_t owner,
                     const char *key, size_t keylen, uint64_t now_us,
                     int insert, mem_slot **out, int *how)
{
    int found, rc = FG_OK;
    *out = NULL;
    stripe_lock(s);
    s->slow++;
    mem_table *t = s->table;
    size_t i = table_find(t, h, owner, key, keylen, &found);
    if (found) {
        *out = &t->slots[i];
        *how = slot_lock(m, *out);
    } else if (insert) {
        rc = stripe_insert(m, s, h, owner, key, keylen, now_us, out, how);
    }
    stripe_unlock(s);
    return rc;
}

/* Decide for the slot 'sl', held as 'how', by 'algorithm' (the
 * limiter's), stamp its expiry and last use, and let it go. */
static inline __attribute__((always_inline)) int
slot_decide(const fg_limiter *l, fg_algorithm algorithm, mem_slot *sl, int how,
            uint64_t now, uint64_t cost, fg_decision *d)
{
    uint64_t expires;
    int rc = fg__algo_decide_as(algorithm, &l->p, &sl->state, now, cost, d,
                                &expires);
    if (__builtin_expect(rc == FG_OK, 1)) {
        /* Each whole, for an eviction reading them without the lock. */
        __atomic_store_n(
            &sl->expires,
            (uint32_t)((expires + (1u << EXPIRES_SHIFT) - 1) >> EXPIRES_SHIFT),
            __ATOMIC_RELAXED);
        /* Never back in time: a check that read the clock before a later
         * one took the slot must not make the key look older. A select,
         * not a branch: whether the key was used in this same unit is
         * anyone's guess, and a mispredicted branch on a slot just fetched
         * from memory would throw away the work begun after it. */
        uint32_t now_t = (uint32_t)(now >> TOUCHED_SHIFT), was = sl->touched;
        __atomic_store_n(&sl->touched, was - now_t > AHEAD_TICKS ? now_t : was,
                         __ATOMIC_RELAXED);
    }
    slot_unlock(sl, how);
    return rc;
}

/* A check whose key the fast path did not find: new, moving, or behind a
 * growth. Out of line, so that the common path keeps its registers. */
static __attribute__((noinline)) int
mem_decide_slow(mem_store *m, const fg_limiter *l, const char *key,
                size_t keylen, uint64_t cost, fg_decision *d, uint64_t h,
                uint64_t now)
{
    mem_stripe *s = stripe_of(m, h);
    mem_slot *sl;
    int how;
    int rc =
        slow_find(m, s, h, (uint32_t)l->id, key, keylen, now, 1, &sl, &how);
    if (rc != FG_OK)
        return rc;
    return slot_decide(l, l->p.algorithm, sl, how, now, cost, d);
}

/* The store's decision at 'now': FG_OK with 'd' filled but its source,
 * or a failure. */
static int mem_decide(mem_store *m, const fg_limiter *l, const char *key,
                      size_t keylen, uint64_t cost, fg_decision *d,
                      uint64_t now)
{
    uint32_t owner = (uint32_t)l->id;
    uint64_t h = key_hash(m, owner, key, keylen);
    int how;
    mem_slot *sl = fast_find(m, h, owner, key, keylen, 1, &how);
    if (!sl)
        return mem_decide_slow(m, l, key, keylen, cost, d, h, now);
    return slot_decide(l, l->p.algorithm, sl, how, now, cost, d);
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

/* fg_check's work for a long key, or one the fast path did not find or
 * found held. */
static __attribute__((noinline)) int
mem_check_slow(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
               fg_decision *d, uint64_t now)
{
    int rc = mem_decide((mem_store *)l->st, l, key, keylen, cost, d, now);
    return mem_settle(l, rc, key, keylen, cost, d);
}

/* fg_check's whole work for this store (the store settles its own
 * result), made for one algorithm and one kind of clock (the default, or
 * the caller's): a check dispatches on nothing. The clock is read first,
 * so that it overlaps the hash, the probe and, for a key out of the cache,
 * the wait for its slot. A long key (compared by a call), a slot held by
 * another thread and a key not found go out of line, so that the common
 * path keeps its registers and takes the slot's lock at its first try. */
static inline __attribute__((always_inline)) int
mem_check_as(fg_algorithm algorithm, int own_clock, fg_limiter *l,
             const char *key, size_t keylen, uint64_t cost, fg_decision *d)
{
    mem_store *m = (mem_store *)l->st;
    uint64_t now = store_now_as(own_clock, m);
    if (__builtin_expect(keylen > INLINE_KEY, 0))
        return mem_check_slow(l, key, keylen, cost, d, now);
    uint32_t owner = (uint32_t)l->id;
    uint64_t h = key_hash(m, owner, key, keylen);
    int how;
    mem_slot *sl = fast_find(m, h, owner, key, keylen, 0, &how);
    if (__builtin_expect(!sl, 0))
        return mem_check_slow(l, key, keylen, cost, d, now);
    return mem_settle(l, slot_decide(l, algorithm, sl, how, now, cost, d), key,
                      keylen, cost, d);
}

/* Fixed window (and naive_get_set, the same here), token bucket, and the
 * sliding window, whose algorithm is a call anyway; each with the default
 * clock and with a caller's. */
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
                     size_t keylen, uint64_t cost, fg_decision *d)
{
    mem_store *m = (mem_store *)st;
    return mem_decide(m, l, key, keylen, cost, d, store_now(m));
}

static int mem_refund(fg_store *st, fg_limiter *l, const char *key,
                      size_t keylen, uint64_t cost)
{
    mem_store *m = (mem_store *)st;
    uint32_t owner = (uint32_t)l->id;
    uint64_t h = key_hash(m, owner, key, keylen);
    mem_stripe *s = stripe_of(m, h);
    uint64_t now = store_now(m);

    int how;
    mem_slot *sl = fast_find(m, h, owner, key, keylen, 1, &how);
    if (!sl)
        slow_find(m, s, h, owner, key, keylen, now, 0, &sl, &how);
    if (sl) {
        fg__algo_refund(&l->p, &sl->state, now, cost);
        slot_unlock(sl, how);
    }
    return FG_OK;
}

static void mem_check_async(fg_store *st, fg__req *req)
{
    fg_decision d;
    mem_store *m = (mem_store *)st;
    int rc = mem_decide(m, req->l, req->key, req->keylen, req->cost, &d,
                        store_now(m));
    fg__req_done(req, rc, &d);
}

/* The keys held and the slow-path lookups, over every stripe. */
static void stripes_tally(const mem_store *m, uint64_t *keys, uint64_t *slow)
{
    *keys = *slow = 0;
    for (uint64_t i = 0; i <= m->stripe_mask; i++) {
        stripe_lock(&m->stripes[i]);
        *keys += m->stripes[i].count;
        *slow += m->stripes[i].slow;
        stripe_unlock(&m->stripes[i]);
    }
}

static uint64_t mem_keys(fg_store *st)
{
    uint64_t keys, slow;
    stripes_tally((mem_store *)st, &keys, &slow);
    return keys;
}

static void mem_close(fg_store *st)
{
    mem_store *m = (mem_store *)st;
    if (!m)
        return;
    for (uint64_t i = 0; m->stripes && i <= m->stripe_mask; i++) {
        mem_stripe *s = &m->stripes[i];
        mem_table *t = s->table;
        /* Retired tables hold copies of the current keys' pointers. */
        for (size_t j = 0; t && j < t->size; j++)
            if (tag_get(t, j))
                slot_free_key(&t->slots[j]);
        fg__free(t);
        for (unsigned k = 0; k < s->nretired; k++)
            fg__free(s->retired[k]);
    }
    fg__free(m->stripes_mem);
    fg__free(m);
}

static int mem_limiter_init(fg_store *st, fg_limiter *l, void **out, char *err,
                            size_t errlen)
{
    int own = store_own_clock((mem_store *)st);
    *out = NULL;
    l->check = NULL;
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
    }
    if (!l->check)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "memory store: unknown algorithm %d",
                          (int)l->p.algorithm);
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

uint64_t fg__store_memory_slow_paths(fg_store *st)
{
    if (!st || st->ops != &mem_ops)
        return 0;
    uint64_t keys, slow;
    stripes_tally((mem_store *)st, &keys, &slow);
    return slow;
}

void fg__store_memory_bias(fg_store *st, fg__mem_bias *out)
{
    memset(out, 0, sizeof(*out));
    if (!st || st->ops != &mem_ops)
        return;
    mem_store *m = (mem_store *)st;
    out->on = atomic_load(&m->bias_on);
    out->revoked = atomic_load(&m->revoked);
    for (uint64_t i = 0; i <= m->stripe_mask; i++) {
        mem_stripe *s = &m->stripes[i];
        stripe_lock(s);
        for (size_t j = 0; j < s->table->size; j++)
            if (tag_get(s->table, j) &&
                atomic_load(&s->table->slots[j].lock) >= BIAS_FIRST)
                out->biased++;
        stripe_unlock(s);
    }
}

void fg__store_memory_bias_set(fg_store *st, int on)
{
    if (st && st->ops == &mem_ops)
        atomic_store(&((mem_store *)st)->bias_on, on && bias_supported());
}

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
    m->gettime = fg__clock_gettime_fn();
    m->seed = (uint64_t)(uintptr_t)m ^ fg__wall_us() ^ 0x6a09e667f3bcc909ull;
    long page = sysconf(_SC_PAGESIZE);
    m->page = page > 0 && (page & (page - 1)) == 0 ? (size_t)page : 4096;
    atomic_init(&m->bias_on, bias_supported());
    atomic_init(&m->revoked, 0);

    /* Enough stripes that two threads rarely meet, few enough that each
     * holds at least a thousand keys. */
    unsigned n = 1;
    while (n < STRIPES_MAX && max_keys / (n * 2) >= 1024)
        n *= 2;
    m->stripe_mask = n - 1;
    /* The views, then each stripe on its own cache lines, so that two
     * threads working in two stripes never share one; the allocator
     * promises only 16 bytes. */
    size_t views = (n * sizeof(uint64_t) + 63) & ~(size_t)63;
    m->stripes_mem = fg__malloc(views + sizeof(mem_stripe) * n + 63);
    if (!m->stripes_mem)
        goto nomem;
    uintptr_t at = ((uintptr_t)m->stripes_mem + 63) & ~(uintptr_t)63;
    m->views = (_Atomic uint64_t *)at;
    m->stripes = (mem_stripe *)(at + views);
    memset(m->stripes, 0, sizeof(mem_stripe) * n);
    for (unsigned i = 0; i < n; i++) {
        mem_stripe *s = &m->stripes[i];
        s->cap = max_keys / n + (i < max_keys % n);
        /* Full, the table is 80% occupied; +1 keeps an empty slot. */
        s->max_size = view_round(s->cap + s->cap / 4 + 1);
        mem_table *t =
            table_new(s->max_size < MIN_SLOTS ? s->max_size : MIN_SLOTS);
        if (!t)
            goto nomem;
        s->table = t;
        atomic_init(&m->views[i], view_of(t));
        atomic_init(&s->lock, 0);
    }
    return &m->base;
nomem:
    mem_close(m ? &m->base : NULL);
    fg__seterr(err, errlen, FG_ENOMEM, "memory store: out of memory");
    return NULL;
}
