/* check_set.c -- a request's ordered set of limits (fg_check_set and
 * fg_check_set_async), with the blocked-key cache of the asynchronous form.
 *
 * The limits are checked in order and the first refusal stops the set: a
 * limit after it is never asked, and every limit before it that allowed
 * the request is refunded where its decision counted it (the store, a
 * sync view, a lease, the local share of on_failure = local), so a refused
 * request consumes nothing anywhere. Before any
 * store call, each limit's blocked-key cache is asked: a key known to be
 * refused answers at once, which is what asking the store would come to
 * (blocked.h). The set's decision is the refusal, or the allowed decision
 * with the fewest units remaining.
 *
 * The asynchronous form steps through the limits in a loop: a check
 * answered at once (memory store, open breaker) only records its answer,
 * and the loop goes on; one answered later continues the loop from its
 * callback. */
#include <string.h>

#include "blocked.h"
#include "hash.h"
#include "store.h"
#include "clock.h"

#define REQ_OF(node) ((fg_set_req *)(node)) /* fg__node is the first member */

static int valid(const fg_set_item *items, unsigned n)
{
    if (!items || n == 0 || n > FG_SET_MAX)
        return 0;
    for (unsigned k = 0; k < n; k++)
        if (!items[k].l)
            return 0;
    return 1;
}

static void result_init(fg_set_result *r, unsigned n)
{
    r->n = n;
    r->decided = 0;
    r->asked = 0;
    r->error = FG_OK;
    r->unrefunded = 0;
    r->waited = 0;
}

/* A check that could not be asked: a refusal no store made. */
static void record_unasked(fg_set_result *r, unsigned k, const fg_limiter *l,
                           int rc)
{
    memset(&r->d[k], 0, sizeof(r->d[k]));
    r->d[k].limit = l->p.algorithm == FG_TOKEN_BUCKET ? l->p.burst : l->p.limit;
    r->d[k].source = FG_SOURCE_STORE;
    r->rc[k] = rc;
    r->error = rc;
    r->asked |= 1u << k;
}

/* 1 when limit k's answer stops the set. */
static int stops(const fg_set_result *r, unsigned k)
{
    return r->rc[k] == FG_ECOST || r->rc[k] == FG_EKEY || !r->d[k].allowed;
}

/* 1 when an allowed decision took units that fg_refund gives back: the
 * store's, a sync view's or a lease's. A decision of the policy took
 * nothing there, nor did a shadowed refusal. */
static int took(const fg_decision *d)
{
    return d->allowed && !d->shadowed &&
           (d->source == FG_SOURCE_STORE || d->source == FG_SOURCE_SYNC ||
            d->source == FG_SOURCE_LEASE || d->source == FG_SOURCE_LOCAL);
}

/* Give back what every allowed limit took: the request was refused. Each
 * goes to the window or bucket's debt that took it, at 'fg__at' or later on
 * its store's clock. */
static void refund_allowed(const fg_set_item *items, uint64_t cost,
                           fg_set_result *r, int async)
{
    for (unsigned k = 0; k < r->n; k++) {
        /* The local fallback's decisions come with the store's error. */
        if (!(r->asked & (1u << k)) || !took(&r->d[k]) ||
            (r->rc[k] != FG_OK && r->d[k].source != FG_SOURCE_LOCAL))
            continue;
        if (fg__refund_decision(items[k].l, items[k].key, items[k].keylen, cost,
                                &r->d[k], r->fg__at[k]) != FG_OK) {
            r->unrefunded |= 1u << k;
            continue;
        }
        /* A block the cache holds for the key may no longer be the
         * store's (told only on the loop: the cache is its thread's). */
        if (async && r->d[k].source != FG_SOURCE_LOCAL)
            fg_cache_forget(fg__limiter_cache(items[k].l), items[k].l,
                            items[k].key, items[k].keylen);
        /* What is left once the refund lands: the units before this
         * request. 'reset' stays as decided, an upper bound. */
        fg_decision *d = &r->d[k];
        if (d->remaining < d->limit)
            d->remaining = d->limit - d->remaining <= cost
                               ? d->limit
                               : d->remaining + cost;
    }
}

/* Choose the set's decision; refund when it is a refusal. */
static void conclude(const fg_set_item *items, uint64_t cost, fg_set_result *r,
                     int async)
{
    unsigned pick = r->n;
    for (unsigned k = 0; k < r->n; k++) {
        if (!(r->asked & (1u << k)))
            continue;
        if (stops(r, k)) {
            pick = k;
            break;
        }
        if (pick == r->n || r->d[k].remaining < r->d[pick].remaining)
            pick = k;
    }
    r->decided = pick < r->n ? pick : 0;
    if (pick < r->n && stops(r, pick))
        refund_allowed(items, cost, r, async);
}

int fg_check_set(const fg_set_item *items, unsigned n, uint64_t cost,
                 fg_set_result *out)
{
    if (!out || !valid(items, n))
        return FG_EINVAL;
    result_init(out, n);
    for (unsigned k = 0; k < n; k++) {
        out->fg__at[k] = fg__limiter_now(items[k].l);
        out->rc[k] = fg_check(items[k].l, items[k].key, items[k].keylen, cost,
                              &out->d[k]);
        out->asked |= 1u << k;
        if (out->rc[k] == FG_ECOST || out->rc[k] == FG_EKEY ||
            out->rc[k] == FG_EINVAL || out->rc[k] == FG_EPROCESS)
            out->error = out->rc[k];
        if (stops(out, k))
            break;
    }
    conclude(items, cost, out, 0);
    return FG_OK;
}

/* ---- the asynchronous form ----------------------------------------------- */

/* The limiter in its cache: its own number, and its limit's name, which
 * places its keys where the limiter of the same limit before a reload
 * placed them (see fg__blocked_ident). */
static fg__blocked_ident cache_id(const fg_limiter *l)
{
    const char *name = l->lim.name;
    uint64_t h = fg__hash(name, strnlen(name, FG_NAME_MAX), 0);
    return fg__blocked_ident_of((uint32_t)(h >> 32), (uint32_t)l->id);
}

static void run(fg_set_req *req);

/* Run the sets of 'list' (released by the cache) again. */
static void rerun(fg__blocked_waiter *list)
{
    while (list) {
        fg__blocked_waiter *next = list->next;
        run(REQ_OF(list));
        list = next;
    }
}

/* Prepend the waiters of 'w' to '*all'. */
static void gather(fg__blocked_waiter **all, fg__blocked_waiter *w)
{
    while (w) {
        fg__blocked_waiter *next = w->next;
        w->next = *all;
        *all = w;
        w = next;
    }
}

/* End the probes the set still holds (it was answered before asking those
 * limits): nothing was learnt, so their keys' next lookup probes again.
 * Their waiters go to '*all'. */
static void release_probes(fg_set_req *req, fg__blocked_waiter **all)
{
    uint64_t now = fg__mono_precise_us();
    for (unsigned k = 0; req->fg__probes && k < req->result.n; k++) {
        if (!(req->fg__probes & (1u << k)))
            continue;
        req->fg__probes &= ~(1u << k);
        const fg_set_item *it = &req->fg__items[k];
        gather(all, fg__blocked_resolve(fg__limiter_cache(it->l),
                                        cache_id(it->l), it->key, it->keylen,
                                        &req->fg__node, req->fg__cost, now,
                                        NULL, 1, FG_BLOCKED_NO_ROOM));
    }
}

/* The set is answered: conclude, call back, then run the sets its probes
 * released (after the callback, which may reuse 'req'). */
static void finish(fg_set_req *req)
{
    fg__blocked_waiter *waiters = NULL;
    if (req->fg__probes)
        release_probes(req, &waiters);
    conclude(req->fg__items, req->fg__cost, &req->result, 1);
    req->fg__cb(req);
    rerun(waiters);
}

/* Limit k's answer: record it, and teach the cache what it implies. */
static void on_item(int rc, const fg_decision *d, void *data)
{
    fg_set_req *req = data;
    fg_set_result *r = &req->result;
    unsigned k = req->fg__i;
    const fg_set_item *it = &req->fg__items[k];
    fg__blocked *cache = fg__limiter_cache(it->l);
    fg__blocked_waiter *waiters = NULL;
    r->rc[k] = rc;
    r->d[k] = *d;
    r->asked |= 1u << k;
    if (!req->fg__in_submit)
        r->waited |= 1u << k;
    if (rc == FG_ECOST || rc == FG_EKEY || rc == FG_EPROCESS)
        r->error = rc;
    if (cache) {
        uint64_t now = fg__mono_precise_us();
        fg__blocked_hit h;
        uint64_t bcost = 0;
        /* An allowed decision that left nothing blocks the key only if it
         * stands: before the last limit, a later refusal may refund it. */
        int blocks =
            rc == FG_OK && (!d->allowed || k + 1 == r->n) &&
            fg__blocked_from_decision(fg_limiter_limit(it->l), d, req->fg__cost,
                                      req->fg__sent_us, now, &h, &bcost);
        if (req->fg__probes & (1u << k)) {
            req->fg__probes &= ~(1u << k);
            int stored = rc == FG_OK && d->source == FG_SOURCE_STORE;
            /* The room an allowed answer left, if it stands (the last
             * limit: a later refusal would refund an earlier one). */
            uint64_t room = stored && d->allowed && k + 1 == r->n
                                ? d->remaining
                                : FG_BLOCKED_NO_ROOM;
            waiters = fg__blocked_resolve(
                cache, cache_id(it->l), it->key, it->keylen, &req->fg__node,
                bcost, now, blocks ? &h : NULL, stored && !d->allowed, room);
        } else if (blocks) {
            fg__blocked_put(cache, cache_id(it->l), it->key, it->keylen, bcost,
                            now, &h);
        }
    }
    /* A probe the store failed: its waiters would wait as long again for
     * the same store; each decides that limit by its policy instead. */
    if (fg__is_store_failure(rc))
        for (fg__blocked_waiter *w = waiters; w; w = w->next)
            REQ_OF(w)->fg__waited_rc = rc;
    req->fg__i++;
    req->fg__pending = 0;
    if (!req->fg__in_submit) {
        /* Answered later: the loop goes on from here. */
        if (stops(r, k))
            finish(req);
        else
            run(req);
    }
    rerun(waiters);
}

/* Limit k is refused from the cache's block 'h' (source "cache"); the
 * others are not asked. */
static void answer_cached(fg_set_req *req, unsigned k, const fg__blocked_hit *h,
                          uint64_t now)
{
    fg_set_result *r = &req->result;
    fg_decision *d = &r->d[k];
    r->rc[k] = FG_OK;
    r->asked = 1u << k;
    d->allowed = 0;
    d->limit = h->limit;
    d->remaining = h->remaining; /* as the store said when it refused */
    d->retry_after_us = h->retry_us > now ? h->retry_us - now : 1000;
    d->reset_us = h->reset_us > now ? h->reset_us - now : 0;
    if (d->reset_us < d->retry_after_us)
        d->reset_us = d->retry_after_us;
    d->retry_after_ms = fg__us_to_ms_up(d->retry_after_us);
    d->reset_ms = fg__us_to_ms_up(d->reset_us);
    d->source = FG_SOURCE_CACHE;
    d->shadowed = 0; /* a shadow limit has no cache */
    req->fg__i = k + 1;
    finish(req);
}

/* The cache's word before any store is asked: 1 when the set was answered
 * or waits for another's probe. */
static int ask_caches(fg_set_req *req)
{
    const fg_set_item *items = req->fg__items;
    unsigned n = 0;
    uint64_t now = fg__mono_precise_us();
    fg__blocked_hit h;
    /* The limits up to the first with bad input: its check, in its turn,
     * refuses the set with the reason (a block is no answer to it). */
    while (n < req->result.n &&
           fg__check_valid(items[n].l, items[n].key, items[n].keylen,
                           req->fg__cost) == FG_OK)
        n++;
    /* A known refusal of any limit answers at once, consuming nothing. */
    for (unsigned k = 0; k < n; k++) {
        fg__blocked *c = fg__limiter_cache(items[k].l);
        if (c && fg__blocked_get(c, cache_id(items[k].l), items[k].key,
                                 items[k].keylen, req->fg__cost, now, &h)) {
            answer_cached(req, k, &h, now);
            return 1;
        }
    }
    /* A block just ended: one request asks the store, the others wait for
     * its answer. A set that probes does not also wait, so no two sets
     * ever wait for each other; nor does one that holds a failed probe's
     * answer for its limit 'fg__waited' (waiting again, it would lose it). */
    for (unsigned k = 0; k < n; k++) {
        fg__blocked *c = fg__limiter_cache(items[k].l);
        if (!c || (req->fg__waited_rc && k == req->fg__waited))
            continue;
        int r = fg__blocked_lookup(
            c, cache_id(items[k].l), items[k].key, items[k].keylen,
            req->fg__cost, now, &req->fg__node,
            req->fg__probes == 0 && !req->fg__waited_rc, &h);
        if (r == FG_BLOCKED_PROBE) {
            req->fg__probes |= 1u << k;
        } else if (r == FG_BLOCKED_WAIT) {
            req->fg__waited = k;
            return 1;
        } else if (r == FG_BLOCKED_HIT) {
            answer_cached(req, k, &h, now);
            return 1;
        }
    }
    return 0;
}

static void run(fg_set_req *req)
{
    fg_set_result *r = &req->result;
    if (req->fg__i == 0 && ask_caches(req))
        return;
    while (req->fg__i < r->n) {
        unsigned k = req->fg__i;
        const fg_set_item *it = &req->fg__items[k];
        req->fg__pending = 1;
        req->fg__in_submit = 1;
        req->fg__sent_us = fg__mono_precise_us();
        r->fg__at[k] = fg__limiter_now(it->l);
        int rc;
        if (req->fg__waited_rc && k == req->fg__waited) {
            fg_decision d;
            rc = fg__decide_by_policy(it->l, req->fg__waited_rc, it->key,
                                      it->keylen, req->fg__cost, &d);
            req->fg__waited_rc = 0;
            on_item(rc, &d, req);
            rc = FG_OK;
        } else {
            rc = fg_check_async(it->l, it->key, it->keylen, req->fg__cost,
                                on_item, req);
        }
        req->fg__in_submit = 0;
        if (rc != FG_OK) {
            /* Bad input, or not submitted: the set stops here. */
            record_unasked(r, k, it->l, rc);
            req->fg__i++;
            break;
        }
        if (req->fg__pending)
            return; /* on_item goes on when the answer comes */
        if (stops(r, k))
            break;
    }
    finish(req);
}

int fg_check_set_async(fg_set_req *req, const fg_set_item *items, unsigned n,
                       uint64_t cost, fg_set_cb cb)
{
    if (!req || !cb || !valid(items, n))
        return FG_EINVAL;
    result_init(&req->result, n);
    req->fg__node.next = NULL;
    req->fg__items = items;
    req->fg__cost = cost;
    req->fg__cb = cb;
    req->fg__i = 0;
    req->fg__probes = 0;
    req->fg__in_submit = req->fg__pending = req->fg__waited_rc = 0;
    run(req);
    return FG_OK;
}

/* ---- the cache ------------------------------------------------------------
 */

fg_cache *fg_cache_new(uint32_t entries)
{
    return fg__blocked_new(entries, fg__hash_seed(&entries));
}

void fg_cache_free(fg_cache *c)
{
    fg__blocked_free(c);
}

void fg_cache_clear(fg_cache *c)
{
    if (c)
        rerun(fg__blocked_clear(c));
}

void fg_cache_forget(fg_cache *c, const fg_limiter *l, const char *key,
                     size_t keylen)
{
    if (c && l && (key || !keylen))
        fg__blocked_forget(c, cache_id(l), key, keylen);
}

uint64_t fg_cache_count(const fg_cache *c)
{
    return c ? fg__blocked_count(c) : 0;
}
