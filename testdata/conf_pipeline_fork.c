/* conf_pipeline_fork: a three-stage pipeline of forked processes connected
 * by pipes (generator -> filter -> parent), plus a shell pipeline exec'd with
 * stdin/stdout redirected via dup2. */
#define _GNU_SOURCE
#include <errno.h>
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

static void write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        CHECK(w > 0);
        p += w;
        n -= w;
    }
}

int main(void)
{
    int a[2], b[2];
    CHECK(pipe(a) == 0 && pipe(b) == 0);
    fflush(stdout);

    pid_t gen = fork();
    CHECK(gen >= 0);
    if (gen == 0) {
        close(a[0]);
        close(b[0]);
        close(b[1]);
        FILE *out = fdopen(a[1], "w");
        CHECK(out != NULL);
        for (int i = 1; i <= 5000; i++)
            fprintf(out, "%d\n", i);
        fclose(out);
        _exit(0);
    }

    pid_t filt = fork();
    CHECK(filt >= 0);
    if (filt == 0) {
        close(a[1]);
        close(b[0]);
        FILE *in = fdopen(a[0], "r");
        FILE *out = fdopen(b[1], "w");
        CHECK(in && out);
        long v;
        int kept = 0;
        while (fscanf(in, "%ld", &v) == 1) {
            if (v % 3 == 0) {
                fprintf(out, "%ld\n", v * v);
                kept++;
            }
        }
        fclose(out);
        fclose(in);
        _exit(kept % 256);
    }

    close(a[0]);
    close(a[1]);
    close(b[1]);
    FILE *in = fdopen(b[0], "r");
    CHECK(in != NULL);
    long v, sum = 0, first = -1, last = -1;
    int count = 0;
    while (fscanf(in, "%ld", &v) == 1) {
        if (first < 0)
            first = v;
        last = v;
        sum += v;
        count++;
    }
    fclose(in);
    int st;
    CHECK(waitpid(gen, &st, 0) == gen);
    printf("generator exit %d\n", WEXITSTATUS(st));
    CHECK(waitpid(filt, &st, 0) == filt);
    printf("filter exit %d\n", WEXITSTATUS(st));
    printf("pipeline: count=%d first=%ld last=%ld sum=%ld\n", count, first, last, sum);

    /* Feed a shell pipeline through its stdin and capture its stdout. */
    int in_p[2], out_p[2];
    CHECK(pipe(in_p) == 0 && pipe(out_p) == 0);
    fflush(stdout);
    pid_t sh = fork();
    CHECK(sh >= 0);
    if (sh == 0) {
        CHECK(dup2(in_p[0], 0) == 0);
        CHECK(dup2(out_p[1], 1) == 1);
        close(in_p[0]);
        close(in_p[1]);
        close(out_p[0]);
        close(out_p[1]);
        execl("/bin/sh", "sh", "-c", "read a; read b; echo \"$b $a\"; while read x; do echo \"<$x>\"; done", (char *)NULL);
        _exit(127);
    }
    close(in_p[0]);
    close(out_p[1]);
    const char *input = "first\nsecond\nthree\nfour\n";
    write_all(in_p[1], input, strlen(input));
    close(in_p[1]);
    char buf[256];
    size_t got = 0;
    ssize_t n;
    while ((n = read(out_p[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += n;
    buf[got] = 0;
    close(out_p[0]);
    CHECK(waitpid(sh, &st, 0) == sh);
    printf("shell output:\n%s", buf);
    printf("shell exit %d\n", WEXITSTATUS(st));
    return 0;
}
