/* disc_two_stage: a move that should be one critical section is two.
 * Two movers take jobs off `pending` under queue_lock, process them with
 * the lock released, and put them on `done` under queue_lock again.  An
 * auditor thread checks under the same lock that every job is in one of
 * the lists.  The gap between the two critical sections has no syscall
 * (uncontended unlock, a little arithmetic, uncontended lock).  An audit
 * inside the gap sees the job in neither list: prints "BUG: audit found
 * N of 40 jobs" on stderr and exits 1.  Otherwise exits 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define JOBS 40
#define AUDITS 10

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static int pending[JOBS], npending;
static int done[JOBS], ndone;
static unsigned result[JOBS];

static unsigned process(int job)
{
    unsigned h = (unsigned)job * 2654435761u + 12345u;
    for (int i = 0; i < 8; i++)
        h = h * 31 + (h >> 11);
    return h;
}

static void *mover(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        if (npending == 0) {
            pthread_mutex_unlock(&queue_lock);
            return NULL;
        }
        int job = pending[--npending];
        pthread_mutex_unlock(&queue_lock);

        result[job] = process(job);

        pthread_mutex_lock(&queue_lock);
        done[ndone++] = job;
        pthread_mutex_unlock(&queue_lock);
    }
}

static void *auditor(void *arg)
{
    (void)arg;
    for (int a = 0; a < AUDITS; a++) {
        pthread_mutex_lock(&queue_lock);
        int seen = npending + ndone;
        pthread_mutex_unlock(&queue_lock);
        if (seen != JOBS) {
            fprintf(stderr, "BUG: audit found %d of %d jobs (pending %d, done %d)\n",
                    seen, JOBS, npending, ndone);
            exit(1);
        }
    }
    return NULL;
}

int main(void)
{
    for (int i = 0; i < JOBS; i++)
        pending[npending++] = i;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, i < 2 ? mover : auditor, NULL) != 0) {
            perror("pthread_create");
            return 2;
        }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int twice = 0;
    for (int i = 0; i < ndone; i++) {
        int job = done[i];
        if (result[job] != process(job))
            twice++; /* listed twice, or never processed */
        result[job] = 0;
    }
    if (ndone != JOBS || twice) {
        fprintf(stderr, "BUG: %d of %d jobs done, %d bad\n", ndone, JOBS, twice);
        return 1;
    }
    printf("ok %d jobs\n", ndone);
    return 0;
}
