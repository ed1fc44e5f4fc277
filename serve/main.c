/* main.c -- `floodgate serve`: options, start-up, signals (reload, drain).
 *
 * The main thread loads the configuration, binds the sockets, starts the
 * workers and then only handles signals: SIGHUP reloads (a bad file keeps
 * the running configuration), SIGTERM and SIGINT drain and exit. */
#include <event2/event.h>
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../cli/commands.h"
#include "fallback.h"
#include "headers.h"
#include "log.h"
#include "server.h"

static const char usage[] =
    "usage: floodgate serve [-c FILE] [--listen ADDR] [--store URL]\n"
    "\n"
    "Run the rate-limiting sidecar: an HTTP daemon answering\n"
    "  POST /v1/check?limit=NAME&key=KEY[&cost=N]   200 allowed, 429 "
    "refused\n"
    "  GET  /v1/auth?limit=NAME                     for nginx auth_request\n"
    "  POST /bookings                               demo API (demo_api = "
    "on)\n"
    "  GET  /metrics, GET /healthz\n"
    "and, on [server] admin_listen only, with the bearer token of\n"
    "admin_token_file:\n"
    "  GET  /v1/peek?limit=NAME&key=KEY             what KEY has left\n"
    "  POST /v1/reset?limit=NAME&key=KEY            clear KEY\n"
    "\n"
    "  -c, --config FILE   INI configuration ([server], [store], [limit "
    "NAME])\n"
    "  --listen ADDR       IP:PORT to listen on, [IPv6]:PORT for IPv6\n"
    "                      (overrides [server] listen)\n"
    "  --store URL         memory | redis://HOST:PORT[/DB] | unix:///PATH |\n"
    "                      shards=URL,URL,... |\n"
    "                      cluster=redis://HOST:PORT,... |\n"
    "                      sentinel://HOST:PORT,.../MASTER\n"
    "                      (overrides [store] url)\n"
    "  -h, --help          this text\n"
    "\n"
    "SIGHUP reloads the file; SIGTERM (or SIGINT) drains and exits.\n"
    "Exit status: 0 after a drain, 1 when the store's host did not resolve\n"
    "at start (it may later), 2 on a usage or configuration error, a port\n"
    "that cannot be bound or too low a ulimit -n.\n";

/* Client connections are counted and capped in the workers (http.c); the
 * descriptor limit must leave room beyond them for what else the server
 * opens: what was open at start ('base'), the admin listener's connections
 * (64 at most) and a reload's files (128 for both), and each worker's own
 * (its loop, wake-ups: 32) and twice its store connections ('store_conns':
 * one a node, and the Sentinels or Cluster seeds it may ask; twice, for
 * reconnects). */
static rlim_t fd_room(rlim_t base, unsigned workers, unsigned store_conns)
{
    return base + 128 + (32 + 2 * (rlim_t)store_conns) * (rlim_t)workers;
}

/* The least a server runs with: the workers' own descriptors and one
 * connection to each store node (beside 'base', open at start). */
static rlim_t fd_need(rlim_t base, unsigned workers, unsigned store_conns)
{
    return base + 32 + (8 + (rlim_t)store_conns) * (rlim_t)workers;
}

/* The soft descriptor limit, raised towards 'want' (as far as the hard
 * limit lets it) when lower; RLIM_INFINITY when unknown. */
static rlim_t fd_raise(rlim_t want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return RLIM_INFINITY;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want
                          ? rl.rlim_max
                          : want;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur;
}

/* The loops that each open the store and keep connections to its nodes:
 * the workers, and the admin routes' when admin_listen is set. */
static unsigned store_users(const fg__serve_config *c, unsigned workers)
{
    return workers + (c->admin_listen[0] != '\0');
}

/* Called before the workers start, for 'workers' loops that each open the
 * store (store_users), with what is open now kept in 'srv->fd_base'.
 * Raises the soft limit to what is open now plus the connections plus
 * the room; under a lower hard limit the cap is lowered to fit, and said.
 * Returns the cap, or 0 when the limit leaves too little even for the
 * loops' own descriptors and their store connections: the least is in
 * '*need'. */
static uint32_t cap_connections(fg__server *srv, uint32_t max_conn,
                                unsigned workers, unsigned store_conns,
                                unsigned long long *need)
{
    rlim_t open_now = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        while (readdir(d))
            open_now++;
        closedir(d);
    } else {
        open_now = 64;
    }
    srv->fd_base = open_now;
    rlim_t room = fd_room(open_now, workers, store_conns);
    rlim_t want = room + max_conn;
    rlim_t cur = fd_raise(want);
    *need = (unsigned long long)fd_need(open_now, workers, store_conns);
    if (cur != RLIM_INFINITY && cur < *need)
        return 0;
    if (cur != RLIM_INFINITY && cur < want) {
        uint32_t cap = cur > room + 1 ? (uint32_t)(cur - room) : 1;
        fg__log("max_connections",
                "configured=%" PRIu32 " cap=%" PRIu32 " nofile=%llu "
                "warning=\"the descriptor limit leaves room for fewer "
                "connections: raise it (ulimit -n, LimitNOFILE=)\"",
                max_conn, cap, (unsigned long long)cur);
        return cap;
    }
    return max_conn;
}

/* A reload to another store, of more connections than the descriptor
 * limit has room for beside the clients (and the connections of the store
 * it replaces, while it drains): NULL, or the reason it is refused, in
 * 'buf'. The same store is never refused: its workers hold its
 * connections already (a Cluster's masters learned since start). */
static const char *fd_refusal(const fg__server *srv, const fg__gen *g,
                              char *buf, size_t len)
{
    unsigned old = srv->gen->store_conns,
             workers = store_users(&srv->gen->cfg, srv->nworkers);
    if (g->store_conns <= old ||
        (!srv->gen->is_memory && !strcmp(srv->gen->url, g->url)))
        return NULL;
    rlim_t want = fd_room(srv->fd_base, workers, g->store_conns) +
                  (rlim_t)old * workers + srv->max_conns;
    rlim_t cur = fd_raise(want);
    if (cur == RLIM_INFINITY || cur >= want)
        return NULL;
    snprintf(buf, len,
             "the open-file limit (ulimit -n, LimitNOFILE=) is %llu: the "
             "new store's %u connections a worker, beside the old one's "
             "and %" PRIu32 " clients, need %llu; raise it and restart",
             (unsigned long long)cur, g->store_conns, srv->max_conns,
             (unsigned long long)want);
    return buf;
}

/* What a reload cannot change in a running server (each is sized or
 * opened once at start): NULL, or the reason the reload is refused. */
static const char *reload_refusal(const fg__server *srv, const fg__gen *g,
                                  char *buf, size_t len)
{
    const fg__serve_config *old = &srv->gen->cfg, *new = &g->cfg;
    /* A file emptied or cut short (rewritten in place, or a pipe read
     * again) must not lift every limit of a running server. */
    if (old->nlimits && !new->nlimits)
        return "the new configuration has no [limit]: every limit would "
               "be dropped (restart to run without limits)";
    if (old->blocked_cache != new->blocked_cache)
        return "blocked_cache changes only on restart";
    if (old->max_connections != new->max_connections)
        return "max_connections changes only on restart";
    if (strcmp(old->admin_listen, new->admin_listen) != 0)
        return "admin_listen changes only on restart";
    /* The memory store is opened once, with the options it was first
     * opened with, and kept through reloads to Redis and back. */
    if (g->is_memory && srv->mem && strcmp(srv->mem_url, new->store_url) != 0)
        return "the memory store's options change only on restart";
    return fd_refusal(srv, g, buf, len);
}

/* Say, for each limit with on_failure = local, what this process enforces
 * while the store is unreachable, and warn when rounding the share down
 * lost part of the rate, loudly when nothing is left. The memory store
 * never becomes unreachable: nothing to say then. */
static void log_fallback(const fg__gen *g)
{
    const fg__serve_config *c = &g->cfg;
    fg_store *mem = NULL;
    for (unsigned i = 0; i < c->nlimits && !g->is_memory; i++) {
        const fg_limit *lim = &c->limits[i].lim;
        if (lim->on_failure != FG_FAIL_LOCAL)
            continue;
        char why[200], info[400], warn[600], v[700];
        if (!mem &&
            !(mem = fg_store_open("memory?max_keys=1024", why, sizeof(why)))) {
            fg__log("local_fallback", "error=%s",
                    fg__log_value(why, v, sizeof(v)));
            return;
        }
        fg__fallback_share s;
        if (fg__fallback_share_of(mem, lim, c->workers, &s, why, sizeof(why)) !=
            FG_OK) {
            fg__log("local_fallback", "limit=%s error=%s", lim->name,
                    fg__log_value(why, v, sizeof(v)));
            continue;
        }
        fg__fallback_describe(lim, &s, info, sizeof(info), warn, sizeof(warn));
        char per[48];
        fg__fallback_rate_text(s.limit, lim->period_us, per, sizeof(per));
        fg__log("local_fallback",
                "limit=%s per_worker=%s burst_per_worker=%" PRIu64
                " workers=%u fallback_servers=%" PRIu32 " msg=%s",
                lim->name, per, s.burst, s.workers, s.servers,
                fg__log_value(info, v, sizeof(v)));
        if (s.zero)
            fg__log("local_fallback_zero", "level=error limit=%s warning=%s",
                    lim->name, fg__log_value(warn, v, sizeof(v)));
        else if (warn[0])
            fg__log("local_fallback_rounded",
                    "level=warning limit=%s warning=%s", lim->name,
                    fg__log_value(warn, v, sizeof(v)));
    }
    if (mem)
        fg_store_close(mem);
}

/* Warn of a naive_get_set limit (racy on purpose), and say, for each
 * limit in an approximate mode, the bound it runs under:
 * the servers sharing it are fallback_servers processes of this many
 * workers each (every worker decides on its own), the round trip that of
 * the store's timeout at worst. On the memory store the workers share one
 * limiter, and no other process sees its counts: one server. */
static void log_modes(const fg__gen *g)
{
    const fg__serve_config *c = &g->cfg;
    for (unsigned i = 0; i < c->nlimits; i++) {
        const fg_limit *lim = &c->limits[i].lim;
        if (lim->algorithm == FG_NAIVE_GET_SET)
            fg__log("naive_get_set",
                    "level=warning limit=%s msg=\"reads, decides and writes "
                    "back in separate steps: concurrent checks race and "
                    "admit beyond the limit; the lab's race, never for "
                    "protection\"",
                    lim->name);
        if (lim->mode == FG_MODE_EXACT)
            continue;
        char mode[32];
        fg_mode_bound b;
        uint64_t servers = g->is_memory ? 1
                                        : (uint64_t)(lim->fallback_servers
                                                         ? lim->fallback_servers
                                                         : 1) *
                                              (c->workers ? c->workers : 1);
        if (servers > 100000)
            servers = 100000;
        fg_mode_format(lim, mode, sizeof(mode));
        if (fg_limit_bound(lim, (unsigned)servers,
                           (uint64_t)lim->timeout_ms * 1000, &b) != FG_OK)
            continue;
        if (lim->mode == FG_MODE_SYNC)
            fg__log("mode",
                    "limit=%s mode=%s servers=%" PRIu64
                    " over_window_ms=%" PRIu64 " over_cap=%" PRIu64
                    " msg=\"admits beyond the limit at most what the other "
                    "servers admit in %" PRIu64 " ms, never more than %" PRIu64
                    " units\"",
                    lim->name, mode, servers, b.over_window_us / 1000,
                    b.over_cap, b.over_window_us / 1000, b.over_cap);
        else
            fg__log("mode",
                    "limit=%s mode=%s servers=%" PRIu64 " over_cap=0"
                    " under_cap=%" PRIu64
                    " msg=\"never admits beyond the limit; refuses below it "
                    "at most %" PRIu64
                    " units, what the servers hold (and a chunk "
                    "a server waits to take)\"",
                    lim->name, mode, servers, b.under_cap, b.under_cap);
    }
}

static const char *redact(const char *url, char *out, size_t outlen);

/* A reload refused closes the memory store it opened: the next one may
 * open it with other options (it keeps those it was first opened with
 * only once a configuration ran on it). */
static void drop_new_mem(fg__server *srv, int had_mem)
{
    if (had_mem || !srv->mem)
        return;
    fg_store_close(srv->mem);
    srv->mem = NULL;
    srv->mem_url[0] = '\0';
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    fg__server *srv = arg;
    if (sig == SIGHUP) {
        char err[512];
        int had_mem = srv->mem != NULL;
        fg__gen *g = fg__gen_load(srv, err, sizeof(err));
        if (!g) {
            drop_new_mem(srv, had_mem);
            FG_INC(srv->reload_errors);
            char v[600];
            fg__log("reload", "result=error reason=%s kept=running",
                    fg__log_value(err, v, sizeof(v)));
            return;
        }
        const fg__serve_config *old = &srv->gen->cfg;
        char why[300];
        const char *refused = reload_refusal(srv, g, why, sizeof(why));
        if (refused) {
            fg__gen_unref(g);
            drop_new_mem(srv, had_mem);
            FG_INC(srv->reload_errors);
            char fv[600];
            fg__log("reload", "result=error reason=\"%s\" kept=running%s%s",
                    refused, srv->config_path ? " file=" : "",
                    srv->config_path
                        ? fg__log_value(srv->config_path, fv, sizeof(fv))
                        : "");
            return;
        }
        if (strcmp(old->listen, g->cfg.listen) != 0 ||
            old->workers != g->cfg.workers)
            fg__log("reload", "warning=\"listen and workers change only on "
                              "restart\"");
        strcpy(g->cfg.listen, old->listen);
        g->cfg.workers = old->workers;
        fg__gen_name_metrics(g, srv->gen);
        fg__workers_adopt(srv, g);
        fg__gen_unref(srv->gen);
        srv->gen = g;
        if (srv->admin)
            fg__admin_apply(srv->admin);
        log_fallback(g);
        log_modes(g);
        FG_INC(srv->reloads);
        char v[600];
        fg__log("reload", "result=ok limits=%u store=%s", g->cfg.nlimits,
                g->is_memory ? "memory"
                             : fg__log_value(redact(g->cfg.store_url, v, 300),
                                             v + 300, 300));
        return;
    }
    if (!FG_GET(srv->draining)) {
        FG_SET(srv->draining, 1);
        fg__log("draining", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
        fg__workers_drain(srv);
        event_base_loopbreak(srv->main_base); /* allocates nothing */
    }
}

/* One URL of 'n' bytes at 'u', as the URL parsers read it, without its
 * passwords: the user info up to its last '@', and the value of any
 * parameter whose name ends in "password" up to the next '&'. */
static void redact_one(fg__sbuf *b, const char *u, size_t n)
{
    const char *end = u + n, *p = u, *at = NULL;
    const char *s = NULL;
    for (const char *q = u; q + 3 <= end && !s; q++)
        if (!memcmp(q, "://", 3))
            s = q + 3;
    /* A unix:// URL has no user info: its password is a parameter. */
    int unix_url = n >= 7 && !memcmp(u, "unix://", 7);
    for (const char *q = s && !unix_url ? s : end; q < end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        fg__sbuf_put(b, u, (size_t)(s - u));
        fg__sbuf_puts(b, "***");
        p = at;
    }
    while (p < end) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq) {
            fg__sbuf_put(b, p, (size_t)(end - p));
            break;
        }
        fg__sbuf_put(b, p, (size_t)(eq + 1 - p));
        int secret = eq - p >= 8 && !memcmp(eq - 8, "password", 8);
        p = eq + 1;
        if (secret) {
            fg__sbuf_puts(b, "***");
            const char *amp = memchr(p, '&', (size_t)(end - p));
            p = amp ? amp : end;
        }
    }
}

/* 'url' without its passwords, for logs: each node URL of a "shards=" or
 * "cluster=" list (split at ',', as their parsers do), else the one URL.
 * What does not fit in 'out' is left out. */
static const char *redact(const char *url, char *out, size_t outlen)
{
    fg__sbuf b;
    fg__sbuf_init(&b, out, outlen);
    const char *p = url;
    if (!strncmp(url, "shards=", 7) || !strncmp(url, "cluster=", 8)) {
        p = strchr(url, '=') + 1;
        fg__sbuf_put(&b, url, (size_t)(p - url));
        for (;;) {
            size_t n = strcspn(p, ",");
            redact_one(&b, p, n);
            if (!p[n])
                break;
            fg__sbuf_puts(&b, ",");
            p += n + 1;
        }
    } else {
        redact_one(&b, url, strlen(url));
    }
    return out;
}

/* libevent's own warnings go to the log as lines of their own: they would
 * otherwise be written to stderr with fprintf, waiting for the reader. */
static void libevent_log(int severity, const char *msg)
{
    char v[600];
    fg__log("libevent", "level=%s message=%s",
            severity >= EVENT_LOG_ERR    ? "error"
            : severity >= EVENT_LOG_WARN ? "warning"
                                         : "info",
            fg__log_value(msg, v, sizeof(v)));
}

int fg_cmd_serve(int argc, char **argv)
{
    fg__server srv;
    memset(&srv, 0, sizeof(srv));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        const char **dst = NULL, *val = NULL, *opt = NULL;
        if (!strcmp(a, "-c") || !strcmp(a, "--config"))
            dst = &srv.config_path, opt = "--config";
        else if (!strcmp(a, "--listen"))
            dst = &srv.cli_listen, opt = "--listen";
        else if (!strcmp(a, "--store"))
            dst = &srv.cli_store, opt = "--store";
        /* A value that begins with -- is given as --NAME=VALUE (as for
         * check): "--store --help" is a missing value, not a store. */
        if (dst && i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
            val = argv[++i];
        else if (!strncmp(a, "--listen=", 9))
            dst = &srv.cli_listen, opt = "--listen", val = a + 9;
        else if (!strncmp(a, "--store=", 8))
            dst = &srv.cli_store, opt = "--store", val = a + 8;
        else if (!strncmp(a, "--config=", 9))
            dst = &srv.config_path, opt = "--config", val = a + 9;
        if (!val) {
            fprintf(stderr, "floodgate serve: %s '%s'%s\n%s",
                    dst           ? "missing value after"
                    : a[0] == '-' ? "unknown option"
                                  : "unexpected argument",
                    a,
                    dst ? " (one that begins with -- is given as "
                          "--NAME=VALUE)"
                        : "",
                    usage);
            return 2;
        }
        if (!*val) {
            fprintf(stderr, "floodgate serve: %s is empty\n", opt);
            return 2;
        }
        /* As in the configuration file: never the last one silently. */
        if (*dst) {
            fprintf(stderr, "floodgate serve: %s given twice\n", opt);
            return 2;
        }
        *dst = val;
    }
    signal(SIGPIPE, SIG_IGN);
    fg__log_nonblocking();
    event_set_log_callback(libevent_log);
    srv.main_base = event_base_new();
    if (!srv.main_base) {
        fprintf(stderr, "floodgate serve: out of memory\n");
        return 2;
    }
    if (getrandom(&srv.seed, sizeof(srv.seed), 0) != sizeof(srv.seed))
        srv.seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL;
    pthread_mutex_init(&srv.start_mu, NULL);
    pthread_cond_init(&srv.start_cv, NULL);
    pthread_mutex_init(&srv.close_mu, NULL);
    int status = 2;
    char err[512];
    struct event *sig[3] = {NULL, NULL, NULL};
    fg__admin *admin = NULL;
    /* SIGHUP is caught from the start: one sent while the configuration
     * is read, the store probed or the port bound (a reload racing a
     * restart) is a reload once the server runs, not the end of it. */
    int signo[3] = {SIGHUP, SIGTERM, SIGINT};
    for (int i = 0; i < 3; i++) {
        sig[i] = evsignal_new(srv.main_base, signo[i], on_signal, &srv);
        if (!sig[i] || (i == 0 && evsignal_add(sig[i], NULL) != 0)) {
            fprintf(stderr, "floodgate serve: cannot handle signals\n");
            goto out;
        }
    }
    srv.gen = fg__gen_load(&srv, err, sizeof(err));
    if (!srv.gen) {
        fprintf(stderr, "floodgate serve: %s\n", err);
        /* A host that did not resolve (a resolver down at boot) is not a
         * configuration error: a service manager may start it again. */
        if (srv.store_unopened)
            status = 1;
        goto out;
    }
    fg__gen_name_metrics(srv.gen, NULL);
    const fg__serve_config *c = &srv.gen->cfg;
    srv.nworkers = c->workers;
    srv.w = calloc(srv.nworkers, sizeof(*srv.w));
    if (!srv.w) {
        fprintf(stderr, "floodgate serve: out of memory\n");
        goto out;
    }
    for (unsigned i = 0; i < srv.nworkers; i++) {
        srv.w[i].srv = &srv;
        srv.w[i].index = i;
        srv.w[i].fd = -1;
        srv.w[i].wake_fd = -1;
    }
    char addr[300];
    if (fg__workers_bind(&srv, c->listen, addr, sizeof(addr), err,
                         sizeof(err))) {
        fprintf(stderr, "floodgate serve: %s\n", err);
        goto out;
    }
    /* SIGTERM and SIGINT end a server that is still starting. */
    for (int i = 1; i < 3; i++)
        if (evsignal_add(sig[i], NULL) != 0) {
            fprintf(stderr, "floodgate serve: cannot handle signals\n");
            goto out;
        }
    unsigned long long need = 0;
    srv.max_conns =
        cap_connections(&srv, c->max_connections, store_users(c, c->workers),
                        srv.gen->store_conns, &need);
    if (!srv.max_conns) {
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        char each[64] = "";
        if (srv.gen->store_conns)
            snprintf(each, sizeof(each), " (with %u store connections each)",
                     srv.gen->store_conns);
        fprintf(stderr,
                "floodgate serve: the open-file limit (ulimit -n, "
                "LimitNOFILE=) is %llu: %u workers need at least %llu%s\n",
                (unsigned long long)rl.rlim_cur, c->workers, need, each);
        goto out;
    }
    if (fg__workers_start(&srv, err, sizeof(err))) {
        fprintf(stderr, "floodgate serve: %s\n", err);
        FG_SET(srv.draining, 1);
        fg__workers_drain(&srv);
        fg__workers_join(&srv);
        goto out;
    }
    char admin_addr[300] = "";
    if (c->admin_listen[0]) {
        admin = fg__admin_start(&srv, c->admin_listen, admin_addr,
                                sizeof(admin_addr), err, sizeof(err));
        if (!admin) {
            fprintf(stderr, "floodgate serve: %s\n", err);
            FG_SET(srv.draining, 1);
            fg__workers_drain(&srv);
            fg__workers_join(&srv);
            goto out;
        }
        srv.admin = admin;
        /* Before "listening": whoever waits for that line may use both. */
        fg__log("admin_listening",
                "addr=%s routes=\"GET /v1/peek, POST /v1/reset\" "
                "auth=bearer",
                admin_addr);
    }
    char v[600];
    if (srv.gen->is_memory)
        fg__log("store", "url=memory note=\"limits are per process: run "
                         "one server or configure [store] url = "
                         "redis://...\"");
    else
        fg__log("store", "url=%s",
                fg__log_value(redact(c->store_url, v, 300), v + 300, 300));
    log_fallback(srv.gen);
    log_modes(srv.gen);
    static const char *const handover[] = {"off", "bpf", "sysctl"};
    if (srv.handover == FG__HANDOVER_OFF)
        fg__log("handover_off",
                "reason=%s note=\"a drain resets the connections queued on a "
                "listening socket as it closes: give CAP_BPF or set "
                "net.ipv4.tcp_migrate_req=1\"",
                fg__log_value(srv.handover_off, v, sizeof(v)));
    if (srv.port_shared)
        fg__log("port_shared",
                "addr=%s note=\"another process listens on this port: the "
                "kernel splits new connections between both, each deciding "
                "with its own configuration (and, on a memory store, its own "
                "counts); expected only while one of them drains\"",
                addr);
    fg__log("listening",
            "addr=%s workers=%u id=%s limits=%u pid=%ld handover=%s", addr,
            srv.nworkers, fg__log_value(c->id, v, sizeof(v)), c->nlimits,
            (long)getpid(), handover[srv.handover]);
    event_base_dispatch(srv.main_base);
    srv.admin = NULL;
    fg__admin_free(admin);
    admin = NULL;
    fg__workers_join(&srv);
    fg__log("exit", "status=0");
    status = 0;
out:
    fg__admin_free(admin);
    for (int i = 0; i < 3; i++)
        if (sig[i])
            event_free(sig[i]);
    if (srv.gen)
        fg__gen_unref(srv.gen);
    if (srv.mem)
        fg_store_close(srv.mem);
    free(srv.w);
    event_base_free(srv.main_base);
    pthread_mutex_destroy(&srv.start_mu);
    pthread_cond_destroy(&srv.start_cv);
    pthread_mutex_destroy(&srv.close_mu);
    return status;
}
