/* gen.c -- a loaded configuration ("gen") and each worker's copy of it. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fallback.h"
#include "log.h"
#include "server.h"

static int is_memory_url(const char *url)
{
    return !strcmp(url, "memory") || !strncmp(url, "memory?", 7);
}

/* A limiter on the process's memory store, shared by the configurations
 * that define the same limit: a reload keeps the counters of the limits it
 * does not change. */
typedef struct fg__memref {
    fg_limiter *l;
    int refs; /* atomic */
} fg__memref;

static void memref_drop(fg__memref *m)
{
    if (m && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        fg_limiter_free(m->l);
        free(m);
    }
}

/* A limit the reload leaves as it was, its key's source included (the
 * same key from another source is another client's). */
static int same_limit(const fg__serve_limit *sa, const fg__serve_limit *sb)
{
    const fg_limit *a = &sa->lim, *b = &sb->lim;
    return sa->key.kind == sb->key.kind &&
           (sa->key.kind == FG_KEYSRC_HEADER
                ? !strcasecmp(sa->key.name, sb->key.name)
                : !strcmp(sa->key.name, sb->key.name)) &&
           sa->key.v6_bits == sb->key.v6_bits && !strcmp(a->name, b->name) &&
           a->limit == b->limit && a->period_us == b->period_us &&
           a->burst == b->burst && a->algorithm == b->algorithm &&
           a->on_failure == b->on_failure && a->timeout_ms == b->timeout_ms &&
           a->fallback_servers == b->fallback_servers &&
           a->clock_client == b->clock_client && a->durable == b->durable &&
           a->shadow == b->shadow && a->mode == b->mode &&
           a->sync_ms == b->sync_ms && a->lease_chunk == b->lease_chunk &&
           sa->local_keys == sb->local_keys;
}

/* 1 when 'g' (or NULL) has a limit named 'name'. */
static int has_limit(const fg__gen *g, const char *name)
{
    for (unsigned i = 0; g && i < g->cfg.nlimits; i++)
        if (!strcmp(g->cfg.limits[i].lim.name, name))
            return 1;
    return 0;
}

void fg__gen_ref(fg__gen *g)
{
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_ACQ_REL);
}

void fg__gen_unref(fg__gen *g)
{
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    for (unsigned i = 0; i < g->cfg.nlimits; i++)
        memref_drop(g->memref[i]);
    memset(g->admin_token, 0, sizeof(g->admin_token));
    free(g);
}

/* The '?' that begins the query of the URL 'u' ('len' bytes), or NULL:
 * the first after the user info, which ends at the last '@' and may hold
 * a '?' (a unix:// URL has none). */
static const char *query_of(const char *u, size_t len)
{
    const char *from = u, *end = u + len;
    if (len < 7 || memcmp(u, "unix://", 7) != 0)
        for (const char *q = u; q < end; q++)
            if (*q == '@')
                from = q + 1;
    return memchr(from, '?', (size_t)(end - from));
}

/* 1 when the URL 'u' ('len' bytes) sets the query parameter 'name'. */
static int has_param(const char *u, size_t len, const char *name)
{
    size_t nl = strlen(name);
    const char *end = u + len;
    for (const char *v = query_of(u, len); v;
         v = memchr(v + 1, '&', (size_t)(end - v - 1)))
        if ((size_t)(end - v - 1) > nl && !strncmp(v + 1, name, nl) &&
            v[1 + nl] == '=')
            return 1;
    return 0;
}

/* Copy 'url' to 'out' with 'param' (NAME=VALUE) added to it, or to each
 * node URL of a "shards=" or "cluster=" list (separated by ','), unless
 * that URL sets 'name' itself. Any other URL is one URL (a "sentinel://"
 * one has ',' between its sentinels, a password may hold one). 0, or -1
 * when 'out' is too small. */
static int add_param(char *out, size_t outlen, const char *url,
                     const char *name, const char *param)
{
    const char *p = url;
    size_t o = 0;
    if (!strncmp(url, "shards=", 7))
        p += 7;
    else if (!strncmp(url, "cluster=", 8))
        p += 8;
    int list = p != url; /* else one URL: a ',' may be in its password */
    int n = snprintf(out, outlen, "%.*s", (int)(p - url), url);
    while (n >= 0 && (size_t)n < outlen - o) {
        o += (size_t)n;
        if (!*p)
            return 0;
        size_t len = list ? strcspn(p, ",") : strlen(p);
        const char *sep = query_of(p, len) ? "&" : "?", *add = param;
        if (has_param(p, len, name))
            sep = add = ""; /* this URL's own; the next ones still get it */
        n = snprintf(out + o, outlen - o, "%.*s%s%s%s", (int)len, p, sep, add,
                     p[len] ? "," : "");
        p += len + (p[len] ? 1 : 0);
    }
    return -1;
}

/* The URL the store opens: [store] prefix becomes each URL's prefix
 * parameter unless the URL sets one itself; and the same with lazy=1, to
 * start while the store is unreachable. */
static int store_urls(fg__gen *g, char *err, size_t errlen)
{
    const fg__serve_config *c = &g->cfg;
    char enc[3 * sizeof(c->prefix)], param[sizeof(enc) + 8];
    size_t o = 0;
    for (const char *p = c->prefix; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (isalnum(ch) || strchr("-_.~:", ch))
            enc[o++] = (char)ch;
        else
            o += (size_t)sprintf(enc + o, "%%%02X", ch);
    }
    enc[o] = '\0';
    snprintf(param, sizeof(param), "prefix=%s", enc);
    if (add_param(g->url, sizeof(g->url), c->store_url, "prefix", param) ||
        add_param(g->url_lazy, sizeof(g->url_lazy), g->url, "lazy", "lazy=1")) {
        snprintf(err, errlen, "[store] url too long");
        return -1;
    }
    return 0;
}

/* Read the admin token of 'c' into 'g': the file's first line, without
 * its line end. Refused (never quoting the token): a file that cannot be
 * read, that others may read (the token would not be a secret), an empty
 * token, or one with bytes an Authorization header cannot carry. */
static int read_token(fg__gen *g, const char *where, char *err, size_t errlen)
{
    const fg__serve_config *c = &g->cfg;
    const char *path = c->admin_token_file;
    int line = c->admin_token_line;
    /* Not blocking: a FIFO with no writer would hold a reload. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s:%d: admin_token_file %s: %s", where, line,
                 path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const char *why = NULL;
    char buf[sizeof(g->admin_token) + 2];
    ssize_t n = 0;
    if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_mode & (S_IROTH | S_IWOTH))
        why = "readable or writable by others (chmod 600 or 640 it)";
    else if (st.st_mode & S_IWGRP)
        why = "writable by its group (chmod 600 or 640 it)";
    else if ((n = read(fd, buf, sizeof(buf) - 1)) < 0)
        why = strerror(errno);
    close(fd);
    if (!why) {
        /* The first line of the n bytes read: a NUL in it is refused
         * below, not taken for its end. */
        size_t len = 0;
        while (len < (size_t)n && buf[len] != '\r' && buf[len] != '\n')
            len++;
        if (len == 0)
            why = "the token is empty";
        else if (len >= sizeof(g->admin_token))
            why = "the token is longer than 255 bytes";
        for (size_t i = 0; !why && i < len; i++)
            if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f)
                why = "the token must be printable ASCII, no spaces";
        if (!why) {
            memcpy(g->admin_token, buf, len);
            g->admin_token[len] = '\0';
            g->admin_token_len = len;
            if (len < 16)
                fg__log("admin_token_short",
                        "level=warning bytes=%zu msg=\"a token this short "
                        "can be guessed: use 16 random bytes or more, such "
                        "as openssl rand -hex 16\"",
                        len);
        }
    }
    /* The bytes read are no one else's business, in any case. */
    memset(buf, 0, sizeof(buf));
    if (why) {
        snprintf(err, errlen, "%s:%d: admin_token_file %s: %s", where, line,
                 path, why);
        return -1;
    }
    return 0;
}

/* A store URL that does not open: said of --store, or of the file's line. */
static void bad_url(const fg__server *srv, const fg__serve_config *c,
                    const char *why, char *err, size_t errlen)
{
    const char *where = srv->config_path ? srv->config_path : "config";
    if (srv->cli_store)
        snprintf(err, errlen, "--store: %s", why);
    else if (c->url_line)
        snprintf(err, errlen, "%s:%d: [store] url: %s", where, c->url_line,
                 why);
    else
        snprintf(err, errlen, "%s: [store] url: %s", where, why);
}

void fg__gen_name_metrics(fg__gen *g, const fg__gen *old)
{
    const fg__serve_config *c = &g->cfg;
    for (unsigned i = 0; i < c->nlimits; i++) {
        const char *name = c->limits[i].lim.name;
        g->slot[i] = fg__metric_slot(name);
        /* Said once, not again at each reload that keeps the limit. */
        if (g->slot[i] < 0 && !has_limit(old, name))
            fg__log("metrics_full",
                    "level=warning limit=%s cap=%d warning=\"no metrics for "
                    "this limit: %d limit names have had them since start\"",
                    name, FG_METRIC_SLOTS, FG_METRIC_SLOTS);
    }
}

fg__gen *fg__gen_load(fg__server *srv, char *err, size_t errlen)
{
    srv->store_unopened = 0;
    fg__gen *g = calloc(1, sizeof(*g));
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->refs = 1;
    fg__serve_config *c = &g->cfg;
    fg__config_defaults(c);
    if (srv->config_path && fg__config_load(srv->config_path, srv->gen != NULL,
                                            c, err, errlen) != 0)
        goto fail;
    if (srv->cli_listen) {
        if (strlen(srv->cli_listen) >= sizeof(c->listen)) {
            snprintf(err, errlen, "--listen: address too long");
            goto fail;
        }
        char why[200];
        if (fg__listen_check(srv->cli_listen, why, sizeof(why))) {
            snprintf(err, errlen, "--listen %s: %s", srv->cli_listen, why);
            goto fail;
        }
        strcpy(c->listen, srv->cli_listen);
    }
    if (srv->cli_store) {
        if (strlen(srv->cli_store) >= sizeof(c->store_url)) {
            snprintf(err, errlen, "--store: URL too long");
            goto fail;
        }
        strcpy(c->store_url, srv->cli_store);
    }
    if (c->id[0] == '\0') {
        char host[48];
        if (gethostname(host, sizeof(host)) != 0)
            strcpy(host, "floodgate");
        host[sizeof(host) - 1] = '\0';
        snprintf(c->id, sizeof(c->id), "%s", host);
    }
    const char *cfg_name = srv->config_path ? srv->config_path : "config";
    if (c->admin_listen[0] && !strcmp(c->admin_listen, c->listen) &&
        !fg__listen_port_zero(c->listen)) {
        snprintf(err, errlen,
                 "%s:%d: admin_listen must differ from listen (the admin "
                 "routes are served only there)",
                 cfg_name, c->admin_line);
        goto fail;
    }
    if (c->admin_token_file[0] && read_token(g, cfg_name, err, errlen))
        goto fail;
    g->is_memory = is_memory_url(c->store_url);
    /* Here, not in the parser: --store may replace the file's store. */
    for (unsigned i = 0; g->is_memory && i < c->nlimits; i++) {
        if (c->limits[i].lim.durable) {
            snprintf(err, errlen,
                     "%s:%d: [limit %s]: durable = replica needs a Redis "
                     "store (the memory store has no replica)",
                     cfg_name, c->limits[i].durable_line,
                     c->limits[i].lim.name);
            goto fail;
        }
    }
    if (!g->is_memory) {
        if (store_urls(g, err, errlen))
            goto fail;
        /* A refusal is told of the URL as written when that is refused
         * too, without the prefix= and lazy= serve adds. */
        char why[200], as_written[200];
        if (fg_store_url_check(g->url, why, sizeof(why)) != FG_OK) {
            int own = fg_store_url_check(c->store_url, as_written,
                                         sizeof(as_written)) != FG_OK;
            bad_url(srv, c, own ? as_written : why, err, errlen);
            goto fail;
        }
    }
    const char *where = srv->config_path ? srv->config_path : "config";
    if (g->is_memory) {
        if (!srv->mem) {
            char why[200];
            srv->mem = fg_store_open(c->store_url, why, sizeof(why));
            if (!srv->mem) {
                bad_url(srv, c, why, err, errlen);
                goto fail;
            }
            snprintf(srv->mem_url, sizeof(srv->mem_url), "%s", c->store_url);
        }
        g->mem = srv->mem;
        const fg__gen *old = srv->gen && srv->gen->is_memory ? srv->gen : NULL;
        for (unsigned i = 0; i < c->nlimits; i++) {
            for (unsigned j = 0; old && j < old->cfg.nlimits; j++) {
                if (old->memref[j] &&
                    same_limit(&old->cfg.limits[j], &c->limits[i])) {
                    g->memref[i] = old->memref[j];
                    __atomic_add_fetch(&g->memref[i]->refs, 1,
                                       __ATOMIC_ACQ_REL);
                    break;
                }
            }
            if (!g->memref[i]) {
                char why[200];
                fg__memref *m = calloc(1, sizeof(*m));
                if (!m) {
                    snprintf(err, errlen, "out of memory");
                    goto fail;
                }
                m->refs = 1;
                m->l = fg_limiter_new(srv->mem, &c->limits[i].lim, why,
                                      sizeof(why));
                if (!m->l) {
                    free(m);
                    snprintf(err, errlen, "%s:%d: [limit %s]: rate: %s", where,
                             c->limits[i].rate_line, c->limits[i].lim.name,
                             why);
                    goto fail;
                }
                if (c->limits[i].local_keys)
                    fg_limiter_set_local_keys(m->l, c->limits[i].local_keys);
                g->memref[i] = m;
            }
            g->memlim[i] = g->memref[i]->l;
        }
    } else {
        /* Open the store once on the main loop to refuse a bad URL or a
         * limit the store cannot run now, not in every worker later. */
        char why[200];
        fg_store *st =
            fg_store_open_async(g->url, srv->main_base, why, sizeof(why));
        if (!st) {
            /* Unreachable is not a configuration error: start (or reload)
             * and let each limit's failure policy answer until it is back.
             * A URL that does not parse is refused. */
            char lazy_why[200];
            st = fg_store_open_async(g->url_lazy, srv->main_base, lazy_why,
                                     sizeof(lazy_why));
            if (!st) {
                bad_url(srv, c, why, err, errlen);
                /* Even a lazy open resolves the host: one that did not
                 * resolve (the library's words) may later. Anything else
                 * here (a Sentinel that monitors no such master, a node
                 * that is not a Cluster's) is the configuration's. */
                srv->store_unopened =
                    strstr(lazy_why, "cannot resolve the host") != NULL;
                goto fail;
            }
            char v[300];
            g->keep_store = srv->gen && !srv->gen->is_memory &&
                            !strcmp(srv->gen->url, g->url);
            fg__log("store_unreachable", "reason=%s%s",
                    fg__log_value(why, v, sizeof(v)),
                    g->keep_store ? " store=kept msg=\"the same URL: each "
                                    "worker keeps the store it runs\""
                                  : "");
        }
        /* A setting of Redis that lets limits over-admit or fail (an
         * evicting maxmemory-policy, a refused EVALSHA, an ACL without
         * the prefix's keys; on Cluster a seed passed over): said at
         * start and on each reload. */
        const char *warn = fg_store_warning(st);
        if (warn) {
            char v[1500]; /* a warning (700 bytes) escaped */
            fg__log("store_warning", "level=warning reason=%s",
                    fg__log_value(warn, v, sizeof(v)));
        }
        /* Each limit as the workers will build it (their local fallback
         * shared among them): a limit a worker would refuse is refused
         * here, at its rate's line, and the running ones stay. */
        unsigned nworkers = srv->nworkers ? srv->nworkers : c->workers;
        for (unsigned i = 0; i < c->nlimits; i++) {
            fg_limit lim =
                fg__fallback_worker_limit(&c->limits[i].lim, nworkers);
            fg_limiter *l = fg_limiter_new(st, &lim, why, sizeof(why));
            if (!l) {
                /* Say when it is the local fallback's share that fails,
                 * whose numbers are not the file's. */
                lim.on_failure = FG_FAIL_OPEN;
                fg_limiter *plain = fg_limiter_new(st, &lim, NULL, 0);
                snprintf(err, errlen, "%s:%d: [limit %s]: rate: %s%s", where,
                         c->limits[i].rate_line, c->limits[i].lim.name,
                         plain ? "its share under on_failure = local (the "
                                 "rate and burst / fallback_servers x "
                                 "workers): "
                               : "",
                         why);
                fg_limiter_free(plain);
                fg_store_close(st);
                goto fail;
            }
            fg_limiter_free(l);
        }
        /* A worker's connections: one a node (the masters known now, on
         * Redis Cluster: its 65 nodes are places for those to come), and
         * for Sentinel or Cluster one for each address of the URL (a
         * Sentinel or a seed it may ask). A shard is a node once. */
        g->store_conns = 0;
        for (unsigned i = 0; i < fg_store_nodes(st); i++)
            g->store_conns += fg_store_node_name(st, i) != NULL;
        if (!strncmp(c->store_url, "sentinel://", 11) ||
            !strncmp(c->store_url, "cluster=", 8)) {
            g->store_conns++;
            for (const char *p = c->store_url; *p; p++)
                g->store_conns += *p == ',';
        }
        /* The same store as now: the workers hold what it has grown to (a
         * Cluster's masters learned since; a store kept while unreachable,
         * whose probe here knows only the seeds). */
        if (srv->gen && !srv->gen->is_memory &&
            !strcmp(srv->gen->url, g->url) &&
            srv->gen->store_conns > g->store_conns)
            g->store_conns = srv->gen->store_conns;
        fg_store_close(st);
    }
    return g;
fail:
    fg__gen_unref(g);
    return NULL;
}

fg__wgen *fg__wgen_new(fg__worker *w, fg__gen *g, char *err, size_t errlen)
{
    fg__wgen *wg = calloc(1, sizeof(*wg));
    if (!wg) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    fg__gen_ref(g);
    wg->g = g;
    if (g->is_memory) {
        memcpy(wg->lim, g->memlim, sizeof(wg->lim));
        return wg;
    }
    fg__wgen *cur = w->cur;
    if (g->keep_store && cur && cur->store && !strcmp(cur->g->url, g->url)) {
        wg->store = cur->store;
        wg->store_refs = cur->store_refs;
        ++*wg->store_refs;
        memcpy(wg->master, cur->master, sizeof(wg->master));
    } else {
        wg->store_refs = malloc(sizeof(*wg->store_refs));
        if (!wg->store_refs) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        *wg->store_refs = 1;
        /* Lazy: the main thread probed already; a worker never blocks. */
        wg->store = fg_store_open_async(g->url_lazy, w->base, err, errlen);
        if (!wg->store)
            goto fail;
        /* The servers it starts on (a name's address; Sentinel's master
         * once known): a move within the first sweep is said too. */
        for (unsigned i = 0; i < FG_NODE_SLOTS; i++) {
            const char *a = fg_store_node_addr(wg->store, i);
            if (a && strlen(a) < sizeof(wg->master[i]))
                strcpy(wg->master[i], a);
        }
    }
    for (unsigned i = 0; i < FG_NODE_SLOTS; i++)
        wg->node_slot[i] = -2; /* named on first use (a cluster learns) */
    for (unsigned i = 0; i < g->cfg.nlimits; i++) {
        /* The local fallback runs in each worker: share the process's part
         * among them so the process as a whole stays within it. */
        fg_limit lim =
            fg__fallback_worker_limit(&g->cfg.limits[i].lim, w->srv->nworkers);
        wg->lim[i] = fg_limiter_new(wg->store, &lim, err, errlen);
        if (!wg->lim[i])
            goto fail;
        if (g->cfg.limits[i].local_keys)
            fg_limiter_set_local_keys(wg->lim[i], g->cfg.limits[i].local_keys);
        fg_limiter_set_cache(wg->lim[i], w->cache);
    }
    return wg;
fail:
    fg__wgen_free(wg);
    return NULL;
}

unsigned fg__wgen_sync(fg__wgen *wg, int *failed)
{
    unsigned pending = 0;
    int f = 0;
    for (unsigned i = 0; !wg->g->is_memory && i < wg->g->cfg.nlimits; i++) {
        if (wg->lim[i]) {
            int rc = fg_limiter_sync(wg->lim[i]);
            if (rc != FG_OK) { /* until a flush finds nothing left */
                wg->flush_failed[i] = 1;
                if (!wg->flush_rc)
                    wg->flush_rc = rc;
            }
            f |= rc != FG_OK;
            pending += fg_limiter_pending(wg->lim[i]);
        }
    }
    if (failed)
        *failed = f;
    return pending;
}

unsigned fg__wgen_pending(const fg__wgen *wg)
{
    unsigned pending = 0;
    for (unsigned i = 0; !wg->g->is_memory && i < wg->g->cfg.nlimits; i++)
        if (wg->lim[i])
            pending += fg_limiter_pending(wg->lim[i]);
    return pending;
}

void fg__wgen_free(fg__wgen *wg)
{
    if (!wg)
        return;
    if (!wg->g->is_memory) {
        for (unsigned i = 0; i < wg->g->cfg.nlimits; i++)
            if (wg->lim[i])
                fg_limiter_free(wg->lim[i]);
        if (wg->store_refs && --*wg->store_refs == 0) {
            if (wg->store)
                fg_store_close(wg->store);
            free(wg->store_refs);
        }
    }
    fg__gen_unref(wg->g);
    free(wg);
}
