/* redis_reply.c -- fuzz target: any RESP the Redis store may read back.
 * The input is fed to hiredis's reader; the replies it makes (any shape,
 * up to MAX_REPLIES) are answered, in order, to each algorithm's check
 * protocol (fixed_window with its PEXPIRE aside and DECRBY give-back,
 * sliding_window and token_bucket scripts with NOSCRIPT and EVAL,
 * naive_get_set's GET then SET), to refunds, and to token bucket batches,
 * for a few limits, costs and clocks, with and without known scripts,
 * and to operators' peeks and resets (redis_admin.h).
 * Commands are built at each stage, as the stores build them, but not
 * formatted: their bytes do not depend on the replies. */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redis_admin.h"
#include "limiter.h"
#include "redis_proto.h"
#include "reader.h"

#define MAX_REPLIES 16
#define NLIMITS     7

static const struct {
    const char *rate;
    fg_algorithm alg;
    uint64_t burst;
} specs[NLIMITS] = {
    {"10/s", FG_FIXED_WINDOW, 0},      {"1/h", FG_FIXED_WINDOW, 0},
    {"5/min", FG_SLIDING_WINDOW, 0},   {"10/s", FG_TOKEN_BUCKET, 25},
    {"3/500ms", FG_TOKEN_BUCKET, 0},   {"3/s", FG_NAIVE_GET_SET, 0},
    {"100/day", FG_SLIDING_WINDOW, 0},
};

static fg__algo_params params[NLIMITS];
static fg__rlim *rlims[NLIMITS];
static fg__redis_shas none, known;

static void setup(void)
{
    for (int i = 0; i < NLIMITS; i++) {
        fg_limit lim;
        char err[200];
        if (fg_limit_parse(specs[i].rate, &lim) != FG_OK)
            abort();
        lim.algorithm = specs[i].alg;
        lim.burst = specs[i].burst;
        if (fg__algo_params_init(&lim, &params[i], err, sizeof(err)) != FG_OK)
            abort();
        /* Kept for the process, as a limiter keeps its own. */
        rlims[i] = fg__rlim_new(&params[i], "fg:", 3, "lim", 3);
        if (!rlims[i])
            abort();
    }
    for (int i = 0; i < FG__LUA_COUNT; i++)
        memset(known.sha[i], 'a' + i, 40);
    atomic_store(&known.known, (1 << FG__LUA_COUNT) - 1);
}

static void check_decision(const fg_decision *d)
{
    if (d->allowed != 0 && d->allowed != 1)
        __builtin_trap();
    if (d->reset_ms != fg__us_to_ms_up(d->reset_us) ||
        d->retry_after_ms != fg__us_to_ms_up(d->retry_after_us))
        __builtin_trap(); /* milliseconds not derived from the us */
}

/* A peek or a reset driven as the store drives it: a peek's decision is
 * a peek's (a unit fits exactly when one remains, and nothing is waited
 * for then). */
static void run_admin(int li, int reset, uint64_t now, redisReply **r, size_t n)
{
    fg__radmin a;
    fg__rcmd cmd;
    fg_decision d;
    int rc = reset ? fg__rreset_init(&a, &params[li], rlims[li], "k", 1, now)
                   : fg__rpeek_init(&a, &params[li], rlims[li], "k", 1, now);
    for (size_t i = 0; rc == FG_OK && i < n; i++) {
        fg__radmin_cmd(&a, &cmd);
        rc = fg__radmin_reply(&a, r[i], &d);
        if (rc == FG_OK && !reset) {
            check_decision(&d);
            if (d.allowed != (d.remaining > 0) ||
                (d.allowed && d.retry_after_us) ||
                d.remaining > params[li].max_cost + 1)
                __builtin_trap();
        }
        if (rc != FG__RSTEP_AGAIN)
            break;
        rc = FG_OK;
    }
}

/* One check driven as the stores drive it, its replies taken from 'r'. */
static void run_check(int li, uint64_t cost, uint64_t now,
                      const fg__redis_shas *shas, redisReply **r, size_t n)
{
    fg__rcheck c;
    fg_decision d;
    fg__rcmd cmd;
    size_t next = 0;
    /* An add's units spent a while ago (a sliding window's age argument). */
    uint64_t age = cost & FG__COST_ADD ? now % 3000000 : 0;
    if (fg__rcheck_init(&c, &params[li], rlims[li], "user\r\n\0x", 8, cost, age,
                        now) != FG_OK)
        __builtin_trap();
    for (int step = 0; step < 4; step++) {
        int nc = fg__rcheck_ncmds(&c);
        for (int i = 0; i < nc; i++) {
            fg__rcheck_cmd(&c, i, shas, &cmd);
        }
        if (next + (size_t)nc > n) {
            if (step > 0)
                fg__rcheck_unsent(&c, &d); /* the connection closes */
            return;
        }
        memset(&d, 0xa5, sizeof(d));
        int rc = fg__rcheck_reply(&c, r[next], &d);
        if (nc > 1 && rc >= FG_OK)
            fg__rcheck_aside_reply(r[next + 1]);
        next += (size_t)nc;
        if (rc == FG_OK || rc == FG__RSTEP_GIVEBACK)
            check_decision(&d);
        if (rc == FG__RSTEP_GIVEBACK) {
            fg__rcheck_cmd(&c, 0, shas, &cmd);
            return;
        }
        if (rc != FG__RSTEP_AGAIN)
            return;
    }
}

static void run_refund(int li, uint64_t cost, uint64_t now,
                       const fg__redis_shas *shas, redisReply **r, size_t n)
{
    fg__rrefund rf;
    /* Taken a little while ago, a bucket holding part of it. */
    fg__taken t = {now % 1000000, cost & 1 ? FG__HOLD_ANY : now % 500000};
    if (fg__rrefund_init(&rf, &params[li], rlims[li], "k", 1, cost, now, &t) !=
        FG_OK)
        return; /* naive_get_set refunds nothing */
    for (size_t next = 0; next < n; next++) {
        fg__rrefund_cmd(&rf, shas);
        if (fg__rrefund_reply(&rf, r[next]) != FG__RSTEP_AGAIN)
            return;
    }
}

/* Token bucket batches of 1 to 4 checks, sent with EVALSHA then EVAL. */
static void run_batch(redisReply **r, size_t n)
{
    fg__rcheck c[4];
    const fg__rcheck *cp[4];
    static char buf[65536];
    for (int i = 0; i < 4; i++) {
        int li = i & 1 ? 3 : 4;
        if (fg__rcheck_init(&c[i], &params[li], rlims[li], "b", 1,
                            1 + (uint64_t)i, 0, i == 2 ? 1000 : 0) != FG_OK)
            __builtin_trap();
        cp[i] = &c[i];
    }
    for (int bn = 1; bn <= 4; bn++) {
        int eval = 0;
        for (size_t next = 0; next < n; next++) {
            const char *sha =
                eval ? NULL : fg__redis_sha(&known, FG__LUA_TOKEN);
            if (fg__rbatch_need(cp, bn, sha) > sizeof(buf))
                __builtin_trap();
            fg__rbatch_format(buf, cp, bn, sha, (int)(next & 1));
            int rc = fg__rbatch_reply(r[next], bn, eval);
            if (rc == FG__RSTEP_AGAIN) {
                eval = 1;
                continue;
            }
            if (rc == FG_OK) {
                for (int i = 0; i < bn; i++) {
                    fg_decision d;
                    if (fg__rbatch_value(r[next], (size_t)i, cp[i], &d) ==
                        FG_OK)
                        check_decision(&d);
                }
            }
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    redisReader *rd = fuzz_reader();
    if (!rd)
        return 0;
    redisReply *r[MAX_REPLIES];
    size_t n = 0;
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        while (n < MAX_REPLIES) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply)
                break;
            r[n++] = reply;
        }
    }
    for (size_t i = 0; i < n; i++) {
        fg_decision d;
        for (int li = 0; li < NLIMITS; li++)
            if (fg__redis_script_reply(r[i], params[li].limit, &d) == FG_OK)
                check_decision(&d);
        for (size_t k = 0; k < 3; k++)
            if (fg__redis_script_values(r[i], k, 10, &d) == FG_OK)
                check_decision(&d);
        if (r[i]->type == REDIS_REPLY_ERROR)
            fg__redis_error_code(r[i]->str, r[i]->len);
    }
    /* The windows decide from the caller's clock (never 0): a few times
     * stress their arithmetic. A script's reply is read the same at any
     * time (0 sends none: Redis TIME), and a refund's at any cost. */
    static const uint64_t nows[] = {1, 1700000000000000ull, (uint64_t)1 << 62};
    for (int li = 0; li < NLIMITS; li++) {
        int windowed = specs[li].alg == FG_FIXED_WINDOW ||
                       specs[li].alg == FG_NAIVE_GET_SET;
        /* Checks, and fg_add's counts (none, and beyond the limit). */
        uint64_t costs[] = {1, params[li].max_cost, FG__COST_ADD,
                            FG__COST_ADD | (2 * params[li].max_cost)};
        for (size_t t = 0; t < (windowed ? 3 : 2); t++) {
            uint64_t now = windowed ? nows[t] : t ? 0 : nows[1];
            for (size_t k = 0; k < 4; k++) {
                if ((costs[k] & FG__COST_ADD) &&
                    specs[li].alg == FG_NAIVE_GET_SET)
                    continue;
                run_check(li, costs[k], now, t & 1 ? &known : &none, r, n);
            }
        }
        run_refund(li, 1, nows[1], &none, r, n);
        run_refund(li, 2, 0, &known, r, n);
        for (int reset = 0; reset < 2; reset++) {
            run_admin(li, reset, nows[1], r, n);
            if (!windowed)
                run_admin(li, reset, 0, r, n);
        }
    }
    run_batch(r, n);
    for (size_t i = 0; i < n; i++)
        freeReplyObject(r[i]);
    redisReaderFree(rd);
    return 0;
}
