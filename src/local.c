/* local.c -- the local half of the approximate modes (floodgate.h): for
 * each key, a sync view or a lease, in a bounded table, and the asks that
 * the store must answer. Pure: the caller brings the time, does the I/O
 * and holds any lock.
 *
 * A key is one entry, found by a chained hash and kept in LRU order. An
 * entry with something to send (usage not synced, units leased) sits on
 * the due list, which each tick walks; such an entry, or one with an ask
 * in flight or checks waiting, is never evicted. Leases are
 * local_lease.c. */
#include <string.h>

#include "algo.h"
#include "alloc.h"
#include "error.h"
#include "hash.h"
#include "mode.h"
#include "local.h"

typedef fg__local_entry entry;

/* Leases are looked at every 100 ms (or every period, if shorter), and a
 * token bucket's or sliding window's lasts min(period, 1 s). */
#define LEASE_TICK_US 100000u
#define LEASE_LIFE_US 1000000u
/* How many entries from the LRU end an insert looks at for one to evict. */
#define EVICT_TRIES 8

fg_local *fg_local_new(const fg_limit *lim, uint64_t max_keys, char *err,
                       size_t errlen)
{
    fg__algo_params p;
    if (!lim) {
        fg__seterr(err, errlen, FG_EINVAL, "no limit given");
        return NULL;
    }
    if (fg__algo_params_init(lim, &p, err, errlen) != FG_OK ||
        fg__mode_valid(lim, p.max_cost, err, errlen) != FG_OK)
        return NULL;
    if (lim->mode == FG_MODE_EXACT) {
        fg__seterr(err, errlen, FG_EINVAL,
                   "an exact limit has no local state (mode sync or lease)");
        return NULL;
    }
    fg_local *lc = fg__calloc(1, sizeof(*lc));
    if (!lc) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    lc->lim = *lim;
    lc->mode = lim->mode;
    lc->algorithm = lim->algorithm;
    lc->max_cost = p.max_cost;
    lc->period_us = lim->period_us;
    lc->chunk_max = fg__lease_max_chunk(lim, p.max_cost);
    lc->keep = fg__add_keep(&p);
    lc->depth_us = p.depth_us;
    if (lc->mode == FG_MODE_SYNC) {
        lc->tick_us = (uint64_t)lim->sync_ms * 1000;
    } else {
        lc->tick_us = min_u64(LEASE_TICK_US, lim->period_us);
        lc->life_us = min_u64(LEASE_LIFE_US, lim->period_us);
    }
    lc->max_keys = max_keys ? max_keys : 1000000;
    lc->seed = fg__hash_seed(lc);
    lc->nbuckets = 64;
    lc->buckets = fg__calloc(lc->nbuckets, sizeof(entry *));
    if (!lc->buckets) {
        fg__free(lc);
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    return lc;
}

void fg_local_free(fg_local *lc)
{
    if (!lc)
        return;
    for (entry *e = lc->newest, *n; e; e = n) {
        n = e->older;
        fg__free(e);
    }
    fg__free(lc->buckets);
    fg__free(lc);
}

uint64_t fg_local_keys(const fg_local *lc)
{
    return lc ? lc->count : 0;
}

uint64_t fg_local_held(const fg_local *lc)
{
    return lc ? lc->held : 0;
}

uint64_t fg_local_next_due(const fg_local *lc)
{
    /* Work left by a call that stopped short is due at once. */
    if (lc && lc->draining)
        return 1;
    return lc ? lc->next_due : 0;
}

/* ---- the table --------------------------------------------------------- */

static void lru_unlink(fg_local *lc, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        lc->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        lc->oldest = e->newer;
    e->older = e->newer = NULL;
}

static void lru_push(fg_local *lc, entry *e)
{
    e->older = lc->newest;
    e->newer = NULL;
    if (lc->newest)
        lc->newest->newer = e;
    lc->newest = e;
    if (!lc->oldest)
        lc->oldest = e;
}

void fg__local_list_due(fg_local *lc, entry *e)
{
    if (e->listed)
        return;
    e->listed = 1;
    e->lnext = lc->due;
    lc->due = e;
}

static int evictable(const entry *e)
{
    return !e->listed && !e->asks && !e->wait_head && !e->units && !e->give &&
           !e->deciding;
}

static void table_remove(fg_local *lc, entry *e)
{
    entry **pp = &lc->buckets[e->hash & (lc->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(lc, e);
    lc->count--;
    fg__free(e);
}

static void table_grow(fg_local *lc)
{
    size_t n = lc->nbuckets * 2;
    entry **b = fg__calloc(n, sizeof(entry *));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < lc->nbuckets; i++) {
        for (entry *e = lc->buckets[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    fg__free(lc->buckets);
    lc->buckets = b;
    lc->nbuckets = n;
}

/* The entry of 'key', or NULL, left where it is in LRU order. */
static entry *find(fg_local *lc, const char *key, size_t keylen)
{
    uint64_t h = fg__hash(key, keylen, lc->seed);
    entry *e = lc->buckets[h & (lc->nbuckets - 1)];
    while (e && !(e->hash == h && e->keylen == keylen &&
                  (keylen == 0 || memcmp(e->key, key, keylen) == 0)))
        e = e->hnext;
    return e;
}

/* The entry of 'key', made when new; NULL when there is no room (FG_ENOMEM
 * in '*rc'). */
static entry *lookup(fg_local *lc, const char *key, size_t keylen, uint64_t now,
                     int *rc)
{
    uint64_t h = fg__hash(key, keylen, lc->seed);
    for (entry *e = lc->buckets[h & (lc->nbuckets - 1)]; e; e = e->hnext) {
        if (e->hash == h && e->keylen == keylen &&
            (keylen == 0 || memcmp(e->key, key, keylen) == 0)) {
            if (lc->newest != e) {
                lru_unlink(lc, e);
                lru_push(lc, e);
            }
            return e;
        }
    }
    if (lc->count >= lc->max_keys) {
        entry *v = NULL;
        for (int i = 0; lc->oldest && i < EVICT_TRIES; i++) {
            v = lc->oldest;
            /* A fixed window's lease is not on the due list: its units,
             * sending nothing, die here or at its key's next check. */
            if (lc->mode == FG_MODE_LEASE && v->units && now >= v->reset_at)
                fg__lease_lapse(lc, v);
            if (evictable(v))
                break;
            /* Held (units, usage to send, an ask out): moved to the new
             * end, so that the next insert looks past it. Left at the old
             * end, a few keys leased to a long window's end would refuse
             * every new key until then. */
            lru_unlink(lc, v);
            lru_push(lc, v);
            v = NULL;
        }
        if (!v) {
            *rc = FG_ENOMEM;
            return NULL;
        }
        table_remove(lc, v);
    }
    entry *e = fg__calloc(1, sizeof(*e) + keylen + 1);
    if (!e) {
        *rc = FG_ENOMEM;
        return NULL;
    }
    e->hash = h;
    e->keylen = (uint32_t)keylen;
    if (keylen)
        memcpy(e->key, key, keylen);
    if (lc->count >= lc->nbuckets)
        table_grow(lc);
    size_t b = h & (lc->nbuckets - 1);
    e->hnext = lc->buckets[b];
    lc->buckets[b] = e;
    lru_push(lc, e);
    lc->count++;
    return e;
}

void fg__local_ask_for(fg_local_ask *a, fg_local_op op, entry *e,
                       uint64_t units)
{
    a->op = op;
    a->key = e->key;
    a->keylen = e->keylen;
    a->units = units;
    a->age_us = 0;
    a->hold_us = UINT64_MAX;
    a->fg__entry = e;
    e->asks++;
}

/* ---- sync -------------------------------------------------------------- */

/* What the view says fits at 'now', before this process's own usage (a
 * token bucket's admitted here is in 'tat' already). */
static uint64_t view_avail(const fg_local *lc, const entry *e, uint64_t now)
{
    if (lc->algorithm == FG_TOKEN_BUCKET) {
        /* The bucket is full at 'tat': until then it lacks the tokens of
         * that time at the rate (more than the burst while in debt). */
        if (!e->synced || now >= e->tat)
            return lc->max_cost;
        uint64_t lack = muldiv_up(e->tat - now, lc->lim.limit, lc->period_us);
        return lack >= lc->max_cost ? 0 : lc->max_cost - lack;
    }
    if (!e->synced || now >= e->reset_at)
        return lc->max_cost;
    /* A window's view holds until it ends (a sliding window's previous
     * count is not decayed here: the next sync does it). */
    return e->view_rem;
}

/* Microseconds until 'units' more fit in a view that has 'avail' now. */
static uint64_t view_wait(const fg_local *lc, const entry *e, uint64_t now,
                          uint64_t avail, uint64_t units)
{
    if (lc->algorithm == FG_TOKEN_BUCKET) {
        if (units <= avail)
            return 0;
        /* They fit once the bucket lacks no more than the room left
         * beside them and the units held here: so long before 'tat' (the
         * part of a token refilled since counts). */
        uint64_t held = e->counted + e->deciding;
        if (e->synced && now < e->tat && units + held <= lc->max_cost) {
            uint64_t room = lc->max_cost - units - held;
            unsigned __int128 early_us =
                (unsigned __int128)room * lc->period_us / lc->lim.limit;
            return early_us >= e->tat - now ? 0
                                            : e->tat - now - (uint64_t)early_us;
        }
        return muldiv_up(units - avail, lc->period_us, lc->lim.limit);
    }
    if (units <= avail)
        return 0;
    return e->synced && e->reset_at > now ? e->reset_at - now : lc->period_us;
}

/* A fixed window's usage not yet sent when its window ended belongs to
 * that window: sent now it would count in the next one. */
static void sync_window_end(const fg_local *lc, entry *e, uint64_t now)
{
    if (lc->algorithm == FG_FIXED_WINDOW && e->synced && now >= e->reset_at &&
        !e->failed) {
        e->units = 0;
        e->synced = 0;
    }
}

/* A token bucket's 'units' spent here at 'now': from the bucket of the
 * view, which refills at the rate until then. */
static void tb_spend(const fg_local *lc, entry *e, uint64_t now, uint64_t units)
{
    if (lc->algorithm != FG_TOKEN_BUCKET || !units)
        return;
    e->tat = (e->tat > now ? e->tat : now) +
             muldiv_up(units, lc->period_us, lc->lim.limit);
}

/* Sync 'e' now: its usage not yet sent, counted in the store, whose
 * answer is the new view. A debt beyond one full limit is forgiven
 * (fg_add). */
static void sync_ask(fg_local *lc, entry *e, uint64_t now, fg_local_ask *a)
{
    uint64_t u = min_u64(e->units, lc->keep * lc->max_cost);
    e->sent = u;
    e->sent_at = now;
    e->sent_from = e->units_at;
    e->sent_last = e->units_last;
    e->units = 0;
    fg__local_ask_for(a, FG_LOCAL_ADD, e, u);
    /* A sliding window's count in the window of the last of them (the
     * previous one, when all were spent there). Not a fixed window's:
     * what it did not send by its window's end is dropped here already,
     * and a store whose clock lags this one's would drop the rest. */
    if (u && lc->algorithm == FG_SLIDING_WINDOW && now > e->sent_last)
        a->age_us = now - e->sent_last;
}

/* A view decides for one interval after its answer, and while the sync
 * that renews it is in flight (its round trip; the limit's timeout at
 * most), as the stated bound assumes: older, the check goes to the store.
 * A key used all the time has a new view every interval; one whose timer
 * fired late sends the few checks in between to the store. */
static int view_fresh(const fg_local *lc, const entry *e, uint64_t now)
{
    uint64_t age = now - e->view_at;
    return e->synced && !e->refund &&
           (age <= lc->tick_us ||
            (e->asks > e->taking &&
             age <= lc->tick_us + (uint64_t)lc->lim.timeout_ms * 1000));
}

/* An old view may still refuse: what it lacks, the other servers' usage
 * since can only add to, and it comes back as the view says: a fixed
 * window's count ends with its window, a bucket refills at the rate. It
 * never admits. A sliding window's view does not decay its previous
 * window, so it would refuse later and later: there the store decides. So
 * does it after a refund gave units back to the store: the view lacks
 * them until the store answers again (it refused them until its window
 * ended, or, a sync interval on, the units admitted here were synced). */
static int view_refuses(const fg_local *lc, const entry *e, uint64_t cost,
                        uint64_t avail)
{
    return e->synced && !e->refund && cost > avail &&
           lc->algorithm != FG_SLIDING_WINDOW;
}

void fg__local_queue_waiter(entry *e, fg_local_waiter *w)
{
    w->next = NULL;
    if (e->wait_tail)
        e->wait_tail->next = w;
    else
        e->wait_head = w;
    e->wait_tail = w;
}

/* The units a sync view holds at 'now' for this process: what it says
 * fits less what was admitted here since. */
static uint64_t sync_avail(fg_local *lc, entry *e, uint64_t now)
{
    sync_window_end(lc, e, now);
    uint64_t v = view_avail(lc, e, now), own = e->counted + e->deciding;
    if (lc->algorithm != FG_TOKEN_BUCKET)
        own += e->sent + e->units;
    return v > own ? v - own : 0;
}

/* A refusal by the view (view_refuses), in 'd': 1, or 0 when the view
 * does not refuse 'cost'. Nothing is counted. */
static int view_refusal(fg_local *lc, entry *e, uint64_t cost, uint64_t now,
                        fg_decision *d)
{
    uint64_t avail = sync_avail(lc, e, now);
    if (!view_refuses(lc, e, cost, avail))
        return 0;
    memset(d, 0, sizeof(*d));
    d->limit = lc->max_cost;
    d->source = FG_SOURCE_SYNC;
    d->remaining = avail;
    d->retry_after_us = view_wait(lc, e, now, avail, cost);
    d->reset_us = lc->algorithm == FG_TOKEN_BUCKET
                      ? view_wait(lc, e, now, avail, lc->max_cost)
                      : view_wait(lc, e, now, 0, 1);
    fg__decision_ms(d);
    return 1;
}

int fg__local_view_refusal(fg_local *lc, const char *key, size_t keylen,
                           uint64_t cost, uint64_t now, fg_decision *d)
{
    if (!lc || lc->mode != FG_MODE_SYNC || cost - 1 >= lc->max_cost)
        return 0;
    entry *e = find(lc, key, keylen);
    return e && view_refusal(lc, e, cost, now, d);
}

static int sync_check(fg_local *lc, entry *e, uint64_t cost, uint64_t now,
                      fg_decision *d, fg_local_ask *ask)
{
    /* A key whose last sync or check failed: the policy decides while
     * another is in flight, but for a view that refuses the check (it
     * never admits: the store down, a key refused here stays refused);
     * else its check asks the store, as for an old view (the breaker
     * answers at once while it is open), so that a store back is seen at
     * the next check, not the next tick. */
    if (e->failed && e->asks)
        return view_refusal(lc, e, cost, now, d) ? FG_OK : FG_EBACKEND;
    uint64_t avail = sync_avail(lc, e, now);
    memset(d, 0, sizeof(*d));
    d->limit = lc->max_cost;
    d->source = FG_SOURCE_SYNC;
    /* A check the store decided has it as its source: the check that
     * asked takes the units the store counted for it, or its refusal. */
    if (e->granted >= cost) {
        /* The store counted this check already (its view holds it). */
        e->granted -= cost;
        d->allowed = 1;
        d->remaining = avail;
        d->source = FG_SOURCE_STORE;
    } else if ((e->failed || !view_fresh(lc, e, now)) &&
               !view_refuses(lc, e, cost, avail)) {
        /* Decided on an old view, the check could miss all that the other
         * servers admitted since: the store decides it, and its answer is
         * the new view (a token bucket's refusal that waits a full
         * bucket or more is read by a sync after it). With an ask in flight
         * already (a tick's sync may take longer than the limit's
         * timeout), the store decides this check on its own. */
        if (e->asks)
            return FG_ENOMEM;
        if (e->units) {
            /* Usage admitted here is not sent yet: a store deciding
             * without it could admit it over again. It is synced first,
             * and the new view decides the check. */
            sync_ask(lc, e, now, ask);
            return FG_LOCAL_ASKED;
        }
        e->take_at = now;
        /* Held against the view while in flight, as an exact check's
         * are: the store counts them, and the view, old but within an
         * interval and a timeout of its answer, may decide meanwhile. */
        e->deciding += cost;
        fg__local_ask_for(ask, FG_LOCAL_CHECK, e, cost);
        return FG_LOCAL_ASKED;
    } else if (cost <= avail) {
        fg__local_list_due(lc, e);
        if (!e->units)
            e->units_at = now;
        e->units += cost;
        e->units_last = now;
        tb_spend(lc, e, now, cost);
        d->allowed = 1;
        d->remaining = avail - cost;
    } else {
        /* Refused here: nothing to send. Once the view has room again,
         * an old one sends the check to the store. */
        d->remaining = avail;
        d->retry_after_us = view_wait(lc, e, now, avail, cost);
        if (e->refused)
            d->source = FG_SOURCE_STORE;
        e->refused = 0;
    }
    /* Until full again: as long as what is missing takes to come back. */
    d->reset_us = lc->algorithm == FG_TOKEN_BUCKET
                      ? view_wait(lc, e, now, d->remaining, lc->max_cost)
                  : d->remaining < lc->max_cost ? view_wait(lc, e, now, 0, 1)
                                                : 0;
    fg__decision_ms(d);
    return FG_OK;
}

/* The view from the store's answer 'd' at 'now' to an ask sent at
 * 'sent_at'. A fixed window's time is the caller's, read when the ask was
 * sent: its end is then exact. The others' is the store's, somewhere in
 * the round trip: counted from the answer, a view refills late rather
 * than early. */
static void view_from(const fg_local *lc, entry *e, uint64_t sent_at,
                      uint64_t now, const fg_decision *d)
{
    /* A sync sent after the store counted checks here holds them, and
     * one sent after a refund has its units. */
    if (sent_at > e->counted_at)
        e->counted = 0;
    if (sent_at >= e->refund_at)
        e->refund = 0;
    e->view_rem = d->remaining;
    e->reset_at =
        (lc->algorithm == FG_FIXED_WINDOW ? sent_at : now) + d->reset_us;
    e->view_at = now;
    e->synced = 1;
    e->failed = 0;
    /* The units admitted here since the ask was sent are not in it. */
    e->tat = e->reset_at;
    tb_spend(lc, e, now, e->units);
}

static void sync_answer(fg_local *lc, entry *e, uint64_t now, int rc,
                        const fg_decision *d)
{
    if (rc == FG_OK && d) {
        view_from(lc, e, e->sent_at, now, d);
    } else {
        /* Sent again at the next tick; meanwhile the policy decides. A
         * sync the breaker kept (sent to no store) says nothing of the
         * key: its checks go on as the breaker lets them. */
        if (e->sent && (!e->units || e->sent_from < e->units_at))
            e->units_at = e->sent_from;
        if (e->sent && !e->units)
            e->units_last = e->sent_last;
        e->units += e->sent;
        if (rc != FG_EBREAKER)
            e->failed = 1;
        fg__local_list_due(lc, e);
    }
    e->sent = 0;
}

/* ---- the interface ----------------------------------------------------- */

int fg_local_check(fg_local *lc, const char *key, size_t keylen, uint64_t cost,
                   uint64_t now_us, fg_decision *out, fg_local_ask *ask,
                   fg_local_waiter *w)
{
    if (!lc || !out || !ask || (!key && keylen))
        return FG_EINVAL;
    if (keylen > FG_MAX_KEY)
        return FG_EKEY;
    if (cost - 1 >= lc->max_cost)
        return FG_ECOST;
    /* The first work is due at the caller's next tick, wherever its
     * timer's phase is: a key's first sync comes within one interval. */
    if (lc->next_due == 0)
        lc->next_due = now_us ? now_us : 1;
    int rc = FG_OK;
    entry *e = lookup(lc, key, keylen, now_us, &rc);
    if (!e)
        return rc;
    if (lc->mode == FG_MODE_SYNC)
        return sync_check(lc, e, cost, now_us, out, ask);
    return fg__lease_check(lc, e, cost, now_us, out, ask, w);
}

int fg_local_answer(fg_local *lc, fg_local_ask *ask, uint64_t now_us, int rc,
                    const fg_decision *d, fg_local_waiter **wake)
{
    if (wake)
        *wake = NULL;
    if (!lc || !ask || !ask->fg__entry)
        return 0;
    entry *e = ask->fg__entry;
    int again = 0;
    e->asks--;
    switch (ask->op) {
    case FG_LOCAL_ADD:
        sync_answer(lc, e, now_us, rc, d);
        break;
    case FG_LOCAL_CHECK:
        e->deciding -= min_u64(ask->units, e->deciding);
        if (rc == FG_OK && d && d->allowed) {
            view_from(lc, e, e->take_at, now_us, d);
            e->granted += ask->units;
        } else if (rc == FG_OK && d &&
                   (lc->algorithm != FG_TOKEN_BUCKET ||
                    d->reset_us < lc->depth_us)) {
            view_from(lc, e, e->take_at, now_us, d);
            e->refused = 1;
        } else if (rc == FG_OK && d) {
            /* A refusal that waits a full bucket or more: a debt, whose
             * view a sync after it reads from the store's count. */
            sync_ask(lc, e, now_us, ask);
            e->refused = 1;
            again = 1;
        } else {
            /* A sync of nothing finds out when it is back (not asked,
             * kept by the breaker: as for a sync). */
            if (rc != FG_EBREAKER)
                e->failed = 1;
            fg__local_list_due(lc, e);
        }
        break;
    case FG_LOCAL_TAKE:
        e->taking--;
        again = fg__lease_answer(lc, e, ask, now_us, rc, d);
        if (!again && !e->taking && wake) {
            *wake = e->wait_head;
            e->wait_head = e->wait_tail = NULL;
        }
        break;
    case FG_LOCAL_GIVE:
        /* A give-back lost only leaves units unused. One sent ends a
         * refusal (answered once queued on an async store, whose one
         * connection runs it before any later take): the store has
         * those units again. */
        if (rc == FG_OK) {
            e->gave_at = now_us;
            e->refused_until = 0;
        }
        break;
    }
    return again;
}

void fg_local_deciding(fg_local *lc, const char *key, size_t keylen,
                       uint64_t cost, uint64_t now_us)
{
    int rc;
    if (!lc || (!key && keylen) || keylen > FG_MAX_KEY)
        return;
    entry *e =
        lc->mode == FG_MODE_SYNC ? lookup(lc, key, keylen, now_us, &rc) : NULL;
    if (e)
        e->deciding += cost;
}

void fg_local_decided(fg_local *lc, const char *key, size_t keylen,
                      uint64_t cost, int counted, uint64_t now_us)
{
    if (!lc || (!key && keylen) || keylen > FG_MAX_KEY ||
        lc->mode != FG_MODE_SYNC)
        return;
    entry *e = find(lc, key, keylen);
    if (!e)
        return; /* no room for it when sent: nothing held, no view */
    e->deciding -= min_u64(cost, e->deciding);
    if (counted) {
        e->counted += cost;
        e->counted_at = now_us;
    }
}

static void store_refunded(entry *e, uint64_t now)
{
    e->refund = 1;
    e->refund_at = now;
    e->refused_until = 0;
}

void fg__local_store_refunded(fg_local *lc, const char *key, size_t keylen,
                              uint64_t now)
{
    entry *e = find(lc, key, keylen);
    if (e)
        store_refunded(e, now);
}

uint64_t fg_local_refund(fg_local *lc, const char *key, size_t keylen,
                         uint64_t cost, uint64_t now_us)
{
    return fg_local_refund_at(lc, key, keylen, cost, now_us, 0);
}

uint64_t fg_local_refund_at(fg_local *lc, const char *key, size_t keylen,
                            uint64_t cost, uint64_t now_us, uint64_t age_us)
{
    int rc;
    if (!lc || (!key && keylen) || keylen > FG_MAX_KEY)
        return 0;
    uint64_t spent = now_us > age_us ? now_us - age_us : 0;
    entry *e = lookup(lc, key, keylen, now_us, &rc);
    if (!e)
        return cost; /* nothing here to hold it: the store's to give */
    if (lc->mode == FG_MODE_SYNC) {
        /* From the usage not sent yet, when spent among it; the rest is
         * in the store (sent, or counted there for a check it decided),
         * which gives it back to the window that took it: the views stop
         * holding it, and the next check asks the store (view_fresh). */
        uint64_t here = 0;
        if (e->units && spent >= e->units_at) {
            here = min_u64(cost, e->units);
            e->units -= here;
            if (lc->algorithm == FG_TOKEN_BUCKET) {
                uint64_t t = muldiv_up(here, lc->period_us, lc->lim.limit);
                e->tat = e->tat > t ? e->tat - t : 0;
            }
            e->counted -= min_u64(cost - here, e->counted);
        }
        if (cost > here)
            store_refunded(e, now_us);
        return cost - here;
    }
    /* Spent from this lease: held again. The rest was spent from an
     * earlier lease, which the store counted when it was taken: the store
     * gives it back, to the window that took it (a fixed window's that has
     * ended keeps it). */
    uint64_t back = 0;
    if (now_us < e->reset_at && spent >= e->lease_at) {
        back = min_u64(cost, e->used);
        e->used -= back;
        e->units += back;
        lc->held += back;
        /* Held again, they go back when the lease lapses (a fixed
         * window's die with it, unlisted). */
        if (back && lc->algorithm != FG_FIXED_WINDOW)
            fg__local_list_due(lc, e);
    }
    if (cost > back)
        store_refunded(e, now_us);
    return cost - back;
}

void fg_local_forget(fg_local *lc, const char *key, size_t keylen)
{
    if (!lc || (!key && keylen) || keylen > FG_MAX_KEY)
        return;
    entry *e = find(lc, key, keylen);
    if (!e)
        return;
    /* The store's counts of the key are gone: what was taken, counted or
     * seen of them goes too. An ask in flight is answered as usual.
     * 'held' counts lease units only (a sync entry's are usage). */
    if (lc->mode == FG_MODE_LEASE)
        lc->held -= e->units;
    e->units = e->give = e->counted = e->granted = 0;
    e->used = e->last_used = e->refused_until = e->refused_need = 0;
    e->synced = e->refused = e->failed = e->refund = 0;
    e->store_rem = lc->max_cost;
    e->full_at = 0;
}

/* Send what 'e' has: its usage (sync), or the units it gives back
 * (lease; with 'all', every unit it holds). 0 when nothing. */
static int entry_ask(fg_local *lc, entry *e, uint64_t now, int all,
                     fg_local_ask *a)
{
    if (lc->mode == FG_MODE_SYNC) {
        if (e->asks)
            return 0; /* the one in flight is answered first */
        sync_window_end(lc, e, now);
        sync_ask(lc, e, now, a);
        return 1;
    }
    if (e->units && (all || now >= e->reset_at)) {
        if (all && now < e->reset_at)
            fg__lease_give(lc, e);
        else
            fg__lease_lapse(lc, e);
    }
    if (!e->give)
        return 0;
    /* A bucket that refilled past the take holds none of it any more. */
    uint64_t hold = UINT64_MAX;
    if (lc->algorithm == FG_TOKEN_BUCKET)
        hold = e->give_until > now ? e->give_until - now : 0;
    if (!hold) {
        e->give = 0;
        return 0;
    }
    fg__local_ask_for(a, FG_LOCAL_GIVE, e, e->give);
    a->age_us = now > e->give_at ? now - e->give_at : 0;
    a->hold_us = hold;
    e->give = 0;
    return 1;
}

/* Whether 'e' must stay on the due list after this tick. */
static int still_due(const fg_local *lc, const entry *e)
{
    /* A sync in flight lists its key again if it fails. */
    if (lc->mode == FG_MODE_SYNC)
        return e->units || e->failed;
    return e->give || (e->units && lc->algorithm != FG_FIXED_WINDOW);
}

static size_t drain(fg_local *lc, uint64_t now, int all, fg_local_ask *asks,
                    size_t max)
{
    size_t n = 0;
    while (lc->draining && n < max) {
        entry *e = lc->draining;
        lc->draining = e->lnext;
        e->listed = 0;
        if (entry_ask(lc, e, now, all, &asks[n]))
            n++;
        if (still_due(lc, e))
            fg__local_list_due(lc, e);
    }
    if (!lc->draining)
        lc->flushing = 0; /* whoever drained it, a flush's list is sent */
    return n;
}

size_t fg_local_due(fg_local *lc, uint64_t now_us, fg_local_ask *asks,
                    size_t max)
{
    if (!lc || (!asks && max))
        return 0;
    /* A timer may fire a little early: an eighth of the interval counts
     * as on time. One that fires late keeps its phase (as a periodic
     * timer does): the next work is due an interval after this one was,
     * not after the late call, which would skip the timer's next turn. */
    if (!lc->draining && lc->next_due &&
        now_us + lc->tick_us / 8 >= lc->next_due) {
        lc->draining = lc->due;
        lc->due = NULL;
        uint64_t next = lc->next_due + lc->tick_us;
        lc->next_due = next > now_us ? next : now_us + lc->tick_us;
    }
    return drain(lc, now_us, 0, asks, max);
}

size_t fg_local_flush(fg_local *lc, uint64_t now_us, fg_local_ask *asks,
                      size_t max)
{
    if (!lc || !asks || !max)
        return 0;
    size_t n = 0;
    if (!lc->flushing) {
        /* A tick whose caller sent part of it (a budget a turn): its
         * keys first, every unit of theirs; the due list after. */
        n = drain(lc, now_us, 1, asks, max);
        if (lc->draining)
            return n;
        /* Every lease's units, a fixed window's too (not listed). */
        for (entry *e = lc->newest; lc->mode == FG_MODE_LEASE && e;
             e = e->older)
            if (e->units)
                fg__local_list_due(lc, e);
        lc->draining = lc->due;
        lc->due = NULL;
        lc->flushing = 1;
    }
    return n + drain(lc, now_us, 1, asks + n, max - n);
}
