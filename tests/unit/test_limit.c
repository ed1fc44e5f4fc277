/* test_limit.c -- fg_limit_parse and the names of algorithms, failure
 * policies, sources and errors, checked against DESIGN.md and the public
 * header rather than against the parser's own tables. */
#include <limits.h>

#include "../harness.h"
#include "floodgate.h"

static void check_ok(const char *rate, uint64_t limit, uint64_t period_us)
{
    fg_limit l;
    char err[256] = "";
    memset(&l, 0xa5, sizeof(l)); /* every field must be reset */
    int rc = fg_limit_parse_err(rate, &l, err, sizeof(err));
    CHECK_EQ(rc, FG_OK);
    if (rc != FG_OK)
        fprintf(stderr, "  '%s': %s\n", rate, err);
    CHECK_EQ(l.limit, limit);
    CHECK_EQ(l.period_us, period_us);
    /* Defaults from the header. */
    CHECK_STR(l.name, "default");
    CHECK_EQ(l.algorithm, FG_TOKEN_BUCKET);
    CHECK_EQ(l.on_failure, FG_FAIL_OPEN);
    CHECK_EQ(l.timeout_ms, 5);
    CHECK_EQ(l.burst, 0);
    CHECK_EQ(l.fallback_servers, 1);

    fg_limit m;
    memset(&m, 0x5a, sizeof(m));
    CHECK_EQ(fg_limit_parse(rate, &m), FG_OK);
    CHECK_EQ(m.limit, limit);
    CHECK_EQ(m.period_us, period_us);
    CHECK_STR(m.name, "default");
}

static void test_valid_rates(void)
{
    check_ok("10/s", 10, 1000000);
    check_ok("100/min", 100, 60000000);
    check_ok("5/15min", 5, 900000000);
    check_ok("1000/h", 1000, 3600000000ull);
    check_ok("50000/day", 50000, 86400000000ull);
    check_ok("250/500ms", 250, 500000);
    check_ok("1/1ms", 1, 1000);
    check_ok("1/ms", 1, 1000);
    /* The largest count the header promises: FG_MAX_COUNT itself. */
    check_ok("9007199254740992/s", FG_MAX_COUNT, 1000000);
}

/* 'rate' is refused with FG_EINVAL, and the reason contains 'why'. */
static void check_err(const char *rate, const char *why)
{
    fg_limit l;
    char err[256] = "";
    CHECK_EQ(fg_limit_parse_err(rate, &l, err, sizeof(err)), FG_EINVAL);
    CHECK(strstr(err, why) != NULL);
    if (!strstr(err, why))
        fprintf(stderr, "  '%s': reason '%s' lacks '%s'\n", rate, err, why);
    CHECK_EQ(fg_limit_parse(rate, &l), FG_EINVAL);
}

static void test_invalid_rates(void)
{
    check_err("10/", "unit");
    check_err("/s", "COUNT/PERIOD");
    check_err("0/s", "at least 1");
    check_err("10/fortnight", "unknown unit 'fortnight'");
    check_err("99999999999999999999/s", "too large");
    check_err("9007199254740993/s", "too large");
    check_err("", "COUNT/PERIOD");
    check_err("10", "'/'");
    check_err("10/s junk", "after the unit");
    check_err("-5/s", "-5/s");
    check_err("10/0s", "period");
    check_err("10/S", "unknown unit");
    check_err("10/2000day", "year");
    /* The reason names what is wrong, not what happens to come first. */
    check_err("0x10/s", "expected '/' after the count");
    check_err("10/1.5s", "the period must be a whole number and a unit");
    check_err("10/-1s", "the period must be a whole number and a unit");
    check_err("10/0.5s", "the period must be a whole number and a unit");

    /* No rate or no output: refused, never a crash. */
    fg_limit l;
    char err[64] = "";
    CHECK_EQ(fg_limit_parse_err(NULL, &l, err, sizeof(err)), FG_EINVAL);
    CHECK(err[0] != '\0');
    CHECK_EQ(fg_limit_parse(NULL, &l), FG_EINVAL);
    CHECK_EQ(fg_limit_parse("10/s", NULL), FG_EINVAL);

    /* A short buffer gets a truncated, terminated reason. */
    char small[8];
    memset(small, 'x', sizeof(small));
    CHECK_EQ(fg_limit_parse_err("10/fortnight", &l, small, sizeof(small)),
             FG_EINVAL);
    CHECK(memchr(small, '\0', sizeof(small)) != NULL);
    /* errlen 0 with a NULL buffer is allowed. */
    CHECK_EQ(fg_limit_parse_err("10/", &l, NULL, 0), FG_EINVAL);
}

static void test_names(void)
{
    static const struct {
        fg_algorithm a;
        const char *name;
    } algos[] = {{FG_FIXED_WINDOW, "fixed_window"},
                 {FG_SLIDING_WINDOW, "sliding_window"},
                 {FG_TOKEN_BUCKET, "token_bucket"},
                 {FG_NAIVE_GET_SET, "naive_get_set"}};
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        CHECK_STR(fg_algorithm_name(algos[i].a), algos[i].name);
        fg_algorithm out = (fg_algorithm)99;
        CHECK_EQ(fg_algorithm_parse(algos[i].name, &out), FG_OK);
        CHECK_EQ(out, algos[i].a);
    }
    fg_algorithm a = FG_FIXED_WINDOW;
    CHECK_EQ(fg_algorithm_parse("leaky_bucket", &a), FG_EINVAL);
    CHECK_EQ(fg_algorithm_parse("", &a), FG_EINVAL);
    CHECK_EQ(fg_algorithm_parse("Token_Bucket", &a), FG_EINVAL);
    CHECK_EQ(fg_algorithm_parse(NULL, &a), FG_EINVAL);
    CHECK_EQ(fg_algorithm_parse("token_bucket", NULL), FG_EINVAL);
    CHECK_EQ(a, FG_FIXED_WINDOW); /* untouched on failure */
    CHECK(fg_algorithm_name((fg_algorithm)4) == NULL);
    CHECK(fg_algorithm_name((fg_algorithm)-1) == NULL);

    static const struct {
        fg_on_failure f;
        const char *name;
    } fails[] = {{FG_FAIL_OPEN, "open"},
                 {FG_FAIL_CLOSED, "closed"},
                 {FG_FAIL_LOCAL, "local"}};
    for (size_t i = 0; i < sizeof(fails) / sizeof(fails[0]); i++) {
        CHECK_STR(fg_on_failure_name(fails[i].f), fails[i].name);
        fg_on_failure out = (fg_on_failure)99;
        CHECK_EQ(fg_on_failure_parse(fails[i].name, &out), FG_OK);
        CHECK_EQ(out, fails[i].f);
    }
    fg_on_failure f = FG_FAIL_CLOSED;
    CHECK_EQ(fg_on_failure_parse("fail_open", &f), FG_EINVAL);
    CHECK_EQ(fg_on_failure_parse(NULL, &f), FG_EINVAL);
    CHECK_EQ(fg_on_failure_parse("open", NULL), FG_EINVAL);
    CHECK_EQ(f, FG_FAIL_CLOSED);
    CHECK(fg_on_failure_name((fg_on_failure)3) == NULL);

    /* DESIGN.md section 9: "source":"store|cache|local|fail_open|
     * fail_closed". */
    CHECK_STR(fg_source_name(FG_SOURCE_STORE), "store");
    CHECK_STR(fg_source_name(FG_SOURCE_CACHE), "cache");
    CHECK_STR(fg_source_name(FG_SOURCE_LOCAL), "local");
    CHECK_STR(fg_source_name(FG_SOURCE_FAIL_OPEN), "fail_open");
    CHECK_STR(fg_source_name(FG_SOURCE_FAIL_CLOSED), "fail_closed");
    CHECK(fg_source_name((fg_source)7) == NULL);
    CHECK(fg_source_name((fg_source)-1) == NULL);

    /* A mode's interval: decimal, at most one point, whole milliseconds. */
    fg_limit ml;
    CHECK_EQ(fg_limit_parse("100/s", &ml), FG_OK);
    CHECK_EQ(fg_mode_parse("sync:1.5s", &ml, NULL, 0), FG_OK);
    CHECK_EQ(ml.sync_ms, 1500);
    const char *badm[] = {"sync:0x10ms", "sync:1e1s", "sync:+5s",
                          "sync:.5s",    "sync:5.s",  "sync:1.0005s",
                          "sync:10001ms"};
    for (size_t i = 0; i < sizeof badm / sizeof badm[0]; i++)
        CHECK_EQ(fg_mode_parse(badm[i], &ml, NULL, 0), FG_EINVAL);
    /* A timeout of 0 would fail every check of a remote store. */
    ml.mode = FG_MODE_EXACT;
    CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_OK);
    ml.timeout_ms = 0;
    CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_EINVAL);
    /* At most a minute, as floodgate check's --timeout and serve's. */
    ml.timeout_ms = 60000;
    CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_OK);
    ml.timeout_ms = 60001;
    CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_EINVAL);
    /* The flags are 0 or 1: another value is a mistake, said. */
    ml.timeout_ms = 5;
    char err[128];
    int *flags[] = {&ml.clock_client, &ml.durable, &ml.shadow};
    const char *names[] = {"clock_client", "durable", "shadow"};
    for (int i = 0; i < 3; i++) {
        *flags[i] = 1;
        CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_OK);
        *flags[i] = 2;
        CHECK_EQ(fg_limit_check(&ml, err, sizeof err), FG_EINVAL);
        CHECK(strstr(err, names[i]) && strstr(err, "0 or 1"));
        *flags[i] = -1;
        CHECK_EQ(fg_limit_check(&ml, NULL, 0), FG_EINVAL);
        *flags[i] = 0;
    }
}

static void test_strerror(void)
{
    /* Every code, with the text the header gives it. */
#define EXPECT_TEXT(name, code, text) CHECK_STR(fg_strerror(code), text);
    FG_ERRORS(EXPECT_TEXT)
#undef EXPECT_TEXT
    CHECK_STR(fg_strerror(FG_ENOMEM), "out of memory");
    CHECK_STR(fg_strerror(FG_ECOST), "cost out of range");
    CHECK_STR(fg_strerror(FG_EBREAKER), "circuit breaker open");
    /* Codes are distinct. */
    int codes[] = {
#define CODE(name, code, text) code,
        FG_ERRORS(CODE)
#undef CODE
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    int dup = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            dup += codes[i] == codes[j];
    CHECK_EQ(dup, 0);
    CHECK_EQ(n, 16);
    int unknown[] = {1, 42, -16, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        CHECK_STR(fg_strerror(unknown[i]), "unknown error");
}

int main(void)
{
    test_valid_rates();
    test_invalid_rates();
    test_names();
    test_strerror();
    return TEST_DONE();
}
