/* redis_store.h -- hooks of the Redis store for tests and tools. */
#ifndef FG_REDIS_STORE_H
#define FG_REDIS_STORE_H

#include "store.h"
#include "clock.h"
#include "limiter.h"

#include <hiredis/async.h>

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

/* ---- A node of Redis Cluster (store_cluster.c) -------------------------- */

/* Called with a check whose reply was the error 's' ('len' bytes: MOVED,
 * ASK, READONLY, CLUSTERDOWN, a batch refused...): 1 when it took the check
 * (to send it on to another node, or again later), 0 when the check should
 * fail as it would without it. */
typedef int (*fg__redis_redirect_fn)(void *owner, fg__req *req, const char *s,
                                     size_t len);

/* Make 'st' a node of a cluster: errors of async checks go to 'fn', and
 * token bucket batches declare no keys (a batch's keys span slots). */
void fg__store_redis_set_cluster(fg_store *st, fg__redis_redirect_fn fn,
                                 void *owner);

/* fg_check's store step on a blocking Redis store by 'deadline_us'
 * (monotonic; 0: the limit's timeout from now), preceded by ASKING when
 * 'asking', and with the text of a final error reply in 'errbuf' (when not
 * NULL; "" when none). A MOVED or ASK is not the node's error. */
int fg__store_redis_check_ex(fg_store *st, fg_limiter *l, const char *key,
                             size_t keylen, uint64_t cost, uint64_t age_us,
                             int asking, uint64_t deadline_us, fg_decision *d,
                             char *errbuf, size_t errlen);

/* Run the command 'argv' ('argc' words) on a blocking connection of 'st' by
 * 'deadline_us' (monotonic): its reply (free it with freeReplyObject), or
 * NULL with the code in '*rc'. */
redisReply *fg__store_redis_command(fg_store *st, uint64_t deadline_us,
                                    int argc, const char **argv, int *rc);

/* Ask the server of 'st' for its maxmemory settings and EVALSHA by
 * 'deadline_us' (monotonic), as a store opened with a probe does
 * (fg_store_warning): for
 * a store opened lazily, such as a Redis Cluster's masters. Not thread-
 * safe: call it before the store is used. */
void fg__store_redis_settings_probe(fg_store *st, uint64_t deadline_us);

/* Send 'cmd' (no arguments) on the async connection of 'st'; 'fn' gets its
 * reply, or NULL if the connection goes away first. FG_OK, or a negative
 * code and 'fn' is never called. */
int fg__store_redis_command_async(fg_store *st, redisCallbackFn *fn, void *priv,
                                  const char *cmd);

#endif
