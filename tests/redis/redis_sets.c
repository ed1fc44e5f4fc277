/* redis_sets.c -- a request's set of limits (fg_check_set,
 * fg_check_set_async) and the blocked-key cache against a real Redis, for
 * tests/integration/redis_sets.sh. Ends with "N passed, N failed".
 *
 *   redis_sets URL HOST PORT
 *
 * Blocking and async: the first refusal stops the set and the limits
 * before it are refunded in Redis; bad input refunds too. Async with a
 * cache: a key the store refused is then refused from the cache with no
 * Redis command; when the block ends, of many sets for that key submitted
 * at once one probes Redis and the others wait for its answer; exactly the
 * limit's units are allowed all the same. Last, with Redis shut down: a
 * limit decided by its local share is refunded in that share. */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "clock.h"
#include "floodgate.h"
#include "loop.h"

static redisContext *rc;

/* Redis commands run so far (INFO commandstats, every command). */
static long long redis_calls(void)
{
    redisReply *r = redisCommand(rc, "INFO commandstats");
    long long n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        for (const char *p = r->str; (p = strstr(p, "calls=")); p += 6)
            n += atoll(p + 6);
    }
    freeReplyObject(r);
    return n;
}

/* A limiter of 'rate' named 'name' and this process, with 'timeout_ms'
 * and 'on_failure'. */
static fg_limiter *limiter_of(fg_store *st, const char *name, const char *rate,
                              fg_algorithm a, uint32_t timeout_ms,
                              fg_on_failure on_failure)
{
    fg_limit l;
    char err[256];
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    l.algorithm = a;
    l.timeout_ms = timeout_ms;
    l.on_failure = on_failure;
    snprintf(l.name, sizeof l.name, "%s-%d", name, (int)getpid());
    fg_limiter *lim = fg_limiter_new(st, &l, err, sizeof err);
    if (!lim)
        fprintf(stderr, "limiter %s: %s\n", rate, err);
    CHECK(lim != NULL);
    return lim;
}

static fg_limiter *limiter(fg_store *st, const char *name, const char *rate,
                           fg_algorithm a)
{
    return limiter_of(st, name, rate, a, 1000, FG_FAIL_OPEN);
}

/* An asynchronous store on a new loop '*base'; NULL (checked) when it
 * cannot be opened. */
static fg_store *open_async(const char *url, struct event_base **base)
{
    char err[256];
    *base = new_base();
    fg_store *st = fg_store_open_async(url, *base, err, sizeof err);
    if (!st)
        fprintf(stderr, "%s: %s\n", url, err);
    CHECK(st != NULL);
    return st;
}

/* Units of 'l' left for 'key': a one-unit check given back. */
static long left(fg_limiter *l, const char *key)
{
    fg_decision d;
    if (fg_check(l, key, strlen(key), 1, &d) != FG_OK)
        return -1;
    if (!d.allowed)
        return 0;
    fg_refund(l, key, strlen(key), 1);
    return (long)d.remaining + 1;
}

static void blocking(const char *url)
{
    char err[256];
    fg_store *st = fg_store_open(url, err, sizeof err);
    CHECK(st != NULL);
    if (!st)
        return;
    fg_limiter *a = limiter(st, "sa", "5/h", FG_FIXED_WINDOW);
    fg_limiter *b = limiter(st, "sb", "2/h", FG_TOKEN_BUCKET);
    fg_set_item it[2] = {{a, "u", 1}, {b, "u", 1}};
    fg_set_result r;
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
        CHECK(r.d[r.decided].allowed);
        CHECK_EQ(r.d[0].source, FG_SOURCE_STORE);
    }
    CHECK_EQ(left(a, "u"), 3);
    /* b refuses: a's unit is given back in Redis. */
    CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
    CHECK_EQ(r.decided, 1);
    CHECK(!r.d[1].allowed);
    CHECK_EQ(r.asked, 3);
    CHECK_EQ(left(a, "u"), 3);
    /* Bad input at b: a refunded too. */
    fg_set_item w[2] = {{a, "w", 1}, {b, "w", 1}};
    CHECK_EQ(fg_check_set(w, 2, 3, &r), FG_OK);
    CHECK_EQ(r.error, FG_ECOST);
    CHECK_EQ(left(a, "w"), 5);
    printf("blocking: refusal and bad input refund the limits before them\n");
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(st);
}

struct done {
    int calls;
    fg_set_result r;
    uint64_t at_us; /* when it was called back */
};

static void on_set(fg_set_req *req)
{
    struct done *d = req->data;
    d->calls++;
    d->r = req->result;
    d->at_us = fg__mono_precise_us();
    pending--;
}

#define FLOOD 20

static void submit_set(struct event_base *base, fg_set_req *req,
                       struct done *dn, const fg_set_item *it, unsigned n,
                       uint64_t cost, int wait)
{
    memset(dn, 0, sizeof *dn);
    req->data = dn;
    pending++;
    CHECK_EQ(fg_check_set_async(req, it, n, cost, on_set), FG_OK);
    if (wait)
        drain(base);
}

static void async(const char *url)
{
    struct event_base *base;
    fg_store *st = open_async(url, &base);
    if (!st)
        return;
    fg_cache *cache = fg_cache_new(1024);
    fg_limiter *a = limiter(st, "aa", "5/h", FG_FIXED_WINDOW);
    /* 4 every 400 ms, a burst of 4: a block that ends soon. */
    fg_limiter *b = limiter(st, "ab", "4/400ms", FG_FIXED_WINDOW);
    fg_limiter_set_cache(a, cache);
    fg_limiter_set_cache(b, cache);
    static fg_set_req req[FLOOD];
    static struct done dn[FLOOD];
    fg_set_item it[2] = {{a, "k", 1}, {b, "k", 1}};

    /* Two sets of cost 2. */
    for (int i = 0; i < 2; i++) {
        submit_set(base, &req[i], &dn[i], it, 2, 2, 1);
        CHECK_EQ(dn[i].calls, 1);
    }
    /* Both allowed; the second leaves b nothing (4 of 4), which blocks
     * the key until b's next window. */
    CHECK(dn[0].r.d[dn[0].r.decided].allowed);
    CHECK(dn[1].r.d[dn[1].r.decided].allowed);
    CHECK_EQ(dn[1].r.d[1].remaining, 0);
    CHECK_EQ(fg_cache_count(cache), 1);

    /* Blocked: answered from the cache, with no Redis command. */
    long long before = redis_calls();
    int cached = 0;
    for (int i = 0; i < FLOOD; i++)
        submit_set(base, &req[i], &dn[i], it, 2, 1, 0);
    drain(base);
    for (int i = 0; i < FLOOD; i++)
        cached += dn[i].calls == 1 && !dn[i].r.d[1].allowed &&
                  dn[i].r.d[1].source == FG_SOURCE_CACHE;
    long long during = redis_calls() - before - 1; /* less INFO itself */
    printf("async: %d of %d blocked sets answered from the cache, %lld "
           "Redis commands\n",
           cached, FLOOD, during);
    CHECK_EQ(cached, FLOOD);
    CHECK_EQ(during, 0);

    /* The block ends: all at once, one probes, the others wait for its
     * answer; b's next window lets exactly 4 through. */
    usleep(450000);
    before = redis_calls();
    for (int i = 0; i < FLOOD; i++)
        submit_set(base, &req[i], &dn[i], it, 2, 1, 0);
    drain(base);
    long long probe = redis_calls() - before - 1;
    int allowed = 0, once = 0;
    for (int i = 0; i < FLOOD; i++) {
        once += dn[i].calls == 1;
        allowed += dn[i].r.d[dn[i].r.decided].allowed;
    }
    printf("async: block ended, %d sets at once: %d allowed, %lld Redis "
           "commands (without the guard each would send a's 2)\n",
           FLOOD, allowed, probe);
    CHECK_EQ(once, FLOOD);
    /* a (5/h) has 1 unit left, b a new window of 4: exactly 1. */
    CHECK_EQ(allowed, 1);
    /* a's checks, b's probe and the units the probe left, and the
     * refunds of a for every refusal of b: far fewer than a stampede's
     * 2 x FLOOD + refunds. */
    CHECK(probe < FLOOD);

    fg_limiter_set_cache(a, NULL);
    fg_limiter_set_cache(b, NULL);
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(st);
    fg_cache_free(cache);
    event_base_free(base);
}

/* A block ends while Redis does not answer: one set probes, the others
 * wait for it. The probe times out; each waiter then decides by its
 * policy (open) at once, rather than asking the store that just failed
 * and waiting a whole timeout more. */
static void hung_probe(const char *url)
{
    struct event_base *base;
    fg_store *st = open_async(url, &base);
    if (!st)
        return;
    fg_cache *cache = fg_cache_new(1024);
    fg_limiter *b =
        limiter_of(st, "hb", "1/300ms", FG_FIXED_WINDOW, 200, FG_FAIL_OPEN);
    if (!b)
        return;
    fg_limiter_set_cache(b, cache);
    static fg_set_req req[FLOOD];
    static struct done dn[FLOOD];
    fg_set_item it[1] = {{b, "h", 1}};
    submit_set(base, &req[0], &dn[0], it, 1, 1, 1);
    CHECK_EQ(fg_cache_count(cache), 1); /* blocked until the window ends */
    usleep(350000);
    freeReplyObject(redisCommand(rc, "CLIENT PAUSE 1500 ALL"));
    uint64_t t0 = fg__mono_precise_us(), worst = 0;
    for (int i = 0; i < FLOOD; i++)
        submit_set(base, &req[i], &dn[i], it, 1, 1, 0);
    drain(base);
    int open = 0;
    for (int i = 0; i < FLOOD; i++) {
        open += dn[i].calls == 1 && dn[i].r.d[0].allowed &&
                dn[i].r.d[0].source == FG_SOURCE_FAIL_OPEN;
        if (dn[i].at_us - t0 > worst)
            worst = dn[i].at_us - t0;
    }
    printf("hung probe: %d of %d sets decided by policy, the last %.0f ms "
           "after they were sent (timeout 200 ms)\n",
           open, FLOOD, worst / 1000.0);
    CHECK_EQ(open, FLOOD);
    CHECK(worst < 300000); /* asking again would take 400 ms */
    /* Redis answers again after its pause. */
    uint64_t spent = fg__mono_precise_us() - t0;
    if (spent < 1600000)
        usleep((useconds_t)(1600000 - spent));
    fg_limiter_set_cache(b, NULL);
    fg_limiter_free(b);
    fg_store_close(st);
    fg_cache_free(cache);
    event_base_free(base);
}

/* Two limits on two Redis servers, each key's block just ended: A hangs
 * (L0: 200 ms timeout, open), B answers in 400 ms (L1: closed). P1 probes
 * L0, P2 probes L1, and W, a set of both, waits for P1's probe. P1 fails
 * at 200 ms: W decides L0 by its policy and must not wait for P2's probe
 * of L1 (waiting again would lose L0's answer, and apply it to L1): it
 * asks B for L1 itself, which answers. */
static void two_probes(const char *url_a, const char *url_b, int port_b)
{
    char err[256];
    struct event_base *base;
    fg_store *sa = open_async(url_a, &base);
    fg_store *sb = fg_store_open_async(url_b, base, err, sizeof err);
    redisContext *b = redisConnect("127.0.0.1", port_b);
    CHECK(sa && sb && b && !b->err);
    if (!sa || !sb || !b || b->err)
        return;
    fg_cache *cache = fg_cache_new(1024);
    fg_limiter *l[2];
    for (int i = 0; i < 2; i++) {
        l[i] = limiter_of(i ? sb : sa, i ? "tp1" : "tp0", "1/300ms",
                          FG_FIXED_WINDOW, i ? 1000 : 200,
                          i ? FG_FAIL_CLOSED : FG_FAIL_OPEN);
        if (!l[i])
            return;
        fg_limiter_set_cache(l[i], cache);
    }
    static fg_set_req req[3];
    static struct done dn[3];
    fg_set_item i0[1] = {{l[0], "h", 1}}, i1[1] = {{l[1], "h", 1}};
    fg_set_item w[2] = {{l[0], "h", 1}, {l[1], "h", 1}};
    submit_set(base, &req[0], &dn[0], i0, 1, 1, 1);
    submit_set(base, &req[1], &dn[1], i1, 1, 1, 1);
    CHECK_EQ(fg_cache_count(cache), 2); /* both blocked to their window end */
    usleep(350000);
    freeReplyObject(redisCommand(rc, "CLIENT PAUSE 1500 ALL"));
    freeReplyObject(redisCommand(b, "CLIENT PAUSE 400 ALL"));
    uint64_t t0 = fg__mono_precise_us();
    submit_set(base, &req[0], &dn[0], i0, 1, 1, 0);
    submit_set(base, &req[1], &dn[1], i1, 1, 1, 0);
    submit_set(base, &req[2], &dn[2], w, 2, 1, 0);
    drain(base);
    const fg_set_result *r = &dn[2].r;
    printf("two probes: W decided L0 by %s (rc %d), L1 by %s (rc %d), %.0f "
           "ms after it was sent\n",
           fg_source_name(r->d[0].source), r->rc[0],
           fg_source_name(r->d[1].source), r->rc[1],
           (dn[2].at_us - t0) / 1000.0);
    CHECK_EQ(r->d[0].source, FG_SOURCE_FAIL_OPEN);
    CHECK(r->asked & 2);
    CHECK_EQ(r->rc[1], FG_OK);
    CHECK_EQ(r->d[1].source, FG_SOURCE_STORE);
    CHECK(dn[2].at_us - t0 < 1000000);
    uint64_t spent = fg__mono_precise_us() - t0;
    if (spent < 1600000)
        usleep((useconds_t)(1600000 - spent));
    for (int i = 0; i < 2; i++) {
        fg_limiter_set_cache(l[i], NULL);
        fg_limiter_free(l[i]);
    }
    fg_store_close(sa);
    fg_store_close(sb);
    redisFree(b);
    fg_cache_free(cache);
    event_base_free(base);
}

/* The cache with sets in flight at once and with bad input. A set's own
 * refund of a limit ends the block another set's answer put on its key
 * (the units are back in the store); bad input is answered with its
 * reason, as without a cache, not from a block. */
static void cache_edges(const char *url)
{
    struct event_base *base;
    fg_store *st = open_async(url, &base);
    if (!st)
        return;
    fg_cache *cache = fg_cache_new(64);
    fg_limiter *a = limiter(st, "ea", "2/h", FG_FIXED_WINDOW);
    fg_limiter *b = limiter(st, "eb", "1/h", FG_FIXED_WINDOW);
    fg_limiter_set_cache(a, cache);
    fg_set_req req[3];
    struct done dn[3];
    fg_set_item bv[1] = {{b, "v", 1}};
    submit_set(base, &req[0], &dn[0], bv, 1, 1, 1); /* b:v has no room left */
    /* y counts a:u, then b refuses it; meanwhile x takes a:u's last unit,
     * which blocks a:u in the cache; y's refund gives one back. */
    fg_set_item y[2] = {{a, "u", 1}, {b, "v", 1}}, x[1] = {{a, "u", 1}};
    submit_set(base, &req[0], &dn[0], y, 2, 1, 0);
    submit_set(base, &req[1], &dn[1], x, 1, 1, 0);
    drain(base);
    drain_limiter(base, a);
    CHECK(!dn[0].r.d[dn[0].r.decided].allowed);
    CHECK(dn[1].r.d[0].allowed);
    submit_set(base, &req[2], &dn[2], x, 1, 1, 1);
    printf("cache: a set's refund of a:u, after another set's answer "
           "blocked it: the next set %s (source %s)\n",
           dn[2].r.d[0].allowed ? "allowed" : "refused",
           fg_source_name(dn[2].r.d[0].source));
    CHECK(dn[2].r.d[0].allowed);
    CHECK_EQ(dn[2].r.d[0].source, FG_SOURCE_STORE);

    /* a:u is blocked now (2 of 2). A cost above the limit is FG_ECOST,
     * a key of a length with no bytes FG_EINVAL: not the cache's block. */
    CHECK_EQ(fg_cache_count(cache), 1);
    submit_set(base, &req[0], &dn[0], x, 1, 3, 1);
    CHECK_EQ(dn[0].r.error, FG_ECOST);
    CHECK_EQ(dn[0].r.rc[0], FG_ECOST);
    CHECK(dn[0].r.d[0].source != FG_SOURCE_CACHE);
    submit_set(base, &req[0], &dn[0], x, 1, (uint64_t)1 << 60, 1);
    CHECK_EQ(dn[0].r.error, FG_ECOST);
    fg_set_item nokey[1] = {{a, NULL, 5}};
    submit_set(base, &req[0], &dn[0], nokey, 1, 1, 1);
    CHECK_EQ(dn[0].r.error, FG_EINVAL);
    fg_set_item huge[2] = {{a, "u", 1}, {a, "w", (size_t)1 << 40}};
    submit_set(base, &req[0], &dn[0], huge, 2, 1, 1);
    CHECK_EQ(dn[0].calls, 1);
    CHECK(!dn[0].r.d[dn[0].r.decided].allowed); /* a:u's block, or EKEY */
    submit_set(base, &req[0], &dn[0], x, 1, 1, 1);
    CHECK_EQ(dn[0].r.d[0].source, FG_SOURCE_CACHE); /* still blocked */
    printf("cache: bad input on a blocked key gives its reason (cost 3: "
           "ECOST; NULL key: EINVAL)\n");

    fg_limiter_set_cache(a, NULL);
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(st);
    fg_cache_free(cache);
    event_base_free(base);
}

/* Redis shut down (last: nothing runs on it after): a limit decided by
 * its local share (on_failure = local) before a refusing one is refunded
 * in that share, so refused sets leave it whole. */
static void fallback(const char *url)
{
    char err[256];
    fg_store *st = fg_store_open(url, err, sizeof err);
    fg_memory_options mo = {0};
    fg_store *mem = fg_store_open_memory(&mo, err, sizeof err);
    CHECK(st && mem);
    if (!st || !mem)
        return;
    fg_limit l;
    CHECK_EQ(fg_limit_parse("5/min", &l), FG_OK);
    l.algorithm = FG_FIXED_WINDOW;
    l.timeout_ms = 200;
    l.on_failure = FG_FAIL_LOCAL;
    l.fallback_servers = 1;
    snprintf(l.name, sizeof l.name, "sl-%d", (int)getpid());
    fg_limiter *a = fg_limiter_new(st, &l, err, sizeof err);
    fg_limiter *b = limiter(mem, "sm", "1/min", FG_FIXED_WINDOW);
    CHECK(a != NULL);
    if (!a || !b)
        return;
    fg_decision d;
    CHECK_EQ(fg_check(b, "f", 1, 1, &d), FG_OK);
    freeReplyObject(redisCommand(rc, "SHUTDOWN NOSAVE"));
    fg_set_item it[2] = {{a, "f", 1}, {b, "f", 1}};
    fg_set_result r;
    int local = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(fg_check_set(it, 2, 1, &r), FG_OK);
        CHECK_EQ(r.decided, 1);
        local += r.d[0].allowed && r.d[0].source == FG_SOURCE_LOCAL;
        CHECK_EQ(r.unrefunded, 0);
    }
    CHECK_EQ(local, 5);
    int alone = 0;
    for (int i = 0; i < 6; i++)
        if (fg_check(a, "f", 1, 1, &d) != FG_OK || d.allowed)
            alone += d.allowed && d.source == FG_SOURCE_LOCAL;
    printf("fallback: after 5 refused sets, a alone allowed %d of 6 by its "
           "local share of 5\n",
           alone);
    CHECK_EQ(alone, 5);
    fg_limiter_free(a);
    fg_limiter_free(b);
    fg_store_close(mem);
    fg_store_close(st);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: redis_sets URL HOST PORT [URL2 PORT2]\n");
        return 2;
    }
    rc = redisConnect(argv[2], atoi(argv[3]));
    CHECK(rc && !rc->err);
    if (!rc || rc->err)
        return TEST_DONE();
    blocking(argv[1]);
    async(argv[1]);
    cache_edges(argv[1]);
    hung_probe(argv[1]);
    if (argc >= 6)
        two_probes(argv[1], argv[4], atoi(argv[5]));
    fallback(argv[1]);
    redisFree(rc);
    return TEST_DONE();
}
