/* conf_poll_pipe: poll/select/epoll readiness on pipes: empty (timeout 0),
 * readable, POLLHUP after writer close, POLLERR/POLLOUT on the write side,
 * a full pipe not writable, blocking poll woken by a child's write, and
 * ppoll with a signal mask. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
    (void)sig;
    usr1++;
}

static void show(const char *what, int r, short rev)
{
    printf("%s: r=%d%s%s%s%s%s\n", what, r, rev & POLLIN ? " IN" : "",
           rev & POLLOUT ? " OUT" : "", rev & POLLHUP ? " HUP" : "", rev & POLLERR ? " ERR" : "",
           rev & POLLNVAL ? " NVAL" : "");
}

int main(void)
{
    int p[2];
    char buf[256];
    CHECK(pipe(p) == 0);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};

    int r = poll(&pf, 1, 0);
    show("empty pipe, timeout 0", r, pf.revents);
    r = poll(&pf, 1, 10);
    show("empty pipe, timeout 10ms", r, pf.revents);

    CHECK(write(p[1], "hi", 2) == 2);
    r = poll(&pf, 1, -1);
    show("after write", r, pf.revents);
    CHECK(read(p[0], buf, 2) == 2);

    struct pollfd wf = {.fd = p[1], .events = POLLOUT};
    r = poll(&wf, 1, 0);
    show("write end of empty pipe", r, wf.revents);

    /* Fill the pipe: write end no longer writable. */
    CHECK(fcntl(p[1], F_SETFL, O_NONBLOCK) == 0);
    long filled = 0;
    for (;;) {
        ssize_t n = write(p[1], buf, sizeof buf);
        if (n < 0) {
            CHECK(errno == EAGAIN);
            break;
        }
        filled += n;
    }
    r = poll(&wf, 1, 0);
    show("write end of full pipe", r, wf.revents);
    printf("filled some bytes: %d\n", filled > 0);
    while (filled > 0) {
        ssize_t n = read(p[0], buf, sizeof buf);
        CHECK(n > 0);
        filled -= n;
    }
    r = poll(&wf, 1, 0);
    show("write end after drain", r, wf.revents);

    /* Writer closed with data left: IN|HUP, then HUP only. */
    CHECK(write(p[1], "x", 1) == 1);
    close(p[1]);
    r = poll(&pf, 1, 0);
    show("data + writer closed", r, pf.revents);
    CHECK(read(p[0], buf, 1) == 1);
    r = poll(&pf, 1, 0);
    show("writer closed, drained", r, pf.revents);
    close(p[0]);

    /* Reader closed: POLLERR on the write end. */
    CHECK(pipe(p) == 0);
    close(p[0]);
    wf.fd = p[1];
    r = poll(&wf, 1, 0);
    show("reader closed", r, wf.revents);
    close(p[1]);

    /* Invalid fd. */
    struct pollfd nf = {.fd = 999, .events = POLLIN};
    r = poll(&nf, 1, 0);
    show("closed fd", r, nf.revents);
    struct pollfd neg = {.fd = -1, .events = POLLIN};
    r = poll(&neg, 1, 0);
    show("negative fd ignored", r, neg.revents);

    /* Blocking poll on two pipes, woken when a child writes to the second. */
    int a[2], b[2];
    CHECK(pipe(a) == 0 && pipe(b) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(a[0]);
        close(b[0]);
        CHECK(write(b[1], "wake", 4) == 4);
        _exit(0);
    }
    close(b[1]);
    struct pollfd two[2] = {{.fd = a[0], .events = POLLIN}, {.fd = b[0], .events = POLLIN}};
    r = poll(two, 2, -1);
    printf("two pipes: r=%d a.IN=%d b.IN=%d\n", r, (two[0].revents & POLLIN) != 0,
           (two[1].revents & POLLIN) != 0);
    ssize_t n = read(b[0], buf, sizeof buf);
    printf("read '%.*s'\n", (int)n, buf);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);

    /* select() on the same pipes. */
    CHECK(write(a[1], "A", 1) == 1);
    fd_set rfds;
    FD_ZERO(&rfds);
    FD_SET(a[0], &rfds);
    FD_SET(b[0], &rfds);
    struct timeval tv = {0, 0};
    int maxfd = a[0] > b[0] ? a[0] : b[0];
    r = select(maxfd + 1, &rfds, NULL, NULL, &tv);
    printf("select: r=%d a=%d b(EOF)=%d\n", r, FD_ISSET(a[0], &rfds) != 0,
           FD_ISSET(b[0], &rfds) != 0);
    tv.tv_sec = 0;
    tv.tv_usec = 10000;
    FD_ZERO(&rfds);
    CHECK(read(a[0], buf, 1) == 1);
    FD_SET(a[0], &rfds);
    r = select(a[0] + 1, &rfds, NULL, NULL, &tv);
    printf("select timeout on empty pipe: r=%d\n", r);

    /* epoll: level-triggered readiness, then edge-triggered. */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a[0], &ev) == 0);
    struct epoll_event out[4];
    printf("epoll empty: %d\n", epoll_wait(ep, out, 4, 0));
    CHECK(write(a[1], "BC", 2) == 2);
    r = epoll_wait(ep, out, 4, -1);
    printf("epoll ready: %d data=%u IN=%d\n", r, out[0].data.u32, (out[0].events & EPOLLIN) != 0);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll level-triggered again: %d\n", r);
    ev.events = EPOLLIN | EPOLLET;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, a[0], &ev) == 0);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll edge after MOD: %d\n", r);
    r = epoll_wait(ep, out, 4, 0);
    printf("epoll edge no new data: %d\n", r);
    close(ep);
    CHECK(read(a[0], buf, sizeof buf) == 2);

    /* ppoll interrupted by a pending signal unblocked only for the call. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    sigset_t block, during;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    CHECK(sigprocmask(SIG_BLOCK, &block, &during) == 0);
    raise(SIGUSR1);
    printf("handler ran while blocked: %d\n", usr1);
    struct pollfd ap = {.fd = a[0], .events = POLLIN};
    errno = 0;
    r = ppoll(&ap, 1, NULL, &during);
    printf("ppoll: r=%d %s handler ran: %d\n", r, errno == EINTR ? "EINTR" : "?", usr1);
    struct timespec ts = {0, 5000000};
    r = ppoll(&ap, 1, &ts, &during);
    printf("ppoll timeout: r=%d\n", r);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    return 0;
}
