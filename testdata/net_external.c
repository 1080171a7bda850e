/* net_external: reach for an address outside the sandbox, 192.0.2.1
 * (TEST-NET-1, never a real host): a blocking TCP connect() to port 80,
 * printing "connect: <strerror(errno)>" (or "connect: ok"), and a UDP
 * sendto() to port 53, printing "sendto: ok" or "sendto: <strerror>".
 * Under detrun's virtual network both must fail (or be dropped) at once,
 * with no packet leaving the machine. Exits 0 in any case.
 * An optional argument replaces the address (for checking the program
 * itself natively against a loopback address: `net_external 127.0.0.1`). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *host = argc > 1 ? argv[1] : "192.0.2.1";
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "net_external: bad address %s\n", host);
        return 2;
    }

    a.sin_port = htons(80);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) {
        printf("socket: %s\n", strerror(errno));
    } else {
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0)
            printf("connect: ok\n");
        else
            printf("connect: %s\n", strerror(errno));
        close(s);
    }

    a.sin_port = htons(53);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    if (u < 0) {
        printf("socket: %s\n", strerror(errno));
    } else {
        if (sendto(u, "x", 1, 0, (struct sockaddr *)&a, sizeof a) == 1)
            printf("sendto: ok\n");
        else
            printf("sendto: %s\n", strerror(errno));
        close(u);
    }
    return 0;
}
