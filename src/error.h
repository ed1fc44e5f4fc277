/* error.h -- a reason for an error code, into a caller's buffer. */
#ifndef FG_ERROR_H
#define FG_ERROR_H

#include <stddef.h>

/* Write a formatted reason into 'err' (NULL-safe); returns 'code'. */
int fg__seterr(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
