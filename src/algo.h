/* algo.h -- the rate-limiting algorithms as pure functions.
 *
 * No clock, no allocation, no I/O: (params, state, now, cost) -> decision.
 * Every algorithm has a Lua twin in the Redis store that uses the same
 * integer arithmetic, so both give the same decision for the same inputs. */
#ifndef FG_ALGO_H
#define FG_ALGO_H

#include "floodgate.h"

/* Division by an invariant 'd' as a multiplication: exact for every
 * dividend below 2^63 (Granlund and Montgomery's round-up method: with
 * l = ceil(log2 d) and m = ceil(2^(63+l) / d), floor(x * m / 2^(63+l)) is
 * floor(x / d)). Powers of two are shifts. */
typedef struct fg__divisor {
    uint64_t d, m; /* m = 0: d is 2^shift */
    unsigned shift;
} fg__divisor;

void fg__divisor_init(fg__divisor *v, uint64_t d);

static inline uint64_t fg__div(const fg__divisor *v, uint64_t x)
{
    if (!v->m)
        return x >> v->shift;
    return (uint64_t)(((unsigned __int128)x * v->m) >> v->shift);
}

/* Derived, validated parameters of a limit. */
typedef struct fg__algo_params {
    fg_algorithm algorithm;
    uint64_t limit;     /* units per period */
    uint64_t period_us; /* window length or bucket refill period */
    uint64_t burst;     /* token_bucket capacity (limit when unset) */
    /* token_bucket only: time is counted in units of 1/scale us so that the
     * emission interval T = period_us / limit is an integer:
     * scale = limit / gcd(period_us, limit), t_scaled = period_us * scale /
     * limit. For 10/s, scale = 1 and t_scaled = 100000. Only differences
     * of time (at most two bucket depths) are ever scaled. */
    uint64_t scale;
    uint64_t t_scaled;
    fg__divisor by_scale, by_t; /* the two divisions of every check */
} fg__algo_params;

/* The state of one key. An all-zero state is a key never seen.
 *   fixed_window, naive_get_set: a = window index + 1, b = count
 *   sliding_window:              a = window index + 1, b = current count,
 *                                c = previous window's count
 *   token_bucket:                a = theoretical arrival time (TAT),
 *                                whole us; b = its fraction in units of
 *                                1/scale us (both 0 = never seen) */
typedef struct fg__algo_state {
    uint64_t a, b, c;
} fg__algo_state;

/* Validate 'lim' and derive 'p'. FG_OK, or FG_EINVAL / FG_ERANGE with the
 * reason in 'err'. */
int fg__algo_params_init(const fg_limit *lim, fg__algo_params *p, char *err,
                         size_t errlen);

/* Validate 'cost' against 'p': FG_OK, or FG_ECOST (0, above the limit or
 * burst, or FG_MAX_COUNT and beyond). */
static inline int fg__algo_check_cost(const fg__algo_params *p, uint64_t cost)
{
    uint64_t max = p->algorithm == FG_TOKEN_BUCKET ? p->burst : p->limit;
    if (cost < 1 || cost > max || cost >= FG_MAX_COUNT)
        return FG_ECOST;
    return FG_OK;
}

/* Decide whether 'cost' units fit at time 'now_us' and, when they do, update
 * 's'. A refused request leaves 's' as it was. A 'now_us' earlier than the
 * state's own time is clamped to it. '*expires_us' receives the time after
 * which the state is indistinguishable from a new key (it may be dropped).
 * Fills every field of 'd' but 'source', the times exact in microseconds
 * ('retry_after_us' is the first instant the request fits) and rounded up
 * in milliseconds. Returns FG_OK or FG_ECOST. */
int fg__algo_check(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                   uint64_t cost, fg_decision *d, uint64_t *expires_us);

/* As fg__algo_check, for a 'cost' that fg__algo_check_cost has already
 * accepted (the limiter validates every check before a store sees it). */
int fg__algo_decide(const fg__algo_params *p, fg__algo_state *s,
                    uint64_t now_us, uint64_t cost, fg_decision *d,
                    uint64_t *expires_us);

/* Give back 'cost' units taken from 's' by an allowed check: they return
 * only while the window (or the bucket's debt) that holds them lasts, and
 * never more than the state holds. */
void fg__algo_refund(const fg__algo_params *p, fg__algo_state *s,
                     uint64_t now_us, uint64_t cost);

/* Microseconds to whole milliseconds, rounded up. */
static inline uint64_t fg__us_to_ms_up(uint64_t us)
{
    return us / 1000 + (us % 1000 != 0);
}

/* Fill 'd''s millisecond times from its exact microsecond times, rounded
 * up so that a retry after retry_after_ms is never early. */
static inline void fg__decision_ms(fg_decision *d)
{
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->retry_after_ms = fg__us_to_ms_up(d->retry_after_us);
}

#endif
