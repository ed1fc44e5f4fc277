/* lab.h -- the pieces of `floodgate lab`, shared between the files of lab/.
 *
 * The lab composes real processes (redis-server, N `floodgate serve`,
 * HAProxy) with two parts of its own: a delay proxy between the servers and
 * Redis (proxy.c) and a scalper that fires one user's burst through the
 * balancer (scalper.c). It holds no limiter logic: every decision it counts
 * was made by a `floodgate serve` process. */
#ifndef FG_LAB_H
#define FG_LAB_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "floodgate.h" /* fg_mono_us() */

#define FG__LAB_MAX_SERVERS 64
#define FG__LAB_MAX_BURST   10000
#define FG__LAB_MAX_SWEEP   32
/* The largest burst the web page's API fires (web.c). */
#define FG__LAB_WEB_MAX_BURST 200
/* HAProxy connections beyond the burst's (a late answer, a retry). */
#define FG__LAB_HAPROXY_SPARE 64
/* redis-servers the lab starts for --shards, each behind its own proxy. */
#define FG__LAB_MAX_SHARDS 8
/* floodgate serve reads lines of its config of at most 198 characters
 * (libinih's line of 200, less the line end and the NUL). A --store URL
 * goes on one, after "url = ": it may carry a password, so it is written
 * in the lab's private folder, never on a command line every local user
 * can read. */
#define FG__LAB_SERVE_LINE_MAX 198
#define FG__LAB_STORE_URL_MAX  (FG__LAB_SERVE_LINE_MAX - 6)
/* Nodes a store may name: a shards= URL has at most 64. */
#define FG__LAB_MAX_NODES 64

typedef enum fg__lab_strategy {
    FG__LAB_LOCAL = 0,  /* each server its own memory counter */
    FG__LAB_SPLIT = 1,  /* memory counters with limit / N */
    FG__LAB_NAIVE = 2,  /* Redis GET then SET (naive_get_set) */
    FG__LAB_ATOMIC = 3, /* Redis, atomic (token_bucket Lua) */
    FG__LAB_SYNC = 4,   /* local decisions, usage synced (mode = sync) */
    FG__LAB_LEASE = 5,  /* local decisions on leased units (mode = lease) */
    FG__LAB_NSTRATEGIES = 6
} fg__lab_strategy;

const char *fg__lab_strategy_name(int s);
int fg__lab_strategy_parse(const char *s); /* index, or -1 */
/* What a strategy does when Redis is down, for people ("fails open"). */
const char *fg__lab_policy_text(int s);
/* The on_failure value written into the strategy's config. */
const char *fg__lab_on_failure(int s);
int fg__lab_uses_redis(int s);
/* 1 for the strategies of an approximate mode (sync, lease). */
int fg__lab_approximate(int s);

/* One experiment's parameters. */
/* Every lab server's limit timeout: generous next to --rtt (at most a few
 * tens of ms in the real lab), so that the lab measures the race, not
 * timeouts; the simulation's servers have the same. */
#define FG__LAB_STORE_TIMEOUT_MS 250

typedef struct fg__lab_params {
    int servers;
    int burst;
    int64_t spread_us;
    int64_t rtt_us;     /* added to every Redis round trip */
    uint64_t limit;     /* requests ... */
    uint64_t period_ms; /* ... per period */
    int balance_random; /* 0 roundrobin, 1 random */
    int sync_ms;        /* sync: the interval, 10 .. 10,000 */
    uint64_t chunk;     /* lease: the largest chunk, 0 for the default */
} fg__lab_params;

/* Where the Redis strategies' counters lived in one run (lab.c). */
typedef struct fg__lab_store {
    char kind[12]; /* "redis", "shards", "cluster", "sentinel" */
    int own;       /* 1: started by the lab, behind its delay proxies */
    int nodes;     /* as fg_store_nodes counts them */
    char name[FG__LAB_MAX_NODES][64]; /* fg_store_node_name, no password */
    int node;                         /* the run's user's node, -1 unknown */
    long long executed[FG__LAB_MAX_SHARDS]; /* own: what each node ran */
} fg__lab_store;

/* The bound an approximate strategy states for one run (bound.c). */
typedef struct fg__lab_bound {
    int kind;                /* 0 none, 1 over (sync), 2 under (lease) */
    uint64_t bound;          /* requests: over at most, or under at most */
    uint64_t over_window_ms; /* sync: fg_limit_bound's window */
    uint64_t over_cap;       /* sync: (servers - 1) * (limit + refill in W) */
    uint64_t in_window;      /* sync: arrivals at the others in it */
    uint64_t under_cap;      /* lease: what the other servers may hold */
    uint64_t chunk;          /* lease: the largest chunk of this run */
} fg__lab_bound;

/* The stated bound of strategy 's' for the run 'p': sync's overshoot,
 * lease's under-admission, from fg_limit_bound. 0, or -1 when the library
 * refuses the limit. */
int fg__lab_bound_of(int s, const fg__lab_params *p, fg__lab_bound *out);

typedef struct fg__lab_server_count {
    int ok;
    int limited;
} fg__lab_server_count;

/* What one run of one strategy measured. */
typedef struct fg__lab_result {
    int strategy;
    fg__lab_params p;
    fg__lab_server_count srv[FG__LAB_MAX_SERVERS];
    int allowed;          /* 2xx answers */
    int limited;          /* 429 (and 503) answers */
    int failed;           /* no answer, or another status */
    int unknown;          /* answers without a known X-Served-By */
    int fallback;         /* decided by on_failure, not the store */
    int fallback_allowed; /* of those, allowed */
    /* What the limit refilled while the burst was decided: limit x (last
     * allowed answer's time from the first send, less the lab's round
     * trip) / period, whole units, at most the burst; 0 for naive. A
     * token bucket's exact total is the limit plus this. */
    int refilled;
    int refused_under_limit;  /* refusals while the user was under the limit */
    double calls_per_request; /* commands sent to Redis / request */
    double executed_per_request;    /* commands Redis ran (commandstats) */
    double round_trips_per_request; /* Redis round trips / request */
    char commands[160];             /* sent: "GET 80, SET 23" */
    char executed[200];             /* ran, scripts' inner calls too */
    fg__lab_store store;            /* for the Redis strategies */
    char down_skipped[96];          /* why the Redis-down burst was not fired */
    int down_measured;
    int down_allowed;
    int down_limited;
    int down_failed;
    int64_t burst_us;  /* first request sent to last answer */
    int64_t run_us;    /* the whole run, start-up included */
    int64_t settle_us; /* after the burst, waited for late commands */
    fg__lab_bound bound;
} fg__lab_result;

/* ---- processes (proc.c) ------------------------------------------------ */

/* Set by SIGINT/SIGTERM/SIGHUP to the signal's number: every wait loop
 * checks it and gives up. */
extern volatile sig_atomic_t fg__lab_stop;
void fg__lab_install_signals(void);

/* The library's precise monotonic clock (CLOCK_MONOTONIC), signed: the
 * lab subtracts times freely and compares differences with zero. */
static inline int64_t fg__lab_now_us(void)
{
    return (int64_t)fg_mono_us();
}

/* Start 'argv' with stdin from /dev/null and stdout, stderr appended to
 * 'log'. The child dies with the lab (PR_SET_PDEATHSIG). Returns its pid or
 * -1 with the reason in 'err'. */
pid_t fg__lab_spawn(char *const argv[], const char *log, char *err,
                    size_t errlen);
/* Stop 'n' processes: SIGTERM, then SIGKILL for those still alive after
 * 'grace_ms'. Reaps them all; sets each pid to 0. */
void fg__lab_stop_procs(pid_t *pids, int n, int grace_ms);
/* A free loopback TCP port, or -1. */
int fg__lab_free_port(void);
/* Wait until 127.0.0.1:'port' accepts connections, 'pid' is alive and
 * 'timeout_ms' is not over. 0 when ready, -1 otherwise; then 'status'
 * (if given) is the wait status of 'pid' when it exited, or -1. */
int fg__lab_wait_port(int port, pid_t pid, int timeout_ms, int *status);
/* Why a process that logged nothing did not start, from the 'status'
 * fg__lab_wait_port gave ("it exited with status 1 before listening, ..."),
 * or -1 for one still running after 'timeout_ms'. */
void fg__lab_exit_text(int status, int timeout_ms, char *buf, size_t len);
/* HAProxy's maxconn for bursts of at most 'burst' requests, each its own
 * connection at once: the burst and FG__LAB_HAPROXY_SPARE more. */
int fg__lab_maxconn(int burst);
/* Open files HAProxy needs for that maxconn (two a connection, and its
 * own): the descriptor limit a lab firing 'burst' needs. The lab itself
 * needs fewer (one a connection). */
long long fg__lab_fds_needed(int burst);
/* The path of a program: 'name' found in PATH, /usr/sbin or /sbin, or
 * NULL. */
const char *fg__lab_find_program(const char *name, char *buf, size_t len);
/* Remove a directory tree. */
void fg__lab_rmtree(const char *dir);
/* Whether a chart can be written at 'path', found before a run rather
 * than after it: 0, or -1 after printing why, as 'me'. A file made for
 * the test is removed; one already there is left as it is. */
int fg__lab_writable(const char *me, const char *path);
/* The last 'max' bytes of a log file, for error messages. */
void fg__lab_log_tail(const char *path, char *buf, size_t len);

/* ---- delay proxy (proxy.c) ---------------------------------------------- */

/* Calls per command name ("get" 74, "set" 64). */
typedef struct fg__lab_cmdstats {
    int n;
    char name[32][24];
    long long calls[32];
} fg__lab_cmdstats;
/* Add 'calls' to 'name' in 'cs' (names beyond 32 are dropped). */
void fg__lab_cmdstats_add(fg__lab_cmdstats *cs, const char *name,
                          long long calls);
long long fg__lab_cmdstats_get(const fg__lab_cmdstats *cs, const char *name);
/* "GET 74, SET 64" of 'after' minus 'before'; returns the total. */
long long fg__lab_cmdstats_diff(const fg__lab_cmdstats *before,
                                const fg__lab_cmdstats *after, char *buf,
                                size_t len);

typedef struct fg__lab_proxy fg__lab_proxy;

/* A TCP proxy on a free loopback port, in its own thread, forwarding to
 * 127.0.0.1:'upstream_port' and delaying each direction by half the round
 * trip, in order. */
fg__lab_proxy *fg__lab_proxy_start(int upstream_port, char *err, size_t errlen);
int fg__lab_proxy_port(const fg__lab_proxy *px);
void fg__lab_proxy_set_rtt(fg__lab_proxy *px, int64_t rtt_us);
/* Client-to-Redis exchanges seen so far (a new one starts each time the
 * client speaks after Redis answered). */
uint64_t fg__lab_proxy_round_trips(const fg__lab_proxy *px);
/* The commands the API servers sent through the proxy so far, by name (read
 * with hiredis's RESP reader: commands run inside a script are not here). */
void fg__lab_proxy_commands(fg__lab_proxy *px, fg__lab_cmdstats *out);
void fg__lab_proxy_stop(fg__lab_proxy *px);

/* ---- scalper (scalper.c) ------------------------------------------------ */

/* What came back for one request. */
typedef struct fg__lab_answer {
    int status;    /* HTTP status, 0 when none */
    int server;    /* index from X-Served-By "api-N" (N-1), or -1 */
    int64_t at_us; /* answer time from the first send */
    int fallback;  /* decided by on_failure: the store did not answer */
} fg__lab_answer;

/* Fire 'burst' POST /bookings for 'user' at 127.0.0.1:'port', evenly within
 * 'spread_us', all concurrent. Fills 'out[burst]'. Returns 0, or -1 with the
 * reason in 'err' (a request without an answer 10 s after the last send is
 * not an error: its status is 0). */
int fg__lab_fire(int port, const char *user, int burst, int64_t spread_us,
                 fg__lab_answer *out, int64_t *elapsed_us, char *err,
                 size_t errlen);

/* POST 'path' to 127.0.0.1:'port' and wait (2 s at most). Returns the HTTP
 * status (0: no answer) with the start of the body in 'body'. */
int fg__lab_post(int port, const char *path, char *body, size_t len);

/* ---- the lab: redis, proxy, clusters (lab.c) ------------------------------
 */

typedef struct fg__lab fg__lab;

/* Create the temporary folder and find the programs (redis-server only when
 * 'need_redis'). HAProxy is given room for bursts of up to 'max_burst'
 * (fg__lab_maxconn). NULL with the reason in 'err' (e.g. "redis-server is
 * not installed ..."). */
fg__lab *fg__lab_new(int need_redis, int max_burst, char *err, size_t errlen);
/* Start 'shards' redis-servers (1 .. FG__LAB_MAX_SHARDS), each behind a
 * delay proxy of its own; more than one make a shards= store. */
int fg__lab_start_redis(fg__lab *lab, int shards, char *err, size_t errlen);
/* Use the store at 'url' instead, which the user runs: no redis-server, no
 * delay proxy, and the lab never stops it. The store is opened once here,
 * so an unreachable one is refused with the library's reason. */
int fg__lab_use_store(fg__lab *lab, const char *url, char *err, size_t errlen);
/* 1 when the lab started the store itself (and counts its commands). */
int fg__lab_own_store(const fg__lab *lab);
/* Make sure the servers and balancer of 'strategy' run with 'p'; reuses
 * them when the server count and balance have not changed. */
int fg__lab_ensure(fg__lab *lab, int strategy, const fg__lab_params *p,
                   char *err, size_t errlen);
/* 1 when the servers of 'strategy' already run with 'p's count and
 * balance. */
int fg__lab_warm(fg__lab *lab, int strategy, const fg__lab_params *p);
/* Stop the clusters whose server count or balance differ from 'p'. */
void fg__lab_retire(fg__lab *lab, const fg__lab_params *p);
/* Fire the burst through 'strategy' and fill 'r' (without redis_down). */
int fg__lab_measure(fg__lab *lab, int strategy, const fg__lab_params *p,
                    fg__lab_result *r, char *err, size_t errlen);
/* Stop Redis (every node of the lab's own), fire again through each
 * strategy in 'mask' that has a result in 'rs' (indexed by strategy), start
 * Redis again. With a store of the user's (--store) nothing is stopped:
 * each result's 'down_skipped' says so. */
int fg__lab_measure_down(fg__lab *lab, unsigned mask, fg__lab_result *rs,
                         char *err, size_t errlen);
/* Start every cluster of 'mask' at once (start-up in parallel). */
int fg__lab_ensure_many(fg__lab *lab, unsigned mask, const fg__lab_params *p,
                        char *err, size_t errlen);
/* Stop everything and remove the temporary folder. */
void fg__lab_free(fg__lab *lab);

/* ---- output (report.c) -------------------------------------------------- */

void fg__lab_print_json(FILE *f, const fg__lab_result *r);
/* 'rs' has 'n' results, printed side by side. */
void fg__lab_print_cards(FILE *f, const fg__lab_result *rs, int n, int color);
/* One row per value, one column per strategy in 'mask'. */
void fg__lab_print_sweep(FILE *f, const char *param, const int *values,
                         int nvalues, unsigned mask,
                         const fg__lab_result *rs /* [nvalues][NSTRATEGIES] */);
int fg__lab_write_svg(const char *path, const char *param, const int *values,
                      int nvalues, unsigned mask, const fg__lab_result *rs,
                      char *err, size_t errlen);

/* ---- web page (web.c) --------------------------------------------------- */

/* Serve the page and its JSON API on 'listen' until interrupted. */
int fg__lab_web(fg__lab *lab, const char *listen, const fg__lab_params *p);
/* 1 when 'host' (an address without brackets, or a name) is loopback:
 * 127.0.0.0/8, ::1 or localhost. The page listens on nothing else and
 * answers no Host header naming anything else. */
int fg__lab_loopback_host(const char *host);

/* The page's files, generated from lab/web/ by mk/lab.mk. */
typedef struct fg__lab_asset {
    const char *path; /* "/index.html" */
    const char *type; /* "text/html; charset=utf-8" */
    const unsigned char *data;
    size_t len;
} fg__lab_asset;
extern const fg__lab_asset fg__lab_assets[];
extern const size_t fg__lab_nassets;

#endif
