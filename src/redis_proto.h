/* redis_proto.h -- what the Redis store says and understands, with no I/O:
 * key layout, RESP formatting, the mapping of Redis errors to FG_E* codes,
 * and one protocol per algorithm: the commands a check sends and how their
 * replies become a decision, follow-ups included (the fixed window's DECRBY
 * give-back, naive_get_set's SET after GET, EVAL after NOSCRIPT). The
 * blocking client, the asynchronous one and token bucket batches all drive
 * it; tests drive it with hand-made replies. */
#ifndef FG_REDIS_PROTO_H
#define FG_REDIS_PROTO_H

#include <hiredis/hiredis.h>

#include "algo.h"
#include "redis_scripts.h"
#include "redis_url.h"
#include "alloc.h"

/* An internal result: the script cache lacks the script (EVAL it). Never
 * returned to a caller. */
#define FG__REDIS_NOSCRIPT (-1000)

/* The longest key the store builds: prefix, name, a token bucket's depth,
 * hash tag, window. */
#define FG__REDIS_KEY_MAX (FG__REDIS_PREFIX_MAX + FG_NAME_MAX + FG_MAX_KEY + 32)
/* The longest start of a key, before the user's: prefix + name + ":" and
 * up to 20 digits of depth + ":{". */
#define FG__REDIS_KP_MAX (FG__REDIS_PREFIX_MAX + FG_NAME_MAX + 23)

/* Write the key for 'key' into 'buf' (FG__REDIS_KEY_MAX bytes):
 * 'kp' (prefix + name + ":{", a token bucket's with its depth between),
 * the key, "}", then ":" and 'window' when
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

/* ---- One protocol per algorithm ---------------------------------------- */

/* Internal results of the protocol, never returned to a caller: send the
 * command of the check's new stage and feed its reply back
 * (FG__RSTEP_AGAIN), or the decision is made and the stage's command goes
 * out without anyone waiting for its reply (FG__RSTEP_GIVEBACK). */
#define FG__RSTEP_AGAIN    1
#define FG__RSTEP_GIVEBACK 2

/* What a limit sends that does not change from check to check: the key
 * prefix and the script's fixed arguments, made once per limiter. */
typedef struct fg__rlim {
    int script; /* FG__LUA_* or -1 */
    int nstatic;
    char stat[6][21];
    size_t statlen[6];
    size_t kplen;
    char kp[]; /* prefix + name + ":{"; a token bucket's prefix + name +
                * ":" + depth + ":{" */
} fg__rlim;

/* A new fg__rlim for limit 'p' named 'name' ('namelen' bytes) under key
 * prefix 'prefix' ('prefixlen' bytes); free it with fg__free. NULL when out
 * of memory. */
fg__rlim *fg__rlim_new(const fg__algo_params *p, const char *prefix,
                       size_t prefixlen, const char *name, size_t namelen);

/* One command in argv form, with room for the values it formats; the argv
 * may point into the command itself, so format it where it was built. */
typedef struct fg__rcmd {
    int argc;
    const char *argv[14];
    size_t len[14];
    char key[FG__REDIS_KEY_MAX];
    size_t keylen;
    char cost[21], now[21], ttl[21], n[21], age[21];
} fg__rcmd;

/* The stages of a check. */
enum {
    FG__RS_FIRST,   /* the algorithm's command(s) */
    FG__RS_SET,     /* naive_get_set: the SET after the GET */
    FG__RS_EVAL,    /* a script again, whole, after NOSCRIPT */
    FG__RS_GIVEBACK /* fixed window: the DECRBY of a refused INCRBY, or
                     * the INCRBY that lifts a count found below zero */
};

/* One check as the protocol sees it. 'key' must outlive the check. */
typedef struct fg__rcheck {
    const fg__algo_params *p;
    const fg__rlim *rl;
    const char *key;
    size_t keylen;
    uint64_t cost;
    uint64_t now_us; /* the time sent; 0: the script reads Redis TIME */
    int add;         /* fg_add (FG__COST_ADD): counted beyond the limit */
    uint64_t age_us; /* fg_add_at: when the units were spent */
    int stage;
    uint64_t count; /* naive_get_set: the count to SET */
    uint64_t lift;  /* fixed window: what a count below zero lacked */
    fg_decision d;  /* naive_get_set: decided after the GET */
} fg__rcheck;

/* Start check 'c' of 'cost' units for 'key' under limit 'p' with 'rl',
 * at 'now_us'; a cost with FG__COST_ADD is fg_add_at's count of units
 * spent 'age_us' ago instead (a fixed window's INCRBY without give-back,
 * of nothing when they were spent in an earlier window; the scripts' cost
 * negated, a sliding window's with the age). FG_OK, or FG_EKEY when the
 * key does not fit. */
int fg__rcheck_init(fg__rcheck *c, const fg__algo_params *p, const fg__rlim *rl,
                    const char *key, size_t keylen, uint64_t cost,
                    uint64_t age_us, uint64_t now_us);

/* How many commands the check's stage sends together: 2 for a fixed
 * window's first (INCRBY, then PEXPIRE NX, whose reply only
 * fg__rcheck_aside_reply judges), else 1. */
int fg__rcheck_ncmds(const fg__rcheck *c);

/* Build command 'i' of the check's stage into 'out'. Scripts go as EVALSHA
 * when 'shas' knows them, else (and after NOSCRIPT) as EVAL. */
void fg__rcheck_cmd(const fg__rcheck *c, int i, const fg__redis_shas *shas,
                    fg__rcmd *out);

/* Feed the reply 'r' (not NULL) to the stage's first command. FG_OK with
 * 'd' filled; a negative FG_E* code; FG__RSTEP_AGAIN: send the new stage's
 * command and feed its reply; FG__RSTEP_GIVEBACK: 'd' is filled, and the
 * new stage's command is sent without waiting for its reply. */
int fg__rcheck_reply(fg__rcheck *c, const redisReply *r, fg_decision *d);

/* The reply 'r' to command 1 of a stage (PEXPIRE NX): FG_OK, or the error's
 * code; FG_EPROTO says that Redis refused NX (before 7.0). */
int fg__rcheck_aside_reply(const redisReply *r);

/* What a check returns when the command FG__RSTEP_AGAIN asked for cannot
 * be sent because its connection is closing: naive_get_set's decision
 * stands (FG_OK, 'd' filled) without its SET; a script is FG_EPROTO. */
int fg__rcheck_unsent(const fg__rcheck *c, fg_decision *d);

/* Token bucket batches: the 'n' checks 'c' as one call of the token
 * script, keys first, then eight arguments per check. 'sha' NULL sends the
 * script whole with EVAL. 'argv_keys' (Redis Cluster) passes the keys as
 * arguments, after their count, and declares none. fg__rbatch_need bounds
 * the bytes that fg__rbatch_format then writes into 'buf' (its length). */
size_t fg__rbatch_need(const fg__rcheck *const *c, int n, const char *sha);
size_t fg__rbatch_format(char *buf, const fg__rcheck *const *c, int n,
                         const char *sha, int argv_keys);

/* The reply 'r' (not NULL) to a batch of 'n' checks sent with EVAL when
 * 'eval': FG_OK when it holds four integers per check (read each with
 * fg__rbatch_value); FG__RSTEP_AGAIN after a first NOSCRIPT (send the batch
 * again with EVAL); else the code every check of the batch fails with. */
int fg__rbatch_reply(const redisReply *r, int n, int eval);
int fg__rbatch_value(const redisReply *r, size_t i, const fg__rcheck *c,
                     fg_decision *d);

/* A refund: the refund script's arguments, kept whole so that a NOSCRIPT
 * answer can be sent again with EVAL, and so that it outlives the caller's
 * key while in flight. */
typedef struct fg__rrefund {
    int eval; /* NOSCRIPT seen: sent again with EVAL */
    char kind[2];
    size_t nowlen, p1len, p2len, p3len, p4len;
    char p1[21], p2[21], p3[21], p4[21];
    fg__rcmd k; /* key, cost and now; its argv is rebuilt for each send */
} fg__rrefund;

/* Fill 'rf' for refunding 'cost' of 'key' at 'now_us' (0: Redis TIME),
 * taken when 't' says. FG_OK, FG_EKEY or FG_ENOTSUP (naive_get_set). */
int fg__rrefund_init(fg__rrefund *rf, const fg__algo_params *p,
                     const fg__rlim *rl, const char *key, size_t keylen,
                     uint64_t cost, uint64_t now_us, const fg__taken *t);

/* The refund script's call into 'rf->k': EVALSHA, or EVAL after NOSCRIPT
 * or while 'shas' does not know it. */
void fg__rrefund_cmd(fg__rrefund *rf, const fg__redis_shas *shas);

/* The reply 'r' (not NULL) to the refund: FG_OK, a negative code, or
 * FG__RSTEP_AGAIN after a first NOSCRIPT (send it again: now with EVAL). */
int fg__rrefund_reply(fg__rrefund *rf, const redisReply *r);

#endif
