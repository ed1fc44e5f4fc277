/* test_breaker.c -- the circuit breaker (src/breaker.h) with explicit times:
 * closed until FG__BREAKER_THRESHOLD consecutive failures, open for the
 * cool-down, then exactly one probe; its success closes the breaker, its
 * failure opens it again for another cool-down. */
#include <string.h>

#include "../harness.h"
#include "breaker.h"

#define COOL FG__BREAKER_COOLDOWN_US

static void breaker_init(fg__breaker *b)
{
    memset(b, 0, sizeof(*b));
}

/* Open a fresh breaker with THRESHOLD failures at 't'. */
static void open_at(fg__breaker *b, uint64_t t)
{
    for (int i = 0; i < FG__BREAKER_THRESHOLD; i++)
        fg__breaker_failure(b, t);
}

static void test_closed_until_threshold(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t = 1000000;
    CHECK_EQ(fg__breaker_state(&b, t), FG__BREAKER_CLOSED);
    CHECK_EQ(fg__breaker_allow(&b, t), 1);
    /* THRESHOLD - 1 failures: still closed, every check may ask the store. */
    for (int i = 0; i < FG__BREAKER_THRESHOLD - 1; i++) {
        fg__breaker_failure(&b, t + (uint64_t)i);
        CHECK_EQ(fg__breaker_state(&b, t + (uint64_t)i), FG__BREAKER_CLOSED);
        CHECK_EQ(fg__breaker_allow(&b, t + (uint64_t)i), 1);
        CHECK_EQ(fg__breaker_allow(&b, t + (uint64_t)i), 1);
    }
    /* The THRESHOLD-th consecutive failure opens it. */
    fg__breaker_failure(&b, t + 10);
    CHECK_EQ(fg__breaker_state(&b, t + 10), FG__BREAKER_OPEN);
    CHECK_EQ(fg__breaker_allow(&b, t + 10), 0);
}

static void test_success_resets_count(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t = 5000000;
    /* Failures separated by a success never add up to the threshold. */
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < FG__BREAKER_THRESHOLD - 1; i++)
            fg__breaker_failure(&b, t);
        fg__breaker_success(&b);
        CHECK_EQ(fg__breaker_state(&b, t), FG__BREAKER_CLOSED);
        CHECK_EQ(fg__breaker_allow(&b, t), 1);
        t += 1000;
    }
}

static void test_cooldown_and_single_probe(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t0 = 7000000;
    open_at(&b, t0);
    /* Open for the whole cool-down: the last microsecond included. */
    CHECK_EQ(fg__breaker_allow(&b, t0), 0);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL / 2), 0);
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL - 1), FG__BREAKER_OPEN);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL - 1), 0);
    /* At the end of the cool-down: half open, exactly one probe. */
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL), FG__BREAKER_HALF_OPEN);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL), 1);
    int more = 0;
    for (int i = 0; i < 100; i++)
        more += fg__breaker_allow(&b, t0 + COOL + (uint64_t)i * 1000);
    CHECK_EQ(more, 0);
}

static void test_probe_success_closes(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t0 = 9000000;
    open_at(&b, t0);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL), 1);
    fg__breaker_success(&b);
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL), FG__BREAKER_CLOSED);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL), 1);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL + 1), 1);
    /* The count starts again from zero after closing. */
    for (int i = 0; i < FG__BREAKER_THRESHOLD - 1; i++)
        fg__breaker_failure(&b, t0 + COOL + 2);
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL + 2), FG__BREAKER_CLOSED);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL + 2), 1);
    fg__breaker_failure(&b, t0 + COOL + 3);
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL + 3), FG__BREAKER_OPEN);
}

static void test_probe_failure_reopens(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t0 = 11000000;
    open_at(&b, t0);
    uint64_t t1 = t0 + COOL + 12345; /* the probe goes out late */
    CHECK_EQ(fg__breaker_allow(&b, t1), 1);
    fg__breaker_failure(&b, t1);
    /* A single failed probe reopens for a full cool-down from its time. */
    CHECK_EQ(fg__breaker_state(&b, t1), FG__BREAKER_OPEN);
    CHECK_EQ(fg__breaker_allow(&b, t1), 0);
    CHECK_EQ(fg__breaker_allow(&b, t1 + COOL - 1), 0);
    CHECK_EQ(fg__breaker_state(&b, t1 + COOL - 1), FG__BREAKER_OPEN);
    CHECK_EQ(fg__breaker_state(&b, t1 + COOL), FG__BREAKER_HALF_OPEN);
    CHECK_EQ(fg__breaker_allow(&b, t1 + COOL), 1);
    CHECK_EQ(fg__breaker_allow(&b, t1 + COOL), 0);
    /* ... and a probe success after that closes it. */
    fg__breaker_success(&b);
    CHECK_EQ(fg__breaker_state(&b, t1 + COOL), FG__BREAKER_CLOSED);
    CHECK_EQ(fg__breaker_allow(&b, t1 + COOL), 1);
}

/* A probe that ends with neither verdict (bad input, out of memory) must
 * hand the probe to the next check, or the breaker would never close. */
static void test_probe_released(void)
{
    fg__breaker b;
    breaker_init(&b);
    uint64_t t0 = 21000000;
    open_at(&b, t0);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL), 1);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL), 0);
    fg__breaker_release(&b);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL + 1), 1);
    fg__breaker_success(&b);
    CHECK_EQ(fg__breaker_state(&b, t0 + COOL + 1), FG__BREAKER_CLOSED);
    /* Released while closed: nothing changes. */
    fg__breaker_release(&b);
    CHECK_EQ(fg__breaker_allow(&b, t0 + COOL + 2), 1);
}

int main(void)
{
    test_probe_released();
    test_closed_until_threshold();
    test_success_resets_count();
    test_cooldown_and_single_probe();
    test_probe_success_closes();
    test_probe_failure_reopens();
    return TEST_DONE();
}
