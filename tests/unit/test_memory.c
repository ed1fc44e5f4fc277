/* test_memory.c -- the memory store through the public API, with a fake
 * clock: exact counts, binary-safe keys, limiters that never share
 * counters, bounded memory under churn (10 million keys; 2 million when
 * built with AddressSanitizer; FG_TEST_CHURN_KEYS=N sets another count),
 * large tables, exact counts under two threads, memory per key, bad input,
 * and allocation failure at every allocation of a whole scenario; and the
 * default clock. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "floodgate.h"
#include "store.h"

#define SEC 1000000ull
#define MS  1000ull

static uint64_t fake_now = 5 * SEC + 250 * MS;

static uint64_t fake_clock(void *ctx)
{
    return ctx ? *(const uint64_t *)ctx : fake_now;
}

static fg_store *open_store(uint64_t max_keys)
{
    fg_memory_options o = {.max_keys = max_keys, .clock = fake_clock};
    char err[256] = "";
    fg_store *st = fg_store_open_memory(&o, err, sizeof(err));
    CHECK(st != NULL);
    if (!st)
        fprintf(stderr, "  open memory store: %s\n", err);
    return st;
}

static fg_limiter *new_limiter(fg_store *st, const char *rate,
                               fg_algorithm algo)
{
    fg_limit l;
    char err[256] = "";
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    l.algorithm = algo;
    fg_limiter *lim = fg_limiter_new(st, &l, err, sizeof(err));
    CHECK(lim != NULL);
    if (!lim)
        fprintf(stderr, "  limiter %s: %s\n", rate, err);
    return lim;
}

/* Allowed (1), refused (0), or the negative code of a failed check. */
static int try_key(fg_limiter *l, const char *key, size_t len, uint64_t cost)
{
    fg_decision d;
    int rc = fg_check(l, key, len, cost, &d);
    return rc == FG_OK ? d.allowed : rc;
}

static const fg_algorithm all_algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};

static void test_tenth_and_eleventh(void)
{
    for (int i = 0; i < 3; i++) {
        fake_now = 5 * SEC + 250 * MS;
        fg_store *st = open_store(0);
        fg_limiter *l = new_limiter(st, "10/s", all_algos[i]);
        fg_decision d;
        for (uint64_t n = 1; n <= 10; n++) {
            CHECK_EQ(fg_check(l, "user:1", 6, 1, &d), FG_OK);
            CHECK_EQ(d.allowed, 1);
            CHECK_EQ(d.remaining, 10 - n);
            CHECK_EQ(d.limit, 10);
            CHECK_EQ(d.source, FG_SOURCE_STORE);
        }
        CHECK_EQ(fg_check(l, "user:1", 6, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(d.remaining, 0);
        CHECK_EQ(d.source, FG_SOURCE_STORE);
        /* fixed: the window ends in 750 ms; sliding: the 10 weigh until
         * 10 (1 s - e) + 1 s <= 10 s, e = 100 ms into the next window;
         * token bucket: one T = 100 ms. */
        static const uint64_t retry[] = {750, 850, 100};
        CHECK_EQ(d.retry_after_ms, retry[i]);
        fake_now += retry[i] * MS - 1;
        CHECK_EQ(try_key(l, "user:1", 6, 1), 0);
        fake_now += 1;
        CHECK_EQ(try_key(l, "user:1", 6, 1), 1);
        CHECK_EQ(fg_store_keys(st), 1);
        fg_limiter_free(l);
        fg_store_close(st);
    }
}

/* The wall clock, in microseconds, less SLACK_US: the memory store's
 * default clock is CLOCK_MONOTONIC set to read as the wall clock did when
 * the store opened, which a wall clock slewed since (NTP) may differ from
 * by a little. */
#define SLACK_US 2000u
static uint64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec / 1000 - SLACK_US;
}

/* The default clock (read straight from the vDSO when there is one) is
 * CLOCK_MONOTONIC in microseconds, read as the wall clock: a fixed window
 * of one day ends at the Unix epoch's next midnight, so the 'now' behind
 * each decision's reset_us lies between two readings taken around it
 * (give or take SLACK_US). Short keys and long ones (compared apart from
 * their slot) alike. */
static void test_default_clock(void)
{
    fg_store *st = fg_store_open_memory(NULL, NULL, 0);
    CHECK(st != NULL);
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("1000/day", &lim), FG_OK);
    lim.algorithm = FG_FIXED_WINDOW;
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK(l != NULL);
    const uint64_t day = 86400 * SEC;
    static const char *keys[] = {"k", "user:12345",
                                 "a key longer than twenty-four bytes"};
    int outside = 0;
    for (int i = 0; i < 300; i++) {
        const char *key = keys[i % 3];
        fg_decision d;
        uint64_t before = wall_us();
        CHECK_EQ(fg_check(l, key, strlen(key), 1, &d), FG_OK);
        uint64_t after = wall_us() + 2 * SLACK_US;
        uint64_t end = (before / day + 1) * day;
        if (after >= end)
            continue; /* a day's edge between the readings */
        uint64_t now = end - d.reset_us;
        outside += now < before || now > after;
    }
    CHECK_EQ(outside, 0);
    CHECK_EQ(fg_store_keys(st), 3);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* Each algorithm's check with the default clock (the store picks one per
 * algorithm and clock when the limiter is made): 5/day, five allowed with
 * exact remaining, the sixth refused with the wait its own algorithm
 * gives, placed in time between two readings of the clock. The token
 * bucket waits one emission interval (a day / 5); the fixed window, until
 * the day ends; the sliding window, until a fifth of the next day has
 * passed (then the 5 of this day weigh 4). Short and long keys. */
static void test_default_clock_algorithms(void)
{
    const uint64_t day = 86400 * SEC, fifth = day / 5;
    static const char *keys[] = {"user:1",
                                 "a key longer than twenty-four bytes"};
    int wrong = 0, edges = 0;
    for (int a = 0; a < 3; a++) {
        for (int k = 0; k < 2; k++) {
            fg_store *st = fg_store_open_memory(NULL, NULL, 0);
            fg_limiter *l = st ? new_limiter(st, "5/day", all_algos[a]) : NULL;
            CHECK(l != NULL);
            if (!l) {
                fg_store_close(st);
                return;
            }
            const char *key = keys[k];
            fg_decision d;
            uint64_t first = wall_us();
            for (uint64_t n = 1; n <= 5; n++) {
                CHECK_EQ(fg_check(l, key, strlen(key), 1, &d), FG_OK);
                wrong += !d.allowed || d.remaining != 5 - n || d.limit != 5;
            }
            uint64_t before = wall_us();
            CHECK_EQ(fg_check(l, key, strlen(key), 1, &d), FG_OK);
            uint64_t after = wall_us() + 2 * SLACK_US;
            uint64_t end = (before / day + 1) * day;
            wrong += d.allowed || d.remaining != 0;
            if (all_algos[a] == FG_TOKEN_BUCKET) {
                /* A fifth of a day, less what refilled since the first
                 * check. */
                wrong += d.retry_after_us > fifth ||
                         d.retry_after_us < fifth - (after - first);
            } else if (after >= end || d.retry_after_us > end + fifth) {
                edges++; /* a day's edge between the readings */
            } else {
                uint64_t now = all_algos[a] == FG_FIXED_WINDOW
                                   ? end - d.retry_after_us
                                   : end + fifth - d.retry_after_us;
                wrong += now < before || now > after;
            }
            fg_limiter_free(l);
            fg_store_close(st);
        }
    }
    CHECK_EQ(wrong, 0);
    /* A day's edge falls between two readings a few us apart at most
     * once a run; more means waits that no algorithm gives. */
    CHECK(edges <= 1);
}

static void test_binary_keys(void)
{
    fg_store *st = open_store(0);
    fg_limiter *l = new_limiter(st, "1/h", FG_FIXED_WINDOW);
    /* Keys that differ only after a NUL byte are different keys. */
    CHECK_EQ(try_key(l, "a\0b", 3, 1), 1);
    CHECK_EQ(try_key(l, "a\0b", 3, 1), 0);
    CHECK_EQ(try_key(l, "a\0c", 3, 1), 1);
    CHECK_EQ(try_key(l, "a", 1, 1), 1);
    CHECK_EQ(try_key(l, "a\0", 2, 1), 1);
    CHECK_EQ(try_key(l, "a\0c", 3, 1), 0);
    /* Every byte value, and the empty key (NULL or not) as one key. */
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    CHECK_EQ(try_key(l, all, sizeof(all), 1), 1);
    CHECK_EQ(try_key(l, all, sizeof(all), 1), 0);
    CHECK_EQ(try_key(l, "", 0, 1), 1);
    CHECK_EQ(try_key(l, "", 0, 1), 0);
    CHECK_EQ(try_key(l, "x", 0, 1), 0);
    /* A NULL key of length 0 is the empty key, never undefined behaviour
     * (a sanitizer build would stop here). */
    CHECK_EQ(try_key(l, NULL, 0, 1), 0);
    CHECK_EQ(fg_store_keys(st), 6);
    fg_limiter_free(l);
    fg_store_close(st);
}

static void test_limiters_separate(void)
{
    fg_store *st = open_store(0);
    /* Same limit, same name, same key: still separate counters. */
    fg_limiter *a = new_limiter(st, "2/h", FG_FIXED_WINDOW);
    fg_limiter *b = new_limiter(st, "2/h", FG_FIXED_WINDOW);
    fg_limiter *c = new_limiter(st, "2/h", FG_TOKEN_BUCKET);
    CHECK_EQ(try_key(a, "k", 1, 2), 1);
    CHECK_EQ(try_key(a, "k", 1, 1), 0);
    CHECK_EQ(try_key(b, "k", 1, 2), 1);
    CHECK_EQ(try_key(b, "k", 1, 1), 0);
    CHECK_EQ(try_key(c, "k", 1, 2), 1);
    CHECK_EQ(try_key(c, "k", 1, 1), 0);
    CHECK_EQ(fg_store_keys(st), 3);
    /* Freeing one leaves the others' counts as they were, and its key
     * goes (no check reaches it again). */
    fg_limiter_free(b);
    CHECK_EQ(fg_store_keys(st), 2);
    CHECK_EQ(try_key(a, "k", 1, 1), 0);
    fg_limiter *d = new_limiter(st, "2/h", FG_FIXED_WINDOW);
    CHECK_EQ(try_key(d, "k", 1, 2), 1);
    fg_limiter_free(a);
    fg_limiter_free(c);
    fg_limiter_free(d);
    fg_store_close(st);
}

/* Two limiters of many keys, some longer than a slot holds: freeing one
 * takes its keys out of the table, probe runs shifted back and all, and
 * leaves every key of the other as it was. */
static void test_limiter_free_keys(void)
{
    fg_store *st = open_store(0);
    fg_limiter *a = new_limiter(st, "3/h", FG_FIXED_WINDOW);
    fg_limiter *b = new_limiter(st, "3/h", FG_TOKEN_BUCKET);
    char key[64];
    for (int i = 0; i < 20000; i++) {
        int n =
            snprintf(key, sizeof key, i % 3 ? "k%d" : "a-longer-key-%d-xx", i);
        CHECK_EQ(try_key(a, key, (size_t)n, 2), 1);
        CHECK_EQ(try_key(b, key, (size_t)n, 1), 1);
    }
    CHECK_EQ(fg_store_keys(st), 40000);
    fg_limiter_free(b);
    CHECK_EQ(fg_store_keys(st), 20000);
    int kept = 0;
    for (int i = 0; i < 20000; i++) {
        int n =
            snprintf(key, sizeof key, i % 3 ? "k%d" : "a-longer-key-%d-xx", i);
        fg_decision d;
        kept += fg_peek(a, key, (size_t)n, &d) == FG_OK && d.remaining == 1;
    }
    CHECK_EQ(kept, 20000);
    fg_limiter_free(a);
    CHECK_EQ(fg_store_keys(st), 0);
    fg_store_close(st);
}

static void test_bad_input(void)
{
    fg_store *st = open_store(0);
    fg_limiter *l = new_limiter(st, "10/s", FG_FIXED_WINDOW);
    static char key[FG_MAX_KEY + 1];
    memset(key, 'k', sizeof(key));
    fg_decision d;
    CHECK_EQ(try_key(l, key, FG_MAX_KEY, 3), 1);
    CHECK_EQ(fg_check(l, key, FG_MAX_KEY + 1, 1, &d), FG_EKEY);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_check(l, key, SIZE_MAX, 1, &d), FG_EKEY);
    CHECK_EQ(fg_check(l, NULL, 5, 1, &d), FG_EINVAL);
    CHECK_EQ(d.allowed, 0);
    uint64_t bad[] = {0, 11, FG_MAX_COUNT, UINT64_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&d, 0xff, sizeof(d));
        CHECK_EQ(fg_check(l, key, FG_MAX_KEY, bad[i], &d), FG_ECOST);
        CHECK_EQ(d.allowed, 0);
    }
    /* Nothing consumed, no key created. */
    CHECK_EQ(fg_store_keys(st), 1);
    CHECK_EQ(fg_check(l, key, FG_MAX_KEY, 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 6);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* Under the sanitizers, a run of a few seconds. */
#define CHURN_DEFAULT (TEST_UNDER_ASAN ? 2000000u : 10000000u)

/* 10 million distinct keys through a store of 100,000: never more than
 * max_keys, and a hot key used all along keeps its count (it is never the
 * least recently used). */
static void test_churn(void)
{
    uint64_t n = CHURN_DEFAULT, max_keys = 100000;
    const char *env = getenv("FG_TEST_CHURN_KEYS");
    if (env && *env)
        n = strtoull(env, NULL, 10);
    fake_now = 1000 * SEC;
    fg_store *st = open_store(max_keys);
    /* A day-long window: nothing expires, so only LRU makes room. */
    fg_limiter *l = new_limiter(st, "1000000/day", FG_FIXED_WINDOW);
    uint64_t over = 0, hot = 0, failed = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 0; i < n; i++) {
        fake_now++;
        char key[8];
        memcpy(key, &i, sizeof(key));
        if (try_key(l, key, sizeof(key), 1) != 1)
            failed++;
        if (i % 100 == 0) {
            fake_now++;
            if (try_key(l, "hot", 3, 1) != 1)
                failed++;
            hot++;
        }
        if (i % 65536 == 0 && fg_store_keys(st) > max_keys)
            over++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_EQ(failed, 0);
    CHECK_EQ(over, 0);
    CHECK(fg_store_keys(st) <= max_keys);
    if (n >= max_keys)
        CHECK(fg_store_keys(st) >= max_keys * 9 / 10);
    fg_decision d;
    CHECK_EQ(fg_check(l, "hot", 3, 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 1000000 - hot - 1);
    /* A measurement for the report, not a pass/fail criterion. */
    printf("churn: %llu keys through a store of %llu, %llu kept, %.0f ns "
           "per new key\n",
           (unsigned long long)n, (unsigned long long)max_keys,
           (unsigned long long)fg_store_keys(st), n ? ns / (double)n : 0.0);
    fg_limiter_free(l);
    fg_store_close(st);
}

static double elapsed_ns(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e9 +
           (double)(t1.tv_nsec - t0->tv_nsec);
}

/* A full store under fresh keys whose limits end soon (10/s): each new key
 * takes an expired one's place, and the table stays as evenly filled as
 * it was when the store filled up: keys as close to their home slots, so
 * lookups probe as far. (An eviction that swept the table in one direction
 * crowded the keys ahead of it into one long run, which every removal
 * shifted back and every insert probed: 2 to 5 times as slow.) The times
 * are printed, not judged. */
static void test_churn_expiring(void)
{
    const uint64_t max_keys = 100000;
    fake_now = 2000 * SEC;
    fg_store *st = open_store(max_keys);
    fg_limiter *l = new_limiter(st, "10/s", FG_TOKEN_BUCKET);
    uint64_t k = 0, failed = 0, filled = 0, churned = 0;
    double fill = 0, full = 0;
    for (int round = 0; round < 5; round++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (uint64_t i = 0; i < max_keys; i++, k++) {
            char key[32];
            int len = snprintf(key, sizeof key, "user-%016llx",
                               (unsigned long long)k * 0x9e3779b97f4a7c15ull);
            failed += try_key(l, key, (size_t)len, 1) != 1;
            if (i % 100 == 0)
                fake_now += MS; /* 100,000 new keys a second */
        }
        double ns = elapsed_ns(&t0) / (double)max_keys;
        if (round == 0) {
            fill = ns;
            filled = fg__store_memory_probe_length(st);
        } else if (full == 0 || ns < full) {
            full = ns;
        }
    }
    churned = fg__store_memory_probe_length(st);
    CHECK_EQ(failed, 0);
    CHECK(fg_store_keys(st) <= max_keys);
    printf("churn of expiring keys: keys %.2f slots from home when the "
           "store filled, %.2f after 4 times as many fresh keys; %.0f ns "
           "per new key filling, %.0f full\n",
           (double)filled / 100, (double)churned / 100, fill, full);
    CHECK(filled > 0);
    CHECK(churned <= filled + filled / 4);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* Large tables: 3.6 million keys in a store of 4 million (about 14,000
 * keys and 19,500 slots in each of 256 stripes), each found again with its
 * count after every growth. */
static void test_large_tables(void)
{
    const uint64_t n = 3600000;
    fg_store *st = open_store(4000000);
    fg_limiter *l = new_limiter(st, "1/h", FG_FIXED_WINDOW);
    uint64_t first = 0, again = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < n; i++) {
            char key[8];
            memcpy(key, &i, sizeof(key));
            int r = try_key(l, key, sizeof(key), 1);
            if (pass == 0)
                first += r == 1;
            else
                again += r == 0;
        }
    }
    CHECK_EQ(first, n);
    CHECK_EQ(again, n);
    CHECK_EQ(fg_store_keys(st), n);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* When the store is full, expired entries go before live ones, even live
 * ones that were touched long before. */
static void test_expired_first(void)
{
    fg_store *st = open_store(1000);
    fg_limiter *live = new_limiter(st, "1/h", FG_FIXED_WINDOW);
    fg_limiter *brief = new_limiter(st, "1/s", FG_FIXED_WINDOW);
    char key[32];
    fake_now = 3600 * SEC; /* the start of an hour window */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "old%d", i);
        CHECK_EQ(try_key(live, key, strlen(key), 1), 1);
    }
    fake_now += 10 * SEC;
    int ok = 0;
    for (int i = 0; i < 900; i++) {
        snprintf(key, sizeof(key), "brief%d", i);
        ok += try_key(brief, key, strlen(key), 1) == 1;
    }
    CHECK_EQ(ok, 900);
    CHECK_EQ(fg_store_keys(st), 1000);
    /* 20 s on, the 900 one-second windows have expired; the hour windows
     * of the old keys have not. 100 new keys must take expired places. */
    fake_now += 20 * SEC;
    ok = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "new%d", i);
        ok += try_key(live, key, strlen(key), 1) == 1;
    }
    CHECK_EQ(ok, 100);
    CHECK(fg_store_keys(st) <= 1000);
    CHECK_EQ(fg_store_evicted(st), 0); /* expired keys, not counted */
    /* The old keys are still there: their one unit is still spent. */
    int forgotten = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "old%d", i);
        forgotten += try_key(live, key, strlen(key), 1) != 0;
    }
    CHECK_EQ(forgotten, 0);
    fg_limiter_free(live);
    fg_limiter_free(brief);
    fg_store_close(st);
}

/* A full store of live keys evicts one for each new key, and counts it
 * (fg_store_evicted): 1,500 keys of an hour's window into 1,000 places. */
static void test_evicted_counted(void)
{
    fg_store *st = open_store(1000);
    fg_limiter *l = new_limiter(st, "1/h", FG_FIXED_WINDOW);
    char key[32];
    fake_now = 7200 * SEC;
    for (int i = 0; i < 1500; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CHECK_EQ(try_key(l, key, strlen(key), 1), 1);
        if (i == 999)
            CHECK_EQ(fg_store_evicted(st), 0);
    }
    CHECK_EQ(fg_store_keys(st), 1000);
    CHECK_EQ(fg_store_evicted(st), 500);
    fg_limiter_free(l);
    fg_store_close(st);
    CHECK_EQ(fg_store_evicted(NULL), 0);
}

/* ---- two threads, one key ----------------------------------------------
 * The clock stands still (read-only), so the count decides alone. */

struct hammer {
    fg_limiter *l;
    uint64_t allowed, errors;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 100000; i++) {
        int r = try_key(h->l, "shared", 6, 1);
        if (r == 1)
            h->allowed++;
        else if (r != 0)
            h->errors++;
    }
    return NULL;
}

static void test_threads(void)
{
    fake_now = 7 * SEC;
    for (int i = 0; i < 3; i++) {
        fg_store *st = open_store(0);
        fg_limiter *l = new_limiter(st, "100000/h", all_algos[i]);
        struct hammer h[2] = {{.l = l}, {.l = l}};
        pthread_t t[2];
        for (int j = 0; j < 2; j++)
            CHECK_EQ(pthread_create(&t[j], NULL, hammer_thread, &h[j]), 0);
        for (int j = 0; j < 2; j++)
            pthread_join(t[j], NULL);
        CHECK_EQ(h[0].allowed + h[1].allowed, 100000);
        CHECK_EQ(h[0].errors + h[1].errors, 0);
        /* Both threads got a share: they really ran at the same time or
         * one after the other, and either way the sum is exact. */
        fg_decision d;
        CHECK_EQ(fg_check(l, "shared", 6, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(d.remaining, 0);
        fg_limiter_free(l);
        fg_store_close(st);
    }
}

/* ---- two threads, many keys: the tables grow while both check ---------- */

static atomic_ullong ticking_now = 50 * SEC;

static uint64_t ticking_clock(void *ctx)
{
    (void)ctx;
    return atomic_fetch_add(&ticking_now, 1);
}

struct spread {
    fg_limiter *l;
    int id;
    uint64_t shared_allowed, errors;
};

static void *spread_thread(void *arg)
{
    struct spread *sp = arg;
    for (uint32_t i = 0; i < 200000; i++) {
        char key[8];
        memcpy(key, &sp->id, 4);
        memcpy(key + 4, &i, 4);
        if (try_key(sp->l, key, sizeof(key), 1) != 1)
            sp->errors++;
        int r = try_key(sp->l, "shared", 6, 1);
        if (r == 1)
            sp->shared_allowed++;
        else if (r != 0)
            sp->errors++;
    }
    return NULL;
}

static void test_threads_many_keys(void)
{
    fg_memory_options o = {.max_keys = 1000000, .clock = ticking_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    if (!st)
        return;
    fg_limiter *l = new_limiter(st, "150000/h", FG_FIXED_WINDOW);
    struct spread sp[2] = {{.l = l, .id = 1}, {.l = l, .id = 2}};
    pthread_t t[2];
    for (int j = 0; j < 2; j++)
        CHECK_EQ(pthread_create(&t[j], NULL, spread_thread, &sp[j]), 0);
    for (int j = 0; j < 2; j++)
        pthread_join(t[j], NULL);
    CHECK_EQ(sp[0].errors + sp[1].errors, 0);
    CHECK_EQ(sp[0].shared_allowed + sp[1].shared_allowed, 150000);
    CHECK_EQ(fg_store_keys(st), 400001);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* ---- memory per key: at most 128 bytes plus the key (issue 2) ----------
 * Counted two ways through an allocator that records its blocks: the
 * bytes requested (address space) and the bytes resident (mincore on each
 * block's pages). Both are held to 128 bytes plus the key: a growth frees
 * the old table at once, so no table outlives the one that replaced it. */

#define SIZED_BLOCKS 8192

static long long sized_live_bytes;
static struct {
    char *p;
    size_t n;
} sized_block[SIZED_BLOCKS];
static size_t sized_nblocks, sized_lost;

static void *sized_malloc(size_t n)
{
    /* A 16-byte header keeps the caller's block aligned like malloc's. */
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    p[0] = n;
    sized_live_bytes += (long long)n;
    if (sized_nblocks < SIZED_BLOCKS)
        sized_block[sized_nblocks++] =
            (__typeof__(sized_block[0])){(char *)p + 16, n};
    else
        sized_lost++;
    return (char *)p + 16;
}

static void sized_free(void *q)
{
    if (!q)
        return;
    size_t *p = (size_t *)((char *)q - 16);
    sized_live_bytes -= (long long)p[0];
    for (size_t i = 0; i < sized_nblocks; i++)
        if (sized_block[i].p == q) {
            sized_block[i] = sized_block[--sized_nblocks];
            break;
        }
    free(p);
}

/* Bytes of the recorded blocks that lie on resident pages. */
static long long sized_resident_bytes(void)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    long long total = 0;
    for (size_t i = 0; i < sized_nblocks; i++) {
        uintptr_t from = (uintptr_t)sized_block[i].p;
        uintptr_t to = from + sized_block[i].n;
        uintptr_t first = from & ~(page - 1);
        size_t pages = (size_t)((to - first + page - 1) / page);
        unsigned char *vec = malloc(pages);
        if (!vec || mincore((void *)first, pages * page, vec) != 0) {
            free(vec);
            return -1;
        }
        for (size_t k = 0; k < pages; k++) {
            uintptr_t lo = first + k * page, hi = lo + page;
            if (vec[k] & 1)
                total +=
                    (long long)((hi < to ? hi : to) - (lo > from ? lo : from));
        }
        free(vec);
    }
    return total;
}

static void test_bytes_per_key(void)
{
    const uint64_t n = 100000;
    fg_set_allocator(sized_malloc, sized_free);
    sized_live_bytes = 0;
    sized_nblocks = sized_lost = 0;
    /* Room to spare: the stripes share max_keys evenly, so a store exactly
     * n keys large starts evicting slightly before it holds n keys. */
    fg_memory_options o = {.max_keys = 2 * n, .clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    fg_limiter *l = st ? new_limiter(st, "10/h", FG_TOKEN_BUCKET) : NULL;
    if (l) {
        long long base = sized_live_bytes;
        long long base_resident = sized_resident_bytes();
        char key[16];
        for (uint64_t i = 0; i < n; i++) {
            memset(key, 'k', sizeof(key));
            memcpy(key, &i, sizeof(i));
            CHECK_EQ(try_key(l, key, sizeof(key), 1), 1);
        }
        CHECK_EQ(fg_store_keys(st), n);
        CHECK_EQ(sized_lost, 0);
        long long resident = sized_resident_bytes();
        CHECK(base_resident >= 0 && resident >= 0);
        double per_key = (double)(sized_live_bytes - base) / (double)n;
        double resident_per_key =
            (double)(resident - base_resident) / (double)n;
        printf("memory store: %.1f bytes per key of %zu bytes resident, "
               "%.1f requested from the allocator (%llu keys)\n",
               resident_per_key, sizeof(key), per_key, (unsigned long long)n);
        CHECK(resident_per_key <= 128.0 + (double)sizeof(key));
        CHECK(per_key <= 128.0 + (double)sizeof(key));
    }
    fg_limiter_free(l);
    fg_store_close(st);
    CHECK_EQ(sized_live_bytes, 0);
    fg_set_allocator(NULL, NULL);
}

/* A store costs little until it holds keys: a limiter's local fallback is
 * a memory store of 100000 keys (64 stripes) made anew with the limiter
 * (by every reload of a server), and most never see a key. Each stripe's
 * table comes with its first key. */
static void test_empty_store_small(void)
{
    fg_set_allocator(sized_malloc, sized_free);
    sized_live_bytes = 0;
    sized_nblocks = sized_lost = 0;
    fg_memory_options o = {.max_keys = 100000, .clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    long long empty = sized_live_bytes;
    printf("memory store of 100000 keys: %lld bytes allocated empty\n", empty);
    CHECK(empty < 16384);
    fg_limiter *l = st ? new_limiter(st, "10/h", FG_TOKEN_BUCKET) : NULL;
    if (l) {
        long long before = sized_live_bytes;
        CHECK_EQ(try_key(l, "a", 1, 1), 1);
        /* One stripe's first table: 16 slots of 65 bytes, aligned. */
        long long one = sized_live_bytes - before;
        CHECK(one > 16 * 64 && one < 2 * 16 * 65 + 64);
        CHECK_EQ(try_key(l, "a", 1, 1), 1);
        CHECK_EQ(sized_live_bytes - before, one);
        CHECK_EQ(fg_store_keys(st), 1);
    }
    fg_limiter_free(l);
    fg_store_close(st);
    CHECK_EQ(sized_live_bytes, 0);
    fg_set_allocator(NULL, NULL);
}

/* ---- allocation failure at every allocation ---------------------------- */

static long alloc_calls, alloc_fail_at, alloc_live, alloc_injected;

static void *counting_malloc(size_t n)
{
    alloc_calls++;
    if (alloc_calls == alloc_fail_at) {
        alloc_injected++;
        return NULL;
    }
    void *p = malloc(n);
    if (p)
        alloc_live++;
    return p;
}

static void counting_free(void *p)
{
    if (p)
        alloc_live--;
    free(p);
}

static int async_calls;

static void async_cb(int rc, const fg_decision *d, void *data)
{
    (void)rc;
    (void)d;
    (void)data;
    async_calls++;
}

/* One whole life: open, limiter (local fallback), checks of new keys
 * (growing the table, long keys), free, close. Returns 1 when every step
 * succeeded. */
static int scenario(void)
{
    fg_memory_options o = {.max_keys = 1000, .clock = fake_clock};
    char err[256] = "";
    fg_store *st = fg_store_open_memory(&o, err, sizeof(err));
    if (!st) {
        CHECK(err[0] != '\0');
        return 0;
    }
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("10/s", &lim), FG_OK);
    lim.on_failure = FG_FAIL_LOCAL;
    err[0] = '\0';
    fg_limiter *l = fg_limiter_new(st, &lim, err, sizeof(err));
    if (!l) {
        CHECK(err[0] != '\0');
        fg_store_close(st);
        return 0;
    }
    int all_ok = 1;
    for (int i = 0; i < 6; i++) {
        char key[32];
        snprintf(key, sizeof(key), "key%d", i % 4);
        fg_decision d;
        int rc = fg_check(l, key, strlen(key), 1, &d);
        CHECK(rc == FG_OK || rc == FG_ENOMEM);
        if (rc != FG_OK)
            all_ok = 0;
        else
            CHECK_EQ(d.allowed, 1);
    }
    /* Enough new keys that the table grows three times (16 slots to 54),
     * every other one too long to live in its slot: a failed growth or
     * key copy refuses that check and leaves the store as it was. */
    for (int i = 0; i < 40; i++) {
        char key[64];
        int len =
            snprintf(key, sizeof(key),
                     i % 2 ? "grow%d" : "grow-a-key-longer-than-24-%d", i);
        fg_decision d;
        int rc = fg_check(l, key, (size_t)len, 1, &d);
        CHECK(rc == FG_OK || rc == FG_ENOMEM);
        if (rc != FG_OK)
            all_ok = 0;
        else
            CHECK_EQ(d.allowed, 1);
    }
    CHECK(fg_store_keys(st) <= 44);
    async_calls = 0;
    int rc = fg_check_async(l, "akey", 4, 1, async_cb, NULL);
    CHECK(rc == FG_OK || rc == FG_ENOMEM);
    CHECK_EQ(async_calls, rc == FG_OK ? 1 : 0);
    if (rc != FG_OK)
        all_ok = 0;
    fg_limiter_free(l);
    fg_store_close(st);
    return all_ok;
}

static void test_alloc_failure(void)
{
    fake_now = 9 * SEC;
    long n;
    int complete = 0;
    for (n = 1; n < 10000; n++) {
        alloc_calls = alloc_live = alloc_injected = 0;
        alloc_fail_at = n;
        fg_set_allocator(counting_malloc, counting_free);
        int ok = scenario();
        fg_set_allocator(NULL, NULL);
        if (alloc_live != 0)
            fprintf(stderr, "  fail at %ld: %ld blocks leaked\n", n,
                    alloc_live);
        CHECK_EQ(alloc_live, 0);
        if (!alloc_injected) {
            complete = ok;
            break;
        }
    }
    CHECK(n > 5); /* the scenario does allocate */
    CHECK_EQ(complete, 1);
    printf("allocation failure injected at each of %ld allocations\n", n - 1);
}

/* memory?OPTIONS: each mistake said for what it is. */
static void test_url_options(void)
{
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"memory?max_keys=0", "max_keys must be 1.."},
        {"memory?max_keys=x", "max_keys must be 1.."},
        {"memory?max_keys=1&x=2", "unknown option after max_keys"},
        {"memory?x=2", "unknown option"},
        {"memory?max_keys=1&max_keys=2", "max_keys given twice"},
    };
    char err[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK_EQ(fg_store_url_check(bad[i].url, err, sizeof err), FG_EINVAL);
        CHECK(strstr(err, bad[i].says) != NULL);
    }
    CHECK_EQ(fg_store_url_check("memory?max_keys=5", err, sizeof err), FG_OK);
}

int main(void)
{
    test_tenth_and_eleventh();
    test_url_options();
    test_default_clock();
    test_default_clock_algorithms();
    test_binary_keys();
    test_limiters_separate();
    test_limiter_free_keys();
    test_bad_input();
    test_expired_first();
    test_evicted_counted();
    test_threads();
    test_threads_many_keys();
    test_bytes_per_key();
    test_empty_store_small();
    test_large_tables();
    test_alloc_failure();
    test_churn();
    test_churn_expiring();
    return TEST_DONE();
}
