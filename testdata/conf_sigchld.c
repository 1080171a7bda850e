/* conf_sigchld: SIGCHLD delivery with SA_SIGINFO (si_code CLD_EXITED /
 * CLD_KILLED), reaping from the main loop after sigsuspend wake-ups,
 * SA_NOCLDWAIT / SIG_IGN auto-reaping (wait gives ECHILD). */
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

static volatile sig_atomic_t chld_seen, bad_code, last_code;

static void on_chld(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (sig != SIGCHLD)
        bad_code = 1;
    chld_seen = 1;
    last_code = si->si_code;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGCHLD, &sa, NULL) == 0);

    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    CHECK(sigprocmask(SIG_BLOCK, &block, &orig) == 0);

    /* Three exiting children: reap from the main loop until all are gone. */
    fflush(stdout);
    for (int i = 0; i < 3; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            _exit(30 + i);
    }
    int codes[3], reaped = 0, wakeups = 0;
    while (reaped < 3) {
        int st;
        pid_t w;
        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
            codes[reaped++] = WEXITSTATUS(st);
        if (reaped == 3)
            break;
        chld_seen = 0;
        sigsuspend(&orig);
        CHECK(chld_seen);
        CHECK(last_code == CLD_EXITED);
        wakeups++;
    }
    qsort(codes, 3, sizeof codes[0], cmp_int);
    printf("reaped %d children with codes %d %d %d\n", reaped, codes[0], codes[1], codes[2]);

    /* Handler runs once the pending SIGCHLD is unblocked. */
    chld_seen = 0;
    CHECK(sigprocmask(SIG_SETMASK, &orig, NULL) == 0);
    printf("pending SIGCHLD delivered on unblock: %s\n",
           (chld_seen || wakeups > 0) ? "yes" : "no");
    CHECK(sigprocmask(SIG_BLOCK, &block, NULL) == 0);

    /* A killed child gives CLD_KILLED. */
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        char c;
        close(p[1]);
        (void)!read(p[0], &c, 1);
        _exit(1);
    }
    close(p[0]);
    chld_seen = 0;
    CHECK(kill(pid, SIGKILL) == 0);
    while (!chld_seen)
        sigsuspend(&orig);
    printf("killed child: si_code CLD_KILLED=%d\n", last_code == CLD_KILLED);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("killed child: WTERMSIG=%d\n", WTERMSIG(st));
    close(p[1]);

    /* A child whose exit we only learn via SIGCHLD while blocked in read(). */
    CHECK(sigprocmask(SIG_SETMASK, &orig, NULL) == 0);
    CHECK(pipe(p) == 0);
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        CHECK(write(p[1], "bye", 3) == 3);
        _exit(5);
    }
    close(p[1]);
    char buf[8];
    ssize_t got = 0, n;
    while ((n = read(p[0], buf + got, sizeof buf - got)) != 0) {
        if (n < 0) {
            CHECK(errno == EINTR);
            continue;
        }
        got += n;
    }
    close(p[0]);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("read across SIGCHLD (SA_RESTART): '%.*s' exit %d\n", (int)got, buf,
           WEXITSTATUS(st));

    /* SIGCHLD ignored: children are auto-reaped, wait() ends with ECHILD. */
    signal(SIGCHLD, SIG_IGN);
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            _exit(0);
    }
    errno = 0;
    int r = wait(&st);
    printf("wait with SIGCHLD ignored: %d %s\n", r, errno == ECHILD ? "ECHILD" : "?");
    printf("bad signal number seen: %d\n", bad_code);
    return 0;
}
