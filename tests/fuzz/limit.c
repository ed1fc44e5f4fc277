/* limit.c -- fuzz target: fg_limit_parse on any string, and every limit it
 * accepts through the algorithms' parameters and a few decisions, adds and
 * peeks at the edges of time (0, a period, 2^62 us), under each algorithm.
 * The input is the rate as a NUL-terminated string (its copy). A peek must
 * fit a unit exactly when one remains; the sanitizers judge the rest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"

/* Decide and refund at times that stress the arithmetic: the start of
 * time, the edges of a window, far in the future, and a clock that steps
 * back. */
static void decide(const fg__algo_params *p)
{
    static const uint64_t nows[] = {
        0, 1, 999, 1000000, 3600000001ull, (uint64_t)1 << 62, 5};
    uint64_t costs[] = {1, p->max_cost, p->max_cost + 1, 0};
    fg__algo_state s = {0, 0, 0};
    for (size_t i = 0; i < sizeof(nows) / sizeof(nows[0]); i++) {
        for (size_t k = 0; k < sizeof(costs) / sizeof(costs[0]); k++) {
            fg_decision d;
            uint64_t expires;
            uint64_t now = nows[i] + (i ? p->period_us : 0);
            if (fg__algo_check(p, &s, now, costs[k], &d, &expires) == FG_OK &&
                d.allowed) {
                fg__taken t = {k, k ? FG__HOLD_ANY : 1};
                fg__algo_refund(p, &s, now, costs[k], &t);
            }
            /* fg_add's units, spent now, a period ago and long ago, and
             * what a peek then says. */
            uint64_t units[] = {0, 1, p->max_cost, FG_MAX_COUNT - 1};
            uint64_t age = k == 0 ? 0 : k == 1 ? p->period_us : now;
            fg__algo_add(p, &s, now, units[k], age, &d, &expires);
            if (fg__algo_peek(p, &s, now, &d) == FG_OK &&
                d.allowed != (d.remaining > 0))
                __builtin_trap(); /* a peek fits a unit exactly when one
                                     remains */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *rate = malloc(size + 1);
    if (!rate)
        return 0;
    memcpy(rate, data, size);
    rate[size] = '\0';
    fg_limit lim;
    char err[256];
    int rc = fg_limit_parse_err(rate, &lim, err, sizeof(err));
    if (fg_limit_parse(rate, &lim) != rc)
        __builtin_trap(); /* the two parsers disagree */
    if (rc == FG_OK) {
        static const fg_algorithm algs[] = {FG_FIXED_WINDOW, FG_SLIDING_WINDOW,
                                            FG_TOKEN_BUCKET, FG_NAIVE_GET_SET};
        fg_limit base = lim;
        for (size_t a = 0; a < 4; a++) {
            /* A token bucket with its default burst and with a larger one
             * (bursts are checked by fg_limit_check). */
            for (int b = 0; b < 2; b++) {
                lim = base;
                lim.algorithm = algs[a];
                lim.burst = b ? base.limit * 3 + 1 : 0;
                fg__algo_params p;
                if (fg_limit_check(&lim, err, sizeof(err)) == FG_OK &&
                    fg__algo_params_init(&lim, &p, err, sizeof(err)) == FG_OK)
                    decide(&p);
            }
        }
    }
    free(rate);
    return 0;
}
