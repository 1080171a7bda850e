/* Scheduler guest: 4 threads do 2000 unlocked read-modify-write increments
 * of a shared counter each, with a sched_yield() inside the racy window
 * every 300 iterations.  The final total depends on the interleaving: under
 * one schedule it is always the same; different (chaos) schedules lose
 * different numbers of updates. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define THREADS 4
#define ITERS 2000

static volatile long counter;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        long tmp = counter;
        if (i % 300 == 0)
            sched_yield();
        counter = tmp + 1;
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("total: %ld\n", counter);
    return 0;
}
