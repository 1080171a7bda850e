/* conf_condvar: condition variables: a bounded producer/consumer queue,
 * strict ping-pong turn taking between threads, broadcast to many waiters,
 * and pthread_cond_timedwait timing out on an absolute deadline. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d)\n", __FILE__, \
                    __LINE__, #c, errno);                                     \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Bounded queue. */
#define QCAP 4
#define ITEMS 2000
#define NPROD 2
#define NCONS 3
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int queue[QCAP], qhead, qlen, producers_left = NPROD;
static unsigned long consumed_sum, consumed_count;

static void *producer(void *arg)
{
    int base = (int)(intptr_t)arg;
    for (int i = 1; i <= ITEMS; i++) {
        pthread_mutex_lock(&qm);
        while (qlen == QCAP)
            pthread_cond_wait(&not_full, &qm);
        queue[(qhead + qlen) % QCAP] = base + i;
        qlen++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&qm);
    }
    pthread_mutex_lock(&qm);
    producers_left--;
    pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&qm);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&qm);
        while (qlen == 0 && producers_left > 0)
            pthread_cond_wait(&not_empty, &qm);
        if (qlen == 0) {
            pthread_mutex_unlock(&qm);
            return NULL;
        }
        int v = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
        consumed_sum += v;
        consumed_count++;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&qm);
    }
}

/* Ping-pong: threads take strict turns appending their letter. */
#define NPP 3
#define ROUNDS 20
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pc = PTHREAD_COND_INITIALIZER;
static int turn;
static char trace[NPP * ROUNDS + 1];
static int tlen;

static void *pingpong(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_mutex_lock(&pm);
        while (turn != me)
            pthread_cond_wait(&pc, &pm);
        trace[tlen++] = 'A' + me;
        turn = (turn + 1) % NPP;
        pthread_cond_broadcast(&pc);
        pthread_mutex_unlock(&pm);
    }
    return NULL;
}

/* Broadcast gate. */
#define NGATE 6
static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc = PTHREAD_COND_INITIALIZER;
static pthread_cond_t arrived_c = PTHREAD_COND_INITIALIZER;
static int gate_open, arrived, passed;

static void *gate_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gm);
    arrived++;
    pthread_cond_signal(&arrived_c);
    while (!gate_open)
        pthread_cond_wait(&gc, &gm);
    passed++;
    pthread_mutex_unlock(&gm);
    return NULL;
}

int main(void)
{
    pthread_t prod[NPROD], cons[NCONS];
    for (int i = 0; i < NCONS; i++)
        CHECK(pthread_create(&cons[i], NULL, consumer, NULL) == 0);
    for (int i = 0; i < NPROD; i++)
        CHECK(pthread_create(&prod[i], NULL, producer, (void *)(intptr_t)(i * 100000)) == 0);
    for (int i = 0; i < NPROD; i++)
        CHECK(pthread_join(prod[i], NULL) == 0);
    for (int i = 0; i < NCONS; i++)
        CHECK(pthread_join(cons[i], NULL) == 0);
    printf("queue: consumed %lu items, sum %lu\n", consumed_count, consumed_sum);

    pthread_t pp[NPP];
    for (int i = 0; i < NPP; i++)
        CHECK(pthread_create(&pp[i], NULL, pingpong, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < NPP; i++)
        CHECK(pthread_join(pp[i], NULL) == 0);
    printf("pingpong: %s\n", trace);

    pthread_t g[NGATE];
    for (int i = 0; i < NGATE; i++)
        CHECK(pthread_create(&g[i], NULL, gate_waiter, NULL) == 0);
    pthread_mutex_lock(&gm);
    while (arrived < NGATE)
        pthread_cond_wait(&arrived_c, &gm);
    int passed_before = passed;
    gate_open = 1;
    pthread_cond_broadcast(&gc);
    pthread_mutex_unlock(&gm);
    for (int i = 0; i < NGATE; i++)
        CHECK(pthread_join(g[i], NULL) == 0);
    printf("gate: %d arrived, %d passed before open, %d passed after\n", arrived,
           passed_before, passed);

    /* Timed wait that must time out (nobody signals). */
    pthread_mutex_t tm = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t tc = PTHREAD_COND_INITIALIZER;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&tm);
    int r;
    do
        r = pthread_cond_timedwait(&tc, &tm, &ts);
    while (r == 0);
    pthread_mutex_unlock(&tm);
    printf("timedwait: %s\n", r == ETIMEDOUT ? "ETIMEDOUT" : strerror(r));
    return 0;
}
