/* routes.c -- the HTTP routes of `floodgate serve`.
 *
 * A request names one or more limits, each with its own key source. They
 * go to the library as one ordered set (fg_check_set, or on a Redis store
 * fg_check_set_async with the worker's blocked-key cache): the first
 * refusal stops the set and the limits before it are refunded. This file
 * maps HTTP to that call and its result back to HTTP. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "headers.h"
#include "keys.h"
#include "log.h"
#include "server.h"

enum { ROUTE_CHECK, ROUTE_AUTH, ROUTE_BOOKINGS };

#define ARENA    (FG_SERVE_MAX_CHAIN * (FG_MAX_KEY + 1) + 64)
#define POOL_MAX 256

struct fg__ctx {
    fg_set_req set; /* the library's request; 'set.data' is this */
    fg__ctx *next_free;
    fg__worker *w;
    fg__wgen *wg;
    fg__hreq *req;
    int route;
    unsigned n;
    unsigned idx[FG_SERVE_MAX_CHAIN];
    fg_set_item items[FG_SERVE_MAX_CHAIN];
    uint64_t cost;
    uint64_t sent_us;
    size_t used;
    char arena[ARENA];
};

/* Send 'body' with the headers every answer carries. An answer not yet
 * written keeps its connection "unanswered", so a drain never cuts it
 * short. */
static void reply(fg__worker *w, fg__hreq *req, int status, const char *ctype,
                  const char *body, size_t len)
{
    fg__http_add_header(req, "X-Served-By", w->cur->g->cfg.id);
    fg__metrics_http(w->m, status);
    fg__http_reply(req, status, ctype, body, len);
}

static void reply_error(fg__worker *w, fg__hreq *req, int status,
                        const char *msg)
{
    char mem[512];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_error_json(&b, msg, fg__http_reason(status));
    reply(w, req, status, "application/json", b.p, b.len);
}

static fg__ctx *ctx_get(fg__worker *w)
{
    fg__ctx *c = w->pool;
    if (c) {
        w->pool = c->next_free;
        w->npool--;
    } else {
        c = malloc(sizeof(*c));
        if (!c)
            return NULL;
    }
    c->w = w;
    c->wg = w->cur;
    c->wg->inflight++;
    if (++w->inflight > w->inflight_peak)
        w->inflight_peak = w->inflight;
    c->n = 0;
    c->used = 0;
    c->cost = 1;
    return c;
}

static void ctx_put(fg__ctx *c)
{
    fg__worker *w = c->w;
    fg__wgen *wg = c->wg;
    /* Keep enough contexts for the usual concurrency, not for the peak:
     * each holds room for its keys. */
    if (w->npool < POOL_MAX) {
        c->next_free = w->pool;
        w->pool = c;
        w->npool++;
    } else {
        free(c);
    }
    wg->inflight--;
    fg__worker_request_done(w, wg);
}

unsigned fg__routes_trim_pool(fg__worker *w, unsigned keep)
{
    unsigned freed = 0;
    while (w->npool > keep) {
        fg__ctx *c = w->pool;
        w->pool = c->next_free;
        w->npool--;
        free(c);
        freed++;
    }
    return freed;
}

void fg__routes_free_pool(fg__worker *w)
{
    while (w->pool) {
        fg__ctx *c = w->pool;
        w->pool = c->next_free;
        free(c);
    }
    w->npool = 0;
}

static void count_decision(fg__ctx *c, unsigned k)
{
    int slot = c->wg->g->slot[c->idx[k]];
    const fg_set_result *r = &c->set.result;
    if (slot < 0 || r->rc[k] == FG_ECOST || r->rc[k] == FG_EKEY)
        return;
    fg__lim_metrics *lm = &c->w->m->lim[slot];
    const fg_decision *d = &r->d[k];
    FG_INC(lm->decisions[d->allowed ? 1 : 0]
                        [d->source < FG__SOURCES ? d->source : 0]);
    if (d->shadowed)
        FG_INC(lm->shadow_refusals);
    /* The breaker gauge, once set, stays until no node's breaker of the
     * limit is open: a sync or lease limit asks the store in the
     * background, and on shards another node's keys may still fail. Read
     * only while it is set: nothing is spent on the common path. */
    int learnt = d->source == FG_SOURCE_SYNC || d->source == FG_SOURCE_LEASE ||
                 (d->source == FG_SOURCE_STORE && r->rc[k] == FG_OK);
    if (learnt && FG_GET(lm->breaker_open)) {
        const char *b = fg_limiter_breaker(c->wg->lim[c->idx[k]]);
        FG_SET(lm->breaker_open, b && !strcmp(b, "open"));
    }
    /* Decided without asking the store for this request. */
    if (d->source == FG_SOURCE_SYNC || d->source == FG_SOURCE_LEASE ||
        d->source == FG_SOURCE_CACHE)
        return;
    /* A round trip sent (a failure met at once sent none). */
    if (r->waited & (1u << k))
        FG_INC(lm->store_calls);
    if (r->rc[k] < 0 && r->rc[k] != FG_EBREAKER)
        FG_INC(lm->store_errors);
    if (r->rc[k] == FG_EBREAKER)
        FG_SET(lm->breaker_open, 1);
}

/* The metric slot of the store node that holds 'key' (-1: none), named
 * on first use: a cluster learns its masters as it runs. */
static int node_slot(fg__wgen *wg, const char *key, size_t keylen)
{
    unsigned i = fg_store_node_of(wg->store, key, keylen);
    if (i >= FG_NODE_SLOTS)
        return -1;
    if (wg->node_slot[i] == -2) {
        const char *name = fg_store_node_name(wg->store, i);
        if (!name)
            return -1;
        wg->node_slot[i] = fg__metric_node_slot(name);
    }
    return wg->node_slot[i];
}

/* Log a refusal that shadow mode allowed: one line each, up to
 * SHADOW_LOG_PER_S a second per worker (a flood of would-be refusals must
 * not become a flood of lines); the next line says how many it left out
 * (or the sweep's, fg__routes_flush_suppressed),
 * and floodgate_shadow_refusals_total counts every one. */
#define SHADOW_LOG_PER_S 20
static void log_shadow(fg__ctx *c, unsigned k, uint64_t now)
{
    fg__worker *w = c->w;
    if (now >= w->shadow_log_reset_us) {
        w->shadow_log_reset_us = now + 1000000;
        w->shadow_logged = 0;
    }
    if (w->shadow_logged >= SHADOW_LOG_PER_S) {
        w->shadow_unlogged++;
        return;
    }
    w->shadow_logged++;
    const fg_set_item *it = &c->items[k];
    const fg_decision *d = &c->set.result.d[k];
    char key[FG_MAX_KEY + 1], v[2 * FG_MAX_KEY + 8];
    size_t n = it->keylen < FG_MAX_KEY ? it->keylen : FG_MAX_KEY;
    memcpy(key, it->key, n);
    key[n] = '\0';
    fg__log("shadow_refusal",
            "worker=%u limit=%s key=%s remaining=%" PRIu64 " reset_ms=%" PRIu64
            " source=%s suppressed=%" PRIu64,
            w->index, c->wg->g->cfg.limits[c->idx[k]].lim.name,
            fg__log_value(key, v, sizeof(v)), d->remaining, d->reset_ms,
            fg_source_name(d->source), w->shadow_unlogged);
    w->shadow_unlogged = 0;
}

void fg__routes_flush_suppressed(fg__worker *w, uint64_t now)
{
    /* Store errors after the last store_error line that no store_error
     * line said for a second after one could (the errors stopped, or no
     * request of a failing limit came): while they go on, the next error
     * says them with its reason, and the sweep must not take its turn. */
    if (w->errors_unlogged &&
        (now == UINT64_MAX || now >= w->next_err_log_us + 1000000)) {
        fg__log("store_error_suppressed", "worker=%u errors=%" PRIu64, w->index,
                w->errors_unlogged);
        w->errors_unlogged = 0;
        /* (The errors it says are over: the next one may say itself.) */
    }
    if (!w->shadow_unlogged || now < w->shadow_log_reset_us)
        return;
    fg__log("shadow_refusal_suppressed", "worker=%u suppressed=%" PRIu64,
            w->index, w->shadow_unlogged);
    w->shadow_unlogged = 0;
}

/* A decision of the limit and node that failed last ('store_failing',
 * 'failing_limit'): once that limiter's store calls to the node succeed
 * again (a sync or lease limit's view or units may outlive the failure),
 * the store has recovered. Or to the node that holds the failed key now:
 * on Cluster, the master its slot has since a failover (the one that
 * failed may never answer again). Not another limit's: its local decisions
 * say nothing of the store, and its commands may work where the failing
 * limit's do not (a server without EVALSHA runs a fixed window's). */
static void note_recovery(fg__ctx *c, unsigned k)
{
    fg__worker *w = c->w;
    const char *name = c->wg->g->cfg.limits[c->idx[k]].lim.name;
    fg_store *st = c->wg->store;
    unsigned nd = fg_store_node_of(st, c->items[k].key, c->items[k].keylen);
    if ((nd + 1 != (unsigned)w->store_failing &&
         nd != fg_store_node_of(st, w->failing_key, w->failing_keylen)) ||
        strcmp(name, w->failing_limit) != 0 ||
        fg_limiter_node_failing(c->wg->lim[c->idx[k]], nd))
        return;
    w->store_failing = 0;
    const char *nname = fg_store_node_name(st, nd);
    char nn[2 * 300 + 8];
    fg__log("store_recovered", "worker=%u limit=%s node=%s", w->index, name,
            fg__log_value(nname && *nname ? nname : "none", nn, sizeof nn));
}

/* The metrics and logs of a set's answers. */
static void account(fg__ctx *c)
{
    static int unsupported_logged; /* atomic: once per process */
    const fg_set_result *r = &c->set.result;
    const fg__gen *g = c->wg->g;
    uint64_t now = fg_mono_us();
    int asked_store = 0, nodes[FG_SERVE_MAX_CHAIN], nnodes = 0;
    for (unsigned k = 0; k < r->n; k++) {
        if (!(r->asked & (1u << k)))
            continue;
        count_decision(c, k);
        if (r->d[k].shadowed)
            log_shadow(c, k, now);
        int rc = r->rc[k];
        int src = r->d[k].source;
        if (rc == FG_OK && c->w->store_failing &&
            (src == FG_SOURCE_STORE || src == FG_SOURCE_SYNC ||
             src == FG_SOURCE_LEASE))
            note_recovery(c, k);
        /* Only the requests that waited for the store's round trip count
         * in its node's calls and latency: not those a breaker, the cache,
         * a sync view or a lease decided here, nor a failure known at
         * once (which counts as an error). */
        if (rc == FG_EBREAKER || rc == FG_ECOST || rc == FG_EKEY ||
            src == FG_SOURCE_CACHE || src == FG_SOURCE_SYNC ||
            src == FG_SOURCE_LEASE)
            continue;
        int waited = (r->waited >> k) & 1;
        asked_store |= waited;
        if (!g->is_memory) {
            int ns = node_slot(c->wg, c->items[k].key, c->items[k].keylen);
            if (ns >= 0 && waited)
                FG_INC(c->w->m->node[ns].calls);
            if (ns >= 0 && rc < 0)
                FG_INC(c->w->m->node[ns].errors);
            int seen = !waited || ns < 0;
            for (int i = 0; i < nnodes; i++)
                seen |= nodes[i] == ns;
            if (!seen)
                nodes[nnodes++] = ns;
        }
        fg__worker *w = c->w;
        if (rc < 0)
            w->errors_unlogged++;
        if (rc < 0 && now >= w->next_err_log_us) {
            /* At most one line a second per worker: a dead store must not
             * turn into a flood of log lines. 'errors' counts this one and
             * those since the last line, of every limit. A value not
             * floodgate's (FG_ERANGE: another type at the key, a count
             * Redis cannot add to) is one key's, named. */
            w->next_err_log_us = now + 1000000;
            char key[FG_MAX_KEY + 1], v[2 * FG_MAX_KEY + 8];
            size_t kl = c->items[k].keylen > FG_MAX_KEY ? FG_MAX_KEY
                                                        : c->items[k].keylen;
            memcpy(key, c->items[k].key, kl);
            key[kl] = '\0';
            /* The node that failed, named, and what it said (shards: the
             * other nodes may be fine). */
            unsigned nd = fg_store_node_of(c->wg->store, key, kl);
            const char *nname = fg_store_node_name(c->wg->store, nd);
            const char *nerr = fg_store_node_error(c->wg->store, nd);
            char ne[320], nn[2 * 300 + 8];
            fg__log(
                "store_error",
                "worker=%u limit=%s error=\"%s\" decided=%s errors=%llu "
                "node=%s%s%s%s%s",
                w->index, g->cfg.limits[c->idx[k]].lim.name, fg_strerror(rc),
                fg_source_name(r->d[k].source),
                (unsigned long long)w->errors_unlogged,
                fg__log_value(nname && *nname ? nname : "none", nn, sizeof nn),
                nerr && *nerr ? " detail=" : "",
                nerr && *nerr ? fg__log_value(nerr, ne, sizeof ne) : "",
                rc == FG_ERANGE ? " note=\"the value stored for this "
                                  "key is not floodgate's\" key="
                                : "",
                rc == FG_ERANGE ? fg__log_value(key, v, sizeof v) : "");
            w->errors_unlogged = 0;
            if (rc != FG_ERANGE) {
                w->store_failing = nd + 1;
                snprintf(w->failing_limit, sizeof w->failing_limit, "%s",
                         g->cfg.limits[c->idx[k]].lim.name);
                memcpy(w->failing_key, key, kl);
                w->failing_keylen = kl;
            }
        }
    }
    if (asked_store && !g->is_memory) {
        fg__metrics_latency(c->w->m, now - c->sent_us);
        for (int i = 0; i < nnodes; i++)
            fg__metrics_node_latency(c->w->m, nodes[i], now - c->sent_us);
    }
    /* A refund that did not land: naive_get_set cannot take one (said once
     * per process); any other failed with the store (said as its errors
     * are, at most once a second per worker). */
    for (unsigned k = 0; r->unrefunded && k < r->n; k++) {
        if (!(r->unrefunded & (1u << k)))
            continue;
        const fg_limit *lim = &g->cfg.limits[c->idx[k]].lim;
        if (lim->algorithm == FG_NAIVE_GET_SET) {
            if (!__atomic_exchange_n(&unsupported_logged, 1, __ATOMIC_ACQ_REL))
                fg__log("refund_unsupported",
                        "limit=%s reason=\"%s\" effect=\"a limit before a "
                        "refusing one keeps the request counted\"",
                        lim->name, fg_strerror(FG_ENOTSUP));
        } else if (now >= c->w->next_err_log_us) {
            c->w->next_err_log_us = now + 1000000;
            fg__log("refund_failed",
                    "worker=%u limit=%s effect=\"the store could not take "
                    "the give-back: a limit before a refusing one keeps the "
                    "request counted\"",
                    c->w->index, lim->name);
        }
    }
}

/* Answer the request from its set's result: the deciding limit's decision,
 * every limit in RateLimit-Policy, the asked ones in RateLimit. */
static void answer(fg__ctx *c)
{
    fg__worker *w = c->w;
    const fg__gen *g = c->wg->g;
    const fg_set_result *r = &c->set.result;
    unsigned pick = r->decided;
    const fg_decision *dp = &r->d[pick];
    account(c);
    if (r->error) {
        char msg[160];
        const char *name = g->cfg.limits[c->idx[pick]].lim.name;
        int bad = r->error == FG_ECOST || r->error == FG_EKEY;
        if (r->error == FG_ECOST)
            snprintf(msg, sizeof(msg),
                     "limit %s: cost out of range: at most %llu (the limit, "
                     "or a token bucket's burst)",
                     name, (unsigned long long)r->d[pick].limit);
        else if (bad)
            snprintf(msg, sizeof(msg), "limit %s: %s", name,
                     fg_strerror(r->error));
        else
            snprintf(msg, sizeof(msg), "limit %s: check not submitted: %s",
                     name, fg_strerror(r->error));
        reply_error(w, c->req, bad ? 400 : 503, msg);
        ctx_put(c);
        return;
    }
    int status = 200;
    if (!dp->allowed)
        status = dp->source == FG_SOURCE_FAIL_CLOSED ? 503
                 : c->route == ROUTE_AUTH            ? 403
                                                     : 429;
    char pol[FG_SERVE_MAX_CHAIN * 96], rl[FG_SERVE_MAX_CHAIN * 96];
    fg__sbuf bp, br;
    fg__sbuf_init(&bp, pol, sizeof(pol));
    fg__sbuf_init(&br, rl, sizeof(rl));
    for (unsigned k = 0; k < c->n; k++) {
        const fg_limit *lim = &g->cfg.limits[c->idx[k]].lim;
        /* q is the capacity, as the decision's limit: a token bucket's
         * burst, and under on_failure = local the share in force. */
        uint64_t q = lim->algorithm == FG_TOKEN_BUCKET && lim->burst
                         ? lim->burst
                         : lim->limit;
        if ((r->asked & (1u << k)) && r->d[k].limit)
            q = r->d[k].limit;
        uint64_t w = fg__window_s(lim->period_us);
        fg__fmt_policy_item(&bp, lim->name,
                            fg__policy_quota(q, lim->period_us, w), w);
        /* A failure policy's answer knows no figure of the limit: none is
         * sent for it (the draft lets a server leave a limit out). */
        if ((r->asked & (1u << k)) && r->d[k].source != FG_SOURCE_FAIL_OPEN &&
            r->d[k].source != FG_SOURCE_FAIL_CLOSED)
            fg__fmt_ratelimit_item(&br, lim->name, &r->d[k]);
    }
    fg__http_add_header(c->req, "RateLimit-Policy", pol);
    if (br.len)
        fg__http_add_header(c->req, "RateLimit", rl);
    /* Refused, or refused because the store is down (503): when to try
     * again. */
    if (status != 200) {
        char ra[24];
        fg__sbuf bra;
        fg__sbuf_init(&bra, ra, sizeof(ra));
        fg__sbuf_u64(&bra, fg__retry_after_s(dp));
        fg__http_add_header(c->req, "Retry-After", ra);
    }
    char mem[512];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_decision_json(&b, g->cfg.limits[c->idx[pick]].lim.name, dp,
                          c->route == ROUTE_BOOKINGS);
    reply(w, c->req, status, "application/json", b.p, b.len);
    ctx_put(c);
}

static void on_set(fg_set_req *req)
{
    answer(req->data);
}

/* Ask the library: on the shared memory store at once, else on the
 * worker's loop. */
static void start(fg__ctx *c)
{
    for (unsigned k = 0; k < c->n; k++)
        c->items[k].l = c->wg->lim[c->idx[k]];
    c->sent_us = fg_mono_us();
    if (c->wg->g->is_memory) {
        fg_check_set(c->items, c->n, c->cost, &c->set.result);
        answer(c);
        return;
    }
    c->set.data = c;
    if (fg_check_set_async(&c->set, c->items, c->n, c->cost, on_set) != FG_OK) {
        reply_error(c->w, c->req, 503, "limits could not be checked");
        ctx_put(c);
    }
}

/* Every X-Forwarded-For line, joined with commas in order (a proxy such as
 * HAProxy adds a line of its own rather than appending to the client's).
 * When they do not all fit, the leftmost lines are dropped: the client is
 * found from the right. NULL when there is none. */
static const char *joined_xff(const fg__hreq *r, char *buf, size_t len)
{
    const char *v[16];
    int n = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->name[i], "X-Forwarded-For") != 0)
            continue;
        if (n == 16) {
            memmove(v, v + 1, sizeof(v) - sizeof(v[0]));
            n--;
        }
        v[n++] = r->value[i];
    }
    if (n == 0)
        return NULL;
    if (n == 1)
        return v[0];
    int first = n;
    size_t total = 0;
    while (first > 0 && total + strlen(v[first - 1]) + 1 < len)
        total += strlen(v[--first]) + 1;
    if (first == n)
        return v[n - 1]; /* the last line alone is too long */
    size_t o = 0;
    for (int i = first; i < n; i++) {
        size_t l = strlen(v[i]);
        if (o)
            buf[o++] = ',';
        memcpy(buf + o, v[i], l);
        o += l;
    }
    buf[o] = '\0';
    return buf;
}

/* Copy the key of limit 'k' from its source into the context. NULL, or a
 * one-line reason for a 400. */
static const char *extract_key(fg__ctx *c, unsigned k, const char *query,
                               char *why, size_t whylen)
{
    const fg__serve_config *cfg = &c->wg->g->cfg;
    const fg__keysrc *src = &cfg->limits[c->idx[k]].key;
    char *dst = c->arena + c->used;
    size_t room = sizeof(c->arena) - c->used;
    const char *key = NULL;
    size_t len = 0;
    switch (src->kind) {
    case FG_KEYSRC_HEADER: {
        /* A key header is single-valued: given twice, which line is the
         * key would depend on the reader (a proxy may keep one, we
         * another), so the request is refused. */
        unsigned times = 0;
        for (unsigned i = 0; i < c->req->nheaders; i++)
            if (!strcasecmp(c->req->name[i], src->name) && times++ == 0)
                key = c->req->value[i];
        if (!key) {
            snprintf(why, whylen, "missing header %s", src->name);
            return why;
        }
        if (times > 1) {
            snprintf(why, whylen, "header %s given %u times (one key only)",
                     src->name, times);
            return why;
        }
        len = strlen(key);
        break;
    }
    case FG_KEYSRC_QUERY: {
        long n = fg__query_get(
            query, src->name, dst,
            room < cfg->max_key_bytes + 2 ? room : cfg->max_key_bytes + 2);
        if (n == -1) {
            snprintf(why, whylen, "missing query parameter %s", src->name);
            return why;
        }
        if (n == -2) {
            char tl[80];
            snprintf(why, whylen, "query parameter %s: %s", src->name,
                     fg__key_check(NULL, cfg->max_key_bytes + 1,
                                   cfg->max_key_bytes, tl, sizeof tl));
            return why;
        }
        if (n == -4) {
            snprintf(why, whylen, "query parameter %s given twice", src->name);
            return why;
        }
        if (n < 0) {
            snprintf(why, whylen, "query parameter %s: bad %%-encoding",
                     src->name);
            return why;
        }
        key = dst;
        len = (size_t)n;
        c->used += len + 1;
        break;
    }
    case FG_KEYSRC_IP: {
        const char *peer = c->req->peer;
        if (!peer[0] || room < 64) {
            snprintf(why, whylen, "client address unknown");
            return why;
        }
        char xff[2048];
        const char *bad =
            fg__client_ip(peer, joined_xff(c->req, xff, sizeof(xff)),
                          cfg->proxies, cfg->nproxies, dst, 64);
        if (bad) {
            snprintf(why, whylen, "%s", bad);
            return why;
        }
        if (src->v6_bits && fg__ip_block(dst, 64, src->v6_bits) != 0) {
            snprintf(why, whylen, "client address unknown");
            return why;
        }
        key = dst;
        len = strlen(dst);
        c->used += len + 1;
        break;
    }
    }
    char tl[80];
    const char *bad =
        fg__key_check(key, len, cfg->max_key_bytes, tl, sizeof tl);
    if (bad) {
        snprintf(why, whylen, "limit %s: %s", cfg->limits[c->idx[k]].lim.name,
                 bad);
        return why;
    }
    c->items[k].key = key;
    c->items[k].keylen = len;
    return NULL;
}

/* "a,b" from the 'limit' parameter into c->idx; 0, or an HTTP status with
 * the reason in 'why'. */
static int parse_limits(fg__ctx *c, const char *query, char *why, size_t whylen)
{
    char names[FG_SERVE_MAX_CHAIN * FG_NAME_MAX];
    long n = fg__query_get(query, "limit", names, sizeof(names));
    if (n == -1 || n == 0) {
        snprintf(why, whylen, "missing limit parameter");
        return 400;
    }
    if (n == -4) {
        snprintf(why, whylen,
                 "limit parameter given twice (name several "
                 "limits in one: limit=a,b)");
        return 400;
    }
    if (n < 0) {
        snprintf(why, whylen, "bad limit parameter");
        return 400;
    }
    if (memchr(names, '\0', (size_t)n)) {
        snprintf(why, whylen, "limit parameter contains a NUL");
        return 400;
    }
    const fg__serve_config *cfg = &c->wg->g->cfg;
    const char *p = names;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0) {
            snprintf(why, whylen, "empty name in limit parameter");
            return 400;
        }
        int i = fg__config_find(cfg, p, len);
        if (i < 0) {
            snprintf(why, whylen, "unknown limit '%.*s'",
                     (int)(len > 64 ? 64 : len), p);
            /* Echoed in JSON: printable ASCII only. */
            for (char *q = why; *q; q++)
                if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
                    *q = '?';
            return 404;
        }
        if (c->n == FG_SERVE_MAX_CHAIN) {
            snprintf(why, whylen, "at most %d limits", FG_SERVE_MAX_CHAIN);
            return 400;
        }
        /* Listed twice, a limit would count the request twice. */
        for (unsigned k = 0; k < c->n; k++)
            if (c->idx[k] == (unsigned)i) {
                snprintf(why, whylen, "limit '%s' listed twice",
                         cfg->limits[i].lim.name);
                return 400;
            }
        c->idx[c->n++] = (unsigned)i;
        if (!e)
            return 0;
        p = e + 1;
    }
}

/* The cost parameter: 0, -1 when out of range or malformed, -4 when given
 * twice. */
static int parse_cost(const char *query, uint64_t *cost)
{
    char buf[32];
    long n = fg__query_get(query, "cost", buf, sizeof(buf));
    if (n == -1) {
        *cost = 1;
        return 0;
    }
    if (n == -4)
        return -4;
    if (n <= 0)
        return -1;
    uint64_t v = 0;
    for (long i = 0; i < n; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return -1;
        if (v > (FG_MAX_COUNT - 1 - (uint64_t)(buf[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(buf[i] - '0');
    }
    if (v == 0)
        return -1;
    *cost = v;
    return 0;
}

static void handle_metrics(fg__worker *w, fg__hreq *req)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        reply_error(w, req, 503, "out of memory");
        return;
    }
    fg__metrics *ms[FG_SERVE_MAX_WORKERS];
    fg__server *srv = w->srv;
    for (unsigned i = 0; i < srv->nworkers; i++)
        ms[i] = srv->w[i].m;
    fg__metrics_info info = {
        .draining = FG_GET(srv->draining),
        .workers = srv->nworkers,
        .reloads = FG_GET(srv->reloads),
        .reload_errors = FG_GET(srv->reload_errors),
    };
    /* Each cache is read by its own worker only: this one's now, the
     * others' as their last sweep (at most a second ago) found them. */
    FG_SET(w->m->cache_entries, fg_cache_count(w->cache));
    for (unsigned i = 0; i < srv->nworkers; i++)
        info.cache_entries += FG_GET(ms[i]->cache_entries);
    if (w->cur && w->cur->g->mem) {
        info.memory = 1;
        info.memory_keys = fg_store_keys(w->cur->g->mem);
        info.memory_evicted = fg_store_evicted(w->cur->g->mem);
    }
    fg__metrics_render(f, ms, srv->nworkers, &info);
    if (fclose(f) != 0 || !text) {
        free(text);
        reply_error(w, req, 503, "out of memory");
        return;
    }
    reply(w, req, 200, "text/plain; version=0.0.4", text, len);
    free(text);
}

void fg__routes_handle(fg__hreq *req, void *arg)
{
    fg__worker *w = arg;
    if (req->error_status) {
        reply_error(w, req, req->error_status, req->error);
        return;
    }
    const char *path = req->path, *query = req->query;
    int cmd = req->method;
    if ((!strcmp(path, "/healthz") || !strcmp(path, "/metrics")) &&
        cmd != FG_HTTP_M_GET && cmd != FG_HTTP_M_HEAD) {
        fg__http_add_header(req, "Allow", "GET, HEAD");
        reply_error(w, req, 405, "method not allowed");
        return;
    }
    if (!strcmp(path, "/healthz")) {
        if (FG_GET(w->srv->draining))
            reply(w, req, 503, "text/plain", "draining\n", 9);
        else
            reply(w, req, 200, "text/plain", "ok\n", 3);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        handle_metrics(w, req);
        return;
    }
    int route;
    if (!strcmp(path, "/v1/check"))
        route = ROUTE_CHECK;
    else if (!strcmp(path, "/v1/auth"))
        route = ROUTE_AUTH;
    else if (!strcmp(path, "/bookings") && w->cur->g->cfg.demo_api)
        route = ROUTE_BOOKINGS;
    else {
        reply_error(w, req, 404, "no such route");
        return;
    }
    if ((route != ROUTE_AUTH && cmd != FG_HTTP_M_POST) ||
        (route == ROUTE_AUTH && cmd == FG_HTTP_M_OTHER)) {
        fg__http_add_header(req, "Allow",
                            route == ROUTE_AUTH ? "GET, HEAD, POST" : "POST");
        reply_error(w, req, 405, "method not allowed");
        return;
    }
    fg__ctx *c = ctx_get(w);
    if (!c) {
        reply_error(w, req, 503, "out of memory");
        return;
    }
    c->req = req;
    c->route = route;
    char why[200];
    int status = 0;
    const fg__serve_config *cfg = &c->wg->g->cfg;
    if (route == ROUTE_BOOKINGS) {
        c->n = cfg->demo_nchain;
        memcpy(c->idx, cfg->demo_chain, sizeof(c->idx));
    } else {
        status = parse_limits(c, query, why, sizeof(why));
    }
    if (!status && route == ROUTE_CHECK) {
        int bad = parse_cost(query, &c->cost);
        if (bad == -4)
            snprintf(why, sizeof(why), "cost parameter given twice");
        else if (bad)
            snprintf(why, sizeof(why),
                     "cost must be an integer from 1 to %" PRIu64,
                     (uint64_t)FG_MAX_COUNT - 1);
        if (bad)
            status = 400;
    }
    if (!status && route == ROUTE_CHECK) {
        long n = fg__query_get(query, "key", c->arena, cfg->max_key_bytes + 2);
        const char *bad = NULL;
        char tl[80];
        if (n == -1)
            bad = "missing key parameter";
        else if (n == -2)
            bad = fg__key_check(NULL, cfg->max_key_bytes + 1,
                                cfg->max_key_bytes, tl, sizeof tl);
        else if (n == -4)
            bad = "key parameter given twice";
        else if (n < 0)
            bad = "bad %-encoding in key";
        else
            bad = fg__key_check(c->arena, (size_t)n, cfg->max_key_bytes, tl,
                                sizeof tl);
        if (bad) {
            snprintf(why, sizeof(why), "%s", bad);
            status = 400;
        } else {
            for (unsigned k = 0; k < c->n; k++) {
                c->items[k].key = c->arena;
                c->items[k].keylen = (size_t)n;
            }
        }
    } else if (!status) {
        for (unsigned k = 0; k < c->n && !status; k++)
            if (extract_key(c, k, query, why, sizeof(why)))
                status = 400;
    }
    if (status) {
        reply_error(w, req, status, why);
        ctx_put(c);
        return;
    }
    start(c);
}
