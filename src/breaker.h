/* breaker.h -- a circuit breaker: after repeated store failures, skip the
 * store for a cool-down, then let one probe through; its success closes the
 * breaker, its failure opens it again. Lock-free; time is passed in. */
#ifndef FG_BREAKER_H
#define FG_BREAKER_H

#include <stdatomic.h>
#include <stdint.h>

#define FG__BREAKER_THRESHOLD   3      /* consecutive failures that open it */
#define FG__BREAKER_COOLDOWN_US 250000 /* before the first probe */

typedef struct fg__breaker {
    atomic_uint failures;
    atomic_ullong open_until_us; /* 0: closed */
    atomic_int probing;
} fg__breaker;

enum { FG__BREAKER_CLOSED, FG__BREAKER_OPEN, FG__BREAKER_HALF_OPEN };

/* 1 when the store may be asked at 'now_us': closed, or the single probe
 * after the cool-down. */
int fg__breaker_allow(fg__breaker *b, uint64_t now_us);
void fg__breaker_success(fg__breaker *b);
void fg__breaker_failure(fg__breaker *b, uint64_t now_us);
/* A check that was let through ended with neither verdict (bad input, out
 * of memory): if it was the probe, let the next check probe instead. */
void fg__breaker_release(fg__breaker *b);
int fg__breaker_state(fg__breaker *b, uint64_t now_us);

#endif
