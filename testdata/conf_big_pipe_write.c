/* conf_big_pipe_write: a single 1 MiB write() into a pipe (much larger than
 * the pipe buffer) read by a child in small odd-sized chunks; the write must
 * complete in full and the child must see every byte in order. Also the
 * reverse direction with writev() and a short-read-tolerant parent. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
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

#define SIZE (1 << 20)

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 131 + (i >> 12)) & 0xff);
}

int main(void)
{
    unsigned char *buf = malloc(SIZE);
    CHECK(buf != NULL);
    for (size_t i = 0; i < SIZE; i++)
        buf[i] = pattern(i);

    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[1]);
        unsigned char chunk[777];
        size_t total = 0, mismatches = 0;
        uint64_t sum = 0;
        for (;;) {
            ssize_t n = read(p[0], chunk, sizeof chunk);
            if (n < 0 && errno == EINTR)
                continue;
            CHECK(n >= 0);
            if (n == 0)
                break;
            for (ssize_t i = 0; i < n; i++) {
                if (chunk[i] != pattern(total + i))
                    mismatches++;
                sum = sum * 31 + chunk[i];
            }
            total += n;
        }
        printf("child: received %zu bytes, %zu mismatches, hash %016llx\n", total, mismatches,
               (unsigned long long)sum);
        fflush(stdout);
        _exit(mismatches ? 1 : 0);
    }
    close(p[0]);
    ssize_t w = write(p[1], buf, SIZE);
    close(p[1]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("parent: single write returned %zd\n", w);
    printf("child exit %d\n", WEXITSTATUS(st));

    /* Child -> parent with writev of many iovecs; parent reads in 4000-byte chunks. */
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        struct iovec iov[256];
        size_t per = SIZE / 256;
        for (int i = 0; i < 256; i++) {
            iov[i].iov_base = buf + i * per;
            iov[i].iov_len = per;
        }
        ssize_t n = writev(p[1], iov, 256);
        _exit(n == SIZE ? 0 : 2);
    }
    close(p[1]);
    memset(buf, 0, SIZE);
    size_t got = 0;
    for (;;) {
        size_t want = SIZE - got < 4000 ? SIZE - got : 4000;
        if (want == 0) {
            unsigned char extra;
            CHECK(read(p[0], &extra, 1) == 0);
            break;
        }
        ssize_t n = read(p[0], buf + got, want);
        CHECK(n > 0);
        got += n;
    }
    close(p[0]);
    size_t bad = 0;
    for (size_t i = 0; i < SIZE; i++)
        if (buf[i] != pattern(i))
            bad++;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("parent: writev path received %zu bytes, %zu mismatches, child exit %d\n", got, bad,
           WEXITSTATUS(st));
    free(buf);
    return 0;
}
