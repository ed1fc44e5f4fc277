/* limiter.c -- a named limit applied through a store, with its policy:
 * input validation, the circuit breaker, and what to decide when the store
 * fails (allow, refuse, or fall back to a local in-memory limit). */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "blocked.h"
#include "breaker.h"
#include "mode.h"
#include "process.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

/* How long a fail-closed refusal asks the client to wait: the breaker's
 * cool-down, rounded up to the second that Retry-After can express. */
#define FAIL_CLOSED_RETRY_MS 1000

struct fg__policy {
    fg__check_fn inner;    /* shadow mode: the check it wraps */
    fg_cache *cache;       /* fg_limiter_set_cache */
    fg_store *local_store; /* FG_FAIL_LOCAL only */
    fg_limiter *local;
    uint64_t local_offset; /* its clock: the monotonic one plus this */
    unsigned nbreakers;
    fg__breaker breaker[]; /* one per node of the store */
};

static atomic_ullong next_limiter_id = 1;

/* The local fallback's clock: the monotonic clock, set when the limiter is
 * made to read as the wall clock, so that its fixed windows are a Redis
 * store's (which are on the wall clock) and a server does not grant its
 * share twice in one of them, while a later step of the wall clock does
 * not reach it. */
static uint64_t fallback_clock(void *ctx)
{
    return fg__mono_us(NULL) + *(const uint64_t *)ctx;
}

static int check_settled(fg_limiter *l, const char *key, size_t keylen,
                         uint64_t cost, fg_decision *out);
static int check_shadow(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, fg_decision *out);
static void store_learn(fg_limiter *l, unsigned node, int rc, fg_decision *d);

int fg__is_store_failure(int rc)
{
    switch (rc) {
    case FG_EBACKEND:
    case FG_ETIMEOUT:
    case FG_EPROTO:
    case FG_EAUTH:
    case FG_EREADONLY:
    case FG_EOOM:
    case FG_EBUSY:
        return 1;
    }
    return 0;
}

int fg_limit_check(const fg_limit *lim, char *err, size_t errlen)
{
    fg__algo_params p = {0};
    if (!lim)
        return fg__seterr(err, errlen, FG_EINVAL, "no limit given");
    if (!fg_limit_name_valid(lim->name, strnlen(lim->name, FG_NAME_MAX)))
        return fg__seterr(err, errlen, FG_EINVAL,
                          "limit name must be 1 to %d of A-Z a-z 0-9 _ - .",
                          FG_NAME_MAX - 1);
    if ((unsigned)lim->on_failure > FG_FAIL_LOCAL)
        return fg__seterr(err, errlen, FG_EINVAL, "unknown on_failure %d",
                          (int)lim->on_failure);
    if (lim->timeout_ms == 0 || lim->timeout_ms > 60000)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "timeout must be 1 to 60000 ms, not %" PRIu32
                          " (0 would fail every check of a remote store)",
                          lim->timeout_ms);
    const int flags[] = {lim->clock_client, lim->durable, lim->shadow};
    const char *flag_names[] = {"clock_client", "durable", "shadow"};
    for (int i = 0; i < 3; i++)
        if (flags[i] != 0 && flags[i] != 1)
            return fg__seterr(err, errlen, FG_EINVAL,
                              "%s must be 0 or 1, not %d", flag_names[i],
                              flags[i]);
    if (fg__algo_params_init(lim, &p, err, errlen) != FG_OK)
        return FG_EINVAL;
    return fg__mode_valid(lim, p.max_cost, err, errlen);
}

fg_limiter *fg_limiter_new(fg_store *st, const fg_limit *lim, char *err,
                           size_t errlen)
{
    if (!st || !lim) {
        fg__seterr(err, errlen, FG_EINVAL, "no store or limit given");
        return NULL;
    }
    if (fg__process_other(st->process)) {
        fg__seterr(err, errlen, FG_EPROCESS,
                   "the store was opened by another process (before fork): "
                   "open stores and limiters in each process");
        return NULL;
    }
    if (fg_limit_check(lim, err, errlen) != FG_OK)
        return NULL;
    fg_limiter *l = fg__calloc(1, sizeof(*l));
    if (!l) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    l->st = st;
    l->lim = *lim;
    if (l->lim.fallback_servers == 0)
        l->lim.fallback_servers = 1;
    if (fg__algo_params_init(&l->lim, &l->p, err, errlen) != FG_OK)
        goto fail_nostore;
    l->id = atomic_fetch_add(&next_limiter_id, 1);
    unsigned nodes = st->nodes ? st->nodes : 1;
    l->policy = fg__calloc(1, sizeof(*l->policy) + nodes * sizeof(fg__breaker));
    if (!l->policy) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        goto fail_nostore;
    }
    l->policy->nbreakers = nodes;
    l->check = check_settled;
    if (st->ops->limiter_init(st, l, &l->store_data, err, errlen) != FG_OK)
        goto fail_nostore;
    if (l->lim.mode != FG_MODE_EXACT && fg__mode_init(l, err, errlen) != FG_OK)
        goto fail;
    if (l->lim.shadow) {
        /* Wrapped whatever the store chose, so that an enforcing limit's
         * check stays as it was. */
        l->policy->inner = l->check;
        l->check = check_shadow;
    }

    if (l->lim.on_failure == FG_FAIL_LOCAL) {
        /* The fallback enforces this limit divided among the servers that
         * would otherwise share it, in this process's memory. The share is
         * rounded down, so that the servers together never exceed the
         * limit; a share of 0 refuses every check while the store is
         * unreachable (fg_limiter_local_share reports it). */
        fg_limit local = l->lim;
        local.on_failure = FG_FAIL_OPEN;
        local.durable = 0;          /* in memory: no replica to wait for */
        local.mode = FG_MODE_EXACT; /* decided in memory, at once */
        local.sync_ms = 0;
        local.lease_chunk = 0;
        local.limit = l->lim.limit / l->lim.fallback_servers;
        local.burst = l->lim.burst / l->lim.fallback_servers;
        if (local.algorithm == FG_NAIVE_GET_SET)
            local.algorithm = FG_FIXED_WINDOW;
        if (local.limit == 0 || (l->lim.burst && local.burst == 0))
            return l;
        uint64_t wall = fg__wall_us(), mono = fg__mono_us(NULL);
        l->policy->local_offset = wall > mono ? wall - mono : 0;
        fg_memory_options mo = {.max_keys = 100000,
                                .clock = fallback_clock,
                                .clock_ctx = &l->policy->local_offset};
        l->policy->local_store = fg__store_memory_open(&mo, err, errlen);
        if (!l->policy->local_store)
            goto fail;
        l->policy->local =
            fg_limiter_new(l->policy->local_store, &local, err, errlen);
        if (!l->policy->local)
            goto fail;
    }
    return l;
fail:
    fg__mode_free(l);
    fg__free(l->store_data);
fail_nostore:
    if (l->policy) {
        fg_store_close(l->policy->local_store);
        fg__free(l->policy);
    }
    fg__free(l);
    return NULL;
}

/* Another process's limiter is left as it is, as its store (store.c):
 * a lease's give-back or a sync would go out on the parent's sockets. */
void fg_limiter_free(fg_limiter *l)
{
    if (!l || fg__process_other(l->st->process))
        return;
    fg__mode_free(l);
    if (l->st->ops->limiter_free)
        l->st->ops->limiter_free(l->st, l);
    fg__free(l->store_data);
    fg_limiter_free(l->policy->local);
    fg_store_close(l->policy->local_store);
    fg__free(l->policy);
    fg__free(l);
}

const fg_limit *fg_limiter_limit(const fg_limiter *l)
{
    return l ? &l->lim : NULL;
}

void fg_limiter_set_cache(fg_limiter *l, fg_cache *c)
{
    if (l)
        l->policy->cache = c;
}

/* A shadow limit has none: the cache only answers refusals, and shadow
 * mode allows them after the store has counted them. Nor has a limit in an
 * approximate mode: its refusals are made here already. */
fg__blocked *fg__limiter_cache(const fg_limiter *l)
{
    return l->lim.shadow || l->mode ? NULL : l->policy->cache;
}

int fg_limiter_local_share(const fg_limiter *l, uint64_t *limit,
                           uint64_t *burst)
{
    if (!l || l->lim.on_failure != FG_FAIL_LOCAL)
        return FG_EINVAL;
    const fg_limiter *loc = l->policy->local;
    uint64_t b = l->lim.algorithm == FG_TOKEN_BUCKET ? l->p.burst : 0;
    if (limit)
        *limit = loc ? loc->p.limit : 0;
    if (burst)
        *burst = loc ? (b ? loc->p.burst : 0) : 0;
    return FG_OK;
}

static const char *breaker_name(int state)
{
    switch (state) {
    case FG__BREAKER_OPEN:
        return "open";
    case FG__BREAKER_HALF_OPEN:
        return "half_open";
    }
    return "closed";
}

const char *fg_limiter_breaker(fg_limiter *l)
{
    /* The worst of the nodes': open, then half open, then closed. */
    if (!l)
        return NULL;
    uint64_t now = fg__mono_us(NULL);
    int worst = FG__BREAKER_CLOSED;
    for (unsigned i = 0; i < l->policy->nbreakers; i++) {
        int s = fg__breaker_state(&l->policy->breaker[i], now);
        if (s == FG__BREAKER_OPEN || worst == FG__BREAKER_CLOSED)
            worst = s;
    }
    return breaker_name(worst);
}

int fg_limiter_node_failing(fg_limiter *l, unsigned node)
{
    if (!l || node >= l->policy->nbreakers)
        return 0;
    fg__breaker *b = &l->policy->breaker[node];
    return atomic_load(&b->failures) || atomic_load(&b->open_until_us);
}

const char *fg_limiter_node_breaker(fg_limiter *l, unsigned node)
{
    if (!l || node >= l->policy->nbreakers)
        return NULL;
    return breaker_name(
        fg__breaker_state(&l->policy->breaker[node], fg__mono_us(NULL)));
}

/* Validate a check before any store sees it. */
static inline int validate(fg_limiter *l, const char *key, size_t keylen,
                           uint64_t cost)
{
    if (!l || (!key && keylen))
        return FG_EINVAL;
    if (fg__process_other(l->st->process))
        return FG_EPROCESS;
    if (keylen > FG_MAX_KEY)
        return FG_EKEY;
    return fg__algo_check_cost(&l->p, cost);
}

int fg__check_valid(const fg_limiter *l, const char *key, size_t keylen,
                    uint64_t cost)
{
    return validate((fg_limiter *)l, key, keylen, cost);
}

/* The decision for a check refused before any store saw it: nothing
 * consumed, nothing to wait for. */
static void refuse_invalid(fg_limiter *l, fg_decision *out)
{
    memset(out, 0, sizeof(*out));
    out->limit = l->p.algorithm == FG_TOKEN_BUCKET ? l->p.burst : l->p.limit;
    out->source = FG_SOURCE_STORE;
}

/* Decide without the store, which failed with 'rc' or was skipped. */
static int decide_without_store(fg_limiter *l, int rc, const char *key,
                                size_t keylen, uint64_t cost, fg_decision *out)
{
    memset(out, 0, sizeof(*out));
    out->limit = l->p.algorithm == FG_TOKEN_BUCKET ? l->p.burst : l->p.limit;
    switch (l->lim.on_failure) {
    case FG_FAIL_OPEN:
        out->allowed = 1;
        out->remaining = out->limit - cost;
        out->source = FG_SOURCE_FAIL_OPEN;
        break;
    case FG_FAIL_CLOSED:
        out->allowed = 0;
        out->retry_after_ms = FAIL_CLOSED_RETRY_MS;
        out->reset_ms = FAIL_CLOSED_RETRY_MS;
        out->retry_after_us = out->reset_us = FAIL_CLOSED_RETRY_MS * 1000u;
        out->source = FG_SOURCE_FAIL_CLOSED;
        break;
    case FG_FAIL_LOCAL: {
        fg_limiter *loc = l->policy->local;
        if (!loc) {
            /* A share of 0: nothing may pass here until the store is
             * back, which the breaker probes after its cool-down. */
            out->allowed = 0;
            out->limit = 0;
            out->retry_after_ms = out->reset_ms = FAIL_CLOSED_RETRY_MS;
            out->retry_after_us = out->reset_us = FAIL_CLOSED_RETRY_MS * 1000u;
            out->source = FG_SOURCE_LOCAL;
            break;
        }
        int lrc = fg__algo_check_cost(&loc->p, cost);
        if (lrc == FG_OK)
            lrc = loc->st->ops->check(loc->st, loc, key, keylen, cost, 0, out);
        if (lrc != FG_OK) {
            /* A cost the share cannot hold (or no room for the key): not
             * here; when the store is back, perhaps. */
            memset(out, 0, sizeof(*out));
            out->limit = loc->p.algorithm == FG_TOKEN_BUCKET ? loc->p.burst
                                                             : loc->p.limit;
            out->retry_after_ms = out->reset_ms = FAIL_CLOSED_RETRY_MS;
            out->retry_after_us = out->reset_us = FAIL_CLOSED_RETRY_MS * 1000u;
        }
        out->source = FG_SOURCE_LOCAL;
        break;
    }
    }
    return rc;
}

static int settle_failure(fg_limiter *l, unsigned node, int rc, const char *key,
                          size_t keylen, uint64_t cost, fg_decision *out)
{
    fg__breaker *b = &l->policy->breaker[node];
    if (rc == FG_EKEY || rc == FG_ECOST || rc == FG_EINVAL) {
        /* The store refused the check itself (a key that Redis Cluster
         * cannot place): bad input, refused, not a failure the policy
         * would answer (on_failure = open would admit it). */
        fg__breaker_release(b);
        refuse_invalid(l, out);
        return rc;
    }
    if (fg__is_store_failure(rc))
        fg__breaker_failure(b, fg__mono_us(NULL));
    else
        fg__breaker_release(b);
    return decide_without_store(l, rc, key, keylen, cost, out);
}

int fg__settle_failure(fg_limiter *l, int rc, const char *key, size_t keylen,
                       uint64_t cost, fg_decision *out)
{
    return settle_failure(l, fg__store_node_of(l->st, key, keylen), rc, key,
                          keylen, cost, out);
}

/* Record the store's answer in the node's breaker and apply the policy. */
static inline int settle(fg_limiter *l, unsigned node, int rc, const char *key,
                         size_t keylen, uint64_t cost, fg_decision *out)
{
    if (rc == FG_OK) {
        /* Nearly always closed and clean: two relaxed loads, no call. */
        fg__breaker *b = &l->policy->breaker[node];
        if (atomic_load_explicit(&b->failures, memory_order_relaxed) ||
            atomic_load_explicit(&b->open_until_us, memory_order_relaxed))
            fg__breaker_success(b);
        out->source = FG_SOURCE_STORE;
        return FG_OK;
    }
    return settle_failure(l, node, rc, key, keylen, cost, out);
}

/* The breaker is closed nearly always: read the clock only when it is not. */
static inline int breaker_allow(fg_limiter *l, unsigned node)
{
    fg__breaker *b = &l->policy->breaker[node];
    if (atomic_load_explicit(&b->open_until_us, memory_order_relaxed) == 0)
        return 1;
    return fg__breaker_allow(b, fg__mono_us(NULL));
}

/* A check through a store that does not settle its own result: the
 * breaker first, the policy after. */
static __attribute__((noinline)) int check_settled(fg_limiter *l,
                                                   const char *key,
                                                   size_t keylen, uint64_t cost,
                                                   fg_decision *out)
{
    unsigned node = fg__store_node_of(l->st, key, keylen);
    if (!breaker_allow(l, node))
        return decide_without_store(l, FG_EBREAKER, key, keylen, cost, out);
    int rc = l->st->ops->check(l->st, l, key, keylen, cost, 0, out);
    /* Answered after a redirection (Redis Cluster): the node that holds the
     * key now settles, and the first gives back its probe. A failure stays
     * the first node's: the map read after it may already name another. */
    if (rc == FG_OK) {
        unsigned now = fg__store_node_of(l->st, key, keylen);
        if (now != node)
            fg__breaker_release(&l->policy->breaker[node]);
        node = now;
    }
    return settle(l, node, rc, key, keylen, cost, out);
}

/* Shadow mode: a refusal the limit made (the store's, the cache's, the
 * failure policy's) becomes an allowed decision that says so. Bad input
 * stays refused: it is not the limit's decision. */
static inline void shadow_apply(const fg_limiter *l, int rc, fg_decision *d)
{
    d->shadowed = 0;
    if (__builtin_expect(l->lim.shadow, 0) && !d->allowed && rc != FG_ECOST &&
        rc != FG_EKEY && rc != FG_EINVAL) {
        d->allowed = 1;
        d->shadowed = 1;
        d->retry_after_ms = d->retry_after_us = 0;
    }
}

static int check_shadow(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, fg_decision *out)
{
    int rc = l->policy->inner(l, key, keylen, cost, out);
    shadow_apply(l, rc, out);
    return rc;
}

static __attribute__((noinline, cold)) int check_invalid(fg_limiter *l, int rc,
                                                         fg_decision *out)
{
    refuse_invalid(l, out);
    return rc;
}

/* Every path is a tail call: the common one, to a store that settles its
 * own result (the memory store's check for this limiter's algorithm), runs
 * in no frame of this function. */
int fg_check(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
             fg_decision *out)
{
    if (__builtin_expect(!l || !out, 0))
        return FG_EINVAL;
    int rc = validate(l, key, keylen, cost);
    if (__builtin_expect(rc != FG_OK, 0))
        return check_invalid(l, rc, out);
    /* No check writes it (shadow mode's sets it after). */
    out->shadowed = 0;
    return l->check(l, key, keylen, cost, out);
}

/* Hand a check to an asynchronous store: 'raw' for the store's own answer
 * (fg__store_check_async), else settled by the policy. */
static int submit(fg_limiter *l, unsigned node, int raw, uint32_t timeout_ms,
                  const char *key, size_t keylen, uint64_t cost,
                  uint64_t age_us, fg_check_cb cb, void *data)
{
    fg__req *req = fg__malloc(sizeof(*req) + keylen + 1);
    if (!req) {
        fg__breaker_release(&l->policy->breaker[node]);
        return FG_ENOMEM;
    }
    memset(req, 0, sizeof(*req));
    req->l = l;
    req->node = node;
    req->raw = (unsigned char)raw;
    /* A deadline of its own, else the store gives the limit's. */
    if (timeout_ms)
        req->deadline_us = fg__mono_precise_us() + (uint64_t)timeout_ms * 1000;
    req->cost = cost;
    req->age_us = age_us;
    req->cb = cb;
    req->data = data;
    req->keylen = keylen;
    if (keylen)
        memcpy(req->key, key, keylen);
    req->key[keylen] = '\0';
    if (!raw)
        atomic_fetch_add(&l->inflight, 1);
    l->st->ops->check_async(l->st, req);
    return FG_OK;
}

int fg_check_async(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
                   fg_check_cb cb, void *data)
{
    int rc = validate(l, key, keylen, cost);
    if (rc != FG_OK)
        return rc;
    if (!cb)
        return FG_EINVAL;
    if (l->mode)
        return fg__mode_check_async(l, key, keylen, cost, cb, data);
    return fg__check_async_exact(l, key, keylen, cost, cb, data);
}

int fg__check_async_exact(fg_limiter *l, const char *key, size_t keylen,
                          uint64_t cost, fg_check_cb cb, void *data)
{
    fg_decision d;
    int rc;
    unsigned node = fg__store_node_of(l->st, key, keylen);
    if (!breaker_allow(l, node)) {
        rc = decide_without_store(l, FG_EBREAKER, key, keylen, cost, &d);
        shadow_apply(l, rc, &d);
        cb(rc, &d, data);
        return FG_OK;
    }
    if (!l->st->ops->check_async) {
        d.shadowed = 0;
        if (l->check != check_settled) {
            rc = l->check(l, key, keylen, cost, &d);
        } else {
            rc = l->st->ops->check(l->st, l, key, keylen, cost, 0, &d);
            rc = settle(l, node, rc, key, keylen, cost, &d);
        }
        cb(rc, &d, data);
        return FG_OK;
    }
    return submit(l, node, 0, 0, key, keylen, cost, 0, cb, data);
}

static int store_refund(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, const fg__taken *t);
static int store_refund_told(fg_limiter *l, const char *key, size_t keylen,
                             uint64_t cost, const fg__taken *t);

int fg_refund(fg_limiter *l, const char *key, size_t keylen, uint64_t cost)
{
    return fg_refund_at(l, key, keylen, cost, 0, UINT64_MAX);
}

int fg_refund_at(fg_limiter *l, const char *key, size_t keylen, uint64_t cost,
                 uint64_t age_us, uint64_t hold_us)
{
    int rc = validate(l, key, keylen, cost);
    if (rc != FG_OK)
        return rc;
    fg__taken t = {age_us, hold_us};
    if (!l->mode || (cost = fg__mode_refund(l, key, keylen, cost, age_us)))
        rc = store_refund_told(l, key, keylen, cost, &t);
    /* A block the cache holds for the key may no longer be the store's. */
    if (rc == FG_OK && l->policy->cache)
        fg_cache_forget(l->policy->cache, l, key, keylen);
    return rc;
}

uint64_t fg__limiter_now(const fg_limiter *l)
{
    return fg__store_now(l->st);
}

int fg__refund_decision(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, const fg_decision *d, uint64_t at)
{
    int rc = validate(l, key, keylen, cost);
    if (rc != FG_OK)
        return rc;
    uint64_t now = fg__limiter_now(l);
    uint64_t age_us = now > at ? now - at : 0;
    if (l->mode && d->source != FG_SOURCE_STORE &&
        d->source != FG_SOURCE_LOCAL &&
        !(cost = fg__mode_refund(l, key, keylen, cost, age_us)))
        return FG_OK;
    fg__taken t = fg__taken_of(&l->p, age_us, d->reset_us);
    if (d->source == FG_SOURCE_LOCAL) {
        fg_limiter *loc = l->policy->local;
        return loc ? store_refund(loc, key, keylen, cost, &t) : FG_EINVAL;
    }
    return store_refund_told(l, key, keylen, cost, &t);
}

/* store_refund, and a limiter in a mode told that the store has the units
 * again once it has (or, asynchronously, once they are queued before any
 * later check): an answer to an ask sent before does not hold them. */
static int store_refund_told(fg_limiter *l, const char *key, size_t keylen,
                             uint64_t cost, const fg__taken *t)
{
    int rc = store_refund(l, key, keylen, cost, t);
    if (rc == FG_OK && l->mode)
        fg__mode_refund_store(l, key, keylen);
    return rc;
}

static int store_refund(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, const fg__taken *t)
{
    if (!l->st->ops->refund)
        return FG_ENOTSUP;
    /* A store the breaker keeps us from asking took nothing to give back
     * (its checks were decided by the policy). */
    fg__breaker *b = &l->policy->breaker[fg__store_node_of(l->st, key, keylen)];
    if (atomic_load_explicit(&b->open_until_us, memory_order_relaxed))
        return FG_EBREAKER;
    return l->st->ops->refund(l->st, l, key, keylen, cost, t);
}

void fg__req_move(fg__req *req, unsigned node)
{
    if (req->node == node)
        return;
    fg__breaker_release(&req->l->policy->breaker[req->node]);
    req->node = node;
}

void fg__req_done(fg__req *req, int rc, fg_decision *d)
{
    fg_decision local;
    if (rc != FG_OK) {
        memset(&local, 0, sizeof(local));
        d = &local;
    }
    if (req->raw) {
        store_learn(req->l, req->node, rc, d);
        req->cb(rc, d, req->data);
        fg__free(req);
        return;
    }
    rc = settle(req->l, req->node, rc, req->key, req->keylen, req->cost, d);
    shadow_apply(req->l, rc, d);
    /* Before the callback, which may free the limiter: 'req' alone is
     * used after it. */
    atomic_fetch_sub(&req->l->inflight, 1);
    req->cb(rc, d, req->data);
    fg__free(req);
}

/* The breaker learns from a store's answer; the policy is not applied. */
static void store_learn(fg_limiter *l, unsigned node, int rc, fg_decision *d)
{
    fg__breaker *b = &l->policy->breaker[node];
    if (rc == FG_OK) {
        if (atomic_load_explicit(&b->failures, memory_order_relaxed) ||
            atomic_load_explicit(&b->open_until_us, memory_order_relaxed))
            fg__breaker_success(b);
        d->source = FG_SOURCE_STORE;
        d->shadowed = 0;
    } else if (fg__is_store_failure(rc)) {
        fg__breaker_failure(b, fg__mono_us(NULL));
    } else {
        fg__breaker_release(b);
    }
}

int fg__store_check(fg_limiter *l, const char *key, size_t keylen,
                    uint64_t cost, uint64_t age_us, fg_decision *out)
{
    unsigned node = fg__store_node_of(l->st, key, keylen);
    memset(out, 0, sizeof(*out));
    if (!breaker_allow(l, node))
        return FG_EBREAKER;
    int rc = l->st->ops->check(l->st, l, key, keylen, cost, age_us, out);
    if (rc != FG_OK)
        memset(out, 0, sizeof(*out));
    store_learn(l, node, rc, out);
    return rc;
}

int fg__store_check_async(fg_limiter *l, const char *key, size_t keylen,
                          uint64_t cost, uint64_t age_us, uint32_t timeout_ms,
                          fg_check_cb cb, void *data)
{
    fg_decision d;
    memset(&d, 0, sizeof(d));
    unsigned node = fg__store_node_of(l->st, key, keylen);
    if (!breaker_allow(l, node)) {
        cb(FG_EBREAKER, &d, data);
        return FG_OK;
    }
    if (!l->st->ops->check_async) {
        int rc = l->st->ops->check(l->st, l, key, keylen, cost, age_us, &d);
        if (rc != FG_OK)
            memset(&d, 0, sizeof(d));
        store_learn(l, node, rc, &d);
        cb(rc, &d, data);
        return FG_OK;
    }
    return submit(l, node, 1, timeout_ms, key, keylen, cost, age_us, cb, data);
}

int fg__store_down(fg_limiter *l, const char *key, size_t keylen)
{
    fg__breaker *b = &l->policy->breaker[fg__store_node_of(l->st, key, keylen)];
    uint64_t until =
        atomic_load_explicit(&b->open_until_us, memory_order_relaxed);
    return until != 0 && fg__mono_us(NULL) < until;
}

int fg__decide_by_policy(fg_limiter *l, int rc, const char *key, size_t keylen,
                         uint64_t cost, fg_decision *out)
{
    return decide_without_store(l, rc, key, keylen, cost, out);
}

void fg__shadow_decision(const fg_limiter *l, int rc, fg_decision *d)
{
    shadow_apply(l, rc, d);
}

int fg_add(fg_limiter *l, const char *key, size_t keylen, uint64_t units,
           fg_decision *out)
{
    return fg_add_at(l, key, keylen, units, 0, out);
}

int fg_add_at(fg_limiter *l, const char *key, size_t keylen, uint64_t units,
              uint64_t age_us, fg_decision *out)
{
    if (!l || !out)
        return FG_EINVAL;
    int rc = !key && keylen                       ? FG_EINVAL
             : fg__process_other(l->st->process)  ? FG_EPROCESS
             : keylen > FG_MAX_KEY                ? FG_EKEY
             : units >= FG_MAX_COUNT              ? FG_ECOST
             : l->p.algorithm == FG_NAIVE_GET_SET ? FG_ENOTSUP
                                                  : FG_OK;
    if (rc == FG_OK)
        rc = l->st->ops->check(l->st, l, key, keylen, units | FG__COST_ADD,
                               age_us, out);
    if (rc != FG_OK) {
        refuse_invalid(l, out);
        return rc;
    }
    out->source = FG_SOURCE_STORE;
    out->shadowed = 0;
    return FG_OK;
}

/* Operators' calls: the store is always asked (the breaker neither stops
 * nor learns from them), each within the limit's timeout. */
int fg_peek(fg_limiter *l, const char *key, size_t keylen, fg_decision *out)
{
    if (!l || !out)
        return FG_EINVAL;
    int rc = !key && keylen                      ? FG_EINVAL
             : fg__process_other(l->st->process) ? FG_EPROCESS
             : keylen > FG_MAX_KEY               ? FG_EKEY
             : !l->st->ops->peek                 ? FG_ENOTSUP
                                                 : FG_OK;
    if (rc == FG_OK)
        rc = l->st->ops->peek(l->st, l, key, keylen, out);
    if (rc != FG_OK) {
        refuse_invalid(l, out);
        return rc;
    }
    out->source = FG_SOURCE_STORE;
    out->shadowed = 0;
    return FG_OK;
}

int fg_reset(fg_limiter *l, const char *key, size_t keylen)
{
    if (!l || (!key && keylen))
        return FG_EINVAL;
    if (fg__process_other(l->st->process))
        return FG_EPROCESS;
    if (keylen > FG_MAX_KEY)
        return FG_EKEY;
    if (!l->st->ops->reset)
        return FG_ENOTSUP;
    int rc = l->st->ops->reset(l->st, l, key, keylen);
    if (rc == FG_OK)
        fg_limiter_forget(l, key, keylen);
    return rc;
}

void fg_limiter_forget(fg_limiter *l, const char *key, size_t keylen)
{
    if (!l || (!key && keylen) || keylen > FG_MAX_KEY ||
        fg__process_other(l->st->process))
        return;
    fg_cache_forget(l->policy->cache, l, key, keylen);
    if (l->mode)
        fg__mode_forget(l, key, keylen);
}
