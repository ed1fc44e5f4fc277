/* test_lab_bound.c -- the bound the lab states for a run of sync or lease
 * (lab/bound.c): known answers worked out by hand from fg_limit_bound's
 * statement and the scalper's burst, and the strategies that state none. */
#include <string.h>

#include "../../lab/lab.h"
#include "../harness.h"

static fg__lab_params params(int servers, int burst, int spread_ms, int rtt_ms,
                             uint64_t limit)
{
    fg__lab_params p;
    memset(&p, 0, sizeof p);
    p.servers = servers;
    p.burst = burst;
    p.spread_us = (int64_t)spread_ms * 1000;
    p.rtt_us = (int64_t)rtt_ms * 1000;
    p.limit = limit;
    p.period_ms = 1000;
    p.sync_ms = 200;
    return p;
}

/* A burst shorter than the window: the whole burst may arrive in it, so
 * the bound is what reaches the other servers of it, or the cap. */
static void test_sync_short_burst(void)
{
    fg__lab_params p = params(8, 80, 40, 2, 10);
    fg__lab_bound b;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.kind, 1);
    CHECK_EQ(b.over_window_ms, 404); /* 2 x (200 ms + 2 ms) */
    /* 7 others x (10, and 10/s x 404 ms = 4.04, 5 whole, refilled) */
    CHECK_EQ(b.over_cap, 105);
    CHECK_EQ(b.in_window, 77); /* 80 x 7 / 8, + one a server */
    CHECK_EQ(b.bound, 77);
    p.burst = 20; /* 20 x 7 / 8 = 17.5: 17 whole, + 7 */
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.in_window, 24);
    CHECK_EQ(b.bound, 24);
    p.burst = 200; /* 175 arrive, but no server passes the limit */
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.in_window, 182);
    CHECK_EQ(b.bound, 105);
}

/* A burst longer than the window: A = burst / spread. */
static void test_sync_long_burst(void)
{
    /* 100 in 400 ms, window 2 x (20 + 2) = 44 ms: 100 x 7/8 x 44/400 =
     * 9.63 requests, + 7. */
    fg__lab_params p = params(8, 100, 400, 2, 10);
    p.sync_ms = 20;
    fg__lab_bound b;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.over_window_ms, 44);
    CHECK_EQ(b.in_window, 16);
    CHECK_EQ(b.bound, 16);
    /* 200 in 40 ms, window 22 ms, limit 20: 200 x 7/8 x 22/40 = 96.25,
     * + 7. */
    p = params(8, 200, 40, 1, 20);
    p.sync_ms = 10;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.over_window_ms, 22);
    CHECK_EQ(b.over_cap, 147); /* 7 x (20, and 20/s x 22 ms = 0.44: 1) */
    CHECK_EQ(b.bound, 103);
    /* The largest run: no overflow. 10,000 at once on 64 servers. */
    p = params(64, 10000, 0, 1000, 1000000);
    p.sync_ms = 10000;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.over_window_ms, 22000);
    CHECK_EQ(b.in_window, 9906); /* 10,000 x 63 / 64, + 63 */
    CHECK_EQ(b.bound, 9906);
}

static void test_lease(void)
{
    fg__lab_params p = params(8, 80, 40, 2, 10);
    fg__lab_bound b;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_LEASE, &p, &b), 0);
    CHECK_EQ(b.kind, 2);
    CHECK_EQ(b.chunk, 5);      /* half the burst by default */
    CHECK_EQ(b.under_cap, 10); /* 8 x 5, at most the limit */
    CHECK_EQ(b.bound, 10);
    p.limit = 20;
    p.chunk = 2;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_LEASE, &p, &b), 0);
    CHECK_EQ(b.chunk, 2);
    CHECK_EQ(b.bound, 17); /* 8 x 2, and 2 - 1 that one server waits for */
    CHECK_EQ(b.over_cap, 0);
}

/* One server has no others: nothing over; under, its own chunk of 5 (a
 * check whose takes come back empty goes to the store, which counts the
 * take in flight), and its token bucket lease may wait for it to fit. */
static void test_one_server(void)
{
    fg__lab_params p = params(1, 80, 40, 2, 10);
    fg__lab_bound b;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_SYNC, &p, &b), 0);
    CHECK_EQ(b.bound, 0);
    CHECK_EQ(fg__lab_bound_of(FG__LAB_LEASE, &p, &b), 0);
    CHECK_EQ(b.bound, 9);
}

static void test_no_bound(void)
{
    fg__lab_params p = params(8, 80, 40, 2, 10);
    fg__lab_bound b;
    for (int s = 0; s < FG__LAB_SYNC; s++) {
        memset(&b, 0xff, sizeof b);
        CHECK_EQ(fg__lab_bound_of(s, &p, &b), 0);
        CHECK_EQ(b.kind, 0);
        CHECK_EQ(b.bound, 0);
    }
    /* A chunk the library refuses (more than the limit). */
    p.chunk = 11;
    CHECK_EQ(fg__lab_bound_of(FG__LAB_LEASE, &p, &b), -1);
}

int main(void)
{
    test_sync_short_burst();
    test_sync_long_burst();
    test_lease();
    test_one_server();
    test_no_bound();
    return TEST_DONE();
}
