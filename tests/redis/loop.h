/* loop.h -- what the Redis tests' asynchronous checks share: a libevent
 * loop as floodgate serve makes it, a count of checks in flight, the
 * result of one check and its callback, and a wait for them all. */
#ifndef FG_TEST_LOOP_H
#define FG_TEST_LOOP_H

#include <event2/event.h>

#include "../harness.h"
#include "clock.h"
#include "floodgate.h"

/* libevent's default clock is CLOCK_MONOTONIC_COARSE, which ticks every
 * 4 ms on many kernels and would make every deadline that late. */
static inline struct event_base *new_base(void)
{
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

/* Checks (or sets) submitted and not yet called back. */
static int pending;

typedef struct result {
    int done, rc;
    fg_decision d;
    uint64_t at_us; /* when it was called back */
} result;

/* fg_check_cb for a 'result': exactly once. */
static inline void on_done(int rc, const fg_decision *d, void *data)
{
    result *r = data;
    CHECK_EQ(r->done, 0);
    r->done = 1;
    r->rc = rc;
    r->d = *d;
    r->at_us = fg__mono_precise_us();
    pending--;
}

/* Run the loop until nothing is pending, 5 s at most. */
static inline void drain(struct event_base *base)
{
    uint64_t give_up = fg__mono_precise_us() + 5000000;
    while (pending > 0 && fg__mono_precise_us() < give_up)
        event_base_loop(base, EVLOOP_ONCE);
    CHECK_EQ(pending, 0);
}

/* Run the loop until nothing of 'l' is in flight (fg_limiter_pending),
 * 5 s at most. */
static inline void drain_limiter(struct event_base *base, fg_limiter *l)
{
    uint64_t give_up = fg__mono_precise_us() + 5000000;
    while (fg_limiter_pending(l) && fg__mono_precise_us() < give_up)
        event_base_loop(base, EVLOOP_ONCE);
}

#endif
