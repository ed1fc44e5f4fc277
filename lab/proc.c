/* proc.c -- starting, waiting for and stopping the lab's child processes.
 *
 * Every child is put in its own process group (so a Ctrl-C in the terminal
 * reaches the lab alone, which then stops the children in order and removes
 * its folder) and asks the kernel to kill it when the lab dies, so even a
 * lab killed with SIGKILL leaves nothing running. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lab.h"

volatile sig_atomic_t fg__lab_stop;

/* The signal's number: the lab exits with 128 + it, as a shell would. */
static void on_signal(int sig)
{
    fg__lab_stop = sig;
}

/* No SA_RESTART: a blocking wait returns EINTR and the loop sees the flag. */
void fg__lab_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

pid_t fg__lab_spawn(char *const argv[], const char *log, char *err,
                    size_t errlen)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        /* The lab's handlers are not the child's business. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int in = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (in < 0 || out < 0)
            _exit(127);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        /* Listening sockets of the lab must not live on in a child. */
        close_range(3, ~0U, 0);
        execv(argv[0], argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

/* Each child leads a process group of its own (fg__lab_spawn): the group
 * is signalled, so that what a wrapper script started goes too. */
void fg__lab_stop_procs(pid_t *pids, int n, int grace_ms)
{
    int alive = 0;
    for (int i = 0; i < n; i++) {
        if (pids[i] > 0) {
            kill(-pids[i], SIGTERM);
            alive++;
        }
    }
    int64_t deadline = fg__lab_now_us() + (int64_t)grace_ms * 1000;
    while (alive > 0) {
        alive = 0;
        for (int i = 0; i < n; i++) {
            if (pids[i] <= 0)
                continue;
            pid_t w = waitpid(pids[i], NULL, WNOHANG);
            if (w == pids[i] || (w < 0 && errno == ECHILD))
                pids[i] = 0;
            else
                alive++;
        }
        if (alive == 0)
            break;
        if (fg__lab_now_us() >= deadline) {
            for (int i = 0; i < n; i++) {
                if (pids[i] > 0) {
                    kill(-pids[i], SIGKILL);
                    waitpid(pids[i], NULL, 0);
                    pids[i] = 0;
                }
            }
            break;
        }
        sleep_us(1000);
    }
}

/* 127.0.0.1:'port'; port 0 lets bind() pick one. */
static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    return a;
}

/* The ports handed out last, newest at 'recent_next - 1': more than one
 * run's worth (four clusters of at most 64 servers and a balancer each,
 * and Redis), all of which may be listening at once. */
#define RECENT_PORTS 1024
static uint16_t recent[RECENT_PORTS];
static unsigned recent_next;
static pthread_mutex_t recent_lock = PTHREAD_MUTEX_INITIALIZER;

static int recently_handed(int port)
{
    for (unsigned i = 0; i < RECENT_PORTS; i++)
        if (recent[i] == port)
            return 1;
    return 0;
}

/* The kernel picks a free port. Once this probe closes, the kernel may
 * pick the same port again for the next one, and floodgate serve binds
 * with SO_REUSEPORT (as HAProxy does), so two servers given one port
 * would both start and split its connections between them: a port the lab
 * handed out recently is never handed out again. The window between
 * closing the probe and the child binding the port is small, and a port
 * taken by another program in it shows as a start-up error. */
int fg__lab_free_port(void)
{
    int port = -1;
    pthread_mutex_lock(&recent_lock);
    for (int tries = 0; tries < 64 && port < 0; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            break;
        struct sockaddr_in a = loopback(0);
        socklen_t alen = sizeof a;
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &alen) == 0 &&
            !recently_handed(ntohs(a.sin_port)))
            port = ntohs(a.sin_port);
        close(fd);
    }
    if (port > 0)
        recent[recent_next++ % RECENT_PORTS] = (uint16_t)port;
    pthread_mutex_unlock(&recent_lock);
    return port;
}

static int try_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = loopback(port);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    return rc;
}

int fg__lab_wait_port(int port, pid_t pid, int timeout_ms, int *status)
{
    int64_t deadline = fg__lab_now_us() + (int64_t)timeout_ms * 1000;
    if (status)
        *status = -1;
    for (;;) {
        if (try_connect(port) == 0)
            return 0;
        if (pid > 0 && waitpid(pid, status, WNOHANG) == pid)
            return -1;
        if (fg__lab_stop || fg__lab_now_us() >= deadline)
            return -1;
        sleep_us(500);
    }
}

void fg__lab_exit_text(int status, int timeout_ms, char *buf, size_t len)
{
    if (status < 0)
        snprintf(buf, len, "it did not listen within %d ms, and logged nothing",
                 timeout_ms);
    else if (WIFEXITED(status))
        snprintf(buf, len,
                 "it exited with status %d before listening, and logged "
                 "nothing",
                 WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len,
                 "it was killed by signal %d before listening, and logged "
                 "nothing",
                 WTERMSIG(status));
    else
        snprintf(buf, len, "it stopped before listening, and logged nothing");
}

int fg__lab_maxconn(int burst)
{
    return burst + FG__LAB_HAPROXY_SPARE;
}

long long fg__lab_fds_needed(int burst)
{
    /* HAProxy 2.6 asks for 2 x maxconn + 14: its side of a connection and
     * the one to the server, and its own few. 32 leaves room for the rest
     * of its own. */
    return 2LL * fg__lab_maxconn(burst) + 32;
}

const char *fg__lab_find_program(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin:/usr/local/sbin",
             path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d;
         d = strtok_r(NULL, ":", &save)) {
        if (*d == '\0')
            continue;
        snprintf(buf, len, "%s/%s", d, name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void fg__lab_rmtree(const char *dir)
{
    if (dir && *dir)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void fg__lab_log_tail(const char *path, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        long from = size > (long)len - 1 ? size - ((long)len - 1) : 0;
        fseek(f, from, SEEK_SET);
    }
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    /* One line is enough in a message: keep the last non-empty one. */
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *nl = strrchr(buf, '\n');
    if (nl)
        memmove(buf, nl + 1, strlen(nl + 1) + 1);
}

int fg__lab_writable(const char *me, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        unlink(path);
        return 0;
    }
    /* Without waiting for a reader: a FIFO no one reads fails at once. */
    if (errno == EEXIST)
        fd = open(path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    fprintf(stderr, "%s: cannot write the chart to %s: %s\n", me, path,
            errno == ENXIO ? "a FIFO that no process reads" : strerror(errno));
    return -1;
}
