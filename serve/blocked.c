/* blocked.c -- the blocked-key cache (pure; one per worker, no locks). */
#include <stdlib.h>
#include <string.h>

#include "blocked.h"
#include "floodgate.h"

#define WAYS 4

typedef struct entry {
    uint64_t hash;
    uint64_t cost;
    fg__blocked_hit hit;
    uint32_t lim;
    uint32_t len;
    char *key; /* NULL: free slot */
} entry;

struct fg__blocked {
    uint64_t seed;
    uint32_t nsets;
    entry *e;
};

/* FNV-1a over the limit and the key, then a final mix so that the low bits
 * used for the set index depend on every byte. */
static uint64_t hash(uint64_t seed, uint32_t lim, const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (int i = 0; i < 4; i++) {
        h ^= (lim >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

fg__blocked *fg__blocked_new(uint32_t entries, uint64_t seed)
{
    fg__blocked *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->seed = seed;
    c->nsets = entries / WAYS + (entries % WAYS != 0);
    if (c->nsets == 0)
        c->nsets = 1;
    c->e = calloc((size_t)c->nsets * WAYS, sizeof(entry));
    if (!c->e) {
        free(c);
        return NULL;
    }
    return c;
}

void fg__blocked_clear(fg__blocked *c)
{
    for (size_t i = 0; i < (size_t)c->nsets * WAYS; i++) {
        free(c->e[i].key);
        c->e[i].key = NULL;
    }
}

void fg__blocked_free(fg__blocked *c)
{
    if (!c)
        return;
    fg__blocked_clear(c);
    free(c->e);
    free(c);
}

static entry *find(fg__blocked *c, uint64_t h, uint32_t lim, const char *key,
                   size_t len)
{
    entry *set = &c->e[(h % c->nsets) * WAYS];
    for (int i = 0; i < WAYS; i++) {
        entry *e = &set[i];
        if (e->key && e->hash == h && e->lim == lim && e->len == len &&
            memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

int fg__blocked_get(fg__blocked *c, uint32_t lim, const char *key, size_t len,
                    uint64_t cost, uint64_t now_us, fg__blocked_hit *hit)
{
    uint64_t h = hash(c->seed, lim, key, len);
    entry *e = find(c, h, lim, key, len);
    if (!e)
        return 0;
    if (now_us >= e->hit.until_us) {
        free(e->key);
        e->key = NULL;
        return 0;
    }
    if (cost < e->cost)
        return 0;
    *hit = e->hit;
    return 1;
}

int fg__blocked_put(fg__blocked *c, uint32_t lim, const char *key, size_t len,
                    uint64_t cost, uint64_t now_us, const fg__blocked_hit *hit)
{
    if (hit->until_us <= now_us)
        return 0;
    uint64_t h = hash(c->seed, lim, key, len);
    entry *e = find(c, h, lim, key, len);
    if (!e) {
        /* A free or expired way, else the one that expires first. */
        entry *set = &c->e[(h % c->nsets) * WAYS];
        e = &set[0];
        for (int i = 0; i < WAYS; i++) {
            if (!set[i].key || set[i].hit.until_us <= now_us) {
                e = &set[i];
                break;
            }
            if (set[i].hit.until_us < e->hit.until_us)
                e = &set[i];
        }
        char *k = malloc(len ? len : 1);
        if (!k)
            return FG_ENOMEM;
        memcpy(k, key, len);
        free(e->key);
        e->key = k;
        e->hash = h;
        e->lim = lim;
        e->len = (uint32_t)len;
    }
    e->cost = cost;
    e->hit = *hit;
    return 0;
}

uint64_t fg__blocked_count(const fg__blocked *c, uint64_t now_us)
{
    uint64_t n = 0;
    for (size_t i = 0; i < (size_t)c->nsets * WAYS; i++)
        if (c->e[i].key && c->e[i].hit.until_us > now_us)
            n++;
    return n;
}
