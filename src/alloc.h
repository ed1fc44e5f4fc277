/* alloc.h -- every allocation of the library, through the allocator
 * fg_set_allocator sets. */
#ifndef FG_ALLOC_H
#define FG_ALLOC_H

#include <stddef.h>

/* Allocation through the configurable allocator (fg_set_allocator). */
void *fg__malloc(size_t n);
void *fg__calloc(size_t n, size_t size);
void fg__free(void *p);
char *fg__strndup(const char *s, size_t n);

#endif
