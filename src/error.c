/* error.c -- error codes' names and a reason into a caller's buffer. */
#include <stdarg.h>
#include <stdio.h>

#include "error.h"
#include "floodgate.h"

int fg__seterr(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

#define FG__ERR_TEXT(name, code, text)                                         \
    case code:                                                                 \
        return text;

const char *fg_strerror(int code)
{
    switch (code) {
        FG_ERRORS(FG__ERR_TEXT)
    }
    return "unknown error";
}
