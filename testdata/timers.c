/* timers.c - exercise signal-delivering timers.
 *
 *   1. alarm(2) + SIGALRM handler + pause()
 *   2. setitimer(ITIMER_REAL, 100 ms value and interval), 5 SIGALRMs
 *      counted by a handler, waited for with sigsuspend()
 *   3. timer_create(CLOCK_MONOTONIC, SIGEV_SIGNAL/SIGUSR1), one-shot 3 s via
 *      timer_settime, handler + sigsuspend()
 *
 * Output: "<name>: elapsed_ms N" after each part (CLOCK_MONOTONIC since
 * start, integer ms; natively ~2000, ~2500, ~5500), then "timers: done".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alarm_count;
static volatile sig_atomic_t usr1_count;

static void on_alarm(int sig)
{
    (void)sig;
    alarm_count++;
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    if (si->si_code == SI_TIMER)
        usr1_count++;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what)
{
    fprintf(stderr, "%s failed: %s\n", what, strerror(errno));
    exit(1);
}

int main(void)
{
    long long start = now_ms();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        die("sigaction(SIGALRM)");

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        die("sigaction(SIGUSR1)");

    /* 1. alarm + pause */
    alarm_count = 0;
    alarm(2);
    while (alarm_count == 0)
        pause();
    printf("alarm: elapsed_ms %lld\n", now_ms() - start);
    fflush(stdout);

    /* For the sigsuspend parts, block the signals and atomically unblock
     * them while waiting so no delivery can be lost. */
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    sigaddset(&block, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &block, &orig) != 0)
        die("sigprocmask");
    sigset_t waitmask = orig;
    sigdelset(&waitmask, SIGALRM);
    sigdelset(&waitmask, SIGUSR1);

    /* 2. setitimer, 100 ms periodic, count 5 */
    alarm_count = 0;
    struct itimerval it = {{0, 100000}, {0, 100000}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        die("setitimer");
    while (alarm_count < 5)
        sigsuspend(&waitmask);
    struct itimerval off = {{0, 0}, {0, 0}};
    if (setitimer(ITIMER_REAL, &off, NULL) != 0)
        die("setitimer(off)");
    printf("setitimer: count %d elapsed_ms %lld\n", (int)alarm_count,
           now_ms() - start);
    fflush(stdout);

    /* 3. POSIX timer, CLOCK_MONOTONIC, SIGUSR1, one-shot 3 s */
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGUSR1;
    sev.sigev_value.sival_int = 42;
    timer_t tid;
    if (timer_create(CLOCK_MONOTONIC, &sev, &tid) != 0)
        die("timer_create");
    struct itimerspec its = {{0, 0}, {3, 0}};
    usr1_count = 0;
    if (timer_settime(tid, 0, &its, NULL) != 0)
        die("timer_settime");
    while (usr1_count == 0)
        sigsuspend(&waitmask);
    timer_delete(tid);
    printf("timer_create: elapsed_ms %lld\n", now_ms() - start);

    sigprocmask(SIG_SETMASK, &orig, NULL);
    printf("timers: done\n");
    return 0;
}
