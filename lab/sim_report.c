/* sim_report.c -- what `floodgate lab --simulate` prints: a table with one
 * row per strategy and server count, one JSON object per row, and an SVG
 * chart of overshoot and store commands per request against the number of
 * servers (plain SVG text, no dependency). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "simulate.h"

static const char *const color[FG__SIM_NSTRATEGIES] = {"#2a7", "#c60", "#36c",
                                                       "#c33", "#888"};

/* The mode a strategy runs the limit in ("exact", "sync:200ms", ...). */
static void mode_text(const fg__sim_params *p, int strategy, char *buf,
                      size_t len)
{
    fg_limit lim = p->lim;
    if (strategy == FG__SIM_LOCAL || strategy == FG__SIM_SPLIT) {
        snprintf(buf, len, "memory");
        return;
    }
    lim.mode = strategy == FG__SIM_SYNC    ? FG_MODE_SYNC
               : strategy == FG__SIM_LEASE ? FG_MODE_LEASE
                                           : FG_MODE_EXACT;
    if (fg_mode_format(&lim, buf, len) < 0)
        snprintf(buf, len, "?");
}

static double per_request(const fg__sim_result *r)
{
    return r->requests ? (double)r->store_commands / (double)r->requests : 0;
}

/* Simulated seconds of arrivals per second of wall time. */
double fg__sim_speed(const fg__sim_params *p, const fg__sim_result *r)
{
    double wall = r->wall_us > 0 ? (double)r->wall_us : 1;
    uint64_t span = fg__sim_span_us(p);
    return (double)(r->sim_us > span ? r->sim_us : span) / wall;
}

/* 1 when the measured overshoot, or under-admission, is beyond the bound
 * stated for it (per window for windows). A lease's under bound is what
 * the servers hold at any one time: for windows, what one window can miss;
 * a token bucket's run has no window, and its sum over the run (each
 * lease that lapsed unspent kept its units from the others while it
 * lasted) is shown, not judged. */
static int beyond(const fg__sim_result *r, int under)
{
    if (under)
        return r->has_under_bound && r->windows &&
               r->under_worst > r->under_bound;
    return r->has_over_bound &&
           (double)(r->windows ? r->over_worst : r->over_total) >
               r->over_bound + 1e-9;
}

static double wait_mean_ms(const fg__sim_result *r)
{
    return r->decided ? (double)r->wait_sum_us / (double)r->decided / 1000.0
                      : 0;
}

/* "worst/total" for windows, the one figure for a token bucket. */
static void pair(char *buf, size_t len, const fg__sim_result *r, uint64_t worst,
                 uint64_t total, int mark)
{
    if (r->windows)
        snprintf(buf, len, "%llu/%llu%s", (unsigned long long)worst,
                 (unsigned long long)total, mark ? "*" : "");
    else
        snprintf(buf, len, "%llu%s", (unsigned long long)total,
                 mark ? "*" : "");
}

void fg__sim_print_table(FILE *f, const fg__sim_params *p,
                         const fg__sim_result *rs, size_t n)
{
    const fg_limit *lim = &p->lim;
    char arrivals[160];
    if (p->arrival == FG__SIM_BURST)
        snprintf(arrivals, sizeof arrivals,
                 "a burst of %llu requests within %g ms",
                 (unsigned long long)p->burst, p->spread_us / 1000.0);
    else
        snprintf(
            arrivals, sizeof arrivals, "%s arrivals at %gx the limit for %g s",
            fg__sim_arrival_name(p->arrival), p->load, p->duration_us / 1e6);
    fprintf(f,
            "simulated: one user, limit %llu/%llums %s; %s;\n"
            "  store round trip %g ms; balance %s; seed %llu\n",
            (unsigned long long)lim->limit,
            (unsigned long long)(lim->period_us / 1000),
            fg_algorithm_name(lim->algorithm), arrivals, p->rtt_us / 1000.0,
            p->balance_random ? "random" : "roundrobin",
            (unsigned long long)p->seed);
    int windows = lim->algorithm != FG_TOKEN_BUCKET;
    fprintf(f,
            "\n  %7s %-12s %9s %9s %9s %14s %9s %14s %6s %9s %8s %8s\n"
            "  %7s %-12s %9s %9s %9s %14s %9s %14s %6s %9s %8s %8s\n",
            "servers", "strategy", "requests", "allowed", "limit", "over",
            "over", "under", "under", "store", "max wait", "wall", "", "", "",
            "", "allows", windows ? "worst/total" : "", "bound",
            windows ? "worst/total" : "", "bound", "cmd/req", "ms", "ms");
    int marked = 0;
    for (size_t i = 0; i < n; i++) {
        const fg__sim_result *r = &rs[i];
        char mode[40], over[48], under[48], ob[24] = "-", ub[24] = "-";
        mode_text(p, r->strategy, mode, sizeof mode);
        pair(over, sizeof over, r, r->over_worst, r->over_total, beyond(r, 0));
        pair(under, sizeof under, r, r->under_worst, r->under_total,
             beyond(r, 1));
        marked |= beyond(r, 0) || beyond(r, 1);
        if (r->has_over_bound)
            snprintf(ob, sizeof ob, "%.1f", r->over_bound);
        if (r->has_under_bound)
            snprintf(ub, sizeof ub, "%llu", (unsigned long long)r->under_bound);
        char name[48];
        snprintf(name, sizeof name, "%s",
                 r->strategy == FG__SIM_SYNC || r->strategy == FG__SIM_LEASE
                     ? mode
                     : fg__sim_strategy_name(r->strategy));
        fprintf(f,
                "  %7u %-12s %9llu %9llu %9llu %14s %9s %14s %6s %9.4f %8.1f "
                "%8.1f\n",
                r->servers, name, (unsigned long long)r->requests,
                (unsigned long long)r->allowed,
                (unsigned long long)r->limit_allows, over, ob, under, ub,
                per_request(r), r->wait_max_us / 1000.0, r->wall_us / 1000.0);
    }
    if (marked)
        fprintf(f, "\n  * beyond the bound fg_limit_bound states for it\n");
    uint64_t policy = 0, decided = 0;
    for (size_t i = 0; i < n; i++)
        policy += rs[i].policy, decided += rs[i].decided;
    if (policy)
        fprintf(f,
                "\n  %llu of %llu decisions made by on_failure (%s): the "
                "store answered later\n  than the servers' %u ms timeout\n",
                (unsigned long long)policy, (unsigned long long)decided,
                lim->on_failure == FG_FAIL_OPEN ? "open, allowed" : "closed",
                lim->timeout_ms);
    if (windows)
        fprintf(f,
                "\n  over and under per window of %llu ms: the worst "
                "window / all windows summed;\n  the bound of sync is "
                "per window, that of lease the most one window misses.\n",
                (unsigned long long)(lim->period_us / 1000));
    else
        fprintf(f, "\n  over and under over the whole run (a token bucket's "
                   "limit allows burst + rate * time).\n");
}

void fg__sim_print_json(FILE *f, const fg__sim_params *p,
                        const fg__sim_result *r)
{
    char mode[40];
    mode_text(p, r->strategy, mode, sizeof mode);
    const fg_limit *lim = &p->lim;
    fprintf(f,
            "{\"strategy\":\"%s\",\"servers\":%u,\"mode\":\"%s\","
            "\"requests\":%llu,\"allowed\":%llu,\"limit\":%llu,"
            "\"limit_allows\":%llu,\"windows\":%llu,\"over\":%llu,",
            fg__sim_strategy_name(r->strategy), r->servers, mode,
            (unsigned long long)r->requests, (unsigned long long)r->allowed,
            (unsigned long long)(lim->algorithm == FG_TOKEN_BUCKET && lim->burst
                                     ? lim->burst
                                     : lim->limit),
            (unsigned long long)r->limit_allows, (unsigned long long)r->windows,
            (unsigned long long)r->over_total);
    if (r->windows)
        fprintf(f, "\"over_worst_window\":%llu,",
                (unsigned long long)r->over_worst);
    else
        fprintf(f, "\"over_worst_window\":null,");
    if (r->has_over_bound)
        fprintf(f, "\"over_bound\":%.3f,", r->over_bound);
    else
        fprintf(f, "\"over_bound\":null,");
    fprintf(f, "\"under\":%llu,", (unsigned long long)r->under_total);
    if (r->windows)
        fprintf(f, "\"under_worst_window\":%llu,",
                (unsigned long long)r->under_worst);
    else
        fprintf(f, "\"under_worst_window\":null,");
    if (r->has_under_bound)
        fprintf(f, "\"under_bound\":%llu,", (unsigned long long)r->under_bound);
    else
        fprintf(f, "\"under_bound\":null,");
    fprintf(f,
            "\"over_beyond_bound\":%s,\"under_beyond_bound\":%s,"
            "\"store_commands\":%llu,\"store_commands_per_request\":%.6f,"
            "\"wait_max_ms\":%.3f,\"wait_mean_ms\":%.3f,"
            "\"arrival_rate\":%.3f,\"by_on_failure\":%llu,\"events\":%llu,"
            "\"sim_ms\":%.3f,\"wall_ms\":%.3f,\"sim_s_per_wall_s\":%.3f,",
            beyond(r, 0) ? "true" : "false", beyond(r, 1) ? "true" : "false",
            (unsigned long long)r->store_commands, per_request(r),
            r->wait_max_us / 1000.0, wait_mean_ms(r), r->arrival_rate,
            (unsigned long long)r->policy, (unsigned long long)r->events,
            r->sim_us / 1000.0, r->wall_us / 1000.0, fg__sim_speed(p, r));
    fprintf(f,
            "\"params\":{\"limit\":%llu,\"period_ms\":%llu,"
            "\"algorithm\":\"%s\",\"arrival\":\"%s\",\"load\":%g,"
            "\"burst\":%llu,\"spread_ms\":%g,\"duration_ms\":%g,"
            "\"rtt_ms\":%g,\"sync_ms\":%u,\"chunk\":%llu,\"seed\":%llu,"
            "\"balance\":\"%s\"}}\n",
            (unsigned long long)lim->limit,
            (unsigned long long)(lim->period_us / 1000),
            fg_algorithm_name(lim->algorithm), fg__sim_arrival_name(p->arrival),
            p->load, (unsigned long long)p->burst, p->spread_us / 1000.0,
            p->duration_us / 1000.0, p->rtt_us / 1000.0, lim->sync_ms,
            (unsigned long long)lim->lease_chunk, (unsigned long long)p->seed,
            p->balance_random ? "random" : "roundrobin");
}

/* ---- the chart ----------------------------------------------------------- */

/* One panel: a value of each row against log10(servers). */
typedef struct panel {
    int x, y, w, h; /* the plot area */
    const char *title;
    int log_y;     /* 1: log10 from 'floor'; 0: log10(1 + v) */
    double floor;  /* log_y: the smallest value drawn (0 sits there) */
    double lo, hi; /* of the transformed y */
    double xlo, xhi;
} panel;

static double ty(const panel *pn, double v)
{
    if (pn->log_y)
        return log10(v > pn->floor ? v : pn->floor);
    return log10(1 + (v > 0 ? v : 0));
}

static double px(const panel *pn, unsigned servers)
{
    double lx = log10((double)servers);
    if (pn->xhi <= pn->xlo)
        return pn->x + pn->w / 2.0;
    return pn->x + (lx - pn->xlo) / (pn->xhi - pn->xlo) * pn->w;
}

static double py(const panel *pn, double v)
{
    double t = ty(pn, v);
    if (pn->hi <= pn->lo)
        return pn->y + pn->h / 2.0;
    return pn->y + pn->h - (t - pn->lo) / (pn->hi - pn->lo) * pn->h;
}

static double overshoot(const fg__sim_result *r)
{
    return (double)(r->windows ? r->over_worst : r->over_total);
}

static void draw_panel(FILE *f, panel *pn, const fg__sim_result *rs, size_t n,
                       int which)
{
    /* The y range: whole decades around every value. */
    double lo = 0, hi = 1;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        double v = which ? (double)rs[i].store_commands /
                               (double)(rs[i].requests ? rs[i].requests : 1)
                         : overshoot(&rs[i]);
        double t = ty(pn, v);
        if (first || t < lo)
            lo = t;
        if (first || t > hi)
            hi = t;
        first = 0;
        if (!which && rs[i].has_over_bound && ty(pn, rs[i].over_bound) > hi)
            hi = ty(pn, rs[i].over_bound);
    }
    pn->lo = floor(pn->log_y ? lo : 0);
    pn->hi = ceil(hi) > pn->lo ? ceil(hi) : pn->lo + 1;
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">%s</text>\n"
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            pn->x, pn->y - 10, pn->title, pn->x, pn->y, pn->w, pn->h);
    for (int d = (int)pn->lo; d <= (int)pn->hi; d++) {
        double v = pn->log_y ? pow(10, d) : pow(10, d) - 1;
        double y = pn->y + pn->h - (d - pn->lo) / (pn->hi - pn->lo) * pn->h;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                "stroke=\"#eee\"/>\n<text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n",
                pn->x + 1, y, pn->x + pn->w - 1, y, pn->x - 6, y + 4, v);
    }
    for (int d = (int)floor(pn->xlo); d <= (int)ceil(pn->xhi); d++) {
        double x = pn->xhi > pn->xlo
                       ? pn->x + (d - pn->xlo) / (pn->xhi - pn->xlo) * pn->w
                       : pn->x + pn->w / 2.0;
        if (x < pn->x - 0.5 || x > pn->x + pn->w + 0.5)
            continue;
        fprintf(f,
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                x, pn->y + pn->h + 18, pow(10, d));
    }
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">servers (log "
            "scale)</text>\n",
            pn->x + pn->w / 2, pn->y + pn->h + 38);
    for (int s = 0; s < FG__SIM_NSTRATEGIES; s++) {
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= rs[i].strategy == s;
        if (!any)
            continue;
        fprintf(f,
                "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                "points=\"",
                color[s]);
        for (size_t i = 0; i < n; i++)
            if (rs[i].strategy == s)
                fprintf(
                    f, "%.1f,%.1f ", px(pn, rs[i].servers),
                    py(pn,
                       which ? (double)rs[i].store_commands /
                                   (double)(rs[i].requests ? rs[i].requests : 1)
                             : overshoot(&rs[i])));
        fprintf(f, "\"/>\n");
        for (size_t i = 0; i < n; i++)
            if (rs[i].strategy == s)
                fprintf(
                    f,
                    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" "
                    "fill=\"%s\"/>\n",
                    px(pn, rs[i].servers),
                    py(pn,
                       which ? (double)rs[i].store_commands /
                                   (double)(rs[i].requests ? rs[i].requests : 1)
                             : overshoot(&rs[i])),
                    color[s]);
        if (!which && s == FG__SIM_SYNC) {
            /* sync's stated bound, dashed, beside its measured overshoot. */
            fprintf(f,
                    "<polyline fill=\"none\" stroke=\"%s\" "
                    "stroke-dasharray=\"5,4\" points=\"",
                    color[s]);
            for (size_t i = 0; i < n; i++)
                if (rs[i].strategy == s)
                    fprintf(f, "%.1f,%.1f ", px(pn, rs[i].servers),
                            py(pn, rs[i].over_bound));
            fprintf(f, "\"/>\n");
        }
    }
}

int fg__sim_write_svg(const char *path, const fg__sim_params *p,
                      const fg__sim_result *rs, size_t n, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    const int W = 1000, H = 420;
    panel over = {70, 80, 360, 260, "", 0, 0, 0, 0, 0, 0};
    panel cmds = {520, 80, 360, 260, "", 1, 1e-4, 0, 0, 0, 0};
    const fg_limit *lim = &p->lim;
    over.title = lim->algorithm == FG_TOKEN_BUCKET
                     ? "Overshoot over the run (allowed beyond the limit)"
                     : "Overshoot, worst window (allowed beyond the limit)";
    cmds.title = "Store commands per request";
    double xlo = 0, xhi = 0;
    for (size_t i = 0; i < n; i++) {
        double lx = log10((double)rs[i].servers);
        if (i == 0 || lx < xlo)
            xlo = lx;
        if (i == 0 || lx > xhi)
            xhi = lx;
    }
    over.xlo = cmds.xlo = xlo;
    over.xhi = cmds.xhi = xhi;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
            "<text x=\"70\" y=\"24\" font-size=\"15\" font-weight=\"bold\">"
            "floodgate lab --simulate: %llu/%llums %s, %s arrivals, "
            "%g ms round trip</text>\n",
            W, H, W, H, (unsigned long long)lim->limit,
            (unsigned long long)(lim->period_us / 1000),
            fg_algorithm_name(lim->algorithm), fg__sim_arrival_name(p->arrival),
            p->rtt_us / 1000.0);
    fprintf(f,
            "<text x=\"70\" y=\"44\" fill=\"#666\">y: log10(1 + overshoot) "
            "on the left, log10 on the right (0 drawn at %g); dashed: "
            "sync's stated bound</text>\n",
            cmds.floor);
    draw_panel(f, &over, rs, n, 0);
    draw_panel(f, &cmds, rs, n, 1);
    int legend = 0;
    for (int s = 0; s < FG__SIM_NSTRATEGIES; s++) {
        int any = 0;
        for (size_t i = 0; i < n; i++)
            any |= rs[i].strategy == s;
        if (!any)
            continue;
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" "
                "fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                900, 90 + 20 * legend, color[s], 920, 95 + 20 * legend,
                fg__sim_strategy_name(s));
        legend++;
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
