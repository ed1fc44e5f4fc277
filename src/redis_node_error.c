/* redis_node_error.c -- a Redis node's last error, for logs (see
 * redis_conn.h): written under the node's lock, and only when it changes
 * (a run of failed checks with one code and the same words from Redis
 * writes it once), so that an outage costs no lock or formatting per
 * check. */
#include <stdio.h>
#include <string.h>

#include "redis_conn.h"
#include "floodgate.h"

/* Orders the errors of all nodes, so that a store of several can tell
 * which was written last. */
static atomic_ullong err_seq_next;

/* Call with 'mu' held, after writing 'errstr'. */
static void error_written_locked(fg__rnode *st, int code)
{
    atomic_store_explicit(&st->err_code, code, memory_order_relaxed);
    atomic_store_explicit(&st->err_text, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->err_writes, 1, memory_order_relaxed);
    atomic_store_explicit(&st->err_seq, atomic_fetch_add(&err_seq_next, 1) + 1,
                          memory_order_relaxed);
}

/* Write 'fmt' (with the store's address and 'detail') as the store's error,
 * the reason of checks that fail with 'code' (0: of none in particular). */
void fg__rnode_set_error_as(fg__rnode *st, int code, const char *fmt,
                            const char *detail)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, st->where, detail);
    pthread_mutex_lock(&st->mu);
    memcpy(st->errstr, msg, sizeof msg);
    error_written_locked(st, code);
    pthread_mutex_unlock(&st->mu);
}

void fg__rnode_set_error(fg__rnode *st, const char *fmt, const char *detail)
{
    fg__rnode_set_error_as(st, 0, fmt, detail);
}

/* A check failed with 'rc': say so, unless that is what 'errstr' already
 * says. The relaxed read costs nothing; a race at worst writes twice. */
void fg__rnode_check_error(fg__rnode *st, int rc)
{
    fg__rnode_op_error(st, "check", rc);
}

/* 1 when the node's error says code 'rc' with Redis's words 'text' (0:
 * none); read without the lock first (it costs nothing), then under it,
 * where a write's two atomics are seen together. */
static int says(fg__rnode *st, int rc, uint64_t text)
{
    return atomic_load_explicit(&st->err_code, memory_order_relaxed) == rc &&
           atomic_load_explicit(&st->err_text, memory_order_relaxed) == text;
}

void fg__rnode_op_error(fg__rnode *st, const char *op, int rc)
{
    if (says(st, rc, 0))
        return;
    char msg[512];
    snprintf(msg, sizeof msg, "redis %.200s: %s failed: %.200s", st->where, op,
             fg_strerror(rc));
    pthread_mutex_lock(&st->mu);
    if (!says(st, rc, 0)) {
        memcpy(st->errstr, msg, sizeof msg);
        error_written_locked(st, rc);
    }
    pthread_mutex_unlock(&st->mu);
}

void fg__rnode_reply_error(fg__rnode *st, int rc, const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_ERROR)
        fg__rnode_check_error(st, rc);
    else
        fg__rnode_said_error(st, rc, r->str, r->len);
}

void fg__rnode_said_error(fg__rnode *st, int rc, const char *said, size_t len)
{
    if (!len) {
        fg__rnode_check_error(st, rc);
        return;
    }
    size_t n = len < 200 ? len : 200;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)said[i]) * 0x100000001b3ull;
    h |= 1; /* never 0, which says no words */
    if (says(st, rc, h))
        return;
    /* A plain Redis store answered a redirection: it was pointed at a
     * Cluster node. */
    int moved = !st->in_cluster && ((n > 6 && !memcmp(said, "MOVED ", 6)) ||
                                    (n > 4 && !memcmp(said, "ASK ", 4)));
    char msg[512];
    snprintf(msg, sizeof msg, "redis %.200s: check failed: %.*s%s", st->where,
             (int)n, said,
             moved ? " (a Redis Cluster node: give cluster=redis://HOST:PORT)"
                   : "");
    pthread_mutex_lock(&st->mu);
    if (!says(st, rc, h)) {
        memcpy(st->errstr, msg, sizeof msg);
        error_written_locked(st, rc);
        atomic_store_explicit(&st->err_text, h, memory_order_relaxed);
    }
    pthread_mutex_unlock(&st->mu);
}

void fg__rnode_error_locked(fg__rnode *st, int code, const char *text)
{
    snprintf(st->errstr, sizeof st->errstr, "%s", text);
    error_written_locked(st, code);
}
