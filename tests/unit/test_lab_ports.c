/* test_lab_ports.c -- the lab's free ports: a port it handed out recently
 * is never handed out again (floodgate serve and HAProxy bind with
 * SO_REUSEPORT, so two of the lab's processes given one port would both
 * start and split its connections), and each port it hands out is free. */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../lab/lab.h"
#include "../harness.h"

/* 1 when 127.0.0.1:'port' can be bound (no SO_REUSEPORT) right now. */
static int bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Four clusters of 64 servers and a balancer, and Redis, four times over:
 * with the kernel's own choice alone, a repeat among 1,024 ports drawn
 * from its ephemeral range is all but certain (a run of the lab's 37
 * ports repeats one about once in 20). */
static void test_distinct(void)
{
    enum { N = 1024 };
    static unsigned char seen[65536];
    int repeats = 0, bad = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        int port = fg__lab_free_port();
        if (port <= 0 || port > 65535) {
            bad++;
            continue;
        }
        repeats += seen[port];
        seen[port] = 1;
        if (i % 64 == 0 && !bindable(port))
            busy++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(repeats, 0);
    CHECK_EQ(busy, 0);
}

int main(void)
{
    test_distinct();
    return TEST_DONE();
}
