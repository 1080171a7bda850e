/* conf_pipe: pipe semantics in one process and between parent and child:
 * EOF after writer close, EPIPE/SIGPIPE after reader close, pipe2 flags. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static ssize_t read_all(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0);
        if (n == 0)
            return got;
        got += n;
        CHECK(got < cap);
    }
}

int main(void)
{
    int p[2];
    char buf[4096];

    /* Same process. */
    CHECK(pipe(p) == 0);
    CHECK(write(p[1], "abc", 3) == 3);
    CHECK(write(p[1], "defgh", 5) == 5);
    ssize_t n = read(p[0], buf, 4);
    printf("partial read: %zd '%.*s'\n", n, (int)n, buf);
    n = read(p[0], buf, sizeof buf);
    printf("rest: %zd '%.*s'\n", n, (int)n, buf);
    close(p[1]);
    printf("read after writer closed: %zd\n", read(p[0], buf, sizeof buf));
    close(p[0]);

    /* Writing to a pipe with no reader: EPIPE with SIGPIPE ignored. */
    CHECK(pipe(p) == 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    n = write(p[1], "x", 1);
    printf("write without reader: %zd %s\n", n, errno == EPIPE ? "EPIPE" : "?");
    close(p[1]);
    signal(SIGPIPE, SIG_DFL);

    /* Child killed by SIGPIPE. */
    CHECK(pipe(p) == 0);
    close(p[0]);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        (void)!write(p[1], "x", 1);
        _exit(0);
    }
    close(p[1]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child writing to widowed pipe: signaled=%d sig=%d\n", WIFSIGNALED(st),
           WIFSIGNALED(st) ? WTERMSIG(st) : -1);

    /* Parent <- child stream. */
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        for (int i = 0; i < 50; i++) {
            char line[64];
            int len = snprintf(line, sizeof line, "message %02d\n", i);
            CHECK(write(p[1], line, len) == len);
        }
        _exit(7);
    }
    close(p[1]);
    n = read_all(p[0], buf, sizeof buf);
    close(p[0]);
    CHECK(waitpid(pid, &st, 0) == pid);
    int lines = 0;
    for (ssize_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    printf("from child: %zd bytes, %d lines, last line '%.*s'\n", n, lines, 10,
           buf + n - 11);
    printf("child exit: %d\n", WEXITSTATUS(st));

    /* Parent -> child -> parent round trip. */
    int to[2], from[2];
    CHECK(pipe(to) == 0 && pipe(from) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        char c;
        int count = 0;
        while (read(to[0], &c, 1) == 1) {
            if (c >= 'a' && c <= 'z')
                c -= 32;
            CHECK(write(from[1], &c, 1) == 1);
            count++;
        }
        _exit(count);
    }
    close(to[0]);
    close(from[1]);
    const char *word = "determinism";
    for (size_t i = 0; i < strlen(word); i++) {
        char c;
        CHECK(write(to[1], &word[i], 1) == 1);
        CHECK(read(from[0], &c, 1) == 1);
        buf[i] = c;
    }
    close(to[1]);
    printf("echoed: '%.*s'\n", (int)strlen(word), buf);
    printf("echo child read then EOF: %zd\n", read(from[0], buf, 1));
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("echo child exit: %d\n", WEXITSTATUS(st));

    /* pipe2 flags. */
    CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
    printf("pipe2: cloexec=%d nonblock=%d\n", (fcntl(p[0], F_GETFD) & FD_CLOEXEC) != 0,
           (fcntl(p[1], F_GETFL) & O_NONBLOCK) != 0);
    errno = 0;
    n = read(p[0], buf, 1);
    printf("empty nonblocking read: %zd %s\n", n, errno == EAGAIN ? "EAGAIN" : "?");
    close(p[0]);
    close(p[1]);
    return 0;
}
