/* dns.h -- host names looked up without blocking an event loop (dns.c).
 *
 * An async store learns addresses as it runs: Sentinel announces masters
 * and replicas, and Cluster its nodes, by host name when so configured
 * (resolve-hostnames / announce-hostnames, cluster-announce-hostname).
 * hiredis 0.14 and getaddrinfo() would resolve them with a blocking call on
 * the store's loop, so such a store looks them up with libevent's evdns
 * (the nameservers and search list of /etc/resolv.conf, the names of
 * /etc/hosts) and connects to the numeric address. A blocking store keeps
 * getaddrinfo(): it blocks by nature. */
#ifndef FG_DNS_H
#define FG_DNS_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>

#include <event2/event.h>

/* How long a name's answer is waited for: later, the lookup fails (and
 * is tried again as the store's lookups are). */
#define FG__DNS_TIMEOUT_MS 1000u
/* Each question's try: its timeout (seconds) and how many, within it. */
#define FG__DNS_TRY_TIMEOUT "0.25"
#define FG__DNS_TRIES       "3"

typedef struct fg__dns fg__dns;
typedef struct fg__dns_q fg__dns_q;

/* The answer to a lookup: FG_OK with the numeric address in 'addr', else a
 * negative FG_E* code (FG_ETIMEOUT: no answer in time) and the reason in
 * 'why'. */
typedef void (*fg__dns_cb)(int rc, const char *addr, const char *why,
                           void *data);

/* A resolver on 'evb', set up from /etc/resolv.conf and /etc/hosts (read
 * now). NULL when out of memory. */
fg__dns *fg__dns_new(struct event_base *evb);
/* The same with another file than /etc/resolv.conf (tests). A file that is
 * missing or names no nameserver leaves 127.0.0.1, as glibc does. */
fg__dns *fg__dns_new_conf(struct event_base *evb, const char *resolv_conf);
/* Free 'd' once its lookups are over: a lookup given up (fg__dns_cancel)
 * is finished by evdns on the loop later, which then frees what is left. */
void fg__dns_free(fg__dns *d);
/* The same, never from within this call: from the loop's next turn, after
 * whatever evdns has already queued for it (a nameserver's answer to a
 * probe), for a resolver replaced while its loop runs on. */
void fg__dns_free_later(fg__dns *d);
/* A number that changes when /etc/resolv.conf or /etc/hosts does (their
 * inode, size and time of change): a resolver reads them when made. */
uint64_t fg__dns_files_stamp(void);

/* Look up 'host' (a name, or a numeric address). FG_OK with the address in
 * 'addr' when known at once (a numeric address, a name in /etc/hosts); 1
 * when the answer will come to 'cb' on the loop, within
 * FG__DNS_TIMEOUT_MS, with '*q' set to cancel it; else a negative FG_E*
 * code with the reason in 'why' ('cb' is never called then). The address
 * is fg__dns_pick's, or 'keep' (NULL: none) when the name has it among
 * its addresses: a name of several addresses, in whatever order the
 * nameserver gives them, does not move a store that uses one of them. */
int fg__dns_lookup(fg__dns *d, const char *host, const char *keep,
                   fg__dns_cb cb, void *data, fg__dns_q **q,
                   char addr[INET6_ADDRSTRLEN], char *why, size_t whylen);
/* Give up lookup 'q' before its answer: 'cb' is not called. */
void fg__dns_cancel(fg__dns_q *q);

/* A store's host at open, with a blocking getaddrinfo(): FG_OK and the
 * address fg__dns_pick takes, else FG_EBACKEND and the reason in 'why'. */
int fg__dns_resolve(const char *host, char addr[INET6_ADDRSTRLEN], char *why,
                    size_t whylen);

/* The address to connect to among getaddrinfo()'s answers 'res': the first
 * IPv4 one, else the first IPv6 one (hiredis's own preference), written
 * numerically into 'addr'. 0 when there is none. */
int fg__dns_pick(const struct addrinfo *res, char addr[INET6_ADDRSTRLEN]);

#endif
