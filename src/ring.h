/* ring.h -- consistent hashing of keys onto nodes (ketama-style), pure.
 *
 * Each node owns FG__RING_POINTS points on a ring of 2^64 positions, at the
 * hashes of "NAME-0", "NAME-1", ... where NAME is what identifies the node
 * (host:port/db). A key belongs to the node of the first point at or after
 * its own hash, wrapping around. The points depend only on the names, never
 * on their order, so every server that lists the same nodes puts a key on
 * the same node; adding an (N+1)th node takes it about 1/(N+1) of the keys,
 * all from the others, and moves no key between the others.
 *
 * The hash is fixed for all time (it decides where counters live): 64-bit
 * FNV-1a over the bytes, then the 64-bit finalizer of MurmurHash3 (fmix64),
 * which spreads FNV's weak low bits. Byte order does not enter it. */
#ifndef FG_RING_H
#define FG_RING_H

#include <stddef.h>
#include <stdint.h>

#define FG__RING_POINTS    160
#define FG__RING_NODES_MAX 64

typedef struct fg__ring_point {
    uint64_t at;
    uint32_t node;
} fg__ring_point;

typedef struct fg__ring {
    fg__ring_point *points; /* sorted by 'at' */
    size_t npoints;
} fg__ring;

uint64_t fg__ring_hash(const void *p, size_t len);

/* Place 'n' nodes (1 .. FG__RING_NODES_MAX) named 'names' on 'r'. FG_OK,
 * FG_EINVAL (no node, too many, or two names alike) or FG_ENOMEM; either
 * way fg__ring_free releases it. */
int fg__ring_init(fg__ring *r, const char *const *names, unsigned n);
void fg__ring_free(fg__ring *r);

/* The node of 'key' ('len' bytes, binary-safe). */
unsigned fg__ring_node(const fg__ring *r, const void *key, size_t len);

#endif
