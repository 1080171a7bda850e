/* Preemption guest (instruction-level PCT): publish before initialize.
 *
 * Thread A mallocs a struct, publishes the pointer in a global, does a few
 * dozen instructions of syscall-free work and only then initializes the
 * struct's value to 42.  Thread B spins (no syscalls, at most 10M times)
 * until the pointer is published and then reads the value: reading
 * anything but 42 is the bug (stderr, exit 1).  If B never sees the
 * pointer it gives up and the run passes.
 *
 * main creates A first, then B.  detrun switches threads only at
 * intercepted events and A's window (publish .. initialize) has none, so
 * under the default schedule (A runs until it ends, then B), --chaos and
 * plain --pct, B either sees a fully initialized struct or gives up.  Only
 * an instruction-level preemption of A between its two stores, with B run
 * in between, makes B read the uninitialized value.  A makes one
 * intercepted syscall (clock_gettime) right after malloc: the last event
 * before the window.  Natively B sees the pointer one cache-line transfer
 * after the publish, long after A's initializing store. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct obj {
    long value;
    long pad[7];
};

static struct obj *volatile shared;
static volatile long sink;
static volatile int bad = -1; /* -1: B never saw the pointer */

/* One intercepted syscall: the last event before the window. */
static void mark(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
}

static void *writer(void *arg)
{
    (void)arg;
    struct obj *o = malloc(sizeof *o);
    if (!o)
        abort();
    mark();
    shared = o; /* published ... */
    long h = 17;
    for (volatile int i = 0; i < 8; i++)
        h = h * 31 + i; /* a few dozen instructions, no syscall */
    sink = h;
    o->value = 42; /* ... before it is initialized */
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    struct obj *o = NULL;
    for (long i = 0; i < 10000000 && !(o = shared); i++)
        ; /* spin: no syscalls */
    if (o)
        bad = (((volatile struct obj *)o)->value != 42);
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    if (pthread_create(&a, NULL, writer, NULL) != 0 ||
        pthread_create(&b, NULL, reader, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (bad == 1) {
        fprintf(stderr, "preempt_publish: reader saw the object before it was initialized\n");
        return 1;
    }
    printf("object %s\n", bad == 0 ? "seen initialized" : "not seen");
    return 0;
}
