/* bearer.c -- the admin routes' bearer token check (see bearer.h). */
#include <string.h>
#include <strings.h>

#include "bearer.h"

int fg__bearer_ok(const char *authorization, const char *token, size_t len)
{
    if (!authorization || !token || len == 0 ||
        strncasecmp(authorization, "Bearer ", 7) != 0)
        return 0;
    const char *v = authorization + 7;
    while (*v == ' ')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    /* Accumulated, never returned early: the loop runs over the whole
     * token, the given value's length only choosing which bytes are
     * compared with it (that length is the sender's own knowledge). */
    volatile unsigned char diff = (unsigned char)(n != len);
    for (size_t i = 0; i < len; i++) {
        unsigned char got = i < n ? (unsigned char)v[i] : 0;
        diff |= (unsigned char)(got ^ (unsigned char)token[i]);
    }
    return diff == 0;
}
