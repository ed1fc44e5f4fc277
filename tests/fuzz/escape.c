/* escape.c -- fuzz target: serve's two escapers of text a client or a
 * store chose, on any bytes. The first input byte picks the room given.
 *   fg__log_value (a log line's value): the output fits, is valid UTF-8,
 *   carries no control character (C1 and NEL too), no U+2028/U+2029 and no
 *   bidirectional control raw; a bare value is the input, without a
 *   separator; a quoted one reads back to the input, or to a prefix of it
 *   and "..." when it did not fit.
 *   fg__fmt_error_json (an error's JSON body): always a whole object, valid
 *   UTF-8, with no raw control character; when the message is UTF-8 and
 *   fits, it reads back to it, else the fallback is given whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "log.h"

#define BAD() __builtin_trap()

/* A valid UTF-8 sequence at 's' ('n' bytes left): its length and code
 * point, or 0 (written apart from serve's own decoder). */
static size_t utf8(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0], v, min;
    size_t len;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xe0) == 0xc0)
        len = 2, v = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        len = 3, v = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* Every character of 's' valid UTF-8, and none that 'shown' refuses. */
static int clean(const unsigned char *s, size_t n, int (*shown)(unsigned))
{
    for (size_t i = 0; i < n;) {
        unsigned cp;
        size_t l = utf8(s + i, n - i, &cp);
        if (!l || !shown(cp))
            return 0;
        i += l;
    }
    return 1;
}

static int log_shown(unsigned cp)
{
    return !(cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) ||
             cp == 0x2028 || cp == 0x2029 || cp == 0x061c || cp == 0x200e ||
             cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
             (cp >= 0x2066 && cp <= 0x2069));
}

static int json_shown(unsigned cp)
{
    return cp >= 0x20;
}

static int any(unsigned cp)
{
    (void)cp;
    return 1;
}

static void log_value(const char *v, size_t n, unsigned long outlen)
{
    char *out = malloc(outlen ? outlen : 1);
    const char *r = fg__log_value(v, out, outlen);
    if (outlen < 8) {
        if (*r)
            BAD();
        free(out);
        return;
    }
    size_t on = strnlen(out, outlen);
    const unsigned char *o = (const unsigned char *)out;
    if (r != out || on >= outlen || on == 0 || !clean(o, on, log_shown))
        BAD();
    if (o[0] != '"') { /* bare: the value itself, no separator in it */
        if (strcmp(out, v) != 0)
            BAD();
        for (size_t i = 0; i < on; i++)
            if (o[i] <= ' ' || o[i] == '\\' || o[i] == '=' || o[i] >= 0x7f)
                BAD();
        free(out);
        return;
    }
    if (on < 2 || o[on - 1] != '"')
        BAD();
    char *back = malloc(on);
    size_t d = 0;
    for (size_t i = 1; i < on - 1; i++) {
        if (o[i] == '"')
            BAD();
        if (o[i] != '\\') {
            back[d++] = (char)o[i];
        } else if (o[i + 1] == '"' || o[i + 1] == '\\') {
            back[d++] = (char)o[++i];
        } else if (o[i + 1] == 'x' && i + 3 < on - 1 && hexval(o[i + 2]) >= 0 &&
                   hexval(o[i + 3]) >= 0) {
            back[d++] = (char)(hexval(o[i + 2]) * 16 + hexval(o[i + 3]));
            i += 3;
        } else {
            BAD();
        }
    }
    int whole = d == n && memcmp(back, v, n) == 0;
    int cut = d >= 3 && d - 3 < n && memcmp(back + d - 3, "...", 3) == 0 &&
              memcmp(back, v, d - 3) == 0;
    /* Cut only when four bytes a byte would not have fitted. */
    if (!whole && (!cut || outlen >= 4 * n + 3 + 8))
        BAD();
    free(back);
    free(out);
}

static void error_json(const char *msg, size_t n, size_t cap)
{
    static const char fallback[] = "{\"error\":\"Service Unavailable\"}\n";
    char *mem = malloc(cap);
    fg__sbuf b;
    fg__sbuf_init(&b, mem, cap);
    fg__fmt_error_json(&b, msg, "Service Unavailable");
    const unsigned char *o = (const unsigned char *)b.p;
    size_t on = b.len;
    if (b.overflow || on < 13 || memcmp(o, "{\"error\":\"", 10) != 0 ||
        memcmp(o + on - 3, "\"}\n", 3) != 0 || !clean(o, on - 1, json_shown))
        BAD();
    int utf8_msg = clean((const unsigned char *)msg, n, any);
    size_t need = 14;                /* {"error":""}\n and room for a NUL */
    for (size_t i = 0; i < n; i++) { /* at most, a byte */
        unsigned char c = (unsigned char)msg[i];
        need += c < 0x20 || c >= 0x7f ? 6 : c == '"' || c == '\\' ? 2 : 1;
    }
    if (on == sizeof fallback - 1 && !memcmp(o, fallback, on)) {
        if (need <= cap && strcmp(msg, "Service Unavailable") != 0)
            BAD(); /* it would have fitted */
        free(mem);
        return;
    }
    /* Read back: quotes and backslashes escaped, controls as \u00XX, a
     * byte that is not UTF-8 as \ufffd. */
    char *back = malloc(on);
    size_t d = 0;
    for (size_t i = 10; i < on - 3; i++) {
        if (o[i] == '"')
            BAD();
        if (o[i] != '\\') {
            back[d++] = (char)o[i];
        } else if (o[i + 1] == '"' || o[i + 1] == '\\') {
            back[d++] = (char)o[++i];
        } else if (o[i + 1] == 'u' && o[i + 2] == '0' && o[i + 3] == '0' &&
                   hexval(o[i + 4]) >= 0 && hexval(o[i + 5]) >= 0) {
            back[d++] = (char)(hexval(o[i + 4]) * 16 + hexval(o[i + 5]));
            i += 5;
        } else if (!memcmp(o + i + 1, "ufffd", 5)) {
            back[d++] = '?';
            i += 5;
        } else {
            BAD();
        }
    }
    if (utf8_msg && (d != n || memcmp(back, msg, n) != 0))
        BAD();
    free(back);
    free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned long rooms[] = {0,  1,  7,  8,   9,   12,
                                          16, 31, 64, 300, 512, 2056};
    if (size < 1)
        return 0;
    unsigned long room = rooms[data[0] % (sizeof rooms / sizeof rooms[0])];
    char *v = malloc(size);
    memcpy(v, data + 1, size - 1);
    v[size - 1] = '\0';
    size_t n = strlen(v);
    log_value(v, n, room);
    error_json(v, n, room < 40 ? 40 : room);
    free(v);
    return 0;
}
