/* net_partition: UDP request/response on fixed ports, so that a partition
 * can name them: the server (forked child) on 127.0.0.1:9101, the client on
 * 127.0.0.1:9102. For N = 0..11 the client sends "req N" at N seconds after
 * its start (monotonic clock), waits up to one second (poll) for "reply N",
 * and prints "N reply t=S" or "N timeout t=S", S being the whole seconds
 * between the start and the send. Then it stops the server ("quit", repeated
 * until "bye") and exits 0. */
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

#define SERVER_PORT 9101
#define CLIENT_PORT 9102
#define NREQ 12

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "net_partition: %s:%d: check failed: %s (%s)\n",  \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static long long now_ns(void)
{
    struct timespec ts;
    CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int udp_bound(int port)
{
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(s >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    return s;
}

static void server(int s)
{
    for (;;) {
        char buf[64];
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &flen);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0);
        buf[n] = 0;
        int num;
        char reply[64];
        int rn;
        if (strcmp(buf, "quit") == 0) {
            sendto(s, "bye", 3, 0, (struct sockaddr *)&from, flen);
            _exit(0);
        } else if (sscanf(buf, "req %d", &num) == 1) {
            rn = snprintf(reply, sizeof reply, "reply %d", num);
        } else {
            rn = snprintf(reply, sizeof reply, "what?");
        }
        sendto(s, reply, (size_t)rn, 0, (struct sockaddr *)&from, flen);
    }
}

/* 1: got `want` before `deadline` (ns, monotonic); 0: timed out; -1: the
 * server's port is closed. Other datagrams are skipped. */
static int await_reply(int s, const char *want, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ns();
        int ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
        struct pollfd p = {.fd = s, .events = POLLIN};
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r >= 0);
        if (r == 0)
            return 0;
        char buf[64];
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

    int ss = udp_bound(SERVER_PORT);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        server(ss);
    close(ss);

    int cs = udp_bound(CLIENT_PORT);
    struct sockaddr_in srv;
    memset(&srv, 0, sizeof srv);
    srv.sin_family = AF_INET;
    srv.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    srv.sin_port = htons(SERVER_PORT);
    CHECK(connect(cs, (struct sockaddr *)&srv, sizeof srv) == 0);

    long long start = now_ns();
    for (int i = 0; i < NREQ; i++) {
        long long at = start + (long long)i * 1000000000LL;
        struct timespec ts = {.tv_sec = at / 1000000000LL, .tv_nsec = at % 1000000000LL};
        int e;
        while ((e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
            ;
        CHECK(e == 0);
        char msg[32], want[32];
        int n = snprintf(msg, sizeof msg, "req %d", i);
        snprintf(want, sizeof want, "reply %d", i);
        long long sent = now_ns();
        ssize_t w = send(cs, msg, (size_t)n, 0);
        CHECK(w == n || (w < 0 && errno == ECONNREFUSED));
        int r = await_reply(cs, want, sent + 1000000000LL);
        printf("%d %s t=%ld\n", i, r == 1 ? "reply" : "timeout",
               (long)((sent - start) / 1000000000LL));
    }

    int bye = 0;
    for (int tries = 0; tries < 20 && !bye; tries++) {
        ssize_t w = send(cs, "quit", 4, 0);
        if (w < 0 && errno == ECONNREFUSED)
            break;
        CHECK(w == 4);
        int r = await_reply(cs, "bye", now_ns() + 1000000000LL);
        if (r < 0)
            break;
        bye = r;
    }
    if (!bye)
        kill(pid, SIGTERM);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    close(cs);
    return 0;
}
