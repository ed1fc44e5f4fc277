/* test_memory_threads.c -- the memory store's stripe locks under
 * threads: no update is lost while tables grow under concurrent checks and
 * refunds, nor while keys are evicted and moved back by removals around
 * keys that are checked all along. Every count is then exact.
 *
 * Bounded in time: a second or two, less work under AddressSanitizer. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "../harness.h"
#include "memory_keys.h"
#include "floodgate.h"

#define SEC     1000000ull
#define DAY     (86400 * SEC)
#define THREADS 3

#define SCALE (TEST_UNDER_ASAN ? 4 : 1)

/* ---- growth: keys inserted while others are checked, store after store --
 * One stripe (max_keys below 2048) grows 13 times on the way to 1900 keys.
 * Thread 0 inserts the keys in turn, checking key 0 and a random earlier
 * key between inserts; the other threads meanwhile check key 0 (so that a
 * growth often finds it locked) and random inserted keys, and refund some.
 * Every update must reach the table that is current at the end. */

#define GROW_STORES (160 / SCALE)
#define GROW_KEYS   1900
#define GROW_LIMIT  1000000

struct grower {
    fg_limiter *l;
    pthread_barrier_t *start;
    atomic_uint *inserted; /* keys thread 0 has inserted so far */
    int id;
    uint64_t errors;
    uint32_t used[GROW_KEYS];
};

static int grow_one(struct grower *g, uint64_t i, uint64_t cost, int refund)
{
    char key[64];
    size_t len = key_of("g", i, key, sizeof(key));
    fg_decision d;
    if (fg_check(g->l, key, len, cost, &d) != FG_OK || !d.allowed)
        return 1;
    g->used[i] += (uint32_t)cost;
    if (refund) {
        if (fg_refund(g->l, key, len, 1) != FG_OK)
            return 1;
        g->used[i]--;
    }
    return 0;
}

static void *grow_thread(void *arg)
{
    struct grower *g = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(g->id + 1) ^
                 (uint64_t)(uintptr_t)g->inserted;
    pthread_barrier_wait(g->start);
    for (unsigned n = 0;;) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (g->id == 0) {
            if (n == GROW_KEYS)
                break;
            g->errors += (uint64_t)grow_one(g, n, 1, 0);
            atomic_store_explicit(g->inserted, ++n, memory_order_release);
        } else {
            n = atomic_load_explicit(g->inserted, memory_order_acquire);
            if (n == GROW_KEYS)
                break;
            if (n == 0)
                continue;
        }
        g->errors += (uint64_t)grow_one(g, 0, 1, 0);
        g->errors += (uint64_t)grow_one(g, x % n, 2, x % 3 == 0);
    }
    return NULL;
}

static void test_growth(void)
{
    /* A day-long window that the still clock never leaves. */
    uint64_t now = 10 * DAY + SEC, errors = 0, wrong = 0;
    static struct grower g[THREADS];
    for (int rep = 0; rep < GROW_STORES; rep++) {
        fg_memory_options o = {
            .max_keys = 2000, .clock = still_clock, .clock_ctx = &now};
        fg_store *st = fg_store_open_memory(&o, NULL, 0);
        fg_limit lim;
        fg_limit_parse("1000000/day", &lim);
        lim.algorithm = FG_FIXED_WINDOW;
        fg_limiter *l = st ? fg_limiter_new(st, &lim, NULL, 0) : NULL;
        CHECK(l != NULL);
        if (!l) {
            fg_store_close(st);
            return;
        }
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, THREADS);
        atomic_uint inserted = 0;
        pthread_t t[THREADS];
        for (int j = 0; j < THREADS; j++) {
            memset(&g[j], 0, sizeof(g[j]));
            g[j].l = l;
            g[j].start = &start;
            g[j].inserted = &inserted;
            g[j].id = j;
            CHECK_EQ(pthread_create(&t[j], NULL, grow_thread, &g[j]), 0);
        }
        for (int j = 0; j < THREADS; j++)
            pthread_join(t[j], NULL);
        pthread_barrier_destroy(&start);
        for (int j = 0; j < THREADS; j++)
            errors += g[j].errors;
        if (fg_store_keys(st) != GROW_KEYS)
            wrong++;
        char key[64];
        for (uint64_t i = 0; i < GROW_KEYS; i++) {
            uint64_t used = 0;
            for (int j = 0; j < THREADS; j++)
                used += g[j].used[i];
            size_t len = key_of("g", i, key, sizeof(key));
            fg_decision d;
            if (fg_check(l, key, len, 1, &d) != FG_OK ||
                d.remaining != GROW_LIMIT - used - 1) {
                if (wrong++ < 5)
                    fprintf(stderr,
                            "  store %d key %llu: remaining %llu, expected "
                            "%llu\n",
                            rep, (unsigned long long)i,
                            (unsigned long long)d.remaining,
                            (unsigned long long)(GROW_LIMIT - used - 1));
            }
        }
        fg_limiter_free(l);
        fg_store_close(st);
    }
    CHECK_EQ(errors, 0);
    CHECK_EQ(wrong, 0);
    printf("growth: %d stores grown by %d threads to %d keys, every count "
           "exact\n",
           GROW_STORES, THREADS, GROW_KEYS);
}

/* ---- churn: evictions and removals around hot keys ----------------------
 * Store after store of 100 keys: thread 0 fills it, adds the hot keys
 * (into a crowded table, so most sit away from their home slot), then
 * inserts new keys, every one of which evicts; each removal shifts back
 * the keys after it in its probe run, hot keys among them, while the other
 * threads check the hot keys all along. Each new key waits until every hot
 * key was checked since the one before it (a thread the host did not run
 * for a while would otherwise leave its hot keys the least recently used):
 * LRU never picks a hot key, so their counts must be exact. */

#define CHURN_STORES   (200 / SCALE)
#define CHURN_MAX_KEYS 100
#define CHURN_KEYS     2000
#define HOT            6

/* Every read moves time on by a millisecond, so that the keys' ages (kept in
 * milliseconds) tell the hot keys from the churn. */
static atomic_ullong ticking_now;

static uint64_t ticking_clock(void *ctx)
{
    (void)ctx;
    return atomic_fetch_add(&ticking_now, 1000);
}

struct churner {
    fg_limiter *l;
    int id;
    atomic_int *phase; /* 1: hot keys in, 2: done */
    /* The new keys inserted so far, and for each hot key the most of them
     * inserted before a check of it began (shared by the threads). */
    atomic_ullong *inserted, *seen;
    uint64_t hot[HOT], errors;
};

static int check_hot(struct churner *c, int h)
{
    char key[16];
    int len = snprintf(key, sizeof(key), "hot:%d", h);
    fg_decision d;
    c->hot[h]++;
    uint64_t before = atomic_load(c->inserted);
    int bad = fg_check(c->l, key, (size_t)len, 1, &d) != FG_OK || !d.allowed;
    unsigned long long was = atomic_load(&c->seen[h]);
    while (was < before &&
           !atomic_compare_exchange_weak(&c->seen[h], &was, before))
        ;
    return bad;
}

/* Wait until every hot key was checked after new key 'n' went in. */
static void wait_hot(struct churner *c, uint64_t n)
{
    for (int h = 0; h < HOT; h++)
        while (atomic_load(&c->seen[h]) < n)
            sched_yield();
}

static void *churn_thread(void *arg)
{
    struct churner *c = arg;
    char key[64];
    fg_decision d;
    if (c->id != 0) {
        while (atomic_load(c->phase) == 0)
            ;
        /* A round of the hot keys for each new key. */
        for (uint64_t done = 0; atomic_load(c->phase) == 1;) {
            uint64_t n = atomic_load(c->inserted);
            if (n == done) {
                sched_yield();
                continue;
            }
            for (int h = 0; h < HOT; h++)
                c->errors += (uint64_t)check_hot(c, h);
            done = n;
        }
        return NULL;
    }
    for (uint64_t i = 0; i < CHURN_KEYS; i++) {
        if (i == CHURN_MAX_KEYS) {
            for (int h = 0; h < HOT; h++)
                c->errors += (uint64_t)check_hot(c, h);
            atomic_store(c->phase, 1);
        }
        size_t len = key_of("c", i, key, sizeof(key));
        if (fg_check(c->l, key, len, 1, &d) != FG_OK || !d.allowed)
            c->errors++;
        if (i >= CHURN_MAX_KEYS) {
            uint64_t n = atomic_fetch_add(c->inserted, 1) + 1;
            c->errors += (uint64_t)check_hot(c, (int)(i % HOT));
            wait_hot(c, n);
        }
    }
    atomic_store(c->phase, 2);
    return NULL;
}

static void test_churn_hot(void)
{
    uint64_t errors = 0, wrong = 0, checks = 0, over = 0;
    atomic_store(&ticking_now, 10 * DAY + SEC);
    for (int rep = 0; rep < CHURN_STORES; rep++) {
        fg_memory_options o = {.max_keys = CHURN_MAX_KEYS,
                               .clock = ticking_clock};
        fg_store *st = fg_store_open_memory(&o, NULL, 0);
        fg_limit lim;
        fg_limit_parse("100000000/day", &lim);
        lim.algorithm = FG_FIXED_WINDOW;
        fg_limiter *l = st ? fg_limiter_new(st, &lim, NULL, 0) : NULL;
        CHECK(l != NULL);
        if (!l) {
            fg_store_close(st);
            return;
        }
        struct churner c[THREADS];
        pthread_t t[THREADS];
        atomic_int phase = 0;
        atomic_ullong inserted = 0, seen[HOT] = {0};
        for (int j = 0; j < THREADS; j++) {
            c[j] = (struct churner){.l = l,
                                    .id = j,
                                    .phase = &phase,
                                    .inserted = &inserted,
                                    .seen = seen};
            CHECK_EQ(pthread_create(&t[j], NULL, churn_thread, &c[j]), 0);
        }
        for (int j = 0; j < THREADS; j++)
            pthread_join(t[j], NULL);
        if (fg_store_keys(st) > CHURN_MAX_KEYS)
            over++;
        for (int h = 0; h < HOT; h++) {
            uint64_t n = 0;
            for (int j = 0; j < THREADS; j++) {
                errors += h == 0 ? c[j].errors : 0;
                n += c[j].hot[h];
            }
            checks += n;
            char key[16];
            int len = snprintf(key, sizeof(key), "hot:%d", h);
            fg_decision d;
            if (fg_check(l, key, (size_t)len, 1, &d) != FG_OK ||
                d.remaining != 100000000 - n - 1) {
                if (wrong++ < 5)
                    fprintf(stderr,
                            "  store %d hot:%d: remaining %llu, expected "
                            "%llu\n",
                            rep, h, (unsigned long long)d.remaining,
                            (unsigned long long)(100000000 - n - 1));
            }
        }
        fg_limiter_free(l);
        fg_store_close(st);
    }
    CHECK_EQ(errors, 0);
    CHECK_EQ(over, 0);
    CHECK_EQ(wrong, 0);
    /* Still within the day's window: nothing was reset by time. */
    CHECK(atomic_load(&ticking_now) < 11 * DAY);
    printf("churn: %d stores of %d keys, %d new keys each, %llu checks of "
           "%d hot keys by %d threads, every count exact\n",
           CHURN_STORES, CHURN_MAX_KEYS, CHURN_KEYS, (unsigned long long)checks,
           HOT, THREADS);
}

int main(void)
{
    test_growth();
    test_churn_hot();
    return TEST_DONE();
}
