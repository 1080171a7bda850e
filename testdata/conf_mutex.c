/* conf_mutex: contended pthread mutexes (normal, recursive, errorcheck),
 * trylock, rwlock, spinlock-free atomic counters and a barrier. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define NT 4
#define ITERS 20000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t rec;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t barrier;
static unsigned long counter, rec_counter, rw_value;
static unsigned long atomic_counter;
static unsigned long per_thread[NT];
static int serial_count;

static void rec_add(int depth)
{
    pthread_mutex_lock(&rec);
    rec_counter++;
    if (depth > 0)
        rec_add(depth - 1);
    pthread_mutex_unlock(&rec);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    int r = pthread_barrier_wait(&barrier);
    if (r == PTHREAD_BARRIER_SERIAL_THREAD)
        __atomic_fetch_add(&serial_count, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        per_thread[id]++;
        pthread_mutex_unlock(&lock);
        __atomic_fetch_add(&atomic_counter, 2, __ATOMIC_RELAXED);
        if (i % 100 == 0)
            rec_add(3);
        if (i % 50 == 0) {
            pthread_rwlock_wrlock(&rw);
            rw_value += id + 1;
            pthread_rwlock_unlock(&rw);
        } else if (i % 10 == 0) {
            pthread_rwlock_rdlock(&rw);
            volatile unsigned long v = rw_value;
            (void)v;
            pthread_rwlock_unlock(&rw);
        }
    }
    pthread_barrier_wait(&barrier);
    return NULL;
}

int main(void)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    CHECK(pthread_mutex_init(&rec, &ma) == 0);
    pthread_mutexattr_destroy(&ma);
    CHECK(pthread_barrier_init(&barrier, NULL, NT) == 0);

    pthread_t th[NT];
    for (int i = 0; i < NT; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < NT; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    printf("counter=%lu (expected %d)\n", counter, NT * ITERS);
    for (int i = 0; i < NT; i++)
        printf("thread %d did %lu increments\n", i, per_thread[i]);
    printf("atomic counter=%lu\n", atomic_counter);
    printf("recursive counter=%lu\n", rec_counter);
    printf("rwlock value=%lu\n", rw_value);
    printf("barrier serial threads=%d\n", serial_count);

    /* trylock semantics. */
    pthread_mutex_lock(&lock);
    printf("trylock on held normal mutex: %s\n",
           pthread_mutex_trylock(&lock) == EBUSY ? "EBUSY" : "?");
    pthread_mutex_unlock(&lock);
    int r = pthread_mutex_trylock(&lock);
    printf("trylock on free mutex: %d\n", r);
    pthread_mutex_unlock(&lock);

    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_t ec;
    CHECK(pthread_mutex_init(&ec, &ma) == 0);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_lock(&ec);
    printf("errorcheck relock: %s\n", pthread_mutex_lock(&ec) == EDEADLK ? "EDEADLK" : "?");
    pthread_mutex_unlock(&ec);
    printf("errorcheck unlock unowned: %s\n",
           pthread_mutex_unlock(&ec) == EPERM ? "EPERM" : "?");
    pthread_mutex_destroy(&ec);
    pthread_barrier_destroy(&barrier);
    return 0;
}
