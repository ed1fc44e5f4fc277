/* sentinel_moved.c -- promotions this process followed, for every Sentinel
 * store of it.
 *
 * A store that follows a promotion event switches to the new master before
 * the sentinels have seen the promotion: until they do (about a second),
 * they name the old master, which still says it is one. A store opened
 * meanwhile (serve opens new ones at each reload) would ask them and write
 * to the old master what the new one never sees. So a followed promotion
 * is kept here, by master name and first sentinel, and a sentinel's answer
 * naming its old master is read as naming the new one, until the
 * sentinels tell of the switch, the new master says it is a replica (an
 * aborted failover), or MOVED_HOLD_US have passed. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sentinel_store.h"
#include "clock.h"

#define MOVED_MAX     8
#define MOVED_HOLD_US 5000000u

typedef struct moved {
    char master[FG__SENTINEL_NAME_MAX + 1];
    char sentinel[FG__SENTINEL_HOST_MAX];
    int sentinel_port;
    char from[FG__SENTINEL_HOST_MAX], to[FG__SENTINEL_HOST_MAX];
    int from_port, to_port;
    uint64_t until_us; /* 0: free */
} moved;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static moved table[MOVED_MAX];

static int is_of(const moved *m, const fg__sentinel_store *st)
{
    return m->until_us && !strcmp(m->master, st->u.master) &&
           m->sentinel_port == st->u.s[0].port &&
           !strcmp(m->sentinel, st->u.s[0].host);
}

void fg__sentinel_moved(const fg__sentinel_store *st, const char *from,
                        int from_port, const char *to, int to_port)
{
    uint64_t now = fg__mono_precise_us();
    pthread_mutex_lock(&mu);
    moved *slot = NULL;
    for (int i = 0; i < MOVED_MAX; i++) {
        moved *m = &table[i];
        if (is_of(m, st) || (!slot && m->until_us <= now))
            slot = m;
        if (is_of(m, st))
            break;
    }
    if (!slot) { /* the one that ends first */
        slot = &table[0];
        for (int i = 1; i < MOVED_MAX; i++)
            if (table[i].until_us < slot->until_us)
                slot = &table[i];
    }
    snprintf(slot->master, sizeof slot->master, "%s", st->u.master);
    snprintf(slot->sentinel, sizeof slot->sentinel, "%s", st->u.s[0].host);
    slot->sentinel_port = st->u.s[0].port;
    snprintf(slot->from, sizeof slot->from, "%s", from);
    snprintf(slot->to, sizeof slot->to, "%s", to);
    slot->from_port = from_port;
    slot->to_port = to_port;
    slot->until_us = now + MOVED_HOLD_US;
    pthread_mutex_unlock(&mu);
}

int fg__sentinel_moved_to(const fg__sentinel_store *st, char *host,
                          size_t hostlen, int *port)
{
    uint64_t now = fg__mono_precise_us();
    int found = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MOVED_MAX && !found; i++) {
        moved *m = &table[i];
        if (is_of(m, st) && now < m->until_us && m->from_port == *port &&
            !strcmp(m->from, host)) {
            snprintf(host, hostlen, "%s", m->to);
            *port = m->to_port;
            found = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    return found;
}

void fg__sentinel_moved_seen(const fg__sentinel_store *st)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MOVED_MAX; i++)
        if (is_of(&table[i], st))
            table[i].until_us = 0;
    pthread_mutex_unlock(&mu);
}
