/* conf_fork_wait: fork, memory isolation between parent and child, wait(),
 * waitpid(WNOHANG), nested fork (grandchild), ECHILD, getppid relations. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int main(void)
{
    int value = 100;
    int st;
    pid_t me = getpid();

    printf("parent starts\n");
    fflush(stdout);

    /* Child modifies its copy; parent's stays. */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        value += 1;
        printf("child: value=%d ppid-is-parent=%d\n", value, getppid() == me);
        fflush(stdout);
        _exit(value - 100);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("parent: value=%d child exited=%d code=%d\n", value, WIFEXITED(st),
           WEXITSTATUS(st));

    /* Five children, reaped with wait() in whatever order; report sorted. */
    int codes[5];
    pid_t pids[5];
    for (int i = 0; i < 5; i++) {
        fflush(stdout);
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            volatile unsigned long x = 0;
            for (unsigned long k = 0; k < 10000UL * (5 - i); k++)
                x += k;
            _exit(10 + i);
        }
    }
    for (int i = 0; i < 5; i++) {
        pid_t w = wait(&st);
        CHECK(w > 0);
        int known = 0;
        for (int j = 0; j < 5; j++)
            if (pids[j] == w)
                known = 1;
        CHECK(known);
        codes[i] = WEXITSTATUS(st);
    }
    qsort(codes, 5, sizeof codes[0], cmp_int);
    printf("wait() codes sorted:");
    for (int i = 0; i < 5; i++)
        printf(" %d", codes[i]);
    printf("\n");
    errno = 0;
    pid_t r = wait(&st);
    printf("wait with no children: %d %s\n", (int)r, errno == ECHILD ? "ECHILD" : "?");

    /* WNOHANG on a child that is blocked until we let it go. */
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char c;
        close(p[1]);
        _exit(read(p[0], &c, 1) == 0 ? 3 : 4);
    }
    close(p[0]);
    printf("WNOHANG on running child: %d\n", waitpid(pid, &st, WNOHANG));
    close(p[1]);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("released child code: %d\n", WEXITSTATUS(st));

    /* Grandchild: child forks, waits for grandchild, exits with its code+1. */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        pid_t c = getpid();
        pid_t g = fork();
        CHECK(g >= 0);
        if (g == 0) {
            printf("grandchild: parent-is-child=%d\n", getppid() == c);
            fflush(stdout);
            _exit(40);
        }
        int gst;
        CHECK(waitpid(g, &gst, 0) == g);
        printf("child: grandchild code %d\n", WEXITSTATUS(gst));
        fflush(stdout);
        _exit(WEXITSTATUS(gst) + 1);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("parent: child code %d\n", WEXITSTATUS(st));

    /* waitpid on a pid that is not our child. */
    errno = 0;
    r = waitpid(1, &st, WNOHANG);
    printf("waitpid(1): %d %s\n", (int)r, errno == ECHILD ? "ECHILD" : "?");
    printf("parent done\n");
    return 0;
}
