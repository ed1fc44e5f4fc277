/* util.c -- allocation, clocks, error text and names shared by the library. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"

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

int fg__hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

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

/* The clock of every decision: CLOCK_MONOTONIC, read from the vDSO in
 * some 20 ns. CLOCK_MONOTONIC_COARSE costs a few ns less but ticks every
 * 4 ms here: a wait computed from a reading up to a tick old ended up to a
 * tick late, and a refill was granted up to a tick early against real
 * time. */
uint64_t fg__mono_us(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static fg__gettime_fn vdso_gettime = clock_gettime;
static pthread_once_t vdso_once = PTHREAD_ONCE_INIT;

static void vdso_find(void)
{
    void *vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!vdso)
        return;
    void *fn = dlvsym(vdso, "__vdso_clock_gettime", "LINUX_2.6");
    if (fn)
        vdso_gettime = (fg__gettime_fn)fn;
    /* The vDSO stays mapped for the life of the process. */
}

fg__gettime_fn fg__clock_gettime_fn(void)
{
    pthread_once(&vdso_once, vdso_find);
    return vdso_gettime;
}

uint64_t fg_mono_us(void)
{
    return fg__mono_us(NULL);
}

uint64_t fg__mono_precise_us(void)
{
    return fg__mono_us(NULL);
}

uint64_t fg__wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
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

static const char *const algorithm_names[] = {"fixed_window", "sliding_window",
                                              "token_bucket", "naive_get_set"};
static const char *const on_failure_names[] = {"open", "closed", "local"};
static const char *const source_names[] = {"store", "cache", "local",
                                           "fail_open", "fail_closed"};

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
    if (i < 0)
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
    if (i < 0)
        return FG_EINVAL;
    *out = (fg_on_failure)i;
    return FG_OK;
}

const char *fg_source_name(fg_source s)
{
    return (unsigned)s < NAMES_LEN(source_names) ? source_names[s] : NULL;
}
