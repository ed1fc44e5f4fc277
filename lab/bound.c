/* bound.c -- the bound an approximate strategy states for one run of the
 * lab, from the library's own statement of it (fg_limit_bound) and the
 * scalper's burst. Pure: no I/O, no clock.
 *
 * sync: fg_limit_bound says that the servers admit beyond the limit at most
 * what the other servers admit in its window W (two intervals and two
 * round trips), and never more than over_cap = (servers - 1) * (limit +
 * what the bucket refills in W). What the
 * others admit in W is at most what arrives at them in W. The scalper
 * sends 'burst' requests evenly within 'spread' and nothing after, so the
 * arrival rate averaged over any stretch of W is at most
 * A = burst / max(spread, W), and the balancer sends (servers - 1) /
 * servers of it to the others: over <= min(floor(A * (servers - 1) /
 * servers * W) + servers - 1, over_cap) (an overshoot is a whole number of
 * requests, and a count of requests in a span is its rate times the span
 * plus at most one a server).
 *
 * lease: never over the limit; under it at most under_cap, as the library
 * states it: the units the servers may hold, servers * largest chunk, plus the
 * chunk less one that a server waits to take from its token bucket, at most the
 * limit. */
#include <string.h>

#include "lab.h"

typedef unsigned __int128 u128;

/* The limit every Redis strategy of the lab enforces, in mode 's'. */
static int lab_limit(int s, const fg__lab_params *p, fg_limit *lim)
{
    char rate[64];
    snprintf(rate, sizeof rate, "%llu/%llums", (unsigned long long)p->limit,
             (unsigned long long)p->period_ms);
    if (fg_limit_parse(rate, lim) != FG_OK)
        return -1;
    lim->algorithm = FG_TOKEN_BUCKET;
    lim->burst = p->limit;
    if (s == FG__LAB_SYNC) {
        lim->mode = FG_MODE_SYNC;
        lim->sync_ms = (uint32_t)p->sync_ms;
    } else {
        lim->mode = FG_MODE_LEASE;
        lim->lease_chunk = p->chunk;
    }
    return 0;
}

int fg__lab_bound_of(int s, const fg__lab_params *p, fg__lab_bound *out)
{
    memset(out, 0, sizeof *out);
    if (s != FG__LAB_SYNC && s != FG__LAB_LEASE)
        return 0;
    fg_limit lim;
    fg_mode_bound mb;
    if (p->servers < 1 || lab_limit(s, p, &lim) < 0 ||
        fg_limit_bound(&lim, (unsigned)p->servers, (uint64_t)p->rtt_us, &mb) !=
            FG_OK)
        return -1;
    if (s == FG__LAB_LEASE) {
        out->kind = 2;
        out->under_cap = mb.under_cap;
        out->bound = mb.under_cap;
        /* The library's default chunk is half the burst, at least one. */
        out->chunk = p->chunk ? p->chunk : p->limit / 2 ? p->limit / 2 : 1;
        return 0;
    }
    out->kind = 1;
    out->over_window_ms = mb.over_window_us / 1000;
    out->over_cap = mb.over_cap;
    uint64_t w = mb.over_window_us;
    uint64_t span = (uint64_t)p->spread_us > w ? (uint64_t)p->spread_us : w;
    uint64_t others = (uint64_t)p->servers - 1;
    /* burst * others * W / (servers * span), in 128 bits: W and span are
     * microseconds, and burst up to 10,000. */
    u128 num = (u128)(uint64_t)p->burst * others * w;
    u128 in = num / ((u128)(uint64_t)p->servers * span);
    /* A count of requests in a span is its rate times the span, plus at
     * most one per server (fg_limit_bound). */
    in += others;
    out->in_window = in > UINT64_MAX ? UINT64_MAX : (uint64_t)in;
    out->bound = out->in_window < mb.over_cap ? out->in_window : mb.over_cap;
    return 0;
}
