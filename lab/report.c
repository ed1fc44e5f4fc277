/* report.c -- what the lab prints: cards side by side for people, one JSON
 * object per strategy for scripts, a sweep table and its SVG chart. */
#include <errno.h>
#include <string.h>

#include "lab.h"

#define COL 20 /* visible width of one strategy's column: 4 fit in 100 */
/* More strategies than fit in 100 columns are printed in tables of 3. */
#define GROUP 3

static const char *const subtitle[FG__LAB_NSTRATEGIES] = {
    "memory, per server", "memory, limit / N", "Redis GET then SET",
    "Redis atomic (Lua)", "local + sync",      "Redis leases"};

/* The failure policy in a card's width. */
static const char *const policy_short[FG__LAB_NSTRATEGIES] = {
    "unaffected",          "unaffected",       "fails open",
    "falls back: limit/N", "local: limit / N", "held, then limit/N"};

/* SVG and terminal colours per strategy. */
static const char *const svg_color[FG__LAB_NSTRATEGIES] = {
    "#e07b39", "#8e6bbf", "#d64545", "#2e9e5b", "#2f7fc1", "#b8860b"};

static int over_of(const fg__lab_result *r)
{
    long long o = (long long)r->allowed - (long long)r->p.limit - r->refilled;
    return o > 0 ? (int)o : 0;
}

/* 1 when the run's Redis figures were counted: the memory strategies
 * (nothing to count) and the lab's own Redis, which it watches through its
 * delay proxies and INFO. A store of the user's is watched by neither. */
static int counted(const fg__lab_result *r)
{
    return !fg__lab_uses_redis(r->strategy) || r->store.own;
}

/* Where the run's counters lived: "store":{...}. */
static void print_json_store(FILE *f, const fg__lab_result *r)
{
    const fg__lab_store *st = &r->store;
    if (!fg__lab_uses_redis(r->strategy)) {
        fprintf(f, "\"store\":{\"kind\":\"memory\"},");
        return;
    }
    fprintf(f, "\"store\":{\"kind\":\"%s\",\"own\":%s,\"nodes\":[", st->kind,
            st->own ? "true" : "false");
    for (int i = 0; i < st->nodes; i++) {
        fprintf(f, "%s{\"name\":\"%s\"", i ? "," : "", st->name[i]);
        if (st->own && i < FG__LAB_MAX_SHARDS)
            fprintf(f, ",\"executed\":%lld", st->executed[i]);
        fprintf(f, "}");
    }
    fprintf(f, "],\"node\":");
    if (st->node >= 0 && st->node < st->nodes)
        fprintf(f, "\"%s\"},", st->name[st->node]);
    else
        fprintf(f, "null},");
}

void fg__lab_print_json(FILE *f, const fg__lab_result *r)
{
    fprintf(f, "{\"strategy\":\"%s\",\"servers\":[",
            fg__lab_strategy_name(r->strategy));
    for (int i = 0; i < r->p.servers; i++)
        fprintf(f, "%s{\"id\":\"api-%d\",\"ok\":%d,\"limited\":%d}",
                i ? "," : "", i + 1, r->srv[i].ok, r->srv[i].limited);
    fprintf(f, "],\"allowed\":%d,\"limit\":%llu,\"refilled\":%d,\"over\":%d,",
            r->allowed, (unsigned long long)r->p.limit, r->refilled,
            over_of(r));
    print_json_store(f, r);
    if (counted(r))
        fprintf(f, "\"redis_calls_per_request\":%.2f,", r->calls_per_request);
    else
        fprintf(f, "\"redis_calls_per_request\":null,");
    if (r->down_measured)
        fprintf(f,
                "\"redis_down\":{\"allowed\":%d,\"limited\":%d,"
                "\"failed\":%d,\"on_failure\":\"%s\"},",
                r->down_allowed, r->down_limited, r->down_failed,
                fg__lab_uses_redis(r->strategy)
                    ? fg__lab_on_failure(r->strategy)
                    : "none");
    else if (r->down_skipped[0])
        fprintf(f, "\"redis_down\":null,\"redis_down_skipped\":\"%s\",",
                r->down_skipped);
    else
        fprintf(f, "\"redis_down\":null,");
    const fg__lab_bound *b = &r->bound;
    if (b->kind == 1)
        fprintf(f,
                "\"bound\":%llu,\"bound_of\":\"over\",\"interval_ms\":%d,"
                "\"over_window_ms\":%llu,\"over_cap\":%llu,"
                "\"arrivals_in_window\":%llu,",
                (unsigned long long)b->bound, r->p.sync_ms,
                (unsigned long long)b->over_window_ms,
                (unsigned long long)b->over_cap,
                (unsigned long long)b->in_window);
    else if (b->kind == 2)
        fprintf(f,
                "\"bound\":%llu,\"bound_of\":\"under\",\"chunk\":%llu,"
                "\"under_cap\":%llu,",
                (unsigned long long)b->bound, (unsigned long long)b->chunk,
                (unsigned long long)b->under_cap);
    if (b->kind)
        fprintf(f, "\"settle_ms\":%.1f,", r->settle_us / 1000.0);
    fprintf(f,
            "\"limited\":%d,\"failed\":%d,\"unattributed\":%d,"
            "\"refused_under_limit\":%d,\"by_on_failure\":%d,"
            "\"allowed_by_on_failure\":%d,",
            r->limited, r->failed, r->unknown, r->refused_under_limit,
            r->fallback, r->fallback_allowed);
    if (counted(r))
        fprintf(f,
                "\"redis_round_trips_per_request\":%.2f,"
                "\"redis_commands\":\"%s\","
                "\"redis_executed_per_request\":%.2f,"
                "\"redis_executed\":\"%s\",",
                r->round_trips_per_request, r->commands,
                r->executed_per_request, r->executed);
    else
        fprintf(f, "\"redis_round_trips_per_request\":null,"
                   "\"redis_commands\":null,"
                   "\"redis_executed_per_request\":null,"
                   "\"redis_executed\":null,");
    fprintf(f,
            "\"policy\":\"%s\","
            "\"params\":{\"servers\":%d,\"burst\":%d,\"spread_ms\":%g,"
            "\"rtt_ms\":%g,\"limit\":%llu,\"period_ms\":%llu,"
            "\"balance\":\"%s\"},\"burst_ms\":%.1f,\"run_ms\":%.1f}\n",
            fg__lab_policy_text(r->strategy), r->p.servers, r->p.burst,
            r->p.spread_us / 1000.0, r->p.rtt_us / 1000.0,
            (unsigned long long)r->p.limit, (unsigned long long)r->p.period_ms,
            r->p.balance_random ? "random" : "roundrobin", r->burst_us / 1000.0,
            r->run_us / 1000.0);
}

/* ANSI colours, only on a terminal. */
enum { PLAIN, RED, GREEN, YELLOW, DIM, BOLD };
static const char *const ansi[] = {"",         "\033[31m", "\033[32m",
                                   "\033[33m", "\033[2m",  "\033[1m"};

/* One cell: 'text' padded to COL visible columns, coloured. A longer
 * text (a list "A 1, B 2, ...") is cut after its last whole item that
 * fits, with "...", to COL - 1 so that columns never run into each
 * other (--json has it whole). */
static void cell(FILE *f, int color, int tint, const char *text)
{
    char cut[COL];
    if (strlen(text) > COL - 1) {
        size_t n = COL - 6; /* room for ", ..." */
        while (n > 0 && text[n] != ',')
            n--;
        if (n > 0)
            snprintf(cut, sizeof cut, "%.*s, ...", (int)n, text);
        else
            snprintf(cut, sizeof cut, "%.*s...", COL - 4, text);
        text = cut;
    }
    if (color && tint != PLAIN)
        fprintf(f, "%s%-*s\033[0m", ansi[tint], COL, text);
    else
        fprintf(f, "%-*s", COL, text);
}

static void label(FILE *f, const char *text)
{
    fprintf(f, "  %-17s", text);
}

/* The verdict against the limit, and its colour. An approximate mode is
 * judged against the bound it states: within it, the overshoot (sync) or
 * the shortfall (lease) is what was promised. */
static int verdict(const fg__lab_result *r, char *a, char *b, size_t len)
{
    int over = over_of(r);
    const fg__lab_bound *bd = &r->bound;
    if (over > 0) {
        snprintf(a, len, "+%d over", over);
        if (bd->kind == 1 && (uint64_t)over <= bd->bound) {
            snprintf(b, len, "within its bound");
            return YELLOW;
        }
        /* Over only by what on_failure allowed: not the store's doing. */
        if (r->fallback_allowed >= over) {
            snprintf(b, len, "%d by on_failure", r->fallback_allowed);
            return YELLOW;
        }
        snprintf(b, len, bd->kind ? "BEYOND its bound" : "limit not enforced");
        return RED;
    }
    if (r->refused_under_limit > 0) {
        snprintf(a, len, "%d short of limit", r->refused_under_limit);
        if (bd->kind == 2 && (uint64_t)r->refused_under_limit > bd->bound) {
            snprintf(b, len, "BEYOND its bound");
            return RED;
        }
        snprintf(b, len,
                 bd->kind == 2 ? "within its bound" : "refused a real user");
        return YELLOW;
    }
    snprintf(a, len, "exact");
    snprintf(b, len, "limit enforced");
    return GREEN;
}

/* The bound a strategy states, in a card's width, and how it is made. */
static void bound_text(const fg__lab_result *r, char *a, char *b, size_t len)
{
    const fg__lab_bound *bd = &r->bound;
    if (bd->kind == 1) {
        snprintf(a, len, "over <= %llu", (unsigned long long)bd->bound);
        snprintf(b, len, "%llu in %llums, cap %llu",
                 (unsigned long long)bd->in_window,
                 (unsigned long long)bd->over_window_ms,
                 (unsigned long long)bd->over_cap);
    } else if (bd->kind == 2) {
        snprintf(a, len, "over 0, under <= %llu",
                 (unsigned long long)bd->bound);
        snprintf(b, len, "held <= %llu", (unsigned long long)bd->under_cap);
    } else if (r->strategy == FG__LAB_ATOMIC) {
        snprintf(a, len, "exact");
        snprintf(b, len, "-");
    } else {
        snprintf(a, len, "none");
        snprintf(b, len, "-");
    }
}

/* One table of 'n' strategies side by side. */
static void print_table(FILE *f, const fg__lab_result *rs, int n, int color)
{
    const fg__lab_params *p = &rs[0].p;
    char t[96], u[96];
    label(f, "");
    for (int i = 0; i < n; i++) {
        snprintf(t, sizeof t, "%s", fg__lab_strategy_name(rs[i].strategy));
        for (char *c = t; *c; c++)
            *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        cell(f, color, BOLD, t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++) {
        if (rs[i].strategy == FG__LAB_SYNC)
            snprintf(t, sizeof t, "%s %d ms", subtitle[rs[i].strategy],
                     rs[i].p.sync_ms);
        else if (rs[i].strategy == FG__LAB_LEASE)
            snprintf(t, sizeof t, "%s <= %llu", subtitle[rs[i].strategy],
                     (unsigned long long)rs[i].bound.chunk);
        else
            snprintf(t, sizeof t, "%s", subtitle[rs[i].strategy]);
        cell(f, color, DIM, t);
    }
    fprintf(f, "\n");
    for (int s = 0; s < p->servers; s++) {
        snprintf(t, sizeof t, "api-%d", s + 1);
        label(f, t);
        for (int i = 0; i < n; i++) {
            snprintf(t, sizeof t, "%3d ok · %3d 429", rs[i].srv[s].ok,
                     rs[i].srv[s].limited);
            /* "·" is two bytes and one column: pad by hand. */
            fprintf(f, "%-*s", COL + 1, t);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
    label(f, "allowed");
    for (int i = 0; i < n; i++) {
        snprintf(t, sizeof t, "%d / limit %llu", rs[i].allowed,
                 (unsigned long long)rs[i].p.limit);
        cell(f, color, BOLD, t);
    }
    fprintf(f, "\n");
    int refill = 0, late = 0;
    for (int i = 0; i < n; i++) {
        refill |= rs[i].refilled > 0;
        late |= rs[i].fallback > 0;
    }
    if (refill) {
        /* A burst that took longer than a unit's refill: the limit grew. */
        label(f, "refilled");
        for (int i = 0; i < n; i++) {
            snprintf(t, sizeof t, "+%d during burst", rs[i].refilled);
            cell(f, color, DIM, rs[i].refilled ? t : "-");
        }
        fprintf(f, "\n");
    }
    if (late) {
        /* The store did not answer within the timeout: these answers are
         * the failure policy's, not the store's. */
        label(f, "by on_failure");
        for (int i = 0; i < n; i++) {
            snprintf(t, sizeof t, "%d, %d allowed", rs[i].fallback,
                     rs[i].fallback_allowed);
            cell(f, color, rs[i].fallback ? YELLOW : DIM,
                 rs[i].fallback ? t : "-");
        }
        fprintf(f, "\n");
    }
    int tint[FG__LAB_NSTRATEGIES];
    char second[FG__LAB_NSTRATEGIES][96];
    label(f, "versus limit");
    for (int i = 0; i < n; i++) {
        tint[i] = verdict(&rs[i], t, second[i], sizeof t);
        cell(f, color, tint[i], t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++)
        cell(f, color, tint[i], second[i]);
    fprintf(f, "\n");
    label(f, "stated bound");
    for (int i = 0; i < n; i++) {
        bound_text(&rs[i], t, second[i], sizeof t);
        cell(f, color, PLAIN, t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++)
        cell(f, color, DIM, second[i]);
    fprintf(f, "\n");
    /* Three Redis figures, each labelled by where it is counted: what the
     * servers sent (the delay proxy), how many round trips that took (the
     * proxy), and what Redis ran (INFO commandstats, scripts' inner
     * commands included). */
    label(f, "sent to Redis");
    for (int i = 0; i < n; i++) {
        if (!counted(&rs[i]))
            snprintf(t, sizeof t, "not counted");
        else if (rs[i].calls_per_request == 0)
            snprintf(t, sizeof t, "0 (no network hop)");
        else
            snprintf(t, sizeof t, "%.2f cmds/request", rs[i].calls_per_request);
        cell(f, color, PLAIN, t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++)
        cell(f, color, DIM,
             !counted(&rs[i])    ? "(--store)"
             : rs[i].commands[0] ? rs[i].commands
                                 : "-");
    fprintf(f, "\n");
    label(f, "round trips");
    for (int i = 0; i < n; i++) {
        if (counted(&rs[i]))
            snprintf(t, sizeof t, "%.2f trips/request",
                     rs[i].round_trips_per_request);
        else
            snprintf(t, sizeof t, "not counted");
        cell(f, color, PLAIN, t);
    }
    fprintf(f, "\n");
    label(f, "Redis ran");
    for (int i = 0; i < n; i++) {
        if (counted(&rs[i]))
            snprintf(t, sizeof t, "%.2f cmds/request",
                     rs[i].executed_per_request);
        else
            snprintf(t, sizeof t, "not counted");
        cell(f, color, PLAIN, t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++)
        cell(f, color, DIM, rs[i].executed[0] ? rs[i].executed : "-");
    fprintf(f, "\n");
    int spread = 0;
    for (int i = 0; i < n; i++)
        spread |= rs[i].store.nodes > 1;
    if (spread) {
        /* Which node held the user's counters: the library's choice. */
        label(f, "counters on");
        for (int i = 0; i < n; i++) {
            const fg__lab_store *st = &rs[i].store;
            cell(f, color, DIM,
                 st->node >= 0 && st->node < st->nodes ? st->name[st->node]
                                                       : "-");
        }
        fprintf(f, "\n");
    }
    label(f, "if Redis is down");
    for (int i = 0; i < n; i++) {
        if (!rs[i].down_measured)
            snprintf(t, sizeof t, "not measured");
        else if (rs[i].down_failed) /* no server answered them */
            snprintf(t, sizeof t, "%d of %d failed", rs[i].down_failed,
                     rs[i].down_allowed + rs[i].down_limited +
                         rs[i].down_failed);
        else
            snprintf(t, sizeof t, "%d ok · %d refused", rs[i].down_allowed,
                     rs[i].down_limited);
        /* '·' is two bytes for one column */
        int dot = rs[i].down_measured && !rs[i].down_failed;
        fprintf(f, "%-*s", COL + dot, t);
    }
    fprintf(f, "\n");
    label(f, "");
    for (int i = 0; i < n; i++)
        cell(f, color, DIM, policy_short[rs[i].strategy]);
    fprintf(f, "\n");
    label(f, "burst took");
    for (int i = 0; i < n; i++) {
        snprintf(u, sizeof u, "%.1f ms", rs[i].burst_us / 1000.0);
        cell(f, color, DIM, u);
    }
    fprintf(f, "\n\n");
}

/* "Store: ..." under the cards' title: which store ran, and how. */
static void print_store_line(FILE *f, const fg__lab_store *st)
{
    if (st->own && st->nodes <= 1) {
        fprintf(f, "Store: one redis-server started by the lab, behind the "
                   "delay proxy.\n");
        return;
    }
    if (st->own) {
        fprintf(f,
                "Store: shards=, %d redis-servers started by the lab, each "
                "behind its own\ndelay proxy; a user's counters live on one "
                "of them.\n",
                st->nodes);
        return;
    }
    fprintf(f, "Store: %s given with --store: ", st->kind);
    for (int i = 0; i < st->nodes && i < 3; i++)
        fprintf(f, "%s%s", i ? ", " : "", st->name[i]);
    fprintf(f,
            "%s.\nNo delay proxy; its commands are not counted; the lab "
            "never stops it.\n",
            st->nodes > 3 ? ", ..." : "");
}

void fg__lab_print_cards(FILE *f, const fg__lab_result *rs, int n, int color)
{
    if (n <= 0)
        return;
    const fg__lab_params *p = &rs[0].p;
    char limit[64];
    if (p->period_ms == 1000)
        snprintf(limit, sizeof limit, "%llu/s", (unsigned long long)p->limit);
    else
        snprintf(limit, sizeof limit, "%llu per %llu ms",
                 (unsigned long long)p->limit,
                 (unsigned long long)p->period_ms);
    const fg__lab_store *st = NULL;
    for (int i = 0; i < n && !st; i++)
        if (fg__lab_uses_redis(rs[i].strategy))
            st = &rs[i].store;
    char rtt[48];
    if (st && !st->own)
        snprintf(rtt, sizeof rtt, "Redis round trip the store's own");
    else
        snprintf(rtt, sizeof rtt, "Redis round trip +%g ms",
                 p->rtt_us / 1000.0);
    fprintf(f,
            "%s%d servers behind HAProxy (%s), %s, limit %s per user.\nOne "
            "user fires %d requests within %g ms.%s\n",
            color ? ansi[BOLD] : "", p->servers,
            p->balance_random ? "random" : "round robin", rtt, limit, p->burst,
            p->spread_us / 1000.0, color ? "\033[0m" : "");
    if (st)
        print_store_line(f, st);
    fprintf(f, "\n");
    int per = n > 4 ? GROUP : n;
    for (int i = 0; i < n; i += per)
        print_table(f, rs + i, n - i < per ? n - i : per, color);
    int approximate = 0, refill = 0;
    for (int i = 0; i < n; i++) {
        approximate |= rs[i].bound.kind != 0;
        refill |= rs[i].refilled > 0;
    }
    fprintf(f,
            "%s  Per request of the burst. Sent to Redis: commands the "
            "servers sent, counted\n  by the delay proxy. Round trips: "
            "through the proxy (commands sent before an\n  answer count as "
            "one). Redis ran: commands Redis executed, from INFO\n  "
            "commandstats; a Lua script counts once itself and once for "
            "each command it\n  runs inside Redis (--json has the full "
            "lists). A server that has refused a\n  user answers its next "
            "requests itself until the limit resets.\n  If Redis is down: "
            "%s.%s\n",
            color ? ansi[DIM] : "",
            st && !st->own ? "not measured, the store is not the lab's "
                             "(--store):\n  it is never stopped"
            : st && st->nodes > 1
                ? "every node stopped, the same burst fired again\n  with "
                  "a new user"
                : "Redis stopped, the same burst fired again with a new user",
            color ? "\033[0m" : "");
    if (refill)
        fprintf(f,
                "%s  Refilled: what the limit gave back while the burst was "
                "decided (limit x time\n  to the last allowed answer / "
                "period); \"over\" is beyond the limit and that.%s\n",
                color ? ansi[DIM] : "", color ? "\033[0m" : "");
    if (approximate)
        fprintf(f,
                "%s  Stated bound: sync, over <= min(arrivals at the other "
                "servers within the\n  library's window of 2 x (interval + "
                "round trip), (servers - 1) x (limit +\n  its refill in that "
                "window)); lease, never over, under <= what the other\n  "
                "servers may hold. Their Redis figures include the commands "
                "sent after\n  the burst (syncs, give-backs), waited for.%s\n",
                color ? ansi[DIM] : "", color ? "\033[0m" : "");
}

/* The limit of a sweep: from the first strategy it measured. */
static unsigned long long sweep_limit(unsigned mask, const fg__lab_result *rs)
{
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (mask & (1u << s))
            return (unsigned long long)rs[s].p.limit;
    return 0;
}

void fg__lab_print_sweep(FILE *f, const char *param, const int *values,
                         int nvalues, unsigned mask, const fg__lab_result *rs)
{
    fprintf(f, "allowed (limit %llu) by %s\n\n  %-10s", sweep_limit(mask, rs),
            param, param);
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
        if (mask & (1u << s))
            fprintf(f, "%10s", fg__lab_strategy_name(s));
    fprintf(f, "\n");
    for (int v = 0; v < nvalues; v++) {
        fprintf(f, "  %-10d", values[v]);
        for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
            if (mask & (1u << s))
                fprintf(f, "%10d", rs[v * FG__LAB_NSTRATEGIES + s].allowed);
        fprintf(f, "\n");
    }
    /* The approximate modes: each value's measured overshoot (sync) or
     * shortfall (lease) beside the bound stated for it, and the Redis
     * commands sent per request against atomic's. */
    unsigned shown = mask & ((1u << FG__LAB_ATOMIC) | (1u << FG__LAB_SYNC) |
                             (1u << FG__LAB_LEASE));
    if (!(mask & ((1u << FG__LAB_SYNC) | (1u << FG__LAB_LEASE))))
        return;
    fprintf(f,
            "\nmeasured / stated bound (sync: over, lease: under), and Redis "
            "commands sent\nper request, by %s\n\n  %-10s",
            param, param);
    for (int s = FG__LAB_ATOMIC; s < FG__LAB_NSTRATEGIES; s++)
        if (shown & (1u << s))
            fprintf(f, "%20s", fg__lab_strategy_name(s));
    fprintf(f, "\n");
    for (int v = 0; v < nvalues; v++) {
        fprintf(f, "  %-10d", values[v]);
        for (int s = FG__LAB_ATOMIC; s < FG__LAB_NSTRATEGIES; s++) {
            if (!(shown & (1u << s)))
                continue;
            const fg__lab_result *r = &rs[v * FG__LAB_NSTRATEGIES + s];
            char t[64];
            char c[16] = "-";
            if (counted(r))
                snprintf(c, sizeof c, "%.2f", r->calls_per_request);
            if (r->bound.kind == 1)
                snprintf(t, sizeof t, "%d/%llu %s", over_of(r),
                         (unsigned long long)r->bound.bound, c);
            else if (r->bound.kind == 2)
                snprintf(t, sizeof t, "%d/%llu %s", r->refused_under_limit,
                         (unsigned long long)r->bound.bound, c);
            else
                snprintf(t, sizeof t, "over %d, %s", over_of(r), c);
            fprintf(f, "%20s", t);
        }
        fprintf(f, "\n");
    }
}

int fg__lab_write_svg(const char *path, const char *param, const int *values,
                      int nvalues, unsigned mask, const fg__lab_result *rs,
                      char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    const int W = 640, H = 380, L = 56, R = 150, T = 60, B = 48;
    int lo = values[0], hi = values[0];
    unsigned long long limit = sweep_limit(mask, rs);
    int ymax = (int)limit;
    for (int v = 0; v < nvalues; v++) {
        lo = values[v] < lo ? values[v] : lo;
        hi = values[v] > hi ? values[v] : hi;
        for (int s = 0; s < FG__LAB_NSTRATEGIES; s++)
            if ((mask & (1u << s)) &&
                rs[v * FG__LAB_NSTRATEGIES + s].allowed > ymax)
                ymax = rs[v * FG__LAB_NSTRATEGIES + s].allowed;
    }
    ymax = ymax + ymax / 10 + 1;
    double xs = hi > lo ? (double)(W - L - R) / (hi - lo) : 0;
    double ys = (double)(H - T - B) / ymax;
#define X(v) (L + (hi > lo ? ((v)-lo) * xs : (W - L - R) / 2.0))
#define Y(a) (H - B - (a)*ys)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
            "Allowed requests by %s (limit %llu)</text>\n",
            W, H, W, H, L, param, limit);
    /* What stayed fixed while 'param' moved. */
    const fg__lab_params *p0 = NULL;
    for (int s = 0; s < FG__LAB_NSTRATEGIES && !p0; s++)
        if (mask & (1u << s))
            p0 = &rs[s].p;
    char sub[256] = "", part[96];
    if (p0 && strcmp(param, "servers") != 0) {
        snprintf(part, sizeof part, "%d servers (%s)", p0->servers,
                 p0->balance_random ? "random" : "round robin");
        strcat(sub, part);
    }
    if (p0 && strcmp(param, "burst") != 0) {
        snprintf(part, sizeof part, "%s%d requests within %g ms",
                 sub[0] ? " · " : "", p0->burst, p0->spread_us / 1000.0);
        strcat(sub, part);
    }
    const fg__lab_store *st = NULL;
    for (int s = 0; s < FG__LAB_NSTRATEGIES && !st; s++)
        if ((mask & (1u << s)) && fg__lab_uses_redis(s))
            st = &rs[s].store;
    if (p0 && strcmp(param, "rtt") != 0 && st && !st->own) {
        snprintf(part, sizeof part, "%s%s given with --store",
                 sub[0] ? " · " : "", st->kind);
        strcat(sub, part);
    } else if (p0 && strcmp(param, "rtt") != 0) {
        snprintf(part, sizeof part, "%s+%g ms per Redis round trip",
                 sub[0] ? " · " : "", p0->rtt_us / 1000.0);
        strcat(sub, part);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#666\">%s</text>\n", L, T - 20,
            sub);
    /* Axes and ticks. */
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n"
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n",
            L, H - B, W - R, H - B, L, T, L, H - B);
    for (int v = 0; v < nvalues; v++)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                X(values[v]), H - B + 18, values[v]);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s%s</text>\n",
            (L + W - R) / 2, H - 10, param,
            strcmp(param, "rtt") == 0 ? " (ms added per Redis round trip)"
                                      : "");
    int step = ymax > 10 ? (ymax / 5 + 9) / 10 * 10 : 2;
    for (int y = 0; y <= ymax; y += step)
        fprintf(f,
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n"
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                "stroke=\"#eee\"/>\n",
                L - 6, Y(y) + 4, y, L + 1, Y(y), W - R, Y(y));
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#555\" "
            "stroke-dasharray=\"5,4\"/>\n<text x=\"%d\" y=\"%.1f\" "
            "fill=\"#555\">limit</text>\n",
            L, Y(limit), W - R, Y(limit), W - R + 6, Y(limit) + 4);
    int legend = 0;
    for (int s = 0; s < FG__LAB_NSTRATEGIES; s++) {
        if (!(mask & (1u << s)))
            continue;
        /* Coinciding lines stay visible: earlier strategies are wider. */
        fprintf(f,
                "<polyline fill=\"none\" stroke=\"%s\" stroke-opacity=\"0.8\" "
                "stroke-width=\"%d\" points=\"",
                svg_color[s], 7 - s);
        for (int v = 0; v < nvalues; v++)
            fprintf(f, "%.1f,%.1f ", X(values[v]),
                    Y(rs[v * FG__LAB_NSTRATEGIES + s].allowed));
        fprintf(f, "\"/>\n");
        for (int v = 0; v < nvalues; v++)
            fprintf(f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    X(values[v]), Y(rs[v * FG__LAB_NSTRATEGIES + s].allowed),
                    svg_color[s]);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" "
                "fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                W - R + 50, T + 20 * legend, svg_color[s], W - R + 70,
                T + 20 * legend + 5, fg__lab_strategy_name(s));
        legend++;
    }
#undef X
#undef Y
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
