/* simulate.h -- `floodgate lab --simulate`: the lab's strategies for 10 to
 * 10,000 servers on a virtual clock, with no process and no socket.
 *
 * Each virtual server runs libfloodgate's own local half of the approximate
 * modes (fg_local_*), and the shared store is an exact fg_limiter on a
 * memory store whose clock is the simulation's. Every decision counted here
 * was made by libfloodgate: the simulator only schedules the arrivals, the
 * servers' timers and the store's round trips, and counts.
 *
 * The pieces: an event heap (sim_heap.c) and an arrival generator
 * (sim_arrival.c), both pure; the run itself (simulate.c); the table, JSON
 * and SVG (sim_report.c); the options (sim_main.c). */
#ifndef FG_LAB_SIMULATE_H
#define FG_LAB_SIMULATE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "floodgate.h"

#define FG__SIM_MAX_SERVERS 100000
#define FG__SIM_MAX_RUNS    32

/* ---- events (sim_heap.c) ------------------------------------------------ */

/* One event: what happens at 'at_us'. Events of the same time come out in
 * the order they were pushed ('seq'), so that a run is reproducible. */
typedef struct fg__sim_event {
    uint64_t at_us;
    uint64_t seq;
    uint32_t kind;
    uint32_t who;  /* a server */
    uint32_t slot; /* a store command in flight */
} fg__sim_event;

/* A binary min-heap of events on (at_us, seq). */
typedef struct fg__sim_heap {
    fg__sim_event *v;
    size_t n, cap;
    uint64_t seq;
} fg__sim_heap;

void fg__sim_heap_init(fg__sim_heap *h);
void fg__sim_heap_free(fg__sim_heap *h);
/* 0, or -1 when out of memory (the heap is unchanged). */
int fg__sim_heap_push(fg__sim_heap *h, uint64_t at_us, uint32_t kind,
                      uint32_t who, uint32_t slot);
/* The earliest event into 'out': 1, or 0 when the heap is empty. */
int fg__sim_heap_pop(fg__sim_heap *h, fg__sim_event *out);

/* ---- arrivals (sim_arrival.c) ------------------------------------------- */

typedef enum fg__sim_arrival_kind {
    FG__SIM_STEADY = 0,  /* evenly spaced at the rate */
    FG__SIM_BURST = 1,   /* 'count' requests evenly within the span */
    FG__SIM_POISSON = 2, /* exponential gaps at the rate, seeded */
    FG__SIM_NARRIVALS = 3
} fg__sim_arrival_kind;

const char *fg__sim_arrival_name(int kind);
int fg__sim_arrival_parse(const char *s); /* a kind, or -1 */

/* The next number of a seeded generator (splitmix64): the same seed gives
 * the same numbers on every machine. */
uint64_t fg__sim_rng_next(uint64_t *state);

typedef struct fg__sim_arrivals {
    int kind;
    uint64_t start_us, span_us; /* arrivals fall in [start, start + span) */
    double gap_us;              /* steady, poisson: the mean gap */
    uint64_t count;             /* burst: how many */
    uint64_t n;                 /* arrivals made so far */
    double t_us;                /* poisson: the last arrival, from start */
    uint64_t rng;
} fg__sim_arrivals;

/* Arrivals of 'kind' from 'start_us' for 'span_us': 'rate_per_s' requests
 * a second (steady, poisson) or 'count' requests (burst; a span of 0 sends
 * them all at 'start_us'). 'seed' drives poisson. */
void fg__sim_arrivals_init(fg__sim_arrivals *a, int kind, uint64_t start_us,
                           uint64_t span_us, double rate_per_s, uint64_t count,
                           uint64_t seed);
/* The next arrival's time into '*at_us' (never earlier than the last): 1,
 * or 0 when there is none left. */
int fg__sim_arrivals_next(fg__sim_arrivals *a, uint64_t *at_us);

/* ---- a run (simulate.c) ------------------------------------------------- */

typedef enum fg__sim_strategy {
    FG__SIM_ATOMIC = 0, /* every request an exact check at the store */
    FG__SIM_SYNC = 1,   /* mode sync:INTERVAL */
    FG__SIM_LEASE = 2,  /* mode lease[:CHUNK] */
    FG__SIM_LOCAL = 3,  /* each server its own counter of the full limit */
    FG__SIM_SPLIT = 4,  /* each server limit / N */
    FG__SIM_NSTRATEGIES = 5
} fg__sim_strategy;

const char *fg__sim_strategy_name(int s);
int fg__sim_strategy_parse(const char *s); /* a strategy, or -1 */

/* What stays the same across the runs of one invocation. */
typedef struct fg__sim_params {
    fg_limit lim;         /* rate, algorithm; mode, sync_ms, lease_chunk */
    int arrival;          /* fg__sim_arrival_kind */
    double load;          /* steady, poisson: a multiple of the limit */
    uint64_t burst;       /* burst: requests */
    uint64_t spread_us;   /* burst: within this */
    uint64_t duration_us; /* steady, poisson: arrivals for this long */
    uint64_t rtt_us;      /* a round trip to the store */
    uint64_t seed;
    int balance_random; /* 0 round robin, 1 random */
} fg__sim_params;

/* What one run of one strategy on 'servers' servers measured. Windows are
 * the limit's periods (fixed and sliding windows): those that saw an
 * arrival or an admission, each admission counted in the window it was
 * decided in; a token bucket is judged over the whole run. */
typedef struct fg__sim_result {
    int strategy;
    unsigned servers;
    uint64_t requests, allowed, decided;
    uint64_t policy; /* decided by the failure policy (never, with no fault) */
    uint64_t limit_allows; /* limit per window summed, or burst + rate * span */
    uint64_t windows;      /* 0 for a token bucket */
    uint64_t over_total, over_worst;   /* worst: of one window */
    uint64_t under_total, under_worst; /* below what exact admits */
    int has_over_bound, has_under_bound;
    double over_bound;    /* sync: per window, or over the run */
    uint64_t under_bound; /* lease: units the others may hold */
    double arrival_rate;  /* requests a second, for the bound */
    uint64_t store_commands;
    /* From a request's arrival to its answer at the server: a round trip
     * for an exact check, 0 when decided locally, more when it waited for
     * a lease's take. */
    uint64_t wait_max_us, wait_sum_us;
    uint64_t events;
    uint64_t sim_us; /* simulated time, the last answer included */
    int64_t wall_us; /* the run's wall time, measured by the caller */
} fg__sim_result;

/* Simulate 'strategy' on 'servers' servers with 'p'. 0, or -1 with the
 * reason in 'err'. */
int fg__sim_run(const fg__sim_params *p, int strategy, unsigned servers,
                fg__sim_result *r, char *err, size_t errlen);

/* The arrival span of 'p' (the spread of a burst, else the duration). */
uint64_t fg__sim_span_us(const fg__sim_params *p);

/* ---- output (sim_report.c) ---------------------------------------------- */

/* Simulated seconds per wall second of run 'r': the arrivals' span, or
 * the simulated time when the last answers came later. */
double fg__sim_speed(const fg__sim_params *p, const fg__sim_result *r);
void fg__sim_print_table(FILE *f, const fg__sim_params *p,
                         const fg__sim_result *rs, size_t n);
void fg__sim_print_json(FILE *f, const fg__sim_params *p,
                        const fg__sim_result *r);
/* Overshoot and store commands per request against the number of servers,
 * one line per strategy. 0, or -1 with the reason in 'err'. */
int fg__sim_write_svg(const char *path, const fg__sim_params *p,
                      const fg__sim_result *rs, size_t n, char *err,
                      size_t errlen);

/* ---- the command (sim_main.c) ------------------------------------------- */

/* `floodgate lab ... --simulate ...`: 'argv' as fg_cmd_lab got it, with
 * --simulate anywhere in it. Returns the exit status. */
int fg__lab_simulate(int argc, char **argv);

/* "40ms", "0.5ms", "2s", "500us" (a bare number is milliseconds) into
 * whole microseconds, at most 'max_us': 0, or -1 when it is not one. The
 * real lab's options read their durations with it too. */
int fg__lab_parse_duration(const char *s, uint64_t max_us, uint64_t *out);

/* 1 when the comma-separated list 's' has no empty item ("a,,b", "a,",
 * ",a", ""): the options' lists are read with strtok_r, which skips them. */
int fg__lab_list_ok(const char *s);

#endif
