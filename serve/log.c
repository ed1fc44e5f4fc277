/* log.c -- key=value event lines on stderr, never waiting for its
 * reader: a line that a full pipe or socket cannot take now is dropped and
 * counted, and the next line that goes out is preceded by
 * "event=log_dropped lines=N". A stalled log reader (a hung journald or
 * log shipper) must not stop requests, nor a drain. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

unsigned long fg__utf8_len(const unsigned char *s, unsigned long n)
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

/* A character that a reader may take for a line break (NEL, U+2028,
 * U+2029), another C1 control, or one that reorders what a terminal shows
 * (the bidirectional marks, embeddings, overrides and isolates): escaped,
 * so that a value never forges a line nor hides part of one. 's' is a
 * valid UTF-8 character of 'len' (2 or 3) bytes. */
static int misleading(const unsigned char *s, size_t len)
{
    unsigned cp =
        len == 2   ? (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu)
        : len == 3 ? (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu)
                   : 0;
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
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
            size_t u = fg__utf8_len((const unsigned char *)v + i, n - i);
            if (!u) {
                o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", ch);
            } else if (misleading((const unsigned char *)v + i, u)) {
                for (size_t k = 0; k < u && o + 8 < outlen; k++, i++)
                    o += (size_t)snprintf(out + o, outlen - o, "\\x%02x",
                                          (unsigned char)v[i]);
                i--;
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

/* Where lines go: stderr, or on a pipe a descriptor of its own that does
 * not block (the same pipe; stderr's own flags, which the process shares
 * with whoever started it, stay as they were). A socket (journald's) is
 * sent to without waiting instead. A file or a terminal is written as is. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = STDERR_FILENO, out_sock;
/* The end of a line a socket took only part of: sent before any other. */
static char rest[4096];
static size_t restlen;
static unsigned long dropped;

void fg__log_nonblocking(void)
{
    struct stat s;
    if (fstat(STDERR_FILENO, &s) != 0)
        return;
    if (S_ISFIFO(s.st_mode)) {
        int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
            out_fd = fd;
    } else if (S_ISSOCK(s.st_mode)) {
        out_sock = 1;
    }
}

static ssize_t put(const char *p, size_t n)
{
    ssize_t w;
    do
        w = out_sock ? send(out_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                     : write(out_fd, p, n);
    while (w < 0 && errno == EINTR);
    return w;
}

/* Under 'mu': 1 when the line went out (perhaps its end kept in 'rest'),
 * 0 when it did not. A pipe takes a line of up to PIPE_BUF bytes whole or
 * not at all. */
static int emit(const char *p, size_t n)
{
    if (restlen) {
        ssize_t w = put(rest, restlen);
        if (w > 0) {
            memmove(rest, rest + w, restlen - (size_t)w);
            restlen -= (size_t)w;
        }
        if (restlen)
            return 0;
    }
    ssize_t w = put(p, n);
    if (w < 0)
        return 0;
    if ((size_t)w < n && n - (size_t)w <= sizeof(rest)) {
        memcpy(rest, p + w, n - (size_t)w);
        restlen = n - (size_t)w;
    }
    return 1;
}

/* "ts=... event=NAME" into 'line' ('len' at least 64); its length. */
static int head(char *line, size_t len, const char *event)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n =
        snprintf(line, len, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ event=%s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, event);
    if (n < 0)
        return -1;
    return (size_t)n >= len - 2 ? (int)len - 2 : n;
}

void fg__log(const char *event, const char *fmt, ...)
{
    /* Room for the longest key escaped a character for two (every byte a
     * '"': 2 * FG_MAX_KEY + 2) and the fields around it; and no more than
     * PIPE_BUF, which a pipe writes whole. A key of bytes escaped as \xNN
     * is cut shorter, marked "..." (fg__log_value). */
    char line[4096];
    int n = head(line, sizeof(line), event);
    if (n < 0)
        return;
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
    /* One write per line, one thread at a time, keeps lines whole. */
    pthread_mutex_lock(&mu);
    if (dropped) {
        char d[128];
        int m = head(d, sizeof(d), "log_dropped");
        if (m > 0)
            m += snprintf(d + m, sizeof(d) - (size_t)m,
                          " lines=%lu reason=\"the log reader was not "
                          "reading\"\n",
                          dropped);
        if (m > 0 && (size_t)m < sizeof(d) && emit(d, (size_t)m))
            dropped = 0;
    }
    if (dropped || !emit(line, (size_t)n))
        dropped++;
    pthread_mutex_unlock(&mu);
}
