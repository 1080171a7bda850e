/* sleeper.c - request 60 s of sleep through every common sleeping call.
 *
 * Steps (requested time): nanosleep 15 s, clock_nanosleep(CLOCK_MONOTONIC,
 * relative) 10 s, clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, now+10 s),
 * select() 10 s, poll() 10000 ms, sleep(4) + usleep(1000000) = 5 s.
 *
 * Output: "<step>: done" after each step, then "elapsed_ms: N" (CLOCK_MONOTONIC,
 * whole run).  Natively N is ~60000; under a time-virtualising sandbox it
 * should still read >= 60000 while wall time is tiny.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void step(const char *name)
{
    printf("%s: done\n", name);
    fflush(stdout);
}

static void die(const char *what, int err)
{
    fprintf(stderr, "%s failed: %s\n", what, strerror(err));
    exit(1);
}

int main(void)
{
    long long start = now_ms();
    int rc;

    /* 1. nanosleep 15 s (restart on EINTR with the remainder) */
    struct timespec req = {15, 0}, rem;
    while (nanosleep(&req, &rem) != 0) {
        if (errno != EINTR)
            die("nanosleep", errno);
        req = rem;
    }
    step("nanosleep");

    /* 2. clock_nanosleep CLOCK_MONOTONIC relative 10 s */
    req.tv_sec = 10;
    req.tv_nsec = 0;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem)) != 0) {
        if (rc != EINTR)
            die("clock_nanosleep(MONOTONIC)", rc);
        req = rem;
    }
    step("clock_nanosleep_monotonic");

    /* 3. clock_nanosleep CLOCK_REALTIME absolute deadline now + 10 s */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    while ((rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline,
                                 NULL)) != 0) {
        if (rc != EINTR)
            die("clock_nanosleep(REALTIME, ABSTIME)", rc);
    }
    step("clock_nanosleep_realtime_abs");

    /* 4. select with no fds, 10 s timeout (Linux updates tv on EINTR) */
    struct timeval tv = {10, 0};
    while ((rc = select(0, NULL, NULL, NULL, &tv)) != 0) {
        if (rc < 0 && errno != EINTR)
            die("select", errno);
    }
    step("select");

    /* 5. poll with no fds, 10000 ms timeout (on EINTR, poll for the rest) */
    long long poll_end = now_ms() + 10000;
    int timeout = 10000;
    while ((rc = poll(NULL, 0, timeout)) != 0) {
        if (rc < 0 && errno != EINTR)
            die("poll", errno);
        long long left_ms = poll_end - now_ms();
        if (left_ms <= 0)
            break;
        timeout = (int)left_ms;
    }
    step("poll");

    /* 6. remaining 5 s: sleep(4) + usleep(1 s) */
    unsigned left = 4;
    while ((left = sleep(left)) != 0)
        ;
    step("sleep");
    if (usleep(1000000) != 0 && errno != EINTR)
        die("usleep", errno);
    step("usleep");

    printf("elapsed_ms: %lld\n", now_ms() - start);
    return 0;
}
