/* redis_admin.c -- fg_peek and fg_reset on the Redis store against a real
 * redis-server, for tests/integration/redis_admin.sh. Each mode prints
 * what it saw and ends with "N passed, N failed".
 *
 *   redis_admin vectors URL   peeks and checks on Redis and on a memory
 *                             store, one clock: the same figures, and a
 *                             peek takes nothing (the checks after it
 *                             agree); every algorithm, blocking and async
 *   redis_admin time URL      Redis TIME limits: peeks after k checks
 *   redis_admin reset URL     every window's key deleted, the key whole
 *   redis_admin readonly URL  peeks on a read-only replica (they write
 *                             nothing); resets fail read-only there */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "floodgate.h"
#include "redis_store.h"
#include "redis_url.h"
#include "clock.h"

static uint64_t fake_now;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static uint32_t rnd_state = 4242;

static uint32_t rnd(void)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return rnd_state >> 8;
}

static fg_limiter *limiter(fg_store *st, const char *name, const char *rate,
                           fg_algorithm a, uint64_t burst, int client)
{
    fg_limit lim;
    char err[200];
    CHECK_EQ(fg_limit_parse(rate, &lim), FG_OK);
    snprintf(lim.name, sizeof(lim.name), "%s", name);
    lim.algorithm = a;
    lim.burst = burst;
    lim.clock_client = client;
    lim.timeout_ms = 2000;
    fg_limiter *l = fg_limiter_new(st, &lim, err, sizeof(err));
    if (!l)
        fprintf(stderr, "limiter: %s\n", err);
    CHECK(l != NULL);
    return l;
}

static int same(const fg_decision *a, const fg_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining && a->reset_us == b->reset_us &&
           a->retry_after_us == b->retry_after_us && a->shadowed == b->shadowed;
}

static void show(const char *what, const fg_decision *d)
{
    fprintf(stderr,
            "  %s: allowed=%d limit=%llu remaining=%llu reset_us=%llu "
            "retry_after_us=%llu\n",
            what, d->allowed, (unsigned long long)d->limit,
            (unsigned long long)d->remaining, (unsigned long long)d->reset_us,
            (unsigned long long)d->retry_after_us);
}

/* ---- vectors ---------------------------------------------------------- */

static void vectors_of(fg_store *rs, fg_store *ms, fg_algorithm a,
                       const char *rate, uint64_t burst, const char *tag)
{
    static int runs;
    char name[48];
    snprintf(name, sizeof(name), "v%d-%s-%ld", ++runs, tag, (long)getpid());
    fg_limiter *rl = limiter(rs, name, rate, a, burst, 1);
    fg_limiter *ml = limiter(ms, name, rate, a, burst, 1);
    if (!rl || !ml)
        return;
    const fg_limit *lim = fg_limiter_limit(rl);
    int differ = 0;
    /* The fake clock never runs slower than the real one: Redis expires
     * keys in real time, and must not drop a state the memory store still
     * counts. */
    uint64_t extra = 0;
    for (int i = 0; i < 80 && differ < 3; i++) {
        fake_now = fg__wall_us() + extra;
        fg_decision pr, pm, cr, cm;
        int rc1 = fg_peek(rl, "k", 1, &pr), rc2 = fg_peek(ml, "k", 1, &pm);
        CHECK_EQ(rc1, FG_OK);
        CHECK_EQ(rc2, FG_OK);
        CHECK(same(&pr, &pm));
        if (!same(&pr, &pm)) {
            fprintf(stderr, "%s %s step %d: peeks differ\n",
                    fg_algorithm_name(a), rate, i);
            show("redis", &pr);
            show("memory", &pm);
            differ++;
        }
        uint64_t cap = a == FG_TOKEN_BUCKET && burst ? burst : lim->limit;
        uint64_t cost = 1 + rnd() % (cap < 3 ? cap : 3);
        rc1 = fg_check(rl, "k", 1, cost, &cr);
        rc2 = fg_check(ml, "k", 1, cost, &cm);
        CHECK_EQ(rc1, FG_OK);
        CHECK_EQ(rc2, FG_OK);
        CHECK(same(&cr, &cm));
        if (!same(&cr, &cm)) {
            fprintf(stderr, "%s %s step %d: checks differ\n",
                    fg_algorithm_name(a), rate, i);
            show("redis", &cr);
            show("memory", &cm);
            differ++;
        }
        extra += rnd() % 4 == 0 ? rnd() % (2 * lim->period_us)
                                : rnd() % (lim->period_us / 8);
    }
    printf("vectors %s %s (%s): %s\n", fg_algorithm_name(a), rate, tag,
           differ ? "differ" : "same");
    fg_limiter_free(rl);
    fg_limiter_free(ml);
}

static void vectors(const char *url)
{
    char err[256];
    struct event_base *base = event_base_new();
    fg_store *stores[2] = {fg_store_open(url, err, sizeof(err)),
                           fg_store_open_async(url, base, err, sizeof(err))};
    fg_memory_options o = {.clock = fake_clock};
    fg_store *ms = fg_store_open_memory(&o, NULL, 0);
    CHECK(stores[0] && stores[1] && ms);
    if (!stores[0] || !stores[1] || !ms) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    for (int s = 0; s < 2; s++) {
        fg__store_redis_set_clock(stores[s], fake_clock, NULL);
        const char *tag = s ? "async" : "sync";
        for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++) {
            vectors_of(stores[s], ms, (fg_algorithm)a, "5/s", 0, tag);
            vectors_of(stores[s], ms, (fg_algorithm)a, "7/300ms", 0, tag);
        }
        vectors_of(stores[s], ms, FG_TOKEN_BUCKET, "10/s", 4, tag);
        vectors_of(stores[s], ms, FG_TOKEN_BUCKET, "3/7s", 9, tag);
    }
    fg_store_close(stores[0]);
    fg_store_close(stores[1]);
    fg_store_close(ms);
    event_base_free(base);
}

/* ---- Redis TIME -------------------------------------------------------- */

static void redis_time(const char *url)
{
    char err[256], name[48];
    fg_store *st = fg_store_open(url, err, sizeof(err));
    CHECK(st != NULL);
    if (!st)
        return;
    fg_algorithm algos[2] = {FG_SLIDING_WINDOW, FG_TOKEN_BUCKET};
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof(name), "t%d-%ld", i, (long)getpid());
        fg_limiter *l = limiter(st, name, "3/h", algos[i], 0, 0);
        fg_decision d;
        CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
        CHECK_EQ(d.remaining, 3);
        CHECK_EQ(d.reset_us, 0);
        for (int k = 1; k <= 4; k++) {
            fg_check(l, "k", 1, 1, &d);
            CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
            uint64_t left = k < 3 ? 3 - (uint64_t)k : 0;
            CHECK_EQ(d.remaining, left);
            CHECK_EQ(d.allowed, left > 0);
            /* Whole again within the period (sliding: two windows). */
            CHECK(d.reset_us > 0 && d.reset_us <= 2 * 3600 * 1000000ull);
            CHECK(d.allowed ? d.retry_after_us == 0 : d.retry_after_us > 0);
        }
        printf("redis time %s: remaining=%llu retry_after_ms=%llu\n",
               fg_algorithm_name(algos[i]), (unsigned long long)d.remaining,
               (unsigned long long)d.retry_after_ms);
        fg_limiter_free(l);
    }
    fg_store_close(st);
}

/* ---- reset ------------------------------------------------------------- */

/* The keys of the store's prefix and 'name'. */
static long long count_keys(redisContext *c, const char *prefix,
                            const char *name)
{
    redisReply *r = redisCommand(c, "KEYS %s%s:*", prefix, name);
    long long n =
        r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    return n;
}

static void reset(const char *url)
{
    fg__redis_url u;
    char err[256];
    if (fg__redis_url_parse(url, &u, err, sizeof(err)) != FG_OK) {
        CHECK(0);
        return;
    }
    redisContext *c = redisConnect(u.host, u.port);
    fg_store *st = fg_store_open(url, err, sizeof(err));
    CHECK(c && !c->err && st);
    if (!c || c->err || !st)
        return;
    fg__store_redis_set_clock(st, fake_clock, NULL);
    for (int client = 0; client < 2; client++) {
        for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++) {
            char name[48];
            snprintf(name, sizeof(name), "r%d%d-%ld", a, client,
                     (long)getpid());
            fg_limiter *l =
                limiter(st, name, "3/s", (fg_algorithm)a, 0, client);
            fg_decision d;
            /* Two windows hold units: the previous and the current (on
             * the caller's clock here; a sliding window on Redis TIME
             * makes its own). */
            fake_now = fg__wall_us();
            for (int i = 0; i < 3; i++)
                fg_check(l, "k", 1, 1, &d);
            fake_now += 1000000;
            for (int i = 0; i < 4; i++)
                fg_check(l, "k", 1, 1, &d);
            fg_check(l, "other", 5, 1, &d);
            CHECK_EQ(d.allowed, 1);
            CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
            CHECK_EQ(d.remaining, 0);
            long long before = count_keys(c, u.prefix, name);
            CHECK_EQ(fg_reset(l, "k", 1), FG_OK);
            long long after = count_keys(c, u.prefix, name);
            /* What is left is the other key's. */
            CHECK(before >= 2);
            CHECK_EQ(after, 1);
            CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
            CHECK_EQ(d.remaining, 3);
            CHECK_EQ(d.reset_us, 0);
            CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_OK);
            CHECK_EQ(d.allowed, 1);
            CHECK_EQ(d.remaining, 2);
            CHECK_EQ(fg_peek(l, "other", 5, &d), FG_OK);
            CHECK_EQ(d.remaining, 2);
            printf("reset %s%s: keys %lld -> %lld\n",
                   fg_algorithm_name((fg_algorithm)a),
                   client ? " clock=client" : "", before, after);
            CHECK_EQ(fg_reset(l, "never", 5), FG_OK);
            fg_limiter_free(l);
        }
    }
    fg_store_close(st);
    redisFree(c);
    fg__redis_url_free(&u);
}

/* ---- a read-only replica ------------------------------------------------ */

static void readonly(const char *url)
{
    char err[256];
    fg_store *st = fg_store_open(url, err, sizeof(err));
    CHECK(st != NULL);
    if (!st) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    for (int a = FG_FIXED_WINDOW; a <= FG_NAIVE_GET_SET; a++) {
        for (int client = 0; client < 2; client++) {
            fg_limiter *l =
                limiter(st, "ro", "3/s", (fg_algorithm)a, 0, client);
            fg_decision d;
            int rc = fg_peek(l, "k", 1, &d);
            CHECK_EQ(rc, FG_OK);
            CHECK_EQ(d.remaining, 3);
            if (rc != FG_OK)
                fprintf(stderr, "peek %s on a replica: %s (%s)\n",
                        fg_algorithm_name((fg_algorithm)a), fg_strerror(rc),
                        fg_store_last_error(st));
            CHECK_EQ(fg_reset(l, "k", 1), FG_EREADONLY);
            CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_EREADONLY);
            fg_limiter_free(l);
        }
    }
    printf("readonly: peeks answered, resets refused\n");
    fg_store_close(st);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: redis_admin MODE URL\n");
        return 2;
    }
    const char *mode = argv[1], *url = argv[2];
    if (!strcmp(mode, "vectors"))
        vectors(url);
    else if (!strcmp(mode, "time"))
        redis_time(url);
    else if (!strcmp(mode, "reset"))
        reset(url);
    else if (!strcmp(mode, "readonly"))
        readonly(url);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return TEST_DONE();
}
