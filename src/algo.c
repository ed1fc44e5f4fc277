/* algo.c -- fixed window, sliding window and token bucket (GCRA) as pure
 * integer functions of (params, state, now, cost). See algo.h. */
#include "algo.h"
#include "store.h"
#include "error.h"

typedef unsigned __int128 u128;

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
    /* As fg_limit_parse: beyond a year, a window's end and a sliding
     * window's times no longer fit in 64 bits of microseconds. */
    if (lim->period_us > 365 * 86400000000ull)
        return fg__seterr(err, errlen, FG_ERANGE,
                          "period must be at most a year");
    p->algorithm = lim->algorithm;
    p->limit = lim->limit;
    p->period_us = lim->period_us;
    p->burst = lim->burst ? lim->burst : lim->limit;
    p->scale = 1;
    p->t_scaled = 0;
    p->wide = 0;
    p->depth = p->depth_us = p->depth_frac = p->tag = 0;
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
        /* A full bucket, scaled: up to 2^53 x 2^45, in 128 bits. */
        u128 depth = (u128)p->burst * p->t_scaled;
        if (depth / p->scale >= FG__DEPTH_MAX_US)
            return fg__seterr(err, errlen, FG_ERANGE,
                              "token_bucket: a burst of %llu at this rate "
                              "takes more than 35 years to refill",
                              (unsigned long long)p->burst);
        p->depth_us = (uint64_t)(depth / p->scale);
        p->depth_frac = (uint64_t)(depth % p->scale);
        /* Two bucket depths in scaled time must fit 64 bits for the
         * common code; beyond, the plain 128-bit one decides. */
        p->wide = depth > UINT64_MAX / 4;
        p->depth = p->wide ? 0 : (uint64_t)depth;
        p->tag = p->depth_us + 1;
        p->unit_us = p->t_scaled / p->scale;
        p->unit_frac = p->t_scaled % p->scale;
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
                     uint64_t now_us, uint64_t cost, const fg__taken *t)
{
    if (!s->a)
        return;
    switch (p->algorithm) {
    case FG_FIXED_WINDOW:
    case FG_NAIVE_GET_SET:
    case FG_SLIDING_WINDOW: {
        /* The units sit in the count of the window that took them: the
         * stored one, or for a sliding window the previous one of it. */
        uint64_t at = now_us > t->age_us ? now_us - t->age_us : 0;
        uint64_t w = fg__window_of(p, at);
        uint64_t *n = s->a == w ? &s->b
                      : p->algorithm == FG_SLIDING_WINDOW && s->a == w + 1
                          ? &s->c
                          : NULL;
        if (n)
            *n -= cost < *n ? cost : *n;
        break;
    }
    case FG_TOKEN_BUCKET: {
        /* Move TAT back by cost * T, but by no more of the bucket's time
         * than the units still hold, and not before now: a bucket that has
         * refilled since holds no debt to give back. */
        u128 back = (u128)cost * p->t_scaled;
        uint64_t back_us = (uint64_t)(back / p->scale);
        uint64_t back_frac = (uint64_t)(back % p->scale);
        if (back_us >= t->hold_us) {
            back_us = t->hold_us;
            back_frac = 0;
        }
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

/* The token bucket of algo.h for a bucket too deep for its 64-bit code
 * (a large burst at a rate whose T has a large denominator, such as 2^53
 * per year): the same decisions, with TAT ahead of now kept as whole us
 * and a fraction, and the two products of a check taken in 128 bits. It
 * is the Lua twin's arithmetic, step for step. */
int fg__token_bucket_wide(const fg__algo_params *p, fg__algo_state *s,
                          uint64_t now, uint64_t cost, fg_decision *d,
                          uint64_t *expires)
{
    const uint64_t scale = p->scale, du = p->depth_us, df = p->depth_frac;
    /* TAT ahead of now (au us and af), at most a full bucket but for a
     * debt of fg_add ('deep'). */
    uint64_t au = 0, af = 0;
    if (s->a >= now) {
        au = s->a - now;
        af = s->b;
    }
    int deep = au > du || (au == du && af > df);
    if (deep && !fg__token_debt(p, s, au, af)) {
        deep = 0;
        au = du;
        af = df;
        s->a = now + du; /* stored: as in algo.h */
        s->b = df;
        s->c = p->tag;
    }
    /* After this request: ahead + cost * T. */
    u128 c = (u128)cost * p->t_scaled;
    uint64_t nu = au + (uint64_t)(c / scale), nf = af + (uint64_t)(c % scale);
    if (nf >= scale) {
        nf -= scale;
        nu++;
    }
    d->limit = p->burst;
    if (nu < du || (nu == du && nf <= df)) {
        if (now > UINT64_MAX - nu - 1)
            return FG_ERANGE;
        s->a = now + nu;
        s->b = nf;
        s->c = p->tag;
        d->allowed = 1;
        d->remaining =
            (uint64_t)(((u128)(du - nu) * scale + df - nf) / p->t_scaled);
        d->reset_us = nu + (nf != 0);
        d->retry_after_us = 0;
        fg__decision_ms(d);
        *expires = s->a + 1;
        return FG_OK;
    }
    d->allowed = 0;
    d->remaining =
        deep ? 0
             : (uint64_t)(((u128)(du - au) * scale + df - af) / p->t_scaled);
    d->reset_us = au + (af != 0);
    /* The first whole us at which the request fits: the excess over a
     * full bucket, rounded up. */
    uint64_t xu = nu - du, xf;
    if (nf >= df) {
        xf = nf - df;
    } else {
        xu--;
        xf = nf + scale - df;
    }
    d->retry_after_us = xu + (xf != 0);
    fg__decision_ms(d);
    *expires = s->a + 1 > now ? s->a + 1 : now;
    return FG_OK;
}

int fg__algo_check(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                   uint64_t cost, fg_decision *d, uint64_t *expires_us)
{
    if (fg__algo_check_cost(p, cost) != FG_OK)
        return FG_ECOST;
    return fg__algo_decide(p, s, now_us, cost, d, expires_us);
}

/* How long until the state 's' has drained at 'now', as the algorithms'
 * reset_us counts it (the clamps of a clock that stepped back included):
 * the end of a window that holds units, the end of the next one while a
 * sliding window's current window holds some, a token bucket's TAT (at
 * most a full bucket ahead), rounded up to the microsecond. */
static uint64_t drained_in(const fg__algo_params *p, const fg__algo_state *s,
                           uint64_t now)
{
    if (p->algorithm == FG_TOKEN_BUCKET) {
        uint64_t a = s->a, b = s->b;
        if (b >= p->scale) {
            a++;
            b = 0;
        }
        if (a < now || (a == now && b == 0))
            return 0;
        uint64_t au = a - now;
        if ((au > p->depth_us || (au == p->depth_us && b > p->depth_frac)) &&
            !fg__token_debt(p, s, au, b))
            return p->depth_us + (p->depth_frac != 0);
        return au + (b != 0);
    }
    uint64_t w = fg__window_of(p, now);
    if (s->a > w) {
        w = s->a;
        now = (w - 1) * p->period_us;
    }
    uint64_t left = w * p->period_us - now;
    if (p->algorithm == FG_SLIDING_WINDOW) {
        if (s->a == w && s->b)
            return left + p->period_us;
        if ((s->a == w && s->c) || (s->a + 1 == w && s->b))
            return left;
        return 0;
    }
    return s->a == w && s->b ? left : 0;
}

int fg__algo_peek(const fg__algo_params *p, const fg__algo_state *s,
                  uint64_t now_us, fg_decision *d)
{
    /* The decision of one unit, made on a copy. Allowed, it leaves one
     * unit fewer than fit now, exactly: each algorithm's remaining is a
     * floor of (room - cost) / unit, and the unit is a whole one. */
    fg__algo_state t = *s;
    uint64_t expires;
    int rc = fg__algo_decide(p, &t, now_us, 1, d, &expires);
    if (rc != FG_OK)
        return rc;
    if (d->allowed)
        d->remaining++;
    d->reset_us = drained_in(p, s, now_us);
    fg__decision_ms(d);
    d->source = FG_SOURCE_STORE;
    d->shadowed = 0;
    return FG_OK;
}

/* ---- fg_add: usage counted even beyond the limit ----------------------- */

void fg__window_add_decision(const fg__algo_params *p, uint64_t now_us,
                             uint64_t count, fg_decision *d)
{
    uint64_t w = fg__window_of(p, now_us);
    uint64_t left = w * p->period_us - now_us;
    d->limit = p->limit;
    d->allowed = count <= p->limit;
    d->remaining = count < p->limit ? p->limit - count : 0;
    /* The window's end, even when it holds nothing: a sync's view of a
     * fixed window needs it (fg_add). */
    d->reset_us = left;
    d->retry_after_us = d->remaining ? 0 : left;
    d->source = FG_SOURCE_STORE;
    d->shadowed = 0;
    fg__decision_ms(d);
}

static void add_window(const fg__algo_params *p, fg__algo_state *s,
                       uint64_t now, uint64_t units, uint64_t age_us,
                       fg_decision *d, uint64_t *expires)
{
    /* Units count in the window they were spent in: a sliding window's
     * previous one weighs them still; an older one, or a fixed window's
     * ended one, no longer counts. (A clock behind the key's window counts
     * them in that window.) */
    uint64_t w = fg__window_of(p, now);
    uint64_t spent_w = fg__window_of(p, now > age_us ? now - age_us : 0);
    if (s->a > w) {
        w = spent_w = s->a;
        now = (w - 1) * p->period_us;
    }
    int to_prev = p->algorithm == FG_SLIDING_WINDOW && spent_w + 1 == w;
    if (spent_w != w && !to_prev)
        units = 0;
    /* A sliding window's count stays exact in Lua's doubles (up to 2^53,
     * which is no less than the limit); a fixed window's is an INCRBY on
     * Redis, which stops at 2^63 - 1: so does this one, where a check's
     * count + cost cannot wrap around. */
    uint64_t cap =
        p->algorithm == FG_SLIDING_WINDOW
            ? (p->limit < FG_MAX_COUNT / FG__ADD_KEEP ? FG__ADD_KEEP * p->limit
                                                      : FG_MAX_COUNT)
            : (uint64_t)INT64_MAX;
    uint64_t cur = 0, prev = 0;
    if (s->a == w) {
        cur = s->b;
        prev = s->c;
    } else if (s->a + 1 == w) {
        prev = s->b;
    }
    /* Held to the cap where units are added, as the script does: units
     * too old to count leave both counts as they are, and so does an add
     * to a count already past the cap (another configuration of the
     * limit, with a larger limit, counted it: lowering it would free its
     * units). */
    uint64_t *n = to_prev ? &prev : &cur;
    if ((spent_w == w || units) && *n < cap)
        *n = units >= cap - *n ? cap : *n + units;
    s->a = w;
    s->b = cur;
    s->c = p->algorithm == FG_SLIDING_WINDOW ? prev : 0;
    if (p->algorithm != FG_SLIDING_WINDOW) {
        fg__window_add_decision(p, now, cur, d);
        *expires = w * p->period_us;
        return;
    }
    /* What a check of one unit would get, as fg_peek; 'allowed' whether
     * the count with the previous window's weight is within the limit. */
    uint64_t elapsed = now - (w - 1) * p->period_us;
    u128 used =
        (u128)prev * (p->period_us - elapsed) + (u128)cur * p->period_us;
    fg__algo_peek(p, s, now, d);
    d->allowed = used <= (u128)p->limit * p->period_us;
    *expires = (w + 1) * p->period_us;
}

/* The most TAT that fg_add leaves ahead of now, k full buckets: k * (du +
 * df / scale) us, as whole us '*cu' and a fraction '*cf'. */
static void keep_cap(const fg__algo_params *p, uint64_t *cu, uint64_t *cf)
{
    uint64_t k = fg__add_keep(p);
    *cu = k * p->depth_us + (uint64_t)((u128)k * p->depth_frac / p->scale);
    *cf = (uint64_t)((u128)k * p->depth_frac % p->scale);
}

int fg__token_debt(const fg__algo_params *p, const fg__algo_state *s,
                   uint64_t au, uint64_t af)
{
    uint64_t cu, cf;
    if (s->c != p->tag)
        return 0;
    keep_cap(p, &cu, &cf);
    return au < cu || (au == cu && af <= cf);
}

/* GCRA: TAT moves to max(TAT, now) + units * T, at most the cap ahead of
 * now (and never back). The Lua twin is the token script's 'add' branch. */
static int add_token(const fg__algo_params *p, fg__algo_state *s, uint64_t now,
                     uint64_t units, fg_decision *d, uint64_t *expires)
{
    const uint64_t scale = p->scale, du = p->depth_us, df = p->depth_frac;
    uint64_t a = s->a, b = s->b;
    if (b >= scale) {
        a++;
        b = 0;
    }
    uint64_t au = 0, af = 0;
    if (a >= now) {
        au = a - now;
        af = b;
    }
    u128 c = (u128)units * p->t_scaled;
    u128 nu128 = (u128)au + c / scale;
    uint64_t nf = af + (uint64_t)(c % scale);
    if (nf >= scale) {
        nf -= scale;
        nu128++;
    }
    uint64_t cu, cf, nu;
    keep_cap(p, &cu, &cf);
    if (nu128 > cu || (nu128 == cu && nf > cf)) {
        nu = cu;
        nf = cf;
    } else {
        nu = (uint64_t)nu128;
    }
    /* Never below what is stored: a caller whose clock lags (clock =
     * client) sees the debt deeper than the cap, and lowering it to the
     * cap from its 'now' would give the others a full bucket. */
    if (au > nu || (au == nu && af > nf)) {
        nu = au;
        nf = af;
    }
    if (now > UINT64_MAX - nu - 1)
        return FG_ERANGE;
    s->a = now + nu;
    s->b = nf;
    s->c = p->tag;
    *expires = s->a + 1;

    d->limit = p->burst;
    d->allowed = nu < du || (nu == du && nf <= df);
    d->remaining =
        d->allowed
            ? (uint64_t)(((u128)(du - nu) * scale + df - nf) / p->t_scaled)
            : 0;
    d->reset_us = nu + (nf != 0);
    d->retry_after_us = 0;
    if (d->remaining == 0) {
        /* Until ahead + T is within a full bucket: (nu, nf) + T - depth,
         * rounded up to the us. */
        u128 x = ((u128)nu * scale + nf) + p->t_scaled;
        u128 full = (u128)du * scale + df;
        u128 wait = x > full ? x - full : 0;
        d->retry_after_us = (uint64_t)((wait + scale - 1) / scale);
    }
    d->source = FG_SOURCE_STORE;
    d->shadowed = 0;
    fg__decision_ms(d);
    return FG_OK;
}

int fg__algo_add(const fg__algo_params *p, fg__algo_state *s, uint64_t now_us,
                 uint64_t units, uint64_t age_us, fg_decision *d,
                 uint64_t *expires_us)
{
    if (p->algorithm == FG_TOKEN_BUCKET)
        return add_token(p, s, now_us, units, d, expires_us);
    add_window(p, s, now_us, units, age_us, d, expires_us);
    return FG_OK;
}
