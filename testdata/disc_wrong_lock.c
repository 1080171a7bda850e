/* disc_wrong_lock: one counter, two different locks.
 * The request path counts under stats_lock, the retry path under
 * retry_lock, and both add to the same `total_events`.  Each lock is only
 * ever taken by its own thread, so neither excludes the other; the load
 * and store of the increment sit inside an uncontended critical section
 * with no syscall.  A thread switch between them loses an update: prints
 * "BUG: total_events N, expected 400" on stderr and exits 1.  Otherwise 0. */
#include <pthread.h>
#include <stdio.h>

#define N 200

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t retry_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile long total_events;
static long requests, retries;

static void *request_path(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&stats_lock);
        requests++;
        total_events++;
        pthread_mutex_unlock(&stats_lock);
    }
    return NULL;
}

static void *retry_path(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&retry_lock);
        retries++;
        total_events++;
        pthread_mutex_unlock(&retry_lock);
    }
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    if (pthread_create(&a, NULL, request_path, NULL) != 0 ||
        pthread_create(&b, NULL, retry_path, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    if (total_events != 2 * N) {
        fprintf(stderr, "BUG: total_events %ld, expected %d (requests %ld, retries %ld)\n",
                total_events, 2 * N, requests, retries);
        return 1;
    }
    printf("ok total_events=%ld\n", total_events);
    return 0;
}
