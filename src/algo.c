/* algo.c -- fixed window, sliding window and token bucket (GCRA) as pure
 * integer functions of (params, state, now, cost). See algo.h. */
#include "algo.h"
#include "store.h"

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void fg__divisor_init(fg__divisor *v, uint64_t d)
{
    /* l = ceil(log2 d); for a power of two 2^l, m is 2^63. */
    unsigned l = d > 1 ? 64 - (unsigned)__builtin_clzll(d - 1) : 0;
    unsigned __int128 num = (unsigned __int128)1 << (63 + l);
    v->d = d;
    v->m = (uint64_t)((num + d - 1) / d);
    v->shift = l;
}

int fg__algo_params_init(const fg_limit *lim, fg__algo_params *p, char *err,
                         size_t errlen)
{
    if ((unsigned)lim->algorithm > FG_NAIVE_GET_SET)
        return fg__seterr(err, errlen, FG_EINVAL, "unknown algorithm %d",
                          (int)lim->algorithm);
    if (lim->limit < 1 || lim->limit > FG_MAX_COUNT)
        return fg__seterr(err, errlen, FG_ERANGE,
                          "limit must be between 1 and 2^53");
    if (lim->period_us < 1000)
        return fg__seterr(err, errlen, FG_ERANGE,
                          "period must be at least 1 ms");
    p->algorithm = lim->algorithm;
    p->limit = lim->limit;
    p->period_us = lim->period_us;
    p->burst = lim->burst ? lim->burst : lim->limit;
    p->scale = 1;
    p->t_scaled = 0;
    p->depth = p->depth_us = 0;
    if (p->burst > FG_MAX_COUNT)
        return fg__seterr(err, errlen, FG_ERANGE,
                          "burst must be between 1 and 2^53");
    if (p->burst != p->limit && p->algorithm != FG_TOKEN_BUCKET)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "burst applies to token_bucket only");

    p->max_cost = p->algorithm == FG_TOKEN_BUCKET ? p->burst : p->limit;
    if (p->max_cost >= FG_MAX_COUNT)
        p->max_cost = FG_MAX_COUNT - 1;

    /* fg__window_of divides instead from 2^63 on. */
    if (!(p->period_us >> 63))
        fg__divisor_init(&p->by_period, p->period_us);
    switch (p->algorithm) {
    case FG_TOKEN_BUCKET: {
        uint64_t g = gcd(p->period_us, p->limit);
        p->scale = p->limit / g;
        p->t_scaled = p->period_us / g;
        fg__divisor_init(&p->by_scale, p->scale);
        fg__divisor_init(&p->by_t, p->t_scaled);
        /* Two bucket depths in scaled time must fit. */
        if (p->t_scaled > UINT64_MAX / 4 / p->burst)
            return fg__seterr(err, errlen, FG_ERANGE,
                              "token_bucket: burst %llu at this rate is too "
                              "large to count exactly",
                              (unsigned long long)p->burst);
        p->depth = p->burst * p->t_scaled;
        p->depth_us = fg__div(&p->by_scale, p->depth);
        p->depth_frac = p->depth - p->depth_us * p->scale;
        p->unit_us = fg__div(&p->by_scale, p->t_scaled);
        p->unit_frac = p->t_scaled - p->unit_us * p->scale;
        p->unit_up_us = p->unit_us + (p->unit_frac != 0);
        p->unit_up_ms = fg__us_to_ms_up(p->unit_up_us);
        break;
    }
    default:
        break;
    }
    return FG_OK;
}

/* Sliding window: the count of the current window plus the previous window's
 * count weighted by how much of it still overlaps the last period:
 *   prev * (period - elapsed) / period + cur + cost <= limit,
 * compared multiplied out by 'period' so that no division rounds. The
 * products need up to 53 + 45 bits: they are taken in 128. */
typedef unsigned __int128 u128;

void fg__sliding_window(const fg__algo_params *p, fg__algo_state *s,
                        uint64_t now, uint64_t cost, fg_decision *d,
                        uint64_t *expires)
{
    const uint64_t period = p->period_us, limit = p->limit;
    uint64_t w = fg__window_of(p, now);
    if (s->a > w) {
        w = s->a;
        now = (w - 1) * period;
    }
    uint64_t cur = 0, prev = 0;
    if (s->a == w) {
        cur = s->b;
        prev = s->c;
    } else if (s->a + 1 == w) {
        prev = s->b;
    }
    uint64_t elapsed = now - (w - 1) * period;
    uint64_t left = period - elapsed; /* 1 .. period */
    u128 weighted = (u128)prev * left;
    u128 capacity = (u128)limit * period;

    d->limit = limit;
    d->allowed = weighted + (u128)(cur + cost) * period <= capacity;
    d->retry_after_us = 0;
    if (d->allowed) {
        cur += cost;
        s->a = w;
        s->b = cur;
        s->c = prev;
    } else if (cur + cost <= limit) {
        /* Wait in this window until prev's weight has shrunk enough:
         * prev * (period - e) <= room * period. */
        uint64_t room = limit - cur - cost;
        uint64_t need = period - (uint64_t)((u128)room * period / prev);
        d->retry_after_us = need - elapsed;
    } else {
        /* Wait for the next window, where this window's count becomes
         * the previous one: cur * (period - e) <= (limit - cost) * period. */
        uint64_t need =
            period - (uint64_t)((u128)(limit - cost) * period / cur);
        d->retry_after_us = left + need;
    }
    u128 used = weighted + (u128)cur * period;
    d->remaining =
        used >= capacity ? 0 : (uint64_t)((capacity - used) / period);
    if (cur)
        d->reset_us = left + period;
    else if (prev)
        d->reset_us = left;
    else
        d->reset_us = 0;
    fg__decision_ms(d);
    *expires = (w + 1) * period;
}

void fg__algo_refund(const fg__algo_params *p, fg__algo_state *s,
                     uint64_t now_us, uint64_t cost)
{
    if (!s->a)
        return;
    switch (p->algorithm) {
    case FG_FIXED_WINDOW:
    case FG_NAIVE_GET_SET:
    case FG_SLIDING_WINDOW: {
        /* The units sit in the stored window's count: this window's, or
         * the previous one's for a sliding window. */
        uint64_t w = fg__window_of(p, now_us);
        int holds =
            s->a == w || (p->algorithm == FG_SLIDING_WINDOW && s->a + 1 == w);
        if (holds)
            s->b -= cost < s->b ? cost : s->b;
        break;
    }
    case FG_TOKEN_BUCKET: {
        /* Move TAT back by cost * T, but not before now: a bucket that
         * has refilled since holds no debt to give back. */
        uint64_t back = cost * p->t_scaled;
        uint64_t back_us = back / p->scale, back_frac = back % p->scale;
        uint64_t a = s->a, b = s->b;
        if (b < back_frac) {
            b += p->scale;
            back_us++;
        }
        b -= back_frac;
        if (a < back_us || a - back_us < now_us ||
            (a - back_us == now_us && b == 0)) {
            s->a = now_us;
            s->b = 0;
        } else {
            s->a = a - back_us;
            s->b = b;
        }
        break;
    }
    }
}

int fg__algo_check(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                   uint64_t cost, fg_decision *d, uint64_t *expires_us)
{
    if (fg__algo_check_cost(p, cost) != FG_OK)
        return FG_ECOST;
    return fg__algo_decide(p, s, now_us, cost, d, expires_us);
}
