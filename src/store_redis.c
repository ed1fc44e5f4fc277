/* store_redis.c -- the Redis store: counters shared by every server.
 *
 * Two clients share one URL, one set of scripts and one backoff, all held
 * by one node (redis_conn.c); what they send and how a reply becomes a
 * decision is the protocol of redis_proto.c, which both drive:
 *   - blocking (fg_check): a check takes a connection from the node's pool
 *     and runs its protocol's exchanges on it against its own deadline;
 *   - asynchronous (fg_check_async): checks are pipelined on the node's
 *     one async connection, each with a slot matching it to its replies in
 *     order; token bucket checks wait for the loop's next write and go out
 *     as one EVALSHA of up to BATCH_MAX checks, which Redis runs in order,
 *     as if each were its own call (the script's call overhead, TIME, and a
 *     hot key's GET and SET are then paid once per batch); deadlines are
 *     one libevent timer, since hiredis 0.14 has none.
 * Commands are formatted on the stack (fg__redis_format).
 *
 * Per algorithm (DESIGN.md 3), one round trip each:
 *   fixed_window   INCRBY k cost; PEXPIRE k ttl NX   (pipelined, no Lua)
 *   sliding_window EVALSHA sliding 1 base period limit cost now
 *   token_bucket   EVALSHA token 1 k scale unit_us unit_frac depth_us
 *                  depth_frac t_scaled cost now
 *                  (async: EVALSHA token n k1..kn, then the eight per check)
 *   naive_get_set  GET k, then SET k n PX ttl        (two round trips)
 * Refunds (fg_refund_at): EVALSHA refund 1 k kind cost now p1 [p2 [p3 p4]]
 * (fixed: the taking window's key, limit; sliding: period, age; token:
 * scale, unit_us, unit_frac, hold), one script for the three atomic
 * algorithms; naive_get_set has none.
 * Keys: prefix + name + ":{" + key + "}" + ":" window, binary-safe. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "redis_admin.h"
#include "redis_conn.h"
#include "redis_proto.h"
#include "redis_store.h"
#include "store.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

/* A connection whose oldest unanswered command is this far past its
 * deadline is presumed dead and replaced. */
#define STALL_US 1000000u
/* Deadline timers are armed this much early, and expire what is due within
 * it, to absorb the loop's dispatch overhead. Precision otherwise comes from
 * the caller's event base: libevent's default clock is
 * CLOCK_MONOTONIC_COARSE (often 4 ms ticks); EVENT_BASE_FLAG_PRECISE_TIMER
 * makes deadlines exact (README, "The Redis store"). */
#define TIMER_SLACK_US 100u
/* The most token bucket checks one EVALSHA carries. The batch's keys must
 * live on one node: true of a single Redis (sharding and Cluster would
 * batch per node). */
#define BATCH_MAX 64

typedef struct fg__aslot aslot;
typedef struct rfund rfund;

typedef struct redis_store {
    fg_store base;
    fg__rnode node;
    fg_clock_fn clock;
    void *clock_ctx;

    /* Asynchronous client (node.evb != NULL); the loop's thread only. */
    struct event *timer;
    uint64_t timer_at;  /* 0: not armed */
    aslot *head, *tail; /* awaiting replies, oldest first */
    aslot *free_slots;
    rfund *free_refunds;  /* records of refunds no longer in flight */
    unsigned refunds_out; /* refunds queued and not yet answered */
    char *bbuf;           /* a batch's command, formatted */
    size_t bcap;
    int closing;

    /* A node of Redis Cluster (fg__store_redis_set_cluster). */
    fg__redis_redirect_fn redirect;
    void *redirect_owner;
} redis_store;

/* A check of the async client awaiting its replies. */
struct fg__aslot {
    aslot *prev, *next;
    fg__req *req; /* NULL once completed early (deadline passed) */
    fg__raconn *conn;
    uint64_t deadline_us; /* monotonic, kept after the check completes */
    fg__rcheck k;         /* the check's protocol */
    aslot *bnext;         /* the next check of the same batch */
    int bcount;           /* in a batch's first slot: its checks */
    int eval;             /* in a batch's first slot: sent with EVAL */
    aslot *wnext;         /* durable: the next check of the same WAIT */
    fg_decision wd;       /* durable: the decision the WAIT confirms */
    int held;             /* durable: allowed, waiting for the WAIT */
    uint64_t sent_us;     /* monotonic: when the check was submitted */
    int asked;            /* sent with ASKING: its give-back is too */
};

/* A refund in flight on the async client, recycled through
 * 'free_refunds', so that a refund allocates nothing once the loop is
 * warm. */
struct rfund {
    rfund *next; /* in 'free_refunds' */
    redis_store *st;
    fg__rrefund r;
};

static const fg__store_ops redis_ops, redis_async_ops;

static uint64_t wall_clock(void *ctx)
{
    (void)ctx;
    return fg__wall_us();
}

/* The clock refund ages are read on: a clock injected for tests, else
 * the monotonic one (the wall clock and Redis TIME run at its rate, and it
 * never steps back). */
static uint64_t redis_now(fg_store *s)
{
    redis_store *st = (redis_store *)s;
    return st->clock == wall_clock ? fg__mono_precise_us()
                                   : st->clock(st->clock_ctx);
}

/* The time a check sends: the caller's clock for windows and
 * 'clock_client' limits, else 0 (the script reads Redis TIME). */
static uint64_t check_now(redis_store *st, const fg_limiter *l)
{
    if (l->p.algorithm == FG_FIXED_WINDOW ||
        l->p.algorithm == FG_NAIVE_GET_SET || l->lim.clock_client) {
        uint64_t t = st->clock(st->clock_ctx);
        return t ? t : 1;
    }
    return 0;
}

/* PEXPIRE ... NX answered with an error: Redis before 7.0 has no NX, and
 * window keys would then never expire. Say so loudly. */
static int pexpire_error(fg__rnode *nd, const redisReply *r)
{
    int rc = fg__rcheck_aside_reply(r);
    if (rc == FG_EPROTO)
        fg__rnode_set_error(nd,
                            "redis %.200s: PEXPIRE NX refused (%.200s); "
                            "fixed_window needs Redis 7.0 or later",
                            r->str);
    return rc;
}

/* ---- Blocking client --------------------------------------------------- */

/* Run check 'k' on 'c' by 'deadline': each stage's commands go out
 * together and their replies feed the protocol, until it decides. */
/* "WAIT 1 ms", with the time left before 'deadline' (at least 1 ms: 0
 * would wait for ever). */
static void wait_cmd(fg__rcmd *cmd, uint64_t deadline)
{
    uint64_t now = fg__mono_precise_us();
    uint64_t ms = deadline > now + 1000 ? (deadline - now) / 1000 : 1;
    cmd->argc = 3;
    cmd->argv[0] = "WAIT";
    cmd->len[0] = 4;
    cmd->argv[1] = "1";
    cmd->len[1] = 1;
    cmd->len[2] = fg__redis_u64(cmd->ttl, ms);
    cmd->argv[2] = cmd->ttl;
}

/* WAIT's reply: at least one replica holds the writes before it. */
static int replicated(const redisReply *w)
{
    return w && w->type == REDIS_REPLY_INTEGER && w->integer >= 1;
}

static int not_replicated(fg__rnode *nd)
{
    fg__rnode_set_error_as(nd, FG_ETIMEOUT, "redis %.200s: %.200s",
                           "no replica confirmed the write in time "
                           "(durable = replica)");
    return FG_ETIMEOUT;
}

/* Send 'cmd' without waiting for it (the next exchange on its connection
 * drops the reply): on 'c', or, when a reply is still owed on 'c' (a late
 * WAIT), on another connection of 'nd', got within 'timeout_us'. */
static void send_unwaited(fg__rnode *nd, fg__rsconn *c, uint64_t timeout_us,
                          int asking, fg__rcmd *cmd)
{
    fg__rsconn other;
    fg__rsconn *g = c;
    if (c->broken) {
        if (fg__rpool_get(nd, fg__mono_precise_us() + timeout_us, &other) !=
            FG_OK)
            return;
        g = &other;
    }
    int ok = 1;
    if (asking) { /* the check went to a slot's importing node */
        fg__rcmd ask;
        ask.argc = 1;
        ask.argv[0] = "ASKING";
        ask.len[0] = 6;
        ok = fg__rsync_append(g, &ask) == FG_OK;
        g->skip += ok;
    }
    if (ok && fg__rsync_append(g, cmd) == FG_OK) {
        g->skip++;
        fg__rsync_send_now(g);
    }
    if (g == &other)
        fg__rpool_put(nd, &other);
}

/* A durable check that no replica confirmed fails, and its policy decides:
 * unless that admits it (open), its units go back on the master. */
static void give_back_unconfirmed(redis_store *st, fg__rsconn *c, fg_limiter *l,
                                  const char *key, size_t keylen, uint64_t cost,
                                  uint64_t start, const fg_decision *d)
{
    if (l->lim.on_failure == FG_FAIL_OPEN)
        return;
    uint64_t now = fg__mono_precise_us();
    fg__taken t = fg__taken_of(&l->p, now - start, d->reset_us);
    fg__rrefund rf;
    if (fg__rrefund_init(&rf, &l->p, l->store_data, key, keylen, cost,
                         check_now(st, l), &t) != FG_OK)
        return;
    fg__rrefund_cmd(&rf, &st->node.shas);
    send_unwaited(&st->node, c, (uint64_t)l->lim.timeout_ms * 1000u, 0, &rf.k);
}

/* Run check 'k' on 'c'. '*unconfirmed' is set when the check was allowed
 * but no replica confirmed it (durable): its units are then on the master,
 * for a request the policy decides. A refusal needs no replica: it stands,
 * WAIT answered or not. */
static int sync_run(fg__rnode *nd, fg__rsconn *c, fg__rcheck *k,
                    uint64_t deadline, uint64_t timeout_us, int asking,
                    int durable, fg_decision *d, int *unconfirmed, char *errbuf,
                    size_t errlen)
{
    for (;;) {
        redisReply *r[2] = {0};
        fg__rcmd cmd;
        int n = fg__rcheck_ncmds(k), rc, asked = asking;
        for (int i = 0; i < n; i++) {
            if (asked) {
                /* ASKING lets only the next command in: one before each
                 * (a fixed window's PEXPIRE too). */
                cmd.argc = 1;
                cmd.argv[0] = "ASKING";
                cmd.len[0] = 6;
                if (fg__rsync_append(c, &cmd) != FG_OK)
                    return FG_ENOMEM;
            }
            fg__rcheck_cmd(k, i, &nd->shas, &cmd);
            if (fg__rsync_append(c, &cmd) != FG_OK)
                return FG_ENOMEM;
        }
        asking = 0;
        redisReply *w = NULL;
        if (durable) {
            wait_cmd(&cmd, deadline);
            if (fg__rsync_append(c, &cmd) != FG_OK)
                return FG_ENOMEM;
        }
        redisReply *all[4] = {0}; /* with ASKING: its +OK before each */
        rc =
            fg__rsync_exchange(c, asked ? 2 * n : n, asked ? all : r, deadline);
        for (int i = 0; asked && rc == FG_OK && i < n; i++) {
            freeReplyObject(all[2 * i]);
            r[i] = all[2 * i + 1];
        }
        int wrc = FG_OK; /* WAIT's exchange: it may not answer in time */
        if (rc == FG_OK && durable)
            wrc = fg__rsync_exchange(c, 1, &w, deadline);
        if (rc != FG_OK) {
            for (int i = 0; i < n; i++)
                freeReplyObject(r[i]);
            return rc;
        }
        rc = fg__rcheck_reply(k, r[0], d);
        if ((rc == FG_OK || rc == FG__RSTEP_GIVEBACK) && d->allowed &&
            durable && (wrc != FG_OK || !replicated(w))) {
            rc = wrc != FG_OK ? wrc : not_replicated(nd);
            *unconfirmed = 1;
        } else if (wrc != FG_OK && rc == FG__RSTEP_AGAIN) {
            rc = wrc; /* NOSCRIPT, on a connection that owes a reply */
        }
        freeReplyObject(w);
        if (rc < 0 && errbuf && r[0]->type == REDIS_REPLY_ERROR)
            snprintf(errbuf, errlen, "%.*s", (int)r[0]->len, r[0]->str);
        if (n > 1 && rc >= FG_OK && r[1]->type == REDIS_REPLY_ERROR)
            rc = pexpire_error(nd, r[1]);
        for (int i = 0; i < n; i++)
            freeReplyObject(r[i]);
        if (rc == FG__RSTEP_GIVEBACK) {
            fg__rcheck_cmd(k, 0, &nd->shas, &cmd);
            send_unwaited(nd, c, timeout_us, asked, &cmd);
            return FG_OK;
        }
        if (rc != FG__RSTEP_AGAIN)
            return rc;
    }
}

int fg__store_redis_check_ex(fg_store *s, fg_limiter *l, const char *key,
                             size_t keylen, uint64_t cost, int asking,
                             fg_decision *d, char *errbuf, size_t errlen)
{
    redis_store *st = (redis_store *)s;
    uint64_t start = fg__mono_precise_us();
    uint64_t deadline = start + (uint64_t)l->lim.timeout_ms * 1000u;
    fg__rsconn c;
    fg__rcheck k;
    int unconfirmed = 0;
    int rc = fg__rcheck_init(&k, &l->p, l->store_data, key, keylen, cost,
                             check_now(st, l));
    if (rc != FG_OK)
        return rc;
    rc = fg__rpool_get(&st->node, deadline, &c);
    if (rc != FG_OK)
        return rc;
    rc = sync_run(&st->node, &c, &k, deadline, deadline - start, asking,
                  l->lim.durable, d, &unconfirmed, errbuf, errlen);
    if (unconfirmed)
        give_back_unconfirmed(st, &c, l, key, keylen, cost, start, d);
    fg__rpool_put(&st->node, &c);
    if (rc != FG_OK)
        fg__rnode_check_error(&st->node, rc);
    return rc;
}

static int redis_check(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen, uint64_t cost, fg_decision *d)
{
    return fg__store_redis_check_ex(s, l, key, keylen, cost, 0, d, NULL, 0);
}

/* Give back 'cost' units of 'key' on a blocking connection, waiting for
 * the reply within the limit's timeout: one round trip (two after
 * NOSCRIPT). */
static int redis_refund(fg_store *s, fg_limiter *l, const char *key,
                        size_t keylen, uint64_t cost, const fg__taken *t)
{
    redis_store *st = (redis_store *)s;
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    fg__rsconn c;
    fg__rrefund rf;
    int rc = fg__rrefund_init(&rf, &l->p, l->store_data, key, keylen, cost,
                              check_now(st, l), t);
    if (rc != FG_OK)
        return rc;
    rc = fg__rpool_get(&st->node, deadline, &c);
    if (rc != FG_OK)
        return rc;
    do {
        redisReply *r = NULL;
        fg__rrefund_cmd(&rf, &st->node.shas);
        rc = fg__rsync_append(&c, &rf.k);
        if (rc == FG_OK)
            rc = fg__rsync_exchange(&c, 1, &r, deadline);
        if (rc != FG_OK)
            break;
        rc = fg__rrefund_reply(&rf, r);
        freeReplyObject(r);
    } while (rc == FG__RSTEP_AGAIN);
    fg__rpool_put(&st->node, &c);
    return rc;
}

/* Run an operator's peek or reset 'a' on a blocking connection within
 * the limit's timeout (on an async store too: its node keeps a blocking
 * pool). One round trip; a sliding window's reset on Redis TIME, two. */
static int admin_run(redis_store *st, const fg_limiter *l, fg__radmin *a,
                     fg_decision *d)
{
    uint64_t deadline =
        fg__mono_precise_us() + (uint64_t)l->lim.timeout_ms * 1000u;
    fg__rsconn c;
    int rc = fg__rpool_get(&st->node, deadline, &c);
    if (rc != FG_OK)
        return rc;
    do {
        redisReply *r = NULL;
        fg__rcmd cmd;
        fg__radmin_cmd(a, &cmd);
        rc = fg__rsync_append(&c, &cmd);
        if (rc == FG_OK)
            rc = fg__rsync_exchange(&c, 1, &r, deadline);
        if (rc != FG_OK)
            break;
        rc = fg__radmin_reply(a, r, d);
        freeReplyObject(r);
    } while (rc == FG__RSTEP_AGAIN);
    fg__rpool_put(&st->node, &c);
    if (rc != FG_OK)
        fg__rnode_check_error(&st->node, rc);
    return rc;
}

static int redis_peek(fg_store *s, fg_limiter *l, const char *key,
                      size_t keylen, fg_decision *d)
{
    redis_store *st = (redis_store *)s;
    fg__radmin a;
    int rc =
        fg__rpeek_init(&a, &l->p, l->store_data, key, keylen, check_now(st, l));
    return rc == FG_OK ? admin_run(st, l, &a, d) : rc;
}

static int redis_reset(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen)
{
    redis_store *st = (redis_store *)s;
    fg__radmin a;
    int rc = fg__rreset_init(&a, &l->p, l->store_data, key, keylen,
                             check_now(st, l));
    return rc == FG_OK ? admin_run(st, l, &a, NULL) : rc;
}

/* ---- Asynchronous client ---------------------------------------------- */

static redis_store *store_of(const fg__raconn *cn)
{
    return cn->st->owner;
}

static void chain_fail(redis_store *st, aslot *s, int rc);
static void on_wait(redisAsyncContext *ac, void *reply, void *priv);
static int redis_refund_async(fg_store *s, fg_limiter *l, const char *key,
                              size_t keylen, uint64_t cost, const fg__taken *t);

/* The node tears 'cn' down: checks still waiting for the batch's write
 * never went out. */
static void on_teardown(fg__raconn *cn)
{
    aslot *batch = cn->bhead, *held = cn->whead;
    cn->bhead = cn->btail = NULL;
    cn->whead = cn->wtail = NULL;
    cn->bn = 0;
    chain_fail(store_of(cn), batch, cn->fail_rc);
    if (held)
        on_wait(cn->ac, NULL, held);
}

static void slot_unlink(redis_store *st, aslot *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        st->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        st->tail = s->prev;
    s->next = st->free_slots;
    st->free_slots = s;
}

static void slot_finish(redis_store *st, aslot *s, int rc, fg_decision *d);

/* An allowed check of a durable limit: hold it, with its decision, for the
 * connection's next WAIT (one for all the checks decided since the last),
 * sent with the loop's next write. 1 when held. */
static int hold_for_wait(aslot *s, int rc, const fg_decision *d)
{
    if (rc != FG_OK || !d || !d->allowed || !s->req ||
        !s->req->l->lim.durable || s->conn->dead)
        return 0;
    fg__raconn *cn = s->conn;
    s->wd = *d;
    s->held = 1;
    s->wnext = NULL;
    if (cn->wtail)
        cn->wtail->wnext = s;
    else
        cn->whead = s;
    cn->wtail = s;
    fg__raconn_want_write(cn);
    return 1;
}

/* A held check that no replica confirmed (in time) fails, and its policy
 * decides: unless that admits it (open), its units go back on the
 * master. */
static void give_back_held(redis_store *st, aslot *s, uint64_t now)
{
    fg__req *req = s->req;
    if (!req || !s->held)
        return;
    s->held = 0;
    if (req->l->lim.on_failure == FG_FAIL_OPEN)
        return; /* admitted by its policy: its units stay counted */
    fg__taken t = fg__taken_of(
        &req->l->p, now > s->sent_us ? now - s->sent_us : 0, s->wd.reset_us);
    redis_refund_async(&st->base, req->l, req->key, req->keylen, req->cost, &t);
}

/* The reply to a WAIT: the checks it was sent for count if a replica holds
 * their writes; else they fail, and their limits' policy decides. */
static void on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    fg__raconn *cn = s->conn;
    redis_store *st = cn->st->owner;
    redisReply *r = reply;
    int rc = !r ? cn->fail_rc : replicated(r) ? FG_OK : not_replicated(cn->st);
    (void)ac;
    uint64_t now = fg__mono_precise_us();
    while (s) {
        aslot *next = s->wnext;
        if (r && rc != FG_OK)
            give_back_held(st, s, now);
        s->held = 0;
        slot_finish(st, s, rc, rc == FG_OK ? &s->wd : NULL);
        s = next;
    }
}

/* Send one WAIT for the checks held on 'cn', with the time left to the
 * earliest deadline among them. */
static void wait_flush(fg__raconn *cn)
{
    aslot *first = cn->whead;
    if (!first)
        return;
    cn->whead = cn->wtail = NULL;
    uint64_t deadline = 0;
    for (aslot *s = first; s; s = s->wnext)
        if (!deadline || s->deadline_us < deadline)
            deadline = s->deadline_us;
    fg__rcmd w;
    wait_cmd(&w, deadline);
    if (cn->dead || fg__rasync_append(cn->ac, on_wait, first, &w) != REDIS_OK)
        on_wait(cn->ac, NULL, first);
}

/* Complete the check of 's' (if still waiting) and release the slot. */
static void slot_finish(redis_store *st, aslot *s, int rc, fg_decision *d)
{
    fg__req *req = s->req;
    s->req = NULL;
    slot_unlink(st, s);
    if (req)
        fg__req_done(req, rc, d);
}

/* Make the timer fire by 'at' (monotonic us; 'now' is the time now). */
static void timer_arm(redis_store *st, uint64_t at, uint64_t now)
{
    if (st->timer_at && st->timer_at <= at)
        return;
    now += TIMER_SLACK_US;
    uint64_t d = at > now ? at - now : 0;
    struct timeval tv = {(time_t)(d / 1000000), (suseconds_t)(d % 1000000)};
    st->timer_at = at;
    evtimer_add(st->timer, &tv);
}

/* Deadlines: fail every check whose deadline has passed (its late reply
 * will be dropped), and replace a connection that stopped answering. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    redis_store *st = arg;
    uint64_t now = fg__mono_precise_us(), next = 0, due = now + TIMER_SLACK_US;
    (void)fd;
    (void)what;
    st->timer_at = 0;
    for (aslot *s = st->head; s; s = s->next) {
        if (!s->req)
            continue;
        if (s->req->deadline_us <= due) {
            give_back_held(st, s, now); /* WAIT has not answered */
            fg__req *req = s->req;
            s->req = NULL;
            fg__req_done(req, FG_ETIMEOUT, NULL);
        } else if (!next || s->req->deadline_us < next) {
            next = s->req->deadline_us;
        }
    }
    /* The oldest unanswered command tells whether the server stalled
     * (stopped, partitioned): then its connection is replaced. */
    aslot *old = st->head;
    if (old && old->conn == st->node.conn && !old->conn->dead) {
        if (old->deadline_us + STALL_US <= now) {
            fg__raconn *cn = st->node.conn;
            fg__rnode_set_error(&st->node, "redis %.200s: %.200s",
                                "no reply for 1 s, reconnecting");
            fg__raconn_kill(cn, FG_ETIMEOUT);
            redisAsyncFree(cn->ac);
            old = st->head;
        }
    }
    if (old && !old->req && (!next || old->deadline_us + STALL_US < next))
        next = old->deadline_us + STALL_US;
    if (next)
        timer_arm(st, next, fg__mono_precise_us());
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);
static void batch_add(aslot *s);

/* The reply to a fixed window's PEXPIRE NX: only an error matters. */
static void on_pexpire(redisAsyncContext *ac, void *reply, void *priv)
{
    redisReply *r = reply;
    fg__raconn *cn = ac->data;
    (void)priv;
    if (r && cn && r->type == REDIS_REPLY_ERROR)
        pexpire_error(cn->st, r);
}

/* Queue the commands of the check's stage on its connection. FG_OK; a
 * negative code when nothing was queued (the caller completes the check);
 * or 1 when the check was handed to the connection's teardown, which
 * completes it. */
static int async_send(redis_store *st, aslot *s)
{
    redisAsyncContext *ac = s->conn->ac;
    fg__rcmd k;
    /* ASKING lets only the next command in: one before each (a fixed
     * window's PEXPIRE too). Once: a NOSCRIPT's EVAL that follows is sent
     * without it, and then moves on by MOVED or ASK again if it must. */
    int asking = s->req && s->req->asking;
    s->asked = asking;
    if (asking) {
        s->req->asking = 0;
        if (redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK)
            return FG_EBACKEND;
    }
    fg__rcheck_cmd(&s->k, 0, &st->node.shas, &k);
    if (fg__rasync_append(ac, on_reply, s, &k))
        return FG_EBACKEND;
    if (fg__rcheck_ncmds(&s->k) < 2)
        return FG_OK;
    fg__rcheck_cmd(&s->k, 1, &st->node.shas, &k);
    if ((asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) ||
        fg__rasync_append(ac, on_pexpire, NULL, &k) != REDIS_OK) {
        /* The INCRBY is queued but its expiry is not: sent alone it could
         * leave a key that never expires. Drop the connection with its
         * unsent buffer; freeing it answers the INCRBY's callback with no
         * reply, which fails this check. */
        fg__raconn_kill(s->conn, FG_EBACKEND);
        redisAsyncFree(ac);
        return 1;
    }
    return FG_OK;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    fg__raconn *cn = s->conn;
    redis_store *st = store_of(cn);
    redisReply *r = reply;
    fg_decision d;
    int rc;
    (void)ac;
    if (!r) {
        /* The connection is going away: its error decides. */
        fg__raconn_kill(cn, FG_EBACKEND);
        slot_finish(st, s, cn->fail_rc, NULL);
        return;
    }
    if (!s->req) {
        slot_finish(st, s, FG_OK, NULL); /* answered after its deadline */
        return;
    }
    rc = fg__rcheck_reply(&s->k, r, &d);
    if (rc < 0 && st->redirect && r->type == REDIS_REPLY_ERROR) {
        /* The cluster store may send the check on to another node. */
        fg__req *req = s->req;
        s->req = NULL;
        slot_unlink(st, s);
        if (!st->redirect(st->redirect_owner, req, r->str, r->len)) {
            fg__rnode_check_error(&st->node, rc);
            fg__req_done(req, rc, NULL);
        }
        return;
    }
    if (rc == FG__RSTEP_GIVEBACK) {
        fg__rcmd k;
        fg__rcheck_cmd(&s->k, 0, &st->node.shas, &k);
        if (!s->asked ||
            redisAsyncCommand(cn->ac, NULL, NULL, "ASKING") == REDIS_OK)
            fg__rasync_append(cn->ac, NULL, NULL, &k);
        rc = FG_OK;
    } else if (rc == FG__RSTEP_AGAIN && cn->dead) {
        rc = fg__rcheck_unsent(&s->k, &d);
    } else if (rc == FG__RSTEP_AGAIN) {
        if (async_send(st, s) == FG_OK)
            return;
        rc = FG_EBACKEND;
    }
    if (rc != FG_OK)
        fg__rnode_check_error(&st->node, rc);
    if (!hold_for_wait(s, rc, &d))
        slot_finish(st, s, rc, rc == FG_OK ? &d : NULL);
}

/* ---- Token bucket batches --------------------------------------------- */

static void on_batch(redisAsyncContext *ac, void *reply, void *priv);

/* Complete every check of the batch chain at 's' with the error 'rc'. */
static void chain_fail(redis_store *st, aslot *s, int rc)
{
    if (s)
        fg__rnode_check_error(&st->node, rc);
    while (s) {
        aslot *next = s->bnext; /* 's' is recycled by slot_finish */
        slot_finish(st, s, rc, NULL);
        s = next;
    }
}

/* Format the token script's call for the 'n' checks of the chain at
 * 'first' into 'st->bbuf' (grown as needed, then reused), with EVAL when
 * 'eval' or the SHA is not known. Its length, or 0 when out of memory. */
static size_t batch_format(redis_store *st, aslot *first, int n, int eval)
{
    const fg__rcheck *c[BATCH_MAX];
    const char *sha =
        eval ? NULL : fg__redis_sha(&st->node.shas, FG__LUA_TOKEN);
    size_t need;
    int i = 0;
    for (aslot *s = first; s && i < BATCH_MAX; s = s->bnext)
        c[i++] = &s->k;
    need = fg__rbatch_need(c, i, sha);
    if (need > st->bcap) {
        char *b = fg__malloc(need);
        if (!b)
            return 0;
        fg__free(st->bbuf);
        st->bbuf = b;
        st->bcap = need;
    }
    (void)n;
    return fg__rbatch_format(st->bbuf, c, i, sha, st->redirect != NULL);
}

/* Send the chain at 'first' as one call of the token script; on_batch
 * completes its checks. A check whose deadline already passed is dropped
 * from it. */
static void batch_emit(redis_store *st, fg__raconn *cn, aslot *first, int eval)
{
    aslot *live = NULL, **tail = &live;
    int n = 0;
    while (first) {
        aslot *next = first->bnext;
        if (first->req) {
            *tail = first;
            tail = &first->bnext;
            n++;
        } else {
            slot_finish(st, first, FG_OK, NULL);
        }
        first = next;
    }
    *tail = NULL;
    if (!live)
        return;
    if (cn->dead) {
        chain_fail(st, live, cn->fail_rc);
        return;
    }
    size_t len = batch_format(st, live, n, eval);
    if (!len) {
        chain_fail(st, live, FG_ENOMEM);
        return;
    }
    live->bcount = n;
    live->eval = eval;
    if (redisAsyncFormattedCommand(cn->ac, on_batch, live, st->bbuf, len) !=
        REDIS_OK) {
        fg__raconn_kill(cn, FG_EBACKEND); /* hiredis refused: it is closing */
        chain_fail(st, live, FG_EBACKEND);
        return;
    }
    cn->bflight++;
}

/* Send the checks waiting on 'cn': when no batch is in flight, or when
 * they fill one. */
static void batch_flush(fg__raconn *cn)
{
    aslot *first = cn->bhead;
    if (!first || (cn->bflight > 0 && cn->bn < BATCH_MAX))
        return;
    cn->bhead = cn->btail = NULL;
    cn->bn = 0;
    batch_emit(store_of(cn), cn, first, 0);
}

/* What waits for the loop's next write on 'cn': the token bucket batch,
 * then the WAIT of the durable checks decided since the last one. */
static void before_write(fg__raconn *cn)
{
    batch_flush(cn);
    wait_flush(cn);
}

/* Make the batch waiting on 'cn' go out with the loop's next write (once
 * the batch in flight is answered, unless it is full). */
static void batch_want(fg__raconn *cn)
{
    if (cn->bn >= BATCH_MAX) {
        batch_flush(cn);
    } else if (cn->bflight == 0) {
        /* (With a batch in flight, on_batch asks again.) */
        fg__raconn_want_write(cn);
    }
}

/* Queue the token bucket check of 's' on its connection. Checks that
 * arrive while a batch is in flight wait for its answer and then go
 * together (group commit): under load a call carries more checks, and
 * Redis's per-call cost is paid less often; an idle connection sends at
 * the loop's next write, as before. */
static void batch_add(aslot *s)
{
    fg__raconn *cn = s->conn;
    s->bnext = NULL;
    if (cn->btail)
        cn->btail->bnext = s;
    else
        cn->bhead = s;
    cn->btail = s;
    if (cn->bn++ == 0 || cn->bn >= BATCH_MAX)
        batch_want(cn);
}

/* The reply to a batch: four integers per check, in order. */
static void on_batch(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    fg__raconn *cn = s->conn;
    redis_store *st = store_of(cn);
    redisReply *r = reply;
    int rc = FG_OK;
    (void)ac;
    cn->bflight--;
    if (!r) {
        /* The connection is going away: its error decides. */
        fg__raconn_kill(cn, FG_EBACKEND);
        rc = cn->fail_rc;
    } else {
        rc = fg__rbatch_reply(r, s->bcount, s->eval);
    }
    if (rc == FG__RSTEP_AGAIN && !cn->dead) {
        batch_emit(st, cn, s, 1); /* first: the checks stay in order */
        s = NULL;
    }
    /* Checks queued behind this batch go now (none in flight). */
    if (r && cn->bflight == 0 && cn->bhead)
        batch_want(cn);
    if (!s)
        return;
    if (rc == FG__RSTEP_AGAIN)
        rc = FG_EPROTO;
    if (rc != FG_OK && st->redirect && r && r->type == REDIS_REPLY_ERROR) {
        /* A node that lost a slot refused the whole batch, having changed
         * nothing: the cluster store sends each check on alone. */
        int failed = 0;
        while (s) {
            aslot *next = s->bnext;
            fg__req *req = s->req;
            s->req = NULL;
            slot_unlink(st, s);
            if (req) {
                req->single = 1;
                if (!st->redirect(st->redirect_owner, req, r->str, r->len)) {
                    failed = 1;
                    fg__req_done(req, rc, NULL);
                }
            }
            s = next;
        }
        if (failed)
            fg__rnode_check_error(&st->node, rc);
        return;
    }
    if (rc != FG_OK) {
        chain_fail(st, s, rc);
        return;
    }
    for (size_t i = 0; s; i++) {
        aslot *next = s->bnext;
        fg_decision d;
        int drc = FG_OK;
        if (s->req) {
            drc = fg__rbatch_value(r, i, &s->k, &d);
            if (drc != FG_OK)
                fg__rnode_check_error(&st->node, drc);
        }
        if (!hold_for_wait(s, drc, &d))
            slot_finish(st, s, drc, drc == FG_OK ? &d : NULL);
        s = next;
    }
}

static void redis_check_async(fg_store *s, fg__req *req)
{
    redis_store *st = (redis_store *)s;
    fg_limiter *l = req->l;
    int rc = FG_EBACKEND;
    fg__raconn *cn = st->closing ? NULL : fg__raconn_get(&st->node, &rc);
    aslot *sl;
    if (!cn) {
        fg__req_done(req, rc, NULL);
        return;
    }
    sl = st->free_slots;
    if (sl)
        st->free_slots = sl->next;
    else if (!(sl = fg__malloc(sizeof *sl))) {
        fg__req_done(req, FG_ENOMEM, NULL);
        return;
    }
    memset(sl, 0, sizeof *sl);
    sl->req = req;
    sl->conn = cn;
    rc = fg__rcheck_init(&sl->k, &l->p, l->store_data, req->key, req->keylen,
                         req->cost, check_now(st, l));
    uint64_t t0 = fg__mono_precise_us();
    if (!req->deadline_us) /* not a check redirected from another node */
        req->deadline_us = t0 + (uint64_t)l->lim.timeout_ms * 1000u;
    sl->deadline_us = req->deadline_us;
    sl->sent_us = t0;
    sl->prev = st->tail;
    if (st->tail)
        st->tail->next = sl;
    else
        st->head = sl;
    st->tail = sl;
    /* Armed first: a full batch is sent, and may complete, inside
     * batch_add. A check completed early leaves a timer that finds
     * nothing to do. */
    timer_arm(st, sl->deadline_us, t0);
    if (rc == FG_OK) {
        if (l->p.algorithm == FG_TOKEN_BUCKET && !req->asking && !req->single) {
            batch_add(sl);
            return;
        }
        rc = async_send(st, sl);
    }
    if (rc > 0 || rc == FG_OK)
        return;
    if (rc == FG_EBACKEND) /* hiredis refused: the context is closing */
        fg__raconn_kill(cn, rc);
    slot_finish(st, sl, rc, NULL);
}

/* The reply to a queued refund: nobody waits for it. NOSCRIPT sends it
 * again with EVAL on the same connection; anything else (a NULL reply from
 * a connection going away included) just recycles the record. Refunds have
 * no slot: the in-order matching of checks, their deadlines and the stall
 * detection never see them. */
static void on_refund(redisAsyncContext *ac, void *reply, void *priv)
{
    rfund *rf = priv;
    redis_store *st = rf->st;
    redisReply *r = reply;
    fg__raconn *cn = ac->data;
    if (r && cn && !cn->dead &&
        fg__rrefund_reply(&rf->r, r) == FG__RSTEP_AGAIN) {
        fg__rrefund_cmd(&rf->r, &st->node.shas);
        if (fg__rasync_append(ac, on_refund, rf, &rf->r.k) == REDIS_OK)
            return;
    }
    st->refunds_out--;
    rf->next = st->free_refunds;
    st->free_refunds = rf;
}

static unsigned redis_busy(fg_store *s)
{
    return ((redis_store *)s)->refunds_out;
}

/* Queue a refund with the checks: written with the next batch, its reply
 * read and dropped by on_refund. */
static int redis_refund_async(fg_store *s, fg_limiter *l, const char *key,
                              size_t keylen, uint64_t cost, const fg__taken *t)
{
    redis_store *st = (redis_store *)s;
    int rc = FG_EBACKEND;
    fg__raconn *cn;
    rfund *rf;
    if (l->p.algorithm == FG_NAIVE_GET_SET)
        return FG_ENOTSUP;
    cn = st->closing ? NULL : fg__raconn_get(&st->node, &rc);
    if (!cn)
        return rc;
    rf = st->free_refunds;
    if (rf)
        st->free_refunds = rf->next;
    else if (!(rf = fg__malloc(sizeof *rf)))
        return FG_ENOMEM;
    rf->st = st;
    rc = fg__rrefund_init(&rf->r, &l->p, l->store_data, key, keylen, cost,
                          check_now(st, l), t);
    if (rc == FG_OK) {
        fg__rrefund_cmd(&rf->r, &st->node.shas);
        if (fg__rasync_append(cn->ac, on_refund, rf, &rf->r.k) == REDIS_OK) {
            st->refunds_out++;
            return FG_OK;
        }
        rc = FG_EBACKEND; /* hiredis refused: the context is closing */
        fg__raconn_kill(cn, rc);
    }
    rf->next = st->free_refunds;
    st->free_refunds = rf;
    return rc;
}

/* ---- Store ------------------------------------------------------------- */

static int redis_limiter_init(fg_store *s, fg_limiter *l, void **out, char *err,
                              size_t errlen)
{
    redis_store *st = (redis_store *)s;
    fg__rlim *rl =
        fg__rlim_new(&l->p, st->node.url.prefix, st->node.url.prefixlen,
                     l->lim.name, strnlen(l->lim.name, FG_NAME_MAX));
    if (!rl)
        return fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
    *out = rl;
    return FG_OK;
}

static void redis_limiter_free(fg_store *s, fg_limiter *l, void *data)
{
    (void)s;
    (void)l;
    fg__free(data);
}

static uint64_t redis_keys(fg_store *s)
{
    (void)s;
    return 0;
}

static void redis_close(fg_store *s)
{
    redis_store *st = (redis_store *)s;
    if (!st)
        return;
    st->closing = 1;
    if (st->node.conn) {
        fg__raconn *cn = st->node.conn;
        fg__raconn_kill(cn, FG_EBACKEND);
        /* Runs every unanswered callback (each check completes once),
         * then the cleanup hook. */
        redisAsyncFree(cn->ac);
    }
    while (st->head) /* slots of connections already gone */
        slot_finish(st, st->head, FG_EBACKEND, NULL);
    while (st->free_slots) {
        aslot *n = st->free_slots->next;
        fg__free(st->free_slots);
        st->free_slots = n;
    }
    while (st->free_refunds) { /* all back: the connections are gone */
        rfund *n = st->free_refunds->next;
        fg__free(st->free_refunds);
        st->free_refunds = n;
    }
    if (st->timer)
        event_free(st->timer);
    fg__free(st->bbuf);
    fg__rnode_close(&st->node);
    fg__free(st);
}

fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen)
{
    redis_store *st = fg__calloc(1, sizeof *st);
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    st->base.ops = base ? &redis_async_ops : &redis_ops;
    st->base.nodes = 1;
    st->clock = wall_clock;
    st->node.owner = st;
    st->node.before_write = before_write;
    st->node.teardown = on_teardown;
    if (fg__rnode_init(&st->node, url, base, err, errlen) != FG_OK) {
        redis_close(&st->base);
        return NULL;
    }
    if (base) {
        st->timer = evtimer_new(base, on_timer, st);
        if (!st->timer) {
            fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
            redis_close(&st->base);
            return NULL;
        }
    }
    if (!st->node.url.lazy) {
        /* Probe now: a wrong password, database or address is a clear
         * error at start rather than a failure policy at every check. It
         * also loads the scripts, so checks can use EVALSHA at once. */
        fg__rsconn c;
        uint64_t deadline = fg__mono_precise_us() +
                            (uint64_t)st->node.url.connect_timeout_ms * 1000u;
        if (fg__rsync_connect(&st->node, deadline, &c, err, errlen) != FG_OK) {
            redis_close(&st->base);
            return NULL;
        }
        if (base)
            redisFree(c.c);
        else
            st->node.idle[st->node.nidle++] = c;
    }
    return &st->base;
}

static int is_redis(const fg_store *s)
{
    return s && (s->ops == &redis_ops || s->ops == &redis_async_ops);
}

int fg__store_redis_set_clock(fg_store *s, fg_clock_fn clock, void *ctx)
{
    redis_store *st = (redis_store *)s;
    if (!is_redis(s))
        return FG_EINVAL;
    st->clock = clock ? clock : wall_clock;
    st->clock_ctx = ctx;
    return FG_OK;
}

unsigned long fg__store_redis_error_writes(fg_store *s)
{
    if (!is_redis(s))
        return 0;
    return atomic_load(&((redis_store *)s)->node.err_writes);
}

const char *fg__store_redis_last_error(fg_store *s)
{
    if (!is_redis(s))
        return "";
    return ((redis_store *)s)->node.errstr;
}

uint64_t fg__store_redis_error_seq(fg_store *s)
{
    if (!is_redis(s))
        return 0;
    return atomic_load(&((redis_store *)s)->node.err_seq);
}

void fg__store_redis_set_cluster(fg_store *s, fg__redis_redirect_fn fn,
                                 void *owner)
{
    redis_store *st = (redis_store *)s;
    st->redirect = fn;
    st->redirect_owner = owner;
}

redisReply *fg__store_redis_command(fg_store *s, uint64_t deadline_us, int argc,
                                    const char **argv, int *rc)
{
    redis_store *st = (redis_store *)s;
    fg__rsconn c;
    fg__rcmd cmd;
    redisReply *r = NULL;
    if (argc < 1 || argc > 14) {
        *rc = FG_EINVAL;
        return NULL;
    }
    cmd.argc = argc;
    for (int i = 0; i < argc; i++) {
        cmd.argv[i] = argv[i];
        cmd.len[i] = strlen(argv[i]);
    }
    *rc = fg__rpool_get(&st->node, deadline_us, &c);
    if (*rc != FG_OK)
        return NULL;
    *rc = fg__rsync_append(&c, &cmd);
    if (*rc == FG_OK)
        *rc = fg__rsync_exchange(&c, 1, &r, deadline_us);
    fg__rpool_put(&st->node, &c);
    return *rc == FG_OK ? r : NULL;
}

int fg__store_redis_command_async(fg_store *s, redisCallbackFn *fn, void *priv,
                                  const char *cmd)
{
    redis_store *st = (redis_store *)s;
    int rc = FG_EBACKEND;
    fg__raconn *cn = st->closing ? NULL : fg__raconn_get(&st->node, &rc);
    if (!cn)
        return rc;
    if (redisAsyncCommand(cn->ac, fn, priv, cmd) != REDIS_OK)
        return FG_EBACKEND;
    return FG_OK;
}

static const char *redis_node_name(fg_store *s, unsigned node)
{
    (void)node;
    return ((redis_store *)s)->node.name;
}

static const char *redis_node_error(fg_store *s, unsigned node)
{
    (void)node;
    return ((redis_store *)s)->node.errstr;
}

static const fg__store_ops redis_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .limiter_free = redis_limiter_free,
    .check = redis_check,
    .refund = redis_refund,
    .peek = redis_peek,
    .reset = redis_reset,
    .keys = redis_keys,
    .close = redis_close,
    .now = redis_now,
    .node_name = redis_node_name,
    .node_error = redis_node_error,
};

static const fg__store_ops redis_async_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .limiter_free = redis_limiter_free,
    .check = redis_check,
    .check_async = redis_check_async,
    .refund = redis_refund_async,
    .peek = redis_peek,
    .reset = redis_reset,
    .keys = redis_keys,
    .close = redis_close,
    .busy = redis_busy,
    .now = redis_now,
    .node_name = redis_node_name,
    .node_error = redis_node_error,
};
