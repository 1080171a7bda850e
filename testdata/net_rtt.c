/* net_rtt: request/response round trips over TCP on 127.0.0.1. The listening
 * socket is bound (port 0) before the fork; the child serves one connection,
 * answering each "req" with "resp". The parent connects and does three
 * rounds of: t0 = CLOCK_MONOTONIC; write "req"; read "resp"; t1; and prints
 * "rtt_ms=<(t1-t0) in whole milliseconds>". Under `detrun --net-latency D`
 * every round trip is at least 2*D of virtual time. Exits 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 3

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "net_rtt: %s:%d: check failed: %s (%s)\n",        \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void read_exact(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r > 0);
        got += (size_t)r;
    }
}

static void write_all(int fd, const char *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        CHECK(w > 0);
        done += (size_t)w;
    }
}

static long long now_ns(void)
{
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

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
    CHECK(bind(ls, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(ls, 4) == 0);
    socklen_t alen = sizeof addr;
    CHECK(getsockname(ls, (struct sockaddr *)&addr, &alen) == 0);
    CHECK(ntohs(addr.sin_port) != 0);

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int c = accept(ls, NULL, NULL);
        CHECK(c >= 0);
        close(ls);
        for (int i = 0; i < ROUNDS; i++) {
            char buf[3];
            read_exact(c, buf, 3);
            CHECK(memcmp(buf, "req", 3) == 0);
            write_all(c, "resp", 4);
        }
        char b;
        CHECK(read(c, &b, 1) == 0); /* the client closed */
        close(c);
        _exit(0);
    }
    close(ls);

    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    CHECK(connect(s, (struct sockaddr *)&addr, sizeof addr) == 0);
    for (int i = 0; i < ROUNDS; i++) {
        long long t0 = now_ns();
        write_all(s, "req", 3);
        char buf[4];
        read_exact(s, buf, 4);
        CHECK(memcmp(buf, "resp", 4) == 0);
        long long t1 = now_ns();
        printf("rtt_ms=%ld\n", (long)((t1 - t0) / 1000000));
    }
    close(s);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return 0;
}
