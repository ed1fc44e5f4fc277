/* redis_proto.h -- what the Redis store says and understands, with no I/O:
 * the Lua twins of the algorithms, key layout, reply parsing and the mapping
 * of Redis errors to FG_E* codes. Testable without a socket. */
#ifndef FG_REDIS_PROTO_H
#define FG_REDIS_PROTO_H

#include <hiredis/hiredis.h>

#include "algo.h"
#include "redis_url.h"

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

/* An internal result: the script cache lacks the script (EVAL it). Never
 * returned to a caller. */
#define FG__REDIS_NOSCRIPT (-1000)

/* The longest key the store builds: prefix, name, hash tag, window. */
#define FG__REDIS_KEY_MAX (FG__REDIS_PREFIX_MAX + FG_NAME_MAX + FG_MAX_KEY + 32)

/* Write the key for 'key' into 'buf' (FG__REDIS_KEY_MAX bytes):
 * 'kp' (prefix + name + ":{"), the key, "}", then ":" and 'window' when
 * 'window' >= 0, or a bare ":" when 'window' == -1 (the sliding window's
 * base, completed by the script). Returns the length, or 0 when the key is
 * longer than FG_MAX_KEY. */
size_t fg__redis_key(char *buf, const char *kp, size_t kplen, const char *key,
                     size_t keylen, int64_t window);

/* The FG_E* code for a Redis error reply 's' ('len' bytes): FG_EBUSY,
 * FG_EOOM, FG_EREADONLY, FG_EAUTH, FG__REDIS_NOSCRIPT, ... or FG_EPROTO. */
int fg__redis_error_code(const char *s, size_t len);

/* Fill 'd' from a script's reply {allowed, remaining, reset_us,
 * retry_after_us} (exact microseconds; the milliseconds are derived,
 * rounded up). FG_OK, the error's code for an error reply, or FG_EPROTO. */
int fg__redis_script_reply(const redisReply *r, uint64_t limit, fg_decision *d);

/* Fill 'd' from check 'i' of the token script's flat reply (four integers
 * per check), whose errors the caller has already handled. FG_OK, or
 * FG_EPROTO when 'r' is not such an array or holds no check 'i'. */
int fg__redis_script_values(const redisReply *r, size_t i, uint64_t limit,
                            fg_decision *d);

/* A fixed window decision (fixed_window, naive_get_set) from the count the
 * window held before this request, as the C algorithm makes it. */
void fg__redis_window_decision(const fg__algo_params *p, uint64_t now_us,
                               uint64_t count_before, uint64_t cost,
                               fg_decision *d);

/* The expiry of a fixed window key written at 'now_us': the rest of its
 * window plus a margin for servers whose clocks lag (min(period, 1 s)). */
uint64_t fg__redis_window_ttl_ms(const fg__algo_params *p, uint64_t now_us);

/* Format 'argc' arguments as one RESP command (an array of bulk strings,
 * byte for byte what redisFormatCommandArgv makes) into 'buf' of 'cap'
 * bytes, without allocating. Returns the length, or 0 when it does not fit. */
size_t fg__redis_format(char *buf, size_t cap, int argc, const char **argv,
                        const size_t *len);

/* The bytes a bulk string adds beyond its data, NUL scratch included. */
#define FG__REDIS_BULK_OVER 26

/* Write a RESP header, 'type' ('*' array, '$' bulk) and 'n', into 'buf'
 * (at least 24 bytes); its length. */
size_t fg__redis_head(char *buf, char type, uint64_t n);

/* Write 's' ('len' bytes) as one RESP bulk string into 'buf', which has
 * room for len + FG__REDIS_BULK_OVER bytes; its length. */
size_t fg__redis_bulk(char *buf, const char *s, size_t len);

/* Unsigned decimal of 'v' into 'buf' (at least 21 bytes); its length. */
size_t fg__redis_u64(char *buf, uint64_t v);

#endif
