/* limiter.h -- the limiter as stores see it: its struct, a check in
 * flight, and the policy that settles a store's result (limiter.c). */
#ifndef FG_LIMITER_H
#define FG_LIMITER_H

#include <stdatomic.h>

#include "algo.h"
#include "floodgate.h"

/* A check in flight, allocated by the limiter for fg_check_async() and
 * handed to the store, which completes it with fg__req_done(). The store may
 * use 'next' and 'deadline_us' for its own queues while it holds the req. */
typedef struct fg__req {
    struct fg__req *next;
    uint64_t deadline_us;
    fg_limiter *l;
    unsigned node; /* the store's node of 'key': its breaker settles */
    /* Redis Cluster (store_cluster.c): redirections followed so far, and
     * for the next send: ASKING first (an ASK redirection), or alone, not
     * in a batch (a batch refused by a node that lost a slot). */
    unsigned char redirects, asking, single;
    /* 1: the caller takes the store's own answer (fg__store_check_async):
     * the breaker learns from it, the failure policy does not decide. */
    unsigned char raw;
    uint64_t cost;
    uint64_t age_us; /* fg_add_at's (FG__COST_ADD); 0 for a check */
    fg_check_cb cb;
    void *data;
    size_t keylen;
    char key[]; /* keylen bytes and a NUL */
} fg__req;

/* A cost with this bit set asks the store for fg_add's accounting of the
 * cost's other bits instead of a check: counted even beyond the limit,
 * answered with fg_add's decision. Costs are below 2^53, so the bit is
 * free; stores that forward checks to others pass it on unchanged. */
#define FG__COST_ADD ((uint64_t)1 << 63)

/* A check that settles its own result: it fills 'd->source' and passes its
 * failures to fg__settle_failure, so that fg_check returns what it
 * returns, without a frame of its own. */
typedef int (*fg__check_fn)(fg_limiter *l, const char *key, size_t keylen,
                            uint64_t cost, fg_decision *d);

/* The limiter as stores see it. */
struct fg_limiter {
    fg_store *st;
    fg_limit lim;
    fg__algo_params p;
    uint64_t id;      /* unique in the process: namespaces memory keys */
    void *store_data; /* from ops->limiter_init */
    struct fg__policy *policy; /* breaker and local fallback (limiter.c) */
    /* fg_check's whole work for this limiter, after validation: the
     * store's 'check' between the breaker and the policy, unless the store
     * replaced it (in limiter_init) with a check of its own, chosen once
     * for the limiter's algorithm. The memory store does: its only
     * failures are this process's own (out of memory, a clock out of
     * range), for which the breaker never opens. */
    fg__check_fn check;
    struct fg__mode *mode; /* FG_MODE_SYNC, FG_MODE_LEASE (limiter_mode.c) */
    atomic_uint inflight;  /* fg_check_async calls not yet called back */
};

/* The store's answer for 'cost' of 'key', past the node's breaker (which
 * learns from it) but without the failure policy: FG_OK with 'out' filled
 * (source FG_SOURCE_STORE), or the failure (FG_EBREAKER when the breaker
 * kept the store from being asked). The modes' takes and syncs ('age_us'
 * as for the store's check). */
int fg__store_check(fg_limiter *l, const char *key, size_t keylen,
                    uint64_t cost, uint64_t age_us, fg_decision *out);
/* The same on an asynchronous store, within 'timeout_ms' (0: the limit's
 * timeout): 'cb' is called once, perhaps before the call returns; FG_OK,
 * or FG_ENOMEM and 'cb' is never called. */
int fg__store_check_async(fg_limiter *l, const char *key, size_t keylen,
                          uint64_t cost, uint64_t age_us, uint32_t timeout_ms,
                          fg_check_cb cb, void *data);
/* fg_check_async for an exact limit, validated: the breaker, the store,
 * the policy. */
int fg__check_async_exact(fg_limiter *l, const char *key, size_t keylen,
                          uint64_t cost, fg_check_cb cb, void *data);
/* 1 while the breaker of 'key''s node is open and cooling down: the store
 * is taken as unreachable for that node's keys. Once the cooldown is over
 * it is not: the next call through the breaker is its probe, a check's as
 * well as a sync's, so that a store back is seen at once. */
int fg__store_down(fg_limiter *l, const char *key, size_t keylen);
/* 1 when 'rc' says the store failed (down, slow, refusing writes...), as
 * the breaker counts: not bad input. */
int fg__is_store_failure(int rc);
/* The limit's failure policy for a check the store did not answer ('rc'):
 * fill 'out', return 'rc'. Shadow mode is not applied: see
 * fg__shadow_decision, which a decision gets once, last. */
int fg__decide_by_policy(fg_limiter *l, int rc, const char *key, size_t keylen,
                         uint64_t cost, fg_decision *out);
void fg__shadow_decision(const fg_limiter *l, int rc, fg_decision *d);

/* Apply the limit's failure policy to a store's failure 'rc' (see
 * fg_check): fill 'out' as the policy decides and return 'rc'. */
int fg__settle_failure(fg_limiter *l, int rc, const char *key, size_t keylen,
                       uint64_t cost, fg_decision *out);

/* The time on the clock 'l''s store decides on (fg__store_now). */
uint64_t fg__limiter_now(const fg_limiter *l);

/* What fg_check returns for these arguments before any store sees them:
 * FG_OK, or FG_EINVAL, FG_EKEY or FG_ECOST. */
int fg__check_valid(const fg_limiter *l, const char *key, size_t keylen,
                    uint64_t cost);

/* fg_refund of a check that 'd' decided at 'at' (fg__limiter_now, read
 * before the check) or later, where it was counted: to the window or
 * bucket's debt that took it (fg_refund_at). A sync or lease limit's check
 * that the store decided is given back to the store, one the local
 * fallback (on_failure = local) decided to that fallback; anything else as
 * fg_refund, but the limiter's cache is not told (the caller, on the
 * cache's thread, tells it). */
int fg__refund_decision(fg_limiter *l, const char *key, size_t keylen,
                        uint64_t cost, const fg_decision *d, uint64_t at);

/* Complete 'req' with the store's result: apply the failure policy, call the
 * user's callback once, free 'req'. 'd' is ignored when 'rc' < 0. */
void fg__req_done(fg__req *req, int rc, fg_decision *d);

/* 'req' goes to the store's node 'node' instead (a redirection): that
 * node's breaker settles its outcome, and the probe the first node's
 * breaker may have let through is given back. */
void fg__req_move(fg__req *req, unsigned node);

#endif
