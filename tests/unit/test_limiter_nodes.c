/* test_limiter_nodes.c -- a circuit breaker per node of a store of several
 * (shards): a node that fails opens its own breaker only, so its keys follow
 * the failure policy while every other key is still decided by the store.
 * Driven through a store of three nodes defined here, whose nodes fail on
 * demand; blocking and asynchronous checks alike. */
#include <string.h>

#include "../harness.h"
#include "floodgate.h"
#include "breaker.h"
#include "limiter.h"
#include "store.h"

#define NODES 3

typedef struct fake_store {
    fg_store base;
    int down[NODES];
    unsigned calls[NODES];
    int moved;     /* "r..." keys: on node 1 until a check moves them to 2 */
    fg__req *held; /* 'hold': an async check kept unanswered */
    int hold;
} fake_store;

/* The key's first byte names its node: "0...", "1...", "2..."; "r..." is
 * a key whose slot moves from node 1 to node 2 as it is checked (a
 * redirection, as Redis Cluster's MOVED). */
static unsigned fake_node_of(fg_store *s, const char *key, size_t keylen)
{
    if (keylen && key[0] == 'r')
        return ((fake_store *)s)->moved ? 2 : 1;
    return keylen && key[0] >= '0' && key[0] < '0' + NODES
               ? (unsigned)(key[0] - '0')
               : 0;
}

static int fake_init(fg_store *s, fg_limiter *l, void **out, char *err,
                     size_t errlen)
{
    (void)s, (void)l, (void)err, (void)errlen;
    *out = NULL;
    return FG_OK;
}

static int fake_check(fg_store *s, fg_limiter *l, const char *key,
                      size_t keylen, uint64_t cost, uint64_t age_us,
                      fg_decision *d)
{
    fake_store *st = (fake_store *)s;
    (void)age_us;
    if (keylen && key[0] == 'r')
        st->moved = 1; /* node 1 redirects it to node 2, which answers */
    unsigned n = fake_node_of(s, key, keylen);
    (void)l;
    st->calls[n]++;
    if (st->down[n])
        return FG_EBACKEND;
    memset(d, 0, sizeof(*d));
    d->allowed = 1;
    d->limit = 100;
    d->remaining = 100 - cost;
    return FG_OK;
}

static void fake_check_async(fg_store *s, fg__req *req)
{
    fg_decision d;
    if (((fake_store *)s)->hold) {
        ((fake_store *)s)->held = req;
        return;
    }
    CHECK_EQ(req->node, fake_node_of(s, req->key, req->keylen));
    int rc = fake_check(s, req->l, req->key, req->keylen, req->cost, 0, &d);
    fg__req_move(req, fake_node_of(s, req->key, req->keylen));
    fg__req_done(req, rc, &d);
}

static int fake_refund(fg_store *s, fg_limiter *l, const char *key,
                       size_t keylen, uint64_t cost, const fg__taken *t)
{
    (void)s, (void)l, (void)key, (void)keylen, (void)cost, (void)t;
    return FG_OK;
}

static void fake_close(fg_store *s)
{
    (void)s;
}

static const fg__store_ops fake_ops = {
    .scheme = "fake",
    .limiter_init = fake_init,
    .check = fake_check,
    .check_async = fake_check_async,
    .refund = fake_refund,
    .close = fake_close,
    .node_of = fake_node_of,
};

static int last_rc;
static fg_decision last_d;

static void on_done(int rc, const fg_decision *d, void *data)
{
    (void)data;
    last_rc = rc;
    last_d = *d;
}

/* A limiter of 100/s on 'st' that fails closed. */
static fg_limiter *closed_limiter(fake_store *st)
{
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("100/s", &lim), FG_OK);
    lim.on_failure = FG_FAIL_CLOSED;
    fg_limiter *l = fg_limiter_new(&st->base, &lim, NULL, 0);
    CHECK(l != NULL);
    return l;
}

static void run(int async)
{
    fake_store st = {.base = {.ops = &fake_ops, .nodes = NODES}};
    fg_limiter *l = closed_limiter(&st);
    if (!l)
        return;
    CHECK_STR(fg_limiter_node_breaker(l, 2), "closed");
    CHECK(fg_limiter_node_breaker(l, 3) == NULL);

    st.down[1] = 1;
    /* Node 1's keys fail and open its breaker; the others' keys pass. */
    for (int i = 0; i < 20; i++) {
        const char *key = i % 3 == 0 ? "0a" : i % 3 == 1 ? "1b" : "2c";
        fg_decision d;
        int rc;
        if (async) {
            CHECK_EQ(fg_check_async(l, key, 2, 1, on_done, NULL), FG_OK);
            rc = last_rc;
            d = last_d;
        } else {
            rc = fg_check(l, key, 2, 1, &d);
        }
        if (key[0] == '1') {
            CHECK(rc == FG_EBACKEND || rc == FG_EBREAKER);
            CHECK_EQ(d.source, FG_SOURCE_FAIL_CLOSED);
            CHECK_EQ(d.allowed, 0);
        } else {
            CHECK_EQ(rc, FG_OK);
            CHECK_EQ(d.source, FG_SOURCE_STORE);
            CHECK_EQ(d.allowed, 1);
        }
    }
    /* Opened after 3 failures: node 1 was asked 3 times of 7. */
    CHECK_EQ(st.calls[1], 3);
    CHECK_EQ(st.calls[0], 7);
    CHECK_EQ(st.calls[2], 6);
    CHECK_STR(fg_limiter_node_breaker(l, 1), "open");
    CHECK_STR(fg_limiter_node_breaker(l, 0), "closed");
    CHECK_STR(fg_limiter_node_breaker(l, 2), "closed");
    CHECK_STR(fg_limiter_breaker(l), "open");
    /* A refund of a key whose node's breaker is open is not sent. */
    CHECK_EQ(fg_refund(l, "1b", 2, 1), FG_EBREAKER);
    CHECK_EQ(fg_refund(l, "2c", 2, 1), FG_OK);
    fg_limiter_free(l);
}

/* A check redirected from node 1 to node 2 (down). Async, the request
 * knows where it went: node 2's breaker learns the failures. Blocking, a
 * failure stays the first node's (the map read after a failure may name a
 * node that was never asked). */
static void run_redirected(int async)
{
    fake_store st = {.base = {.ops = &fake_ops, .nodes = NODES}};
    fg_limiter *l = closed_limiter(&st);
    if (!l)
        return;
    st.down[2] = 1;
    for (int i = 0; i < FG__BREAKER_THRESHOLD; i++) {
        fg_decision d;
        st.moved = 0;
        if (async)
            CHECK_EQ(fg_check_async(l, "rk", 2, 1, on_done, NULL), FG_OK);
        else
            CHECK_EQ(fg_check(l, "rk", 2, 1, &d), FG_EBACKEND);
    }
    CHECK_EQ(st.calls[2], FG__BREAKER_THRESHOLD);
    CHECK_STR(fg_limiter_node_breaker(l, 2), async ? "open" : "closed");
    CHECK_STR(fg_limiter_node_breaker(l, 1), async ? "closed" : "open");
    fg_limiter_free(l);
}

/* An async check in flight counts in fg_limiter_pending until its
 * callback, and a callback may free the limiter (run under ASan). */
static fg_limiter *to_free;
static void free_in_callback(int rc, const fg_decision *d, void *data)
{
    (void)rc, (void)d, (void)data;
    CHECK_EQ(fg_limiter_pending(to_free), 0);
    fg_limiter_free(to_free);
}

static void run_pending(void)
{
    fake_store st = {.base = {.ops = &fake_ops, .nodes = NODES}, .hold = 1};
    fg_limit lim;
    CHECK_EQ(fg_limit_parse("100/s", &lim), FG_OK);
    fg_limiter *l = fg_limiter_new(&st.base, &lim, NULL, 0);
    CHECK(l != NULL);
    if (!l)
        return;
    CHECK_EQ(fg_limiter_pending(l), 0);
    CHECK_EQ(fg_check_async(l, "0a", 2, 1, on_done, NULL), FG_OK);
    CHECK_EQ(fg_limiter_pending(l), 1);
    fg_decision d = {.allowed = 1, .limit = 100, .remaining = 99};
    fg__req_done(st.held, FG_OK, &d);
    CHECK_EQ(fg_limiter_pending(l), 0);
    to_free = l;
    CHECK_EQ(fg_check_async(l, "0a", 2, 1, free_in_callback, NULL), FG_OK);
    fg__req_done(st.held, FG_OK, &d);
}

int main(void)
{
    run(0);
    run(1);
    run_redirected(0);
    run_redirected(1);
    run_pending();
    return TEST_DONE();
}
