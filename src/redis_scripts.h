/* redis_scripts.h -- the Lua twins of the algorithms that the Redis store
 * runs inside Redis, and the cache of their SHA1s. No I/O. */
#ifndef FG_REDIS_SCRIPTS_H
#define FG_REDIS_SCRIPTS_H

#include <hiredis/hiredis.h>
#include <stdatomic.h>

/* The epoch of the token bucket's earlier stored format (TAT in 1/scale us
 * since 2024-01-01), which the script still reads. */
#define FG__REDIS_EPOCH_S 1704067200

/* Scripts, by algorithm. */
/* FG__LUA_REFUND gives back units for the three atomic algorithms. */
enum {
    FG__LUA_SLIDING = 0,
    FG__LUA_TOKEN = 1,
    FG__LUA_REFUND = 2,
    FG__LUA_COUNT = 3
};
extern const char *const fg__redis_lua[FG__LUA_COUNT];

/* The scripts' SHA1s, learnt from SCRIPT LOAD. A bit of 'known' is set
 * once, after its buffer is written, so readers need no lock. */
typedef struct fg__redis_shas {
    char sha[FG__LUA_COUNT][41];
    atomic_int known;
} fg__redis_shas;

/* The SHA1 of script 'i' (40 hex digits), or NULL while it is not known:
 * the script is then sent whole, with EVAL. */
const char *fg__redis_sha(const fg__redis_shas *s, int i);

/* Learn script 'i''s SHA1 from SCRIPT LOAD's reply 'r' unless known. The
 * caller serializes writers. 1 when 'r' held a SHA1, else 0 (an error
 * reply: checks fall back to EVAL). */
int fg__redis_sha_learn(fg__redis_shas *s, int i, const redisReply *r);

#endif
