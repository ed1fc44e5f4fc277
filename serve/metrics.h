/* metrics.h -- counters of one worker, and their Prometheus text (pure).
 *
 * Each worker writes only its own counters (no lock, no atomic
 * read-modify-write: a relaxed load and store), and /metrics sums every
 * worker's. Limits are counted by name: a name keeps its slot across
 * reloads, so counters never go backwards. */
#ifndef FG_SERVE_METRICS_H
#define FG_SERVE_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "floodgate.h"

/* The sources a decision names (fg_source). */
#define FG__SOURCES (FG_SOURCE_LEASE + 1)

#define FG_METRIC_SLOTS 256
#define FG_LAT_BUCKETS  14
#define FG_NODE_SLOTS   64

/* HTTP responses are counted by status: ten of them, and the others. */
#define FG_HTTP_N 13

typedef struct fg__lim_metrics {
    uint64_t decisions[2][FG__SOURCES]; /* [allowed][source] */
    uint64_t store_errors;
    uint64_t store_calls;
    uint64_t breaker_open;    /* gauge: 1 while the last answer was EBREAKER */
    uint64_t shadow_refusals; /* refusals shadow mode allowed */
    uint64_t mode_calls, mode_errors; /* a sync or lease limit's commands */
} fg__lim_metrics;

/* One server of the store (a shard, or the one Redis). */
typedef struct fg__node_metrics {
    uint64_t calls, errors;
    uint64_t lat_bucket[FG_LAT_BUCKETS]; /* not cumulative */
    uint64_t lat_sum_us;                 /* the count is the buckets' sum */
} fg__node_metrics;

typedef struct fg__metrics {
    fg__lim_metrics lim[FG_METRIC_SLOTS];
    fg__node_metrics node[FG_NODE_SLOTS];
    uint64_t lat_bucket[FG_LAT_BUCKETS]; /* not cumulative */
    uint64_t lat_sum_us;                 /* the count is the buckets' sum */
    uint64_t http[FG_HTTP_N];
    uint64_t slow_closed;   /* closed with part of a request, late */
    uint64_t connections;   /* gauge */
    uint64_t cache_entries; /* gauge: keys its blocked-key cache refuses */
} fg__metrics;

#define FG_INC(x) FG_ADD(x, 1)
#define FG_ADD(x, n)                                                           \
    __atomic_store_n(&(x), __atomic_load_n(&(x), __ATOMIC_RELAXED) + (n),      \
                     __ATOMIC_RELAXED)
#define FG_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define FG_GET(x)    __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* The slot of limit 'name', assigned on first use; -1 when every slot is
 * taken. Thread-safe. */
int fg__metric_slot(const char *name);

/* The slot of store node 'name' ("host:port/db"), as fg__metric_slot; the
 * first name refused for want of a slot is logged (metrics_full). */
int fg__metric_node_slot(const char *name);

/* Record a store round trip of 'us' microseconds: of the store, and of
 * one of its servers ('node', from fg__metric_node_slot). */
void fg__metrics_latency(fg__metrics *m, uint64_t us);
void fg__metrics_node_latency(fg__metrics *m, int node, uint64_t us);

/* Record one HTTP response. */
void fg__metrics_http(fg__metrics *m, int status);

/* Process-wide figures that are not per worker. */
typedef struct fg__metrics_info {
    int draining;
    unsigned workers;
    uint64_t reloads, reload_errors;
    uint64_t cache_entries;
    int memory; /* on the memory store: its keys and evictions */
    uint64_t memory_keys, memory_evicted;
} fg__metrics_info;

/* Write the sum of 'n' workers' counters as Prometheus text to 'out'. */
void fg__metrics_render(FILE *out, fg__metrics *const *w, unsigned n,
                        const fg__metrics_info *info);

#endif
