/* clock.c -- the library's clocks: monotonic for decisions and deadlines,
 * the wall clock for Redis windows. */
#include <dlfcn.h>
#include <pthread.h>

#include "clock.h"
#include "floodgate.h"

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
