/* conf_threads_join: pthread_create/join with return values, per-thread
 * results, thread-local storage, pthread_once, detached threads joined via
 * a counter, and a thread that pthread_exit()s. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

#define N 8

static unsigned long results[N];
static __thread unsigned long tls_counter;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int once_runs;

static void init_once(void)
{
    once_runs++;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_once(&once, init_once);
    unsigned long acc = 0;
    for (int i = 0; i <= 1000 * (id + 1); i++) {
        acc += (unsigned long)i * (id + 1);
        tls_counter++;
    }
    results[id] = acc;
    return (void *)(intptr_t)(tls_counter);
}

static void *exiter(void *arg)
{
    (void)arg;
    pthread_exit((void *)(intptr_t)1234);
    return NULL;
}

static pthread_mutex_t det_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t det_cond = PTHREAD_COND_INITIALIZER;
static int det_done;
static unsigned long det_sum;

static void *detached(void *arg)
{
    unsigned long v = (unsigned long)(uintptr_t)arg;
    pthread_mutex_lock(&det_lock);
    det_sum += v * v;
    det_done++;
    pthread_cond_signal(&det_cond);
    pthread_mutex_unlock(&det_lock);
    return NULL;
}

int main(void)
{
    pthread_t th[N];
    tls_counter = 5;
    for (int i = 0; i < N; i++)
        CHECK(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < N; i++) {
        void *ret;
        CHECK(pthread_join(th[i], &ret) == 0);
        printf("thread %d: result=%lu iterations=%ld\n", i, results[i], (long)(intptr_t)ret);
    }
    printf("main tls_counter still %lu\n", tls_counter);
    printf("pthread_once ran %d time(s)\n", once_runs);

    pthread_t t;
    void *ret;
    CHECK(pthread_create(&t, NULL, exiter, NULL) == 0);
    CHECK(pthread_join(t, &ret) == 0);
    printf("pthread_exit value: %ld\n", (long)(intptr_t)ret);

    printf("join self: %s\n", pthread_join(pthread_self(), NULL) == EDEADLK ? "EDEADLK" : "?");

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (unsigned long i = 1; i <= 10; i++)
        CHECK(pthread_create(&t, &attr, detached, (void *)(uintptr_t)i) == 0);
    pthread_attr_destroy(&attr);
    pthread_mutex_lock(&det_lock);
    while (det_done < 10)
        pthread_cond_wait(&det_cond, &det_lock);
    pthread_mutex_unlock(&det_lock);
    printf("detached threads: %d done, sum of squares %lu\n", det_done, det_sum);

    /* Threads created from threads. */
    CHECK(pthread_create(&t, NULL, worker, (void *)(intptr_t)3) == 0);
    CHECK(pthread_join(t, &ret) == 0);
    printf("rerun thread 3: result=%lu\n", results[3]);
    return 0;
}
