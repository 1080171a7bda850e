/* ckpt_threads: 4 threads take turns on a mutex-protected log; the log
 * order (and so the printed counters and hash) depends on the schedule.
 * Sleeps of (i+1) ms spread the run over ~80 ms of virtual time, for
 * checkpoint/branch tests. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NT 4
#define STEPS 20

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char logbuf[4096];
static size_t loglen;
static int counter, at_half;
static long tids[NT];

/* write(2) directly: each line is one scheduling point, no stdio buffering. */
static void say(const char *fmt, ...)
{
    char b[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (write(1, b, n) != n)
        exit(2);
}

static long long base_ns;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep to the next whole millisecond since the start: threads wake
 * together, so the schedule (not the sleeps) orders them. */
static void tick(void)
{
    long long t = now_ns() - base_ns;
    long long d = base_ns + (t / 1000000 + 1) * 1000000;
    struct timespec ts = {d / 1000000000LL, d % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    tids[i] = syscall(SYS_gettid);
    for (int s = 0; s < STEPS; s++) {
        pthread_mutex_lock(&mu);
        loglen += snprintf(logbuf + loglen, sizeof logbuf - loglen, "T%d:%d ", i, s);
        int c = ++counter;
        if (s == 10 && ++at_half == NT)
            pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        say("t%d step %d counter %d\n", i, s, c);
        for (int k = 0; k <= i % 2; k++)
            tick();
        if (s % 4 == 3) {
            unsigned char r[8];
            if (getrandom(r, sizeof r, 0) != sizeof r)
                exit(2);
            sched_yield();
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t th[NT];
    base_ns = now_ns();
    for (int i = 0; i < NT; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i))
            return 2;
    pthread_mutex_lock(&mu);
    while (at_half < NT)
        pthread_cond_wait(&cv, &mu);
    int c = counter;
    pthread_mutex_unlock(&mu);
    say("half counter %d\n", c);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    uint32_t h = 2166136261u; /* FNV-1a of the log */
    for (size_t k = 0; k < loglen; k++)
        h = (h ^ (unsigned char)logbuf[k]) * 16777619u;
    say("final counter %d hash %08x\n", counter, h);
    for (int i = 0; i < NT; i++)
        say("tid[%d] %ld\n", i, tids[i]);
    say("pid %d\n", (int)getpid());
    return 0;
}
