/* main.c -- `floodgate lab`: options, and the order of a run.
 *
 * A run starts Redis and the delay proxy (or opens the user's --store),
 * starts every strategy's cluster at once (start-up in parallel), fires the
 * burst through each strategy in turn, then stops Redis and fires again
 * through each (not a store of the user's), and stops it all. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../cli/commands.h"
#include "../serve/config.h"
#include "lab.h"
#include "simulate.h"

#define FG__LAB_STR_(x) #x
#define FG__LAB_STR(x)  FG__LAB_STR_(x)

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: floodgate lab [--strategy "
        "local|split|naive|atomic|sync|lease|all]\n"
        "                     [--servers 4] [--burst 40] [--spread 40ms]\n"
        "                     [--rtt 2ms] [--limit 10/s] [--sync 200ms]\n"
        "                     [--chunk N] [--shards 1 | --store URL]\n"
        "                     [--balance roundrobin|random] [--json]\n"
        "                     [--web [--listen 127.0.0.1:8090]]\n"
        "                     [--sweep rtt=0,1,2,5,10,20 | servers=.. | "
        "burst=..]\n"
        "                     [--svg FILE]\n"
        "\n"
        "Runs redis-server, a delay proxy, N `floodgate serve` and HAProxy\n"
        "in a temporary folder, fires one user's burst through them and\n"
        "counts what each way of limiting let through.\n"
        "\n"
        "  --strategy S       local, split, naive, atomic, sync, lease, a\n"
        "                     list of them (atomic,sync,lease) or all\n"
        "                     (default)\n"
        "  --servers N        API servers per strategy, 1 to %d (default 4)\n"
        "  --burst N          requests the scalper fires, 1 to 10000\n"
        "                     (default 40)\n"
        "  --spread D         the burst is sent evenly within D, at most 60s\n"
        "                     (default 40ms)\n"
        "  --rtt D            added to each round trip to Redis, at most 1s\n"
        "                     (default 2ms)\n"
        "  --limit RATE       the limit per user (default 10/s)\n"
        "  --sync D           the sync strategy's interval, 10ms to 10s\n"
        "                     (default 200ms)\n"
        "  --chunk N          the lease strategy's largest chunk, 1 to the\n"
        "                     limit, at most 1000000 (default: half the "
        "limit)\n"
        "  --shards N         N redis-servers (1..8), each behind its own\n"
        "                     delay proxy, as shards=URL,URL,...\n"
        "  --store URL        the Redis strategies use a store you run\n"
        "                     (redis://, unix://, shards=, cluster=,\n"
        "                     sentinel://): no redis-server, no delay proxy\n"
        "                     (no --rtt), its commands not counted, never\n"
        "                     stopped (no Redis-down burst); not with --web\n"
        "  --balance B        HAProxy's balance: roundrobin (default) or\n"
        "                     random\n"
        "  --json             one JSON object per strategy and line\n"
        "  --web              the interactive page instead of one run\n"
        "  --listen ADDR      where --web listens, on loopback (default\n"
        "                     127.0.0.1:8090; port 0 picks one)\n"
        "  --sweep P=V,...    one run per value of rtt (ms, 0 to 1000),\n"
        "                     servers or burst, at most 32 values: a table\n"
        "                     and an SVG chart\n"
        "  --svg FILE         where --sweep writes its chart (default\n"
        "                     lab-sweep-P.svg); with --sweep only\n"
        "  -h, --help         this help\n"
        "\n"
        "D is a number with us, ms or s (a bare number is ms). Exit status:\n"
        "0 the run completed, 1 a program missing, a process that did not\n"
        "start or a run that failed (the reason on stderr), 2 a bad option,\n"
        "128 + the signal when SIGINT, SIGTERM or SIGHUP stopped it.\n"
        "floodgate lab --simulate --help: the same for 1 to 100,000\n"
        "servers on a virtual clock, with no processes. floodgate-lab(1)\n"
        "has the details.\n",
        FG__LAB_MAX_SERVERS);
}

/* A duration of the real lab's options: at most a minute. */
static int parse_duration_us(const char *s, int64_t *out)
{
    uint64_t us;
    if (fg__lab_parse_duration(s, 60000000, &us) < 0)
        return -1;
    *out = (int64_t)us;
    return 0;
}

/* "10/s", "100/min", "5/15min", "250/500ms": the library's rates
 * (fg_limit_parse), whose units are whole milliseconds or more. */
static int parse_rate(const char *s, uint64_t *limit, uint64_t *period_ms,
                      char *why, size_t whylen)
{
    char err[200];
    fg_limit lim;
    if (fg_limit_parse_err(s, &lim, err, sizeof err) != FG_OK) {
        const char *r = strstr(err, "': ");
        snprintf(why, whylen, "%s", r ? r + 3 : err);
        return -1;
    }
    *limit = lim.limit;
    *period_ms = lim.period_us / 1000;
    return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

typedef struct opts {
    unsigned mask;
    fg__lab_params p;
    int json;
    int web;
    const char *listen;
    int listen_given;
    int strategy_given;
    char sweep_param[16];
    int sweep[FG__LAB_MAX_SWEEP];
    int nsweep;
    const char *svg;
    int shards;        /* redis-servers the lab starts (--shards) */
    const char *store; /* or the user's store (--store), else NULL */
    int rtt_given;
    int shards_given;
} opts;

static int parse_sweep(const char *s, opts *o)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq - s >= (long)sizeof o->sweep_param)
        return -1;
    memcpy(o->sweep_param, s, (size_t)(eq - s));
    o->sweep_param[eq - s] = '\0';
    int lo, hi;
    if (strcmp(o->sweep_param, "rtt") == 0)
        lo = 0, hi = 1000;
    else if (strcmp(o->sweep_param, "servers") == 0)
        lo = 1, hi = FG__LAB_MAX_SERVERS;
    else if (strcmp(o->sweep_param, "burst") == 0)
        lo = 1, hi = FG__LAB_MAX_BURST;
    else
        return -1;
    char buf[512];
    if (!fg__lab_list_ok(eq + 1) ||
        snprintf(buf, sizeof buf, "%s", eq + 1) >= (int)sizeof buf)
        return -1;
    char *save = NULL;
    o->nsweep = 0;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (o->nsweep == FG__LAB_MAX_SWEEP ||
            parse_int(t, lo, hi, &o->sweep[o->nsweep]) < 0)
            return -1;
        o->nsweep++;
    }
    return o->nsweep > 0 ? 0 : -1;
}

/* What option 'name' takes, for its error. */
static const char *expected(const char *name)
{
    static const struct {
        const char *name, *what;
    } forms[] = {
        {"--strategy", "all, or a comma list of local, split, naive, atomic, "
                       "sync and lease"},
        {"--sync", "the sync interval, whole ms from 10ms to 10s"},
        {"--chunk", "1 to 1000000"},
        {"--servers", "1 to " FG__LAB_STR(FG__LAB_MAX_SERVERS)},
        {"--burst", "1 to " FG__LAB_STR(FG__LAB_MAX_BURST)},
        {"--spread", "a duration up to 60s, like 200ms"},
        {"--rtt", "a duration up to 1s, like 2ms"},
        {"--shards", "1 to " FG__LAB_STR(FG__LAB_MAX_SHARDS)},
        {"--balance", "roundrobin or random"},
        {"--listen", "HOST:PORT"},
        /* clang-format off */
        {"--sweep", "rtt= (0 to 1000 ms), servers= (1 to "
                    FG__LAB_STR(FG__LAB_MAX_SERVERS) ") or burst= (1 to "
                    FG__LAB_STR(FG__LAB_MAX_BURST) "), then a comma list of "
                    "at most " FG__LAB_STR(FG__LAB_MAX_SWEEP) " values: "
                    "rtt=0,1,2,5"},
        /* clang-format on */
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
        if (strcmp(name, forms[i].name) == 0)
            return forms[i].what;
    return "see floodgate lab --help";
}

/* "atomic,sync,lease" (or one name, or "all") into 'mask'. */
static int parse_strategies(const char *s, unsigned *mask)
{
    if (strcmp(s, "all") == 0) {
        *mask = (1u << FG__LAB_NSTRATEGIES) - 1;
        return 0;
    }
    char buf[128];
    if (!fg__lab_list_ok(s) ||
        snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    unsigned m = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int i = fg__lab_strategy_parse(t);
        if (i < 0)
            return -1;
        m |= 1u << i;
    }
    if (!m)
        return -1;
    *mask = m;
    return 0;
}

/* A --store URL the servers can be given: one the library accepts, of a
 * Redis store, on one line of their config. 0, or -1 after printing why
 * (never the URL itself: it may carry a password). */
static int store_arg(const char *url)
{
    char why[256];
    if (strncmp(url, "memory", 6) == 0) {
        fprintf(stderr, "floodgate lab: bad value for --store: the lab "
                        "needs a Redis store (redis://, unix://, shards=, "
                        "cluster= or sentinel://); local and split already "
                        "use memory\n");
        return -1;
    }
    if (strlen(url) > FG__LAB_STORE_URL_MAX) {
        fprintf(stderr,
                "floodgate lab: bad value for --store: longer than %d "
                "characters, more than a line of floodgate serve's config "
                "holds after \"url = \"\n",
                FG__LAB_STORE_URL_MAX);
        return -1;
    }
    if (fg_store_url_check(url, why, sizeof why) != FG_OK) {
        fprintf(stderr, "floodgate lab: bad value for --store: %s\n", why);
        return -1;
    }
    /* The URL goes into an INI line: a control character or a space
     * would end or cut it there. */
    for (const char *c = url; *c; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            fprintf(stderr, "floodgate lab: bad value for --store: a space "
                            "or control character in the URL (percent-"
                            "encode it)\n");
            return -1;
        }
    }
    return 0;
}

/* Returns 0, or 2 after printing why. */
static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->mask = (1u << FG__LAB_NSTRATEGIES) - 1;
    o->p.servers = 4;
    o->p.burst = 40;
    o->p.spread_us = 40000;
    o->p.rtt_us = 2000;
    o->p.limit = 10;
    o->p.period_ms = 1000;
    o->p.sync_ms = 200;
    o->shards = 1;
    o->listen = "127.0.0.1:8090";
    char seen[24][32]; /* the options given so far */
    unsigned nseen = 0;
    for (int i = 1; i < argc; i++) {
        char name[32];
        const char *a = argv[i], *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) != 0 ||
            (size_t)(eq ? eq - a : (long)strlen(a)) >= sizeof name) {
            fprintf(stderr, "floodgate lab: unknown argument '%s'\n", a);
            return 2;
        }
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        memcpy(name, a, nlen);
        name[nlen] = '\0';
        for (unsigned k = 0; k < nseen; k++) {
            if (strcmp(seen[k], name) == 0) {
                fprintf(stderr, "floodgate lab: %s given twice\n", name);
                return 2;
            }
        }
        if (nseen < sizeof seen / sizeof seen[0])
            memcpy(seen[nseen++], name, nlen + 1);
        if (strcmp(name, "--json") == 0 || strcmp(name, "--web") == 0) {
            if (eq) {
                fprintf(stderr, "floodgate lab: %s takes no value\n", name);
                return 2;
            }
            *(name[2] == 'j' ? &o->json : &o->web) = 1;
            continue;
        }
        /* Without a value, the option is still looked up below, so that an
         * unknown one is named as such; then its missing value is. */
        int missing = 0;
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else
            val = "", missing = 1;
        int bad = 0;
        if (strcmp(name, "--strategy") == 0) {
            bad = parse_strategies(val, &o->mask);
            o->strategy_given = 1;
        } else if (strcmp(name, "--sync") == 0) {
            /* The library's range for mode = sync:INTERVAL, in whole ms. */
            int64_t us = 0;
            bad = parse_duration_us(val, &us) < 0 || us % 1000 != 0 ||
                  us < 10000 || us > 10000000;
            o->p.sync_ms = (int)(us / 1000);
        } else if (strcmp(name, "--chunk") == 0) {
            int chunk = 0;
            bad = parse_int(val, 1, 1000000, &chunk);
            o->p.chunk = (uint64_t)chunk;
        } else if (strcmp(name, "--servers") == 0) {
            bad = parse_int(val, 1, FG__LAB_MAX_SERVERS, &o->p.servers);
        } else if (strcmp(name, "--burst") == 0) {
            bad = parse_int(val, 1, FG__LAB_MAX_BURST, &o->p.burst);
        } else if (strcmp(name, "--spread") == 0) {
            bad = parse_duration_us(val, &o->p.spread_us);
        } else if (strcmp(name, "--rtt") == 0) {
            bad = parse_duration_us(val, &o->p.rtt_us);
            if (!bad && o->p.rtt_us > 1000000)
                bad = 1;
            o->rtt_given = 1;
        } else if (strcmp(name, "--shards") == 0) {
            bad = parse_int(val, 1, FG__LAB_MAX_SHARDS, &o->shards);
            o->shards_given = 1;
        } else if (strcmp(name, "--store") == 0) {
            if (!missing && store_arg(val) < 0)
                return 2;
            o->store = val;
        } else if (strcmp(name, "--limit") == 0) {
            char why[256] = "";
            bad =
                parse_rate(val, &o->p.limit, &o->p.period_ms, why, sizeof why);
            if (bad && why[0] && !missing) {
                fprintf(stderr,
                        "floodgate lab: bad value for --limit: '%s' "
                        "(%s)\n",
                        val, why);
                return 2;
            }
        } else if (strcmp(name, "--balance") == 0) {
            if (strcmp(val, "roundrobin") == 0)
                o->p.balance_random = 0;
            else if (strcmp(val, "random") == 0)
                o->p.balance_random = 1;
            else
                bad = 1;
        } else if (strcmp(name, "--listen") == 0) {
            char host[128], port[8];
            o->listen = val;
            o->listen_given = 1;
            bad = fg__listen_split(val, host, sizeof host, port, sizeof port);
            /* The page starts processes for whoever reaches it. */
            if (!bad && !fg__lab_loopback_host(host)) {
                fprintf(stderr,
                        "floodgate lab: bad value for --listen: '%s' (the "
                        "page listens on loopback only: 127.0.0.1, [::1] "
                        "or localhost, as everything the lab runs)\n",
                        val);
                return 2;
            }
        } else if (strcmp(name, "--sweep") == 0) {
            bad = parse_sweep(val, o);
        } else if (strcmp(name, "--svg") == 0) {
            o->svg = val;
        } else {
            fprintf(stderr, "floodgate lab: unknown option '%s'\n", name);
            return 2;
        }
        if (missing) {
            fprintf(stderr, "floodgate lab: %s needs a value\n", name);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "floodgate lab: bad value for %s: '%s' (%s)\n",
                    name, val, expected(name));
            return 2;
        }
    }
    if (o->listen_given && !o->web) {
        fprintf(stderr, "floodgate lab: --listen applies to --web only\n");
        return 2;
    }
    if (o->web && (o->nsweep > 0 || o->svg)) {
        fprintf(stderr,
                "floodgate lab: %s does not apply with --web (the "
                "page measures its own curve)\n",
                o->nsweep > 0 ? "--sweep" : "--svg");
        return 2;
    }
    if (o->web && o->strategy_given) {
        fprintf(stderr, "floodgate lab: --strategy does not apply with --web "
                        "(the page has a tab for each strategy)\n");
        return 2;
    }
    if (o->svg && o->nsweep == 0) {
        fprintf(stderr, "floodgate lab: --svg applies to --sweep only (it is "
                        "where the sweep's chart goes)\n");
        return 2;
    }
    if (o->json && o->web) {
        fprintf(stderr, "floodgate lab: --json and --web exclude each other "
                        "(the page gets its JSON from /api/run)\n");
        return 2;
    }
    if (o->store && o->shards_given) {
        fprintf(stderr, "floodgate lab: --shards and --store exclude each "
                        "other (--shards starts the lab's own "
                        "redis-servers)\n");
        return 2;
    }
    if (o->store) {
        const char *clash = o->rtt_given                         ? "--rtt"
                            : o->web                             ? "--web"
                            : strcmp(o->sweep_param, "rtt") == 0 ? "--sweep rtt"
                                                                 : NULL;
        if (clash) {
            fprintf(stderr,
                    "floodgate lab: %s does not apply with --store (the "
                    "lab adds no delay proxy to a store it did not "
                    "start)\n",
                    clash);
            return 2;
        }
        /* No delay is added: the bounds and waits take the round trip as
         * the lab's own share of it, none. */
        o->p.rtt_us = 0;
    }
    /* A lease takes at most the limit (the token bucket's burst). */
    if (o->p.chunk > o->p.limit) {
        fprintf(stderr,
                "floodgate lab: --chunk %llu is more than the limit (%llu)\n",
                (unsigned long long)o->p.chunk, (unsigned long long)o->p.limit);
        return 2;
    }
    return 0;
}

/* A run whose requests got no answer from a server (one died or stopped
 * during it): its figures are not the limiter's. -1 with the reason. */
static int unanswered(const fg__lab_result *rs, size_t n, unsigned mask,
                      char *err, size_t errlen)
{
    long failed = 0;
    for (size_t i = 0; i < n; i++)
        if (mask & (1u << (i % FG__LAB_NSTRATEGIES)))
            failed += rs[i].failed + rs[i].down_failed;
    if (!failed)
        return 0;
    snprintf(err, errlen,
             "%ld requests got no answer from a server, or another status "
             "than 200, 429 or 503 (did a process die or stop during the "
             "run?): the figures above are not the limiter's",
             failed);
    return -1;
}

static int run_once(fg__lab *lab, const opts *o, char *err, size_t errlen)
{
    fg__lab_result rs[FG__LAB_NSTRATEGIES];
    memset(rs, 0, sizeof rs);
    int64_t t0 = fg__lab_now_us();
    if (fg__lab_ensure_many(lab, o->mask, &o->p, err, errlen) < 0)
        return -1;
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if ((o->mask & (1u << s)) &&
            fg__lab_measure(lab, s, &o->p, &rs[s], err, errlen) < 0)
            return -1;
    if (fg__lab_measure_down(lab, o->mask, rs, err, errlen) < 0)
        return -1;
    fg__lab_result shown[FG__LAB_NSTRATEGIES];
    int n = 0;
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (o->mask & (1u << s))
            shown[n++] = rs[s];
    if (o->json) {
        for (int i = 0; i < n; i++)
            fg__lab_print_json(stdout, &shown[i]);
    } else {
        fg__lab_print_cards(stdout, shown, n, isatty(1));
        printf("\n  measured in %.2f s (servers started, bursts fired%s)\n",
               (fg__lab_now_us() - t0) / 1e6,
               fg__lab_own_store(lab) ? ", Redis stopped and fired again" : "");
    }
    fflush(stdout);
    return unanswered(rs, FG__LAB_NSTRATEGIES, o->mask, err, errlen);
}

/* Where the sweep's chart goes: --svg as given, or lab-sweep-P.svg made
 * in 'buf'. */
static const char *svg_path(const opts *o, char *buf, size_t len)
{
    if (o->svg)
        return o->svg;
    snprintf(buf, len, "lab-sweep-%s.svg", o->sweep_param);
    return buf;
}

static int run_sweep(fg__lab *lab, const opts *o, char *err, size_t errlen)
{
    size_t n = (size_t)o->nsweep * FG__LAB_NSTRATEGIES;
    fg__lab_result *rs = calloc(n, sizeof *rs);
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int v = 0; v < o->nsweep && rc == 0; v++) {
        fg__lab_params p = o->p;
        if (strcmp(o->sweep_param, "rtt") == 0)
            p.rtt_us = (int64_t)o->sweep[v] * 1000;
        else if (strcmp(o->sweep_param, "servers") == 0)
            p.servers = o->sweep[v];
        else
            p.burst = o->sweep[v];
        fg__lab_retire(lab, &p);
        rc = fg__lab_ensure_many(lab, o->mask, &p, err, errlen);
        for (int s = 0; s < FG__LAB_NSTRATEGIES && rc == 0; s++)
            if (o->mask & (1u << s))
                rc = fg__lab_measure(
                    lab, s, &p, &rs[v * FG__LAB_NSTRATEGIES + s], err, errlen);
        if (rc == 0 && !o->json)
            fprintf(stderr, "  %s=%d done\n", o->sweep_param, o->sweep[v]);
    }
    if (rc == 0) {
        char fallback[64];
        const char *path = svg_path(o, fallback, sizeof fallback);
        if (o->json) {
            for (size_t i = 0; i < n; i++)
                if (o->mask & (1u << (i % FG__LAB_NSTRATEGIES)))
                    fg__lab_print_json(stdout, &rs[i]);
        } else {
            printf("\n");
            fg__lab_print_sweep(stdout, o->sweep_param, o->sweep, o->nsweep,
                                o->mask, rs);
        }
        rc = fg__lab_write_svg(path, o->sweep_param, o->sweep, o->nsweep,
                               o->mask, rs, err, errlen);
        if (rc == 0)
            fprintf(o->json ? stderr : stdout, "\n  chart: %s\n", path);
        fflush(stdout);
        if (rc == 0)
            rc = unanswered(rs, n, o->mask, err, errlen);
    }
    free(rs);
    return rc;
}

/* The largest burst the lab will fire: the sweep's largest, or the page's
 * API's. */
static int max_burst(const opts *o)
{
    int b = o->p.burst;
    if (o->web && b < FG__LAB_WEB_MAX_BURST)
        b = FG__LAB_WEB_MAX_BURST;
    if (strcmp(o->sweep_param, "burst") == 0)
        for (int v = 0; v < o->nsweep; v++)
            b = o->sweep[v] > b ? o->sweep[v] : b;
    return b;
}

/* Each request of a burst has its own connection, at once, and HAProxy
 * holds two descriptors for each: raise the soft limit to the hard one,
 * and refuse a burst that cannot fit it, before anything starts. 0, or -1
 * after printing why. */
static int fds_enough(const opts *o)
{
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) != 0)
        return 0;
    if (nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &nofile) != 0)
            getrlimit(RLIMIT_NOFILE, &nofile);
    }
    int burst = max_burst(o);
    long long need = fg__lab_fds_needed(burst);
    if (nofile.rlim_cur == RLIM_INFINITY ||
        (unsigned long long)nofile.rlim_cur >= (unsigned long long)need)
        return 0;
    fprintf(stderr,
            "floodgate lab: a burst of %d%s needs %lld open files (HAProxy "
            "holds two per request), and the limit is %llu: raise it with "
            "`ulimit -n %lld` (the hard limit: as root or in "
            "/etc/security/limits.conf), or fire a smaller burst\n",
            burst, o->web ? " (the page's largest)" : "", need,
            (unsigned long long)nofile.rlim_cur, need);
    return -1;
}

int fg_cmd_lab(int argc, char **argv)
{
    /* The simulator has options of its own: it parses them all. */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--simulate") == 0)
            return fg__lab_simulate(argc, argv);
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    char err[512] = "";
    if (fds_enough(&o) < 0)
        return 2;
    char svg[64];
    if (o.nsweep > 0 &&
        fg__lab_writable("floodgate lab", svg_path(&o, svg, sizeof svg)) < 0)
        return 2;
    fg__lab_install_signals();
    fg__lab *lab = fg__lab_new(o.store == NULL, max_burst(&o), err, sizeof err);
    if (!lab) {
        fprintf(stderr, "floodgate lab: %s\n", err);
        return 1;
    }
    if (o.store ? fg__lab_use_store(lab, o.store, err, sizeof err) < 0
                : fg__lab_start_redis(lab, o.shards, err, sizeof err) < 0)
        rc = 1;
    else if (o.web)
        rc = fg__lab_web(lab, o.listen, &o.p) < 0 ? 1 : 0;
    else if (o.nsweep > 0)
        rc = run_sweep(lab, &o, err, sizeof err) < 0 ? 1 : 0;
    else
        rc = run_once(lab, &o, err, sizeof err) < 0 ? 1 : 0;
    if (rc != 0 && err[0])
        fprintf(stderr, "floodgate lab: %s\n",
                fg__lab_stop ? "interrupted, cleaning up" : err);
    fg__lab_free(lab);
    /* The shell's convention: 128 + the signal (130 Ctrl-C, 143 SIGTERM). */
    return fg__lab_stop ? 128 + fg__lab_stop : rc;
}
