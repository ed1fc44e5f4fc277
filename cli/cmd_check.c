/* cmd_check.c -- `floodgate check`: check a key against a limit from the
 * shell, once or as a burst, and print each decision. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "floodgate.h"

static const char usage[] =
    "usage: floodgate check [--store URL] --limit RATE --key KEY [options]\n"
    "\n"
    "Check KEY against the limit RATE and print the decision.\n"
    "\n"
    "  --store URL        memory (default), memory?max_keys=N,\n"
    "                     redis://[user:pass@]host[:port][/db], "
    "unix:///path.sock,\n"
    "                     shards=URL,URL,...  cluster=redis://HOST:PORT,...\n"
    "                     sentinel://HOST:PORT,.../MASTER\n"
    "  --limit RATE       e.g. 10/s, 100/min, 5/15min, 1000/h, 50000/day\n"
    "  --algorithm A      token_bucket (default), fixed_window,\n"
    "                     sliding_window, naive_get_set\n"
    "  --burst N          token_bucket capacity, 1..2^53 (default: the "
    "limit)\n"
    "  --key KEY          the key to count (a user, an IP ...)\n"
    "  --name NAME        the limit's name, part of the store key (default "
    "cli)\n"
    "  --cost N           units this check takes (default 1)\n"
    "  --count K          check K times in a row, then print a summary\n"
    "  --timeout MS       store deadline in milliseconds, 1..60000 (default "
    "5)\n"
    "  --on-failure F     open (default; local with --mode sync), closed or\n"
    "                     local\n"
    "  --clock C          redis (default) or client: whose clock Lua uses\n"
    "  --durable D        off (default) or replica: an allowed check counts\n"
    "                     once a replica holds it (WAIT 1, within --timeout)\n"
    "  --mode M           exact (default), sync:INTERVAL (decided here, the\n"
    "                     usage sent every INTERVAL, 10ms..10s; sync alone\n"
    "                     is sync:200ms) or lease[:CHUNK] (decided here on\n"
    "                     units taken from the store); first prints the\n"
    "                     mode's stated bound\n"
    "  --servers N        servers sharing the limit, for the bound of --mode\n"
    "                     and the share of --on-failure local, 1..100000\n"
    "                     (default 1)\n"
    "  --json             one JSON object per check\n"
    "  --peek             read what KEY has left, consuming nothing\n"
    "  --reset            clear KEY in the store (every window of it)\n"
    "  -h, --help         this help\n"
    "\n"
    "Each check prints 'allowed remaining=N reset_ms=N' or 'limited\n"
    "retry_after_ms=N'; with --count a last line 'allowed=A limited=L'\n"
    "(not with --json, which prints one object per check).\n"
    "A decision the store did not make says its source ('allowed\n"
    "source=fail_open', 'limited retry_after_ms=N source=fail_closed'), and\n"
    "in JSON has remaining, reset_ms and reset_us null and an \"error\".\n"
    "Exit status: 0 the last check was allowed, 1 it was refused, 2 usage\n"
    "or store error. A check the store failed is still decided by\n"
    "--on-failure and printed, and exits 2: 'allowed source=fail_open'\n"
    "exits 2, not 0 (test the printed decision, not only the status).\n"
    "--peek prints 'remaining=N reset_ms=N' (and 'retry_after_ms=N' when\n"
    "no unit fits now), or with --json the decision a check of one unit\n"
    "would get; exit 0 when a unit fits, 1 when none does. --reset prints\n"
    "'reset' ({\"reset\":true} with --json) and exits 0. Either exits 2\n"
    "when the store fails.\n"
    "With --mode sync or lease the first line is the bound: 'mode=M\n"
    "servers=N over_window_ms=W over_cap=C under_cap=U' (beyond the limit\n"
    "at most what the other servers admit in W ms, never more than C; below\n"
    "it at most U); what this process holds is sent to the store before it\n"
    "exits, also when SIGINT or SIGTERM stops it or its output is closed.\n";

/* SIGINT and SIGTERM (those the caller does not ignore) are blocked once
 * the store is open (its own threads take no signal): a check's Redis I/O
 * is never cut short, and a burst looks for them between checks.
 * It stops, what this process admitted and holds goes back to the store
 * (fg_limiter_sync), and the signal is let in: the process ends of it, as
 * the shell expects. SIGPIPE is ignored meanwhile, so that a closed stdout
 * is a failed write, which stops the burst the same way. */
static sigset_t stops;
static int pipe_default; /* SIGPIPE was not ignored by the caller */

static void hold_stops(void)
{
    static const int sig[2] = {SIGINT, SIGTERM};
    struct sigaction old;
    sigemptyset(&stops);
    for (int i = 0; i < 2; i++)
        if (sigaction(sig[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaddset(&stops, sig[i]);
    sigprocmask(SIG_BLOCK, &stops, NULL);
    pipe_default =
        sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler != SIG_IGN;
    signal(SIGPIPE, SIG_IGN);
}

static int stop_pending(void)
{
    sigset_t p;
    return sigpending(&p) == 0 &&
           ((sigismember(&stops, SIGINT) && sigismember(&p, SIGINT)) ||
            (sigismember(&stops, SIGTERM) && sigismember(&p, SIGTERM)));
}

/* Let the signals in (a pending one ends the process here) and return
 * 'status'. A write to stdout that failed ends it of SIGPIPE when that was
 * EPIPE and SIGPIPE is not ignored; another failure is said, status 2. */
static int let_stops_in(int status, int out_errno)
{
    if (out_errno == EPIPE && pipe_default) {
        signal(SIGPIPE, SIG_DFL);
        raise(SIGPIPE); /* returns when the caller blocked it */
        status = 2;
    } else if (out_errno && out_errno != EPIPE) {
        fprintf(stderr, "floodgate check: writing the output: %s\n",
                strerror(out_errno));
        status = 2;
    } else if (out_errno) {
        status = 2;
    }
    sigprocmask(SIG_UNBLOCK, &stops, NULL);
    return status;
}

/* A whole number from 0 to 'max'. */
static int parse_upto(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Print 's' as a JSON string, quotes included: a store's error may hold
 * Redis's own words, quotes and control bytes among them. */
static void json_puts(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

/* Print one decision. A decision the store did not make (fail_open,
 * fail_closed) knows the limit and the policy's answer, but not what is
 * left of the limit nor when it is whole again: those are null in JSON
 * and absent from the line, rather than figures the store never gave.
 * 'why' is the reason the store was not consulted, NULL when it was. */
static void print_decision(const fg_decision *d, const char *why, int json)
{
    int unknown =
        d->source == FG_SOURCE_FAIL_OPEN || d->source == FG_SOURCE_FAIL_CLOSED;
    const char *src = fg_source_name(d->source);
    if (json) {
        printf("{\"allowed\":%s,\"limit\":%llu,", d->allowed ? "true" : "false",
               (unsigned long long)d->limit);
        if (unknown)
            printf("\"remaining\":null,\"reset_ms\":null,");
        else
            printf("\"remaining\":%llu,\"reset_ms\":%llu,",
                   (unsigned long long)d->remaining,
                   (unsigned long long)d->reset_ms);
        printf("\"retry_after_ms\":%llu,",
               (unsigned long long)d->retry_after_ms);
        if (unknown)
            printf("\"reset_us\":null,");
        else
            printf("\"reset_us\":%llu,", (unsigned long long)d->reset_us);
        printf("\"retry_after_us\":%llu,\"source\":\"%s\"",
               (unsigned long long)d->retry_after_us, src);
        if (why) {
            printf(",\"error\":");
            json_puts(why);
        }
        printf("}\n");
    } else if (d->allowed && unknown) {
        printf("allowed source=%s\n", src);
    } else if (d->allowed) {
        printf("allowed remaining=%llu reset_ms=%llu%s%s\n",
               (unsigned long long)d->remaining,
               (unsigned long long)d->reset_ms,
               d->source == FG_SOURCE_STORE ? "" : " source=",
               d->source == FG_SOURCE_STORE ? "" : src);
    } else {
        printf("limited retry_after_ms=%llu%s%s\n",
               (unsigned long long)d->retry_after_ms,
               d->source == FG_SOURCE_STORE ? "" : " source=",
               d->source == FG_SOURCE_STORE ? "" : src);
    }
}

/* What the node that holds 'key' said last ("" when nothing): on shards,
 * not another node's error. */
static const char *key_error(fg_store *st, const char *key)
{
    const char *e =
        fg_store_node_error(st, fg_store_node_of(st, key, strlen(key)));
    return e ? e : "";
}

/* --peek or --reset of 'key': the exit status. */
static int operate(fg_limiter *l, fg_store *st, const char *key, int peek,
                   int json)
{
    fg_decision d;
    int rc =
        peek ? fg_peek(l, key, strlen(key), &d) : fg_reset(l, key, strlen(key));
    if (rc != FG_OK) {
        const char *last = key_error(st, key);
        fprintf(stderr, "floodgate check: %s: %s%s%s\n",
                peek ? "peek" : "reset", fg_strerror(rc), *last ? ": " : "",
                last);
        return 2;
    }
    if (!peek) {
        puts(json ? "{\"reset\":true}" : "reset");
        return 0;
    }
    if (json)
        print_decision(&d, NULL, 1);
    else if (d.allowed)
        printf("remaining=%llu reset_ms=%llu\n",
               (unsigned long long)d.remaining, (unsigned long long)d.reset_ms);
    else
        printf("remaining=%llu reset_ms=%llu retry_after_ms=%llu\n",
               (unsigned long long)d.remaining, (unsigned long long)d.reset_ms,
               (unsigned long long)d.retry_after_ms);
    return d.allowed ? 0 : 1;
}

/* getopt_long takes any unambiguous prefix ('--re' for --reset, which
 * clears a key in a shared store), a value from the next argument even
 * when it is another option, and the last of an option given twice.
 * Options here are spelled whole, once each, and a value that begins with
 * "--" is given as --NAME=VALUE. */
static int options_whole(int argc, char **argv, const struct option *opts)
{
    unsigned char seen[64] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return 0;
        if (strncmp(a, "--", 2) != 0)
            continue;
        size_t n = strcspn(a + 2, "=");
        const struct option *o = opts;
        while (o->name &&
               !(strlen(o->name) == n && strncmp(o->name, a + 2, n) == 0))
            o++;
        if (!o->name) {
            const struct option *like = NULL;
            for (const struct option *q = opts; q->name; q++)
                if (n && strncmp(q->name, a + 2, n) == 0)
                    like = like ? opts : q; /* more than one: no guess */
            fprintf(stderr, "floodgate check: unknown option '%.*s'",
                    (int)n + 2, a);
            if (like && like != opts)
                fprintf(stderr,
                        " (did you mean --%s? options are spelled "
                        "whole)",
                        like->name);
            fputs("\n", stderr);
            return 2;
        }
        /* As in serve's config: never the last one silently. */
        size_t at = (size_t)(o - opts);
        if (at < sizeof(seen) && seen[at]++) {
            fprintf(stderr, "floodgate check: --%s given twice\n", o->name);
            return 2;
        }
        if (o->has_arg == no_argument && a[n + 2] == '=') {
            fprintf(stderr, "floodgate check: --%s takes no value\n", o->name);
            return 2;
        }
        if (o->has_arg == required_argument && !a[n + 2]) {
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0) {
                fprintf(stderr,
                        "floodgate check: --%s needs a value (one that begins "
                        "with -- is given as --%s=VALUE)\n",
                        o->name, o->name);
                return 2;
            }
            i++;
        }
    }
    return 0;
}

int fg_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"store", required_argument, NULL, 's'},
        {"limit", required_argument, NULL, 'l'},
        {"algorithm", required_argument, NULL, 'a'},
        {"burst", required_argument, NULL, 'b'},
        {"key", required_argument, NULL, 'k'},
        {"name", required_argument, NULL, 'n'},
        {"cost", required_argument, NULL, 'c'},
        {"count", required_argument, NULL, 'C'},
        {"timeout", required_argument, NULL, 't'},
        {"on-failure", required_argument, NULL, 'f'},
        {"clock", required_argument, NULL, 'K'},
        {"durable", required_argument, NULL, 'D'},
        {"mode", required_argument, NULL, 'M'},
        {"servers", required_argument, NULL, 'S'},
        {"json", no_argument, NULL, 'j'},
        {"peek", no_argument, NULL, 'P'},
        {"reset", no_argument, NULL, 'R'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *url = "memory", *rate = NULL, *key = NULL, *name = "cli";
    const char *algorithm = NULL, *on_failure = NULL, *clock = NULL,
               *durable = NULL, *mode = NULL;
    uint64_t burst = 0, cost = 1, count = 1, timeout = 5, servers = 0;
    int json = 0, many = 0, c, li = 0, peek = 0, reset = 0, costed = 0;
    char err[512];

    if (options_whole(argc, argv, opts))
        return 2;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        switch (c) {
        case 's':
            url = optarg;
            break;
        case 'l':
            rate = optarg;
            break;
        case 'a':
            algorithm = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'f':
            on_failure = optarg;
            break;
        case 'K':
            clock = optarg;
            break;
        case 'D':
            durable = optarg;
            break;
        case 'M':
            mode = optarg;
            break;
        case 'S':
            if (parse_upto(optarg, FG_MAX_COUNT - 1, &servers) ||
                servers == 0 || servers > 100000) {
                fprintf(stderr,
                        "floodgate check: --servers must be a whole "
                        "number from 1 to 100000, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'j':
            json = 1;
            break;
        case 'P':
            peek = 1;
            break;
        case 'R':
            reset = 1;
            break;
        case 'b':
            if (parse_upto(optarg, FG_MAX_COUNT, &burst) || burst == 0) {
                fprintf(stderr,
                        "floodgate check: --burst must be a whole number "
                        "from 1 to 2^53, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'c':
            if (parse_upto(optarg, FG_MAX_COUNT - 1, &cost) || cost == 0) {
                fprintf(stderr,
                        "floodgate check: --cost must be a whole "
                        "number from 1 to 2^53-1, not '%s'\n",
                        optarg);
                return 2;
            }
            costed = 1;
            break;
        case 'C':
            if (parse_upto(optarg, FG_MAX_COUNT - 1, &count) || count == 0)
                goto bad_number;
            many = 1;
            break;
        case 't':
            if (parse_upto(optarg, 60000, &timeout) || timeout == 0) {
                fprintf(stderr,
                        "floodgate check: --timeout must be a whole number "
                        "of milliseconds from 1 to 60000, not '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            /* A short option is named by its letter: '-key' stops at
             * 'k', and argv[optind - 1] may be the argument after it. */
            if (optopt && optopt < 128 && strncmp(argv[optind - 1], "--", 2))
                fprintf(stderr,
                        "floodgate check: unknown option '-%c' (options "
                        "are --NAME)\n\n%s",
                        optopt, usage);
            else
                fprintf(stderr,
                        "floodgate check: unknown or incomplete option "
                        "'%s'\n\n%s",
                        argv[optind - 1], usage);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "floodgate check: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (!rate || !key) {
        fprintf(stderr, "floodgate check: %s required\n\n%s",
                !rate && !key ? "--limit and --key are"
                : !rate       ? "--limit is"
                              : "--key is",
                usage);
        return 2;
    }

    if (peek + reset > 1 || ((peek || reset) && (many || costed))) {
        fprintf(stderr, "floodgate check: --peek and --reset go alone (no "
                        "--count, no --cost, not both)\n");
        return 2;
    }

    fg_limit lim;
    if (fg_limit_parse_err(rate, &lim, err, sizeof(err)) != FG_OK) {
        fprintf(stderr, "floodgate check: %s\n", err);
        return 2;
    }
    if (strlen(name) >= sizeof(lim.name)) {
        fprintf(stderr, "floodgate check: --name is longer than %d bytes\n",
                FG_NAME_MAX - 1);
        return 2;
    }
    if (!fg_limit_name_valid(name, strlen(name))) {
        fprintf(stderr,
                "floodgate check: --name '%s': a limit name is 1 to %d of "
                "A-Z a-z 0-9 _ - .\n",
                name, FG_NAME_MAX - 1);
        return 2;
    }
    if (!key[0]) {
        fprintf(stderr, "floodgate check: --key is empty\n");
        return 2;
    }
    strcpy(lim.name, name);
    lim.burst = burst;
    lim.timeout_ms = (uint32_t)timeout;
    if (algorithm && fg_algorithm_parse(algorithm, &lim.algorithm)) {
        fprintf(stderr,
                "floodgate check: unknown algorithm '%s' (use "
                "token_bucket, fixed_window, sliding_window or "
                "naive_get_set)\n",
                algorithm);
        return 2;
    }
    if (on_failure && fg_on_failure_parse(on_failure, &lim.on_failure)) {
        fprintf(stderr,
                "floodgate check: --on-failure must be open, closed or "
                "local, not '%s'\n",
                on_failure);
        return 2;
    }
    if (clock && strcmp(clock, "client") && strcmp(clock, "redis")) {
        fprintf(stderr,
                "floodgate check: --clock must be redis or client, not '%s'\n",
                clock);
        return 2;
    }
    lim.clock_client = clock && !strcmp(clock, "client");
    if (durable && strcmp(durable, "off") && strcmp(durable, "replica")) {
        fprintf(stderr,
                "floodgate check: --durable must be off or replica, not '%s'\n",
                durable);
        return 2;
    }
    lim.durable = durable && !strcmp(durable, "replica");
    if (lim.durable && strncmp(url, "memory", 6) == 0) {
        fprintf(stderr, "floodgate check: --durable replica needs a Redis "
                        "store (the memory store has no replica)\n");
        return 2;
    }
    if (mode && fg_mode_parse(mode, &lim, err, sizeof(err)) != FG_OK) {
        fprintf(stderr, "floodgate check: --mode: %s\n", err);
        return 2;
    }
    if (servers)
        lim.fallback_servers = (uint32_t)servers;
    if (lim.mode == FG_MODE_SYNC && !on_failure)
        lim.on_failure = FG_FAIL_LOCAL;

    fg_store *st = fg_store_open(url, err, sizeof(err));
    if (!st) {
        fprintf(stderr, "floodgate check: %s\n", err);
        return 2;
    }
    const char *warn = fg_store_warning(st);
    if (warn)
        fprintf(stderr, "floodgate check: warning: %s\n", warn);
    hold_stops();
    fg_limiter *l = fg_limiter_new(st, &lim, err, sizeof(err));
    if (!l) {
        fprintf(stderr, "floodgate check: %s\n", err);
        fg_store_close(st);
        return let_stops_in(2, 0);
    }

    if (peek || reset) {
        int status = operate(l, st, key, peek, json);
        fg_limiter_free(l);
        fg_store_close(st);
        return let_stops_in(status, fflush(stdout) ? errno : 0);
    }

    if (lim.mode != FG_MODE_EXACT) {
        fg_mode_bound b;
        char m[32];
        unsigned n = servers ? (unsigned)servers : 1;
        fg_mode_format(&lim, m, sizeof(m));
        fg_limit_bound(&lim, n, (uint64_t)lim.timeout_ms * 1000, &b);
        printf(json ? "{\"mode\":\"%s\",\"servers\":%u,\"over_window_ms\":"
                      "%llu,\"over_cap\":%llu,\"under_cap\":%llu}\n"
                    : "mode=%s servers=%u over_window_ms=%llu over_cap=%llu "
                      "under_cap=%llu\n",
               m, n, (unsigned long long)(b.over_window_us / 1000),
               (unsigned long long)b.over_cap, (unsigned long long)b.under_cap);
    }

    uint64_t allowed = 0, limited = 0;
    int status = 0, failed = 0, out_errno = 0, stopped = 0;
    for (uint64_t i = 0; i < count && !out_errno; i++) {
        if (stop_pending()) {
            stopped = 1;
            break;
        }
        fg_decision d;
        int rc = fg_check(l, key, strlen(key), cost, &d);
        if (rc == FG_ECOST) {
            fprintf(stderr,
                    "floodgate check: cost %llu is more than the limit "
                    "can ever grant: a cost is 1 .. %llu (the limit, or "
                    "a token bucket's burst)\n",
                    (unsigned long long)cost, (unsigned long long)d.limit);
            failed = 1;
            break;
        }
        if (rc == FG_EKEY && strlen(key) > FG_MAX_KEY) {
            fprintf(stderr,
                    "floodgate check: key too long: %zu bytes, at most "
                    "%d\n",
                    strlen(key), FG_MAX_KEY);
            failed = 1;
            break;
        }
        if (rc == FG_EKEY && (!key[0] || key[0] == '}')) {
            fprintf(stderr,
                    "floodgate check: %s: Redis Cluster cannot place it (its "
                    "hash tag would be empty)\n",
                    key[0] ? "a key starting with '}'" : "an empty key");
            failed = 1;
            break;
        }
        if (rc == FG_EKEY || rc == FG_EINVAL) {
            fprintf(stderr,
                    "floodgate check: %s (cost %llu, limit %llu, key "
                    "%zu bytes)\n",
                    fg_strerror(rc), (unsigned long long)cost,
                    (unsigned long long)d.limit, strlen(key));
            failed = 1;
            break;
        }
        char why[sizeof err + 64];
        if (rc < 0) {
            const char *last = key_error(st, key);
            snprintf(why, sizeof why, "%s%s%s", fg_strerror(rc),
                     *last ? ": " : "", last);
            if (!failed)
                fprintf(stderr,
                        "floodgate check: store: %s; decided by "
                        "on_failure=%s\n",
                        why, fg_on_failure_name(lim.on_failure));
            failed = 1;
        }
        print_decision(&d, rc < 0 ? why : NULL, json);
        if (d.allowed)
            allowed++;
        else
            limited++;
        status = d.allowed ? 0 : 1;
        if (ferror(stdout))
            out_errno = errno ? errno : EIO;
    }
    if (many && !json && !stopped && !out_errno)
        printf("allowed=%llu limited=%llu\n", (unsigned long long)allowed,
               (unsigned long long)limited);
    /* Usage not yet synced, leased units: back to the store. */
    int src = fg_limiter_sync(l);
    if (src != FG_OK && !failed) {
        fprintf(stderr, "floodgate check: sending the local usage: %s\n",
                fg_strerror(src));
        failed = 1;
    }
    fg_limiter_free(l);
    fg_store_close(st);
    if (fflush(stdout) != 0 && !out_errno)
        out_errno = errno ? errno : EIO;
    return let_stops_in(failed ? 2 : status, out_errno);

bad_number:
    fprintf(stderr,
            "floodgate check: --%s needs a positive whole number, not "
            "'%s'\n",
            opts[li].name, optarg);
    return 2;
}
