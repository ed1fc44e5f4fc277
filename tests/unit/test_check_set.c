/* test_check_set.c -- a request's ordered set of limits in the library
 * (fg_check_set, fg_check_set_async), on memory stores with a fake clock:
 * the first refusal stops the set, the limits before it are refunded, a
 * refused request consumes nothing anywhere, the set reports which limit
 * decided and each asked limit's figures; the asynchronous form calls back
 * once, before it returns when nothing needs I/O, and its blocked-key cache
 * answers a known refusal without the store. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "floodgate.h"

#define SEC 1000000ull

static uint64_t fake_now = 100 * SEC;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static fg_limiter *limiter(fg_store *st, const char *name, const char *rate,
                           fg_algorithm a)
{
    fg_limit l;
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    l.algorithm = a;
    snprintf(l.name, sizeof l.name, "%s", name);
    fg_limiter *lim = fg_limiter_new(st, &l, NULL, 0);
    CHECK(lim != NULL);
    return lim;
}

/* Units of 'l' left for 'key': a check of one unit, given back. */
static uint64_t remaining(fg_limiter *l, const char *key)
{
    fg_decision d;
    CHECK_EQ(fg_check(l, key, strlen(key), 1, &d), FG_OK);
    if (!d.allowed)
        return 0;
    CHECK_EQ(fg_refund(l, key, strlen(key), 1), FG_OK);
    return d.remaining + 1;
}

static void test_sync(void)
{
    fg_memory_options o = {.clock = fake_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    fg_limiter *a = limiter(st, "a", "5/s", FG_FIXED_WINDOW);
    fg_limiter *b = limiter(st, "b", "2/s", FG_TOKEN_BUCKET);
    fg_set_item it[2] = {{a, "u", 1}, {b, "u", 1}};
    fg_set_result r;

    /* Allowed: the decision is the limit with the fewest units left. */
    CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
    CHECK_EQ(r.asked, 3);
    CHECK_EQ(r.error, FG_OK);
    CHECK_EQ(r.decided, 1);
    CHECK(r.d[0].allowed && r.d[1].allowed);
    CHECK_EQ(r.d[0].remaining, 4);
    CHECK_EQ(r.d[1].remaining, 1);
    CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
    CHECK(r.d[r.decided].allowed);

    /* b refuses: the set is refused by b, and a gives back its unit. */
    CHECK_EQ(remaining(a, "u"), 3);
    CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
    CHECK_EQ(r.decided, 1);
    CHECK(!r.d[1].allowed);
    CHECK(r.d[1].retry_after_us > 0);
    CHECK_EQ(r.rc[1], FG_OK);
    CHECK_EQ(r.unrefunded, 0);
    CHECK_EQ(r.d[0].remaining, 3); /* a's figure counts its refund back */
    CHECK_EQ(remaining(a, "u"), 3);

    /* The first refusal stops the set: b is not asked when a refuses. */
    fg_set_item rev[2] = {{b, "v", 1}, {a, "v", 1}};
    CHECK_EQ(fg_check_set(rev, 2, 2, &r), FG_OK); /* b: 2 of 2 */
    CHECK_EQ(fg_check_set(rev, 2, 1, &r), FG_OK);
    CHECK_EQ(r.asked, 1);
    CHECK_EQ(r.decided, 0);
    CHECK(!r.d[0].allowed);
    CHECK_EQ(remaining(a, "v"), 3);

    /* Bad input at the second limit (a cost above b's burst): a 400-style
     * error, and the first limit refunded. */
    fg_set_item big[2] = {{a, "w", 1}, {b, "w", 1}};
    CHECK_EQ(fg_check_set(big, 2, 3, &r), FG_OK);
    CHECK_EQ(r.error, FG_ECOST);
    CHECK_EQ(r.decided, 1);
    CHECK_EQ(r.rc[1], FG_ECOST);
    CHECK(!r.d[1].allowed);
    CHECK_EQ(r.d[0].remaining, 5);
    CHECK_EQ(remaining(a, "w"), 5);

    /* Each limit its own key. */
    fg_set_item keys[2] = {{a, "ip-1", 4}, {b, "user-9", 6}};
    CHECK_EQ(fg_check_set(keys, 2, 1, &r), FG_OK);
    CHECK(r.d[0].allowed && r.d[1].allowed);
    CHECK_EQ(remaining(a, "ip-1"), 4);
    CHECK_EQ(remaining(a, "user-9"), 5);

    /* A new window: everything back. */
    fake_now += 2 * SEC;
    CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
    CHECK(r.d[r.decided].allowed);

    CHECK_EQ(fg_check_set(it, 0, 1, &r), FG_EINVAL);
    CHECK_EQ(fg_check_set(it, FG_SET_MAX + 1, 1, &r), FG_EINVAL);
    fg_set_item none[1] = {{NULL, "u", 1}};
    CHECK_EQ(fg_check_set(none, 1, 1, &r), FG_EINVAL);
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(st);
}

struct done {
    int calls;
    int during; /* called before fg_check_set_async returned */
    int submitting;
    fg_set_result r;
};

static void on_set(fg_set_req *req)
{
    struct done *d = req->data;
    d->calls++;
    d->during = d->submitting;
    d->r = req->result;
}

static int set_async(fg_set_req *req, struct done *dn, const fg_set_item *it,
                     unsigned n, uint64_t cost)
{
    memset(dn, 0, sizeof(*dn));
    req->data = dn;
    dn->submitting = 1;
    int rc = fg_check_set_async(req, it, n, cost, on_set);
    dn->submitting = 0;
    return rc;
}

/* The asynchronous form on a memory store: the same results as the
 * blocking one, one callback each, before the call returns. */
static void test_async(void)
{
    struct event_base *base = event_base_new();
    fg_store *as = fg_store_open_async("memory", base, NULL, 0);
    fg_memory_options o = {.clock = fake_clock};
    fg_store *bs = fg_store_open_memory(&o, NULL, 0);
    CHECK(as != NULL && bs != NULL);
    /* The async store reads the real clock: periods of an hour keep its
     * windows from turning during the test. */
    fg_limiter *aa = limiter(as, "a", "3/h", FG_FIXED_WINDOW);
    fg_limiter *ab = limiter(as, "b", "10/h", FG_SLIDING_WINDOW);
    fg_limiter *ba = limiter(bs, "a", "3/h", FG_FIXED_WINDOW);
    fg_limiter *bb = limiter(bs, "b", "10/h", FG_SLIDING_WINDOW);
    fg_set_item ai[2] = {{ab, "k", 1}, {aa, "k", 1}};
    fg_set_item bi[2] = {{bb, "k", 1}, {ba, "k", 1}};
    fg_set_req req;
    struct done dn;
    int wrong = 0;
    for (int i = 0; i < 6; i++) {
        fg_set_result want;
        CHECK_EQ(fg_check_set(bi, 2, 1, &want), FG_OK);
        CHECK_EQ(set_async(&req, &dn, ai, 2, 1), FG_OK);
        CHECK_EQ(dn.calls, 1);
        CHECK_EQ(dn.during, 1);
        wrong +=
            dn.r.asked != want.asked || dn.r.decided != want.decided ||
            dn.r.d[dn.r.decided].allowed != want.d[want.decided].allowed ||
            dn.r.d[dn.r.decided].remaining != want.d[want.decided].remaining;
    }
    CHECK_EQ(wrong, 0);
    /* Bad input never calls back twice, and invalid sets not at all. */
    CHECK_EQ(set_async(&req, &dn, ai, 2, 11), FG_OK);
    CHECK_EQ(dn.calls, 1);
    CHECK_EQ(dn.r.error, FG_ECOST);
    CHECK_EQ(dn.r.decided, 0);
    CHECK_EQ(set_async(&req, &dn, ai, 0, 1), FG_EINVAL);
    CHECK_EQ(dn.calls, 0);
    /* A NULL key of a length: bad input, said in 'error' on both forms. */
    fg_set_item nk[2] = {{bb, "k", 1}, {ba, NULL, 1}};
    fg_set_result nr;
    CHECK_EQ(fg_check_set(nk, 2, 1, &nr), FG_OK);
    CHECK_EQ(nr.error, FG_EINVAL);
    CHECK_EQ(nr.decided, 1);

    /* The blocked-key cache: once the store leaves a key nothing (the
     * third unit of 3/h) or refuses it, the key is refused from the cache
     * (source "cache") for as long as the store would refuse it. */
    fg_cache *c = fg_cache_new(64);
    CHECK(c != NULL);
    fg_limiter_set_cache(aa, c);
    fg_set_item one[1] = {{aa, "z", 1}};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(set_async(&req, &dn, one, 1, 1), FG_OK);
        CHECK(dn.r.d[0].allowed);
        CHECK_EQ(dn.r.d[0].source, FG_SOURCE_STORE);
        CHECK_EQ(fg_cache_count(c), i == 2);
    }
    CHECK_EQ(set_async(&req, &dn, one, 1, 1), FG_OK);
    CHECK_EQ(dn.calls, 1);
    CHECK(!dn.r.d[0].allowed);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_CACHE);
    CHECK(dn.r.d[0].retry_after_us > 0);
    /* In a set, a known refusal answers before any store is asked. */
    fg_set_item two[2] = {{ab, "z", 1}, {aa, "z", 1}};
    CHECK_EQ(set_async(&req, &dn, two, 2, 1), FG_OK);
    CHECK_EQ(dn.r.asked, 2);
    CHECK_EQ(dn.r.decided, 1);
    CHECK_EQ(dn.r.d[1].source, FG_SOURCE_CACHE);
    /* Cleared, the store is asked again, and refuses. */
    fg_cache_clear(c);
    CHECK_EQ(fg_cache_count(c), 0);
    CHECK_EQ(set_async(&req, &dn, one, 1, 1), FG_OK);
    CHECK(!dn.r.d[0].allowed);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_STORE);
    CHECK_EQ(fg_cache_count(c), 1);
    /* A refusal with units left (cost 2, 1 left) is answered from the
     * cache with the same figures as the store's. */
    fg_set_item y[1] = {{aa, "y", 1}};
    CHECK_EQ(set_async(&req, &dn, y, 1, 2), FG_OK);
    CHECK(dn.r.d[0].allowed);
    CHECK_EQ(set_async(&req, &dn, y, 1, 2), FG_OK);
    CHECK(!dn.r.d[0].allowed);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_STORE);
    CHECK_EQ(dn.r.d[0].remaining, 1);
    CHECK_EQ(set_async(&req, &dn, y, 1, 2), FG_OK);
    CHECK(!dn.r.d[0].allowed);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_CACHE);
    CHECK_EQ(dn.r.d[0].remaining, 1);
    /* A refund makes the cache forget the key: the store, which has the
     * unit back, decides the next set. */
    fg_set_item w[1] = {{aa, "w", 1}};
    for (int i = 0; i < 3; i++)
        CHECK_EQ(set_async(&req, &dn, w, 1, 1), FG_OK);
    CHECK_EQ(set_async(&req, &dn, w, 1, 1), FG_OK);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_CACHE);
    CHECK_EQ(fg_refund(aa, "w", 1, 1), FG_OK);
    CHECK_EQ(set_async(&req, &dn, w, 1, 1), FG_OK);
    CHECK(dn.r.d[0].allowed);
    CHECK_EQ(dn.r.d[0].source, FG_SOURCE_STORE);
    fg_limiter_set_cache(aa, NULL);
    fg_cache_free(c);

    fg_limiter_free(aa);
    fg_limiter_free(ab);
    fg_limiter_free(ba);
    fg_limiter_free(bb);
    fg_store_close(as);
    fg_store_close(bs);
    event_base_free(base);
}

/* A limit in an approximate mode, allowed here before a limit that
 * refuses, is refunded too: the refused requests take none of its sync
 * view's usage or its lease's units. Key "u" has one allowed request and
 * four refused, key "v" only the allowed one: in the store, once the
 * limiter has sent what it holds, each counts one. */
static void test_modes(void)
{
    const char *modes[] = {"sync:1s", "lease"};
    for (int m = 0; m < 2; m++) {
        fg_memory_options o = {.clock = fake_clock};
        fg_store *st = fg_store_open_memory(&o, NULL, 0);
        fg_limit lim;
        CHECK_EQ(fg_limit_parse("100/min", &lim), FG_OK);
        lim.algorithm = FG_FIXED_WINDOW;
        snprintf(lim.name, sizeof lim.name, "a");
        CHECK_EQ(fg_mode_parse(modes[m], &lim, NULL, 0), FG_OK);
        fg_limiter *a = fg_limiter_new(st, &lim, NULL, 0);
        fg_limiter *b = limiter(st, "b", "1/min", FG_FIXED_WINDOW);
        CHECK(a != NULL);
        fg_set_result r;
        fg_set_item u[2] = {{a, "u", 1}, {b, "u", 1}};
        fg_set_item v[2] = {{a, "v", 1}, {b, "v", 1}};
        CHECK_EQ(fg_check_set(v, 2, 1, &r), FG_OK);
        CHECK(r.d[r.decided].allowed);
        for (int i = 0; i < 5; i++) {
            CHECK_EQ(fg_check_set(u, 2, 1, &r), FG_OK);
            CHECK_EQ(r.d[r.decided].allowed, i == 0);
            CHECK_EQ(r.d[0].allowed, 1);
            CHECK_EQ(r.unrefunded, 0);
        }
        /* Sent to the store: the usage of sync, the units a lease held. */
        CHECK_EQ(fg_limiter_sync(a), FG_OK);
        fg_decision du, dv;
        CHECK_EQ(fg_peek(a, "u", 1, &du), FG_OK);
        CHECK_EQ(fg_peek(a, "v", 1, &dv), FG_OK);
        CHECK_EQ(du.remaining, 99);
        CHECK_EQ(dv.remaining, 99);
        /* A key's first check, decided by the store (sync: no view yet),
         * in sets that b refuses: given back to the store. */
        fg_set_item w[2] = {{a, "w", 1}, {b, "w", 1}};
        fg_decision dw;
        CHECK_EQ(fg_check(b, "w", 1, 1, &dw), FG_OK);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ(fg_check_set(w, 2, 1, &r), FG_OK);
            CHECK_EQ(r.decided, 1);
            CHECK_EQ(r.d[0].allowed, 1);
            CHECK_EQ(r.unrefunded, 0);
        }
        CHECK_EQ(fg_limiter_sync(a), FG_OK);
        CHECK_EQ(fg_peek(a, "w", 1, &dw), FG_OK);
        CHECK_EQ(r.error, 0);
        CHECK_EQ(dw.remaining, 100);
        fg_limiter_free(a);
        fg_limiter_free(b);
        fg_store_close(st);
    }
}

int main(void)
{
    test_sync();
    test_modes();
    test_async();
    return TEST_DONE();
}
