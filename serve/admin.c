/* admin.c -- the admin routes of `floodgate serve`, on admin_listen only:
 *
 *   GET  /v1/peek?limit=NAME&key=KEY   what KEY has left; nothing consumed
 *   POST /v1/reset?limit=NAME&key=KEY  clear KEY (every window of it)
 *
 * Every request must carry "Authorization: Bearer TOKEN", the token read
 * from admin_token_file (bearer.c compares it in constant time); without
 * it, or with another, the answer is 401 and nothing else is said. The
 * token is never logged, nor echoed.
 *
 * The routes run on a thread and loop of their own, apart from the
 * workers and from the main thread (signals: a reload or a drain never
 * waits for them): an operator's call is rare, and each is one blocking
 * store call bounded by the limit's timeout (fg_peek, fg_reset; twice it
 * on Cluster, when a master moved). On the
 * memory store they use the process's shared limiters; on Redis, a
 * blocking store and limiters of their own, built again when a reload
 * changes the configuration (their keys are the workers', so they see the
 * same counters). After a reset every worker's blocked-key cache forgets
 * the key. The main thread hands a reload's configuration over, and asks
 * the loop to end, through 'mu' and an eventfd, as it does to workers. */
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bearer.h"
#include "headers.h"
#include "keys.h"
#include "log.h"
#include "server.h"

/* Operators' connections open at once (clients' do not count, nor these
 * against max_connections). */
#define ADMIN_MAX_CONNECTIONS 64

struct fg__admin {
    fg__server *srv;
    struct event_base *base;
    fg__http *http;
    struct event *sweep, *wake_ev;
    int wake_fd;
    pthread_t thread;
    int running;
    /* Given by the main thread, taken by the admin's: a reload's
     * configuration (a reference), and the end. */
    pthread_mutex_t mu;
    fg__gen *next;
    int stop;
    /* The configuration in force here (a reference held). */
    fg__gen *cur;
    /* admin_denied lines this second, and those left out since the last. */
    uint64_t denied_second;
    unsigned denied_logged;
    uint64_t denied_unlogged;
    /* For a Redis configuration: built for 'gen' (a reference held). */
    fg__gen *gen;
    fg_store *store;
    fg_limiter *lim[FG_SERVE_MAX_LIMITS];
};

static void drop_limiters(fg__admin *a)
{
    for (unsigned i = 0; a->gen && i < a->gen->cfg.nlimits; i++)
        fg_limiter_free(a->lim[i]);
    memset(a->lim, 0, sizeof(a->lim));
    fg_store_close(a->store);
    a->store = NULL;
    if (a->gen)
        fg__gen_unref(a->gen);
    a->gen = NULL;
}

/* The limiter of limit 'i' of the configuration in force; NULL with the
 * reason in 'why'. */
static fg_limiter *limiter_of(fg__admin *a, unsigned i, char *why,
                              size_t whylen)
{
    fg__gen *g = a->cur;
    if (g->is_memory)
        return g->memlim[i];
    if (a->gen != g) {
        drop_limiters(a);
        /* Lazy: opening never waits; the call itself connects. */
        a->store = fg_store_open(g->url_lazy, why, whylen);
        if (!a->store)
            return NULL;
        fg__gen_ref(g);
        a->gen = g;
    }
    if (!a->lim[i]) {
        /* The limit as its checks see it (no local fallback to build:
         * operators' calls only ever ask the store). */
        fg_limit lim = g->cfg.limits[i].lim;
        lim.on_failure = FG_FAIL_OPEN;
        a->lim[i] = fg_limiter_new(a->store, &lim, why, whylen);
    }
    return a->lim[i];
}

static void reply(fg__hreq *req, int status, const char *body, size_t len)
{
    fg__http_add_header(req, "Cache-Control", "no-store");
    fg__http_reply(req, status, "application/json", body, len);
}

static void reply_error(fg__hreq *req, int status, const char *msg)
{
    char mem[512];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_error_json(&b, msg, fg__http_reason(status));
    reply(req, status, b.p, b.len);
}

/* One line per admin call: who, what, the outcome. Never the token. */
static void log_call(const fg__hreq *req, const char *route, const char *name,
                     const char *key, size_t keylen, int status,
                     const char *error)
{
    char k[FG_MAX_KEY + 1], kv[2 * FG_MAX_KEY + 8], ev[400];
    size_t n = keylen < FG_MAX_KEY ? keylen : FG_MAX_KEY;
    memcpy(k, key, n);
    k[n] = '\0';
    fg__log("admin", "route=%s limit=%s key=%s status=%d peer=%s%s%s", route,
            name, fg__log_value(k, kv, sizeof(kv)), status,
            req->peer[0] ? req->peer : "-", error ? " error=" : "",
            error ? fg__log_value(error, ev, sizeof(ev)) : "");
}

/* A call refused before any limit was asked, after the token was right:
 * logged too (an audit trail of resets tried), with the path as given
 * when it is no route. */
static void log_refused(const fg__hreq *req, const char *route, int status,
                        const char *error)
{
    char pv[300], ev[400];
    fg__log("admin", "route=%s status=%d peer=%s error=%s",
            route ? route : fg__log_value(req->path, pv, sizeof(pv)), status,
            req->peer[0] ? req->peer : "-",
            fg__log_value(error, ev, sizeof(ev)));
}

/* A request without the right token: one line each, up to
 * DENIED_LOG_PER_S a second (anyone who reaches the port can send them,
 * and lines must not flood the log); the next line says how many were
 * left out, or, when none comes within the second, a line of the sweep. Calls
 * with the token are all logged: the audit trail. */
#define DENIED_LOG_PER_S 20
static void log_denied(fg__admin *a, const fg__hreq *req, const char *reason)
{
    uint64_t second = fg_mono_us() / 1000000;
    if (second != a->denied_second) {
        a->denied_second = second;
        a->denied_logged = 0;
    }
    if (a->denied_logged >= DENIED_LOG_PER_S) {
        a->denied_unlogged++;
        return;
    }
    a->denied_logged++;
    fg__log("admin_denied", "peer=%s reason=%s suppressed=%" PRIu64,
            req->peer[0] ? req->peer : "-", reason, a->denied_unlogged);
    a->denied_unlogged = 0;
}

static void peek_answer(fg__hreq *req, const char *name, const fg_decision *d)
{
    char mem[512];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__sbuf_puts(&b, "{\"name\":");
    fg__json_str(&b, name, strlen(name));
    fg__sbuf_puts(&b, d->allowed ? ",\"allowed\":true,\"limit\":"
                                 : ",\"allowed\":false,\"limit\":");
    fg__sbuf_u64(&b, d->limit);
    fg__sbuf_puts(&b, ",\"remaining\":");
    fg__sbuf_u64(&b, d->remaining);
    fg__sbuf_puts(&b, ",\"reset_ms\":");
    fg__sbuf_u64(&b, d->reset_ms);
    fg__sbuf_puts(&b, ",\"retry_after_ms\":");
    fg__sbuf_u64(&b, d->retry_after_ms);
    fg__sbuf_puts(&b, "}\n");
    reply(req, 200, b.p, b.len);
}

static void handle(fg__hreq *req, void *arg)
{
    fg__admin *a = arg;
    const fg__gen *g = a->cur;
    if (req->error_status) {
        reply_error(req, req->error_status, req->error);
        return;
    }
    /* Nothing is said before the token is shown: not even which routes
     * there are. Authorization is single-valued: given twice, which one
     * counts would depend on the reader (a proxy in front may check the
     * other), so the request is refused. */
    unsigned auths = 0;
    for (unsigned i = 0; i < req->nheaders; i++)
        auths += !strcasecmp(req->name[i], "Authorization");
    if (auths != 1 || !fg__bearer_ok(fg__http_find(req, "Authorization"),
                                     g->admin_token, g->admin_token_len)) {
        log_denied(a, req,
                   auths > 1 ? "repeated_authorization"
                   : auths   ? "wrong_token"
                             : "no_token");
        fg__http_add_header(req, "WWW-Authenticate",
                            "Bearer realm=\"floodgate admin\"");
        /* One guess a connection: the next needs a new one, within the
         * admin listener's cap of connections. */
        fg__http_close_after(req);
        reply_error(req, 401, "unauthorized");
        return;
    }
    int peek = !strcmp(req->path, "/v1/peek");
    if (!peek && strcmp(req->path, "/v1/reset") != 0) {
        log_refused(req, NULL, 404, "no such route");
        reply_error(req, 404, "no such route (admin: /v1/peek, /v1/reset)");
        return;
    }
    const char *route = peek ? "peek" : "reset";
    if ((peek && req->method != FG_HTTP_M_GET) ||
        (!peek && req->method != FG_HTTP_M_POST)) {
        log_refused(req, route, 405, "method not allowed");
        fg__http_add_header(req, "Allow", peek ? "GET" : "POST");
        reply_error(req, 405, "method not allowed");
        return;
    }
    const fg__serve_config *cfg = &g->cfg;
    char name[FG_NAME_MAX + 1], key[FG_MAX_KEY + 2], why[300], tl[80];
    long nl = fg__query_get(req->query, "limit", name, sizeof(name));
    long kl = fg__query_get(req->query, "key", key, cfg->max_key_bytes + 2);
    const char *bad = nl == -1 || nl == 0 ? "missing limit parameter"
                      : nl == -4          ? "limit parameter given twice"
                      : nl < 0            ? "bad limit parameter"
                      : kl == -1          ? "missing key parameter"
                      : kl == -2
                          ? fg__key_check(NULL, cfg->max_key_bytes + 1,
                                          cfg->max_key_bytes, tl, sizeof tl)
                      : kl == -4 ? "key parameter given twice"
                      : kl < 0   ? "bad %-encoding in key"
                                 : NULL;
    if (!bad)
        bad = fg__key_check(key, (size_t)kl, cfg->max_key_bytes, tl, sizeof tl);
    if (bad) {
        log_refused(req, route, 400, bad);
        reply_error(req, 400, bad);
        return;
    }
    int i = fg__config_find(cfg, name, (size_t)nl);
    if (i < 0) {
        log_refused(req, route, 404, "unknown limit");
        reply_error(req, 404, "unknown limit");
        return;
    }
    const char *lname = cfg->limits[i].lim.name;
    fg_limiter *l = limiter_of(a, (unsigned)i, why, sizeof(why));
    if (!l) {
        log_call(req, route, lname, key, (size_t)kl, 503, why);
        reply_error(req, 503, why);
        return;
    }
    fg_decision d;
    int rc =
        peek ? fg_peek(l, key, (size_t)kl, &d) : fg_reset(l, key, (size_t)kl);
    if (rc != FG_OK) {
        /* What the key's node said (shards: not another node's error). */
        const char *last = fg_store_node_error(
            a->store, fg_store_node_of(a->store, key, (size_t)kl));
        if (!last)
            last = "";
        snprintf(why, sizeof(why), "%s%s%.200s", fg_strerror(rc),
                 *last ? ": " : "", last);
        log_call(req, route, lname, key, (size_t)kl, 503, why);
        reply_error(req, 503, why);
        return;
    }
    log_call(req, route, lname, key, (size_t)kl, 200, NULL);
    if (peek) {
        peek_answer(req, lname, &d);
        return;
    }
    if (!g->is_memory)
        fg__workers_forget(a->srv, lname, key, (size_t)kl);
    char mem[160];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__sbuf_puts(&b, "{\"reset\":true,\"name\":");
    fg__json_str(&b, lname, strlen(lname));
    fg__sbuf_puts(&b, "}\n");
    reply(req, 200, b.p, b.len);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fg__admin *a = arg;
    fg__http_sweep(a->http);
    /* Denials left out in a second that has ended, and not yet counted by
     * a later line: said now, not only with the next denial. */
    if (a->denied_unlogged && fg_mono_us() / 1000000 != a->denied_second) {
        fg__log("admin_denied_suppressed", "suppressed=%" PRIu64,
                a->denied_unlogged);
        a->denied_unlogged = 0;
    }
}

/* A listening socket on 'listen' (an IP literal and a port). */
static int bind_listen(const char *listen_addr, char *addr, size_t addrlen,
                       char *err, size_t errlen)
{
    char host[256], port[16];
    if (fg__listen_split(listen_addr, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, errlen, "admin_listen %s: expected HOST:PORT",
                 listen_addr);
        return -1;
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "admin_listen %s: %s", listen_addr,
                 gai_strerror(gai));
        return -1;
    }
    int fd =
        socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
        snprintf(err, errlen, "admin_listen %s: %s", listen_addr,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t l = sizeof(ss);
    char h[NI_MAXHOST], p[NI_MAXSERV];
    getsockname(fd, (struct sockaddr *)&ss, &l);
    getnameinfo((struct sockaddr *)&ss, l, h, sizeof(h), p, sizeof(p),
                NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(addr, addrlen, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h,
             p);
    return fd;
}

/* Wake the admin thread's loop (on_wake reads what was handed over). */
static void wake(fg__admin *a)
{
    uint64_t one = 1;
    ssize_t r = write(a->wake_fd, &one, sizeof(one));
    (void)r; /* a full counter still wakes the loop */
}

/* The HTTP bounds of the configuration in force here. */
static void apply_http(fg__admin *a)
{
    const fg__serve_config *c = &a->cur->cfg;
    fg__http_set_limits(a->http, c->max_header_bytes, c->request_timeout_ms);
}

/* On the admin thread: what the main thread handed over. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    fg__admin *a = arg;
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof(n)); /* reset the eventfd */
    (void)r;
    pthread_mutex_lock(&a->mu);
    fg__gen *g = a->next;
    a->next = NULL;
    int stop = a->stop;
    pthread_mutex_unlock(&a->mu);
    if (g) {
        fg__gen_unref(a->cur);
        a->cur = g;
        apply_http(a);
    }
    if (stop)
        event_base_loopbreak(a->base); /* allocates nothing */
}

/* The admin thread: its loop, until fg__admin_free asks it to stop. */
static void *admin_main(void *arg)
{
    fg__admin *a = arg;
    event_base_dispatch(a->base);
    return NULL;
}

void fg__admin_apply(fg__admin *a)
{
    fg__gen *g = a->srv->gen;
    fg__gen_ref(g);
    pthread_mutex_lock(&a->mu);
    fg__gen *old = a->next;
    a->next = g;
    pthread_mutex_unlock(&a->mu);
    if (old)
        fg__gen_unref(old);
    wake(a);
}

fg__admin *fg__admin_start(fg__server *srv, const char *listen, char *addr,
                           size_t addrlen, char *err, size_t errlen)
{
    fg__admin *a = calloc(1, sizeof(*a));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->srv = srv;
    a->wake_fd = -1;
    pthread_mutex_init(&a->mu, NULL);
    fg__gen_ref(srv->gen);
    a->cur = srv->gen;
    int fd = bind_listen(listen, addr, addrlen, err, errlen);
    if (fd < 0)
        goto fail; /* the reason in 'err' */
    a->base = event_base_new();
    a->http = a->base ? fg__http_new(a->base, fd, handle, a) : NULL;
    a->sweep = a->base ? event_new(a->base, -1, EV_PERSIST, on_sweep, a) : NULL;
    a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->wake_ev =
        a->base && a->wake_fd >= 0
            ? event_new(a->base, a->wake_fd, EV_READ | EV_PERSIST, on_wake, a)
            : NULL;
    if (!a->http || !a->sweep || !a->wake_ev) {
        snprintf(err, errlen, "out of memory");
        if (!a->http)
            close(fd);
        goto fail;
    }
    apply_http(a);
    fg__http_set_cap(a->http, NULL, ADMIN_MAX_CONNECTIONS,
                     "admin_listen's cap of 64 connections reached");
    struct timeval tv = {0, 200000};
    event_add(a->sweep, &tv);
    event_add(a->wake_ev, NULL);
    /* Signals belong to the main thread's loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    a->running = pthread_create(&a->thread, NULL, admin_main, a) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!a->running) {
        snprintf(err, errlen, "cannot start a thread");
        goto fail;
    }
    return a;
fail:
    fg__admin_free(a);
    return NULL;
}

void fg__admin_free(fg__admin *a)
{
    if (!a)
        return;
    if (a->running) {
        /* After the call in progress, if any (its timeout at most). */
        pthread_mutex_lock(&a->mu);
        a->stop = 1;
        pthread_mutex_unlock(&a->mu);
        wake(a);
        pthread_join(a->thread, NULL);
    }
    if (a->sweep)
        event_free(a->sweep);
    if (a->wake_ev)
        event_free(a->wake_ev);
    fg__http_free(a->http);
    if (a->base)
        event_base_free(a->base);
    if (a->wake_fd >= 0)
        close(a->wake_fd);
    drop_limiters(a);
    fg__gen_unref(a->cur);
    fg__gen_unref(a->next);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
