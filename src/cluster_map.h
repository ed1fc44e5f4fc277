/* cluster_map.h -- Redis Cluster's key space, with no I/O: the slot of a
 * key (CRC16 with hash tags, as the cluster specification defines it), the
 * slot map read from CLUSTER SLOTS, and the redirections MOVED and ASK. */
#ifndef FG_CLUSTER_MAP_H
#define FG_CLUSTER_MAP_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define FG__CLUSTER_SLOTS     16384
#define FG__CLUSTER_NODES_MAX 64
/* "host:port", IPv6 in brackets: a host name of up to 253 bytes. */
#define FG__CLUSTER_ADDR_MAX 264
/* node_addr's "no address" (cluster_map.c): not an error code. */
#define FG__CLUSTER_NO_ADDR 1

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the cluster's
 * key hash. */
uint16_t fg__crc16(const void *buf, size_t len);

/* The slot of a whole key: the hash of its first {...} part when that is
 * not empty, else of the whole key. */
unsigned fg__cluster_keyslot(const void *key, size_t len);

/* The masters of a slot map: the address of each ("host:port"), and for
 * each slot its master's index, or 255 when no master serves it. */
typedef struct fg__cluster_map {
    unsigned nmasters;
    char master[FG__CLUSTER_NODES_MAX][FG__CLUSTER_ADDR_MAX];
    uint8_t slot[FG__CLUSTER_SLOTS];
} fg__cluster_map;

/* Read the reply 'r' to CLUSTER SLOTS into 'm'. FG_OK, or FG_EPROTO when it
 * is not such a reply (an error reply included: a node without cluster
 * mode answers "ERR This instance has cluster support disabled"), or
 * FG_ERANGE for more than FG__CLUSTER_NODES_MAX masters. A master given as
 * "" or "?" (a node that does not know its own address) takes 'host'. */
int fg__cluster_map_parse(fg__cluster_map *m, const redisReply *r,
                          const char *host);

/* The index of 'addr' in 'm' (-1: none). */
int fg__cluster_map_find(const fg__cluster_map *m, const char *addr);

/* A redirection: "MOVED 3999 127.0.0.1:6381" or "ASK 3999 ...". */
enum { FG__CLUSTER_MOVED = 1, FG__CLUSTER_ASK = 2 };
typedef struct fg__cluster_redirect {
    int kind; /* 0: not a redirection */
    unsigned slot;
    char addr[FG__CLUSTER_ADDR_MAX];
} fg__cluster_redirect;

/* Read an error reply's text ('len' bytes) as a redirection into 'rd';
 * rd->kind is 0 when it is none (or malformed). An empty host (":6381",
 * Redis's unknown endpoint) is 'self', the host of the node that sent
 * it. */
void fg__cluster_redirect_parse(const char *s, size_t len, const char *self,
                                fg__cluster_redirect *rd);

#endif
