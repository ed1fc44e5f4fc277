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
        {"ERR Protocol error: unauthenticated multibulk length", FG_EAUTH},
        {"WRONGPASS invalid username-password pair", FG_EAUTH},
        {"ERR AUTH <password> called without any password configured",
         FG_EAUTH},
        {"ERR floodgate: clock outside the exact range", FG_ERANGE},
        {"ERR DB index is out of range", FG_EINVAL},
        {"MASTERDOWN Link with MASTER is down", FG_EBACKEND},
        {"MISCONF Redis is configured to save RDB snapshots, but it's "
         "currently unable to persist to disk.",
         FG_EBACKEND},
        {"ERR max number of clients reached", FG_EBACKEND},
        /* Redis 7's words for them inside a script (Cluster). */
        {"ERR Script attempted to execute a command while the cluster is "
         "down script: 2b607d3e, on @user_script:1.",
         FG_EBACKEND},
        {"ERR Script attempted to access a non local key in a cluster node "
         "script: 2b607d3e, on @user_script:1.",
         FG_EBACKEND},
        {"ERR value is not an integer or out of range", FG_ERANGE},
        {"WRONGTYPE Operation against a key holding the wrong kind of value",
         FG_ERANGE},
        {"ERR increment or decrement would overflow", FG_ERANGE},
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
        fg_decision a = {0}, b = {0};
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

/* A command as one line, arguments separated by spaces, for comparing. */
static const char *line(const fg__rcmd *c)
{
    static char buf[8192];
    size_t n = 0;
    for (int i = 0; i < c->argc; i++) {
        size_t l = c->len[i] > 60 ? 60 : c->len[i]; /* a script's start */
        if (i)
            buf[n++] = ' ';
        memcpy(buf + n, c->argv[i], l);
        n += l;
    }
    buf[n] = '\0';
    return buf;
}

static fg__rlim *rlim_for(const fg__algo_params *p)
{
    return fg__rlim_new(p, "fg:", 3, "api", 3);
}

static redisReply *errr(const char *msg)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ERROR;
    r->str = (char *)msg;
    r->len = strlen(msg);
    return r;
}

/* Fixed window: INCR and PEXPIRE NX together; a refused INCRBY whose count
 * before was below the limit is given back with DECRBY, one over the limit
 * is not; PEXPIRE's error is judged on its own. */
static void test_proto_fixed(void)
{
    fg__algo_params p = params(FG_FIXED_WINDOW, 10, 1000000, 0);
    fg__rlim *rl = rlim_for(&p);
    fg__redis_shas shas;
    fg__rcheck c;
    fg__rcmd k;
    fg_decision d;
    memset(&shas, 0, sizeof shas);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    CHECK_EQ(fg__rcheck_ncmds(&c), 2);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCR fg:api:{u1}:5");
    fg__rcheck_cmd(&c, 1, &shas, &k);
    CHECK_STR(line(&k), "PEXPIRE fg:api:{u1}:5 1500 NX");
    redisReply *r = intr(3);
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 7);
    /* INCRBY is answered with an integer: a nil or a string is not Redis's
     * answer, and admits nothing. */
    redisReply nil = {REDIS_REPLY_NIL, 0, 0, NULL, 0, NULL};
    char zero[] = "0";
    redisReply str = {REDIS_REPLY_STRING, 0, 1, zero, 0, NULL};
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, &nil, &d), FG_EPROTO);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, &str, &d), FG_EPROTO);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    /* Cost 3 on a count of 9 before: refused, and given back. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 3, 0, 5500000), FG_OK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u1}:5 3");
    r->integer = 12;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg__rcheck_ncmds(&c), 1);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "DECRBY fg:api:{u1}:5 3");
    /* A window already full: given back too, so the count never grows
     * past the limit and what is in flight. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    r->integer = 11;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    CHECK_EQ(d.allowed, 0);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "DECRBY fg:api:{u1}:5 1");
    /* The last unit fits. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 2, 0, 5500000), FG_OK);
    r->integer = 10;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
    /* A count below this check's units: the key held less than zero (a
     * give-back that came after the key was deleted). Decided on an empty
     * window, and the count lifted to the check's units. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    r->integer = -3;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 9);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u1}:5 4");
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 3, 0, 5500000), FG_OK);
    r->integer = 1;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 7);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u1}:5 2");
    /* A count far below zero: lifted by INT64_MAX at most. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    r->integer = -(1ll << 60);
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u1}:5 1152921504606846977");
    r->integer = INT64_MIN;
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 1, 0, 5500000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG__RSTEP_GIVEBACK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u1}:5 9223372036854775807");
    /* A count of exactly the units is no lift. */
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u1", 2, 3, 0, 5500000), FG_OK);
    r->integer = 3;
    CHECK_EQ(fg__rcheck_reply(&c, r, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    redisReply *e = errr("OOM command not allowed");
    CHECK_EQ(fg__rcheck_reply(&c, e, &d), FG_EOOM);
    redisReply *nx = errr("ERR syntax error");
    CHECK_EQ(fg__rcheck_aside_reply(nx), FG_EPROTO);
    CHECK_EQ(fg__rcheck_aside_reply(r), FG_OK);
    char big[FG_MAX_KEY + 1];
    memset(big, 'k', sizeof big);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, big, sizeof big, 1, 0, 1), FG_EKEY);
    free(r);
    free(e);
    free(nx);
    free(rl);
}

/* naive_get_set: GET, then (when allowed) SET count + cost with the
 * window's expiry; a refusal writes nothing. */
static void test_proto_naive(void)
{
    fg__algo_params p = params(FG_NAIVE_GET_SET, 10, 1000000, 0);
    fg__rlim *rl = rlim_for(&p);
    fg__redis_shas shas;
    fg__rcheck c;
    fg__rcmd k;
    fg_decision d;
    memset(&shas, 0, sizeof shas);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 2, 0, 7250000), FG_OK);
    CHECK_EQ(fg__rcheck_ncmds(&c), 1);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "GET fg:api:{u}:7");
    char four[] = "4";
    redisReply got = {REDIS_REPLY_STRING, 0, 1, four, 0, NULL};
    CHECK_EQ(fg__rcheck_reply(&c, &got, &d), FG__RSTEP_AGAIN);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "SET fg:api:{u}:7 6 PX 1750");
    fg_decision u = {0};
    CHECK_EQ(fg__rcheck_unsent(&c, &u), FG_OK);
    CHECK_EQ(u.allowed, 1);
    char ok[] = "OK";
    redisReply st = {REDIS_REPLY_STATUS, 0, 2, ok, 0, NULL};
    memset(&d, 0, sizeof d);
    CHECK_EQ(fg__rcheck_reply(&c, &st, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 4);
    redisReply *ro = errr("READONLY You can't write against a replica.");
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 2, 0, 7250000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, &got, &d), FG__RSTEP_AGAIN);
    CHECK_EQ(fg__rcheck_reply(&c, ro, &d), FG_EREADONLY);
    /* Refused after the GET: no SET. */
    char nine[] = "9";
    redisReply full = {REDIS_REPLY_STRING, 0, 1, nine, 0, NULL};
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 2, 0, 7250000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, &full, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    char bad[] = "x1";
    redisReply junk = {REDIS_REPLY_STRING, 0, 2, bad, 0, NULL};
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 2, 0, 7250000), FG_OK);
    CHECK_EQ(fg__rcheck_reply(&c, &junk, &d), FG_EPROTO);
    free(ro);
    free(rl);
}

/* Scripts: EVALSHA once the SHA is known, EVAL before; NOSCRIPT sends the
 * script again whole, once. */
static void test_proto_script(void)
{
    fg__algo_params p = params(FG_SLIDING_WINDOW, 10, 1000000, 0);
    fg__rlim *rl = rlim_for(&p);
    fg__redis_shas shas;
    fg__rcheck c;
    fg__rcmd k;
    fg_decision d;
    memset(&shas, 0, sizeof shas);
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 1, 0, 0), FG_OK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK(strncmp(line(&k), "EVAL local fmod", 15) == 0);
    char sha[] = "0123456789abcdef0123456789abcdef01234567";
    redisReply sr = {REDIS_REPLY_STRING, 0, 40, sha, 0, NULL};
    CHECK_EQ(fg__redis_sha_learn(&shas, FG__LUA_SLIDING, &sr), 1);
    redisReply nil = {REDIS_REPLY_NIL, 0, 0, NULL, 0, NULL};
    CHECK_EQ(fg__redis_sha_learn(&shas, FG__LUA_TOKEN, &nil), 0);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "EVALSHA 0123456789abcdef0123456789abcdef01234567 1 "
                        "fg:api:{u}: 1000000 10 1 ");
    redisReply *ns = errr("NOSCRIPT No matching script.");
    CHECK_EQ(fg__rcheck_reply(&c, ns, &d), FG__RSTEP_AGAIN);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK(strncmp(line(&k), "EVAL local fmod", 15) == 0);
    CHECK_EQ(fg__rcheck_unsent(&c, &d), FG_EPROTO);
    CHECK_EQ(fg__rcheck_reply(&c, ns, &d), FG_EPROTO);
    redisReply *e[4] = {intr(1), intr(9), intr(2000000), intr(0)};
    redisReply arr = {REDIS_REPLY_ARRAY, 0, 0, NULL, 4, e};
    CHECK_EQ(fg__rcheck_init(&c, &p, rl, "u", 1, 1, 0, 42), FG_OK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK_STR(line(&k), "EVALSHA 0123456789abcdef0123456789abcdef01234567 1 "
                        "fg:api:{u}: 1000000 10 1 42");
    /* fg_add_at: the cost negated and the units' age; a check has none. */
    fg__rcheck a;
    CHECK_EQ(fg__rcheck_init(&a, &p, rl, "u", 1, 3 | FG__COST_ADD, 250000, 42),
             FG_OK);
    fg__rcheck_cmd(&a, 0, &shas, &k);
    CHECK_STR(line(&k), "EVALSHA 0123456789abcdef0123456789abcdef01234567 1 "
                        "fg:api:{u}: 1000000 10 -3 42 250000");
    CHECK_EQ(fg__rcheck_init(&a, &p, rl, "u", 1, 3, 250000, 42), FG_OK);
    fg__rcheck_cmd(&a, 0, &shas, &k);
    CHECK_STR(line(&k), "EVALSHA 0123456789abcdef0123456789abcdef01234567 1 "
                        "fg:api:{u}: 1000000 10 3 42");
    /* A fixed window's units spent in an earlier window: a read. */
    fg__algo_params fw = params(FG_FIXED_WINDOW, 10, 1000000, 0);
    fg__rlim *fl = rlim_for(&fw);
    CHECK_EQ(
        fg__rcheck_init(&a, &fw, fl, "u", 1, 2 | FG__COST_ADD, 200000, 7250000),
        FG_OK);
    fg__rcheck_cmd(&a, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u}:7 2");
    CHECK_EQ(
        fg__rcheck_init(&a, &fw, fl, "u", 1, 2 | FG__COST_ADD, 300000, 7250000),
        FG_OK);
    fg__rcheck_cmd(&a, 0, &shas, &k);
    CHECK_STR(line(&k), "INCRBY fg:api:{u}:7 0");
    free(fl);
    CHECK_EQ(fg__rcheck_reply(&c, ns, &d), FG__RSTEP_AGAIN);
    CHECK_EQ(fg__rcheck_reply(&c, &arr, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.limit, 10);
    CHECK_EQ(d.remaining, 9);
    /* A token bucket's limit in the decision is its burst. */
    fg__algo_params t = params(FG_TOKEN_BUCKET, 10, 1000000, 20);
    fg__rlim *tl = rlim_for(&t);
    CHECK_EQ(fg__rcheck_init(&c, &t, tl, "u", 1, 1, 0, 0), FG_OK);
    fg__rcheck_cmd(&c, 0, &shas, &k);
    CHECK(strncmp(line(&k), "EVAL local fmod", 15) == 0);
    CHECK_EQ(k.argc, 12);
    /* Its key holds its depth: 20 units at 10/s, 2 s. */
    CHECK(k.len[3] == 18 && memcmp(k.argv[3], "fg:api:2000000:{u}", 18) == 0);
    CHECK_EQ(fg__rcheck_reply(&c, &arr, &d), FG_OK);
    CHECK_EQ(d.limit, 20);
    for (int i = 0; i < 4; i++)
        free(e[i]);
    free(ns);
    free(rl);
    free(tl);
}

/* Batches: the bytes of one EVALSHA for two checks, within the bound, and
 * the reply's handling (NOSCRIPT once, then a protocol error). */
static void test_proto_batch(void)
{
    fg__algo_params t = params(FG_TOKEN_BUCKET, 1000000, 1000000, 0);
    fg__rlim *tl = rlim_for(&t);
    fg__rcheck a, b;
    const fg__rcheck *cs[2] = {&a, &b};
    char buf[16384];
    const char sha[] = "0123456789abcdef0123456789abcdef01234567";
    CHECK_EQ(fg__rcheck_init(&a, &t, tl, "x", 1, 1, 0, 0), FG_OK);
    CHECK_EQ(fg__rcheck_init(&b, &t, tl, "yy", 2, 3, 0, 77), FG_OK);
    size_t need = fg__rbatch_need(cs, 2, sha);
    size_t n = fg__rbatch_format(buf, cs, 2, sha, 0);
    CHECK(n > 0 && n <= need);
    const char *argv[21] = {"EVALSHA", sha, "2", "fg:api:1000000:{x}",
                            "fg:api:1000000:{yy}"};
    size_t len[21] = {7, 40, 1, 18, 19};
    int argc = 5;
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < tl->nstatic; j++) {
            argv[argc] = tl->stat[j];
            len[argc++] = tl->statlen[j];
        }
        argv[argc] = i ? "3" : "1";
        len[argc++] = 1;
        argv[argc] = i ? "77" : "";
        len[argc++] = i ? 2 : 0;
    }
    char *ref = NULL;
    int rn = redisFormatCommandArgv(&ref, argc, argv, len);
    CHECK_EQ(n, rn);
    CHECK(ref && memcmp(buf, ref, n) == 0);
    redisFreeCommand(ref);
    /* Redis Cluster: no declared key; the count and the keys lead ARGV. */
    n = fg__rbatch_format(buf, cs, 2, sha, 1);
    CHECK(n > 0 && n <= need);
    const char *cargv[22] = {"EVALSHA", sha, "0", "2"};
    size_t clen[22] = {7, 40, 1, 1};
    memcpy(cargv + 4, argv + 3, 18 * sizeof(argv[0]));
    memcpy(clen + 4, len + 3, 18 * sizeof(len[0]));
    rn = redisFormatCommandArgv(&ref, 22, cargv, clen);
    CHECK_EQ(n, rn);
    CHECK(ref && memcmp(buf, ref, n) == 0);
    redisFreeCommand(ref);
    n = fg__rbatch_format(buf, cs, 2, NULL, 0);
    CHECK(n <= fg__rbatch_need(cs, 2, NULL));
    CHECK(memcmp(buf, "*21\r\n$4\r\nEVAL\r\n", 15) == 0);
    redisReply *ns = errr("NOSCRIPT No matching script.");
    CHECK_EQ(fg__rbatch_reply(ns, 2, 0), FG__RSTEP_AGAIN);
    CHECK_EQ(fg__rbatch_reply(ns, 2, 1), FG_EPROTO);
    redisReply *busy = errr("BUSY Redis is busy running a script.");
    CHECK_EQ(fg__rbatch_reply(busy, 2, 0), FG_EBUSY);
    redisReply *e[8];
    for (int i = 0; i < 8; i++)
        e[i] = intr(i % 4 == 0 ? 1 : 5);
    redisReply arr = {REDIS_REPLY_ARRAY, 0, 0, NULL, 8, e};
    CHECK_EQ(fg__rbatch_reply(&arr, 2, 0), FG_OK);
    CHECK_EQ(fg__rbatch_reply(&arr, 3, 0), FG_EPROTO);
    fg_decision d;
    CHECK_EQ(fg__rbatch_value(&arr, 1, &b, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 5);
    CHECK_EQ(fg__rbatch_value(&arr, 2, &b, &d), FG_EPROTO);
    for (int i = 0; i < 8; i++)
        free(e[i]);
    free(ns);
    free(busy);
    free(tl);
}

/* Refunds: the script's arguments per algorithm, to the window or bucket
 * debt that took the units; NOSCRIPT once. */
static void test_proto_refund(void)
{
    fg__algo_params f = params(FG_FIXED_WINDOW, 10, 1000000, 0);
    fg__algo_params n = params(FG_NAIVE_GET_SET, 10, 1000000, 0);
    fg__rlim *fl = rlim_for(&f);
    fg__redis_shas shas;
    fg__rrefund rf;
    memset(&shas, 0, sizeof shas);
    fg__taken now = {0, FG__HOLD_ANY};
    CHECK_EQ(fg__rrefund_init(&rf, &n, fl, "u", 1, 1, 1, &now), FG_ENOTSUP);
    CHECK_EQ(fg__rrefund_init(&rf, &f, fl, "u", 1, 2, 3100000, &now), FG_OK);
    char sha[] = "89abcdef0123456789abcdef0123456789abcdef";
    redisReply sr = {REDIS_REPLY_STRING, 0, 40, sha, 0, NULL};
    fg__redis_sha_learn(&shas, FG__LUA_REFUND, &sr);
    fg__rrefund_cmd(&rf, &shas);
    CHECK_STR(line(&rf.k), "EVALSHA 89abcdef0123456789abcdef0123456789abcdef "
                           "1 fg:api:{u}:3 f 2 3100000");
    redisReply *ns = errr("NOSCRIPT No matching script.");
    CHECK_EQ(fg__rrefund_reply(&rf, ns), FG__RSTEP_AGAIN);
    fg__rrefund_cmd(&rf, &shas);
    CHECK(strncmp(line(&rf.k), "EVAL local fmod", 15) == 0);
    CHECK_EQ(fg__rrefund_reply(&rf, ns), FG_EPROTO);
    redisReply *one = intr(1);
    CHECK_EQ(fg__rrefund_reply(&rf, one), FG_OK);
    char ok[] = "OK";
    redisReply st = {REDIS_REPLY_STATUS, 0, 2, ok, 0, NULL};
    CHECK_EQ(fg__rrefund_reply(&rf, &st), FG_EPROTO);
    /* Taken 200 ms ago: window 2's key, not the current window 3's. */
    fg__taken aged = {200000, FG__HOLD_ANY};
    CHECK_EQ(fg__rrefund_init(&rf, &f, fl, "u", 1, 2, 3100000, &aged), FG_OK);
    fg__rrefund_cmd(&rf, &shas);
    CHECK_STR(line(&rf.k), "EVALSHA 89abcdef0123456789abcdef0123456789abcdef "
                           "1 fg:api:{u}:2 f 2 3100000");
    fg__algo_params sw = params(FG_SLIDING_WINDOW, 10, 1000000, 0);
    fg__rlim *sl = rlim_for(&sw);
    CHECK_EQ(fg__rrefund_init(&rf, &sw, sl, "u", 1, 3, 0, &aged), FG_OK);
    fg__rrefund_cmd(&rf, &shas);
    CHECK_STR(line(&rf.k), "EVALSHA 89abcdef0123456789abcdef0123456789abcdef "
                           "1 fg:api:{u}: s 3  1000000 200000");
    fg__algo_params t = params(FG_TOKEN_BUCKET, 10, 1000000, 0);
    fg__rlim *tl = rlim_for(&t);
    CHECK_EQ(fg__rrefund_init(&rf, &t, tl, "u", 1, 1, 0, &now), FG_OK);
    fg__rrefund_cmd(&rf, &shas);
    CHECK_EQ(rf.k.argc, 11);
    CHECK(rf.k.len[3] == 18 &&
          memcmp(rf.k.argv[3], "fg:api:1000000:{u}", 18) == 0);
    CHECK(rf.k.argv[4][0] == 't' && rf.k.len[6] == 0 && rf.k.len[10] == 0);
    fg__taken held = {200000, 150000};
    CHECK_EQ(fg__rrefund_init(&rf, &t, tl, "u", 1, 1, 0, &held), FG_OK);
    fg__rrefund_cmd(&rf, &shas);
    CHECK_EQ(rf.k.argc, 11);
    CHECK(rf.k.len[10] == 6 && memcmp(rf.k.argv[10], "150000", 6) == 0);
    free(sl);
    free(ns);
    free(one);
    free(fl);
    free(tl);
}

int main(void)
{
    test_format();
    test_keys();
    test_errors();
    test_script_reply();
    test_exact_range();
    test_window_decision();
    test_proto_fixed();
    test_proto_naive();
    test_proto_script();
    test_proto_batch();
    test_proto_refund();
    return TEST_DONE();
}
