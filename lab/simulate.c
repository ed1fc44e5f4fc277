/* simulate.c -- one simulated run: N servers, one shared store, one user's
 * requests, on a virtual clock.
 *
 * Three kinds of event drive it: an arrival (the balancer gives the request
 * to a server), a server's timer tick (fg_local_due: its syncs and
 * give-backs), and a store command's reply. The store acts halfway through
 * the round trip and its reply arrives one round trip after the command was
 * sent: the command is run on the store when it is sent, with the store's
 * clock set to the instant it acts, since with one round trip for all the
 * store sees the commands in the order they were sent. A fixed window is
 * decided on the sender's clock, as the Redis store does (its key carries
 * the caller's window number), so its commands act at the send time.
 *
 * The servers' timers tick as floodgate's own do on an event loop: every
 * interval from a phase of their own, each tick sending what
 * fg_local_due says is due. A server with nothing to send, nothing in
 * flight and no units held that end in a give-back (a fixed window's
 * lapse at the key's next check, sending nothing) is not ticked until its
 * next request: a tick then would send nothing, and the next tick falls
 * where the timer would have put it. */
#include <stdlib.h>
#include <string.h>

#include "simulate.h"

enum { EV_ARRIVE = 0, EV_TICK = 1, EV_REPLY = 2 };

#define NONE       UINT32_MAX
#define REQ_BLOCK  4096
#define ASK_BATCH  64
#define LEASE_TICK 100000u /* the limiter's lease timer, at most */

static const char *const strategy_names[FG__SIM_NSTRATEGIES] = {
    "atomic", "sync", "lease", "local", "split"};

const char *fg__sim_strategy_name(int s)
{
    return s >= 0 && s < FG__SIM_NSTRATEGIES ? strategy_names[s] : "?";
}

int fg__sim_strategy_parse(const char *s)
{
    for (int i = 0; i < FG__SIM_NSTRATEGIES; i++)
        if (strcmp(s, strategy_names[i]) == 0)
            return i;
    return -1;
}

uint64_t fg__sim_span_us(const fg__sim_params *p)
{
    return p->arrival == FG__SIM_BURST ? p->spread_us : p->duration_us;
}

/* A request not yet decided: it waits for a take, its own or another's. */
typedef struct req {
    fg_local_waiter w; /* first: a waiter is its request */
    uint64_t arrived_us;
    uint32_t server;
    uint32_t id;    /* its index in the pool; the next free one while free */
    uint32_t takes; /* answered for it: after a few, decided exactly */
} req;

/* A store command in flight, and its answer. */
typedef struct pend {
    fg_local_ask ask;
    fg_decision d;
    int rc;
    uint32_t server;
    uint32_t req; /* the request a take was asked for, or NONE */
    uint32_t next_free;
} pend;

typedef struct server {
    fg_local *lc;
    uint64_t phase_us; /* its timer ticks at phase + k * interval */
    uint32_t inflight;
    uint8_t ticking; /* a tick of it is in the heap */
} server;

typedef struct sim {
    const fg__sim_params *p;
    fg__sim_result *r;
    int strategy;
    unsigned nsrv;
    uint64_t t0, period_us, tick_us, act_us;
    /* A reply later than the limit's timeout is a failure at the timeout
     * (the store still acts on the command, as Redis does). */
    uint64_t answer_us;
    int late;
    uint64_t waiting;        /* requests not yet decided */
    uint64_t last_answer_us; /* when the last decision reached its server */
    uint64_t store_now;      /* the memory store's clock */
    fg_store *st;
    /* atomic, sync, lease: the shared store's exact limit; local and
     * split: every server's own, each on a key of its own. */
    fg_limiter *lim;
    /* The limit decided exactly at each arrival, with no round trip, on a
     * key of its own: what the under figure counts from (a window's is
     * not always the limit: a sliding window's previous one weighs). */
    fg_limiter *ref;
    uint64_t ref_allowed;
    server *srv;
    fg__sim_heap heap;
    req **blocks;
    size_t nblocks;
    uint32_t req_free;
    pend *pends;
    uint32_t npends, pend_free;
    int windowed;      /* fixed and sliding windows: counted per window */
    int gives_back;    /* leased units end in a give-back (not fixed window) */
    uint64_t nwin;     /* the counters' size */
    uint64_t used_win; /* windows with an arrival or an admission */
    uint64_t *arrived_w, *allowed_w, *ref_w;
    /* The first arrival (the bucket is full then) and the last admission. */
    uint64_t first_at, last_at;
    uint64_t rr, rng;
    int oom;
    const char *key;
    size_t keylen;
} sim;

static uint64_t sim_clock(void *ctx)
{
    return *(const uint64_t *)ctx;
}

/* ---- pools: no allocation per event once they are big enough ---------- */

static req *req_at(sim *s, uint32_t id)
{
    return &s->blocks[id / REQ_BLOCK][id % REQ_BLOCK];
}

/* A request of the pool; blocks never move, since fg_local holds pointers
 * to the waiters in them. NULL when out of memory. */
static req *req_get(sim *s)
{
    if (s->req_free == NONE) {
        req **b = realloc(s->blocks, (s->nblocks + 1) * sizeof *b);
        if (!b)
            return NULL;
        s->blocks = b;
        req *blk = malloc(REQ_BLOCK * sizeof *blk);
        if (!blk)
            return NULL;
        b[s->nblocks] = blk;
        uint32_t base = (uint32_t)(s->nblocks * REQ_BLOCK);
        for (uint32_t i = REQ_BLOCK; i-- > 0;) {
            blk[i].id = s->req_free;
            s->req_free = base + i;
        }
        s->nblocks++;
    }
    uint32_t id = s->req_free;
    req *q = req_at(s, id);
    s->req_free = q->id;
    q->id = id;
    s->waiting++;
    return q;
}

static void req_put(sim *s, req *q)
{
    s->waiting--;
    uint32_t id = q->id;
    q->id = s->req_free;
    s->req_free = id;
}

/* A slot for a command in flight, or NONE when out of memory. The array
 * may move: hold indexes, not pointers, across a call that sends. */
static uint32_t pend_get(sim *s)
{
    if (s->pend_free == NONE) {
        uint32_t n = s->npends ? s->npends * 2 : 1024;
        pend *v = realloc(s->pends, (size_t)n * sizeof *v);
        if (!v)
            return NONE;
        for (uint32_t i = n; i-- > s->npends;) {
            v[i].next_free = s->pend_free;
            s->pend_free = i;
        }
        s->pends = v;
        s->npends = n;
    }
    uint32_t slot = s->pend_free;
    s->pend_free = s->pends[slot].next_free;
    return slot;
}

static void pend_put(sim *s, uint32_t slot)
{
    s->pends[slot].next_free = s->pend_free;
    s->pend_free = slot;
}

static void push(sim *s, uint64_t at, uint32_t kind, uint32_t who,
                 uint32_t slot)
{
    if (fg__sim_heap_push(&s->heap, at, kind, who, slot) < 0)
        s->oom = 1;
}

/* ---- counting ------------------------------------------------------------ */

/* The window of instant 'at', its counters grown to hold it (a decision
 * may come long after the last arrival). NONE when out of memory. */
static uint64_t window_of(sim *s, uint64_t at)
{
    if (!s->windowed)
        return 0;
    uint64_t w = (at - s->t0) / s->period_us;
    if (w >= s->nwin) {
        uint64_t n = s->nwin * 2 > w + 1 ? s->nwin * 2 : w + 1;
        uint64_t *a = realloc(s->arrived_w, n * sizeof *a);
        if (a)
            s->arrived_w = a;
        uint64_t *b = a ? realloc(s->allowed_w, n * sizeof *b) : NULL;
        if (b)
            s->allowed_w = b;
        uint64_t *c = b ? realloc(s->ref_w, n * sizeof *c) : NULL;
        if (!c) {
            s->oom = 1;
            return NONE;
        }
        s->ref_w = c;
        memset(a + s->nwin, 0, (n - s->nwin) * sizeof *a);
        memset(b + s->nwin, 0, (n - s->nwin) * sizeof *b);
        memset(c + s->nwin, 0, (n - s->nwin) * sizeof *c);
        s->nwin = n;
    }
    if (w + 1 > s->used_win)
        s->used_win = w + 1;
    return w;
}

/* A request that arrived at 'arrived' decided: counted in the window of
 * 'at', the instant on the clock of whoever decided (the store for an
 * exact check, the server for a local one), which is the window the
 * decision was made in; its answer reached the server at 'answered'. */
static void decided(sim *s, uint64_t arrived, uint64_t at, uint64_t answered,
                    int allowed)
{
    uint64_t wait = answered - arrived;
    if (answered > s->last_answer_us)
        s->last_answer_us = answered;
    s->r->decided++;
    s->r->wait_sum_us += wait;
    if (wait > s->r->wait_max_us)
        s->r->wait_max_us = wait;
    if (allowed) {
        uint64_t w = window_of(s, at);
        if (at > s->last_at)
            s->last_at = at;
        s->r->allowed++;
        if (w != NONE)
            s->allowed_w[w]++;
    }
}

/* The failure policy's decision at 'now', for a check the store could
 * not make. */
static void by_policy(sim *s, uint64_t arrived, uint64_t now)
{
    s->r->policy++;
    decided(s, arrived, now, now, s->p->lim.on_failure == FG_FAIL_OPEN);
}

/* ---- the store ----------------------------------------------------------- */

/* Run the command in 'slot' on the store as it will act on it, and schedule
 * its reply one round trip after 'now'. */
static void store_do(sim *s, uint32_t slot, uint64_t now)
{
    pend *pd = &s->pends[slot];
    s->store_now = now + s->act_us;
    switch (pd->ask.op) {
    case FG_LOCAL_ADD:
        pd->rc = fg_add_at(s->lim, pd->ask.key, pd->ask.keylen, pd->ask.units,
                           pd->ask.age_us, &pd->d);
        break;
    case FG_LOCAL_TAKE:
    case FG_LOCAL_CHECK:
        pd->rc = fg_check(s->lim, pd->ask.key, pd->ask.keylen, pd->ask.units,
                          &pd->d);
        break;
    case FG_LOCAL_GIVE:
        pd->rc = fg_refund_at(s->lim, pd->ask.key, pd->ask.keylen,
                              pd->ask.units, pd->ask.age_us, pd->ask.hold_us);
        break;
    }
    s->r->store_commands++;
    s->srv[pd->server].inflight++;
    if (s->late)
        pd->rc = FG_EBACKEND;
    push(s, now + s->answer_us, EV_REPLY, pd->server, slot);
}

static void send_ask(sim *s, uint32_t server, const fg_local_ask *a,
                     uint32_t rq, uint64_t now)
{
    uint32_t slot = pend_get(s);
    if (slot == NONE) {
        s->oom = 1;
        return;
    }
    pend *pd = &s->pends[slot];
    pd->ask = *a;
    pd->server = server;
    pd->req = rq;
    store_do(s, slot, now);
}

/* An exact check at the store, decided now for the request that arrived
 * at 'arrived' (the answer reaches the server a round trip later). For a
 * server with local state ('server' below NONE), what the store counted
 * is told to it, as the limiter does. */
static void exact_check(sim *s, uint64_t now, uint64_t arrived, uint32_t server)
{
    fg_decision d;
    fg_local *lc = server != NONE ? s->srv[server].lc : NULL;
    s->store_now = now + s->act_us;
    fg_local_deciding(lc, s->key, s->keylen, 1, now);
    int rc = fg_check(s->lim, s->key, s->keylen, 1, &d);
    s->r->store_commands++;
    if (s->late)
        rc = FG_EBACKEND;
    fg_local_decided(lc, s->key, s->keylen, 1, rc == FG_OK && d.allowed,
                     now + s->answer_us);
    if (rc == FG_OK)
        decided(s, arrived, s->store_now, now + s->answer_us, d.allowed);
    else
        by_policy(s, arrived, now + s->answer_us);
}

/* ---- the servers --------------------------------------------------------- */

/* Make sure server 'i' ticks at its timer's next tick from the instant its
 * local state says the next interval is over. */
static void wake_server(sim *s, uint32_t i, uint64_t now)
{
    server *v = &s->srv[i];
    uint64_t due = fg_local_next_due(v->lc);
    if (v->ticking || due == 0)
        return;
    uint64_t at = due > now ? due : now;
    at += (s->tick_us - (at - v->phase_us) % s->tick_us) % s->tick_us;
    v->ticking = 1;
    push(s, at, EV_TICK, i, 0);
}

static void check_req(sim *s, req *q, uint64_t now)
{
    uint32_t i = q->server;
    fg_decision d;
    fg_local_ask a;
    int rc =
        fg_local_check(s->srv[i].lc, s->key, s->keylen, 1, now, &d, &a, &q->w);
    switch (rc) {
    case FG_OK:
        decided(s, q->arrived_us, now, now, d.allowed);
        req_put(s, q);
        break;
    case FG_LOCAL_ASKED:
        send_ask(s, i, &a, q->id, now);
        break;
    case FG_LOCAL_WAITED:
        break;
    case FG_ENOMEM:
        /* No room for the key here: the store decides it exactly, as the
         * limiter does. */
        exact_check(s, now, q->arrived_us, i);
        req_put(s, q);
        break;
    default:
        by_policy(s, q->arrived_us, now);
        req_put(s, q);
        break;
    }
    wake_server(s, i, now);
}

static void tick(sim *s, uint32_t i, uint64_t now)
{
    server *v = &s->srv[i];
    fg_local_ask asks[ASK_BATCH];
    size_t n, sent = 0;
    v->ticking = 0;
    do {
        n = fg_local_due(v->lc, now, asks, ASK_BATCH);
        for (size_t k = 0; k < n; k++)
            send_ask(s, i, &asks[k], NONE, now);
        sent += n;
    } while (n == ASK_BATCH);
    if (sent || v->inflight || (s->gives_back && fg_local_held(v->lc)))
        wake_server(s, i, now);
}

static void reply(sim *s, uint32_t slot, uint64_t now)
{
    pend *pd = &s->pends[slot];
    uint32_t i = pd->server;
    server *v = &s->srv[i];
    fg_local_waiter *wake = NULL;
    v->inflight--;
    int again = fg_local_answer(v->lc, &pd->ask, now, pd->rc,
                                pd->rc == FG_OK ? &pd->d : NULL, &wake);
    if (again) {
        /* A take of what is left, sent as the reply arrives. */
        store_do(s, slot, now);
        wake_server(s, i, now);
        return;
    }
    uint32_t rq = pd->req;
    int rc = pd->rc;
    pend_put(s, slot);
    if (rq != NONE) {
        req *q = req_at(s, rq);
        if (rc != FG_OK) {
            by_policy(s, q->arrived_us, now);
            req_put(s, q);
        } else if (++q->takes > 3) {
            /* Its takes keep coming back after their window (a round
             * trip longer than it): decided exactly, as the limiter does
             * after as many. */
            exact_check(s, now, q->arrived_us, i);
            req_put(s, q);
        } else {
            check_req(s, q, now);
        }
    }
    /* Woken in order; a waiter checked again may wait anew, which rewrites
     * its 'next': read it first. A waiter woken by as many takes is
     * decided exactly too. */
    while (wake) {
        fg_local_waiter *next = wake->next;
        req *w = (req *)wake;
        if (++w->takes > 3) {
            exact_check(s, now, w->arrived_us, i);
            req_put(s, w);
        } else {
            check_req(s, w, now);
        }
        wake = next;
    }
    wake_server(s, i, now);
}

/* ---- a request ----------------------------------------------------------- */

static uint32_t balance(sim *s)
{
    if (s->p->balance_random)
        return (uint32_t)(fg__sim_rng_next(&s->rng) % s->nsrv);
    uint32_t i = (uint32_t)(s->rr % s->nsrv);
    s->rr++;
    return i;
}

static void arrive(sim *s, uint64_t now)
{
    uint32_t i = balance(s);
    uint64_t w = window_of(s, now);
    if (w == NONE)
        return;
    if (!s->r->requests++)
        s->first_at = now;
    s->arrived_w[w]++;
    if (s->ref) {
        /* When an exact check of it would act in the store, and counted in
         * that window, as the admissions are. */
        uint64_t saved = s->store_now, at = now + s->act_us;
        uint64_t rw = window_of(s, at);
        fg_decision d;
        s->store_now = at;
        if (rw != NONE && fg_check(s->ref, "ref", 3, 1, &d) == FG_OK &&
            d.allowed) {
            s->ref_allowed++;
            s->ref_w[rw]++;
        }
        s->store_now = saved;
    }
    if (s->strategy == FG__SIM_ATOMIC) {
        exact_check(s, now, now, NONE);
    } else if (s->strategy == FG__SIM_LOCAL || s->strategy == FG__SIM_SPLIT) {
        /* Each server's own counter: the server's number is its key. */
        char key[16];
        int n = snprintf(key, sizeof key, "%u", i);
        fg_decision d;
        s->store_now = now;
        if (fg_check(s->lim, key, (size_t)n, 1, &d) == FG_OK)
            decided(s, now, now, now, d.allowed);
        else
            by_policy(s, now, now);
    } else {
        req *q = req_get(s);
        if (!q) {
            s->oom = 1;
            return;
        }
        q->arrived_us = now;
        q->server = i;
        q->takes = 0;
        check_req(s, q, now);
    }
}

/* ---- the run ------------------------------------------------------------- */

/* The limit's figures once the run is over. */
static void judge(sim *s, fg_limit *lim)
{
    fg__sim_result *r = s->r;
    const fg__sim_params *p = s->p;
    uint64_t span = fg__sim_span_us(p);
    if (lim->algorithm == FG_TOKEN_BUCKET) {
        uint64_t burst = lim->burst ? lim->burst : lim->limit;
        r->windows = 0;
        /* From the first arrival, when the bucket is full, to the last
         * admission on its decider's clock: the arrivals' span, and a
         * round trip more when a decision waits for the store. (A lease
         * spends units its take got from the store earlier; an exact
         * check is decided half a round trip after its arrival.) */
        uint64_t took = r->allowed && s->last_at > s->first_at
                            ? s->last_at - s->first_at
                            : 0;
        if (took < span)
            took = span;
        r->limit_allows = burst + (uint64_t)((unsigned __int128)lim->limit *
                                             took / lim->period_us);
        /* What the limit allows exactly on these arrivals. */
        uint64_t ideal = s->ref_allowed;
        r->over_total = r->over_worst =
            r->allowed > r->limit_allows ? r->allowed - r->limit_allows : 0;
        r->under_total = r->under_worst =
            ideal > r->allowed ? ideal - r->allowed : 0;
    } else {
        r->windows = s->used_win;
        r->limit_allows = lim->limit * s->used_win;
        for (uint64_t w = 0; w < s->used_win; w++) {
            uint64_t got = s->allowed_w[w], ideal = s->ref_w[w];
            uint64_t over = got > lim->limit ? got - lim->limit : 0;
            uint64_t under = ideal > got ? ideal - got : 0;
            r->over_total += over;
            r->under_total += under;
            if (over > r->over_worst)
                r->over_worst = over;
            if (under > r->under_worst)
                r->under_worst = under;
        }
    }
    /* The stated bounds, as fg_limit_bound gives them. */
    if (p->arrival == FG__SIM_BURST)
        r->arrival_rate = span ? (double)p->burst * 1e6 / (double)span : 0;
    else
        r->arrival_rate =
            p->load * (double)lim->limit * 1e6 / (double)lim->period_us;
    fg_mode_bound b;
    memset(&b, 0, sizeof b);
    if (lim->mode != FG_MODE_EXACT)
        fg_limit_bound(lim, s->nsrv, p->rtt_us, &b);
    switch (s->strategy) {
    case FG__SIM_ATOMIC:
        r->has_over_bound = 1;
        r->over_bound = 0;
        break;
    case FG__SIM_SYNC: {
        r->has_over_bound = 1;
        double cap = (double)b.over_cap;
        /* A burst arrives at burst / spread, and nothing after: over any
         * span of W, at burst / max(spread, W) (lab/bound.c). */
        double rate = r->arrival_rate;
        if (p->arrival == FG__SIM_BURST)
            rate = (double)p->burst * 1e6 /
                   (double)(span > b.over_window_us ? span : b.over_window_us);
        double others = rate * (s->nsrv - 1) / s->nsrv;
        /* A rate times the span, plus at most one request per other
         * server (fg_limit_bound). */
        double v =
            others * (double)b.over_window_us / 1e6 + (double)(s->nsrv - 1);
        r->over_bound = v < cap ? v : cap;
        break;
    }
    case FG__SIM_LEASE:
        r->has_over_bound = r->has_under_bound = 1;
        r->over_bound = 0;
        r->under_bound = b.under_cap;
        break;
    default:
        break;
    }
}

static void sim_free(sim *s)
{
    if (s->srv)
        for (unsigned i = 0; i < s->nsrv; i++)
            fg_local_free(s->srv[i].lc);
    free(s->srv);
    for (size_t b = 0; b < s->nblocks; b++)
        free(s->blocks[b]);
    free(s->blocks);
    free(s->pends);
    free(s->arrived_w);
    free(s->allowed_w);
    free(s->ref_w);
    fg__sim_heap_free(&s->heap);
    fg_limiter_free(s->lim);
    fg_limiter_free(s->ref);
    fg_store_close(s->st);
}

int fg__sim_run(const fg__sim_params *p, int strategy, unsigned servers,
                fg__sim_result *r, char *err, size_t errlen)
{
    sim s;
    memset(&s, 0, sizeof s);
    memset(r, 0, sizeof *r);
    r->strategy = strategy;
    r->servers = servers;
    s.p = p;
    s.r = r;
    s.strategy = strategy;
    s.nsrv = servers;
    s.key = "scalper";
    s.keylen = strlen(s.key);
    s.req_free = s.pend_free = NONE;
    s.rng = p->seed ^ 0x6c62272e07bb0142ull;
    fg__sim_heap_init(&s.heap);

    fg_limit lim = p->lim;
    lim.mode = strategy == FG__SIM_SYNC    ? FG_MODE_SYNC
               : strategy == FG__SIM_LEASE ? FG_MODE_LEASE
                                           : FG_MODE_EXACT;
    s.period_us = lim.period_us;
    /* Start on a window's edge, far enough from 0 for any interval. */
    s.t0 = (1000000000ull / lim.period_us + 1) * lim.period_us;
    s.store_now = s.t0;
    s.act_us = lim.algorithm == FG_FIXED_WINDOW ? 0 : p->rtt_us / 2;
    s.late = p->rtt_us > (uint64_t)lim.timeout_ms * 1000;
    s.answer_us = s.late ? (uint64_t)lim.timeout_ms * 1000 : p->rtt_us;
    if (strategy == FG__SIM_LOCAL || strategy == FG__SIM_SPLIT)
        s.act_us = 0;
    uint64_t span = fg__sim_span_us(p);
    s.windowed = lim.algorithm != FG_TOKEN_BUCKET;
    s.gives_back = lim.algorithm != FG_FIXED_WINDOW;
    s.nwin = s.windowed ? span / lim.period_us + 2 : 1;
    s.arrived_w = calloc(s.nwin, sizeof *s.arrived_w);
    s.allowed_w = calloc(s.nwin, sizeof *s.allowed_w);
    s.ref_w = calloc(s.nwin, sizeof *s.ref_w);
    s.srv = calloc(servers, sizeof *s.srv);
    if (!s.arrived_w || !s.allowed_w || !s.ref_w || !s.srv)
        goto oom;

    fg_memory_options mo = {0, sim_clock, &s.store_now};
    if (strategy == FG__SIM_LOCAL || strategy == FG__SIM_SPLIT)
        mo.max_keys = (uint64_t)servers * 2 + 16;
    s.st = fg_store_open_memory(&mo, err, errlen);
    if (!s.st)
        goto fail;
    fg_limit shared = lim;
    shared.mode = FG_MODE_EXACT;
    if (strategy == FG__SIM_SPLIT) {
        shared.limit = lim.limit / servers ? lim.limit / servers : 1;
        shared.burst = 0;
    }
    s.lim = fg_limiter_new(s.st, &shared, err, errlen);
    if (!s.lim)
        goto fail;
    fg_limit ref = lim;
    ref.mode = FG_MODE_EXACT;
    snprintf(ref.name, sizeof ref.name, "%s", "reference");
    s.ref = fg_limiter_new(s.st, &ref, err, errlen);
    if (!s.ref)
        goto fail;
    if (lim.mode != FG_MODE_EXACT) {
        s.tick_us = lim.mode == FG_MODE_SYNC     ? (uint64_t)lim.sync_ms * 1000
                    : lim.period_us < LEASE_TICK ? lim.period_us
                                                 : LEASE_TICK;
        for (unsigned i = 0; i < servers; i++) {
            s.srv[i].lc = fg_local_new(&lim, 1024, err, errlen);
            if (!s.srv[i].lc)
                goto fail;
            /* Each server's timer started when it did: anywhere in an
             * interval. */
            s.srv[i].phase_us = fg__sim_rng_next(&s.rng) % s.tick_us;
        }
    }

    double rate = p->load * (double)lim.limit * 1e6 / (double)lim.period_us;
    fg__sim_arrivals arr;
    fg__sim_arrivals_init(&arr, p->arrival, s.t0, span, rate, p->burst,
                          p->seed);
    uint64_t at, last = s.t0;
    int arriving = fg__sim_arrivals_next(&arr, &at);
    if (arriving)
        push(&s, at, EV_ARRIVE, 0, 0);
    /* Once every request is decided, what is left to send (the last
     * syncs, the give-backs of leases, at most a second long) is sent
     * and answered within this; a store that answers no command in time
     * would keep the syncs of what failed going for ever. */
    uint64_t tail_us = 1000000 + 4 * (s.tick_us + s.answer_us);
    fg__sim_event ev;
    while (!s.oom && fg__sim_heap_pop(&s.heap, &ev)) {
        if (!arriving && !s.waiting && ev.at_us > s.last_answer_us + tail_us)
            break;
        r->events++;
        last = ev.at_us;
        switch (ev.kind) {
        case EV_ARRIVE:
            arrive(&s, ev.at_us);
            arriving = fg__sim_arrivals_next(&arr, &at);
            if (arriving)
                push(&s, at, EV_ARRIVE, 0, 0);
            break;
        case EV_TICK:
            tick(&s, ev.who, ev.at_us);
            break;
        case EV_REPLY:
            reply(&s, ev.slot, ev.at_us);
            break;
        }
    }
    if (s.oom)
        goto oom;
    /* To the last event, or the last answer (an exact check's is no
     * event of its own). */
    r->sim_us = (last > s.last_answer_us ? last : s.last_answer_us) - s.t0;
    judge(&s, &lim);
    sim_free(&s);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    sim_free(&s);
    return -1;
}
