/* test_local.c -- the approximate modes' local half (fg_local) and fg_add,
 * on a fake clock: several "servers" share one memory store, their asks
 * answered after a round trip; the stated bounds (fg_limit_bound) hold. */
#include <stdlib.h>

#include "floodgate.h"
#include "mode.h"
#include "../harness.h"

#define MS  1000ull
#define SEC 1000000ull

static uint64_t fake_now = 1000 * SEC;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static fg_store *mem(void)
{
    fg_memory_options o = {.clock = fake_clock};
    return fg_store_open_memory(&o, NULL, 0);
}

static fg_limit lim_of(const char *rate, fg_algorithm a, const char *mode)
{
    fg_limit lim;
    fg_limit_parse(rate, &lim);
    lim.algorithm = a;
    char err[128];
    int rc = fg_mode_parse(mode, &lim, err, sizeof err);
    if (rc != FG_OK)
        fprintf(stderr, "%s\n", err);
    return lim;
}

/* ---- fg_add ------------------------------------------------------------- */

static void test_add(void)
{
    fg_store *st = mem();
    fg_decision d;
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "exact");
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    fake_now = 1000 * SEC;
    CHECK_EQ(fg_add(l, "k", 1, 4, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 6);
    CHECK_EQ(d.reset_us, SEC);
    CHECK_EQ(fg_add(l, "k", 1, 10, &d), FG_OK); /* 14: beyond the limit */
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(d.retry_after_us, SEC);
    CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_add(l, "k", 1, 0, &d), FG_OK); /* a read */
    CHECK_EQ(d.remaining, 0);
    fake_now += SEC;
    CHECK_EQ(fg_check(l, "k", 1, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_add(l, "k", 1, FG_MAX_COUNT, &d), FG_ECOST);
    fg_limiter_free(l);

    /* A token bucket's debt is paid back by refusals. */
    lim = lim_of("10/s", FG_TOKEN_BUCKET, "exact");
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_add(l, "t", 1, 15, &d), FG_OK); /* 5 in debt */
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(d.reset_us, 1500 * MS);
    CHECK_EQ(d.retry_after_us, 600 * MS); /* 5 paid, then one unit */
    fake_now += 590 * MS;
    CHECK_EQ(fg_check(l, "t", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    fake_now += 10 * MS;
    CHECK_EQ(fg_check(l, "t", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* At most seven more buckets of debt are kept (8 in all). */
    CHECK_EQ(fg_add(l, "t", 1, 1000, &d), FG_OK);
    CHECK_EQ(d.reset_us, 8 * SEC);
    fg_limiter_free(l);

    /* A sliding window counts it in the current window. */
    lim = lim_of("10/s", FG_SLIDING_WINDOW, "exact");
    l = fg_limiter_new(st, &lim, NULL, 0);
    fake_now = 2000 * SEC;
    CHECK_EQ(fg_add(l, "s", 1, 12, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    fake_now += SEC + 500 * MS; /* prev 12 weighs 6 */
    CHECK_EQ(fg_peek(l, "s", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 4);

    /* fg_add_at: units spent in the previous window count there, at its
     * weight; spent two windows ago, nowhere; in this one, here. */
    fake_now = 3000 * SEC + 100 * MS;
    CHECK_EQ(fg_add_at(l, "a", 1, 5, 200 * MS, &d), FG_OK); /* prev: 5 */
    CHECK_EQ(d.remaining, 5);                               /* 10 - 4.5 */
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_us, 900 * MS); /* this window holds nothing */
    CHECK_EQ(fg_add_at(l, "a", 1, 5, SEC + 200 * MS, &d), FG_OK); /* none */
    CHECK_EQ(d.remaining, 5);
    CHECK_EQ(fg_add_at(l, "a", 1, 2, 50 * MS, &d), FG_OK); /* this one */
    CHECK_EQ(d.remaining, 3);
    fake_now += 800 * MS; /* prev 5 weighs 0.5: 10 - 2 - 1 */
    CHECK_EQ(fg_peek(l, "a", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 7);
    fg_limiter_free(l);

    /* A fixed window's ended window counts nothing more: a read. */
    lim = lim_of("10/s", FG_FIXED_WINDOW, "exact");
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_add_at(l, "f", 1, 3, 0, &d), FG_OK);
    CHECK_EQ(d.remaining, 7);
    CHECK_EQ(fg_add_at(l, "f", 1, 3, SEC, &d), FG_OK);
    CHECK_EQ(d.remaining, 7);
    CHECK_EQ(fg_add_at(l, "f", 1, 3, 100 * MS, &d), FG_OK);
    CHECK_EQ(d.remaining, 4);
    fg_limiter_free(l);

    lim = lim_of("10/s", FG_NAIVE_GET_SET, "exact");
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_add(l, "n", 1, 1, &d), FG_ENOTSUP);
    fg_limiter_free(l);
    fg_store_close(st);
}

/* ---- parsing, validation, bounds ------------------------------------------
 */

static void test_parse(void)
{
    fg_limit lim;
    char err[160], buf[32];
    fg_limit_parse("10/s", &lim);
    CHECK_EQ(lim.mode, FG_MODE_EXACT);
    CHECK_EQ(lim.sync_ms, 200);
    CHECK_EQ(fg_mode_parse("sync:500ms", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.mode, FG_MODE_SYNC);
    CHECK_EQ(lim.sync_ms, 500);
    CHECK(fg_mode_format(&lim, buf, sizeof buf) > 0);
    CHECK_STR(buf, "sync:500ms");
    CHECK_EQ(fg_mode_parse("sync:2s", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.sync_ms, 2000);
    CHECK(fg_mode_format(&lim, buf, sizeof buf) > 0);
    CHECK_STR(buf, "sync:2s");
    CHECK_EQ(fg_mode_parse("sync", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.sync_ms, 200);
    CHECK_EQ(fg_mode_parse("sync:5ms", &lim, err, sizeof err), FG_EINVAL);
    CHECK(strstr(err, "10ms to 10s") != NULL);
    CHECK_EQ(fg_mode_parse("sync:11s", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("sync:", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("sync:1.5ms", &lim, err, sizeof err), FG_EINVAL);
    /* A bare number is milliseconds, as serve's durations. */
    CHECK_EQ(fg_mode_parse("sync:300", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.sync_ms, 300);
    CHECK_EQ(fg_mode_parse("sync:1.5", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("sync:5", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("lease", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.mode, FG_MODE_LEASE);
    CHECK_EQ(lim.lease_chunk, 0);
    CHECK_EQ(fg_mode_parse("lease:5", &lim, err, sizeof err), FG_OK);
    CHECK_EQ(lim.lease_chunk, 5);
    CHECK(fg_mode_format(&lim, buf, sizeof buf) > 0);
    CHECK_STR(buf, "lease:5");
    CHECK_EQ(fg_mode_parse("lease:0", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("lease:-1", &lim, err, sizeof err), FG_EINVAL);
    CHECK_EQ(fg_mode_parse("fast", &lim, err, sizeof err), FG_EINVAL);
    CHECK(strstr(err, "unknown mode") != NULL);
    CHECK_STR(fg_mode_name(FG_MODE_LEASE), "lease");
    CHECK_STR(fg_source_name(FG_SOURCE_SYNC), "sync");
    CHECK_STR(fg_source_name(FG_SOURCE_LEASE), "lease");

    /* A chunk above the limit, durable, naive_get_set: refused. */
    fg_limit_parse("10/s", &lim);
    fg_mode_parse("lease:11", &lim, NULL, 0);
    CHECK_EQ(fg_limit_check(&lim, err, sizeof err), FG_EINVAL);
    CHECK(strstr(err, "above the limit") != NULL);
    fg_mode_parse("sync", &lim, NULL, 0);
    lim.durable = 1;
    CHECK_EQ(fg_limit_check(&lim, err, sizeof err), FG_EINVAL);
    lim.durable = 0;
    lim.algorithm = FG_NAIVE_GET_SET;
    CHECK_EQ(fg_limit_check(&lim, err, sizeof err), FG_EINVAL);

    fg_mode_bound b;
    lim = lim_of("100/s", FG_FIXED_WINDOW, "sync:200ms");
    CHECK_EQ(fg_limit_bound(&lim, 8, 2 * MS, &b), FG_OK);
    CHECK_EQ(b.over_window_us, 404 * MS); /* 2 x (200 ms + 2 ms) */
    CHECK_EQ(b.over_cap, 700);
    CHECK_EQ(b.under_cap, 0);
    lim = lim_of("100/s", FG_FIXED_WINDOW, "lease:10");
    CHECK_EQ(fg_limit_bound(&lim, 8, 0, &b), FG_OK);
    CHECK_EQ(b.over_cap, 0);
    CHECK_EQ(b.under_cap, 80); /* 8 x 10: this server's chunk too */
    lim = lim_of("100/s", FG_FIXED_WINDOW, "lease");
    CHECK_EQ(fg_limit_bound(&lim, 8, 0, &b), FG_OK);
    CHECK_EQ(b.under_cap, 100);
    /* A token bucket's or sliding window's server waits for its chunk to
     * fit: one server alone may refuse its chunk, and a chunk less one. */
    lim = lim_of("100/s", FG_TOKEN_BUCKET, "lease:10");
    CHECK_EQ(fg_limit_bound(&lim, 1, 0, &b), FG_OK);
    CHECK_EQ(b.under_cap, 19);
    CHECK_EQ(fg_limit_bound(&lim, 8, 0, &b), FG_OK);
    CHECK_EQ(b.under_cap, 89);
    lim = lim_of("100/s", FG_SLIDING_WINDOW, "lease:10");
    CHECK_EQ(fg_limit_bound(&lim, 8, 0, &b), FG_OK);
    CHECK_EQ(b.under_cap, 89);
    CHECK_EQ(fg_limit_bound(&lim, 0, 0, &b), FG_EINVAL);
    /* Too large to hold: stated as the largest bound, not wrapped. */
    lim = lim_of("9007199254740992/s", FG_FIXED_WINDOW, "sync:200ms");
    CHECK_EQ(fg_limit_bound(&lim, 4096, UINT64_MAX / 2, &b), FG_OK);
    CHECK_EQ(b.over_cap, UINT64_MAX);
    CHECK_EQ(b.over_window_us, UINT64_MAX);
    lim = lim_of("9007199254740992/s", FG_TOKEN_BUCKET, "lease");
    CHECK_EQ(fg_limit_bound(&lim, 4096, 0, &b), FG_OK);
    CHECK_EQ(b.under_cap, 9007199254740992ull);

    /* NULL is refused, never followed. */
    fg_decision d;
    fg_local_ask a;
    CHECK_EQ(fg_mode_format(NULL, buf, sizeof buf), FG_EINVAL);
    CHECK_EQ(fg_limit_name_valid(NULL, 3), 0);
    CHECK_EQ(fg_local_check(NULL, "k", 1, 1, 0, &d, &a, NULL), FG_EINVAL);
    CHECK_EQ(fg_local_answer(NULL, &a, 0, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_due(NULL, 0, &a, 1), 0);
    CHECK_EQ(fg_local_flush(NULL, 0, &a, 1), 0);
    CHECK_EQ(fg_local_keys(NULL), 0);
    CHECK_EQ(fg_local_held(NULL), 0);
    fg_local_deciding(NULL, "k", 1, 1, 0);
    fg_local_decided(NULL, "k", 1, 1, 1, 0);
    fg_local_refund(NULL, "k", 1, 1, 0);
}

/* ---- a small cluster of servers on the fake clock ------------------------ */

#define NSRV 8
#define MAXQ 4096

typedef struct pend {
    int srv;
    uint64_t at; /* when the answer arrives */
    fg_local_ask ask;
    int rc;
    fg_decision d;
    int waiting; /* a take: its request is retried when answered */
} pend;

typedef struct sim {
    fg_store *st;
    fg_limiter *shared;
    fg_local *lc[NSRV];
    int nsrv;
    uint64_t rtt;
    pend q[MAXQ];
    int nq;
    uint64_t allowed, refused, asks, policy;
    int store_down;
    uint64_t *log; /* if set, the time of each admission (of cost 1) */
    size_t nlog, maxlog;
} sim;

static void sim_admit(sim *s, uint64_t cost)
{
    s->allowed += cost;
    if (s->log && s->nlog < s->maxlog)
        s->log[s->nlog++] = fake_now;
}

static void sim_init(sim *s, const fg_limit *lim, int nsrv, uint64_t rtt)
{
    memset(s, 0, sizeof(*s));
    s->st = mem();
    fg_limit ex = *lim;
    ex.mode = FG_MODE_EXACT;
    s->shared = fg_limiter_new(s->st, &ex, NULL, 0);
    s->nsrv = nsrv;
    s->rtt = rtt;
    for (int i = 0; i < nsrv; i++)
        s->lc[i] = fg_local_new(lim, 0, NULL, 0);
}

static void sim_free(sim *s)
{
    for (int i = 0; i < s->nsrv; i++)
        fg_local_free(s->lc[i]);
    fg_limiter_free(s->shared);
    fg_store_close(s->st);
}

/* The store does the ask halfway through the round trip. */
static void sim_send(sim *s, int srv, const fg_local_ask *a, int waiting)
{
    /* A fixed window is decided on the caller's clock, sent with the
     * command; the others on the store's, halfway through the trip. */
    uint64_t saved = fake_now;
    if (fg_limiter_limit(s->shared)->algorithm != FG_FIXED_WINDOW)
        fake_now += s->rtt / 2;
    pend *p = &s->q[s->nq++];
    p->srv = srv;
    p->ask = *a;
    p->at = saved + s->rtt;
    p->waiting = waiting;
    s->asks++;
    if (s->store_down) {
        p->rc = FG_EBACKEND;
    } else if (a->op == FG_LOCAL_ADD) {
        p->rc =
            fg_add_at(s->shared, a->key, a->keylen, a->units, a->age_us, &p->d);
    } else if (a->op == FG_LOCAL_TAKE || a->op == FG_LOCAL_CHECK) {
        p->rc = fg_check(s->shared, a->key, a->keylen, a->units, &p->d);
    } else {
        p->rc = fg_refund_at(s->shared, a->key, a->keylen, a->units, a->age_us,
                             a->hold_us);
    }
    fake_now = saved;
}

static void sim_request(sim *s, int srv, const char *key, uint64_t cost);

/* Answer whatever has arrived by now. */
static void sim_deliver(sim *s)
{
    for (int i = 0; i < s->nq;) {
        pend *p = &s->q[i];
        if (p->at > fake_now) {
            i++;
            continue;
        }
        pend c = *p;
        s->q[i] = s->q[--s->nq];
        fg_local_waiter *wake = NULL;
        int again = fg_local_answer(s->lc[c.srv], &c.ask, fake_now, c.rc,
                                    c.rc == FG_OK ? &c.d : NULL, &wake);
        if (again) {
            sim_send(s, c.srv, &c.ask, c.waiting);
            continue;
        }
        CHECK(wake == NULL); /* no waiters in this driver */
        if (c.waiting) {
            if (c.rc != FG_OK)
                s->policy++;
            else
                sim_request(s, c.srv, c.ask.key, 1);
        }
    }
}

static void sim_request(sim *s, int srv, const char *key, uint64_t cost)
{
    fg_decision d;
    fg_local_ask a;
    int rc = fg_local_check(s->lc[srv], key, strlen(key), cost, fake_now, &d,
                            &a, NULL);
    if (rc == FG_OK) {
        if (d.allowed)
            sim_admit(s, cost);
        else
            s->refused++;
    } else if (rc == FG_LOCAL_ASKED) {
        sim_send(s, srv, &a, 1);
    } else if (rc == FG_EBACKEND) {
        s->policy++;
    } else if (rc == FG_ENOMEM) {
        /* This driver does not wait: the store decides (a round trip's
         * delay aside), as the limiter does. */
        s->asks++;
        fg_local_deciding(s->lc[srv], key, strlen(key), cost, fake_now);
        CHECK_EQ(fg_check(s->shared, key, strlen(key), cost, &d), FG_OK);
        fg_local_decided(s->lc[srv], key, strlen(key), cost, d.allowed,
                         fake_now);
        if (d.allowed)
            sim_admit(s, cost);
        else
            s->refused++;
    } else {
        CHECK_EQ(rc, FG_OK);
    }
}

static void sim_tick(sim *s)
{
    fg_local_ask a[16];
    for (int i = 0; i < s->nsrv; i++) {
        size_t n;
        do {
            n = fg_local_due(s->lc[i], fake_now, a, 16);
            for (size_t k = 0; k < n; k++)
                sim_send(s, i, &a[k], 0);
        } while (n == 16);
    }
}

/* 'per_ms' requests a millisecond spread round robin over the servers for
 * 'ms' milliseconds. */
static void sim_run(sim *s, const char *key, unsigned per_ms, uint64_t ms,
                    int *next_srv)
{
    for (uint64_t t = 0; t < ms; t++) {
        for (unsigned k = 0; k < per_ms; k++) {
            sim_request(s, *next_srv, key, 1);
            *next_srv = (*next_srv + 1) % s->nsrv;
        }
        fake_now += MS;
        sim_deliver(s);
        sim_tick(s);
    }
}

/* sync, fixed window: each window's overshoot within the stated bound,
 * and far fewer store commands than requests. */
static void test_sync_fixed(void)
{
    fg_limit lim = lim_of("100/s", FG_FIXED_WINDOW, "sync:100ms");
    uint64_t rtt = 2 * MS;
    fg_mode_bound b;
    fg_limit_bound(&lim, NSRV, rtt, &b);
    sim s;
    sim_init(&s, &lim, NSRV, rtt);
    fake_now = 3000 * SEC; /* a window's start */
    int srv = 0;
    unsigned per_ms = 1; /* 1000/s: ten times the limit */
    uint64_t worst = 0;
    for (int w = 0; w < 5; w++) {
        uint64_t before = s.allowed;
        sim_run(&s, "u", per_ms, 1000, &srv);
        uint64_t got = s.allowed - before;
        uint64_t over = got > 100 ? got - 100 : 0;
        double a_others = 1000.0 * (NSRV - 1) / NSRV;
        double bound = a_others * (double)b.over_window_us / 1e6;
        if (bound > (double)b.over_cap)
            bound = (double)b.over_cap;
        CHECK(got >= 100); /* never under the limit */
        CHECK((double)over <= bound);
        if (over > worst)
            worst = over;
    }
    /* Each window, a check in the store per server as it starts (its
     * view ends with it), and a sync or two while it admits (at 10× the
     * window is full within an interval); then each server refuses on its
     * view, which asks nothing, however old. */
    CHECK(s.asks <= 5 * NSRV * 4);
    printf("sync fixed window, 8 servers, 10x: worst overshoot %llu per "
           "window (bound %.0f), %llu store commands for 5000 requests\n",
           (unsigned long long)worst,
           1000.0 * (NSRV - 1) / NSRV * (double)b.over_window_us / 1e6,
           (unsigned long long)s.asks);
    sim_free(&s);

    /* One server alone is exact. */
    sim_init(&s, &lim, 1, rtt);
    fake_now = 3100 * SEC;
    srv = 0;
    for (int w = 0; w < 3; w++) {
        uint64_t before = s.allowed;
        sim_run(&s, "u", 1, 1000, &srv);
        CHECK_EQ(s.allowed - before, 100);
    }
    sim_free(&s);
}

/* sync, token bucket: the overshoot is a debt paid back, so over a long
 * run what is admitted stays within burst + rate * time + one bound. */
static void test_sync_token(void)
{
    fg_limit lim = lim_of("100/s", FG_TOKEN_BUCKET, "sync:200ms");
    uint64_t rtt = 2 * MS;
    fg_mode_bound b;
    fg_limit_bound(&lim, NSRV, rtt, &b);
    sim s;
    sim_init(&s, &lim, NSRV, rtt);
    fake_now = 4000 * SEC;
    int srv = 0;
    sim_run(&s, "u", 2, 10000, &srv); /* 2000/s for 10 s */
    double ideal = 100 + 100 * 10.0;
    double bound = 2000.0 * (NSRV - 1) / NSRV * (double)b.over_window_us / 1e6;
    printf("sync token bucket, 8 servers, 20x for 10 s: %llu admitted "
           "(ideal %.0f, bound +%.0f), %llu store commands for 20000 "
           "requests\n",
           (unsigned long long)s.allowed, ideal, bound,
           (unsigned long long)s.asks);
    CHECK((double)s.allowed <= ideal + bound);
    CHECK((double)s.allowed >= ideal * 0.95);
    CHECK(s.asks * 20 < 20000);
    sim_free(&s);
}

/* sync, one server at 50x the rate, by interval. A token bucket's units
 * admitted here refill as the store's would: at intervals shorter than
 * the bucket takes to refill (burst / rate, 1 s here) it admits nearly
 * what an exact limit would; at longer ones the store counts each
 * interval's usage at once on a bucket that refilled meanwhile, and it
 * refuses below the limit (the view once held its own usage for the
 * whole interval: 85 of 180 at sync:2s). A sliding window's view does not
 * decay the previous window, and a sync whose units span a window's end
 * counts them all in the new one: it refuses below the limit too (134
 * and 80 when every sync counted in the store's current window;
 * docs/modes.md). */
/* What an exact limit admits of a request every ms for 'ms' ms from
 * 'start' (the same arrivals as sim_run's, one server). */
static uint64_t exact_admits(const char *rate, fg_algorithm alg, uint64_t start,
                             uint64_t ms)
{
    fg_store *st = mem();
    fg_limit lim = lim_of(rate, alg, "exact");
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    uint64_t n = 0;
    fg_decision d;
    for (uint64_t t = 0; t < ms; t++) {
        fake_now = start + t * MS;
        n += fg_check(l, "u", 1, 1, &d) == FG_OK && d.allowed;
    }
    fg_limiter_free(l);
    fg_store_close(st);
    return n;
}

static void test_sync_one_server(void)
{
    static const struct {
        fg_algorithm alg;
        const char *mode;
        double at_least; /* of what exact mode admits */
    } c[] = {
        {FG_TOKEN_BUCKET, "sync:200ms", 0.95},
        {FG_TOKEN_BUCKET, "sync:500ms", 0.95},
        {FG_TOKEN_BUCKET, "sync:900ms", 0.9},
        {FG_TOKEN_BUCKET, "sync:2s", 0.65},
        {FG_SLIDING_WINDOW, "sync:200ms", 0.95},
        {FG_SLIDING_WINDOW, "sync:1s", 0.5},
        {FG_SLIDING_WINDOW, "sync:2s", 0.58},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        fg_limit lim = lim_of("20/s", c[i].alg, c[i].mode);
        double exact = (double)exact_admits("20/s", c[i].alg, 5000 * SEC, 8000);
        sim s;
        sim_init(&s, &lim, 1, 2 * MS);
        fake_now = 5000 * SEC;
        int srv = 0;
        sim_run(&s, "u", 1, 8000, &srv); /* 1000/s for 8 s */
        printf("sync %s, 1 server, %s, 50x for 8 s: %llu admitted (exact "
               "%.0f), %llu store commands\n",
               c[i].alg == FG_TOKEN_BUCKET ? "token bucket" : "sliding window",
               c[i].mode, (unsigned long long)s.allowed, exact,
               (unsigned long long)s.asks);
        CHECK((double)s.allowed <= exact + 1);
        CHECK((double)s.allowed >= exact * c[i].at_least);
        /* A sync view holds usage, not leased units: forgetting the key
         * leaves fg_local_held at 0. */
        fg_local_forget(s.lc[0], "u", 1);
        CHECK_EQ(fg_local_held(s.lc[0]), 0);
        sim_free(&s);
    }
}

/* lease, fixed window and token bucket: never over the limit; the chunks
 * grow with the traffic, so the store sees few commands. */
static void test_lease(void)
{
    uint64_t rtt = 2 * MS;
    fg_limit lim = lim_of("100/s", FG_FIXED_WINDOW, "lease");
    sim s;
    sim_init(&s, &lim, NSRV, rtt);
    fake_now = 5000 * SEC;
    int srv = 0;
    uint64_t least = UINT64_MAX;
    for (int w = 0; w < 5; w++) {
        uint64_t before = s.allowed;
        sim_run(&s, "u", 1, 1000, &srv); /* 1000/s, ten times the limit */
        uint64_t got = s.allowed - before;
        CHECK(got <= 100);
        if (got < least)
            least = got;
    }
    printf("lease fixed window, 8 servers, 10x: at most 100 a window, at "
           "least %llu; %llu store commands for 5000 requests\n",
           (unsigned long long)least, (unsigned long long)s.asks);
    CHECK(least >= 90);
    CHECK(s.asks * 10 < 5000);
    sim_free(&s);

    lim = lim_of("100/s", FG_TOKEN_BUCKET, "lease");
    sim_init(&s, &lim, NSRV, rtt);
    fake_now = 6000 * SEC;
    srv = 0;
    uint64_t t0 = fake_now;
    for (int k = 0; k < 50; k++) {
        sim_run(&s, "u", 1, 200, &srv);
        double ideal = 100 + 100.0 * (double)(fake_now - t0) / 1e6;
        CHECK((double)s.allowed <= ideal);
    }
    printf("lease token bucket, 8 servers, 10x for 10 s: %llu admitted "
           "(ideal 1100), %llu store commands\n",
           (unsigned long long)s.allowed, (unsigned long long)s.asks);
    CHECK(s.allowed >= 1000);
    sim_free(&s);
}

/* lease, sliding window: at every admission the window's estimate (the
 * previous window's count weighted by what is left of it, plus this
 * one's) is within the limit, counted by admission time: units taken
 * late in a window are not spent in the next one, where the taking
 * window's weight has dropped. 8 servers, 10 times the limit, 5 s. */
static void test_lease_sliding(void)
{
    enum { MAXLOG = 4096 };
    static uint64_t log[MAXLOG];
    fg_limit lim = lim_of("100/s", FG_SLIDING_WINDOW, "lease");
    sim s;
    sim_init(&s, &lim, NSRV, 2 * MS);
    s.log = log;
    s.maxlog = MAXLOG;
    fake_now = 7000 * SEC + 300 * MS;
    int srv = 0;
    sim_run(&s, "u", 1, 5000, &srv);
    CHECK(s.nlog < MAXLOG);
    /* The estimate at each admission, scaled by the period (1 s), as the
     * store computes it: prev * (period - into) + cur * period. */
    uint64_t win[16] = {0}, worst = 0, over = 0;
    for (size_t i = 0; i < s.nlog; i++) {
        uint64_t w = log[i] / SEC - 7000, into = log[i] % SEC;
        win[w]++;
        uint64_t prev = w ? win[w - 1] : 0;
        uint64_t est = prev * (SEC - into) + win[w] * SEC;
        if (est > worst)
            worst = est;
        over += est > 100 * SEC;
    }
    printf("lease sliding window, 8 servers, 10x for 5 s: %zu admitted, "
           "worst estimate %.2f of 100\n",
           s.nlog, (double)worst / SEC);
    CHECK_EQ(over, 0);
    CHECK(s.nlog >= 400);
    sim_free(&s);
}

/* A lease whose chunk does not fit takes what is left; a key the store
 * refused is refused here until then, without asking; units of an ended
 * lease go back (token bucket) or die with their window (fixed window). */
static void test_lease_steps(void)
{
    fg_limit lim = lim_of("10/s", FG_TOKEN_BUCKET, "lease:4");
    sim s;
    sim_init(&s, &lim, 1, 0);
    fake_now = 7000 * SEC;
    fg_decision d;
    fg_local_ask a;
    fg_local *lc = s.lc[0];
    /* Someone else took 7 of 10. */
    CHECK_EQ(fg_check(s.shared, "k", 1, 7, &d), FG_OK);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_TAKE);
    CHECK_EQ(a.units, 1); /* no traffic known yet: just the cost */
    CHECK_EQ(fg_check(s.shared, "k", 1, a.units, &d), FG_OK);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_LEASE);
    /* The next take, 1 ms later, sees a fast rate: the whole chunk (4),
     * which does not fit (2 left), so it takes the 2. */
    fake_now += MS;
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 4);
    CHECK_EQ(fg_check(s.shared, "k", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL), 1);
    CHECK_EQ(a.units, 2);
    CHECK_EQ(fg_check(s.shared, "k", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_held(lc), 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL), FG_OK);
        CHECK_EQ(d.allowed, 1);
    }
    /* Now empty: the store refuses, and so does this server until the
     * chunk it asked for is back, without asking again. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 4);
    CHECK_EQ(fg_check(s.shared, "k", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    uint64_t wait = d.retry_after_us;
    CHECK(wait > 300 * MS && wait <= 400 * MS);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 50 * MS, &d, &a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, wait - 50 * MS);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + wait, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 4);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_EBACKEND, NULL, NULL), 0);
    /* That take failed: the store may have counted it all the same (a
     * late answer), and its units are then lost until they refill. Until
     * a take is answered, each takes only what its check needs. */
    fake_now += wait + MS;
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 1);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_EBACKEND, NULL, NULL), 0);
    fake_now += MS;
    CHECK_EQ(fg_local_check(lc, "k", 1, 2, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 2);
    CHECK_EQ(fg_check(s.shared, "k", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_check(lc, "k", 1, 2, fake_now, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* Answered: the chunk follows the traffic again (fast: all 4). */
    fake_now += MS;
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 4);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_EBACKEND, NULL, NULL), 0);
    sim_free(&s);

    /* Unspent units of a token bucket's lease go back after its life,
     * saying when they were taken and how much of the bucket's time they
     * still hold: 10/min refills a unit in 6 s, so 3 taken from a full
     * bucket hold it 18 s, and 1 s later 17 s. */
    lim = lim_of("10/min", FG_TOKEN_BUCKET, "lease:5");
    sim_init(&s, &lim, 1, 0);
    lc = s.lc[0];
    fake_now = 7100 * SEC;
    CHECK_EQ(fg_local_check(lc, "g", 1, 3, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 3);
    CHECK_EQ(fg_check(s.shared, "g", 1, a.units, &d), FG_OK);
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "g", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    CHECK_EQ(fg_local_held(lc), 2);
    fg_local_ask due[4];
    CHECK_EQ(fg_local_due(lc, fake_now + 500 * MS, due, 4), 0);
    CHECK_EQ(fg_local_due(lc, fake_now + 1001 * MS, due, 4), 1);
    CHECK_EQ(due[0].op, FG_LOCAL_GIVE);
    CHECK_EQ(due[0].units, 2);
    CHECK_EQ(due[0].age_us, 1001 * MS);
    CHECK_EQ(due[0].hold_us, 18 * SEC - 1001 * MS);
    CHECK_EQ(fg_local_held(lc), 0);
    fg_local_answer(lc, &due[0], fake_now, FG_OK, NULL, NULL);
    sim_free(&s);

    /* 10/s refills those 3 in 300 ms: after the lease's 1 s life the
     * bucket holds none of them, and nothing is sent. */
    lim = lim_of("10/s", FG_TOKEN_BUCKET, "lease:5");
    sim_init(&s, &lim, 1, 0);
    lc = s.lc[0];
    CHECK_EQ(fg_local_check(lc, "g", 1, 3, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_check(s.shared, "g", 1, a.units, &d), FG_OK);
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "g", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    CHECK_EQ(fg_local_held(lc), 2);
    CHECK_EQ(fg_local_due(lc, fake_now + 1001 * MS, due, 4), 0);
    CHECK_EQ(fg_local_held(lc), 0);
    sim_free(&s);

    /* A fixed window's units die with it: nothing to send. */
    lim = lim_of("10/s", FG_FIXED_WINDOW, "lease:5");
    sim_init(&s, &lim, 1, 0);
    lc = s.lc[0];
    fake_now = 7200 * SEC;
    CHECK_EQ(fg_local_check(lc, "f", 1, 2, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_check(s.shared, "f", 1, a.units, &d), FG_OK);
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    /* Not on the due list (walked every tick, for hours with long
     * windows): they lapse at the key's next check, or its eviction. */
    CHECK_EQ(fg_local_due(lc, fake_now + 1001 * MS, due, 4), 0);
    CHECK_EQ(fg_local_held(lc), 2);
    /* fg_local_flush gives back what a live lease holds. */
    CHECK_EQ(fg_local_check(lc, "f", 1, 1, fake_now + 1001 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    fake_now += 1001 * MS;
    CHECK_EQ(fg_check(s.shared, "f", 1, a.units, &d), FG_OK);
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "f", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    uint64_t held = fg_local_held(lc);
    if (held) {
        CHECK_EQ(fg_local_flush(lc, fake_now, due, 4), 1);
        CHECK_EQ(due[0].op, FG_LOCAL_GIVE);
        CHECK_EQ(due[0].units, held);
        fg_local_answer(lc, &due[0], fake_now, FG_OK, NULL, NULL);
    }
    sim_free(&s);
}

/* Units of 'key' an exact server admits now, one at a time. */
static uint64_t exact_fill(sim *s, const char *key)
{
    fg_decision d;
    uint64_t n = 0;
    while (n < 100 && fg_check(s->shared, key, strlen(key), 1, &d) == FG_OK &&
           d.allowed)
        n++;
    return n;
}

/* A lease's unspent units go back to the window or bucket's debt that
 * took them, never to a later one: with other servers deciding exactly
 * beside it, the span of one window (one bucket) never holds more than
 * the limit. */
static void test_lease_give_back(void)
{
    /* Sliding window 10/s: this server takes 1 at w+0.80 and 3 at w+0.85
     * (the chunk its rate needs until the window ends), and spends 2.
     * Another server admits 6 at w+0.90: window w counts 10. The lease
     * ends with window w; at w+1.30 the other admits 3 (10 weigh 7).
     * The lease's 2 go back at w+1.50, to window w (8); at w+1.95 the
     * other admits 6: 9 in window w+1 (8 weigh 0.4). Given back to
     * window w+1 instead, 8 would fit: 11. */
    fg_limit lim = lim_of("10/s", FG_SLIDING_WINDOW, "lease:6");
    sim s;
    sim_init(&s, &lim, 1, 0);
    uint64_t w = 3000 * SEC;
    fake_now = w + 800 * MS;
    sim_request(&s, 0, "k", 1);
    sim_deliver(&s);
    fake_now = w + 850 * MS;
    sim_request(&s, 0, "k", 1);
    sim_deliver(&s);
    CHECK_EQ(s.allowed, 2);
    CHECK_EQ(fg_local_held(s.lc[0]), 2);
    fake_now = w + 900 * MS;
    CHECK_EQ(exact_fill(&s, "k"), 6);
    fake_now = w + 1300 * MS;
    uint64_t second = exact_fill(&s, "k");
    CHECK_EQ(second, 3);
    fake_now = w + 1500 * MS;
    uint64_t asks = s.asks;
    sim_tick(&s);
    CHECK_EQ(s.asks, asks + 1); /* the give-back */
    CHECK_EQ(fg_local_held(s.lc[0]), 0);
    fake_now = w + 1950 * MS;
    uint64_t third = exact_fill(&s, "k");
    CHECK_EQ(third, 6);
    CHECK(second + third <= 10);
    sim_free(&s);

    /* Token bucket 10/s: this server takes 1 at t and 6 at t+0.05 (full
     * again at t+0.7), and spends 3. Another drains 10 at t+0.7. The
     * lease's 4 lapse at t+1.05: the bucket refilled past them, so
     * nothing is sent, and 3 fit at t+1.06: 13 in [t+0.7, t+1.06], as
     * exact allows. (Given back, 4 more would fit: 17.) */
    lim = lim_of("10/s", FG_TOKEN_BUCKET, "lease:6");
    sim_init(&s, &lim, 1, 0);
    uint64_t t = 4000 * SEC;
    fake_now = t;
    sim_request(&s, 0, "b", 1);
    sim_deliver(&s);
    fake_now = t + 50 * MS;
    sim_request(&s, 0, "b", 1);
    sim_deliver(&s);
    fake_now = t + 60 * MS;
    sim_request(&s, 0, "b", 1);
    CHECK_EQ(s.allowed, 3);
    CHECK_EQ(fg_local_held(s.lc[0]), 4);
    fake_now = t + 700 * MS;
    second = exact_fill(&s, "b");
    CHECK_EQ(second, 10);
    fake_now = t + 1050 * MS;
    asks = s.asks;
    sim_tick(&s);
    CHECK_EQ(s.asks, asks);
    CHECK_EQ(fg_local_held(s.lc[0]), 0);
    fake_now = t + 1060 * MS;
    third = exact_fill(&s, "b");
    CHECK_EQ(third, 3);
    sim_free(&s);

    /* One server on an empty token bucket, a request every 120 ms (below
     * the rate): exact admits all 20. The lease waits for its chunk to fit
     * and refuses meanwhile, within the stated under_cap. */
    lim = lim_of("10/s", FG_TOKEN_BUCKET, "lease");
    sim_init(&s, &lim, 1, 0);
    fake_now = 5000 * SEC;
    CHECK_EQ(exact_fill(&s, "q"), 10);
    for (int i = 0; i < 20; i++) {
        fake_now += 120 * MS;
        sim_tick(&s);
        sim_request(&s, 0, "q", 1);
        sim_deliver(&s);
    }
    fg_mode_bound bd;
    CHECK_EQ(fg_limit_bound(&lim, 1, 0, &bd), FG_OK);
    printf("lease token bucket, 1 server below the rate: %llu of 20 "
           "refused (under_cap %llu)\n",
           (unsigned long long)s.refused, (unsigned long long)bd.under_cap);
    CHECK(s.refused > 0);
    CHECK(s.refused <= bd.under_cap);
    sim_free(&s);

    /* A large request the store refuses does not refuse smaller ones that
     * fit: 3 of 10 used elsewhere, a request of 8 refused, then requests
     * of one unit within 70 ms (this driver's retry of the refused one,
     * and 7 more), of which exact admits 7. */
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    for (int a = 0; a < 3; a++) {
        lim = lim_of("10/s", algos[a], "lease");
        sim_init(&s, &lim, 1, 0);
        fake_now = (6000 + 10 * a) * SEC;
        fg_decision ed;
        CHECK_EQ(fg_check(s.shared, "big", 3, 3, &ed), FG_OK);
        sim_request(&s, 0, "big", 8);
        sim_deliver(&s);
        for (int i = 0; i < 7; i++) {
            fake_now += 10 * MS;
            sim_request(&s, 0, "big", 1);
            sim_deliver(&s);
        }
        CHECK_EQ(fg_limit_bound(&lim, 1, 0, &bd), FG_OK);
        printf("lease %s, a request of 8 refused, then 7 of 1: %llu admitted "
               "(exact 7, under_cap %llu)\n",
               fg_algorithm_name(algos[a]), (unsigned long long)s.allowed,
               (unsigned long long)bd.under_cap);
        CHECK(s.allowed <= 7);
        CHECK(s.allowed + bd.under_cap >= 7);
        if (algos[a] == FG_FIXED_WINDOW)
            CHECK_EQ(s.allowed, 7);
        sim_free(&s);
    }
}

/* A refund to a lease whose units were all spent, and whose key left the
 * due list, puts the units back on it: they go back to the store when the
 * lease lapses, and the key can be evicted after. */
static void test_lease_refund_listed(void)
{
    fg_limit lim = lim_of("10/s", FG_SLIDING_WINDOW, "lease:6");
    sim s;
    sim_init(&s, &lim, 1, 0);
    uint64_t w = 7000 * SEC;
    fake_now = w + 100 * MS;
    sim_request(&s, 0, "k", 1);
    sim_deliver(&s);
    CHECK_EQ(s.allowed, 1);
    CHECK_EQ(fg_local_held(s.lc[0]), 0); /* a quiet key takes its cost */
    for (int i = 0; i < 3; i++) {        /* ticks that find nothing to send */
        fake_now += 100 * MS;
        sim_tick(&s);
    }
    CHECK_EQ(fg_local_refund(s.lc[0], "k", 1, 1, fake_now), 0);
    CHECK_EQ(fg_local_held(s.lc[0]), 1);
    uint64_t asks = s.asks;
    fake_now = w + 1050 * MS; /* the lease lapsed with its window */
    sim_tick(&s);
    CHECK_EQ(s.asks, asks + 1); /* the give-back */
    CHECK_EQ(fg_local_held(s.lc[0]), 0);
    sim_free(&s);
}

/* fg_limiter_sync gives the units held back while a check's take is in
 * flight, and the take reaches the store first (a blocking store's pool):
 * refused, as the store was full then. Once the give-back is answered the
 * store has the units again, and the next check takes them, for each
 * algorithm: one server, so nothing is held elsewhere (under_cap 0 for a
 * fixed window). */
static void test_lease_give_overtaken(void)
{
    static const fg_algorithm algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};
    for (int a = 0; a < 3; a++) {
        fg_limit lim = lim_of("10/h", algos[a], "lease:5");
        sim s;
        sim_init(&s, &lim, 1, 0);
        fake_now = (7200 + 3600 * a) * 10 * SEC;
        fg_decision p;
        do { /* until the store is full, some units held here */
            sim_request(&s, 0, "k", 1);
            sim_deliver(&s);
            fake_now += 10;
            CHECK_EQ(fg_peek(s.shared, "k", 1, &p), FG_OK);
        } while (p.remaining || !fg_local_held(s.lc[0]));
        uint64_t held = fg_local_held(s.lc[0]);
        fg_local_ask g[4];
        size_t n = fg_local_flush(s.lc[0], fake_now, g, 4);
        CHECK_EQ(n, 1);
        CHECK_EQ(g[0].units, held);
        /* A check needs more than it holds now: its take is refused. */
        uint64_t allowed = s.allowed;
        sim_request(&s, 0, "k", 1);
        sim_deliver(&s);
        CHECK_EQ(s.allowed, allowed);
        /* The give-back lands and is answered. */
        fake_now += 10;
        sim_send(&s, 0, &g[0], 0);
        sim_deliver(&s);
        CHECK_EQ(fg_peek(s.shared, "k", 1, &p), FG_OK);
        CHECK_EQ(p.remaining, held);
        fake_now += SEC;
        for (uint64_t i = 0; i < held; i++) {
            sim_request(&s, 0, "k", 1);
            sim_deliver(&s);
        }
        printf("lease %s, a take overtakes a give-back of %llu: %llu of them "
               "admitted after\n",
               fg_algorithm_name(algos[a]), (unsigned long long)held,
               (unsigned long long)(s.allowed - allowed));
        CHECK_EQ(s.allowed - allowed, held);
        sim_free(&s);
    }
}

/* A tick whose caller sent only part of it (serve sends 2,048 asks a turn
 * of its loop), then usage admitted, then fg_local_flush (fg_limiter_sync):
 * the tick's rest and the usage since both go to the store, so that the
 * store counts every unit admitted. */
static void test_flush_after_partial_tick(void)
{
    static const char *modes[] = {"sync:1s", "lease:4"};
    for (int m = 0; m < 2; m++) {
        fg_limit lim = lim_of("1000/h", FG_FIXED_WINDOW, modes[m]);
        sim s;
        sim_init(&s, &lim, 1, 0);
        fake_now = (9000 + 10 * m) * 3600 * SEC;
        char key[16];
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 40; i++) {
                snprintf(key, sizeof key, "f%d", i);
                sim_request(&s, 0, key, 1);
                sim_deliver(&s);
            }
        fake_now += SEC;
        fg_local_ask a[16];
        size_t n = fg_local_due(s.lc[0], fake_now, a, 10);
        for (size_t k = 0; k < n; k++)
            sim_send(&s, 0, &a[k], 0);
        sim_deliver(&s);
        for (int i = 0; i < 40; i++) {
            snprintf(key, sizeof key, "f%d", i);
            sim_request(&s, 0, key, 1);
            sim_deliver(&s);
        }
        do {
            n = fg_local_flush(s.lc[0], fake_now, a, 16);
            for (size_t k = 0; k < n; k++)
                sim_send(&s, 0, &a[k], 0);
        } while (n == 16);
        sim_deliver(&s);
        uint64_t counted = 0;
        for (int i = 0; i < 40; i++) {
            fg_decision d;
            snprintf(key, sizeof key, "f%d", i);
            CHECK_EQ(fg_peek(s.shared, key, strlen(key), &d), FG_OK);
            counted += 1000 - d.remaining;
        }
        uint64_t held = fg_local_held(s.lc[0]);
        printf("%s: a tick sent in part, then a flush: %llu admitted, the "
               "store counts %llu, %llu held here\n",
               modes[m], (unsigned long long)s.allowed,
               (unsigned long long)counted, (unsigned long long)held);
        CHECK_EQ(s.allowed, 120);
        CHECK_EQ(held, 0);
        CHECK_EQ(counted, s.allowed);
        sim_free(&s);
    }

    /* The other way round: a flush sent in part, its rest drained by a
     * tick; the next flush still sends what is due since. */
    fg_limit lim = lim_of("1000/h", FG_FIXED_WINDOW, "sync:1s");
    sim s;
    sim_init(&s, &lim, 1, 0);
    fake_now = 9100 * 3600 * SEC;
    char key[16];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 5; i++) {
            snprintf(key, sizeof key, "g%d", i);
            sim_request(&s, 0, key, 1);
            sim_deliver(&s);
        }
    fg_local_ask a[16];
    CHECK_EQ(fg_local_flush(s.lc[0], fake_now, a, 0), 0);
    size_t n = fg_local_flush(s.lc[0], fake_now, a, 2);
    CHECK_EQ(n, 2);
    for (size_t k = 0; k < n; k++)
        sim_send(&s, 0, &a[k], 0);
    n = fg_local_due(s.lc[0], fake_now + SEC, a, 16);
    CHECK_EQ(n, 3);
    for (size_t k = 0; k < n; k++)
        sim_send(&s, 0, &a[k], 0);
    sim_deliver(&s);
    sim_request(&s, 0, "g9", 1);
    sim_deliver(&s);
    sim_request(&s, 0, "g9", 1);
    n = fg_local_flush(s.lc[0], fake_now, a, 16);
    CHECK_EQ(n, 1);
    CHECK_EQ(a[0].units, 1);
    sim_free(&s);
}

/* A fixed window's lease ends with its window, on the clock of the take
 * that got it: a take's answer arrives a round trip after the store read
 * the window (the caller's clock, sent with the command), and units kept a
 * round trip into the next window would be spent beside that window's own
 * limit. So would a refusal's end, a round trip late, refuse in the next. */
static void test_lease_window_end(void)
{
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "lease:4");
    uint64_t rtt = 20 * MS;
    sim s;
    sim_init(&s, &lim, 1, rtt);
    fg_local *lc = s.lc[0];
    fg_decision d;
    fg_local_ask a;
    uint64_t end = 7400 * SEC; /* a window's end */
    /* A take of 1, answered at once, spent: the rate is now known. */
    fake_now = end - 100 * MS;
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_check(s.shared, "w", 1, a.units, &d), FG_OK);
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    /* 1 ms later a chunk of 4, which the store gives until the window's
     * end, answered a round trip later; one is spent, 3 held. */
    fake_now += MS;
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.units, 4);
    CHECK_EQ(fg_check(s.shared, "w", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_us, end - fake_now);
    fake_now += rtt;
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, fake_now, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_held(lc), 3);
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, end - 1, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* At the window's end the 2 left die with it: the next check takes
     * from the new window. */
    CHECK_EQ(fg_local_check(lc, "w", 1, 1, end, &d, &a, NULL), FG_LOCAL_ASKED);
    CHECK_EQ(fg_local_held(lc), 0);
    fg_local_answer(lc, &a, end, FG_EBACKEND, NULL, NULL);
    sim_free(&s);

    /* A refusal: someone else spent the window; the store says until its
     * end, from the take's send time; the refusal ends there. */
    sim_init(&s, &lim, 1, rtt);
    lc = s.lc[0];
    end = 7500 * SEC;
    fake_now = end - 300 * MS;
    CHECK_EQ(fg_check(s.shared, "r", 1, 10, &d), FG_OK);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, fake_now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_check(s.shared, "r", 1, a.units, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, end - fake_now);
    fake_now += rtt;
    fg_local_answer(lc, &a, fake_now, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, end - 1, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 1);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, end, &d, &a, NULL), FG_LOCAL_ASKED);
    fg_local_answer(lc, &a, end, FG_EBACKEND, NULL, NULL);
    sim_free(&s);
}

/* Waiters: a take in flight holds the other checks of its key, which are
 * woken in order by its answer. */
static void test_waiters(void)
{
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "lease:4");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fg_decision d;
    fg_local_ask a, b;
    fg_local_waiter w1, w2, *wake;
    fake_now = 8000 * SEC;
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, &w1),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &b, &w1),
             FG_LOCAL_WAITED);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &b, &w2),
             FG_LOCAL_WAITED);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 9;
    d.reset_us = SEC;
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_OK, &d, &wake), 0);
    CHECK(wake == &w1);
    CHECK(wake && wake->next == &w2);
    fg_local_free(lc);

    /* A failed take: its waiters follow the policy now; a later check
     * asks the store again. */
    lc = fg_local_new(&lim, 0, NULL, 0);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &a, &w1),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &b, &w2),
             FG_LOCAL_WAITED);
    CHECK_EQ(fg_local_answer(lc, &a, fake_now, FG_ETIMEOUT, NULL, &wake), 0);
    CHECK(wake == &w2);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, &b, &w2), FG_EBACKEND);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 1, &d, &b, &w2),
             FG_LOCAL_ASKED);
    fg_local_answer(lc, &b, fake_now, FG_ETIMEOUT, NULL, &wake);
    fg_local_free(lc);
}

/* A sync key's first check goes to the store (its view is unknown):
 * answer it allowed with 'remaining' left, the new view, and the check
 * takes the unit the store counted for it, with the store as its source. */
static void first_check(fg_local *lc, const char *key, uint64_t now,
                        uint64_t remaining, uint64_t reset_us)
{
    fg_decision d;
    fg_local_ask a;
    CHECK_EQ(fg_local_check(lc, key, strlen(key), 1, now, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_CHECK);
    CHECK_EQ(a.units, 1);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = remaining;
    d.reset_us = reset_us;
    CHECK_EQ(fg_local_answer(lc, &a, now, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_check(lc, key, strlen(key), 1, now, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, remaining);
    CHECK_EQ(d.source, FG_SOURCE_STORE);
}

/* A check the store refused reports the store as its source, once: the
 * check that asked for it; later refusals on its view are the view's. */
static void test_store_refusal(void)
{
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fg_decision d;
    fg_local_ask a;
    uint64_t t = 9500 * SEC;
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t, &d, &a, NULL), FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_CHECK);
    memset(&d, 0, sizeof d);
    d.remaining = 0;
    d.reset_us = 400 * MS;
    d.retry_after_us = 400 * MS;
    CHECK_EQ(fg_local_answer(lc, &a, t + MS, FG_OK, &d, NULL), 0);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.source, FG_SOURCE_STORE);
    CHECK_EQ(d.retry_after_us, 399 * MS);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + 2 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.source, FG_SOURCE_SYNC);
    fg_local_free(lc);
}

/* A sync that fails: the key's next check asks the store again (its
 * usage first), the policy deciding while that is in flight; the usage is
 * sent again, not lost. A view too old to admit on, or
 * of a window that ended, sends the check to the store; an old view still
 * refuses what it has no room for. */
static void test_sync_failure(void)
{
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fg_decision d;
    fg_local_ask a[4];
    fake_now = 9000 * SEC;
    first_check(lc, "k", fake_now, 9, SEC);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, a, NULL), FG_OK);
    CHECK_EQ(d.remaining, 6);
    CHECK_EQ(fg_local_due(lc, fake_now + 100 * MS, a, 4), 1);
    CHECK_EQ(a[0].op, FG_LOCAL_ADD);
    CHECK_EQ(a[0].units, 3);
    /* Another check while it is in flight counts against the view. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, a + 1, NULL), FG_OK);
    CHECK_EQ(d.remaining, 5);
    fg_local_answer(lc, &a[0], fake_now + 100 * MS, FG_ETIMEOUT, NULL, NULL);
    /* The next check sends the usage (3 again, and the one since); its
     * answer is the view that decides it. Meanwhile the policy decides,
     * and the tick has nothing more to send. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, a + 1, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a[1].op, FG_LOCAL_ADD);
    CHECK_EQ(a[1].units, 4);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now, &d, a + 2, NULL),
             FG_EBACKEND);
    CHECK_EQ(fg_local_due(lc, fake_now + 200 * MS, a, 4), 0);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 4;
    d.reset_us = 700 * MS; /* from the send time: the window's end */
    fg_local_answer(lc, &a[1], fake_now + 200 * MS, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "k", 1, 2, fake_now + 200 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_check(lc, "k", 1, 3, fake_now + 200 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 500 * MS);
    /* Fresh for an interval after its answer, and while the sync that
     * renews it is in flight (a check of an older view while it is, the
     * store decides on its own: FG_ENOMEM). */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 300 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_due(lc, fake_now + 300 * MS, a + 2, 2), 1);
    CHECK_EQ(a[2].units, 3);
    CHECK_EQ(fg_local_check(lc, "k", 1, 2, fake_now + 303 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    /* Up to the limit's timeout (5 ms): a slower sync no longer does. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 306 * MS, &d, a, NULL),
             FG_ENOMEM);
    /* An old view still refuses what it has no room for: the others'
     * usage since could only take more. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 2, fake_now + 306 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 0;
    d.reset_us = 400 * MS; /* from the sync's send time: the window's end */
    fg_local_answer(lc, &a[2], fake_now + 312 * MS, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 412 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    /* Older, with nothing left, it refuses until the window ends, and
     * sends nothing. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 413 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 287 * MS);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 699 * MS, &d, a, NULL),
             FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 1 * MS);
    CHECK_EQ(fg_local_due(lc, fake_now + 699 * MS, a + 2, 2), 0);
    /* The window ends with the view: the next check goes to the store. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 10, fake_now + 700 * MS, &d, a, NULL),
             FG_LOCAL_ASKED);
    fg_local_answer(lc, &a[0], fake_now + 700 * MS, FG_ETIMEOUT, NULL, NULL);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, fake_now + 700 * MS, &d, a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(
        fg_local_check(lc, "k", 1, 1, fake_now + 700 * MS, &d, a + 1, NULL),
        FG_EBACKEND);
    fg_local_answer(lc, &a[0], fake_now + 700 * MS, FG_ETIMEOUT, NULL, NULL);

    /* Older than an interval, with nothing in flight, a view refuses what
     * it has no room for, and the store decides the rest (a token
     * bucket's refusal there is followed by a sync, whose view shows any
     * debt). */
    uint64_t t = fake_now + 800 * MS;
    first_check(lc, "j", t, 9, SEC);
    CHECK_EQ(fg_local_check(lc, "j", 1, 10, t + 101 * MS, &d, a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 899 * MS);
    CHECK_EQ(fg_local_check(lc, "j", 1, 1, t + 101 * MS, &d, a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a[0].op, FG_LOCAL_CHECK);
    CHECK_EQ(a[0].units, 1);
    fg_local_free(lc);
}

/* An old view refuses locally what it has no room for: a token bucket's
 * as it refills at the rate, then the store decides; a sliding window's
 * view does not decay its previous window, so there the store decides. */
/* Checks the store decides while a key's first ask is in flight
 * (FG_ENOMEM) may be counted after the store answered that ask: the view
 * from its answer does not hold them, so they are held from when they
 * are sent. One server, 40 a window: 1 asks, 39 go to the store, the ask
 * answers (39 left), and the 39 are still unanswered: nothing more fits. */
static void test_sync_deciding(void)
{
    fg_limit lim = lim_of("40/min", FG_FIXED_WINDOW, "sync:1s");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fg_decision d;
    fg_local_ask a, b;
    uint64_t t = 120 * 1000 * MS;
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t, &d, &a, NULL), FG_LOCAL_ASKED);
    for (int i = 0; i < 39; i++) {
        CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + MS, &d, &b, NULL),
                 FG_ENOMEM);
        fg_local_deciding(lc, "k", 1, 1, t + MS);
    }
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 39;
    d.reset_us = 60000 * MS;
    fg_local_answer(lc, &a, t + 200 * MS, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 200 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1); /* the ask's own, granted */
    CHECK_EQ(d.source, FG_SOURCE_STORE);
    int admitted = 0;
    for (int i = 0; i < 39; i++) {
        CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 201 * MS, &d, &b, NULL),
                 FG_OK);
        admitted += d.allowed;
    }
    CHECK_EQ(admitted, 0);
    /* The store answers them, allowed: counted, still held; refused ones
     * would free their units. */
    for (int i = 0; i < 38; i++)
        fg_local_decided(lc, "k", 1, 1, 1, t + 202 * MS);
    fg_local_decided(lc, "k", 1, 1, 0, t + 202 * MS);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 203 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 203 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    fg_local_free(lc);
}

static void test_old_view(void)
{
    fg_decision d;
    fg_local_ask a;
    uint64_t t = 9700 * SEC;
    fg_limit lim = lim_of("10/s", FG_TOKEN_BUCKET, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    first_check(lc, "b", t, 0, SEC); /* empty: full again in 1 s */
    /* 150 ms later, 1.5 tokens back: room for 1, for 2 in 50 ms; full
     * again in 850 ms. */
    CHECK_EQ(fg_local_check(lc, "b", 1, 2, t + 150 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 50 * MS);
    CHECK_EQ(d.reset_us, 850 * MS);
    /* The wait counts down as the bucket refills (it once stayed a whole
     * token's time, 100 ms, whatever part of one had come back). */
    CHECK_EQ(fg_local_check(lc, "b", 1, 2, t + 190 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_us, 10 * MS);
    CHECK_EQ(d.reset_us, 810 * MS);
    CHECK_EQ(fg_local_due(lc, t + 150 * MS, &a, 1), 0);
    CHECK_EQ(fg_local_check(lc, "b", 1, 1, t + 150 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_CHECK);
    fg_local_free(lc);

    lim = lim_of("10/s", FG_SLIDING_WINDOW, "sync:100ms");
    lc = fg_local_new(&lim, 0, NULL, 0);
    first_check(lc, "s", t, 0, SEC);
    CHECK_EQ(fg_local_check(lc, "s", 1, 1, t + 50 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(fg_local_check(lc, "s", 1, 1, t + 150 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    fg_local_free(lc);
}

/* An old view's check in the store is in flight: the view, within an
 * interval and a timeout of its answer, decides the key's other checks
 * meanwhile, with that check's units held (the store counts them). One
 * unit left: the check in flight has it, the next is refused here. */
static void test_old_view_check_in_flight(void)
{
    fg_decision d;
    fg_local_ask a, b;
    uint64_t t = 9800 * SEC;
    fg_limit lim = lim_of("10/h", FG_FIXED_WINDOW, "sync:200ms");
    lim.timeout_ms = 1000;
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    first_check(lc, "k", t, 1, 3600 * SEC);
    /* 300 ms on: older than the interval, the view asks the store. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 300 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_CHECK);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 310 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 0;
    d.reset_us = 3600 * SEC;
    CHECK_EQ(fg_local_answer(lc, &a, t + 330 * MS, FG_OK, &d, NULL), 0);
    /* The check that asked takes its unit; the answer is the new view:
     * nothing left. */
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 330 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_STORE);
    CHECK_EQ(fg_local_check(lc, "k", 1, 1, t + 340 * MS, &d, &b, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.source, FG_SOURCE_SYNC);
    fg_local_free(lc);
}

/* An old view with usage admitted here and not sent yet: the store must
 * not decide the check without it. One server, a sliding window of 10 (an
 * old view never refuses there): 1 checked in the store, 9 admitted on the
 * view, then, the tick late, a check of 9 once the view is old. */
static void test_old_view_own_usage(void)
{
    sim *s = calloc(1, sizeof(*s));
    fg_limit lim = lim_of("10/10s", FG_SLIDING_WINDOW, "sync:100ms");
    fg_decision d;
    fg_local_ask a;
    if (!s)
        return;
    fake_now = 9800 * SEC;
    sim_init(s, &lim, 1, MS);
    uint64_t t0 = fake_now;
    sim_request(s, 0, "o", 1); /* asked, then granted by the store */
    fake_now += MS;
    sim_deliver(s);
    CHECK_EQ(s->allowed, 1);
    fake_now = t0 + 96 * MS; /* the view is 95 ms old: it decides */
    for (int i = 0; i < 9; i++)
        sim_request(s, 0, "o", 1);
    CHECK_EQ(s->allowed, 10);
    fake_now = t0 + 125 * MS; /* no tick since: the view is old */
    int rc = fg_local_check(s->lc[0], "o", 1, 9, fake_now, &d, &a, NULL);
    for (int i = 0; i < 3 && rc == FG_LOCAL_ASKED; i++) {
        sim_send(s, 0, &a, 0);
        fake_now += MS;
        sim_deliver(s);
        rc = fg_local_check(s->lc[0], "o", 1, 9, fake_now, &d, &a, NULL);
    }
    CHECK_EQ(rc, FG_OK);
    CHECK_EQ(d.allowed, 0);
    /* Everything admitted is in the store: nothing is left there. */
    CHECK_EQ(fg_peek(s->shared, "o", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 0);
    sim_free(s);
    free(s);
}

/* A tick that comes late keeps the interval's phase: the next one, on
 * time, still finds the work due (a periodic timer fires on its own
 * schedule, not an interval after a late turn). */
static void test_late_tick(void)
{
    fg_decision d;
    fg_local_ask a;
    uint64_t t = 9900 * SEC;
    fg_limit lim = lim_of("100/s", FG_FIXED_WINDOW, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    first_check(lc, "l", t, 99, SEC);
    CHECK_EQ(fg_local_due(lc, t, &a, 1), 0); /* the first tick: nothing */
    CHECK_EQ(fg_local_check(lc, "l", 1, 1, t + 10 * MS, &d, &a, NULL), FG_OK);
    /* Due at t + 100 ms; the timer fires 32 ms late. */
    CHECK_EQ(fg_local_due(lc, t + 132 * MS, &a, 1), 1);
    CHECK_EQ(a.op, FG_LOCAL_ADD);
    CHECK_EQ(
        fg_local_answer(
            lc, &a, t + 133 * MS, FG_OK,
            &(fg_decision){.allowed = 1, .remaining = 97, .reset_us = 800 * MS},
            NULL),
        0);
    CHECK_EQ(fg_local_check(lc, "l", 1, 1, t + 150 * MS, &d, &a, NULL), FG_OK);
    /* Its next turn, on time at t + 200 ms, sends that unit. */
    CHECK_EQ(fg_local_due(lc, t + 200 * MS, &a, 1), 1);
    fg_local_answer(lc, &a, t + 201 * MS, FG_ENOMEM, NULL, NULL);
    fg_local_free(lc);
}

/* A late refund (fg_refund_at) of units spent before the usage not sent
 * yet is the store's to give back: the usage here stays as it is. */
/* Answer ask 'a' at 'now' as the store would: allowed or refused, with
 * 'remaining' left, full again in 'reset_us' (and, refused, a unit fits
 * then); a take's follow-ups get the same answer. */
static void store_answers(fg_local *lc, fg_local_ask *a, uint64_t now,
                          int allowed, uint64_t remaining, uint64_t reset_us)
{
    fg_decision d;
    memset(&d, 0, sizeof d);
    d.allowed = allowed;
    d.remaining = remaining;
    d.reset_us = reset_us;
    d.retry_after_us = allowed ? 0 : reset_us;
    while (fg_local_answer(lc, a, now, FG_OK, &d, NULL))
        ;
}

static void test_refund_age(void)
{
    fg_decision d;
    fg_local_ask a;
    uint64_t t = 9950 * SEC;
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    first_check(lc, "r", t, 9, 900 * MS);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + 10 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.remaining, 8);
    /* Spent at t + 5 ms: before the unit here (t + 10 ms), the store's
     * to give back. The view lacks it: the next check asks the store (the
     * unit here synced first), whose answer has it. */
    CHECK_EQ(fg_local_refund_at(lc, "r", 1, 1, t + 20 * MS, 15 * MS), 1);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + 21 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_ADD);
    CHECK_EQ(a.units, 1);
    /* 10, less the first check, plus the refund, less 1 */
    store_answers(lc, &a, t + 22 * MS, 1, 9, 879 * MS);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + 22 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.remaining, 8);
    /* Spent at t + 22 ms: among the units here, held here again. */
    CHECK_EQ(fg_local_refund_at(lc, "r", 1, 1, t + 24 * MS, 2 * MS), 0);
    CHECK_EQ(fg_local_check(lc, "r", 1, 1, t + 25 * MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.remaining, 8);
    fg_local_free(lc);
}

/* A refund the store gives back, of a check it decided: the key's view
 * lacks those units. 10/h, sync:1s: a check of 6 decided in the store
 * (its view: 4 left), refunded. Then 10 checks of 1 within the interval
 * are all admitted (4 were: the fresh view refused the rest until its
 * window ended), and, on another key, a check of 10 on a view older than
 * an interval is asked of the store (the old view refused it, 53 min). */
static void test_refund_view(void)
{
    fg_decision d;
    fg_local_ask a;
    fg_limit lim = lim_of("10/h", FG_FIXED_WINDOW, "sync:1s");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    uint64_t t = 7 * 3600 * SEC;
    const char *keys[] = {"a", "b"};
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(fg_local_check(lc, keys[k], 1, 6, t, &d, &a, NULL),
                 FG_LOCAL_ASKED);
        CHECK_EQ(a.op, FG_LOCAL_CHECK);
        store_answers(lc, &a, t, 1, 4, 3200 * SEC);
        CHECK_EQ(fg_local_check(lc, keys[k], 1, 6, t, &d, &a, NULL), FG_OK);
        CHECK_EQ(d.source, FG_SOURCE_STORE);
        /* Given back by the store (nothing of it here). */
        CHECK_EQ(fg_local_refund_at(lc, keys[k], 1, 6, t + MS, 0), 6);
    }
    int admitted = 0;
    for (int i = 0; i < 10; i++) {
        uint64_t now = t + (2 + 2 * i) * MS;
        int rc = fg_local_check(lc, "a", 1, 1, now, &d, &a, NULL);
        if (rc == FG_LOCAL_ASKED) {
            CHECK_EQ(a.op, FG_LOCAL_CHECK);
            /* The store has the 6 again. */
            store_answers(lc, &a, now, 1, 9, 3200 * SEC);
            rc = fg_local_check(lc, "a", 1, 1, now, &d, &a, NULL);
        }
        CHECK_EQ(rc, FG_OK);
        admitted += d.allowed;
    }
    CHECK_EQ(admitted, 10);
    /* Key b, 2 s on: its view is old, and lacks the 6 the store has. */
    CHECK_EQ(fg_local_check(lc, "b", 1, 10, t + 2 * SEC, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_CHECK);
    CHECK_EQ(a.units, 10);
    fg_local_answer(lc, &a, t + 2 * SEC, FG_ETIMEOUT, NULL, NULL);
    fg_local_free(lc);
}

/* A lease remembers the store's refusal of a take, and refuses the checks
 * that need as much until it could fit: a refund given back to the store
 * makes room there, and the next such check asks again. */
static void test_lease_refund_refusal(void)
{
    fg_decision d;
    fg_local_ask a;
    fg_limit lim = lim_of("10/h", FG_FIXED_WINDOW, "lease");
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    uint64_t t = 7 * 3600 * SEC;
    CHECK_EQ(fg_local_check(lc, "k", 1, 10, t, &d, &a, NULL), FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_TAKE);
    store_answers(lc, &a, t, 0, 4, 3000 * SEC);
    CHECK_EQ(fg_local_check(lc, "k", 1, 10, t + MS, &d, &a, NULL), FG_OK);
    CHECK_EQ(d.allowed, 0); /* the store's refusal, remembered */
    /* 6 units spent long before, given back to the store. */
    CHECK_EQ(fg_local_refund_at(lc, "k", 1, 6, t + 2 * MS, 10 * SEC), 6);
    CHECK_EQ(fg_local_check(lc, "k", 1, 10, t + 3 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(a.op, FG_LOCAL_TAKE);
    fg_local_answer(lc, &a, t + 3 * MS, FG_ETIMEOUT, NULL, NULL);
    /* The refund given back while the take was in flight (queued behind
     * it): the store's refusal, sent before, is not remembered. */
    CHECK_EQ(fg_local_check(lc, "r", 1, 10, t, &d, &a, NULL), FG_LOCAL_ASKED);
    CHECK_EQ(fg_local_refund_at(lc, "r", 1, 6, t + MS, 10 * SEC), 6);
    store_answers(lc, &a, t + 2 * MS, 0, 4, 3000 * SEC);
    CHECK_EQ(fg_local_check(lc, "r", 1, 10, t + 3 * MS, &d, &a, NULL),
             FG_LOCAL_ASKED);
    fg_local_answer(lc, &a, t + 3 * MS, FG_ETIMEOUT, NULL, NULL);
    fg_local_free(lc);
}

/* The same through a sync limiter, each algorithm, on the memory store:
 * a check of 6 on 10/h refunded (fg_refund), or a set of the key twice at
 * 6 (refused: its first item, which the store decided, refunded there).
 * Then a check of 10 is admitted (its view refused it for the window),
 * and so are 10 checks of 1 on another key (4 were). */
static void test_refund_limiter(void)
{
    fg_algorithm algs[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW, FG_TOKEN_BUCKET};
    fg_store *st = mem();
    fake_now = 7 * 3600 * SEC + 5 * SEC;
    for (int g = 0; g < 3; g++)
        for (int how = 0; how < 2; how++) {
            /* (Not a token bucket's set: its refund may give back a
             * fraction of a unit less than it took, as its checks ran on
             * the real clock, and then 9 fit.) */
            if (algs[g] == FG_TOKEN_BUCKET && how == 1)
                continue;
            fg_limit lim = lim_of("10/h", algs[g], "sync:10s");
            fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
            CHECK(l != NULL);
            if (!l)
                continue;
            fg_decision d;
            for (const char *k = "kj"; *k; k++) {
                if (how == 0) {
                    CHECK_EQ(fg_check(l, k, 1, 6, &d), FG_OK);
                    CHECK_EQ(d.allowed, 1);
                    CHECK_EQ(fg_refund(l, k, 1, 6), FG_OK);
                } else {
                    fg_set_item it[2] = {{l, k, 1}, {l, k, 1}};
                    fg_set_result r;
                    CHECK_EQ(fg_check_set(it, 2, 6, &r), FG_OK);
                    CHECK_EQ(r.decided, 1);
                    CHECK_EQ(r.unrefunded, 0);
                }
            }
            CHECK_EQ(fg_check(l, "j", 1, 10, &d), FG_OK);
            if (!d.allowed)
                printf("sync %s, %s: a check of 10 refused after the refund\n",
                       fg_algorithm_name(algs[g]),
                       how ? "a refused set" : "fg_refund");
            CHECK_EQ(d.allowed, 1);
            int admitted = 0;
            for (int i = 0; i < 12; i++) {
                CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_OK);
                admitted += d.allowed;
            }
            if (admitted != 10)
                printf("sync %s, %s: %d of 10 admitted after the refund\n",
                       fg_algorithm_name(algs[g]),
                       how ? "a refused set" : "fg_refund", admitted);
            CHECK_EQ(admitted, 10);
            fg_limiter_free(l);
        }
    fg_store_close(st);
}

/* A lease check of 'cost' units of 'key' at fake_now, its takes answered by
 * 'shared' (the store's exact limiter) until it decides. */
static int lease_check(fg_local *lc, fg_limiter *shared, const char *key,
                       uint64_t cost, fg_decision *d)
{
    fg_decision sd;
    fg_local_ask a;
    int rc;
    while ((rc = fg_local_check(lc, key, strlen(key), cost, fake_now, d, &a,
                                NULL)) == FG_LOCAL_ASKED) {
        do
            rc = fg_check(shared, a.key, a.keylen, a.units, &sd);
        while (fg_local_answer(lc, &a, fake_now, rc, &sd, NULL));
    }
    return rc;
}

/* A sliding window's lease of a period longer than a lease's life (1 s):
 * a take in the same window keeps the units held (they were given back,
 * and the check refused, when the lease's end was taken for the window's).
 * 9/min, three checks of 3 a millisecond apart: all three fit. */
static void test_lease_long_window(void)
{
    fg_limit lim = lim_of("9/min", FG_SLIDING_WINDOW, "lease");
    fg_limit ex = lim;
    ex.mode = FG_MODE_EXACT;
    fg_store *st = mem();
    fg_limiter *shared = fg_limiter_new(st, &ex, NULL, 0);
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fake_now = 9960 * SEC;
    uint64_t admitted = 0;
    for (int i = 0; i < 4; i++) {
        fg_decision d;
        CHECK_EQ(lease_check(lc, shared, "w", 3, &d), FG_OK);
        admitted += d.allowed ? 3 : 0;
        fake_now += MS;
    }
    CHECK_EQ(admitted, 9);
    fg_local_free(lc);
    fg_limiter_free(shared);
    fg_store_close(st);
}

/* A fixed window longer than a lease's life (1000/day): a chunk is sized
 * on a lease's life of traffic, not on what is left of the window, which
 * would have each busy server take the largest chunk (500) at once and
 * keep it to the window's end, refusing a third server below the limit.
 * Two servers at 1/s for a minute hold a few units each; a third then
 * admits all its 100 checks. */
static void test_lease_day_window(void)
{
    fg_limit lim = lim_of("1000/day", FG_FIXED_WINDOW, "lease");
    sim s;
    sim_init(&s, &lim, 3, MS);
    fake_now = 86400 * SEC * 20000 + 3600 * SEC;
    for (int i = 0; i < 60; i++) {
        sim_request(&s, i % 2, "d", 1);
        sim_request(&s, 1 - i % 2, "d", 1);
        fake_now += MS;
        sim_deliver(&s);
        fake_now += SEC - MS;
        sim_deliver(&s);
        sim_tick(&s);
    }
    uint64_t held = fg_local_held(s.lc[0]) + fg_local_held(s.lc[1]);
    uint64_t before = s.allowed;
    for (int i = 0; i < 100; i++) {
        sim_request(&s, 2, "d", 1);
        fake_now += 10 * MS;
        sim_deliver(&s);
        sim_tick(&s);
    }
    printf("lease 1000/day, 2 servers at 1/s for 60 s: %llu admitted, "
           "%llu held; a third server then admits %llu of 100\n",
           (unsigned long long)before, (unsigned long long)held,
           (unsigned long long)(s.allowed - before));
    CHECK_EQ(before, 120);
    CHECK(held <= 8);
    CHECK_EQ(s.allowed - before, 100);
    sim_free(&s);
}

/* Refunds of units spent from an earlier lease go to the store, which
 * counted them when that lease was taken; those of the current lease are
 * held again. lease:2 on 100/h, three checks (two takes), three refunds:
 * the store and the lease together hold the whole 100 again. */
static void test_lease_refund_earlier(void)
{
    fg_limit lim = lim_of("100/h", FG_FIXED_WINDOW, "lease:2");
    fg_limit ex = lim;
    ex.mode = FG_MODE_EXACT;
    fg_store *st = mem();
    fg_limiter *shared = fg_limiter_new(st, &ex, NULL, 0);
    fg_local *lc = fg_local_new(&lim, 0, NULL, 0);
    fake_now = 9970 * SEC;
    for (int i = 0; i < 3; i++) {
        fg_decision d;
        CHECK_EQ(lease_check(lc, shared, "e", 1, &d), FG_OK);
        CHECK(d.allowed);
        fake_now += MS;
    }
    uint64_t to_store = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t rest = fg_local_refund_at(lc, "e", 1, 1, fake_now, 0);
        to_store += rest;
        if (rest)
            CHECK_EQ(fg_refund(shared, "e", 1, rest), FG_OK);
    }
    fg_decision p;
    CHECK_EQ(fg_peek(shared, "e", 1, &p), FG_OK);
    CHECK(to_store > 0);
    CHECK_EQ(p.remaining + fg_local_held(lc), 100);
    fg_local_free(lc);
    fg_limiter_free(shared);
    fg_store_close(st);
}

/* Bounded: at most max_keys keys; a key with usage to send is never
 * evicted, and when no key can go a check gets FG_ENOMEM. */
static void test_bounded(void)
{
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "sync:100ms");
    fg_local *lc = fg_local_new(&lim, 4, NULL, 0);
    fg_decision d;
    fg_local_ask a[8];
    char key[16];
    fake_now = 9500 * SEC;
    for (int i = 0; i < 4; i++) {
        key[0] = 'k';
        key[1] = (char)('0' + i);
        key[2] = '\0';
        first_check(lc, key, fake_now, 9, 500 * MS);
        CHECK_EQ(fg_local_check(lc, key, strlen(key), 1, fake_now, &d, a, NULL),
                 FG_OK);
    }
    CHECK_EQ(fg_local_check(lc, "k9", 2, 1, fake_now, &d, a, NULL), FG_ENOMEM);
    CHECK_EQ(fg_local_keys(lc), 4);
    size_t n = fg_local_due(lc, fake_now + 100 * MS, a, 8);
    CHECK_EQ(n, 4);
    memset(&d, 0, sizeof d);
    d.allowed = 1;
    d.remaining = 8;
    d.reset_us = 400 * MS;
    for (size_t i = 0; i < n; i++)
        fg_local_answer(lc, &a[i], fake_now + 100 * MS, FG_OK, &d, NULL);
    CHECK_EQ(fg_local_check(lc, "k9", 2, 1, fake_now, &d, a, NULL),
             FG_LOCAL_ASKED);
    CHECK_EQ(fg_local_keys(lc), 4);
    fg_local_answer(lc, &a[0], fake_now, FG_ETIMEOUT, NULL, NULL);
    CHECK_EQ(fg_local_check(lc, "k", 1, 11, fake_now, &d, a, NULL), FG_ECOST);
    CHECK_EQ(fg_local_check(lc, "k", 1, 0, fake_now, &d, a, NULL), FG_ECOST);
    fg_local_free(lc);
}

/* One check of 'key' at 'now', its takes granted (a fixed window that ends
 * at 'window_end'): the code of the check that settled it. */
static int leased_check(fg_local *lc, const char *key, uint64_t now,
                        uint64_t window_end)
{
    for (int round = 0; round < 4; round++) {
        fg_decision d, s;
        fg_local_ask a;
        fg_local_waiter w;
        int rc = fg_local_check(lc, key, strlen(key), 1, now, &d, &a, &w);
        if (rc != FG_LOCAL_ASKED)
            return rc;
        memset(&s, 0, sizeof s);
        s.allowed = 1;
        s.limit = 60000000;
        s.remaining = 1000000;
        s.reset_us = window_end - now;
        s.source = FG_SOURCE_STORE;
        fg_local_answer(lc, &a, now, FG_OK, &s, NULL);
    }
    return FG_EINVAL;
}

/* A full table whose oldest keys hold leases to the end of a long window
 * (a fixed window's lease is not due before then) still takes new keys:
 * an insert looks past the keys it cannot evict. */
static void test_bounded_leases(void)
{
    fg_limit lim = lim_of("60000000/h", FG_FIXED_WINDOW, "lease");
    const uint64_t max_keys = 64, end = 3600 * SEC;
    fg_local *lc = fg_local_new(&lim, max_keys, NULL, 0);
    uint64_t now = SEC;
    char key[32];
    /* 16 keys, each checked twice: the second take leases a chunk that
     * lasts to the window's end. */
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof key, "pin%d", i);
        CHECK_EQ(leased_check(lc, key, now, end), FG_OK);
        now += 100;
        CHECK_EQ(leased_check(lc, key, now, end), FG_OK);
    }
    int refused = 0;
    for (uint64_t i = 0; i < 4 * max_keys; i++) {
        snprintf(key, sizeof key, "fresh%llu", (unsigned long long)i);
        now += 10;
        refused += leased_check(lc, key, now, end) == FG_ENOMEM;
    }
    int hot = 0;
    for (int i = 0; i < 100; i++) {
        now += 10;
        hot += leased_check(lc, "hot", now, end) == FG_OK;
    }
    /* Each time the leased keys come round to the old end again (every
     * 48 inserts here), two inserts move them on, 8 at a time, and find
     * no room: 10 of these 256. */
    CHECK(refused <= 12);
    CHECK_EQ(hot, 100);
    CHECK(fg_local_keys(lc) <= max_keys);
    fg_local_free(lc);
}

/* On the memory store, a limiter in a mode keeps at most the store's
 * max_keys keys of its own: a flood of fresh keys holds no more here than
 * in the store. */
static void test_limiter_bounded(void)
{
    static const char *const modes[] = {"sync:10s", "lease"};
    for (int m = 0; m < 2; m++) {
        fg_memory_options o = {.clock = fake_clock, .max_keys = 1000};
        fg_store *st = fg_store_open_memory(&o, NULL, 0);
        fg_limit lim = lim_of("10/s", FG_TOKEN_BUCKET, modes[m]);
        fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
        CHECK(l != NULL);
        fg_decision d;
        char key[32];
        int allowed = 0;
        for (int i = 0; i < 5000; i++) {
            int n = snprintf(key, sizeof key, "fresh%d", i);
            allowed += fg_check(l, key, (size_t)n, 1, &d) == FG_OK && d.allowed;
            if (i % 100 == 99) {
                fake_now += 20 * SEC; /* leases lapse, usage is due */
                CHECK_EQ(fg_limiter_sync(l), FG_OK);
            }
        }
        CHECK_EQ(allowed, 5000);
        CHECK(fg__mode_keys(l) <= 1000);
        CHECK(fg_store_keys(st) <= 1000);
        fg_limiter_free(l);
        /* Set lower, the table holds no more: the other keys are decided
         * by the store. */
        l = fg_limiter_new(st, &lim, NULL, 0);
        CHECK_EQ(fg_limiter_set_local_keys(l, 0), FG_EINVAL);
        CHECK_EQ(fg_limiter_set_local_keys(l, 50), FG_OK);
        allowed = 0;
        for (int i = 0; i < 500; i++) {
            int n = snprintf(key, sizeof key, "again%d", i);
            allowed += fg_check(l, key, (size_t)n, 1, &d) == FG_OK && d.allowed;
            if (i % 10 == 9) {
                fake_now += 20 * SEC;
                CHECK_EQ(fg_limiter_sync(l), FG_OK);
            }
        }
        CHECK_EQ(allowed, 500);
        CHECK(fg__mode_keys(l) <= 50);
        fg_limiter_free(l);
        fg_limit ex = lim;
        ex.mode = FG_MODE_EXACT;
        l = fg_limiter_new(st, &ex, NULL, 0);
        CHECK_EQ(fg_limiter_set_local_keys(l, 50), FG_EINVAL);
        fg_limiter_free(l);
        fg_store_close(st);
    }
}

/* The limiter in a mode on a blocking memory store: decided here, synced
 * by fg_limiter_sync; a refund gives the units back here. */
static void test_limiter(void)
{
    fg_store *st = mem();
    fake_now = 10000 * SEC;
    fg_limit lim = lim_of("10/s", FG_FIXED_WINDOW, "sync:10s");
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    fg_limit ex = lim;
    ex.mode = FG_MODE_EXACT;
    fg_limiter *e = fg_limiter_new(st, &ex, NULL, 0);
    CHECK(l && e);
    fg_decision d;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(fg_check(l, "k", 1, 1, &d), FG_OK);
        /* The first one the store decides: the key has no view yet. */
        CHECK_EQ(d.source, i == 0 ? FG_SOURCE_STORE : FG_SOURCE_SYNC);
    }
    CHECK_EQ(fg_refund(l, "k", 1, 1), FG_OK);
    /* (The memory store keeps each limiter's keys apart: peek through
     * the same one; on Redis every limiter of the name shares them.) */
    CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 9); /* the first check's, sent after it */
    CHECK_EQ(fg_limiter_sync(l), FG_OK);
    CHECK_EQ(fg_peek(l, "k", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 8);
    fg_limiter_free(l);

    lim = lim_of("10/s", FG_FIXED_WINDOW, "lease:4");
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_check(l, "q", 1, 2, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.source, FG_SOURCE_LEASE);
    /* What is left of the limit, not of the lease: 8, until the window
     * ends (the store's window starts at this whole second of its fake
     * clock; the lease counts from the take on the real one, a few us
     * before the answer). */
    CHECK_EQ(d.remaining, 8);
    CHECK(d.reset_us <= SEC && d.reset_us > SEC - 50 * MS);
    CHECK_EQ(fg_peek(l, "q", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 8);
    CHECK_EQ(fg_limiter_sync(l), FG_OK); /* nothing held: 2 taken, 2 spent */
    CHECK_EQ(fg_check(l, "q", 1, 8, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(fg_check(l, "q", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(fg_peek(l, "q", 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 0);
    fg_limiter_free(l);

    /* A refund of a check the store decided (a sync key's first) goes
     * back to the store: the key then admits its whole limit, 10. */
    lim = lim_of("10/h", FG_FIXED_WINDOW, "sync:10s");
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_check(l, "f", 1, 5, &d), FG_OK);
    CHECK(d.allowed && d.source == FG_SOURCE_STORE);
    CHECK_EQ(fg_refund(l, "f", 1, 5), FG_OK);
    int more = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 20; i++)
            more += fg_check(l, "f", 1, 1, &d) == FG_OK && d.allowed;
        CHECK_EQ(fg_limiter_sync(l), FG_OK);
    }
    CHECK_EQ(more, 10);
    fg_limiter_free(l);

    /* fg_reset of a key clears what the modes hold of it here too: a lease
     * spends no unit the reset took away, a used-up sync view refuses no
     * more; the key has its whole limit again (10 of 10). */
    static const char *const modes[] = {"lease:4", "sync:10s"};
    for (int m = 0; m < 2; m++) {
        lim = lim_of("10/h", FG_FIXED_WINDOW, modes[m]);
        l = fg_limiter_new(st, &lim, NULL, 0);
        int used = 0, fit = 0;
        for (int i = 0; i < (m ? 12 : 3); i++)
            used += fg_check(l, "r", 1, 1, &d) == FG_OK && d.allowed;
        CHECK_EQ(fg_reset(l, "r", 1), FG_OK);
        for (int i = 0; i < 30; i++)
            fit += fg_check(l, "r", 1, 1, &d) == FG_OK && d.allowed;
        CHECK_EQ(used, m ? 10 : 3);
        CHECK_EQ(fit, 10);
        fg_limiter_free(l);
    }

    /* Shadow mode still allows what a mode refuses, and says so. */
    lim = lim_of("1/s", FG_FIXED_WINDOW, "lease");
    lim.shadow = 1;
    l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK_EQ(fg_check(l, "z", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.shadowed, 0);
    CHECK_EQ(fg_check(l, "z", 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.shadowed, 1);
    fg_limiter_free(l);
    fg_limiter_free(e);
    fg_store_close(st);
}

int main(void)
{
    test_lease_sliding();
    test_add();
    test_parse();
    test_sync_fixed();
    test_sync_token();
    test_sync_one_server();
    test_lease();
    test_lease_steps();
    test_lease_give_back();
    test_lease_refund_listed();
    test_lease_give_overtaken();
    test_flush_after_partial_tick();
    test_lease_window_end();
    test_waiters();
    test_sync_failure();
    test_store_refusal();
    test_sync_deciding();
    test_old_view();
    test_old_view_check_in_flight();
    test_old_view_own_usage();
    test_late_tick();
    test_refund_age();
    test_refund_view();
    test_lease_refund_refusal();
    test_refund_limiter();
    test_lease_long_window();
    test_lease_day_window();
    test_lease_refund_earlier();
    test_bounded();
    test_bounded_leases();
    test_limiter();
    test_limiter_bounded();
    return TEST_DONE();
}
