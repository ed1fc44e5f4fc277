/* test_lease_rounds.c -- a lease on a blocking store whose every answer
 * comes back after its window ended (a round trip longer than the window):
 * the check is decided exactly after four takes, not asked again for ever.
 * A promise about real time, so tested against real time: the memory
 * store's clock takes 15 ms to read, against a 10 ms window. */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "floodgate.h"

static atomic_int reads;

/* The real clock, read 15 ms late: each answer leaves its window behind. */
static uint64_t slow_clock(void *ctx)
{
    (void)ctx;
    struct timespec pause = {0, 15 * 1000 * 1000};
    nanosleep(&pause, NULL);
    atomic_fetch_add(&reads, 1);
    return fg_mono_us();
}

static void late_takes(fg_algorithm algo)
{
    fg_memory_options o = {.clock = slow_clock};
    fg_store *st = fg_store_open_memory(&o, NULL, 0);
    CHECK(st != NULL);
    fg_limit l;
    char err[128] = "";
    CHECK_EQ(fg_limit_parse("100/10ms", &l), FG_OK);
    l.algorithm = algo;
    CHECK_EQ(fg_mode_parse("lease:10", &l, err, sizeof err), FG_OK);
    fg_limiter *lim = fg_limiter_new(st, &l, err, sizeof err);
    CHECK(lim != NULL);
    if (!lim) {
        fprintf(stderr, "lease:10 on 100/10ms: %s\n", err);
        fg_store_close(st);
        return;
    }
    for (int i = 0; i < 3; i++) {
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
}

int main(void)
{
    /* A check asked again for ever would hang: that is a failure too. */
    alarm(20);
    late_takes(FG_FIXED_WINDOW);
    late_takes(FG_SLIDING_WINDOW);
    return TEST_DONE();
}
