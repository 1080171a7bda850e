/* TCP on loopback between a parent and a child: `tcp stream MB` sends MB
 * megabytes in 64 KiB writes; `tcp pingpong N` does N one-byte round trips. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int stream = argc > 1 && strcmp(argv[1], "stream") == 0;
    long n = argc > 2 ? atol(argv[2]) : 10;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
        return perror("listen"), 1;
    static char buf[65536];
    pid_t pid = fork();
    if (pid == 0) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (struct sockaddr *)&a, sizeof a)) return perror("connect"), 1;
        if (stream) {
            for (long i = 0; i < n * 16; i++)
                if (write(c, buf, sizeof buf) != (ssize_t)sizeof buf) return 1;
        } else {
            for (long i = 0; i < n; i++)
                if (write(c, "x", 1) != 1 || read(c, buf, 1) != 1) return 1;
        }
        close(c);
        _exit(0);
    }
    int s = accept(l, NULL, NULL);
    long total = 0;
    ssize_t r;
    if (stream) {
        while ((r = read(s, buf, sizeof buf)) > 0) total += r;
    } else {
        while ((r = read(s, buf, 1)) == 1 && write(s, buf, 1) == 1) total++;
    }
    int st;
    waitpid(pid, &st, 0);
    printf("%ld\n", total);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
