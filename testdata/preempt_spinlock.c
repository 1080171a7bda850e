/* Preemption guest (instruction-level PCT): a spinlock built on plain loads
 * and stores.
 *
 *     while (lock) ;  lock = 1;  tmp = counter; work; counter = tmp + 1;  lock = 0;
 *
 * Two threads, 10000 iterations each, no syscall in the loop.  Testing and
 * setting the lock are two instructions, so it does not exclude anybody:
 * natively two CPUs can both get in (the second thread first does some
 * syscall-free busy work so that natively the first loop is long over
 * before the second starts).  detrun switches threads only at intercepted
 * events, so under the default schedule, --chaos and plain --pct one loop
 * runs entirely before the other and the counter is right.
 *
 * A thread that is preempted while it holds the lock would make the other
 * one spin forever: detrun does not preempt a spinner (only its wall-clock
 * watchdog does, nondeterministically), so the wait is bounded.  After
 * 2M spins (a few ms) the waiter decides the holder is stuck and breaks
 * the lock -- a common and equally broken "stale lock" rule.  Then a
 * preemption inside the critical section, with the other thread's whole
 * loop run in between, loses that loop's increments when the holder
 * stores its stale value: the counter is wrong (stderr, exit 1).
 *
 * Each thread makes one intercepted, non-blocking syscall (clock_gettime)
 * right before its loop: an event at which a PCT change point can start an
 * instruction-level preemption. */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 10000
#define SPIN_LIMIT 2000000

static volatile int lock;
static volatile long counter;
static volatile long sink;
static long broken[2];

/* One intercepted syscall: the last event before the racy loop. */
static void mark(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    long h = id;
    if (id == 1)
        for (volatile int i = 0; i < 2000000; i++)
            ; /* natively: let worker 0 finish first */
    mark();
    for (int i = 0; i < N; i++) {
        long spins = 0;
        while (lock && ++spins < SPIN_LIMIT)
            ; /* spin (no syscalls) */
        if (spins >= SPIN_LIMIT)
            broken[id]++; /* the holder looks stuck: take the lock anyway */
        lock = 1;
        long tmp = counter; /* critical section: read ... */
        h = h * 31 + tmp;   /* ... work ... */
        h ^= h >> 7;
        counter = tmp + 1;  /* ... write back */
        lock = 0;
    }
    sink = h;
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (counter != 2 * N) {
        fprintf(stderr,
                "preempt_spinlock: counter %ld, expected %d (lock broken %ld + %ld times)\n",
                counter, 2 * N, broken[0], broken[1]);
        return 1;
    }
    printf("counter %ld\n", counter);
    return 0;
}
