/* test_serve_fallback.c -- the share of on_failure = local in serve: per
 * worker, per process, and the warnings when rounding loses part of it. */
#include <stdio.h>
#include <string.h>

#include "../../serve/fallback.h"
#include "../harness.h"

static fg_store *mem;

static fg_limit local(const char *rate, uint32_t servers, fg_algorithm alg,
                      uint64_t burst)
{
    fg_limit l;
    if (fg_limit_parse(rate, &l) != FG_OK)
        fprintf(stderr, "  bad rate %s\n", rate);
    snprintf(l.name, sizeof(l.name), "bookings");
    l.on_failure = FG_FAIL_LOCAL;
    l.fallback_servers = servers;
    l.algorithm = alg;
    l.burst = burst;
    return l;
}

static void test_shares(void)
{
    char err[200], info[400], warn[600];
    fg__fallback_share s;
    /* 24/s among 4 servers x 2 workers: 3/s per worker, 6/s here, the
     * whole rate across the fleet. */
    fg_limit l = local("24/s", 4, FG_FIXED_WINDOW, 0);
    CHECK_EQ(fg__fallback_share_of(mem, &l, 2, &s, err, sizeof(err)), FG_OK);
    CHECK_EQ(s.limit, 3);
    CHECK_EQ(s.workers, 2);
    CHECK_EQ(s.rounded, 0);
    CHECK_EQ(s.zero, 0);
    fg__fallback_describe(&l, &s, info, sizeof(info), warn, sizeof(warn));
    CHECK_STR(info, "limit bookings: on_failure = local enforces 3/s per "
                    "worker x 2 workers (6/s in this process) while the "
                    "store is unreachable");
    CHECK_STR(warn, "");
    /* 25/s: 3/s per worker still (25 / 8, rounded down), 24/s in all. */
    l = local("25/s", 4, FG_FIXED_WINDOW, 0);
    CHECK_EQ(fg__fallback_share_of(mem, &l, 2, &s, err, sizeof(err)), FG_OK);
    CHECK_EQ(s.limit, 3);
    CHECK_EQ(s.rounded, 1);
    fg__fallback_describe(&l, &s, info, sizeof(info), warn, sizeof(warn));
    CHECK(strstr(warn, "3/s per worker x 2 workers x 4 servers is 24/s, "
                       "less than the rate 25/s") != NULL);
    /* 10/15min among 4 servers x 4 workers: nothing per worker. */
    l = local("10/15min", 4, FG_FIXED_WINDOW, 0);
    CHECK_EQ(fg__fallback_share_of(mem, &l, 4, &s, err, sizeof(err)), FG_OK);
    CHECK_EQ(s.limit, 0);
    CHECK_EQ(s.zero, 1);
    fg__fallback_describe(&l, &s, info, sizeof(info), warn, sizeof(warn));
    CHECK(strstr(info, "enforces 0/15min per worker") != NULL);
    CHECK(strstr(warn, "EVERY request is refused") != NULL);
    CHECK(strstr(warn, "10/15min among 4 servers x 4 workers") != NULL);
    /* A token bucket: the burst is shared too, and its rounding warned. */
    l = local("12/s", 2, FG_TOKEN_BUCKET, 21);
    CHECK_EQ(fg__fallback_share_of(mem, &l, 2, &s, err, sizeof(err)), FG_OK);
    CHECK_EQ(s.limit, 3);
    CHECK_EQ(s.burst, 5);
    CHECK_EQ(s.rounded, 1);
    fg__fallback_describe(&l, &s, info, sizeof(info), warn, sizeof(warn));
    CHECK(strstr(info, "burst 5 per worker (10 in this process)") != NULL);
    CHECK(strstr(warn, "burst 5 x 2 x 2 is 20, less than 21") != NULL);
    /* A burst smaller than the servers x workers: nothing either. */
    l = local("100/s", 4, FG_TOKEN_BUCKET, 5);
    CHECK_EQ(fg__fallback_share_of(mem, &l, 2, &s, err, sizeof(err)), FG_OK);
    CHECK_EQ(s.zero, 1);
    /* Not a local fallback. */
    l.on_failure = FG_FAIL_OPEN;
    CHECK_EQ(fg__fallback_share_of(mem, &l, 2, &s, err, sizeof(err)),
             FG_EINVAL);
}

static void test_worker_limit(void)
{
    fg_limit l = local("10/s", 4, FG_FIXED_WINDOW, 0);
    CHECK_EQ(fg__fallback_worker_limit(&l, 3).fallback_servers, 12);
    l.fallback_servers = 0; /* the library's default, 1 */
    CHECK_EQ(fg__fallback_worker_limit(&l, 2).fallback_servers, 2);
    l.fallback_servers = 100000;
    CHECK_EQ(fg__fallback_worker_limit(&l, 64).fallback_servers, 6400000);
}

static void test_rate_text(void)
{
    char t[48];
    fg__fallback_rate_text(3, 1000000, t, sizeof(t));
    CHECK_STR(t, "3/s");
    fg__fallback_rate_text(1, 900000000, t, sizeof(t));
    CHECK_STR(t, "1/15min");
    fg__fallback_rate_text(40, 500000, t, sizeof(t));
    CHECK_STR(t, "40/500ms");
    fg__fallback_rate_text(7, 86400000000ULL, t, sizeof(t));
    CHECK_STR(t, "7/day");
    fg__fallback_rate_text(2, 7200000000ULL, t, sizeof(t));
    CHECK_STR(t, "2/2h");
}

int main(void)
{
    char err[200];
    mem = fg_store_open("memory", err, sizeof(err));
    CHECK(mem != NULL);
    if (!mem)
        return TEST_DONE();
    test_shares();
    test_worker_limit();
    test_rate_text();
    fg_store_close(mem);
    return TEST_DONE();
}
