/* disc_spinlock: a spin lock that is not atomic.
 * Two threads, 200 iterations each: `while (lock) ; lock = 1;` then
 * counter = counter + 1, then lock = 0.  The test and the set are separate
 * plain (volatile) accesses, and the wait is a pure spin on memory.  A
 * thread switch between seeing lock == 0 and storing 1 lets both threads
 * into the critical section and an increment is lost: prints "BUG: counter
 * N, expected 400" on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>

#define N 200

static volatile int lock;
static volatile long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        while (lock)
            ;
        lock = 1;
        counter = counter + 1;
        lock = 0;
    }
    return NULL;
}

int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (counter != 2 * N) {
        fprintf(stderr, "BUG: counter %ld, expected %d\n", counter, 2 * N);
        return 1;
    }
    printf("ok counter=%ld\n", counter);
    return 0;
}
