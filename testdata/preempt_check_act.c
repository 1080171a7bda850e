/* Preemption guest (instruction-level PCT): check-then-act without a lock.
 *
 * 5000 slots are handed out by two threads, each trying 5000 times:
 *
 *     if (slots > 0) { a few instructions of work; slots--; taken++; }
 *
 * on a shared volatile int, with no syscall in the loop.  detrun switches
 * threads only at intercepted events, so under the default schedule,
 * --chaos and plain --pct one loop runs entirely before the other: the
 * first thread takes every slot, the second none.  A preemption between
 * the check and the decrement (or between the decrement's load and store),
 * with the other thread's whole loop run in between, hands out a slot
 * twice: slots ends below 0 or more than 5000 are taken (stderr, exit 1).
 *
 * Each thread makes one intercepted, non-blocking syscall (clock_gettime)
 * right before its loop: an event at which a PCT change point can start an
 * instruction-level preemption.  The second thread first does some
 * syscall-free busy work so that natively the first loop is long over
 * before the second starts. */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 5000
#define TRIES 5000

static volatile int slots = SLOTS;
static long taken[2];
static volatile long sink;

/* One intercepted syscall: the last event before the racy loop. */
static void mark(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    long mine = 0, h = id;
    if (id == 1)
        for (volatile int i = 0; i < 2000000; i++)
            ; /* natively: let worker 0 finish first */
    mark();
    for (int i = 0; i < TRIES; i++) {
        if (slots > 0) {        /* check ... */
            h = h * 31 + i;     /* ... some work in the window ... */
            h ^= h >> 7;
            slots--;            /* ... act (load, decrement, store) */
            mine++;
        }
    }
    sink = h;
    taken[id] = mine;
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
    long total = taken[0] + taken[1];
    if (slots < 0 || total > SLOTS || total + slots != SLOTS) {
        fprintf(stderr, "preempt_check_act: handed out %ld slots (%ld + %ld) of %d, %d left\n",
                total, taken[0], taken[1], SLOTS, slots);
        return 1;
    }
    printf("handed out %ld slots, %d left\n", total, slots);
    return 0;
}
