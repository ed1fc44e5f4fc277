/* limiter_mode.c -- a limiter in an approximate mode (floodgate.h): its
 * local state (local.c) driven with its own store, on a blocking store
 * under a lock and from the checks themselves, on an asynchronous one from
 * the store's loop and a timer on it.
 *
 * The store's side of each ask goes through the node's breaker but not the
 * failure policy (fg__store_check): the policy then decides the request
 * that was waiting, with its own cost. */
#include <event2/event.h>
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "error.h"
#include "local.h"
#include "mode.h"
#include "process.h"
#include "store.h"

/* Asks handed out by one call of fg_local_due or fg_local_flush. */
#define ASK_BATCH 64

struct fg__mode {
    fg_local *lc;
    fg__check_fn exact;      /* the limiter's check before the mode took it */
    struct event_base *base; /* NULL: a blocking store */
    struct event *tick;
    struct event *more; /* the rest of a tick's work, at the next turn */
    int send_rc;        /* async: a sync or give-back that failed since the last
                           fg_limiter_sync (its first failure), 0: none */
    pthread_mutex_t mu; /* blocking stores only */
    pthread_cond_t synced;  /* signalled when 'syncing' ends */
    pthread_cond_t taken;   /* signalled when a take woke its waiters */
    int syncing;            /* a thread is sending the work due */
    unsigned pending;       /* asks in flight, checks not called back */
    uint64_t asked, failed; /* commands the store answered (fg_limiter_asks) */
    struct mode_req *spare;
};

/* A blocking check waiting for a take in flight for its key. */
typedef struct block_waiter {
    fg_local_waiter w; /* first: a waiter is its block_waiter */
    int woken;
    int rc; /* the take's: a failure decides the waiter by the policy */
} block_waiter;

/* An asynchronous check that needs the store: it waits for a take (its
 * own, or another check's of the same key). */
typedef struct mode_req {
    fg_local_waiter w; /* first: a waiter is its request */
    fg_limiter *l;
    fg_check_cb cb;
    void *data;
    uint64_t cost;
    fg_local_ask ask;
    unsigned takes; /* answered for it: after a few, decided exactly */
    size_t keylen;
    char key[FG_MAX_KEY + 1];
} mode_req;

/* A sync or give-back in flight on the loop. */
typedef struct ask_req {
    fg_limiter *l;
    fg_local_ask ask;
} ask_req;

static void lock(struct fg__mode *m)
{
    if (!m->base)
        pthread_mutex_lock(&m->mu);
}

static void unlock(struct fg__mode *m)
{
    if (!m->base)
        pthread_mutex_unlock(&m->mu);
}

static uint64_t now_us(void)
{
    return fg__mono_us(NULL);
}

/* A command of the mode that the store answered 'rc', counted: not one
 * its breaker kept from the store, or one that could not be sent. */
static void count(struct fg__mode *m, int rc)
{
    if (rc != FG_EBREAKER && rc != FG_ENOMEM) {
        m->asked++;
        m->failed += rc != FG_OK;
    }
}

/* fg_local_answer, the command counted. */
static int answer(struct fg__mode *m, fg_local_ask *a, uint64_t now, int rc,
                  const fg_decision *d, fg_local_waiter **wake)
{
    count(m, rc);
    return fg_local_answer(m->lc, a, now, rc, d, wake);
}

/* ---- blocking stores ----------------------------------------------------- */

/* 1 when a check decided in the store was counted there. */
static int counts(int rc, const fg_decision *d)
{
    return rc == FG_OK && d->allowed && !d->shadowed &&
           d->source == FG_SOURCE_STORE;
}

/* A lease's give-back: to the window or bucket's debt that took it. */
static int give(fg_limiter *l, const fg_local_ask *a)
{
    fg__taken t = {a->age_us, a->hold_us};
    return l->st->ops->refund
               ? l->st->ops->refund(l->st, l, a->key, a->keylen, a->units, &t)
               : FG_ENOTSUP;
}

/* The store's side of 'a' (no local state: no lock needed). */
static int send_blocking(fg_limiter *l, const fg_local_ask *a, fg_decision *d)
{
    switch (a->op) {
    case FG_LOCAL_ADD:
        return fg__store_check(l, a->key, a->keylen, a->units | FG__COST_ADD,
                               a->age_us, d);
    case FG_LOCAL_TAKE:
    case FG_LOCAL_CHECK:
        return fg__store_check(l, a->key, a->keylen, a->units, 0, d);
    default:
        memset(d, 0, sizeof(*d));
        return give(l, a);
    }
}

/* Whether a check's own round trips let the lock go. A lease's do: its
 * takes are exact checks of the store, and the threads' interleave as an
 * asynchronous store's checks do on its loop. A sync limit's do not: one
 * check at a time, its round trips included, keeps its view and the
 * checks the store decided meanwhile in step, so that one process is one
 * server, exact (let go, 8 threads on one key under load admitted 156 to
 * 199 of 200). */
static int check_lets_go(const fg_limiter *l)
{
    return l->lim.mode == FG_MODE_LEASE;
}

/* Do 'a' with the store and answer it, a take's follow-up too. Called
 * with the lock held, which with 'let_go' is let go during each round
 * trip: the ask is in flight in the local state meanwhile (its key valid
 * until answered), and other threads' checks go on. Returns the store's
 * result and its decision in 'd'. */
static int ask_blocking(fg_limiter *l, fg_local_ask *a, fg_decision *d,
                        int let_go)
{
    struct fg__mode *m = l->mode;
    fg_local_waiter *wake;
    int rc, again;
    do {
        if (let_go)
            unlock(m);
        rc = send_blocking(l, a, d);
        if (let_go)
            lock(m);
        again = answer(m, a, now_us(), rc, d, &wake);
        if (wake) {
            for (; wake; wake = wake->next) {
                ((block_waiter *)wake)->woken = 1;
                ((block_waiter *)wake)->rc = rc;
            }
            pthread_cond_broadcast(&m->taken);
        }
    } while (again);
    return rc;
}

/* Send the work due (or, with 'all', everything held); the first failure.
 * Called with the lock held, by one thread at a time ('syncing'). It lets
 * the lock go for each round trip, so that other threads' checks go on
 * meanwhile (syncs and give-backs carry usage already decided: the views
 * hold it until answered), and answers each ask as it comes. A check that
 * finds another thread sending leaves the work to it; fg_limiter_sync
 * waits for that thread, then sends everything. Thousands of keys due at
 * once would otherwise hold every check for thousands of round trips.
 * A check sends work one ask at a time until its limit's timeout has
 * passed, and leaves the rest due to the checks after it, so that no
 * check waits for thousands of round trips either. (A key whose view
 * grows older than an interval meanwhile is decided by the store: the
 * late ones cost round trips, not exactness.) */
static int run_due_blocking(fg_limiter *l, uint64_t now, int all)
{
    struct fg__mode *m = l->mode;
    fg_local_ask asks[ASK_BATCH];
    int first = FG_OK;
    size_t n, batch = all ? ASK_BATCH : 1;
    uint64_t until = now + (uint64_t)l->lim.timeout_ms * 1000;
    if (m->syncing && !all)
        return FG_OK;
    while (m->syncing)
        pthread_cond_wait(&m->synced, &m->mu);
    m->syncing = 1;
    do {
        n = all ? fg_local_flush(m->lc, now, asks, batch)
                : fg_local_due(m->lc, now, asks, batch);
        for (size_t i = 0; i < n; i++) {
            fg_decision d;
            int rc = ask_blocking(l, &asks[i], &d, 1);
            if (rc != FG_OK && first == FG_OK)
                first = rc;
        }
        now = now_us();
    } while (n == batch && (all || now < until));
    m->syncing = 0;
    pthread_cond_broadcast(&m->synced);
    return first;
}

/* A check decided in the store: the views here hold its units while it
 * is asked and, once counted, until a later sync holds them. */
static int exact_held(fg_limiter *l, const char *key, size_t keylen,
                      uint64_t cost, fg_decision *out)
{
    struct fg__mode *m = l->mode;
    int let_go = check_lets_go(l);
    fg_local_deciding(m->lc, key, keylen, cost, now_us());
    if (let_go)
        unlock(m);
    int rc = m->exact(l, key, keylen, cost, out);
    if (let_go)
        lock(m);
    count(m, rc);
    fg_local_decided(m->lc, key, keylen, cost, counts(rc, out), now_us());
    return rc;
}

/* fg_check of a limiter in a mode (l->check) on a blocking store: decided
 * here, or after a take; a key that finds no room here is decided exactly.
 * The local state is used under the lock, which a lease's round trips let
 * go (check_lets_go): a lease's check that finds a take in flight for its
 * key waits for that take's answer. */
static int check_locked(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, fg_decision *out)
{
    struct fg__mode *m = l->mode;
    fg_local_ask ask;
    if (l->lim.mode == FG_MODE_SYNC && fg__store_down(l, key, keylen)) {
        /* The syncs due are what asks the breaker to try the store again
         * (there is no tick on a blocking store). */
        uint64_t now = now_us();
        uint64_t due = fg_local_next_due(m->lc);
        if (now >= due)
            run_due_blocking(l, now, 0);
        if (fg__store_down(l, key, keylen)) {
            /* A view that refuses the check still does: the policy
             * decides only what the view would have asked the store. */
            if (fg__local_view_refusal(m->lc, key, keylen, cost, now, out))
                return FG_OK;
            return fg__decide_by_policy(l, FG_EBREAKER, key, keylen, cost, out);
        }
    }
    for (int round = 0;; round++) {
        uint64_t now = now_us();
        block_waiter bw = {.woken = 0};
        int rc =
            fg_local_check(m->lc, key, keylen, cost, now, out, &ask, &bw.w);
        uint64_t due = fg_local_next_due(m->lc);
        if (rc == FG_LOCAL_WAITED) {
            /* Another thread's take for this key: its answer decides (a
             * failed one at once, by the policy, as it would have this
             * check's own take). Woken as many times as it would have
             * taken, it is decided exactly. */
            while (!bw.woken)
                pthread_cond_wait(&m->taken, &m->mu);
            if (bw.rc != FG_OK)
                return fg__decide_by_policy(l, bw.rc, key, keylen, cost, out);
            if (round == 3)
                return exact_held(l, key, keylen, cost, out);
            continue;
        }
        if (rc == FG_OK) {
            if (now >= due)
                run_due_blocking(l, now, 0);
            return FG_OK;
        }
        if (rc == FG_EBACKEND) {
            /* The key's last sync or check failed, and another ask of it
             * is out (this store's: a sync another thread sends with
             * the lock let go): the policy decides until it is answered. */
            if (now >= due)
                run_due_blocking(l, now, 0);
            return fg__decide_by_policy(l, rc, key, keylen, cost, out);
        }
        if (rc == FG_ENOMEM)
            return exact_held(l, key, keylen, cost, out);
        if (rc < 0)
            return rc;
        /* A take (or a sync's check in the store); its answer is read
         * by the next round. After a few rounds it is decided exactly. */
        rc = ask_blocking(l, &ask, out, check_lets_go(l));
        if (rc != FG_OK)
            return fg__decide_by_policy(l, rc, key, keylen, cost, out);
        if (round == 3)
            return exact_held(l, key, keylen, cost, out);
    }
}

static int mode_check(fg_limiter *l, const char *key, size_t keylen,
                      uint64_t cost, fg_decision *out)
{
    lock(l->mode);
    int rc = check_locked(l, key, keylen, cost, out);
    unlock(l->mode);
    return rc;
}

/* ---- asynchronous stores ------------------------------------------------- */

static void send_async(fg_limiter *l, const fg_local_ask *a);

/* The cost the store is asked for: a sync counts its units (fg_add). */
static uint64_t ask_cost(const fg_local_ask *a)
{
    return a->op == FG_LOCAL_ADD ? a->units | FG__COST_ADD : a->units;
}

/* The age of a sync's units (fg_add_at); 0 for a check. */
static uint64_t ask_age(const fg_local_ask *a)
{
    return a->op == FG_LOCAL_ADD ? a->age_us : 0;
}
static void run_req(mode_req *r, uint64_t now);
static void run_exact(mode_req *r, uint64_t now);

/* Answer 'r': it is done with first, since the callback may free the
 * limiter (fg_limiter_pending no longer counts the check). */
static void finish(mode_req *r, int rc, fg_decision *d)
{
    struct fg__mode *m = r->l->mode;
    fg_check_cb cb = r->cb;
    void *data = r->data;
    if (!m->spare)
        m->spare = r;
    else
        fg__free(r);
    m->pending--;
    cb(rc, d, data);
}

static void on_take(int rc, const fg_decision *d, void *data)
{
    mode_req *r = data;
    fg_limiter *l = r->l;
    struct fg__mode *m = l->mode;
    uint64_t now = now_us();
    fg_local_waiter *wake;
    m->pending--;
    if (answer(m, &r->ask, now, rc, d, &wake)) {
        m->pending++;
        if (fg__store_check_async(l, r->ask.key, r->ask.keylen,
                                  ask_cost(&r->ask), ask_age(&r->ask), 0,
                                  on_take, r) == FG_OK)
            return;
        m->pending--;
        answer(m, &r->ask, now, FG_ENOMEM, NULL, &wake);
        rc = FG_ENOMEM;
    }
    if (rc != FG_OK) {
        fg_decision pd;
        rc = fg__decide_by_policy(l, rc, r->key, r->keylen, r->cost, &pd);
        fg__shadow_decision(l, rc, &pd);
        finish(r, rc, &pd);
    } else if (++r->takes > 3) {
        /* Its takes keep coming back too late to be spent (a round trip
         * longer than a window): the store decides it, as a blocking
         * limiter does after as many rounds. */
        run_exact(r, now);
    } else {
        run_req(r, now);
    }
    /* A waiter woken by as many takes is decided exactly too (a flood
     * whose takes each bring back fewer units than wait for them would
     * otherwise keep the last of them waiting, take after take). */
    while (wake) {
        fg_local_waiter *next = wake->next;
        mode_req *w = (mode_req *)wake;
        if (++w->takes > 3)
            run_exact(w, now);
        else
            run_req(w, now);
        wake = next;
    }
}

/* A check decided in the store: what it counted is told to the views. */
static void on_exact(int rc, const fg_decision *d, void *data)
{
    mode_req *r = data;
    struct fg__mode *m = r->l->mode;
    count(m, rc);
    fg_local_decided(m->lc, r->key, r->keylen, r->cost, counts(rc, d),
                     now_us());
    fg_decision copy = *d;
    finish(r, rc, &copy);
}

/* Check 'r' again (or for the first time): decided, waiting, or a take. */
static void run_req(mode_req *r, uint64_t now)
{
    fg_limiter *l = r->l;
    struct fg__mode *m = l->mode;
    fg_decision d;
    /* A sync view is not trusted to admit while its node's syncs fail:
     * the store counts as unreachable, but a view that refuses the check
     * still does (a lease spends what it holds first). */
    int down =
        l->lim.mode == FG_MODE_SYNC && fg__store_down(l, r->key, r->keylen);
    int rc = down && fg__local_view_refusal(m->lc, r->key, r->keylen, r->cost,
                                            now, &d)
                 ? FG_OK
             : down ? FG_EBREAKER
                    : fg_local_check(m->lc, r->key, r->keylen, r->cost, now, &d,
                                     &r->ask, &r->w);
    switch (rc) {
    case FG_LOCAL_WAITED:
        return;
    case FG_LOCAL_ASKED:
        m->pending++;
        if (fg__store_check_async(l, r->ask.key, r->ask.keylen,
                                  ask_cost(&r->ask), ask_age(&r->ask), 0,
                                  on_take, r) == FG_OK)
            return;
        m->pending--;
        answer(m, &r->ask, now, FG_ENOMEM, NULL, NULL);
        rc = FG_ENOMEM;
        break;
    case FG_OK:
        fg__shadow_decision(l, rc, &d);
        finish(r, rc, &d);
        return;
    }
    if (rc == FG_ENOMEM) {
        run_exact(r, now);
        return;
    }
    rc = fg__decide_by_policy(l, rc, r->key, r->keylen, r->cost, &d);
    fg__shadow_decision(l, rc, &d);
    finish(r, rc, &d);
}

/* The store decides 'r' exactly (no room here, a sync's view too old
 * while its sync is in flight, or takes that came back too late); the
 * views hold its units meanwhile, since the store may count them before a
 * view answered holds them. */
static void run_exact(mode_req *r, uint64_t now)
{
    fg_limiter *l = r->l;
    struct fg__mode *m = l->mode;
    fg_local_deciding(m->lc, r->key, r->keylen, r->cost, now);
    if (fg__check_async_exact(l, r->key, r->keylen, r->cost, on_exact, r) ==
        FG_OK)
        return;
    fg_local_decided(m->lc, r->key, r->keylen, r->cost, 0, now);
    fg_decision d;
    int rc = fg__decide_by_policy(l, FG_ENOMEM, r->key, r->keylen, r->cost, &d);
    fg__shadow_decision(l, rc, &d);
    finish(r, rc, &d);
}

int fg__mode_check_async(fg_limiter *l, const char *key, size_t keylen,
                         uint64_t cost, fg_check_cb cb, void *data)
{
    struct fg__mode *m = l->mode;
    if (!m->base) {
        /* A blocking store: decided now, as fg_check. */
        fg_decision d;
        d.shadowed = 0;
        int rc = l->check(l, key, keylen, cost, &d);
        cb(rc, &d, data);
        return FG_OK;
    }
    mode_req *r = m->spare;
    if (r)
        m->spare = NULL;
    else if (!(r = fg__malloc(sizeof(*r))))
        return FG_ENOMEM;
    r->l = l;
    r->cb = cb;
    r->data = data;
    r->cost = cost;
    r->takes = 0;
    r->keylen = keylen;
    if (keylen)
        memcpy(r->key, key, keylen);
    r->key[keylen] = '\0';
    m->pending++;
    run_req(r, now_us());
    return FG_OK;
}

/* A failure of the store, not of one key's value (a foreign key of
 * another type: sent again by every flush, it must not hold a drain). */
static int store_down(int rc)
{
    return rc == FG_EBREAKER || fg__is_store_failure(rc);
}

static void on_ask(int rc, const fg_decision *d, void *data)
{
    ask_req *a = data;
    struct fg__mode *m = a->l->mode;
    m->pending--;
    if (store_down(rc) && !m->send_rc)
        m->send_rc = rc;
    answer(m, &a->ask, now_us(), rc, d, NULL);
    fg__free(a);
}

/* A sync or a give-back, on the loop. */
static void send_async(fg_limiter *l, const fg_local_ask *ask)
{
    struct fg__mode *m = l->mode;
    if (ask->op == FG_LOCAL_GIVE) {
        /* Queued with the next batch; its outcome is not reported. */
        fg_local_ask a = *ask;
        int rc = give(l, &a);
        if (store_down(rc) && !m->send_rc)
            m->send_rc = rc;
        answer(m, &a, now_us(), rc, NULL, NULL);
        return;
    }
    ask_req *a = fg__malloc(sizeof(*a));
    if (a) {
        a->l = l;
        a->ask = *ask;
        m->pending++;
        /* A tick's syncs go out together, many keys at once, and nobody
         * waits for them: they may take up to an interval (a view they
         * come too late for is not used; its key is synced again). */
        uint32_t t = l->lim.sync_ms > l->lim.timeout_ms ? l->lim.sync_ms
                                                        : l->lim.timeout_ms;
        if (fg__store_check_async(l, ask->key, ask->keylen,
                                  ask->units | FG__COST_ADD, ask->age_us,
                                  l->lim.mode == FG_MODE_SYNC ? t : 0, on_ask,
                                  a) == FG_OK)
            return;
        m->pending--;
        fg__free(a);
    }
    fg_local_ask copy = *ask;
    answer(m, &copy, now_us(), FG_ENOMEM, NULL, NULL);
}

/* Send the work due (or, with 'all', everything held). A tick sends at
 * most TICK_BUDGET asks a turn of the loop and leaves the rest to the next
 * turn ('more'): a tick of hundreds of thousands of keys would otherwise
 * hold every other event of the loop (the checks) for as long as it takes
 * to encode them all (on the order of a second). */
#define TICK_BUDGET (32 * ASK_BATCH)

static void send_all_async(fg_limiter *l, int all)
{
    struct fg__mode *m = l->mode;
    fg_local_ask asks[ASK_BATCH];
    uint64_t now = now_us();
    size_t n, sent = 0;
    do {
        n = all ? fg_local_flush(m->lc, now, asks, ASK_BATCH)
                : fg_local_due(m->lc, now, asks, ASK_BATCH);
        for (size_t i = 0; i < n; i++)
            send_async(l, &asks[i]);
        sent += n;
    } while (n == ASK_BATCH && (all || sent < TICK_BUDGET));
    if (n == ASK_BATCH && !all) {
        struct timeval zero = {0, 0};
        evtimer_add(m->more, &zero);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_all_async(arg, 0);
}

/* ---- the limiter's side ----------------------------------------------------
 */

int fg__mode_init(fg_limiter *l, char *err, size_t errlen)
{
    struct fg__mode *m = fg__calloc(1, sizeof(*m));
    if (!m)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    /* On the memory store, the keys a limiter can hold there: the
     * store's max_keys (0 elsewhere: fg_local_new's default). */
    m->lc =
        fg_local_new(&l->lim, fg__store_memory_max_keys(l->st), err, errlen);
    if (!m->lc) {
        fg__free(m);
        return FG_EINVAL;
    }
    m->base = l->st->base;
    if (m->base) {
        uint64_t tick =
            l->lim.mode == FG_MODE_SYNC
                ? (uint64_t)l->lim.sync_ms * 1000
                : (l->lim.period_us < 100000 ? l->lim.period_us : 100000);
        struct timeval tv = {.tv_sec = (time_t)(tick / 1000000),
                             .tv_usec = (suseconds_t)(tick % 1000000)};
        m->tick = event_new(m->base, -1, EV_PERSIST, on_tick, l);
        m->more = evtimer_new(m->base, on_tick, l);
        if (!m->tick || !m->more || event_add(m->tick, &tv) != 0) {
            if (m->tick)
                event_free(m->tick);
            if (m->more)
                event_free(m->more);
            fg_local_free(m->lc);
            fg__free(m);
            return fg__seterr(err, errlen, FG_ENOMEM,
                              "cannot add the sync timer to the loop");
        }
    } else {
        pthread_mutex_init(&m->mu, NULL);
        pthread_cond_init(&m->synced, NULL);
        pthread_cond_init(&m->taken, NULL);
    }
    m->exact = l->check;
    l->mode = m;
    l->check = mode_check;
    return FG_OK;
}

void fg__mode_free(fg_limiter *l)
{
    struct fg__mode *m = l->mode;
    if (!m)
        return;
    if (m->tick) {
        event_free(m->tick);
        event_free(m->more);
    } else {
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->synced);
        pthread_cond_destroy(&m->taken);
    }
    fg_local_free(m->lc);
    fg__free(m->spare);
    fg__free(m);
    l->mode = NULL;
}

uint64_t fg__mode_refund(fg_limiter *l, const char *key, size_t keylen,
                         uint64_t cost, uint64_t age_us)
{
    struct fg__mode *m = l->mode;
    lock(m);
    uint64_t rest =
        fg_local_refund_at(m->lc, key, keylen, cost, now_us(), age_us);
    unlock(m);
    return rest;
}

void fg__mode_refund_store(fg_limiter *l, const char *key, size_t keylen)
{
    struct fg__mode *m = l->mode;
    lock(m);
    fg__local_store_refunded(m->lc, key, keylen, now_us());
    unlock(m);
}

int fg_limiter_set_local_keys(fg_limiter *l, uint64_t max_keys)
{
    if (!l || !l->mode || max_keys == 0 || max_keys > FG__MEMORY_MAX_KEYS)
        return FG_EINVAL;
    lock(l->mode);
    l->mode->lc->max_keys = max_keys;
    unlock(l->mode);
    return FG_OK;
}

uint64_t fg__mode_keys(fg_limiter *l)
{
    if (!l->mode)
        return 0;
    lock(l->mode);
    uint64_t n = fg_local_keys(l->mode->lc);
    unlock(l->mode);
    return n;
}

void fg__mode_forget(fg_limiter *l, const char *key, size_t keylen)
{
    struct fg__mode *m = l->mode;
    lock(m);
    fg_local_forget(m->lc, key, keylen);
    unlock(m);
}

int fg_limiter_sync(fg_limiter *l)
{
    if (l && fg__process_other(l->st->process))
        return FG_EPROCESS;
    if (!l || !l->mode)
        return FG_OK;
    if (l->mode->base) {
        /* The first failure since the last call (a sync answered late),
         * else of those sent now (a breaker open fails them at once). */
        int rc = l->mode->send_rc;
        l->mode->send_rc = 0;
        send_all_async(l, 1);
        if (!rc)
            rc = l->mode->send_rc;
        l->mode->send_rc = 0;
        return rc;
    }
    lock(l->mode);
    int rc = run_due_blocking(l, now_us(), 1);
    unlock(l->mode);
    return rc;
}

unsigned fg_limiter_pending(const fg_limiter *l)
{
    /* Refunds (a set's, a lease's give-backs) are queued on the store:
     * counted there, with any other refund of that store. Another
     * process's (a parent's, before fork) has nothing in flight here. */
    if (!l || fg__process_other(l->st->process))
        return 0;
    unsigned n = atomic_load(&((fg_limiter *)l)->inflight);
    return n + (l->mode ? l->mode->pending : 0) + fg__store_busy(l->st);
}

void fg_limiter_asks(fg_limiter *l, uint64_t *asked, uint64_t *failed)
{
    uint64_t a = 0, f = 0;
    if (l && l->mode && !fg__process_other(l->st->process)) {
        lock(l->mode);
        a = l->mode->asked;
        f = l->mode->failed;
        unlock(l->mode);
    }
    if (asked)
        *asked = a;
    if (failed)
        *failed = f;
}
