/* test_ring.c -- consistent hashing (ring.c): known answers, order
 * independence, balance, and how many keys move when a node is added. */
#include <stdio.h>
#include <string.h>

#include "../harness.h"
#include "floodgate.h"
#include "ring.h"

static const char *three[] = {"127.0.0.1:7001/0", "127.0.0.1:7002/0",
                              "127.0.0.1:7003/0"};

/* The hash is part of where counters live: its values are fixed. These
 * were computed by a separate implementation of FNV-1a 64 and fmix64. */
static void test_hash_known(void)
{
    CHECK_EQ(fg__ring_hash("", 0), 0xefd01f60ba992926ull);
    CHECK_EQ(fg__ring_hash("a", 1), 0x82a2a958a9bece5bull);
    CHECK_EQ(fg__ring_hash("foobar", 6), 0x2c22194922d1672bull);
    CHECK_EQ(fg__ring_hash("user:81", 7), 0x1400922bebf40c52ull);
}

static void test_nodes_known(void)
{
    fg__ring r;
    CHECK_EQ(fg__ring_init(&r, three, 3), FG_OK);
    static const struct {
        const char *key;
        unsigned node;
    } want[] = {{"user:1", 1}, {"user:2", 1}, {"user:81", 2},    {"alice", 0},
                {"bob", 2},    {"", 0},       {"203.0.113.7", 1}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_EQ(fg__ring_node(&r, want[i].key, strlen(want[i].key)),
                 want[i].node);
    fg__ring_free(&r);
}

static void key_of(unsigned i, char *buf, size_t n, size_t *len)
{
    *len = (size_t)snprintf(buf, n, "user:%u", i);
}

/* The same names in another order give every key the same node. */
static void test_order_independent(void)
{
    const char *rev[] = {three[2], three[0], three[1]};
    unsigned map[] = {2, 0, 1}; /* rev's index -> three's */
    fg__ring a, b;
    CHECK_EQ(fg__ring_init(&a, three, 3), FG_OK);
    CHECK_EQ(fg__ring_init(&b, rev, 3), FG_OK);
    unsigned differ = 0;
    for (unsigned i = 0; i < 20000; i++) {
        char k[32];
        size_t len;
        key_of(i, k, sizeof k, &len);
        if (fg__ring_node(&a, k, len) != map[fg__ring_node(&b, k, len)])
            differ++;
    }
    CHECK_EQ(differ, 0u);
    fg__ring_free(&a);
    fg__ring_free(&b);
}

/* Over 100,000 keys: each of N nodes holds about 1/N, and an added node
 * takes about 1/(N+1), every moved key going to it. */
static void test_balance_and_movement(void)
{
    const char *names[9];
    char buf[9][32];
    for (int i = 0; i < 9; i++) {
        snprintf(buf[i], sizeof buf[i], "10.0.0.%d:6379/0", i + 1);
        names[i] = buf[i];
    }
    for (unsigned n = 1; n <= 8; n++) {
        fg__ring a, b;
        CHECK_EQ(fg__ring_init(&a, names, n), FG_OK);
        CHECK_EQ(fg__ring_init(&b, names, n + 1), FG_OK);
        unsigned per[9] = {0}, moved = 0, astray = 0;
        const unsigned keys = 100000;
        for (unsigned i = 0; i < keys; i++) {
            char k[32];
            size_t len;
            key_of(i, k, sizeof k, &len);
            unsigned x = fg__ring_node(&a, k, len),
                     y = fg__ring_node(&b, k, len);
            per[x]++;
            if (x != y) {
                moved++;
                if (y != n)
                    astray++;
            }
        }
        double share = (double)moved / keys, ideal = 1.0 / (n + 1);
        printf("nodes %u -> %u: %.4f of 100000 keys moved (1/(N+1) = %.4f)\n",
               n, n + 1, share, ideal);
        CHECK_EQ(astray, 0u);
        CHECK(share > ideal * 0.75 && share < ideal * 1.25);
        for (unsigned i = 0; i < n; i++)
            CHECK(per[i] > keys / n * 0.75 && per[i] < keys / n * 1.25);
        fg__ring_free(&a);
        fg__ring_free(&b);
    }
}

static void test_refusals(void)
{
    fg__ring r;
    const char *dup[] = {"a:1/0", "b:1/0", "a:1/0"};
    CHECK_EQ(fg__ring_init(&r, dup, 3), FG_EINVAL);
    fg__ring_free(&r);
    CHECK_EQ(fg__ring_init(&r, dup, 0), FG_EINVAL);
    fg__ring_free(&r);
    const char *many[FG__RING_NODES_MAX + 1];
    char buf[FG__RING_NODES_MAX + 1][16];
    for (int i = 0; i <= FG__RING_NODES_MAX; i++) {
        snprintf(buf[i], sizeof buf[i], "n%d", i);
        many[i] = buf[i];
    }
    CHECK_EQ(fg__ring_init(&r, many, FG__RING_NODES_MAX + 1), FG_EINVAL);
    fg__ring_free(&r);
    CHECK_EQ(fg__ring_init(&r, many, FG__RING_NODES_MAX), FG_OK);
    fg__ring_free(&r);
}

int main(void)
{
    test_hash_known();
    test_nodes_known();
    test_order_independent();
    test_balance_and_movement();
    test_refusals();
    return TEST_DONE();
}
