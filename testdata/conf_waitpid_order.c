/* conf_waitpid_order: three children exiting with different codes (after
 * different amounts of work, so they finish in arbitrary order), reaped by
 * waitpid(pid) in a fixed order; then waitid(P_PID) with WNOWAIT peeking
 * before the real reap, and waitpid(-1) collecting the rest. */
#define _GNU_SOURCE
#include <errno.h>
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

static pid_t spawn(int code, unsigned long work)
{
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        volatile unsigned long x = 0;
        for (unsigned long i = 0; i < work; i++)
            x += i;
        _exit(code);
    }
    return pid;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int main(void)
{
    const int codes[3] = {17, 42, 99};
    const unsigned long work[3] = {3000000, 10, 300000};
    pid_t pids[3];
    for (int i = 0; i < 3; i++)
        pids[i] = spawn(codes[i], work[i]);

    const int order[3] = {2, 0, 1};
    for (int k = 0; k < 3; k++) {
        int i = order[k], st;
        pid_t w = waitpid(pids[i], &st, 0);
        printf("waitpid(child %d): matched=%d exited=%d code=%d\n", i, w == pids[i],
               WIFEXITED(st), WEXITSTATUS(st));
    }
    int st;
    errno = 0;
    pid_t r = waitpid(-1, &st, 0);
    printf("no children left: %d %s\n", (int)r, errno == ECHILD ? "ECHILD" : "?");

    /* waitid with WNOWAIT leaves the zombie in place. */
    pid_t a = spawn(5, 1000);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    CHECK(waitid(P_PID, a, &si, WEXITED | WNOWAIT) == 0);
    printf("waitid WNOWAIT: pid matched=%d code=%s status=%d\n", si.si_pid == a,
           si.si_code == CLD_EXITED ? "CLD_EXITED" : "?", si.si_status);
    memset(&si, 0, sizeof si);
    CHECK(waitid(P_PID, a, &si, WEXITED) == 0);
    printf("waitid again: pid matched=%d status=%d\n", si.si_pid == a, si.si_status);
    errno = 0;
    int wr = waitid(P_PID, a, &si, WEXITED);
    printf("waitid after reap: %d %s\n", wr, errno == ECHILD ? "ECHILD" : "?");

    /* Reap a specific late child first, then the remaining ones with -1. */
    pid_t many[4];
    for (int i = 0; i < 4; i++)
        many[i] = spawn(60 + i, (4 - i) * 100000UL);
    CHECK(waitpid(many[0], &st, 0) == many[0]);
    printf("first reaped specifically: %d\n", WEXITSTATUS(st));
    int rest[3];
    for (int i = 0; i < 3; i++) {
        pid_t w = waitpid(-1, &st, 0);
        CHECK(w == many[1] || w == many[2] || w == many[3]);
        rest[i] = WEXITSTATUS(st);
    }
    qsort(rest, 3, sizeof rest[0], cmp_int);
    printf("rest (sorted): %d %d %d\n", rest[0], rest[1], rest[2]);

    /* Process-group waits: a child in its own group, waited with -pgid. */
    pid_t g = fork();
    CHECK(g >= 0);
    if (g == 0) {
        setpgid(0, 0);
        _exit(88);
    }
    setpgid(g, g); /* race-free: both sides set it */
    CHECK(waitpid(-g, &st, 0) == g);
    printf("waitpid(-pgid): code %d\n", WEXITSTATUS(st));
    return 0;
}
