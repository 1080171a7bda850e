/* Socket calls on virtual sockets with bad pointers and lengths: each
 * fails with the errno Linux gives (and detrun never crashes). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BAD ((void *)1)

static const char *e(long r) {
    if (r >= 0) return "ok";
    switch (errno) {
    case EFAULT: return "EFAULT";
    case EINVAL: return "EINVAL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case ENOTCONN: return "ENOTCONN";
    case EDESTADDRREQ: return "EDESTADDRREQ";
    case EAGAIN: return "EAGAIN";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EISCONN: return "EISCONN";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    default: return strerror(errno);
    }
}

int main(void) {
    int t = socket(AF_INET, SOCK_STREAM, 0);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    socklen_t len = 16;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    printf("bind bad ptr: %s\n", e(bind(t, BAD, sizeof a)));
    printf("bind short len: %s\n", e(bind(t, (struct sockaddr *)&a, 3)));
    printf("connect bad ptr: %s\n", e(connect(t, BAD, sizeof a)));
    printf("getsockname bad len ptr: %s\n", e(getsockname(t, (struct sockaddr *)&a, BAD)));
    printf("getsockname bad addr: %s\n", e(getsockname(t, BAD, &len)));
    printf("getpeername unconnected: %s\n", e(getpeername(t, (struct sockaddr *)&a, &len)));
    int one = 1;
    printf("setsockopt bad ptr: %s\n", e(setsockopt(t, IPPROTO_TCP, TCP_NODELAY, BAD, 4)));
    printf("setsockopt ok: %s\n", e(setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, 4)));
    int ty = 0;
    printf("getsockopt bad len ptr: %s\n", e(getsockopt(t, SOL_SOCKET, SO_TYPE, &ty, (socklen_t *)8)));
    printf("sendto bad buf: %s\n", e(sendto(u, BAD, 10, 0, (struct sockaddr *)&a, sizeof a)));
    printf("sendto bad addr: %s\n", e(sendto(u, "x", 1, 0, BAD, sizeof a)));
    printf("send unconnected udp: %s\n", e(send(u, "x", 1, 0)));
    struct msghdr m;
    memset(&m, 0, sizeof m);
    printf("sendmsg bad hdr: %s\n", e(sendmsg(u, BAD, 0)));
    struct iovec iov = {.iov_base = BAD, .iov_len = 5};
    m.msg_name = &a;
    m.msg_namelen = sizeof a;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    printf("sendmsg bad iov base: %s\n", e(sendmsg(u, &m, 0)));
    struct iovec huge[2] = {{.iov_base = "ab", .iov_len = (size_t)-1}, {.iov_base = "cd", .iov_len = 2}};
    m.msg_iov = huge;
    m.msg_iovlen = 2;
    a.sin_port = htons(9);
    printf("sendmsg negative iov len: %s\n", e(sendmsg(u, &m, 0)));
    huge[0].iov_len = (size_t)1 << 62;
    huge[1].iov_len = (size_t)1 << 62;
    printf("sendmsg overflowing iov lens: %s\n", e(sendmsg(u, &m, 0)));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    a.sin_port = 0;
    printf("recvfrom empty nonblocking: %s\n", e(recvfrom(u, BAD, 10, MSG_DONTWAIT, NULL, NULL)));
    printf("recvmsg bad hdr: %s\n", e(recvmsg(u, BAD, MSG_DONTWAIT)));
    printf("accept on unlistened: %s\n", e(accept(t, NULL, NULL)));
    printf("listen: %s\n", e(listen(t, 1)));
    fcntl(t, F_SETFL, O_NONBLOCK);
    printf("accept nonblocking bad addr: %s\n", e(accept4(t, BAD, BAD, SOCK_CLOEXEC)));
    close(t);
    close(u);
    printf("done\n");
    return 0;
}
