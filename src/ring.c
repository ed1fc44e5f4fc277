/* ring.c -- see ring.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "floodgate.h"
#include "ring.h"
#include "alloc.h"

uint64_t fg__ring_hash(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Points in ring order. */
static int point_cmp(const void *a, const void *b)
{
    const fg__ring_point *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return 0;
}

int fg__ring_init(fg__ring *r, const char *const *names, unsigned n)
{
    memset(r, 0, sizeof(*r));
    if (n == 0 || n > FG__RING_NODES_MAX)
        return FG_EINVAL;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return FG_EINVAL;
    r->points = fg__calloc((size_t)n * FG__RING_POINTS, sizeof(*r->points));
    if (!r->points)
        return FG_ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        for (unsigned k = 0; k < FG__RING_POINTS; k++) {
            char buf[512];
            int len = snprintf(buf, sizeof(buf), "%s-%u", names[i], k);
            if (len < 0 || (size_t)len >= sizeof(buf))
                len = (int)sizeof(buf) - 1;
            fg__ring_point *pt = &r->points[r->npoints++];
            pt->at = fg__ring_hash(buf, (size_t)len);
            pt->node = i;
        }
    }
    qsort(r->points, r->npoints, sizeof(*r->points), point_cmp);
    /* Two points at one position (not seen in practice): the node whose
     * name hashes lower comes first, so that even then the ring does not
     * depend on the order of the list. */
    for (size_t i = 1; i < r->npoints; i++) {
        fg__ring_point *a = &r->points[i - 1], *b = &r->points[i];
        if (a->at == b->at) {
            uint64_t ha = fg__ring_hash(names[a->node], strlen(names[a->node]));
            uint64_t hb = fg__ring_hash(names[b->node], strlen(names[b->node]));
            if (hb < ha) {
                uint32_t t = a->node;
                a->node = b->node;
                b->node = t;
            }
        }
    }
    return FG_OK;
}

void fg__ring_free(fg__ring *r)
{
    fg__free(r->points);
    memset(r, 0, sizeof(*r));
}

unsigned fg__ring_node(const fg__ring *r, const void *key, size_t len)
{
    uint64_t h = fg__ring_hash(key, len);
    size_t lo = 0, hi = r->npoints;
    /* The first point at or after 'h'; past the last, the first. */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->points[mid].at < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return r->points[lo == r->npoints ? 0 : lo].node;
}
