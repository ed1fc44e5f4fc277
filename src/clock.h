/* clock.h -- the library's clocks, in microseconds. */
#ifndef FG_CLOCK_H
#define FG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic microseconds (CLOCK_MONOTONIC), for decisions (fg__mono_us,
 * the memory store's default clock) and deadlines (the same clock); and
 * wall-clock microseconds since the Unix epoch. */
uint64_t fg__mono_us(void *ctx);
/* clock_gettime's own entry in the kernel's vDSO when the process has one
 * (else clock_gettime): the same clocks, read without the C library's
 * wrapper, a call and a check less on every check of the memory store.
 * It returns 0, or non-zero on failure. */
typedef int (*fg__gettime_fn)(clockid_t, struct timespec *);
fg__gettime_fn fg__clock_gettime_fn(void);
uint64_t fg__mono_precise_us(void);
uint64_t fg__wall_us(void);

#endif
