/* conf_kill_child: the parent kills children blocked in read() (they signal
 * readiness through a pipe first): SIGTERM with default action (WTERMSIG),
 * SIGTERM with a handler that reports and exits, SIGKILL despite the child
 * ignoring SIGTERM, kill() of a process group, and kill() on a reaped pid. */
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

static void on_term(int sig)
{
    (void)sig;
    static const char msg[] = "child: handler caught SIGTERM\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(5);
}

enum mode { DEFAULT, HANDLER, IGNORE };

/* Fork a child that sets up `mode`, tells us it is ready, and blocks in read(). */
static pid_t blocked_child(enum mode mode, int new_group)
{
    int ready[2], never[2];
    CHECK(pipe(ready) == 0 && pipe(never) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (new_group)
            setpgid(0, 0);
        if (mode == HANDLER) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_term;
            CHECK(sigaction(SIGTERM, &sa, NULL) == 0);
        } else if (mode == IGNORE) {
            signal(SIGTERM, SIG_IGN);
        }
        close(ready[0]);
        close(never[1]);
        CHECK(write(ready[1], "r", 1) == 1);
        close(ready[1]);
        char c;
        ssize_t n = read(never[0], &c, 1);
        /* Only reached if read returns (it should not). */
        printf("child: read returned %zd\n", n);
        fflush(stdout);
        _exit(77);
    }
    if (new_group)
        setpgid(pid, pid);
    close(ready[1]);
    close(never[0]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    /* never[1] is kept open by us so the child's read cannot see EOF. */
    return pid;
}

static void report(const char *what, int st)
{
    if (WIFSIGNALED(st))
        printf("%s: killed by signal %d (%s)\n", what, WTERMSIG(st),
               WTERMSIG(st) == SIGTERM  ? "SIGTERM"
               : WTERMSIG(st) == SIGKILL ? "SIGKILL"
                                         : "other");
    else if (WIFEXITED(st))
        printf("%s: exited with %d\n", what, WEXITSTATUS(st));
    else
        printf("%s: other status\n", what);
}

int main(void)
{
    int st;
    pid_t pid = blocked_child(DEFAULT, 0);
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    report("default SIGTERM", st);
    printf("WIFSIGNALED=%d WTERMSIG=%d\n", WIFSIGNALED(st), WTERMSIG(st));

    pid = blocked_child(HANDLER, 0);
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    report("handled SIGTERM", st);

    pid = blocked_child(IGNORE, 0);
    CHECK(kill(pid, SIGTERM) == 0);
    /* SIGTERM is ignored: the child must still be alive and blocked. */
    printf("ignoring child still running after SIGTERM: %d\n", waitpid(pid, &st, WNOHANG) == 0);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    report("SIGKILL after ignored SIGTERM", st);

    /* Two children in one new process group, killed together. */
    pid_t a = blocked_child(DEFAULT, 1);
    int ready[2], never[2];
    CHECK(pipe(ready) == 0 && pipe(never) == 0);
    fflush(stdout);
    pid_t b = fork();
    CHECK(b >= 0);
    if (b == 0) {
        setpgid(0, a);
        close(ready[0]);
        close(never[1]);
        CHECK(write(ready[1], "r", 1) == 1);
        char c;
        (void)!read(never[0], &c, 1);
        _exit(77);
    }
    setpgid(b, a);
    close(ready[1]);
    close(never[0]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    CHECK(kill(-a, SIGTERM) == 0);
    CHECK(waitpid(a, &st, 0) == a);
    report("group member a", st);
    CHECK(waitpid(b, &st, 0) == b);
    report("group member b", st);

    errno = 0;
    int r = kill(a, SIGTERM);
    printf("kill reaped pid: %d %s\n", r, errno == ESRCH ? "ESRCH" : "?");
    return 0;
}
