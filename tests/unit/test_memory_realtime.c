/* test_memory_realtime.c -- the memory store's waits against real time,
 * with real sleeps (the one test of the store that sleeps: its promise is
 * about time). The README promises that a request refused with
 * retry_after_us is allowed when retried that long after the decision,
 * and refused when retried earlier. The test reads CLOCK_MONOTONIC just
 * before (a0) and after (a1) a refusal, then sleeps to an instant and
 * checks again between readings b0 and b1:
 *   - b1 < a0 + retry_after_us: the retry is surely early, and must be
 *     refused;
 *   - b0 >= a1 + retry_after_us: it is surely on time, and must be
 *     allowed;
 * anything between is a retry the scheduler moved across the edge, and is
 * not judged (it is counted). A store clock that lags real time (a coarse
 * clock's tick) fails both. About 3 s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "floodgate.h"

#define SEC 1000000ull

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_until(uint64_t us)
{
    struct timespec ts = {(time_t)(us / SEC), (long)(us % SEC) * 1000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* Refuse 'key' of 'l' by using it up; the refusal's readings and wait. */
static int refuse(fg_limiter *l, const char *key, uint64_t *a0, uint64_t *a1,
                  uint64_t *wait)
{
    fg_decision d;
    for (int i = 0; i < 100000; i++) {
        *a0 = mono_us();
        int rc = fg_check(l, key, strlen(key), 1, &d);
        *a1 = mono_us();
        if (rc != FG_OK)
            return 0;
        if (!d.allowed) {
            *wait = d.retry_after_us;
            return d.retry_after_us > 0 &&
                   d.retry_after_ms * 1000 >= d.retry_after_us;
        }
    }
    return 0;
}

/* A check at about 'at', judged as above: 1 early (allowed), 2 late
 * (refused), 0 right or not judged ('*judged' says which); '*allowed' is
 * its decision. */
static int probe(fg_limiter *l, const char *key, uint64_t at, uint64_t a0,
                 uint64_t a1, uint64_t wait, int *judged, int *allowed)
{
    fg_decision d;
    sleep_until(at);
    uint64_t b0 = mono_us();
    CHECK_EQ(fg_check(l, key, strlen(key), 1, &d), FG_OK);
    uint64_t b1 = mono_us();
    *allowed = d.allowed;
    *judged = 1;
    if (b1 < a0 + wait)
        return d.allowed ? 1 : 0;
    if (b0 >= a1 + wait)
        return d.allowed ? 0 : 2;
    *judged = 0;
    return 0;
}

static void run_case(const char *rate, fg_algorithm algo, uint64_t budget_us,
                     int min_trials)
{
    fg_store *st = fg_store_open_memory(NULL, NULL, 0);
    fg_limit lim;
    CHECK_EQ(fg_limit_parse(rate, &lim), FG_OK);
    lim.algorithm = algo;
    fg_limiter *l = fg_limiter_new(st, &lim, NULL, 0);
    CHECK(l != NULL);
    if (!l)
        return;
    int trials = 0, early = 0, late = 0, unjudged = 0, judged;
    uint64_t end = mono_us() + budget_us;
    while (mono_us() < end && trials < 200) {
        char key[32];
        uint64_t a0 = 0, a1 = 0, wait = 0;
        snprintf(key, sizeof key, "k%d", trials);
        CHECK(refuse(l, key, &a0, &a1, &wait));
        /* Just before the wait ends (1.5 ms, or half a short wait). */
        uint64_t before = wait > 3000 ? 1500 : wait / 2;
        int allowed;
        int r =
            probe(l, key, a0 + wait - before, a0, a1, wait, &judged, &allowed);
        early += r == 1;
        unjudged += !judged;
        trials++;
        if (allowed)
            continue; /* it took the unit the next retry would have */
        /* When it ends, by the last reading of the refusal. */
        r = probe(l, key, a1 + wait, a0, a1, wait, &judged, &allowed);
        late += r == 2;
        unjudged += !judged;
    }
    printf("%s %s: %d trials, %d allowed early, %d refused on time, %d "
           "retries not judged (the scheduler moved them across the edge)\n",
           fg_algorithm_name(algo), rate, trials, early, late, unjudged);
    CHECK(trials >= min_trials);
    CHECK_EQ(early, 0);
    CHECK_EQ(late, 0);
    /* Most retries are judged, or the test proves nothing. */
    CHECK(unjudged <= trials);
    fg_limiter_free(l);
    fg_store_close(st);
}

int main(void)
{
    /* A sliding window's wait can be most of a period: 250/500ms is
     * tried at least once, 50/100ms several times. */
    run_case("250/500ms", FG_TOKEN_BUCKET, 500000, 20);
    run_case("250/500ms", FG_SLIDING_WINDOW, 700000, 1);
    run_case("50/100ms", FG_SLIDING_WINDOW, 600000, 3);
    run_case("10/s", FG_TOKEN_BUCKET, 600000, 3);
    run_case("20/200ms", FG_FIXED_WINDOW, 700000, 3);
    return TEST_DONE();
}
