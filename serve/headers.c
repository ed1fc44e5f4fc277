/* headers.c -- RateLimit headers and JSON bodies (pure). */
#include <inttypes.h>
#include <string.h>

#include "headers.h"
#include "log.h"

void fg__sbuf_init(fg__sbuf *b, char *mem, size_t cap)
{
    b->p = mem;
    b->len = 0;
    b->cap = cap;
    b->overflow = 0;
    if (cap)
        mem[0] = '\0';
}

void fg__sbuf_put(fg__sbuf *b, const char *s, size_t n)
{
    if (b->overflow || b->len + n + 1 > b->cap) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void fg__sbuf_puts(fg__sbuf *b, const char *s)
{
    fg__sbuf_put(b, s, strlen(s));
}

size_t fg__u64_digits(char *p, uint64_t v)
{
    char tmp[20];
    size_t n = sizeof(tmp);
    do {
        tmp[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(p, tmp + n, sizeof(tmp) - n);
    return sizeof(tmp) - n;
}

void fg__sbuf_u64(fg__sbuf *b, uint64_t v)
{
    char tmp[20];
    fg__sbuf_put(b, tmp, fg__u64_digits(tmp, v));
}

uint64_t fg__ms_to_s_up(uint64_t ms)
{
    return ms / 1000 + (ms % 1000 != 0);
}

uint64_t fg__window_s(uint64_t period_us)
{
    uint64_t s = period_us / 1000000 + (period_us % 1000000 != 0);
    return s ? s : 1;
}

uint64_t fg__policy_quota(uint64_t q, uint64_t period_us, uint64_t window_s)
{
    if (period_us % 1000000 == 0)
        return q;
    return (uint64_t)((unsigned __int128)q * window_s * 1000000 / period_us);
}

uint64_t fg__retry_after_s(const fg_decision *d)
{
    uint64_t s = fg__ms_to_s_up(d->retry_after_ms);
    return s ? s : 1;
}

/* A structured field's integer has at most 15 digits (RFC 8941): a
 * larger value is written as the largest. */
static uint64_t sf_int(uint64_t v)
{
    return v > 999999999999999ull ? 999999999999999ull : v;
}

void fg__fmt_policy_item(fg__sbuf *b, const char *name, uint64_t quota,
                         uint64_t window_s)
{
    fg__sbuf_puts(b, b->len ? ", \"" : "\"");
    fg__sbuf_puts(b, name);
    fg__sbuf_puts(b, "\";q=");
    fg__sbuf_u64(b, sf_int(quota));
    fg__sbuf_puts(b, ";w=");
    fg__sbuf_u64(b, sf_int(window_s));
}

void fg__fmt_ratelimit_item(fg__sbuf *b, const char *name, const fg_decision *d)
{
    fg__sbuf_puts(b, b->len ? ", \"" : "\"");
    fg__sbuf_puts(b, name);
    fg__sbuf_puts(b, "\";r=");
    fg__sbuf_u64(b, sf_int(d->remaining));
    fg__sbuf_puts(b, ";t=");
    fg__sbuf_u64(b, sf_int(fg__ms_to_s_up(d->reset_ms)));
}

void fg__json_str(fg__sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    fg__sbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        size_t run = i;
        while (run < n && s[run] != '"' && s[run] != '\\' &&
               (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7f)
            run++;
        if (run > i) { /* plain bytes go in one copy */
            fg__sbuf_put(b, s + i, run - i);
            i = run;
            if (i == n)
                break;
        }
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            fg__sbuf_put(b, e, 2);
        } else if (ch < 0x20 || ch == 0x7f) {
            char e[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            fg__sbuf_put(b, e, 6);
        } else {
            /* JSON text is UTF-8: a byte that begins no character (a
             * store's error, a name) becomes U+FFFD. */
            size_t u = fg__utf8_len((const unsigned char *)s + i, n - i);
            if (u) {
                fg__sbuf_put(b, s + i, u);
                i += u - 1;
            } else {
                fg__sbuf_put(b, "\\ufffd", 6);
            }
        }
    }
    fg__sbuf_put(b, "\"", 1);
}

void fg__fmt_decision_json(fg__sbuf *b, const char *name, const fg_decision *d,
                           int booked)
{
    const char *src = fg_source_name(d->source);
    fg__sbuf_puts(b, "{");
    if (booked)
        fg__sbuf_puts(b, d->allowed ? "\"booked\":true," : "\"booked\":false,");
    fg__sbuf_puts(b, d->allowed ? "\"allowed\":true,\"limit\":"
                                : "\"allowed\":false,\"limit\":");
    fg__sbuf_u64(b, d->limit);
    if (d->source == FG_SOURCE_FAIL_OPEN ||
        d->source == FG_SOURCE_FAIL_CLOSED) {
        /* The store did not answer: nothing is known of what is left, nor
         * of when it is whole again (as floodgate check --json says). */
        fg__sbuf_puts(b, ",\"remaining\":null,\"reset_ms\":null");
    } else {
        fg__sbuf_puts(b, ",\"remaining\":");
        fg__sbuf_u64(b, d->remaining);
        fg__sbuf_puts(b, ",\"reset_ms\":");
        fg__sbuf_u64(b, d->reset_ms);
    }
    fg__sbuf_puts(b, ",\"retry_after_ms\":");
    fg__sbuf_u64(b, d->retry_after_ms);
    fg__sbuf_puts(b, ",\"source\":\"");
    fg__sbuf_puts(b, src ? src : "store");
    /* Only when it happened: the answer's fields stay as they were. */
    if (d->shadowed)
        fg__sbuf_puts(b, "\",\"shadowed\":true,\"name\":");
    else
        fg__sbuf_puts(b, "\",\"name\":");
    fg__json_str(b, name, strlen(name));
    fg__sbuf_puts(b, "}\n");
}

void fg__fmt_error_json(fg__sbuf *b, const char *msg, const char *fallback)
{
    size_t start = b->len;
    for (int pass = 0; pass < 2; pass++) {
        fg__sbuf_puts(b, "{\"error\":");
        fg__json_str(b, msg, strlen(msg));
        fg__sbuf_puts(b, "}\n");
        if (!b->overflow || !fallback)
            return;
        /* Never a body cut short: the short reason instead. */
        b->len = start;
        b->overflow = 0;
        if (b->cap)
            b->p[start] = '\0';
        msg = fallback;
        fallback = NULL;
    }
}
