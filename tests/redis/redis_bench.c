/* redis_bench.c -- decisions per second through libfloodgate's Redis store,
 * for bench/redis.sh, which runs redis-benchmark beside it.
 *
 *   redis_bench run URL ALGO DEPTH SECONDS [RATE]
 *                                            print "decisions_per_s N"
 *   redis_bench sha URL ALGO                 print the script's SHA1
 *
 * Depth 1 is the blocking client, one check per round trip; depth D > 1 is
 * the async client on one connection with D checks in flight. Keys cycle
 * over 100000 users of limit "bench", 1000000/s, so nearly all are
 * allowed and every decision is a full read-modify-write. */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "floodgate.h"
#include "redis_proto.h"
#include "redis_url.h"
#include "store.h"
#include "clock.h"

#define KEYS 100000

typedef struct run {
    fg_limiter *l;
    uint64_t done, errors, next_key, end_us;
    int inflight;
    struct event_base *base;
} run;

static void submit(run *r);

static void on_done(int rc, const fg_decision *d, void *data)
{
    run *r = data;
    (void)d;
    r->done++;
    r->errors += rc != FG_OK;
    r->inflight--;
    if (fg__mono_precise_us() < r->end_us)
        submit(r);
    else if (r->inflight == 0)
        event_base_loopbreak(r->base);
}

static void submit(run *r)
{
    char key[24];
    int n = snprintf(key, sizeof key, "k%llu",
                     (unsigned long long)(r->next_key++ % KEYS));
    r->inflight++;
    if (fg_check_async(r->l, key, (size_t)n, 1, on_done, r) != FG_OK) {
        r->inflight--;
        r->errors++;
    }
}

static const char *rate = "1000000/s";

static fg_limiter *bench_limiter(fg_store *st, const char *algo)
{
    fg_limit lim;
    char err[256];
    if (fg_limit_parse(rate, &lim) != FG_OK) {
        fprintf(stderr, "redis_bench: bad rate '%s' (as 1000000/s)\n", rate);
        return NULL;
    }
    if (fg_algorithm_parse(algo, &lim.algorithm) != FG_OK) {
        fprintf(stderr, "redis_bench: unknown algorithm '%s'\n", algo);
        return NULL;
    }
    snprintf(lim.name, sizeof lim.name, "bench");
    lim.timeout_ms = 1000;
    lim.on_failure = FG_FAIL_CLOSED;
    fg_limiter *l = fg_limiter_new(st, &lim, err, sizeof err);
    if (!l)
        fprintf(stderr, "limiter: %s\n", err);
    return l;
}

static int bench(const char *url, const char *algo, int depth, double secs)
{
    char err[256];
    struct event_base *base = depth > 1 ? event_base_new() : NULL;
    fg_store *st = depth > 1 ? fg_store_open_async(url, base, err, sizeof err)
                             : fg_store_open(url, err, sizeof err);
    if (!st) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    fg_limiter *l = bench_limiter(st, algo);
    if (!l)
        return 1;
    run r = {l, 0, 0, 0, 0, 0, base};
    uint64_t t0 = fg__mono_precise_us();
    r.end_us = t0 + (uint64_t)(secs * 1e6);
    if (depth > 1) {
        for (int i = 0; i < depth; i++)
            submit(&r);
        event_base_dispatch(base);
    } else {
        while (fg__mono_precise_us() < r.end_us) {
            for (int i = 0; i < 64; i++) {
                char key[24];
                fg_decision d;
                int n = snprintf(key, sizeof key, "k%llu",
                                 (unsigned long long)(r.next_key++ % KEYS));
                r.errors += fg_check(l, key, (size_t)n, 1, &d) != FG_OK;
                r.done++;
            }
        }
    }
    double dt = (double)(fg__mono_precise_us() - t0) / 1e6;
    printf("decisions_per_s %.0f\nerrors %llu\ndecisions %llu\n",
           (double)r.done / dt, (unsigned long long)r.errors,
           (unsigned long long)r.done);
    fg_limiter_free(l);
    fg_store_close(st);
    if (base)
        event_base_free(base);
    return r.errors ? 1 : 0;
}

static int sha(const char *url, const char *algo)
{
    fg__redis_url u;
    char err[256];
    if (strcmp(algo, "sliding_window") && strcmp(algo, "token_bucket")) {
        fprintf(stderr,
                "redis_bench: sha of sliding_window or token_bucket, "
                "not '%s'\n",
                algo);
        return 2;
    }
    int i =
        strcmp(algo, "sliding_window") == 0 ? FG__LUA_SLIDING : FG__LUA_TOKEN;
    if (fg__redis_url_parse(url, &u, err, sizeof err) != FG_OK)
        return 1;
    redisContext *c =
        u.path ? redisConnectUnix(u.path) : redisConnect(u.host, u.port);
    redisReply *r = c && !c->err
                        ? redisCommand(c, "SCRIPT LOAD %s", fg__redis_lua[i])
                        : NULL;
    int rc = !(r && r->type == REDIS_REPLY_STRING);
    if (!rc)
        printf("%s\n", r->str);
    freeReplyObject(r);
    if (c)
        redisFree(c);
    fg__redis_url_free(&u);
    return rc;
}

/* A whole number in 'lo'..'hi' in 's', or -1. */
static long whole(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return *s >= '0' && *s <= '9' && !*end && !errno && v >= lo && v <= hi ? v
                                                                           : -1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 7)
        rate = argv[6];
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "run") == 0) {
        long depth = whole(argv[4], 1, 1024), secs = whole(argv[5], 1, 3600);
        if (depth < 0 || secs < 0) {
            fprintf(stderr, "redis_bench: DEPTH is 1 to 1024 and SECONDS 1 "
                            "to 3600, whole numbers\n");
            return 2;
        }
        return bench(argv[2], argv[3], (int)depth, (double)secs);
    }
    if (argc == 4 && strcmp(argv[1], "sha") == 0)
        return sha(argv[2], argv[3]);
    fprintf(stderr, "usage: redis_bench run URL ALGO DEPTH SECONDS [RATE] | "
                    "sha URL ALGO\n");
    return 2;
}
