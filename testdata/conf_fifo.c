/* conf_fifo: named pipes: open() blocking until the other side opens,
 * a writer child streaming lines, O_NONBLOCK open for writing with no
 * reader (ENXIO), O_NONBLOCK reader open, and several writers in turn. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int main(void)
{
    char dir[] = "/tmp/detrun-conf-XXXXXX";
    char path[512];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    printf("is fifo: %d\n", S_ISFIFO(st.st_mode));

    errno = 0;
    int fd = open(path, O_WRONLY | O_NONBLOCK);
    printf("nonblocking write-open without reader: %d %s\n", fd, errno == ENXIO ? "ENXIO" : "?");

    int rfd = open(path, O_RDONLY | O_NONBLOCK);
    printf("nonblocking read-open without writer succeeds: %d\n", rfd >= 0);
    char buf[4096];
    ssize_t n = read(rfd, buf, sizeof buf);
    printf("read with no writer ever: %zd\n", n);
    close(rfd);

    /* Blocking rendezvous: child writes, parent reads. */
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int w = open(path, O_WRONLY);
        CHECK(w >= 0);
        for (int i = 0; i < 100; i++) {
            char line[32];
            int len = snprintf(line, sizeof line, "fifo line %03d\n", i);
            CHECK(write(w, line, len) == len);
        }
        close(w);
        _exit(0);
    }
    rfd = open(path, O_RDONLY);
    CHECK(rfd >= 0);
    size_t got = 0;
    while ((n = read(rfd, buf + got, sizeof buf - got)) > 0)
        got += n;
    close(rfd);
    int s;
    CHECK(waitpid(pid, &s, 0) == pid);
    int lines = 0;
    for (size_t i = 0; i < got; i++)
        lines += buf[i] == '\n';
    printf("received %zu bytes in %d lines; first '%.13s' last '%.13s'\n", got, lines, buf,
           buf + got - 14);
    printf("writer exit %d\n", WEXITSTATUS(s));

    /* Three writers one after another (serialized by the parent). */
    rfd = open(path, O_RDONLY | O_NONBLOCK);
    CHECK(rfd >= 0);
    int keep = open(path, O_WRONLY); /* keeps EOF away between writers */
    CHECK(keep >= 0);
    CHECK(fcntl(rfd, F_SETFL, 0) == 0);
    for (int i = 0; i < 3; i++) {
        fflush(stdout);
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            int w = open(path, O_WRONLY);
            CHECK(w >= 0);
            char msg[16];
            int len = snprintf(msg, sizeof msg, "[writer %d]", i);
            CHECK(write(w, msg, len) == len);
            _exit(0);
        }
        CHECK(waitpid(pid, &s, 0) == pid);
        n = read(rfd, buf, sizeof buf);
        printf("got %.*s\n", (int)n, buf);
    }
    close(keep);
    printf("EOF after last writer: %zd\n", read(rfd, buf, sizeof buf));
    close(rfd);

    CHECK(unlink(path) == 0);
    CHECK(rmdir(dir) == 0);
    return 0;
}
