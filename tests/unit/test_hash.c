/* test_hash.c -- the memory store's key hash: the inline and out-of-line
 * forms agree, the bits the store uses (tag, stripe, home slot) are evenly
 * spread over keys that differ little, one flipped input bit changes about
 * half the output, and the seed cannot be cancelled by a key made for it. */
#include <stdio.h>

#include "../harness.h"
#include "hash.h"

/* Chi-square of 'n' counts against an even spread of 'total'. */
static double chi2(const unsigned *count, size_t n, size_t total)
{
    double e = (double)total / (double)n, x = 0;
    for (size_t i = 0; i < n; i++) {
        double d = count[i] - e;
        x += d * d / e;
    }
    return x;
}

static void test_forms_agree(void)
{
    unsigned char buf[100];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    int bad = 0;
    for (size_t len = 0; len <= sizeof(buf); len++)
        bad += fg__hash(buf, len, 7) != fg__hash_inline(buf, len, 7);
    CHECK_EQ(bad, 0);
}

/* Every length from 0 to 40 of one buffer, and buffers one byte apart,
 * hash differently: each byte and the length count. */
static void test_lengths_and_bytes(void)
{
    unsigned char buf[40] = {0};
    uint64_t seen[41];
    int same = 0;
    for (size_t len = 0; len <= 40; len++) {
        seen[len] = fg__hash(buf, len, 1);
        for (size_t j = 0; j < len; j++)
            same += seen[len] == seen[j];
    }
    CHECK_EQ(same, 0);
    for (size_t len = 1; len <= 40; len++) {
        for (size_t pos = 0; pos < len; pos++) {
            uint64_t before = fg__hash(buf, len, 1);
            buf[pos] ^= 0x01;
            same += fg__hash(buf, len, 1) == before;
            buf[pos] ^= 0x01;
        }
    }
    CHECK_EQ(same, 0);
}

/* Sequential keys, as a service names its users: the tag (bits 0-6), the
 * stripe (bits 8-13) and the home slot (the high bits, scaled) are spread
 * evenly. The bounds are six standard deviations above the mean of a
 * chi-square with that many degrees of freedom. */
static void test_spread(void)
{
    static const char *formats[] = {"a:user%08zu", "%zu", "k%zu",
                                    "tenant-42/user/%zu/api/v1/bookings"};
    static unsigned tag[128], stripe[64], home[1 << 16];
    const size_t n = 1000000;
    for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
        memset(tag, 0, sizeof(tag));
        memset(stripe, 0, sizeof(stripe));
        memset(home, 0, sizeof(home));
        char key[64];
        for (size_t i = 0; i < n; i++) {
            int len = snprintf(key, sizeof(key), formats[f], i);
            uint64_t h = fg__hash(key, (size_t)len, 0x5eed);
            tag[h & 127]++;
            stripe[(h >> 8) & 63]++;
            home[(size_t)(((unsigned __int128)h << 16) >> 64)]++;
        }
        double t = chi2(tag, 128, n), s = chi2(stripe, 64, n),
               o = chi2(home, 1 << 16, n);
        CHECK(t < 127 + 6 * 16);
        CHECK(s < 63 + 6 * 11.3);
        CHECK(o < 65535 + 6 * 362);
        if (t >= 127 + 6 * 16 || s >= 63 + 6 * 11.3 || o >= 65535 + 6 * 362)
            fprintf(stderr, "  %s: chi2 tag %.0f stripe %.0f home %.0f\n",
                    formats[f], t, s, o);
    }
}

/* Flipping any one bit of a 15-byte key flips each output bit about half
 * the time. */
static void test_avalanche(void)
{
    static unsigned flips[64];
    const int trials = 200;
    char key[16];
    for (int bit = 0; bit < 15 * 8; bit++) {
        for (int t = 0; t < trials; t++) {
            snprintf(key, sizeof(key), "a:user%09d", t * 7919);
            uint64_t h1 = fg__hash(key, 15, 99);
            key[bit / 8] ^= (char)(1 << (bit % 8));
            uint64_t d = h1 ^ fg__hash(key, 15, 99);
            for (int o = 0; o < 64; o++)
                flips[o] += (unsigned)(d >> o) & 1;
        }
    }
    int bad = 0;
    const double total = 15 * 8 * trials;
    for (int o = 0; o < 64; o++) {
        double p = flips[o] / total;
        if (p < 0.45 || p > 0.55) {
            fprintf(stderr, "  output bit %d flips with p %.3f\n", o, p);
            bad++;
        }
    }
    CHECK_EQ(bad, 0);
}

/* The seed changes every hash, also of keys whose words equal the hash's
 * own constants (a fold by zero would otherwise drop what came before). */
static void test_seed(void)
{
    unsigned char key[48];
    int same = 0;
    for (int k = 0; k < 1000; k++) {
        for (size_t i = 0; i < sizeof(key); i++)
            key[i] = (unsigned char)(k * 131 + i);
        for (size_t len = 0; len <= sizeof(key); len += 3)
            same += fg__hash(key, len, 1) == fg__hash(key, len, 2);
    }
    CHECK_EQ(same, 0);
    static const uint64_t k[] = {FG__HASH_K0, FG__HASH_K1, FG__HASH_K2};
    for (size_t c = 0; c < 3; c++) {
        for (size_t at = 0; at + 8 <= sizeof(key); at += 8)
            memcpy(key + at, &k[c], 8);
        for (size_t len = 8; len <= sizeof(key); len++) {
            uint64_t a = fg__hash(key, len, 1), b = fg__hash(key, len, 2);
            same += a == b;
        }
    }
    CHECK_EQ(same, 0);
    /* Two long keys that differ only after a first word equal to a
     * constant still differ, under any seed. */
    memcpy(key, &k[1], 8);
    memset(key + 8, 'x', sizeof(key) - 8);
    uint64_t a = fg__hash(key, sizeof(key), 3);
    key[sizeof(key) - 1] = 'y';
    CHECK(a != fg__hash(key, sizeof(key), 3));
}

int main(void)
{
    test_forms_agree();
    test_lengths_and_bytes();
    test_spread();
    test_avalanche();
    test_seed();
    return TEST_DONE();
}
