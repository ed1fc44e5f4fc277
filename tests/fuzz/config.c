/* config.c -- fuzz target: the INI configuration of `floodgate serve`.
 * The input is a file's text, read by fg__config_parse from fmemopen; a
 * configuration it accepts has each of its limits built on a memory store
 * (as a reload would) and its limit names looked up again. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static fg_store *mem;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!mem) {
        char why[200];
        /* One for the process: freed at exit, as the daemon's is. */
        mem = fg_store_open("memory?max_keys=64", why, sizeof(why));
        if (!mem)
            abort();
    }
    /* fmemopen needs a buffer of one byte at least. */
    char one = '\n';
    FILE *f = size ? fmemopen((void *)data, size, "r") : fmemopen(&one, 1, "r");
    if (!f)
        return 0;
    fg__serve_config *c = malloc(sizeof(*c));
    if (!c) {
        fclose(f);
        return 0;
    }
    fg__config_defaults(c);
    char err[512];
    int rc = fg__config_parse(f, "fuzz.ini", c, err, sizeof(err));
    fclose(f);
    if (rc == 0) {
        for (unsigned i = 0; i < c->nlimits; i++) {
            const fg_limit *lim = &c->limits[i].lim;
            if (fg__config_find(c, lim->name, strlen(lim->name)) < 0)
                __builtin_trap(); /* a limit it cannot find again */
            fg_limiter *l = fg_limiter_new(mem, lim, err, sizeof(err));
            if (l) {
                fg_decision d;
                fg_check(l, "k", 1, 1, &d);
                fg_limiter_free(l);
            }
        }
    } else if (memchr(err, '\0', sizeof(err)) == NULL) {
        __builtin_trap(); /* an unterminated message */
    }
    free(c);
    return 0;
}
