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
 * floor(x / d)). The dividend is doubled first, so that the high word of
 * the product is shifted by l alone: one multiplication and one shift,
 * the same for every divisor, powers of two and 1 included. */
typedef struct fg__divisor {
    uint64_t d, m;
    unsigned shift; /* l */
} fg__divisor;

/* For a divisor from 1 to 2^63. */
void fg__divisor_init(fg__divisor *v, uint64_t d);

static inline uint64_t fg__div(const fg__divisor *v, uint64_t x)
{
    return (uint64_t)(((unsigned __int128)(x << 1) * v->m) >> 64) >> v->shift;
}

/* The longest a token bucket may take to refill from empty, in us (2^50,
 * 35 years): TAT then stays below 2^53 us since 1970 until the year 2200,
 * where the Lua twin's doubles are exact. */
#define FG__DEPTH_MAX_US ((uint64_t)1 << 50)

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
    /* A full bucket, burst * t_scaled, when it is below 2^62 ('wide' 0);
     * else 0, and the bucket is decided by fg__token_bucket_wide in
     * 128-bit arithmetic. Either way it is held as whole us and a fraction
     * (depth_us, depth_frac), below FG__DEPTH_MAX_US. */
    int wide;
    uint64_t depth;
    /* What a token bucket's state records of the limit that wrote it:
     * depth_us + 1 (see fg__algo_state). */
    uint64_t tag;
    uint64_t depth_us;   /* depth / scale, rounded down */
    uint64_t depth_frac; /* depth - depth_us * scale */
    uint64_t max_cost;   /* the largest valid cost: burst or limit, < 2^53 */
    /* token_bucket: one unit, T, as whole us and a fraction (t_scaled =
     * unit_us * scale + unit_frac), and T rounded up to the us and ms. */
    uint64_t unit_us, unit_frac, unit_up_us, unit_up_ms;
    /* The windowed algorithms: now / period_us, when period_us < 2^63. */
    fg__divisor by_period;
} fg__algo_params;

/* The state of one key. An all-zero state is a key never seen.
 *   fixed_window, naive_get_set: a = window index + 1, b = count
 *   sliding_window:              a = window index + 1, b = current count,
 *                                c = previous window's count
 *   token_bucket:                a = theoretical arrival time (TAT),
 *                                whole us; b = its fraction in units of
 *                                1/scale us, below scale (both 0 = never
 *                                seen); c = the writer's depth_us + 1 (0:
 *                                not known). A TAT more than a full
 *                                bucket ahead of now written under another
 *                                depth (a rate changed since) is a full
 *                                bucket's debt from now, and stored so;
 *                                under the same depth it is a clock that
 *                                stepped back, and is left to drain. A
 *                                fraction of another rate's scale (b >=
 *                                scale) counts as the next whole us. */
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
    /* Unsigned: a cost of 0 wraps to beyond any maximum. */
    return cost - 1 < p->max_cost ? FG_OK : FG_ECOST;
}

/* Decide whether 'cost' units fit at time 'now_us' and, when they do, update
 * 's'. A refused request consumes nothing, and leaves 's' as it was but
 * for a token bucket's state written under another rate, which it restates
 * (see fg__algo_state). A 'now_us' earlier than the state's own time is
 * clamped to it. '*expires_us' receives the time after
 * which the state is indistinguishable from a new key (it may be dropped).
 * Fills every field of 'd' but 'source', the times exact in microseconds
 * ('retry_after_us' is the first instant the request fits) and rounded up
 * in milliseconds. Returns FG_OK or FG_ECOST. */
int fg__algo_check(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                   uint64_t cost, fg_decision *d, uint64_t *expires_us);

/* When the units a refund gives back were taken: 'age_us' before the
 * refund, and (token bucket) the most of the bucket's time they still
 * hold, 'hold_us' (FG__HOLD_ANY: no bound known). */
#define FG__HOLD_ANY UINT64_MAX
typedef struct fg__taken {
    uint64_t age_us, hold_us;
} fg__taken;

/* When the units of a check that decided 'd_reset_us' (its reset_us)
 * 'age_us' ago were taken: a bucket holds them until it would have been
 * full again. */
static inline fg__taken fg__taken_of(const fg__algo_params *p, uint64_t age_us,
                                     uint64_t d_reset_us)
{
    fg__taken t = {age_us, FG__HOLD_ANY};
    if (p->algorithm == FG_TOKEN_BUCKET)
        t.hold_us = d_reset_us > age_us ? d_reset_us - age_us : 0;
    return t;
}

/* Give back 'cost' units taken from 's' by an allowed check, as 't' says
 * when: they return only to the window that took them, while it lasts
 * (the window 'age_us' before 'now_us'), or to the bucket's debt that
 * still holds them (at most 'hold_us' of it, and not before now), and
 * never more than the state holds. */
void fg__algo_refund(const fg__algo_params *p, fg__algo_state *s,
                     uint64_t now_us, uint64_t cost, const fg__taken *t);

/* fg_add_at: count 'units' spent 'age_us' before 'now_us' in 's' (a fixed
 * or sliding window's in the window they were spent in, while it counts: a
 * sliding window's current or previous one; a token bucket's now) even
 * beyond the limit (a
 * sliding window's count up to fg__add_keep() limits, a bucket's debt
 * below empty up to that many buckets less one; the rest is forgiven), and fill
 * 'd' as fg_add says: what fits now, until full again (the debt included),
 * until one unit fits, and 'allowed' 1 when the units fitted. '*expires_us' as
 * for a check. FG_OK, or FG_ERANGE for a clock outside the token bucket's
 * range. */
/* How many full limits fg_add keeps counted (a debt of all but one): for
 * a token bucket deeper than 2^48 us (8.9 years) 2, so that its Lua twin's
 * times stay exact. */
#define FG__ADD_KEEP      8
#define FG__ADD_KEEP_DEEP 2
#define FG__ADD_DEEP_US   ((uint64_t)1 << 48)
static inline uint64_t fg__add_keep(const fg__algo_params *p)
{
    return p->algorithm == FG_TOKEN_BUCKET && p->depth_us > FG__ADD_DEEP_US
               ? FG__ADD_KEEP_DEEP
               : FG__ADD_KEEP;
}

int fg__algo_add(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                 uint64_t units, uint64_t age_us, fg_decision *d,
                 uint64_t *expires_us);

/* The decision of fg__algo_add for a fixed window that holds 'count'
 * units after the add, at 'now_us' (the Redis store's INCRBY reply). */
void fg__window_add_decision(const fg__algo_params *p, uint64_t now_us,
                             uint64_t count, fg_decision *d);

/* What a check of one unit would get from 's' at 'now_us', without taking
 * it (fg_peek): 'allowed' and 'retry_after_*' are that check's, 'remaining'
 * the units that fit now (one more than that check would leave), and
 * 'reset_*' how long until 's' itself has drained (the check's own reset
 * would count the unit it takes). 's' is not changed. FG_OK, or FG_ERANGE
 * for a clock outside the token bucket's range. */
int fg__algo_peek(const fg__algo_params *p, const fg__algo_state *s,
                  uint64_t now_us, fg_decision *d);

/* Microseconds to whole milliseconds, rounded up. */
static inline uint64_t fg__us_to_ms_up(uint64_t us)
{
    return us <= UINT64_MAX - 999 ? (us + 999) / 1000
                                  : us / 1000 + (us % 1000 != 0);
}

/* Fill 'd''s millisecond times from its exact microsecond times, rounded
 * up so that a retry after retry_after_ms is never early. */
static inline void fg__decision_ms(fg_decision *d)
{
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->retry_after_ms = fg__us_to_ms_up(d->retry_after_us);
}

/* The algorithms a store runs on every check, inline (sliding window,
 * the rarest and largest, is a call). */

/* The window index + 1 of 'now'. A multiplication by the period's
 * reciprocal, from 'now' alone: it is ready before the key's state arrives
 * from memory, and no branch waits on that state to choose how to compute
 * it. */
static inline uint64_t fg__window_of(const fg__algo_params *p, uint64_t now)
{
    if (__builtin_expect((now | p->period_us) >> 63, 0))
        return now / p->period_us + 1;
    return fg__div(&p->by_period, now) + 1;
}

/* Fixed window: 'a' is the window index + 1, 'b' its count. A clock that
 * steps back into an earlier window is clamped to the stored window. */
static inline __attribute__((always_inline)) void
fg__fixed_window(const fg__algo_params *p, fg__algo_state *s, uint64_t now,
                 uint64_t cost, fg_decision *d, uint64_t *expires)
{
    uint64_t w = fg__window_of(p, now);
    if (__builtin_expect(s->a > w, 0)) {
        w = s->a;
        now = (w - 1) * p->period_us;
    }
    uint64_t count = s->a == w ? s->b : 0;
    uint64_t end = w * p->period_us;

    d->limit = p->limit;
    *expires = end;
    if (__builtin_expect(count + cost <= p->limit, 1)) {
        /* Allowed: the window now holds at least 'cost'. */
        count += cost;
        s->a = w;
        s->b = count;
        d->allowed = 1;
        d->remaining = p->limit - count;
        d->reset_us = end - now;
        d->reset_ms = fg__us_to_ms_up(d->reset_us);
        d->retry_after_us = d->retry_after_ms = 0;
        return;
    }
    d->allowed = 0;
    /* Beyond the limit only after fg_add. */
    d->remaining = count < p->limit ? p->limit - count : 0;
    d->reset_us = count ? end - now : 0;
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->retry_after_us = end - now;
    d->retry_after_ms = fg__us_to_ms_up(d->retry_after_us);
}

/* Scaled units (below 2^63) to whole microseconds, rounded up. */
static inline uint64_t fg__scaled_to_us_up(uint64_t v, const fg__divisor *scale)
{
    uint64_t q = fg__div(scale, v);
    return q + (q * scale->d != v);
}

/* A token bucket's allowed request: TAT moves to now + 'next' (scaled),
 * 'q' whole us and fraction 'r'; the bucket is full again at that time
 * rounded up to the us. The caller has checked that now + q + 1 fits. */
static inline __attribute__((always_inline)) int
fg__token_allow(const fg__algo_params *p, fg__algo_state *s, uint64_t now,
                uint64_t q, uint64_t r, uint64_t next, fg_decision *d,
                uint64_t *expires)
{
    s->a = now + q;
    s->b = r;
    s->c = p->tag;
    d->limit = p->burst;
    d->allowed = 1;
    d->remaining = fg__div(&p->by_t, p->depth - next);
    d->reset_us = q + (r != 0);
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->retry_after_us = d->retry_after_ms = 0;
    *expires = s->a + 1;
    return FG_OK;
}

/* Token bucket as GCRA: each unit moves the theoretical arrival time TAT on
 * by T = period / limit; a request fits when the new TAT is at most
 * burst * T ahead of now. TAT is kept as whole microseconds ('a') and a
 * fraction in units of 1/scale us ('b'), so T is exact and nothing drifts,
 * while only differences from now (at most two bucket depths) are ever
 * scaled: any clock origin works. */
int fg__token_bucket_wide(const fg__algo_params *p, fg__algo_state *s,
                          uint64_t now, uint64_t cost, fg_decision *d,
                          uint64_t *expires);

/* 1 when TAT, 'au' us and 'af' ahead of now and more than a full bucket
 * ahead, is a debt that fg_add may have left (at most fg__add_keep()
 * buckets, written under this depth): a check then waits for all of it.
 * Further ahead, or written under another depth, it is a clock that
 * stepped back or a rate changed since, and the wait is a full drain. */
int fg__token_debt(const fg__algo_params *p, const fg__algo_state *s,
                   uint64_t au, uint64_t af);

static inline __attribute__((always_inline)) int
fg__token_bucket(const fg__algo_params *p, fg__algo_state *s, uint64_t now,
                 uint64_t cost, fg_decision *d, uint64_t *expires)
{
    if (__builtin_expect(s->b >= p->scale, 0)) {
        /* A fraction of another rate's finer scale: the next whole us. */
        s->a++;
        s->b = 0;
    }
    if (__builtin_expect(p->wide, 0))
        return fg__token_bucket_wide(p, s, now, cost, d, expires);
    const uint64_t depth = p->depth, scale = p->scale;
    /* How far TAT is ahead of now, in scaled units. A debt of fg_add
     * leaves it more than a full bucket ahead (up to fg__add_keep()
     * buckets), and the wide code waits for all of it (fg__token_debt); a
     * clock that stepped back by less looks the same, and waits the same.
     * Further ahead (a clock that stepped back further), or written under
     * another depth (a rate changed since TAT was written): the bucket is
     * just empty, and that is stored, so that the wait said is the wait
     * (unstored, each check would be refused for the whole step while
     * told it waits one unit), and a changed rate's debt drains at this
     * rate (fg__algo_state). */
    uint64_t ahead = 0;
    if (s->a >= now) {
        /* One unit onto a bucket already draining (the common case of a
         * busy key): TAT moves on by T as whole us and fraction, and fits
         * when it is at most a bucket depth ahead, compared the same way.
         * The same decision as below, with no multiplication before the
         * state is written. Anything else is decided below. */
        uint64_t frac = s->b + p->unit_frac, tat1;
        uint64_t carry = frac >= scale;
        frac -= carry ? scale : 0;
        if (cost == 1 &&
            !__builtin_add_overflow(s->a, p->unit_us + carry + 1, &tat1)) {
            uint64_t q = tat1 - 1 - now; /* whole us of TAT ahead of now */
            if (q < p->depth_us || (q == p->depth_us && frac <= p->depth_frac))
                return fg__token_allow(p, s, now, q, frac, q * scale + frac, d,
                                       expires);
        }
        uint64_t diff_us = s->a - now;
        if (diff_us > p->depth_us + 1 ||
            (ahead = diff_us * scale + s->b) > depth) {
            if (fg__token_debt(p, s, diff_us, s->b))
                return fg__token_bucket_wide(p, s, now, cost, d, expires);
            ahead = depth;
            s->a = now + p->depth_us;
            s->b = p->depth_frac;
            s->c = p->tag;
        }
    } else if (cost == 1) {
        /* The common case of a key not checked for a while: a full bucket
         * and one unit, decided from values derived once per limit. */
        if (now > UINT64_MAX - p->unit_us - 1)
            return FG_ERANGE;
        s->a = now + p->unit_us;
        s->b = p->unit_frac;
        s->c = p->tag;
        d->limit = p->burst;
        d->allowed = 1;
        d->remaining = p->burst - 1;
        d->reset_us = p->unit_up_us;
        d->reset_ms = p->unit_up_ms;
        d->retry_after_us = d->retry_after_ms = 0;
        *expires = s->a + 1;
        return FG_OK;
    }
    uint64_t next = ahead + cost * p->t_scaled; /* <= 2 * depth */

    d->limit = p->burst;
    if (__builtin_expect(next <= depth, 1)) {
        uint64_t q = fg__div(&p->by_scale, next), r = next - q * scale;
        if (now > UINT64_MAX - q - 1)
            return FG_ERANGE;
        return fg__token_allow(p, s, now, q, r, next, d, expires);
    }
    d->allowed = 0;
    d->remaining = fg__div(&p->by_t, depth - ahead);
    /* Time is whole microseconds: the first instant at which the bucket
     * has drained enough is the scaled wait rounded up. */
    d->reset_us = fg__scaled_to_us_up(ahead, &p->by_scale);
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->retry_after_us = fg__scaled_to_us_up(next - depth, &p->by_scale);
    d->retry_after_ms = fg__us_to_ms_up(d->retry_after_us);
    *expires = s->a + 1 > now ? s->a + 1 : now;
    return FG_OK;
}

void fg__sliding_window(const fg__algo_params *p, fg__algo_state *s,
                        uint64_t now, uint64_t cost, fg_decision *d,
                        uint64_t *expires);

/* As fg__algo_check, for a 'cost' that fg__algo_check_cost has already
 * accepted (the limiter validates every check before a store sees it), by
 * 'algorithm' (p->algorithm, or a constant for a check made for one
 * algorithm). Inline, with fixed window and token bucket, so that a
 * store's check is one function: no call, no spilled arguments. */
static inline __attribute__((always_inline)) int
fg__algo_decide_as(fg_algorithm algorithm, const fg__algo_params *p,
                   fg__algo_state *s, uint64_t now_us, uint64_t cost,
                   fg_decision *d, uint64_t *expires_us)
{
    switch (algorithm) {
    case FG_FIXED_WINDOW:
    case FG_NAIVE_GET_SET:
        fg__fixed_window(p, s, now_us, cost, d, expires_us);
        return FG_OK;
    case FG_SLIDING_WINDOW:
        fg__sliding_window(p, s, now_us, cost, d, expires_us);
        return FG_OK;
    case FG_TOKEN_BUCKET:
        return fg__token_bucket(p, s, now_us, cost, d, expires_us);
    }
    return FG_EINVAL;
}

static inline __attribute__((always_inline)) int
fg__algo_decide(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                uint64_t cost, fg_decision *d, uint64_t *expires_us)
{
    return fg__algo_decide_as(p->algorithm, p, s, now_us, cost, d, expires_us);
}

#endif
