/* sim_heap.c -- the simulator's events, in a binary min-heap on (time,
 * order of pushing): O(log n) a push or a pop, one array for the whole run,
 * grown by doubling, so that a run of millions of events makes a few dozen
 * allocations. */
#include <stdlib.h>

#include "simulate.h"

void fg__sim_heap_init(fg__sim_heap *h)
{
    h->v = NULL;
    h->n = h->cap = 0;
    h->seq = 0;
}

void fg__sim_heap_free(fg__sim_heap *h)
{
    free(h->v);
    fg__sim_heap_init(h);
}

/* 1 when 'a' comes out before 'b'. */
static int before(const fg__sim_event *a, const fg__sim_event *b)
{
    return a->at_us < b->at_us || (a->at_us == b->at_us && a->seq < b->seq);
}

int fg__sim_heap_push(fg__sim_heap *h, uint64_t at_us, uint32_t kind,
                      uint32_t who, uint32_t slot)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        fg__sim_event *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    fg__sim_event e = {at_us, h->seq++, kind, who, slot};
    /* Sift up: move parents down until 'e' fits. */
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = e;
    return 0;
}

int fg__sim_heap_pop(fg__sim_heap *h, fg__sim_event *out)
{
    if (h->n == 0)
        return 0;
    *out = h->v[0];
    fg__sim_event last = h->v[--h->n];
    /* Sift down: the last event from the root, smaller children up. */
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
    return 1;
}
