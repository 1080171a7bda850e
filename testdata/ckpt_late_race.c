/* ckpt_late_race: a lost-update race that can only happen late in the run.
 * Phase 1: PREFIX_STEPS correctly locked iterations per thread (cannot fail).
 * Phase 2: mostly locked work, plus RACY unlocked read-yield-write
 * increments per thread; a preemption inside that window loses an update
 * (exit 1). For checkpoint tests: checkpoint in phase 1, branch into phase 2.
 * Usage: ckpt_late_race [PREFIX_STEPS]   (default 200) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PHASE2_STEPS 60
#define RACY_AT 30 /* phase-2 iteration of the (only) racy increment */
#define RACY 1     /* racy increments per thread */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static long counter;
static int racy;
static int prefix_steps = 200;
static long long base_ns;

static void say(const char *fmt, ...)
{
    char b[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (write(1, b, n) != n)
        exit(2);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep to the next whole ms (absolute, from base): both threads wake at the
 * same virtual instant, so the scheduler must order them. */
static void tick(void)
{
    long long d = base_ns + ((now_ns() - base_ns) / 1000000 + 1) * 1000000;
    struct timespec ts = {d / 1000000000LL, d % 1000000000LL};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void locked_work(void)
{
    pthread_mutex_lock(&mu);
    counter++;
    pthread_mutex_unlock(&mu);
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    for (int i = 0; i < prefix_steps; i++) { /* phase 1: always correct */
        locked_work();
        if (i % 20 == 0)
            say("t%d phase1 %d\n", id, i);
        tick();
    }
    pthread_barrier_wait(&bar);
    for (int i = 0; i < PHASE2_STEPS; i++) { /* phase 2 */
        locked_work();
        if (i >= RACY_AT && i < RACY_AT + RACY) {
            int v = racy; /* BUG: unlocked read-modify-write */
            if (id == 0) /* only t0 has a scheduling point in the window */
                sched_yield();
            racy = v + 1;
        }
        if (i % 20 == 0)
            say("t%d phase2 %d\n", id, i);
        tick();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        prefix_steps = atoi(argv[1]);
    base_ns = now_ns();
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t th[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)i))
            return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    say("counter %ld racy %d\n", counter, racy);
    if (racy != 2 * RACY) {
        say("LOST UPDATE\n");
        return 1;
    }
    say("ok\n");
    return 0;
}
