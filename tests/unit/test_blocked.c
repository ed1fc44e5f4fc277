/* test_serve_blocked.c -- the blocked-key cache (fake time, no sleep). */
#include <stdio.h>
#include <string.h>

#include "blocked.h"
#include "../harness.h"
#include "algo.h"

static fg__blocked_hit hit_until(uint64_t until)
{
    fg__blocked_hit h = {until, until + 500, until + 900, 10, 0};
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
    /* Held entries are counted, an expired block too until it goes. */
    CHECK_EQ(fg__blocked_count(c), 2);
    /* A block already over is not stored. */
    fg__blocked_hit past = hit_until(now);
    CHECK_EQ(fg__blocked_put(c, 1, "dave", 4, 1, now, &past), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "dave", 4, 1, now, &got), 0);
    CHECK_EQ(fg__blocked_count(c), 2);
    /* Put again, an entry is updated, not counted twice; forgotten, it
     * goes. */
    CHECK_EQ(fg__blocked_put(c, 1, "bob", 3, 1, now, &h5), 0);
    CHECK_EQ(fg__blocked_count(c), 2);
    fg__blocked_forget(c, 1, "bob", 3);
    fg__blocked_forget(c, 1, "bob", 3);
    CHECK_EQ(fg__blocked_count(c), 1);
    fg__blocked_clear(c);
    CHECK_EQ(fg__blocked_count(c), 0);
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
    CHECK_EQ(fg__blocked_count(c), 8);
    /* Expired entries are reused first, and the count stays at most the
     * entries. */
    now += 3000000;
    fg__blocked_hit h = hit_until(now + 1000);
    CHECK_EQ(fg__blocked_put(c, 3, "late", 4, 1, now, &h), 0);
    CHECK_EQ(fg__blocked_get(c, 3, "late", 4, 1, now, &got), 1);
    CHECK_EQ(fg__blocked_count(c), 8);
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
    fg__blocked_waiter *w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now,
                                                &again, 1, FG_BLOCKED_NO_ROOM);
    CHECK(w == &b);
    CHECK(w && w->next == &d);
    CHECK(w && w->next && w->next->next == NULL);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_HIT);
    /* Resolving twice, or by another request, does nothing. */
    CHECK(fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 0,
                              FG_BLOCKED_NO_ROOM) == NULL);
    /* A probe that was allowed: waiters go to the store themselves. */
    now += 100;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 0,
                            FG_BLOCKED_NO_ROOM);
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
    w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now, NULL, 1,
                            FG_BLOCKED_NO_ROOM);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    w = fg__blocked_resolve(c, 1, "k", 1, &b, 1, now, NULL, 0,
                            FG_BLOCKED_NO_ROOM);
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

/* clear empties every set it held keys in, across the table, and hands
 * back the waiters of each; a second clear finds nothing; the cache works
 * again after: the bitmap of sets that hold keys misses none. (That a
 * clear leaves the rest of the table unwritten is judged by
 * serve_reload_cache.sh, on a server's RSS.) */
static void test_clear_many(void)
{
    fg__blocked *c = fg__blocked_new(1000, 9); /* 250 sets */
    CHECK(c != NULL);
    if (!c)
        return;
    uint64_t now = 1000;
    fg__blocked_hit h = hit_until(now + 100), got;
    char k[16];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 600; i++) {
            int n = snprintf(k, sizeof(k), "u%d", i);
            fg__blocked_put(c, 1, k, (size_t)n, 1, now, &h);
        }
        uint64_t held = fg__blocked_count(c);
        CHECK(held > 400 && held <= 600);
        /* Ten keys with a probe out and a waiter each, all over the table. */
        fg__blocked_waiter probe[10], wait[10];
        int waiting = 0;
        for (int i = 0; i < 10; i++) {
            int n = snprintf(k, sizeof(k), "p%d", i * 97);
            fg__blocked_hit soon = hit_until(now + 1);
            CHECK_EQ(fg__blocked_put(c, 2, k, (size_t)n, 1, now, &soon), 0);
            fg__blocked_lookup(c, 2, k, (size_t)n, 1, now + 1, &probe[i], 1,
                               &got);
            waiting += fg__blocked_lookup(c, 2, k, (size_t)n, 1, now + 1,
                                          &wait[i], 1, &got) == FG_BLOCKED_WAIT;
        }
        CHECK_EQ(waiting, 10);
        int back = 0;
        for (fg__blocked_waiter *w = fg__blocked_clear(c); w; w = w->next)
            back++;
        CHECK_EQ(back, 10);
        CHECK_EQ(fg__blocked_count(c), 0);
        int found = 0;
        for (int i = 0; i < 600; i++) {
            int n = snprintf(k, sizeof(k), "u%d", i);
            found += fg__blocked_get(c, 1, k, (size_t)n, 1, now, &got);
        }
        CHECK_EQ(found, 0);
        CHECK(fg__blocked_clear(c) == NULL);
    }
    /* A set emptied by forget is not visited again, nor lost: a key put
     * there after is cleared. */
    CHECK_EQ(fg__blocked_put(c, 1, "solo", 4, 1, now, &h), 0);
    fg__blocked_forget(c, 1, "solo", 4);
    CHECK_EQ(fg__blocked_count(c), 0);
    CHECK_EQ(fg__blocked_put(c, 1, "solo", 4, 1, now, &h), 0);
    fg__blocked_clear(c);
    CHECK_EQ(fg__blocked_get(c, 1, "solo", 4, 1, now, &got), 0);
    CHECK_EQ(fg__blocked_count(c), 0);
    fg__blocked_free(c);
}

/* A key forgotten while its probe is out (a refund gave units back): the
 * probe's refusal, asked before, does not block it again; its waiters
 * still come back. */
static void test_forget_during_probe(void)
{
    fg__blocked *c = fg__blocked_new(16, 5);
    CHECK(c != NULL);
    if (!c)
        return;
    uint64_t now = 1000;
    fg__blocked_waiter a, b;
    fg__blocked_hit h = hit_until(now + 100), got;
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &h), 0);
    now += 100;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    fg__blocked_forget(c, 1, "k", 1);
    fg__blocked_hit again = hit_until(now + 5000);
    fg__blocked_waiter *w = fg__blocked_resolve(c, 1, "k", 1, &a, 1, now,
                                                &again, 1, FG_BLOCKED_NO_ROOM);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_get(c, 1, "k", 1, 1, now + 1, &got), 0);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now + 1, &b, 1, &got),
             FG_BLOCKED_MISS);
    /* A later block of the key holds as before. */
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &again), 0);
    CHECK_EQ(fg__blocked_get(c, 1, "k", 1, 1, now + 1, &got), 1);
    fg__blocked_free(c);
}

/* A probe allowed with room left: that many units go to the store
 * unqueued, the request taking the last one probes, the rest wait for it:
 * neither waiters nor a later burst stampede the store. */
static void test_room(void)
{
    fg__blocked *c = fg__blocked_new(16, 5);
    CHECK(c != NULL);
    if (!c)
        return;
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("10/s", &lim), 0);
    uint64_t now = 5000000, bc = 0;
    fg__blocked_waiter a, b, d, e, f, g;
    fg__blocked_hit h = hit_until(now + 100), got, nb;
    CHECK_EQ(fg__blocked_put(c, 1, "k", 1, 1, now, &h), 0);
    now += 100;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &e, 1, &got),
             FG_BLOCKED_WAIT);
    /* Allowed, two units left: no block, the room is read. */
    fg_decision ok = {1, 10, 2, 200, 0, FG_SOURCE_STORE, 200000, 0, 0};
    CHECK_EQ(fg__blocked_from_decision(&lim, &ok, 1, now - 300, now, &nb, &bc),
             0);
    fg__blocked_waiter *w =
        fg__blocked_resolve(c, 1, "k", 1, &a, 0, now, NULL, 0, ok.remaining);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &d, 1, &got),
             FG_BLOCKED_PROBE); /* takes the last unit, for everyone */
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &e, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_count(c), 1); /* held for its probe */
    /* That probe leaves nothing: the last waiter finds the block. */
    fg__blocked_hit again = hit_until(now + 100);
    w = fg__blocked_resolve(c, 1, "k", 1, &d, 1, now, &again, 0,
                            FG_BLOCKED_NO_ROOM);
    CHECK(w == &e);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &e, 1, &got),
             FG_BLOCKED_HIT);
    /* Room 3 for requests of cost 2: one goes, the next probes. */
    now += 100;
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &a, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 2, now, &b, 1, &got),
             FG_BLOCKED_WAIT);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 2, now, &d, 1, &got),
             FG_BLOCKED_WAIT);
    ok.remaining = 3;
    CHECK_EQ(fg__blocked_from_decision(&lim, &ok, 1, now - 300, now, &nb, &bc),
             0);
    w = fg__blocked_resolve(c, 1, "k", 1, &a, 0, now, NULL, 0, ok.remaining);
    CHECK(w == &b);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 2, now, &b, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 2, now, &d, 1, &got),
             FG_BLOCKED_PROBE);
    /* Room with nobody waiting: kept for the requests that come next. */
    CHECK_EQ(fg__blocked_from_decision(&lim, &ok, 1, now - 300, now, &nb, &bc),
             0);
    CHECK(fg__blocked_resolve(c, 1, "k", 1, &d, 0, now, NULL, 0,
                              ok.remaining) == NULL);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &f, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &f, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &g, 1, &got),
             FG_BLOCKED_PROBE);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &f, 1, &got),
             FG_BLOCKED_WAIT);
    /* Allowed, the room not known (an earlier limit of a set): the key is
     * forgotten, every waiter goes. */
    w = fg__blocked_resolve(c, 1, "k", 1, &g, 0, now, NULL, 0,
                            FG_BLOCKED_NO_ROOM);
    CHECK(w == &f);
    CHECK_EQ(fg__blocked_count(c), 0);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &f, 1, &got),
             FG_BLOCKED_MISS);
    CHECK_EQ(fg__blocked_lookup(c, 1, "k", 1, 1, now, &b, 1, &got),
             FG_BLOCKED_MISS);
    fg__blocked_free(c);
}

/* A store decision as the algorithm makes it at 'at'. */
static fg_decision decide(const fg__algo_params *p, fg__algo_state *s,
                          uint64_t at, uint64_t cost)
{
    fg_decision d;
    uint64_t exp;
    memset(&d, 0, sizeof(d));
    CHECK_EQ(fg__algo_check(p, s, at, cost, &d, &exp), FG_OK);
    d.source = FG_SOURCE_STORE;
    return d;
}

/* Would the store allow 'cost' at 'at'? (The state is not changed.) */
static int allows(const fg__algo_params *p, const fg__algo_state *s,
                  uint64_t at, uint64_t cost)
{
    fg__algo_state t = *s;
    return decide(p, &t, at, cost).allowed;
}

static void test_from_decision(void)
{
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("10/s", &lim), 0);
    fg__blocked_hit h;
    uint64_t bc = 0, sent = 1000000, now = 1000400, mid = 1000200;
    /* A refusal for 119.5 ms, decided by Redis TIME somewhere in the round
     * trip: blocked (for that cost and more) from its middle for exactly
     * that long; clients are told to wait as long from the answer. */
    fg_decision r = {0, 10, 0, 900, 120, FG_SOURCE_STORE, 899500, 119500, 0};
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 3, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, mid + 119500);
    CHECK_EQ(h.retry_us, now + 119500);
    CHECK_EQ(h.reset_us, now + 899500);
    CHECK_EQ(h.limit, 10);
    CHECK_EQ(bc, 3);
    /* On the caller's clock the decision counts from the send. */
    lim.clock_client = 1;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 3, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, sent + 119500);
    CHECK_EQ(h.retry_us, now + 119500);
    lim.clock_client = 0;
    /* A block that would be over by the answer is none. */
    r.retry_after_us = 200;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, sent, now, &h, &bc), 0);
    r.retry_after_us = 201;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, now + 1);
    /* A refusal without a wait, an answer before its send, or a decision
     * not from the store (cache, local fallback, failure): no block. */
    r.retry_after_us = 0;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, sent, now, &h, &bc), 0);
    r.retry_after_us = 119500;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, now, sent, &h, &bc), 0);
    r.source = FG_SOURCE_LOCAL;
    CHECK_EQ(fg__blocked_from_decision(&lim, &r, 1, sent, now, &h, &bc), 0);
    /* Token bucket 10/s, burst 10, just emptied: full in 1000 ms, the next
     * token in 100 ms. */
    fg_decision a = {1, 10, 0, 1000, 0, FG_SOURCE_STORE, 1000000, 0, 0};
    CHECK_EQ(fg__blocked_from_decision(&lim, &a, 1, sent, now, &h, &bc), 1);
    CHECK_EQ(bc, 1);
    CHECK_EQ(h.until_us, mid + 100000);
    CHECK_EQ(h.retry_us, now + 100000);
    /* Something left, or a bucket whose first token is already back: no
     * block. */
    a.remaining = 1;
    CHECK_EQ(fg__blocked_from_decision(&lim, &a, 1, sent, now, &h, &bc), 0);
    a.remaining = 0;
    a.reset_us = 900000;
    CHECK_EQ(fg__blocked_from_decision(&lim, &a, 1, sent, now, &h, &bc), 0);
    /* Fixed window emptied: blocked until the window ends, counted from
     * the send (the window is the caller's clock's). */
    lim.algorithm = FG_FIXED_WINDOW;
    fg_decision f = {1, 10, 0, 500, 0, FG_SOURCE_STORE, 499500, 0, 0};
    CHECK_EQ(fg__blocked_from_decision(&lim, &f, 1, sent, now, &h, &bc), 1);
    CHECK_EQ(h.until_us, sent + 499500);
    CHECK_EQ(h.retry_us, now + 499500);
    /* Sliding window: no such shortcut. */
    lim.algorithm = FG_SLIDING_WINDOW;
    CHECK_EQ(fg__blocked_from_decision(&lim, &f, 1, sent, now, &h, &bc), 0);
}

/* The block of decision 'd', made at 'at' on the store's clock, as a
 * worker sees it: on the caller's clock the check was sent at 'at'; on
 * Redis TIME the store decided in the middle of a 700 us round trip. */
static int block_of(const fg_limit *lim, const fg_decision *d, uint64_t cost,
                    uint64_t at, fg__blocked_hit *h, uint64_t *bc)
{
    uint64_t rtt = 700;
    uint64_t sent = lim->algorithm == FG_FIXED_WINDOW ? at : at - rtt / 2;
    return fg__blocked_from_decision(lim, d, cost, sent, sent + rtt, h, bc);
}

/* Against the algorithms: a block ends when the store allows again:
 * refused 1 us before 'until', allowed at it (for a token that comes back
 * between two microseconds, at most 1 us later), and the retry time told to
 * clients is allowed. Many phases, so that fractions of emission intervals
 * show. */
static void test_from_decision_exact(void)
{
    static const struct {
        const char *rate;
        fg_algorithm algo;
        uint64_t burst;
    } cases[] = {
        {"10/s", FG_TOKEN_BUCKET, 0},   {"100/s", FG_TOKEN_BUCKET, 0},
        {"7/s", FG_TOKEN_BUCKET, 3},    {"1000/min", FG_TOKEN_BUCKET, 5},
        {"3/7ms", FG_TOKEN_BUCKET, 2},  {"10/s", FG_FIXED_WINDOW, 0},
        {"7/300ms", FG_FIXED_WINDOW, 0}};
    int bad = 0, blocks = 0;
    for (size_t n = 0; n < sizeof(cases) / sizeof(cases[0]); n++) {
        fg_limit lim;
        fg__algo_params p;
        CHECK_EQ(fg_limit_parse(cases[n].rate, &lim), 0);
        lim.algorithm = cases[n].algo;
        lim.burst = cases[n].burst;
        CHECK_EQ(fg__algo_params_init(&lim, &p, NULL, 0), 0);
        uint64_t max = lim.burst ? lim.burst : lim.limit;
        for (uint64_t phase = 0; phase < 200; phase++) {
            fg__algo_state s = {0, 0, 0};
            uint64_t t = 5000000000ULL + phase * 7919, bc = 0;
            fg_decision d;
            fg__blocked_hit h;
            /* Empty it: the last allowed check leaves nothing. */
            for (uint64_t i = 0; i < max; i++)
                d = decide(&p, &s, t, 1);
            if (!d.allowed || d.remaining != 0 ||
                !block_of(&lim, &d, 1, t, &h, &bc) || bc != 1) {
                bad++;
                continue;
            }
            blocks++;
            if (allows(&p, &s, h.until_us - 1, 1) ||
                !(allows(&p, &s, h.until_us, 1) ||
                  allows(&p, &s, h.until_us + 1, 1)) ||
                !allows(&p, &s, h.retry_us, 1))
                bad++;
            /* A refusal of 'max' units, exact to the microsecond. */
            d = decide(&p, &s, t + 13, max);
            if (d.allowed || !block_of(&lim, &d, max, t + 13, &h, &bc) ||
                bc != max) {
                bad++;
                continue;
            }
            blocks++;
            if (allows(&p, &s, h.until_us - 1, max) ||
                !allows(&p, &s, h.until_us, max) ||
                !allows(&p, &s, h.retry_us, max))
                bad++;
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(blocks, 7 * 200 * 2);
}

int main(void)
{
    test_basic();
    test_bounded();
    test_probe();
    test_clear_many();
    test_forget_during_probe();
    test_room();
    test_from_decision();
    test_from_decision_exact();
    return TEST_DONE();
}
