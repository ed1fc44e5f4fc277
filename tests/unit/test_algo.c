/* test_algo.c -- the three algorithms through fg__algo_check, from DESIGN.md
 * section 3: boundaries worked out by hand, then properties over many
 * pseudo-random sequences (a fixed-seed PRNG, so every run is the same). */
#include <stdlib.h>

#include "../harness.h"
#include "algo.h"

#define SEC 1000000ull
#define MS  1000ull

/* Parameters for 'rate' with 'algo' and 'burst' (0: the limit). */
static fg__algo_params params(fg_algorithm algo, const char *rate,
                              uint64_t burst)
{
    fg_limit l;
    fg__algo_params p;
    char err[256] = "";
    memset(&p, 0, sizeof(p));
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    l.algorithm = algo;
    l.burst = burst;
    int rc = fg__algo_params_init(&l, &p, err, sizeof(err));
    CHECK_EQ(rc, FG_OK);
    if (rc != FG_OK)
        fprintf(stderr, "  params %s: %s\n", rate, err);
    return p;
}

static int check(const fg__algo_params *p, fg__algo_state *s, uint64_t now,
                 uint64_t cost, fg_decision *d)
{
    uint64_t expires = 0;
    memset(d, 0xee, sizeof(*d));
    return fg__algo_check(p, s, now, cost, d, &expires);
}

/* The decision on a copy of 's', leaving 's' as it is. */
static int peek(const fg__algo_params *p, const fg__algo_state *s, uint64_t now,
                uint64_t cost, fg_decision *d)
{
    fg__algo_state c = *s;
    return check(p, &c, now, cost, d);
}

static const fg_algorithm all_algos[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                         FG_TOKEN_BUCKET};

/* ---- 10/s: the 10th and 11th request ------------------------------- */

static void test_tenth_and_eleventh(void)
{
    for (int i = 0; i < 3; i++) {
        fg__algo_params p = params(all_algos[i], "10/s", 0);
        fg__algo_state s = {0}, before;
        fg_decision d;
        /* 5.25 s: window 5 of the window algorithms, 250 ms into it. */
        uint64_t now = 5 * SEC + 250 * MS;
        for (uint64_t n = 1; n <= 10; n++) {
            CHECK_EQ(check(&p, &s, now, 1, &d), FG_OK);
            CHECK_EQ(d.allowed, 1);
            CHECK_EQ(d.limit, 10);
            CHECK_EQ(d.remaining, 10 - n);
            CHECK_EQ(d.retry_after_ms, 0);
            CHECK_EQ(d.retry_after_us, 0);
            switch (all_algos[i]) {
            case FG_FIXED_WINDOW: /* the window ends at 6 s: 750 ms */
                CHECK_EQ(d.reset_ms, 750);
                CHECK_EQ(d.reset_us, 750 * MS);
                break;
            case FG_SLIDING_WINDOW: /* this window's count weighs until 7 s */
                CHECK_EQ(d.reset_ms, 1750);
                CHECK_EQ(d.reset_us, 1750 * MS);
                break;
            default: /* n tokens of T = 100 ms each to refill */
                CHECK_EQ(d.reset_ms, n * 100);
                CHECK_EQ(d.reset_us, n * 100 * MS);
            }
        }
        before = s;
        CHECK_EQ(check(&p, &s, now, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(d.limit, 10);
        CHECK_EQ(d.remaining, 0);
        CHECK(memcmp(&s, &before, sizeof(s)) == 0);
        switch (all_algos[i]) {
        case FG_FIXED_WINDOW:
            CHECK_EQ(d.retry_after_ms, 750);
            CHECK_EQ(d.reset_ms, 750);
            CHECK_EQ(d.retry_after_us, 750 * MS);
            CHECK_EQ(d.reset_us, 750 * MS);
            break;
        case FG_SLIDING_WINDOW:
            /* cur 10 + 1 > 10: wait for the next window, where the 10 weigh
             * 10 * (1 s - e) / 1 s; 10 (1 s - e) + 1 s <= 10 s at e = 100 ms:
             * 750 + 100 ms. */
            CHECK_EQ(d.retry_after_ms, 850);
            CHECK_EQ(d.reset_ms, 1750);
            CHECK_EQ(d.retry_after_us, 850 * MS);
            CHECK_EQ(d.reset_us, 1750 * MS);
            break;
        default: /* one token of T = 100 ms */
            CHECK_EQ(d.retry_after_ms, 100);
            CHECK_EQ(d.reset_ms, 1000);
            CHECK_EQ(d.retry_after_us, 100 * MS);
            CHECK_EQ(d.reset_us, 1000 * MS);
        }
    }
}

/* ---- window edges -------------------------------------------------- */

static void test_fixed_window_edge(void)
{
    fg__algo_params p = params(FG_FIXED_WINDOW, "10/s", 0);
    fg__algo_state s = {0};
    fg_decision d;
    for (int n = 0; n < 10; n++)
        check(&p, &s, 7 * SEC + 1, 1, &d);
    /* The last microsecond of window 7: refused, 1 us left -> 1 ms. */
    CHECK_EQ(check(&p, &s, 8 * SEC - 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 1);
    CHECK_EQ(d.reset_ms, 1);
    CHECK_EQ(d.retry_after_us, 1);
    CHECK_EQ(d.reset_us, 1);
    /* 999 us before its end: 999 us, still 1 ms. */
    CHECK_EQ(peek(&p, &s, 8 * SEC - 999, 1, &d), FG_OK);
    CHECK_EQ(d.retry_after_us, 999);
    CHECK_EQ(d.retry_after_ms, 1);
    CHECK_EQ(peek(&p, &s, 8 * SEC - 1001, 1, &d), FG_OK);
    CHECK_EQ(d.retry_after_us, 1001);
    CHECK_EQ(d.retry_after_ms, 2);
    /* The first microsecond of window 8: a fresh window, all 10 again. */
    CHECK_EQ(check(&p, &s, 8 * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 9);
    CHECK_EQ(d.reset_ms, 1000);
    /* Filling at the last microsecond then the first of the next window
     * allows 2 x limit in 2 us: the known cost of fixed windows. */
    fg__algo_state t = {0};
    CHECK_EQ(check(&p, &t, 9 * SEC - 1, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_ms, 1);
    CHECK_EQ(check(&p, &t, 9 * SEC, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
}

static void test_sliding_window_edge(void)
{
    fg__algo_params p = params(FG_SLIDING_WINDOW, "10/s", 0);
    fg__algo_state s = {0};
    fg_decision d;
    CHECK_EQ(check(&p, &s, 9 * SEC - 1, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* Unlike the fixed window, the next window's first microsecond still
     * sees the 10 with weight (1 s - 0) / 1 s = 1. */
    CHECK_EQ(check(&p, &s, 9 * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 0);
    /* 10 (1 s - e) + 1 s <= 10 s at e = 100 ms. */
    CHECK_EQ(d.retry_after_ms, 100);
    CHECK_EQ(d.retry_after_us, 100 * MS);
    CHECK_EQ(d.reset_us, 1000 * MS); /* the 10 weigh until 10 s */
    /* Two windows on, everything has expired. */
    CHECK_EQ(check(&p, &s, 11 * SEC, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
}

/* The weighted estimate prev * (period - elapsed) / period + cur, by hand. */
static void test_sliding_window_estimate(void)
{
    fg__algo_params p = params(FG_SLIDING_WINDOW, "10/s", 0);
    fg__algo_state s = {0};
    fg_decision d;
    /* Window 5: 6 requests at 5.2 s. */
    for (int n = 0; n < 6; n++)
        CHECK_EQ(check(&p, &s, 5 * SEC + 200 * MS, 1, &d), FG_OK);
    CHECK_EQ(d.remaining, 4);
    /* 6.25 s: prev 6 weighs 6 * 0.75 = 4.5, so 10 - 4.5 = 5.5: 5 fit. */
    CHECK_EQ(peek(&p, &s, 6 * SEC + 250 * MS, 6, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 5);
    CHECK_EQ(check(&p, &s, 6 * SEC + 250 * MS, 5, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0); /* 10 - 4.5 - 5 = 0.5 */
    CHECK_EQ(d.reset_ms, 750 + 1000);
    /* One more: 4.5 + 5 + 1 = 10.5 > 10. It fits in this window when
     * 6 (1 s - e) <= (10 - 5 - 1) s, i.e. e >= 333333.3 us -> 333334 us,
     * 83334 us from now -> 84 ms. */
    fg__algo_state before = s;
    CHECK_EQ(check(&p, &s, 6 * SEC + 250 * MS, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 84);
    CHECK_EQ(d.retry_after_us, 83334);
    CHECK(memcmp(&s, &before, sizeof(s)) == 0);
    CHECK_EQ(peek(&p, &s, 6 * SEC + 333333, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0); /* 6 * 666667 + 6e6 > 10e6 */
    CHECK_EQ(peek(&p, &s, 6 * SEC + 333334, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1); /* 6 * 666666 + 6e6 <= 10e6 */
    /* 6.9 s: 6 * 0.1 = 0.6, + 5 = 5.6: remaining 4. */
    CHECK_EQ(peek(&p, &s, 6 * SEC + 900 * MS, 4, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(peek(&p, &s, 6 * SEC + 900 * MS, 5, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 4);
    /* 7.5 s: window 6's 5 weigh 2.5, window 5 is gone: remaining 7. */
    CHECK_EQ(peek(&p, &s, 7 * SEC + 500 * MS, 7, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(peek(&p, &s, 7 * SEC + 500 * MS, 8, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 7);
    /* With nothing in this window, only prev's weight is left to drain:
     * reset at the end of window 7, 500 ms. */
    CHECK_EQ(d.reset_ms, 500);
}

/* ---- token bucket: refill after exactly T ----------------------------- */

static void test_token_bucket_refill(void)
{
    /* 10/s: T = 100 ms. */
    fg__algo_params p = params(FG_TOKEN_BUCKET, "10/s", 0);
    fg__algo_state s = {0};
    fg_decision d;
    uint64_t t = 1 * SEC;
    CHECK_EQ(check(&p, &s, t, 10, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_ms, 1000);
    CHECK_EQ(check(&p, &s, t + 100 * MS - 1, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 1); /* 1 us, rounded up */
    CHECK_EQ(d.retry_after_us, 1);
    CHECK_EQ(d.reset_us, 900 * MS + 1); /* the bucket drains at t + 1 s */
    CHECK_EQ(check(&p, &s, t + 100 * MS, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
    CHECK_EQ(d.reset_ms, 1000);
    /* After 5 T, 5 tokens and no more. */
    CHECK_EQ(peek(&p, &s, t + 600 * MS, 6, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 5);
    CHECK_EQ(d.retry_after_ms, 100);
    CHECK_EQ(peek(&p, &s, t + 600 * MS, 5, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);

    /* 3/s: T = 333333.3 us, not an integer. A token is due at
     * 10 s + 333333.3 us: refused at ...333 us, allowed at ...334 us. */
    fg__algo_params q = params(FG_TOKEN_BUCKET, "3/s", 0);
    fg__algo_state u = {0};
    CHECK_EQ(check(&q, &u, 10 * SEC, 3, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.reset_ms, 1000);
    CHECK_EQ(check(&q, &u, 10 * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 334);
    CHECK_EQ(d.retry_after_us, 333334); /* the first whole us past it */
    CHECK_EQ(d.reset_us, 1000 * MS);
    CHECK_EQ(check(&q, &u, 10 * SEC + 333333, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 1);
    CHECK_EQ(d.retry_after_us, 1);
    CHECK_EQ(d.reset_us, 666667); /* 666666.7 us of refill left */
    CHECK_EQ(check(&q, &u, 10 * SEC + 333334, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* The second token is due at 10 s + 666666.7 us. */
    CHECK_EQ(check(&q, &u, 10 * SEC + 666666, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(check(&q, &u, 10 * SEC + 666667, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);

    /* Burst 20 at 10/s: 20 at once, then one per 100 ms. */
    fg__algo_params b = params(FG_TOKEN_BUCKET, "10/s", 20);
    fg__algo_state v = {0};
    CHECK_EQ(check(&b, &v, 50 * SEC, 20, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.limit, 20);
    CHECK_EQ(d.reset_ms, 2000);
    CHECK_EQ(check(&b, &v, 50 * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.retry_after_ms, 100);
}

/* ---- a cost that spans the remaining units ------------------------- */

static void test_cost_spans_remaining(void)
{
    for (int i = 0; i < 3; i++) {
        fg__algo_params p = params(all_algos[i], "10/s", 0);
        fg__algo_state s = {0}, before;
        fg_decision d;
        uint64_t now = 20 * SEC + 100 * MS;
        CHECK_EQ(check(&p, &s, now, 7, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.remaining, 3);
        /* 4 does not fit, and takes nothing. */
        before = s;
        CHECK_EQ(check(&p, &s, now, 4, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(d.remaining, 3);
        CHECK(memcmp(&s, &before, sizeof(s)) == 0);
        if (all_algos[i] == FG_TOKEN_BUCKET)
            CHECK_EQ(d.retry_after_ms, 100); /* one token short: T */
        /* 3 fits exactly. */
        CHECK_EQ(check(&p, &s, now, 3, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.remaining, 0);
        before = s;
        CHECK_EQ(check(&p, &s, now, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK(memcmp(&s, &before, sizeof(s)) == 0);
    }
}

/* ---- cost errors ------------------------------------------------------ */

static void test_cost_errors(void)
{
    for (int i = 0; i < 3; i++) {
        fg__algo_params p = params(all_algos[i], "10/s", 0);
        fg__algo_state s = {0}, zero = {0};
        fg_decision d;
        uint64_t bad[] = {0,         11, 1000, FG_MAX_COUNT, FG_MAX_COUNT + 1,
                          UINT64_MAX};
        for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
            CHECK_EQ(fg__algo_check_cost(&p, bad[j]), FG_ECOST);
            CHECK_EQ(check(&p, &s, 3 * SEC, bad[j], &d), FG_ECOST);
            CHECK(memcmp(&s, &zero, sizeof(s)) == 0);
        }
        CHECK_EQ(fg__algo_check_cost(&p, 1), FG_OK);
        CHECK_EQ(fg__algo_check_cost(&p, 10), FG_OK);
    }
    /* Burst raises the token bucket's largest cost. */
    fg__algo_params b = params(FG_TOKEN_BUCKET, "10/s", 25);
    CHECK_EQ(fg__algo_check_cost(&b, 25), FG_OK);
    CHECK_EQ(fg__algo_check_cost(&b, 26), FG_ECOST);
    /* At the largest limit, 2^53 itself is refused, 2^53 - 1 is not. */
    fg_limit l;
    fg__algo_params p;
    fg_decision d;
    CHECK_EQ(fg_limit_parse("9007199254740992/s", &l), FG_OK);
    l.algorithm = FG_FIXED_WINDOW;
    CHECK_EQ(fg__algo_params_init(&l, &p, NULL, 0), FG_OK);
    fg__algo_state s = {0};
    CHECK_EQ(check(&p, &s, SEC, FG_MAX_COUNT, &d), FG_ECOST);
    CHECK_EQ(check(&p, &s, SEC, FG_MAX_COUNT - 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 1);
    /* Counting past 2^53 must not wrap anything. */
    CHECK_EQ(check(&p, &s, SEC, FG_MAX_COUNT - 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK_EQ(d.remaining, 1);
    CHECK_EQ(check(&p, &s, SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 0);
}

/* ---- invalid limits --------------------------------------------------- */

static void test_params_errors(void)
{
    fg_limit l;
    fg__algo_params p;
    char err[256];
    CHECK_EQ(fg_limit_parse("10/s", &l), FG_OK);
    l.limit = 0;
    err[0] = '\0';
    CHECK(fg__algo_params_init(&l, &p, err, sizeof(err)) < 0);
    CHECK(err[0] != '\0');
    l.limit = FG_MAX_COUNT + 1;
    CHECK(fg__algo_params_init(&l, &p, NULL, 0) < 0);
    l.limit = 10;
    l.period_us = 999;
    CHECK(fg__algo_params_init(&l, &p, NULL, 0) < 0);
    /* A year at most, as fg_limit_parse: a sliding window's times of a
     * longer period (2^63 us) would wrap. */
    l.period_us = 365 * 86400 * SEC;
    CHECK_EQ(fg__algo_params_init(&l, &p, NULL, 0), FG_OK);
    l.period_us = 365 * 86400 * SEC + 1;
    CHECK_EQ(fg__algo_params_init(&l, &p, NULL, 0), FG_ERANGE);
    l.period_us = (uint64_t)1 << 63;
    CHECK_EQ(fg__algo_params_init(&l, &p, NULL, 0), FG_ERANGE);
    l.period_us = SEC;
    l.algorithm = (fg_algorithm)17;
    CHECK(fg__algo_params_init(&l, &p, NULL, 0) < 0);
}

/* ---- the clock stepping back ---------------------------------------- */

static void test_clock_back(void)
{
    for (int i = 0; i < 3; i++) {
        fg__algo_params p = params(all_algos[i], "10/s", 0);
        fg__algo_state s = {0}, before;
        fg_decision d;
        uint64_t t = 100 * SEC + 500 * MS;
        CHECK_EQ(check(&p, &s, t, 10, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        /* The clock steps back by 1 us, 1 s, 90 s, to 0: nothing is
         * refilled, and the wait stays within what a full drain takes. */
        uint64_t back[] = {t - 1, t - SEC, t - 90 * SEC, 0};
        for (size_t j = 0; j < sizeof(back) / sizeof(back[0]); j++) {
            before = s;
            CHECK_EQ(check(&p, &s, back[j], 1, &d), FG_OK);
            CHECK_EQ(d.allowed, 0);
            /* Unchanged; but a token bucket stepped back further than any
             * debt (8 buckets here) stores the bucket just empty. */
            if (all_algos[i] != FG_TOKEN_BUCKET || j < 2)
                CHECK(memcmp(&s, &before, sizeof(s)) == 0);
            else
                CHECK_EQ(s.a, back[j] + p.depth_us);
            CHECK(d.retry_after_ms >= 1);
            /* Never more than two periods (sliding: this window's count
             * weighs until the end of the next one). */
            CHECK(d.retry_after_ms <= 2000);
            CHECK(d.reset_ms <= 2000);
            CHECK(d.remaining <= 10);
        }
        /* Time comes back to t: the windows as before the step (no gift);
         * a token bucket stored just empty at the step has refilled since
         * on its clock (a clock that steps back and forth again, such as a
         * failover to a node that lags and back, gives a burst at most). */
        CHECK_EQ(check(&p, &s, t, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, all_algos[i] == FG_TOKEN_BUCKET);
        /* Later: normal service, no penalty. */
        uint64_t later =
            all_algos[i] == FG_SLIDING_WINDOW ? t + 2 * SEC : t + SEC;
        CHECK_EQ(check(&p, &s, later, 10, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(check(&p, &s, later, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
    }
    /* Token bucket: a step back further than any debt (90 s; 8 buckets
     * at most) finds the bucket just empty, and stores it so: the wait it
     * says is the wait (not the whole step, told as one unit), and no
     * refill is given. */
    for (int hour = 0; hour < 2; hour++) {
        /* 10/s: a bucket of 1 s, stepped back 90 s; 1/h, burst 2: a
         * bucket of 2 h, stepped back 100 h. */
        fg__algo_params p =
            params(FG_TOKEN_BUCKET, hour ? "1/h" : "10/s", hour ? 2 : 0);
        fg__algo_state s = {0};
        fg_decision d;
        uint64_t t = 1000 * 3600 * SEC, unit = hour ? 3600 * SEC : 100 * MS;
        CHECK_EQ(check(&p, &s, t, hour ? 2 : 10, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        uint64_t back = t - (hour ? 100 * 3600 * SEC : 90 * SEC);
        CHECK_EQ(check(&p, &s, back, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(d.remaining, 0);
        CHECK_EQ(d.retry_after_us, unit);
        CHECK_EQ(check(&p, &s, back + d.retry_after_us - 1, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
        CHECK_EQ(check(&p, &s, back + unit, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(check(&p, &s, back + unit, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 0);
    }
    /* Token bucket: a step back within the bucket's depth shows the tokens
     * of the earlier time, never more. */
    fg__algo_params p = params(FG_TOKEN_BUCKET, "10/s", 0);
    fg__algo_state s = {0};
    fg_decision d;
    CHECK_EQ(check(&p, &s, 100 * SEC, 4, &d), FG_OK);
    CHECK_EQ(d.remaining, 6);
    CHECK_EQ(peek(&p, &s, 100 * SEC - 300 * MS, 7, &d), FG_OK);
    CHECK_EQ(d.allowed, 0);
    CHECK(d.remaining <= 6);
    CHECK(d.retry_after_ms <= 1000);
}

/* ---- no drift --------------------------------------------------------- */

/* Take every unit 'p' allows at each millisecond for an hour from 't0' and
 * count them per 'window' us; every window but the first must get exactly
 * 'per_window', the first 'first'. */
static void no_drift(fg_algorithm algo, const char *rate, uint64_t t0,
                     uint64_t window, uint64_t per_window, uint64_t first)
{
    fg__algo_params p = params(algo, rate, 0);
    fg__algo_state s = {0};
    fg_decision d;
    uint64_t counted = 0, wrong = 0, windows = 0;
    for (uint64_t ms = 0; ms < 3600 * 1000; ms++) {
        uint64_t now = t0 + ms * MS;
        if (ms && (ms * MS) % window == 0) {
            uint64_t want = windows == 0 ? first : per_window;
            if (counted != want) {
                if (!wrong)
                    fprintf(stderr, "  %s window %llu: %llu != %llu\n", rate,
                            (unsigned long long)windows,
                            (unsigned long long)counted,
                            (unsigned long long)want);
                wrong++;
            }
            windows++;
            counted = 0;
        }
        while (check(&p, &s, now, 1, &d) == FG_OK && d.allowed)
            counted++;
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(windows + 1, 3600 * SEC / window);
    CHECK_EQ(counted, per_window); /* the last window */
}

static void test_no_drift(void)
{
    /* 10/3s, T = 300 ms: the first 3 s get the burst of 10 and the 9
     * tokens due at 0.3 .. 2.7 s; every later 3 s exactly 10. */
    no_drift(FG_TOKEN_BUCKET, "10/3s", 0, 3 * SEC, 10, 19);
    no_drift(FG_TOKEN_BUCKET, "10/3s", 1234 * SEC, 3 * SEC, 10, 19);
    /* 7/s, T = 142857.14 us: exactly 7 a second, no rounding creep. */
    no_drift(FG_TOKEN_BUCKET, "7/s", 77 * SEC, SEC, 7, 13);
    /* 3/s: 3 a second. */
    no_drift(FG_TOKEN_BUCKET, "3/s", 0, SEC, 3, 5);
    /* Fixed windows aligned on multiples of the period. */
    no_drift(FG_FIXED_WINDOW, "10/3s", 3000 * SEC, 3 * SEC, 10, 10);
}

/* ---- properties over pseudo-random sequences ------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t failures_reported;

#define PROP(cond, ...)                                                        \
    do {                                                                       \
        if (cond) {                                                            \
            th_passed++;                                                       \
        } else {                                                               \
            th_failed++;                                                       \
            if (failures_reported++ < 20) {                                    \
                fprintf(stderr, "%s:%d: %s failed: ", __FILE__, __LINE__,      \
                        #cond);                                                \
                fprintf(stderr, __VA_ARGS__);                                  \
                fputc('\n', stderr);                                           \
            }                                                                  \
        }                                                                      \
    } while (0)

static void property_run(fg_algorithm algo, const char *rate, uint64_t burst,
                         uint64_t t0, int steps)
{
    fg__algo_params p = params(algo, rate, burst);
    uint64_t max = algo == FG_TOKEN_BUCKET ? p.burst : p.limit;
    uint64_t interval = p.period_us / p.limit + 1;
    fg__algo_state s = {0};
    uint64_t now = t0;
    for (int i = 0; i < steps; i++) {
        /* Mostly short steps (about one emission interval), sometimes
         * none, sometimes whole periods. */
        uint64_t r = rng() % 16;
        if (r < 3)
            now += 0;
        else if (r < 14)
            now += rng() % (2 * interval);
        else
            now += rng() % (3 * p.period_us);
        uint64_t cost = rng() % 4 ? 1 : 1 + rng() % max;

        fg__algo_state before = s;
        fg_decision d, e;
        uint64_t expires = 0;
        int rc = fg__algo_check(&p, &s, now, cost, &d, &expires);
        PROP(rc == FG_OK, "%s %s rc %d", fg_algorithm_name(algo), rate, rc);
        if (rc != FG_OK)
            return;
        PROP(d.limit == max, "limit %llu", (unsigned long long)d.limit);
        PROP(d.remaining <= max, "remaining %llu",
             (unsigned long long)d.remaining);
        /* At most two periods (sliding window) or a whole bucket. */
        uint64_t reset_max = algo == FG_TOKEN_BUCKET
                                 ? p.burst * p.period_us / p.limit / MS + 1
                                 : 2 * p.period_us / MS;
        PROP(d.reset_ms <= reset_max, "reset %llu > %llu",
             (unsigned long long)d.reset_ms, (unsigned long long)reset_max);
        /* The milliseconds are the exact microseconds rounded up. */
        PROP(d.retry_after_ms == fg__us_to_ms_up(d.retry_after_us) &&
                 d.reset_ms == fg__us_to_ms_up(d.reset_us),
             "%s %s: ms %llu/%llu from us %llu/%llu", fg_algorithm_name(algo),
             rate, (unsigned long long)d.retry_after_ms,
             (unsigned long long)d.reset_ms,
             (unsigned long long)d.retry_after_us,
             (unsigned long long)d.reset_us);
        if (d.allowed) {
            PROP(d.retry_after_ms == 0 && d.retry_after_us == 0, "retry %llu",
                 (unsigned long long)d.retry_after_ms);
        } else {
            PROP(memcmp(&s, &before, sizeof(s)) == 0,
                 "%s %s: refused "
                 "request changed state",
                 fg_algorithm_name(algo), rate);
            /* Retrying exactly retry_after_ms later is allowed; 1 ms
             * sooner is still refused (the wait is exact, rounded up). */
            uint64_t ra = d.retry_after_ms;
            PROP(ra >= 1, "refused with retry_after 0");
            peek(&p, &s, now + ra * MS, cost, &e);
            PROP(e.allowed, "%s %s step %d: retry after %llu ms refused",
                 fg_algorithm_name(algo), rate, i, (unsigned long long)ra);
            if (ra >= 1) {
                peek(&p, &s, now + (ra - 1) * MS, cost, &e);
                PROP(!e.allowed,
                     "%s %s step %d: allowed at retry_after-1 = %llu ms",
                     fg_algorithm_name(algo), rate, i,
                     (unsigned long long)ra - 1);
            }
            /* retry_after_us is the exact wait: refused 1 us sooner. */
            uint64_t ru = d.retry_after_us;
            PROP(ru >= 1, "refused with retry_after_us 0");
            peek(&p, &s, now + ru, cost, &e);
            PROP(e.allowed, "%s %s step %d: retry after %llu us refused",
                 fg_algorithm_name(algo), rate, i, (unsigned long long)ru);
            if (ru >= 1) {
                peek(&p, &s, now + ru - 1, cost, &e);
                PROP(!e.allowed, "%s %s step %d: allowed at %llu - 1 us",
                     fg_algorithm_name(algo), rate, i, (unsigned long long)ru);
            }
        }
        /* 'remaining' is exact: that many fit now, one more does not. */
        if (d.remaining >= 1) {
            peek(&p, &s, now, d.remaining, &e);
            PROP(e.allowed, "%s %s: remaining %llu refused",
                 fg_algorithm_name(algo), rate,
                 (unsigned long long)d.remaining);
        }
        if (d.remaining + 1 <= max) {
            peek(&p, &s, now, d.remaining + 1, &e);
            PROP(!e.allowed, "%s %s: remaining+1 = %llu allowed",
                 fg_algorithm_name(algo), rate,
                 (unsigned long long)d.remaining + 1);
        }
        /* 'reset_ms': the whole limit is available then, not 1 ms before. */
        if (d.remaining == max) {
            PROP(d.reset_ms == 0 && d.reset_us == 0, "full but reset %llu",
                 (unsigned long long)d.reset_ms);
        } else {
            /* 'reset_us': exactly then, to the microsecond. */
            peek(&p, &s, now + d.reset_us, max, &e);
            PROP(e.allowed, "%s %s: full cost refused at reset %llu us",
                 fg_algorithm_name(algo), rate, (unsigned long long)d.reset_us);
            PROP(d.reset_us >= 1, "used but reset_us 0");
            if (d.reset_us >= 1) {
                peek(&p, &s, now + d.reset_us - 1, max, &e);
                PROP(!e.allowed, "%s %s: full cost allowed at reset_us - 1",
                     fg_algorithm_name(algo), rate);
            }
            peek(&p, &s, now + d.reset_ms * MS, max, &e);
            PROP(e.allowed, "%s %s: full cost refused at reset %llu ms",
                 fg_algorithm_name(algo), rate, (unsigned long long)d.reset_ms);
            PROP(d.reset_ms >= 1, "used but reset 0");
            if (d.reset_ms >= 1) {
                peek(&p, &s, now + (d.reset_ms - 1) * MS, max, &e);
                PROP(!e.allowed, "%s %s: full cost allowed at reset-1",
                     fg_algorithm_name(algo), rate);
            }
        }
        /* From 'expires' on, the state decides like a new key. */
        fg__algo_state zero = {0};
        fg_decision z;
        peek(&p, &s, expires, cost, &e);
        peek(&p, &zero, expires, cost, &z);
        PROP(expires >= now && memcmp(&e, &z, sizeof(e)) == 0,
             "%s %s: state at expires differs from a new key",
             fg_algorithm_name(algo), rate);
    }
}

/* Token bucket, one unit at a time, against GCRA in exact 128-bit
 * arithmetic, from states all around the bucket's edge: TAT from behind
 * now to past a full bucket (as a clock stepping back leaves it), at
 * rates whose emission interval is whole, fractional or below a
 * microsecond. The decision and the state after it must be the model's. */
static void test_token_unit_model(void)
{
    static const char *rates[] = {
        "10/s",    "3/s",    "7/2s",         "4099/s",
        "1/ms",    "1000/h", "1000000000/s", "999/7ms",
        "13/h",    "17/min", "1000003/day",  "9007199254740991/365day",
        "1/365day"};
    static const uint64_t bursts[] = {0, 1, 2, 25, 1000};
    typedef unsigned __int128 u128;
    uint64_t wrong = 0, n = 0, allowed = 0, wide = 0;
    for (size_t ri = 0; ri < sizeof(rates) / sizeof(rates[0]); ri++) {
        for (size_t bi = 0; bi < sizeof(bursts) / sizeof(bursts[0]); bi++) {
            fg__algo_params p;
            fg_limit l;
            CHECK_EQ(fg_limit_parse(rates[ri], &l), FG_OK);
            l.burst = bursts[bi];
            if (fg__algo_params_init(&l, &p, NULL, 0) != FG_OK) {
                /* Only a burst that takes over 35 years to refill. */
                CHECK((uint64_t)((unsigned __int128)bursts[bi] * l.period_us /
                                 l.limit) >= FG__DEPTH_MAX_US);
                continue;
            }
            wide += p.wide;
            uint64_t sc = p.scale, t = p.t_scaled;
            u128 depth = (u128)p.depth_us * sc + p.depth_frac;
            for (int k = 0; k < 4000; k++, n++) {
                uint64_t now = 40ull * 86400 * SEC + rng() % SEC;
                /* TAT: whole us from 3 before now to 3 past the depth,
                 * often right at the depth, or exactly where one more
                 * unit just fits, or a debt of fg_add up to and past its
                 * most; fraction anywhere below 1 us. */
                uint64_t span = p.depth_us + 7;
                uint64_t off =
                    rng() % 4 ? rng() % span : p.depth_us + 3 - rng() % 3;
                if (rng() % 8 == 0) {
                    uint64_t kd = fg__add_keep(&p) * p.depth_us;
                    off = rng() % 2
                              ? kd + 3 - rng() % 7
                              : p.depth_us + rng() % (kd - p.depth_us + 1);
                }
                /* Written by this limit, mostly; else under another
                 * rate, or by an older version (no tag). */
                uint64_t tag = rng() % 4 ? p.tag : rng() % 2 ? 0 : p.tag + 9;
                fg__algo_state st = {now + off - 3, rng() % sc, tag};
                if (rng() % 8 == 0)
                    st.b = sc - 1 - rng() % (sc < 3 ? sc : 3);
                if (rng() % 4 == 0) {
                    /* Within a scaled unit of the last one that fits. */
                    u128 at = depth - t + rng() % 3 - 1;
                    st.a = now + (uint64_t)(at / sc);
                    st.b = (uint64_t)(at % sc);
                }
                const fg__algo_state orig = st;
                /* The model: ahead = how far TAT is past now, scaled,
                 * at most a full bucket; the unit fits when ahead + T is
                 * at most the depth, and TAT becomes now + ahead + T. */
                u128 tat = (u128)st.a * sc + st.b, nw = (u128)now * sc;
                u128 ahead = tat > nw ? tat - nw : 0;
                fg__algo_state want = st;
                /* The most debt fg_add leaves: k buckets, its fraction
                 * rounded down to 1/scale us. */
                uint64_t k = fg__add_keep(&p);
                u128 keep =
                    ((u128)k * p.depth_us + (u128)k * p.depth_frac / sc) * sc +
                    (u128)k * p.depth_frac % sc;
                if (ahead > depth && (st.c != p.tag || ahead > keep)) {
                    /* Under another rate, or under this one deeper than
                     * any debt (a clock that stepped back): a full
                     * bucket's debt from now, stored. A debt under this
                     * rate stands, and is waited for. */
                    ahead = depth;
                    st.a = now + p.depth_us;
                    st.b = p.depth_frac;
                    st.c = p.tag;
                    want = st;
                }
                u128 next = ahead + t;
                int ok = next <= depth;
                uint64_t rem, reset_us, retry_us;
                if (ok) {
                    u128 tat2 = nw + next;
                    want.a = (uint64_t)(tat2 / sc);
                    want.b = (uint64_t)(tat2 % sc);
                    want.c = p.tag;
                    rem = (uint64_t)((depth - next) / t);
                    reset_us = (uint64_t)((next + sc - 1) / sc);
                    retry_us = 0;
                } else {
                    rem = ahead < depth ? (uint64_t)((depth - ahead) / t) : 0;
                    reset_us = (uint64_t)((ahead + sc - 1) / sc);
                    retry_us = (uint64_t)((next - depth + sc - 1) / sc);
                }
                /* Until then the state differs from a new key's. */
                uint64_t want_exp =
                    ok ? want.a + 1 : (st.a + 1 > now ? st.a + 1 : now);
                fg_decision d;
                fg__algo_state got = orig;
                uint64_t expires = 0;
                int rc = fg__algo_check(&p, &got, now, 1, &d, &expires);
                allowed += ok;
                int bad = rc != FG_OK || d.allowed != ok ||
                          d.remaining != rem || d.reset_us != reset_us ||
                          d.retry_after_us != retry_us ||
                          d.reset_ms != (reset_us + 999) / 1000 ||
                          d.retry_after_ms != (retry_us + 999) / 1000 ||
                          got.a != want.a || got.b != want.b ||
                          got.c != want.c || expires != want_exp;
                if (bad && wrong++ < 5)
                    fprintf(stderr,
                            "  %s burst %llu, TAT now%+lld us + %llu/%llu: "
                            "allowed %d remaining %llu reset_us %llu "
                            "retry_us %llu, want %d %llu %llu %llu\n",
                            rates[ri], (unsigned long long)p.burst,
                            (long long)(st.a - now), (unsigned long long)st.b,
                            (unsigned long long)sc, d.allowed,
                            (unsigned long long)d.remaining,
                            (unsigned long long)d.reset_us,
                            (unsigned long long)d.retry_after_us, ok,
                            (unsigned long long)rem,
                            (unsigned long long)reset_us,
                            (unsigned long long)retry_us);
            }
        }
    }
    CHECK_EQ(wrong, 0);
    /* Both outcomes were tried, many times, and buckets too deep for the
     * 64-bit code too. */
    CHECK(allowed > n / 4 && allowed < n * 3 / 4);
    CHECK(wide > 0);
}

/* 13/h (T = 3600 s / 13, no whole number of us) over 1,000 hours on a
 * fake clock: a scalper who asks one us before each wait ends, then when
 * it ends, then again at once, is allowed exactly 13 in every hour after
 * the first (a token bucket starts full: 13 and 12 more in its first
 * hour). No drift: the 1,000th hour is as exact as the second. Also 7 per
 * 3 s and a prime per day. */
static void test_hours_exact(void)
{
    static const struct {
        const char *rate;
        uint64_t count, period_us;
    } cases[] = {{"13/h", 13, 3600 * SEC},
                 {"7/3s", 7, 3 * SEC},
                 {"86413/day", 86413, 86400 * SEC}};
    static const fg_algorithm algos[] = {FG_TOKEN_BUCKET, FG_FIXED_WINDOW};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int a = 0; a < 2; a++) {
            fg__algo_params p = params(algos[a], cases[c].rate, 0);
            fg__algo_state s = {0};
            fg_decision d;
            const uint64_t P = cases[c].period_us;
            const uint64_t t0 = 1796083200ull * SEC; /* a whole day */
            uint64_t now = t0, first = 0, exact = 0, early = 0, cur = 0;
            uint64_t periods = cases[c].count > 1000 ? 20 : 1000;
            int64_t idx = 0;
            while (now < t0 + (periods + 2) * P) {
                if ((int64_t)((now - t0) / P) != idx) {
                    if (idx == 0)
                        first = cur;
                    else if (idx <= (int64_t)periods)
                        exact += cur == cases[c].count;
                    idx = (int64_t)((now - t0) / P);
                    cur = 0;
                }
                CHECK_EQ(check(&p, &s, now, 1, &d), FG_OK);
                if (d.allowed) {
                    cur++;
                    continue;
                }
                uint64_t wait = d.retry_after_us;
                CHECK_EQ(check(&p, &s, now + wait - 1, 1, &d), FG_OK);
                early += d.allowed;
                now += wait;
            }
            CHECK_EQ(early, 0);
            CHECK_EQ(exact, periods);
            CHECK_EQ(first, algos[a] == FG_TOKEN_BUCKET ? 2 * cases[c].count - 1
                                                        : cases[c].count);
        }
    }
}

/* fg__token_bucket_wide, the 128-bit code, against the 64-bit one on
 * buckets both can decide: the same decisions, states and expiries over
 * random sequences of costs and times, from states written under this
 * rate and under others. */
static void test_token_wide_matches(void)
{
    static const char *rates[] = {"10/s", "3/7s",   "4099/s", "13/h",
                                  "1/ms", "17/min", "999/7ms"};
    static const uint64_t bursts[] = {0, 1, 5, 1000};
    uint64_t wrong = 0, n = 0;
    for (size_t ri = 0; ri < sizeof(rates) / sizeof(rates[0]); ri++) {
        for (size_t bi = 0; bi < sizeof(bursts) / sizeof(bursts[0]); bi++) {
            fg__algo_params p = params(FG_TOKEN_BUCKET, rates[ri], bursts[bi]);
            fg__algo_params w = p;
            w.wide = 1;
            fg__algo_state a = {0}, b = {0};
            uint64_t now = 1800000000ull * SEC + rng() % SEC;
            for (int k = 0; k < 2000; k++, n++) {
                if (rng() % 50 == 0) {
                    /* Another rate wrote it: TAT up to 3 depths ahead. */
                    a.a = b.a = now + rng() % (3 * p.depth_us + 3);
                    a.b = b.b = rng() % p.scale;
                    a.c = b.c = p.tag + 1;
                }
                now += rng() % 4 ? rng() % (p.unit_up_us * 2 + 1)
                                 : rng() % (p.depth_us + 1);
                uint64_t cost = 1 + rng() % (p.burst < 4 ? p.burst : 4);
                fg_decision da, db;
                memset(&da, 0, sizeof(da));
                memset(&db, 0, sizeof(db));
                uint64_t ea = 0, eb = 0;
                int ra = fg__algo_check(&p, &a, now, cost, &da, &ea);
                int rb = fg__algo_check(&w, &b, now, cost, &db, &eb);
                if ((ra != rb || memcmp(&da, &db, sizeof(da)) != 0 ||
                     memcmp(&a, &b, sizeof(a)) != 0 || ea != eb) &&
                    wrong++ < 5)
                    fprintf(stderr,
                            "  wide %s burst %llu step %d cost %llu: %d/%llu/"
                            "%llu/%llu vs %d/%llu/%llu/%llu\n",
                            rates[ri], (unsigned long long)p.burst, k,
                            (unsigned long long)cost, da.allowed,
                            (unsigned long long)da.remaining,
                            (unsigned long long)da.reset_us,
                            (unsigned long long)da.retry_after_us, db.allowed,
                            (unsigned long long)db.remaining,
                            (unsigned long long)db.reset_us,
                            (unsigned long long)db.retry_after_us);
                a = b; /* go on from one state */
            }
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK(n > 0);
}

static void test_properties(void)
{
    static const char *rates[] = {"10/s",    "3/s",       "7/2s", "100/min",
                                  "5/15min", "250/500ms", "1/ms", "1000/h"};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < sizeof(rates) / sizeof(rates[0]); j++)
            property_run(all_algos[i], rates[j], 0, 1000 * SEC + j, 5000);
    property_run(FG_TOKEN_BUCKET, "10/s", 25, 5 * SEC, 5000);
    property_run(FG_TOKEN_BUCKET, "7/s", 1, 5 * SEC, 5000);
    property_run(FG_TOKEN_BUCKET, "100/min", 3, 5 * SEC, 5000);
    /* Realistic clock values: a monotonic clock after 40 days and a
     * wall clock (microseconds since 1970). */
    for (int i = 0; i < 3; i++) {
        property_run(all_algos[i], "10/s", 0, 40ull * 86400 * SEC, 2000);
        property_run(all_algos[i], "100/min", 0, 1800000000ull * SEC, 2000);
    }
}

/* Large rates and clock values that are still in range must work; the
 * header promises a limit of 1 .. 2^53 and a clock from any origin. */
static void test_large_values(void)
{
    fg_decision d;
    /* 4099/s (prime: T = 1e6/4099 us is not an integer) at a wall-clock
     * time, as a store using the caller's clock would pass. */
    fg__algo_params p = params(FG_TOKEN_BUCKET, "4099/s", 0);
    fg__algo_state s = {0};
    CHECK_EQ(check(&p, &s, 1800000000ull * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    CHECK_EQ(d.remaining, 4098);
    /* 999983/s after 60 days of monotonic uptime. */
    p = params(FG_TOKEN_BUCKET, "999983/s", 0);
    memset(&s, 0, sizeof(s));
    CHECK_EQ(check(&p, &s, 60ull * 86400 * SEC, 1, &d), FG_OK);
    CHECK_EQ(d.allowed, 1);
    /* A sliding window of 100 million a day. */
    p = params(FG_SLIDING_WINDOW, "100000000/day", 0);
    memset(&s, 0, sizeof(s));
    if (p.limit == 100000000) {
        CHECK_EQ(check(&p, &s, 5 * SEC, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        CHECK_EQ(d.remaining, 99999999);
    }
}

/* The window of 'now', found by the period's reciprocal (or, from 2^63
 * on, by division): a fresh key's window index and reset are exactly those
 * of now / period, for periods of many sizes and for 'now' on, just before
 * and just after window edges, at random, and around 2^63. */
static void test_window_index(void)
{
    static const char *rates[] = {"1/ms",    "3/7ms",   "10/s",   "7/2s",
                                  "100/min", "5/15min", "1000/h", "50000/day"};
    const uint64_t top = (uint64_t)1 << 63;
    uint64_t x = 0x2545f4914f6cdd1dull, wrong = 0;
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
        for (int algo = 0; algo < 2; algo++) {
            fg__algo_params p =
                params(algo ? FG_SLIDING_WINDOW : FG_FIXED_WINDOW, rates[i], 0);
            uint64_t period = p.period_us;
            for (int r = 0; r < 3000; r++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t now;
                switch (r % 6) {
                case 0: /* an edge, and either side of it */
                case 1:
                case 2: {
                    uint64_t k = (x >> (r % 40 + 20)) / period + 1;
                    now = k * period + (uint64_t)(r % 3) - 1;
                    break;
                }
                case 3:
                    now = x >> (r % 60);
                    break;
                case 4: /* around 2^63 */
                    now = top - 2 + (uint64_t)(r % 5);
                    break;
                default: /* above it, leaving room for the window's end */
                    now = top + (x >> 2);
                    break;
                }
                fg__algo_state s = {0};
                fg_decision d;
                /* A sliding window's reset also waits out this window's
                 * weight on the next: only the fixed window's is the rest
                 * of the window. */
                if (check(&p, &s, now, 1, &d) != FG_OK || !d.allowed ||
                    s.a != now / period + 1 ||
                    (!algo && d.reset_us != period - now % period))
                    wrong++;
            }
        }
    }
    CHECK_EQ(wrong, 0);
}

/* Division by an invariant as a multiplication: exact against '/' for
 * divisors of every size (powers of two, their neighbours, random) and
 * dividends up to 2^63 - 1, the edges included. */
static void test_divisor(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull, wrong = 0, n = 0;
    for (int k = 0; k < 63; k++) {
        uint64_t base = (uint64_t)1 << k;
        uint64_t ds[] = {base, base + 1, base > 2 ? base - 1 : 3,
                         base * 3 / 2 + 1};
        for (int j = 0; j < 4; j++) {
            uint64_t d = ds[j] ? ds[j] : 1;
            fg__divisor v;
            fg__divisor_init(&v, d);
            uint64_t edges[] = {0,
                                1,
                                d - 1,
                                d,
                                d + 1,
                                ((uint64_t)1 << 63) - 1,
                                ((uint64_t)1 << 63) - 1 - d};
            for (int e = 0; e < 7; e++, n++)
                wrong += fg__div(&v, edges[e]) != edges[e] / d;
            for (int r = 0; r < 2000; r++, n++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t y = (x >> (r % 63 + 1));
                wrong += fg__div(&v, y) != y / d;
            }
        }
    }
    CHECK_EQ(wrong, 0);
    CHECK(n > 500000);
}

int main(void)
{
    test_divisor();
    test_window_index();
    test_tenth_and_eleventh();
    test_fixed_window_edge();
    test_sliding_window_edge();
    test_sliding_window_estimate();
    test_token_bucket_refill();
    test_cost_spans_remaining();
    test_cost_errors();
    test_params_errors();
    test_clock_back();
    test_no_drift();
    test_properties();
    test_token_unit_model();
    test_token_wide_matches();
    test_hours_exact();
    test_large_values();
    return TEST_DONE();
}
