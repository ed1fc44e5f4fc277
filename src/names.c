/* names.c -- the names of algorithms, failure policies and sources, as
 * config files, flags and JSON spell them. */
#include <string.h>

#include "floodgate.h"

static const char *const algorithm_names[] = {"fixed_window", "sliding_window",
                                              "token_bucket", "naive_get_set"};
static const char *const on_failure_names[] = {"open", "closed", "local"};
static const char *const source_names[] = {
    "store", "cache", "local", "fail_open", "fail_closed", "sync", "lease"};
static const char *const mode_names[] = {"exact", "sync", "lease"};

#define NAMES_LEN(a) (sizeof(a) / sizeof((a)[0]))

static int name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *fg_algorithm_name(fg_algorithm a)
{
    return (unsigned)a < NAMES_LEN(algorithm_names) ? algorithm_names[a] : NULL;
}

int fg_algorithm_parse(const char *s, fg_algorithm *out)
{
    int i = name_index(algorithm_names, NAMES_LEN(algorithm_names), s);
    if (i < 0 || !out)
        return FG_EINVAL;
    *out = (fg_algorithm)i;
    return FG_OK;
}

const char *fg_on_failure_name(fg_on_failure f)
{
    return (unsigned)f < NAMES_LEN(on_failure_names) ? on_failure_names[f]
                                                     : NULL;
}

int fg_on_failure_parse(const char *s, fg_on_failure *out)
{
    int i = name_index(on_failure_names, NAMES_LEN(on_failure_names), s);
    if (i < 0 || !out)
        return FG_EINVAL;
    *out = (fg_on_failure)i;
    return FG_OK;
}

const char *fg_source_name(fg_source s)
{
    return (unsigned)s < NAMES_LEN(source_names) ? source_names[s] : NULL;
}

const char *fg_mode_name(fg_mode m)
{
    return (unsigned)m < NAMES_LEN(mode_names) ? mode_names[m] : NULL;
}
