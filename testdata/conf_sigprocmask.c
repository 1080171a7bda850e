/* conf_sigprocmask: blocking and pending signals: a blocked standard signal
 * raised twice is delivered once on unblock (before sigprocmask returns);
 * realtime signals queue with values in FIFO order; lowest-numbered pending
 * signal first; sigpending/sigismember; sigwait/sigtimedwait; masks are
 * per-thread and inherited across fork; SIGKILL cannot be blocked. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static char order[64];
static volatile sig_atomic_t order_len;
static int rt_values[16];
static volatile sig_atomic_t rt_count;

static void on_sig(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    char c = '?';
    if (sig == SIGUSR1)
        c = '1';
    else if (sig == SIGUSR2)
        c = '2';
    else if (sig == SIGHUP)
        c = 'H';
    else if (sig == SIGRTMIN) {
        c = 'R';
        if (rt_count < 16)
            rt_values[rt_count++] = si->si_value.sival_int;
    } else if (sig == SIGRTMIN + 1)
        c = 'S';
    if (order_len < 63)
        order[order_len++] = c;
}

static void install(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sig;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask); /* handlers never nest: order is well defined */
    CHECK(sigaction(sig, &sa, NULL) == 0);
}

static void reset_order(void)
{
    order_len = 0;
    memset(order, 0, sizeof order);
}

static void *thread_fn(void *arg)
{
    (void)arg;
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    int inherited = sigismember(&cur, SIGUSR2);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    return (void *)(long)inherited;
}

int main(void)
{
    install(SIGUSR1);
    install(SIGUSR2);
    install(SIGHUP);
    install(SIGRTMIN);
    install(SIGRTMIN + 1);

    sigset_t set, old, pend;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    CHECK(sigprocmask(SIG_BLOCK, &set, &old) == 0);
    CHECK(raise(SIGUSR1) == 0);
    CHECK(raise(SIGUSR1) == 0);
    CHECK(sigpending(&pend) == 0);
    printf("blocked SIGUSR1 raised twice: handled so far=%d pending=%d\n", order_len,
           sigismember(&pend, SIGUSR1));
    CHECK(sigprocmask(SIG_SETMASK, &old, NULL) == 0);
    printf("after unblock: deliveries='%s'\n", order);
    CHECK(sigpending(&pend) == 0);
    printf("pending after unblock=%d\n", sigismember(&pend, SIGUSR1));

    /* Several different pending standard signals: lowest number first. */
    reset_order();
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigaddset(&set, SIGHUP);
    CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
    raise(SIGUSR2);
    raise(SIGHUP);
    raise(SIGUSR1);
    CHECK(sigprocmask(SIG_UNBLOCK, &set, NULL) == 0);
    printf("standard signals delivered in order: '%s'\n", order);

    /* Realtime signals queue, in order, standard before realtime. */
    reset_order();
    rt_count = 0;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigaddset(&set, SIGRTMIN + 1);
    sigaddset(&set, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        union sigval v = {.sival_int = 10 + i};
        CHECK(sigqueue(getpid(), SIGRTMIN, v) == 0);
    }
    union sigval v2 = {.sival_int = 99};
    CHECK(sigqueue(getpid(), SIGRTMIN + 1, v2) == 0);
    raise(SIGUSR2);
    CHECK(sigprocmask(SIG_UNBLOCK, &set, NULL) == 0);
    printf("realtime: order='%s' values:", order);
    for (int i = 0; i < rt_count; i++)
        printf(" %d", rt_values[i]);
    printf("\n");

    /* sigwait consumes a pending signal without running the handler. */
    reset_order();
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    CHECK(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
    raise(SIGUSR2);
    int got = 0;
    CHECK(sigwait(&set, &got) == 0);
    printf("sigwait got SIGUSR2=%d, handler ran='%s'\n", got == SIGUSR2, order);
    struct timespec zero = {0, 0};
    errno = 0;
    int r = sigtimedwait(&set, NULL, &zero);
    printf("sigtimedwait with nothing pending: %d %s\n", r, errno == EAGAIN ? "EAGAIN" : "?");
    union sigval v3 = {.sival_int = 555};
    CHECK(sigqueue(getpid(), SIGUSR2, v3) == 0);
    siginfo_t si;
    r = sigtimedwait(&set, &si, &zero);
    printf("sigwaitinfo: sig=SIGUSR2:%d value=%d code=SI_QUEUE:%d\n", r == SIGUSR2,
           si.si_value.sival_int, si.si_code == SI_QUEUE);

    /* Thread inherits the creating thread's mask; its changes stay local. */
    pthread_t t;
    void *inh;
    CHECK(pthread_create(&t, NULL, thread_fn, NULL) == 0);
    CHECK(pthread_join(t, &inh) == 0);
    sigset_t cur;
    CHECK(sigprocmask(SIG_SETMASK, NULL, &cur) == 0);
    printf("thread inherited SIGUSR2 block=%ld; main has SIGHUP blocked=%d\n", (long)inh,
           sigismember(&cur, SIGHUP));

    /* The mask is inherited across fork; a pending signal is not. */
    raise(SIGUSR2);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sigset_t m, p;
        sigprocmask(SIG_SETMASK, NULL, &m);
        sigpending(&p);
        printf("child: SIGUSR2 blocked=%d pending=%d\n", sigismember(&m, SIGUSR2),
               sigismember(&p, SIGUSR2));
        fflush(stdout);
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(sigwait(&set, &got) == 0);

    /* SIGKILL and SIGSTOP cannot be blocked. */
    sigfillset(&set);
    CHECK(sigprocmask(SIG_SETMASK, &set, NULL) == 0);
    CHECK(sigprocmask(SIG_SETMASK, NULL, &cur) == 0);
    printf("after blocking everything: SIGKILL blocked=%d SIGSTOP blocked=%d SIGTERM blocked=%d\n",
           sigismember(&cur, SIGKILL), sigismember(&cur, SIGSTOP), sigismember(&cur, SIGTERM));
    fflush(stdout);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        raise(SIGKILL);
        _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    printf("child with all signals blocked raising SIGKILL: killed=%d\n",
           WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    errno = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    r = sigaction(SIGKILL, &sa, NULL);
    printf("sigaction(SIGKILL): %d %s\n", r, errno == EINVAL ? "EINVAL" : "?");
    CHECK(sigprocmask(SIG_SETMASK, &old, NULL) == 0);
    return 0;
}
