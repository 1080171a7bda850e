/* ckpt_procs: parent + writer child A + reader child B over a pipe; the
 * interleaving of the three processes' lines, how B's reads split the
 * messages and the reap order depend on the schedule. Spans ~60 ms of
 * virtual time, for checkpoint/branch tests. Sleeps end on a shared 1 ms
 * grid (absolute deadlines) so that processes wake at the same virtual
 * instant and the scheduler really has to choose. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t chld_count;

static void on_chld(int sig)
{
    (void)sig;
    chld_count++;
}

/* write(2) directly: no stdio buffers to duplicate across fork. */
static void say(const char *fmt, ...)
{
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof b - 1)
        n = sizeof b - 1;
    if (write(1, b, n) != n)
        _exit(2);
}

static long long base_ns; /* CLOCK_MONOTONIC at start (virtual time) */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep until the grid point ms milliseconds after the last whole one. */
static void sleep_ms(long ms)
{
    long long ms_ns = 1000000LL, t = now_ns() - base_ns;
    long long d = base_ns + (t / ms_ns + ms) * ms_ns;
    struct timespec ts = {d / 1000000000LL, d % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void child_a(int wfd)
{
    say("child A pid %d ppid %d\n", (int)getpid(), (int)getppid());
    for (int k = 0; k < 30; k++) {
        char m[64];
        int n = snprintf(m, sizeof m, "msg %d from %d\n", k, (int)getpid());
        if (write(wfd, m, n) != n)
            _exit(2);
        say("A sent %d\n", k);
        sleep_ms(1 + k % 3);
    }
    _exit(3);
}

static void child_b(int rfd)
{
    say("child B pid %d ppid %d\n", (int)getpid(), (int)getppid());
    char buf[256];
    int count = 0;
    ssize_t n;
    while ((n = read(rfd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            _exit(2);
        }
        for (ssize_t i = 0; i < n; i++)
            count += buf[i] == '\n';
        say("B got: %.*s", (int)n, buf);
        sleep_ms(1); /* lets A sometimes write twice before the next read */
    }
    say("B count %d pid %d ppid %d\n", count, (int)getpid(), (int)getppid());
    _exit(count % 256);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return 2;

    base_ns = now_ns();
    say("parent pid %d\n", (int)getpid());
    int p[2];
    if (pipe(p) != 0)
        return 2;
    pid_t a = fork();
    if (a < 0)
        return 2;
    if (a == 0) {
        close(p[0]);
        child_a(p[1]);
    }
    pid_t b = fork();
    if (b < 0)
        return 2;
    if (b == 0) {
        close(p[1]);
        child_b(p[0]);
    }
    close(p[0]);
    close(p[1]);
    say("parent forked A %d B %d\n", (int)a, (int)b);

    for (int t = 0; t < 10; t++) {
        sleep_ms(5);
        say("parent tick %d\n", t);
    }

    int st;
    pid_t r;
    while ((r = waitpid(-1, &st, 0)) != -1 || errno == EINTR) {
        if (r == -1)
            continue;
        if (WIFEXITED(st))
            say("reaped %d status %d\n", (int)r, WEXITSTATUS(st));
        else
            say("reaped %d signal %d\n", (int)r, WTERMSIG(st));
    }
    say("waitpid again: %s\n", errno == ECHILD ? "ECHILD" : strerror(errno));
    say("sigchld seen: %s\n", chld_count >= 1 ? "yes" : "no");
    return 0;
}
