/* Scheduler guest: a bounded queue (capacity 4) on one mutex and two
 * condition variables; 2 producers x 50 tagged items, 2 consumers.  Every
 * consumption is logged under the mutex, so the log is the interleaving. */
#include <pthread.h>
#include <stdio.h>

#define CAP 4
#define PRODUCERS 2
#define CONSUMERS 2
#define PER_PRODUCER 50
#define TOTAL (PRODUCERS * PER_PRODUCER)

struct item {
    int producer;
    int n;
};

static struct item queue[CAP];
static int head, count, consumed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;

static void *producer(void *arg)
{
    int id = (int)(long)arg;
    for (int n = 0; n < PER_PRODUCER; n++) {
        pthread_mutex_lock(&mu);
        while (count == CAP)
            pthread_cond_wait(&not_full, &mu);
        queue[(head + count) % CAP] = (struct item){ id, n };
        count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    int k = (int)(long)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (count == 0 && consumed < TOTAL)
            pthread_cond_wait(&not_empty, &mu);
        if (count == 0) { /* consumed == TOTAL: all done */
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        struct item it = queue[head];
        head = (head + 1) % CAP;
        count--;
        consumed++;
        printf("C%d got P%d#%d\n", k, it.producer, it.n);
        if (consumed == TOTAL)
            pthread_cond_broadcast(&not_empty); /* wake the other consumer */
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&mu);
    }
}

int main(void)
{
    pthread_t p[PRODUCERS], c[CONSUMERS];
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (long i = 0; i < CONSUMERS; i++)
        pthread_create(&c[i], NULL, consumer, (void *)i);
    for (long i = 0; i < PRODUCERS; i++)
        pthread_create(&p[i], NULL, producer, (void *)i);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_join(c[i], NULL);
    printf("consumed: %d\n", consumed);
    return consumed == TOTAL ? 0 : 1;
}
