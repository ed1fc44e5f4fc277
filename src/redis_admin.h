/* redis_admin.h -- what the Redis store sends for an operator's fg_peek
 * and fg_reset, and how the replies are read, with no I/O (the blocking
 * client of store_redis.c drives it; tests drive it with hand-made
 * replies).
 *
 * A peek writes nothing. A fixed window's is a GET of the current
 * window's key (on the caller's clock, as its checks); a sliding window's
 * and a token bucket's is one read-only script that returns the time its
 * checks use (Redis TIME, or the caller's for clock_client limits) with
 * the raw values of the keys they read. The decision is then made in C,
 * by the algorithm's own code (fg__algo_peek), so that a peek of the Redis
 * store and one of the memory store agree for the same state and time.
 *
 * A reset DELetes every key the limit may hold for the key: a token
 * bucket's one; a fixed window's windows before, at and after the
 * caller's (servers whose clocks are within a period of each other write
 * no other); a sliding window's two windows either side of the current
 * one on the clock its checks use, read first with TIME when that is
 * Redis's. */
#ifndef FG_REDIS_ADMIN_H
#define FG_REDIS_ADMIN_H

#include "redis_proto.h"

#define FG__RADMIN_KEYS 4

/* One peek or reset as the protocol sees it. */
typedef struct fg__radmin {
    const fg__algo_params *p;
    int reset;       /* 0 peek, 1 reset */
    int need_time;   /* the window index waits for Redis TIME */
    uint64_t now_us; /* the time of the checks; 0 while Redis's is unknown */
    int nkeys;
    size_t keylen[FG__RADMIN_KEYS];
    char keys[FG__RADMIN_KEYS][FG__REDIS_KEY_MAX];
    char now[21], period[21];
} fg__radmin;

/* Start a peek (fg__rpeek_init) or a reset (fg__rreset_init) of 'key'
 * under limit 'p' with 'rl' at 'now_us', the time its checks send: the
 * caller's clock for windows and clock_client limits, else 0 (Redis
 * TIME). FG_OK, or FG_EKEY when the key does not fit. */
int fg__rpeek_init(fg__radmin *a, const fg__algo_params *p, const fg__rlim *rl,
                   const char *key, size_t keylen, uint64_t now_us);
int fg__rreset_init(fg__radmin *a, const fg__algo_params *p, const fg__rlim *rl,
                    const char *key, size_t keylen, uint64_t now_us);

/* The command of the operation's current stage into 'out' (its argv
 * points into 'a' and 'out'). */
void fg__radmin_cmd(const fg__radmin *a, fg__rcmd *out);

/* Feed the reply 'r' (not NULL) to the stage's command. FG_OK, with 'd'
 * filled but its source for a peek; FG__RSTEP_AGAIN: Redis TIME was read,
 * send the next stage's command; or a negative FG_E* code. */
int fg__radmin_reply(fg__radmin *a, const redisReply *r, fg_decision *d);

/* The Lua of the peek's script, for tests. */
extern const char fg__redis_lua_peek[];

#endif
