/* limit.c -- parsing a rate such as "10/s" or "5/15min" into an fg_limit. */
#include <ctype.h>
#include <string.h>

#include "store.h"
#include "error.h"

static void limit_defaults(fg_limit *out)
{
    memset(out, 0, sizeof(*out));
    strcpy(out->name, "default");
    out->algorithm = FG_TOKEN_BUCKET;
    out->on_failure = FG_FAIL_OPEN;
    out->timeout_ms = 5;
    out->fallback_servers = 1;
    out->mode = FG_MODE_EXACT;
    out->sync_ms = 200;
}

static const struct {
    const char *name;
    uint64_t us;
} units[] = {
    {"ms", 1000ull},      {"s", 1000000ull},       {"min", 60000000ull},
    {"h", 3600000000ull}, {"day", 86400000000ull},
};

/* Read the decimal digits at '*p' into '*out', advancing '*p'. Returns the
 * number of digits, or -1 when the value does not fit below FG_MAX_COUNT. */
static int read_count(const char **p, uint64_t *out)
{
    uint64_t v = 0;
    int n = 0;
    while (isdigit((unsigned char)**p)) {
        unsigned d = (unsigned)(**p - '0');
        if (v > (FG_MAX_COUNT - d) / 10)
            return -1;
        v = v * 10 + d;
        (*p)++;
        n++;
    }
    *out = v;
    return n;
}

/* Parse "COUNT/[MULT]UNIT", with optional blanks around the whole. */
int fg_limit_parse_err(const char *rate, fg_limit *out, char *err,
                       size_t errlen)
{
    if (!rate || !out)
        return fg__seterr(err, errlen, FG_EINVAL, "no rate given");
    limit_defaults(out);

    const char *p = rate;
    while (isspace((unsigned char)*p))
        p++;
    uint64_t count, mult = 1;
    int n = read_count(&p, &count);
    if (n < 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': count is too large (at most 2^53)", rate);
    if (n == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': expected COUNT/PERIOD, e.g. 10/s", rate);
    if (*p != '/')
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': expected '/' after the count", rate);
    if (count == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': count must be at least 1", rate);
    p++;
    n = read_count(&p, &mult);
    if (n < 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': period is too large", rate);
    if (n > 0 && (*p == '.' || *p == ','))
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': the period must be a whole number and "
                          "a unit, e.g. 5/15min or 250/500ms",
                          rate);
    if (n > 0 && mult == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': period must be at least 1 ms", rate);
    if (n == 0)
        mult = 1;

    const char *unit = p;
    while (isalpha((unsigned char)*p))
        p++;
    size_t ulen = (size_t)(p - unit);
    while (isspace((unsigned char)*p))
        p++;
    if (ulen == 0 && *p == '\0')
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': missing unit after '/' (ms, s, min, h, "
                          "day)",
                          rate);
    if (ulen == 0)
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': the period must be a whole number and "
                          "a unit, e.g. 5/15min or 250/500ms",
                          rate);
    if (*p != '\0')
        return fg__seterr(err, errlen, FG_EINVAL,
                          "rate '%s': unexpected text after the unit", rate);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].name) == ulen &&
            memcmp(units[i].name, unit, ulen) == 0) {
            /* Periods beyond a year are refused: no limit needs them, and
             * this keeps every product of period and count exact. */
            if (mult > 365 * 86400000000ull / units[i].us)
                return fg__seterr(err, errlen, FG_EINVAL,
                                  "rate '%s': period is longer than a year",
                                  rate);
            out->limit = count;
            out->period_us = mult * units[i].us;
            return FG_OK;
        }
    }
    return fg__seterr(err, errlen, FG_EINVAL,
                      "rate '%s': unknown unit '%.*s' (use ms, s, min, h or "
                      "day)",
                      rate, (int)ulen, unit);
}

int fg_limit_name_valid(const char *s, size_t n)
{
    if (!s || n == 0 || n >= FG_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') &&
            !(ch >= '0' && ch <= '9') && ch != '_' && ch != '-' && ch != '.')
            return 0;
    }
    return 1;
}

int fg_limit_parse(const char *rate, fg_limit *out)
{
    return fg_limit_parse_err(rate, out, NULL, 0);
}
