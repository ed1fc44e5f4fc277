/* process.c -- which process a store belongs to: a count of fork()s,
 * raised in each child by a pthread_atfork handler, so that telling costs
 * a load rather than a getpid() system call. */
#include <pthread.h>
#include <stdatomic.h>

#include "process.h"

static atomic_uint forks;
static pthread_once_t watching = PTHREAD_ONCE_INIT;

static void in_child(void)
{
    atomic_fetch_add_explicit(&forks, 1, memory_order_relaxed);
}

static void watch(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

unsigned fg__process_mark(void)
{
    pthread_once(&watching, watch);
    return atomic_load_explicit(&forks, memory_order_relaxed);
}

int fg__process_other(unsigned mark)
{
    return atomic_load_explicit(&forks, memory_order_relaxed) != mark;
}
