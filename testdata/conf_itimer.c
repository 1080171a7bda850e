/* conf_itimer: short timers: setitimer(ITIMER_REAL) one-shot + sigsuspend,
 * a periodic timer counted to 3 expirations, nanosleep interrupted by a
 * handler (EINTR), and an uninterrupted nanosleep. Only counts are printed. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
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

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void arm(long first_us, long interval_us)
{
    struct itimerval it = {
        .it_value = {first_us / 1000000, first_us % 1000000},
        .it_interval = {interval_us / 1000000, interval_us % 1000000},
    };
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);

    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    CHECK(sigprocmask(SIG_BLOCK, &block, &orig) == 0);

    arm(20000, 0);
    while (alarms == 0)
        sigsuspend(&orig);
    printf("one-shot: alarms=%d\n", alarms);
    struct itimerval cur;
    CHECK(getitimer(ITIMER_REAL, &cur) == 0);
    printf("one-shot disarmed after firing: %d\n",
           cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0);

    alarms = 0;
    arm(10000, 10000);
    while (alarms < 3)
        sigsuspend(&orig);
    arm(0, 0);
    printf("periodic: reached 3 expirations\n");

    /* nanosleep interrupted by the alarm handler. */
    CHECK(sigprocmask(SIG_SETMASK, &orig, NULL) == 0);
    alarms = 0;
    arm(20000, 0);
    struct timespec req = {5, 0}, rem = {0, 0};
    errno = 0;
    int r = nanosleep(&req, &rem);
    printf("interrupted nanosleep: %d %s, alarms=%d, remaining>0=%d\n", r,
           errno == EINTR ? "EINTR" : "?", alarms, rem.tv_sec > 0 || rem.tv_nsec > 0);

    req.tv_sec = 0;
    req.tv_nsec = 10 * 1000 * 1000;
    r = nanosleep(&req, NULL);
    printf("uninterrupted nanosleep: %d\n", r);

    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    req.tv_nsec = 5 * 1000 * 1000;
    nanosleep(&req, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("monotonic clock advanced: %d\n",
           b.tv_sec > a.tv_sec || (b.tv_sec == a.tv_sec && b.tv_nsec > a.tv_nsec));
    return 0;
}
