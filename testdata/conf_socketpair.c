/* conf_socketpair: AF_UNIX socketpair: stream echo with a forked child,
 * shutdown(SHUT_WR) giving EOF, datagram boundaries preserved (MSG_PEEK,
 * MSG_TRUNC, MSG_DONTWAIT), SCM_RIGHTS passing a pipe fd to the child, and
 * SOCK_SEQPACKET. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static void read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        CHECK(r > 0);
        got += r;
    }
}

static void send_fd(int sock, int fd)
{
    char dummy = 'F';
    struct iovec iov = {.iov_base = &dummy, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    CHECK(sendmsg(sock, &msg, 0) == 1);
}

static int recv_fd(int sock)
{
    char dummy;
    struct iovec iov = {.iov_base = &dummy, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    CHECK(recvmsg(sock, &msg, 0) == 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    CHECK(c && c->cmsg_type == SCM_RIGHTS);
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

int main(void)
{
    int sv[2], st;
    char buf[256];

    /* Stream echo server in a child: uppercases until EOF, then reports. */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        long total = 0;
        ssize_t n;
        while ((n = read(sv[1], buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < n; i++)
                if (buf[i] >= 'a' && buf[i] <= 'z')
                    buf[i] -= 32;
            CHECK(write(sv[1], buf, n) == n);
            total += n;
        }
        char msg[64];
        int len = snprintf(msg, sizeof msg, "total=%ld", total);
        CHECK(write(sv[1], msg, len) == len);
        _exit(0);
    }
    close(sv[1]);
    const char *words[] = {"hello", "socket", "pair", "world"};
    for (int i = 0; i < 4; i++) {
        size_t len = strlen(words[i]);
        CHECK(write(sv[0], words[i], len) == (ssize_t)len);
        read_exact(sv[0], buf, len);
        printf("echo: %.*s\n", (int)len, buf);
    }
    CHECK(shutdown(sv[0], SHUT_WR) == 0);
    size_t got = 0;
    ssize_t n;
    while ((n = read(sv[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += n;
    buf[got] = 0;
    printf("after shutdown: '%s'\n", buf);
    close(sv[0]);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("echo child exit %d\n", WEXITSTATUS(st));

    /* Datagrams keep boundaries; MSG_PEEK does not consume; MSG_TRUNC. */
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
    CHECK(send(sv[0], "one", 3, 0) == 3);
    CHECK(send(sv[0], "two-two", 7, 0) == 7);
    CHECK(send(sv[0], "", 0, 0) == 0);
    CHECK(send(sv[0], "three33333", 10, 0) == 10);
    n = recv(sv[1], buf, sizeof buf, MSG_PEEK);
    printf("dgram peek: %zd '%.*s'\n", n, (int)n, buf);
    for (int i = 0; i < 3; i++) {
        n = recv(sv[1], buf, sizeof buf, 0);
        printf("dgram %d: %zd '%.*s'\n", i, n, (int)n, buf);
    }
    n = recv(sv[1], buf, 5, MSG_TRUNC);
    printf("dgram truncated: real length %zd, got '%.5s'\n", n, buf);
    errno = 0;
    n = recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
    printf("dgram empty DONTWAIT: %zd %s\n", n, errno == EAGAIN ? "EAGAIN" : "?");
    close(sv[0]);
    close(sv[1]);

    /* SCM_RIGHTS: give the child the write end of a pipe. */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        close(p[0]);
        close(p[1]); /* The child only gets the pipe through the socket. */
        int fd = recv_fd(sv[1]);
        const char *m = "via passed fd";
        CHECK(write(fd, m, strlen(m)) == (ssize_t)strlen(m));
        close(fd);
        _exit(0);
    }
    close(sv[1]);
    send_fd(sv[0], p[1]);
    close(p[1]);
    got = 0;
    while ((n = read(p[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += n;
    buf[got] = 0;
    printf("pipe data written by child through passed fd: '%s'\n", buf);
    close(p[0]);
    close(sv[0]);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("fd child exit %d\n", WEXITSTATUS(st));

    /* SOCK_SEQPACKET keeps boundaries on a connected pair too. */
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    CHECK(write(sv[0], "ab", 2) == 2);
    CHECK(write(sv[0], "cde", 3) == 3);
    close(sv[0]);
    n = read(sv[1], buf, sizeof buf);
    printf("seqpacket 1: %zd\n", n);
    n = read(sv[1], buf, sizeof buf);
    printf("seqpacket 2: %zd\n", n);
    n = read(sv[1], buf, sizeof buf);
    printf("seqpacket eof: %zd\n", n);
    close(sv[1]);
    return 0;
}
