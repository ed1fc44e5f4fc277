/* server.h -- the running daemon: configurations, workers, requests.
 *
 * A configuration ("gen") is loaded and validated by the main thread, then
 * adopted by each worker, which opens its own asynchronous store on its own
 * event loop. The memory store is the exception: one per process, shared by
 * every worker (it is thread-safe), so a limit is per process. Requests
 * hold the worker's copy of the gen they started with; a reload retires a
 * copy once its last request has answered. */
#ifndef FG_SERVE_SERVER_H
#define FG_SERVE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "http.h"
#include "floodgate.h"
#include "metrics.h"

struct event_base;
struct event;

typedef struct fg__gen {
    fg__serve_config cfg;
    int is_memory;
    fg_store *mem; /* the memory store (srv->mem), memory store only */
    fg_limiter *memlim[FG_SERVE_MAX_LIMITS]; /* shared, memory store only */
    struct fg__memref *memref[FG_SERVE_MAX_LIMITS]; /* their owners */
    int slot[FG_SERVE_MAX_LIMITS];                  /* metric slots */
    char url[5400];       /* store URL with the [store] prefix applied */
    char url_lazy[5900];  /* the same, not probing at open (workers) */
    int refs;             /* atomic */
    unsigned store_conns; /* connections a worker opens to the store */
    /* A reload of the running store URL whose probe failed: each worker
     * keeps the store it runs (its connections, a Cluster's slot map, a
     * Sentinel's master), which knows more than a new one would. */
    int keep_store;
    /* The admin routes' bearer token, read from admin_token_file at load
     * (a reload reads it again); never logged. */
    char admin_token[256];
    size_t admin_token_len;
} fg__gen;

typedef struct fg__wgen {
    fg__gen *g;
    fg_store *store; /* this worker's asynchronous store; NULL for memory */
    unsigned *store_refs; /* the worker's gens that use 'store' (keep_store) */
    fg_limiter *lim[FG_SERVE_MAX_LIMITS];
    int node_slot[FG_NODE_SLOTS]; /* per node of 'store': its metrics */
    /* Each node's server as last seen (Sentinel's master, the address of
     * a Redis host name): the first FG_NODE_SLOTS nodes. */
    char master[FG_NODE_SLOTS][272];
    /* Each limiter's store commands in a mode (fg_limiter_asks) as last
     * added to the worker's metrics: sent, failed. */
    uint64_t asks[FG_SERVE_MAX_LIMITS][2];
    unsigned inflight;
    unsigned resyncs; /* retired: its flushes once idle (see free_retired) */
    /* A flush the store failed: since when (0: the last one did not), and
     * when to try the next (a store down is asked every 100 ms). */
    uint64_t flush_failed_us, next_flush_us;
    int flush_sent; /* the last flush sent what no flush has read since */
    /* The limits a flush failed since one found nothing left, and the
     * first failure's code, for the line that says what was given up
     * (sync_unsent). */
    unsigned char flush_failed[FG_SERVE_MAX_LIMITS];
    int flush_rc;
    struct fg__wgen *next; /* retired list */
} fg__wgen;

typedef struct fg__ctx fg__ctx;
typedef struct fg__server fg__server;

typedef struct fg__worker {
    fg__server *srv;
    unsigned index;
    pthread_t thread;
    int made;    /* set up by fg__workers_start (its mutex too) */
    int started; /* its thread runs */
    int fd;      /* listening socket, SO_REUSEPORT */
    int wake_fd; /* eventfd: main -> worker */
    struct event_base *base;
    fg__http *http;
    struct event *cmd_ev;  /* main -> worker: adopt 'pending', drain */
    struct event *tick_ev; /* drain progress, accept back-off */
    struct event *reap_ev; /* frees retired gens outside any callback */
    pthread_mutex_t mu;
    fg__gen *pending;
    int drain_cmd;
    fg__wgen *cur;
    fg__wgen *retired;
    fg_cache *cache; /* for this worker's Redis limiters, or NULL */
    fg__metrics *m;
    unsigned inflight;
    int draining;
    int synced;       /* draining: the modes' local state sent */
    unsigned resyncs; /* draining: flushes since, each once all answered */
    uint64_t drain_deadline_us;
    int drain_late; /* past drain_timeout: waiting for store deadlines */
    uint64_t grace_until_us; /* accepting while draining until then */
    unsigned close_tries;
    fg__ctx *pool;
    unsigned npool;
    unsigned inflight_peak; /* most requests in flight since the sweep */
    struct event *sweep_ev;
    uint64_t next_err_log_us;
    uint64_t errors_unlogged; /* store errors since the last store_error */
    int store_failing;        /* a store_error logged, no answer since from its
                               * node: the node's index + 1 */
    char failing_limit[FG_NAME_MAX + 1]; /* the limit it was logged for */
    char failing_key[FG_MAX_KEY];        /* and the key */
    size_t failing_keylen;
    /* Shadow refusals logged this second, and left out since the last
     * line (routes.c). */
    uint64_t shadow_log_reset_us, shadow_unlogged;
    unsigned shadow_logged;
    /* Keys the admin reset, for this worker's blocked-key cache to forget
     * (under 'mu'; admin.c queues, on_cmd drains). */
    struct fg__forget *forgets;
} fg__worker;

struct fg__server {
    fg__worker *w;
    unsigned nworkers;
    fg_store *mem;      /* the process's memory store, opened on first need */
    char mem_url[4096]; /* the URL it was opened with (its options) */
    fg__gen *gen;       /* the configuration in force */
    struct fg__admin *admin; /* the admin listener, or NULL */
    int draining;            /* atomic */
    /* Client connections open, in all workers, and their cap:
     * max_connections, or fewer under a low descriptor limit. */
    atomic_uint_fast32_t open_conns;
    uint32_t max_conns;
    unsigned long long fd_base; /* descriptors open at start (main.c) */
    uint64_t reloads, reload_errors;
    /* The last load failed on a store whose host did not resolve: a start
     * may do better later (exit status 1, not 2). */
    int store_unopened;
    const char *config_path;
    const char *cli_listen, *cli_store;
    struct event_base *main_base;
    pthread_mutex_t start_mu;
    pthread_cond_t start_cv;
    /* Held while a draining worker closes its listening socket: the
     * workers close theirs one at a time (see worker.c's tick()). */
    pthread_mutex_t close_mu;
    unsigned started, start_failed;
    uint64_t seed;
    /* What happens at a drain to the connections queued on a listening
     * socket as it closes: FG__HANDOVER_OFF, they are reset (with the
     * reason in 'handover_off'); else the kernel moves them to another
     * socket of the port. */
    int handover;
    char handover_off[128];
    /* Another socket listened on the port at start (fg__workers_bind). */
    int port_shared;
};

enum { FG__HANDOVER_OFF, FG__HANDOVER_BPF, FG__HANDOVER_SYSCTL };

/* Monotonic microseconds: the library's precise clock (src/store.h),
 * fg_mono_us(). */

/* ---- gen.c: load and share configurations ---- */

/* Load the configuration for 'srv' (file, then command-line overrides) and
 * build a gen. NULL with "file:line: reason" in 'err'. */
fg__gen *fg__gen_load(fg__server *srv, char *err, size_t errlen);
/* Give the limits of 'g', a gen about to serve, their metric slots (a
 * loaded gen has none: a refused reload must not take any); 'old' is the
 * gen it replaces, or NULL. */
void fg__gen_name_metrics(fg__gen *g, const fg__gen *old);
void fg__gen_ref(fg__gen *g);
void fg__gen_unref(fg__gen *g);

/* Build a worker's copy of 'g' on its loop. NULL with the reason. */
fg__wgen *fg__wgen_new(fg__worker *w, fg__gen *g, char *err, size_t errlen);
void fg__wgen_free(fg__wgen *wg);
/* Send what the gen's limiters hold here (approximate modes: usage not
 * yet synced, leased units) and return the store commands in flight;
 * 'failed' (or NULL) says whether the store could not take some (since
 * the last flush, or at once: still held here; fg_limiter_sync says only
 * a store down, not an error of a key's own). fg__wgen_pending only
 * counts them. A gen
 * is freed once both its requests and these are done. */
unsigned fg__wgen_sync(fg__wgen *wg, int *failed);
unsigned fg__wgen_pending(const fg__wgen *wg);

/* ---- worker.c: one event loop ---- */

/* Bind the listening sockets of every worker (errors before any thread
 * starts, so a busy port is refused at once). Writes the bound address. */
int fg__workers_bind(fg__server *srv, const char *listen, char *addr,
                     size_t addrlen, char *err, size_t errlen);
int fg__workers_start(fg__server *srv, char *err, size_t errlen);
/* Hand 'g' to every worker (each takes a reference). */
void fg__workers_adopt(fg__server *srv, fg__gen *g);
void fg__workers_drain(fg__server *srv);
void fg__workers_join(fg__server *srv);

/* A request finished: account for it, retire what can be retired. */
void fg__worker_request_done(fg__worker *w, fg__wgen *wg);

/* Queue 'key' of limit 'name' for every worker's blocked-key cache to
 * forget (after a reset through the admin routes, on a Redis store), and
 * wake them. Safe from any thread while the workers run. */
void fg__workers_forget(fg__server *srv, const char *name, const char *key,
                        size_t keylen);

/* ---- admin.c: the admin routes on admin_listen ---- */

typedef struct fg__admin fg__admin;
/* Serve /v1/peek and /v1/reset on 'listen' from a thread of their own,
 * for the configuration in force (srv->gen, then each one
 * fg__admin_apply hands over). The bound address goes to 'addr'. NULL
 * with the reason in 'err'. */
fg__admin *fg__admin_start(fg__server *srv, const char *listen, char *addr,
                           size_t addrlen, char *err, size_t errlen);
/* Hand the configuration in force (srv->gen, after a reload) to the
 * admin thread. */
void fg__admin_apply(fg__admin *a);
void fg__admin_free(fg__admin *a);

/* ---- routes.c: HTTP ---- */

void fg__routes_handle(fg__hreq *req, void *worker);
void fg__routes_free_pool(fg__worker *w);
/* Free spare request contexts beyond 'keep'; how many were freed. */
unsigned fg__routes_trim_pool(fg__worker *w, unsigned keep);
/* Store errors and shadow refusals left out of the log in a second that
 * has ended and that no later line has counted: logged now (from the
 * sweep), so that a flood's last second is not left out until the next
 * one. */
void fg__routes_flush_suppressed(fg__worker *w, uint64_t now);

#endif
