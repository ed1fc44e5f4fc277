/* test_redis_proto.c -- the Redis store's pure parts: key layout, error
 * mapping, script replies, the limits Lua can decide exactly, and fixed
 * window decisions made from INCRBY's count as the C algorithm makes them. */
#include <stdlib.h>

#include "../harness.h"
#include "redis_proto.h"
#include "store.h"

static fg__algo_params params(fg_algorithm a, uint64_t limit, uint64_t period,
                              uint64_t burst)
{
    fg_limit lim;
    fg__algo_params p;
    char err[200];
    memset(&lim, 0, sizeof lim);
    lim.algorithm = a;
    lim.limit = limit;
    lim.period_us = period;
    lim.burst = burst;
    if (fg__algo_params_init(&lim, &p, err, sizeof err) != FG_OK)
        fprintf(stderr, "params: %s\n", err);
    return p;
}

static void test_keys(void)
{
    char buf[FG__REDIS_KEY_MAX];
    const char kp[] = "fg:api:{";
    size_t n = fg__redis_key(buf, kp, 8, "u 1\r\n\0x", 7, 42);
    CHECK_EQ(n, 8 + 7 + 2 + 2);
    CHECK(memcmp(buf, "fg:api:{u 1\r\n\0x}:42", n) == 0);
    n = fg__redis_key(buf, kp, 8, "", 0, -1);
    CHECK_EQ(n, 10);
    CHECK(memcmp(buf, "fg:api:{}:", n) == 0);
    char *big = malloc(FG_MAX_KEY + 1);
    memset(big, 'k', FG_MAX_KEY + 1);
    CHECK(fg__redis_key(buf, kp, 8, big, FG_MAX_KEY, 18446744073709551ll) >
          FG_MAX_KEY);
    CHECK_EQ(fg__redis_key(buf, kp, 8, big, FG_MAX_KEY + 1, 1), 0);
    free(big);
    char d[21];
    CHECK_EQ(fg__redis_u64(d, 0), 1);
    CHECK_STR(d, "0");
    CHECK_EQ(fg__redis_u64(d, UINT64_MAX), 20);
    CHECK_STR(d, "18446744073709551615");
}

static void test_errors(void)
{
    static const struct {
        const char *s;
        int code;
    } cases[] = {
        {"NOSCRIPT No matching script.", FG__REDIS_NOSCRIPT},
        {"BUSY Redis is busy running a script.", FG_EBUSY},
        {"LOADING Redis is loading the dataset in memory", FG_EBUSY},
        {"OOM command not allowed when used memory > 'maxmemory'.", FG_EOOM},
        {"READONLY You can't write against a read only replica.", FG_EREADONLY},
        {"NOAUTH Authentication required.", FG_EAUTH},
        {"WRONGPASS invalid username-password pair", FG_EAUTH},
        {"ERR AUTH <password> called without any password configured",
         FG_EAUTH},
        {"ERR floodgate: clock outside the exact range", FG_ERANGE},
        {"ERR DB index is out of range", FG_EINVAL},
        {"MASTERDOWN Link with MASTER is down", FG_EBACKEND},
        {"ERR value is not an integer or out of range", FG_EPROTO},
        {"BUSYKEY Target key name already exists.", FG_EPROTO},
        {"", FG_EPROTO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK_EQ(fg__redis_error_code(cases[i].s, strlen(cases[i].s)),
                 cases[i].code);
    CHECK_EQ(fg__redis_error_code(NULL, 0), FG_EPROTO);
}

static redisReply *intr(long long v)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static void test_script_reply(void)
{
    /* The scripts answer in exact microseconds; milliseconds are derived,
     * rounded up. */
    redisReply *e[4] = {intr(1), intr(9), intr(999001), intr(0)};
    redisReply arr = {REDIS_REPLY_ARRAY, 0, 0, NULL, 4, e};
    fg_decision d;
    memset(&d, 0, sizeof d);
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.limit, 10);
    CHECK_EQ(d.remaining, 9);
    CHECK_EQ(d.reset_us, 999001);
    CHECK_EQ(d.reset_ms, 1000);
    CHECK_EQ(d.retry_after_us, 0);
    CHECK_EQ(d.retry_after_ms, 0);
    e[0]->integer = 0;
    e[2]->integer = 1000000;
    e[3]->integer = 99001;
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.reset_us, 1000000);
    CHECK_EQ(d.reset_ms, 1000);
    CHECK_EQ(d.retry_after_us, 99001);
    CHECK_EQ(d.retry_after_ms, 100);
    e[3]->integer = 1;
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_OK);
    CHECK_EQ(d.retry_after_us, 1);
    CHECK_EQ(d.retry_after_ms, 1);
    e[3]->integer = 0;
    e[0]->integer = 2; /* not a boolean */
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_EPROTO);
    e[0]->integer = 0;
    e[2]->integer = -1;
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_EPROTO);
    e[2]->integer = 5;
    e[3]->type = REDIS_REPLY_STRING;
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_EPROTO);
    e[3]->type = REDIS_REPLY_INTEGER;
    arr.elements = 3;
    CHECK_EQ(fg__redis_script_reply(&arr, 10, &d), FG_EPROTO);
    char msg[] = "NOSCRIPT No matching script.";
    redisReply er = {REDIS_REPLY_ERROR, 0, sizeof msg - 1, msg, 0, NULL};
    CHECK_EQ(fg__redis_script_reply(&er, 10, &d), FG__REDIS_NOSCRIPT);
    CHECK_EQ(fg__redis_script_reply(NULL, 10, &d), FG_EBACKEND);
    redisReply nil = {REDIS_REPLY_NIL, 0, 0, NULL, 0, NULL};
    CHECK_EQ(fg__redis_script_reply(&nil, 10, &d), FG_EPROTO);
    for (int i = 0; i < 4; i++)
        free(e[i]);
}

/* The Lua twins hold time as whole us since 1970 plus a fraction, so no
 * rate needs refusing for Redis: the limits of the library are the only
 * ones. A token bucket is refused only when it takes more than 35 years to
 * refill, on every store. */
static void test_exact_range(void)
{
    char err[300];
    fg_limit l;
    fg__algo_params p;
    static const char *rates[] = {"13/h",    "17/min", "999/min",
                                  "123/s",   "1/ms",   "9007199254740992/ms",
                                  "1/365day"};
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
        for (int a = 0; a < 3; a++) {
            CHECK_EQ(fg_limit_parse(rates[i], &l), FG_OK);
            l.algorithm = (fg_algorithm)a;
            CHECK_EQ(fg__algo_params_init(&l, &p, err, sizeof err), FG_OK);
        }
    }
    CHECK_EQ(fg_limit_parse("1/s", &l), FG_OK);
    l.burst = (uint64_t)1 << 40;
    err[0] = '\0';
    CHECK_EQ(fg__algo_params_init(&l, &p, err, sizeof err), FG_ERANGE);
    CHECK(strstr(err, "35 years") != NULL);
}

/* INCRBY's count, minus the cost, is the window's count before the
 * request: the decision must be the C algorithm's for that state, and an
 * overshoot past the limit reads as a full window. */
static void test_window_decision(void)
{
    fg__algo_params p = params(FG_FIXED_WINDOW, 10, 1000000, 0);
    uint64_t now = 1700000000123456ull;
    unsigned seed = 7;
    for (int i = 0; i < 2000; i++) {
        seed = seed * 1103515245u + 12345u;
        uint64_t before = (seed >> 8) % 14, cost = 1 + (seed >> 20) % 10;
        uint64_t t = now + (seed >> 4) % 3000000;
        fg_decision a, b;
        fg__algo_state s = {t / p.period_us + 1, before > 10 ? 10 : before, 0};
        uint64_t exp;
        fg__redis_window_decision(&p, t, before, cost, &a);
        fg__algo_check(&p, &s, t, cost, &b, &exp);
        CHECK_EQ(a.allowed, before + cost <= 10);
        CHECK_EQ(a.allowed, b.allowed);
        CHECK_EQ(a.remaining, b.remaining);
        CHECK_EQ(a.reset_ms, b.reset_ms);
        CHECK_EQ(a.retry_after_ms, b.retry_after_ms);
        CHECK_EQ(a.reset_us, b.reset_us);
        CHECK_EQ(a.retry_after_us, b.retry_after_us);
    }
    fg_decision d;
    fg__redis_window_decision(&p, now, 25, 1, &d);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(d.retry_after_ms, 877); /* 876544 us left, rounded up */
    CHECK_EQ(d.retry_after_us, 876544);
    CHECK_EQ(d.reset_us, 876544);
    /* The key outlives its window by min(period, 1 s). */
    CHECK_EQ(fg__redis_window_ttl_ms(&p, now), 877 + 1000);
    fg__algo_params q = params(FG_FIXED_WINDOW, 10, 50000, 0);
    CHECK_EQ(fg__redis_window_ttl_ms(&q, 1000), 49 + 50);
}

/* The formatter writes what hiredis would, and refuses what does not fit. */
static void test_format(void)
{
    const char *argv[4] = {"EVALSHA", "a\r\n\0b", "", "123"};
    size_t len[4] = {7, 5, 0, 3};
    char buf[128], *ref = NULL;
    int rn = redisFormatCommandArgv(&ref, 4, argv, len);
    size_t n = fg__redis_format(buf, sizeof buf, 4, argv, len);
    CHECK_EQ(n, rn);
    CHECK(ref && memcmp(buf, ref, n) == 0);
    for (size_t cap = 0; cap < (size_t)rn + 26; cap++) {
        size_t m = fg__redis_format(buf, cap, 4, argv, len);
        CHECK(m == 0 || (m == n && cap >= n));
    }
    redisFreeCommand(ref);
    CHECK_EQ(fg__redis_format(buf, sizeof buf, 0, argv, len), 4);
    CHECK(memcmp(buf, "*0\r\n", 4) == 0);
}

int main(void)
{
    test_format();
    test_keys();
    test_errors();
    test_script_reply();
    test_exact_range();
    test_window_decision();
    return TEST_DONE();
}
