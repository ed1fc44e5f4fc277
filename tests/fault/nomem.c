/* nomem.c -- an LD_PRELOAD library that makes every allocation of the
 * process fail for a while: from FG_NOMEM_AFTER_MS after it is loaded,
 * for FG_NOMEM_FOR_MS (tests/integration/serve_nomem.sh). malloc, calloc,
 * realloc and the aligned ones return NULL (ENOMEM) then; glibc's own
 * entry points (__libc_*) serve the others, so that nothing here
 * allocates. Not for sanitizer builds, whose allocator comes first. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

static int64_t from_ms = -1, until_ms = -1;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((constructor)) static void nomem_init(void)
{
    const char *after = getenv("FG_NOMEM_AFTER_MS");
    const char *len = getenv("FG_NOMEM_FOR_MS");
    if (!after || !len)
        return;
    from_ms = now_ms() + atoll(after);
    until_ms = from_ms + atoll(len);
}

static int failing(void)
{
    if (from_ms < 0)
        return 0;
    int64_t t = now_ms();
    if (t < from_ms || t >= until_ms)
        return 0;
    errno = ENOMEM;
    return 1;
}

void *malloc(size_t n)
{
    return failing() ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    return failing() ? NULL : __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    return n && failing() ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = failing() ? NULL : __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
    return failing() ? NULL : __libc_memalign(align, n);
}
