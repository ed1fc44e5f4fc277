/* test_limiter.c -- the limiter's policy on a real memory store: limits it
 * refuses, bad input that never fails open, the failure policy when the
 * store really fails (an allocation refused through fg_set_allocator),
 * fg_check_async calling back exactly once with fg_check's decision, and
 * a store opened before fork() refused in the child. */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "floodgate.h"

#define SEC 1000000ull
#define MS  1000ull

static uint64_t fake_now = 100 * SEC;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static fg_store *open_store(void)
{
    fg_memory_options o = {.clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    return st;
}

static fg_limit limit_of(const char *rate, fg_algorithm algo,
                         fg_on_failure policy)
{
    fg_limit l;
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    l.algorithm = algo;
    l.on_failure = policy;
    return l;
}

/* fg_limiter_new refuses 'l' with a reason. */
static void refused(fg_store *st, const fg_limit *l, const char *what)
{
    char err[256] = "";
    fg_limiter *lim = fg_limiter_new(st, l, err, sizeof(err));
    CHECK(lim == NULL);
    CHECK(err[0] != '\0');
    if (lim || !err[0])
        fprintf(stderr, "  %s: accepted or no reason\n", what);
    fg_limiter_free(lim);
}

static void test_invalid_limits(void)
{
    fg_store *st = open_store();
    fg_limit l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    refused(NULL, &l, "no store");
    refused(st, NULL, "no limit");
    l.name[0] = '\0';
    refused(st, &l, "empty name");
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    memset(l.name, 'n', sizeof(l.name)); /* not terminated */
    refused(st, &l, "unterminated name");
    /* A name is part of every store key: bytes that could make two
     * limits' keys meet, or move a key's cluster slot, are refused. */
    static const char *const bad_names[] = {"a:b",  "a{b}", "a}",   "a b",
                                            "a\nb", "a\r",  "\xff", "a/b"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
        strcpy(l.name, bad_names[i]);
        refused(st, &l, bad_names[i]);
    }
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    strcpy(l.name, "Az09_-.");
    fg_limiter *named = fg_limiter_new(st, &l, NULL, 0);
    CHECK(named != NULL);
    fg_limiter_free(named);
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    l.limit = 0;
    refused(st, &l, "limit 0");
    l.limit = FG_MAX_COUNT + 1;
    refused(st, &l, "limit 2^53 + 1");
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    l.period_us = 999;
    refused(st, &l, "period under 1 ms");
    l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    l.burst = 20;
    refused(st, &l, "burst on a fixed window");
    l = limit_of("10/s", FG_TOKEN_BUCKET, (fg_on_failure)9);
    refused(st, &l, "unknown on_failure");
    l = limit_of("10/s", (fg_algorithm)9, FG_FAIL_OPEN);
    refused(st, &l, "unknown algorithm");

    /* The limit is copied: changing the caller's copy changes nothing. */
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    strcpy(l.name, "api");
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    l.limit = 1;
    CHECK_EQ(fg_limiter_limit(lim)->limit, 10);
    CHECK_STR(fg_limiter_limit(lim)->name, "api");
    CHECK_STR(fg_limiter_breaker(lim), "closed");
    fg_limiter_free(lim);
    fg_limiter_free(NULL);
    fg_store_close(st);
}

/* Bad input is refused the same under every policy: never allowed by a
 * fail-open, never counted. */
/* A NULL limiter or result is an error, not a crash. */
static void test_null_arguments(void)
{
    fg_store *st = open_store();
    fg_limit l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    fg_decision d;
    CHECK_EQ(fg_check(NULL, "k", 1, 1, &d), FG_EINVAL);
    CHECK_EQ(fg_check(lim, "k", 1, 1, NULL), FG_EINVAL);
    CHECK_EQ(fg_refund(NULL, "k", 1, 1), FG_EINVAL);
    CHECK_EQ(fg_refund_at(NULL, "k", 1, 1, 0, 0), FG_EINVAL);
    CHECK_EQ(fg_add(NULL, "k", 1, 1, &d), FG_EINVAL);
    CHECK_EQ(fg_peek(NULL, "k", 1, &d), FG_EINVAL);
    CHECK_EQ(fg_reset(NULL, "k", 1), FG_EINVAL);
    CHECK_EQ(fg_limiter_local_share(NULL, NULL, NULL), FG_EINVAL);
    CHECK(fg_limiter_limit(NULL) == NULL);
    CHECK(fg_limiter_breaker(NULL) == NULL);
    CHECK(fg_limiter_node_breaker(NULL, 0) == NULL);
    fg_limiter_set_cache(NULL, NULL);
    CHECK_EQ(fg_limiter_sync(NULL), FG_OK);
    /* Nothing was counted. */
    CHECK_EQ(fg_peek(lim, "k", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 10);
    fg_limiter_free(NULL);
    fg_limiter_free(lim);
    fg_store_close(st);
}

static void test_bad_input_never_fails_open(void)
{
    static const fg_on_failure policies[] = {FG_FAIL_OPEN, FG_FAIL_CLOSED,
                                             FG_FAIL_LOCAL};
    static char key[FG_MAX_KEY + 1];
    memset(key, 'x', sizeof(key));
    for (int i = 0; i < 3; i++) {
        fg_store *st = open_store();
        fg_limit l = limit_of("10/s", FG_FIXED_WINDOW, policies[i]);
        fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
        CHECK(lim != NULL);
        fg_decision d;
        uint64_t costs[] = {0, 11, FG_MAX_COUNT, UINT64_MAX};
        for (size_t j = 0; j < sizeof(costs) / sizeof(costs[0]); j++) {
            memset(&d, 0xff, sizeof(d));
            CHECK_EQ(fg_check(lim, "k", 1, costs[j], &d), FG_ECOST);
            CHECK_EQ(d.allowed, 0);
            CHECK_EQ(d.retry_after_us, 0);
            CHECK_EQ(d.reset_us, 0);
        }
        memset(&d, 0xff, sizeof(d));
        CHECK_EQ(fg_check(lim, key, sizeof(key), 1, &d), FG_EKEY);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(fg_store_keys(st), 0);
        CHECK_EQ(fg_check(lim, "k", 1, 10, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.source, FG_SOURCE_STORE);
        CHECK_STR(fg_limiter_breaker(lim), "closed");
        fg_limiter_free(lim);
        fg_store_close(st);
    }
}

/* ---- a store that really fails: its next allocation is refused -------- */

static long fail_next;

static void *failing_malloc(size_t n)
{
    if (fail_next) {
        fail_next = 0;
        return NULL;
    }
    return malloc(n);
}

/* A key too long to be kept inline in a slot: storing it allocates. */
#define LONG_KEY "a-key-longer-than-24-bytes:new"

static void test_failure_policy(void)
{
    fg_set_allocator(failing_malloc, free);
    /* open: allowed, and the decision says so. */
    fg_store *st = open_store();
    fg_limit l = limit_of("100/s", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    fg_decision d;
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY, sizeof(LONG_KEY) - 1, 1, &d), FG_ENOMEM);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_FAIL_OPEN);
    CHECK_EQ(d.retry_after_ms, 0);
    CHECK_EQ(d.retry_after_us, 0);
    CHECK_EQ(d.reset_us, 0);
    /* ... and nothing was counted: the key is new next time. */
    CHECK_EQ(fg_check(lim, LONG_KEY, sizeof(LONG_KEY) - 1, 100, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_STORE);
    fg_limiter_free(lim);

    /* closed: refused with a wait to retry. */
    l = limit_of("100/s", FG_FIXED_WINDOW, FG_FAIL_CLOSED);
    lim = fg_limiter_new(st, &l, NULL, 0);
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY, sizeof(LONG_KEY) - 1, 1, &d), FG_ENOMEM);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.source, FG_SOURCE_FAIL_CLOSED);
    CHECK(d.retry_after_ms > 0);
    CHECK_EQ(d.retry_after_us, d.retry_after_ms * 1000);
    CHECK_EQ(d.reset_us, d.reset_ms * 1000);
    fg_limiter_free(lim);

    /* local: this process's share, limit / fallback_servers = 25. */
    l = limit_of("100/s", FG_FIXED_WINDOW, FG_FAIL_LOCAL);
    l.fallback_servers = 4;
    lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY, sizeof(LONG_KEY) - 1, 1, &d), FG_ENOMEM);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    CHECK_EQ(d.limit, 25);
    CHECK_EQ(d.remaining, 24);
    /* The local store's own exact times: the window's end. */
    CHECK(d.reset_us >= 1 && d.reset_us <= 1000000);
    CHECK_EQ(d.reset_ms, (d.reset_us + 999) / 1000);
    CHECK_EQ(d.retry_after_us, 0);
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY "2", sizeof(LONG_KEY), 25, &d), FG_ENOMEM);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    CHECK_EQ(d.allowed, 1);
    /* A cost above the share: refused, with when to try again. */
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY "3", sizeof(LONG_KEY), 26, &d), FG_ENOMEM);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.limit, 25);
    CHECK(d.retry_after_ms > 0);
    CHECK_EQ(d.retry_after_us, d.retry_after_ms * 1000);
    fg_limiter_free(lim);

    /* The fallback's fixed windows are the wall clock's, as a Redis
     * store's are: a minute's window ends at the wall clock's next whole
     * minute (within 100 ms), so that a server does not grant its share
     * twice in one store window. */
    l = limit_of("100/min", FG_FIXED_WINDOW, FG_FAIL_LOCAL);
    lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY "4", sizeof(LONG_KEY), 1, &d), FG_ENOMEM);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
    uint64_t to_minute = 60000000 - wall % 60000000;
    uint64_t gap = d.reset_us > to_minute ? d.reset_us - to_minute
                                          : to_minute - d.reset_us;
    /* (a read on either side of a minute's edge is 60 s apart) */
    if (gap > 30000000)
        gap = 60000000 - gap;
    CHECK(gap < 100000);
    fg_limiter_free(lim);

    /* The share is rounded down: 10/s among 3 servers is 3 each (9 in all),
     * the burst too; never 4 (12 in all). */
    uint64_t share, share_burst;
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_LOCAL);
    l.fallback_servers = 3;
    l.burst = 20;
    lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    CHECK_EQ(fg_limiter_local_share(lim, &share, &share_burst), FG_OK);
    CHECK_EQ(share, 3);
    CHECK_EQ(share_burst, 6);
    for (int i = 0; i < 7; i++) {
        fail_next = 1;
        CHECK_EQ(fg_check(lim, LONG_KEY "3", sizeof(LONG_KEY), 1, &d),
                 FG_ENOMEM);
        CHECK_EQ(d.source, FG_SOURCE_LOCAL);
        CHECK_EQ(d.allowed, i < 6);
        CHECK_EQ(d.limit, 6); /* the share's burst */
    }
    /* A cost above the share's burst: refused, and the limit said is
     * still the burst (it said the share's rate). */
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY "4", sizeof(LONG_KEY), 7, &d), FG_ENOMEM);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.limit, 6);
    fg_limiter_free(lim);

    /* 10/s among 20 servers: a share of 0 (it was rounded up to 1 each,
     * 20/s in all). Every check is refused while the store fails. */
    l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_LOCAL);
    l.fallback_servers = 20;
    lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    CHECK_EQ(fg_limiter_local_share(lim, &share, NULL), FG_OK);
    CHECK_EQ(share, 0);
    fail_next = 1;
    CHECK_EQ(fg_check(lim, LONG_KEY "0", sizeof(LONG_KEY), 1, &d), FG_ENOMEM);
    CHECK_EQ(d.source, FG_SOURCE_LOCAL);
    CHECK_EQ(d.allowed, 0);
    CHECK(d.retry_after_ms > 0);
    CHECK_EQ(d.retry_after_us, d.retry_after_ms * 1000);
    fg_limiter_free(lim);
    l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK_EQ(fg_limiter_local_share(lim, &share, NULL), FG_EINVAL);
    fg_limiter_free(lim);

    /* A lease's chunk above the share: the share is exact, in memory (it
     * was made a lease too, which refused the chunk). */
    char err[128] = "";
    l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_LOCAL);
    l.fallback_servers = 4;
    CHECK_EQ(fg_mode_parse("lease:8", &l, err, sizeof err), FG_OK);
    CHECK_EQ(fg_limit_check(&l, err, sizeof err), FG_OK);
    lim = fg_limiter_new(st, &l, err, sizeof err);
    if (!lim)
        fprintf(stderr, "lease:8 with a local share of 2: %s\n", err);
    CHECK(lim != NULL);
    CHECK_EQ(fg_limiter_local_share(lim, &share, NULL), FG_OK);
    CHECK_EQ(share, 2);
    fg_limiter_free(lim);
    fg_store_close(st);
    fail_next = 0;
    fg_set_allocator(NULL, NULL);
}

/* ---- fg_check_async ------------------------------------------------------ */

struct result {
    int calls, rc;
    fg_decision d;
};

static void on_result(int rc, const fg_decision *d, void *data)
{
    struct result *r = data;
    r->calls++;
    r->rc = rc;
    r->d = *d;
}

/* The same sequence through fg_check on one store and fg_check_async on
 * another, with the same clock: the same answers, one callback each. */
static void test_async_matches_sync(void)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    uint64_t seed = 12345;
    for (int a = 0; a < 3; a++) {
        fg_store *s1 = open_store(), *s2 = open_store();
        fg_limit l = limit_of("10/s", algos[a], FG_FAIL_OPEN);
        fg_limiter *sync = fg_limiter_new(s1, &l, NULL, 0);
        fg_limiter *async = fg_limiter_new(s2, &l, NULL, 0);
        int mismatches = 0, wrong_calls = 0;
        for (int i = 0; i < 500; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            fake_now += (seed >> 33) % (150 * MS);
            uint64_t cost = 1 + (seed >> 20) % 4;
            char key[2] = {(char)('a' + (seed >> 40) % 3), 0};
            fg_decision d;
            int rc = fg_check(sync, key, 1, cost, &d);
            struct result r = {0};
            CHECK_EQ(fg_check_async(async, key, 1, cost, on_result, &r), FG_OK);
            wrong_calls += r.calls != 1;
            mismatches += r.rc != rc || r.d.allowed != d.allowed ||
                          r.d.limit != d.limit ||
                          r.d.remaining != d.remaining ||
                          r.d.reset_ms != d.reset_ms ||
                          r.d.retry_after_ms != d.retry_after_ms ||
                          r.d.source != d.source;
        }
        CHECK_EQ(wrong_calls, 0);
        CHECK_EQ(mismatches, 0);
        /* Bad input: an error code now, and never a callback. */
        struct result r = {0};
        CHECK_EQ(fg_check_async(async, "a", 1, 0, on_result, &r), FG_ECOST);
        CHECK_EQ(fg_check_async(async, "a", 1, 11, on_result, &r), FG_ECOST);
        static char big[FG_MAX_KEY + 1];
        CHECK_EQ(fg_check_async(async, big, sizeof(big), 1, on_result, &r),
                 FG_EKEY);
        CHECK_EQ(r.calls, 0);
        CHECK(fg_check_async(async, "a", 1, 1, NULL, NULL) < 0);
        fg_limiter_free(sync);
        fg_limiter_free(async);
        fg_store_close(s1);
        fg_store_close(s2);
    }
}

/* "memory" opened on an event loop: immediate decisions, one callback each,
 * nothing more when the loop runs. */
static void test_async_on_event_base(void)
{
    struct event_base *base = event_base_new();
    CHECK(base != NULL);
    if (!base)
        return;
    char err[256] = "";
    fg_store *st = fg_store_open_async("memory", base, err, sizeof(err));
    CHECK(st != NULL);
    if (!st) {
        fprintf(stderr, "  open async memory: %s\n", err);
        event_base_free(base);
        return;
    }
    fg_limit l = limit_of("5/h", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    struct result r[6];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 6; i++)
        CHECK_EQ(fg_check_async(lim, "user", 4, 1, on_result, &r[i]), FG_OK);
    event_base_loop(base, EVLOOP_NONBLOCK);
    int allowed = 0;
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(r[i].calls, 1);
        CHECK_EQ(r[i].rc, FG_OK);
        allowed += r[i].d.allowed;
    }
    CHECK_EQ(allowed, 5);
    CHECK_EQ(r[5].d.allowed, 0);
    CHECK(r[5].d.retry_after_ms > 0);
    /* The synchronous call sees the same counter. */
    fg_decision d;
    CHECK_EQ(fg_check(lim, "user", 4, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    fg_limiter_free(lim);
    fg_store_close(st);
    CHECK(fg_store_open_async("memory", NULL, err, sizeof(err)) == NULL);
    event_base_free(base);
}

/* ---- refunds ------------------------------------------------------------
 * A refund gives back what an allowed check took, while the window or the
 * bucket's debt that holds it lasts, and never more than was taken. */

static int allowed_now(fg_limiter *lim, const char *key)
{
    fg_decision d;
    CHECK_EQ(fg_check(lim, key, strlen(key), 1, &d), FG_OK);
    return d.allowed;
}

static void test_refunds(void)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    for (int a = 0; a < 3; a++) {
        fake_now = 200 * SEC;
        fg_store *st = open_store();
        fg_limit l = limit_of("10/s", algos[a], FG_FAIL_OPEN);
        fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
        int n = 0;
        while (n < 20 && allowed_now(lim, "u"))
            n++;
        CHECK_EQ(n, 10);
        /* Three given back: exactly three more fit. */
        CHECK_EQ(fg_refund(lim, "u", 1, 3), FG_OK);
        n = 0;
        while (n < 20 && allowed_now(lim, "u"))
            n++;
        CHECK_EQ(n, 3);
        /* A refund larger than the count held gives back only that. */
        CHECK_EQ(fg_refund(lim, "u", 1, 10), FG_OK);
        n = 0;
        while (n < 20 && allowed_now(lim, "u"))
            n++;
        CHECK_EQ(n, 10);
        /* An unknown key, and bad input. */
        CHECK_EQ(fg_refund(lim, "nobody", 6, 1), FG_OK);
        CHECK_EQ(allowed_now(lim, "nobody"), 1);
        CHECK_EQ(fg_refund(lim, "u", 1, 0), FG_ECOST);
        CHECK_EQ(fg_refund(lim, "u", 1, 11), FG_ECOST);
        /* Long after, the limit has come back by itself: a late refund
         * adds nothing beyond it. */
        fake_now += 5 * SEC;
        CHECK_EQ(allowed_now(lim, "v"), 1);
        fake_now += 5 * SEC;
        CHECK_EQ(fg_refund(lim, "v", 1, 1), FG_OK);
        n = 0;
        while (n < 20 && allowed_now(lim, "v"))
            n++;
        CHECK_EQ(n, 10);
        fg_limiter_free(lim);
        fg_store_close(st);
    }
}

/* Units that fit now, taken one at a time. */
static int fill(fg_limiter *lim, const char *key)
{
    int n = 0;
    while (n < 100 && allowed_now(lim, key))
        n++;
    return n;
}

/* fg_refund_at gives units back to the window that took them, or to the
 * part of the bucket's debt that still holds them, never to a later one:
 * 5 taken early in one window, the next window filled, then the 5 given
 * back must not add room to the window that did not take them. */
static void test_refund_at(void)
{
    fg_decision d;
    /* Fixed window 10/s: the 5 of window 200 die with it. */
    fake_now = 200 * SEC + 500 * MS;
    fg_store *st = open_store();
    fg_limit l = limit_of("10/s", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK_EQ(fg_check(lim, "u", 1, 5, &d), FG_OK);
    CHECK(d.allowed);
    fake_now = 201 * SEC + 990 * MS;
    CHECK_EQ(fill(lim, "u"), 10);
    CHECK_EQ(fg_refund_at(lim, "u", 1, 5, 1490 * MS, UINT64_MAX), FG_OK);
    CHECK_EQ(fill(lim, "u"), 0);
    /* The same refund of this window's units gives them back. */
    CHECK_EQ(fg_refund_at(lim, "u", 1, 5, 0, UINT64_MAX), FG_OK);
    CHECK_EQ(fill(lim, "u"), 5);
    fg_limiter_free(lim);

    /* Sliding window 10/s: 5 taken at 300.5 weigh 4 at 301.2, so 6 fit.
     * Given back, they leave the previous window (4 more fit), not this
     * one (which would let 5 more in, 11 in the span of one window). */
    l = limit_of("10/s", FG_SLIDING_WINDOW, FG_FAIL_OPEN);
    lim = fg_limiter_new(st, &l, NULL, 0);
    fake_now = 300 * SEC + 500 * MS;
    CHECK_EQ(fg_check(lim, "s", 1, 5, &d), FG_OK);
    CHECK(d.allowed);
    fake_now = 301 * SEC + 200 * MS;
    CHECK_EQ(fill(lim, "s"), 6);
    CHECK_EQ(fg_refund_at(lim, "s", 1, 5, 700 * MS, UINT64_MAX), FG_OK);
    CHECK_EQ(fill(lim, "s"), 4);
    /* Two windows on, the units are gone with their window. */
    fake_now = 303 * SEC + 200 * MS;
    CHECK_EQ(fill(lim, "s"), 10);
    CHECK_EQ(fg_refund_at(lim, "s", 1, 5, 2700 * MS, UINT64_MAX), FG_OK);
    CHECK_EQ(fill(lim, "s"), 0);
    fg_limiter_free(lim);

    /* Token bucket 10/s: 6 taken from a full bucket at 400.0 (refilled
     * by 400.6), then 10 at 400.7. The 6 are no longer in the debt:
     * giving them back with what they still hold (reset 600 ms less the
     * age 700 ms: nothing) adds nothing; 3 fit at 401.06, as without
     * them. */
    l = limit_of("10/s", FG_TOKEN_BUCKET, FG_FAIL_OPEN);
    lim = fg_limiter_new(st, &l, NULL, 0);
    fake_now = 400 * SEC;
    CHECK_EQ(fg_check(lim, "t", 1, 6, &d), FG_OK);
    CHECK(d.allowed);
    CHECK_EQ(d.reset_us, 600 * MS);
    fake_now = 400 * SEC + 700 * MS;
    CHECK_EQ(fill(lim, "t"), 10);
    CHECK_EQ(fg_refund_at(lim, "t", 1, 4, 700 * MS, 0), FG_OK);
    fake_now = 401 * SEC + 60 * MS;
    CHECK_EQ(fill(lim, "t"), 3);
    /* Units still in the debt go back, but only the part that holds:
     * 3 taken just now hold 300 ms of the bucket; given back with a hold
     * of 150 ms, the bucket gets 150 ms back, which with the 60 ms it had
     * left fits 2 (3 with no bound). */
    CHECK_EQ(fg_refund_at(lim, "t", 1, 3, 0, 150 * MS), FG_OK);
    CHECK_EQ(fill(lim, "t"), 2);
    fg_limiter_free(lim);
    fg_store_close(st);
}

/* fg_add's largest units, again and again: a fixed window's count stops
 * where Redis's INCRBY does, so a check after it never wraps around. */
static void test_add_saturates(void)
{
    fg_store *st = open_store();
    fg_limit l = limit_of("10/h", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    fg_decision d;
    for (int i = 0; i < 2049; i++)
        CHECK_EQ(fg_add(lim, "k", 1, FG_MAX_COUNT - 1, &d), FG_OK);
    CHECK_EQ(fg_peek(lim, "k", 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    int allowed = 0;
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(fg_check(lim, "k", 1, 1, &d), FG_OK);
        allowed += d.allowed;
    }
    CHECK_EQ(allowed, 0);
    fg_limiter_free(lim);
    fg_store_close(st);
}

/* A key fg_add left in debt (3 limits on a 10/s key) is refused until
 * the debt is paid, and each refusal's retry_after_us is when a check
 * fits: never early, on every algorithm. fg_peek says the same. */
static void test_retry_after_debt(void)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    static const uint64_t paid[] = {1000 * MS, 1700 * MS, 2100 * MS};
    fg_store *st = open_store();
    for (int i = 0; i < 3; i++) {
        fg_limit l = limit_of("10/s", algos[i], FG_FAIL_OPEN);
        fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
        CHECK(lim != NULL);
        fake_now = 500 * SEC;
        fg_decision d, pk;
        CHECK_EQ(fg_add(lim, "k", 1, 30, &d), FG_OK);
        CHECK_EQ(d.retry_after_us, paid[i]);
        uint64_t start = fake_now;
        int refusals = 0;
        for (;;) {
            CHECK_EQ(fg_peek(lim, "k", 1, &pk), FG_OK);
            CHECK_EQ(fg_check(lim, "k", 1, 1, &d), FG_OK);
            CHECK_EQ(pk.allowed, d.allowed);
            CHECK_EQ(pk.retry_after_us, d.retry_after_us);
            if (d.allowed || ++refusals > 3)
                break;
            CHECK(d.retry_after_us > 0);
            fake_now += d.retry_after_us;
        }
        CHECK_EQ(refusals, 1);
        CHECK_EQ(fake_now - start, paid[i]);
        fg_limiter_free(lim);
    }
    fg_store_close(st);
}

/* In the child of fork(), every call on the parent's store and limiters
 * is refused and consumes nothing; the child's own store works; the
 * parent's counts are as the parent left them. The child reports its
 * failed checks in its exit status. */
static void test_fork(void)
{
    fg_store *st = open_store();
    fg_limit fw = limit_of("5/h", FG_FIXED_WINDOW, FG_FAIL_OPEN);
    fg_limit lease = limit_of("5/h", FG_TOKEN_BUCKET, FG_FAIL_LOCAL);
    char err[256];
    CHECK_EQ(fg_mode_parse("lease", &lease, err, sizeof err), FG_OK);
    fg_limiter *a = fg_limiter_new(st, &fw, NULL, 0);
    fg_limiter *b = fg_limiter_new(st, &lease, NULL, 0);
    CHECK(a && b);
    fg_decision d;
    CHECK_EQ(fg_check(a, "k", 1, 2, &d), FG_OK);
    CHECK_EQ(fg_check(b, "k", 1, 1, &d), FG_OK); /* b holds a lease */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        th_passed = th_failed = 0;
        for (int i = 0; i < 2; i++) {
            fg_limiter *l = i ? b : a;
            d.allowed = 1;
            CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_EPROCESS);
            CHECK_EQ(d.allowed, 0);
            CHECK_EQ(fg_peek(l, "k", 1, &d), FG_EPROCESS);
            CHECK_EQ(fg_add(l, "k", 1, 1, &d), FG_EPROCESS);
            CHECK_EQ(fg_refund(l, "k", 1, 1), FG_EPROCESS);
            CHECK_EQ(fg_reset(l, "k", 1), FG_EPROCESS);
            CHECK_EQ(fg_limiter_sync(l), FG_EPROCESS);
            CHECK_EQ(fg_limiter_pending(l), 0); /* nothing of it here */
            fg_set_item it = {.l = l, .key = "k", .keylen = 1};
            fg_set_result r;
            CHECK_EQ(fg_check_set(&it, 1, 1, &r), FG_OK);
            CHECK_EQ(r.error, FG_EPROCESS);
            CHECK_EQ(r.d[0].allowed, 0);
        }
        err[0] = '\0';
        CHECK(fg_limiter_new(st, &fw, err, sizeof err) == NULL);
        CHECK(strstr(err, "another process") != NULL);
        fg_limiter_free(a); /* the parent's: left as they are */
        fg_limiter_free(b);
        fg_store_close(st);
        fg_store *own = open_store();
        fg_limiter *l = fg_limiter_new(own, &fw, NULL, 0);
        CHECK_EQ(fg_check(l, "k", 1, 5, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        fg_limiter_free(l);
        fg_store_close(own);
        _exit(th_failed ? 1 : 0);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The parent's: 3 left of a, and b's lease still spends. */
    CHECK_EQ(fg_check(a, "k", 1, 3, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_check(a, "k", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_check(b, "k", 1, 4, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_check(b, "k", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(st);
}

int main(void)
{
    test_fork();
    test_retry_after_debt();
    test_add_saturates();
    test_refunds();
    test_refund_at();
    test_invalid_limits();
    test_null_arguments();
    test_bad_input_never_fails_open();
    test_failure_policy();
    test_async_matches_sync();
    test_async_on_event_base();
    return TEST_DONE();
}
