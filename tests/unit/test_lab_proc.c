/* test_lab_proc.c -- the lab's process helpers that need no process: the
 * descriptors a burst needs (HAProxy holds two a connection, and asks for
 * 2 x maxconn + 14 at start, refusing to start beyond the hard limit), and
 * the reason given for a program that exited without a word. */
#include <string.h>
#include <sys/wait.h>

#include "../../lab/lab.h"
#include "../harness.h"

/* maxconn follows the burst: a small burst fits a small limit (a fixed
 * maxconn of 4096 needed 8206 descriptors for a burst of 5), a large one
 * gets every connection (4096 refused a burst of 5000 its last 904). */
static void test_fds(void)
{
    CHECK_EQ(fg__lab_maxconn(5), 5 + FG__LAB_HAPROXY_SPARE);
    CHECK_EQ(fg__lab_maxconn(5000), 5000 + FG__LAB_HAPROXY_SPARE);
    CHECK(fg__lab_maxconn(FG__LAB_MAX_BURST) > FG__LAB_MAX_BURST);
    /* HAProxy 2.6 asks for 2 x maxconn + 14. */
    for (int b = 1; b <= FG__LAB_MAX_BURST; b *= 10)
        CHECK(fg__lab_fds_needed(b) >= 2LL * fg__lab_maxconn(b) + 14);
    CHECK(fg__lab_fds_needed(5) <= 1024);
    CHECK(fg__lab_fds_needed(FG__LAB_WEB_MAX_BURST) <= 4096);
    CHECK_EQ(fg__lab_fds_needed(5000), 10160);
}

static void test_exit_text(void)
{
    char buf[160];
    fg__lab_exit_text(1 << 8, 5000, buf, sizeof buf); /* exit(1) */
    CHECK(strstr(buf, "exited with status 1") != NULL);
    fg__lab_exit_text(9, 5000, buf, sizeof buf); /* SIGKILL */
    CHECK(strstr(buf, "killed by signal 9") != NULL);
    fg__lab_exit_text(-1, 5000, buf, sizeof buf); /* still running */
    CHECK(strstr(buf, "did not listen within 5000 ms") != NULL);
    CHECK(WIFEXITED(1 << 8) && WEXITSTATUS(1 << 8) == 1);
}

int main(void)
{
    test_fds();
    test_exit_text();
    return TEST_DONE();
}
