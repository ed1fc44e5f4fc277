/* store.h -- the interface every store implements (memory, redis, ...).
 *
 * A store owns where counters live; the limiter (limiter.c) owns policy:
 * validation, timeouts, failure mode, circuit breaker and local fallback. */
#ifndef FG_STORE_H
#define FG_STORE_H

#include <time.h>

#include "floodgate.h"
#include "algo.h"

/* A check in flight, allocated by the limiter for fg_check_async() and
 * handed to the store, which completes it with fg__req_done(). The store may
 * use 'next' and 'deadline_us' for its own queues while it holds the req. */
typedef struct fg__req {
    struct fg__req *next;
    uint64_t deadline_us;
    fg_limiter *l;
    uint64_t cost;
    fg_check_cb cb;
    void *data;
    size_t keylen;
    char key[]; /* keylen bytes and a NUL */
} fg__req;

typedef struct fg__store_ops {
    const char *scheme;
    /* Prepare per-limiter data in '*out' (may stay NULL), or refuse a limit
     * this store cannot enforce, with the reason in 'err'. It may set
     * 'l->check' (see struct fg_limiter). */
    int (*limiter_init)(fg_store *st, fg_limiter *l, void **out, char *err,
                        size_t errlen);
    void (*limiter_free)(fg_store *st, fg_limiter *l, void *data);
    /* Decide 'cost' for 'key' (already validated) and fill 'd' but
     * 'd->source'. FG_OK, or a negative code when the store failed. */
    int (*check)(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                 uint64_t cost, fg_decision *d);
    /* Take ownership of 'req' and complete it with fg__req_done() exactly
     * once (possibly before returning). NULL: the store has no async form. */
    void (*check_async)(fg_store *st, fg__req *req);
    /* Give back 'cost' units of 'key' (see fg_refund); on an async store,
     * queue it and return. NULL: refunds are not supported. */
    int (*refund)(fg_store *st, fg_limiter *l, const char *key, size_t keylen,
                  uint64_t cost);
    uint64_t (*keys)(fg_store *st);
    void (*close)(fg_store *st);
} fg__store_ops;

/* A check that settles its own result: it fills 'd->source' and passes its
 * failures to fg__settle_failure, so that fg_check returns what it
 * returns, without a frame of its own. */
typedef int (*fg__check_fn)(fg_limiter *l, const char *key, size_t keylen,
                            uint64_t cost, fg_decision *d);

/* Every store begins with this header. */
struct fg_store {
    const fg__store_ops *ops;
};

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

/* Store constructors, by scheme. */
fg_store *fg__store_memory_open(const fg_memory_options *opt, char *err,
                                size_t errlen);
/* How many lookups of a memory store did not find their key (a new key, or
 * a refund of a key not held); 0 for another store. For tests. */
uint64_t fg__store_memory_slow_paths(fg_store *st);
/* 'base' NULL for a blocking Redis store. */
fg_store *fg__store_redis_open(const char *url, struct event_base *base,
                               char *err, size_t errlen);

/* Monotonic microseconds (CLOCK_MONOTONIC), for decisions (fg__mono_us,
 * the memory store's default clock) and deadlines (the same clock); and
 * wall-clock microseconds since the Unix epoch. */
uint64_t fg__mono_us(void *ctx);
/* clock_gettime's own entry in the kernel's vDSO when the process has one
 * (else clock_gettime): the same clocks, read without the C library's
 * wrapper, a call and a check less on every check of the memory store.
 * It returns 0, or non-zero on failure. */
typedef int (*fg__gettime_fn)(clockid_t, struct timespec *);
fg__gettime_fn fg__clock_gettime_fn(void);
uint64_t fg__mono_precise_us(void);
uint64_t fg__wall_us(void);

/* Allocation through the configurable allocator (fg_set_allocator). */
void *fg__malloc(size_t n);
void *fg__calloc(size_t n, size_t size);
void fg__free(void *p);
char *fg__strndup(const char *s, size_t n);

/* The value of hexadecimal digit 'ch', or -1 (for %-decoding). */
int fg__hexval(int ch);

/* Write a formatted reason into 'err' (NULL-safe); returns 'code'. */
int fg__seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
