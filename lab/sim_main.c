/* sim_main.c -- `floodgate lab --simulate`: its options, and one run per
 * strategy and server count. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lab.h"
#include "simulate.h"

#define ME "floodgate lab --simulate"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: floodgate lab --simulate\n"
           "           [--strategy atomic|sync|lease|local|split|all[,...]]\n"
           "           [--servers 8 | --servers 10,100,1000,10000]\n"
           "           [--limit 10/s]\n"
           "           [--algorithm token_bucket|fixed_window|sliding_window]\n"
           "           [--arrival steady|burst|poisson] [--load 2]\n"
           "           [--duration 10s] [--burst 40] [--spread 40ms]\n"
           "           [--rtt 2ms] [--sync 200ms] [--chunk N] [--seed 1]\n"
           "           [--balance roundrobin|random] [--json] [--svg FILE]\n"
           "Simulates N servers sharing one store on a virtual clock, with\n"
           "libfloodgate's own decisions (fg_local_* for sync and lease, an\n"
           "exact limiter on a memory store as the shared store), and prints\n"
           "per strategy and server count: requests, allowed, what the limit\n"
           "allows, overshoot and its stated bound, under-admission and its\n"
           "bound, store commands per request, and the run's wall time.\n"
           "\n"
           "  --strategy S    atomic (every request an exact check at the\n"
           "                  store: the reference), sync, lease, local (each\n"
           "                  server the full limit), split (limit / N each),\n"
           "                  all, or a comma-separated list (default all)\n"
           "  --servers N     1 to 100000, or a comma-separated list of up to\n"
           "                  32 counts (default 8)\n"
           "  --limit RATE    the user's limit, N/UNIT (default 10/s)\n"
           "  --algorithm A   token_bucket (default, burst = limit),\n"
           "                  fixed_window or sliding_window\n"
           "  --arrival K     steady (evenly spaced, the default), burst (all\n"
           "                  within --spread) or poisson (seeded)\n"
           "  --load X        steady, poisson: arrivals at X times the limit\n"
           "                  (default 2, at most 10000)\n"
           "  --duration D    steady, poisson: how long they last (default\n"
           "                  10s, at most 3600s)\n"
           "  --burst N       burst: how many requests (default 40)\n"
           "  --spread D      burst: sent evenly within D (default 40ms)\n"
           "  --rtt D         a round trip to the store (default 2ms, at most\n"
           "                  1s); the store acts halfway; an answer later\n"
           "                  than the servers' 250 ms timeout is a failure\n"
           "                  (on_failure open decides)\n"
           "  --sync D        sync's interval, 10ms to 10s (default 200ms)\n"
           "  --chunk N       lease's largest chunk (default: half the limit)\n"
           "  --seed N        poisson arrivals, random balance and the\n"
           "                  servers' timer phases (default 1)\n"
           "  --balance B     roundrobin (default) or random\n"
           "  --json          one JSON object per row instead of the table\n"
           "  --svg FILE      also write a chart of overshoot and store\n"
           "                  commands per request against the servers\n"
           "Durations: a number with us, ms or s; a bare number is ms.\n");
}

int fg__lab_list_ok(const char *s)
{
    size_t n = strlen(s);
    return n && s[0] != ',' && s[n - 1] != ',' && !strstr(s, ",,");
}

/* "40ms", "0.5ms", "2s", "500us"; a bare number is milliseconds; at most
 * 'max_us'. */
int fg__lab_parse_duration(const char *s, uint64_t max_us, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0))
        return -1;
    double mul;
    if (strcmp(end, "us") == 0)
        mul = 1;
    else if (strcmp(end, "ms") == 0 || *end == '\0')
        mul = 1000;
    else if (strcmp(end, "s") == 0)
        mul = 1000000;
    else
        return -1;
    v *= mul;
    if (v > (double)max_us)
        return -1;
    *out = (uint64_t)(v + 0.5);
    return 0;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

typedef struct opts {
    fg__sim_params p;
    unsigned mask;
    unsigned servers[FG__SIM_MAX_RUNS];
    int nservers;
    int json;
    const char *svg;
    /* Given on the command line: judged against --arrival at the end. */
    int load_given, duration_given, burst_given, spread_given;
} opts;

static int parse_strategies(const char *s, unsigned *mask)
{
    char buf[256];
    /* "all" alone, or names (as the real lab reads them). */
    if (strcmp(s, "all") == 0) {
        *mask = (1u << FG__SIM_NSTRATEGIES) - 1;
        return 0;
    }
    if (!fg__lab_list_ok(s) ||
        snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    *mask = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int k = fg__sim_strategy_parse(t);
        if (k < 0)
            return -1;
        *mask |= 1u << k;
    }
    return *mask ? 0 : -1;
}

static int parse_servers(const char *s, opts *o)
{
    char buf[512];
    if (!fg__lab_list_ok(s) ||
        snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    o->nservers = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        uint64_t v;
        if (o->nservers == FG__SIM_MAX_RUNS ||
            parse_u64(t, 1, FG__SIM_MAX_SERVERS, &v) < 0)
            return -1;
        /* Kept in order, so that the table and the chart's lines go
         * from few servers to many. */
        int at = o->nservers++;
        while (at > 0 && o->servers[at - 1] > (unsigned)v) {
            o->servers[at] = o->servers[at - 1];
            at--;
        }
        o->servers[at] = (unsigned)v;
    }
    return o->nservers > 0 ? 0 : -1;
}

/* One option with its value. 0, -1 for a bad value, or 2 after printing
 * why. */
static int parse_one(opts *o, const char *name, const char *val)
{
    fg__sim_params *p = &o->p;
    char err[256] = "", mode[64];
    uint64_t v;
    if (strcmp(name, "--strategy") == 0)
        return parse_strategies(val, &o->mask);
    if (strcmp(name, "--servers") == 0)
        return parse_servers(val, o);
    if (strcmp(name, "--limit") == 0) {
        /* The rate only: what else was given stays. */
        fg_limit lim;
        if (fg_limit_parse_err(val, &lim, err, sizeof err) != FG_OK) {
            fprintf(stderr, ME ": bad value for --limit: '%s' (%s)\n", val,
                    err);
            return 2;
        }
        p->lim.limit = lim.limit;
        p->lim.period_us = lim.period_us;
        return 0;
    }
    if (strcmp(name, "--algorithm") == 0) {
        fg_algorithm a;
        if (fg_algorithm_parse(val, &a) != FG_OK)
            return -1;
        if (a == FG_NAIVE_GET_SET) {
            fprintf(stderr,
                    ME ": --algorithm naive_get_set has no sync or lease "
                       "mode (the real lab shows its race)\n");
            return 2;
        }
        p->lim.algorithm = a;
        return 0;
    }
    if (strcmp(name, "--arrival") == 0) {
        p->arrival = fg__sim_arrival_parse(val);
        return p->arrival < 0 ? -1 : 0;
    }
    if (strcmp(name, "--load") == 0) {
        char *end;
        double x = strtod(val, &end);
        o->load_given = 1;
        if (end == val || *end != '\0' || !(x > 0) || x > 10000)
            return -1;
        p->load = x;
        return 0;
    }
    if (strcmp(name, "--duration") == 0) {
        o->duration_given = 1;
        if (fg__lab_parse_duration(val, 3600000000ull, &p->duration_us) < 0 ||
            p->duration_us == 0)
            return -1;
        return 0;
    }
    if (strcmp(name, "--burst") == 0) {
        o->burst_given = 1;
        return parse_u64(val, 1, 10000000, &p->burst);
    }
    if (strcmp(name, "--spread") == 0) {
        o->spread_given = 1;
        return fg__lab_parse_duration(val, 60000000, &p->spread_us);
    }
    if (strcmp(name, "--rtt") == 0)
        return fg__lab_parse_duration(val, 1000000, &p->rtt_us);
    if (strcmp(name, "--sync") == 0 || strcmp(name, "--chunk") == 0) {
        /* The library's own parser, through the mode's spelling. */
        fg_limit lim = p->lim;
        snprintf(mode, sizeof mode, "%s:%s", name[2] == 's' ? "sync" : "lease",
                 val);
        if (strlen(val) > 32 ||
            fg_mode_parse(mode, &lim, err, sizeof err) != FG_OK) {
            fprintf(stderr, ME ": bad value for %s: '%s' (%s)\n", name, val,
                    err);
            return 2;
        }
        if (name[2] == 's')
            p->lim.sync_ms = lim.sync_ms;
        else
            p->lim.lease_chunk = lim.lease_chunk;
        return 0;
    }
    if (strcmp(name, "--seed") == 0) {
        if (parse_u64(val, 0, UINT64_MAX, &v) < 0)
            return -1;
        p->seed = v;
        return 0;
    }
    if (strcmp(name, "--balance") == 0) {
        if (strcmp(val, "roundrobin") == 0)
            p->balance_random = 0;
        else if (strcmp(val, "random") == 0)
            p->balance_random = 1;
        else
            return -1;
        return 0;
    }
    if (strcmp(name, "--svg") == 0) {
        if (!*val)
            return -1;
        o->svg = val;
        return 0;
    }
    fprintf(stderr, ME ": unknown option '%s'\n", name);
    return 2;
}

/* 'name''s number from 1 when it is an option that takes a value
 * (--json is 16), else 0. */
static int known(const char *name)
{
    static const char *const names[] = {
        "--strategy", "--servers",  "--limit", "--algorithm", "--arrival",
        "--load",     "--duration", "--burst", "--spread",    "--rtt",
        "--sync",     "--chunk",    "--seed",  "--balance",   "--svg"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i + 1;
    return strcmp(name, "--json") == 0 ? 16 : 0;
}

/* What option 'name' takes, as --help says. */
static const char *expected(const char *name)
{
    static const char *const what[][2] = {
        {"--strategy", "atomic, sync, lease, local, split or all, or a list"},
        {"--servers", "1 to 100000, or a list of up to 32 counts"},
        {"--algorithm", "token_bucket, fixed_window or sliding_window"},
        {"--arrival", "steady, burst or poisson"},
        {"--load", "a number above 0, at most 10000"},
        {"--duration", "a duration above 0, at most 3600s"},
        {"--burst", "1 to 10000000"},
        {"--spread", "a duration, at most 60s"},
        {"--rtt", "a duration, at most 1s"},
        {"--seed", "a whole number"},
        {"--balance", "roundrobin or random"},
        {"--svg", "a file name"}};
    for (size_t i = 0; i < sizeof what / sizeof what[0]; i++)
        if (strcmp(name, what[i][0]) == 0)
            return what[i][1];
    return "see --help";
}

/* Returns 0, 1 after --help, or 2 after printing why. */
static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    fg_limit_parse("10/s", &o->p.lim);
    snprintf(o->p.lim.name, sizeof o->p.lim.name, "simulated");
    o->p.lim.algorithm = FG_TOKEN_BUCKET;
    o->p.lim.on_failure = FG_FAIL_OPEN;
    o->p.lim.timeout_ms = FG__LAB_STORE_TIMEOUT_MS;
    o->p.lim.sync_ms = 200;
    o->p.arrival = FG__SIM_STEADY;
    o->p.load = 2;
    o->p.burst = 40;
    o->p.spread_us = 40000;
    o->p.duration_us = 10000000;
    o->p.rtt_us = 2000;
    o->p.seed = 1;
    o->mask = (1u << FG__SIM_NSTRATEGIES) - 1;
    o->servers[0] = 8;
    o->nservers = 1;
    unsigned seen = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--simulate") == 0)
            continue;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        char name[32];
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        if (strncmp(a, "--", 2) != 0 || nlen >= sizeof name) {
            fprintf(stderr, ME ": unknown argument '%s'\n", a);
            return 2;
        }
        memcpy(name, a, nlen);
        name[nlen] = '\0';
        int num = known(name);
        if (num && (seen & (1u << num))) {
            fprintf(stderr, ME ": %s given twice\n", name);
            return 2;
        }
        seen |= num ? 1u << num : 0;
        if (strcmp(name, "--json") == 0) {
            if (eq) {
                fprintf(stderr, ME ": --json takes no value\n");
                return 2;
            }
            o->json = 1;
            continue;
        }
        if (strcmp(name, "--web") == 0 || strcmp(name, "--listen") == 0 ||
            strcmp(name, "--sweep") == 0) {
            fprintf(stderr,
                    ME ": %s is the real lab's; --servers takes a list "
                       "here\n",
                    name);
            return 2;
        }
        if (!num) {
            fprintf(stderr, ME ": unknown option '%s'\n", name);
            return 2;
        }
        const char *val;
        if (eq) {
            val = eq + 1;
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(stderr, ME ": %s needs a value\n", name);
            return 2;
        }
        int rc = parse_one(o, name, val);
        if (rc == 2)
            return 2;
        if (rc != 0) {
            fprintf(stderr, ME ": bad value for %s: '%s' (%s)\n", name, val,
                    expected(name));
            return 2;
        }
    }
    int burst = o->p.arrival == FG__SIM_BURST;
    if (burst && (o->load_given || o->duration_given)) {
        fprintf(stderr,
                ME ": --%s applies to --arrival steady or poisson (a burst "
                   "is --burst requests within --spread)\n",
                o->load_given ? "load" : "duration");
        return 2;
    }
    if (!burst && (o->burst_given || o->spread_given)) {
        fprintf(stderr, ME ": --%s applies to --arrival burst only\n",
                o->burst_given ? "burst" : "spread");
        return 2;
    }
    char err[256];
    if (fg_limit_check(&o->p.lim, err, sizeof err) != FG_OK) {
        fprintf(stderr, ME ": %s\n", err);
        return 2;
    }
    fg_limit lease = o->p.lim;
    lease.mode = FG_MODE_LEASE;
    if ((o->mask & (1u << FG__SIM_LEASE)) &&
        fg_limit_check(&lease, err, sizeof err) != FG_OK) {
        fprintf(stderr, ME ": --chunk %llu: %s\n",
                (unsigned long long)lease.lease_chunk, err);
        return 2;
    }
    /* The windows counted per run, and the arrivals, stay bounded. */
    uint64_t span = fg__sim_span_us(&o->p);
    if (o->p.lim.algorithm != FG_TOKEN_BUCKET &&
        span / o->p.lim.period_us > 10000000) {
        fprintf(stderr, ME ": more than 10,000,000 windows of the limit in "
                           "the run: use a longer period or a shorter run\n");
        return 2;
    }
    double arrivals = burst ? (double)o->p.burst
                            : o->p.load * (double)o->p.lim.limit *
                                  (double)span / (double)o->p.lim.period_us;
    if (arrivals > 1e9) {
        fprintf(stderr,
                ME ": %.3g arrivals: at most 1e9 (lower --load, "
                   "--limit or --duration)\n",
                arrivals);
        return 2;
    }
    return 0;
}

int fg__lab_simulate(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if (o.svg && fg__lab_writable(ME, o.svg) < 0)
        return 2;
    size_t max = (size_t)o.nservers * FG__SIM_NSTRATEGIES, n = 0;
    fg__sim_result *rs = calloc(max, sizeof *rs);
    if (!rs) {
        fprintf(stderr, ME ": out of memory\n");
        return 1;
    }
    char err[256] = "";
    int64_t t0 = (int64_t)fg_mono_us();
    for (int v = 0; v < o.nservers && rc == 0; v++) {
        for (int s = 0; s < FG__SIM_NSTRATEGIES && rc == 0; s++) {
            if (!(o.mask & (1u << s)))
                continue;
            int64_t w0 = (int64_t)fg_mono_us();
            if (fg__sim_run(&o.p, s, o.servers[v], &rs[n], err, sizeof err) <
                0) {
                fprintf(stderr, ME ": %s on %u server%s: %s\n",
                        fg__sim_strategy_name(s), o.servers[v],
                        o.servers[v] == 1 ? "" : "s", err);
                rc = 1;
                break;
            }
            rs[n].wall_us = (int64_t)fg_mono_us() - w0;
            if (o.json)
                fg__sim_print_json(stdout, &o.p, &rs[n]);
            n++;
        }
    }
    if (rc == 0 && !o.json) {
        fg__sim_print_table(stdout, &o.p, rs, n);
        /* The slowest run, as simulated seconds per wall second. */
        double slow = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            double x = fg__sim_speed(&o.p, &rs[i]);
            if (i == 0 || x < slow)
                slow = x, at = i;
        }
        if (n)
            printf("  %zu run%s in %.2f s of wall time; the slowest, %s on "
                   "%u server%s, simulated %.3g s per wall second\n",
                   n, n == 1 ? "" : "s", ((int64_t)fg_mono_us() - t0) / 1e6,
                   fg__sim_strategy_name(rs[at].strategy), rs[at].servers,
                   rs[at].servers == 1 ? "" : "s", slow);
    }
    if (rc == 0 && o.svg) {
        if (fg__sim_write_svg(o.svg, &o.p, rs, n, err, sizeof err) < 0) {
            fprintf(stderr, ME ": %s\n", err);
            rc = 1;
        } else {
            fprintf(o.json ? stderr : stdout, "\n  chart: %s\n", o.svg);
        }
    }
    free(rs);
    return rc;
}
