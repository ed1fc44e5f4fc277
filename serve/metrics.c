/* metrics.c -- per-worker counters and the Prometheus text format. */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "log.h"
#include "metrics.h"

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static char slot_name[FG_METRIC_SLOTS][FG_NAME_MAX];
static int slot_used;
static char node_name[FG_NODE_SLOTS][300];
static int node_used;

/* The slot of 'name' among the 'used' of 'names' ('size' bytes each),
 * taking the next one when it is new; -1 when all 'max' are taken. */
static int slot_of(char *names, size_t size, int *used, int max,
                   const char *name)
{
    int found = -1;
    pthread_mutex_lock(&slot_mu);
    for (int i = 0; i < *used; i++)
        if (strcmp(names + (size_t)i * size, name) == 0)
            found = i;
    if (found < 0 && *used < max) {
        snprintf(names + (size_t)*used * size, size, "%s", name);
        found = (*used)++;
    }
    pthread_mutex_unlock(&slot_mu);
    return found;
}

int fg__metric_slot(const char *name)
{
    return slot_of(&slot_name[0][0], FG_NAME_MAX, &slot_used, FG_METRIC_SLOTS,
                   name);
}

int fg__metric_node_slot(const char *name)
{
    static int said;
    int s = slot_of(&node_name[0][0], sizeof node_name[0], &node_used,
                    FG_NODE_SLOTS, name);
    if (s < 0 && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) {
        char v[2 * sizeof node_name[0] + 8];
        fg__log("metrics_full",
                "level=warning node=%s cap=%d warning=\"no metrics for this "
                "store node, nor for any later one: %d node names have had "
                "them since start\"",
                fg__log_value(name, v, sizeof v), FG_NODE_SLOTS, FG_NODE_SLOTS);
    }
    return s;
}

/* 'in' as a label value's inside: a backslash, double quote and line
 * break escaped (a socket path may hold any of them), and a byte that is
 * not UTF-8 written as the text \xNN (the format's values are UTF-8: one
 * such byte would cost a Prometheus server the whole scrape). */
static const char *label_value(const char *in, char *out, size_t len)
{
    size_t o = 0, n = strlen(in);
    for (size_t i = 0; i < n && o + 7 < len;) {
        unsigned char ch = (unsigned char)in[i];
        size_t u =
            ch < 0x80 ? 1 : fg__utf8_len((const unsigned char *)in + i, n - i);
        if (ch == '\\' || ch == '"' || ch == '\n') {
            out[o++] = '\\';
            out[o++] = ch == '\n' ? 'n' : (char)ch;
        } else if (u == 0) {
            o += (size_t)snprintf(out + o, len - o, "\\\\x%02x", ch);
            u = 1;
        } else {
            memcpy(out + o, in + i, u);
            o += u;
        }
        i += u;
    }
    out[o] = '\0';
    return out;
}

/* Upper bounds in microseconds; the last bucket is +Inf. */
static const uint64_t lat_le_us[FG_LAT_BUCKETS - 1] = {
    100,  250,   500,   1000,  2000,   5000,   6000,
    7000, 10000, 25000, 50000, 100000, 1000000};

static int lat_bucket(uint64_t us)
{
    int b = 0;
    while (b < FG_LAT_BUCKETS - 1 && us > lat_le_us[b])
        b++;
    return b;
}

void fg__metrics_latency(fg__metrics *m, uint64_t us)
{
    FG_INC(m->lat_bucket[lat_bucket(us)]);
    FG_ADD(m->lat_sum_us, us);
}

void fg__metrics_node_latency(fg__metrics *m, int node, uint64_t us)
{
    fg__node_metrics *nm = &m->node[node];
    FG_INC(nm->lat_bucket[lat_bucket(us)]);
    FG_ADD(nm->lat_sum_us, us);
}

/* The statuses counted apart; any other is counted as "other", last. */
static const int http_status[FG_HTTP_N - 1] = {200, 204, 400, 403, 404, 405,
                                               413, 429, 431, 500, 503, 505};

void fg__metrics_http(fg__metrics *m, int status)
{
    int i = 0;
    while (i < FG_HTTP_N - 1 && http_status[i] != status)
        i++;
    FG_INC(m->http[i]);
}

/* A histogram of buckets 'b' (not cumulative), labelled 'label' (empty, or
 * name="value" and a comma). Its count is the buckets' sum, so that +Inf
 * and _count agree in every scrape. */
static void print_histogram(FILE *out, const char *metric, const char *label,
                            const uint64_t *b, uint64_t sum_us)
{
    uint64_t cum = 0;
    for (int k = 0; k < FG_LAT_BUCKETS; k++) {
        cum += b[k];
        if (k < FG_LAT_BUCKETS - 1)
            fprintf(out,
                    "%s_bucket{%sle=\"%" PRIu64 ".%06" PRIu64 "\"} %" PRIu64
                    "\n",
                    metric, label, lat_le_us[k] / 1000000,
                    lat_le_us[k] % 1000000, cum);
        else
            fprintf(out, "%s_bucket{%sle=\"+Inf\"} %" PRIu64 "\n", metric,
                    label, cum);
    }
    size_t ll = strlen(label);
    char plain[700] = "";
    if (ll) /* the label without its comma, in braces */
        snprintf(plain, sizeof plain, "{%.*s}", (int)ll - 1, label);
    fprintf(out, "%s_sum%s %" PRIu64 ".%06" PRIu64 "\n%s_count%s %" PRIu64 "\n",
            metric, plain, sum_us / 1000000, sum_us % 1000000, metric, plain,
            cum);
}

void fg__metrics_render(FILE *out, fg__metrics *const *w, unsigned n,
                        const fg__metrics_info *info)
{
    int used;
    pthread_mutex_lock(&slot_mu);
    used = slot_used;
    pthread_mutex_unlock(&slot_mu);

    fprintf(out, "# HELP floodgate_requests_total Decisions by limit, "
                 "decision and source.\n"
                 "# TYPE floodgate_requests_total counter\n");
    for (int s = 0; s < used; s++)
        for (int a = 1; a >= 0; a--)
            for (int src = 0; src < FG__SOURCES; src++) {
                uint64_t v = 0;
                for (unsigned i = 0; i < n; i++)
                    v += FG_GET(w[i]->lim[s].decisions[a][src]);
                if (!v)
                    continue;
                fprintf(out,
                        "floodgate_requests_total{limit=\"%s\",decision="
                        "\"%s\",source=\"%s\"} %" PRIu64 "\n",
                        slot_name[s], a ? "allowed" : "limited",
                        fg_source_name((fg_source)src), v);
            }

    /* Derived series that dashboards ask for by name. */
    const struct {
        const char *metric, *help;
        /* 0 errors, 1 calls, 2 breaker, 3 fail-open, 4 cache, 5 shadow,
         * 6 a mode's calls, 7 a mode's errors */
        int field;
    } per_limit[] = {
        {"floodgate_store_errors_total", "Store calls that failed.", 0},
        {"floodgate_store_calls_total",
         "Checks sent to the store (each one pipelined round trip).", 1},
        {"floodgate_breaker_open",
         "Workers where a circuit breaker of the limit (any store "
         "node's) is open.",
         2},
        {"floodgate_fail_open_total",
         "Requests allowed because the store failed.", 3},
        {"floodgate_cache_hits_total",
         "Requests refused by the blocked-key cache.", 4},
        {"floodgate_shadow_refusals_total",
         "Refusals a limit in shadow mode would have made (it allowed "
         "them).",
         5},
        {"floodgate_mode_store_calls_total",
         "Store commands of a sync or lease limit (syncs, takes, "
         "give-backs, checks) that ended: answered, failed or timed out.",
         6},
        {"floodgate_mode_store_errors_total",
         "Store commands of a sync or lease limit that failed.", 7},
    };
    for (size_t k = 0; k < sizeof(per_limit) / sizeof(per_limit[0]); k++) {
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", per_limit[k].metric,
                per_limit[k].help, per_limit[k].metric,
                per_limit[k].field == 2 ? "gauge" : "counter");
        for (int s = 0; s < used; s++) {
            uint64_t v = 0;
            for (unsigned i = 0; i < n; i++) {
                fg__lim_metrics *l = &w[i]->lim[s];
                switch (per_limit[k].field) {
                case 0:
                    v += FG_GET(l->store_errors);
                    break;
                case 1:
                    v += FG_GET(l->store_calls);
                    break;
                case 2:
                    v += FG_GET(l->breaker_open);
                    break;
                case 3:
                    v += FG_GET(l->decisions[1][FG_SOURCE_FAIL_OPEN]);
                    break;
                case 5:
                    v += FG_GET(l->shadow_refusals);
                    break;
                case 6:
                    v += FG_GET(l->mode_calls);
                    break;
                case 7:
                    v += FG_GET(l->mode_errors);
                    break;
                default:
                    v += FG_GET(l->decisions[0][FG_SOURCE_CACHE]);
                    break;
                }
            }
            fprintf(out, "%s{limit=\"%s\"} %" PRIu64 "\n", per_limit[k].metric,
                    slot_name[s], v);
        }
    }

    fprintf(out, "# HELP floodgate_store_latency_seconds Time a request waited "
                 "for the store: its limits' round trips, in turn.\n"
                 "# TYPE floodgate_store_latency_seconds histogram\n");
    uint64_t b[FG_LAT_BUCKETS] = {0}, sum_us = 0;
    for (unsigned i = 0; i < n; i++) {
        for (int k = 0; k < FG_LAT_BUCKETS; k++)
            b[k] += FG_GET(w[i]->lat_bucket[k]);
        sum_us += FG_GET(w[i]->lat_sum_us);
    }
    print_histogram(out, "floodgate_store_latency_seconds", "", b, sum_us);

    pthread_mutex_lock(&slot_mu);
    int nodes = node_used;
    pthread_mutex_unlock(&slot_mu);
    char esc[5 * sizeof node_name[0] + 8];
    static const struct {
        const char *metric, *help;
    } per_node[] = {
        {"floodgate_store_node_calls_total",
         "Checks sent to each server of the store."},
        {"floodgate_store_node_errors_total",
         "Checks that failed, by server of the store (also those failed "
         "without being sent: a connection down, a breaker open)."},
    };
    for (size_t k = 0; k < 2; k++) {
        fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", per_node[k].metric,
                per_node[k].help, per_node[k].metric);
        for (int s = 0; s < nodes; s++) {
            uint64_t v = 0;
            for (unsigned i = 0; i < n; i++)
                v += k ? FG_GET(w[i]->node[s].errors)
                       : FG_GET(w[i]->node[s].calls);
            fprintf(out, "%s{node=\"%s\"} %" PRIu64 "\n", per_node[k].metric,
                    label_value(node_name[s], esc, sizeof esc), v);
        }
    }
    fprintf(out, "# HELP floodgate_store_node_latency_seconds Time a request "
                 "waited for the store, by server of its limits.\n"
                 "# TYPE floodgate_store_node_latency_seconds histogram\n");
    for (int s = 0; s < nodes; s++) {
        uint64_t nb[FG_LAT_BUCKETS] = {0}, nsum = 0;
        for (unsigned i = 0; i < n; i++) {
            const fg__node_metrics *nm = &w[i]->node[s];
            for (int k = 0; k < FG_LAT_BUCKETS; k++)
                nb[k] += FG_GET(nm->lat_bucket[k]);
            nsum += FG_GET(nm->lat_sum_us);
        }
        char label[sizeof esc + 16];
        snprintf(label, sizeof label, "node=\"%s\",",
                 label_value(node_name[s], esc, sizeof esc));
        print_histogram(out, "floodgate_store_node_latency_seconds", label, nb,
                        nsum);
    }

    fprintf(out, "# HELP floodgate_http_responses_total Responses by status."
                 "\n# TYPE floodgate_http_responses_total counter\n");
    for (int c = 0; c < FG_HTTP_N; c++) {
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
            v += FG_GET(w[i]->http[c]);
        char code[8] = "other";
        if (c < FG_HTTP_N - 1)
            snprintf(code, sizeof code, "%d", http_status[c]);
        fprintf(out,
                "floodgate_http_responses_total{code=\"%s\"} %" PRIu64 "\n",
                code, v);
    }
    uint64_t slow = 0, conns = 0;
    for (unsigned i = 0; i < n; i++) {
        slow += FG_GET(w[i]->slow_closed);
        conns += FG_GET(w[i]->connections);
    }
    fprintf(out,
            "# HELP floodgate_connections Open client connections (each "
            "worker's as of its last sweep, at most a second old).\n"
            "# TYPE floodgate_connections gauge\n"
            "floodgate_connections %" PRIu64 "\n"
            "# HELP floodgate_slow_requests_closed_total Connections closed "
            "because a request, partly received, took longer than "
            "request_timeout to arrive (idle connections are not "
            "counted).\n"
            "# TYPE floodgate_slow_requests_closed_total counter\n"
            "floodgate_slow_requests_closed_total %" PRIu64 "\n",
            conns, slow);
    fprintf(out,
            "# HELP floodgate_draining 1 once SIGTERM was received.\n"
            "# TYPE floodgate_draining gauge\nfloodgate_draining %d\n"
            "# HELP floodgate_workers Event loops serving requests.\n"
            "# TYPE floodgate_workers gauge\nfloodgate_workers %u\n"
            "# HELP floodgate_reloads_total Configuration reloads.\n"
            "# TYPE floodgate_reloads_total counter\n"
            "floodgate_reloads_total{result=\"ok\"} %" PRIu64 "\n"
            "floodgate_reloads_total{result=\"error\"} %" PRIu64 "\n"
            "# HELP floodgate_blocked_cache_entries Entries the blocked-key "
            "caches hold: keys refused, kept until allowed again or their "
            "slot is taken.\n# TYPE floodgate_blocked_cache_entries gauge\n"
            "floodgate_blocked_cache_entries %" PRIu64 "\n",
            info->draining, info->workers, info->reloads, info->reload_errors,
            info->cache_entries);
    if (info->memory)
        fprintf(out,
                "# HELP floodgate_memory_keys Keys the memory store holds "
                "(at most its max_keys).\n"
                "# TYPE floodgate_memory_keys gauge\n"
                "floodgate_memory_keys %" PRIu64 "\n"
                "# HELP floodgate_memory_evicted_total Keys the memory store "
                "dropped to make room while they still counted (their usage "
                "forgotten).\n"
                "# TYPE floodgate_memory_evicted_total counter\n"
                "floodgate_memory_evicted_total %" PRIu64 "\n",
                info->memory_keys, info->memory_evicted);
}
