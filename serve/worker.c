/* worker.c -- the event loops: one thread, one listening socket
 * (SO_REUSEPORT: the kernel spreads connections), one HTTP server (http.c)
 * each. */
#include <errno.h>
#include <event2/event.h>
#include <linux/bpf.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

/* Closing a listening socket resets the connections waiting in its accept
 * queue and those still in their handshake. Under SO_REUSEPORT Linux
 * (5.14) can move them to another socket of the port instead, so that a
 * server draining while another takes its place loses nothing: for every
 * port when net.ipv4.tcp_migrate_req is 1, or for one port's sockets once
 * a BPF_SK_REUSEPORT_SELECT_OR_MIGRATE program is attached to them. The
 * program here only answers SK_PASS: the kernel goes on spreading new
 * connections by hash, and picks where queued ones move by hash too.
 * Attached to one socket, it serves every socket of the port, of this
 * process and of the others sharing it. Loading it needs CAP_BPF (or
 * CAP_SYS_ADMIN). Returns FG__HANDOVER_*, with the reason when it is
 * FG__HANDOVER_OFF. */
static int enable_handover(int fd, char *why, size_t whylen)
{
    char v = '0';
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_migrate_req", "r");
    if (f) {
        if (fread(&v, 1, 1, f) != 1)
            v = '0';
        fclose(f);
    }
    if (v == '1')
        return FG__HANDOVER_SYSCTL;
    struct bpf_insn insns[2];
    memset(insns, 0, sizeof(insns));
    insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K; /* r0 = SK_PASS */
    insns[0].dst_reg = BPF_REG_0;
    insns[0].imm = SK_PASS;
    insns[1].code = BPF_JMP | BPF_EXIT;
    union bpf_attr a;
    memset(&a, 0, sizeof(a));
    a.prog_type = BPF_PROG_TYPE_SK_REUSEPORT;
    a.expected_attach_type = BPF_SK_REUSEPORT_SELECT_OR_MIGRATE;
    a.insns = (uint64_t)(uintptr_t)insns;
    a.insn_cnt = 2;
    a.license = (uint64_t)(uintptr_t) "GPL"; /* calls no helper */
    int prog = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
    if (prog < 0) {
        snprintf(why, whylen, "loading the program: %s", strerror(errno));
        return FG__HANDOVER_OFF;
    }
    /* The port's sockets hold the program from now on. */
    int rc = setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog,
                        sizeof(prog));
    if (rc != 0)
        snprintf(why, whylen, "attaching the program: %s", strerror(errno));
    close(prog);
    return rc == 0 ? FG__HANDOVER_BPF : FG__HANDOVER_OFF;
}

/* 1 when a socket listens on the address already, another server's (a
 * bind without SO_REUSEPORT is then refused): the port's connections
 * would be split between both. */
static int port_in_use(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    in_port_t port = ss->ss_family == AF_INET6
                         ? ((const struct sockaddr_in6 *)ss)->sin6_port
                         : ((const struct sockaddr_in *)ss)->sin_port;
    int used = port != 0 && bind(fd, (const struct sockaddr *)ss, len) != 0 &&
               errno == EADDRINUSE;
    close(fd);
    return used;
}

int fg__workers_bind(fg__server *srv, const char *laddr, char *addr,
                     size_t addrlen, char *err, size_t errlen)
{
    char host[256], port[16];
    if (fg__listen_split(laddr, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, errlen,
                 "listen %s: expected HOST:PORT, the port 0..65535", laddr);
        return -1;
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "listen %s: %s", laddr, gai_strerror(gai));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sslen = (socklen_t)ai->ai_addrlen;
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    srv->port_shared = port_in_use(&ss, sslen);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        int fd =
            socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
            bind(fd, (struct sockaddr *)&ss, sslen) || listen(fd, 1024)) {
            snprintf(err, errlen, "listen %s: %s", laddr, strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        srv->w[i].fd = fd;
        if (i == 0) {
            /* Port 0: every worker must share the port the kernel chose. */
            socklen_t l = sizeof(ss);
            getsockname(fd, (struct sockaddr *)&ss, &l);
            sslen = l;
            char h[NI_MAXHOST], p[NI_MAXSERV];
            getnameinfo((struct sockaddr *)&ss, l, h, sizeof(h), p, sizeof(p),
                        NI_NUMERICHOST | NI_NUMERICSERV);
            snprintf(addr, addrlen,
                     ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
        }
    }
    srv->handover = enable_handover(srv->w[0].fd, srv->handover_off,
                                    sizeof(srv->handover_off));
    return 0;
}

/* Under AddressSanitizer malloc is the sanitizer's, and glibc's own heap
 * is never set up: glibc's malloc_trim would set it up on its first call,
 * which is not safe from two workers at once (seen: an abort in glibc at a
 * worker's exit, "a->attached_threads > 0", and a crash right after a
 * reload, when both workers trim). There it has nothing to give back. */
#if defined(__SANITIZE_ADDRESS__)
#define TRIM_HEAP 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRIM_HEAP 0
#endif
#endif
#ifndef TRIM_HEAP
#define TRIM_HEAP 1
#endif

static void trim_heap(void)
{
    if (TRIM_HEAP)
        malloc_trim(0);
}

/* The flushes of the approximate modes' local state once the store has
 * answered the one before: one more than needed for a sync in flight at
 * the first. */
#define RESYNCS_MAX 3

/* 1 when 'wg' has nothing left to send. Its store commands answered, its
 * limiters may still hold usage admitted (or units taken) while a sync was
 * in flight: flushed again, RESYNCS_MAX times at most. A flush the store
 * failed (down, its breaker open) holds what it could not send: flushed
 * again every 100 ms, whatever RESYNCS_MAX, until the store takes it or
 * the caller gives up (flush_failed_us says since when). A flush's sends
 * that fail on their answer (a connection refused) are read by the next
 * flush (fg_limiter_sync): a flush that sent, and read no failure yet,
 * does not end a failure seen before. */
static int synced_all(fg__wgen *wg, unsigned *resyncs)
{
    if (fg__wgen_pending(wg) != 0)
        return 0;
    uint64_t now = fg_mono_us();
    if (now < wg->next_flush_us)
        return 0;
    /* Done after RESYNCS_MAX flushes once the last one's outcome is
     * read (it sent nothing), or after twice that whatever it sent (a
     * key of its own refused, a value not floodgate's, is sent again by
     * every flush). */
    if (!wg->flush_failed_us && (*resyncs >= 2 * RESYNCS_MAX ||
                                 (*resyncs >= RESYNCS_MAX && !wg->flush_sent)))
        return 1;
    ++*resyncs;
    int failed;
    unsigned pending = fg__wgen_sync(wg, &failed);
    wg->flush_sent = pending != 0;
    if (!failed) {
        /* What it sent now is read by the next flush: a failure seen
         * before stands until a flush finds nothing left to send. */
        if (pending == 0) {
            wg->flush_failed_us = 0;
            wg->flush_rc = 0;
            memset(wg->flush_failed, 0, sizeof wg->flush_failed);
        }
        return pending == 0;
    }
    if (!wg->flush_failed_us)
        wg->flush_failed_us = now;
    wg->next_flush_us = now + 100000;
    return 0;
}

/* Given up on sending what 'wg' holds: said once, with the limits a flush
 * failed since one last found nothing left, and the first failure. */
static void log_unsent(fg__worker *w, fg__wgen *wg, const char *when)
{
    if (!wg->flush_failed_us)
        return;
    char names[512], v[600];
    size_t n = 0;
    names[0] = '\0';
    for (unsigned i = 0; i < wg->g->cfg.nlimits; i++) {
        if (!wg->flush_failed[i])
            continue;
        const char *name = wg->g->cfg.limits[i].lim.name;
        /* Room for its comma, and then for ",..." and the NUL. */
        if (n + (n != 0) + strlen(name) + 5 > sizeof names) {
            strcpy(names + n, n ? ",..." : "...");
            break;
        }
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? "," : "",
                              name);
    }
    fg__log("sync_unsent",
            "worker=%u at=%s limits=%s error=\"%s\" msg=\"the store did not "
            "take what these limits held here (usage not synced, leased "
            "units); given up\"",
            w->index, when, fg__log_value(names, v, sizeof v),
            fg_strerror(wg->flush_rc));
}

/* Add what the limiters of 'wg' in a mode sent the store since the last
 * look (syncs, takes, give-backs: mostly no request's round trip) to the
 * worker's metrics. Not on the memory store: its limiters are the
 * workers' own, shared, and their commands no round trip. */
static void count_mode_calls(fg__worker *w, fg__wgen *wg)
{
    for (unsigned i = 0; !wg->g->is_memory && i < wg->g->cfg.nlimits; i++) {
        int slot = wg->g->slot[i];
        uint64_t asked, failed;
        if (slot < 0 || !wg->lim[i] ||
            wg->g->cfg.limits[i].lim.mode == FG_MODE_EXACT)
            continue;
        fg_limiter_asks(wg->lim[i], &asked, &failed);
        FG_ADD(w->m->lim[slot].mode_calls, asked - wg->asks[i][0]);
        FG_ADD(w->m->lim[slot].mode_errors, failed - wg->asks[i][1]);
        wg->asks[i][0] = asked;
        wg->asks[i][1] = failed;
    }
}

/* Free the retired configurations that no request uses any more. Then
 * hand the heap's free pages back to the kernel (malloc_trim): the
 * stores and limiters a reload replaces were allocated while requests
 * and connections came and went, so the holes they leave lie between
 * memory still in use, where glibc neither reuses them all nor ever
 * returns them (it shrinks a heap only from its top). Measured, under
 * traffic with Redis restarted every 20 s and a reload every 7 s: the
 * heap in use stayed flat while a server's anonymous RSS grew by 176 KB
 * in two minutes, and one malloc_trim gave back 284 KB. Once per reload
 * and worker, it costs a walk of the free lists. */
static void free_retired(fg__worker *w)
{
    fg__wgen **pp = &w->retired;
    int waiting = 0, freed = 0;
    while (*pp) {
        fg__wgen *wg = *pp;
        /* Synced at the reload; its last requests may have admitted more.
         * A store that fails the flushes is waited for drain_timeout. */
        int give_up = wg->inflight == 0 && wg->flush_failed_us &&
                      fg_mono_us() - wg->flush_failed_us >=
                          (uint64_t)wg->g->cfg.drain_timeout_ms * 1000;
        if (give_up)
            log_unsent(w, wg, "reload");
        if (wg->inflight == 0 && (give_up || synced_all(wg, &wg->resyncs))) {
            *pp = wg->next;
            count_mode_calls(w, wg);
            fg__wgen_free(wg);
            freed = 1;
        } else {
            waiting |= wg->inflight == 0;
            pp = &wg->next;
        }
    }
    /* A gen whose requests are done may still wait for its syncs and
     * give-backs, answered within the store's timeout: look again. */
    if (waiting) {
        struct timeval tv = {0, 10000};
        event_add(w->reap_ev, &tv);
    }
    if (freed)
        trim_heap();
}

/* Freeing a gen closes its store: never from inside a request or store
 * callback, which may be running on that very store (a Redis reply or
 * timer still walking its slots). The reap event runs on a later turn of
 * the loop, outside every callback. */
static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    free_retired(arg);
}

static void schedule_reap(fg__worker *w)
{
    if (w->reap_ev)
        event_active(w->reap_ev, EV_TIMEOUT, 0);
}

void fg__worker_request_done(fg__worker *w, fg__wgen *wg)
{
    w->inflight--;
    if (wg && wg != w->cur && wg->inflight == 0)
        schedule_reap(w);
}

static void tick_in(fg__worker *w, uint64_t us)
{
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    event_add(w->tick_ev, &tv);
}

/* Nothing waits in the listening socket's accept queue. */
static int backlog_empty(fg__worker *w)
{
    struct pollfd p = {.fd = fg__http_listen_fd(w->http), .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

/* The longest a request of this worker's limits may wait on the store. */
static uint64_t longest_timeout_us(const fg__worker *w)
{
    const fg__serve_config *c = &w->cur->g->cfg;
    uint64_t most = c->store_timeout_ms;
    for (unsigned i = 0; i < c->nlimits; i++)
        if (c->limits[i].lim.timeout_ms > most)
            most = c->limits[i].lim.timeout_ms;
    return most * 1000;
}

/* Draining, in three steps. Grace: keep accepting and answering (healthz
 * 503, Connection: close) so that a load balancer sees the 503 and the
 * other servers on the port take over. Then close the listening socket,
 * at a moment its accept queue is empty. The connections the kernel still
 * queues there in between (the port keeps hashing new ones to it until
 * the close itself) move to another socket of the port when the handover
 * is on (enable_handover()); without it Linux resets them. Then wait for
 * the requests in flight, and for connections accepted whose first
 * request is still on its way, up to drain_timeout. */
static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fg__worker *w = arg;
    if (!w->draining)
        return;
    uint64_t now = fg_mono_us();
    if (fg__http_listen_fd(w->http) >= 0) {
        if (now < w->grace_until_us) {
            uint64_t left = w->grace_until_us - now;
            tick_in(w, left < 5000 ? left : 5000);
            return;
        }
        /* The listener accepts what is queued on the loop's next turn
         * (until EAGAIN); close it once nothing is queued. 100 tries
         * (about 100 ms) bound a port that never rests. */
        if (!backlog_empty(w) && ++w->close_tries < 100) {
            tick_in(w, 1000);
            return;
        }
        /* One worker at a time: as a listener closes, the kernel moves
         * its queued connections to another socket of the port, picked
         * by hash, and one moved to a listener that is closing at that
         * same moment is reset. Closed in turn, this process's sockets
         * hand over to each other and then to the port's other
         * servers. */
        pthread_mutex_lock(&w->srv->close_mu);
        fg__http_close_listener(w->http);
        pthread_mutex_unlock(&w->srv->close_mu);
        w->drain_deadline_us =
            now + (uint64_t)w->cur->g->cfg.drain_timeout_ms * 1000;
    }
    if (w->inflight == 0 &&
        (w->drain_late || fg__http_unanswered(w->http) == 0)) {
        /* Last, the approximate modes' usage and leases go back to the
         * store, and their answers are waited for. */
        if (!w->synced) {
            w->synced = 1;
            fg__wgen_sync(w->cur, NULL);
        }
        /* The configurations a reload replaced too: theirs may still be
         * out (a SIGTERM just after a SIGHUP), and their limiters are
         * freed only once answered. */
        free_retired(w);
        if (!w->retired && synced_all(w->cur, &w->resyncs)) {
            event_base_loopbreak(w->base); /* allocates nothing */
            return;
        }
    }
    if (now >= w->drain_deadline_us && !w->drain_late) {
        /* The requests still waiting on the store end at their own
         * deadlines (a limit's timeout at most). The loop runs until then:
         * freed first, the connections and limiters would get the
         * store's answers (given when the store closes) after them. */
        fg__log("drain_timeout", "worker=%u unfinished=%u", w->index,
                w->inflight);
        w->drain_late = 1;
        w->drain_deadline_us = now + longest_timeout_us(w) + 1000000;
    } else if (now >= w->drain_deadline_us) {
        /* A request that outlived every deadline: not a store's. */
        fg__log("drain_abandoned", "worker=%u unfinished=%u", w->index,
                w->inflight);
        log_unsent(w, w->cur, "drain");
        event_base_loopbreak(w->base); /* allocates nothing */
        return;
    }
    tick_in(w, 5000);
}

/* Free 'wg' as the worker ends. A drain ends once every store command is
 * answered, each within its limit's timeout; one still out (a drain
 * abandoned) would be answered, as its store closes, to a limiter already
 * freed: that configuration is left to the process's exit instead. */
static void free_at_exit(fg__wgen *wg)
{
    if (wg && fg__wgen_pending(wg) != 0) {
        fg__log("exit_pending", "store_calls=%u", fg__wgen_pending(wg));
        return;
    }
    fg__wgen_free(wg);
}

/* A breaker gauge that a request's answer set is read again: else a
 * limit no request asks would show its breaker open long after the
 * breaker let the next check through. */
static void sweep_breakers(fg__worker *w)
{
    fg__wgen *wg = w->cur;
    unsigned char used[FG_METRIC_SLOTS] = {0};
    for (unsigned i = 0; wg && i < wg->g->cfg.nlimits; i++) {
        int slot = wg->g->slot[i];
        if (slot < 0)
            continue;
        used[slot] = 1;
        if (!wg->lim[i] || !FG_GET(w->m->lim[slot].breaker_open))
            continue;
        const char *b = fg_limiter_breaker(wg->lim[i]);
        FG_SET(w->m->lim[slot].breaker_open, b && !strcmp(b, "open"));
    }
    /* A limit a reload removed has no breaker any more. */
    for (unsigned s = 0; s < FG_METRIC_SLOTS; s++)
        if (!used[s] && FG_GET(w->m->lim[s].breaker_open))
            FG_SET(w->m->lim[s].breaker_open, 0);
}

/* A node's server changed (a Sentinel failover, a Redis host name that
 * moved, followed): said once per worker, with the old and the new one. */
static void watch_master(fg__worker *w)
{
    fg__wgen *wg = w->cur;
    for (unsigned i = 0; wg && wg->store && i < FG_NODE_SLOTS; i++) {
        const char *now = fg_store_node_addr(wg->store, i);
        char *was = wg->master[i];
        if (!now || !strcmp(now, was) || strlen(now) >= sizeof wg->master[i])
            continue;
        if (was[0] && now[0]) {
            char n[608], f[552], t[552];
            fg__log(
                "store_switched", "worker=%u node=%s from=%s to=%s", w->index,
                fg__log_value(fg_store_node_name(wg->store, i), n, sizeof n),
                fg__log_value(was, f, sizeof f),
                fg__log_value(now, t, sizeof t));
        }
        if (now[0])
            strcpy(was, now);
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    fg__worker *w = arg;
    unsigned slow = fg__http_sweep(w->http);
    if (slow)
        FG_ADD(w->m->slow_closed, slow);
    FG_SET(w->m->connections, fg__http_connections(w->http));
    FG_SET(w->m->cache_entries, fg_cache_count(w->cache));
    sweep_breakers(w);
    if (w->cur)
        count_mode_calls(w, w->cur);
    for (fg__wgen *wg = w->retired; wg; wg = wg->next)
        count_mode_calls(w, wg);
    watch_master(w);
    fg__routes_flush_suppressed(w, fg_mono_us());
    /* The spare request contexts (9 KB each) beyond what the busiest
     * moment since the last sweep needed are halved at each sweep. Kept
     * for the all-time peak, a rare burst held their memory for good (in a
     * soak, a worker's pool grew from 3 to 9 in four minutes). What a
     * shrink frees goes back to the kernel at once (see free_retired). */
    unsigned wanted =
        w->inflight_peak > w->inflight ? w->inflight_peak - w->inflight : 0;
    w->inflight_peak = w->inflight;
    if (w->npool > wanted &&
        fg__routes_trim_pool(w, wanted + (w->npool - wanted) / 2))
        trim_heap();
}

/* The settings of the worker's HTTP server and sweep that a reload may
 * change. */
static void apply_http(fg__worker *w, const fg__serve_config *c)
{
    fg__http_set_limits(w->http, c->max_header_bytes, c->request_timeout_ms);
    /* Deadlines are checked a few times per request_timeout. */
    uint32_t sweep_ms = c->request_timeout_ms / 5;
    sweep_ms = sweep_ms < 20 ? 20 : sweep_ms > 1000 ? 1000 : sweep_ms;
    struct timeval stv = {sweep_ms / 1000, (sweep_ms % 1000) * 1000};
    event_add(w->sweep_ev, &stv);
}

static void adopt(fg__worker *w, fg__gen *g)
{
    char why[256];
    fg__wgen *wg = fg__wgen_new(w, g, why, sizeof(why));
    fg__gen_unref(g); /* the reference handed over by the main thread */
    if (!wg) {
        fg__log("reload", "worker=%u result=error reason=\"%s\"", w->index,
                why);
        return;
    }
    fg__wgen *old = w->cur;
    w->cur = wg;
    apply_http(w, &wg->g->cfg);
    fg_cache_clear(w->cache);
    /* A store_error's limit that is gone will never say it recovered. */
    if (w->store_failing && fg__config_find(&wg->g->cfg, w->failing_limit,
                                            strlen(w->failing_limit)) < 0)
        w->store_failing = 0;
    if (old) {
        fg__wgen_sync(old, NULL);
        old->next = w->retired;
        w->retired = old;
        schedule_reap(w);
    }
}

static void wake(fg__worker *w)
{
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof(one));
    (void)r; /* a full counter still wakes the worker */
}

/* A key the admin reset, for the worker's limiters and blocked-key cache
 * to forget. */
struct fg__forget {
    struct fg__forget *next;
    char name[FG_NAME_MAX];
    size_t keylen;
    char key[];
};

/* Forget each queued key in the cache of the configuration in force (the
 * limiters of retired ones answer only requests already in flight). */
static void forget_all(fg__worker *w, struct fg__forget *f)
{
    while (f) {
        struct fg__forget *next = f->next;
        int i = w->cur
                    ? fg__config_find(&w->cur->g->cfg, f->name, strlen(f->name))
                    : -1;
        if (i >= 0 && w->cur->lim[i] && !w->cur->g->is_memory) {
            /* A mode's view or lease of the key goes with it. The memory
             * store's limiters are the admin's own, which fg_reset made
             * forget already: forgotten again now, they would lose what
             * was counted since the reset. */
            fg_limiter_forget(w->cur->lim[i], f->key, f->keylen);
            fg_cache_forget(w->cache, w->cur->lim[i], f->key, f->keylen);
        }
        free(f);
        f = next;
    }
}

void fg__workers_forget(fg__server *srv, const char *name, const char *key,
                        size_t keylen)
{
    for (unsigned i = 0; i < srv->nworkers; i++) {
        fg__worker *w = &srv->w[i];
        if (!w->started)
            continue;
        struct fg__forget *f = malloc(sizeof(*f) + keylen);
        if (!f)
            continue; /* the block ends on its own: only a round trip */
        snprintf(f->name, sizeof(f->name), "%s", name);
        f->keylen = keylen;
        memcpy(f->key, key, keylen);
        pthread_mutex_lock(&w->mu);
        f->next = w->forgets;
        w->forgets = f;
        pthread_mutex_unlock(&w->mu);
        wake(w);
    }
}

static void on_cmd(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    fg__worker *w = arg;
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof(n)); /* reset the eventfd */
    (void)r;
    pthread_mutex_lock(&w->mu);
    fg__gen *g = w->pending;
    w->pending = NULL;
    int drain = w->drain_cmd;
    struct fg__forget *forgets = w->forgets;
    w->forgets = NULL;
    pthread_mutex_unlock(&w->mu);
    if (g)
        adopt(w, g);
    forget_all(w, forgets);
    if (drain && !w->draining) {
        w->draining = 1;
        fg__http_set_closing(w->http, 1);
        w->grace_until_us =
            fg_mono_us() + (uint64_t)w->cur->g->cfg.drain_grace_ms * 1000;
        tick(-1, 0, w);
    }
}

static void *worker_main(void *arg)
{
    fg__worker *w = arg;
    fg__server *srv = w->srv;
    char why[256] = "";
    fg__gen *g = srv->gen;
    w->cur = fg__wgen_new(w, g, why, sizeof(why));
    pthread_mutex_lock(&srv->start_mu);
    if (!w->cur) {
        srv->start_failed++;
        fg__log("worker_failed", "worker=%u reason=\"%s\"", w->index, why);
    }
    srv->started++;
    pthread_cond_broadcast(&srv->start_cv);
    pthread_mutex_unlock(&srv->start_mu);
    if (!w->cur)
        return NULL;
    event_base_dispatch(w->base);
    /* Drained: the worker's own events end here (the loop turns below are
     * the stores'), then its connections close and what the loop used is
     * freed. */
    event_del(w->sweep_ev);
    event_del(w->tick_ev);
    event_del(w->reap_ev);
    event_del(w->cmd_ev);
    fg__routes_flush_suppressed(w, UINT64_MAX); /* what no line said yet */
    fg__http_free(w->http);
    w->http = NULL;
    free_at_exit(w->cur);
    w->cur = NULL;
    while (w->retired) {
        fg__wgen *wg = w->retired;
        w->retired = wg->next;
        free_at_exit(wg);
    }
    /* A store closed while it looked up a host name (a Sentinel failover
     * or a Cluster master announced by name) frees that lookup from its
     * loop's next turns (dns.c): let them run (the worker's own events are
     * gone: nothing of its freed state is called). */
    for (int i = 0; i < 4; i++)
        event_base_loop(w->base, EVLOOP_NONBLOCK);
    fg__routes_free_pool(w);
    return NULL;
}

/* A loop whose timers are precise: store deadlines are a few
 * milliseconds, and libevent's default coarse clock (and millisecond epoll
 * timeouts) would let a 5 ms deadline fire at 8. */
static struct event_base *new_base(void)
{
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return NULL;
    /* The changelist folds the enabling and disabling of an event within
     * one loop iteration into at most one epoll_ctl (safe: no descriptor
     * is dup()ed). */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER |
                                   EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *b = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return b;
}

int fg__workers_start(fg__server *srv, char *err, size_t errlen)
{
    const fg__serve_config *c = &srv->gen->cfg;
    sigset_t all, old;
    sigfillset(&all);
    /* Signals belong to the main thread's loop. */
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = 0;
    for (unsigned i = 0; i < srv->nworkers && rc == 0; i++) {
        fg__worker *w = &srv->w[i];
        w->base = new_base();
        w->m = calloc(1, sizeof(*w->m));
        w->cache = c->blocked_cache ? fg_cache_new(c->blocked_cache) : NULL;
        /* The main thread wakes a worker through an eventfd, so libevent
         * needs no locking (evthread) on the request path. */
        w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        w->cmd_ev = w->base && w->wake_fd >= 0
                        ? event_new(w->base, w->wake_fd, EV_READ | EV_PERSIST,
                                    on_cmd, w)
                        : NULL;
        if (w->cmd_ev)
            event_add(w->cmd_ev, NULL);
        w->tick_ev = w->base ? evtimer_new(w->base, tick, w) : NULL;
        w->reap_ev = w->base ? evtimer_new(w->base, on_reap, w) : NULL;
        w->sweep_ev =
            w->base ? event_new(w->base, -1, EV_PERSIST, on_sweep, w) : NULL;
        if (!w->base || !w->m || !w->cmd_ev || !w->tick_ev || !w->reap_ev ||
            !w->sweep_ev || (c->blocked_cache && !w->cache)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        w->http = fg__http_new(w->base, w->fd, fg__routes_handle, w);
        if (!w->http) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        w->fd = -1; /* the server's now */
        fg__http_set_cap(w->http, &w->srv->open_conns, w->srv->max_conns,
                         "max_connections reached");
        apply_http(w, c);
        pthread_mutex_init(&w->mu, NULL);
        w->made = 1;
    }
    /* Every worker's metrics and cache exist before the first one runs:
     * /metrics, on any worker, reads them all. */
    for (unsigned i = 0; i < srv->nworkers && rc == 0; i++) {
        fg__worker *w = &srv->w[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            snprintf(err, errlen, "cannot start a thread");
            rc = -1;
            break;
        }
        w->started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    unsigned want = 0;
    for (unsigned i = 0; i < srv->nworkers; i++)
        want += srv->w[i].started;
    pthread_mutex_lock(&srv->start_mu);
    while (srv->started < want)
        pthread_cond_wait(&srv->start_cv, &srv->start_mu);
    if (rc == 0 && srv->start_failed) {
        snprintf(err, errlen, "a worker could not open the store");
        rc = -1;
    }
    pthread_mutex_unlock(&srv->start_mu);
    return rc;
}

void fg__workers_adopt(fg__server *srv, fg__gen *g)
{
    for (unsigned i = 0; i < srv->nworkers; i++) {
        fg__worker *w = &srv->w[i];
        if (!w->started)
            continue;
        fg__gen_ref(g);
        pthread_mutex_lock(&w->mu);
        fg__gen *old = w->pending;
        w->pending = g;
        pthread_mutex_unlock(&w->mu);
        if (old)
            fg__gen_unref(old);
        wake(w);
    }
}

void fg__workers_drain(fg__server *srv)
{
    for (unsigned i = 0; i < srv->nworkers; i++) {
        fg__worker *w = &srv->w[i];
        if (!w->started)
            continue;
        pthread_mutex_lock(&w->mu);
        w->drain_cmd = 1;
        pthread_mutex_unlock(&w->mu);
        wake(w);
    }
}

void fg__workers_join(fg__server *srv)
{
    /* All of them, before any worker's metrics go: one still draining may
     * answer /metrics, which reads every worker's. */
    for (unsigned i = 0; i < srv->nworkers; i++)
        if (srv->w[i].started)
            pthread_join(srv->w[i].thread, NULL);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        fg__worker *w = &srv->w[i];
        fg__http_free(w->http);
        if (w->cmd_ev)
            event_free(w->cmd_ev);
        if (w->tick_ev)
            event_free(w->tick_ev);
        if (w->reap_ev)
            event_free(w->reap_ev);
        if (w->sweep_ev)
            event_free(w->sweep_ev);
        if (w->base)
            event_base_free(w->base);
        if (w->fd >= 0)
            close(w->fd);
        if (w->wake_fd >= 0)
            close(w->wake_fd);
        if (w->pending)
            fg__gen_unref(w->pending);
        forget_all(w, w->forgets); /* w->cur is gone: frees only */
        w->forgets = NULL;
        fg_cache_free(w->cache);
        free(w->m);
        if (w->made)
            pthread_mutex_destroy(&w->mu);
    }
}
