/* local.h -- the approximate modes' local table, shared by local.c (the
 * table, sync, the interface of floodgate.h) and local_lease.c (leases). */
#ifndef FG_LOCAL_H
#define FG_LOCAL_H

#include <stdint.h>

#include "algo.h"
#include "mode.h"

typedef struct fg__local_entry {
    struct fg__local_entry *hnext;         /* hash chain */
    struct fg__local_entry *older, *newer; /* LRU list */
    struct fg__local_entry *lnext;         /* the due list */
    fg_local_waiter *wait_head, *wait_tail;
    uint64_t hash;
    /* sync: the view (what the store had left, and when it is full
     * again, on the caller's clock), the units in the sync in flight and
     * those admitted since it was made. lease: 'units' held, the lease's
     * end in 'reset_at'. */
    uint64_t view_rem, reset_at, sent, units, sent_at;
    /* sync: when the view was answered; units the store counted for
     * checks it decided here, and when the last of them was answered;
     * units of a check in the store (FG_LOCAL_CHECK) for it to take. */
    uint64_t view_at, counted, counted_at, granted;
    /* sync: units of checks the store is deciding here (fg_local_deciding)
     * and has not answered. */
    uint64_t deciding;
    /* sync, token bucket: when the bucket is full again by the view and
     * the units admitted here since (each spent from the bucket at its
     * time, as the store would: it refills meanwhile). */
    uint64_t tat;
    /* sync: when the first of 'units' was admitted, and of 'sent' (a
     * refund spent before it is not among them); when the last of each
     * was (their window, fg_add_at). */
    uint64_t units_at, sent_from, units_last, sent_last;
    /* lease: when the last take was answered, the units spent since, the
     * rate they made before it (used over dur), the store's refusal, what
     * the take in flight must give the check that asked for it, units to
     * give back, a failed take's time, and when the first take in flight
     * was sent. */
    uint64_t lease_at, used, last_used, last_dur, refused_until, need, give,
        failed_at, take_at;
    /* lease: the units the store's refusal was for: until 'refused_until'
     * it answers checks that need as many or more, not smaller ones. */
    uint64_t refused_need;
    /* lease: what the store had left, and when it would be full again, at
     * its last answer to a take: with the units held, what a check here
     * reports. */
    uint64_t store_rem, full_at;
    /* lease: when the units held, and those to give back, were taken (the
     * earliest take's send time), and until when a token bucket's debt
     * holds them (that send time plus the take's reset). */
    uint64_t held_at, held_until, give_at, give_until;
    /* lease: when a give-back of the key was last answered: a take sent
     * before then and refused may have reached the store ahead of it. */
    uint64_t gave_at;
    /* lease, sliding window: the end of the window the units held were
     * taken in (their lease may end sooner: its life is 1 s at most). */
    uint64_t win_end;
    /* When a refund last gave units back to the store: a sync view does
     * not know of them until an ask sent since is answered, and a lease's
     * take refused before it is not remembered. */
    uint64_t refund_at;
    uint32_t asks;   /* asks in flight */
    uint32_t taking; /* takes (lease) or checks (sync) among them */
    uint8_t synced;  /* sync: the view is the store's */
    uint8_t failed;  /* the last sync or take failed */
    uint8_t listed;  /* on the due list */
    uint8_t refused; /* sync: the store refused a check (FG_LOCAL_CHECK) */
    uint8_t refund;  /* sync: a refund since the view's ask (refund_at) */
    uint32_t keylen;
    char key[];
} fg__local_entry;

struct fg_local {
    fg_limit lim;
    fg_mode mode;
    fg_algorithm algorithm;
    uint64_t max_cost;  /* the limit, or the burst of a token bucket */
    uint64_t period_us; /* of the rate */
    uint64_t chunk_max; /* lease */
    uint64_t keep;      /* sync: the most limits one sync counts */
    uint64_t depth_us;  /* token bucket: a full bucket's time */
    uint64_t tick_us;   /* sync interval, or the lease tick */
    uint64_t life_us;   /* lease life, but fixed windows' */
    uint64_t next_due;
    uint64_t max_keys, count, held;
    uint64_t seed;
    size_t nbuckets; /* a power of two */
    fg__local_entry **buckets;
    fg__local_entry *newest, *oldest;
    fg__local_entry *due;      /* to send at the next tick */
    fg__local_entry *draining; /* this tick's, not yet sent */
    int flushing; /* 'draining' is fg_local_flush's list, not a tick's */
};

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* ceil(a * b / c), saturated; c > 0. */
static inline uint64_t muldiv_up(uint64_t a, uint64_t b, uint64_t c)
{
    unsigned __int128 r = ((unsigned __int128)a * b + c - 1) / c;
    return r > UINT64_MAX ? UINT64_MAX : (uint64_t)r;
}

/* The table's parts leases use: 'a' asks the store for 'units' of 'e'
 * (one more ask in flight); put 'e' on the due list (once); queue 'w' to
 * be woken when the ask in flight for 'e' is answered. */
void fg__local_ask_for(fg_local_ask *a, fg_local_op op, fg__local_entry *e,
                       uint64_t units);
void fg__local_list_due(fg_local *lc, fg__local_entry *e);
void fg__local_queue_waiter(fg__local_entry *e, fg_local_waiter *w);
/* Units of 'key' were given back to the store at 'now': a sync view lacks
 * them until the store answers an ask sent since, so the next check asks
 * it; a lease's memory of the store's last refusal no longer holds. */
void fg__local_store_refunded(fg_local *lc, const char *key, size_t keylen,
                              uint64_t now);

/* A sync limit's view of 'key' refuses 'cost' at 'now' (view_refuses:
 * an old view never admits, but may refuse): 1, the refusal in 'd'; 0
 * when it does not, or there is no view. For a check the store cannot
 * decide (its breaker open): a key refused here stays refused. */
int fg__local_view_refusal(fg_local *lc, const char *key, size_t keylen,
                           uint64_t cost, uint64_t now, fg_decision *d);

/* Leases (local_lease.c). fg__lease_check: fg_local_check of a lease,
 * decided on the units 'e' holds, or a take in 'ask' (or 'w' queued
 * behind the one in flight). fg__lease_answer: a take's answer; 1 when
 * 'ask' holds another ask to send. fg__lease_give: the units held are to
 * go back. fg__lease_lapse: the units held end with their lease (a fixed
 * window's die with it, others go back). */
int fg__lease_check(fg_local *lc, fg__local_entry *e, uint64_t cost,
                    uint64_t now, fg_decision *d, fg_local_ask *ask,
                    fg_local_waiter *w);
int fg__lease_answer(fg_local *lc, fg__local_entry *e, fg_local_ask *ask,
                     uint64_t now, int rc, const fg_decision *d);
void fg__lease_give(fg_local *lc, fg__local_entry *e);
void fg__lease_lapse(fg_local *lc, fg__local_entry *e);

#endif
