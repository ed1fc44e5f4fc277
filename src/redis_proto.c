/* redis_proto.c -- what the Redis store sends and how it reads the replies,
 * per algorithm, with no I/O (see redis_proto.h). */
#include <string.h>

#include "redis_proto.h"
#include "store.h"
#include "alloc.h"

size_t fg__redis_u64(char *buf, uint64_t v)
{
    char tmp[21];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

size_t fg__redis_head(char *buf, char type, uint64_t n)
{
    size_t len = 0;
    buf[len++] = type;
    len += fg__redis_u64(buf + len, n);
    buf[len++] = '\r';
    buf[len++] = '\n';
    return len;
}

size_t fg__redis_bulk(char *buf, const char *s, size_t len)
{
    size_t n = fg__redis_head(buf, '$', len);
    memcpy(buf + n, s, len);
    n += len;
    buf[n++] = '\r';
    buf[n++] = '\n';
    return n;
}

size_t fg__redis_format(char *buf, size_t cap, int argc, const char **argv,
                        const size_t *len)
{
    size_t n = 0;
    /* A count or length takes at most 20 digits: 24 bytes bound the header
     * and FG__REDIS_BULK_OVER each argument's framing. */
    if (argc < 0 || cap < 24)
        return 0;
    n = fg__redis_head(buf, '*', (uint64_t)argc);
    for (int i = 0; i < argc; i++) {
        if (len[i] > cap || cap - n < len[i] + FG__REDIS_BULK_OVER)
            return 0;
        n += fg__redis_bulk(buf + n, argv[i], len[i]);
    }
    return n;
}

size_t fg__redis_key(char *buf, const char *kp, size_t kplen, const char *key,
                     size_t keylen, int64_t window)
{
    size_t n = kplen;
    if (keylen > FG_MAX_KEY || kplen > FG__REDIS_KP_MAX)
        return 0;
    memcpy(buf, kp, kplen);
    if (keylen) /* an empty key may come as NULL */
        memcpy(buf + n, key, keylen);
    n += keylen;
    buf[n++] = '}';
    buf[n++] = ':';
    if (window >= 0)
        n += fg__redis_u64(buf + n, (uint64_t)window);
    return n;
}

static int starts(const char *s, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len >= n && memcmp(s, lit, n) == 0;
}

int fg__redis_error_code(const char *s, size_t len)
{
    if (!s)
        return FG_EPROTO;
    if (starts(s, len, "NOSCRIPT"))
        return FG__REDIS_NOSCRIPT;
    if (starts(s, len, "BUSY ") || starts(s, len, "LOADING"))
        return FG_EBUSY;
    if (starts(s, len, "OOM"))
        return FG_EOOM;
    if (starts(s, len, "READONLY"))
        return FG_EREADONLY;
    if (starts(s, len, "NOAUTH") || starts(s, len, "WRONGPASS") ||
        starts(s, len, "NOPERM") || starts(s, len, "ERR invalid password") ||
        starts(s, len, "ERR AUTH") || starts(s, len, "ERR Client sent AUTH") ||
        /* A command of more than 10 arguments (a token bucket batch)
         * before AUTH: Redis says so, and closes the connection. */
        starts(s, len, "ERR Protocol error: unauthenticated"))
        return FG_EAUTH;
    /* One key's value, not the store: a foreign key of another type under
     * the prefix, or a count Redis cannot add to. That key follows its
     * policy; the node's breaker does not count it. */
    if (starts(s, len, "ERR floodgate") || starts(s, len, "WRONGTYPE") ||
        starts(s, len, "ERR increment or decrement would overflow") ||
        starts(s, len, "ERR value is not an integer"))
        return FG_ERANGE;
    if (starts(s, len, "ERR DB index"))
        return FG_EINVAL;
    /* A server that cannot take the command now: a failed background
     * save (MISCONF), or no room for another connection. */
    if (starts(s, len, "MASTERDOWN") || starts(s, len, "CLUSTERDOWN") ||
        starts(s, len, "TRYAGAIN") || starts(s, len, "MOVED") ||
        starts(s, len, "ASK") || starts(s, len, "MISCONF") ||
        starts(s, len, "ERR max number of clients") ||
        /* A script's own words for CLUSTERDOWN and a moved slot (a token
         * bucket batch on Cluster declares no keys). */
        starts(s, len,
               "ERR Script attempted to execute a command while "
               "the cluster is down") ||
        starts(s, len, "ERR Script attempted to access a non local key"))
        return FG_EBACKEND;
    return FG_EPROTO;
}

int fg__redis_script_values(const redisReply *r, size_t i, uint64_t limit,
                            fg_decision *d)
{
    redisReply *const *e;
    if (r->type != REDIS_REPLY_ARRAY || r->elements / 4 <= i)
        return FG_EPROTO;
    e = r->element + 4 * i;
    for (size_t j = 0; j < 4; j++)
        if (e[j]->type != REDIS_REPLY_INTEGER || e[j]->integer < 0)
            return FG_EPROTO;
    if (e[0]->integer > 1)
        return FG_EPROTO;
    d->allowed = (int)e[0]->integer;
    d->limit = limit;
    d->remaining = (uint64_t)e[1]->integer;
    d->reset_us = (uint64_t)e[2]->integer;
    d->retry_after_us = (uint64_t)e[3]->integer;
    fg__decision_ms(d);
    return FG_OK;
}

int fg__redis_script_reply(const redisReply *r, uint64_t limit, fg_decision *d)
{
    if (!r)
        return FG_EBACKEND;
    if (r->type == REDIS_REPLY_ERROR)
        return fg__redis_error_code(r->str, r->len);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
        return FG_EPROTO;
    return fg__redis_script_values(r, 0, limit, d);
}

void fg__redis_window_decision(const fg__algo_params *p, uint64_t now_us,
                               uint64_t count_before, uint64_t cost,
                               fg_decision *d)
{
    /* Past the limit the counter's overshoot is kept (DESIGN.md 3); to the
     * decision it means the same as a full window. */
    fg__algo_state s = {now_us / p->period_us + 1,
                        count_before > p->limit ? p->limit : count_before, 0};
    fg__algo_params fp = *p;
    uint64_t expires;
    fp.algorithm = FG_FIXED_WINDOW;
    if (fg__algo_check(&fp, &s, now_us, cost, d, &expires) != FG_OK) {
        /* Unreachable: the limiter validated 'cost'. Refuse, consume
         * nothing. */
        d->allowed = 0;
        d->limit = p->limit;
        d->remaining = 0;
        d->reset_us = d->retry_after_us = p->period_us;
        fg__decision_ms(d);
    }
}

uint64_t fg__redis_window_ttl_ms(const fg__algo_params *p, uint64_t now_us)
{
    uint64_t end = (now_us / p->period_us + 1) * p->period_us;
    uint64_t margin = p->period_us < 1000000 ? p->period_us : 1000000;
    return fg__us_to_ms_up(end - now_us + margin);
}

/* ---- One protocol per algorithm ---------------------------------------- */

fg__rlim *fg__rlim_new(const fg__algo_params *p, const char *prefix,
                       size_t prefixlen, const char *name, size_t namelen)
{
    fg__rlim *rl = fg__calloc(1, sizeof *rl + prefixlen + namelen + 24);
    if (!rl)
        return NULL;
    memcpy(rl->kp, prefix, prefixlen);
    memcpy(rl->kp + prefixlen, name, namelen);
    rl->kplen = prefixlen + namelen;
    /* A token bucket's key holds its depth (burst / rate, whole us): two
     * configurations of one limit whose buckets differ in depth, live at
     * once while servers change over, each keep their own bucket. Sharing
     * one, each read the other's debt in its own depth and undid it. */
    if (p->algorithm == FG_TOKEN_BUCKET) {
        rl->kp[rl->kplen++] = ':';
        rl->kplen += fg__redis_u64(rl->kp + rl->kplen, p->depth_us);
    }
    memcpy(rl->kp + rl->kplen, ":{", 2);
    rl->kplen += 2;
    rl->script = -1;
    if (p->algorithm == FG_SLIDING_WINDOW) {
        rl->script = FG__LUA_SLIDING;
        rl->nstatic = 2;
        rl->statlen[0] = fg__redis_u64(rl->stat[0], p->period_us);
        rl->statlen[1] = fg__redis_u64(rl->stat[1], p->limit);
    } else if (p->algorithm == FG_TOKEN_BUCKET) {
        const uint64_t v[6] = {p->scale,    p->unit_us,    p->unit_frac,
                               p->depth_us, p->depth_frac, p->t_scaled};
        rl->script = FG__LUA_TOKEN;
        rl->nstatic = 6;
        for (int i = 0; i < 6; i++)
            rl->statlen[i] = fg__redis_u64(rl->stat[i], v[i]);
    }
    return rl;
}

static void arg(fg__rcmd *c, const char *s, size_t n)
{
    c->argv[c->argc] = s;
    c->len[c->argc++] = n;
}

#define ARG_LIT(c, lit) arg((c), (lit), sizeof(lit) - 1)

/* The key of 'key' under 'p' and 'rl' into 'c->key': the window's for a
 * fixed window, the base ending in ':' for a sliding window, and for a
 * token bucket the key ending at the hash tag. FG_OK or FG_EKEY. */
static int build_key(fg__rcmd *c, const fg__algo_params *p, const fg__rlim *rl,
                     const char *key, size_t keylen, uint64_t now_us)
{
    int64_t w = p->algorithm == FG_SLIDING_WINDOW ? -1
                : p->algorithm == FG_TOKEN_BUCKET
                    ? -2
                    : (int64_t)(now_us / p->period_us);
    c->keylen =
        fg__redis_key(c->key, rl->kp, rl->kplen, key, keylen, w < 0 ? -1 : w);
    if (!c->keylen)
        return FG_EKEY;
    if (w == -2)
        c->keylen--;
    return FG_OK;
}

/* EVALSHA 'sha', or EVAL of script 'i' when 'sha' is NULL. */
static void script_head(fg__rcmd *c, int i, const char *sha)
{
    c->argc = 0;
    if (sha) {
        ARG_LIT(c, "EVALSHA");
        arg(c, sha, 40);
    } else {
        ARG_LIT(c, "EVAL");
        arg(c, fg__redis_lua[i], strlen(fg__redis_lua[i]));
    }
    ARG_LIT(c, "1");
    arg(c, c->key, c->keylen);
}

/* INCRBY or DECRBY ('verb') by 'cost'; INCR for the usual cost of 1,
 * which Redis parses a little faster. */
static void incrby_cmd(fg__rcmd *c, const char *verb, uint64_t cost)
{
    c->argc = 0;
    if (cost == 1 && verb[0] == 'I') {
        ARG_LIT(c, "INCR");
        arg(c, c->key, c->keylen);
        return;
    }
    arg(c, verb, 6);
    arg(c, c->key, c->keylen);
    arg(c, c->cost, fg__redis_u64(c->cost, cost));
}

/* A script's cost argument: negated for fg_add. */
static size_t cost_arg(char *buf, const fg__rcheck *c)
{
    if (!c->add)
        return fg__redis_u64(buf, c->cost);
    buf[0] = '-';
    return 1 + fg__redis_u64(buf + 1, c->cost);
}

int fg__rcheck_init(fg__rcheck *c, const fg__algo_params *p, const fg__rlim *rl,
                    const char *key, size_t keylen, uint64_t cost,
                    uint64_t age_us, uint64_t now_us)
{
    c->p = p;
    c->rl = rl;
    c->key = key;
    c->keylen = keylen;
    c->add = (cost & FG__COST_ADD) != 0;
    c->cost = cost & ~FG__COST_ADD;
    c->age_us = c->add ? age_us : 0;
    c->now_us = now_us;
    /* A fixed window's key is the caller's window: units spent in an
     * earlier one count there no longer (the add reads the count). */
    if (c->age_us && p->algorithm == FG_FIXED_WINDOW &&
        fg__window_of(p, now_us > c->age_us ? now_us - c->age_us : 0) !=
            fg__window_of(p, now_us))
        c->cost = 0;
    c->stage = FG__RS_FIRST;
    c->count = 0;
    /* fg__redis_key's own bounds, checked once. */
    if (keylen > FG_MAX_KEY || rl->kplen > FG__REDIS_KP_MAX)
        return FG_EKEY;
    return FG_OK;
}

int fg__rcheck_ncmds(const fg__rcheck *c)
{
    return c->p->algorithm == FG_FIXED_WINDOW && c->stage == FG__RS_FIRST ? 2
                                                                          : 1;
}

void fg__rcheck_cmd(const fg__rcheck *c, int i, const fg__redis_shas *shas,
                    fg__rcmd *out)
{
    build_key(out, c->p, c->rl, c->key, c->keylen, c->now_us);
    out->argc = 0;
    switch (c->p->algorithm) {
    case FG_FIXED_WINDOW:
        if (c->stage == FG__RS_GIVEBACK && c->lift) {
            incrby_cmd(out, "INCRBY", c->lift);
        } else if (c->stage == FG__RS_GIVEBACK) {
            /* A plain DECRBY (no script: it cannot meet NOSCRIPT, and is
             * sent unwaited). One that arrives after the key was deleted
             * (FLUSHALL, a reset) makes it anew below zero, which the
             * next check lifts (and its PEXPIRE NX expires). */
            incrby_cmd(out, "DECRBY", c->cost);
        } else if (i == 0) {
            incrby_cmd(out, "INCRBY", c->cost);
        } else {
            ARG_LIT(out, "PEXPIRE");
            arg(out, out->key, out->keylen);
            arg(out, out->ttl,
                fg__redis_u64(out->ttl,
                              fg__redis_window_ttl_ms(c->p, c->now_us)));
            ARG_LIT(out, "NX");
        }
        return;
    case FG_NAIVE_GET_SET:
        if (c->stage == FG__RS_FIRST) {
            ARG_LIT(out, "GET");
            arg(out, out->key, out->keylen);
            return;
        }
        /* The broken part, on purpose: another server may have written
         * between our GET and this SET. */
        ARG_LIT(out, "SET");
        arg(out, out->key, out->keylen);
        arg(out, out->n, fg__redis_u64(out->n, c->count));
        ARG_LIT(out, "PX");
        arg(out, out->ttl,
            fg__redis_u64(out->ttl, fg__redis_window_ttl_ms(c->p, c->now_us)));
        return;
    default:
        script_head(out, c->rl->script,
                    c->stage == FG__RS_EVAL
                        ? NULL
                        : fg__redis_sha(shas, c->rl->script));
        for (int k = 0; k < c->rl->nstatic; k++)
            arg(out, c->rl->stat[k], c->rl->statlen[k]);
        arg(out, out->cost, cost_arg(out->cost, c));
        if (c->now_us)
            arg(out, out->now, fg__redis_u64(out->now, c->now_us));
        else
            arg(out, "", 0);
        if (c->age_us && c->p->algorithm == FG_SLIDING_WINDOW)
            arg(out, out->age, fg__redis_u64(out->age, c->age_us));
        return;
    }
}

/* An integer reply (INCRBY), or a bulk string holding one (GET), or nil. */
static int reply_count(const redisReply *r, uint64_t *out)
{
    if (r->type == REDIS_REPLY_ERROR)
        return fg__redis_error_code(r->str, r->len);
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return FG_OK;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        /* Below zero when a give-back arrived after the key was deleted,
         * a refund crossed a give-back, or someone else wrote it: the
         * window is empty (fg__rcheck_reply lifts it). */
        *out = r->integer < 0 ? 0 : (uint64_t)r->integer;
        return FG_OK;
    }
    if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len <= 19) {
        uint64_t v = 0;
        for (size_t i = 0; i < r->len; i++) {
            if (r->str[i] < '0' || r->str[i] > '9')
                return FG_EPROTO;
            v = v * 10 + (uint64_t)(r->str[i] - '0');
        }
        *out = v;
        return FG_OK;
    }
    return FG_EPROTO;
}

/* INCRBY's reply: an integer (or an error). Anything else is not what
 * Redis answers to it; read as a count, a nil would admit and count
 * nothing. */
static int incr_count(const redisReply *r, uint64_t *out)
{
    if (r->type != REDIS_REPLY_INTEGER && r->type != REDIS_REPLY_ERROR)
        return FG_EPROTO;
    return reply_count(r, out);
}

int fg__rcheck_reply(fg__rcheck *c, const redisReply *r, fg_decision *d)
{
    uint64_t count = 0, before = 0;
    int rc;
    switch (c->p->algorithm) {
    case FG_FIXED_WINDOW:
        if ((rc = incr_count(r, &count)) != FG_OK)
            return rc;
        if (c->add) {
            fg__window_add_decision(c->p, c->now_us, count, d);
            return FG_OK;
        }
        /* Less than this check's units: the key held less than zero, a
         * give-back that arrived after the key was deleted (FLUSHALL, a
         * reset) or a refund that crossed one. No unit below zero was
         * ever admitted: the check is decided on an empty window, and the
         * count raised to its units, sent without waiting (concurrent
         * checks that lift it too can only over-count: refuse early). */
        c->lift = 0;
        if (r->type == REDIS_REPLY_INTEGER && r->integer < (long long)c->cost) {
            /* cost - count, exact in unsigned arithmetic; INCRBY takes at
             * most INT64_MAX (a count that low is lifted again next time). */
            c->lift = c->cost - (uint64_t)r->integer;
            if (c->lift > (uint64_t)INT64_MAX)
                c->lift = (uint64_t)INT64_MAX;
        }
        before = count >= c->cost ? count - c->cost : 0;
        fg__redis_window_decision(c->p, c->now_us, before, c->cost, d);
        if (d->allowed && !c->lift)
            return FG_OK;
        if (d->allowed) {
            c->stage = FG__RS_GIVEBACK;
            return FG__RSTEP_GIVEBACK;
        }
        /* Give back what cannot be admitted, so the refusal consumes
         * nothing (DESIGN.md 3), even on a full window: the count then
         * stays within the limit and the increments in flight (it cannot
         * grow until INCRBY overflows), and a count over the limit only
         * because another refusal's give-back is on its way does not keep
         * this one's units. Sent without waiting, so the decision never
         * spends what is left of the deadline on it (nor fails when that
         * runs out). If it is lost the refusal stands and the window only
         * over-refuses until it ends. */
        c->stage = FG__RS_GIVEBACK;
        return FG__RSTEP_GIVEBACK;
    case FG_NAIVE_GET_SET:
        if (c->stage == FG__RS_SET) {
            if (r->type == REDIS_REPLY_ERROR)
                return fg__redis_error_code(r->str, r->len);
            *d = c->d;
            return FG_OK;
        }
        if ((rc = reply_count(r, &count)) != FG_OK)
            return rc;
        fg__redis_window_decision(c->p, c->now_us, count, c->cost, d);
        if (!d->allowed)
            return FG_OK;
        c->d = *d;
        c->count = count + c->cost;
        c->stage = FG__RS_SET;
        return FG__RSTEP_AGAIN;
    default:
        rc = fg__redis_script_reply(
            r, c->p->algorithm == FG_TOKEN_BUCKET ? c->p->burst : c->p->limit,
            d);
        if (rc != FG__REDIS_NOSCRIPT)
            return rc;
        /* The script cache was flushed or the server restarted: EVAL once,
         * which also caches the script again. */
        if (c->stage == FG__RS_EVAL)
            return FG_EPROTO;
        c->stage = FG__RS_EVAL;
        return FG__RSTEP_AGAIN;
    }
}

int fg__rcheck_aside_reply(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR ? fg__redis_error_code(r->str, r->len)
                                        : FG_OK;
}

int fg__rcheck_unsent(const fg__rcheck *c, fg_decision *d)
{
    if (c->stage == FG__RS_SET) {
        *d = c->d;
        return FG_OK;
    }
    return FG_EPROTO;
}

size_t fg__rbatch_need(const fg__rcheck *const *c, int n, const char *sha)
{
    size_t slen = sha ? 40 : strlen(fg__redis_lua[FG__LUA_TOKEN]);
    size_t need = 24 + 4 * FG__REDIS_BULK_OVER + 7 + slen + 40;
    for (int i = 0; i < n; i++)
        need += 9 * FG__REDIS_BULK_OVER + c[i]->rl->kplen + c[i]->keylen + 2 +
                6 * 20 + 2 * 20;
    return need;
}

size_t fg__rbatch_format(char *b, const fg__rcheck *const *c, int n,
                         const char *sha, int argv_keys)
{
    const char *script = sha ? sha : fg__redis_lua[FG__LUA_TOKEN];
    size_t slen = sha ? 40 : strlen(script), len;
    char num[21];
    len = fg__redis_head(b, '*', 3 + (argv_keys ? 1 : 0) + 9 * (uint64_t)n);
    len += sha ? fg__redis_bulk(b + len, "EVALSHA", 7)
               : fg__redis_bulk(b + len, "EVAL", 4);
    len += fg__redis_bulk(b + len, script, slen);
    if (argv_keys)
        len += fg__redis_bulk(b + len, "0", 1);
    len += fg__redis_bulk(b + len, num, fg__redis_u64(num, (uint64_t)n));
    for (int i = 0; i < n; i++) {
        /* The key as build_key makes it: the layout's "}:" less the ':'
         * (fg__rcheck_init has checked its length). */
        const fg__rlim *rl = c[i]->rl;
        size_t kl = rl->kplen + c[i]->keylen + 1;
        len += fg__redis_head(b + len, '$', kl);
        fg__redis_key(b + len, rl->kp, rl->kplen, c[i]->key, c[i]->keylen, -1);
        len += kl;
        b[len++] = '\r';
        b[len++] = '\n';
    }
    for (int i = 0; i < n; i++) {
        const fg__rlim *rl = c[i]->rl;
        for (int k = 0; k < rl->nstatic; k++)
            len += fg__redis_bulk(b + len, rl->stat[k], rl->statlen[k]);
        len += fg__redis_bulk(b + len, num, cost_arg(num, c[i]));
        len += c[i]->now_us ? fg__redis_bulk(b + len, num,
                                             fg__redis_u64(num, c[i]->now_us))
                            : fg__redis_bulk(b + len, "", 0);
    }
    return len;
}

int fg__rbatch_reply(const redisReply *r, int n, int eval)
{
    int rc = FG_OK;
    if (r->type == REDIS_REPLY_ERROR)
        rc = fg__redis_error_code(r->str, r->len);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 * (size_t)n)
        rc = FG_EPROTO;
    if (rc == FG__REDIS_NOSCRIPT)
        return eval ? FG_EPROTO : FG__RSTEP_AGAIN;
    return rc;
}

int fg__rbatch_value(const redisReply *r, size_t i, const fg__rcheck *c,
                     fg_decision *d)
{
    return fg__redis_script_values(r, i, c->p->burst, d);
}

int fg__rrefund_init(fg__rrefund *rf, const fg__algo_params *p,
                     const fg__rlim *rl, const char *key, size_t keylen,
                     uint64_t cost, uint64_t now_us, const fg__taken *t)
{
    /* A fixed window's key is the window that took the units. */
    uint64_t at = now_us > t->age_us ? now_us - t->age_us : 1;
    int rc = build_key(&rf->k, p, rl, key, keylen, at);
    if (rc != FG_OK)
        return rc;
    rf->eval = 0;
    rf->p1len = rf->p2len = rf->p3len = rf->p4len = 0;
    switch (p->algorithm) {
    case FG_FIXED_WINDOW:
        /* Only what it took: the count's refused units above the limit
         * are their own checks' to give back, and on their way. */
        rf->kind[0] = 'f';
        break;
    case FG_SLIDING_WINDOW:
        rf->kind[0] = 's';
        rf->p1len = fg__redis_u64(rf->p1, p->period_us);
        rf->p2len = fg__redis_u64(rf->p2, t->age_us);
        break;
    case FG_TOKEN_BUCKET:
        rf->kind[0] = 't';
        rf->p1len = fg__redis_u64(rf->p1, p->scale);
        rf->p2len = fg__redis_u64(rf->p2, p->unit_us);
        rf->p3len = fg__redis_u64(rf->p3, p->unit_frac);
        /* '' for no bound: an argument Lua reads exactly. */
        if (t->hold_us != FG__HOLD_ANY)
            rf->p4len = fg__redis_u64(rf->p4, t->hold_us);
        break;
    default:
        return FG_ENOTSUP;
    }
    rf->kind[1] = '\0';
    fg__redis_u64(rf->k.cost, cost);
    rf->nowlen = now_us ? fg__redis_u64(rf->k.now, now_us) : 0;
    return FG_OK;
}

void fg__rrefund_cmd(fg__rrefund *rf, const fg__redis_shas *shas)
{
    fg__rcmd *c = &rf->k;
    script_head(c, FG__LUA_REFUND,
                rf->eval ? NULL : fg__redis_sha(shas, FG__LUA_REFUND));
    arg(c, rf->kind, 1);
    arg(c, c->cost, strlen(c->cost));
    arg(c, c->now, rf->nowlen);
    if (rf->p1len)
        arg(c, rf->p1, rf->p1len);
    if (rf->p2len)
        arg(c, rf->p2, rf->p2len);
    if (rf->p3len) {
        arg(c, rf->p3, rf->p3len);
        arg(c, rf->p4, rf->p4len);
    }
}

int fg__rrefund_reply(fg__rrefund *rf, const redisReply *r)
{
    int rc = r->type == REDIS_REPLY_ERROR ? fg__redis_error_code(r->str, r->len)
             : r->type == REDIS_REPLY_INTEGER ? FG_OK
                                              : FG_EPROTO;
    if (rc != FG__REDIS_NOSCRIPT)
        return rc;
    if (rf->eval)
        return FG_EPROTO; /* NOSCRIPT after EVAL */
    rf->eval = 1;
    return FG__RSTEP_AGAIN;
}
