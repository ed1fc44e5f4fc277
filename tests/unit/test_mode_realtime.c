/* test_mode_realtime.c -- promises about real time of the approximate modes
 * on a blocking store, so tested against real time: the memory store's
 * clock is made slow to read, as a store far away is.
 * - A lease whose every answer comes back after its window ended (a round
 *   trip longer than the window) is decided exactly after four takes, not
 *   asked again for ever.
 * - A sync limit with many keys due at once: a check sends them until its
 *   timeout has passed and leaves the rest to the checks after it. */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "floodgate.h"

static atomic_int reads;
static atomic_int slow_ms;

/* The real clock, read 'slow_ms' late. */
static uint64_t slow_clock(void *ctx)
{
    (void)ctx;
    int ms = atomic_load(&slow_ms);
    if (ms) {
        struct timespec pause = {0, ms * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    atomic_fetch_add(&reads, 1);
    return fg_mono_us();
}

static fg_store *slow_store(void)
{
    fg_memory_options o = {.clock = slow_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    return st;
}

static fg_limiter *mode_limiter(fg_store *st, const char *rate,
                                fg_algorithm algo, const char *mode)
{
    fg_limit l;
    char err[128] = "";
    CHECK_EQ(fg_limit_parse(rate, &l), FG_OK);
    snprintf(l.name, sizeof l.name, "m");
    l.algorithm = algo;
    if (mode)
        CHECK_EQ(fg_mode_parse(mode, &l, err, sizeof err), FG_OK);
    fg_limiter *lim = fg_limiter_new(st, &l, err, sizeof err);
    if (!lim)
        fprintf(stderr, "%s on %s: %s\n", mode ? mode : "exact", rate, err);
    CHECK(lim != NULL);
    return lim;
}

static void late_takes(fg_algorithm algo)
{
    fg_store *st = slow_store();
    atomic_store(&slow_ms, 15);
    /* Each answer takes 15 ms, against a 10 ms window. */
    fg_limiter *lim = mode_limiter(st, "100/10ms", algo, "lease:10");
    for (int i = 0; lim && i < 3; i++) {
        atomic_store(&reads, 0);
        fg_decision d;
        CHECK_EQ(fg_check(lim, "k", 1, 1, &d), FG_OK);
        CHECK_EQ(d.allowed, 1);
        /* Four takes, none spent, then the store's own check. */
        CHECK_EQ(d.source, FG_SOURCE_STORE);
        int n = atomic_load(&reads);
        CHECK(n >= 5 && n <= 8);
        if (d.source != FG_SOURCE_STORE || n < 5 || n > 8)
            fprintf(stderr, "  algorithm %d check %d: source %d, %d reads\n",
                    (int)algo, i, (int)d.source, n);
    }
    fg_limiter_free(lim);
    fg_store_close(st);
    atomic_store(&slow_ms, 0);
}

#define KEYS 300

static void many_due(void)
{
    fg_store *st = slow_store();
    fg_limiter *lim = mode_limiter(st, "100/h", FG_FIXED_WINDOW, "sync:50ms");
    if (!lim)
        return;
    char key[16];
    fg_decision d;
    /* Each key used twice: the first check asks the store (no view yet),
     * the second is decided here and waits for the next sync. */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < KEYS; i++) {
            int n = snprintf(key, sizeof key, "k%d", i);
            CHECK_EQ(fg_check(lim, key, (size_t)n, 1, &d), FG_OK);
        }
    struct timespec pause = {0, 80 * 1000 * 1000};
    nanosleep(&pause, NULL);
    /* Now every store call takes 2 ms: 300 syncs would take 600 ms. */
    atomic_store(&slow_ms, 2);
    uint64_t t0 = fg_mono_us();
    CHECK_EQ(fg_check(lim, "z", 1, 1, &d), FG_OK);
    uint64_t took_ms = (fg_mono_us() - t0) / 1000;
    CHECK(took_ms < 100);
    if (took_ms >= 100)
        fprintf(stderr, "  one check with %d keys due took %llu ms\n", KEYS,
                (unsigned long long)took_ms);
    /* The checks right after it send the rest, within the interval, not
     * an interval later: every key's second use reaches the store (fg_peek
     * reads the store, whatever the mode). */
    atomic_store(&slow_ms, 0);
    for (int i = 0; i < 20; i++) {
        int n = snprintf(key, sizeof key, "y%d", i);
        fg_check(lim, key, (size_t)n, 1, &d);
    }
    int counted = 0;
    for (int i = 0; i < KEYS; i++) {
        int n = snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(fg_peek(lim, key, (size_t)n, &d), FG_OK);
        counted += d.remaining == 98;
    }
    CHECK_EQ(counted, KEYS);
    fg_limiter_free(lim);
    fg_store_close(st);
}

int main(void)
{
    /* A check asked again for ever would hang: that is a failure too. */
    alarm(60);
    late_takes(FG_FIXED_WINDOW);
    late_takes(FG_SLIDING_WINDOW);
    many_due();
    return TEST_DONE();
}
