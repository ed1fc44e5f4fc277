/* bearer.h -- the admin routes' bearer token check (pure). */
#ifndef FG_SERVE_BEARER_H
#define FG_SERVE_BEARER_H

#include <stddef.h>

/* 1 when 'authorization' (an Authorization header's value, or NULL) is
 * "Bearer " and then exactly the 'len' bytes of 'token'. The comparison
 * takes the same time whatever the given value's bytes: every byte of the
 * token is compared, and no difference ends it early, so the time taken
 * tells nothing of how much of a guess was right. */
int fg__bearer_ok(const char *authorization, const char *token, size_t len);

#endif
