/* conf_signals: sigaction handlers, raise/kill to self, SA_SIGINFO with
 * sigqueue values, SIG_IGN, SA_RESETHAND, signalling a child waiting in
 * sigsuspend, and a child reporting back with a signal. */
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

static volatile sig_atomic_t usr1_count, usr2_count, last_value, last_code,
    last_from_self;

static void on_usr1(int sig)
{
    (void)sig;
    usr1_count++;
}

static void on_usr2(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    usr2_count++;
    last_value = si->si_value.sival_int;
    last_code = si->si_code;
    last_from_self = si->si_pid == getpid();
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);

    CHECK(raise(SIGUSR1) == 0);
    printf("after raise: usr1_count=%d\n", usr1_count);
    CHECK(kill(getpid(), SIGUSR1) == 0);
    printf("after kill(self): usr1_count=%d\n", usr1_count);

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
    union sigval v = {.sival_int = 4242};
    CHECK(sigqueue(getpid(), SIGUSR2, v) == 0);
    printf("after sigqueue: usr2_count=%d value=%d code_is_SI_QUEUE=%d from_self=%d\n",
           usr2_count, last_value, last_code == SI_QUEUE, last_from_self);
    CHECK(kill(getpid(), SIGUSR2) == 0);
    printf("after kill: usr2_count=%d code_is_SI_USER=%d\n", usr2_count,
           last_code == SI_USER);

    /* Query the installed handler. */
    struct sigaction old;
    CHECK(sigaction(SIGUSR2, NULL, &old) == 0);
    printf("SIGUSR2 has SA_SIGINFO: %d\n", (old.sa_flags & SA_SIGINFO) != 0);

    /* Ignored signal. */
    signal(SIGUSR1, SIG_IGN);
    CHECK(raise(SIGUSR1) == 0);
    printf("ignored SIGUSR1: usr1_count=%d\n", usr1_count);

    /* SA_RESETHAND: handler runs once, then default (we check via sigaction). */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESETHAND;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    CHECK(raise(SIGUSR1) == 0);
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0);
    printf("SA_RESETHAND: usr1_count=%d now default=%d\n", usr1_count,
           old.sa_handler == SIG_DFL);

    /* kill(pid, 0) probes existence. */
    printf("kill(self, 0) = %d\n", kill(getpid(), 0));

    /* Child waits in sigsuspend for SIGUSR1, answers with SIGUSR2 to parent. */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &block, &orig) == 0);
    usr1_count = 0;
    usr2_count = 0;
    pid_t parent = getpid();
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sigset_t wait_mask = orig;
        sigdelset(&wait_mask, SIGUSR1);
        while (usr1_count == 0)
            sigsuspend(&wait_mask);
        printf("child: got SIGUSR1 (count %d)\n", usr1_count);
        fflush(stdout);
        union sigval cv = {.sival_int = 77};
        CHECK(sigqueue(parent, SIGUSR2, cv) == 0);
        _exit(0);
    }
    CHECK(kill(pid, SIGUSR1) == 0);
    sigset_t wait_mask = orig;
    sigdelset(&wait_mask, SIGUSR2);
    while (usr2_count == 0)
        sigsuspend(&wait_mask);
    printf("parent: got SIGUSR2 from child with value %d, from_self=%d\n", last_value,
           last_from_self);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child exit %d\n", WEXITSTATUS(st));
    CHECK(sigprocmask(SIG_SETMASK, &orig, NULL) == 0);

    /* A child killed by an unhandled signal it sends itself. */
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGUSR1, SIG_DFL);
        raise(SIGUSR1);
        _exit(99);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("self-signalled child: signaled=%d sig=%s\n", WIFSIGNALED(st),
           WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1 ? "SIGUSR1" : "?");
    return 0;
}
