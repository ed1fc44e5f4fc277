/* local_lease.c -- leases (mode = lease): a key's units taken from the
 * store in chunks sized by its traffic here, spent here, and given back
 * when their lease ends. A check is decided only on units held, so a
 * lease never admits over the limit. Pure, as local.c. */
#include <string.h>

#include "local.h"
#include "error.h"

typedef fg__local_entry entry;

/* Move the 'e->units' held to those to give back, with when they were
 * taken: the earliest of both. */
void fg__lease_give(fg_local *lc, entry *e)
{
    if (!e->give || e->held_at < e->give_at)
        e->give_at = e->held_at;
    if (!e->give || e->held_until < e->give_until)
        e->give_until = e->held_until;
    e->give += e->units;
    lc->held -= e->units;
    e->units = 0;
}

void fg__lease_lapse(fg_local *lc, entry *e)
{
    /* A fixed window's units die with their window; others go back. */
    if (lc->algorithm != FG_FIXED_WINDOW) {
        fg__lease_give(lc, e);
        return;
    }
    lc->held -= e->units;
    e->units = 0;
}

/* The next take's size: what this key's traffic here used in the last
 * lease's time, over the new lease's life; 'cost' at least, the largest
 * chunk at most. Just 'cost' after a take that failed, until one is
 * answered: a take that timed out may still have been counted by the
 * store, and lost to every server until its window ends, so each probe
 * of a failing store risks one check's units, as an exact check does,
 * not a chunk. */
static uint64_t chunk_for(const fg_local *lc, const entry *e, uint64_t cost,
                          uint64_t now)
{
    if (e->failed)
        return cost;
    /* The lease ending now gives the rate; one answered this very us, the
     * lease before it. */
    uint64_t used = e->last_used, dur = e->last_dur, want = cost;
    if (e->lease_at && now > e->lease_at) {
        used = e->used;
        dur = now - e->lease_at;
    }
    if (used && dur) {
        /* A lease's life of traffic, or what is left of its window if
         * less. (A fixed window's lease lasts to its window's end, but is
         * sized on a lease's life: sized on what is left of a long window,
         * an hour or a day, each busy server would take the largest chunk
         * at once and hold it to the window's end, and a server that came
         * later would refuse below the limit all that time.) */
        uint64_t horizon = lc->life_us;
        if (lc->algorithm != FG_TOKEN_BUCKET && e->reset_at > now &&
            e->reset_at - now < horizon)
            horizon = e->reset_at - now;
        want = muldiv_up(used, horizon, dur);
    }
    if (want > lc->chunk_max)
        want = lc->chunk_max;
    return want > cost ? want : cost;
}

/* What a check decided here reports: the units this server holds and
 * what the store had left at its last answer (the other servers' takes
 * since then unseen), and until when the store would be full again. */
static void lease_report(const entry *e, uint64_t now, fg_decision *d)
{
    d->remaining = e->units + e->store_rem;
    d->reset_us = e->full_at > now ? e->full_at - now : 0;
}

int fg__lease_check(fg_local *lc, entry *e, uint64_t cost, uint64_t now,
                    fg_decision *d, fg_local_ask *ask, fg_local_waiter *w)
{
    if (e->units && now >= e->reset_at)
        fg__lease_lapse(lc, e);
    if (e->give)
        fg__local_list_due(lc, e);
    memset(d, 0, sizeof(*d));
    d->limit = lc->max_cost;
    d->source = FG_SOURCE_LEASE;
    if (e->units >= cost) {
        e->units -= cost;
        lc->held -= cost;
        e->used += cost;
        d->allowed = 1;
        lease_report(e, now, d);
        fg__decision_ms(d);
        return FG_OK;
    }
    if (e->failed && now <= e->failed_at)
        return FG_EBACKEND;
    if (e->refused_until > now && cost - e->units >= e->refused_need) {
        lease_report(e, now, d);
        /* A token bucket's take waits for half a chunk: the store may
         * have had the units of this check. Refused, it reports less. */
        if (d->remaining >= cost)
            d->remaining = cost - 1;
        d->retry_after_us = e->refused_until - now;
        fg__decision_ms(d);
        return FG_OK;
    }
    if (e->taking && w) {
        fg__local_queue_waiter(e, w);
        return FG_LOCAL_WAITED;
    }
    /* The units held (fewer than 'cost') stay, and count toward it. */
    uint64_t want = chunk_for(lc, e, cost - e->units, now);
    e->need = cost - e->units;
    if (!e->taking)
        e->take_at = now;
    e->taking++;
    fg__local_ask_for(ask, FG_LOCAL_TAKE, e, want);
    return FG_LOCAL_ASKED;
}

/* The end of the sliding window that granted a take sent at 'sent', from
 * the take's reset: the end of the window after it (the window holds the
 * units just taken). A unit taken in a window is spent in it: in the
 * next, the taking window weighs less in the store's estimate than the
 * unit spent. Decided on the store's clock, after the send, the end
 * comes early, never late. */
static uint64_t window_end(const fg_local *lc, uint64_t sent, uint64_t reset)
{
    return sent + (reset > lc->period_us ? reset - lc->period_us : 0);
}

int fg__lease_answer(fg_local *lc, entry *e, fg_local_ask *ask, uint64_t now,
                     int rc, const fg_decision *d)
{
    if (rc == FG_OK && d && d->allowed) {
        if (e->lease_at && now > e->lease_at) {
            e->last_used = e->used;
            e->last_dur = now - e->lease_at;
        }
        e->lease_at = now;
        e->used = 0;
        /* A sliding window's take the store granted in a later window
         * than the units held (sent before the edge, decided after it):
         * those go back now, spent only in the window that took them.
         * Two takes' ends in one window differ by their latencies, those
         * of two windows by a period: half a period tells them apart. */
        uint64_t wend = window_end(lc, e->take_at, d->reset_us);
        if (lc->algorithm == FG_SLIDING_WINDOW && e->units &&
            wend > e->win_end + lc->period_us / 2)
            fg__lease_give(lc, e);
        if (!e->units)
            e->win_end = wend;
        /* The units already held were taken before these. */
        uint64_t until = e->take_at + d->reset_us;
        e->store_rem = d->remaining;
        e->full_at = until;
        if (!e->units || e->take_at < e->held_at)
            e->held_at = e->take_at;
        if (!e->units || until < e->held_until)
            e->held_until = until;
        e->units += ask->units;
        lc->held += ask->units;
        /* A fixed window's time is the caller's, read when the take was
         * sent: its end is then exact from the send time, where counted
         * from the answer it would last a round trip into the next window,
         * beside that window's own limit. (With several takes in flight,
         * the first one's send time ends the lease early, never late.) */
        uint64_t end = now + lc->life_us;
        if (lc->algorithm == FG_FIXED_WINDOW)
            end = e->take_at + d->reset_us;
        else if (lc->algorithm == FG_SLIDING_WINDOW)
            end = min_u64(end, window_end(lc, e->take_at, d->reset_us));
        /* Units of an earlier lease of the same window keep their end. */
        if (end > e->reset_at)
            e->reset_at = end;
        e->refused_until = 0;
        e->failed = 0;
        /* A fixed window's units die with their window, sending nothing:
         * only leases that end in a give-back wait on the due list. */
        if (lc->algorithm != FG_FIXED_WINDOW)
            fg__local_list_due(lc, e);
    } else if (rc == FG_OK && d) {
        uint64_t r = d->remaining;
        e->store_rem = r;
        e->full_at = e->take_at + d->reset_us;
        /* The chunk did not fit but what is left does: take that. A
         * token bucket's refill takes half a chunk at least, so that the
         * servers take chunks as they refill, not a unit each. */
        uint64_t least = e->need;
        if (lc->algorithm == FG_TOKEN_BUCKET && ask->units / 2 > least)
            least = ask->units / 2;
        if (r >= least && r < ask->units) {
            ask->units = r;
            e->asks++;
            if (!e->taking)
                e->take_at = now; /* the follow-up is sent now */
            e->taking++;
            return 1;
        }
        /* Asked again once the chunk fits: a refilling bucket then
         * sees one take a chunk, not one ask a unit. A fixed window's
         * wait runs from the take's send time, as its end does. */
        uint64_t wait = d->retry_after_us;
        uint64_t from = lc->algorithm == FG_FIXED_WINDOW && e->take_at <= now
                            ? e->take_at
                            : now;
        /* A give-back answered since the take was sent may have come to
         * the store after it (another connection, a blocking store's
         * pool), and so may a refund given back there since: the next
         * check asks again rather than wait. */
        if ((!e->gave_at || e->gave_at < e->take_at) &&
            (!e->refund_at || e->refund_at < e->take_at)) {
            e->refused_until = from + (wait ? wait : 1);
            e->refused_need = e->need;
        }
        e->failed = 0;
    } else {
        e->failed = 1;
        e->failed_at = now;
    }
    return 0;
}
