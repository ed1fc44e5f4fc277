/* fallback.c -- the share of a limit on_failure = local enforces (pure). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fallback.h"

fg_limit fg__fallback_worker_limit(const fg_limit *lim, unsigned nworkers)
{
    fg_limit w = *lim;
    uint64_t fb =
        (uint64_t)(lim->fallback_servers ? lim->fallback_servers : 1) *
        (nworkers ? nworkers : 1);
    w.fallback_servers = fb > UINT32_MAX ? UINT32_MAX : (uint32_t)fb;
    return w;
}

int fg__fallback_share_of(fg_store *mem, const fg_limit *lim, unsigned nworkers,
                          fg__fallback_share *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (lim->on_failure != FG_FAIL_LOCAL) {
        snprintf(err, errlen, "on_failure is not local");
        return FG_EINVAL;
    }
    fg_limit w = fg__fallback_worker_limit(lim, nworkers);
    fg_limiter *l = fg_limiter_new(mem, &w, err, errlen);
    if (!l)
        return FG_EINVAL;
    int rc = fg_limiter_local_share(l, &out->limit, &out->burst);
    fg_limiter_free(l);
    if (rc != FG_OK) {
        snprintf(err, errlen, "%s", fg_strerror(rc));
        return rc;
    }
    out->workers = nworkers ? nworkers : 1;
    out->servers = lim->fallback_servers ? lim->fallback_servers : 1;
    out->zero = out->limit == 0;
    /* All servers together, each with its workers: what the fleet admits
     * while the store is down, against what the limit says. Products are
     * at most 2^53 x 2^32 x 2^32 in 128 bits. */
    unsigned __int128 all = (unsigned __int128)out->workers * out->servers;
    uint64_t cap = lim->burst ? lim->burst : lim->limit;
    out->rounded =
        all * out->limit < lim->limit || (lim->algorithm == FG_TOKEN_BUCKET &&
                                          !out->zero && all * out->burst < cap);
    return FG_OK;
}

void fg__fallback_rate_text(uint64_t count, uint64_t period_us, char *out,
                            size_t outlen)
{
    static const struct {
        uint64_t us;
        const char *unit;
    } units[] = {{86400000000ULL, "day"}, {3600000000ULL, "h"},
                 {60000000ULL, "min"},    {1000000ULL, "s"},
                 {1000ULL, "ms"},         {1ULL, "us"}};
    size_t i = 0;
    while (period_us % units[i].us != 0)
        i++;
    uint64_t n = period_us / units[i].us;
    if (n == 1)
        snprintf(out, outlen, "%" PRIu64 "/%s", count, units[i].unit);
    else
        snprintf(out, outlen, "%" PRIu64 "/%" PRIu64 "%s", count, n,
                 units[i].unit);
}

void fg__fallback_describe(const fg_limit *lim, const fg__fallback_share *s,
                           char *info, size_t infolen, char *warn,
                           size_t warnlen)
{
    char per[48], proc[48], rate[48], all[48];
    unsigned __int128 fleet = (unsigned __int128)s->workers * s->servers;
    uint64_t in_proc = s->limit * s->workers;
    fg__fallback_rate_text(s->limit, lim->period_us, per, sizeof(per));
    fg__fallback_rate_text(in_proc, lim->period_us, proc, sizeof(proc));
    fg__fallback_rate_text(lim->limit, lim->period_us, rate, sizeof(rate));
    fg__fallback_rate_text((uint64_t)(fleet * s->limit), lim->period_us, all,
                           sizeof(all));
    int tb = lim->algorithm == FG_TOKEN_BUCKET;
    char burst[96] = "";
    if (tb)
        snprintf(burst, sizeof(burst),
                 "; burst %" PRIu64 " per worker (%" PRIu64 " in this process)",
                 s->burst, s->burst * s->workers);
    snprintf(info, infolen,
             "limit %s: on_failure = local enforces %s per worker x %u "
             "worker%s (%s in this process)%s while the store is unreachable",
             lim->name, per, s->workers, s->workers == 1 ? "" : "s", proc,
             burst);
    if (warnlen)
        warn[0] = '\0';
    if (s->zero) {
        snprintf(warn, warnlen,
                 "limit %s: on_failure = local enforces NOTHING: %s%s among "
                 "%" PRIu32 " server%s x %u worker%s rounds down to 0 per "
                 "worker, so EVERY request is refused while the store is "
                 "unreachable (lower fallback_servers or workers, raise the "
                 "rate, or choose on_failure = open or closed)",
                 lim->name, rate, tb && lim->burst ? " (or its burst)" : "",
                 s->servers, s->servers == 1 ? "" : "s", s->workers,
                 s->workers == 1 ? "" : "s");
    } else if (s->rounded) {
        char b[96] = "";
        uint64_t cap = lim->burst ? lim->burst : lim->limit;
        if (tb && (uint64_t)(fleet * s->burst) < cap)
            snprintf(b, sizeof(b),
                     "; burst %" PRIu64 " x %u x %" PRIu32 " is %" PRIu64
                     ", less than %" PRIu64,
                     s->burst, s->workers, s->servers,
                     (uint64_t)(fleet * s->burst), cap);
        snprintf(warn, warnlen,
                 "limit %s: on_failure = local rounds the share down: %s per "
                 "worker x %u worker%s x %" PRIu32 " server%s is %s, less "
                 "than the rate %s%s, while the store is unreachable",
                 lim->name, per, s->workers, s->workers == 1 ? "" : "s",
                 s->servers, s->servers == 1 ? "" : "s", all, rate, b);
    }
}
