/* log.c -- key=value event lines on stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The length of the UTF-8 character at 's' (of 'n' bytes), 0 if the
 * bytes there are not one (a stray continuation, a cut or overlong
 * sequence, a surrogate, beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
    if (s[0] < 0xc2 || s[0] > 0xf4 || n < len)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

const char *fg__log_value(const char *v, char *out, unsigned long outlen)
{
    size_t n = strlen(v), o = 0;
    int plain = n > 0;
    for (size_t i = 0; i < n && plain; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch <= ' ' || ch == '"' || ch == '\\' || ch == '=' || ch >= 0x7f)
            plain = 0;
    }
    if (outlen < 8)
        return "";
    if (plain && n < outlen) {
        memcpy(out, v, n + 1);
        return out;
    }
    out[o++] = '"';
    size_t i = 0;
    for (; i < n && o + 8 < outlen; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < ' ' || ch == 0x7f) {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
        } else if (ch < 0x80) {
            out[o++] = (char)ch;
        } else {
            size_t u = utf8_len((const unsigned char *)v + i, n - i);
            if (!u) {
                o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
            } else {
                memcpy(out + o, v + i, u);
                o += u;
                i += u - 1;
            }
        }
    }
    /* Cut short (a value that does not fit escaped): said, not hidden. */
    if (i < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

void fg__log(const char *event, const char *fmt, ...)
{
    /* Room for the longest key escaped a character for two (every byte a
     * '"': 2 * FG_MAX_KEY + 2) and the fields around it; and no more than
     * PIPE_BUF, which a pipe writes whole. A key of bytes escaped as \xNN
     * is cut shorter, marked "..." (fg__log_value). */
    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ event=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, event);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    if (fmt && *fmt) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        if (m > 0)
            n += m < (int)(sizeof(line) - (size_t)n - 1)
                     ? m
                     : (int)(sizeof(line) - (size_t)n - 2);
    }
    line[n++] = '\n';
    /* One write per line keeps lines from several threads whole. */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
