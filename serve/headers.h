/* headers.h -- the text of a decision: RateLimit headers and JSON (pure).
 *
 * Header syntax follows draft-ietf-httpapi-ratelimit-headers (-08 and
 * later): both fields are Structured Field Lists, one item per limit,
 *   RateLimit-Policy: "bookings";q=10;w=1
 *   RateLimit: "bookings";r=3;t=1 */
#ifndef FG_SERVE_HEADERS_H
#define FG_SERVE_HEADERS_H

#include <stddef.h>
#include <stdint.h>

#include "floodgate.h"

/* A bounded string builder: writes past 'cap' set 'overflow' and are
 * dropped, so a caller checks once at the end. */
typedef struct fg__sbuf {
    char *p;
    size_t len, cap;
    int overflow;
} fg__sbuf;

void fg__sbuf_init(fg__sbuf *b, char *mem, size_t cap);
void fg__sbuf_puts(fg__sbuf *b, const char *s);
void fg__sbuf_put(fg__sbuf *b, const char *s, size_t n);
/* The decimal digits of 'v' at 'p' (at most 20); returns their count. */
size_t fg__u64_digits(char *p, uint64_t v);
/* The decimal digits of 'v'. */
void fg__sbuf_u64(fg__sbuf *b, uint64_t v);

/* Whole seconds, rounded up: never tell a client to come back early. */
uint64_t fg__ms_to_s_up(uint64_t ms);

/* The window of a limit in whole seconds (at least 1). */
uint64_t fg__window_s(uint64_t period_us);
/* The quota 'q' of a limit per 'period_us' over the policy's 'window_s'
 * whole seconds (fg__window_s): 'q' for a period of whole seconds, else
 * scaled to the window and rounded down (100/500ms is q=200;w=1). */
uint64_t fg__policy_quota(uint64_t q, uint64_t period_us, uint64_t window_s);

/* Retry-After of a refusal: whole seconds rounded up, at least 1. */
uint64_t fg__retry_after_s(const fg_decision *d);

/* Append one list item (a ", " first when 'b' is not empty). */
void fg__fmt_policy_item(fg__sbuf *b, const char *name, uint64_t quota,
                         uint64_t window_s);
void fg__fmt_ratelimit_item(fg__sbuf *b, const char *name,
                            const fg_decision *d);

/* The JSON body of a decision of limit 'name'; 'booked' adds
 * "booked":true/false first (the demo API). */
void fg__fmt_decision_json(fg__sbuf *b, const char *name, const fg_decision *d,
                           int booked);

/* {"error":"..."} with 'msg' escaped; with 'fallback' instead when that
 * does not fit 'b' (a whole body, never one cut short). */
void fg__fmt_error_json(fg__sbuf *b, const char *msg, const char *fallback);

/* Append 's' ('n' bytes) as a JSON string, quotes included; a byte that
 * is not UTF-8 becomes \ufffd. */
void fg__json_str(fg__sbuf *b, const char *s, size_t n);

#endif
