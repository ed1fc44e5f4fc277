/* redis_rates.c -- every rate on Redis, decided as the C algorithm decides
 * it, for tests/integration/redis_rates.sh. Each mode prints what it saw
 * and ends with "N passed, N failed". The URL must carry ?prefix=rt: (the
 * stored state is read and written by key in the 'state' mode).
 *
 *   redis_rates grid URL     a grid of rates (primes, large counts,
 *                            periods up to a year) x the three atomic
 *                            algorithms x a clock near today and in 2100:
 *                            C vs Lua, blocking, async and async batches
 *   redis_rates change URL   one token bucket key checked under several
 *                            rates in turn (a reload that changes a rate):
 *                            C vs Lua on one shared state
 *   redis_rates state URL    the stored token state: its format, a value
 *                            of the earlier format, a fraction of another
 *                            rate's scale
 *   redis_rates hours URL    13/h over 1,000 simulated hours with
 *                            clock = client: exactly 13 in every hour
 *   redis_rates adds URL     fg_add (usage counted beyond the limit)
 *                            mixed with checks, over the grid of rates:
 *                            C vs Lua, blocking and async batches */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness.h"
#include "algo.h"
#include "floodgate.h"
#include "loop.h"
#include "redis_store.h"
#include "store.h"
#include "clock.h"
#include "limiter.h"

#define SEC  1000000ull
#define HOUR (3600 * SEC)
/* 2026-12-01 and 2100-01-01, in us since 1970. */
#define T2026 1796083200000000ull
#define T2100 4102444800000000ull

static uint64_t fake_now;
static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Names unique to this run, so that reruns against one server never
 * read another run's keys (some live for a year). */
static unsigned run_id(void)
{
    static unsigned id;
    if (!id)
        id = (unsigned)(fg__wall_us() % 1000000000u) ^ (unsigned)getpid();
    return id;
}

static fg_limiter *limiter(fg_store *st, const char *name, const char *rate,
                           fg_algorithm a, uint64_t burst)
{
    fg_limit lim;
    char err[256];
    if (fg_limit_parse(rate, &lim) != FG_OK) {
        fprintf(stderr, "bad rate %s\n", rate);
        return NULL;
    }
    lim.algorithm = a;
    lim.burst = burst;
    lim.clock_client = 1;
    lim.on_failure = FG_FAIL_CLOSED;
    lim.timeout_ms = 2000;
    snprintf(lim.name, sizeof lim.name, "%s", name);
    fg_limiter *l = fg_limiter_new(st, &lim, err, sizeof err);
    if (!l)
        fprintf(stderr, "limiter %s %s burst %llu: %s\n", fg_algorithm_name(a),
                rate, (unsigned long long)burst, err);
    return l;
}

/* ---- async checks -------------------------------------------------------- */

/* ---- comparing a decision ------------------------------------------------ */

static int mismatches;

static int same(const fg_decision *a, const fg_decision *b)
{
    return a->allowed == b->allowed && a->limit == b->limit &&
           a->remaining == b->remaining && a->reset_us == b->reset_us &&
           a->retry_after_us == b->retry_after_us &&
           a->reset_ms == b->reset_ms && a->retry_after_ms == b->retry_after_ms;
}

static void compare(const char *what, const fg_limiter *l, uint64_t cost,
                    const fg_decision *c, int rc, const fg_decision *r)
{
    CHECK_EQ(rc, FG_OK);
    if (rc == FG_OK && same(c, r))
        return;
    if (rc != FG_OK)
        fprintf(stderr, "%s %s %llu/%llu us burst %llu t=%llu cost=%llu: %s\n",
                what, fg_algorithm_name(l->lim.algorithm),
                (unsigned long long)l->lim.limit,
                (unsigned long long)l->lim.period_us,
                (unsigned long long)l->p.burst, (unsigned long long)fake_now,
                (unsigned long long)cost, fg_strerror(rc));
    if (mismatches++ < 8)
        fprintf(
            stderr,
            "%s %s %llu/%llu us burst %llu t=%llu cost=%llu rc=%d: "
            "C %d/%llu/%llu/%llu us, redis %d/%llu/%llu/%llu us\n",
            what, fg_algorithm_name(l->lim.algorithm),
            (unsigned long long)l->lim.limit,
            (unsigned long long)l->lim.period_us,
            (unsigned long long)l->p.burst, (unsigned long long)fake_now,
            (unsigned long long)cost, rc, c->allowed,
            (unsigned long long)c->remaining, (unsigned long long)c->reset_us,
            (unsigned long long)c->retry_after_us, r->allowed,
            (unsigned long long)r->remaining, (unsigned long long)r->reset_us,
            (unsigned long long)r->retry_after_us);
}

/* A cost for 'l': mostly small, sometimes close to the largest. */
static uint64_t some_cost(const fg_limiter *l)
{
    uint64_t max = l->p.max_cost;
    if (rng() % 8 == 0)
        return max - rng() % (max < 3 ? max : 3);
    return 1 + rng() % (max < 3 ? max : 3);
}

/* Redis expires keys in real time, by TTLs the store derives from the
 * fake clock (1 ms beyond the state's end): the fake clock moves on at
 * least as far as real time between any two checks, plus STEP_SLACK_US
 * for a check that waits longer than the one before it for Redis (20 ms:
 * a sanitizer build on a loaded host), or a key would expire while its
 * state still counts. */
#define STEP_SLACK_US 20000
static uint64_t real_last;

static void start_clock(uint64_t at)
{
    fake_now = at;
    real_last = fg__mono_precise_us();
}

/* The clock moves on: by the real time since the last step, then by
 * nothing, a few us, up to a third of a period, or by the exact wait of
 * the last refusal. */
static void step_clock(const fg__algo_params *p, uint64_t retry_us)
{
    uint64_t real = fg__mono_precise_us();
    fake_now += real - real_last + STEP_SLACK_US;
    real_last = real;
    switch (rng() % 6) {
    case 0:
        break;
    case 1:
        fake_now += rng() % 5;
        break;
    case 2:
        if (retry_us) {
            fake_now += retry_us - (rng() % 2);
            break;
        }
        /* fall through */
    default:
        fake_now += rng() % (p->period_us / 3 + 1);
    }
}

/* ---- grid ---------------------------------------------------------------- */

static const char *const grid_rates[] = {
    "13/h",         "17/min",
    "999/min",      "123/s",
    "7/3s",         "1/ms",
    "3/7ms",        "4099/s",
    "5/15min",      "1000003/day",
    "86413/day",    "1/365day",
    "997/365day",   "100000007/h",
    "2/ms",         "9007199254740991/365day",
    "4294967311/s", "9007199254740992/ms"};

static void grid(const char *url)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    static const uint64_t bursts[] = {0, 1, 7};
    static const uint64_t eras[] = {T2026, T2100};
    char err[256];
    struct event_base *base = new_base();
    fg_store *bs = fg_store_open(url, err, sizeof err);
    fg_store *as = fg_store_open_async(url, base, err, sizeof err);
    CHECK(bs != NULL && as != NULL);
    if (!bs || !as) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    CHECK_EQ(fg__store_redis_set_clock(bs, fake_clock, NULL), FG_OK);
    CHECK_EQ(fg__store_redis_set_clock(as, fake_clock, NULL), FG_OK);
    int cases = 0, steps = 0, allowed = 0, refused = 0, wide = 0;
    int n = 0;
    for (size_t ri = 0; ri < sizeof grid_rates / sizeof *grid_rates; ri++) {
        for (size_t ai = 0; ai < 3; ai++) {
            for (size_t bi = 0; bi < 3; bi++) {
                if (bursts[bi] && algos[ai] != FG_TOKEN_BUCKET)
                    continue;
                for (size_t ei = 0; ei < 2; ei++) {
                    char name[64];
                    snprintf(name, sizeof name, "g%u-%zu-%zu-%zu-%zu", run_id(),
                             ri, ai, bi, ei);
                    fg_limiter *lb = limiter(bs, name, grid_rates[ri],
                                             algos[ai], bursts[bi]);
                    fg_limiter *la = limiter(as, name, grid_rates[ri],
                                             algos[ai], bursts[bi]);
                    /* Every rate works with every algorithm. */
                    CHECK(lb != NULL && la != NULL);
                    if (!lb || !la) {
                        fg_limiter_free(lb);
                        fg_limiter_free(la);
                        continue;
                    }
                    cases++;
                    wide += lb->p.wide;
                    const fg__algo_params *p = &lb->p;
                    fg__algo_state s = {0, 0, 0}, other[10];
                    memset(other, 0, sizeof other);
                    uint64_t retry = 0, exp;
                    start_clock(eras[ei] + rng() % p->period_us);
                    for (int i = 0; i < 120; i++, n++) {
                        step_clock(p, retry);
                        fg_decision c, r;
                        if (n % 3 == 2) {
                            /* An async batch: four checks of this key and
                             * of another, submitted together, run in
                             * order (the C twin too). A fixed window's
                             * INCRBYs are pipelined, and a refused one is
                             * given back only after its reply (DESIGN.md
                             * 3): its batch has four keys. */
                            result res[4];
                            uint64_t costs[4];
                            fg__algo_state *sj[4];
                            int fixed = p->algorithm == FG_FIXED_WINDOW;
                            memset(res, 0, sizeof res);
                            /* A key twice in one batch counts on Redis
                             * keeping the first one's write until the
                             * second runs, in real time: with a period of
                             * a few ms its expiry is that close, and a
                             * loaded host can pause Redis between the two
                             * (once seen: a 1 ms sliding window). Such
                             * rates batch four keys. */
                            int twice = p->period_us >= 50000;
                            for (int j = 0; j < 4; j++) {
                                static const char keys[] = "kokx";
                                static const char fkeys[] = "kopq";
                                char kj = fixed || !twice ? fkeys[j] : keys[j];
                                sj[j] = kj == 'k' ? &s : &other[kj - 'o'];
                                costs[j] = some_cost(la);
                                pending++;
                                int rc = fg_check_async(la, &kj, 1, costs[j],
                                                        on_done, &res[j]);
                                CHECK_EQ(rc, FG_OK);
                                if (rc != FG_OK)
                                    pending--;
                            }
                            drain(base);
                            for (int j = 0; j < 4; j++) {
                                fg__algo_check(p, sj[j], fake_now, costs[j], &c,
                                               &exp);
                                CHECK_EQ(res[j].done, 1);
                                compare("batch", la, costs[j], &c, res[j].rc,
                                        &res[j].d);
                                allowed += c.allowed;
                                refused += !c.allowed;
                                retry = c.retry_after_us;
                                steps++;
                            }
                            continue;
                        }
                        /* A fixed window's give-back of a refusal waits
                         * in the async connection until its loop runs
                         * again: the blocking client has a key of its
                         * own for it. */
                        const char *key =
                            n % 3 == 0 && p->algorithm == FG_FIXED_WINDOW ? "b"
                                                                          : "k";
                        fg__algo_state *sk = *key == 'b' ? &other[9] : &s;
                        uint64_t cost = some_cost(lb);
                        fg__algo_check(p, sk, fake_now, cost, &c, &exp);
                        int rc;
                        if (n % 3 == 0) {
                            rc = fg_check(lb, key, 1, cost, &r);
                        } else {
                            result res = {0};
                            pending++;
                            rc =
                                fg_check_async(la, key, 1, cost, on_done, &res);
                            if (rc == FG_OK) {
                                drain(base);
                                rc = res.rc;
                                r = res.d;
                            } else {
                                pending--;
                            }
                        }
                        compare(n % 3 == 0 ? "blocking" : "async", lb, cost, &c,
                                rc, &r);
                        allowed += c.allowed;
                        refused += !c.allowed;
                        retry = c.retry_after_us;
                        steps++;
                    }
                    fg_limiter_free(lb);
                    fg_limiter_free(la);
                }
            }
        }
    }
    printf("grid: %d cases (%d rates; %d token buckets too deep for 64 "
           "bits), %d steps, %d allowed, %d refused, %d mismatches\n",
           cases, (int)(sizeof grid_rates / sizeof *grid_rates), wide, steps,
           allowed, refused, mismatches);
    CHECK_EQ(mismatches, 0);
    CHECK(wide > 0);
    CHECK(allowed > steps / 10 && refused > steps / 10);
    fg_store_close(bs);
    fg_store_close(as);
    event_base_free(base);
}

/* ---- a rate changed ------------------------------------------------------ */

/* One name, checked under one rate and then another, back and forth, as
 * serve does across a SIGHUP that changes a limit's rate, or as servers
 * half way through such a change do at once: the stored state means the
 * same to the C algorithm and to the script. Rates of one depth (burst /
 * rate) share the key and its debt; of two depths, each has a key of its
 * own (the C side keeps a state for each), so neither undoes the other's
 * debt. The case of the issue first: 2/h used up, then 1000/s waits one
 * unit (1 ms) at most, not an hour. */
static void change(const char *url)
{
    static const char *const pairs[][2] = {
        {"2/h", "1000/s"},    {"1000/s", "2/h"},
        {"13/h", "17/min"},   {"10/s", "100/min"},
        {"100/min", "5/s"},   {"10/s", "1000/s"},
        {"2/min", "200/min"}, {"7/3s", "9007199254740991/365day"},
        {"1/ms", "1/365day"}};
    char err[256];
    fg_store *st = fg_store_open(url, err, sizeof err);
    CHECK(st != NULL);
    if (!st) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    CHECK_EQ(fg__store_redis_set_clock(st, fake_clock, NULL), FG_OK);
    int steps = 0, switches = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char name[64];
        snprintf(name, sizeof name, "chg%u-%zu", run_id(), i);
        fg_limiter *l[2];
        for (int j = 0; j < 2; j++)
            l[j] = limiter(st, name, pairs[i][j], FG_TOKEN_BUCKET, 0);
        CHECK(l[0] && l[1]);
        if (!l[0] || !l[1])
            continue;
        fg__algo_state st2[2] = {{0, 0, 0}, {0, 0, 0}};
        int shared = l[0]->p.depth_us == l[1]->p.depth_us;
        fg_decision c, r;
        uint64_t exp, retry = 0;
        start_clock(T2026 + rng() % SEC);
        int cur = 0;
        for (int k = 0; k < 400; k++) {
            if (k == 0 || rng() % 40 == 0) {
                cur = k == 0 ? 0 : !cur;
                switches++;
            }
            if (k == 0) {
                /* Use the first rate up: its burst, and one more. */
                uint64_t b = l[0]->p.burst;
                fg__algo_check(&l[0]->p, &st2[0], fake_now, b, &c, &exp);
                compare("change", l[0], b, &c, fg_check(l[0], "u", 1, b, &r),
                        &r);
                cur = 1;
                switches++;
            }
            const fg__algo_params *p = &l[cur]->p;
            step_clock(p, retry);
            uint64_t cost = some_cost(l[cur]);
            fg__algo_check(p, &st2[shared ? 0 : cur], fake_now, cost, &c, &exp);
            compare("change", l[cur], cost, &c,
                    fg_check(l[cur], "u", 1, cost, &r), &r);
            retry = c.retry_after_us;
            steps++;
            if (i == 0 && k == 0) {
                /* 1000/s after 2/h was used up: at most one unit away. */
                CHECK(r.allowed || r.retry_after_us <= 1000);
            }
        }
        fg_limiter_free(l[0]);
        fg_limiter_free(l[1]);
    }
    /* Two depths at once (a rolling deploy from 100/min to 5/s): the
     * shallower one's checks leave the deeper one's debt whole. Sharing
     * one key, a 5/s check rewrote 100/min's 60 s debt as 1 s, and
     * 100/min then admitted 98 more. */
    {
        char name[64];
        snprintf(name, sizeof name, "drift%u", run_id());
        fg_limiter *a = limiter(st, name, "100/min", FG_TOKEN_BUCKET, 0);
        fg_limiter *b = limiter(st, name, "5/s", FG_TOKEN_BUCKET, 0);
        CHECK(a && b);
        fg_decision r;
        start_clock(T2026);
        int more = 0;
        if (a && b) {
            CHECK_EQ(fg_check(a, "u", 1, 100, &r), FG_OK);
            CHECK_EQ(r.allowed, 1);
            for (int i = 0; i < 5; i++) {
                CHECK_EQ(fg_check(b, "u", 1, 1, &r), FG_OK);
                fake_now += 1000;
                CHECK_EQ(fg_check(a, "u", 1, 1, &r), FG_OK);
                more += r.allowed;
            }
        }
        printf("change: 100/min used up, then 5 checks at 5/s each followed "
               "by one at 100/min: %d of those admitted\n",
               more);
        CHECK_EQ(more, 0);
        fg_limiter_free(a);
        fg_limiter_free(b);
    }
    printf("change: %d steps, %d rate changes, %d mismatches\n", steps,
           switches, mismatches);
    CHECK_EQ(mismatches, 0);
    fg_store_close(st);
}

/* ---- the stored state ---------------------------------------------------- */

/* A token bucket's key holds "TAT_US FRACTION WRITER". A value of the
 * earlier format (TAT in 1/scale us since 2024-01-01) is read as this
 * limit's, with no writer; a fraction of another rate's scale rounds up to
 * the next whole us. */
static void state(const char *url, const char *host, int port)
{
    char err[256], name[64], key[128];
    fg_store *st = fg_store_open(url, err, sizeof err);
    redisContext *rc = redisConnect(host, port);
    CHECK(st != NULL && rc != NULL && !rc->err);
    if (!st || !rc || rc->err)
        return;
    CHECK_EQ(fg__store_redis_set_clock(st, fake_clock, NULL), FG_OK);
    snprintf(name, sizeof name, "st%u", run_id());
    fg_limiter *l = limiter(st, name, "13/h", FG_TOKEN_BUCKET, 0);
    CHECK(l != NULL);
    if (!l)
        return;
    /* The key holds the bucket's depth in whole us. */
    snprintf(key, sizeof key, "rt:%s:%llu:{u}", name,
             (unsigned long long)l->p.depth_us);
    const fg__algo_params *p = &l->p;
    fg_decision c, r;
    uint64_t exp;
    fake_now = T2026;
    CHECK_EQ(fg_check(l, "u", 1, 1, &r), FG_OK);
    redisReply *v = redisCommand(rc, "GET %s", key);
    char want[96];
    /* T = 3600 s / 13: 276923076 us and 12/13. */
    snprintf(want, sizeof want, "%llu 12 %llu",
             (unsigned long long)(T2026 + 276923076),
             (unsigned long long)(p->depth_us + 1));
    CHECK(v && v->type == REDIS_REPLY_STRING && strcmp(v->str, want) == 0);
    if (v && v->type == REDIS_REPLY_STRING)
        printf("state: 13/h after one check: \"%s\"\n", v->str);
    freeReplyObject(v);

    /* The earlier format: TAT 5 units ahead, in 1/13 us since 2024. */
    uint64_t tat_us = T2026 + 5 * 276923076 + 3, frac = 11;
    uint64_t old = (tat_us - 1704067200000000ull) * 13 + frac;
    freeReplyObject(redisCommand(rc, "SET %s %llu PX 100000000", key,
                                 (unsigned long long)old));
    fg__algo_state s = {tat_us, frac, 0};
    for (int i = 0; i < 12; i++) {
        fg__algo_check(p, &s, fake_now, 1, &c, &exp);
        compare("old format", l, 1, &c, fg_check(l, "u", 1, 1, &r), &r);
    }
    /* A fraction of a finer scale: 10^15 > 13, read as the next us. */
    snprintf(want, sizeof want, "%llu %llu %llu",
             (unsigned long long)(T2026 + 7), 1000000000000000ull,
             (unsigned long long)(p->depth_us + 5));
    freeReplyObject(redisCommand(rc, "SET %s %s PX 100000000", key, want));
    s = (fg__algo_state){T2026 + 8, 0, p->depth_us + 5};
    for (int i = 0; i < 15; i++) {
        fg__algo_check(p, &s, fake_now, 1, &c, &exp);
        compare("other scale", l, 1, &c, fg_check(l, "u", 1, 1, &r), &r);
    }
    /* Not a state at all: a key never seen. */
    freeReplyObject(redisCommand(rc, "SET %s garbage PX 100000", key));
    CHECK_EQ(fg_check(l, "u", 1, 13, &r), FG_OK);
    CHECK_EQ(r.allowed, 1);
    printf("state: %d mismatches\n", mismatches);
    CHECK_EQ(mismatches, 0);
    fg_limiter_free(l);
    fg_store_close(st);
    redisFree(rc);
}

/* ---- 1,000 hours -----------------------------------------------------------
 */

/* A scalper that asks at every instant it may: just before the wait it was
 * given ends (refused), then when it ends (allowed), then again at once.
 * 13/h must allow exactly 13 in every hour, from the first full one (a
 * token bucket starts full: its first hour allows the burst and 12 more),
 * with no drift over 1,000 hours: T = 3600 s / 13 is no whole number of
 * us. The sliding window, which makes no such promise, must agree with
 * the C algorithm at every step. */
static void hours(const char *url)
{
    static const fg_algorithm algos[] = {FG_TOKEN_BUCKET, FG_FIXED_WINDOW,
                                         FG_SLIDING_WINDOW};
    char err[256];
    fg_store *st = fg_store_open(url, err, sizeof err);
    CHECK(st != NULL);
    if (!st) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    CHECK_EQ(fg__store_redis_set_clock(st, fake_clock, NULL), FG_OK);
    for (int a = 0; a < 3; a++) {
        char name[64];
        snprintf(name, sizeof name, "hr%u-%d", run_id(), a);
        fg_limiter *l = limiter(st, name, "13/h", algos[a], 0);
        CHECK(l != NULL);
        if (!l)
            continue;
        static int per_hour[1001];
        memset(per_hour, 0, sizeof per_hour);
        const uint64_t t0 = T2026; /* a whole hour */
        fg__algo_state s = {0, 0, 0};
        fg_decision c, r;
        uint64_t exp, calls = 0, early = 0, late = 0;
        fake_now = t0;
        int before = mismatches;
        while (fake_now < t0 + 1001 * HOUR) {
            fg__algo_check(&l->p, &s, fake_now, 1, &c, &exp);
            compare("hours", l, 1, &c, fg_check(l, "u", 1, 1, &r), &r);
            calls++;
            if (r.allowed) {
                per_hour[(fake_now - t0) / HOUR]++;
                continue;
            }
            uint64_t wait = r.retry_after_us;
            /* One us before the wait ends: still refused. */
            fake_now += wait - 1;
            fg__algo_check(&l->p, &s, fake_now, 1, &c, &exp);
            compare("hours", l, 1, &c, fg_check(l, "u", 1, 1, &r), &r);
            calls++;
            early += r.allowed;
            if (r.allowed) {
                per_hour[(fake_now - t0) / HOUR]++;
                continue;
            }
            fake_now += 1;
            late += 0;
        }
        int exact = 0, first = per_hour[0];
        for (int h = 1; h < 1001; h++)
            exact += per_hour[h] == 13;
        printf("hours %s: 13/h over 1000 hours, %llu checks, first hour "
               "%d, %d of hours 2..1001 with exactly 13, %llu allowed "
               "early, %d mismatches\n",
               fg_algorithm_name(algos[a]), (unsigned long long)calls, first,
               exact, (unsigned long long)early, mismatches - before);
        CHECK_EQ(mismatches - before, 0);
        CHECK_EQ(early, 0);
        (void)late;
        if (algos[a] == FG_TOKEN_BUCKET) {
            CHECK_EQ(first, 25);
            CHECK_EQ(exact, 1000);
        } else if (algos[a] == FG_FIXED_WINDOW) {
            CHECK_EQ(first, 13);
            CHECK_EQ(exact, 1000);
        }
        fg_limiter_free(l);
    }
    fg_store_close(st);
}

/* ---- fg_add ----------------------------------------------------------------
 */

/* Units to add: none (a read), a little, or up to three full limits (the
 * store keeps at most one limit's debt). */
static uint64_t some_units(const fg_limiter *l)
{
    uint64_t max = l->p.max_cost;
    switch (rng() % 4) {
    case 0:
        return rng() % 2;
    case 1:
        return 1 + rng() % (max < 5 ? max : 5);
    default:
        return max > FG_MAX_COUNT / 4 ? max - rng() % 3 : rng() % (3 * max + 1);
    }
}

/* How long ago added units were spent (fg_add_at): now, within this
 * window or the one before, or two windows ago (they count nowhere). */
static uint64_t some_age(const fg__algo_params *p)
{
    switch (rng() % 4) {
    case 0:
        return 0;
    case 1:
        return rng() % p->period_us;
    case 2:
        return p->period_us + rng() % p->period_us;
    default:
        return 2 * p->period_us + rng() % p->period_us;
    }
}

static void adds(const char *url)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    char err[256];
    struct event_base *base = new_base();
    fg_store *bs = fg_store_open(url, err, sizeof err);
    fg_store *as = fg_store_open_async(url, base, err, sizeof err);
    CHECK(bs != NULL && as != NULL);
    if (!bs || !as) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    CHECK_EQ(fg__store_redis_set_clock(bs, fake_clock, NULL), FG_OK);
    CHECK_EQ(fg__store_redis_set_clock(as, fake_clock, NULL), FG_OK);
    int cases = 0, steps = 0, over = 0;
    for (size_t ri = 0; ri < sizeof grid_rates / sizeof *grid_rates; ri++) {
        for (size_t ai = 0; ai < 3; ai++) {
            char name[64];
            snprintf(name, sizeof name, "a%u-%zu-%zu", run_id(), ri, ai);
            uint64_t burst = algos[ai] == FG_TOKEN_BUCKET && ri % 2 ? 7 : 0;
            fg_limiter *lb =
                limiter(bs, name, grid_rates[ri], algos[ai], burst);
            fg_limiter *la =
                limiter(as, name, grid_rates[ri], algos[ai], burst);
            CHECK(lb != NULL && la != NULL);
            if (!lb || !la) {
                fg_limiter_free(lb);
                fg_limiter_free(la);
                continue;
            }
            cases++;
            const fg__algo_params *p = &lb->p;
            fg__algo_state s = {0, 0, 0}, o[3];
            memset(o, 0, sizeof o);
            uint64_t retry = 0, exp;
            start_clock(T2026 + rng() % p->period_us);
            for (int i = 0; i < 60; i++) {
                step_clock(p, retry);
                fg_decision c, r;
                if (i % 4 == 3) {
                    /* Adds on the loop, as syncs go: one batch of three
                     * keys (a token bucket's in one script call). */
                    result res[3];
                    uint64_t u[3], age[3];
                    memset(res, 0, sizeof res);
                    for (int j = 0; j < 3; j++) {
                        char kj = (char)('p' + j);
                        u[j] = some_units(la);
                        age[j] = some_age(p);
                        pending++;
                        if (fg__store_check_async(la, &kj, 1,
                                                  u[j] | FG__COST_ADD, age[j],
                                                  0, on_done, &res[j]) != FG_OK)
                            pending--;
                    }
                    drain(base);
                    for (int j = 0; j < 3; j++) {
                        fg__algo_add(p, &o[j], fake_now, u[j], age[j], &c,
                                     &exp);
                        compare("add batch", la, u[j], &c, res[j].rc,
                                &res[j].d);
                        steps++;
                    }
                    continue;
                }
                int rc;
                uint64_t cost;
                /* A fixed window's refused check gives its INCRBY back
                 * without waiting, and the next command may overtake it
                 * on another pooled connection (see grid): adds only. */
                if (i % 2 || p->algorithm == FG_FIXED_WINDOW) {
                    cost = some_units(lb);
                    uint64_t a = some_age(p);
                    fg__algo_add(p, &s, fake_now, cost, a, &c, &exp);
                    rc = fg_add_at(lb, "k", 1, cost, a, &r);
                    over += !c.allowed;
                } else {
                    cost = some_cost(lb);
                    fg__algo_check(p, &s, fake_now, cost, &c, &exp);
                    rc = fg_check(lb, "k", 1, cost, &r);
                }
                compare(i % 2 || p->algorithm == FG_FIXED_WINDOW
                            ? "add"
                            : "check after add",
                        lb, cost, &c, rc, &r);
                retry = c.retry_after_us;
                steps++;
            }
            fg_limiter_free(lb);
            fg_limiter_free(la);
        }
    }
    /* A caller whose clock lags by 10 s (clock = client, 10/s): its add,
     * even of nothing, sees the bucket's debt deeper than the most an add
     * leaves (8 buckets), and must not lower it: the others, on time,
     * still find the bucket empty. The twins agree on it. */
    {
        char name[64];
        snprintf(name, sizeof name, "lag%u", run_id());
        fg_limiter *l = limiter(bs, name, "10/s", FG_TOKEN_BUCKET, 0);
        CHECK(l != NULL);
        if (l) {
            const fg__algo_params *p = &l->p;
            fg__algo_state s = {0, 0, 0};
            uint64_t exp, t = T2026;
            fg_decision c, r;
            fake_now = t;
            for (int i = 0; i < 10; i++) {
                fg__algo_check(p, &s, fake_now, 1, &c, &exp);
                compare("lag: fill", l, 1, &c, fg_check(l, "k", 1, 1, &r), &r);
            }
            fake_now = t - 10000000;
            fg__algo_add(p, &s, fake_now, 0, 0, &c, &exp);
            compare("lag: add of nothing 10 s behind", l, 0, &c,
                    fg_add_at(l, "k", 1, 0, 0, &r), &r);
            fake_now = t + 1000;
            fg__algo_check(p, &s, fake_now, 1, &c, &exp);
            int rc = fg_check(l, "k", 1, 1, &r);
            compare("lag: on time again", l, 1, &c, rc, &r);
            CHECK(rc == FG_OK && !r.allowed);
            fg_limiter_free(l);
        }
    }
    /* A fixed window counted past 2^53 by adds, then refunds: the script
     * gives back exactly what memory does (it worked the give-back out in
     * Lua's doubles, and gave back one unit too many). */
    {
        char name[64];
        snprintf(name, sizeof name, "big%u", run_id());
        fg_limiter *l =
            limiter(bs, name, "9007199254740992/30day", FG_FIXED_WINDOW, 0);
        CHECK(l != NULL);
        if (l) {
            const fg__algo_params *p = &l->p;
            fg__algo_state s = {0, 0, 0};
            fg__taken all = {0, UINT64_MAX};
            uint64_t exp, big = ((uint64_t)1 << 53) - 1;
            fg_decision c, r;
            start_clock(T2026);
            fg__algo_add(p, &s, fake_now, big, 0, &c, &exp);
            compare("big: add", l, big, &c, fg_add_at(l, "k", 1, big, 0, &r),
                    &r);
            fg__algo_add(p, &s, fake_now, 3, 0, &c, &exp);
            compare("big: add 3 more", l, 3, &c, fg_add_at(l, "k", 1, 3, 0, &r),
                    &r);
            fg__algo_refund(p, &s, fake_now, 1, &all);
            CHECK_EQ(fg_refund(l, "k", 1, 1), FG_OK);
            fg__algo_refund(p, &s, fake_now, big, &all);
            CHECK_EQ(fg_refund(l, "k", 1, big), FG_OK);
            fg__algo_peek(p, &s, fake_now, &c);
            compare("big: peek after refunds", l, 1, &c, fg_peek(l, "k", 1, &r),
                    &r);
            CHECK_EQ(r.remaining, big - 1);
            fg_limiter_free(l);
        }
    }
    /* A sliding window of 2^53 (the largest limit), full: adds of 0 and
     * of 1 unit, now and two windows ago (counting nowhere), leave it
     * full on both twins (the cap once held the count at 2^53 - 1, below
     * the limit, and memory applied it to units too old to count). */
    {
        char name[64];
        snprintf(name, sizeof name, "bigs%u", run_id());
        fg_limiter *l =
            limiter(bs, name, "9007199254740992/h", FG_SLIDING_WINDOW, 0);
        CHECK(l != NULL);
        if (l) {
            const fg__algo_params *p = &l->p;
            fg__algo_state s = {0, 0, 0};
            uint64_t exp, big = ((uint64_t)1 << 53) - 1;
            fg_decision c, r;
            start_clock(T2026);
            fg__algo_check(p, &s, fake_now, big, &c, &exp);
            compare("bigs: check", l, big, &c, fg_check(l, "k", 1, big, &r),
                    &r);
            fg__algo_check(p, &s, fake_now, 1, &c, &exp);
            compare("bigs: the last unit", l, 1, &c, fg_check(l, "k", 1, 1, &r),
                    &r);
            static const uint64_t units[] = {0, 1, 0, 1};
            for (int i = 0; i < 4; i++) {
                uint64_t age = i < 2 ? 2 * p->period_us : 0;
                fg__algo_add(p, &s, fake_now, units[i], age, &c, &exp);
                compare("bigs: add", l, units[i], &c,
                        fg_add_at(l, "k", 1, units[i], age, &r), &r);
                fg__algo_check(p, &s, fake_now, 1, &c, &exp);
                int rc = fg_check(l, "k", 1, 1, &r);
                compare("bigs: check after the add", l, 1, &c, rc, &r);
                CHECK(rc == FG_OK && !r.allowed);
            }
            fg_limiter_free(l);
        }
    }
    /* Two configurations of one limit at once (a rolling deploy): a count
     * that a larger limit's checks took beyond a smaller limit's add cap
     * (8 of its limits) is never lowered by the smaller one's adds, now
     * or in the previous window (an add past the cap adds nothing, as
     * always): it once dropped to that cap (900 -> 80), freeing the larger
     * limit's units. */
    {
        char name[64];
        snprintf(name, sizeof name, "drift%u", run_id());
        fg_limiter *hi = limiter(bs, name, "1000/h", FG_SLIDING_WINDOW, 0);
        fg_limiter *lo = limiter(bs, name, "10/h", FG_SLIDING_WINDOW, 0);
        CHECK(hi && lo);
        if (hi && lo) {
            /* Key "k": the add in the current window; key "p": in the
             * previous one, seen at the next window's start (where it
             * weighs whole). */
            for (int i = 0; i < 2; i++) {
                const char *key = i ? "p" : "k";
                uint64_t period = hi->p.period_us, age = i ? period : 0;
                fg__algo_state s = {0, 0, 0};
                uint64_t exp;
                fg_decision c, r;
                start_clock(T2026);
                fg__algo_check(&hi->p, &s, fake_now, 900, &c, &exp);
                compare("drift: the larger limit's check", hi, 900, &c,
                        fg_check(hi, key, 1, 900, &r), &r);
                if (i)
                    fake_now = (fake_now / period + 1) * period;
                fg__algo_add(&lo->p, &s, fake_now, 1, age, &c, &exp);
                compare("drift: the smaller limit's add", lo, 1, &c,
                        fg_add_at(lo, key, 1, 1, age, &r), &r);
                fg__algo_peek(&hi->p, &s, fake_now, &c);
                compare("drift: the larger limit's peek", hi, 1, &c,
                        fg_peek(hi, key, 1, &r), &r);
                CHECK_EQ(r.remaining, 100);
            }
        }
        fg_limiter_free(hi);
        fg_limiter_free(lo);
    }
    printf("adds: %d cases, %d steps, %d adds beyond the limit, %d "
           "mismatches\n",
           cases, steps, over, mismatches);
    CHECK_EQ(mismatches, 0);
    CHECK(over > steps / 20);
    fg_store_close(bs);
    fg_store_close(as);
    event_base_free(base);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "grid") == 0)
        grid(argv[2]);
    else if (argc >= 3 && strcmp(argv[1], "change") == 0)
        change(argv[2]);
    else if (argc >= 5 && strcmp(argv[1], "state") == 0)
        state(argv[2], argv[3], atoi(argv[4]));
    else if (argc >= 3 && strcmp(argv[1], "adds") == 0)
        adds(argv[2]);
    else if (argc >= 3 && strcmp(argv[1], "hours") == 0)
        hours(argv[2]);
    else {
        fprintf(stderr, "usage: redis_rates grid|change|hours URL | state URL "
                        "HOST PORT\n");
        return 2;
    }
    return TEST_DONE();
}
