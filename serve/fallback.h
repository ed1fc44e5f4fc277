/* fallback.h -- on_failure = local in `floodgate serve`: the share of a
 * limit that this process enforces while the store is unreachable.
 *
 * The library gives each server limit / fallback_servers, rounded down
 * (fg_limiter_local_share). Each worker of serve runs its own limiter, so
 * serve divides again among the workers: a worker's limiter is built with
 * fallback_servers x workers. What that comes to is said at start and on
 * reload, with a warning when rounding lost part of the rate, and a loud
 * one when the share is 0 (every request refused while the store is
 * down). Pure: the limiters it builds live on a memory store. */
#ifndef FG_SERVE_FALLBACK_H
#define FG_SERVE_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "floodgate.h"

/* The limit one of 'nworkers' workers runs for 'lim': the same, with
 * fallback_servers multiplied by the workers (saturating). */
fg_limit fg__fallback_worker_limit(const fg_limit *lim, unsigned nworkers);

typedef struct fg__fallback_share {
    uint64_t limit;   /* per worker, per period */
    uint64_t burst;   /* per worker; 0 unless token_bucket */
    unsigned workers; /* of this process */
    uint32_t servers; /* fallback_servers */
    int rounded;      /* share x workers x servers < the limit or burst */
    int zero;         /* 0 per worker: every check refused */
} fg__fallback_share;

/* The share of 'lim' (on_failure = local) in a process of 'nworkers'
 * workers, as the library's limiter on 'mem' (a memory store) reports it.
 * FG_OK; FG_EINVAL when 'lim' does not fall back to local; or the
 * library's error, with its reason in 'err'. */
int fg__fallback_share_of(fg_store *mem, const fg_limit *lim, unsigned nworkers,
                          fg__fallback_share *out, char *err, size_t errlen);

/* What to log for 'lim' and its share 's': 'info' always ("limit NAME:
 * on_failure = local enforces 3/s per worker x 2 workers (6/s in this
 * process) while the store is unreachable"); 'warn' the rounding or zero
 * warning, "" when there is none. */
void fg__fallback_describe(const fg_limit *lim, const fg__fallback_share *s,
                           char *info, size_t infolen, char *warn,
                           size_t warnlen);

/* "N/UNIT" of 'count' per 'period_us', as a rate is written in the file
 * ("3/s", "1/15min", "40/500ms"). */
void fg__fallback_rate_text(uint64_t count, uint64_t period_us, char *out,
                            size_t outlen);

#endif
