/* mode.h -- the approximate modes inside the library: their validation
 * (mode.c) and the limiter's drive of its local state (limiter_mode.c). */
#ifndef FG_MODE_H
#define FG_MODE_H

#include "limiter.h"

/* FG_OK when 'lim''s mode fields are valid for a limit whose largest cost
 * is 'max_cost'; else FG_EINVAL with the reason in 'err'. */
int fg__mode_valid(const fg_limit *lim, uint64_t max_cost, char *err,
                   size_t errlen);
/* The largest chunk a lease of 'lim' takes. */
uint64_t fg__lease_max_chunk(const fg_limit *lim, uint64_t max_cost);

/* Give limiter 'l' (mode sync or lease, its store ready) its local state,
 * taking over l->check; on an asynchronous store, a timer on its loop.
 * FG_OK, or a failure with the reason in 'err'. */
int fg__mode_init(fg_limiter *l, char *err, size_t errlen);
/* Free it (nothing when 'l' has none). */
void fg__mode_free(fg_limiter *l);
/* fg_check_async and fg_refund_at for such a limiter, the input
 * validated; the refund returns the units to give back in the store
 * instead. */
int fg__mode_check_async(fg_limiter *l, const char *key, size_t keylen,
                         uint64_t cost, fg_check_cb cb, void *data);
uint64_t fg__mode_refund(fg_limiter *l, const char *key, size_t keylen,
                         uint64_t cost, uint64_t age_us);
/* Units of 'key' given back in the store (a refund): the local state
 * learns that the store has them again. */
void fg__mode_refund_store(fg_limiter *l, const char *key, size_t keylen);
/* The keys 'l''s local state holds (0 for an exact limiter). For tests. */
uint64_t fg__mode_keys(fg_limiter *l);
/* fg_limiter_forget's part in the mode: fg_local_forget under the lock. */
void fg__mode_forget(fg_limiter *l, const char *key, size_t keylen);

#endif
