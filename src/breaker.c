/* breaker.c -- see breaker.h. */
#include "breaker.h"

int fg__breaker_allow(fg__breaker *b, uint64_t now_us)
{
    uint64_t until =
        atomic_load_explicit(&b->open_until_us, memory_order_relaxed);
    if (until == 0)
        return 1;
    if (now_us < until)
        return 0;
    int expected = 0;
    return atomic_compare_exchange_strong(&b->probing, &expected, 1);
}

void fg__breaker_success(fg__breaker *b)
{
    if (atomic_load_explicit(&b->failures, memory_order_relaxed))
        atomic_store(&b->failures, 0);
    if (atomic_load_explicit(&b->open_until_us, memory_order_relaxed)) {
        atomic_store(&b->open_until_us, 0);
        atomic_store(&b->probing, 0);
    }
}

void fg__breaker_failure(fg__breaker *b, uint64_t now_us)
{
    unsigned n = atomic_fetch_add(&b->failures, 1) + 1;
    if (n >= FG__BREAKER_THRESHOLD) {
        atomic_store(&b->open_until_us, now_us + FG__BREAKER_COOLDOWN_US);
        atomic_store(&b->probing, 0);
    }
}

void fg__breaker_release(fg__breaker *b)
{
    if (atomic_load_explicit(&b->probing, memory_order_relaxed))
        atomic_store(&b->probing, 0);
}

int fg__breaker_state(fg__breaker *b, uint64_t now_us)
{
    uint64_t until = atomic_load(&b->open_until_us);
    if (until == 0)
        return FG__BREAKER_CLOSED;
    return now_us < until ? FG__BREAKER_OPEN : FG__BREAKER_HALF_OPEN;
}
