/* redis_url.c -- fuzz target: store URLs, any string. fg_store_url_check
 * (every scheme) and fg__redis_url_parse / fg__redis_url_where /
 * fg__redis_url_free on the input as a NUL-terminated string (its copy);
 * the two must agree on redis:// and unix:// URLs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "floodgate.h"
#include "redis_url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (!url)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    char err[256], where[512];
    int check = fg_store_url_check(url, err, sizeof(err));
    fg__redis_url u;
    int rc = fg__redis_url_parse(url, &u, err, sizeof(err));
    if (rc == FG_OK) {
        fg__redis_url_where(&u, where, sizeof(where));
        fg__redis_url_where(&u, where, 8); /* truncated */
        fg__redis_url_free(&u);
    }
    if ((!strncmp(url, "redis://", 8) || !strncmp(url, "unix://", 7)) &&
        (check == FG_OK) != (rc == FG_OK))
        __builtin_trap(); /* fg_store_url_check says otherwise */
    free(url);
    return 0;
}
