/* test_redis_admin.c -- the Redis store's peek and reset protocol
 * (src/redis_admin.c) with hand-made replies, no socket: the commands each
 * algorithm sends, the keys a reset deletes, how the replies become the
 * decision fg__algo_peek makes from the same state, and errors. */
#include <stdlib.h>

#include "../harness.h"
#include "redis_admin.h"

static redisReply *intr(long long v)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static redisReply *str(const char *s)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_STRING;
    r->str = (char *)s;
    r->len = strlen(s);
    return r;
}

static redisReply *err(const char *s)
{
    redisReply *r = str(s);
    r->type = REDIS_REPLY_ERROR;
    return r;
}

static redisReply *nil(void)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_NIL;
    return r;
}

static redisReply *arr(size_t n, redisReply **e)
{
    redisReply *r = calloc(1, sizeof *r);
    r->type = REDIS_REPLY_ARRAY;
    r->elements = n;
    r->element = e;
    return r;
}

static void release(redisReply *r)
{
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++)
            release(r->element[i]);
        free(r->element);
    }
    free(r);
}

static fg__algo_params params(fg_algorithm a, const char *rate)
{
    fg_limit lim;
    fg__algo_params p;
    fg_limit_parse(rate, &lim);
    lim.algorithm = a;
    fg__algo_params_init(&lim, &p, NULL, 0);
    return p;
}

/* Argument 'i' of 'c' is 's'. */
static int arg_is(const fg__rcmd *c, int i, const char *s)
{
    return i < c->argc && c->len[i] == strlen(s) &&
           memcmp(c->argv[i], s, c->len[i]) == 0;
}

#define NOW 1700000000123456ull /* in window 1700000000 of a 1 s period */

static void test_fixed_peek(void)
{
    fg__algo_params p = params(FG_FIXED_WINDOW, "10/s");
    fg__rlim *rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    fg__radmin a;
    fg__rcmd c;
    fg_decision d, want;
    CHECK_EQ(fg__rpeek_init(&a, &p, rl, "u1", 2, NOW), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 2);
    CHECK(arg_is(&c, 0, "GET"));
    CHECK(arg_is(&c, 1, "fg:api:{u1}:1700000000"));
    /* 7 counted: 3 left; the same as the C algorithm on that state. */
    redisReply *r = str("7");
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    fg__algo_state s = {1700000000 + 1, 7, 0};
    CHECK_EQ(fg__algo_peek(&p, &s, NOW, &want), FG_OK);
    CHECK_EQ(d.remaining, 3);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_us, want.reset_us);
    CHECK_EQ(d.reset_us, 1000000 - 123456);
    release(r);
    /* A kept overshoot reads as a full window; nil as an empty one. */
    r = str("25");
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 1000000 - 123456);
    release(r);
    r = nil();
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    CHECK_EQ(d.remaining, 10);
    CHECK_EQ(d.reset_us, 0);
    release(r);
    /* Not a count: a protocol error; an error reply: its code. */
    r = str("x1");
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_EPROTO);
    release(r);
    r = err("LOADING Redis is loading the dataset in memory");
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_EBUSY);
    release(r);
    fg__free(rl);
}

static void test_script_peeks(void)
{
    /* Sliding window on Redis TIME: the script, the base key, '' for the
     * time, the period. */
    fg__algo_params p = params(FG_SLIDING_WINDOW, "10/s");
    fg__rlim *rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    fg__radmin a;
    fg__rcmd c;
    fg_decision d, want;
    CHECK_EQ(fg__rpeek_init(&a, &p, rl, "u1", 2, 0), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 6);
    CHECK(arg_is(&c, 0, "EVAL"));
    CHECK(arg_is(&c, 1, fg__redis_lua_peek));
    CHECK(strncmp(fg__redis_lua_peek, "#!lua flags=no-writes\n", 22) == 0);
    CHECK(arg_is(&c, 2, "1"));
    CHECK(arg_is(&c, 3, "fg:api:{u1}:"));
    CHECK(arg_is(&c, 4, ""));
    CHECK(arg_is(&c, 5, "1000000"));
    redisReply **e = calloc(3, sizeof *e);
    e[0] = intr((long long)NOW);
    e[1] = str("4");
    e[2] = str("6");
    redisReply *r = arr(3, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    fg__algo_state s = {1700000000 + 1, 4, 6};
    CHECK_EQ(fg__algo_peek(&p, &s, NOW, &want), FG_OK);
    CHECK_EQ(d.allowed, want.allowed);
    CHECK_EQ(d.remaining, want.remaining);
    CHECK_EQ(d.reset_us, want.reset_us);
    CHECK_EQ(d.retry_after_us, want.retry_after_us);
    release(r);
    /* Counts beyond the limit (fg_add's usage) weigh whole, as the
     * check's script weighs them: the wait is not early. */
    e = calloc(3, sizeof *e);
    e[0] = intr((long long)NOW);
    e[1] = str("15");
    e[2] = str("12");
    r = arr(3, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    fg__algo_state over = {1700000000 + 1, 15, 12};
    CHECK_EQ(fg__algo_peek(&p, &over, NOW, &want), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, want.retry_after_us);
    CHECK_EQ(d.reset_us, want.reset_us);
    release(r);
    /* A reply of the wrong shape. */
    e = calloc(2, sizeof *e);
    e[0] = intr((long long)NOW);
    e[1] = str("4");
    r = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_EPROTO);
    release(r);
    fg__free(rl);

    /* Token bucket, caller's clock: the key holds the bucket's depth (1 s)
     * and ends at the hash tag; the state in both stored formats. */
    p = params(FG_TOKEN_BUCKET, "10/s");
    rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    CHECK_EQ(fg__rpeek_init(&a, &p, rl, "u1", 2, NOW), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK(arg_is(&c, 3, "fg:api:1000000:{u1}"));
    CHECK(arg_is(&c, 4, "1700000000123456"));
    CHECK(arg_is(&c, 5, ""));
    /* TAT 250 ms ahead: 7 tokens of 10 fit (floor 7.5). */
    char tat[64];
    snprintf(tat, sizeof(tat), "%llu 0 %llu",
             (unsigned long long)(NOW + 250000),
             (unsigned long long)(p.depth_us + 1));
    e = calloc(2, sizeof *e);
    e[0] = intr((long long)NOW);
    e[1] = str(tat);
    r = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    CHECK_EQ(d.remaining, 7);
    CHECK_EQ(d.reset_us, 250000);
    CHECK_EQ(d.limit, 10);
    release(r);
    /* The earlier format: TAT in 1/scale us since FG__REDIS_EPOCH_S (the
     * scale of 10/s is 1). */
    e = calloc(2, sizeof *e);
    e[0] = intr((long long)FG__REDIS_EPOCH_S * 1000000 + 1000000000);
    e[1] = str("1000250000");
    r = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    CHECK_EQ(d.remaining, 7);
    CHECK_EQ(d.reset_us, 250000);
    release(r);
    /* Nil or junk: a bucket never seen. */
    e = calloc(2, sizeof *e);
    e[0] = intr((long long)NOW);
    e[1] = str("1 2");
    r = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, r, &d), FG_OK);
    CHECK_EQ(d.remaining, 10);
    CHECK_EQ(d.reset_us, 0);
    release(r);
    fg__free(rl);
}

static void test_reset(void)
{
    fg__radmin a;
    fg__rcmd c;
    /* Token bucket: its one key. */
    fg__algo_params p = params(FG_TOKEN_BUCKET, "10/s");
    fg__rlim *rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    CHECK_EQ(fg__rreset_init(&a, &p, rl, "u1", 2, 0), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 2);
    CHECK(arg_is(&c, 0, "DEL"));
    CHECK(arg_is(&c, 1, "fg:api:1000000:{u1}"));
    redisReply *one = intr(1);
    CHECK_EQ(fg__radmin_reply(&a, one, NULL), FG_OK);
    fg__free(rl);
    /* Fixed window: the windows either side of the caller's. */
    p = params(FG_FIXED_WINDOW, "10/s");
    rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    CHECK_EQ(fg__rreset_init(&a, &p, rl, "u1", 2, NOW), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 4);
    CHECK(arg_is(&c, 1, "fg:api:{u1}:1700000001"));
    CHECK(arg_is(&c, 2, "fg:api:{u1}:1700000000"));
    CHECK(arg_is(&c, 3, "fg:api:{u1}:1699999999"));
    CHECK_EQ(fg__radmin_reply(&a, one, NULL), FG_OK);
    fg__free(rl);
    /* Sliding window on Redis TIME: TIME first, then w - 2 .. w + 1. */
    p = params(FG_SLIDING_WINDOW, "10/s");
    rl = fg__rlim_new(&p, "fg:", 3, "api", 3);
    CHECK_EQ(fg__rreset_init(&a, &p, rl, "u1", 2, 0), FG_OK);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 1);
    CHECK(arg_is(&c, 0, "TIME"));
    redisReply **e = calloc(2, sizeof *e);
    e[0] = str("1700000000");
    e[1] = str("123456");
    redisReply *t = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, t, NULL), FG__RSTEP_AGAIN);
    fg__radmin_cmd(&a, &c);
    CHECK_EQ(c.argc, 5);
    CHECK(arg_is(&c, 0, "DEL"));
    CHECK(arg_is(&c, 1, "fg:api:{u1}:1700000001"));
    CHECK(arg_is(&c, 4, "fg:api:{u1}:1699999998"));
    CHECK_EQ(fg__radmin_reply(&a, one, NULL), FG_OK);
    release(t);
    /* A TIME reply out of shape. */
    CHECK_EQ(fg__rreset_init(&a, &p, rl, "u1", 2, 0), FG_OK);
    e = calloc(2, sizeof *e);
    e[0] = str("1700000000");
    e[1] = str("1234567");
    t = arr(2, e);
    CHECK_EQ(fg__radmin_reply(&a, t, NULL), FG_EPROTO);
    release(t);
    /* DEL on a replica. */
    CHECK_EQ(fg__rreset_init(&a, &p, rl, "u1", 2, NOW), FG_OK);
    redisReply *ro =
        err("READONLY You can't write against a read only replica.");
    CHECK_EQ(fg__radmin_reply(&a, ro, NULL), FG_EREADONLY);
    release(ro);
    release(one);
    /* A key too long. */
    static char big[FG_MAX_KEY + 1];
    CHECK_EQ(fg__rreset_init(&a, &p, rl, big, sizeof(big), NOW), FG_EKEY);
    CHECK_EQ(fg__rpeek_init(&a, &p, rl, big, sizeof(big), NOW), FG_EKEY);
    fg__free(rl);
}

int main(void)
{
    test_fixed_peek();
    test_script_peeks();
    test_reset();
    return TEST_DONE();
}
