/* redis_store.h -- hooks of the Redis store for tests and tools. */
#ifndef FG_REDIS_STORE_H
#define FG_REDIS_STORE_H

#include "store.h"
#include "clock.h"

/* Replace the clock the Redis store passes to Redis for fixed windows,
 * naive_get_set and 'clock_client' limits (default: fg__wall_us). Tests use
 * it to replay the same vectors through the C algorithm and the Lua twin.
 * Returns FG_EINVAL when 'st' is not a Redis store. */
int fg__store_redis_set_clock(fg_store *st, fg_clock_fn clock, void *ctx);

/* The last connection or protocol error the store met, for logs ("" when
 * none). Never holds a password. Not synchronized: read it from the thread
 * that saw the failure, or when no check runs. */
const char *fg__store_redis_last_error(fg_store *st);

/* How many times that error was written. A run of failures with one code
 * (an outage) writes it once: tests check that no lock or formatting is
 * spent on every failed check. 0 when 'st' is not a Redis store. */
unsigned long fg__store_redis_error_writes(fg_store *st);

/* When the last error was written, in an order over every Redis store of
 * the process (0: never), so that the shards can report the latest. */
uint64_t fg__store_redis_error_seq(fg_store *st);

#endif
