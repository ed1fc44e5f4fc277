/* test_serve_bearer.c -- the admin routes' bearer token check
 * (serve/bearer.c): exactly "Bearer " and the token; anything else, a
 * prefix or an extension of the token included, is refused. */
#include "../harness.h"
#include "../../serve/bearer.h"

int main(void)
{
    const char *tok = "s3cr3t-Token";
    size_t n = strlen(tok);
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t-Token", tok, n), 1);
    CHECK_EQ(fg__bearer_ok("bearer s3cr3t-Token", tok, n), 1);
    CHECK_EQ(fg__bearer_ok("Bearer   s3cr3t-Token  ", tok, n), 1);
    CHECK_EQ(fg__bearer_ok(NULL, tok, n), 0);
    CHECK_EQ(fg__bearer_ok("", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer ", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("s3cr3t-Token", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Basic s3cr3t-Token", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t-Toke", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t-Tokenx", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t-token", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer x3cr3t-Token", tok, n), 0);
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t-Token s3cr3t-Token", tok, n), 0);
    /* A NUL in the middle of what was sent ends it there. */
    CHECK_EQ(fg__bearer_ok("Bearer s3cr3t\0-Token", tok, n), 0);
    /* No token configured: nothing is accepted, not even an empty one. */
    CHECK_EQ(fg__bearer_ok("Bearer ", "", 0), 0);
    CHECK_EQ(fg__bearer_ok("Bearer x", NULL, 0), 0);
    /* Every single-byte change of the token is refused. */
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, sizeof(buf), "Bearer %s", tok);
        buf[7 + i] ^= 1;
        CHECK_EQ(fg__bearer_ok(buf, tok, n), 0);
    }
    return TEST_DONE();
}
