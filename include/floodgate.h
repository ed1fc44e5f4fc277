/* floodgate.h -- the public interface of libfloodgate.
 *
 * A limit ("10/s", "5/15min") is checked for a key (a user, an IP) against a
 * store that holds the counters: "memory" (this process only) or Redis
 * (shared by every server). The limiter owns the policy: how long to wait for
 * the store, what to decide when it fails, and when to stop asking it.
 *
 * Every call that can fail returns FG_OK (0) or a negative FG_E* code;
 * fg_strerror() names it. Calls that take a caller buffer 'err' write a
 * one-line reason there. No call exits or aborts on bad input. */
#ifndef FLOODGATE_H
#define FLOODGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with -fvisibility=hidden, so that only what this
 * header declares is exported from libfloodgate.so and the fg__ functions
 * shared between its files stay internal. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define FG_VERSION "0.1.0"

/* Errors are negative and append-only: a code never changes meaning. */
#define FG_ERRORS(X)                                                           \
    X(OK, 0, "ok")                                                             \
    X(ENOMEM, -1, "out of memory")                                             \
    X(EINVAL, -2, "invalid argument")                                          \
    X(EBACKEND, -3, "backend unavailable")                                     \
    X(ETIMEOUT, -4, "backend timed out")                                       \
    X(ECOST, -5, "cost out of range")                                          \
    X(EKEY, -6, "key too long (on Redis Cluster: or empty, or starts with })") \
    X(EPROTO, -7, "unexpected reply from backend")                             \
    X(EAUTH, -8, "backend authentication failed")                              \
    X(EREADONLY, -9, "backend is read-only")                                   \
    X(EOOM, -10, "backend out of memory")                                      \
    X(EBUSY, -11, "backend busy")                                              \
    X(EBREAKER, -12, "circuit breaker open")                                   \
    X(ERANGE, -13, "value out of range")                                       \
    X(ENOTSUP, -14, "not supported by this store")                             \
    X(EPROCESS, -15, "store opened by another process (open after fork)")

#define FG__ERR_ENUM(name, code, text) FG_##name = code,
enum fg_error { FG_ERRORS(FG__ERR_ENUM) };
#undef FG__ERR_ENUM

/* The name of error 'code', or "unknown error". Never NULL. */
const char *fg_strerror(int code);

/* Limits go up to FG_MAX_COUNT (2^53); a cost must be below it. Counts must
 * stay exact in every store, and Redis's Lua numbers are doubles. */
#define FG_MAX_COUNT (UINT64_C(1) << 53)
/* The longest key accepted by any store, in bytes. */
#define FG_MAX_KEY 1024

typedef enum fg_algorithm {
    FG_FIXED_WINDOW = 0,
    FG_SLIDING_WINDOW = 1,
    FG_TOKEN_BUCKET = 2,
    /* GET, compare, SET in separate round trips: the broken read-decide-write,
     * kept only so the lab can show the race. Never a default. */
    FG_NAIVE_GET_SET = 3
} fg_algorithm;

typedef enum fg_on_failure {
    FG_FAIL_OPEN = 0,   /* allow, counted as fail-open */
    FG_FAIL_CLOSED = 1, /* refuse (503 in the daemon) */
    FG_FAIL_LOCAL = 2   /* in memory: limit / fallback_servers, rounded down */
} fg_on_failure;

/* Which path made a decision. */
typedef enum fg_source {
    FG_SOURCE_STORE = 0,
    FG_SOURCE_CACHE = 1,
    FG_SOURCE_LOCAL = 2,
    FG_SOURCE_FAIL_OPEN = 3,
    FG_SOURCE_FAIL_CLOSED = 4,
    FG_SOURCE_SYNC = 5, /* here, from the last synced view (FG_MODE_SYNC) */
    FG_SOURCE_LEASE = 6 /* here, on units this process holds (FG_MODE_LEASE) */
} fg_source;

/* Where a limit's decisions are made (see "Approximate modes" below). */
typedef enum fg_mode {
    FG_MODE_EXACT = 0, /* every check asks the store */
    FG_MODE_SYNC = 1,  /* decided here; usage sent every sync_ms */
    FG_MODE_LEASE = 2  /* decided here, on units taken from the store */
} fg_mode;

/* Names as they appear in config files, flags and JSON; NULL when out of
 * range. The parsers return FG_OK or FG_EINVAL. */
const char *fg_algorithm_name(fg_algorithm a);
int fg_algorithm_parse(const char *s, fg_algorithm *out);
const char *fg_on_failure_name(fg_on_failure f);
int fg_on_failure_parse(const char *s, fg_on_failure *out);
const char *fg_source_name(fg_source s); /* "store", "cache", ... */
const char *fg_mode_name(fg_mode m);     /* "exact", "sync", "lease" */

#define FG_NAME_MAX 64

/* A limit: 'limit' units per 'period_us', and its policy. Filled with
 * defaults by fg_limit_parse(); change fields after parsing. */
typedef struct fg_limit {
    /* Part of the store key; default "default". On Redis every limiter of
     * a name shares its counters; the memory store keeps each limiter's
     * apart (make one limiter per limit and share it among threads). */
    char name[FG_NAME_MAX];
    uint64_t limit;            /* units per period, 1 .. FG_MAX_COUNT */
    uint64_t period_us;        /* 1000 (1 ms) to a year */
    uint64_t burst;            /* token_bucket capacity; 0 means 'limit' */
    fg_algorithm algorithm;    /* default FG_TOKEN_BUCKET */
    fg_on_failure on_failure;  /* default FG_FAIL_OPEN */
    uint32_t timeout_ms;       /* store deadline, default 5; 1 to 60000 */
    uint32_t fallback_servers; /* divisor for FG_FAIL_LOCAL, default 1 */
    int clock_client;          /* Redis: 1 = caller's clock, 0 = Redis TIME */
    /* Redis: 1 = an allowed check counts only once a replica holds its
     * write (WAIT 1, within the timeout; else the check fails and
     * on_failure decides), so that a failover cannot forget it. */
    int durable;
    /* 1: shadow mode (a dry run). Checks decide and count as usual, but a
     * refusal is turned into an allowed decision that says what it would
     * have been (fg_decision.shadowed), so a new limit can be watched
     * before it is enforced. Default 0. */
    int shadow;
    /* FG_MODE_EXACT (default), FG_MODE_SYNC or FG_MODE_LEASE. */
    fg_mode mode;
    /* FG_MODE_SYNC: how often the usage goes to the store, 10 to 10,000
     * ms; default 200. */
    uint32_t sync_ms;
    /* FG_MODE_LEASE: the most units one lease takes, up to the limit (the
     * burst for token_bucket); 0 (default): half of it, at least 1. */
    uint64_t lease_chunk;
} fg_limit;

/* Parse 'rate' ("10/s", "100/min", "5/15min", "1000/h", "50000/day",
 * "250/500ms") into 'out', first resetting every field of 'out' to its
 * default. Returns FG_OK or FG_EINVAL (see fg_limit_parse_err for why). */
int fg_limit_parse(const char *rate, fg_limit *out);
/* As fg_limit_parse, writing the reason for a refusal into 'err'. */
int fg_limit_parse_err(const char *rate, fg_limit *out, char *err,
                       size_t errlen);

/* FG_OK when 'lim' is a limit fg_limiter_new would accept on some store
 * (its name, rate, burst and algorithm); else FG_EINVAL or FG_ERANGE with
 * the reason in 'err'. A store may refuse more (none does today). */
int fg_limit_check(const fg_limit *lim, char *err, size_t errlen);

/* Parse a mode into 'lim': "exact", "sync" (every 200 ms), "sync:DURATION"
 * ("sync:200ms", "sync:1s"; 10 ms to 10 s), "lease" or "lease:CHUNK" (a
 * chunk of at most CHUNK units). FG_OK, or FG_EINVAL with the reason in
 * 'err' ('lim' unchanged). */
int fg_mode_parse(const char *s, fg_limit *lim, char *err, size_t errlen);
/* Write 'lim''s mode as fg_mode_parse reads it ("sync:200ms") into 'buf';
 * its length, or FG_EINVAL when it does not fit (or 'lim' is NULL). */
int fg_mode_format(const fg_limit *lim, char *buf, size_t len);

/* 1 when the 'n' bytes at 's' can name a limit: 1 to FG_NAME_MAX - 1 of
 * A-Z a-z 0-9 _ - . (the name is part of every store key). */
int fg_limit_name_valid(const char *s, size_t n);

/* One decision. The _ms times are rounded up to whole milliseconds; the
 * _us times are the same durations, exact to the microsecond, from the
 * instant of the decision on the clock that made it (the memory store's;
 * for Redis the caller's for fixed windows and clock_client limits, else
 * Redis TIME). retry_after_us is the exact wait: retried retry_after_us - 1
 * us later the request is refused, retry_after_us later it is allowed (if
 * nothing else consumed meanwhile). A decision the store did not make
 * (fail open, fail closed) has _us = _ms * 1000, and its 'remaining' knows
 * nothing of the key: fail_open says the limit less the cost, fail_closed
 * 0 (serve and floodgate check print null for them). */
typedef struct fg_decision {
    int allowed;             /* 1 allowed, 0 refused */
    uint64_t limit;          /* the limit (burst for token_bucket) */
    uint64_t remaining;      /* units still available after this check */
    uint64_t reset_ms;       /* until the limit is fully available again */
    uint64_t retry_after_ms; /* 0 when allowed; never early */
    fg_source source;
    uint64_t reset_us;       /* reset_ms, exact in microseconds */
    uint64_t retry_after_us; /* retry_after_ms, exact; 0 when allowed */
    /* 1 when the limit refused and its shadow mode (fg_limit.shadow)
     * allowed the request instead: 'allowed' is then 1, 'retry_after_*'
     * 0, and the other fields are the refusal's ('remaining' is what the
     * limit counts, usually 0). A refusal consumes nothing, so a shadowed
     * one took nothing either. */
    int shadowed;
} fg_decision;

/* Microseconds from an arbitrary fixed origin; must not go backwards by
 * much (a clock that steps back is clamped, never rewarded). */
typedef uint64_t (*fg_clock_fn)(void *ctx);

/* The library's own clock, in microseconds: CLOCK_MONOTONIC, the clock of
 * every deadline. The memory store's default is this clock plus the wall
 * clock's lead over it when the store opened, so that its windows fall on
 * the Unix epoch's as a Redis store's do. */
uint64_t fg_mono_us(void);

/* Allocation functions used by the whole library (default: libc): hiredis
 * and libevent keep allocating with libc's. Set before any other call; not
 * thread-safe. NULL restores the default. */
void fg_set_allocator(void *(*malloc_fn)(size_t), void (*free_fn)(void *));

typedef struct fg_store fg_store;
typedef struct fg_limiter fg_limiter;

/* Open a store: "memory", "memory?max_keys=N", "redis://[user:pass@]host:port
 * [/db]", "unix:///path/redis.sock", or "shards=URL,URL,..." (2 to 64 Redis
 * URLs, each key on one of them by consistent hashing; every URL must have
 * the same prefix, and a ',' in a password is written %2C), or
 * "cluster=redis://HOST:PORT[,redis://HOST:PORT...]" (Redis Cluster: the
 * slot map from the first node that answers; the first URL's user,
 * password and prefix serve every master), or
 * "sentinel://[user:pass@]HOST:PORT[,HOST:PORT...]/MASTER[?...]" (the
 * master the sentinels name, followed across failovers; the Redis URL's
 * parameters apply to the master, sentinel_password= and sentinel_user= to
 * the sentinels). NULL on failure, with the reason in 'err' (passwords are
 * never written there). */
fg_store *fg_store_open(const char *url, char *err, size_t errlen);

typedef struct fg_memory_options {
    uint64_t max_keys; /* default 1,000,000 */
    fg_clock_fn clock; /* default: CLOCK_MONOTONIC */
    void *clock_ctx;
} fg_memory_options;

/* FG_OK when 'url' is a store URL fg_store_open would accept, without
 * opening it (no connection, no lookup); else FG_EINVAL with the reason in
 * 'err' (passwords are never written there). */
int fg_store_url_check(const char *url, char *err, size_t errlen);

/* A memory store with explicit options (tests inject a fake clock). */
fg_store *fg_store_open_memory(const fg_memory_options *opt, char *err,
                               size_t errlen);

/* The last connection or protocol error the store met, for logs ("" when
 * none; never a password). Any thread may call it: the text is a copy in
 * the calling thread's own buffer, which this and fg_store_node_error
 * share for every store: good until the thread's next call of either. */
const char *fg_store_last_error(fg_store *st);

/* The number of keys a memory store holds now; 0 for other stores. */
uint64_t fg_store_keys(fg_store *st);
/* How many keys a memory store has dropped, since it opened, to make room
 * for others (at max_keys) while they still counted (not those whose
 * window or bucket had expired): each one's usage was forgotten, and its
 * next check starts it anew. 0 for other stores. */
uint64_t fg_store_evicted(fg_store *st);

/* The servers of a store: how many (1 but for shards), which one holds
 * 'key' (0 for a key it cannot read: NULL with a length, or longer than
 * FG_MAX_KEY), each one's name ("host:port/db"; "memory") and last error
 * ("" when none, as fg_store_last_error). A node index out of range gives
 * NULL. A node's circuit breaker and failures concern its own keys only.
 * On Redis Cluster fg_store_nodes is 65 from the start: nodes 0 to 63 are
 * the masters as they are learned, a node not learned yet has a NULL name,
 * address and error, and node 64 counts the keys of a slot with no master
 * known (a failover): it has no name, but an error. */
unsigned fg_store_nodes(fg_store *st);
unsigned fg_store_node_of(fg_store *st, const char *key, size_t keylen);
const char *fg_store_node_name(fg_store *st, unsigned node);
const char *fg_store_node_error(fg_store *st, unsigned node);
/* The server a node's checks go to now, "host:port": a Sentinel store's
 * master, which a failover changes (its name stays "sentinel/MASTER"); ""
 * while no master is known. A Redis node named by a host name: the address
 * it connects to, which an async store changes when the name moves. Other
 * nodes' servers do not change: their node's name. In the calling thread's own
 * buffer, as fg_store_node_error; NULL for a node out of range. */
const char *fg_store_node_addr(fg_store *st, unsigned node);

/* A setting of the store's servers, found when it was opened, that can
 * make its limits over-admit or fail, in a sentence for logs; NULL when
 * none. Said today of a Redis server with a maxmemory and an evicting
 * maxmemory-policy (its keys, counters among them, are dropped when it is
 * full), of one that refuses EVALSHA (every check that runs a script
 * fails), and of an ACL user whose key patterns leave out the prefix
 * (every check fails); on Cluster, first a seed passed over at open (its
 * name did not resolve). Only servers probed at open are asked (not with
 * lazy=1, nor the masters a Cluster store learns later). */
const char *fg_store_warning(fg_store *st);

/* A store and its limiters are the process's that opened the store. After
 * fork() the child must open its own: on the parent's, its checks, refunds,
 * peeks, resets, adds and syncs return FG_EPROCESS (a refusal that consumes
 * nothing) and fg_limiter_new fails, since their sockets, threads, counts
 * and leases are the parent's; fg_limiter_free and fg_store_close leave
 * them as they are. */
void fg_store_close(fg_store *st);

/* A limiter applies 'lim' through 'st'. The limit is copied. The store must
 * outlive the limiter. NULL with a reason in 'err' when 'lim' is invalid or
 * the store cannot run its algorithm. */
fg_limiter *fg_limiter_new(fg_store *st, const fg_limit *lim, char *err,
                           size_t errlen);

/* Check 'cost' units of 'l' for 'key' ('keylen' bytes, binary-safe).
 * Fills 'out' even when the store fails, following the limit's failure
 * policy, and returns FG_OK or a negative FG_E* code that says why the store
 * was not consulted (out->source then says who decided). Bad input (cost 0,
 * cost > limit or burst, cost >= FG_MAX_COUNT, key too long) returns
 * FG_ECOST or FG_EKEY with out->allowed = 0 and consumes nothing; its
 * retry_after is 0, since no wait makes it fit: the caller's error. So
 * does FG_EPROCESS: a limiter opened by another process (before fork). */
int fg_check(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
             fg_decision *out);

/* Give back 'cost' units that an allowed check of 'key' took, because the
 * request was refused by another of its limits (so that a limit that
 * refuses does not make the others consume). The units return if the
 * window or bucket that took them still holds them; a refund never gives
 * more than was taken. On a store opened with fg_store_open_async the
 * refund is queued and sent with the next batch, and its outcome is not
 * reported. With a blocked-key cache (fg_limiter_set_cache), a refund
 * makes it forget the key: call it from that cache's thread. FG_OK, or a
 * negative code (FG_ENOTSUP for naive_get_set on Redis; the memory store
 * takes it). */
int fg_refund(fg_limiter *l, const char *key, size_t keylen, uint64_t cost);

/* fg_refund of units taken 'age_us' ago (on any clock: a duration), so
 * that they go back to the window that took them, not to a later one (a
 * window that has ended keeps them: they died with it); for a token bucket,
 * giving back at most 'hold_us' of the bucket's time (the taking check's
 * reset_us less its age: what of the take the bucket has not refilled
 * since; UINT64_MAX: no bound). fg_refund is fg_refund_at(..., 0,
 * UINT64_MAX), for a refund made right after the check: one made later
 * should say when, or it may give a later window units it never took. A
 * sync or lease limit gives back to its local state, as fg_refund. */
int fg_refund_at(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
                 uint64_t age_us, uint64_t hold_us);

/* Read what 'key' of 'l' holds now, without consuming anything and
 * without writing to the store: 'out' is filled as the decision a check of
 * one unit would get, but nothing is taken. 'allowed' says whether one
 * unit fits now, 'remaining' how many units fit now (before any is
 * taken), 'reset_ms' / 'reset_us' how long until the limit is fully
 * available again, and 'retry_after_ms' / 'retry_after_us' how long until
 * one unit fits (0 when it fits now); 'source' is FG_SOURCE_STORE and
 * 'shadowed' 0. A key never seen reads as a full limit. An operator's
 * call: it always asks the store (the circuit breaker and the failure
 * policy do not apply, and the breaker does not learn from it) within the
 * limit's timeout (on a blocking Redis Cluster store, a master that moved
 * is asked again after the map is read: twice the timeout at most). FG_OK,
 * or a negative code with 'out' zeroed but its
 * 'limit' (FG_EKEY, a store failure, FG_ENOTSUP for a store without it).
 * Blocking on every store, those opened with fg_store_open_async
 * included. */
int fg_peek(fg_limiter *l, const char *key, size_t keylen, fg_decision *out);

/* Clear what 'key' of 'l' holds in the store, every window of it, so that
 * the key starts again with the full limit; and make the limiter's
 * blocked-key cache (fg_limiter_set_cache) forget it: call it from that
 * cache's thread (a cache of another loop forgets with
 * fg_cache_forget). Asks the store as fg_peek does. FG_OK (also when the
 * key held nothing), or a negative code; the cache forgets only on
 * FG_OK. */
int fg_reset(fg_limiter *l, const char *key, size_t keylen);

/* Forget what this limiter holds of 'key' in this process: its blocked-key
 * cache's entry, and in a mode its sync view and usage not yet sent, or its
 * lease's units (neither sent nor given back). fg_reset does it for its own
 * limiter; call it on every other limiter of the same limit (another
 * thread's or process's loop) once the key was reset, so that none admits
 * on units the reset took away or refuses on counts it cleared. From the
 * cache's thread, as fg_cache_forget. */
void fg_limiter_forget(fg_limiter *l, const char *key, size_t keylen);

/* The limit a limiter enforces (NULL for a NULL 'l'). */
const fg_limit *fg_limiter_limit(const fg_limiter *l);

/* The share of the limit that FG_FAIL_LOCAL enforces in this process while
 * the store is unreachable: the limit, and for a token bucket the burst,
 * each divided by fallback_servers and rounded down, so that the servers
 * together never admit more than the limit. A share of 0 (a limit smaller
 * than fallback_servers) refuses every check while the store is down.
 * Fills '*limit' and '*burst' (the latter 0 unless token_bucket; either may
 * be NULL). FG_OK, or FG_EINVAL when the limit does not fall back to
 * local. */
int fg_limiter_local_share(const fg_limiter *l, uint64_t *limit,
                           uint64_t *burst);

/* The state of the limiter's circuit breaker: "closed" (the store is asked),
 * "open" (the store is skipped; decisions follow on_failure) or "half_open"
 * (the next check probes the store). A store of several nodes has a breaker
 * per node: fg_limiter_breaker gives the worst, fg_limiter_node_breaker one
 * node's (NULL when 'node' is out of range). Both NULL for a NULL 'l'. */
const char *fg_limiter_breaker(fg_limiter *l);
const char *fg_limiter_node_breaker(fg_limiter *l, unsigned node);
/* 1 while the last answer of 'node' to this limiter's store calls (its
 * checks, a mode's syncs and takes) was a failure, or its breaker is not
 * closed; 0 once it answered again (and for a bad 'l' or 'node'). */
int fg_limiter_node_failing(fg_limiter *l, unsigned node);

/* Free 'l' once fg_limiter_pending says nothing of it is in flight (a
 * callback may free it: by then its own check is no longer counted). On a
 * memory store its keys go with it, another limiter (even of the same
 * limit) never having had them: a pass over each part of the table its
 * keys entered, each part locked in turn (a limiter of 5 keys, created,
 * checked and freed: about 280 checks' time in a table of 900,000 keys;
 * one of 450,000 keys: a quarter of the time of as many checks). */
void fg_limiter_free(fg_limiter *l);

/* ---- Asynchronous checks, for libevent loops ------------------------- */

struct event_base;

/* Called exactly once per accepted fg_check_async(): 'rc' and 'd' as
 * fg_check would return and fill them. 'd' is valid only during the call. */
typedef void (*fg_check_cb)(int rc, const fg_decision *d, void *data);

/* Open a store whose checks run on the event loop 'base' (one connection per
 * loop; commands pipelined). "memory" works too (decisions are immediate).
 * Deadlines are libevent timers: create 'base' with
 * EVENT_BASE_FLAG_PRECISE_TIMER, or libevent's coarse clock may let a 5 ms
 * deadline run to 8 ms. Ignore SIGPIPE in the program (signal(SIGPIPE,
 * SIG_IGN)): hiredis writes with write(2), and a connection that Redis
 * closed would otherwise end the process. */
fg_store *fg_store_open_async(const char *url, struct event_base *base,
                              char *err, size_t errlen);

/* Submit a check. Returns FG_OK and later calls 'cb' once; or returns a
 * negative code and never calls 'cb'. When no I/O is needed (memory store,
 * open breaker) 'cb' may run before fg_check_async returns. */
int fg_check_async(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
                   fg_check_cb cb, void *data);

/* ---- A request's ordered set of limits ---------------------------------- */

/* The most limits in one set. */
#define FG_SET_MAX 8

/* One limit of a set and the key it counts. Each limit may count its own
 * key (a guard per IP before a limit per user); for one key, give it to
 * every item. */
typedef struct fg_set_item {
    fg_limiter *l;
    const char *key;
    size_t keylen;
} fg_set_item;

/* The outcome of a set. The limits are checked in order and the first
 * refusal (or bad input) stops the set: the limits after it are not asked,
 * and every limit before it that allowed the request is refunded where its
 * decision counted it (the store, a sync view's or a lease's units, or the
 * local share of on_failure = local), so that a refused request consumes
 * nothing anywhere. A decision of on_failure = open or closed took nothing
 * to refund. */
typedef struct fg_set_result {
    unsigned n;       /* limits in the set */
    unsigned decided; /* the limit whose decision is the set's: the refusal,
                       * else the allowed limit with the fewest units left */
    uint32_t asked;   /* bit k: limit k answered; rc[k], d[k] hold it
                       * (a refunded limit's 'remaining' counts the refund
                       * back; its 'reset' is as decided, an upper bound) */
    /* FG_OK, or why limit 'decided' could not be asked at all: bad input
     * (FG_ECOST, FG_EKEY; FG_EINVAL for a NULL key of a length;
     * FG_EPROCESS for a limiter of another process) or a
     * check that could not be submitted
     * (FG_ENOMEM). d[decided] is then a refusal no store made. */
    int error;
    uint32_t unrefunded; /* bit k: limit k's refund failed (FG_ENOTSUP for
                          * naive_get_set): it keeps the request counted */
    uint32_t waited;     /* fg_check_set_async: bit k, limit k's answer came
                          * from the loop, after the store's round trip; 0
                          * when it was known at once (a sync view, a lease,
                          * an open breaker, a failure known already or met
                          * at once: no round trip) */
    int rc[FG_SET_MAX];  /* as fg_check returns it */
    fg_decision d[FG_SET_MAX];
    uint64_t fg__at[FG_SET_MAX]; /* private: when limit k was asked */
} fg_set_result;

/* Check 'cost' units of each of the 'n' limits of 'items', in order, as
 * fg_check would, under the rules of fg_set_result. The set is allowed when
 * out->d[out->decided].allowed. FG_OK, or FG_EINVAL ('n' is 0 or above
 * FG_SET_MAX, or an item has no limiter). */
int fg_check_set(const fg_set_item *items, unsigned n, uint64_t cost,
                 fg_set_result *out);

/* A blocked-key cache, for the asynchronous sets of one event loop
 * (fg_check_set_async only: fg_check, fg_check_async and fg_check_set do
 * not consult it): once the store refuses 'cost' units of a key until T,
 * or allows a check that leaves fewer than 'cost' until T, a set that asks
 * as much or more of that key before T is refused here, at once, as the
 * store would refuse it, with source FG_SOURCE_CACHE. (T is read on this
 * process's clock: a decision made on Redis TIME is placed in the middle of its
 * round trip, so with uneven delays the block may end up to half a round trip
 * after the store's, or before it: then the store refuses.) When the block
 * ends one request asks the store (the probe) and the others for that key
 * wait for its answer instead of stampeding the store. At most 'entries'
 * keys (rounded up to a multiple of 4); an entry evicted early only costs a
 * round trip. NULL when out of memory. Use it from one thread. */
typedef struct fg_cache fg_cache;
fg_cache *fg_cache_new(uint32_t entries);
/* Free 'c'; no limiter may use it any more and no set may be waiting. */
void fg_cache_free(fg_cache *c);
/* Forget every key; the sets waiting for a probe are run again now. */
void fg_cache_clear(fg_cache *c);
/* Forget what 'c' knows of 'key' of 'l' (after fg_reset of that key,
 * perhaps through another limiter of the same limit): the next set for it
 * asks the store. A probe in flight for the key keeps its waiters, who
 * are answered when it returns. Use it from the cache's thread. */
void fg_cache_forget(fg_cache *c, const fg_limiter *l, const char *key,
                     size_t keylen);
/* The entries 'c' holds: keys it refuses now, or refused lately and has
 * not dropped yet (an entry goes when its key is allowed again, forgotten
 * or cleared, or its slot is taken for another key). O(1). */
uint64_t fg_cache_count(const fg_cache *c);
/* Consult 'c' for 'l' in fg_check_set_async (NULL: no cache). 'c' must
 * outlive 'l''s use of it. A shadow limit (fg_limit.shadow) never uses
 * its cache: the cache only answers refusals, which shadow mode turns
 * into allowed decisions that the store must make and count. */
void fg_limiter_set_cache(fg_limiter *l, fg_cache *c);

typedef struct fg_set_req fg_set_req;
/* Called once per accepted set, with 'req->result' complete. 'req' is the
 * caller's again from then on (it may be reused or freed in the call). */
typedef void (*fg_set_cb)(fg_set_req *req);

/* An asynchronous set: the caller's memory, valid until its callback. */
struct fg_set_req {
    struct fg__set_node {
        struct fg__set_node *next;
    } fg__node; /* private: first, so that a waiter is its req */
    void *data; /* the caller's */
    fg_set_result result;
    /* Private to the library. */
    const fg_set_item *fg__items;
    uint64_t fg__cost, fg__sent_us;
    fg_set_cb fg__cb;
    unsigned fg__i, fg__waited;
    uint32_t fg__probes;
    int fg__in_submit, fg__pending, fg__waited_rc;
};

/* fg_check_set on an event loop (stores opened with fg_store_open_async),
 * with the limiters' blocked-key caches. Returns FG_OK and calls 'cb'
 * exactly once; or returns FG_EINVAL (as fg_check_set) and never calls it.
 * The one rule for when: 'cb' runs before fg_check_set_async returns when
 * no limit needed I/O (a known refusal, a memory store, an open breaker),
 * else from the loop. Either way the set steps from one limit to the next
 * in a loop, never by recursion through fg_check_async's callbacks, so a
 * caller may answer, free or reuse 'req' in 'cb'. 'items' and the keys must
 * stay valid until 'cb'. */
int fg_check_set_async(fg_set_req *req, const fg_set_item *items, unsigned n,
                       uint64_t cost, fg_set_cb cb);

/* ---- Approximate modes: local decisions, shared usage ------------------ *
 *
 * A limit in FG_MODE_SYNC or FG_MODE_LEASE is decided in this process, and
 * the store sees far fewer commands. fg_check, fg_check_async, the sets
 * and fg_refund work as for an exact limit; decisions made here have
 * source FG_SOURCE_SYNC or FG_SOURCE_LEASE, and a sync check that the
 * store decided (below) has FG_SOURCE_STORE.
 *
 * sync: each key's view is the store's answer to the last sync: what was
 * left, and when it is full again (a token bucket's view refills at the
 * rate). A check is allowed when it fits the view less what this process
 * admitted since. A view decides for one interval after its answer, and
 * while the sync that renews it is in flight: a key
 * without one (new, or its fixed window over) or with an older one is
 * decided in the store, exactly, and the answer is its new view, but for
 * a check that an older fixed window's or token bucket's view has no room
 * for, which is refused here (the others' usage since could only take
 * more). Every sync_ms, the keys used since the last sync send their usage
 * with fg_add_at (counted even beyond the limit, so that an overshoot is
 * paid back, in the window of the last unit) and the answers become the
 * new views. No server sees what the others
 * admitted since their last sync, so the servers together can admit more than
 * the limit: see fg_limit_bound.
 *
 * lease: a check spends units that this process took from the store
 * (a take is an exact check of a chunk, then of what is left when the
 * chunk does not fit), so the servers together never admit more than the
 * limit. A chunk is what this process's own traffic for the key used in
 * the last lease's time, from 1 to lease_chunk. A lease lasts to the end of
 * its window (fixed_window) or min(period, 1 s); units not spent by then go
 * back with fg_refund, and so do all of them at fg_limiter_sync. Units
 * another server holds and does not spend are refused here: see
 * fg_limit_bound.
 *
 * When the store cannot be reached (a sync or a take fails), the key's
 * checks follow on_failure until the store answers again; a lease first
 * spends the units it holds. FG_FAIL_LOCAL decides on the share of
 * fg_limiter_local_share. 'durable' needs FG_MODE_EXACT.
 *
 * On a store opened with fg_store_open_async, syncs, takes and give-backs
 * run on its loop (a timer every sync_ms, or every 100 ms for leases). On
 * a blocking store, the check that finds the interval over sends the due
 * usage and give-backs (one round trip each; the other threads' checks go
 * on meanwhile, and leave the work due to it), and a take is a round trip
 * of the check that needs it; call fg_limiter_sync from a timer of your
 * own to keep the usage of keys no longer checked from waiting. Threads
 * share such a limiter as one server: a sync limiter decides one check at
 * a time, its round trips included (so that it stays exact); a lease
 * limiter lets its lock go during each round trip, so that a thread's
 * take holds up only the checks of its key. For many threads each waiting
 * on the store in sync, give each its own limiter and count it in the
 * servers of fg_limit_bound, or use exact mode. */

/* Count 'units' of 'key' in the store even beyond the limit: usage
 * admitted elsewhere (FG_MODE_SYNC's syncs; a cost known only after the
 * work was done). A debt beyond seven more limits (a bucket below empty
 * by more than 7 bursts, 1 for a bucket deeper than 2^48 us; a sliding
 * window over 8 times its limit) is forgiven. 'out'
 * is then what fg_peek would say, but 'allowed', which is 1 when the units
 * fitted: 'remaining' the units that fit now (0 in debt), 'reset_*' until
 * the key is full again (a debt included; for a fixed window, until its
 * window ends, even when it holds nothing), 'retry_after_*' until one
 * unit fits. 0 units reads the key. Exact on every store, whatever the
 * limiter's mode; the breaker does not stop it, nor the failure policy decide
 * it. 'units' from 0 to FG_MAX_COUNT - 1. FG_OK, or a negative code with 'out'
 * zeroed but its 'limit' (FG_ECOST, FG_EKEY, a store failure, FG_ENOTSUP for
 * naive_get_set). Blocking on every store, those opened with
 * fg_store_open_async included. */
int fg_add(fg_limiter *l, const char *key, size_t keylen, uint64_t units,
           fg_decision *out);
/* fg_add of units spent 'age_us' ago (on any clock: a duration): a fixed
 * or sliding window counts them in the window they were spent in, while it
 * counts (a sliding window's current or previous one; none once it is
 * older, or a fixed window's has ended: then it only reads the key); a
 * token bucket counts them now. fg_add is fg_add_at of age 0. */
int fg_add_at(fg_limiter *l, const char *key, size_t keylen, uint64_t units,
              uint64_t age_us, fg_decision *out);

/* Send what this limiter holds here now: every key's usage not yet synced
 * (FG_MODE_SYNC) and every lease's unspent units (FG_MODE_LEASE), so that
 * a server that stops (SIGTERM, a reload) leaves nothing behind. On a
 * blocking store it returns when the store has answered each; on an
 * asynchronous one the commands are submitted to the loop, which must run
 * until they are answered (fg_limiter_pending says how many are out).
 * FG_OK, or the first store failure met: on an asynchronous store, by a
 * sync or give-back answered since the last call, or by one this call
 * sends that fails at once (the breaker open). What failed is held here
 * and sent by the next call: call again until FG_OK with nothing pending,
 * or until you give up on the store. FG_OK at once for an exact limit. */
int fg_limiter_sync(fg_limiter *l);
/* What of this limiter is in flight: its fg_check_async calls not yet
 * called back (a limiter must not be freed before they are: each refers to
 * it until its callback), in a mode the store commands it has out, and the
 * refunds queued on its store and not yet answered (its own, a set's, a
 * lease's give-backs; any other refund of that store too: a store closed
 * before they are answered drops them). */
unsigned fg_limiter_pending(const fg_limiter *l);
/* The most keys a limiter in a mode keeps here (its views or leases, a key
 * an entry of about 370 bytes), 1 to 2^40; by default 1,000,000, and on
 * the memory store that store's max_keys. A key that finds no room (the
 * others holding usage to send or units) is decided by the store, as an
 * exact limit's. Call it before the limiter's first check. FG_OK, or
 * FG_EINVAL (an exact limit, or out of range). */
int fg_limiter_set_local_keys(fg_limiter *l, uint64_t max_keys);
/* The store commands a limiter in a mode has had answered since it was
 * made (syncs, takes, the checks its local state had the store decide, and
 * give-backs, these once queued on an asynchronous store), one a key, in
 * '*asked', and how many of those failed (an error, a timeout, a
 * connection lost or refused), in '*failed'; not those its breaker kept
 * from the store. Both 0 for an exact limit (its checks are its calls). On
 * an asynchronous store, call it on the store's loop. */
void fg_limiter_asks(fg_limiter *l, uint64_t *asked, uint64_t *failed);

/* The stated bound of an approximate mode, for 'servers' processes (serve
 * workers count each) sharing the limit and a store round trip of 'rtt_us'.
 *
 * FG_MODE_SYNC admits beyond the limit at most what the other servers
 * admit in any span of 'over_window_us' = 2 * (sync interval + round
 * trip) (a server's view decides for one interval after its answer, which
 * left the store half a round trip before, and while the next sync is in
 * flight, a round trip; the others' usage reaches the store within an
 * interval and half a round trip), and never more than 'over_cap' = (servers -
 * 1) * limit (each server stops at the limit as it sees it); for a token
 * bucket (servers - 1) * (burst + rate * over_window), since each server's
 * view refills at the rate meanwhile. With A requests a
 * second for the key, spread evenly: over <= min(A * (servers - 1) / servers *
 * over_window + servers - 1, over_cap). A fixed or sliding window's overshoot
 * is per window; a token bucket's is a debt the store keeps, and is paid back
 * by refusals, so it does not add up across periods while it is under
 * seven bursts. It refuses below the limit for a sliding window, whose view
 * does not decay between syncs (about a sync interval's decay of the
 * previous window in each window; far more, a quarter to a half, with an
 * interval of a window or longer), for a token bucket used from full once
 * (about a sync interval's refill), and for one whose interval is longer
 * than its refill every interval (docs/modes.md).
 *
 * FG_MODE_LEASE never admits beyond the limit ('over_cap' 0). It refuses
 * below it at most the units the servers hold and do not spend (a chunk
 * each, in flight or held), and (token bucket, sliding window) those a
 * server waiting for its chunk to fit has not taken: 'under_cap' =
 * servers * largest chunk, plus the
 * largest chunk less one but for a fixed window, at most the limit; with
 * steady traffic, chunks are what each server spends in a lease, and
 * little is left over. Both 0 for FG_MODE_EXACT. FG_OK or FG_EINVAL. */
typedef struct fg_mode_bound {
    uint64_t over_window_us;
    uint64_t over_cap;
    uint64_t under_cap;
} fg_mode_bound;
int fg_limit_bound(const fg_limit *lim, unsigned servers, uint64_t rtt_us,
                   fg_mode_bound *out);

/* ---- The local half of the approximate modes, on its own ---------------- *
 *
 * What a limiter in FG_MODE_SYNC or FG_MODE_LEASE runs, with time and the
 * store left to the caller: a simulator drives it on a virtual clock with
 * any store, doing what each ask says (FG_LOCAL_ADD with fg_add_at,
 * FG_LOCAL_TAKE with fg_check, FG_LOCAL_GIVE with fg_refund_at) and answering
 * it when the reply would arrive. Not thread-safe: one caller at a time. */
typedef struct fg_local fg_local;

typedef enum fg_local_op {
    FG_LOCAL_ADD = 0,  /* sync: count 'units' (fg_add_at), answer the view */
    FG_LOCAL_TAKE = 1, /* lease: take 'units' if they fit (fg_check) */
    FG_LOCAL_GIVE = 2, /* lease: give 'units' back (fg_refund_at) */
    /* sync: decide this check in the store (fg_check of 'units'): the
     * key's view is unknown or too old; the answer is the new view, or
     * when refused a sync follows (its view holds any debt) */
    FG_LOCAL_CHECK = 3
} fg_local_op;

/* One command for the store. The key is the local state's own copy, valid
 * until the ask is answered; every ask must be answered exactly once. */
typedef struct fg_local_ask {
    fg_local_op op;
    const char *key;
    size_t keylen;
    uint64_t units;
    /* FG_LOCAL_GIVE: when the units were taken, as fg_refund_at wants it;
     * FG_LOCAL_ADD: when the last of them was spent, as fg_add_at wants it
     * (0 and UINT64_MAX for the other asks). */
    uint64_t age_us, hold_us;
    void *fg__entry; /* private */
} fg_local_ask;

/* A check waiting for a take in flight for its key: the caller's memory. */
typedef struct fg_local_waiter {
    struct fg_local_waiter *next;
} fg_local_waiter;

/* fg_local_check's results beside FG_OK (decided) and negative codes. */
/* FG_LOCAL_ASKED: send '*ask' (a take, or a sync limit's sync of a key
 * it cannot decide yet), answer it, then check again. FG_LOCAL_WAITED: 'w'
 * waits for such an ask in flight for its key: check it again when
 * fg_local_answer wakes it. */
#define FG_LOCAL_ASKED  1
#define FG_LOCAL_WAITED 2

/* Local state for limit 'lim' (FG_MODE_SYNC or FG_MODE_LEASE) of at most
 * 'max_keys' keys (0: 1,000,000). NULL with the reason in 'err'. */
fg_local *fg_local_new(const fg_limit *lim, uint64_t max_keys, char *err,
                       size_t errlen);
/* Free 'lc' and its keys; asks not yet answered are forgotten. */
void fg_local_free(fg_local *lc);

/* Decide 'cost' units of 'key' at 'now_us' (any clock that does not go
 * back; the store's reset times are read on it as durations from the
 * answer). FG_OK: 'out' is the decision. FG_LOCAL_ASKED: the store must
 * be asked first, as 'ask' says: a lease's take, or, for a sync limit's
 * key whose view is unknown or older than one interval and not refusing,
 * a check in the store (its answer is the new view), or a sync of the
 * usage not sent yet when there is some (then the new view decides).
 * FG_LOCAL_WAITED: a lease's take is in flight for the key and 'w' waits for it
 * (with 'w' NULL, a take of its own is asked instead). FG_EBACKEND: the store
 * failed this key's last sync or take: follow the limit's on_failure.
 * FG_ENOMEM: no room for a new key (every key has usage or units to send), or a
 * sync limit's view is too old while its sync is in flight: ask the store
 * exactly. FG_ECOST, FG_EKEY: bad input, as fg_check. */
int fg_local_check(fg_local *lc, const char *key, size_t keylen, uint64_t cost,
                   uint64_t now_us, fg_decision *out, fg_local_ask *ask,
                   fg_local_waiter *w);

/* The store's answer to 'ask' at 'now_us': 'rc' and 'd' as the call the
 * ask named returned them ('d' may be NULL for FG_LOCAL_GIVE). Returns 1
 * when 'ask' became a follow-up to send the same way (a take of what was
 * left), else 0. The checks that waited for a take are put in '*wake' (in
 * order; NULL when none): check each again. */
int fg_local_answer(fg_local *lc, fg_local_ask *ask, uint64_t now_us, int rc,
                    const fg_decision *d, fg_local_waiter **wake);

/* A check of 'key' for 'cost' units sent to the store to decide (after
 * FG_ENOMEM): a sync limit's views hold its units from now, since the
 * store may count them before any view answered holds them. Each is
 * followed by one fg_local_decided when the store answered (or the check
 * failed): 'counted' when the store counted its units (allowed), at
 * 'now_us'; the views then count them until one answered to a sync sent
 * later holds them. */
void fg_local_deciding(fg_local *lc, const char *key, size_t keylen,
                       uint64_t cost, uint64_t now_us);
void fg_local_decided(fg_local *lc, const char *key, size_t keylen,
                      uint64_t cost, int counted, uint64_t now_us);

/* Give back 'cost' units an allowed check of 'key' took (fg_refund).
 * Returns the units to give back in the store instead (fg_refund): a sync
 * key's units already sent, or counted there for a check it decided.
 * fg_local_refund_at: for units spent 'age_us' before 'now_us'
 * (fg_refund_at); those spent before the usage not sent yet are the
 * store's to give back, and so are a lease's spent from an earlier lease
 * (the store counted it when it was taken). */
uint64_t fg_local_refund(fg_local *lc, const char *key, size_t keylen,
                         uint64_t cost, uint64_t now_us);
uint64_t fg_local_refund_at(fg_local *lc, const char *key, size_t keylen,
                            uint64_t cost, uint64_t now_us, uint64_t age_us);

/* Forget what 'lc' holds of 'key' after its counts in the store were
 * cleared (fg_reset): a sync's view and usage not sent, a lease's units
 * and their give-back. An ask in flight is still answered. */
void fg_local_forget(fg_local *lc, const char *key, size_t keylen);

/* The store work due at 'now_us': syncs of the keys used since the last
 * one, give-backs of leases that ended. Writes up to 'max' asks; returns
 * how many (call again while it returns 'max'). fg_local_next_due says
 * when to call it next (a time long past, 1, while work is left from a
 * call that stopped short). */
size_t fg_local_due(fg_local *lc, uint64_t now_us, fg_local_ask *asks,
                    size_t max);
uint64_t fg_local_next_due(const fg_local *lc);
/* As fg_local_due, but everything held now: every usage not synced and
 * every unit leased (see fg_limiter_sync). */
size_t fg_local_flush(fg_local *lc, uint64_t now_us, fg_local_ask *asks,
                      size_t max);
/* The keys 'lc' holds, and the units it holds in leases now (a fixed
 * window's, which send nothing when it ends, until its key is next
 * checked, evicted or flushed). */
uint64_t fg_local_keys(const fg_local *lc);
uint64_t fg_local_held(const fg_local *lc);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* FLOODGATE_H */
