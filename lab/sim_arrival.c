/* sim_arrival.c -- when the simulated requests arrive: evenly spaced at a
 * rate, a burst evenly within a spread (as the real lab's scalper fires
 * it), or a Poisson process (exponential gaps from a seeded generator, so
 * that one seed gives one run). Pure: no clock, no allocation. */
#include <math.h>
#include <string.h>

#include "simulate.h"

static const char *const names[FG__SIM_NARRIVALS] = {"steady", "burst",
                                                     "poisson"};

const char *fg__sim_arrival_name(int kind)
{
    return kind >= 0 && kind < FG__SIM_NARRIVALS ? names[kind] : "?";
}

int fg__sim_arrival_parse(const char *s)
{
    for (int i = 0; i < FG__SIM_NARRIVALS; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* splitmix64 (Steele, Lea and Flood): a 64-bit state stepped by a fixed
 * odd constant and mixed; every seed, 0 included, gives a full sequence. */
uint64_t fg__sim_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fg__sim_arrivals_init(fg__sim_arrivals *a, int kind, uint64_t start_us,
                           uint64_t span_us, double rate_per_s, uint64_t count,
                           uint64_t seed)
{
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->start_us = start_us;
    a->span_us = span_us;
    /* A rate so low that its gap is not a number: no arrivals. */
    a->gap_us =
        rate_per_s > 0 && isfinite(1e6 / rate_per_s) ? 1e6 / rate_per_s : 0;
    a->count = count;
    a->rng = seed;
}

int fg__sim_arrivals_next(fg__sim_arrivals *a, uint64_t *at_us)
{
    double t;
    switch (a->kind) {
    case FG__SIM_BURST:
        if (a->n >= a->count)
            return 0;
        /* The i-th of n at i * span / n, exactly, as integers. */
        *at_us = a->start_us +
                 (uint64_t)((unsigned __int128)a->n * a->span_us / a->count);
        a->n++;
        return 1;
    case FG__SIM_STEADY:
        if (a->gap_us <= 0)
            return 0;
        t = (double)a->n * a->gap_us;
        break;
    case FG__SIM_POISSON:
        if (a->gap_us <= 0)
            return 0;
        /* An exponential gap: -ln(U) * mean, U uniform in (0, 1]. */
        t = a->t_us - log((double)((fg__sim_rng_next(&a->rng) >> 11) + 1) /
                          9007199254740992.0) *
                          a->gap_us;
        a->t_us = t;
        break;
    default:
        return 0;
    }
    if (!(t < (double)a->span_us)) /* NaN too */
        return 0;
    *at_us = a->start_us + (uint64_t)t;
    a->n++;
    return 1;
}
