/* alloc.c -- the library's allocator (fg_set_allocator). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "floodgate.h"

static void *(*fg_malloc_fn)(size_t) = malloc;
static void (*fg_free_fn)(void *) = free;

void fg_set_allocator(void *(*malloc_fn)(size_t), void (*free_fn)(void *))
{
    fg_malloc_fn = malloc_fn ? malloc_fn : malloc;
    fg_free_fn = free_fn ? free_fn : free;
}

void *fg__malloc(size_t n)
{
    return fg_malloc_fn(n ? n : 1);
}

void *fg__calloc(size_t n, size_t size)
{
    /* libc's calloc takes fresh pages from the kernel already zeroed,
     * without touching them (a large cache or table then costs no memory
     * until used); another allocator's memory is cleared here. */
    if (fg_malloc_fn == malloc)
        return calloc(n ? n : 1, size ? size : 1);
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = fg__malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void fg__free(void *p)
{
    if (p)
        fg_free_fn(p);
}

char *fg__strndup(const char *s, size_t n)
{
    char *p = fg__malloc(n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}
