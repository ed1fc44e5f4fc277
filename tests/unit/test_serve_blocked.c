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

int main(void)
{
    test_basic();
    test_bounded();
    return TEST_DONE();
}
