/* Race guest (hunt): lost wakeup.
 *
 * The waiter checks `ready` without holding the mutex, yields (a
 * sched_yield syscall), and only then locks and waits on the condition
 * variable - without re-checking the flag under the lock.  If the
 * signaler sets the flag and signals in between, the signal is lost
 * and the waiter would wait forever.  Here it waits with a 2 s timeout
 * (virtual time under detrun, so cheap) and the program exits 1 when it
 * times out.
 *
 * The signaler first prepares the value (a sched_yield(), some
 * syscall-free work and another sched_yield()).  Under detrun's default schedule (run a thread until
 * it blocks or yields, then round-robin in creation order) the waiter gets
 * the turn back after the signaler's yield, so it is waiting by the time
 * the signal comes and the default run passes; natively the syscall-free
 * work makes the signaler much later than the waiter.  Chaos seeds that
 * run the signaler to its signal while the waiter is in its window fail. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static volatile int ready;
static volatile int timed_out;

static void *waiter(void *arg)
{
    (void)arg;
    if (!ready) {  /* BUG: checked without the mutex */
        sched_yield(); /* syscall in the window */
        pthread_mutex_lock(&m);
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 2;
        /* BUG: no `while (!ready)` re-check under the lock. */
        int rc = pthread_cond_timedwait(&c, &m, &dl);
        if (rc == ETIMEDOUT)
            timed_out = 1;
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static void *signaler(void *arg)
{
    (void)arg;
    sched_yield(); /* prepare the value */
    for (volatile int i = 0; i < 1000000; i++)
        ;
    sched_yield(); /* natively: give the other thread a CPU back */
    pthread_mutex_lock(&m);
    ready = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(void)
{
    pthread_t w, s;
    if (pthread_create(&w, NULL, waiter, NULL) != 0 ||
        pthread_create(&s, NULL, signaler, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    pthread_join(w, NULL);
    pthread_join(s, NULL);
    if (timed_out) {
        fprintf(stderr, "race_lost_wakeup: waiter timed out after 2 s: the wakeup was lost\n");
        return 1;
    }
    puts("waiter woke up");
    return 0;
}
