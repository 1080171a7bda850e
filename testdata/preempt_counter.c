/* Preemption guest (instruction-level PCT): a lost update with no syscall
 * in its window.
 *
 * Two threads each do 20000 unlocked increments
 *
 *     counter = counter + 1;      (a load, an add, a store)
 *
 * of a volatile long, with no syscall anywhere in the loop.  detrun
 * switches threads only at intercepted events, so under the default
 * schedule, --chaos and plain --pct one loop always runs entirely before
 * the other and the total is 40000.  Only a preemption between the load
 * and the store of one thread, with the other thread's whole loop run in
 * between, loses increments: the program then prints the total on stderr
 * and exits 1.
 *
 * Each thread makes one intercepted, non-blocking syscall (clock_gettime)
 * right before its loop: an event at which a PCT change point can start an
 * instruction-level preemption that lands in the first iterations.  The
 * second thread first does some syscall-free busy work, so that natively
 * (two real CPUs) the first loop (~30 us) is long over before the second
 * one starts; under detrun that work costs no scheduling events. */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 20000

static volatile long counter;

/* One intercepted syscall: the last event before the racy loop. */
static void mark(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    if (id == 1)
        for (volatile int i = 0; i < 2000000; i++)
            ; /* natively: let worker 0 finish first */
    mark();
    for (int i = 0; i < N; i++)
        counter = counter + 1; /* load, add, store: the window */
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
        fprintf(stderr, "preempt_counter: lost updates: counter %ld, expected %d\n",
                counter, 2 * N);
        return 1;
    }
    printf("counter %ld\n", counter);
    return 0;
}
