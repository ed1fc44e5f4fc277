/* log.h -- one line per event on stderr, in key=value form:
 *   ts=2026-11-30T05:10:36.123Z event=listening addr=127.0.0.1:8080 */
#ifndef FG_SERVE_LOG_H
#define FG_SERVE_LOG_H

/* From now on, never wait for stderr's reader (log.c). */
void fg__log_nonblocking(void);

/* 'fmt' continues the line after "event=NAME " with more key=value pairs;
 * the whole line goes out in one write(). */
void fg__log(const char *event, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The length of the UTF-8 character at 's' (of 'n' bytes, 'n' > 0), 0 if
 * the bytes there are not one (a stray continuation, a cut or overlong
 * sequence, a surrogate, beyond U+10FFFF). */
unsigned long fg__utf8_len(const unsigned char *s, unsigned long n);

/* Write 'v' into 'out' as a log value: bare when it is a simple token,
 * else double-quoted with '"', '\', control characters (C1 ones too),
 * bytes that are not UTF-8, and the characters a reader may take for a
 * line break (U+2028, U+2029) or that reorder what a terminal shows (the
 * bidirectional controls) escaped as \xNN a byte (so that a line is always
 * valid UTF-8, and one line), and ending in
 * "..." when cut to fit 'out' ('outlen' at least 8; "" if less). */
const char *fg__log_value(const char *v, char *out, unsigned long outlen);

#endif
