/* net_udp: UDP ping-pong over 127.0.0.1. The parent binds the server socket
 * (port 0, read back with getsockname) and forks the server, which answers
 * every "ping N" with "pong N". The client sends 40 pings, waiting up to one
 * second (poll, 1000 ms) for each pong, and prints "N ok" or "N lost"; then
 * "lost: <comma-separated N>" (empty when nothing was lost). Stale pongs of
 * earlier pings are skipped. Finally it sends "quit" (repeated until the
 * server says "bye", as datagrams may be dropped), reaps the server and
 * exits 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPINGS 40

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "net_udp: %s:%d: check failed: %s (%s)\n",        \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void server(int s)
{
    for (;;) {
        char buf[128];
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &flen);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0);
        buf[n] = 0;
        char reply[128];
        int rn;
        int num;
        if (strcmp(buf, "quit") == 0) {
            sendto(s, "bye", 3, 0, (struct sockaddr *)&from, flen);
            _exit(0);
        } else if (sscanf(buf, "ping %d", &num) == 1) {
            rn = snprintf(reply, sizeof reply, "pong %d", num);
        } else {
            rn = snprintf(reply, sizeof reply, "what?");
        }
        /* A refused or dropped reply is the client's loss, not an error. */
        sendto(s, reply, (size_t)rn, 0, (struct sockaddr *)&from, flen);
    }
}

/* Wait until `deadline` (ms, monotonic) for a datagram equal to `want`;
 * 1 if it came, 0 on timeout, -1 if the peer's port is closed
 * (ECONNREFUSED). Other datagrams are skipped. */
static int await_reply(int s, const char *want, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left < 0)
            left = 0;
        struct pollfd p = {.fd = s, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0);
        if (r == 0)
            return 0;
        char buf[128];
        ssize_t n = recv(s, buf, sizeof buf - 1, 0);
        if (n < 0 && errno == ECONNREFUSED)
            return -1;
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        CHECK(n >= 0);
        buf[n] = 0;
        if (strcmp(buf, want) == 0)
            return 1;
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);

    int ss = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(ss >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(ss, (struct sockaddr *)&addr, sizeof addr) == 0);
    socklen_t alen = sizeof addr;
    CHECK(getsockname(ss, (struct sockaddr *)&addr, &alen) == 0);
    CHECK(ntohs(addr.sin_port) != 0);

    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        server(ss);
    close(ss);

    int cs = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(cs >= 0);
    CHECK(connect(cs, (struct sockaddr *)&addr, sizeof addr) == 0);

    char lost[NPINGS * 4 + 1] = "";
    size_t lostlen = 0;
    for (int i = 0; i < NPINGS; i++) {
        char msg[32], want[32];
        int n = snprintf(msg, sizeof msg, "ping %d", i);
        snprintf(want, sizeof want, "pong %d", i);
        long long deadline = now_ms() + 1000;
        ssize_t w = send(cs, msg, (size_t)n, 0);
        CHECK(w == n || (w < 0 && errno == ECONNREFUSED));
        if (await_reply(cs, want, deadline) == 1) {
            printf("%d ok\n", i);
        } else {
            printf("%d lost\n", i);
            lostlen += (size_t)snprintf(lost + lostlen, sizeof lost - lostlen, "%s%d",
                                        lostlen ? "," : "", i);
        }
    }
    printf("lost: %s\n", lost);

    int bye = 0;
    for (int tries = 0; tries < 20 && !bye; tries++) {
        long long deadline = now_ms() + 1000;
        ssize_t w = send(cs, "quit", 4, 0);
        if (w < 0 && errno == ECONNREFUSED)
            break; /* the server is gone already */
        CHECK(w == 4);
        int r = await_reply(cs, "bye", deadline);
        if (r < 0)
            break; /* the server is gone already */
        bye = r;
    }
    if (!bye)
        kill(pid, SIGTERM);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    close(cs);
    return 0;
}
