/* limiter.h -- the limiter as stores see it: its struct, a check in
 * flight, and the policy that settles a store's result (limiter.c). */
#ifndef FG_LIMITER_H
#define FG_LIMITER_H

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
    uint64_t cost;
    fg_check_cb cb;
    void *data;
    size_t keylen;
    char key[]; /* keylen bytes and a NUL */
} fg__req;

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
};

/* Apply the limit's failure policy to a store's failure 'rc' (see
 * fg_check): fill 'out' as the policy decides and return 'rc'. */
int fg__settle_failure(fg_limiter *l, int rc, const char *key, size_t keylen,
                       uint64_t cost, fg_decision *out);

/* Complete 'req' with the store's result: apply the failure policy, call the
 * user's callback once, free 'req'. 'd' is ignored when 'rc' < 0. */
void fg__req_done(fg__req *req, int rc, fg_decision *d);

#endif
