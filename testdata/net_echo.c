/* net_echo: a TCP echo server on 127.0.0.1 (port 0) driven by epoll, and
 * three forked clients. Each client connects (blocking), sends five lines
 * "client K msg J\n", reads each echo back up to its newline and prints
 * "cK got: <line>". The server prints one line per complete line it reads,
 * "server: conn C line: <text>" (C = accept order), and one per close.
 * Connection 1 is registered edge-triggered (EPOLLET, drained to EAGAIN);
 * the others level-triggered (one read per event). Nothing printed depends on
 * anything but the interleaving: no ports, fds or pids. The parent reaps the
 * clients in pid order, prints "done" and exits 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NCLIENTS 3
#define NMSGS 5

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "net_echo: %s:%d: check failed: %s (%s)\n",       \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void write_all(int fd, const char *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            CHECK(poll(&p, 1, -1) >= 0);
            continue;
        }
        CHECK(w > 0);
        done += (size_t)w;
    }
}

static void client(int k, struct sockaddr_in *addr)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    CHECK(connect(s, (struct sockaddr *)addr, sizeof *addr) == 0);
    for (int j = 0; j < NMSGS; j++) {
        char msg[64];
        int n = snprintf(msg, sizeof msg, "client %d msg %d\n", k, j);
        write_all(s, msg, (size_t)n);
        char line[128];
        size_t len = 0;
        for (;;) {
            char c;
            ssize_t r = read(s, &c, 1);
            if (r < 0 && errno == EINTR)
                continue;
            CHECK(r == 1);
            if (c == '\n')
                break;
            CHECK(len + 1 < sizeof line);
            line[len++] = c;
        }
        line[len] = 0;
        printf("c%d got: %s\n", k, line);
        CHECK(strncmp(line, msg, (size_t)n - 1) == 0 && len == (size_t)n - 1);
    }
    CHECK(close(s) == 0);
    fflush(stdout);
    _exit(0);
}

struct conn {
    int fd;
    int et;
    size_t len;
    char buf[512];
};

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(ls >= 0);
    int one = 1;
    CHECK(setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    CHECK(bind(ls, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(ls, 16) == 0);
    socklen_t alen = sizeof addr;
    CHECK(getsockname(ls, (struct sockaddr *)&addr, &alen) == 0);
    CHECK(ntohs(addr.sin_port) != 0);

    fflush(stdout);
    pid_t pids[NCLIENTS];
    for (int k = 0; k < NCLIENTS; k++) {
        pids[k] = fork();
        CHECK(pids[k] >= 0);
        if (pids[k] == 0) {
            close(ls);
            client(k, &addr);
        }
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)-1};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) == 0);

    struct conn conns[NCLIENTS];
    int accepted = 0, closed = 0;
    while (closed < NCLIENTS) {
        struct epoll_event evs[8];
        int n = epoll_wait(ep, evs, 8, -1);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n > 0);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == (uint64_t)-1) {
                int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                CHECK(fd >= 0);
                CHECK(accepted < NCLIENTS);
                int c = accepted++;
                conns[c].fd = fd;
                conns[c].et = (c == 1);
                conns[c].len = 0;
                printf("server: accept conn %d\n", c);
                struct epoll_event cev = {
                    .events = EPOLLIN | EPOLLRDHUP | (conns[c].et ? EPOLLET : 0),
                    .data.u64 = (uint64_t)c};
                CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) == 0);
                if (accepted == NCLIENTS)
                    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, ls, NULL) == 0);
                continue;
            }
            int c = (int)evs[i].data.u64;
            struct conn *cn = &conns[c];
            int eof = 0;
            /* Edge-triggered: drain to EAGAIN. Level-triggered: one read. */
            for (;;) {
                ssize_t r = read(cn->fd, cn->buf + cn->len, sizeof cn->buf - cn->len - 1);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0 && errno == EAGAIN)
                    break;
                CHECK(r >= 0);
                if (r == 0) {
                    eof = 1;
                    break;
                }
                cn->len += (size_t)r;
                char *nl;
                while ((nl = memchr(cn->buf, '\n', cn->len)) != NULL) {
                    size_t l = (size_t)(nl - cn->buf) + 1;
                    printf("server: conn %d line: %.*s\n", c, (int)l - 1, cn->buf);
                    write_all(cn->fd, cn->buf, l);
                    memmove(cn->buf, cn->buf + l, cn->len - l);
                    cn->len -= l;
                }
                CHECK(cn->len < sizeof cn->buf - 1);
                if (!cn->et)
                    break;
            }
            if (eof) {
                CHECK(cn->len == 0);
                printf("server: conn %d closed\n", c);
                CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, cn->fd, NULL) == 0);
                CHECK(close(cn->fd) == 0);
                cn->fd = -1;
                closed++;
            }
        }
    }
    close(ep);
    close(ls);

    int failed = 0;
    for (int k = 0; k < NCLIENTS; k++) {
        int st;
        CHECK(waitpid(pids[k], &st, 0) == pids[k]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("client %d failed (status %#x)\n", k, st);
            failed = 1;
        }
    }
    printf("done\n");
    return failed;
}
