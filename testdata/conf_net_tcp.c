/* conf_net_tcp: TCP over 127.0.0.1 as real programs use it: a listener on
 * port 0, a non-blocking connect completed with poll(POLLOUT) + SO_ERROR,
 * accept4(SOCK_NONBLOCK), getsockname/getpeername agreement, FIONREAD and
 * MSG_PEEK, select() mixing a socket and a pipe, shutdown(SHUT_WR) half-close,
 * socket options (SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN,
 * TCP_NODELAY), the usual errors (ECONNREFUSED, EADDRINUSE, ENOTCONN,
 * EISCONN, EPIPE) and a 1 MiB transfer from a forked writer ending in EOF.
 * Only booleans, errno names and byte contents are printed: no ports or fds. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "conf_net_tcp: %s:%d: check failed: %s (%s)\n",   \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define BIG (1024 * 1024)

static const char *errname(int e)
{
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EINPROGRESS: return "EINPROGRESS";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EADDRINUSE: return "EADDRINUSE";
    case ENOTCONN: return "ENOTCONN";
    case EISCONN: return "EISCONN";
    case EPIPE: return "EPIPE";
    case EINVAL: return "EINVAL";
    case EALREADY: return "EALREADY";
    case ECONNRESET: return "ECONNRESET";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    default: return "other";
    }
}

/* -1 with errno's name, or "ok" */
static const char *res(int r)
{
    return r == 0 ? "ok" : errname(errno);
}

static void wait_fd(int fd, short ev)
{
    struct pollfd p = {.fd = fd, .events = ev};
    int r;
    do
        r = poll(&p, 1, -1);
    while (r < 0 && errno == EINTR);
    CHECK(r == 1);
    CHECK(p.revents & (ev | POLLHUP | POLLERR));
}

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            wait_fd(fd, POLLOUT);
            continue;
        }
        CHECK(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Read exactly n bytes from a possibly non-blocking fd. */
static void read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN) {
            wait_fd(fd, POLLIN);
            continue;
        }
        CHECK(r > 0);
        got += (size_t)r;
    }
}

static int same_in(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
    return a->sin_family == b->sin_family && a->sin_port == b->sin_port &&
           a->sin_addr.s_addr == b->sin_addr.s_addr;
}

static int getint(int fd, int level, int name)
{
    int v = -12345;
    socklen_t len = sizeof v;
    CHECK(getsockopt(fd, level, name, &v, &len) == 0);
    CHECK(len == sizeof v);
    return v;
}

static uint8_t pattern(size_t i)
{
    return (uint8_t)(i * 7 + (i >> 9) + (i >> 17));
}

int main(void)
{
    struct sockaddr_in laddr, a;
    socklen_t len;
    char buf[256];

    /* Listener on 127.0.0.1, kernel-chosen port. */
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(lst >= 0);
    memset(&laddr, 0, sizeof laddr);
    laddr.sin_family = AF_INET;
    laddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    laddr.sin_port = 0;
    CHECK(bind(lst, (struct sockaddr *)&laddr, sizeof laddr) == 0);
    printf("listener SO_ACCEPTCONN before listen: %d\n",
           getint(lst, SOL_SOCKET, SO_ACCEPTCONN));
    CHECK(listen(lst, 16) == 0);
    len = sizeof laddr;
    CHECK(getsockname(lst, (struct sockaddr *)&laddr, &len) == 0);
    CHECK(len == sizeof laddr);
    printf("listener family inet: %d\n", laddr.sin_family == AF_INET);
    printf("listener addr loopback: %d\n",
           laddr.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    printf("listener port nonzero: %d\n", laddr.sin_port != 0);
    printf("listener SO_ACCEPTCONN: %d\n", getint(lst, SOL_SOCKET, SO_ACCEPTCONN));

    /* Non-blocking connect. */
    int cli = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(cli >= 0);
    int r = connect(cli, (struct sockaddr *)&laddr, sizeof laddr);
    CHECK(r == 0 || errno == EINPROGRESS);
    printf("connect ok\n");
    {
        struct pollfd p = {.fd = cli, .events = POLLOUT};
        CHECK(poll(&p, 1, -1) == 1);
        printf("poll POLLOUT: %d\n", (p.revents & POLLOUT) != 0);
        printf("poll POLLERR/POLLHUP: %d\n", (p.revents & (POLLERR | POLLHUP)) != 0);
    }
    printf("SO_ERROR: %s\n", errname(getint(cli, SOL_SOCKET, SO_ERROR)));

    /* Accept (wait for the listener to become readable first). */
    wait_fd(lst, POLLIN);
    struct sockaddr_in peer;
    len = sizeof peer;
    int srv = accept4(lst, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK);
    CHECK(srv >= 0);
    printf("accepted addrlen ok: %d\n", len == sizeof peer);
    printf("accepted O_NONBLOCK: %d\n", (fcntl(srv, F_GETFL) & O_NONBLOCK) != 0);
    printf("accepted FD_CLOEXEC: %d\n", (fcntl(srv, F_GETFD) & FD_CLOEXEC) != 0);
    len = sizeof a;
    CHECK(getsockname(cli, (struct sockaddr *)&a, &len) == 0);
    printf("client local addr loopback: %d\n",
           a.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    printf("client local port nonzero: %d\n", a.sin_port != 0);
    printf(same_in(&peer, &a) ? "peer matches\n" : "peer differs\n");
    len = sizeof a;
    CHECK(getpeername(cli, (struct sockaddr *)&a, &len) == 0);
    printf("client peer is listener: %d\n", same_in(&a, &laddr));
    len = sizeof a;
    CHECK(getsockname(srv, (struct sockaddr *)&a, &len) == 0);
    printf("server local is listener: %d\n", same_in(&a, &laddr));
    len = sizeof a;
    CHECK(getpeername(srv, (struct sockaddr *)&a, &len) == 0);
    printf("server peer is accept addr: %d\n", same_in(&a, &peer));

    /* A second accept with nothing pending. */
    {
        int fl = fcntl(lst, F_GETFL);
        CHECK(fcntl(lst, F_SETFL, fl | O_NONBLOCK) == 0);
        errno = 0;
        int x = accept(lst, NULL, NULL);
        printf("accept with no pending connection: %s\n",
               x < 0 ? errname(errno) : "succeeded");
        CHECK(fcntl(lst, F_SETFL, fl) == 0);
    }

    /* Nothing to read yet on the non-blocking accepted socket. */
    errno = 0;
    r = (int)read(srv, buf, sizeof buf);
    printf("empty read: %s\n", r < 0 ? errname(errno) : "data");

    /* FIONREAD, MSG_PEEK, read. */
    write_all(cli, "hello world", 11);
    wait_fd(srv, POLLIN);
    int avail = -1;
    CHECK(ioctl(srv, FIONREAD, &avail) == 0);
    printf("FIONREAD: %d\n", avail);
    memset(buf, 0, sizeof buf);
    ssize_t n = recv(srv, buf, 5, MSG_PEEK);
    printf("peek %zd: %.*s\n", n, (int)(n > 0 ? n : 0), buf);
    memset(buf, 0, sizeof buf);
    read_exact(srv, buf, 11);
    printf("read: %.11s\n", buf);
    avail = -1;
    CHECK(ioctl(srv, FIONREAD, &avail) == 0);
    printf("FIONREAD after read: %d\n", avail);

    /* select() over the accepted socket and a pipe. */
    int pp[2];
    CHECK(pipe(pp) == 0);
    int maxfd = (srv > pp[0] ? srv : pp[0]) + 1;
    fd_set rs;
    write_all(cli, "ping", 4);
    FD_ZERO(&rs);
    FD_SET(srv, &rs);
    FD_SET(pp[0], &rs);
    r = select(maxfd, &rs, NULL, NULL, NULL);
    printf("select after socket write: %d sock=%d pipe=%d\n", r,
           FD_ISSET(srv, &rs) != 0, FD_ISSET(pp[0], &rs) != 0);
    memset(buf, 0, sizeof buf);
    read_exact(srv, buf, 4);
    printf("read: %.4s\n", buf);
    write_all(pp[1], "x", 1);
    FD_ZERO(&rs);
    FD_SET(srv, &rs);
    FD_SET(pp[0], &rs);
    r = select(maxfd, &rs, NULL, NULL, NULL);
    printf("select after pipe write: %d sock=%d pipe=%d\n", r,
           FD_ISSET(srv, &rs) != 0, FD_ISSET(pp[0], &rs) != 0);
    read_exact(pp[0], buf, 1);
    {
        struct timeval tv = {0, 0};
        FD_ZERO(&rs);
        FD_SET(srv, &rs);
        FD_SET(pp[0], &rs);
        fd_set ws;
        FD_ZERO(&ws);
        FD_SET(srv, &ws);
        r = select(maxfd, &rs, &ws, NULL, &tv);
        printf("select idle: %d sock=%d pipe=%d sockw=%d\n", r,
               FD_ISSET(srv, &rs) != 0, FD_ISSET(pp[0], &rs) != 0,
               FD_ISSET(srv, &ws) != 0);
    }
    close(pp[0]);
    close(pp[1]);

    /* Socket options. */
    printf("SO_TYPE stream: %d\n", getint(cli, SOL_SOCKET, SO_TYPE) == SOCK_STREAM);
    printf("SO_DOMAIN inet: %d\n", getint(cli, SOL_SOCKET, SO_DOMAIN) == AF_INET);
    printf("SO_PROTOCOL tcp: %d\n", getint(cli, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP);
    printf("accepted SO_DOMAIN inet: %d\n", getint(srv, SOL_SOCKET, SO_DOMAIN) == AF_INET);
    printf("client SO_ACCEPTCONN: %d\n", getint(cli, SOL_SOCKET, SO_ACCEPTCONN));
    printf("TCP_NODELAY default: %d\n", getint(cli, IPPROTO_TCP, TCP_NODELAY) != 0);
    {
        int one = 1;
        CHECK(setsockopt(cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0);
    }
    printf("TCP_NODELAY after set: %d\n", getint(cli, IPPROTO_TCP, TCP_NODELAY) != 0);
    {
        int one = 1;
        CHECK(setsockopt(srv, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) == 0);
    }
    printf("SO_KEEPALIVE after set: %d\n", getint(srv, SOL_SOCKET, SO_KEEPALIVE) != 0);

    /* Connecting a connected socket. After a non-blocking connect, Linux
     * reports the completed connection to the first connect() retry (the
     * "call connect again to learn the outcome" idiom) and EISCONN after. */
    errno = 0;
    r = connect(cli, (struct sockaddr *)&laddr, sizeof laddr);
    printf("connect again after non-blocking connect: %s\n", res(r));
    errno = 0;
    r = connect(cli, (struct sockaddr *)&laddr, sizeof laddr);
    printf("connect a third time: %s\n", res(r));

    /* Half-close: the server sees EOF but can still write back. */
    CHECK(shutdown(cli, SHUT_WR) == 0);
    wait_fd(srv, POLLIN);
    n = read(srv, buf, sizeof buf);
    printf("server read after SHUT_WR: %zd\n", n);
    errno = 0;
    n = send(cli, "x", 1, MSG_NOSIGNAL);
    printf("client send after SHUT_WR: %s\n", n < 0 ? errname(errno) : "sent");
    write_all(srv, "bye", 3);
    memset(buf, 0, sizeof buf);
    read_exact(cli, buf, 3);
    printf("client read: %.3s\n", buf);
    close(srv);
    wait_fd(cli, POLLIN);
    n = read(cli, buf, sizeof buf);
    printf("client read after server close: %zd\n", n);
    close(cli);

    /* getpeername on an unconnected socket. */
    int u = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(u >= 0);
    len = sizeof a;
    r = getpeername(u, (struct sockaddr *)&a, &len);
    printf("getpeername unconnected: %s\n", res(r));

    /* Binding to the listener's port without SO_REUSEADDR. */
    r = bind(u, (struct sockaddr *)&laddr, sizeof laddr);
    printf("bind listener's port: %s\n", res(r));
    close(u);

    /* Connecting to a port nobody listens on. */
    {
        int t = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(t >= 0);
        struct sockaddr_in d;
        memset(&d, 0, sizeof d);
        d.sin_family = AF_INET;
        d.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(t, (struct sockaddr *)&d, sizeof d) == 0);
        len = sizeof d;
        CHECK(getsockname(t, (struct sockaddr *)&d, &len) == 0);
        CHECK(d.sin_port != 0);
        close(t);
        int c = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(c >= 0);
        r = connect(c, (struct sockaddr *)&d, sizeof d);
        printf("connect to closed port: %s\n", res(r));
        close(c);

        /* The same, non-blocking: the error is reported via SO_ERROR. */
        c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        CHECK(c >= 0);
        r = connect(c, (struct sockaddr *)&d, sizeof d);
        if (r < 0 && errno == EINPROGRESS) {
            wait_fd(c, POLLOUT);
            int e = getint(c, SOL_SOCKET, SO_ERROR);
            printf("nonblocking connect to closed port: %s\n", errname(e));
        } else {
            printf("nonblocking connect to closed port: %s\n", res(r));
        }
        close(c);
    }

    /* 1 MiB from a forked writer; the writer's exit gives EOF. */
    {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(c >= 0);
        CHECK(connect(c, (struct sockaddr *)&laddr, sizeof laddr) == 0);
        int s = accept(lst, NULL, NULL);
        CHECK(s >= 0);
        r = connect(c, (struct sockaddr *)&laddr, sizeof laddr);
        printf("connect a blocking-connected socket: %s\n", res(r));
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(s);
            close(lst);
            static unsigned char big[BIG];
            for (size_t i = 0; i < BIG; i++)
                big[i] = pattern(i);
            write_all(c, big, BIG);
            _exit(0);
        }
        close(c);
        size_t total = 0, bad = 0;
        uint32_t h = 2166136261u;
        for (;;) {
            static unsigned char rb[65536];
            ssize_t k = read(s, rb, sizeof rb);
            if (k < 0 && errno == EINTR)
                continue;
            CHECK(k >= 0);
            if (k == 0)
                break;
            for (ssize_t i = 0; i < k; i++) {
                if (rb[i] != pattern(total + (size_t)i))
                    bad++;
                h = (h ^ rb[i]) * 16777619u;
            }
            total += (size_t)k;
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        printf("big transfer: %zu bytes, %zu wrong, fnv1a %08x, then EOF\n", total,
               bad, h);
        printf("writer exit: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        close(s);
    }

    /* After the listener closes, its port refuses connections. */
    close(lst);
    {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(c >= 0);
        r = connect(c, (struct sockaddr *)&laddr, sizeof laddr);
        printf("connect after listener close: %s\n", res(r));
        close(c);
    }
    printf("done\n");
    return 0;
}
