/* conf_stop_cont: job-control stops: SIGSTOP/SIGCONT of a child blocked in
 * read() seen through waitpid(WUNTRACED / WCONTINUED) and waitid
 * (CLD_STOPPED / CLD_CONTINUED), a child that stops itself, a SIGCONT
 * handler, SIGTERM left pending while stopped, and SIGKILL of a stopped
 * child. */
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

static volatile sig_atomic_t conts;
static int ack_fd = -1;

/* Counts and acknowledges each SIGCONT, so that the parent does not send the
 * next SIGSTOP while a SIGCONT is still pending (SIGSTOP discards it). */
static void on_cont(int sig)
{
    (void)sig;
    conts++;
    if (ack_fd >= 0)
        (void)!write(ack_fd, "c", 1);
}

static const char *status(int st)
{
    static char buf[64];
    if (WIFEXITED(st))
        snprintf(buf, sizeof buf, "exited %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, sizeof buf, "killed by %d", WTERMSIG(st));
    else if (WIFSTOPPED(st))
        snprintf(buf, sizeof buf, "stopped by %d", WSTOPSIG(st));
    else if (WIFCONTINUED(st))
        snprintf(buf, sizeof buf, "continued");
    else
        snprintf(buf, sizeof buf, "unknown");
    return buf;
}

int main(void)
{
    int st;
    int ready[2], data[2], ack[2];
    char c;

    /* Child blocked in read(): stop, continue, then feed it. */
    CHECK(pipe(ready) == 0 && pipe(data) == 0 && pipe(ack) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_cont;
        sa.sa_flags = SA_RESTART;
        CHECK(sigaction(SIGCONT, &sa, NULL) == 0);
        close(ready[0]);
        close(data[1]);
        close(ack[0]);
        ack_fd = ack[1];
        CHECK(write(ready[1], "r", 1) == 1);
        char c;
        ssize_t n;
        do
            n = read(data[0], &c, 1);
        while (n < 0 && errno == EINTR);
        printf("child: read %zd byte '%c' after %d SIGCONT handler run(s)\n", n, n == 1 ? c : '-',
               conts);
        fflush(stdout);
        _exit(n == 1 ? 0 : 1);
    }
    close(ready[1]);
    close(data[0]);
    close(ack[1]);
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);

    CHECK(kill(pid, SIGSTOP) == 0);
    CHECK(waitpid(pid, &st, WUNTRACED) == pid);
    printf("after SIGSTOP: %s\n", status(st));
    printf("WNOHANG|WUNTRACED while stopped (already reported): %d\n",
           waitpid(pid, &st, WNOHANG | WUNTRACED));
    CHECK(kill(pid, SIGCONT) == 0);
    CHECK(waitpid(pid, &st, WCONTINUED) == pid);
    printf("after SIGCONT: %s\n", status(st));
    CHECK(read(ack[0], &c, 1) == 1);
    printf("SIGCONT handler acknowledged\n");

    /* Same again observed through waitid. */
    CHECK(kill(pid, SIGSTOP) == 0);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    CHECK(waitid(P_PID, pid, &si, WSTOPPED) == 0);
    printf("waitid: code=%s status=%d\n", si.si_code == CLD_STOPPED ? "CLD_STOPPED" : "?",
           si.si_status);
    CHECK(kill(pid, SIGCONT) == 0);
    memset(&si, 0, sizeof si);
    CHECK(waitid(P_PID, pid, &si, WCONTINUED) == 0);
    printf("waitid: code=%s status=%d\n", si.si_code == CLD_CONTINUED ? "CLD_CONTINUED" : "?",
           si.si_status);
    CHECK(read(ack[0], &c, 1) == 1);
    close(ack[0]);

    fflush(stdout);
    CHECK(write(data[1], "z", 1) == 1);
    close(data[1]);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("finally: %s\n", status(st));

    /* A child that stops itself, then reports after being continued. */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        raise(SIGSTOP);
        printf("self-stopped child resumed\n");
        fflush(stdout);
        _exit(4);
    }
    CHECK(waitpid(pid, &st, WUNTRACED) == pid);
    printf("self-stop: %s\n", status(st));
    fflush(stdout);
    CHECK(kill(pid, SIGCONT) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("self-stop then: %s\n", status(st));

    /* SIGTERM sent while stopped stays pending until SIGCONT. */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        raise(SIGSTOP);
        _exit(0);
    }
    CHECK(waitpid(pid, &st, WUNTRACED) == pid);
    CHECK(kill(pid, SIGTERM) == 0);
    printf("SIGTERM to stopped child: still there=%d\n", waitpid(pid, &st, WNOHANG) == 0);
    CHECK(kill(pid, SIGCONT) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("after SIGCONT: %s\n", status(st));

    /* SIGKILL ends a stopped child. */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        raise(SIGSTOP);
        _exit(0);
    }
    CHECK(waitpid(pid, &st, WUNTRACED) == pid);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("SIGKILL while stopped: %s\n", status(st));
    return 0;
}
