/* disc_lost_wakeup: lost wakeup from an unlocked fast-path check.
 * main starts a loader thread, then waits for its result: it checks
 * `ready` without the mutex and, if not ready, locks and waits on the
 * condvar once -- without re-checking `ready` under the lock.  If the
 * loader sets `ready` and signals in the window between main's check and
 * its wait (only an uncontended pthread_mutex_lock, no syscall), the
 * signal is lost.  main waits at most 2 s (CLOCK_REALTIME), then prints
 * "BUG: lost wakeup ..." on stderr and exits 1.  Otherwise exits 0. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t loaded = PTHREAD_COND_INITIALIZER;
static int ready;
static unsigned value;

static void *loader(void *arg)
{
    (void)arg;
    unsigned h = 5381;
    for (int i = 0; i < 64; i++)
        h = h * 33 + (unsigned)i;
    pthread_mutex_lock(&mu);
    value = h;
    ready = 1;
    pthread_cond_signal(&loaded);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, loader, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    if (!ready) {
        pthread_mutex_lock(&mu);
        int rc = pthread_cond_timedwait(&loaded, &mu, &deadline);
        pthread_mutex_unlock(&mu);
        if (rc == ETIMEDOUT) {
            fprintf(stderr, "BUG: lost wakeup: no signal from the loader in 2 s (ready=%d)\n",
                    ready);
            return 1;
        }
    }
    pthread_join(t, NULL);
    printf("ok value=%u\n", value);
    return 0;
}
