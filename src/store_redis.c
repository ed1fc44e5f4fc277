/* store_redis.c -- the Redis store: counters shared by every server.
 *
 * Two clients share one URL, one set of scripts and one backoff, all held
 * by one node (redis_conn.c); what they send and how a reply becomes a
 * decision is the protocol of redis_proto.c, which both drive:
 *   - blocking (fg_check): a check takes a connection from the node's pool
 *     and runs its protocol's exchanges on it against its own deadline;
 *   - asynchronous (fg_check_async): redis_async.c, checks pipelined on
 *     the node's one async connection.
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
 * Keys: prefix + name + ":{" + key + "}" + ":" window, binary-safe; a
 * token bucket's prefix + name + ":" + depth + ":{" + key + "}". */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "process.h"
#include "redis_admin.h"
#include "redis_async.h"
#include "alloc.h"
#include "clock.h"
#include "error.h"

typedef fg__redis_store redis_store;

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

uint64_t fg__redis_check_now(redis_store *st, const fg_limiter *l)
{
    if (l->p.algorithm == FG_FIXED_WINDOW ||
        l->p.algorithm == FG_NAIVE_GET_SET || l->lim.clock_client) {
        uint64_t t = st->clock(st->clock_ctx);
        return t ? t : 1;
    }
    return 0;
}

int fg__redis_pexpire_error(fg__rnode *nd, const redisReply *r)
{
    int rc = fg__rcheck_aside_reply(r);
    if (rc == FG_EPROTO)
        fg__rnode_set_error(nd,
                            "redis %.200s: PEXPIRE NX refused (%.200s); "
                            "fixed_window needs Redis 7.0 or later",
                            r->str);
    else if (rc != FG_OK)
        fg__rnode_reply_error(nd, rc, r);
    return rc;
}

/* ---- Blocking client --------------------------------------------------- */

/* Run check 'k' on 'c' by 'deadline': each stage's commands go out
 * together and their replies feed the protocol, until it decides. */
/* "WAIT 1 ms", with the time left before 'deadline' (at least 1 ms: 0
 * would wait for ever). */
void fg__redis_wait_cmd(fg__rcmd *cmd, uint64_t deadline)
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
int fg__redis_replicated(const redisReply *w)
{
    return w && w->type == REDIS_REPLY_INTEGER && w->integer >= 1;
}

int fg__redis_not_replicated(fg__rnode *nd)
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
                         fg__redis_check_now(st, l), &t) != FG_OK)
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
            fg__redis_wait_cmd(&cmd, deadline);
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
        int was_eval = k->stage == FG__RS_EVAL;
        rc = fg__rcheck_reply(k, r[0], d);
        if (was_eval && rc == FG_EAUTH)
            fg__rnode_scripts_lost(nd); /* NOPERM: a user without EVAL */
        if ((rc == FG_OK || rc == FG__RSTEP_GIVEBACK) && d->allowed &&
            durable && (wrc != FG_OK || !fg__redis_replicated(w))) {
            /* WAIT waits as long as the check may: out of time, it is
             * still the replica that did not confirm. */
            rc = wrc != FG_OK && wrc != FG_ETIMEOUT
                     ? wrc
                     : fg__redis_not_replicated(nd);
            *unconfirmed = 1;
        } else if (wrc != FG_OK && rc == FG__RSTEP_AGAIN) {
            rc = wrc; /* NOSCRIPT, on a connection that owes a reply */
        }
        freeReplyObject(w);
        if (rc < 0 && errbuf && r[0]->type == REDIS_REPLY_ERROR)
            snprintf(errbuf, errlen, "%.*s", (int)r[0]->len, r[0]->str);
        if (n > 1 && rc >= FG_OK && r[1]->type == REDIS_REPLY_ERROR) {
            rc = fg__redis_pexpire_error(nd, r[1]);
            if (rc != FG_EPROTO && errbuf) /* EPROTO's says what to do */
                snprintf(errbuf, errlen, "%.*s", (int)r[1]->len, r[1]->str);
        }
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
                             size_t keylen, uint64_t cost, uint64_t age_us,
                             int asking, uint64_t deadline_us, fg_decision *d,
                             char *errbuf, size_t errlen)
{
    redis_store *st = (redis_store *)s;
    uint64_t start = fg__mono_precise_us();
    uint64_t deadline =
        deadline_us ? deadline_us : start + (uint64_t)l->lim.timeout_ms * 1000u;
    if (deadline <= start)
        return FG_ETIMEOUT;
    fg__rsconn c;
    fg__rcheck k;
    int unconfirmed = 0;
    int rc = fg__rcheck_init(&k, &l->p, l->store_data, key, keylen, cost,
                             age_us, fg__redis_check_now(st, l));
    if (rc != FG_OK)
        return rc;
    rc = fg__rpool_get(&st->node, deadline, &c);
    if (rc != FG_OK)
        return rc;
    char said[256] = ""; /* Redis's error reply, when it gave one */
    if (!errbuf || errlen == 0) {
        errbuf = said;
        errlen = sizeof said;
    }
    errbuf[0] = '\0';
    rc = sync_run(&st->node, &c, &k, deadline, deadline - start, asking,
                  l->lim.durable, d, &unconfirmed, errbuf, errlen);
    if (unconfirmed)
        give_back_unconfirmed(st, &c, l, key, keylen, cost, start, d);
    fg__rpool_put(&st->node, &c);
    /* A redirection the cluster follows (its own 'errbuf'): this node
     * answered as it should. */
    int moved = errbuf != said &&
                (!strncmp(errbuf, "MOVED ", 6) || !strncmp(errbuf, "ASK ", 4));
    if (rc != FG_OK && !moved)
        fg__rnode_said_error(&st->node, rc, errbuf, strlen(errbuf));
    return rc;
}

static int redis_check(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen, uint64_t cost, uint64_t age_us,
                       fg_decision *d)
{
    return fg__store_redis_check_ex(s, l, key, keylen, cost, age_us, 0, 0, d,
                                    NULL, 0);
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
                              fg__redis_check_now(st, l), t);
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
        int was_eval = rf.eval;
        rc = fg__rrefund_reply(&rf, r);
        freeReplyObject(r);
        if (was_eval && rc == FG_EAUTH)
            fg__rnode_scripts_lost(&st->node);
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
        fg__rnode_op_error(&st->node, a->reset ? "reset" : "peek", rc);
    return rc;
}

static int redis_peek(fg_store *s, fg_limiter *l, const char *key,
                      size_t keylen, fg_decision *d)
{
    redis_store *st = (redis_store *)s;
    fg__radmin a;
    int rc = fg__rpeek_init(&a, &l->p, l->store_data, key, keylen,
                            fg__redis_check_now(st, l));
    return rc == FG_OK ? admin_run(st, l, &a, d) : rc;
}

static int redis_reset(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen)
{
    redis_store *st = (redis_store *)s;
    fg__radmin a;
    int rc = fg__rreset_init(&a, &l->p, l->store_data, key, keylen,
                             fg__redis_check_now(st, l));
    return rc == FG_OK ? admin_run(st, l, &a, NULL) : rc;
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

static void redis_close(fg_store *s)
{
    redis_store *st = (redis_store *)s;
    if (!st)
        return;
    fg__redis_async_close(st);
    fg__rnode_close(&st->node);
    fg__free(st);
}

static fg_store *redis_open(const char *url, const char *num,
                            struct event_base *base, int keep_unreachable,
                            int *unreachable, char *err, size_t errlen);

fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen)
{
    return redis_open(url, NULL, base, 0, NULL, err, errlen);
}

fg_store *fg__store_redis_open_num(const char *url, const char *num,
                                   struct event_base *base, char *err,
                                   size_t errlen)
{
    return redis_open(url, num, base, 0, NULL, err, errlen);
}

fg_store *fg__store_redis_open_ex(const char *url, struct event_base *base,
                                  int keep_unreachable, int *unreachable,
                                  char *err, size_t errlen)
{
    return redis_open(url, NULL, base, keep_unreachable, unreachable, err,
                      errlen);
}

static fg_store *redis_open(const char *url, const char *num,
                            struct event_base *base, int keep_unreachable,
                            int *unreachable, char *err, size_t errlen)
{
    if (unreachable)
        *unreachable = 0;
    redis_store *st = fg__calloc(1, sizeof *st);
    if (!st) {
        fg__seterr(err, errlen, FG_ENOMEM, "out of memory");
        return NULL;
    }
    st->base.ops = base ? &redis_async_ops : &redis_ops;
    st->base.nodes = 1;
    st->base.process = fg__process_mark();
    st->clock = wall_clock;
    st->node.owner = st;
    if (fg__rnode_init(&st->node, url, num, base, err, errlen) != FG_OK) {
        redis_close(&st->base);
        return NULL;
    }
    if (base) {
        if (fg__redis_async_start(st, base) != FG_OK) {
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
        int rc = fg__rsync_connect(&st->node, deadline, &c, err, errlen);
        if (rc != FG_OK && keep_unreachable &&
            (rc == FG_EBACKEND || rc == FG_ETIMEOUT) &&
            !atomic_load(&st->node.db_refused)) {
            fg__rnode_set_error_as(&st->node, rc, "%.0s%s", err);
            if (unreachable)
                *unreachable = 1;
            return &st->base;
        }
        if (rc != FG_OK) {
            redis_close(&st->base);
            return NULL;
        }
        if (fg__rnode_eval_check(&st->node, &c, deadline, err, errlen) !=
            FG_OK) {
            redisFree(c.c);
            redis_close(&st->base);
            return NULL;
        }
        fg__rnode_settings_check(&st->node, &c, deadline);
        if (base || c.broken)
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

/* Copied under the node's lock (a check on another thread may write it)
 * into the caller's thread's own buffer. */
const char *fg__store_redis_last_error(fg_store *s)
{
    static _Thread_local char copy[sizeof((fg__rnode *)0)->errstr];
    if (!is_redis(s))
        return "";
    fg__rnode *n = &((redis_store *)s)->node;
    pthread_mutex_lock(&n->mu);
    memcpy(copy, n->errstr, sizeof copy);
    pthread_mutex_unlock(&n->mu);
    return copy;
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
    st->node.in_cluster = 1;
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

void fg__store_redis_settings_probe(fg_store *s, uint64_t deadline_us)
{
    redis_store *st = (redis_store *)s;
    fg__rsconn c;
    if (fg__rpool_get(&st->node, deadline_us, &c) != FG_OK)
        return;
    fg__rnode_settings_check(&st->node, &c, deadline_us);
    fg__rpool_put(&st->node, &c);
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

/* A host given by name: the address it had when last looked up, which an
 * async store follows (fg__rnode_readdress). Else the node's name. */
static const char *redis_node_addr(fg_store *s, unsigned node)
{
    static _Thread_local char copy[INET6_ADDRSTRLEN + 8];
    redis_store *st = (redis_store *)s;
    (void)node;
    if (!st->node.named)
        return st->node.name;
    fg__rnode_addr(&st->node, copy, sizeof copy);
    return copy;
}

static const char *redis_node_error(fg_store *s, unsigned node)
{
    (void)node;
    return fg__store_redis_last_error(s);
}

/* Written once, at open. */
static const char *redis_warning(fg_store *s)
{
    const char *w = ((redis_store *)s)->node.warning;
    return w[0] ? w : NULL;
}

static const fg__store_ops redis_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .check = redis_check,
    .refund = redis_refund,
    .peek = redis_peek,
    .reset = redis_reset,
    .close = redis_close,
    .now = redis_now,
    .node_name = redis_node_name,
    .node_addr = redis_node_addr,
    .node_error = redis_node_error,
    .warning = redis_warning,
};

static const fg__store_ops redis_async_ops = {
    .scheme = "redis",
    .limiter_init = redis_limiter_init,
    .check = redis_check,
    .check_async = fg__redis_check_async,
    .refund = fg__redis_refund_async,
    .peek = redis_peek,
    .reset = redis_reset,
    .close = redis_close,
    .busy = fg__redis_busy,
    .now = redis_now,
    .node_name = redis_node_name,
    .node_addr = redis_node_addr,
    .node_error = redis_node_error,
    .warning = redis_warning,
};
