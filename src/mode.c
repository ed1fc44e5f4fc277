/* mode.c -- the approximate modes' names as config files spell them, and
 * their stated bounds (floodgate.h, "Approximate modes"). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floodgate.h"
#include "error.h"
#include "mode.h"

#define SYNC_MIN_MS 10
#define SYNC_MAX_MS 10000

/* "200ms", "1s", "1.5s" into whole milliseconds; -1 when not a duration.
 * Decimal digits with at most one point, read here: no sign, exponent or
 * hex (which strtod would take), and no locale's decimal comma. */
static long long duration_ms(const char *s)
{
    size_t d = strspn(s, "0123456789"), f = 0;
    if (d == 0 || d > 6) /* the longest interval is 10000ms */
        return -1;
    long long v = 0, scale = 1;
    for (size_t i = 0; i < d; i++)
        v = v * 10 + (s[i] - '0');
    const char *u = s + d;
    if (*u == '.') {
        f = strspn(u + 1, "0123456789");
        if (f == 0 || f > 6)
            return -1;
        for (size_t i = 1; i <= f; i++) {
            v = v * 10 + (u[i] - '0');
            scale *= 10;
        }
        u += 1 + f;
    }
    /* A bare number is milliseconds, as serve's durations are. */
    long long mult = !strcmp(u, "ms") || (!*u && !f) ? 1
                     : !strcmp(u, "s")               ? 1000
                                                     : 0;
    if (!mult || (v * mult) % scale)
        return -1; /* not a whole number of milliseconds */
    return v * mult / scale;
}

int fg_mode_parse(const char *s, fg_limit *lim, char *err, size_t errlen)
{
    if (!s || !lim)
        return fg__seterr(err, errlen, FG_EINVAL, "no mode given");
    if (!strcmp(s, "exact")) {
        lim->mode = FG_MODE_EXACT;
        return FG_OK;
    }
    if (!strcmp(s, "sync") || !strncmp(s, "sync:", 5)) {
        long long ms = s[4] ? duration_ms(s + 5) : 200;
        if (ms < SYNC_MIN_MS || ms > SYNC_MAX_MS)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "mode '%.40s': the sync interval must be a "
                              "duration from 10ms to 10s, like sync:200ms",
                              s);
        lim->mode = FG_MODE_SYNC;
        lim->sync_ms = (uint32_t)ms;
        return FG_OK;
    }
    if (!strcmp(s, "lease") || !strncmp(s, "lease:", 6)) {
        uint64_t chunk = 0;
        if (s[5]) {
            const char *v = s + 6;
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (!isdigit((unsigned char)*v) || *end || n == 0 ||
                n >= FG_MAX_COUNT)
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "mode '%.40s': the chunk must be a positive "
                                  "count of units, like lease:50",
                                  s);
            chunk = n;
        }
        lim->mode = FG_MODE_LEASE;
        lim->lease_chunk = chunk;
        return FG_OK;
    }
    return fg__seterr(err, errlen, FG_EINVAL,
                      "unknown mode '%.40s' (use exact, sync:INTERVAL or "
                      "lease[:CHUNK])",
                      s);
}

int fg_mode_format(const fg_limit *lim, char *buf, size_t len)
{
    int n;
    if (!lim || (!buf && len))
        return FG_EINVAL;
    switch (lim->mode) {
    case FG_MODE_SYNC:
        if (lim->sync_ms % 1000 == 0)
            n = snprintf(buf, len, "sync:%us", lim->sync_ms / 1000);
        else
            n = snprintf(buf, len, "sync:%ums", lim->sync_ms);
        break;
    case FG_MODE_LEASE:
        if (lim->lease_chunk)
            n = snprintf(buf, len, "lease:%llu",
                         (unsigned long long)lim->lease_chunk);
        else
            n = snprintf(buf, len, "lease");
        break;
    default:
        n = snprintf(buf, len, "exact");
    }
    return n < 0 || (size_t)n >= len ? FG_EINVAL : n;
}

int fg__mode_valid(const fg_limit *lim, uint64_t max_cost, char *err,
                   size_t errlen)
{
    switch (lim->mode) {
    case FG_MODE_EXACT:
        return FG_OK;
    case FG_MODE_SYNC:
        if (lim->sync_ms < SYNC_MIN_MS || lim->sync_ms > SYNC_MAX_MS)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "sync interval must be 10 to 10000 ms");
        break;
    case FG_MODE_LEASE:
        if (lim->lease_chunk > max_cost)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "lease chunk %llu is above the limit (%llu)",
                              (unsigned long long)lim->lease_chunk,
                              (unsigned long long)max_cost);
        break;
    default:
        return fg__seterr(err, errlen, FG_EINVAL, "unknown mode %d",
                          (int)lim->mode);
    }
    if (lim->algorithm == FG_NAIVE_GET_SET)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "naive_get_set runs only in mode exact");
    if (lim->durable)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "durable = replica needs mode exact");
    return FG_OK;
}

uint64_t fg__lease_max_chunk(const fg_limit *lim, uint64_t max_cost)
{
    if (lim->lease_chunk)
        return lim->lease_chunk;
    return max_cost / 2 ? max_cost / 2 : 1;
}

/* Sums and products that stop at UINT64_MAX: a bound too large to hold
 * is stated as the largest one. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

int fg_limit_bound(const fg_limit *lim, unsigned servers, uint64_t rtt_us,
                   fg_mode_bound *out)
{
    if (!lim || !out || servers == 0 || fg_limit_check(lim, NULL, 0) != FG_OK)
        return FG_EINVAL;
    memset(out, 0, sizeof(*out));
    uint64_t max_cost = lim->limit;
    if (lim->algorithm == FG_TOKEN_BUCKET && lim->burst)
        max_cost = lim->burst;
    uint64_t others = servers - 1;
    switch (lim->mode) {
    case FG_MODE_SYNC:
        out->over_window_us = sat_add(sat_mul(2, (uint64_t)lim->sync_ms * 1000),
                                      sat_mul(2, rtt_us));
        /* Each other server admits at most the limit as it sees it in a
         * window; a token bucket's view also refills over W, and each
         * server may spend that too. */
        if (lim->algorithm == FG_TOKEN_BUCKET) {
            unsigned __int128 r =
                ((unsigned __int128)lim->limit * out->over_window_us +
                 lim->period_us - 1) /
                lim->period_us;
            max_cost =
                sat_add(max_cost, r > UINT64_MAX ? UINT64_MAX : (uint64_t)r);
        }
        out->over_cap = sat_mul(others, max_cost);
        break;
    case FG_MODE_LEASE: {
        /* The units the servers hold, each its chunk (this one's too: a
         * check whose takes come back empty is decided by the store, which
         * counts this server's take in flight); and a token bucket's or
         * sliding window's server whose chunk did not fit waits until it
         * does, refusing meanwhile while fewer units than the chunk came
         * back. */
        uint64_t chunk = fg__lease_max_chunk(lim, max_cost);
        uint64_t c = sat_mul(servers, chunk);
        if (lim->algorithm != FG_FIXED_WINDOW)
            c = sat_add(c, chunk - 1);
        out->under_cap = c < max_cost ? c : max_cost;
        break;
    }
    default:
        break;
    }
    return FG_OK;
}
