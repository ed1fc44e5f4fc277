/* test_serve_headers.c -- RateLimit headers, Retry-After, JSON bodies. */
#include <string.h>

#include "../../serve/headers.h"
#include "../harness.h"

static void test_rounding(void)
{
    CHECK_EQ(fg__ms_to_s_up(0), 0);
    CHECK_EQ(fg__ms_to_s_up(1), 1);
    CHECK_EQ(fg__ms_to_s_up(1000), 1);
    CHECK_EQ(fg__ms_to_s_up(1001), 2);
    CHECK_EQ(fg__window_s(1000000), 1);
    CHECK_EQ(fg__window_s(500000), 1);
    CHECK_EQ(fg__window_s(900000000ULL), 900);
    CHECK_EQ(fg__window_s(1500000), 2);
    /* The quota follows the window when the period is not whole seconds. */
    CHECK_EQ(fg__policy_quota(100, 1000000, 1), 100);
    CHECK_EQ(fg__policy_quota(100, 900000000ULL, 900), 100);
    CHECK_EQ(fg__policy_quota(100, 500000, 1), 200);
    CHECK_EQ(fg__policy_quota(3, 1500000, 2), 4);
    CHECK_EQ(fg__policy_quota(10, 300000, 1), 33);
    fg_decision d = {0};
    d.retry_after_ms = 4;
    CHECK_EQ(fg__retry_after_s(&d), 1);
    d.retry_after_ms = 2001;
    CHECK_EQ(fg__retry_after_s(&d), 3);
    d.retry_after_ms = 0;
    CHECK_EQ(fg__retry_after_s(&d), 1);
}

static void test_headers(void)
{
    char mem[256];
    fg__sbuf b;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_policy_item(&b, "bookings", 10, 1);
    CHECK_STR(mem, "\"bookings\";q=10;w=1");
    fg__fmt_policy_item(&b, "per_ip", 100, 1);
    CHECK_STR(mem, "\"bookings\";q=10;w=1, \"per_ip\";q=100;w=1");
    fg_decision d = {0};
    d.remaining = 3;
    d.reset_ms = 1200;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_ratelimit_item(&b, "otp", &d);
    CHECK_STR(mem, "\"otp\";r=3;t=2");
    /* A structured field's integer has at most 15 digits. */
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_policy_item(&b, "big", 9007199254740992000ull, 1);
    CHECK_STR(mem, "\"big\";q=999999999999999;w=1");
    d.remaining = 9007199254740991ull;
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_ratelimit_item(&b, "big", &d);
    CHECK_STR(mem, "\"big\";r=999999999999999;t=2");
    /* Overflow is reported, never written past the end. */
    char small[8];
    fg__sbuf_init(&b, small, sizeof(small));
    fg__fmt_policy_item(&b, "bookings", 10, 1);
    CHECK_EQ(b.overflow, 1);
    CHECK(strlen(small) < sizeof(small));
}

static void test_json(void)
{
    char mem[512];
    fg__sbuf b;
    fg_decision d = {.allowed = 1,
                     .limit = 10,
                     .remaining = 9,
                     .reset_ms = 100,
                     .retry_after_ms = 0,
                     .source = FG_SOURCE_STORE};
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_decision_json(&b, "bookings", &d, 0);
    CHECK_STR(mem, "{\"allowed\":true,\"limit\":10,\"remaining\":9,"
                   "\"reset_ms\":100,\"retry_after_ms\":0,\"source\":"
                   "\"store\",\"name\":\"bookings\"}\n");
    fg_decision r = {.allowed = 0,
                     .limit = 10,
                     .remaining = 0,
                     .reset_ms = 900,
                     .retry_after_ms = 120,
                     .source = FG_SOURCE_CACHE};
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_decision_json(&b, "bookings", &r, 1);
    CHECK_STR(mem, "{\"booked\":false,\"allowed\":false,\"limit\":10,"
                   "\"remaining\":0,\"reset_ms\":900,\"retry_after_ms\":120,"
                   "\"source\":\"cache\",\"name\":\"bookings\"}\n");
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_error_json(&b, "bad \"key\"\r\n", "Bad Request");
    CHECK_STR(mem, "{\"error\":\"bad \\\"key\\\"\\u000d\\u000a\"}\n");
    /* Bytes that are not UTF-8 become U+FFFD; characters stay. */
    fg__sbuf_init(&b, mem, sizeof(mem));
    fg__fmt_error_json(&b,
                       "a\x88"
                       "b\xc3\xa9"
                       "\xe2\x82",
                       "Bad Request");
    CHECK_STR(mem, "{\"error\":\"a\\ufffdb\xc3\xa9\\ufffd\\ufffd\"}\n");
    /* A message that does not fit: the fallback, whole. */
    char small[64], big[200];
    memset(big, 0x1a, sizeof big - 1);
    big[sizeof big - 1] = '\0';
    fg__sbuf_init(&b, small, sizeof(small));
    fg__fmt_error_json(&b, big, "Service Unavailable");
    CHECK_STR(small, "{\"error\":\"Service Unavailable\"}\n");
    CHECK(!b.overflow);
}

int main(void)
{
    test_rounding();
    test_headers();
    test_json();
    return TEST_DONE();
}
