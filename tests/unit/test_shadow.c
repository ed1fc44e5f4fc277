/* test_shadow.c -- shadow mode (fg_limit.shadow) on memory stores with a
 * fake clock: a shadow limit counts as an enforcing one does, allows what
 * it would refuse and says so (fg_decision.shadowed); in a set a shadowed
 * refusal neither stops the set nor refunds the limits before it, nor is
 * refunded itself when a later limit refuses; the async forms agree, and
 * a shadow limit never uses its blocked-key cache. */
#include <event2/event.h>
#include <stdlib.h>

#include "../harness.h"
#include "floodgate.h"

#define SEC 1000000ull

static uint64_t fake_now = 100 * SEC;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static fg_store *open_store(void)
{
    fg_memory_options o = {.clock = fake_clock};
    return fg_store_open_memory(&o, NULL, 0);
}

static fg_limiter *new_limiter(fg_store *st, const char *name, const char *rate,
                               fg_algorithm algo, int shadow)
{
    fg_limit lim;
    CHECK_EQ(fg_limit_parse(rate, &lim), FG_OK);
    snprintf(lim.name, sizeof(lim.name), "%s", name);
    lim.algorithm = algo;
    lim.shadow = shadow;
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK(l != NULL);
    return l;
}

static uint64_t remaining(fg_limiter *l, const char *key)
{
    fg_decision d;
    CHECK_EQ(fg_peek(l, key, strlen(key), &d), FG_OK);
    return d.remaining;
}

/* One shadow limit against its enforcing twin: the same figures, but
 * every refusal is allowed and marked. */
static void test_single(fg_algorithm algo)
{
    fg_store *st = open_store();
    fg_limiter *sh = new_limiter(st, "sh", "3/h", algo, 1);
    fg_limiter *en = new_limiter(st, "en", "3/h", algo, 0);
    for (int i = 0; i < 6; i++) {
        fg_decision a, b;
        memset(&a, 0xff, sizeof(a));
        memset(&b, 0xff, sizeof(b));
        int ra = fg_check(sh, "k", 1, 1, &a);
        int rb = fg_check(en, "k", 1, 1, &b);
        CHECK_EQ(ra, rb);
        CHECK_EQ(a.allowed, 1);
        CHECK_EQ(a.shadowed, !b.allowed);
        CHECK_EQ(b.shadowed, 0);
        CHECK_EQ(a.remaining, b.remaining);
        CHECK_EQ(a.reset_us, b.reset_us);
        CHECK_EQ(a.retry_after_us, 0);
        CHECK_EQ(a.retry_after_ms, 0);
        CHECK_EQ(a.source, b.source);
        CHECK_EQ(b.allowed, i < 3);
    }
    /* Counted as usual: what was allowed for real is taken, the shadowed
     * refusals took nothing. */
    CHECK_EQ(remaining(sh, "k"), 0);
    fake_now += 2 * 3600 * SEC; /* a sliding window's previous one too */
    CHECK_EQ(remaining(sh, "k"), 3);
    /* Bad input is no decision of the limit's: still refused. */
    fg_decision d;
    CHECK_EQ(fg_check(sh, "k", 1, 4, &d), FG_ECOST);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.shadowed, 0);
    fg_limiter_free(sh);
    fg_limiter_free(en);
    fg_store_close(st);
}

/* Sets: [shadow 1/h, enforcing 2/h] and [enforcing 2/h, shadow 1/h]. */
static void test_sets(void)
{
    fg_store *st = open_store();
    fg_limiter *sh = new_limiter(st, "sh", "1/h", FG_FIXED_WINDOW, 1);
    fg_limiter *en = new_limiter(st, "en", "2/h", FG_FIXED_WINDOW, 0);
    fg_set_item first_shadow[2] = {{sh, "a", 1}, {en, "a", 1}};
    fg_set_result r;
    /* 1: both allow. 2: the shadow limit would refuse: the set goes on and
     * is allowed, the enforcing limit counts its second unit. */
    CHECK_EQ(fg_check_set(first_shadow, 2, 1, &r), FG_OK);
    CHECK(r.d[r.decided].allowed);
    CHECK_EQ(r.asked, 3);
    CHECK_EQ(fg_check_set(first_shadow, 2, 1, &r), FG_OK);
    CHECK_EQ(r.asked, 3);
    CHECK_EQ(r.d[0].shadowed, 1);
    CHECK_EQ(r.d[0].allowed, 1);
    CHECK_EQ(r.d[1].allowed, 1);
    CHECK(r.d[r.decided].allowed);
    CHECK_EQ(remaining(en, "a"), 0);
    /* 3: the enforcing limit refuses: the set is refused, and the shadow
     * limit, which took nothing, is not refunded (nor is anything else). */
    CHECK_EQ(fg_check_set(first_shadow, 2, 1, &r), FG_OK);
    CHECK_EQ(r.decided, 1);
    CHECK_EQ(r.d[1].allowed, 0);
    CHECK_EQ(r.unrefunded, 0);
    CHECK_EQ(remaining(sh, "a"), 0);
    CHECK_EQ(remaining(en, "a"), 0);

    /* The enforcing limit first: a shadowed refusal after it does not
     * refund it (the request is allowed: it keeps its unit). */
    fg_set_item first_enforcing[2] = {{en, "b", 1}, {sh, "b", 1}};
    CHECK_EQ(fg_check_set(first_enforcing, 2, 1, &r), FG_OK);
    CHECK(r.d[r.decided].allowed);
    CHECK_EQ(fg_check_set(first_enforcing, 2, 1, &r), FG_OK);
    CHECK(r.d[r.decided].allowed);
    CHECK_EQ(r.d[1].shadowed, 1);
    CHECK_EQ(remaining(en, "b"), 0);
    CHECK_EQ(remaining(sh, "b"), 0);
    /* The deciding limit of an allowed set is the one with the fewest
     * units left: the shadowed one may be it, allowed. */
    CHECK_EQ(r.d[r.decided].remaining, 0);
    fg_limiter_free(sh);
    fg_limiter_free(en);
    fg_store_close(st);
}

static int cb_calls;
static fg_decision cb_d;

static void on_check(int rc, const fg_decision *d, void *data)
{
    (void)rc;
    (void)data;
    cb_calls++;
    cb_d = *d;
}

static int sets_done;
static fg_set_result set_r;

static void on_set(fg_set_req *req)
{
    sets_done++;
    set_r = req->result;
}

/* fg_check_async and fg_check_set_async on an async memory store: the
 * same decisions; and a shadow limit's cache stays empty, so that every
 * would-be refusal is the store's, counted and marked. */
static void test_async(void)
{
    struct event_base *base = event_base_new();
    fg_store *st = fg_store_open_async("memory", base, NULL, 0);
    fg_limiter *sh = new_limiter(st, "sh", "2/h", FG_TOKEN_BUCKET, 1);
    fg_limiter *en = new_limiter(st, "en", "2/h", FG_TOKEN_BUCKET, 0);
    fg_cache *c = fg_cache_new(64);
    fg_limiter_set_cache(sh, c);
    fg_limiter_set_cache(en, c);
    for (int i = 0; i < 4; i++) {
        cb_calls = 0;
        memset(&cb_d, 0xff, sizeof(cb_d));
        CHECK_EQ(fg_check_async(sh, "x", 1, 1, on_check, NULL), FG_OK);
        while (cb_calls == 0)
            event_base_loop(base, EVLOOP_ONCE);
        CHECK_EQ(cb_d.allowed, 1);
        CHECK_EQ(cb_d.shadowed, i >= 2);
    }
    /* The shadow limit alone: asked of the store every time. */
    for (int i = 0; i < 5; i++) {
        fg_set_item it[1] = {{sh, "y", 1}};
        fg_set_req req;
        int before = sets_done;
        CHECK_EQ(fg_check_set_async(&req, it, 1, 1, on_set), FG_OK);
        while (sets_done == before)
            event_base_loop(base, EVLOOP_ONCE);
        CHECK_EQ(set_r.d[0].allowed, 1);
        CHECK_EQ(set_r.d[0].source, FG_SOURCE_STORE);
        CHECK_EQ(set_r.d[0].shadowed, i >= 2);
    }
    CHECK_EQ(fg_cache_count(c), 0);
    /* With an enforcing limit after it: the enforcing limit's emptied
     * bucket is cached (and then answers the set at once, as it should:
     * the request is refused, nothing consumed). */
    for (int i = 0; i < 4; i++) {
        fg_set_item it[2] = {{sh, "z", 1}, {en, "z", 1}};
        fg_set_req req;
        int before = sets_done;
        CHECK_EQ(fg_check_set_async(&req, it, 2, 1, on_set), FG_OK);
        while (sets_done == before)
            event_base_loop(base, EVLOOP_ONCE);
        CHECK_EQ(set_r.d[set_r.decided].allowed, i < 2);
        CHECK_EQ(set_r.d[set_r.decided].source,
                 i < 2 ? FG_SOURCE_STORE : FG_SOURCE_CACHE);
    }
    CHECK_EQ(fg_cache_count(c), 1);
    fg_limiter_free(sh);
    fg_limiter_free(en);
    fg_cache_free(c);
    fg_store_close(st);
    event_base_free(base);
}

int main(void)
{
    for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++)
        test_single((fg_algorithm)a);
    test_sets();
    test_async();
    return TEST_DONE();
}
