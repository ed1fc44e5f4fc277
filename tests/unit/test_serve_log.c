/* test_serve_log.c -- log values (serve/log.c): a simple token bare, the
 * rest quoted, with '"', '\', control bytes and bytes that are not UTF-8
 * escaped, so that a log line is valid UTF-8; a value cut to fit its
 * buffer says so. */
#include "../harness.h"
#include "../../serve/log.h"

static const char *lv(const char *v, size_t outlen)
{
    static char out[256];
    return fg__log_value(v, out, outlen);
}

int main(void)
{
    CHECK_STR(lv("alice", 256), "alice");
    CHECK_STR(lv("", 256), "\"\"");
    CHECK_STR(lv("a b", 256), "\"a b\"");
    CHECK_STR(lv("a\"b\\c", 256), "\"a\\\"b\\\\c\"");
    CHECK_STR(lv("a\rb\x7f", 256), "\"a\\x0db\\x7f\"");
    /* UTF-8 as it is: 2, 3 and 4 bytes. */
    CHECK_STR(lv("caf\xc3\xa9", 256), "\"caf\xc3\xa9\"");
    CHECK_STR(lv("\xe2\x82\xac\xf0\x9f\x98\x80", 256),
              "\"\xe2\x82\xac\xf0\x9f\x98\x80\"");
    /* Not UTF-8, escaped: a stray continuation byte, 0xff, an overlong
     * '/' (c0 af, e0 80 af), a surrogate (ed a0 80), beyond U+10FFFF
     * (f4 90 80 80), a sequence cut by the end or by an ASCII byte. */
    CHECK_STR(lv("\x80", 256), "\"\\x80\"");
    CHECK_STR(lv("a\xff", 256), "\"a\\xff\"");
    CHECK_STR(lv("\xc0\xaf", 256), "\"\\xc0\\xaf\"");
    CHECK_STR(lv("\xe0\x80\xaf", 256), "\"\\xe0\\x80\\xaf\"");
    CHECK_STR(lv("\xed\xa0\x80", 256), "\"\\xed\\xa0\\x80\"");
    CHECK_STR(lv("\xf4\x90\x80\x80", 256), "\"\\xf4\\x90\\x80\\x80\"");
    CHECK_STR(lv("\xe2\x82", 256), "\"\\xe2\\x82\"");
    CHECK_STR(lv("\xc3x", 256), "\"\\xc3x\"");
    /* Valid UTF-8 that a reader may take for a line break or that
     * reorders what a terminal shows: escaped a byte each. NEL (U+0085),
     * CSI (U+009B), U+2028, U+2029, U+202E, U+2066; U+00A0 and U+2030 as
     * they are. */
    CHECK_STR(lv("a\xc2\x85"
                 "b",
                 256),
              "\"a\\xc2\\x85b\"");
    CHECK_STR(lv("\xc2\x9b"
                 "31m",
                 256),
              "\"\\xc2\\x9b31m\"");
    CHECK_STR(lv("x\xe2\x80\xa8y\xe2\x80\xa9", 256),
              "\"x\\xe2\\x80\\xa8y\\xe2\\x80\\xa9\"");
    CHECK_STR(lv("\xe2\x80\xae\xe2\x81\xa6", 256),
              "\"\\xe2\\x80\\xae\\xe2\\x81\\xa6\"");
    CHECK_STR(lv("\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f", 256),
              "\"\\xd8\\x9c\\xe2\\x80\\x8e\\xe2\\x80\\x8f\"");
    CHECK_STR(lv("\xc2\xa0\xe2\x80\xb0", 256), "\"\xc2\xa0\xe2\x80\xb0\"");
    /* Cut to fit: marked, never past the buffer. */
    char big[200];
    memset(big, 0xff, sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *cut = lv(big, 40);
    CHECK(strlen(cut) < 40);
    CHECK(strlen(cut) > 4 && !strcmp(cut + strlen(cut) - 4, "...\""));
    CHECK_STR(lv("a b", 7), "");
    CHECK_STR(lv("abcdefghij", 8), "\"...\"");
    return TEST_DONE();
}
