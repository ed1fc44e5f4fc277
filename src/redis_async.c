/* redis_async.c -- the Redis store's asynchronous client (fg_check_async).
 *
 * Checks are pipelined on the node's one async connection, each with a slot
 * matching it to its replies in order. Token bucket checks wait for the
 * loop's next write and go out as one EVALSHA of up to BATCH_MAX checks,
 * which Redis runs in order, as if each were its own call (the script's
 * call overhead, TIME, and a hot key's GET and SET are then paid once per
 * batch). Deadlines are one libevent timer, since hiredis 0.14 has none.
 * A durable limit's allowed checks are held for one WAIT per connection.
 * What is sent and how a reply becomes a decision is redis_proto.c. */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "redis_async.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

typedef fg__redis_store redis_store;
typedef struct fg__aslot aslot;
typedef struct fg__rfund rfund;

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

static redis_store *store_of(const fg__raconn *cn)
{
    return cn->st->owner;
}

static void chain_fail(redis_store *st, aslot *s, int rc, const redisReply *r);
static void on_wait(redisAsyncContext *ac, void *reply, void *priv);

static void refund_done(redis_store *st, rfund *rf);

/* The node tears 'cn' down: checks still waiting for the batch's write
 * (or for its AUTH and SELECT) never went out, nor did refunds held. */
static void on_teardown(fg__raconn *cn)
{
    aslot *batch = cn->bhead, *held = cn->whead, *gated = cn->ghead;
    rfund *rf = cn->rghead;
    cn->bhead = cn->btail = NULL;
    cn->whead = cn->wtail = NULL;
    cn->ghead = cn->gtail = NULL;
    cn->rghead = cn->rgtail = NULL;
    cn->bn = 0;
    while (rf) { /* never sent: dropped, the units stay counted */
        rfund *next = rf->next;
        refund_done(store_of(cn), rf);
        rf = next;
    }
    chain_fail(store_of(cn), gated, cn->fail_rc, NULL);
    chain_fail(store_of(cn), batch, cn->fail_rc, NULL);
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
    fg__redis_not_replicated(&st->node); /* says why */
    if (req->l->lim.on_failure == FG_FAIL_OPEN)
        return; /* admitted by its policy: its units stay counted */
    fg__taken t = fg__taken_of(
        &req->l->p, now > s->sent_us ? now - s->sent_us : 0, s->wd.reset_us);
    fg__redis_refund_async(&st->base, req->l, req->key, req->keylen, req->cost,
                           &t);
}

/* The reply to a WAIT: the checks it was sent for count if a replica holds
 * their writes; else they fail, and their limits' policy decides. */
static void on_wait(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    fg__raconn *cn = s->conn;
    redis_store *st = cn->st->owner;
    redisReply *r = reply;
    /* No reply: the connection is going away. hiredis may run this before
     * its cleanup hook has marked it (an end of file): its error decides,
     * never FG_OK. */
    if (!r)
        fg__raconn_kill(cn, FG_EBACKEND);
    int rc = !r                        ? cn->fail_rc
             : fg__redis_replicated(r) ? FG_OK
                                       : fg__redis_not_replicated(cn->st);
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
    fg__redis_wait_cmd(&w, deadline);
    if (cn->dead || fg__rasync_append(cn->ac, on_wait, first, &w) != REDIS_OK)
        on_wait(cn->ac, NULL, first);
}

/* Complete the check of 's' (if still waiting) and release the slot. */
static void slot_finish(redis_store *st, aslot *s, int rc, fg_decision *d)
{
    fg__req *req = s->req;
    s->req = NULL;
    slot_unlink(st, s);
    if (rc == FG_EREADONLY) /* a replica now: is the name elsewhere? */
        fg__rnode_readdress(&st->node);
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

/* The server stopped answering the connection: replace it. Its commands
 * in flight complete with FG_ETIMEOUT. */
static void stalled(redis_store *st)
{
    fg__raconn *cn = st->node.conn;
    fg__rnode_set_error(&st->node, "redis %.200s: %.200s",
                        "no reply for 1 s, reconnecting");
    fg__raconn_kill(cn, FG_ETIMEOUT);
    redisAsyncFree(cn->ac);
}

/* 1 when the connection has bytes (or its end) that the loop has not read
 * yet. */
static int unread_waiting(const redis_store *st)
{
    const fg__raconn *cn = st->node.conn;
    char b;
    return cn && !cn->dead &&
           recv(cn->ac->c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

/* Deadlines: fail every check whose deadline has passed (its late reply
 * will be dropped), and replace a connection that stopped answering. A
 * timer that fires LATE_US or more after its time, with bytes waiting
 * unread on the connection, means the loop itself was late (the process
 * stopped, the host froze) and the replies came: the loop's next turn
 * reads them first, so the judging waits for it (once). */
#define LATE_US 50000u
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    redis_store *st = arg;
    uint64_t now = fg__mono_precise_us(), next = 0, due = now + TIMER_SLACK_US;
    (void)fd;
    (void)what;
    uint64_t was_at = st->timer_at;
    st->timer_at = 0;
    if (was_at && now >= was_at + LATE_US && !st->looked_again &&
        unread_waiting(st)) {
        st->looked_again = 1;
        timer_arm(st, now + 1000, now);
        return;
    }
    st->looked_again = 0;
    int late = 0;
    for (aslot *s = st->head; s; s = s->next) {
        if (!s->req)
            continue;
        if (s->req->deadline_us <= due) {
            give_back_held(st, s, now); /* WAIT has not answered */
            fg__req *req = s->req;
            s->req = NULL;
            /* The node's error first: the callback may report it. */
            if (!late)
                fg__rnode_check_error(&st->node, FG_ETIMEOUT);
            late = 1;
            fg__req_done(req, FG_ETIMEOUT, NULL);
        } else if (!next || s->req->deadline_us < next) {
            next = s->req->deadline_us;
        }
    }
    /* The oldest unanswered command tells whether the server stalled
     * (stopped, partitioned): then its connection is replaced. */
    aslot *old = st->head;
    if (old && old->conn == st->node.conn && !old->conn->dead &&
        old->deadline_us + STALL_US <= now)
        stalled(st);
    old = st->head;
    if (old && !old->req && (!next || old->deadline_us + STALL_US < next))
        next = old->deadline_us + STALL_US;
    /* So does a refund, which nobody waits for: with no check after it, a
     * hung server would hold it (and whoever waits for the store to be
     * idle, as serve's drain does) for ever. */
    rfund *rf = st->rhead;
    if (rf && rf->conn == st->node.conn && !rf->conn->dead &&
        rf->deadline_us + STALL_US <= now)
        stalled(st);
    rf = st->rhead;
    if (rf && rf->conn == st->node.conn &&
        (!next || rf->deadline_us + STALL_US < next))
        next = rf->deadline_us + STALL_US;
    if (next)
        timer_arm(st, next, fg__mono_precise_us());
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);
static void batch_add(aslot *s);

/* The reply to a fixed window's PEXPIRE NX, after INCRBY's (kept in the
 * slot): an error fails the check, whose key would otherwise never
 * expire (Redis before 7.0, a user without +pexpire); else INCRBY's reply
 * decides. */
static void on_pexpire(redisAsyncContext *ac, void *reply, void *priv)
{
    aslot *s = priv;
    redisReply *r = reply;
    s->expiry = 0;
    if (s->first_none || !r) {
        /* The connection went before both answered: it fails the check,
         * as it would a durable one waiting for its WAIT. */
        on_reply(ac, NULL, s);
        return;
    }
    if (s->first.type == REDIS_REPLY_INTEGER && r->type == REDIS_REPLY_ERROR) {
        redis_store *st = store_of(s->conn);
        slot_finish(st, s, fg__redis_pexpire_error(s->conn->st, r), NULL);
        return;
    }
    on_reply(ac, &s->first, s);
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
        fg__rasync_append(ac, on_pexpire, s, &k) != REDIS_OK) {
        /* The INCRBY is queued but its expiry is not: sent alone it could
         * leave a key that never expires. Drop the connection with its
         * unsent buffer; freeing it answers the INCRBY's callback with no
         * reply, which fails this check. */
        fg__raconn_kill(s->conn, FG_EBACKEND);
        redisAsyncFree(ac);
        return 1;
    }
    s->expiry = 1;
    return FG_OK;
}

/* Keep INCRBY's reply 'r' in 's' until PEXPIRE's comes (its string cut to
 * what the node's error keeps). */
static void keep_first(aslot *s, const redisReply *r)
{
    s->expiry = 2;
    s->first_none = !r;
    if (!r)
        return;
    memset(&s->first, 0, sizeof s->first);
    s->first.type = r->type;
    s->first.integer = r->integer;
    if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
        r->type == REDIS_REPLY_STRING) {
        size_t n = r->len < sizeof s->first_str ? r->len : sizeof s->first_str;
        memcpy(s->first_str, r->str, n);
        s->first.str = s->first_str;
        s->first.len = n;
    }
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
    if (s->expiry == 1) {
        keep_first(s, r);
        return;
    }
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
    int was_eval = s->k.stage == FG__RS_EVAL;
    rc = fg__rcheck_reply(&s->k, r, &d);
    if (was_eval && rc == FG_EAUTH)
        fg__rnode_scripts_lost(&st->node); /* NOPERM: a user without EVAL */
    if (rc < 0 && st->redirect && r->type == REDIS_REPLY_ERROR) {
        /* The cluster store may send the check on to another node. */
        fg__req *req = s->req;
        s->req = NULL;
        slot_unlink(st, s);
        if (!st->redirect(st->redirect_owner, req, r->str, r->len)) {
            fg__rnode_reply_error(&st->node, rc, r);
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
        fg__rnode_reply_error(&st->node, rc, r);
    if (!hold_for_wait(s, rc, &d))
        slot_finish(st, s, rc, rc == FG_OK ? &d : NULL);
}

/* ---- Token bucket batches --------------------------------------------- */

static void on_batch(redisAsyncContext *ac, void *reply, void *priv);

/* Complete every check of the batch chain at 's' with the error 'rc'. */
static void chain_fail(redis_store *st, aslot *s, int rc, const redisReply *r)
{
    /* Said only for a check still waiting: one past its deadline was
     * reported then (a stall's reason stays). */
    for (aslot *w = s; w; w = w->bnext) {
        if (w->req) {
            fg__rnode_reply_error(&st->node, rc, r);
            break;
        }
    }
    while (s) {
        aslot *next = s->bnext; /* 's' is recycled by slot_finish */
        slot_finish(st, s, rc, NULL);
        s = next;
    }
}

/* Format the token script's call for the checks of the chain at
 * 'first' into 'st->bbuf' (grown as needed, then reused), with EVAL when
 * 'eval' or the SHA is not known. Its length, or 0 when out of memory. */
static size_t batch_format(redis_store *st, aslot *first, int eval)
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
        chain_fail(st, live, cn->fail_rc, NULL);
        return;
    }
    size_t len = batch_format(st, live, eval);
    if (!len) {
        chain_fail(st, live, FG_ENOMEM, NULL);
        return;
    }
    live->bcount = n;
    live->eval = eval;
    if (redisAsyncFormattedCommand(cn->ac, on_batch, live, st->bbuf, len) !=
        REDIS_OK) {
        fg__raconn_kill(cn, FG_EBACKEND); /* hiredis refused: it is closing */
        chain_fail(st, live, FG_EBACKEND, NULL);
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
        if (s->eval && rc == FG_EAUTH)
            fg__rnode_scripts_lost(&st->node);
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
                    if (!failed) /* before the callback, which may say it */
                        fg__rnode_reply_error(&st->node, rc, r);
                    failed = 1;
                    fg__req_done(req, rc, NULL);
                }
            }
            s = next;
        }
        return;
    }
    if (rc != FG_OK) {
        chain_fail(st, s, rc, r);
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

/* Send the check of 's' (its commands ready in s->k): a token bucket's
 * with the connection's batch, others at once. */
static void dispatch(redis_store *st, aslot *s)
{
    const fg_limiter *l = s->req->l;
    if (l->p.algorithm == FG_TOKEN_BUCKET && !s->req->asking &&
        !s->req->single) {
        batch_add(s);
        return;
    }
    int rc = async_send(st, s);
    if (rc > 0 || rc == FG_OK)
        return;
    if (rc == FG_EBACKEND) /* hiredis refused: the context is closing */
        fg__raconn_kill(s->conn, rc);
    slot_finish(st, s, rc, NULL);
}

static void on_refund(redisAsyncContext *ac, void *reply, void *priv);

/* The connection's AUTH and SELECT were answered OK: the refunds and the
 * checks that waited for them go, the refunds first (units given back
 * before new checks), each in order; a check past its deadline is
 * dropped. */
static void on_ready(fg__raconn *cn)
{
    redis_store *st = store_of(cn);
    aslot *s = cn->ghead;
    rfund *rf = cn->rghead;
    cn->ghead = cn->gtail = NULL;
    cn->rghead = cn->rgtail = NULL;
    while (rf) {
        rfund *next = rf->next;
        if (cn->dead ||
            fg__rasync_append(cn->ac, on_refund, rf, &rf->r.k) != REDIS_OK)
            refund_done(st, rf);
        rf = next;
    }
    while (s) {
        aslot *next = s->bnext;
        s->bnext = NULL;
        if (s->req)
            dispatch(st, s);
        else
            slot_finish(st, s, FG_OK, NULL);
        s = next;
    }
}

void fg__redis_check_async(fg_store *s, fg__req *req)
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
                         req->cost, req->age_us, fg__redis_check_now(st, l));
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
    if (rc != FG_OK) {
        slot_finish(st, sl, rc, NULL);
    } else if (cn->gate_left > 0) {
        /* A new connection's AUTH or SELECT not answered yet. */
        sl->bnext = NULL;
        if (cn->gtail)
            cn->gtail->bnext = sl;
        else
            cn->ghead = sl;
        cn->gtail = sl;
    } else {
        dispatch(st, sl);
    }
}

/* The reply to a queued refund: nobody waits for it. NOSCRIPT sends it
 * again with EVAL on the same connection; anything else (a NULL reply from
 * a connection going away included) just recycles the record. Refunds have
 * no slot: the in-order matching of checks, their deadlines and the stall
 * detection never see them. */
/* 'rf' is out of flight: back to the free records. */
static void refund_done(redis_store *st, rfund *rf)
{
    st->refunds_out--;
    if (rf->rprev)
        rf->rprev->rnext = rf->rnext;
    else
        st->rhead = rf->rnext;
    if (rf->rnext)
        rf->rnext->rprev = rf->rprev;
    else
        st->rtail = rf->rprev;
    rf->next = st->free_refunds;
    st->free_refunds = rf;
}

static void on_refund(redisAsyncContext *ac, void *reply, void *priv)
{
    rfund *rf = priv;
    redis_store *st = rf->st;
    redisReply *r = reply;
    fg__raconn *cn = ac->data;
    int was_eval = rf->r.eval;
    int rrc = r && cn && !cn->dead ? fg__rrefund_reply(&rf->r, r) : FG_OK;
    if (rrc == FG__RSTEP_AGAIN) {
        fg__rrefund_cmd(&rf->r, &st->node.shas);
        if (fg__rasync_append(ac, on_refund, rf, &rf->r.k) == REDIS_OK)
            return;
    } else if (was_eval && rrc == FG_EAUTH) {
        fg__rnode_scripts_lost(&st->node);
    }
    refund_done(st, rf);
}

unsigned fg__redis_busy(fg_store *s)
{
    return ((redis_store *)s)->refunds_out;
}

/* Queue a refund with the checks: written with the next batch, its reply
 * read and dropped by on_refund. */
int fg__redis_refund_async(fg_store *s, fg_limiter *l, const char *key,
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
                          fg__redis_check_now(st, l), t);
    if (rc == FG_OK) {
        fg__rrefund_cmd(&rf->r, &st->node.shas);
        /* In flight from here: on_refund takes it out. */
        uint64_t now = fg__mono_precise_us();
        rf->deadline_us = now + (uint64_t)l->lim.timeout_ms * 1000u;
        rf->conn = cn;
        rf->rnext = NULL;
        rf->rprev = st->rtail;
        if (st->rtail)
            st->rtail->rnext = rf;
        else
            st->rhead = rf;
        st->rtail = rf;
        st->refunds_out++;
        if (cn->gate_left > 0) {
            /* Its AUTH or SELECT not answered yet: held with the checks. */
            rf->next = NULL;
            if (cn->rgtail)
                cn->rgtail->next = rf;
            else
                cn->rghead = rf;
            cn->rgtail = rf;
            timer_arm(st, rf->deadline_us + STALL_US, now);
            return FG_OK;
        }
        if (fg__rasync_append(cn->ac, on_refund, rf, &rf->r.k) == REDIS_OK) {
            timer_arm(st, rf->deadline_us + STALL_US, now);
            return FG_OK;
        }
        refund_done(st, rf);
        rc = FG_EBACKEND; /* hiredis refused: the context is closing */
        fg__raconn_kill(cn, rc);
        return rc;
    }
    rf->next = st->free_refunds;
    st->free_refunds = rf;
    return rc;
}

int fg__redis_async_start(redis_store *st, struct event_base *base)
{
    st->node.before_write = before_write;
    st->node.teardown = on_teardown;
    st->node.ready = on_ready;
    st->timer = evtimer_new(base, on_timer, st);
    return st->timer ? FG_OK : FG_ENOMEM;
}

void fg__redis_async_close(redis_store *st)
{
    st->closing = 1;
    st->node.closing = 1;
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
    st->timer = NULL;
    fg__free(st->bbuf);
    st->bbuf = NULL;
}
