/* disc_yield_barrier: NOT a bug -- a correct sense-reversing barrier.
 * Four threads, three rounds.  Arrival is an __atomic add on a shared
 * counter; the last arrival resets the counter and flips the global sense,
 * the others spin with sched_yield until the sense flips.  After each
 * barrier every thread checks that all four wrote their value for the
 * round (a failure would print "BUG: ..." and exit 1; it cannot happen).
 * Always exits 0: this tests that the scheduler makes progress under
 * yield spins. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define NT 4
#define ROUNDS 3

static int arrived;
static int sense;
static int data[ROUNDS][NT];

static void barrier(int *local_sense)
{
    *local_sense = !*local_sense;
    if (__atomic_add_fetch(&arrived, 1, __ATOMIC_ACQ_REL) == NT) {
        __atomic_store_n(&arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&sense, *local_sense, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&sense, __ATOMIC_ACQUIRE) != *local_sense)
            sched_yield();
    }
}

static void *member(void *arg)
{
    int id = (int)(long)arg;
    int local_sense = 0;
    for (int r = 0; r < ROUNDS; r++) {
        data[r][id] = (r + 1) * 10 + id;
        barrier(&local_sense);
        for (int i = 0; i < NT; i++)
            if (data[r][i] != (r + 1) * 10 + i) {
                fprintf(stderr, "BUG: thread %d passed barrier %d before thread %d arrived\n",
                        id, r, i);
                exit(1);
            }
    }
    return NULL;
}

int main(void)
{
    pthread_t t[NT];
    for (long i = 0; i < NT; i++)
        if (pthread_create(&t[i], NULL, member, (void *)i) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], NULL);
    printf("ok %d rounds\n", ROUNDS);
    return 0;
}
