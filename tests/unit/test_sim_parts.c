/* test_sim_parts.c -- the simulator's pure parts: its event heap gives
 * events in time order, ties in the order they were pushed, and its
 * arrivals are where they should be (steady, a burst, Poisson from a
 * seed, the same on every run). */
#include <math.h>
#include <stdlib.h>

#include "../../lab/simulate.h"
#include "../harness.h"

/* Events out in (time, push order), however they went in. */
static void test_heap(void)
{
    fg__sim_heap h;
    fg__sim_event e;
    fg__sim_heap_init(&h);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 0);
    uint64_t rng = 42;
    enum { N = 100000 };
    int fails = 0;
    for (uint32_t i = 0; i < N; i++)
        fails +=
            fg__sim_heap_push(&h, fg__sim_rng_next(&rng) % 1000, 0, i, 0) != 0;
    CHECK_EQ(fails, 0);
    uint64_t last_at = 0, last_seq = 0, bad = 0, n = 0;
    uint32_t last_who = 0;
    while (fg__sim_heap_pop(&h, &e)) {
        if (n > 0 &&
            (e.at_us < last_at ||
             (e.at_us == last_at && (e.seq <= last_seq || e.who <= last_who))))
            bad++;
        last_at = e.at_us;
        last_seq = e.seq;
        last_who = e.who;
        n++;
    }
    CHECK_EQ(n, N);
    CHECK_EQ(bad, 0);
    /* Pushes between pops, as a run does. */
    CHECK_EQ(fg__sim_heap_push(&h, 5, 1, 0, 7), 0);
    CHECK_EQ(fg__sim_heap_push(&h, 5, 2, 0, 8), 0);
    CHECK_EQ(fg__sim_heap_push(&h, 3, 3, 0, 9), 0);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 1);
    CHECK_EQ(e.kind, 3);
    CHECK_EQ(fg__sim_heap_push(&h, 4, 4, 0, 10), 0);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 1);
    CHECK_EQ(e.kind, 4);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 1);
    CHECK_EQ(e.kind, 1);
    CHECK_EQ(e.slot, 7);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 1);
    CHECK_EQ(e.kind, 2);
    CHECK_EQ(fg__sim_heap_pop(&h, &e), 0);
    fg__sim_heap_free(&h);
}

/* splitmix64's published first outputs for seed 0. */
static void test_rng(void)
{
    uint64_t s = 0;
    CHECK(fg__sim_rng_next(&s) == 0xe220a8397b1dcdafull);
    CHECK(fg__sim_rng_next(&s) == 0x6e789e6aa1b965f4ull);
    CHECK(fg__sim_rng_next(&s) == 0x06c45d188009454full);
}

static uint64_t count_all(fg__sim_arrivals *a, uint64_t *first, uint64_t *last,
                          int *ordered)
{
    uint64_t n = 0, at, prev = 0;
    *ordered = 1;
    while (fg__sim_arrivals_next(a, &at)) {
        if (n == 0)
            *first = at;
        else if (at < prev)
            *ordered = 0;
        prev = at;
        n++;
    }
    *last = prev;
    return n;
}

static void test_arrivals(void)
{
    fg__sim_arrivals a;
    uint64_t first = 0, last = 0, at;
    int ordered;
    /* Steady: 20/s for 10 s is 200 requests, 50 ms apart from the start. */
    fg__sim_arrivals_init(&a, FG__SIM_STEADY, 1000000, 10000000, 20, 0, 1);
    CHECK_EQ(count_all(&a, &first, &last, &ordered), 200);
    CHECK_EQ(first, 1000000);
    CHECK_EQ(last, 1000000 + 199 * 50000);
    CHECK(ordered);
    CHECK_EQ(fg__sim_arrivals_next(&a, &at), 0);
    /* A burst: 80 within 40 ms, 500 us apart, as the real lab fires it. */
    fg__sim_arrivals_init(&a, FG__SIM_BURST, 7, 40000, 0, 80, 1);
    CHECK_EQ(count_all(&a, &first, &last, &ordered), 80);
    CHECK_EQ(first, 7);
    CHECK_EQ(last, 7 + 79 * 500);
    CHECK(ordered);
    /* ... or all at once. */
    fg__sim_arrivals_init(&a, FG__SIM_BURST, 7, 0, 0, 5, 1);
    CHECK_EQ(count_all(&a, &first, &last, &ordered), 5);
    CHECK_EQ(last, 7);
    /* Poisson: 1000/s for 100 s, within five standard deviations of
     * 100,000, in order, the same for the same seed and not for another. */
    fg__sim_arrivals_init(&a, FG__SIM_POISSON, 0, 100000000, 1000, 0, 9);
    uint64_t n = count_all(&a, &first, &last, &ordered);
    CHECK(fabs((double)n - 100000) < 5 * sqrt(100000));
    CHECK(ordered);
    CHECK(last < 100000000);
    fg__sim_arrivals b;
    fg__sim_arrivals_init(&a, FG__SIM_POISSON, 0, 1000000, 1000, 0, 9);
    fg__sim_arrivals_init(&b, FG__SIM_POISSON, 0, 1000000, 1000, 0, 9);
    uint64_t x, y, same = 1;
    while (fg__sim_arrivals_next(&a, &x))
        same &= fg__sim_arrivals_next(&b, &y) && x == y;
    CHECK(same);
    CHECK_EQ(fg__sim_arrivals_next(&b, &y), 0);
    fg__sim_arrivals_init(&a, FG__SIM_POISSON, 0, 1000000, 1000, 0, 9);
    fg__sim_arrivals_init(&b, FG__SIM_POISSON, 0, 1000000, 1000, 0, 10);
    uint64_t differ = 0;
    while (fg__sim_arrivals_next(&a, &x) && fg__sim_arrivals_next(&b, &y))
        differ += x != y;
    CHECK(differ > 0);
    /* No rate, no arrival. */
    fg__sim_arrivals_init(&a, FG__SIM_STEADY, 0, 1000000, 0, 0, 1);
    CHECK_EQ(fg__sim_arrivals_next(&a, &at), 0);
    CHECK_STR(fg__sim_arrival_name(FG__SIM_POISSON), "poisson");
    CHECK_EQ(fg__sim_arrival_parse("burst"), FG__SIM_BURST);
    CHECK_EQ(fg__sim_arrival_parse("bursty"), -1);
}

int main(void)
{
    test_heap();
    test_rng();
    test_arrivals();
    return TEST_DONE();
}
