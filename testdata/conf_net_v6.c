/* conf_net_v6: IPv6 sockets on loopback: a dual-stack listener on [::]
 * (IPV6_V6ONLY=0) accepting an AF_INET client to 127.0.0.1 (peer
 * ::ffff:127.0.0.1) and an AF_INET6 client to ::1; an IPV6_V6ONLY=1 listener
 * refusing IPv4 clients but not IPv6 ones; how v4 and v6 bindings of one port
 * conflict; dual-stack UDP; getaddrinfo for localhost and numeric hosts.
 * Addresses are printed only where they are the same everywhere (::1,
 * ::ffff:127.0.0.1, 127.0.0.1); ports only as comparisons. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "conf_net_v6: %s:%d: check failed: %s (%s)\n",    \
                    __FILE__, __LINE__, #c, strerror(errno));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static const char *errname(int e)
{
    switch (e) {
    case ECONNREFUSED: return "ECONNREFUSED";
    case EADDRINUSE: return "EADDRINUSE";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EINVAL: return "EINVAL";
    case ENETUNREACH: return "ENETUNREACH";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    default: return "other";
    }
}

static const char *res(int r)
{
    return r == 0 ? "ok" : errname(errno);
}

static const char *ntop(const struct sockaddr_storage *ss)
{
    static char buf[2][INET6_ADDRSTRLEN];
    static int k;
    char *b = buf[k++ & 1];
    if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, b,
                  INET6_ADDRSTRLEN);
    else if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, b,
                  INET6_ADDRSTRLEN);
    else
        snprintf(b, INET6_ADDRSTRLEN, "family %d", ss->ss_family);
    return b;
}

static const char *fam(int f)
{
    return f == AF_INET ? "AF_INET" : f == AF_INET6 ? "AF_INET6" : "other";
}

static unsigned port_of(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static int getint(int fd, int level, int name)
{
    int v = -12345;
    socklen_t len = sizeof v;
    CHECK(getsockopt(fd, level, name, &v, &len) == 0);
    return v;
}

static void name_of(int fd, int peer, struct sockaddr_storage *ss)
{
    socklen_t len = sizeof *ss;
    memset(ss, 0, sizeof *ss);
    CHECK((peer ? getpeername : getsockname)(fd, (struct sockaddr *)ss, &len) == 0);
}

static struct sockaddr_in v4(const char *ip, unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
    return a;
}

static struct sockaddr_in6 v6(const char *ip, unsigned port)
{
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((unsigned short)port);
    CHECK(inet_pton(AF_INET6, ip, &a.sin6_addr) == 1);
    return a;
}

/* A TCP listener on [::]:0 with the given IPV6_V6ONLY; returns its port. */
static int listener6(int v6only, unsigned *port)
{
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(s >= 0);
    CHECK(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only) == 0);
    struct sockaddr_in6 a = v6("::", 0);
    CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(s, 8) == 0);
    struct sockaddr_storage ss;
    name_of(s, 0, &ss);
    *port = port_of(&ss);
    return s;
}

/* Accept one connection and report what both ends see. */
static void accept_and_show(int lst, int cli, const char *what)
{
    struct sockaddr_storage peer, cl, sl, cp;
    socklen_t len = sizeof peer;
    memset(&peer, 0, sizeof peer);
    int a = accept(lst, (struct sockaddr *)&peer, &len);
    CHECK(a >= 0);
    name_of(cli, 0, &cl);
    name_of(cli, 1, &cp);
    name_of(a, 0, &sl);
    printf("%s: accepted peer %s %s, addrlen %s\n", what, fam(peer.ss_family),
           ntop(&peer), len == sizeof(struct sockaddr_in6) ? "in6" : "other");
    printf("%s: peer port is client's port: %d\n", what, port_of(&peer) == port_of(&cl));
    printf("%s: client local %s %s\n", what, fam(cl.ss_family), ntop(&cl));
    printf("%s: client peer %s %s\n", what, fam(cp.ss_family), ntop(&cp));
    printf("%s: server local %s %s\n", what, fam(sl.ss_family), ntop(&sl));
    printf("%s: server local port is client's peer port: %d\n", what,
           port_of(&sl) == port_of(&cp));
    printf("%s: accepted SO_DOMAIN %s\n", what, fam(getint(a, SOL_SOCKET, SO_DOMAIN)));
    char buf[16] = {0};
    CHECK(write(cli, "ping", 4) == 4);
    CHECK(read(a, buf, 4) == 4);
    CHECK(write(a, "pong", 4) == 4);
    CHECK(read(cli, buf + 4, 4) == 4);
    printf("%s: exchanged %.8s\n", what, buf);
    close(a);
}

int main(void)
{
    unsigned p1, p2;

    {
        int s = socket(AF_INET6, SOCK_STREAM, 0);
        CHECK(s >= 0);
        printf("default IPV6_V6ONLY: %d\n", getint(s, IPPROTO_IPV6, IPV6_V6ONLY));
        printf("SO_DOMAIN: %s\n", fam(getint(s, SOL_SOCKET, SO_DOMAIN)));
        struct sockaddr_storage ss;
        name_of(s, 0, &ss);
        printf("unbound name: %s %s port zero %d\n", fam(ss.ss_family), ntop(&ss),
               port_of(&ss) == 0);
        close(s);
    }

    /* Dual-stack listener. */
    int l1 = listener6(0, &p1);
    printf("dual-stack IPV6_V6ONLY: %d\n", getint(l1, IPPROTO_IPV6, IPV6_V6ONLY));
    printf("dual-stack port nonzero: %d\n", p1 != 0);
    {
        struct sockaddr_storage ss;
        name_of(l1, 0, &ss);
        printf("dual-stack local: %s %s\n", fam(ss.ss_family), ntop(&ss));
    }

    int c4 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c4 >= 0);
    struct sockaddr_in t4 = v4("127.0.0.1", p1);
    printf("v4 connect to dual-stack: %s\n",
           res(connect(c4, (struct sockaddr *)&t4, sizeof t4)));
    accept_and_show(l1, c4, "v4 client");
    close(c4);

    int c6 = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(c6 >= 0);
    struct sockaddr_in6 t6 = v6("::1", p1);
    printf("v6 connect to dual-stack: %s\n",
           res(connect(c6, (struct sockaddr *)&t6, sizeof t6)));
    accept_and_show(l1, c6, "v6 client");
    close(c6);

    /* A v6 socket connecting to a v4-mapped address. */
    c6 = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(c6 >= 0);
    t6 = v6("::ffff:127.0.0.1", p1);
    printf("v6 connect to ::ffff:127.0.0.1: %s\n",
           res(connect(c6, (struct sockaddr *)&t6, sizeof t6)));
    accept_and_show(l1, c6, "mapped client");
    close(c6);

    /* The dual-stack listener holds the port for IPv4 too. */
    {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(s >= 0);
        struct sockaddr_in a = v4("127.0.0.1", p1);
        printf("v4 bind on dual-stack port: %s\n",
               res(bind(s, (struct sockaddr *)&a, sizeof a)));
        close(s);
    }

    /* V6-only listener. */
    int l2 = listener6(1, &p2);
    printf("v6only IPV6_V6ONLY: %d\n", getint(l2, IPPROTO_IPV6, IPV6_V6ONLY));
    c4 = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c4 >= 0);
    t4 = v4("127.0.0.1", p2);
    printf("v4 connect to v6only: %s\n", res(connect(c4, (struct sockaddr *)&t4, sizeof t4)));
    close(c4);
    c6 = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(c6 >= 0);
    t6 = v6("::1", p2);
    printf("v6 connect to v6only: %s\n", res(connect(c6, (struct sockaddr *)&t6, sizeof t6)));
    accept_and_show(l2, c6, "v6only");
    close(c6);
    {
        /* A v6-only socket cannot use v4-mapped addresses. */
        int s = socket(AF_INET6, SOCK_STREAM, 0);
        CHECK(s >= 0);
        int one = 1;
        CHECK(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) == 0);
        t6 = v6("::ffff:127.0.0.1", p1);
        printf("v6only socket connect to mapped: %s\n",
               res(connect(s, (struct sockaddr *)&t6, sizeof t6)));
        close(s);
    }
    {
        /* IPv4 may take the port a v6-only socket holds. */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(s >= 0);
        struct sockaddr_in a = v4("127.0.0.1", p2);
        printf("v4 bind on v6only port: %s\n", res(bind(s, (struct sockaddr *)&a, sizeof a)));
        close(s);
    }
    {
        /* An IPv4 socket given an IPv6 address. */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(s >= 0);
        t6 = v6("::1", p1);
        printf("v4 socket connect to v6 address: %s\n",
               res(connect(s, (struct sockaddr *)&t6, sizeof t6)));
        close(s);
    }

    /* Dual-stack UDP. */
    {
        int u6 = socket(AF_INET6, SOCK_DGRAM, 0);
        CHECK(u6 >= 0);
        int zero = 0;
        CHECK(setsockopt(u6, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) == 0);
        struct sockaddr_in6 a = v6("::", 0);
        CHECK(bind(u6, (struct sockaddr *)&a, sizeof a) == 0);
        struct sockaddr_storage ss;
        name_of(u6, 0, &ss);
        unsigned up = port_of(&ss);
        int u4 = socket(AF_INET, SOCK_DGRAM, 0);
        CHECK(u4 >= 0);
        struct sockaddr_in d4 = v4("127.0.0.1", up);
        CHECK(sendto(u4, "four", 4, 0, (struct sockaddr *)&d4, sizeof d4) == 4);
        char buf[16] = {0};
        struct sockaddr_storage from, l4;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(u6, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        name_of(u4, 0, &l4);
        printf("udp from v4: %zd '%.*s' source %s %s port matches %d\n", n,
               (int)(n > 0 ? n : 0), buf, fam(from.ss_family), ntop(&from),
               port_of(&from) == port_of(&l4));
        /* Reply to the mapped address reaches the v4 socket. */
        CHECK(sendto(u6, "back", 4, 0, (struct sockaddr *)&from, len) == 4);
        memset(buf, 0, sizeof buf);
        len = sizeof from;
        n = recvfrom(u4, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        printf("udp reply: %zd '%.*s' source %s %s port matches %d\n", n,
               (int)(n > 0 ? n : 0), buf, fam(from.ss_family), ntop(&from),
               port_of(&from) == up);
        int w6 = socket(AF_INET6, SOCK_DGRAM, 0);
        CHECK(w6 >= 0);
        struct sockaddr_in6 d6 = v6("::1", up);
        CHECK(sendto(w6, "six", 3, 0, (struct sockaddr *)&d6, sizeof d6) == 3);
        memset(buf, 0, sizeof buf);
        len = sizeof from;
        n = recvfrom(u6, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        name_of(w6, 0, &l4);
        printf("udp from v6: %zd '%.*s' source %s %s port matches %d\n", n,
               (int)(n > 0 ? n : 0), buf, fam(from.ss_family), ntop(&from),
               port_of(&from) == port_of(&l4));
        close(u6);
        close(u4);
        close(w6);
    }

    /* getaddrinfo. */
    {
        struct addrinfo hints, *ai = NULL;
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        char port[16];
        snprintf(port, sizeof port, "%u", p1);
        int r = getaddrinfo("localhost", port, &hints, &ai);
        printf("getaddrinfo localhost: %s, results %s\n", r == 0 ? "ok" : "failed",
               ai ? "yes" : "no");
        if (r == 0 && ai) {
            /* Connect to the first result: the dual-stack listener takes both. */
            int s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            CHECK(s >= 0);
            int cr = connect(s, ai->ai_addr, ai->ai_addrlen);
            printf("connect via getaddrinfo: %s\n", res(cr));
            if (cr == 0) {
                int a = accept(l1, NULL, NULL);
                CHECK(a >= 0);
                close(a);
            }
            close(s);
            freeaddrinfo(ai);
        }
        hints.ai_flags = AI_NUMERICHOST;
        ai = NULL;
        r = getaddrinfo("::1", "80", &hints, &ai);
        printf("getaddrinfo ::1: %s", r == 0 ? "ok" : "failed");
        if (r == 0 && ai) {
            struct sockaddr_storage ss;
            memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
            printf(" %s %s %u", fam(ai->ai_family), ntop(&ss), port_of(&ss));
            freeaddrinfo(ai);
        }
        printf("\n");
        ai = NULL;
        r = getaddrinfo("127.0.0.1", "8080", &hints, &ai);
        printf("getaddrinfo 127.0.0.1: %s", r == 0 ? "ok" : "failed");
        if (r == 0 && ai) {
            struct sockaddr_storage ss;
            memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
            printf(" %s %s %u", fam(ai->ai_family), ntop(&ss), port_of(&ss));
            freeaddrinfo(ai);
        }
        printf("\n");
    }

    close(l1);
    close(l2);
    printf("done\n");
    return 0;
}
