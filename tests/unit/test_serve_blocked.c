/* test_serve_blocked.c -- the blocked-key cache (fake time, no sleep). */
#include <stdio.h>
#include <string.h>

#include "../../serve/blocked.h"
#include "../harness.h"

static fg__blocked_hit hit_until(uint64_t until)
{
    fg__blocked_hit h = {until, until + 500, until + 900, 10};
    return h;
}

static void test_basic(void)
{
    fg__blocked *c = fg__blocked_new(16, 42);
    CHECK(c != NULL);
    if (!c)
        return;
    uint64_t now = 1000000;
    fg__blocked_hit h = hit_until(now + 200000), got;
    CHECK_EQ(fg__blocked_get(c, 1, "bob", 3, 1, now, &got), 0);
    CHECK_EQ(fg__blocked_put(c, 1, "bob", 3, 1, now, &h), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "bob", 3, 1, now + 1, &got), 1);
    CHECK_EQ(got.until_us, now + 200000);
    CHECK_EQ(got.limit, 10);
    /* Another limit, another key, a prefix of the key: not blocked. */
    CHECK_EQ(fg__blocked_get(c, 2, "bob", 3, 1, now, &got), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "bo", 2, 1, now, &got), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "alice", 5, 1, now, &got), 0);
    /* A larger cost is refused too; a smaller one must ask the store. */
    CHECK_EQ(fg__blocked_get(c, 1, "bob", 3, 5, now, &got), 1);
    fg__blocked_hit h5 = hit_until(now + 300000);
    CHECK_EQ(fg__blocked_put(c, 1, "carol", 5, 5, now, &h5), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "carol", 5, 4, now, &got), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "carol", 5, 5, now, &got), 1);
    /* At T exactly the store may allow again: the cache must not answer. */
    CHECK_EQ(fg__blocked_get(c, 1, "bob", 3, 1, now + 199999, &got), 1);
    CHECK_EQ(fg__blocked_get(c, 1, "bob", 3, 1, now + 200000, &got), 0);
    CHECK_EQ(fg__blocked_count(c, now + 200000), 1);
    /* A block already over is not stored. */
    fg__blocked_hit past = hit_until(now);
    CHECK_EQ(fg__blocked_put(c, 1, "dave", 4, 1, now, &past), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "dave", 4, 1, now, &got), 0);
    fg__blocked_clear(c);
    CHECK_EQ(fg__blocked_count(c, now), 0);
    fg__blocked_free(c);
}

static void test_bounded(void)
{
    /* 8 entries: after 1000 distinct keys at most 8 are held, and the most
     * recent insert is always found. */
    fg__blocked *c = fg__blocked_new(8, 7);
    CHECK(c != NULL);
    if (!c)
        return;
    uint64_t now = 5000;
    fg__blocked_hit got;
    int recent_ok = 1;
    for (int i = 0; i < 1000; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "user%d", i);
        fg__blocked_hit h = hit_until(now + 1000000 + (uint64_t)i);
        fg__blocked_put(c, 3, k, (size_t)n, 1, now, &h);
        if (!fg__blocked_get(c, 3, k, (size_t)n, 1, now, &got))
            recent_ok = 0;
    }
    CHECK(recent_ok);
    CHECK(fg__blocked_count(c, now) <= 8);
    /* Expired entries are reused first. */
    now += 3000000;
    CHECK_EQ(fg__blocked_count(c, now), 0);
    fg__blocked_free(c);
    /* Zero entries still gives a working (one-set) cache. */
    c = fg__blocked_new(0, 1);
    CHECK(c != NULL);
    fg__blocked_free(c);
}

/* When a block ends, one request probes and the others wait for it. */
static void test_probe(void)
{
    fg__blocked *c = fg__blocked_new(16, 3);
    CHECK(c != NULL);
    if (!c)
        return;
    uint64_t now = 1000;
    fg__blocked_waiter a, b, d;
    fg__blocked_hit h = hit_until(now + 100), got;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &h), 0);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now + 50, &a, 1, &got),
             FG_BLOCKED_HIT);
    now += 100; /* the block is over */
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 0, &got),
             FG_BLOCKED_MISS); /* may not wait: asks the store itself */
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    /* A probe's entry is never evicted, whatever is inserted. */
    for (int i = 0; i < 200; i++) {
        char k[8];
        int n = snprintf(k, sizeof(k), "x%d", i);
        fg__blocked_hit x = hit_until(now + 1000);
        fg__blocked_put(c, 1, k, (size_t)n, 1, now, &x);
    }
    /* The probe is refused again: the waiters come back, in order, and
     * find the new block. */
    fg__blocked_hit again = hit_until(now + 100);
    fg__blocked_waiter *w =
        fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, &again, 1);
    CHECK(w == &b);
    CHECK(w && w->next == &d);
    CHECK(w && w->next && w->next->next == NULL);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_HIT);
    /* Resolving twice, or by another request, does nothing. */
    CHECK(fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 0) == NULL);
    /* A probe that was allowed: waiters go to the store themselves. */
    now += 100;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 0);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_MISS);
    /* Refused without a usable block: the entry stays, and the waiters
     * take turns, one probe at a time. */
    fg__blocked_hit tiny = hit_until(now + 10);
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &tiny), 0);
    now += 10;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 1);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_resolve(c, 1, "k", 1, &b, 1, now, NULL, 0);
    CHECK(w == &d);
    /* clear hands every waiter back. */
    fg__blocked_hit h2 = hit_until(now + 10);
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &h2), 0);
    now += 1000;
    fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_clear(c);
    CHECK(w == &b);
    fg__blocked_free(c);
}

static void test_from_decision(void)
{
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("10/s", &lim), 0);
    fg__blocked_hit h;
    uint64_t bc = 0, sent = 1000000, now = 1000400;
    /* A refusal for 120 ms: blocked (for that cost and more) from the
     * send time plus 119 ms and 1 us, never longer. */
    fg_decision r = {0, 10, 0, 900, 120, FG_SOURCE_STORE};
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 3, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, sent + 119001);
    CHECK_EQ(bc, 3);
    CHECK(h.retry_us >= now + 120000);
    /* Not from the cache, local fallback or a failure. */
    r.source = FG_SOURCE_LOCAL;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, sent, now, &h, &bc), 0);
    /* Token bucket 10/s, burst 10, just emptied: full in 1000 ms, the next
     * token in 100 ms: blocked until less than that. */
    fg_decision a = {1, 10, 0, 1000, 0, FG_SOURCE_STORE};
    CHECK_EQ(fg__blocked_from_decision(&lim, &a, 1, sent, now, &h, &bc), 1);
    CHECK_EQ(bc, 1);
    CHECK(h.until_us <= sent + 100000);
    CHECK(h.until_us > sent + 98000);
    CHECK(h.retry_us >= now + 100000);
    /* Something left: no block. */
    a.remaining = 1;
    CHECK_EQ(fg__blocked_from_decision(&lim, &a, 1, sent, now, &h, &bc), 0);
    /* Fixed window emptied: blocked until the window ends. */
    lim.algorithm = FG_FIXED_WINDOW;
    fg_decision f = {1, 10, 0, 500, 0, FG_SOURCE_STORE};
    CHECK_EQ(fg__blocked_from_decision(&lim, &f, 1, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, sent + 499001);
    /* Sliding window: no such shortcut. */
    lim.algorithm = FG_SLIDING_WINDOW;
    CHECK_EQ(fg__blocked_from_decision(&lim, &f, 1, sent, now, &h, &bc), 0);
}

int main(void)
{
    test_basic();
    test_bounded();
    test_probe();
    test_from_decision();
    return TEST_DONE();
}
