/* lab.c -- the experiment's processes: the lab's Redis (one redis-server,
 * or --shards N of them, each behind a delay proxy of its own) or a store
 * of the user's (--store), and per strategy a cluster of N `floodgate
 * serve` behind HAProxy.
 *
 * Everything lives in one temporary folder (configs, logs, Redis's dir).
 * Clusters are kept between runs and reused while the server count and the
 * balance stay the same; each run uses a user id of its own, so counters
 * left by an earlier run never count. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lab.h"

/* (FG__LAB_STORE_TIMEOUT_MS: a dead Redis is refused at once by the
 * proxy.) */
#define START_TIMEOUT_MS 5000
#define URL_LINE         "url = "

static const char *const names[FG__LAB_NSTRATEGIES] = {
    "local", "split", "naive", "atomic", "sync", "lease"};

const char *fg__lab_strategy_name(int s)
{
    return s >= 0 && s < FG__LAB_NSTRATEGIES ? names[s] : "?";
}

int fg__lab_strategy_parse(const char *s)
{
    for (int i = 0; i < FG__LAB_NSTRATEGIES; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int fg__lab_uses_redis(int s)
{
    return s == FG__LAB_NAIVE || s == FG__LAB_ATOMIC || fg__lab_approximate(s);
}

int fg__lab_approximate(int s)
{
    return s == FG__LAB_SYNC || s == FG__LAB_LEASE;
}

/* The failure policy chosen per strategy. Memory counters never touch
 * Redis. The naive limiter fails open (what most hand-written limiters do).
 * The atomic one falls back to limit / N in each server's memory: still a
 * limit, never more than the real one. sync keeps deciding locally, on that
 * same share. lease spends the units it holds, then falls back to the same
 * share too: its held units were taken from the limit before Redis went
 * away, and the Redis-down row then compares the three on one policy. */
const char *fg__lab_on_failure(int s)
{
    return s == FG__LAB_ATOMIC || fg__lab_approximate(s) ? "local" : "open";
}

const char *fg__lab_policy_text(int s)
{
    switch (s) {
    case FG__LAB_NAIVE:
        return "fails open: allows all";
    case FG__LAB_ATOMIC:
        return "falls back to limit / N";
    case FG__LAB_SYNC:
        return "keeps deciding locally on limit / N";
    case FG__LAB_LEASE:
        return "spends what it holds, then limit / N";
    default:
        return "unaffected (no Redis)";
    }
}

typedef struct cluster {
    int running;
    int shaken; /* Redis went down under it since it last spoke to Redis */
    int servers;
    int balance_random;
    int sync_ms;    /* sync: the interval in its configs */
    uint64_t chunk; /* lease: the chunk in its configs (0: default) */
    pid_t serve[FG__LAB_MAX_SERVERS];
    int port[FG__LAB_MAX_SERVERS];
    pid_t haproxy;
    int haproxy_port;
} cluster;

struct fg__lab {
    char dir[512];
    char exe[PATH_MAX];
    char redis_bin[PATH_MAX];
    char haproxy_bin[PATH_MAX];
    /* The lab's own Redis: 'shards' redis-servers, each behind a proxy of
     * its own and watched through 'info' (INFO commandstats, straight to
     * Redis). 0 with a store of the user's. */
    int shards;
    pid_t redis[FG__LAB_MAX_SHARDS];
    int redis_port[FG__LAB_MAX_SHARDS];
    fg__lab_proxy *proxy[FG__LAB_MAX_SHARDS];
    redisContext *info[FG__LAB_MAX_SHARDS];
    /* The store URL the servers are given, and the lab's own handle on
     * the same store: the library says which node holds a key. */
    char url[4096];
    int url_argv; /* 1: too long for a config line, given as --store */
    fg_store *st;
    fg__lab_store desc;
    cluster cl[FG__LAB_NSTRATEGIES];
    unsigned seq; /* per run: a fresh user id */
    int maxconn;  /* HAProxy's, for the largest burst of this lab */
};

int fg__lab_own_store(const fg__lab *lab)
{
    return lab->shards > 0;
}

fg__lab *fg__lab_new(int need_redis, int max_burst, char *err, size_t errlen)
{
    fg__lab *lab = calloc(1, sizeof *lab);
    if (!lab) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    lab->maxconn = fg__lab_maxconn(max_burst);
    const char *r = getenv("FLOODGATE_REDIS_SERVER");
    const char *h = getenv("FLOODGATE_HAPROXY");
    if (r && *r)
        snprintf(lab->redis_bin, sizeof lab->redis_bin, "%s", r);
    else if (!fg__lab_find_program("redis-server", lab->redis_bin,
                                   sizeof lab->redis_bin))
        lab->redis_bin[0] = '\0';
    if (h && *h)
        snprintf(lab->haproxy_bin, sizeof lab->haproxy_bin, "%s", h);
    else if (!fg__lab_find_program("haproxy", lab->haproxy_bin,
                                   sizeof lab->haproxy_bin))
        lab->haproxy_bin[0] = '\0';
    int no_redis =
        need_redis && (!lab->redis_bin[0] || access(lab->redis_bin, X_OK) != 0);
    int no_haproxy =
        !lab->haproxy_bin[0] || access(lab->haproxy_bin, X_OK) != 0;
    /* A program named by its variable: that name is what is wrong. */
    if (no_redis && r && *r) {
        snprintf(err, errlen,
                 "FLOODGATE_REDIS_SERVER=%.200s is not an executable program",
                 r);
        free(lab);
        return NULL;
    }
    if (no_haproxy && h && *h) {
        snprintf(err, errlen,
                 "FLOODGATE_HAPROXY=%.200s is not an executable program", h);
        free(lab);
        return NULL;
    }
    if (no_redis || no_haproxy) {
        snprintf(err, errlen,
                 "%s%s%s not installed (the lab runs the real programs); "
                 "install with: apt-get install%s%s",
                 no_redis ? "redis-server" : "",
                 no_redis && no_haproxy ? " and " : "",
                 no_haproxy ? "haproxy" : "", no_redis ? " redis-server" : "",
                 no_haproxy ? " haproxy" : "");
        free(lab);
        return NULL;
    }
    /* The servers are this very binary, unless FLOODGATE_BIN names another
     * (to run one build's lab against another build's servers). */
    const char *bin = getenv("FLOODGATE_BIN");
    ssize_t n = bin && *bin
                    ? (ssize_t)snprintf(lab->exe, sizeof lab->exe, "%s", bin)
                    : readlink("/proc/self/exe", lab->exe, sizeof lab->exe - 1);
    if (n <= 0 || (size_t)n >= sizeof lab->exe) {
        snprintf(err, errlen, "cannot find the floodgate binary: %s",
                 strerror(errno));
        free(lab);
        return NULL;
    }
    lab->exe[n] = '\0';
    const char *tmp = getenv("TMPDIR");
    if (tmp && strlen(tmp) > sizeof lab->dir - 32)
        tmp = NULL;
    snprintf(lab->dir, sizeof lab->dir, "%s/floodgate-lab.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(lab->dir)) {
        snprintf(err, errlen, "cannot create a temporary folder: %s",
                 strerror(errno));
        free(lab);
        return NULL;
    }
    return lab;
}

static int path_in(const fg__lab *lab, char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", lab->dir, name);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Start node 'k' of the lab's Redis on its port, and connect to it for
 * INFO. */
static int redis_up(fg__lab *lab, int k, char *err, size_t errlen)
{
    char port[16], log[PATH_MAX], name[32], dir[PATH_MAX];
    snprintf(port, sizeof port, "%d", lab->redis_port[k]);
    /* One node keeps today's names; more have a folder each, so that
     * their files never meet. */
    if (lab->shards == 1) {
        snprintf(name, sizeof name, "redis.log");
        snprintf(dir, sizeof dir, "%s", lab->dir);
    } else {
        snprintf(name, sizeof name, "redis-%d.log", k + 1);
        snprintf(dir, sizeof dir, "%s/redis-%d", lab->dir, k + 1);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: %s", dir, strerror(errno));
            return -1;
        }
    }
    path_in(lab, log, sizeof log, name);
    char *argv[] = {lab->redis_bin, "--port",      port, "--bind",
                    "127.0.0.1",    "--save",      "",   "--appendonly",
                    "no",           "--dir",       dir,  "--protected-mode",
                    "yes",          "--daemonize", "no", NULL};
    lab->redis[k] = fg__lab_spawn(argv, log, err, errlen);
    if (lab->redis[k] < 0) {
        lab->redis[k] = 0;
        return -1;
    }
    int status;
    if (fg__lab_wait_port(lab->redis_port[k], lab->redis[k], START_TIMEOUT_MS,
                          &status) < 0) {
        char tail[256];
        fg__lab_log_tail(log, tail, sizeof tail);
        if (!tail[0])
            fg__lab_exit_text(status, START_TIMEOUT_MS, tail, sizeof tail);
        snprintf(err, errlen, "redis-server did not start: %s",
                 fg__lab_stop ? "interrupted" : tail);
        fg__lab_stop_procs(&lab->redis[k], 1, 200);
        return -1;
    }
    struct timeval tv = {1, 0};
    lab->info[k] = redisConnectWithTimeout("127.0.0.1", lab->redis_port[k], tv);
    if (!lab->info[k] || lab->info[k]->err) {
        snprintf(err, errlen, "cannot connect to redis-server: %s",
                 lab->info[k] ? lab->info[k]->errstr : "out of memory");
        if (lab->info[k])
            redisFree(lab->info[k]);
        lab->info[k] = NULL;
        fg__lab_stop_procs(&lab->redis[k], 1, 200);
        return -1;
    }
    redisSetTimeout(lab->info[k], tv);
    return 0;
}

/* The lab's Redis before a burst: a node that died or does not answer
 * (killed, stopped) is started again, and the servers that used it are
 * healed first ('shaken'), rather than the burst measure the failure
 * policy unannounced. */
static int redis_check_up(fg__lab *lab, char *err, size_t errlen)
{
    for (int k = 0; k < lab->shards; k++) {
        int dead = lab->redis[k] <= 0 ||
                   waitpid(lab->redis[k], NULL, WNOHANG) == lab->redis[k];
        if (dead) {
            lab->redis[k] = 0;
        } else {
            redisReply *r =
                lab->info[k] ? redisCommand(lab->info[k], "PING") : NULL;
            dead = !r || r->type != REDIS_REPLY_STATUS;
            if (r)
                freeReplyObject(r);
        }
        if (!dead)
            continue;
        if (lab->info[k]) {
            redisFree(lab->info[k]);
            lab->info[k] = NULL;
        }
        if (lab->redis[k] > 0)
            kill(-lab->redis[k], SIGKILL); /* its process group */
        fg__lab_stop_procs(&lab->redis[k], 1, 1000);
        if (redis_up(lab, k, err, errlen) < 0)
            return -1;
        for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
            if (lab->cl[s].running && fg__lab_uses_redis(s))
                lab->cl[s].shaken = 1;
    }
    return 0;
}

/* Every node down at once: with shards, the Redis-down burst then meets
 * what one node's crash meets, for every key, and compares with it. */
static void redis_down(fg__lab *lab)
{
    for (int k = 0; k < lab->shards; k++) {
        if (lab->info[k]) {
            redisFree(lab->info[k]);
            lab->info[k] = NULL;
        }
        /* SIGKILL: Redis does not get to say goodbye, as in a crash. */
        if (lab->redis[k] > 0)
            kill(-lab->redis[k], SIGKILL); /* its process group */
    }
    fg__lab_stop_procs(lab->redis, lab->shards, 1000);
}

/* What the reports say of the store: its kind, and its nodes as the
 * library names them (host:port/db, never a password). */
static void describe_store(fg__lab *lab, const char *url)
{
    fg__lab_store *d = &lab->desc;
    memset(d, 0, sizeof *d);
    static const char *const kinds[] = {"shards", "cluster", "sentinel"};
    snprintf(d->kind, sizeof d->kind, "redis");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strncmp(url, kinds[i], strlen(kinds[i])) == 0)
            snprintf(d->kind, sizeof d->kind, "%s", kinds[i]);
    d->own = lab->shards > 0;
    unsigned n = fg_store_nodes(lab->st);
    d->nodes = n > FG__LAB_MAX_NODES ? FG__LAB_MAX_NODES : (int)n;
    for (int i = 0; i < d->nodes; i++) {
        const char *name = fg_store_node_name(lab->st, (unsigned)i);
        snprintf(d->name[i], sizeof d->name[i], "%s", name ? name : "?");
    }
    /* A Cluster store keeps room for 64 masters and one node for slots
     * with none: those not (yet) named are no nodes to show. */
    while (d->nodes > 0 && !fg_store_node_name(lab->st, (unsigned)d->nodes - 1))
        d->nodes--;
    d->node = -1;
}

int fg__lab_start_redis(fg__lab *lab, int shards, char *err, size_t errlen)
{
    if (shards < 1 || shards > FG__LAB_MAX_SHARDS) {
        snprintf(err, errlen, "shards must be 1..%d", FG__LAB_MAX_SHARDS);
        return -1;
    }
    lab->shards = shards;
    size_t off = 0;
    if (shards > 1)
        off = (size_t)snprintf(lab->url, sizeof lab->url, "shards=");
    for (int k = 0; k < shards; k++) {
        lab->redis_port[k] = fg__lab_free_port();
        if (lab->redis_port[k] < 0) {
            snprintf(err, errlen, "no free port for redis-server");
            return -1;
        }
        if (redis_up(lab, k, err, errlen) < 0)
            return -1;
        lab->proxy[k] = fg__lab_proxy_start(lab->redis_port[k], err, errlen);
        if (!lab->proxy[k])
            return -1;
        off += (size_t)snprintf(lab->url + off, sizeof lab->url - off,
                                "%sredis://127.0.0.1:%d/0", k ? "," : "",
                                fg__lab_proxy_port(lab->proxy[k]));
    }
    /* The lab's handle only places keys: lazy, it never connects. Its
     * nodes are named as the servers' are (the URL's parameters are not
     * part of a name), so it places a key where they do. */
    char lazy[sizeof lab->url + 8 * FG__LAB_MAX_SHARDS];
    off = 0;
    for (const char *p = lab->url; *p;) {
        size_t len = strcspn(p, ",");
        off += (size_t)snprintf(lazy + off, sizeof lazy - off, "%.*s?lazy=1%s",
                                (int)len, p, p[len] ? "," : "");
        p += len + (p[len] ? 1 : 0);
    }
    lab->st = fg_store_open(lazy, err, errlen);
    if (!lab->st)
        return -1;
    /* Eight shards do not fit on one line of serve's config: their URL
     * (no password in it) goes on the servers' command line instead. */
    lab->url_argv =
        strlen(URL_LINE) + strlen(lab->url) > FG__LAB_SERVE_LINE_MAX;
    describe_store(lab, lab->url);
    return 0;
}

int fg__lab_use_store(fg__lab *lab, const char *url, char *err, size_t errlen)
{
    char why[256];
    if (strlen(url) > FG__LAB_STORE_URL_MAX) {
        snprintf(err, errlen, "--store: the URL is longer than %d characters",
                 FG__LAB_STORE_URL_MAX);
        return -1;
    }
    /* Opened (and probed) once, so that a store that cannot be reached is
     * refused now with the library's reason, not as every server's
     * fallback later. */
    lab->st = fg_store_open(url, why, sizeof why);
    if (!lab->st) {
        snprintf(err, errlen, "--store: %s", why);
        return -1;
    }
    snprintf(lab->url, sizeof lab->url, "%s", url);
    describe_store(lab, url);
    return 0;
}

/* The proxies' figures, over every node. */
static void proxies_set_rtt(fg__lab *lab, int64_t rtt_us)
{
    for (int k = 0; k < lab->shards; k++)
        fg__lab_proxy_set_rtt(lab->proxy[k], rtt_us);
}

static uint64_t proxies_round_trips(const fg__lab *lab)
{
    uint64_t n = 0;
    for (int k = 0; k < lab->shards; k++)
        n += fg__lab_proxy_round_trips(lab->proxy[k]);
    return n;
}

static void proxies_commands(fg__lab *lab, fg__lab_cmdstats *out)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; k < lab->shards; k++) {
        fg__lab_cmdstats one;
        fg__lab_proxy_commands(lab->proxy[k], &one);
        for (int i = 0; i < one.n; i++)
            fg__lab_cmdstats_add(out, one.name[i], one.calls[i]);
    }
}

static void cluster_stop(cluster *c)
{
    pid_t all[FG__LAB_MAX_SERVERS + 1];
    int n = 0;
    for (int i = 0; i < c->servers; i++)
        all[n++] = c->serve[i];
    all[n++] = c->haproxy;
    fg__lab_stop_procs(all, n, 500);
    memset(c, 0, sizeof *c);
}

/* A generated config file 'name' in the lab's folder, opened for writing;
 * its path in 'path'. NULL with the reason in 'err'. */
static FILE *config_open(const fg__lab *lab, const char *name, char *path,
                         size_t pathlen, char *err, size_t errlen)
{
    path_in(lab, path, pathlen, name);
    FILE *f = fopen(path, "w");
    if (!f)
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return f;
}

/* Close what config_open() opened: a full disk shows at fclose(), not at
 * fprintf(), so its result is the file's. */
static int config_close(FILE *f, const char *path, char *err, size_t errlen)
{
    if (fclose(f) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The [limit bookings] section of one strategy, for 'p'. */
static void write_limit(FILE *f, int s, const fg__lab_params *p)
{
    uint64_t limit = p->limit, burst = p->limit;
    if (s == FG__LAB_SPLIT) {
        /* limit / N, rounded down, at least one: never more than the real
         * limit in total unless N > limit. */
        limit = p->limit / (uint64_t)p->servers;
        if (limit < 1)
            limit = 1;
        burst = limit;
    }
    fprintf(f,
            "[limit bookings]\n"
            "key = header:X-User-Id\n"
            "algorithm = %s\n"
            "rate = %llu/%llums\n"
            "burst = %llu\n"
            "on_failure = %s\n"
            "fallback_servers = %d\n",
            s == FG__LAB_NAIVE ? "naive_get_set" : "token_bucket",
            (unsigned long long)limit, (unsigned long long)p->period_ms,
            (unsigned long long)burst, fg__lab_on_failure(s), p->servers);
    /* The same limit, algorithm and key as atomic; fallback_servers is the
     * N of the modes' stated bound (each server has one worker). */
    if (s == FG__LAB_SYNC)
        fprintf(f, "mode = sync:%dms\n", p->sync_ms);
    else if (s == FG__LAB_LEASE && p->chunk)
        fprintf(f, "mode = lease:%llu\n", (unsigned long long)p->chunk);
    else if (s == FG__LAB_LEASE)
        fprintf(f, "mode = lease\n");
}

static int write_serve_config(fg__lab *lab, int s, int i, int port,
                              const fg__lab_params *p, char *path,
                              size_t pathlen, char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s-api-%d.ini", names[s], i + 1);
    FILE *f = config_open(lab, name, path, pathlen, err, errlen);
    if (!f)
        return -1;
    fprintf(f,
            "; generated by floodgate lab: strategy %s, server %d of %d\n"
            "[server]\n"
            "listen = 127.0.0.1:%d\n"
            "workers = 1\n"
            "id = api-%d\n"
            "demo_api = on\n"
            "; the lab stops its servers between runs: no grace needed\n"
            "drain_grace = 0\n"
            "[store]\n",
            names[s], i + 1, p->servers, port, i + 1);
    if (fg__lab_uses_redis(s) && lab->url_argv)
        fprintf(f, "; url: on the command line (--store), too long here\n");
    else if (fg__lab_uses_redis(s))
        fprintf(f, URL_LINE "%s\n", lab->url);
    else
        fprintf(f, URL_LINE "memory\n");
    if (fg__lab_uses_redis(s))
        fprintf(f,
                "prefix = fglab:%s:\n"
                "timeout = %dms\n",
                names[s], FG__LAB_STORE_TIMEOUT_MS);
    write_limit(f, s, p);
    return config_close(f, path, err, errlen);
}

static int write_haproxy_config(fg__lab *lab, int s, const cluster *c,
                                char *path, size_t pathlen, char *err,
                                size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s-haproxy.cfg", names[s]);
    FILE *f = config_open(lab, name, path, pathlen, err, errlen);
    if (!f)
        return -1;
    fprintf(f,
            "# generated by floodgate lab: strategy %s\n"
            "global\n"
            "    nbthread 1\n"
            "    maxconn %d\n"
            "defaults\n"
            "    mode http\n"
            "    timeout connect 1s\n"
            "    timeout client 10s\n"
            "    timeout server 10s\n"
            "frontend scalper\n"
            "    bind 127.0.0.1:%d\n"
            "    default_backend api\n"
            "backend api\n"
            "    balance %s\n",
            names[s], lab->maxconn, c->haproxy_port,
            c->balance_random ? "random" : "roundrobin");
    for (int i = 0; i < c->servers; i++)
        fprintf(f, "    server api-%d 127.0.0.1:%d\n", i + 1, c->port[i]);
    return config_close(f, path, err, errlen);
}

/* Spawn the processes of 'c' without waiting for them. */
static int cluster_spawn(fg__lab *lab, int s, cluster *c,
                         const fg__lab_params *p, char *err, size_t errlen)
{
    char cfg[PATH_MAX], log[PATH_MAX], name[64];
    c->running = 1;
    c->servers = p->servers;
    c->balance_random = p->balance_random;
    c->sync_ms = p->sync_ms;
    c->chunk = p->chunk;
    for (int i = 0; i < c->servers; i++) {
        c->port[i] = fg__lab_free_port();
        if (c->port[i] < 0) {
            snprintf(err, errlen, "no free port for a server");
            return -1;
        }
        if (write_serve_config(lab, s, i, c->port[i], p, cfg, sizeof cfg, err,
                               errlen) < 0)
            return -1;
        snprintf(name, sizeof name, "%s-api-%d.log", names[s], i + 1);
        path_in(lab, log, sizeof log, name);
        char *argv[] = {lab->exe, "serve", "-c", cfg, NULL, NULL, NULL};
        if (fg__lab_uses_redis(s) && lab->url_argv) {
            argv[4] = "--store";
            argv[5] = lab->url;
        }
        c->serve[i] = fg__lab_spawn(argv, log, err, errlen);
        if (c->serve[i] < 0) {
            c->serve[i] = 0;
            return -1;
        }
    }
    c->haproxy_port = fg__lab_free_port();
    if (c->haproxy_port < 0) {
        snprintf(err, errlen, "no free port for haproxy");
        return -1;
    }
    if (write_haproxy_config(lab, s, c, cfg, sizeof cfg, err, errlen) < 0)
        return -1;
    snprintf(name, sizeof name, "%s-haproxy.log", names[s]);
    path_in(lab, log, sizeof log, name);
    char *argv[] = {lab->haproxy_bin, "-db", "-f", cfg, NULL};
    c->haproxy = fg__lab_spawn(argv, log, err, errlen);
    if (c->haproxy < 0) {
        c->haproxy = 0;
        return -1;
    }
    return 0;
}

static int cluster_wait(fg__lab *lab, int s, cluster *c, char *err,
                        size_t errlen)
{
    char log[PATH_MAX], name[64], tail[300];
    int status;
    for (int i = 0; i < c->servers; i++) {
        if (fg__lab_wait_port(c->port[i], c->serve[i], START_TIMEOUT_MS,
                              &status) < 0) {
            snprintf(name, sizeof name, "%s-api-%d.log", names[s], i + 1);
            path_in(lab, log, sizeof log, name);
            fg__lab_log_tail(log, tail, sizeof tail);
            if (!tail[0])
                fg__lab_exit_text(status, START_TIMEOUT_MS, tail, sizeof tail);
            snprintf(err, errlen,
                     "floodgate serve (%s, api-%d) did not "
                     "start: %s",
                     names[s], i + 1, fg__lab_stop ? "interrupted" : tail);
            return -1;
        }
    }
    if (fg__lab_wait_port(c->haproxy_port, c->haproxy, START_TIMEOUT_MS,
                          &status) < 0) {
        snprintf(name, sizeof name, "%s-haproxy.log", names[s]);
        path_in(lab, log, sizeof log, name);
        fg__lab_log_tail(log, tail, sizeof tail);
        if (!tail[0])
            fg__lab_exit_text(status, START_TIMEOUT_MS, tail, sizeof tail);
        snprintf(err, errlen, "haproxy did not start: %s",
                 fg__lab_stop ? "interrupted" : tail);
        return -1;
    }
    return 0;
}

/* 1 while every process of 'c' runs. One that died (killed, crashed) is
 * reaped here, and the cluster is started again rather than measured with
 * a server short. */
static int alive(cluster *c)
{
    pid_t *pid[FG__LAB_MAX_SERVERS + 1];
    int n = 0;
    for (int i = 0; i < c->servers; i++)
        pid[n++] = &c->serve[i];
    pid[n++] = &c->haproxy;
    for (int i = 0; i < n; i++) {
        if (*pid[i] <= 0) /* reaped by an earlier look */
            return 0;
        if (waitpid(*pid[i], NULL, WNOHANG) == *pid[i]) {
            *pid[i] = 0;
            return 0;
        }
    }
    return 1;
}

/* Whether cluster 'c' of strategy 's' runs with what 'p' asks: the server
 * count, the balance, and its mode's interval or chunk, all of its
 * processes alive. */
static int matches(int s, cluster *c, const fg__lab_params *p)
{
    return c->running && alive(c) && c->servers == p->servers &&
           c->balance_random == p->balance_random &&
           (s != FG__LAB_SYNC || c->sync_ms == p->sync_ms) &&
           (s != FG__LAB_LEASE || c->chunk == p->chunk);
}

int fg__lab_warm(fg__lab *lab, int s, const fg__lab_params *p)
{
    return s >= 0 && s < FG__LAB_NSTRATEGIES && matches(s, &lab->cl[s], p);
}

void fg__lab_retire(fg__lab *lab, const fg__lab_params *p)
{
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (lab->cl[s].running && !matches(s, &lab->cl[s], p))
            cluster_stop(&lab->cl[s]);
}

int fg__lab_ensure_many(fg__lab *lab, unsigned mask, const fg__lab_params *p,
                        char *err, size_t errlen)
{
    if (p->servers < 1 || p->servers > FG__LAB_MAX_SERVERS) {
        snprintf(err, errlen, "servers must be 1..%d", FG__LAB_MAX_SERVERS);
        return -1;
    }
    unsigned fresh = 0;
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++) {
        if (!(mask & (1u << s)))
            continue;
        cluster *c = &lab->cl[s];
        if (matches(s, c, p))
            continue;
        if (c->running)
            cluster_stop(c);
        fresh |= 1u << s;
        if (cluster_spawn(lab, s, c, p, err, errlen) < 0) {
            cluster_stop(c);
            return -1;
        }
    }
    /* All spawned first, then all awaited: start-up runs in parallel. */
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++) {
        if ((fresh & (1u << s)) &&
            cluster_wait(lab, s, &lab->cl[s], err, errlen) < 0) {
            cluster_stop(&lab->cl[s]);
            return -1;
        }
    }
    return 0;
}

int fg__lab_ensure(fg__lab *lab, int strategy, const fg__lab_params *p,
                   char *err, size_t errlen)
{
    return fg__lab_ensure_many(lab, 1u << strategy, p, err, errlen);
}

void fg__lab_cmdstats_add(fg__lab_cmdstats *cs, const char *name,
                          long long calls)
{
    for (int i = 0; i < cs->n; i++) {
        if (strcmp(cs->name[i], name) == 0) {
            cs->calls[i] += calls;
            return;
        }
    }
    if (cs->n == 32)
        return;
    snprintf(cs->name[cs->n], sizeof cs->name[0], "%s", name);
    cs->calls[cs->n++] = calls;
}

long long fg__lab_cmdstats_get(const fg__lab_cmdstats *cs, const char *name)
{
    for (int i = 0; i < cs->n; i++)
        if (strcmp(cs->name[i], name) == 0)
            return cs->calls[i];
    return 0;
}

long long fg__lab_cmdstats_diff(const fg__lab_cmdstats *before,
                                const fg__lab_cmdstats *after, char *buf,
                                size_t len)
{
    long long total = 0;
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < after->n; i++) {
        long long d =
            after->calls[i] - fg__lab_cmdstats_get(before, after->name[i]);
        if (d <= 0)
            continue;
        total += d;
        int w = snprintf(buf + off, len - off, "%s%s %lld", off ? ", " : "",
                         after->name[i], d);
        if (w > 0 && off + (size_t)w < len)
            off += (size_t)w;
    }
    for (char *c = buf; *c; c++)
        if (*c >= 'a' && *c <= 'z')
            *c = (char)(*c - 'a' + 'A');
    return total;
}

/* The calls of every command one node has run (inner calls of scripts
 * included), from INFO commandstats, added to 'cs'; returns their total.
 * INFO itself, PING and connection set-up are not the limiter's work and
 * are left out. */
static long long node_cmdstats(redisContext *info, fg__lab_cmdstats *cs)
{
    if (!info)
        return 0;
    redisReply *r = redisCommand(info, "INFO commandstats");
    if (!r)
        return 0;
    if (r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return 0;
    }
    static const char *const skip[] = {
        "info",       "ping",    "client|setname", "client|setinfo",
        "hello",      "command", "command|docs",   "select",
        "config|get", "auth",    "script|load",    NULL};
    long long total = 0;
    const char *line = r->str;
    while (line && *line) {
        char name[24];
        long long calls;
        if (sscanf(line, "cmdstat_%23[^:]:calls=%lld", name, &calls) == 2) {
            int skipped = 0;
            for (int i = 0; skip[i]; i++)
                if (strcmp(name, skip[i]) == 0)
                    skipped = 1;
            if (!skipped) {
                fg__lab_cmdstats_add(cs, name, calls);
                total += calls;
            }
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    freeReplyObject(r);
    return total;
}

/* What every node of the lab's Redis has run, in all into 'cs' and per
 * node into 'per_node'. */
static void read_cmdstats(fg__lab *lab, fg__lab_cmdstats *cs,
                          long long per_node[FG__LAB_MAX_SHARDS])
{
    memset(cs, 0, sizeof *cs);
    for (int k = 0; k < lab->shards; k++)
        per_node[k] = node_cmdstats(lab->info[k], cs);
}

/* Sort the answers of a burst: 2xx allowed, 429 and 503 refused when a
 * server answered (X-Served-By: not HAProxy's own 503, with no server
 * left), anything else (or none) failed; and, when 'srv' is given, per server
 * named by X-Served-By ('unknown' counts answers without one). */
static void count_answers(const fg__lab_answer *a, int n, int *allowed,
                          int *limited, int *failed, int *unknown,
                          fg__lab_server_count *srv)
{
    *allowed = *limited = *failed = 0;
    if (unknown)
        *unknown = 0;
    for (int i = 0; i < n; i++) {
        int refused =
            (a[i].status == 429 || a[i].status == 503) && a[i].server >= 0;
        if (a[i].status >= 200 && a[i].status < 300)
            (*allowed)++;
        else if (refused)
            (*limited)++;
        else
            (*failed)++;
        if (!srv)
            continue;
        if (a[i].server < 0) {
            if (unknown && a[i].status)
                (*unknown)++;
            continue;
        }
        if (a[i].status >= 200 && a[i].status < 300)
            srv[a[i].server].ok++;
        else if (a[i].status == 429 || a[i].status == 503)
            srv[a[i].server].limited++;
    }
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* How long after a burst the servers of 's' may still send its commands.
 * sync sends a key's usage at a tick of its timer (one every interval) and
 * reads the answer a round trip later; but a server's first keys wait for
 * the first tick one interval after its first check, which can come
 * nearly two intervals after it: two intervals, then. lease gives units
 * back at the first tick (100 ms, or the period if shorter) after the
 * lease ends (the period, at most 1 s, after its last take). Exact
 * strategies send nothing late. 100 ms more for a loaded machine's
 * timers. */
static int64_t late_us(int s, const fg__lab_params *p)
{
    int64_t period_us = (int64_t)p->period_ms * 1000;
    int64_t life = period_us < 1000000 ? period_us : 1000000;
    int64_t tick = period_us < 100000 ? period_us : 100000;
    if (s == FG__LAB_SYNC)
        return 2 * (int64_t)p->sync_ms * 1000 + p->rtt_us + 100000;
    if (s == FG__LAB_LEASE)
        return life + tick + p->rtt_us + 100000;
    return 0;
}

/* The commands the servers sent through the proxy so far, in all. */
static long long sent_total(fg__lab *lab)
{
    fg__lab_cmdstats cs, none;
    char buf[8];
    memset(&none, 0, sizeof none);
    proxies_commands(lab, &cs);
    return fg__lab_cmdstats_diff(&none, &cs, buf, sizeof buf);
}

/* Wait until what 's' sends late for a burst has been sent: at least
 * late_us(), then until the count of commands stays the same for 50 ms
 * (1 s more at most). Returns how long it waited. */
static int64_t settle(fg__lab *lab, int s, const fg__lab_params *p)
{
    int64_t t0 = fg__lab_now_us(), least = late_us(s, p);
    if (least == 0)
        return 0;
    sleep_us(least);
    long long n = sent_total(lab);
    for (int64_t end = fg__lab_now_us() + 1000000;
         !fg__lab_stop && fg__lab_now_us() < end;) {
        sleep_us(50000);
        long long m = sent_total(lab);
        if (m == n)
            break;
        n = m;
    }
    return fg__lab_now_us() - t0;
}

/* After Redis was stopped under them, the servers' circuit breakers are
 * open for a cool-down and their connections are broken: a burst now would
 * measure the failure policy again, not the strategy. Ask each server
 * (a throwaway key, through /v1/check) until its answer shows that it
 * reaches Redis again. The servers decide; the lab only waits for them.
 *
 * What shows it depends on the mode. An exact limit answers from the store.
 * A lease limit's first check of a key takes a lease from Redis: "lease"
 * says the take went through (a failed one answers "local", the fallback).
 * A sync limit sends a new key's first check to Redis, then decides on
 * that view; a sync at the next tick can still fail and turn its checks to
 * the fallback: so one key is asked until, an interval and a round trip
 * after its first check, it still answers "sync". That key's usage is then
 * sent at the next tick, which is waited for, so as not to count in the
 * next burst. */
/* A fresh throwaway key of /v1/check that the store places on 'node':
 * each node has a circuit breaker of its own, so each is asked. */
static void heal_path(fg__lab *lab, int node, char *path, size_t len)
{
    char key[64];
    for (int tries = 0;; tries++) {
        snprintf(key, sizeof key, "lab-heal-%d-%u", (int)getpid(), ++lab->seq);
        /* A ring of at most 8 nodes places one key in 8 on each, or
         * near it; 10,000 tries are never needed. */
        if ((int)fg_store_node_of(lab->st, key, strlen(key)) == node ||
            tries == 10000)
            break;
    }
    snprintf(path, len, "/v1/check?limit=bookings&key=%s", key);
}

static int heal(fg__lab *lab, int s, const fg__lab_params *p, char *err,
                size_t errlen)
{
    cluster *c = &lab->cl[s];
    char body[512], want[40];
    snprintf(want, sizeof want, "\"source\":\"%s\"",
             s == FG__LAB_SYNC    ? "sync"
             : s == FG__LAB_LEASE ? "lease"
                                  : "store");
    int64_t after = s == FG__LAB_SYNC ? late_us(s, p) : 0;
    /* One key per server and node, all asked in turn: the servers and
     * their nodes heal in parallel, in one wait. */
    int n = c->servers * lab->shards, left = n;
    struct {
        char path[128];
        int64_t first; /* its key's first check, 0 before */
        int done;
    } *k = calloc((size_t)n, sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int j = 0; j < n; j++)
        heal_path(lab, j % lab->shards, k[j].path, sizeof k[j].path);
    int64_t deadline = fg__lab_now_us() + 3000000 + 2 * after;
    int rc = 0;
    while (left > 0 && rc == 0) {
        for (int j = 0; j < n; j++) {
            if (k[j].done)
                continue;
            int i = j / lab->shards;
            int64_t now = fg__lab_now_us();
            if (!k[j].first)
                k[j].first = now;
            int status = fg__lab_post(c->port[i], k[j].path, body, sizeof body);
            int from = (status == 200 || status == 429) && strstr(body, want);
            if (from && fg__lab_now_us() - k[j].first >= after) {
                k[j].done = 1;
                left--;
                continue;
            }
            if (fg__lab_stop) {
                snprintf(err, errlen, "the lab is stopping");
                rc = -1;
                break;
            }
            if (fg__lab_now_us() > deadline) {
                snprintf(err, errlen,
                         "%s api-%d does not reach Redis%s again after "
                         "the Redis-down test (last answer %d: %.80s)",
                         names[s], i + 1,
                         lab->shards > 1 ? " (every node)" : "", status, body);
                rc = -1;
                break;
            }
            if (s != FG__LAB_SYNC) {
                heal_path(lab, j % lab->shards, k[j].path, sizeof k[j].path);
                k[j].first = 0;
            }
        }
        if (left > 0 && rc == 0)
            sleep_us(s == FG__LAB_SYNC ? 50000 : 20000);
    }
    free(k);
    if (rc < 0)
        return -1;
    if (s == FG__LAB_SYNC)
        sleep_us(after);
    c->shaken = 0;
    return 0;
}

int fg__lab_measure(fg__lab *lab, int s, const fg__lab_params *p,
                    fg__lab_result *r, char *err, size_t errlen)
{
    int64_t t0 = fg__lab_now_us();
    memset(r, 0, sizeof *r);
    r->strategy = s;
    r->p = *p;
    if (fg__lab_ensure(lab, s, p, err, errlen) < 0)
        return -1;
    if (fg__lab_uses_redis(s) && redis_check_up(lab, err, errlen) < 0)
        return -1;
    proxies_set_rtt(lab, p->rtt_us);
    if (lab->cl[s].shaken && heal(lab, s, p, err, errlen) < 0)
        return -1;
    if (fg__lab_bound_of(s, p, &r->bound) < 0) {
        snprintf(err, errlen, "the library states no bound for %s here",
                 names[s]);
        return -1;
    }
    fg__lab_answer *a = calloc((size_t)p->burst, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    fg__lab_cmdstats before, after, sent0, sent1;
    long long ran0[FG__LAB_MAX_SHARDS], ran1[FG__LAB_MAX_SHARDS];
    read_cmdstats(lab, &before, ran0);
    proxies_commands(lab, &sent0);
    uint64_t rt0 = proxies_round_trips(lab);
    char user[64];
    snprintf(user, sizeof user, "scalper-%d-%u", (int)getpid(), ++lab->seq);
    if (fg__lab_uses_redis(s)) {
        r->store = lab->desc;
        r->store.node = (int)fg_store_node_of(lab->st, user, strlen(user));
    }
    int rc = fg__lab_fire(lab->cl[s].haproxy_port, user, p->burst, p->spread_us,
                          a, &r->burst_us, err, errlen);
    if (rc == 0) {
        /* The approximate modes send commands after the burst (syncs,
         * give-backs): they are its cost too. */
        r->settle_us = settle(lab, s, p);
        uint64_t rt = proxies_round_trips(lab) - rt0;
        read_cmdstats(lab, &after, ran1);
        if (fg__lab_uses_redis(s))
            for (int k = 0; k < lab->shards; k++)
                r->store.executed[k] = ran1[k] - ran0[k];
        count_answers(a, p->burst, &r->allowed, &r->limited, &r->failed,
                      &r->unknown, r->srv);
        /* The refill during the burst: from the first decision to the
         * last one the limit allowed, of the answers not on_failure's.
         * Each decision lies between its send and its answer, and, on the
         * lab's own Redis, half a round trip from each (the proxy). A
         * token bucket, full at the first, has refilled at most this
         * much by the last. The naive limiter's fixed window refills by
         * a whole window at its edge, not as it goes: none counted. */
        int64_t last_ok = 0;
        for (int i = 0; i < p->burst; i++) {
            int ok = a[i].status >= 200 && a[i].status < 300;
            r->fallback += a[i].fallback;
            r->fallback_allowed += ok && a[i].fallback;
            if (ok && !a[i].fallback && a[i].at_us > last_ok)
                last_ok = a[i].at_us;
        }
        if (fg__lab_uses_redis(s) && lab->shards > 0)
            last_ok -= p->rtt_us;
        if (s != FG__LAB_NAIVE && last_ok > 0) {
            unsigned __int128 u =
                (unsigned __int128)last_ok * p->limit / (p->period_ms * 1000);
            r->refilled = u > (unsigned)p->burst ? p->burst : (int)u;
        }
        /* The user was entitled to min(burst, limit) requests: what fell
         * short of it was refused while the user was under the limit. */
        long long due =
            (uint64_t)p->burst < p->limit ? p->burst : (long long)p->limit;
        if (r->allowed < due)
            r->refused_under_limit = (int)(due - r->allowed);
        proxies_commands(lab, &sent1);
        long long ran = fg__lab_cmdstats_diff(&before, &after, r->executed,
                                              sizeof r->executed);
        long long sent = fg__lab_cmdstats_diff(&sent0, &sent1, r->commands,
                                               sizeof r->commands);
        r->executed_per_request = (double)ran / p->burst;
        r->calls_per_request = (double)sent / p->burst;
        r->round_trips_per_request = (double)rt / p->burst;
    }
    free(a);
    r->run_us = fg__lab_now_us() - t0;
    return rc;
}

int fg__lab_measure_down(fg__lab *lab, unsigned mask, fg__lab_result *rs,
                         char *err, size_t errlen)
{
    int rc = 0;
    if (lab->shards == 0) {
        /* The store is the user's: the lab never stops it. */
        for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
            if ((mask & (1u << s)) && lab->cl[s].running)
                snprintf(rs[s].down_skipped, sizeof rs[s].down_skipped,
                         "the store is not the lab's (--store): it is "
                         "never stopped");
        return 0;
    }
    redis_down(lab);
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (lab->cl[s].running && fg__lab_uses_redis(s))
            lab->cl[s].shaken = 1;
    for (int s = 0; s < FG__LAB_NSTRATEGIES && rc == 0; s++) {
        if (!(mask & (1u << s)) || !lab->cl[s].running)
            continue;
        fg__lab_result *r = &rs[s];
        fg__lab_answer *a = calloc((size_t)r->p.burst, sizeof *a);
        if (!a) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        char user[64];
        int64_t us = 0;
        snprintf(user, sizeof user, "scalper-%d-%u", (int)getpid(), ++lab->seq);
        rc = fg__lab_fire(lab->cl[s].haproxy_port, user, r->p.burst,
                          r->p.spread_us, a, &us, err, errlen);
        if (rc == 0) {
            count_answers(a, r->p.burst, &r->down_allowed, &r->down_limited,
                          &r->down_failed, NULL, NULL);
            r->down_measured = 1;
        }
        free(a);
    }
    /* Redis comes back on the same ports; the servers reconnect through
     * the proxies on their next request. */
    char up_err[256];
    for (int k = 0; k < lab->shards; k++) {
        if (redis_up(lab, k, up_err, sizeof up_err) < 0) {
            if (rc == 0)
                snprintf(err, errlen, "%s", up_err);
            rc = -1;
            break;
        }
    }
    return rc;
}

void fg__lab_free(fg__lab *lab)
{
    if (!lab)
        return;
    /* Servers before Redis: they are Redis's clients. */
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (lab->cl[s].running || lab->cl[s].haproxy)
            cluster_stop(&lab->cl[s]);
    for (int k = 0; k < lab->shards; k++)
        if (lab->info[k])
            redisFree(lab->info[k]);
    if (lab->st)
        fg_store_close(lab->st);
    fg__lab_stop_procs(lab->redis, lab->shards, 1000);
    for (int k = 0; k < lab->shards; k++)
        fg__lab_proxy_stop(lab->proxy[k]);
    fg__lab_rmtree(lab->dir);
    free(lab);
}
